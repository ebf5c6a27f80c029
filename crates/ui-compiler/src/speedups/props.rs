//! The commonest prop values without the expression lexer and parser: a quoted string
//! without escapes and an integer of up to 15 digits, read from the tag's bytes by
//! [`braced_integer`] and the quoted-value scan, then charged as one lump.
//!
//! The lump is what the lexer and parser charge for such a value, in the same order, and
//! they charge only `step`, `node` and `depth` (counters that only grow, checks of the form
//! `counter > limit`): when the lump fits, no check on the way could fail. When it might
//! not, nothing is charged and the general parse runs, failing where it always does.

use ui_core::{Budget, Failure, Value};

use crate::expr::Expr;

/// A `{digits}` value whose `{` is at `open` in `bytes`, of 1 to 15 ASCII digits: the
/// digits' byte range, or `None` for anything else. The caller charges what the
/// balanced-brace scan would (one step per digit and one for the `}`).
pub(crate) fn braced_integer(bytes: &[u8], open: usize) -> Option<(usize, usize)> {
    let from = open + 1;
    let rest = bytes.get(from..).unwrap_or_default();
    let digits = rest
        .iter()
        .take(16)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 15 || rest.get(digits) != Some(&b'}') {
        return None;
    }
    Some((from, from + digits))
}

/// [`parse_expression`](crate::expr::parse_expression) of the two commonest prop values, without lexer or parser: a quoted
/// string without escapes (`"text"` or `'text'`, the quote not inside) and an integer of up
/// to 15 digits. The same charges in the same order as the full path makes for them, and
/// the same result. `None` when `source` has another shape.
pub(crate) fn parse_plain_literal(
    source: &str,
    budget: &mut Budget<'_>,
) -> Option<Result<Expr, Failure>> {
    let bytes = source.as_bytes();
    if !bytes.is_empty() && bytes.len() <= 15 && bytes.iter().all(u8::is_ascii_digit) {
        return plain_integer(source, budget);
    }
    let (&quote, rest) = bytes.split_first()?;
    let (&close, inner) = rest.split_last()?;
    if !matches!(quote, b'"' | b'\'')
        || close != quote
        || memchr::memchr2(quote, b'\\', inner).is_some()
    {
        return None;
    }
    let text = &source[1..source.len() - 1];
    let units = ui_core::text::utf16_len_of_utf8(inner) as u64;
    plain_string(text, units, budget)
}

/// [`parse_expression`](crate::expr::parse_expression) of a quoted string whose quote is neither inside it nor escaped and
/// which holds no backslash: `text` is what stands between the quotes, `units` its
/// UTF-16 length. `None` when a check on the way could fail: the full path then fails
/// where and as it always does, with the same counters.
pub(crate) fn plain_string(
    text: &str,
    units: u64,
    budget: &mut Budget<'_>,
) -> Option<Result<Expr, Failure>> {
    // The string token: 1 step, one per unit and the closing quote; the value's `string`;
    // `expression(0, 0)`: its `depth(0)`, and its node with its step; then the end token's
    // read.
    let fits = units + 2 <= budget.limits().string_length();
    charged(fits, 2 * units + 5, budget).map(|r| r.map(|()| Expr::Literal(Value::from(text))))
}

/// [`plain_string`] of 1 to 15 ASCII digits.
pub(crate) fn plain_integer(
    source: &str,
    budget: &mut Budget<'_>,
) -> Option<Result<Expr, Failure>> {
    // The number token's read; `expression(0, 0)`: its `depth(0)`, and its node with its
    // step; then the end token's read.
    let fits = source.len() as u64 <= budget.limits().string_length();
    let value = || {
        let n = source
            .bytes()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        Expr::Literal(Value::number(n as f64).unwrap_or_default())
    };
    charged(fits, 4, budget).map(|r| r.map(|()| value()))
}

/// Charges `steps` steps (the node's own step included) and one node as one lump, when the
/// string check passed (`fits`) and the lump fits the limits; `None`, having charged
/// nothing, otherwise. `Some(Err)` is a time failure only.
fn charged(fits: bool, steps: u64, budget: &mut Budget<'_>) -> Option<Result<(), Failure>> {
    if !fits {
        return None;
    }
    match budget.replay(steps, 0, 1) {
        Ok(true) => Some(Ok(())),
        Ok(false) => None,
        Err(f) => Some(Err(f)),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use ui_core::{FrozenClock, UiLimits};

    use super::*;
    use crate::expr::parse_expression;

    static CLOCK: FrozenClock = FrozenClock(0.0);

    /// The result and the budget's counters after parsing `source` one way.
    fn run(
        source: &str,
        limits: UiLimits,
        fast: bool,
    ) -> (Option<Result<Expr, Failure>>, u64, u64) {
        let mut budget = Budget::new(limits, &CLOCK);
        let result = if fast {
            parse_plain_literal(source, &mut budget)
        } else {
            Some(parse_expression(source, &mut budget))
        };
        (result, budget.steps(), budget.nodes())
    }

    proptest! {
        /// Wherever the fast path answers, it answers what the lexer and parser do, with the
        /// same charges; under limits tight enough to fail on the way, it leaves the
        /// failure to them.
        #[test]
        fn plain_literals_parse_as_the_full_path(
            source in prop_oneof![
                "[0-9]{1,17}",
                "\"[a-z é😀\"'\\\\]{0,12}\"",
                "'[a-z é😀\"'\\\\]{0,12}'",
                "[\"'0-9a-z ]{0,6}",
            ],
            steps in 1u64..40,
            nodes in 1u64..3,
            depth in 1u64..3,
            string_length in 1u64..30,
        ) {
            let limits = UiLimits::DEFAULT
                .with("steps", steps).unwrap()
                .with("nodes", nodes).unwrap()
                .with("depth", depth).unwrap()
                .with("stringLength", string_length).unwrap();
            let (fast, fast_steps, fast_nodes) = run(&source, limits, true);
            if let Some(fast) = fast {
                // The fast path answers only where nothing on the way fails.
                prop_assert!(fast.is_ok());
                let (full, full_steps, full_nodes) = run(&source, limits, false);
                prop_assert_eq!(Some(fast), full);
                prop_assert_eq!((fast_steps, fast_nodes), (full_steps, full_nodes));
            } else {
                // Nothing charged before the full path takes over.
                prop_assert_eq!((fast_steps, fast_nodes), (0, 0));
            }
        }
    }
}
