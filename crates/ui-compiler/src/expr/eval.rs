//! The evaluator of the expression language (`language.md` §10.5–§10.9).

use std::borrow::Cow;
use std::sync::Arc;

use ui_core::limits::MAX_ROUND_DIGITS;
use ui_core::text::utf16_len;
use ui_core::{Budget, Code, Failure, Number, Record, Value, array_index, number_text};

use super::ast::{BinaryOp, Expr, UnaryOp};
use super::{guard_depth, invalid_expression, invalid_value, safe_key};
use crate::speedups::Paths;
#[cfg(feature = "speedups")]
use crate::speedups::filter::Predicate;

/// Evaluates `expr` against the variables `vars` (`evaluateUiExpression`).
///
/// First the boundary copy (`copyUiValue`, §10.8), charged in full: `vars` as one record
/// value (`depth(0)` for the record, one iteration per key, `depth(1)` per variable, and so
/// on), with the forbidden-key checks. Values are immutable, so the copy shares their
/// allocations instead of building new ones; identity (`===`) of arrays and records is
/// therefore that of the allocations in `vars`. Variables parsed from JSON, compiled
/// defaults and every [`UiState`](crate::UiState) keep distinct allocations per path, which
/// gives JavaScript's results; a caller that puts one allocation under two names sees them
/// identical. Then [`evaluate_in_scope`] runs.
///
/// ```
/// use ui_compiler::expr::{evaluate, parse_expression};
/// use ui_core::{Budget, FrozenClock, UiLimits, Value};
///
/// let clock = FrozenClock(0.0);
/// let mut budget = Budget::new(UiLimits::DEFAULT, &clock);
/// let expr = parse_expression("@Join($names, \" & \") + \"!\"", &mut budget).unwrap();
/// let vars = Value::from_json_str(r#"{"$names": ["Ann", "Bo"]}"#).unwrap();
/// let value = evaluate(&expr, vars.as_record().unwrap(), &mut budget).unwrap();
/// assert_eq!(value, Value::from("Ann & Bo!"));
/// ```
pub fn evaluate(expr: &Expr, vars: &Record, budget: &mut Budget<'_>) -> Result<Value, Failure> {
    evaluate_with(expr, vars, budget, Paths::DEFAULT)
}

/// [`evaluate`] through the given paths.
#[inline]
pub(crate) fn evaluate_with(
    expr: &Expr,
    vars: &Record,
    budget: &mut Budget<'_>,
    paths: Paths,
) -> Result<Value, Failure> {
    // The boundary copy is charged in full, but values are immutable, so the scope shares
    // the variables' allocations.
    match expr {
        // Most constant props.
        Expr::Literal(value) if value.is_scalar() => {
            charge_scalar_literal(value, vars, budget)?;
            Ok(value.clone())
        }
        _ => {
            budget.charge_record(vars)?;
            eval(expr, &Scope::Root(vars, paths), budget, 0)
        }
    }
}

/// [`evaluate`] of an expression the caller gives away: a scalar literal's value is moved
/// out rather than copied.
#[inline]
pub(crate) fn evaluate_owned(
    expr: Expr,
    vars: &Record,
    budget: &mut Budget<'_>,
) -> Result<Value, Failure> {
    match expr {
        Expr::Literal(value) if value.is_scalar() => {
            charge_scalar_literal(&value, vars, budget)?;
            Ok(value)
        }
        expr => evaluate(&expr, vars, budget),
    }
}

/// What [`evaluate`] charges for the scalar literal `value`: the boundary copy of `vars`
/// (for no variables, the empty record's `depth(0)`: one step), then what `eval` charges at
/// depth 0, `depth(0)` and a step, and the copy's `depth(0)` and, for a string,
/// `string(s)`. No depth check can fail at depth 0, so the steps before `string` are one
/// lump.
#[inline]
fn charge_scalar_literal(
    value: &Value,
    vars: &Record,
    budget: &mut Budget<'_>,
) -> Result<(), Failure> {
    let boundary = match vars.is_empty() {
        true => 1,
        false => {
            budget.charge_record(vars)?;
            0
        }
    };
    budget.step(boundary + 3)?;
    if let Value::String(s) = value {
        budget.string(s)?;
    }
    Ok(())
}

/// Evaluates `expr` against `scope` without the boundary copy: the caller has already copied
/// the variables into the interpreter (see [`evaluate`]).
///
/// Every evaluated node charges `depth(d)` and 1 step (`d` = 0 at the root, +1 per child
/// level); literals are copied (`copyUiValue`); array items and record entries charge 1
/// iteration each; concatenations charge `string(result)`; helpers charge as §10.9 says.
pub fn evaluate_in_scope(
    expr: &Expr,
    scope: &Record,
    budget: &mut Budget<'_>,
) -> Result<Value, Failure> {
    eval(expr, &Scope::Root(scope, Paths::DEFAULT), budget, 0)
}

/// The variables visible to an expression: the copied scope, extended by `@Filter` locals.
/// The root also says which paths the evaluation takes.
#[derive(Clone, Copy)]
pub(crate) enum Scope<'a> {
    Root(&'a Record, Paths),
    Local {
        name: &'a str,
        value: &'a Value,
        parent: &'a Scope<'a>,
    },
}

impl Scope<'_> {
    /// The paths the evaluation takes.
    #[cfg(feature = "speedups")]
    fn paths(&self) -> Paths {
        let mut scope = self;
        loop {
            match scope {
                Scope::Root(_, paths) => return *paths,
                Scope::Local { parent, .. } => scope = parent,
            }
        }
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<&Value> {
        let mut scope = self;
        loop {
            match scope {
                Scope::Root(record, _) => return record.get(name),
                Scope::Local {
                    name: local,
                    value,
                    parent,
                } => {
                    if *local == name {
                        return Some(value);
                    }
                    scope = parent;
                }
            }
        }
    }
}

fn unknown_field(name: &str) -> Failure {
    Failure::new(Code::RefusedAccess, format!("Unknown own field {name}."))
}

pub(crate) fn count(n: usize) -> Value {
    Value::Number(Number::new(n as f64).unwrap_or_default())
}

fn finite(x: f64, message: &'static str) -> Result<Value, Failure> {
    Value::number(x).ok_or_else(|| invalid_value(message))
}

fn numeric(value: &Value) -> Result<f64, Failure> {
    value
        .as_f64()
        .ok_or_else(|| invalid_value("Expected a number."))
}

fn list(value: Value) -> Result<Arc<Vec<Value>>, Failure> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(invalid_value("Expected a list.")),
    }
}

fn scalar_text(value: &Value) -> Result<String, Failure> {
    value
        .scalar_text()
        .ok_or_else(|| invalid_value("Expected a scalar."))
}

/// Own-field access (§10.6): string or number keys only, `safeKey`, then an own key of a
/// record, or a canonical index or `length` of an array.
fn own_value(value: &Value, key: &Value) -> Result<Value, Failure> {
    let name = field_name(key)?;
    safe_key(&name)?;
    own_field(value, &name).map(Cow::into_owned)
}

/// The field name a key denotes: a string as it is, a number as its JavaScript text;
/// anything else is refused.
pub(crate) fn field_name(key: &Value) -> Result<Cow<'_, str>, Failure> {
    match key {
        Value::String(s) => Ok(Cow::Borrowed(s)),
        Value::Number(n) => Ok(Cow::Owned(number_text(n.get()))),
        _ => Err(Failure::new(
            Code::RefusedAccess,
            "Expected a field name or an index.",
        )),
    }
}

/// The own field `name` (already checked by `safeKey`) of a record or an array, borrowed
/// where it is stored.
pub(crate) fn own_field<'v>(value: &'v Value, name: &str) -> Result<Cow<'v, Value>, Failure> {
    let found = match value {
        Value::Record(record) => record.get(name).map(Cow::Borrowed),
        Value::Array(items) if name == "length" => Some(Cow::Owned(count(items.len()))),
        Value::Array(items) => array_index(name)
            .and_then(|i| items.get(i as usize))
            .map(Cow::Borrowed),
        _ => return Err(invalid_value("Expected a record or a list.")),
    };
    found.ok_or_else(|| unknown_field(name))
}

/// JavaScript's `Math.round`: the nearest integer, halves toward +∞, `-0` kept for
/// results in [-0.5, 0].
fn js_round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let floor = x.floor();
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    if rounded == 0.0 && x.is_sign_negative() {
        -0.0
    } else {
        rounded
    }
}

const POWERS_OF_TEN: [f64; 7] = [1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0, 1_000_000.0];

fn eval(
    expr: &Expr,
    scope: &Scope<'_>,
    budget: &mut Budget<'_>,
    depth: u64,
) -> Result<Value, Failure> {
    guard_depth(budget, depth)?;
    budget.step(1)?;
    let d = depth + 1;
    match expr {
        // A scalar's copy is `depth(0)` and, for a string, `string(s)` (what
        // `copy_value` charges for it, without its look for a memoised tally).
        Expr::Literal(value @ (Value::Null | Value::Bool(_) | Value::Number(_))) => {
            budget.depth(0)?;
            Ok(value.clone())
        }
        Expr::Literal(value @ Value::String(s)) => {
            budget.depth(0)?;
            budget.string(s)?;
            Ok(value.clone())
        }
        Expr::Literal(value) => budget.copy_value(value),
        Expr::Reference(name) => {
            safe_key(name)?;
            scope
                .lookup(name)
                .cloned()
                .ok_or_else(|| unknown_field(name))
        }
        Expr::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                budget.iteration(1)?;
                out.push(eval(item, scope, budget, d)?);
            }
            Ok(Value::array(out))
        }
        Expr::Object(entries) => {
            let mut out = ui_core::record_with_capacity(entries.len());
            for (key, value) in entries {
                budget.iteration(1)?;
                safe_key(key)?;
                let value = eval(value, scope, budget, d)?;
                out.insert(key.clone(), value);
            }
            Ok(Value::record(out))
        }
        Expr::Member { object, key } => {
            let object = eval(object, scope, budget, d)?;
            let key = eval(key, scope, budget, d)?;
            own_value(&object, &key)
        }
        Expr::Unary { op, value } => {
            let value = eval(value, scope, budget, d)?;
            unary(*op, &value)
        }
        Expr::Binary { op, left, right } => binary(*op, left, right, scope, budget, d),
        Expr::Call { name, args } => call(name, args, scope, budget, d),
        Expr::Unknown(_) => Err(invalid_expression("Unknown expression.")),
    }
}

fn binary(
    op: BinaryOp,
    left: &Expr,
    right: &Expr,
    scope: &Scope<'_>,
    budget: &mut Budget<'_>,
    d: u64,
) -> Result<Value, Failure> {
    let left = eval(left, scope, budget, d)?;
    match op {
        BinaryOp::And if !left.is_truthy() => return Ok(left),
        BinaryOp::Or if left.is_truthy() => return Ok(left),
        BinaryOp::And | BinaryOp::Or => return eval(right, scope, budget, d),
        _ => {}
    }
    let right = eval(right, scope, budget, d)?;
    operate(op, &left, &right, |units| budget.string_units(units))
}

/// A prefix operator on its evaluated operand.
pub(crate) fn unary(op: UnaryOp, value: &Value) -> Result<Value, Failure> {
    match op {
        UnaryOp::Not => Ok(Value::Bool(!value.is_truthy())),
        UnaryOp::Neg => finite(-numeric(value)?, "The result must be finite."),
        UnaryOp::Plus => finite(numeric(value)?, "The result must be finite."),
    }
}

/// An infix operator on its evaluated operands (for `&&` and `||`, only once the left
/// one did not decide: the right one). `charge` pays for a concatenation's result
/// (`string(result)`) before it is built.
pub(crate) fn operate(
    op: BinaryOp,
    l: &Value,
    r: &Value,
    charge: impl FnOnce(u64) -> Result<(), Failure>,
) -> Result<Value, Failure> {
    let result = match op {
        BinaryOp::Add if matches!(l, Value::String(_)) || matches!(r, Value::String(_)) => {
            let l = scalar_text(l)?;
            let r = scalar_text(r)?;
            charge((utf16_len(&l) + utf16_len(&r)) as u64)?;
            return Ok(Value::from(l + &r));
        }
        BinaryOp::Add => numeric(l)? + numeric(r)?,
        BinaryOp::Sub => numeric(l)? - numeric(r)?,
        BinaryOp::Mul => numeric(l)? * numeric(r)?,
        BinaryOp::Div => numeric(l)? / numeric(r)?,
        // Rust's `%` on floats is C's `fmod`: the sign of the dividend, as in JavaScript.
        BinaryOp::Rem => numeric(l)? % numeric(r)?,
        BinaryOp::Eq | BinaryOp::StrictEq => return Ok(Value::Bool(l.identical(r))),
        BinaryOp::Ne | BinaryOp::StrictNe => return Ok(Value::Bool(!l.identical(r))),
        BinaryOp::Lt => return Ok(Value::Bool(numeric(l)? < numeric(r)?)),
        BinaryOp::Le => return Ok(Value::Bool(numeric(l)? <= numeric(r)?)),
        BinaryOp::Gt => return Ok(Value::Bool(numeric(l)? > numeric(r)?)),
        BinaryOp::Ge => return Ok(Value::Bool(numeric(l)? >= numeric(r)?)),
        BinaryOp::And | BinaryOp::Or => return Ok(r.clone()),
    };
    finite(result, "The result must be finite.")
}

fn call(
    name: &str,
    args: &[Expr],
    scope: &Scope<'_>,
    budget: &mut Budget<'_>,
    d: u64,
) -> Result<Value, Failure> {
    let arity = |minimum: usize, maximum: usize| {
        if args.len() < minimum || args.len() > maximum {
            Err(invalid_expression(format!(
                "Invalid arguments for @{name}."
            )))
        } else {
            Ok(())
        }
    };
    match name {
        "Count" => {
            arity(1, 1)?;
            let value = eval(&args[0], scope, budget, d)?;
            count_of(&value, budget)
        }
        "Filter" => {
            arity(3, 3)?;
            let items = list(eval(&args[0], scope, budget, d)?)?;
            let local = match &args[1] {
                Expr::Reference(local) if !local.starts_with(['$', '@']) => local,
                _ => {
                    return Err(invalid_expression(
                        "@Filter needs a local name as its second argument.",
                    ));
                }
            };
            safe_key(local)?;
            filter(&items, local, &args[2], scope, budget, d)
        }
        "Sum" => {
            arity(1, 2)?;
            let items = list(eval(&args[0], scope, budget, d)?)?;
            let key = match args.get(1) {
                Some(key) => eval(key, scope, budget, d)?,
                None => Value::Null,
            };
            sum(&items, &key, budget)
        }
        "Join" => {
            arity(1, 2)?;
            let items = list(eval(&args[0], scope, budget, d)?)?;
            let separator: Cow<'_, str> = match args.get(1) {
                Some(sep) => Cow::Owned(scalar_text(&eval(sep, scope, budget, d)?)?),
                None => Cow::Borrowed(", "),
            };
            join(&items, &separator, budget)
        }
        "Round" => {
            arity(1, 2)?;
            let value = numeric(&eval(&args[0], scope, budget, d)?)?;
            let digits = match args.get(1) {
                Some(digits) => numeric(&eval(digits, scope, budget, d)?)?,
                None => 0.0,
            };
            round(value, digits)
        }
        "Query" => Err(Failure::new(
            Code::QueryOnly,
            "@Query is only allowed in a read-only variable declaration.",
        )),
        "Set" | "Reset" => Err(Failure::new(
            Code::ActionOnly,
            "State actions are not value expressions.",
        )),
        _ => Err(Failure::new(
            Code::RefusedCall,
            format!("Unknown helper @{name}."),
        )),
    }
}

/// `@Count(value)`: the UTF-16 length of a string (charged as its units) or the length of
/// a list.
fn count_of(value: &Value, budget: &mut Budget<'_>) -> Result<Value, Failure> {
    match value {
        Value::String(s) => {
            let units = utf16_len(s);
            budget.string_units(units as u64)?;
            Ok(count(units))
        }
        Value::Array(items) => Ok(count(items.len())),
        _ => Err(invalid_value("Expected a list.")),
    }
}

/// `@Round(value, digits)`: JavaScript's `Math.round` at `digits` decimals (an integer from
/// zero to six).
fn round(value: f64, digits: f64) -> Result<Value, Failure> {
    if digits.fract() != 0.0 || !(0.0..=f64::from(MAX_ROUND_DIGITS)).contains(&digits) {
        return Err(invalid_value(
            "Precision must be an integer from zero to six.",
        ));
    }
    let factor = POWERS_OF_TEN.get(digits as usize).copied().unwrap_or(1.0);
    finite(
        js_round(value * factor) / factor,
        "The rounded value must be finite.",
    )
}

/// `@Sum`'s loop over the evaluated `items`, adding each item or, when `key` is not null,
/// each item's own field `key`; one iteration per item.
fn sum(items: &[Value], key: &Value, budget: &mut Budget<'_>) -> Result<Value, Failure> {
    // The field name and its `safeKey` check do not depend on the item: made once, a
    // failure of theirs is still reported at the first item, as `own_value` does.
    let field = (!key.is_null()).then(|| -> Result<Cow<'_, str>, Failure> {
        let name = field_name(key)?;
        safe_key(&name)?;
        Ok(name)
    });
    let mut total = 0.0;
    for item in items {
        budget.iteration(1)?;
        total += match &field {
            None => numeric(item)?,
            Some(Ok(name)) => numeric(own_field(item, name)?.as_ref())?,
            Some(Err(failure)) => return Err(failure.clone()),
        };
        if !total.is_finite() {
            return Err(invalid_value("The sum must be finite."));
        }
    }
    finite(total, "The sum must be finite.")
}

/// `@Join`'s loop over the evaluated `items`: their texts with `separator` between them,
/// one iteration per item, and the result so far charged after every item.
fn join(items: &[Value], separator: &str, budget: &mut Budget<'_>) -> Result<Value, Failure> {
    let separator_units = utf16_len(separator) as u64;
    let mut result = String::new();
    let mut units: u64 = 0;
    for (i, item) in items.iter().enumerate() {
        budget.iteration(1)?;
        let text = match item {
            Value::String(s) => Cow::Borrowed(&**s),
            other => Cow::Owned(scalar_text(other)?),
        };
        if i > 0 {
            units += separator_units;
        }
        units += utf16_len(&text) as u64;
        // Quadratic on purpose: the cost model charges the result so far (§19.2).
        budget.string_units(units)?;
        if i > 0 {
            result.push_str(separator);
        }
        result.push_str(&text);
    }
    Ok(Value::from(result))
}

/// `@Filter`'s loop: for each item, 1 iteration, then the predicate in `scope` extended
/// with `local = item`, which must give a boolean. Through the fast paths, items go
/// through a prepared predicate where it vouches for the result
/// ([`speedups::filter`](crate::speedups::filter)).
fn filter(
    items: &[Value],
    local: &str,
    predicate: &Expr,
    scope: &Scope<'_>,
    budget: &mut Budget<'_>,
    d: u64,
) -> Result<Value, Failure> {
    #[cfg(feature = "speedups")]
    let prepared = match scope.paths().fast() {
        true => Predicate::prepare_for(items, predicate, local, scope, budget.limits(), d),
        false => None,
    };
    #[cfg(feature = "speedups")]
    let string_length = budget.limits().string_length();
    let mut kept = Vec::new();
    for item in items {
        #[cfg(feature = "speedups")]
        if let Some(prepared) = &prepared {
            // The item's iteration and the predicate's charges.
            let mut steps = 1;
            if let Some(keep) = prepared.test(item, &mut steps, string_length)
                && budget.replay(steps, 1, 0)?
            {
                if keep {
                    kept.push(item.clone());
                }
                continue;
            }
        }
        budget.iteration(1)?;
        let inner = Scope::Local {
            name: local,
            value: item,
            parent: scope,
        };
        match eval(predicate, &inner, budget, d)? {
            Value::Bool(true) => kept.push(item.clone()),
            Value::Bool(false) => {}
            _ => return Err(invalid_value("@Filter needs a boolean predicate.")),
        }
    }
    Ok(Value::array(kept))
}

#[cfg(test)]
mod tests {
    use super::{evaluate, evaluate_in_scope, js_round};
    use crate::expr::Expr;
    use ui_core::{Budget, FrozenClock, Record, UiLimits, Value};

    /// `evaluate`'s short paths (scalar literals, no variables) charge and fail exactly as
    /// the boundary copy and the interpreter do.
    #[test]
    fn evaluates_short_paths_charge_as_the_interpreter() {
        let clock = FrozenClock(0.0);
        let scalars = [
            Value::Null,
            Value::Bool(true),
            Value::number(-2.5).unwrap(),
            Value::from(""),
            Value::from("héllo 😀"),
        ];
        let empty = Record::default();
        let vars = Value::from_json_str(r#"{"$a": [1, "x"], "$b": {"k": null}}"#).unwrap();
        let mut exprs: Vec<Expr> = scalars.into_iter().map(Expr::Literal).collect();
        for source in ["$a", "[1, \"xy\"]", "\"a\" + 2", "@Count($a)"] {
            let mut budget = Budget::new(UiLimits::DEFAULT, &clock);
            exprs.push(crate::expr::parse_expression(source, &mut budget).unwrap());
        }
        for expr in exprs {
            for vars in [&empty, vars.as_record().unwrap()] {
                for steps in 1..24 {
                    for string_length in [1, 2, 6, 100] {
                        let limits = UiLimits::DEFAULT
                            .with("steps", steps)
                            .unwrap()
                            .with("stringLength", string_length)
                            .unwrap();
                        let mut fast = Budget::new(limits, &clock);
                        let mut general = Budget::new(limits, &clock);
                        let a = evaluate(&expr, vars, &mut fast);
                        let b = general
                            .charge_record(vars)
                            .and_then(|()| evaluate_in_scope(&expr, vars, &mut general));
                        match (&a, &b) {
                            (Ok(a), Ok(b)) => {
                                assert_eq!(a, b);
                                assert_eq!(fast.steps(), general.steps());
                            }
                            (Err(a), Err(b)) => assert_eq!(a, b),
                            _ => panic!("{expr:?} at {steps} steps: {a:?} but {b:?}"),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn math_round_semantics() {
        assert_eq!(js_round(2.5), 3.0);
        assert_eq!(js_round(-2.5), -2.0);
        assert_eq!(js_round(0.499_999_999_999_999_94), 0.0);
        assert!(js_round(-0.5).is_sign_negative());
        assert!(js_round(-0.2).is_sign_negative());
        assert_eq!(js_round(-0.6), -1.0);
        assert_eq!(js_round(4_503_599_627_370_497.0), 4_503_599_627_370_497.0);
    }
}
