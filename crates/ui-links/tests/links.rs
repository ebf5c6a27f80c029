//! Link targets of blocks (`host.md` §13, §2.4): only the live `File`, `Diff`, `Commit` and
//! `Node` views whose props form a valid target are keyed by evaluated id, in document
//! order. Hidden, incomplete, failed and nested-under-failed nodes never appear, whatever
//! the input; the host's answers are validated the same way. A proptest checks the
//! visibility rule on generated blocks.

use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::json;
use ui_compiler::{Block, CompileOptions, QuerySchemas, compile_block};
use ui_core::{Code, Failure, FrozenClock, HostLimits, Record, UiLimits, Value};
use ui_links::{LinkResolution, LinkState, LinkTarget, LinkTargetError, link_targets};

static CLOCK: FrozenClock = FrozenClock(0.0);

/// Registers the query source `files`, accepting any arguments.
struct Sources;

impl QuerySchemas for Sources {
    fn check(&self, source: &str, _: &Value) -> Option<Result<(), String>> {
        (source == "files").then_some(Ok(()))
    }
}

fn compile_with(source: &str, is_final: bool) -> Block {
    let options = CompileOptions {
        is_final,
        clock: Some(&CLOCK),
        query_schemas: Some(&Sources),
        ..CompileOptions::default()
    };
    compile_block(source, "b", &options)
}

fn compile(source: &str) -> Block {
    compile_with(source, true)
}

fn codes(block: &Block) -> Vec<Code> {
    block.diagnostics.iter().map(|d| d.code).collect()
}

fn record(json: &str) -> Record {
    Value::from_json_str(json)
        .unwrap()
        .as_record()
        .unwrap()
        .clone()
}

fn targets_for(
    block: &Block,
    input: &str,
    queries: &str,
) -> Result<IndexMap<String, LinkTarget>, Failure> {
    link_targets(
        block,
        &record(input),
        &record(queries),
        UiLimits::DEFAULT,
        &HostLimits::DEFAULT,
        &CLOCK,
    )
}

fn targets(block: &Block) -> IndexMap<String, LinkTarget> {
    targets_for(block, "{}", "{}").unwrap()
}

/// Compiled ids of the nodes of `kind`, in document order.
fn ids(block: &Block, kind: &str) -> Vec<String> {
    let mut out = Vec::new();
    block.walk(&mut |n| {
        if n.kind == kind {
            out.push(n.id.clone());
        }
    });
    out
}

fn file(path: &str, line: Option<u64>) -> LinkTarget {
    LinkTarget::File {
        path: path.to_owned(),
        line,
    }
}

const CORPUS: &str = r#"$more = false
$files = ["src/a.rs", "src/b.rs"]
<Summary tone="danger">Build failed in <File path="src/main.rs" line="148">main</File></Summary>
<Diff path="src/lib.rs">lib changes</Diff>
<Commit sha="0123abc"/>
<Node id="task-7">Deploy task</Node>
<Switch value={$more}>More</Switch>
<Show when={$more}><File path="hidden.rs"/></Show>
<Each items={$files} as="f"><File path={f} line={2}/></Each>"#;

#[test]
fn corpus_targets_follow_document_order() {
    let block = compile(CORPUS);
    assert!(block.diagnostics.is_empty(), "{:?}", block.diagnostics);
    let files = ids(&block, "File");
    let each_file = &files[2];
    let expected: IndexMap<String, LinkTarget> = [
        (files[0].clone(), file("src/main.rs", Some(148))),
        (
            ids(&block, "Diff")[0].clone(),
            LinkTarget::Diff {
                path: "src/lib.rs".into(),
            },
        ),
        (
            ids(&block, "Commit")[0].clone(),
            LinkTarget::Commit {
                sha: "0123abc".into(),
            },
        ),
        (
            ids(&block, "Node")[0].clone(),
            LinkTarget::Node {
                id: "task-7".into(),
            },
        ),
        (format!("{each_file}:0"), file("src/a.rs", Some(2))),
        (format!("{each_file}:1"), file("src/b.rs", Some(2))),
    ]
    .into_iter()
    .collect();
    let got = targets(&block);
    assert_eq!(got, expected);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    // Wire shape of a target.
    assert_eq!(
        serde_json::to_value(&got[0]).unwrap(),
        json!({"type": "File", "path": "src/main.rs", "line": 148})
    );
}

#[test]
fn a_false_show_hides_its_links_until_the_input_shows_them() {
    let block = compile(CORPUS);
    let hidden = ids(&block, "File")[1].clone();
    assert!(!targets(&block).contains_key(&hidden));
    let shown = targets_for(&block, r#"{"$more": true}"#, "{}").unwrap();
    assert_eq!(shown[&hidden], file("hidden.rs", None));
    // Document order: the shown File sits between the Node and the Each.
    let position = shown.get_index_of(&hidden).unwrap();
    assert!(matches!(shown[position - 1], LinkTarget::Node { .. }));
    assert_eq!(shown.len(), 7);
    // A literal false Show.
    let never = compile("<Show when={false}><File path=\"a.rs\"/><Commit sha=\"0123abc\"/></Show>");
    assert!(targets(&never).is_empty());
}

#[test]
fn tampered_input_fails_like_validated_state() {
    let block = compile(CORPUS);
    let code = |input: &str| targets_for(&block, input, "{}").unwrap_err().code;
    assert_eq!(code(r#"{"$more": "yes"}"#), Code::InvalidValue);
    assert_eq!(code(r#"{"$files": ["x.rs"]}"#), Code::RefusedBinding);
    assert_eq!(code(r#"{"$zzz": 1}"#), Code::RefusedBinding);
    assert_eq!(
        targets_for(&block, "{}", r#"{"$more": true}"#)
            .unwrap_err()
            .code,
        Code::RefusedQuery
    );
}

#[test]
fn file_line_is_coerced() {
    let block = compile(
        "<File path=\"a\" line=\"148\"/><File path=\"b\" line={12}/><File path=\"c\"/>\
         <File path=\"d\" line=\"0\"/><File path=\"e\" line={1.5}/><File path=\"f\" line={-3}/>",
    );
    let files = ids(&block, "File");
    let got = targets(&block);
    assert_eq!(got[&files[0]], file("a", Some(148)));
    assert_eq!(got[&files[1]], file("b", Some(12)));
    assert_eq!(got[&files[2]], file("c", None));
    // A line that is not a positive integer fails the schema: no target.
    assert_eq!(got.len(), 3);
    assert_eq!(
        codes(&block),
        [Code::InvalidProps, Code::InvalidProps, Code::InvalidProps]
    );
}

#[test]
fn commits_need_7_to_64_hex_digits() {
    let sha64 = "a".repeat(64);
    let sha65 = "a".repeat(65);
    let block = compile(&format!(
        "<Commit sha=\"ABCDEF0\"/><Commit sha=\"{sha64}\"/><Commit sha=\"abcdef\"/>\
         <Commit sha=\"{sha65}\"/><Commit sha=\"xyz1234\"/><Commit sha={{\"0123abc\\n\"}}/>"
    ));
    let commits = ids(&block, "Commit");
    let got = targets(&block);
    let expected: IndexMap<String, LinkTarget> = [
        (
            commits[0].clone(),
            LinkTarget::Commit {
                sha: "ABCDEF0".into(),
            },
        ),
        (commits[1].clone(), LinkTarget::Commit { sha: sha64 }),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, expected);
}

#[test]
fn an_incomplete_block_is_invalid_block() {
    // A streaming preview: the block is not complete, so no targets at all.
    let source = "<File path=\"a.rs\"/><Callout title=\"x\"><File path=\"b.rs\"/>";
    let streaming = compile_with(source, false);
    assert!(!streaming.complete);
    assert_eq!(
        targets_for(&streaming, "{}", "{}").unwrap_err().code,
        Code::InvalidBlock
    );
    // Final, the unclosed Callout is an incomplete node: the File inside it never appears.
    let done = compile_with(source, true);
    assert!(done.complete);
    assert_eq!(codes(&done), [Code::UnclosedTag]);
    let files = ids(&done, "File");
    let got = targets(&done);
    assert_eq!(got.keys().collect::<Vec<_>>(), [&files[0]]);
}

#[test]
fn an_unclosed_show_is_transparent() {
    // A Show never appears in the evaluated tree: a true Show splices its children in
    // place (language.md §15.2 step 6), so when a final block leaves it unclosed nothing
    // incomplete is left to skip and the complete File inside stays a target
    // (host.md §13.2 step 2 walks evaluated nodes). An unclosed component does hide it.
    let show = compile("<Show when={true}><File path=\"a.rs\"/>");
    assert_eq!(codes(&show), [Code::UnclosedTag]);
    assert_eq!(
        targets(&show).into_values().collect::<Vec<_>>(),
        [file("a.rs", None)]
    );
    let summary = compile("<Summary><File path=\"a.rs\"/>");
    assert_eq!(codes(&summary), [Code::UnclosedTag]);
    assert!(targets(&summary).is_empty());
}

#[test]
fn failed_nodes_and_their_subtrees_never_appear() {
    let block = compile(
        "<Callout tone=\"nope\"><File path=\"u.rs\"/></Callout>\
         <Gauge><File path=\"g.rs\"/></Gauge>\
         <Choices><File path=\"c.rs\"/></Choices>\
         <Node id=\"\"/>\
         <File path=\"ok.rs\"/>",
    );
    assert_eq!(
        codes(&block),
        [
            Code::InvalidProps,
            Code::UnknownComponent,
            Code::InvalidChild,
            Code::InvalidProps
        ]
    );
    let got = targets(&block);
    assert_eq!(got.values().collect::<Vec<_>>(), [&file("ok.rs", None)]);
}

#[test]
fn runtime_failures_hide_links() {
    let block = compile(
        "$t = @Query(\"files\", {})\n\
         <Show when={@Count($t) > 0}><Diff path=\"q.rs\"/></Show>\n\
         <Each items={$t} as=\"r\"><File path={r.path}/></Each>",
    );
    assert!(block.diagnostics.is_empty(), "{:?}", block.diagnostics);
    // No reading: the Show and the Each fail with refused_access, nothing appears.
    assert!(targets(&block).is_empty());
    // With the issued reading, a row whose path is not text fails alone.
    let each_file = ids(&block, "File")[0].clone();
    let got = targets_for(
        &block,
        "{}",
        r#"{"$t": [{"path": 5}, {"path": "ok.rs"}, {"path": ""}]}"#,
    )
    .unwrap();
    let expected: IndexMap<String, LinkTarget> = [
        (
            ids(&block, "Diff")[0].clone(),
            LinkTarget::Diff {
                path: "q.rs".into(),
            },
        ),
        (format!("{each_file}:1"), file("ok.rs", None)),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, expected);
    // An empty reading: the Show is false.
    assert!(
        targets_for(&block, "{}", r#"{"$t": []}"#)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn each_expanded_ids_carry_the_index() {
    let block = compile(
        "$rows = [[\"a\", \"b\"], [\"c\"]]\n\
         <Each items={$rows} as=\"row\"><Each items={row} as=\"p\"><Diff path={p}/></Each></Each>",
    );
    let diff = ids(&block, "Diff")[0].clone();
    let got = targets(&block);
    let keys: Vec<String> = got.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            format!("{diff}:0:0"),
            format!("{diff}:0:1"),
            format!("{diff}:1:0")
        ]
    );
    assert_eq!(
        got[&format!("{diff}:1:0")],
        LinkTarget::Diff { path: "c".into() }
    );
}

/// The targets of a block holding one link node (long props exhaust the work budget of a
/// block holding several).
fn only_target(source: &str) -> Option<LinkTarget> {
    let block = compile(source);
    assert!(
        !codes(&block).contains(&Code::BudgetExceeded),
        "{:?}",
        block.diagnostics
    );
    let got = targets(&block);
    assert!(got.len() <= 1);
    got.into_values().next()
}

#[test]
fn paths_hold_1_to_4096_characters() {
    let at = "a".repeat(4096);
    let past = "a".repeat(4097);
    // Lengths count characters (code points), as the reference's zod 4 does: 2,049 astral
    // characters are 4,098 UTF-16 units but 2,049 characters, so they pass.
    let astral = "😀".repeat(2048);
    let astral_past = format!("{astral}a");
    assert_eq!(
        only_target(&format!("<File path=\"{at}\"/>")),
        Some(file(&at, None))
    );
    assert_eq!(only_target(&format!("<File path=\"{past}\"/>")), None);
    assert_eq!(
        only_target(&format!("<Diff path=\"{astral}\"/>")),
        Some(LinkTarget::Diff {
            path: astral.clone()
        })
    );
    assert_eq!(
        only_target(&format!("<Diff path=\"{astral_past}\"/>")),
        Some(LinkTarget::Diff { path: astral_past })
    );
    assert_eq!(only_target(&format!("<Diff path=\"{past}\"/>")), None);
    let limits = HostLimits::DEFAULT;
    let diff = |path: String| LinkTarget::Diff { path }.validate(&limits);
    assert_eq!(diff("😀".repeat(4096)), Ok(()));
    assert!(diff("😀".repeat(4097)).is_err());
    // The catalog accepts an empty path; the link layer does not.
    let empty = compile("<Diff path=\"\"/><File path=\"\"/>");
    assert!(empty.diagnostics.is_empty(), "{:?}", empty.diagnostics);
    assert!(targets(&empty).is_empty());
}

#[test]
fn node_ids_hold_1_to_256_characters() {
    let at = "n".repeat(256);
    let past = "n".repeat(257);
    // 256 astral characters are 512 UTF-16 units and still pass.
    let astral = "😀".repeat(256);
    let block = compile(&format!(
        "<Node id=\"{at}\">a</Node><Node id=\"{past}\">b</Node><Node id=\"{astral}\">c</Node>"
    ));
    let got = targets(&block);
    assert_eq!(
        got.values().collect::<Vec<_>>(),
        [
            &LinkTarget::Node { id: at },
            &LinkTarget::Node { id: astral }
        ]
    );
}

#[test]
fn target_validation_names_the_broken_rule() {
    let limits = HostLimits::DEFAULT;
    let check = |t: LinkTarget| t.validate(&limits);
    assert_eq!(check(file("a", Some(1))), Ok(()));
    assert_eq!(check(file(&"a".repeat(4096), None)), Ok(()));
    assert_eq!(check(file("a", Some(0))), Err(LinkTargetError::Line));
    assert!(matches!(
        check(file("", None)),
        Err(LinkTargetError::Path { max: 4096 })
    ));
    assert!(matches!(
        check(LinkTarget::Diff {
            path: "a".repeat(4097)
        }),
        Err(LinkTargetError::Path { max: 4096 })
    ));
    assert_eq!(
        check(LinkTarget::Commit {
            sha: "0123abg".into()
        }),
        Err(LinkTargetError::Sha)
    );
    assert!(matches!(
        check(LinkTarget::Node { id: String::new() }),
        Err(LinkTargetError::NodeId { max: 256 })
    ));
}

#[test]
fn from_node_reads_only_link_components_with_exact_props() {
    let limits = HostLimits::DEFAULT;
    let props = |json: &str| record(json);
    assert_eq!(
        LinkTarget::from_node("File", &props(r#"{"path": "a", "line": 3}"#), &limits),
        Some(file("a", Some(3)))
    );
    // Another type, an extra prop, a wrong type of prop, a bad line.
    assert_eq!(
        LinkTarget::from_node("Tag", &props(r#"{"path": "a"}"#), &limits),
        None
    );
    assert_eq!(
        LinkTarget::from_node("File", &props(r#"{"path": "a", "label": "x"}"#), &limits),
        None
    );
    assert_eq!(
        LinkTarget::from_node("Node", &props(r#"{"id": 7}"#), &limits),
        None
    );
    for line in ["0", "-1", "1.5", "\"3\""] {
        assert_eq!(
            LinkTarget::from_node(
                "File",
                &props(&format!(r#"{{"path": "a", "line": {line}}}"#)),
                &limits
            ),
            None,
            "line {line}"
        );
    }
}

#[test]
fn host_answers_need_a_valid_target_for_a_chip() {
    let chip = LinkResolution::from_host_answer(
        &json!({
            "state": "chip", "target": {"type": "Diff", "path": "a.rs"}, "staged": true, "x": 1
        }),
        &HostLimits::DEFAULT,
        UiLimits::DEFAULT,
    );
    assert_eq!(chip.state, LinkState::Chip);
    assert_eq!(chip.staged, Some(true));
    for answer in [
        json!({"state": "chip"}),
        json!({"state": "chip", "target": {"type": "File", "path": "a".repeat(4097)}}),
        json!({"state": "chip", "target": {"type": "File", "path": "a", "line": 0}}),
        json!({"state": "chip", "target": {"type": "Link", "url": "x"}}),
        json!({"state": "open"}),
        json!("chip"),
    ] {
        let plain =
            LinkResolution::from_host_answer(&answer, &HostLimits::DEFAULT, UiLimits::DEFAULT);
        assert_eq!(plain.state, LinkState::Plain, "{answer}");
        assert_eq!(plain.code, None, "{answer}");
        assert!(plain.reason.is_some(), "{answer}");
    }
    let plain = LinkResolution::from_host_answer(
        &json!({"state": "plain", "code": "outside-project", "reason": "elsewhere"}),
        &HostLimits::DEFAULT,
        UiLimits::DEFAULT,
    );
    assert_eq!(plain.code.as_deref(), Some("outside-project"));
    assert_eq!(plain.reason.as_deref(), Some("elsewhere"));
}

// ---- property: hidden and incomplete nodes never appear ----

/// One generated File and what wraps it, outermost first.
#[derive(Debug, Clone)]
struct Placed {
    path: &'static str,
    /// Each wrapper: `Some(when)` for a Show, `None` for a Callout that fails its schema.
    wrappers: Vec<Option<bool>>,
}

impl Placed {
    fn visible(&self) -> bool {
        !self.path.is_empty() && self.wrappers.iter().all(|w| *w == Some(true))
    }

    fn source(&self) -> String {
        let mut out = String::new();
        for w in &self.wrappers {
            out += &match w {
                Some(when) => format!("<Show when={{{when}}}>"),
                None => "<Callout tone=\"nope\">".to_owned(),
            };
        }
        out += &format!("<File path=\"{}\"/>", self.path);
        for w in self.wrappers.iter().rev() {
            out += if w.is_some() { "</Show>" } else { "</Callout>" };
        }
        out
    }
}

fn placed() -> impl Strategy<Value = Placed> {
    (
        proptest::sample::select(&["a.rs", "src/b.rs", "", "c d.txt"][..]),
        proptest::collection::vec(
            prop_oneof![6 => any::<bool>().prop_map(Some), 1 => Just(None)],
            0..3,
        ),
    )
        .prop_map(|(path, wrappers)| Placed { path, wrappers })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Targets are exactly the Files whose every wrapper is a true Show, in document
    /// order; a trailing unclosed container hides what it holds; a streaming block has none.
    #[test]
    fn hidden_and_incomplete_nodes_never_appear(
        files in proptest::collection::vec(placed(), 1..8),
        unclosed in proptest::option::of(placed()),
        is_final in proptest::bool::weighted(0.85),
    ) {
        let mut source: String = files.iter().map(Placed::source).collect();
        if let Some(tail) = &unclosed {
            // An unclosed Summary around the tail: the File inside is complete, its parent
            // is not, so it never appears.
            source += "<Summary>";
            source += &tail.source();
        }
        let block = compile_with(&source, is_final);
        let result = link_targets(&block, &Record::default(), &Record::default(), UiLimits::DEFAULT, &HostLimits::DEFAULT, &CLOCK);
        if !is_final {
            prop_assert_eq!(result.unwrap_err().code, Code::InvalidBlock);
            return Ok(());
        }
        let got = result.unwrap();
        let compiled = ids(&block, "File");
        prop_assert_eq!(compiled.len(), files.len() + usize::from(unclosed.is_some()));
        let expected: IndexMap<String, LinkTarget> = files
            .iter()
            .zip(&compiled)
            .filter(|(f, _)| f.visible())
            .map(|(f, id)| (id.clone(), file(f.path, None)))
            .collect();
        prop_assert_eq!(
            got.iter().collect::<Vec<_>>(),
            expected.iter().collect::<Vec<_>>(),
            "{}", source
        );
    }
}
