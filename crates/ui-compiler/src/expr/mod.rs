//! The expression language of UI blocks (`language.md` §10).
//!
//! Expressions appear in braced props, in text `{…}`, as declaration values and inside
//! quoted props. [`parse_expression`] turns source text into an [`Expr`] (whose serde form
//! is the wire shape of §10.3); [`evaluate`] computes its [`Value`] against a record of
//! variables. Both are metered by a [`Budget`] exactly as the cost model of §19.2 says, and
//! both fail with a [`Failure`] carrying the stable codes of §21.
//!
//! ```
//! use ui_compiler::expr::{evaluate, parse_expression};
//! use ui_core::{Budget, Code, FrozenClock, Record, UiLimits, Value};
//!
//! let clock = FrozenClock(0.0);
//! let mut budget = Budget::new(UiLimits::DEFAULT, &clock);
//! let expr = parse_expression("@Count(@Filter($rows, row, row.open)) + \" open\"", &mut budget)
//!     .unwrap();
//!
//! let vars = Value::from_json_str(r#"{"$rows": [{"open": true}, {"open": false}]}"#).unwrap();
//! let value = evaluate(&expr, vars.as_record().unwrap(), &mut budget).unwrap();
//! assert_eq!(value, Value::from("1 open"));
//!
//! let missing = parse_expression("$nope", &mut budget).unwrap();
//! let err = evaluate(&missing, &Record::default(), &mut budget).unwrap_err();
//! assert_eq!(err.code, Code::RefusedAccess);
//! ```
//!
//! [`Value`]: ui_core::Value

mod ast;
pub(crate) mod eval;
pub(crate) mod lex;
mod parse;

use ui_core::{Budget, Code, Failure, is_forbidden_key};

pub use ast::{BinaryOp, Expr, UnaryOp};
pub(crate) use eval::evaluate_owned;
pub use eval::{evaluate, evaluate_in_scope};
pub use parse::{parse_expression, parse_stop};

/// Hard cap on parser and evaluator recursion, whatever the `depth` limit says, so that an
/// absurdly high limit cannot overflow the stack. Exceeding it fails `budget_exceeded`
/// like the depth limit itself.
pub(crate) const MAX_RECURSION: u64 = 256;

/// `depth(d)` of the cost model, plus the hard recursion cap.
#[inline]
fn guard_depth(budget: &mut Budget<'_>, depth: u64) -> Result<(), Failure> {
    budget.depth(depth)?;
    if depth > MAX_RECURSION {
        return Err(Failure::new(
            Code::BudgetExceeded,
            "The block exceeded its nesting budget.",
        ));
    }
    Ok(())
}

/// `safeKey`: refuses the forbidden names with `refused_access`.
#[inline]
fn safe_key(key: &str) -> Result<(), Failure> {
    if is_forbidden_key(key) {
        return Err(Failure::new(
            Code::RefusedAccess,
            format!("Access to {key} is refused."),
        ));
    }
    Ok(())
}

fn invalid_expression(message: impl Into<Box<str>>) -> Failure {
    Failure::new(Code::InvalidExpression, message)
}

fn incomplete_expression(message: impl Into<Box<str>>) -> Failure {
    Failure::new(Code::IncompleteExpression, message)
}

pub(crate) fn invalid_value(message: impl Into<Box<str>>) -> Failure {
    Failure::new(Code::InvalidValue, message)
}
