//! The literal fast path: a constant literal (`[…]`, `{…}`, strings, numbers, `true`,
//! `false`, `null`, nested) parsed straight into its [`Value`], without tokens or an
//! [`Expr`] tree, for declaration defaults.
//!
//! Exactness rests on two rules:
//!
//! - The fast path answers only when the full path (lexer, parser, then [`evaluate`] with no
//!   variables) would succeed. Anything else — another shape, a lexing or grammar error, a
//!   duplicate or forbidden key, a non-finite number, a unary sign, a limit that the totals
//!   might cross — returns `None` before anything is charged, and the caller takes the full
//!   path, which fails where and how it always does.
//! - When it answers, it charges what the full path charges. The parser's charges are only
//!   `step`, `node` and `depth` (counters that only grow, checks of the form `counter >
//!   limit`, or `d > limit` for a depth that does not read the counters), so when the
//!   totals fit, no check on the way could fail, and one [`Budget::replay`] lump leaves the
//!   counters where charging them one by one would. The evaluation charges are kept in the
//!   [`Literal`] and replayed the same way by [`Literal::evaluate`]; when they might not
//!   fit, the literal's [`Expr`] (the very tree the parser builds, see [`Literal::to_expr`])
//!   is evaluated instead, failing at the exact point.

use std::borrow::Cow;
use std::sync::Arc;

use ui_core::text::{is_js_whitespace, utf16_len, utf16_len_of_utf8};
use ui_core::{Budget, Failure, Record, Value, is_forbidden_key, record_with_capacity};

use crate::expr::lex::{hex4, name_len, number_len};
use crate::expr::{Expr, MAX_RECURSION, evaluate};

/// A constant literal parsed by [`parse_literal`]: its value and what evaluating its
/// expression with no variables charges.
#[derive(Debug, Clone)]
pub(crate) struct Literal {
    value: Value,
    /// Steps and iterations of the evaluation, the boundary copy of the empty record
    /// included.
    steps: u64,
    iterations: u64,
    /// The deepest value (the root is at 0).
    depth: u64,
    /// The longest string value, in UTF-16 units (keys are not charged as strings when
    /// evaluated).
    longest: u64,
}

impl Literal {
    /// What `evaluate(&self.to_expr(), &Record::default(), budget)` returns, with the same
    /// charges: one lump when no check on the way can fail, otherwise that evaluation
    /// itself.
    ///
    /// The value shares its allocations with this literal: a literal evaluated twice (a
    /// declaration kept by a checkpoint and compiled again) gives identical (`===`) arrays
    /// and records, where the full path gives fresh ones. Nothing compares the defaults of
    /// two compiles, and state copies its values fresh.
    pub(crate) fn evaluate(&self, budget: &mut Budget<'_>) -> Result<Value, Failure> {
        let limits = budget.limits();
        let structural = self.depth <= limits.depth().min(MAX_RECURSION)
            && self.longest <= limits.string_length();
        if structural && budget.replay(self.steps, self.iterations, 0)? {
            return Ok(self.value.clone());
        }
        evaluate(&self.to_expr(), &Record::default(), budget)
    }

    /// The expression the parser builds for this literal: its scalars as literals, its
    /// arrays and records as array and object nodes, keys in source order.
    pub(crate) fn to_expr(&self) -> Expr {
        expr_of(&self.value)
    }
}

fn expr_of(value: &Value) -> Expr {
    match value {
        Value::Array(items) => Expr::Array(items.iter().map(expr_of).collect()),
        Value::Record(record) => Expr::Object(
            record
                .iter()
                .map(|(key, value)| (key.clone(), expr_of(value)))
                .collect(),
        ),
        scalar => Expr::Literal(scalar.clone()),
    }
}

/// [`parse_expression`](super::parse_expression) of a constant literal, straight into its
/// value: the same charges (as one lump) and the same value as the full path. `None`, having
/// charged nothing, when `source` is not such a literal or the full path would fail on it
/// (see the module documentation); `Some(Err)` only for a time failure of the lump.
pub(crate) fn parse_literal(
    source: &str,
    budget: &mut Budget<'_>,
) -> Option<Result<Literal, Failure>> {
    // A cheap look at the first byte: expressions go straight to the full path.
    let first = *source.as_bytes().first()?;
    if !matches!(
        first,
        b'[' | b'{' | b'"' | b'\'' | b'.' | b'0'..=b'9' | b't' | b'f' | b'n'
    ) {
        return None;
    }
    let limits = *budget.limits();
    if utf16_len(source) as u64 > limits.string_length() {
        return None;
    }
    let mut fast = Fast {
        src: source,
        b: source.as_bytes(),
        pos: 0,
        steps: 0,
        values: 0,
        depth: 0,
        longest_token: 0,
        eval_steps: 1,
        iterations: 0,
        longest_value: 0,
        items: Vec::new(),
        entries: Vec::new(),
        strings: Default::default(),
    };
    let value = fast.value(0)?;
    // The end token.
    fast.token()?;
    if fast.pos != fast.b.len() {
        return None;
    }
    let fits = fast.depth <= limits.depth().min(MAX_RECURSION)
        && fast.longest_token <= limits.string_length();
    if !fits {
        return None;
    }
    match budget.replay(fast.steps, 0, fast.values) {
        Ok(true) => {}
        Ok(false) => return None,
        Err(f) => return Some(Err(f)),
    }
    Some(Ok(Literal {
        value,
        steps: fast.eval_steps,
        iterations: fast.iterations,
        depth: fast.depth,
        longest: fast.longest_value,
    }))
}

/// The state of one fast parse and its tallies.
struct Fast<'s> {
    src: &'s str,
    b: &'s [u8],
    pos: usize,
    /// The parser's steps and nodes (one per value, i.e. per `expression()` call).
    steps: u64,
    values: u64,
    /// The deepest value.
    depth: u64,
    /// The longest string token (keys included), in UTF-16 units.
    longest_token: u64,
    /// The evaluation's steps and iterations, and its longest string value.
    eval_steps: u64,
    iterations: u64,
    longest_value: u64,
    /// Stacks of the items and entries of the arrays and records being read.
    items: Vec<Value>,
    entries: Vec<(String, Value)>,
    /// Recent short string values by hash, to share repeated ones.
    strings: [Option<Arc<str>>; SHARED_SLOTS],
}

/// Slots of the cache of short string values ([`Fast::shared`]).
const SHARED_SLOTS: usize = 32;

/// The longest string value (in bytes) the cache keeps.
const SHARED_MAX_LEN: usize = 32;

impl<'s> Fast<'s> {
    /// Skips W before a token and charges the token's read: 1 step plus 1 per W unit
    /// (every W character is one UTF-16 unit), as the lexer does. Returns the token's
    /// first byte, if any.
    #[inline]
    fn token(&mut self) -> Option<Option<u8>> {
        self.steps += 1;
        loop {
            let Some(&b) = self.b.get(self.pos) else {
                return Some(None);
            };
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C => {
                    self.pos += 1;
                    self.steps += 1;
                }
                0x80.. => {
                    let c = self.src[self.pos..].chars().next()?;
                    if !is_js_whitespace(c) {
                        return Some(Some(b));
                    }
                    self.pos += c.len_utf8();
                    self.steps += 1;
                }
                _ => return Some(Some(b)),
            }
        }
    }

    /// Reads one value at depth `d` (an `expression(0, d)` call whose primary has no
    /// postfix and which no operator follows: the caller checks the next token).
    fn value(&mut self, d: u64) -> Option<Value> {
        if d > MAX_RECURSION {
            return None;
        }
        // `depth(d)` and `node()`; evaluation: `depth(d)` and 1 step.
        self.steps += 2;
        self.values += 1;
        self.depth = self.depth.max(d);
        self.eval_steps += 2;
        let first = self.token()??;
        match first {
            b'[' => {
                self.pos += 1;
                self.array(d)
            }
            b'{' => {
                self.pos += 1;
                self.record(d)
            }
            b'"' | b'\'' => {
                let text = self.string(first)?;
                self.leaf(utf16_len(&text) as u64);
                Some(Value::String(self.shared(&text)))
            }
            b'0'..=b'9' | b'.' => {
                let len = number_len(&self.b[self.pos..])?;
                let text = &self.src[self.pos..self.pos + len];
                self.pos += len;
                let value = if len <= 15 && text.bytes().all(|b| b.is_ascii_digit()) {
                    // Exact in an f64, as the decimal conversion gives it.
                    let n = text.bytes().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
                    Value::number(n as f64)?
                } else {
                    text.parse::<f64>().ok().and_then(Value::number)?
                };
                self.leaf(0);
                Some(value)
            }
            _ => {
                let len = name_len(&self.b[self.pos..])?;
                let value = match &self.src[self.pos..self.pos + len] {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "null" => Value::Null,
                    _ => return None,
                };
                self.pos += len;
                self.leaf(0);
                Some(value)
            }
        }
    }

    /// A string value, shared with an equal one read before when the cache has it
    /// (strings compare by content, so sharing is not observable).
    #[inline]
    fn shared(&mut self, text: &str) -> Arc<str> {
        if text.len() > SHARED_MAX_LEN {
            return Arc::from(text);
        }
        let hash = text.bytes().fold(0x811C_9DC5u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        let slot = &mut self.strings[hash as usize % SHARED_SLOTS];
        match slot {
            Some(kept) if **kept == *text => Arc::clone(kept),
            _ => {
                let value: Arc<str> = Arc::from(text);
                *slot = Some(Arc::clone(&value));
                value
            }
        }
    }

    /// The evaluation's copy of a scalar literal: `depth(0)` and `string` of its units.
    #[inline]
    fn leaf(&mut self, units: u64) {
        self.eval_steps += 1 + units;
        self.longest_value = self.longest_value.max(units);
    }

    /// One item or entry of the evaluation: 1 iteration (and its step).
    #[inline]
    fn child(&mut self) {
        self.eval_steps += 1;
        self.iterations += 1;
    }

    /// After a `,` or a value inside brackets: whether the list goes on (`,`), or ends
    /// with `close` (read). `None` for anything else.
    #[inline]
    fn separator(&mut self, close: u8) -> Option<bool> {
        let next = self.token()??;
        self.pos += 1;
        if next == b',' {
            return Some(true);
        }
        (next == close).then_some(false)
    }

    /// The items after `[` up to `]`, trailing comma allowed (`Parser::list`).
    fn array(&mut self, d: u64) -> Option<Value> {
        let start = self.items.len();
        loop {
            if self.peek_close(b']')? {
                break;
            }
            let item = self.value(d + 1)?;
            self.child();
            self.items.push(item);
            if !self.separator(b']')? {
                break;
            }
        }
        let items: Vec<Value> = self.items.drain(start..).collect();
        Some(Value::array(items))
    }

    /// Whether the next token is `close`; if so it is read. Otherwise nothing is consumed
    /// or charged (the token belongs to the value that follows).
    #[inline]
    fn peek_close(&mut self, close: u8) -> Option<bool> {
        let (pos, steps) = (self.pos, self.steps);
        let next = self.token()?;
        if next == Some(close) {
            self.pos += 1;
            return Some(true);
        }
        self.pos = pos;
        self.steps = steps;
        Some(false)
    }

    /// The entries after `{` up to `}`, trailing comma allowed (`Parser::record`): keys
    /// are names or strings, neither forbidden nor repeated.
    fn record(&mut self, d: u64) -> Option<Value> {
        let start = self.entries.len();
        loop {
            let first = self.token()??;
            let key = match first {
                b'}' => {
                    self.pos += 1;
                    break;
                }
                b'"' | b'\'' => self.string(first)?.into_owned(),
                _ => {
                    let len = name_len(&self.b[self.pos..])?;
                    let name = &self.src[self.pos..self.pos + len];
                    self.pos += len;
                    name.to_owned()
                }
            };
            if is_forbidden_key(&key) {
                return None;
            }
            if self.token()? != Some(b':') {
                return None;
            }
            self.pos += 1;
            let value = self.value(d + 1)?;
            self.child();
            self.entries.push((key, value));
            if !self.separator(b'}')? {
                break;
            }
        }
        let count = self.entries.len() - start;
        let mut record = record_with_capacity(count);
        for (key, value) in self.entries.drain(start..) {
            if record.insert(key, value).is_some() {
                return None;
            }
        }
        Some(Value::record(record))
    }

    /// A string token at `pos` (its opening quote `quote`): the lexer's charges (1 step per
    /// UTF-16 unit, escape or closing quote, 1 more per surrogate pair, then the value's
    /// units) and its decoded value.
    fn string(&mut self, quote: u8) -> Option<Cow<'s, str>> {
        self.pos += 1;
        let rest = &self.b[self.pos..];
        let run = memchr::memchr2(quote, b'\\', rest)?;
        if rest[run] == quote {
            // No escape: the value is the run.
            let value = &self.src[self.pos..self.pos + run];
            let units = utf16_len_of_utf8(value.as_bytes()) as u64;
            self.steps += 2 * units + 1;
            self.longest_token = self.longest_token.max(units);
            self.pos += run + 1;
            return Some(Cow::Borrowed(value));
        }
        let mut text = String::new();
        loop {
            let rest = &self.b[self.pos..];
            let run = memchr::memchr2(quote, b'\\', rest)?;
            let plain = &self.src[self.pos..self.pos + run];
            self.steps += utf16_len_of_utf8(plain.as_bytes()) as u64;
            text.push_str(plain);
            self.pos += run;
            // The quote or the backslash: one iteration of one unit.
            self.steps += 1;
            let c = self.b[self.pos];
            self.pos += 1;
            if c == quote {
                break;
            }
            let escape = *self.b.get(self.pos)?;
            self.pos += 1;
            let decoded = match escape {
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'b' => '\u{8}',
                b'f' => '\u{C}',
                b'\\' | b'"' | b'\'' | b'/' => char::from(escape),
                b'u' => self.unicode_escape()?,
                _ => return None,
            };
            text.push(decoded);
        }
        let units = utf16_len(&text) as u64;
        self.steps += units;
        self.longest_token = self.longest_token.max(units);
        Some(Cow::Owned(text))
    }

    /// The four hex digits after `\u`, a surrogate pair written as two escapes (1 step for
    /// the second), no lone surrogate.
    fn unicode_escape(&mut self) -> Option<char> {
        let unit = hex4(&self.b[self.pos..])?;
        self.pos += 4;
        match unit {
            0xD800..=0xDBFF => {
                let low = self.b[self.pos..]
                    .strip_prefix(b"\\u")
                    .and_then(hex4)
                    .filter(|low| (0xDC00..=0xDFFF).contains(low))?;
                self.steps += 1;
                self.pos += 6;
                char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(unit),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;
    use ui_core::{FrozenClock, UiLimits};

    use super::*;
    use crate::expr::parse_expression;

    static CLOCK: FrozenClock = FrozenClock(0.0);

    fn counters(budget: &Budget<'_>) -> (u64, u64, u64) {
        (budget.steps(), budget.iterations(), budget.nodes())
    }

    /// Whitespace between tokens, W's non-ASCII members included.
    fn ws() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => Just(String::new()),
            3 => Just(" ".to_owned()),
            1 => Just("\n  ".to_owned()),
            1 => Just("\t".to_owned()),
            1 => Just("\u{A0}".to_owned()),
            1 => Just("\u{2028}".to_owned()),
            1 => Just("\u{FEFF}".to_owned()),
        ]
    }

    /// A string token, now and then a broken one.
    fn string() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            30 => "[a-z0-9 ]{1,4}",
            1 => Just("é".to_owned()),
            1 => Just("😀".to_owned()),
            1 => Just("\n".to_owned()),
            1 => Just("\\n".to_owned()),
            1 => Just("\\t\\b\\f\\r".to_owned()),
            1 => Just("\\\\".to_owned()),
            1 => Just("\\/".to_owned()),
            1 => Just("\\\"".to_owned()),
            1 => Just("\\'".to_owned()),
            1 => Just("\"".to_owned()),
            1 => Just("'".to_owned()),
            1 => Just("\\u00e9".to_owned()),
            1 => Just("\\u20AC".to_owned()),
            1 => Just("\\uD83D\\uDE00".to_owned()),
            1 => prop_oneof![
                Just("\\uD83D"),
                Just("\\uDE00"),
                Just("\\u12"),
                Just("\\x"),
                Just("\\é")
            ]
            .prop_map(str::to_owned),
        ];
        (
            prop_oneof![Just('"'), Just('\'')],
            prop::collection::vec(piece, 0..4),
            prop_oneof![80 => Just(true), 1 => Just(false)],
        )
            .prop_map(|(quote, pieces, closed)| {
                let mut s = String::from(quote);
                s.extend(pieces);
                if closed {
                    s.push(quote);
                }
                s
            })
    }

    /// A scalar token: numbers in every form the lexer reads, keywords, near-keywords,
    /// strings, and a few expressions that are not literals.
    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            16 => "[0-9]{1,4}",
            8 => "[0-9]{1,3}\\.[0-9]{0,3}",
            4 => "\\.[0-9]{1,3}",
            8 => "[0-9]{1,2}(\\.[0-9]?)?[eE][+-]?[0-9]{1,3}",
            4 => "0[0-9]{1,2}",
            8 => prop_oneof![Just("true"), Just("false"), Just("null")].prop_map(str::to_owned),
            16 => string(),
            1 => prop_oneof![
                Just("1e999"),
                Just("1.2.3"),
                Just("1e"),
                Just("-5"),
                Just("+1"),
                Just("nul"),
                Just("truex"),
                Just("$a"),
                Just("row"),
                Just("@Count(1)")
            ]
            .prop_map(str::to_owned),
        ]
    }

    /// A record key: names (sigils too), strings, forbidden and invalid ones; few, so that
    /// duplicates are common.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            40 => "[a-z_][a-z0-9_]{0,2}",
            10 => prop_oneof![Just("a"), Just("b"), Just("_c1"), Just("$d"), Just("@e"), Just("true")]
                .prop_map(str::to_owned),
            10 => prop_oneof![Just("\"a\""), Just("'b'"), Just("\"x y\""), Just("\"\\u0061\""), Just("\"2\"")]
                .prop_map(str::to_owned),
            1 => prop_oneof![Just("__proto__"), Just("\"constructor\""), Just("prototype")]
                .prop_map(str::to_owned),
            1 => prop_oneof![Just("1"), Just("[a]"), Just("")].prop_map(str::to_owned),
        ]
    }

    /// Sources of literals, nested, with random whitespace and occasional mistakes.
    pub(crate) fn literal() -> impl Strategy<Value = String> {
        scalar().prop_recursive(4, 96, 8, |inner| {
            let item = (ws(), inner.clone(), ws()).prop_map(|(a, v, b)| format!("{a}{v}{b}"));
            let entry = (
                ws(),
                key(),
                ws(),
                prop_oneof![80 => Just(":"), 1 => Just("")],
                inner,
            )
                .prop_map(|(a, k, b, colon, v)| format!("{a}{k}{b}{colon}{v}"));
            let separator = || prop_oneof![80 => Just(","), 1 => Just(""), 1 => Just(",,")];
            let trailing = || prop_oneof![4 => Just(""), 1 => Just(","), 1 => Just(", ")];
            let close = |c: &'static str| prop_oneof![80 => Just(c), 1 => Just("")];
            prop_oneof![
                (
                    prop::collection::vec((item, separator()), 0..8),
                    trailing(),
                    close("]")
                )
                    .prop_map(|(items, trailing, close)| list("[", items, trailing, close)),
                (
                    prop::collection::vec((entry, separator()), 0..5),
                    trailing(),
                    close("}")
                )
                    .prop_map(|(entries, trailing, close)| list("{", entries, trailing, close)),
            ]
        })
    }

    fn list(open: &str, items: Vec<(String, &str)>, trailing: &str, close: &str) -> String {
        let mut s = open.to_owned();
        let n = items.len();
        for (i, (item, separator)) in items.into_iter().enumerate() {
            s.push_str(&item);
            if i + 1 < n {
                s.push_str(separator);
            }
        }
        if n > 0 {
            s.push_str(trailing);
        }
        s.push_str(close);
        s
    }

    /// A whole declaration value: a literal, sometimes with something after it.
    pub(crate) fn source() -> impl Strategy<Value = String> {
        (
            literal(),
            prop_oneof![
                60 => Just(""),
                1 => Just(" + 1"),
                1 => Just(".length"),
                1 => Just("[0]"),
                1 => Just(" x"),
                1 => Just(" ]"),
                1 => Just(" \u{A0}"),
            ],
        )
            .prop_map(|(literal, tail)| format!("{literal}{tail}"))
    }

    /// Limits tight enough that every check fails now and then: each one is either
    /// wide or drawn from a range around what the generated literals need.
    pub(crate) fn limits() -> impl Strategy<Value = UiLimits> {
        let limit = |tight: std::ops::Range<u64>| prop_oneof![2 => Just(1 << 20), 1 => tight];
        (
            limit(1..500),
            limit(1..40),
            limit(1..60),
            prop_oneof![2 => Just(32u64), 1 => 1u64..6],
            limit(1..12),
        )
            .prop_map(|(steps, iterations, nodes, depth, string_length)| {
                UiLimits::DEFAULT
                    .with("steps", steps)
                    .and_then(|l| l.with("iterations", iterations))
                    .and_then(|l| l.with("nodes", nodes))
                    .and_then(|l| l.with("depth", depth))
                    .and_then(|l| l.with("stringLength", string_length))
                    .unwrap()
            })
    }

    fn json(value: &Result<Value, Failure>) -> String {
        match value {
            Ok(value) => serde_json::to_string(value).unwrap(),
            Err(f) => format!("{f:?}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Wherever the fast path answers, the full path (lexer, parser, evaluation with no
        /// variables) gives the same expression, charges and value, from any counters and
        /// under limits tight enough to fail on the way; where it does not, it charged
        /// nothing.
        #[test]
        fn literals_parse_and_evaluate_as_the_full_path(
            source in source(),
            limits in limits(),
            before in (0u64..100, 0u64..10, 0u64..10),
            between in (0u64..100, 0u64..10, 0u64..10),
        ) {
            let mut fast = Budget::new(limits, &CLOCK);
            fast.replay(before.0, before.1, before.2).unwrap();
            let mut full = fast.clone();
            let start = counters(&fast);
            let answer = parse_literal(&source, &mut fast);
            let parsed = parse_expression(&source, &mut full);
            let Some(answer) = answer else {
                prop_assert_eq!(counters(&fast), start);
                // Nothing but a sign, parentheses, leading whitespace or a limit turns a
                // literal the full path reads away.
                if let Ok(expr) = &parsed
                    && !source.starts_with(|c: char| is_js_whitespace(c))
                    && !source.contains(['-', '+', '('])
                {
                    prop_assert!(!expr.is_constant(), "declined {:?}", source);
                }
                return Ok(());
            };
            let literal = answer.unwrap();
            let expr = parsed.unwrap();
            prop_assert_eq!(literal.to_expr(), expr.clone());
            prop_assert_eq!(counters(&fast), counters(&full));
            let _ = fast.replay(between.0, between.1, between.2);
            let _ = full.replay(between.0, between.1, between.2);
            let a = literal.evaluate(&mut fast);
            let b = evaluate(&expr, &Record::default(), &mut full);
            prop_assert_eq!(json(&a), json(&b));
            prop_assert_eq!(counters(&fast), counters(&full));
        }
    }

    #[test]
    fn the_fast_path_reads_these() {
        let mut budget = Budget::new(UiLimits::DEFAULT, &CLOCK);
        for source in [
            "[]",
            "{}",
            "0",
            "1.5e3",
            "'a\\u00e9\\uD83D\\uDE00\\n'",
            "[{a: 1, \"b\": [true, false, null], $c: 'x',}, 2,]",
            "{ \u{A0}x\u{2028}: [ [ [ ] ] ] }",
        ] {
            let mut full = budget.clone();
            let literal = parse_literal(source, &mut budget).unwrap().unwrap();
            assert_eq!(
                literal.to_expr(),
                parse_expression(source, &mut full).unwrap()
            );
            assert_eq!(counters(&budget), counters(&full), "{source}");
        }
        for source in [
            "-1",
            "[1] + 1",
            "[1][0]",
            "{a: 1, a: 2}",
            "{__proto__: 1}",
            "$a",
            "1e999",
        ] {
            assert!(parse_literal(source, &mut budget).is_none(), "{source}");
        }
    }
}
