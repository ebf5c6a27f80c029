//! The Pratt parser of the expression language (`language.md` §10.2), charging the budget
//! exactly as §19.2 describes.

use std::collections::HashSet;

use ui_core::text::{is_js_whitespace, utf16_len};
use ui_core::{Budget, Code, Failure, RecordHasher, Value};

use super::ast::{BinaryOp, Expr, UnaryOp};
use super::lex::{Lexer, Token};
use super::{guard_depth, invalid_expression, safe_key};

/// The helpers `@Name(…)` may call; any other name fails `refused_call` at parse time.
pub(super) const HELPERS: [&str; 8] = [
    "Count", "Filter", "Sum", "Join", "Round", "Query", "Set", "Reset",
];

/// Parses one expression (`parseUiExpression`).
///
/// Charges, in upstream order: 1 step per token read plus 1 per skipped whitespace unit;
/// strings 1 step per loop iteration and then `string(value)`; `depth(d)` and `node()` per
/// `expression()` call; `node()` per binary operator; `depth(++d)` and `node()` per postfix
/// `.field` or `[key]`.
///
/// Fails `budget_exceeded` when the source is longer than `stringLength` UTF-16 units (before
/// lexing) or a budget runs out; `invalid_expression` for lexing and grammar errors (empty
/// input, trailing tokens, bad escapes, lone surrogate escapes, non-finite numbers, duplicate
/// record keys); `incomplete_expression` for an unclosed string; `refused_call` for an
/// unknown `@Helper`; `refused_access` for a forbidden record key, `.field` or reference.
///
/// ```
/// use ui_compiler::expr::{parse_expression, Expr};
/// use ui_core::{Budget, Code, FrozenClock, UiLimits};
///
/// let clock = FrozenClock(0.0);
/// let mut budget = Budget::new(UiLimits::DEFAULT, &clock);
/// let expr = parse_expression("$rows.length", &mut budget).unwrap();
/// assert!(matches!(expr, Expr::Member { .. }));
///
/// let err = parse_expression("$v.toString()", &mut budget).unwrap_err();
/// assert_eq!(err.code, Code::InvalidExpression);
/// ```
pub fn parse_expression(source: &str, budget: &mut Budget<'_>) -> Result<Expr, Failure> {
    if utf16_len(source) as u64 > budget.limits().string_length() {
        return Err(Failure::new(
            Code::BudgetExceeded,
            "The expression is too long.",
        ));
    }
    let mut lexer = Lexer::new(source);
    let token = lexer.read(budget)?;
    let mut parser = Parser {
        lexer,
        token,
        budget,
    };
    let expr = parser.expression(0, 0)?;
    if parser.token != Token::End {
        return Err(unexpected(&parser.token));
    }
    Ok(expr)
}

/// Where [`parse_expression`] of `source` stops when it fails: the byte range of the token
/// it could not accept (the unexpected token, the character the lexer refused, an unclosed
/// string to the end, or an empty range at the end when the input ran out). `None` when
/// the source parses or the budget runs out before the stop is found. Tools use it to
/// point at the exact token; the compile's diagnostics keep their own ranges.
///
/// ```
/// use ui_compiler::expr::parse_stop;
/// use ui_core::{Budget, FrozenClock, UiLimits};
///
/// let clock = FrozenClock(0.0);
/// let mut budget = Budget::new(UiLimits::DEFAULT, &clock);
/// assert_eq!(parse_stop("$a + * 2", &mut budget), Some(5..6));
/// assert_eq!(parse_stop("$a # 2", &mut budget), Some(3..4));
/// assert_eq!(parse_stop("$a +", &mut budget), Some(4..4));
/// assert_eq!(parse_stop("$a + 2", &mut budget), None);
/// assert_eq!(parse_stop("($a ] 2", &mut budget), Some(4..5));
/// assert_eq!(parse_stop("$a 2", &mut budget), Some(3..4));
/// assert_eq!(parse_stop("@Nope(1)", &mut budget), Some(0..5));
/// assert_eq!(parse_stop("'abc", &mut budget), Some(0..4));
/// ```
pub fn parse_stop(source: &str, budget: &mut Budget<'_>) -> Option<std::ops::Range<usize>> {
    // Every token's span, and the first character the lexer refuses.
    let mut spans = Vec::new();
    let mut refused = None;
    let mut lexer = Lexer::new(source);
    loop {
        let before = lexer.pos();
        let rest = &source[before..];
        let start = before + (rest.len() - rest.trim_start_matches(is_js_whitespace).len());
        match lexer.read(budget) {
            Ok(Token::End) => break,
            Ok(_) => spans.push(start..lexer.pos()),
            Err(failure) if failure.code == Code::BudgetExceeded => return None,
            Err(failure) => {
                let end = if failure.code == Code::IncompleteExpression {
                    source.len()
                } else {
                    start + source[start..].chars().next().map_or(0, char::len_utf8)
                };
                refused = Some(start..end.max(lexer.pos()).min(source.len()));
                break;
            }
        }
    }
    let end = source.len()..source.len();
    // Parse, keeping where the parser was when it failed.
    let mut lexer = Lexer::new(source);
    let (failure, pos, at_end) = match lexer.read(budget) {
        Err(failure) => (failure, lexer.pos(), false),
        Ok(token) => {
            let mut parser = Parser {
                lexer,
                token,
                budget: &mut *budget,
            };
            match parser.expression(0, 0) {
                Ok(_) if parser.token == Token::End => return None,
                // A trailing token: the lookahead.
                Ok(_) => return spans.into_iter().find(|s| s.end == parser.lexer.pos()),
                Err(failure) => {
                    let at_end = parser.token == Token::End;
                    (failure, parser.lexer.pos(), at_end)
                }
            }
        }
    };
    if failure.code == Code::BudgetExceeded {
        return None;
    }
    let grammar =
        failure.message.starts_with("Expected ") || failure.message.starts_with("Unexpected token");
    if let Some(refused) = refused
        && refused.start <= pos
        && (refused.start < pos || !grammar)
    {
        return Some(refused);
    }
    // The lookahead token (the end of input when the parser was looking at it).
    let lookahead = if at_end {
        spans.len()
    } else {
        spans.iter().position(|s| s.end == pos)?
    };
    // `expect` fails on the lookahead; the other grammar errors on the token just taken.
    let on_lookahead = failure.message.starts_with("Expected ")
        && !failure.message.starts_with("Expected an object key")
        && !failure.message.starts_with("Expected a field name");
    // At the end of input the token taken may itself have been the end: the parser read
    // past the last token looking for an operand, a field name or a record key.
    let last = spans.last().map(|s| &source[s.clone()]);
    let took_end = at_end
        && (failure.message.as_ref() == "Unexpected token ."
            || (!on_lookahead && matches!(last, Some("." | "{" | ","))));
    let index = if on_lookahead || took_end {
        lookahead
    } else {
        lookahead.checked_sub(1)?
    };
    Some(spans.get(index).cloned().unwrap_or(end))
}

/// Keys of a record literal checked for duplicates by a scan before a set is built.
const SCAN_KEYS: usize = 16;

fn unexpected(token: &Token<'_>) -> Failure {
    invalid_expression(format!("Unexpected token {}.", token.text()))
}

struct Parser<'s, 'b, 'c> {
    lexer: Lexer<'s>,
    /// The next token (one token of lookahead).
    token: Token<'s>,
    budget: &'b mut Budget<'c>,
}

impl<'s> Parser<'s, '_, '_> {
    /// Returns the current token and reads the next one.
    fn take(&mut self) -> Result<Token<'s>, Failure> {
        let next = self.lexer.read(self.budget)?;
        Ok(std::mem::replace(&mut self.token, next))
    }

    /// Takes the symbol `symbol` or fails `invalid_expression` without reading further.
    fn expect(&mut self, symbol: &str) -> Result<(), Failure> {
        if !self.token.is_sym(symbol) {
            return Err(invalid_expression(format!("Expected {symbol}.")));
        }
        self.take()?;
        Ok(())
    }

    fn expression(&mut self, minimum: u8, depth: u64) -> Result<Expr, Failure> {
        guard_depth(self.budget, depth)?;
        self.budget.node()?;
        let mut left = self.primary(depth + 1)?;
        loop {
            let op = match self.token {
                Token::Sym(symbol) => BinaryOp::parse(symbol),
                _ => None,
            };
            let Some(op) = op.filter(|op| op.precedence() >= minimum) else {
                break;
            };
            self.take()?;
            self.budget.node()?;
            let right = self.expression(op.precedence() + 1, depth + 1)?;
            left = Expr::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
            };
        }
        Ok(left)
    }

    /// A comma-separated list of expressions up to `close`, trailing comma allowed.
    fn list(&mut self, close: &str, depth: u64) -> Result<Vec<Expr>, Failure> {
        let mut items = Vec::new();
        while !self.token.is_sym(close) {
            items.push(self.expression(0, depth)?);
            if !self.token.is_sym(",") {
                break;
            }
            self.take()?;
        }
        self.expect(close)?;
        Ok(items)
    }

    fn record(&mut self, depth: u64) -> Result<Expr, Failure> {
        let mut entries: Vec<(String, Expr)> = Vec::new();
        // Duplicates are found by a scan while the record is small, then by a set.
        let mut keys: Option<HashSet<String, RecordHasher>> = None;
        while !self.token.is_sym("}") {
            let key = match self.take()? {
                Token::Name(name) => name.to_owned(),
                Token::Str(value) => value,
                _ => return Err(invalid_expression("Expected an object key.")),
            };
            safe_key(&key)?;
            let duplicate = match &mut keys {
                Some(keys) => !keys.insert(key.clone()),
                None if entries.len() < SCAN_KEYS => entries.iter().any(|(k, _)| *k == key),
                None => {
                    let mut set: HashSet<String, RecordHasher> =
                        entries.iter().map(|(k, _)| k.clone()).collect();
                    let duplicate = !set.insert(key.clone());
                    keys = Some(set);
                    duplicate
                }
            };
            if duplicate {
                return Err(invalid_expression("Duplicate object key."));
            }
            self.expect(":")?;
            let value = self.expression(0, depth)?;
            entries.push((key, value));
            if !self.token.is_sym(",") {
                break;
            }
            self.take()?;
        }
        self.expect("}")?;
        Ok(Expr::Object(entries))
    }

    fn primary(&mut self, mut depth: u64) -> Result<Expr, Failure> {
        let token = self.take()?;
        let mut result = match token {
            Token::Num(text) => {
                let value = text
                    .parse::<f64>()
                    .ok()
                    .and_then(Value::number)
                    .ok_or_else(|| invalid_expression("Numbers must be finite."))?;
                Expr::Literal(value)
            }
            Token::Str(value) => Expr::Literal(Value::from(value)),
            Token::Sym(symbol @ ("!" | "-" | "+")) => {
                let op = UnaryOp::parse(symbol).unwrap_or(UnaryOp::Not);
                Expr::Unary {
                    op,
                    value: Box::new(self.expression(7, depth)?),
                }
            }
            Token::Sym("(") => {
                let inner = self.expression(0, depth)?;
                self.expect(")")?;
                inner
            }
            Token::Sym("[") => Expr::Array(self.list("]", depth)?),
            Token::Sym("{") => self.record(depth)?,
            Token::Name(name) if name.starts_with('@') => {
                let name = &name[1..];
                if !HELPERS.contains(&name) {
                    return Err(Failure::new(
                        Code::RefusedCall,
                        format!("Unknown helper @{name}."),
                    ));
                }
                self.expect("(")?;
                Expr::Call {
                    name: name.to_owned(),
                    args: self.list(")", depth)?,
                }
            }
            Token::Name("true") => Expr::Literal(Value::Bool(true)),
            Token::Name("false") => Expr::Literal(Value::Bool(false)),
            Token::Name("null") => Expr::Literal(Value::Null),
            Token::Name(name) => {
                safe_key(name)?;
                Expr::Reference(name.to_owned())
            }
            other => return Err(unexpected(&other)),
        };
        while self.token.is_sym(".") || self.token.is_sym("[") {
            depth += 1;
            guard_depth(self.budget, depth)?;
            self.budget.node()?;
            let key = if self.take()?.is_sym(".") {
                match self.take()? {
                    Token::Name(name) if !name.starts_with(['$', '@']) => {
                        safe_key(name)?;
                        Expr::Literal(Value::from(name))
                    }
                    _ => return Err(invalid_expression("Expected a field name.")),
                }
            } else {
                let key = self.expression(0, depth)?;
                self.expect("]")?;
                key
            };
            result = Expr::Member {
                object: Box::new(result),
                key: Box::new(key),
            };
        }
        Ok(result)
    }
}
