//! The driver's fast answer writer, behind the default-on `speedups` feature.
//!
//! serde_json escapes a string one byte at a time and writes it through three `io::Write`
//! calls. A `compile` answer is mostly strings (ids, prop values, every node's fallback and
//! the block's): in the `stats100` benchmark serde_json's string writing was a third of the
//! driver's instructions (callgrind), more than parsing the block. sonic-rs's serializer
//! looks for a byte to escape with SIMD compares, many bytes at a time, and writes straight
//! into the buffer's spare capacity (the figures are in the crate docs and
//! `benches/NOTES.md`).
//!
//! It writes the bytes serde_json writes, which the tests below hold it to:
//!
//! - the same escapes: `\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`, the other controls as
//!   `\u00xx` in lower-case hex, everything else (`/`, DEL, non-ASCII) as is;
//! - the same numbers: integers by itoa, floats by zmij (the crates serde_json uses), and
//!   `null` for a float that is not finite;
//! - compact output: no spaces, keys in the order the value gives them.
//!
//! `cargo build --no-default-features -p ui-cli` leaves it out: the driver then writes with
//! serde_json, and CI lints that build.

use std::io;

use serde::Serialize;

/// Appends `value` to `buffer` as compact JSON.
pub(super) fn write_json<T: Serialize + ?Sized>(buffer: &mut Vec<u8>, value: &T) -> io::Result<()> {
    sonic_rs::to_writer(buffer, value).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, Value as Json};
    use ui_core::{Number, Record, Value};

    use super::*;

    /// Both writers' bytes for `value`.
    fn both<T: Serialize + ?Sized>(value: &T) -> (String, String) {
        let mut fast = Vec::new();
        write_json(&mut fast, value).expect("sonic-rs writes");
        let plain = serde_json::to_vec(value).expect("serde_json writes");
        (
            String::from_utf8(fast).expect("UTF-8"),
            String::from_utf8(plain).expect("UTF-8"),
        )
    }

    /// Strings rich in what a writer may get wrong: every control character, quotes,
    /// backslashes, `/`, DEL, multi-byte characters (U+2028 among them), at any offset and
    /// in runs longer than a vector.
    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => "[a-zA-Z0-9 .:-]{0,40}",
            2 => (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap_or('?').to_string()),
            1 => Just("\"".to_owned()),
            1 => Just("\\".to_owned()),
            1 => Just("/\u{7f}".to_owned()),
            1 => Just("é\u{2028}\u{2029}€𝄞".to_owned()),
            1 => any::<String>(),
        ];
        proptest::collection::vec(piece, 0..8).prop_map(|pieces| pieces.concat())
    }

    /// Floats of every kind: bit patterns (subnormals, huge, tiny, non-finite) and the
    /// ordinary decimals of data.
    fn float() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            (-1e6f64..1e6).prop_map(|x| (x * 1000.0).round() / 1000.0),
            Just(0.1 + 0.2),
            Just(1e21),
            Just(-0.0),
            Just(f64::MIN_POSITIVE / 4.0),
        ]
    }

    /// `serde_json` values: what the driver's small answers are built from.
    fn json() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            any::<i64>().prop_map(Json::from),
            any::<u64>().prop_map(Json::from),
            float().prop_map(Json::from),
            text().prop_map(Json::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
                proptest::collection::vec((text(), inner), 0..6)
                    .prop_map(|entries| Json::Object(entries.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    /// `ui_core` values: what compiled blocks hold (props, defaults, readings).
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            float().prop_map(|x| Number::new(x).map_or(Value::Null, Value::from)),
            any::<i32>().prop_map(Value::from),
            text().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::vec((text(), inner), 0..6)
                    .prop_map(|entries| Value::from(entries.into_iter().collect::<Record>())),
            ]
        })
    }

    /// Replies with blocks whose props, text and declarations carry `text()`.
    fn reply() -> impl Strategy<Value = String> {
        (text(), text(), text(), float()).prop_map(|(label, body, prose, x)| {
            let quoted = serde_json::to_string(&label).unwrap_or_default();
            format!(
                "{prose}\n```ui\n$x = {x:?}\n$s = {quoted}\n<Summary>{body}</Summary>\n\
                 <Stats><Stat label={quoted} value={{$x}} unit=\"ms\"/></Stats>\n\
                 <Callout tone=\"info\">{body} {{$s}}</Callout>\n```\n{prose}"
            )
        })
    }

    #[test]
    fn writes_what_serde_json_writes_at_the_edges() {
        let controls: String = (0u8..0x20).map(char::from).collect();
        for s in [
            "",
            "\"",
            "\\",
            "a\"b\\c",
            &controls,
            "\u{7f}/</script>",
            "é\u{2028}𝄞",
            &"x".repeat(100),
            &format!("{}\n{}", "y".repeat(31), "z".repeat(33)),
        ] {
            let (fast, plain) = both(s);
            assert_eq!(fast, plain, "{s:?}");
        }
        for x in [
            0.0,
            -0.0,
            1.5,
            1e21,
            1e-7,
            f64::MAX,
            f64::NAN,
            f64::INFINITY,
        ] {
            let (fast, plain) = both(&x);
            assert_eq!(fast, plain, "{x:?}");
        }
    }

    proptest! {
        #[test]
        fn writes_serde_json_values_as_serde_json_does(v in json()) {
            let (fast, plain) = both(&v);
            prop_assert_eq!(fast, plain);
        }

        #[test]
        fn writes_ui_values_as_serde_json_does(v in value()) {
            let (fast, plain) = both(&v);
            prop_assert_eq!(fast, plain);
        }

        /// Whole answers of every operation that carries compiled blocks, through the
        /// driver's own `respond`.
        #[test]
        fn writes_driver_answers_as_serde_json_does(text in reply(), step in 1usize..40) {
            for op in ["compile", "stream", "evaluate", "text", "fallback", "links"] {
                let request = serde_json::json!({"op": op, "text": text, "step": step});
                let response = crate::driver::respond(&request);
                let (fast, plain) = both(&response);
                prop_assert_eq!(fast, plain, "{}", op);
            }
        }
    }
}
