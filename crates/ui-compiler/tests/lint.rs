//! The lint fixtures: for every lint, blocks on which it must fire (with its span and fix)
//! and close blocks on which it must stay silent. Lints never change a block's diagnostics.

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

/// A finding as the tests compare it: code, the source text it covers, and the fix as
/// (replaced text, replacement).
type Found = (LintCode, String, Option<(String, String)>);

fn lint_all(source: &str, is_final: bool) -> Vec<Found> {
    let block = compile(source, is_final);
    let before = block.diagnostics.clone();
    let options = LintOptions {
        query_fields: Some(&Fields),
    };
    let lints = lint_block(&block, source, &options);
    assert_eq!(block.diagnostics, before, "lints never touch diagnostics");
    lints
        .into_iter()
        .map(|l| {
            let at = &source[l.bytes.start as usize..l.bytes.end as usize];
            let fix = l.fix.map(|f| {
                (
                    source[f.bytes.start as usize..f.bytes.end as usize].to_owned(),
                    f.text,
                )
            });
            (l.code, at.to_owned(), fix)
        })
        .collect()
}

/// The findings with `code` in a final block that compiles without diagnostics.
fn lints(code: LintCode, source: &str) -> Vec<Found> {
    let block = compile(source, true);
    assert!(
        block.diagnostics.is_empty(),
        "{source}\n{:?}",
        block.diagnostics
    );
    lint_all(source, true)
        .into_iter()
        .filter(|l| l.0 == code)
        .collect()
}

fn at(code: LintCode, text: &str) -> Found {
    (code, text.to_owned(), None)
}

fn fixed(code: LintCode, text: &str, replaced: &str, by: &str) -> Found {
    (
        code,
        text.to_owned(),
        Some((replaced.to_owned(), by.to_owned())),
    )
}

use LintCode::*;

#[test]
fn undeclared_reference_fires() {
    assert_eq!(
        lints(
            UndeclaredReference,
            "$rows = [1]\n<Summary>{@Count($rowz)} rows</Summary>\n"
        ),
        [fixed(UndeclaredReference, "$rowz", "$rowz", "$rows")]
    );
    assert_eq!(
        lints(UndeclaredReference, "<Summary>{$nope}</Summary>\n"),
        [at(UndeclaredReference, "$nope")]
    );
    // A prop expression: the span is the token inside the prop's braces.
    assert_eq!(
        lints(
            UndeclaredReference,
            "$flag = true\n<Switch value={$flga}>On</Switch>\n"
        ),
        [fixed(UndeclaredReference, "$flga", "$flga", "$flag")]
    );
    // An Each local used outside its Each.
    let src = "$items = [1]\n<Each items={$items} as=\"it\"><Tag>{it}</Tag></Each>\n<Summary>{it}</Summary>\n";
    let found = lints(UndeclaredReference, src);
    assert_eq!(found, [at(UndeclaredReference, "it")]);
    let block = compile(src, true);
    let lint = &lint_block(&block, src, &LintOptions::default())[0];
    assert_eq!(lint.bytes.start as usize, src.rfind("{it}").unwrap() + 1);
    // A @Filter predicate reading a name that is not its local.
    assert_eq!(
        lints(
            UndeclaredReference,
            "$t = [1]\n<Summary>{@Count(@Filter($t, item, itme > 1))}</Summary>\n"
        ),
        [fixed(UndeclaredReference, "itme", "itme", "item")]
    );
    // Each occurrence is reported, in source order.
    assert_eq!(
        lints(UndeclaredReference, "<Summary>{$a + $b + $a}</Summary>\n"),
        [
            at(UndeclaredReference, "$a"),
            at(UndeclaredReference, "$b"),
            at(UndeclaredReference, "$a")
        ]
    );
}

#[test]
fn undeclared_reference_stays_silent() {
    for src in [
        // Declared state, a query, Each locals (nested) and a @Filter local.
        "$rows = [{n: 1}]\n<Summary>{@Count(@Filter($rows, r, r.n > 0))}</Summary>\n",
        "$runs = @Query(\"runs\", {})\n<Summary>{@Count($runs)}</Summary>\n",
        "$g = [[1]]\n<Each items={$g} as=\"row\"><Each items={row} as=\"cell\"><Tag>{cell + row.length}</Tag></Each></Each>\n",
        // `$` in plain text, inside a string, as a member key or a record key.
        "<Summary>Costs $nope</Summary>\n",
        "<Summary>{\"$nope\"}</Summary>\n",
        "$r = {a: 1}\n<Summary>{$r.nope}{@Count([{nope: 1}])}</Summary>\n",
        // A query the host does not register is still a declaration (its error is the compile's).
    ] {
        assert_eq!(lints(UndeclaredReference, src), [], "{src}");
    }
    let src = "$q = @Query(\"nowhere\", {})\n<Summary>{@Count($q)}</Summary>\n";
    assert!(
        lint_all(src, true)
            .iter()
            .all(|l| l.0 != UndeclaredReference)
    );
}

#[test]
fn unused_declaration_fires_with_a_fix_that_deletes_the_line() {
    assert_eq!(
        lints(
            UnusedDeclaration,
            "$a = 1\n$b = [\n  2\n]\n<Summary>{$a}</Summary>\n"
        ),
        [fixed(UnusedDeclaration, "$b", "$b = [\n  2\n]\n", "")]
    );
    assert_eq!(
        lints(
            UnusedDeclaration,
            "$runs = @Query(\"runs\", {})\n<Summary>Done</Summary>\n"
        ),
        [fixed(
            UnusedDeclaration,
            "$runs",
            "$runs = @Query(\"runs\", {})\n",
            ""
        )]
    );
}

#[test]
fn unused_declaration_stays_silent() {
    for src in [
        // Bound by a control.
        "$on = false\n<Switch value={$on}>On</Switch>\n",
        // Read only in a query's arguments.
        "$limit = 5\n$runs = @Query(\"runs\", {limit: $limit})\n<Summary>{@Count($runs)}</Summary>\n",
        // Set by an action only.
        "$n = 0\n<Button action={@Set($n, 1)}>One</Button>\n",
        // Read by Each items, a Show condition, a Filter list.
        "$xs = [1]\n<Each items={$xs} as=\"x\"><Tag>{x}</Tag></Each>\n",
        "$on = true\n<Show when={$on}>Hi</Show>\n",
    ] {
        assert_eq!(lints(UnusedDeclaration, src), [], "{src}");
    }
    // A preview still being written: what reads it may not have arrived yet.
    let src = "$a = 1\n<Summary>";
    assert!(
        lint_all(src, false)
            .iter()
            .all(|l| l.0 != UnusedDeclaration)
    );
}

#[test]
fn unlabelled_control_fires() {
    for (src, tag) in [
        ("$on = false\n<Switch value={$on}/>\n", "<Switch"),
        ("$on = false\n<Switch value={$on}> </Switch>\n", "<Switch"),
        ("<Button action={@Reset()}></Button>\n", "<Button"),
        (
            "$s = \"a\"\n<Segmented value={$s}><Option value=\"a\"/></Segmented>\n",
            "<Segmented",
        ),
        ("$v = 1\n<Slider value={$v} min={0} max={5}/>\n", "<Slider"),
        (
            "$l = []\n<Checklist value={$l}><Item value=\"a\"/></Checklist>\n",
            "<Checklist",
        ),
    ] {
        assert_eq!(
            lints(UnlabelledControl, src),
            [at(UnlabelledControl, tag)],
            "{src}"
        );
    }
}

#[test]
fn unlabelled_control_stays_silent() {
    for src in [
        "$on = false\n<Switch value={$on}>Verbose</Switch>\n",
        // A label from an expression.
        "$on = false\n$label = \"Verbose\"\n<Switch value={$on}>{$label}</Switch>\n",
        // Labels in the children's children.
        "$l = []\n<Checklist value={$l}><Item value=\"a\">Alpha</Item></Checklist>\n",
        "$s = \"a\"\n<Segmented value={$s}><Option value=\"a\">A</Option></Segmented>\n",
        "<Button action={@Reset()}>Reset</Button>\n",
    ] {
        assert_eq!(lints(UnlabelledControl, src), [], "{src}");
    }
    // A preview whose control is still open: its label may be on its way.
    let src = "$on = false\n<Switch value={$on}>";
    assert!(
        lint_all(src, false)
            .iter()
            .all(|l| l.0 != UnlabelledControl)
    );
}

#[test]
fn missing_alt() {
    assert_eq!(
        lints(MissingAlt, "<Image attachment=\"a.png\"/>\n"),
        [at(MissingAlt, "<Image")]
    );
    for src in [
        "<Image attachment=\"a.png\" alt=\"The build graph\"/>\n",
        "<Image attachment=\"a.png\">The build graph</Image>\n",
        "$alt = \"graph\"\n<Image attachment=\"a.png\" alt={$alt}/>\n",
    ] {
        assert_eq!(lints(MissingAlt, src), [], "{src}");
    }
}

#[test]
fn constant_condition() {
    assert_eq!(
        lints(ConstantCondition, "<Show when={true}>Hi</Show>\n"),
        [at(ConstantCondition, "{true}")]
    );
    assert_eq!(
        lints(ConstantCondition, "<Show when={false}>Hi</Show>\n"),
        [at(ConstantCondition, "{false}")]
    );
    for src in [
        "$on = true\n<Show when={$on}>Hi</Show>\n",
        "$on = true\n<Show when={!$on}>Hi</Show>\n",
        "$n = 1\n<Show when={$n > 0}>Hi</Show>\n",
    ] {
        assert_eq!(lints(ConstantCondition, src), [], "{src}");
    }
}

#[test]
fn unknown_column_fires() {
    // Literal rows; the fix replaces the key inside its quotes.
    assert_eq!(
        lints(
            UnknownColumn,
            "<Table rows={[{name: \"a\", size: 1}]}><Column key=\"nmae\"/><Column key=\"size\"/></Table>\n"
        ),
        [fixed(UnknownColumn, "\"nmae\"", "nmae", "name")]
    );
    // Rows from a declared default, through @Filter, and through a Show.
    assert_eq!(
        lints(
            UnknownColumn,
            "$rows = [{name: \"a\"}, {owner: \"b\"}]\n<Table rows={@Filter($rows, r, true)}><Show when={$rows.length > 0}><Column key=\"title\"/></Show><Column key=\"owner\"/></Table>\n"
        ),
        [at(UnknownColumn, "\"title\"")]
    );
    // Rows from a query whose source's fields are known.
    assert_eq!(
        lints(
            UnknownColumn,
            "$runs = @Query(\"runs\", {})\n<Table rows={$runs}><Column key=\"state\"/></Table>\n"
        ),
        [fixed(UnknownColumn, "\"state\"", "state", "status")]
    );
}

#[test]
fn unknown_column_stays_silent() {
    for src in [
        // In some row (the union of the fields counts).
        "<Table rows={[{a: 1}, {b: 2}]}><Column key=\"b\"/></Table>\n",
        // A source whose fields are unknown, an expression, empty rows.
        "$h = @Query(\"hosts\", {})\n<Table rows={$h}><Column key=\"anything\"/></Table>\n",
        "$n = 1\n<Table rows={[{a: $n}]}><Column key=\"zzz\"/></Table>\n",
        "<Table rows={[]}><Column key=\"a\"/></Table>\n",
    ] {
        assert_eq!(lints(UnknownColumn, src), [], "{src}");
    }
}

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

#[test]
fn a_block_that_failed_whole_has_no_lints() {
    let src = "$__proto__ = 1\n<Summary>{$nope}</Summary>\n";
    let block = compile(src, true);
    assert_eq!(block.diagnostics.len(), 1);
    assert!(lint_block(&block, src, &LintOptions::default()).is_empty());
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
