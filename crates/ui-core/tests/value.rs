//! Values: JSON round trips, finite numbers only, forbidden keys, and JavaScript text.

use proptest::prelude::*;
use ui_core::{Budget, Code, FrozenClock, UiLimits, Value, number_text};

fn json(text: &str) -> Value {
    Value::from_json_str(text).unwrap()
}

#[test]
fn number_text_matches_ecmascript() {
    let cases: &[(f64, &str)] = &[
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (-1.0, "-1"),
        (1.5, "1.5"),
        (2.50, "2.5"),
        (100.0, "100"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (9.99e-7, "9.99e-7"),
        (1.23e-18, "1.23e-18"),
        (5e-324, "5e-324"),
        (0.000001, "0.000001"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e20, "100000000000000000000"),
        (-1e21, "-1e+21"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (9007199254740993.0, "9007199254740992"),
        (123.456, "123.456"),
        (-0.5, "-0.5"),
        (1e15, "1000000000000000"),
        (1.2345e16, "12345000000000000"),
        (2.5e-6, "0.0000025"),
    ];
    for &(x, text) in cases {
        assert_eq!(number_text(x), text, "{x:e}");
    }
}

/// Two shortest digit strings equally close to the number: ECMAScript takes the even one
/// (Rust's own shortest formatting takes the odd one for these). Texts from Node.js.
#[test]
// The literals are the doubles exactly (at these magnitudes `.25` and `.75` are exact),
// which is the point: they lie halfway between two shortest texts.
#[allow(clippy::excessive_precision)]
fn number_text_breaks_a_tie_to_the_even_digit() {
    let cases: &[(f64, &str)] = &[
        (1125899906842624.25, "1125899906842624.2"),
        (1125899906842624.75, "1125899906842624.8"),
        (1125899906842625.25, "1125899906842625.2"),
        (-1462468587316101.25, "-1462468587316101.2"),
        (768198919088249.25, "768198919088249.2"),
        (768198919088249.75, "768198919088249.8"),
        // No tie: one candidate is closer, or only one reads back.
        (4503599627370495.5, "4503599627370495.5"),
        (562949953421312.125, "562949953421312.1"),
    ];
    for &(x, text) in cases {
        assert_eq!(number_text(x), text, "{x:e}");
    }
}

#[test]
fn json_round_trips_keep_order() {
    let text = r#"{"z":1,"a":[true,null,"x"],"m":{"k":-2.5}}"#;
    let v = json(text);
    assert_eq!(v.to_js_json(), text);
    assert_eq!(serde_json::to_string(&v).unwrap(), text);
    let keys: Vec<&str> = v.as_record().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["z", "a", "m"]);
    // serde_json::Value conversion both ways.
    let sj: serde_json::Value = (&v).into();
    assert_eq!(Value::from(&sj), v);
}

#[test]
fn integers_serialise_without_fraction() {
    let v = json("[1.0, 2.5, -0.0, 1e21]");
    assert_eq!(serde_json::to_string(&v).unwrap(), "[1,2.5,0,1e+21]");
    // serde_json writes large floats without the `+`; both are the same JSON number.
    assert_eq!(v.to_js_json(), "[1,2.5,0,1e+21]");
}

#[test]
fn non_finite_numbers_are_refused() {
    assert!(Value::from_json_str("1e400").is_err());
    assert!(Value::from_json_str("[-1e999]").is_err());
    assert!(Value::number(f64::NAN).is_none());
    assert!(Value::number(f64::INFINITY).is_none());
    assert!(Value::number(-0.0).is_some());
}

#[test]
fn js_property_order_puts_index_keys_first() {
    let v = json(r#"{"b":1,"10":2,"a":3,"2":4,"01":5,"4294967295":6,"4294967294":7}"#);
    assert_eq!(
        v.to_js_json(),
        r#"{"2":4,"10":2,"4294967294":7,"b":1,"a":3,"01":5,"4294967295":6}"#
    );
}

#[test]
fn js_string_escapes() {
    let v = Value::from("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}/é\u{2028}");
    assert_eq!(
        v.to_js_json(),
        "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f/é\u{2028}\""
    );
}

#[test]
fn byte_length_is_the_compact_js_json() {
    for text in [
        r#"{"a":[1,2.5,"é"],"b":null}"#,
        r#"[1e21, 0.1, "\u0001"]"#,
        r#""🐇""#,
    ] {
        let v = json(text);
        assert_eq!(v.js_json_len(), v.to_js_json().len(), "{text}");
    }
    assert_eq!(json("1e21").js_json_len(), 5);
}

#[test]
fn duplicate_keys_keep_first_position_and_last_value() {
    let v = json(r#"{"a":1,"b":2,"a":3}"#);
    assert_eq!(v.to_js_json(), r#"{"a":3,"b":2}"#);
}

#[test]
fn forbidden_keys_are_refused_when_copied_in() {
    let clock = FrozenClock(0.0);
    for key in ["__proto__", "constructor", "prototype"] {
        let v = json(&format!(r#"[{{"ok": {{"{key}": 1}}}}]"#));
        let mut budget = Budget::new(UiLimits::DEFAULT, &clock);
        assert_eq!(budget.copy_value(&v).unwrap_err().code, Code::RefusedAccess);
    }
}

#[test]
fn truthiness_identity_and_structure() {
    for falsy in ["false", "0", "-0", "\"\"", "null"] {
        assert!(!json(falsy).is_truthy(), "{falsy}");
    }
    for truthy in ["true", "1", "\"0\"", "[]", "{}"] {
        assert!(json(truthy).is_truthy(), "{truthy}");
    }
    let a = json("[1]");
    assert!(a.identical(&a.clone()));
    assert!(!a.identical(&json("[1]")));
    assert_eq!(a, json("[1]"));
    assert!(json("0").identical(&json("-0")));
    assert!(!json("1").identical(&json("\"1\"")));
    assert_eq!(json(r#"{"a":1,"b":2}"#), json(r#"{"b":2,"a":1}"#));
    assert_eq!(json("null").plain_text(), "");
    assert_eq!(json(r#"{"x":[1]}"#).plain_text(), r#"{"x":[1]}"#);
    assert_eq!(json("true").scalar_text().as_deref(), Some("true"));
    assert_eq!(json("[]").scalar_text(), None);
}

proptest! {
    #[test]
    fn number_text_round_trips(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        prop_assume!(x.is_finite());
        let text = number_text(x);
        let back: f64 = text.parse().unwrap();
        prop_assert_eq!(back, if x == 0.0 { 0.0 } else { x });
    }

    #[test]
    fn json_text_parses_back(value in arb_value()) {
        let text = value.to_js_json();
        let back = Value::from_json_str(&text).unwrap();
        prop_assert_eq!(&back, &value);
        prop_assert_eq!(value.js_json_len(), text.len());
    }
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>().prop_filter_map("finite", Value::number),
        ".*".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::array),
            prop::collection::vec(("[a-z0-9]{0,3}", inner), 0..6)
                .prop_map(|entries| Value::record(entries.into_iter().collect())),
        ]
    })
}

#[test]
fn values_convert_from_rust_numbers_and_owned_json() {
    assert_eq!(Value::from(2.5_f64).to_js_json(), "2.5");
    assert_eq!(Value::from(f64::NAN), Value::Null, "as JSON writes it");
    assert_eq!(Value::from(f64::INFINITY), Value::Null);
    assert_eq!(Value::from(-7_i64).to_js_json(), "-7");
    assert_eq!(
        Value::from(9_007_199_254_740_993_u64).to_js_json(),
        "9007199254740992"
    );
    let json = serde_json::json!({"rows": [1, "a", null]});
    assert_eq!(Value::from(json.clone()), Value::from(&json));
}
