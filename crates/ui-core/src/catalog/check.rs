//! Prop validation: one check per [`PropKind`], the two refinements, and JavaScript's
//! `Number(x)` for the `File.line` coercion.
//!
//! Every pattern of the spec is written out by hand over ASCII bytes, so `\d` means `0-9` and
//! case folding touches ASCII letters only (`catalog.md` §1).

use crate::limits::{
    MAX_FILE_LINE, MAX_LIST_ITEMS, MAX_NAME_CHARS, MAX_SHA_DIGITS, MAX_TEXT_CHARS, MIN_SHA_DIGITS,
};
use crate::props::ReadProps;
use crate::text::trim_js;
use crate::value::{Value, number_text};

use super::table::TONES;
use super::{PropKind, Refinement};

/// Why a value failed: a path below the prop (`[3]`, `[0].label`, or empty) and the reason.
pub(super) struct Issue {
    pub(super) path: String,
    pub(super) reason: String,
}

impl Issue {
    fn new(reason: impl Into<String>) -> Self {
        Issue {
            path: String::new(),
            reason: reason.into(),
        }
    }

    fn at_index(mut self, index: usize) -> Self {
        self.path = format!("[{index}]{}", self.path);
        self
    }

    fn at_key(mut self, key: &str) -> Self {
        self.path = format!(".{key}{}", self.path);
        self
    }
}

type Checked = Result<Option<Value>, Issue>;

fn received(expected: &str, value: &Value) -> Issue {
    Issue::new(format!("expected {expected}, received {}", value.kind()))
}

/// Checks `value` against `kind`. `Ok(Some(v))` replaces the value (the `File.line`
/// coercion); `Ok(None)` keeps it as it is.
pub(super) fn check(kind: PropKind, value: &Value) -> Checked {
    match kind {
        PropKind::Text => text(value, 0, MAX_TEXT_CHARS),
        PropKind::Name => text(value, 1, MAX_NAME_CHARS),
        PropKind::Identifier => {
            text(value, 1, MAX_NAME_CHARS)?;
            let s = value.as_str().unwrap_or_default();
            if !is_identifier(s) {
                return Err(Issue::new(
                    "must be an identifier: a letter or _, then letters, digits or _",
                ));
            }
            Ok(None)
        }
        PropKind::Number { min, exclusive } => {
            let x = value.as_f64().ok_or_else(|| received("number", value))?;
            match min {
                Some(min) if exclusive && x <= min => Err(Issue::new(format!(
                    "must be greater than {}",
                    number_text(min)
                ))),
                Some(min) if !exclusive && x < min => Err(Issue::new(format!(
                    "must be greater than or equal to {}",
                    number_text(min)
                ))),
                _ => Ok(None),
            }
        }
        PropKind::Bool => match value {
            Value::Bool(_) => Ok(None),
            _ => Err(received("boolean", value)),
        },
        PropKind::Scalar => scalar(value),
        PropKind::Tone => one_of(TONES, value),
        PropKind::Enum(options) => one_of(options, value),
        PropKind::Rows => list(value, |item| match item {
            Value::Record(_) => Ok(None),
            _ => Err(received("record", item)),
        }),
        PropKind::ChartData => list(value, |item| {
            let row = item.as_record().ok_or_else(|| received("record", item))?;
            for (key, cell) in row {
                scalar(cell).map_err(|issue| issue.at_key(key))?;
            }
            Ok(None)
        }),
        PropKind::ScalarList => list(value, scalar),
        PropKind::AnyList => list(value, |_| Ok(None)),
        PropKind::FileLine => file_line(value),
        PropKind::Sha => {
            let s = value.as_str().ok_or_else(|| received("string", value))?;
            if is_sha(s) {
                Ok(None)
            } else {
                Err(Issue::new(format!(
                    "must be {MIN_SHA_DIGITS} to {MAX_SHA_DIGITS} hexadecimal digits"
                )))
            }
        }
        PropKind::HttpUrl => {
            text(value, 0, MAX_TEXT_CHARS)?;
            let s = value.as_str().unwrap_or_default();
            if starts_with_http(s) {
                Ok(None)
            } else {
                Err(Issue::new("must start with http:// or https://"))
            }
        }
        PropKind::Latest => match value.as_str() {
            Some("latest") => Ok(None),
            _ => Err(Issue::new("expected \"latest\"")),
        },
    }
}

/// A string of `min ..= max` characters (Unicode code points, so a character outside the
/// BMP counts once), as the reference's zod 4 counts a string's length for `min` and `max`.
fn text(value: &Value, min: usize, max: usize) -> Checked {
    let s = value.as_str().ok_or_else(|| received("string", value))?;
    // A UTF-8 string has at most as many characters as bytes, and none when it is empty:
    // most texts pass without being counted.
    if s.len() <= max && (min == 0 || (min == 1 && !s.is_empty())) {
        return Ok(None);
    }
    let chars = s.chars().count();
    if chars < min {
        return Err(Issue::new(if min == 1 {
            "must not be empty".to_owned()
        } else {
            format!("must be at least {min} characters long")
        }));
    }
    if chars > max {
        return Err(Issue::new(format!(
            "must be at most {max} characters long (got {chars})"
        )));
    }
    Ok(None)
}

/// `check(kind, value).is_ok()`, answered without building a result for the shapes most
/// props have.
#[inline]
pub(super) fn passes(kind: PropKind, value: &Value) -> bool {
    match (kind, value) {
        // (Within `max` bytes means within `max` characters.)
        (PropKind::Text, Value::String(s)) | (PropKind::Scalar, Value::String(s))
            if s.len() <= MAX_TEXT_CHARS =>
        {
            true
        }
        (PropKind::Name, Value::String(s)) if !s.is_empty() && s.len() <= MAX_NAME_CHARS => true,
        (PropKind::Number { min: None, .. }, Value::Number(_))
        | (PropKind::Scalar, Value::Null | Value::Bool(_) | Value::Number(_))
        | (PropKind::Bool, Value::Bool(_)) => true,
        _ => check(kind, value).is_ok(),
    }
}

/// `Text | Number | boolean | null`.
fn scalar(value: &Value) -> Checked {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(None),
        Value::String(_) => text(value, 0, MAX_TEXT_CHARS),
        Value::Array(_) | Value::Record(_) => Err(received(
            "a scalar (string, number, boolean or null)",
            value,
        )),
    }
}

fn one_of(options: &[&str], value: &Value) -> Checked {
    match value.as_str() {
        Some(s) if options.contains(&s) => Ok(None),
        _ => Err(Issue::new(format!("expected one of {}", options.join("|")))),
    }
}

/// An array of at most [`MAX_LIST_ITEMS`] items, each passing `item`.
fn list(value: &Value, item: impl Fn(&Value) -> Checked) -> Checked {
    let items = value.as_array().ok_or_else(|| received("array", value))?;
    if items.len() > MAX_LIST_ITEMS {
        return Err(Issue::new(format!(
            "must hold at most {MAX_LIST_ITEMS} items (got {})",
            items.len()
        )));
    }
    for (i, v) in items.iter().enumerate() {
        item(v).map_err(|issue| issue.at_index(i))?;
    }
    Ok(None)
}

/// `File.line`: JavaScript `Number(x)`, then a finite integer in `1 ..= 10,000,000`.
fn file_line(value: &Value) -> Checked {
    let n = js_number(value);
    if n.is_nan() {
        return Err(Issue::new(format!(
            "expected a line number, received {}",
            value.kind()
        )));
    }
    if !n.is_finite() || n.fract() != 0.0 {
        return Err(Issue::new("expected an integer"));
    }
    if n < 1.0 || n > MAX_FILE_LINE as f64 {
        return Err(Issue::new(format!("must be between 1 and {MAX_FILE_LINE}")));
    }
    if value.as_f64().is_some() {
        Ok(None)
    } else {
        Ok(Value::number(n))
    }
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`, ASCII only.
fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `^[0-9A-Fa-f]{7,64}$`, where `$` is the very end (no trailing line break).
fn is_sha(s: &str) -> bool {
    (MIN_SHA_DIGITS..=MAX_SHA_DIGITS).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `^[Hh][Tt][Tt][Pp][Ss]?://`.
fn starts_with_http(s: &str) -> bool {
    let b = s.as_bytes();
    let prefix = |p: &[u8]| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p);
    prefix(b"http://") || prefix(b"https://")
}

/// The cross-prop rule of a refined component, run on props that passed every prop check.
pub(super) fn refine(refinement: Refinement, props: &impl ReadProps) -> Result<(), Issue> {
    match refinement {
        Refinement::Image => {
            let truthy = |key| props.get_prop(key).is_some_and(Value::is_truthy);
            if truthy("attachment") == truthy("generated") {
                return Err(Issue::new(
                    "exactly one of attachment and generated must be given",
                ));
            }
            Ok(())
        }
        Refinement::Slider => {
            let num = |key| props.get_prop(key).and_then(Value::as_f64);
            // All three are required numbers, so they are present once the props passed.
            let (Some(value), Some(min), Some(max)) = (num("value"), num("min"), num("max")) else {
                return Err(Issue::new("value, min and max must be numbers"));
            };
            if min >= max {
                return Err(Issue::new("min must be less than max"));
            }
            if value < min || value > max {
                return Err(Issue::new("value must lie between min and max"));
            }
            Ok(())
        }
    }
}

/// JavaScript's `Number(value)` for a JSON value.
pub(super) fn js_number(value: &Value) -> f64 {
    match value {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.get(),
        Value::String(s) => string_to_number(s),
        Value::Array(_) => {
            // ToPrimitive of an array is `Array.prototype.join(",")`.
            let mut text = String::new();
            js_string(value, &mut text);
            string_to_number(&text)
        }
        Value::Record(_) => f64::NAN,
    }
}

/// Appends JavaScript's `String(value)`, except that `null` inside an array joins as `""`.
fn js_string(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // `join` writes null and undefined items as empty text.
                if !item.is_null() {
                    js_string(item, out);
                }
            }
        }
        Value::Record(_) => out.push_str("[object Object]"),
        Value::Null => out.push_str("null"),
        scalar => scalar.write_plain(out),
    }
}

/// ECMAScript `StringToNumber`: trims JS whitespace, `""` is 0, then a
/// `StringNumericLiteral` or NaN.
pub(super) fn string_to_number(s: &str) -> f64 {
    let t = trim_js(s);
    if t.is_empty() {
        return 0.0;
    }
    let b = t.as_bytes();
    if b.len() > 2 && b[0] == b'0' {
        let radix = match b[1] {
            b'x' | b'X' => 16,
            b'o' | b'O' => 8,
            b'b' | b'B' => 2,
            _ => 0,
        };
        if radix != 0 {
            return radix_integer(&t[2..], radix);
        }
    }
    let (negative, unsigned) = match b[0] {
        b'+' => (false, &t[1..]),
        b'-' => (true, &t[1..]),
        _ => (false, t),
    };
    let magnitude = if unsigned == "Infinity" {
        f64::INFINITY
    } else if is_decimal_literal(unsigned) {
        // Rust's float grammar accepts every `StrUnsignedDecimalLiteral` (`5.`, `.5`, `1e3`)
        // and rounds correctly; the check above keeps out what JS would refuse (`inf`, `nan`).
        unsigned.parse::<f64>().unwrap_or(f64::NAN)
    } else {
        return f64::NAN;
    };
    if negative { -magnitude } else { magnitude }
}

/// The value of `digits` in `radix`, or NaN if it holds another character.
fn radix_integer(digits: &str, radix: u32) -> f64 {
    let mut n = 0.0f64;
    for c in digits.chars() {
        match c.to_digit(radix) {
            Some(d) => n = n * f64::from(radix) + f64::from(d),
            None => return f64::NAN,
        }
    }
    n
}

/// `StrUnsignedDecimalLiteral` without `Infinity`:
/// `(digits [. digits?] | . digits) ([eE] [+-]? digits)?`.
fn is_decimal_literal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if i < b.len() && b[i] == b'.' {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_is_the_verdict_of_check() {
        let text = |bytes: usize, unit: &str| Value::from(unit.repeat(bytes / unit.len()));
        let mut values = vec![
            Value::Null,
            Value::Bool(true),
            Value::from(0),
            Value::from(-1),
            Value::number(1.5).unwrap(),
            Value::from(""),
            Value::from("a"),
            Value::from("info"),
            Value::from("0123abc"),
            Value::from("https://example.com/a"),
            Value::from_json_str(r#"[1, "a", null]"#).unwrap(),
            Value::from_json_str(r#"[{"a": 1}]"#).unwrap(),
            Value::from_json_str(r#"{"a": 1}"#).unwrap(),
        ];
        for max in [MAX_TEXT_CHARS, MAX_NAME_CHARS] {
            for bytes in [max - 2, max, max + 2, 2 * max] {
                values.push(text(bytes, "a"));
                values.push(text(bytes, "é"));
                values.push(text(bytes, "😀"));
            }
        }
        for component in super::super::components() {
            for spec in component.props {
                for value in &values {
                    assert_eq!(
                        passes(spec.kind, value),
                        check(spec.kind, value).is_ok(),
                        "{}.{} = {value:?}",
                        component.name,
                        spec.name,
                    );
                }
            }
        }
    }

    #[test]
    fn string_to_number_follows_js() {
        let cases: &[(&str, f64)] = &[
            ("148", 148.0),
            (" 12 ", 12.0),
            ("\u{FEFF}\n7\u{A0}", 7.0),
            ("1e3", 1000.0),
            ("1E+3", 1000.0),
            ("2.5e-1", 0.25),
            (".5", 0.5),
            ("5.", 5.0),
            ("+5", 5.0),
            ("-5", -5.0),
            ("0x10", 16.0),
            ("0XfF", 255.0),
            ("0o17", 15.0),
            ("0b101", 5.0),
            ("", 0.0),
            ("   ", 0.0),
            ("007", 7.0),
            ("1e400", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
            ("Infinity", f64::INFINITY),
        ];
        for &(s, want) in cases {
            assert_eq!(string_to_number(s), want, "{s:?}");
        }
        for s in [
            "abc", "-0x10", "+0x10", "0x", "0b2", "0o8", "1_000", "1e", "e3", ".", "+", "1.2.3",
            "inf", "infinity", "nan", "NaN", "1 2", "١٢", "0x1g", "5e+", "--5", "+-5",
        ] {
            assert!(string_to_number(s).is_nan(), "{s:?}");
        }
    }

    #[test]
    fn js_number_of_non_strings() {
        let v = |json: &str| js_number(&Value::from_json_str(json).unwrap());
        assert_eq!(v("true"), 1.0);
        assert_eq!(v("false"), 0.0);
        assert_eq!(v("null"), 0.0);
        assert_eq!(v("[]"), 0.0);
        assert_eq!(v("[7]"), 7.0);
        assert_eq!(v(r#"["148"]"#), 148.0);
        assert_eq!(v("[[[3]]]"), 3.0);
        assert_eq!(v("[null]"), 0.0);
        assert!(v("[true]").is_nan());
        assert!(v("[1,2]").is_nan());
        assert!(v("[{}]").is_nan());
        assert!(v("{}").is_nan());
        assert_eq!(v("[1e21]"), 1e21);
    }

    #[test]
    fn patterns_are_ascii_only() {
        assert!(is_identifier("_row1"));
        assert!(!is_identifier("1row"));
        assert!(!is_identifier("$row"));
        assert!(!is_identifier("ré"));
        assert!(is_sha("abcdef0"));
        assert!(!is_sha("abcdef0\n"));
        assert!(!is_sha("\u{FF10}bcdef0"));
        assert!(starts_with_http("HtTpS://"));
        assert!(!starts_with_http("\u{17F}https://"));
        assert!(!starts_with_http("http:/"));
        assert!(!starts_with_http("https:"));
    }
}
