//! `@Filter` with a prepared predicate.
//!
//! The general loop evaluates the predicate once per item, charging as it goes. Here the
//! predicate is first [prepared](Predicate::prepare) when it can be; each item then runs
//! through the prepared form, which charges nothing and says what the general evaluation
//! would charge for it, and the caller [replays](ui_core::Budget::replay) the item's
//! charges as one lump. Wherever the prepared form cannot vouch for the result (the general
//! evaluation could fail: a failure, a non-boolean result, a lump that does not fit) the
//! caller evaluates the item the general way instead, from its iteration on: it fails where
//! and as it always did, with the same counters.

use std::borrow::Cow;
use std::cell::Cell;

use ui_core::text::utf16_len;
use ui_core::{UiLimits, Value, array_index, is_forbidden_key};

use crate::expr::eval::{Scope, count, field_name, operate, own_field, unary};
use crate::expr::{BinaryOp, Expr, MAX_RECURSION, UnaryOp, invalid_value};

/// Lists shorter than this are filtered the general way: preparing would cost more than
/// it saves.
const PREPARE_MIN_ITEMS: usize = 2;

/// A `@Filter` predicate prepared for all the items of one call.
///
/// What does not change from item to item is done once: references to anything but the
/// local are looked up in the enclosing scope (which stays the same during the call),
/// constant field names are checked and converted, the fixed charges of every node are
/// summed, and the static checks (nesting depth, literal string lengths, `safeKey`) are
/// made. Only the shapes whose charges are simple are prepared: literals of scalars,
/// references, member access, unary and binary operators. A helper call, an array or
/// record literal or an unknown node anywhere (within the depth limit) leaves the
/// predicate to the general evaluation.
pub(crate) struct Predicate<'a> {
    /// What the node charges whatever its operands give: `depth(d)` and 1 step, and for a
    /// literal its copy (`depth(0)` and `string(s)`).
    charge: u64,
    kind: Kind<'a>,
}

enum Kind<'a> {
    /// The `@Filter` local: the item.
    Item,
    /// The same value for every item: a scalar literal or a variable of the enclosing
    /// scope.
    Fixed(&'a Value),
    /// A node whose evaluation fails whatever the item: deeper than the limits, a
    /// forbidden or unknown name, a literal string over `stringLength`, a constant key
    /// that is not a field name. The general evaluation says how.
    Fails,
    /// Own-field access with a constant key, checked by `safeKey`.
    Field {
        object: Box<Predicate<'a>>,
        /// What the key node charges.
        key_charge: u64,
        name: Cow<'a, str>,
        /// The canonical array index `name` denotes, if any.
        index: Option<u32>,
        /// Where `name` was in the last record read: records of one list tend to share
        /// their key order.
        slot: Cell<usize>,
    },
    /// Own-field access with a computed key.
    Member {
        object: Box<Predicate<'a>>,
        key: Box<Predicate<'a>>,
    },
    Unary {
        op: UnaryOp,
        value: Box<Predicate<'a>>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Predicate<'a>>,
        right: Box<Predicate<'a>>,
    },
}

impl<'a> Predicate<'a> {
    /// The predicate of a `@Filter` over `items`, prepared when the list is long enough
    /// for preparing to pay and the predicate's shape is one that is prepared.
    #[inline]
    pub(crate) fn prepare_for(
        items: &[Value],
        expr: &'a Expr,
        local: &str,
        scope: &'a Scope<'a>,
        limits: &UiLimits,
        d: u64,
    ) -> Option<Predicate<'a>> {
        if items.len() < PREPARE_MIN_ITEMS {
            return None;
        }
        Predicate::prepare(expr, local, scope, limits, d)
    }

    /// Prepares `expr`, evaluated at depth `d` in `scope` extended with `local`; `None`
    /// when its shape is not one that is prepared.
    fn prepare(
        expr: &'a Expr,
        local: &str,
        scope: &'a Scope<'a>,
        limits: &UiLimits,
        d: u64,
    ) -> Option<Predicate<'a>> {
        // `depth(d)` and 1 step.
        let node = |kind| Some(Predicate { charge: 2, kind });
        if d > limits.depth() || d > MAX_RECURSION {
            return node(Kind::Fails);
        }
        let prepare = |expr| Predicate::prepare(expr, local, scope, limits, d + 1).map(Box::new);
        match expr {
            Expr::Literal(value @ (Value::Null | Value::Bool(_) | Value::Number(_))) => {
                Some(Predicate {
                    charge: 3,
                    kind: Kind::Fixed(value),
                })
            }
            Expr::Literal(value @ Value::String(s)) => {
                let units = utf16_len(s) as u64;
                Some(Predicate {
                    charge: 3 + units,
                    kind: if units > limits.string_length() {
                        Kind::Fails
                    } else {
                        Kind::Fixed(value)
                    },
                })
            }
            Expr::Reference(name) if is_forbidden_key(name) => node(Kind::Fails),
            Expr::Reference(name) if name == local => node(Kind::Item),
            Expr::Reference(name) => node(scope.lookup(name).map_or(Kind::Fails, Kind::Fixed)),
            Expr::Member { object, key } => {
                let object = prepare(object)?;
                let key = prepare(key)?;
                let Kind::Fixed(constant) = key.kind else {
                    return node(Kind::Member { object, key });
                };
                let name = match field_name(constant) {
                    Ok(name) if !is_forbidden_key(&name) => name,
                    _ => return node(Kind::Fails),
                };
                node(Kind::Field {
                    object,
                    key_charge: key.charge,
                    index: array_index(&name),
                    name,
                    slot: Cell::new(0),
                })
            }
            Expr::Unary { op, value } => node(Kind::Unary {
                op: *op,
                value: prepare(value)?,
            }),
            Expr::Binary { op, left, right } => node(Kind::Binary {
                op: *op,
                left: prepare(left)?,
                right: prepare(right)?,
            }),
            Expr::Literal(_)
            | Expr::Array(_)
            | Expr::Object(_)
            | Expr::Call { .. }
            | Expr::Unknown(_) => None,
        }
    }

    /// [`Predicate::run`] for the whole predicate: its boolean, `None` also for any other
    /// value. The usual comparison is done in place.
    #[inline]
    pub(crate) fn test(&self, item: &Value, steps: &mut u64, string_length: u64) -> Option<bool> {
        if let Kind::Binary {
            op: op @ (BinaryOp::Eq | BinaryOp::StrictEq | BinaryOp::Ne | BinaryOp::StrictNe),
            left,
            right,
        } = &self.kind
        {
            *steps += self.charge;
            let left = left.operand(item, steps, string_length)?;
            let right = right.operand(item, steps, string_length)?;
            let same = left.identical(&right);
            return Some(same == matches!(op, BinaryOp::Eq | BinaryOp::StrictEq));
        }
        match self.run(item, steps, string_length)?.as_ref() {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// [`Predicate::run`] with the leaves done in place (most operands are the item or a
    /// fixed value).
    #[inline(always)]
    fn operand<'v>(
        &'v self,
        item: &'v Value,
        steps: &mut u64,
        string_length: u64,
    ) -> Option<Cow<'v, Value>> {
        match &self.kind {
            Kind::Item => {
                *steps += self.charge;
                Some(Cow::Borrowed(item))
            }
            Kind::Fixed(value) => {
                *steps += self.charge;
                Some(Cow::Borrowed(value))
            }
            _ => self.run(item, steps, string_length),
        }
    }

    /// Evaluates the predicate with `item` as the local, adding to `steps` what the
    /// general evaluation charges; `None` wherever that evaluation fails (the caller then
    /// runs it to fail as it does).
    fn run<'v>(
        &'v self,
        item: &'v Value,
        steps: &mut u64,
        string_length: u64,
    ) -> Option<Cow<'v, Value>> {
        *steps += self.charge;
        match &self.kind {
            Kind::Item => Some(Cow::Borrowed(item)),
            Kind::Fixed(value) => Some(Cow::Borrowed(value)),
            Kind::Fails => None,
            Kind::Field {
                object,
                key_charge,
                name,
                index,
                slot,
            } => {
                // Only arrays and records have fields, and computed values are scalars.
                let Cow::Borrowed(object) = object.operand(item, steps, string_length)? else {
                    return None;
                };
                *steps += key_charge;
                match object {
                    Value::Record(record) => {
                        if let Some((key, value)) = record.get_index(slot.get())
                            && key == name
                        {
                            return Some(Cow::Borrowed(value));
                        }
                        let (at, _, value) = record.get_full(name.as_ref())?;
                        slot.set(at);
                        Some(Cow::Borrowed(value))
                    }
                    Value::Array(items) if name == "length" => Some(Cow::Owned(count(items.len()))),
                    Value::Array(items) => {
                        index.and_then(|i| items.get(i as usize)).map(Cow::Borrowed)
                    }
                    _ => None,
                }
            }
            Kind::Member { object, key } => {
                let object = object.operand(item, steps, string_length)?;
                let key = key.operand(item, steps, string_length)?;
                let name = field_name(&key).ok()?;
                if is_forbidden_key(&name) {
                    return None;
                }
                match object {
                    Cow::Borrowed(object) => own_field(object, &name).ok(),
                    Cow::Owned(_) => None,
                }
            }
            Kind::Unary { op, value } => {
                let value = value.operand(item, steps, string_length)?;
                unary(*op, &value).ok().map(Cow::Owned)
            }
            Kind::Binary { op, left, right } => {
                Self::binary(*op, left, right, item, steps, string_length)
            }
        }
    }

    /// [`Predicate::run`] of a binary node: `&&` and `||` return an operand, equality
    /// compares identity, the rest is the general operator.
    #[inline(always)]
    fn binary<'v>(
        op: BinaryOp,
        left: &'v Predicate<'a>,
        right: &'v Predicate<'a>,
        item: &'v Value,
        steps: &mut u64,
        string_length: u64,
    ) -> Option<Cow<'v, Value>> {
        let left = left.operand(item, steps, string_length)?;
        match op {
            BinaryOp::And if !left.is_truthy() => return Some(left),
            BinaryOp::Or if left.is_truthy() => return Some(left),
            BinaryOp::And | BinaryOp::Or => {
                return right.operand(item, steps, string_length);
            }
            _ => {}
        }
        let right = right.operand(item, steps, string_length)?;
        // The usual comparison, without `operate`'s dispatch.
        match op {
            BinaryOp::Eq | BinaryOp::StrictEq => {
                return Some(Cow::Owned(Value::Bool(left.identical(&right))));
            }
            BinaryOp::Ne | BinaryOp::StrictNe => {
                return Some(Cow::Owned(Value::Bool(!left.identical(&right))));
            }
            _ => {}
        }
        operate(op, &left, &right, |units| {
            // `string(result)`: the steps, then the length check.
            *steps += units;
            if units > string_length {
                Err(invalid_value(""))
            } else {
                Ok(())
            }
        })
        .ok()
        .map(Cow::Owned)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use ui_core::{Budget, FrozenClock, Record, UiLimits, Value};

    use crate::expr::eval::evaluate_with;
    use crate::expr::parse_expression;
    use crate::speedups::Paths;

    static CLOCK: FrozenClock = FrozenClock(0.0);

    /// Predicates over the local `x` (and `y` of an inner `@Filter`): mostly booleans
    /// made of the prepared shapes, with failures of every kind, and a few shapes that are
    /// left to the general evaluation.
    fn predicate() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            6 => Just("x.a"),
            2 => Just("x"),
            1 => Just("x.c"),
            1 => Just("x[\"a\"]"),
            1 => Just("x[0]"),
            1 => Just("x[$k]"),
            4 => Just("$s"),
            1 => Just("$rec"),
            1 => Just("$rec.a"),
            1 => Just("$missing"),
            1 => Just("y"),
            1 => Just("y.a"),
            1 => Just("null"),
            3 => Just("\"ab\""),
            1 => Just("\"\""),
            1 => Just("\"abcdefgh😀\""),
            1 => Just("(x.a + \"!\")"),
            1 => Just("(x.a + x.b)"),
            1 => Just("[x][0]"),
        ];
        let number = prop_oneof![
            6 => Just("x.b"),
            2 => Just("$n"),
            2 => Just("1"),
            1 => Just("2.5"),
            1 => Just("0"),
            1 => Just("x.length"),
            1 => Just("$rec.b"),
            1 => Just("@Count(x.a)"),
            1 => Just("(x.b * 2)"),
            1 => Just("(x.b % $n)"),
            1 => Just("(1 / x.b)"),
            1 => Just("-x.b"),
            1 => Just("+x.a"),
        ];
        let leaf = prop_oneof![
            4 => (value.clone(), prop_oneof![Just("=="), Just("!="), Just("===")], value.clone())
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            3 => (number.clone(), prop_oneof![Just("<"), Just(">="), Just("=="), Just(">")], number)
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            1 => value.clone().prop_map(|v| format!("!{v}")),
            1 => value.prop_map(str::to_owned),
            1 => prop_oneof![Just("true"), Just("false"), Just("x.d"), Just("!x.d")]
                .prop_map(str::to_owned),
        ];
        leaf.prop_recursive(3, 12, 2, |inner| {
            prop_oneof![
                4 => (inner.clone(), prop_oneof![Just("&&"), Just("||")], inner.clone())
                    .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
                1 => inner.clone().prop_map(|e| format!("!{e}")),
                1 => (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l} == {r})")),
                1 => inner.prop_map(|e| format!("(@Count(@Filter($rows, y, {e})) > 0)")),
            ]
        })
    }

    /// Items: records sharing or not their key order, scalars, lists, and `$rec` itself.
    fn item(rec: Value) -> impl Strategy<Value = Value> {
        let scalar = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2..4i32).prop_map(Value::from),
            prop_oneof![Just("ab"), Just(""), Just("x😀")].prop_map(Value::from),
        ];
        let key = prop_oneof![Just("a"), Just("b"), Just("1"), Just("c"), Just("d")];
        let text = prop_oneof![Just("ab"), Just("cd"), Just(""), Just("x😀")];
        prop_oneof![
            // The usual shape: the same keys in the same order.
            8 => (text, -2..4i32, any::<bool>()).prop_map(|(a, b, d)| {
                let mut record = Record::default();
                record.insert("a".into(), Value::from(a));
                record.insert("b".into(), Value::from(b));
                record.insert("d".into(), Value::Bool(d));
                Value::record(record)
            }),
            2 => prop::collection::vec((key, scalar.clone()), 0..4).prop_map(|entries| {
                Value::record(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
            2 => scalar.clone(),
            1 => prop::collection::vec(scalar, 0..3).prop_map(Value::array),
            1 => Just(rec),
        ]
    }

    fn variables() -> impl Strategy<Value = Record> {
        let rec = Value::from_json_str(r#"{"a": "ab", "b": 1, "d": true}"#).unwrap();
        (
            prop::collection::vec(item(rec.clone()), 0..9),
            prop_oneof![Just("a"), Just("1"), Just("length"), Just("prototype")],
        )
            .prop_map(move |(rows, k)| {
                let mut vars = Record::default();
                vars.insert("$rows".into(), Value::array(rows));
                vars.insert("$s".into(), Value::from("ab"));
                vars.insert("$n".into(), Value::from(1));
                vars.insert("$rec".into(), rec.clone());
                vars.insert("$k".into(), Value::from(k));
                vars
            })
    }

    /// The result of evaluating `source` one way, and the counters after it.
    fn run(
        source: &str,
        vars: &Record,
        limits: UiLimits,
        general: bool,
    ) -> (Result<Value, ui_core::Failure>, (u64, u64, u64)) {
        let mut parse_budget = Budget::new(UiLimits::DEFAULT, &CLOCK);
        let expr = parse_expression(source, &mut parse_budget).unwrap();
        let mut budget = Budget::new(limits, &CLOCK);
        let paths = if general { Paths::General } else { Paths::Fast };
        let result = evaluate_with(&expr, vars, &mut budget, paths);
        (
            result,
            (budget.steps(), budget.iterations(), budget.nodes()),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// A prepared `@Filter` gives what the general evaluation gives: the same value
        /// (kept items identical to the listed ones), or the same failure, and the same
        /// counters afterwards, under limits tight enough to fail anywhere on the way.
        #[test]
        fn prepared_filters_evaluate_as_the_general_path(
            predicate in predicate(),
            wrap in 0..3u8,
            vars in variables(),
            steps in prop_oneof![1 => 1u64..600, 2 => Just(20_000)],
            iterations in prop_oneof![1 => 1u64..60, 2 => Just(2_000)],
            depth in prop_oneof![1 => 1u64..10, 2 => Just(32)],
            string_length in prop_oneof![1 => 1u64..12, 2 => Just(100)],
        ) {
            let filter = format!("@Filter($rows, x, {predicate})");
            let source = match wrap {
                0 => filter,
                1 => format!("@Count({filter})"),
                _ => format!("@Filter($rows, z, @Count({filter}) > 1)"),
            };
            let limits = UiLimits::DEFAULT
                .with("steps", steps).unwrap()
                .with("iterations", iterations).unwrap()
                .with("depth", depth).unwrap()
                .with("stringLength", string_length).unwrap();
            let (fast, fast_counters) = run(&source, &vars, limits, false);
            let (general, general_counters) = run(&source, &vars, limits, true);
            match (&fast, &general) {
                (Ok(a), Ok(b)) => {
                    prop_assert_eq!(a, b);
                    if let (Value::Array(a), Value::Array(b)) = (a, b) {
                        for (a, b) in a.iter().zip(b.iter()) {
                            prop_assert!(a.identical(b) || a.is_scalar());
                        }
                    }
                }
                (Err(a), Err(b)) => {
                    prop_assert_eq!(a.code, b.code);
                    prop_assert_eq!(&a.message, &b.message);
                }
                _ => prop_assert!(false, "{source}: {fast:?} but {general:?}"),
            }
            prop_assert_eq!(fast_counters, general_counters);
        }
    }
}
