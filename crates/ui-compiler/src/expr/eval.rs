//! The evaluator of the expression language (`language.md` §10.5–§10.9).

use std::borrow::Cow;
use std::sync::Arc;

use ui_core::limits::MAX_ROUND_DIGITS;
use ui_core::text::utf16_len;
use ui_core::{Budget, Code, Failure, Number, Record, Value, array_index, number_text};

use super::ast::{BinaryOp, Expr, UnaryOp};
use super::{guard_depth, invalid_expression, invalid_value, safe_key};

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
    // The boundary copy: charged in full, but values are immutable, so the scope shares
    // the variables' allocations.
    budget.charge_record(vars)?;
    evaluate_in_scope(expr, vars, budget)
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
    eval(expr, &Scope::Root(scope), budget, 0)
}

/// The variables visible to an expression: the copied scope, extended by `@Filter` locals.
#[derive(Clone, Copy)]
enum Scope<'a> {
    Root(&'a Record),
    Local {
        name: &'a str,
        value: &'a Value,
        parent: &'a Scope<'a>,
    },
}

impl Scope<'_> {
    fn lookup(&self, name: &str) -> Option<&Value> {
        let mut scope = self;
        loop {
            match scope {
                Scope::Root(record) => return record.get(name),
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

fn count(n: usize) -> Value {
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
    let name: Cow<'_, str> = match key {
        Value::String(s) => Cow::Borrowed(s),
        Value::Number(n) => Cow::Owned(number_text(n.get())),
        _ => {
            return Err(Failure::new(
                Code::RefusedAccess,
                "Expected a field name or an index.",
            ));
        }
    };
    safe_key(&name)?;
    let found = match value {
        Value::Record(record) => record.get(name.as_ref()).cloned(),
        Value::Array(items) if name == "length" => Some(count(items.len())),
        Value::Array(items) => array_index(&name).and_then(|i| items.get(i as usize).cloned()),
        _ => return Err(invalid_value("Expected a record or a list.")),
    };
    found.ok_or_else(|| unknown_field(&name))
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
            match op {
                UnaryOp::Not => Ok(Value::Bool(!value.is_truthy())),
                UnaryOp::Neg => finite(-numeric(&value)?, "The result must be finite."),
                UnaryOp::Plus => finite(numeric(&value)?, "The result must be finite."),
            }
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
    let result = match op {
        BinaryOp::Add if matches!(left, Value::String(_)) || matches!(right, Value::String(_)) => {
            let left = scalar_text(&left)?;
            let right = scalar_text(&right)?;
            budget.string_units((utf16_len(&left) + utf16_len(&right)) as u64)?;
            return Ok(Value::from(left + &right));
        }
        BinaryOp::Add => numeric(&left)? + numeric(&right)?,
        BinaryOp::Sub => numeric(&left)? - numeric(&right)?,
        BinaryOp::Mul => numeric(&left)? * numeric(&right)?,
        BinaryOp::Div => numeric(&left)? / numeric(&right)?,
        // Rust's `%` on floats is C's `fmod`: the sign of the dividend, as in JavaScript.
        BinaryOp::Rem => numeric(&left)? % numeric(&right)?,
        BinaryOp::Eq | BinaryOp::StrictEq => return Ok(Value::Bool(left.identical(&right))),
        BinaryOp::Ne | BinaryOp::StrictNe => return Ok(Value::Bool(!left.identical(&right))),
        BinaryOp::Lt => return Ok(Value::Bool(numeric(&left)? < numeric(&right)?)),
        BinaryOp::Le => return Ok(Value::Bool(numeric(&left)? <= numeric(&right)?)),
        BinaryOp::Gt => return Ok(Value::Bool(numeric(&left)? > numeric(&right)?)),
        BinaryOp::Ge => return Ok(Value::Bool(numeric(&left)? >= numeric(&right)?)),
        BinaryOp::And | BinaryOp::Or => return Ok(right),
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
            match eval(&args[0], scope, budget, d)? {
                Value::String(s) => {
                    let units = utf16_len(&s);
                    budget.string_units(units as u64)?;
                    Ok(count(units))
                }
                Value::Array(items) => Ok(count(items.len())),
                _ => Err(invalid_value("Expected a list.")),
            }
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
            let mut kept = Vec::new();
            for item in items.iter() {
                budget.iteration(1)?;
                let inner = Scope::Local {
                    name: local,
                    value: item,
                    parent: scope,
                };
                match eval(&args[2], &inner, budget, d)? {
                    Value::Bool(true) => kept.push(item.clone()),
                    Value::Bool(false) => {}
                    _ => return Err(invalid_value("@Filter needs a boolean predicate.")),
                }
            }
            Ok(Value::array(kept))
        }
        "Sum" => {
            arity(1, 2)?;
            let items = list(eval(&args[0], scope, budget, d)?)?;
            let key = match args.get(1) {
                Some(key) => eval(key, scope, budget, d)?,
                None => Value::Null,
            };
            let mut total = 0.0;
            for item in items.iter() {
                budget.iteration(1)?;
                total += if key.is_null() {
                    numeric(item)?
                } else {
                    numeric(&own_value(item, &key)?)?
                };
                if !total.is_finite() {
                    return Err(invalid_value("The sum must be finite."));
                }
            }
            finite(total, "The sum must be finite.")
        }
        "Join" => {
            arity(1, 2)?;
            let items = list(eval(&args[0], scope, budget, d)?)?;
            let separator: Cow<'_, str> = match args.get(1) {
                Some(sep) => Cow::Owned(scalar_text(&eval(sep, scope, budget, d)?)?),
                None => Cow::Borrowed(", "),
            };
            let separator_units = utf16_len(&separator) as u64;
            let mut result = String::new();
            let mut units: u64 = 0;
            for (i, item) in items.iter().enumerate() {
                budget.iteration(1)?;
                let text = scalar_text(item)?;
                if i > 0 {
                    units += separator_units;
                }
                units += utf16_len(&text) as u64;
                // The result so far is charged after every item: quadratic on purpose.
                budget.string_units(units)?;
                if i > 0 {
                    result.push_str(&separator);
                }
                result.push_str(&text);
            }
            Ok(Value::from(result))
        }
        "Round" => {
            arity(1, 2)?;
            let value = numeric(&eval(&args[0], scope, budget, d)?)?;
            let digits = match args.get(1) {
                Some(digits) => numeric(&eval(digits, scope, budget, d)?)?,
                None => 0.0,
            };
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

#[cfg(test)]
mod tests {
    use super::js_round;

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
