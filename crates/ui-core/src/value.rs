//! [`Value`]: the JSON values blocks compute with.
//!
//! Numbers are always finite, records keep insertion order, compound values are shared
//! behind [`Arc`] so that JavaScript's identity comparison of arrays and records (`===`) can
//! be reproduced with pointer equality ([`Value::identical`]). Text conversions follow
//! ECMAScript exactly: [`number_text`] is `Number::toString`, [`Value::to_js_json`] is
//! `JSON.stringify` without spacing, with JavaScript's property order.

use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// The record type: string keys to values, in insertion order.
///
/// Hashed with [`RecordHasher`]; make one with `Record::default()` or [`record_with_capacity`].
pub type Record = IndexMap<String, Value, RecordHasher>;

/// The hasher of [`Record`]: `foldhash`'s randomly seeded fast hasher. Records are small and
/// their keys short, and a block's compile hashes many of them, so the hasher's speed on
/// short keys is what counts (`benches/NOTES.md` has the measurement). A flood-resistant
/// hasher is not needed: the budget bounds how many keys a block makes, and the seed is
/// random per process.
pub type RecordHasher = foldhash::fast::RandomState;

/// An empty [`Record`] with room for `capacity` entries.
#[inline]
pub fn record_with_capacity(capacity: usize) -> Record {
    Record::with_capacity_and_hasher(capacity, RecordHasher::default())
}

/// The record keys that are refused wherever a key is read or written
/// (`language.md` §10.7).
pub const FORBIDDEN_KEYS: [&str; 3] = ["__proto__", "constructor", "prototype"];

/// Whether `key` is one of [`FORBIDDEN_KEYS`].
#[inline]
pub fn is_forbidden_key(key: &str) -> bool {
    FORBIDDEN_KEYS.contains(&key)
}

/// A finite `f64`: NaN and the infinities cannot be represented.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Number(f64);

impl Number {
    /// Wraps `value` when it is finite.
    #[inline]
    pub fn new(value: f64) -> Option<Number> {
        value.is_finite().then_some(Number(value))
    }

    /// The wrapped value.
    #[inline]
    pub fn get(self) -> f64 {
        self.0
    }
}

impl From<i32> for Number {
    fn from(value: i32) -> Self {
        Number(f64::from(value))
    }
}

impl From<u32> for Number {
    fn from(value: u32) -> Self {
        Number(f64::from(value))
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_number(f, self.0)
    }
}

/// The six kinds of value; [`Kind::as_str`] gives the names the spec uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A finite number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// A record (JSON object).
    Record,
}

impl Kind {
    /// The kind's name: `null`, `boolean`, `number`, `string`, `array` or `record`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Record => "record",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A JSON value with finite numbers and insertion-ordered records.
///
/// `==` ([`PartialEq`]) is *structural* equality that ignores record key order (upstream's
/// `sameUiValue`); the expression language's `==` is [`Value::identical`].
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// A finite number.
    Number(Number),
    /// A string.
    String(Arc<str>),
    /// An array.
    Array(Arc<Vec<Value>>),
    /// A record.
    Record(Arc<Record>),
}

impl Value {
    /// A number value, or `None` when `value` is not finite.
    #[inline]
    pub fn number(value: f64) -> Option<Value> {
        Number::new(value).map(Value::Number)
    }

    /// A string value.
    #[inline]
    pub fn string(value: impl Into<Arc<str>>) -> Value {
        Value::String(value.into())
    }

    /// A fresh array value.
    #[inline]
    pub fn array(items: Vec<Value>) -> Value {
        Value::Array(Arc::new(items))
    }

    /// A fresh record value.
    #[inline]
    pub fn record(entries: Record) -> Value {
        Value::Record(Arc::new(entries))
    }

    /// The value's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Boolean,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Record(_) => Kind::Record,
        }
    }

    /// Whether the value is `null`.
    #[inline]
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is one.
    #[inline]
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, if this is one.
    #[inline]
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(n.get()),
            _ => None,
        }
    }

    /// The string, if this is one.
    #[inline]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items, if this is an array.
    #[inline]
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The entries, if this is a record.
    #[inline]
    pub fn as_record(&self) -> Option<&Record> {
        match self {
            Value::Record(r) => Some(r),
            _ => None,
        }
    }

    /// Whether this is a scalar: null, boolean, number or string.
    #[inline]
    pub fn is_scalar(&self) -> bool {
        !matches!(self, Value::Array(_) | Value::Record(_))
    }

    /// JavaScript truthiness: `false`, `0`, `-0`, `""` and `null` are falsy; everything
    /// else, including `[]` and `{}`, is truthy.
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.get() != 0.0,
            Value::String(s) => !s.is_empty(),
            Value::Array(_) | Value::Record(_) => true,
        }
    }

    /// JavaScript's strict equality (`===`): scalars compare by type and value (`0 === -0`),
    /// arrays and records by identity (the same [`Arc`]).
    pub fn identical(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Number(a), Value::Number(b)) => a.get() == b.get(),
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => Arc::ptr_eq(a, b),
            (Value::Record(a), Value::Record(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The text of a scalar (`scalarText`): null → `""`, booleans as `true`/`false`,
    /// numbers as JavaScript prints them, strings as they are; `None` for arrays and
    /// records.
    pub fn scalar_text(&self) -> Option<String> {
        match self {
            Value::Null => Some(String::new()),
            Value::Bool(b) => Some(if *b { "true" } else { "false" }.to_owned()),
            Value::Number(n) => Some(number_text(n.get())),
            Value::String(s) => Some(s.to_string()),
            Value::Array(_) | Value::Record(_) => None,
        }
    }

    /// The fallback text of a value (`plain`, `catalog.md` §7.1): null → `""`, scalars as
    /// [`Value::scalar_text`], arrays and records as their [JSON](Value::to_js_json).
    pub fn plain_text(&self) -> String {
        let mut out = String::new();
        self.write_plain(&mut out);
        out
    }

    /// Appends [`Value::plain_text`] to `out`.
    pub fn write_plain(&self, out: &mut String) {
        match self {
            Value::Null => {}
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                let _ = write_number(out, n.get());
            }
            Value::String(s) => out.push_str(s),
            Value::Array(_) | Value::Record(_) => {
                let _ = self.write_js_json(out);
            }
        }
    }

    /// Compact JSON text exactly as JavaScript's `JSON.stringify` writes it: numbers as
    /// `Number::toString`, JS string escapes, and record keys in JavaScript property order
    /// (canonical array-index keys first, ascending, then insertion order).
    pub fn to_js_json(&self) -> String {
        let mut out = String::new();
        let _ = self.write_js_json(&mut out);
        out
    }

    /// The length in UTF-8 bytes of [`Value::to_js_json`], computed without building the
    /// text. This is the size every byte limit of the spec measures.
    pub fn js_json_len(&self) -> usize {
        let mut counter = ByteCounter(0);
        let _ = self.write_js_json(&mut counter);
        counter.0
    }

    /// Writes [`Value::to_js_json`] into `out`.
    pub fn write_js_json<W: fmt::Write>(&self, out: &mut W) -> fmt::Result {
        match self {
            Value::Null => out.write_str("null"),
            Value::Bool(b) => out.write_str(if *b { "true" } else { "false" }),
            Value::Number(n) => write_number(out, n.get()),
            Value::String(s) => write_json_string(out, s),
            Value::Array(items) => {
                out.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.write_char(',')?;
                    }
                    item.write_js_json(out)?;
                }
                out.write_char(']')
            }
            Value::Record(record) => {
                out.write_char('{')?;
                let mut first = true;
                for_each_in_js_order(record, |key, value| {
                    if !first {
                        out.write_char(',')?;
                    }
                    first = false;
                    write_json_string(out, key)?;
                    out.write_char(':')?;
                    value.write_js_json(out)
                })?;
                out.write_char('}')
            }
        }
    }

    /// Parses JSON text into a value (numbers must be finite; record keys keep their order).
    pub fn from_json_str(text: &str) -> Result<Value, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// Visits a record's entries in JavaScript property order: canonical array-index keys
/// (`"0"`, `"10"`, … below 2³²−1) first in ascending numeric order, then the others in
/// insertion order.
pub fn for_each_in_js_order<'a, E>(
    record: &'a Record,
    mut visit: impl FnMut(&'a str, &'a Value) -> Result<(), E>,
) -> Result<(), E> {
    if !record.keys().any(|k| array_index(k).is_some()) {
        for (k, v) in record {
            visit(k, v)?;
        }
        return Ok(());
    }
    let mut indexed: Vec<(u32, &str, &Value)> = record
        .iter()
        .filter_map(|(k, v)| array_index(k).map(|i| (i, k.as_str(), v)))
        .collect();
    indexed.sort_by_key(|&(i, _, _)| i);
    for (_, k, v) in indexed {
        visit(k, v)?;
    }
    for (k, v) in record {
        if array_index(k).is_none() {
            visit(k, v)?;
        }
    }
    Ok(())
}

/// The array index a key denotes in JavaScript, if it is a canonical one: `"0"` or a
/// decimal without leading zeros, below 2³²−1.
pub fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return None;
    }
    let n: u64 = key.parse().ok()?;
    (n < u64::from(u32::MAX)).then_some(n as u32)
}

struct ByteCounter(usize);

impl fmt::Write for ByteCounter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

fn write_json_string<W: fmt::Write>(out: &mut W, s: &str) -> fmt::Result {
    out.write_char('"')?;
    let mut rest = s;
    while let Some(pos) = rest.find(|c: char| c < ' ' || c == '"' || c == '\\') {
        out.write_str(&rest[..pos])?;
        let c = rest.as_bytes()[pos];
        match c {
            b'"' => out.write_str("\\\"")?,
            b'\\' => out.write_str("\\\\")?,
            b'\n' => out.write_str("\\n")?,
            b'\r' => out.write_str("\\r")?,
            b'\t' => out.write_str("\\t")?,
            0x08 => out.write_str("\\b")?,
            0x0c => out.write_str("\\f")?,
            _ => write!(out, "\\u{c:04x}")?,
        }
        rest = &rest[pos + 1..];
    }
    out.write_str(rest)?;
    out.write_char('"')
}

/// ECMAScript `Number::toString(x)` in radix 10: the shortest digits that round-trip,
/// decimal notation for 1e-6 ≤ |x| < 1e21, exponent notation (`1e+21`, `1.5e-7`) otherwise,
/// and `-0` as `0`.
pub fn number_text(x: f64) -> String {
    let mut out = String::new();
    let _ = write_number(&mut out, x);
    out
}

/// Writes [`number_text`] into `out`.
/// The shortest digits `digits` of `x > 0` (the value `0.digits × 10^n`) replaced by their
/// even neighbour when `x` lies exactly halfway between the two: ECMAScript's
/// `Number::toString` takes the even one of two equally close shortest candidates, where
/// Rust's shortest formatting may take the odd one (`1125899906842624.25` is
/// `1125899906842624.2` in JavaScript, `…4.3` from `{:e}`). `None` when there is no tie.
///
/// A tie means `x` equals the midpoint `(10·lo + 5) × 10^g` exactly, with `lo` the lower
/// candidate and `g = n − k − 1`. Written `x = m × 2^e` with `m` odd, and the midpoint being
/// odd times `2^g`, that holds iff `e = g` and `m × 5^−g = 10·lo + 5` (for `g < 0`) or
/// `m = (10·lo + 5) × 5^g` (for `g ≥ 0`): exact integer arithmetic, no rounding.
fn even_of_a_tie(x: f64, digits: &str, n: i32) -> Option<String> {
    let s: u64 = digits.parse().ok()?;
    if s.is_multiple_of(2) {
        return None;
    }
    let k = digits.len() as u32;
    let g = n - k as i32 - 1;
    let bits = x.to_bits();
    let (fraction, biased) = (bits & ((1 << 52) - 1), ((bits >> 52) & 0x7ff) as i32);
    let (m, e) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    // `x = m × 2^e`; with `m` made odd the exponent must be `g`.
    if m == 0 || e + m.trailing_zeros() as i32 != g {
        return None;
    }
    // Both sides as odd integers: `m × 5^−g = N` when `g < 0`, `m = N × 5^g` when `g ≥ 0`.
    let pow5 = 5u128.checked_pow(g.unsigned_abs())?;
    let m = u128::from(m >> m.trailing_zeros());
    let is_midpoint = |lo: u64| {
        let n = 10 * u128::from(lo) + 5;
        if g < 0 {
            m.checked_mul(pow5) == Some(n)
        } else {
            n.checked_mul(pow5) == Some(m)
        }
    };
    let lower_bound = 10u64.pow(k - 1);
    [s.checked_sub(1), s.checked_add(1)]
        .into_iter()
        .flatten()
        .filter(|c| (lower_bound..lower_bound.saturating_mul(10)).contains(c))
        .find(|&c| {
            // The even neighbour must read back as `x` too (it does, being as close).
            is_midpoint(s.min(c)) && format!("{c}e{}", g + 1).parse::<f64>() == Ok(x)
        })
        .map(|c| c.to_string())
}

pub(crate) fn write_number<W: fmt::Write>(out: &mut W, x: f64) -> fmt::Result {
    if x == 0.0 {
        return out.write_char('0');
    }
    if !x.is_finite() {
        // Never produced for a `Value`; kept total for robustness.
        return out.write_str(if x.is_nan() {
            "NaN"
        } else if x > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        });
    }
    // (An integer test by a cast: `fract` calls `trunc`, which is a libm call on the
    // baseline x86-64 target.)
    if x.abs() < 1e15 && (x as i64) as f64 == x {
        // Fast path: small integers print as their decimal digits.
        if x < 0.0 {
            out.write_char('-')?;
        }
        return crate::text::write_decimal(out, x.abs() as u64);
    }
    // Rust's `{:e}` prints the shortest round-trip digits: `d[.ddd]e[-]N`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = exp + 1;
    if let Some(even) = even_of_a_tie(x.abs(), &digits, n) {
        digits = even;
    }
    let k = digits.len() as i32;
    if x < 0.0 {
        out.write_char('-')?;
    }
    if k <= n && n <= 21 {
        out.write_str(&digits)?;
        for _ in 0..(n - k) {
            out.write_char('0')?;
        }
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.write_str(int)?;
        out.write_char('.')?;
        out.write_str(frac)?;
    } else if -6 < n && n <= 0 {
        out.write_str("0.")?;
        for _ in 0..(-n) {
            out.write_char('0')?;
        }
        out.write_str(&digits)?;
    } else {
        let (first, rest) = digits.split_at(1);
        out.write_str(first)?;
        if !rest.is_empty() {
            out.write_char('.')?;
            out.write_str(rest)?;
        }
        let e = n - 1;
        write!(out, "e{}{}", if e >= 0 { "+" } else { "-" }, e.abs())?;
    }
    Ok(())
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Value::Bool(value)
    }
}

impl From<i32> for Value {
    fn from(value: i32) -> Self {
        Value::Number(value.into())
    }
}

impl From<u32> for Value {
    fn from(value: u32) -> Self {
        Value::Number(value.into())
    }
}

impl From<Number> for Value {
    fn from(value: Number) -> Self {
        Value::Number(value)
    }
}

impl From<f64> for Value {
    /// A finite number; NaN and the infinities become [`Value::Null`], as JSON (and
    /// `serde_json::Value::from`) writes them.
    fn from(value: f64) -> Self {
        Number::new(value).map_or(Value::Null, Value::Number)
    }
}

impl From<i64> for Value {
    /// The nearest `f64`, as a JavaScript number holds it (exact up to 2^53).
    #[allow(clippy::cast_precision_loss)]
    fn from(value: i64) -> Self {
        Value::Number(Number(value as f64))
    }
}

impl From<u64> for Value {
    /// The nearest `f64`, as a JavaScript number holds it (exact up to 2^53).
    #[allow(clippy::cast_precision_loss)]
    fn from(value: u64) -> Self {
        Value::Number(Number(value as f64))
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::String(value.into())
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::String(value.into())
    }
}

impl From<Vec<Value>> for Value {
    fn from(value: Vec<Value>) -> Self {
        Value::array(value)
    }
}

impl From<Record> for Value {
    fn from(value: Record) -> Self {
        Value::record(value)
    }
}

/// Largest integer below which every integer is exactly representable (2^53).
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => n.serialize(serializer),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items.iter() {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Record(record) => {
                let mut map = serializer.serialize_map(Some(record.len()))?;
                for (k, v) in record.iter() {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        if x.fract() == 0.0 && x.abs() < EXACT_INT {
            // Integers are written without `.0`, as JavaScript writes them.
            serializer.serialize_i64(x as i64)
        } else {
            serializer.serialize_f64(x)
        }
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let x = f64::deserialize(deserializer)?;
        Number::new(x).ok_or_else(|| de::Error::custom("number is not finite"))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value with finite numbers")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(Number(v as f64)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(Number(v as f64)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Value::number(v).ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::string(v))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::string(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut record = record_with_capacity(map.size_hint().unwrap_or(0).min(1024));
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            // As in `JSON.parse`: a repeated key keeps its first position and its last value.
            record.insert(key, value);
        }
        Ok(Value::record(record))
    }
}

impl From<&Value> for serde_json::Value {
    fn from(value: &Value) -> Self {
        match value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(n) => {
                let x = n.get();
                if x.fract() == 0.0 && x.abs() < EXACT_INT {
                    serde_json::Value::from(x as i64)
                } else {
                    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, Into::into)
                }
            }
            Value::String(s) => serde_json::Value::String(s.to_string()),
            Value::Array(items) => items.iter().map(serde_json::Value::from).collect(),
            Value::Record(r) => serde_json::Value::Object(
                r.iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
                    .collect(),
            ),
        }
    }
}

impl From<&serde_json::Value> for Value {
    /// serde_json cannot hold a non-finite number, so this conversion is total.
    fn from(value: &serde_json::Value) -> Self {
        match value {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                Value::Number(Number(n.as_f64().filter(|x| x.is_finite()).unwrap_or(0.0)))
            }
            serde_json::Value::String(s) => Value::string(s.as_str()),
            serde_json::Value::Array(items) => {
                Value::array(items.iter().map(Value::from).collect())
            }
            serde_json::Value::Object(map) => Value::record(
                map.iter()
                    .map(|(k, v)| (k.clone(), Value::from(v)))
                    .collect(),
            ),
        }
    }
}

impl From<serde_json::Value> for Value {
    /// As [`From<&serde_json::Value>`](#impl-From%3C%26Value%3E-for-Value).
    fn from(value: serde_json::Value) -> Self {
        Value::from(&value)
    }
}

impl fmt::Display for Value {
    /// Writes the value as [JavaScript JSON](Value::to_js_json).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_js_json(f)
    }
}
