//! Robustness of the whole compiler stack (`language.md` §3, §5–§9, §17, §19): no input
//! panics the fence scanner, the parser/compiler or the evaluator; limits hold with
//! `budget_exceeded` as the block's diagnostic; every streaming prefix of the conformance
//! corpus compiles within the budget with stable node ids; incremental compiles equal fresh
//! ones; and every committed fuzz seed (`fuzz/seeds/*/`) replays through the same checks the
//! fuzz targets run (`fuzz/src/lib.rs`, included below as `fuzz_paths`).
//!
//! Property tests use generators biased to the block grammar (catalog and unknown tags,
//! quoted and braced props, `{expr}` text, declarations, `@Query`, helpers, non-BMP text,
//! CRLF, unbalanced braces and quotes) as well as arbitrary strings. Case counts are kept
//! moderate so the file runs in seconds in a debug build.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::select;
use ui_compiler::expr::{evaluate, parse_expression};
use ui_compiler::{
    Block, CompileOptions, QuerySchemas, UiCompiler, UiState, compile_block, compile_reply,
    evaluate_block, scan_fences,
};
use ui_core::text::{is_js_whitespace, trim_js, utf16_len};
use ui_core::{Code, FrozenClock, UiLimits, Value, catalog};

/// The checks the fuzz targets run, shared so that seeds replay through the same code.
#[allow(unreachable_pub)]
#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_paths;

static CLOCK: FrozenClock = FrozenClock(0.0);

// ---------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------

/// The query sources the conformance host registers (`hosts.json`); every argument record
/// is accepted, so corpus queries compile instead of failing `unknown_query`.
struct HostSources(Vec<String>);

impl QuerySchemas for HostSources {
    fn check(&self, source: &str, _args: &Value) -> Option<Result<(), String>> {
        self.0.iter().any(|s| s == source).then_some(Ok(()))
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/conformance")
}

fn host_sources() -> HostSources {
    let text = fs::read_to_string(corpus_dir().join("hosts.json")).expect("hosts.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("hosts.json is JSON");
    let names = json["querySchemas"]
        .as_object()
        .expect("querySchemas")
        .keys()
        .cloned()
        .collect();
    HostSources(names)
}

/// One corpus reply with the settings of its `.input.json`.
struct Case {
    name: String,
    text: String,
    fence_language: String,
    latest_attachment: Option<String>,
}

fn corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    for entry in fs::read_dir(corpus_dir()).expect("corpus dir") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".md") else {
            continue;
        };
        if stem == "README" {
            continue;
        }
        let input = corpus_dir().join(format!("{stem}.input.json"));
        let input: serde_json::Value = fs::read_to_string(&input)
            .map(|t| serde_json::from_str(&t).expect("input.json is JSON"))
            .unwrap_or(serde_json::Value::Null);
        cases.push(Case {
            name: stem.to_owned(),
            text: fs::read_to_string(&path).expect("reply text"),
            fence_language: input["fenceLanguage"].as_str().unwrap_or("ui").to_owned(),
            latest_attachment: input["latestAttachment"].as_str().map(str::to_owned),
        });
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(
        cases.iter().filter(|c| c.name.starts_with("ok-")).count() >= 20,
        "the corpus should hold the ok-* replies"
    );
    cases
}

fn options<'a>(case: &Case, hosts: &'a HostSources, is_final: bool) -> CompileOptions<'a> {
    CompileOptions {
        id: "reply".to_owned(),
        is_final,
        fence_language: case.fence_language.clone(),
        latest_attachment: case.latest_attachment.clone(),
        query_schemas: Some(hosts),
        clock: Some(&CLOCK),
        ..CompileOptions::default()
    }
}

fn default_options(is_final: bool) -> CompileOptions<'static> {
    CompileOptions {
        id: "reply".to_owned(),
        is_final,
        clock: Some(&CLOCK),
        ..CompileOptions::default()
    }
}

/// Every char boundary of `text` from 0 to `len`, or every `stride`-th one (plus `len`).
fn cuts(text: &str, stride: usize) -> Vec<usize> {
    let mut out: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .step_by(stride.max(1))
        .collect();
    out.push(text.len());
    out
}

fn codes(block: &Block) -> Vec<Code> {
    block.diagnostics.iter().map(|d| d.code).collect()
}

fn has_budget_failure(block: &Block) -> bool {
    block
        .diagnostics
        .iter()
        .any(|d| d.code == Code::BudgetExceeded)
}

/// Whether `node`, the last node of a streaming prefix, may legitimately be gone from the
/// final block: a whitespace-only run without a line break (§9 quirk), or a trailing text
/// run that is only the start of the closing fence line (`` ` `` or ``` `` ```): until the
/// line holds three markers it is content of the still-open fence (§3.2–§3.4).
fn may_vanish(node: &ui_compiler::Node, len16: u32) -> bool {
    if fuzz_paths::may_vanish(node, len16) {
        return true;
    }
    node.is_text()
        && node.end == len16
        && node.expressions.is_empty()
        && node
            .props
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| {
                let last_line = t.rsplit('\n').next().unwrap_or(t);
                let marks = last_line.trim_start_matches(' ');
                t.contains('\n')
                    && trim_js(&t[..t.len() - last_line.len()]).is_empty()
                    && !marks.is_empty()
                    && (marks.chars().all(|c| c == '`') || marks.chars().all(|c| c == '~'))
            })
}

fn compile_one(source: &str, is_final: bool) -> Block {
    compile_block(source, "b", &default_options(is_final))
}

fn assert_budget_exceeded(block: &Block, what: &str) {
    assert_eq!(
        codes(block),
        [Code::BudgetExceeded],
        "{what}: expected exactly one budget_exceeded"
    );
    assert!(
        block.nodes.is_empty(),
        "{what}: a budget failure drops the nodes"
    );
    assert!(
        !block.fallback.is_empty(),
        "{what}: the fallback is the bounded source"
    );
}

// ---------------------------------------------------------------------------------------
// generators
// ---------------------------------------------------------------------------------------

fn tag_names() -> Vec<String> {
    let mut names: Vec<String> = catalog::components()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    names.extend(
        [
            "Foo",
            "summary",
            "X9",
            "Sum",
            "Stat",
            "Script",
            "Each",
            "Show",
            "CodeBlock",
        ]
        .map(str::to_owned),
    );
    names
}

fn prop_names() -> Vec<String> {
    let mut names: HashSet<String> = catalog::components()
        .iter()
        .flat_map(|c| c.props().iter().map(|p| p.name().to_owned()))
        .collect();
    names.extend(["action", "onClick", "__proto__", "constructor", "x_1"].map(str::to_owned));
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort();
    names
}

/// Text with ASCII, accents, non-BMP characters, odd whitespace, CR and LF.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,:;!?é🐇𝄞\u{a0}\u{2028}\u{feff}\u{85}\t\r\n$}>=\\\\]{0,12}"
}

fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        (0u32..2000).prop_map(|n| n.to_string()),
        select(vec![
            "1.5e3", "0.1", "-0", "1e400", "true", "false", "null", "0x1f"
        ])
        .prop_map(str::to_owned),
        "[a-z é🐇]{0,6}".prop_map(|s| format!("\"{s}\"")),
        select(vec![
            r#""\u00e9\n\t""#,
            r#""\ud83d\udc07""#,
            r#""\ud800""#,
            "'it''s'",
            r#""\q""#
        ])
        .prop_map(str::to_owned),
        select(vec![
            "$n",
            "$s",
            "$l",
            "$rows",
            "$x",
            "$missing",
            "row",
            "item",
            "$__proto__",
            "length",
        ])
        .prop_map(str::to_owned),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (
                inner.clone(),
                select(vec![
                    "+", "-", "*", "/", "%", "==", "!=", "===", "!==", "<", "<=", ">", ">=", "&&",
                    "||", "??", "=",
                ]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.clone().prop_map(|a| format!("!{a}")),
            inner.clone().prop_map(|a| format!("-{a}")),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(("[a-z_]{1,4}|\"[a-z ]{0,3}\"", inner.clone()), 0..3).prop_map(
                |v| {
                    let entries: Vec<String> = v.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    format!("{{{}}}", entries.join(", "))
                }
            ),
            (inner.clone(), "[a-z]{1,6}").prop_map(|(a, k)| format!("{a}.{k}")),
            (inner.clone(), inner.clone()).prop_map(|(a, k)| format!("{a}[{k}]")),
            (
                select(vec![
                    "Count", "Filter", "Sum", "Join", "Round", "Query", "Set", "Reset", "Eval"
                ]),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(h, args)| format!("@{h}({})", args.join(", "))),
            (inner.clone(), inner.clone()).prop_map(|(a, p)| format!("@Filter({a}, row, {p})")),
            (inner.clone(), 0u8..9).prop_map(|(a, d)| format!("@Round({a}, {d})")),
            // A cut-off expression: unbalanced brackets and quotes.
            (inner, any::<prop::sample::Index>()).prop_map(|(a, at)| {
                let cut = fuzz_paths::floor_boundary(&a, at.index(a.len() + 1));
                a[..cut].to_owned()
            }),
        ]
    })
}

fn prop_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9 é🐇\\-_/.]{0,10}".prop_map(|s| format!("\"{s}\"")),
        1 => select(vec![r#""a\"b""#, r#""\u00e9""#, r#""\x""#, "'single'", r#""open"#, r#""back\"#, "'"])
            .prop_map(str::to_owned),
        3 => expression().prop_map(|e| format!("{{{e}}}")),
        1 => expression().prop_map(|e| format!("{{{e}")),
        1 => Just("bare".to_owned()),
    ]
}

fn open_tag() -> impl Strategy<Value = String> {
    (
        select(tag_names()),
        prop::collection::vec(
            (
                select(prop_names()),
                select(vec!["=", " = ", "\n=", " ", ""]),
                prop_value(),
            ),
            0..4,
        ),
        select(vec![">", "/>", "", " ", "\n>", " / >", "/"]),
    )
        .prop_map(|(name, props, end)| {
            let mut out = format!("<{name}");
            for (prop, eq, value) in props {
                out.push(' ');
                out.push_str(&prop);
                out.push_str(eq);
                out.push_str(&value);
            }
            out.push_str(end);
            out
        })
}

fn declaration() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => ("[a-z_][a-z0-9_]{0,5}", expression()).prop_map(|(n, e)| format!("${n} = {e}\n")),
        1 => ("[a-z]{1,4}", "[a-z.]{1,8}", expression())
            .prop_map(|(n, s, e)| format!("${n} = @Query(\"{s}\", {{arg: {e}}})\n")),
        1 => select(vec!["$\n", "$1 = 2\n", "$__proto__ = 1\n", "$a\n= [1,\n2]\n", "$s = \"open\n"])
            .prop_map(str::to_owned),
    ]
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => open_tag(),
        2 => select(tag_names()).prop_map(|n| format!("</{n}>")),
        3 => expression().prop_map(|e| format!("{{{e}}}")),
        3 => text(),
        1 => text().prop_map(|t| format!("<CodeBlock language=\"rs\">{t}<b>{{x}}</CodeBlock>")),
        1 => select(vec![
            "<", "</", "{", "}", "\"", "'", "\\", "/>", ">", "$", "<!--", "< b", "5 < 6", "\r\n",
            "\n", "```", "```ui\n", "~~~\n", "</ Tag>", "<X / >",
        ])
        .prop_map(str::to_owned),
    ]
}

/// A block body: declarations, then a body of grammar pieces.
fn block_source() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(declaration(), 0..3),
        prop::collection::vec(piece(), 0..14),
    )
        .prop_map(|(decls, body)| decls.concat() + &body.concat())
}

/// A reply: prose and one to three fences (some unclosed, tilde, long, CRLF, indented).
fn reply() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            text(),
            select(vec![
                "```ui\n",
                "~~~ui\n",
                "````ui\n",
                "   ```ui\n",
                "```ui\r\n",
                "``` ui \n",
                "```UI\n",
                "```md\n",
            ]),
            block_source(),
            select(vec!["\n```\n", "\n~~~\n", "\n````\n", "", "\n```", "\n``"]),
        ),
        1..4,
    )
    .prop_map(|parts| {
        let mut out = String::new();
        for (prose, open, body, close) in parts {
            out.push_str(&prose);
            out.push('\n');
            out.push_str(open);
            out.push_str(&body);
            out.push_str(close);
        }
        out
    })
}

/// Compiles `reply` (final) with default limits and evaluates every block with a fresh
/// state: the evaluator must not panic and keeps its diagnostic cap.
fn compile_and_evaluate_default(reply: &str) {
    for block in compile_reply(reply, &default_options(true)) {
        let Ok(state) = UiState::new(&block, UiLimits::DEFAULT) else {
            continue;
        };
        match evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&CLOCK)) {
            Ok(view) => assert!(view.diagnostics.len() <= 20),
            Err(f) => assert_eq!(f.code, Code::BudgetExceeded),
        }
    }
}

// ---------------------------------------------------------------------------------------
// no panics
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fence_scan_never_panics_on_arbitrary_text(text in any::<String>()) {
        fuzz_paths::fence_scan(&text);
    }

    #[test]
    fn fence_scan_never_panics_on_replies(text in reply()) {
        fuzz_paths::fence_scan(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn compiler_never_panics_on_grammar_like_blocks(source in block_source()) {
        fuzz_paths::parse_compile(&source);
        for is_final in [false, true] {
            let block = compile_one(&source, is_final);
            prop_assert!(block.diagnostics.len() <= 20);
        }
    }

    #[test]
    fn compiler_never_panics_on_arbitrary_text(source in any::<String>()) {
        fuzz_paths::parse_compile(&source);
    }

    #[test]
    fn reply_compiler_never_panics(text in reply()) {
        for is_final in [false, true] {
            let blocks = UiCompiler::new().compile(&text, &default_options(is_final));
            fuzz_paths::check_reply(&blocks, &text, &default_options(is_final));
        }
    }

    #[test]
    fn evaluator_never_panics(text in reply()) {
        fuzz_paths::compile_evaluate(&text);
        compile_and_evaluate_default(&text);
    }

    #[test]
    fn expressions_never_panic(source in expression()) {
        fuzz_paths::compile_evaluate(&source);
    }
}

// ---------------------------------------------------------------------------------------
// the conformance corpus, prefix by prefix
// ---------------------------------------------------------------------------------------

/// Every prefix of every `bad-*` corpus reply compiles (streaming, frozen clock, default
/// limits) without panicking and within the diagnostic cap. Replies of more than 4,000
/// characters (`bad-31`) are cut at every 64th character only. (`ok-*`: the next test.)
#[test]
fn corpus_prefixes_compile_without_panic() {
    let hosts = host_sources();
    let mut checked = 0;
    for case in corpus().iter().filter(|c| !c.name.starts_with("ok-")) {
        let options = options(case, &hosts, false);
        let stride = if case.text.chars().count() > 4_000 {
            64
        } else {
            1
        };
        for cut in cuts(&case.text, stride) {
            let prefix = &case.text[..cut];
            let blocks = compile_reply(prefix, &options);
            fuzz_paths::check_reply(&blocks, prefix, &options);
            checked += 1;
        }
    }
    assert!(checked > 3_000, "only {checked} prefixes checked");
}

/// §8 and §9 on every prefix of every `ok-*` reply (streaming, frozen clock, default
/// limits): no prefix exceeds the budget, and every node of the streaming compile keeps its
/// id in the final compile of the whole reply — except the documented vanishing nodes
/// (whitespace-only trailing text; a trailing partial closing fence line).
#[test]
fn ok_prefixes_stay_within_budget_and_keep_node_ids() {
    let hosts = host_sources();
    let mut checked = 0;
    for case in corpus().iter().filter(|c| c.name.starts_with("ok-")) {
        let full = compile_reply(&case.text, &options(case, &hosts, true));
        assert!(!full.is_empty(), "{}: no block found", case.name);
        let mut final_ids = HashSet::new();
        for block in &full {
            assert!(
                !has_budget_failure(block),
                "{}: {:?}",
                case.name,
                codes(block)
            );
            block.walk(&mut |n| {
                final_ids.insert(n.id.clone());
            });
        }
        let options = options(case, &hosts, false);
        for cut in cuts(&case.text, 1) {
            let prefix = &case.text[..cut];
            for block in compile_reply(prefix, &options) {
                assert!(
                    !has_budget_failure(&block),
                    "{}: the {cut}-byte prefix exceeds the budget: {:?}",
                    case.name,
                    block.diagnostics
                );
                let source_len16 = source_len16(prefix, &case.fence_language, &block);
                block.walk(&mut |n| {
                    assert!(
                        final_ids.contains(&n.id) || may_vanish(n, source_len16),
                        "{}: node {} ({}, {:?}) of the {cut}-byte prefix is not in the final block",
                        case.name,
                        n.id,
                        n.kind,
                        n.props.get("text"),
                    );
                });
            }
            checked += 1;
        }
    }
    assert!(checked > 10_000, "only {checked} prefixes checked");
}

/// The UTF-16 length of the source of `block` (a block of a compile of `reply`).
fn source_len16(reply: &str, language: &str, block: &Block) -> u32 {
    for f in scan_fences(reply, language) {
        if utf16_len(&reply[..f.start]) as u32 == block.start {
            return utf16_len(&reply[f.code_start..f.code_end]) as u32;
        }
    }
    panic!("no fence at {}", block.start)
}

/// §17.1: feeding growing prefixes to one `UiCompiler` gives the same blocks as a fresh
/// `compile_reply` of each prefix; unchanged closed fences are reused as the same `Arc`.
#[test]
fn incremental_compiles_equal_fresh_compiles() {
    let hosts = host_sources();
    let mut reused = 0;
    for case in corpus() {
        let stride = if case.text.len() > 4_000 { 64 } else { 4 };
        let options = options(&case, &hosts, false);
        let mut compiler = UiCompiler::new();
        let mut previous: BTreeMap<u32, Arc<Block>> = BTreeMap::new();
        for cut in cuts(&case.text, stride) {
            let prefix = &case.text[..cut];
            let incremental = compiler.compile(prefix, &options);
            let fresh = compile_reply(prefix, &options);
            assert_eq!(incremental.len(), fresh.len(), "{} at {cut}", case.name);
            for (a, b) in incremental.iter().zip(&fresh) {
                assert_eq!(**a, *b, "{} at {cut}", case.name);
                if let Some(p) = previous.get(&a.start)
                    && Arc::ptr_eq(p, a)
                {
                    reused += 1;
                }
            }
            previous = incremental
                .iter()
                .map(|b| (b.start, Arc::clone(b)))
                .collect();
        }
        // The final call recompiles everything and still equals a fresh compile.
        let options = CompileOptions {
            is_final: true,
            ..options
        };
        let last = compiler.compile(&case.text, &options);
        let fresh = compile_reply(&case.text, &options);
        assert_eq!(last.len(), fresh.len());
        for (a, b) in last.iter().zip(&fresh) {
            assert_eq!(**a, *b, "{} final", case.name);
        }
    }
    assert!(reused > 100, "closed fences should be reused ({reused})");
}

/// Limits tight enough that budget failures (steps, nodes, iterations, depth, characters)
/// and the diagnostic cap happen in the middle of a stream.
fn tight_limits() -> impl Strategy<Value = UiLimits> {
    (
        20u64..2_500,
        2u64..80,
        2u64..200,
        1u64..6,
        1u64..8,
        40u64..1_500,
    )
        .prop_map(
            |(steps, nodes, iterations, diagnostics, depth, characters)| {
                [
                    ("steps", steps),
                    ("nodes", nodes),
                    ("iterations", iterations),
                    ("diagnostics", diagnostics),
                    ("depth", depth),
                    ("characters", characters),
                ]
                .into_iter()
                .try_fold(UiLimits::DEFAULT, |l, (k, v)| l.with(k, v))
                .unwrap()
            },
        )
}

/// A reply streamed in chunks: one fence (closed or not, prose after it) or several.
fn streamed_reply() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            block_source(),
            select(vec!["", "\n```\n", "\n```\nAfter.", "\n``"])
        )
            .prop_map(|(body, close)| format!("Before.\n```ui\n{body}{close}")),
        reply(),
    ]
}

/// Byte cuts of `text` after chunks of the given sizes (in chars, repeated until the end).
fn chunk_cuts(text: &str, chunks: &[usize]) -> Vec<usize> {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let mut out = Vec::new();
    let mut at = 0;
    for size in chunks.iter().cycle() {
        at += size;
        if at >= bounds.len() {
            break;
        }
        out.push(bounds[at]);
    }
    out.push(text.len());
    out
}

fn assert_same_blocks(
    incremental: &[Arc<Block>],
    fresh: &[Block],
    what: &str,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(incremental.len(), fresh.len(), "{}", what);
    for (a, b) in incremental.iter().zip(fresh) {
        prop_assert_eq!(
            serde_json::to_value(&**a).unwrap(),
            serde_json::to_value(b).unwrap(),
            "{}",
            what
        );
        prop_assert_eq!(&**a, b, "{}", what);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// §17.1 with the resumed compile of a growing fence: a reply streamed in random
    /// chunks through one `UiCompiler`, under default or tight random limits (so that
    /// budget failures and the diagnostic cap happen mid-stream), gives at every preview
    /// and at the final call exactly the blocks of a fresh compile (wire JSON and byte
    /// ranges). Previous previews are kept alive or dropped, so reused nodes are cloned
    /// or moved; once the reply goes back to an earlier prefix.
    #[test]
    fn streamed_chunks_compile_like_fresh_compiles(
        text in streamed_reply(),
        chunks in prop::collection::vec(1usize..24, 1..16),
        limits in prop_oneof![1 => Just(UiLimits::DEFAULT), 3 => tight_limits()],
        keep_previews in any::<bool>(),
        latest in prop::collection::vec(any::<bool>(), 1..4),
        rewind in any::<prop::sample::Index>(),
    ) {
        let mut options = default_options(false);
        options.limits = limits;
        let mut compiler = UiCompiler::new();
        let mut kept = Vec::new();
        // Once, the reply goes back to an earlier prefix (a different reply for the cache).
        let mut cuts = chunk_cuts(&text, &chunks);
        let back = rewind.index(cuts.len());
        cuts.insert(back, cuts[back / 2]);
        for (n, cut) in cuts.into_iter().enumerate() {
            let prefix = &text[..cut];
            // `latest_attachment` changes now and then (it is part of what a resume needs).
            options.latest_attachment = latest[n % latest.len()].then(|| "att-1".to_owned());
            let incremental = compiler.compile(prefix, &options);
            let fresh = compile_reply(prefix, &options);
            assert_same_blocks(&incremental, &fresh, &format!("preview at {cut}"))?;
            if keep_previews {
                kept.push(incremental);
            }
        }
        options.is_final = true;
        let last = compiler.compile(&text, &options);
        assert_same_blocks(&last, &compile_reply(&text, &options), "final")?;
        // A second final call (nothing changed) recompiles and still agrees.
        drop(last);
        let again = compiler.compile(&text, &options);
        assert_same_blocks(&again, &compile_reply(&text, &options), "final again")?;
    }

    /// The same with the replies of the conformance corpus (real blocks, deep nesting).
    #[test]
    fn streamed_corpus_replies_compile_like_fresh_compiles(
        case in any::<prop::sample::Index>(),
        chunks in prop::collection::vec(1usize..48, 1..16),
        limits in prop_oneof![1 => Just(UiLimits::DEFAULT), 3 => tight_limits()],
        keep_previews in any::<bool>(),
    ) {
        static CORPUS: std::sync::LazyLock<(Vec<Case>, HostSources)> =
            std::sync::LazyLock::new(|| (corpus(), host_sources()));
        let (cases, hosts) = &*CORPUS;
        let case = &cases[case.index(cases.len())];
        let mut options = options(case, hosts, false);
        options.limits = limits;
        let mut compiler = UiCompiler::new();
        let mut kept = Vec::new();
        for cut in chunk_cuts(&case.text, &chunks) {
            let prefix = &case.text[..cut];
            let incremental = compiler.compile(prefix, &options);
            let fresh = compile_reply(prefix, &options);
            assert_same_blocks(&incremental, &fresh, &format!("{} at {cut}", case.name))?;
            if keep_previews {
                kept.push(incremental);
            }
        }
        options.is_final = true;
        let last = compiler.compile(&case.text, &options);
        assert_same_blocks(&last, &compile_reply(&case.text, &options), "final")?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every prefix, one character at a time, of a fence of grammar-like tags (props
    /// quoted, braced, cut off, with and without whitespace, nested): each preview through
    /// one `UiCompiler` resumes from its checkpoint and still equals a fresh compile, so a
    /// tag cut off anywhere inside its opening (§7.1 steps 3–5) ends where a fresh compile
    /// ends it.
    #[test]
    fn every_prefix_of_cut_off_tags_compiles_like_a_fresh_compile(
        body in prop::collection::vec(prop_oneof![3 => open_tag(), 1 => piece()], 1..10),
        limits in prop_oneof![3 => Just(UiLimits::DEFAULT), 1 => tight_limits()],
    ) {
        let text = format!("Before.\n```ui\n{}", body.concat());
        let mut options = default_options(false);
        options.limits = limits;
        let mut compiler = UiCompiler::new();
        for cut in cuts(&text, 1) {
            let prefix = &text[..cut];
            let incremental = compiler.compile(prefix, &options);
            let fresh = compile_reply(prefix, &options);
            assert_same_blocks(&incremental, &fresh, &format!("preview at {cut}"))?;
        }
    }
}

// ---------------------------------------------------------------------------------------
// adversarial inputs and limits
// ---------------------------------------------------------------------------------------

#[test]
fn nesting_beyond_the_depth_limit_fails_the_block() {
    // 32 open tags are allowed; the 33rd fails when anything follows it (§5).
    let at_limit = "<A>".repeat(32) + "x";
    assert!(!has_budget_failure(&compile_one(&at_limit, false)));
    let over = "<A>".repeat(33) + "x";
    assert_budget_exceeded(&compile_one(&over, false), "33 nested tags");
    let deep = "<Show when={true}>".repeat(40) + "deep" + &"</Show>".repeat(40);
    assert_budget_exceeded(&compile_one(&deep, true), "40 nested Show");
}

#[test]
fn deeply_nested_parentheses_fail_the_block() {
    let nested = |n: usize| format!("{{{}1{}}}", "(".repeat(n), ")".repeat(n));
    assert_budget_exceeded(&compile_one(&nested(40), true), "40 parens");
    let declaration = format!("$x = {}1{}\n{{$x}}", "(".repeat(40), ")".repeat(40));
    assert_budget_exceeded(
        &compile_one(&declaration, true),
        "40 parens in a declaration",
    );
    let few = compile_one(&nested(10), true);
    assert!(codes(&few).is_empty(), "{:?}", codes(&few));
}

#[test]
fn huge_array_literal_fails_the_block() {
    let items = vec!["0"; 600].join(",");
    assert_budget_exceeded(&compile_one(&format!("{{[{items}]}}"), true), "600 items");
    assert_budget_exceeded(
        &compile_one(&format!("$a = [{items}]\n<Summary>x</Summary>"), true),
        "600-item default",
    );
}

#[test]
fn long_text_run_fails_the_block() {
    assert_budget_exceeded(&compile_one(&"a".repeat(30_000), true), "30,000 chars");
    // Non-BMP characters count two units each (§2.2).
    assert_budget_exceeded(&compile_one(&"🐇".repeat(10_001), false), "non-BMP text");
    // A CodeBlock body costs no steps.
    let code = format!("<CodeBlock>{}</CodeBlock>", "a".repeat(30_000));
    assert!(!has_budget_failure(&compile_one(&code, true)));
    // Over `characters` the block fails before parsing.
    assert_budget_exceeded(&compile_one(&"<A/>".repeat(16_385), true), "65,540 chars");
}

#[test]
fn huge_string_prop_fails_the_block() {
    let source = format!("<Summary tone=\"{}\">x</Summary>", "a".repeat(20_000));
    for is_final in [false, true] {
        assert_budget_exceeded(&compile_one(&source, is_final), "20,000-char prop");
    }
    // Still open while streaming: the partial prop is parsed too.
    let open = format!("<Summary tone=\"{}", "a".repeat(20_000));
    assert_budget_exceeded(&compile_one(&open, false), "open 20,000-char prop");
}

#[test]
fn many_text_expressions_fail_the_block() {
    assert_budget_exceeded(&compile_one(&"{1}".repeat(10_000), true), "10,000 {1}");
    assert_budget_exceeded(&compile_one(&"{1}".repeat(10_000), false), "streaming");
}

#[test]
fn join_over_big_arrays_exceeds_the_budget() {
    let item = "\"aaaaaaaaaa\"";
    let items = vec![item; 100].join(", ");
    // At compile time the text expression is evaluated with the defaults (§19.2).
    let source = format!("$items = [{items}]\n<Summary>{{@Join($items, \", \")}}</Summary>");
    assert_budget_exceeded(&compile_one(&source, true), "@Join at compile time");
    assert_budget_exceeded(
        &compile_one(&format!("{{@Join([{items}], \"\")}}"), true),
        "@Join of a literal",
    );

    // Compiled with a generous budget, the evaluation's own budget trips instead.
    let roomy = UiLimits::DEFAULT
        .with("steps", 1_000_000)
        .unwrap()
        .with("iterations", 100_000)
        .unwrap();
    let options = CompileOptions {
        limits: roomy,
        is_final: true,
        ..default_options(true)
    };
    let block = compile_block(&source, "b", &options);
    assert!(codes(&block).is_empty(), "{:?}", codes(&block));
    let state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&CLOCK)).unwrap();
    let view_codes: Vec<Code> = view.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(view_codes, [Code::BudgetExceeded]);
    assert!(view.diagnostics[0].node_id.is_some());
}

#[test]
fn diagnostics_are_capped_at_twenty() {
    for (n, want) in [(19, 19), (20, 20), (21, 20), (60, 20)] {
        let parser = compile_one(&"< b\n".repeat(n), true);
        assert_eq!(codes(&parser), vec![Code::InvalidTag; want], "{n} bad tags");
        let unknown = compile_one(&"<Foo/>".repeat(n), true);
        assert_eq!(
            codes(&unknown),
            vec![Code::UnknownComponent; want],
            "{n} unknown tags"
        );
    }
    // Parser and compiler share the cap.
    let mixed = compile_one(&"< b\n<Foo/>\n".repeat(15), true);
    assert_eq!(mixed.diagnostics.len(), 20);
}

#[test]
fn adversarial_replies_end_within_the_budget() {
    let nested = format!("```ui\n{}x\n```\n", "<A>".repeat(100));
    let wide = format!("```ui\n{}\n```\n", "{1}".repeat(10_000));
    let text = format!("{nested}{wide}{}", "```ui\n<Foo/>\n```\n".repeat(20));
    let blocks = compile_reply(&text, &default_options(true));
    assert_eq!(blocks.len(), 16, "a reply keeps at most 16 blocks");
    assert_eq!(codes(&blocks[0]), [Code::BudgetExceeded]);
    assert_eq!(codes(&blocks[1]), [Code::BudgetExceeded]);
    // The 17th fence is refused on the 16th block (§17.2).
    assert_eq!(
        codes(&blocks[15]),
        [Code::UnknownComponent, Code::BudgetExceeded]
    );
    compile_and_evaluate_default(&text);
}

// ---------------------------------------------------------------------------------------
// fuzz seeds and dictionary
// ---------------------------------------------------------------------------------------

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Replays every committed seed of `fuzz/seeds/<target>/` through the target's checks.
#[test]
fn fuzz_seeds_replay() {
    let mut replayed = BTreeMap::new();
    for dir in fs::read_dir(fuzz_dir().join("seeds")).expect("fuzz/seeds") {
        let dir = dir.unwrap().path();
        let target = dir.file_name().unwrap().to_string_lossy().into_owned();
        let run: fn(&str) = match target.as_str() {
            "fence_scan" => fuzz_paths::fence_scan,
            "parse_compile" => fuzz_paths::parse_compile,
            "compile_evaluate" => fuzz_paths::compile_evaluate,
            other => panic!("seeds for unknown fuzz target `{other}`"),
        };
        for seed in fs::read_dir(&dir).unwrap() {
            let path = seed.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = fs::read(&path).unwrap();
            // libFuzzer's `&str` targets skip inputs that are not UTF-8.
            if let Ok(text) = std::str::from_utf8(&bytes) {
                run(text);
                *replayed.entry(target.clone()).or_insert(0) += 1;
            }
            if name.starts_with("expr-") {
                // Expression seeds are valid: they reach the evaluator, not the lexer's errors.
                let text = String::from_utf8(bytes).unwrap();
                let mut budget = ui_core::Budget::new(UiLimits::DEFAULT, &CLOCK);
                let expr = parse_expression(&text, &mut budget)
                    .unwrap_or_else(|f| panic!("seed {name}: {f}"));
                let value = evaluate(&expr, &fuzz_paths::variables(), &mut budget);
                assert!(value.is_ok(), "seed {name}: {value:?}");
            }
        }
    }
    for target in ["fence_scan", "parse_compile", "compile_evaluate"] {
        let n = replayed.get(target).copied().unwrap_or(0);
        assert!(n >= 40, "only {n} seeds for {target}");
    }
}

/// The dictionary parses as libFuzzer reads it and names every catalog component.
#[test]
fn fuzz_dictionary_covers_the_catalog() {
    let dict = fs::read_to_string(fuzz_dir().join("ui.dict")).expect("fuzz/ui.dict");
    let mut entries = HashSet::new();
    for line in dict.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let quoted = line.find('"').map(|i| &line[i..]).expect("a quoted entry");
        assert!(
            quoted.len() >= 2 && quoted.ends_with('"'),
            "bad dictionary line {line:?}"
        );
        entries.insert(unescape_dict(&quoted[1..quoted.len() - 1]));
    }
    for component in catalog::components() {
        let tag = format!("<{}", component.name());
        assert!(entries.contains(&tag), "ui.dict lacks {tag}");
    }
    for token in [
        "@Count(", "@Filter(", "@Sum(", "@Join(", "@Round(", "@Query(", "@Set(", "@Reset(", "$",
        "{", "}", "</", "/>", "```ui\n",
    ] {
        assert!(entries.contains(token), "ui.dict lacks {token:?}");
    }
}

/// Decodes libFuzzer's dictionary escapes (`\\`, `\"`, `\xNN`) to a string.
fn unescape_dict(s: &str) -> String {
    let mut bytes = Vec::new();
    let mut it = s.bytes();
    while let Some(b) = it.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match it.next() {
            Some(b'x') => {
                let hex = [it.next().unwrap(), it.next().unwrap()];
                let hex = std::str::from_utf8(&hex).unwrap();
                bytes.push(u8::from_str_radix(hex, 16).expect("hex escape"));
            }
            Some(c) => bytes.push(c),
            None => panic!("dangling backslash in {s:?}"),
        }
    }
    String::from_utf8(bytes).expect("dictionary entries are UTF-8")
}

#[test]
fn vanishing_node_rule_matches_the_spec_examples() {
    // `"<A/> "` then a line feed: the space node disappears (§9 quirk).
    let prefix = compile_one("<A/> ", false);
    let full = compile_one("<A/> \n", true);
    let space = &prefix.nodes[1];
    assert!(may_vanish(space, 5));
    assert_eq!(full.nodes.len(), 1);
    // A visible text run does not vanish.
    let text = compile_one("<A/> x", false);
    assert!(!may_vanish(&text.nodes[1], 6));
    // Whitespace is the JS class W (U+FEFF included, U+0085 not).
    assert!(is_js_whitespace('\u{feff}') && !is_js_whitespace('\u{85}'));
}

#[test]
fn evaluation_stops_at_its_node_budget() {
    let block = compile_one(&"<Summary>a</Summary>".repeat(30), true);
    assert!(codes(&block).is_empty(), "{:?}", codes(&block));
    let limits = UiLimits::DEFAULT.with("nodes", 10).unwrap();
    let state = UiState::new(&block, limits).unwrap();
    let view = evaluate_block(&block, &state, limits, Some(&CLOCK)).unwrap();
    let view_codes: Vec<Code> = view.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(view_codes, [Code::BudgetExceeded]);
    let mut views = 0;
    view.walk(&mut |_| views += 1);
    // Ten charged visits, plus the one whose charge failed (kept with its error).
    assert_eq!(views, 11);
    // A nested Each of 50 × 50 exceeds the default view-node budget (§19.2).
    let each = "$rows = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,\
        26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50]\n\
        <Each items={$rows} as=\"a\"><Each items={$rows} as=\"b\">{a}</Each></Each>";
    let block = compile_one(each, true);
    assert!(codes(&block).is_empty(), "{:?}", codes(&block));
    let state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&CLOCK)).unwrap();
    assert!(view.exceeded_budget());
    assert!(view.diagnostics.len() <= 20);
}
