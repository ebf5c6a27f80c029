//! Lints through their API. The cases (for every lint, blocks on which it must fire, with
//! its span and fix, and close blocks on which it must stay silent) are the fixtures of
//! `tests/data/lint/`, run by `lint_fixtures.rs`; here stay the byte ranges and the wire
//! shape of a finding, and proptests that findings stay in bounds and in source order.

use ui_compiler::{
    Block, CompileOptions, LintCode, LintOptions, QueryFields, QuerySchemas, compile_block,
    lint_block,
};
use ui_core::{FrozenClock, Value};

static CLOCK: FrozenClock = FrozenClock(0.0);

/// Registers the query sources `runs` and `hosts`, accepting any arguments.
struct Sources;

impl QuerySchemas for Sources {
    fn check(&self, source: &str, _: &Value) -> Option<Result<(), String>> {
        matches!(source, "runs" | "hosts").then_some(Ok(()))
    }
}

/// `runs` rows have `name`, `status` and `seconds`; the fields of `hosts` are unknown.
struct Fields;

impl QueryFields for Fields {
    fn fields(&self, source: &str) -> Option<Vec<String>> {
        (source == "runs").then(|| vec!["name".into(), "status".into(), "seconds".into()])
    }
}

fn compile(source: &str, is_final: bool) -> Block {
    let options = CompileOptions {
        is_final,
        clock: Some(&CLOCK),
        query_schemas: Some(&Sources),
        ..CompileOptions::default()
    };
    compile_block(source, "b", &options)
}

use LintCode::*;

#[test]
fn findings_are_in_source_order_with_utf16_ranges() {
    let src = "$unused = 1\n<Summary>é {$nope}</Summary>\n<Image attachment=\"a\"/>\n";
    let block = compile(src, true);
    let lints = lint_block(&block, src, &LintOptions::default());
    let codes: Vec<LintCode> = lints.iter().map(|l| l.code).collect();
    assert_eq!(codes, [UnusedDeclaration, UndeclaredReference, MissingAlt]);
    let nope = &lints[1];
    assert_eq!(nope.bytes.start as usize, src.find("$nope").unwrap());
    assert_eq!(
        nope.range.start + 1,
        nope.bytes.start,
        "é is 2 bytes, 1 unit"
    );
    let json = serde_json::to_value(nope).unwrap();
    assert_eq!(json["code"], "undeclared_reference");
    assert_eq!(json["start"], nope.range.start);
    assert!(json.get("bytes").is_none());
}

mod never_panics {
    use proptest::prelude::*;

    use super::*;

    /// Pieces of blocks, valid and broken, with multi-byte characters and escapes.
    fn piece() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "$a = 1\n",
            "$rows = [{n: \"é\"}]\n",
            "$q = @Query(\"runs\", {x: $a})\n",
            "<Summary>",
            "</Summary>",
            "<Table rows={$rows}>",
            "<Column key=\"n\"/>",
            "<Column key=\"m\"/>",
            "</Table>",
            "{$a}",
            "{$nope}",
            "{row}",
            "<Each items={$rows} as=\"row\">",
            "</Each>",
            "<Show when={true}>",
            "</Show>",
            "<Switch value={$a}/>",
            "<Image/>",
            "é😀",
            "\\\"",
            "\"",
            "'",
            "{",
            "}",
            "<",
            ">",
            "=",
            "\n",
            " ",
            "@Filter($rows, r, r.n)",
            "{@Count($rowz)}",
            "<Button action={@Set($a, 2)}>",
            "</Button>",
            "<Tag title=\"\\u00e9\">",
        ])
    }

    proptest! {
        #[test]
        fn lints_stay_in_bounds(pieces in prop::collection::vec(piece(), 0..24), is_final: bool) {
            let source: String = pieces.concat();
            let block = compile(&source, is_final);
            let lints = lint_block(&block, &source, &LintOptions { query_fields: Some(&Fields) });
            let units = source.encode_utf16().count() as u32;
            for lint in &lints {
                let b = lint.bytes;
                prop_assert!(b.start <= b.end && b.end as usize <= source.len());
                prop_assert!(source.is_char_boundary(b.start as usize));
                prop_assert!(source.is_char_boundary(b.end as usize));
                prop_assert!(lint.range.start <= lint.range.end && lint.range.end <= units);
                if let Some(fix) = &lint.fix {
                    prop_assert!(source.is_char_boundary(fix.bytes.start as usize));
                    prop_assert!(source.is_char_boundary(fix.bytes.end as usize));
                    prop_assert!(fix.bytes.end as usize <= source.len());
                }
            }
            let starts: Vec<u32> = lints.iter().map(|l| l.bytes.start).collect();
            prop_assert!(starts.windows(2).all(|w| w[0] <= w[1]), "source order");
        }
    }
}

mod stop_token {
    use proptest::prelude::*;
    use ui_compiler::expr::{parse_expression, parse_stop};
    use ui_core::{Budget, UiLimits};

    use super::CLOCK;

    proptest! {
        /// The stop is inside the source on character boundaries, and there is one exactly
        /// when the parse fails (for sources well within the budget).
        #[test]
        fn parse_stop_agrees_with_parse_expression(
            source in "[$@a-z0-9 .,:!+*/%<>=()\\[\\]{}\"'\\\\é😀-]{0,24}"
        ) {
            let mut budget = Budget::new(UiLimits::DEFAULT, &CLOCK);
            let parsed = parse_expression(&source, &mut budget);
            let mut budget = Budget::new(UiLimits::DEFAULT, &CLOCK);
            let stop = parse_stop(&source, &mut budget);
            prop_assert_eq!(parsed.is_ok(), stop.is_none(), "{:?} {:?}", parsed, stop);
            if let Some(stop) = stop {
                prop_assert!(stop.start <= stop.end && stop.end <= source.len());
                prop_assert!(source.is_char_boundary(stop.start));
                prop_assert!(source.is_char_boundary(stop.end));
            }
        }
    }

    #[test]
    fn stops_at_the_failing_token() {
        let cases = [
            ("$a + * 2", "*"),
            ("$a 2", "2"),
            ("($a ] 2", "]"),
            ("@Nope(1)", "@Nope"),
            ("{a: 1, a: 2}", "a"),
            ("$a.$b", "$b"),
            ("[1, 2", ""),
            ("$a # 1", "#"),
            ("\"abc", "\"abc"),
            ("1e999", "1e999"),
        ];
        for (source, token) in cases {
            let mut budget = Budget::new(UiLimits::DEFAULT, &CLOCK);
            let stop = parse_stop(source, &mut budget).unwrap();
            assert_eq!(&source[stop], token, "{source}");
        }
    }
}
