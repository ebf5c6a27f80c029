//! An opening tag cut off by the end of a streaming prefix (`language.md` §7.1 steps 3–5):
//! it ends right after its name unless the prefix ends with `/>`, `>`, inside a quoted
//! prop, or right after a complete prop value. Its `end`, fallback and the block fallback
//! follow; every prefix compiled through one `UiCompiler` (resuming from its checkpoint)
//! equals a fresh compile.

use std::sync::Arc;

use ui_compiler::{Block, CompileOptions, Node, UiCompiler, compile_block, compile_reply};
use ui_core::FrozenClock;

static CLOCK: FrozenClock = FrozenClock(0.0);

fn options(is_final: bool) -> CompileOptions<'static> {
    CompileOptions {
        id: "reply".to_owned(),
        is_final,
        clock: Some(&CLOCK),
        ..CompileOptions::default()
    }
}

fn preview(source: &str) -> Block {
    compile_block(source, "b", &options(false))
}

/// The node with id `b:<start>` anywhere in the block.
fn node_at(block: &Block, start: u32) -> &Node {
    let id = format!("b:{start}");
    let mut found = None;
    for top in &block.nodes {
        top.walk(&mut |n| {
            if n.id == id {
                found = Some(n);
            }
        });
    }
    found.unwrap_or_else(|| panic!("no node {id} in {:#?}", block.nodes))
}

/// `(prefix, start of the cut-off tag, its expected end)` in UTF-16 units.
const CASES: &[(&str, u32, u32)] = &[
    // Top level: the end stays right after the name while the tag waits for more.
    ("<Summary", 0, 8),
    ("<Summary ", 0, 8),
    ("<Summary to", 0, 8),
    ("<Summary tone", 0, 8),
    ("<Summary tone ", 0, 8),
    ("<Summary tone\n", 0, 8),
    ("<Summary tone=", 0, 8),
    ("<Summary tone = ", 0, 8),
    ("<Summary tone={", 0, 8),
    ("<Summary tone={\"in", 0, 8),
    ("<Summary tone={[1, {a: 2}", 0, 8),
    ("<Summary tone=\"info\" ", 0, 8),
    ("<Summary tone=\"info\" badge", 0, 8),
    ("<Summary tone=\"info\" badge=", 0, 8),
    ("<Summary tone=\"info\" badge={1", 0, 8),
    ("<Summary tone=\"info\"\n  ", 0, 8),
    // A partial quoted prop and a complete prop value at the very end move it.
    ("<Summary tone=\"", 0, 15),
    ("<Summary tone=\"in", 0, 17),
    ("<Summary tone='in", 0, 17),
    ("<Summary tone=\"info\"", 0, 20),
    ("<Summary tone={\"info\"}", 0, 22),
    ("<Summary tone=\"info\" badge=\"T", 0, 29),
    ("<Summary tone=\"info\"badge={1}", 0, 29),
    // Nested: the same rules for a child of an open tag.
    ("<Stats><Stat label=\"A\" value={1", 7, 12),
    ("<Stats><Stat label=\"A\" ", 7, 12),
    ("<Stats><Stat label=\"A\"", 7, 22),
    ("<Stats>\n  <Stat label=\"A\" value=", 10, 15),
    ("<Stats>\n  <Stat label=\"A\" value=\"1", 10, 34),
    ("<Tabs><Tab title=\"x\"><Summary ", 21, 29),
    ("<Tabs><Tab title=\"x\"><Summary tone={'a'}", 21, 40),
    // Text before the tag counts in UTF-16 units (é is one unit, 🐇 two).
    ("é🐇 <Summary tone", 4, 12),
    ("é🐇 <Summary tone=\"🐇", 4, 21),
];

#[test]
fn a_cut_off_tag_ends_after_its_name_unless_a_value_ends_the_input() {
    for &(prefix, start, end) in CASES {
        let block = preview(prefix);
        let node = node_at(&block, start);
        assert!(!node.complete, "{prefix:?}");
        assert_eq!(node.end, end, "end of the cut-off tag in {prefix:?}");
        assert!(
            block.diagnostics.is_empty(),
            "{prefix:?}: {:?}",
            block.diagnostics
        );
    }
}

#[test]
fn a_cut_off_tag_s_fallback_is_its_source_up_to_its_end() {
    // `<Summary to` is the node [0, 8) whose fallback is `<Summary`.
    let block = preview("<Summary to");
    let node = node_at(&block, 0);
    assert_eq!((node.start, node.end), (0, 8));
    assert_eq!(node.fallback, "<Summary");
    assert_eq!(block.fallback, "<Summary");
    // Props that do not move the end are not part of the fallback either.
    for prefix in [
        "<Summary tone=\"info\" ",
        "<Summary tone={\"info\"",
        "<Summary tone=",
    ] {
        let block = preview(prefix);
        assert_eq!(node_at(&block, 0).fallback, "<Summary", "{prefix:?}");
        assert_eq!(block.fallback, "<Summary", "{prefix:?}");
    }
    // A complete value at the end of the input moves the end, so the fallback grows.
    let block = preview("<Summary tone=\"info\"");
    assert_eq!(node_at(&block, 0).fallback, "<Summary tone=\"info\"");
    // A child cut off inside an open parent: the parent's fallback holds the child's.
    for prefix in [
        "<Tabs><Tab title=\"x\"><Summary tone=\"info\" ",
        "<Tabs><Tab title=\"x\"><Summary tone={",
        "<Tabs><Tab title=\"x\"><Summary b",
    ] {
        let block = preview(prefix);
        let summary = node_at(&block, 21);
        assert_eq!((summary.start, summary.end), (21, 29), "{prefix:?}");
        assert_eq!(summary.fallback, "<Summary", "{prefix:?}");
        assert!(
            block.fallback.ends_with("<Summary"),
            "{prefix:?}: {:?}",
            block.fallback
        );
    }
    // A component whose fallback comes from its props keeps it: only `end` changes.
    let block = preview("<Stats><Stat label=\"A\" value={1");
    let stat = node_at(&block, 7);
    assert_eq!(stat.end, 12);
    assert_eq!(stat.fallback, "A: \n");
}

#[test]
fn a_final_block_still_diagnoses_what_a_preview_waits_for() {
    use ui_core::Code;
    let codes = |source: &str| -> Vec<Code> {
        compile_block(source, "b", &options(true))
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect()
    };
    assert!(codes("<Summary tone=").contains(&Code::InvalidProp));
    assert!(codes("<Summary tone").contains(&Code::InvalidSyntax));
    assert!(codes("<Summary tone={1").contains(&Code::IncompleteExpression));
    assert!(codes("<Summary tone=\"info\"").contains(&Code::UnclosedTag));
}

/// Replies whose every prefix cuts some tag in every way: props quoted and braced, with and
/// without whitespace, nested and top-level, across lines, non-BMP text and CRLF.
const REPLIES: &[&str] = &[
    "Intro.\n```ui\n$t = \"info\"\n<Summary tone={$t} title=\"Build 🐇\">All good</Summary>\n<Stats>\n  <Stat label=\"Runs\" value={12} />\n  <Stat label = 'Fail' value = {@Count([1, 2])}/>\n</Stats>\n```\nAfter.\n",
    "```ui\r\n<Tabs><Tab title=\"One\"><Table rows={[{a: 1}]}><Column key=\"a\" title=\"A\"/></Table></Tab>\r\n<Tab title='Two'\r\n  ><Summary>é</Summary></Tab></Tabs>\r\n```\r\n",
    "```ui\n<Choices><Choice context=\"Do \\\"it\\\"\" primary={true}>Go</Choice><Choice>No</Choice></Choices>\n<Unknown a=\"1\" b={2}>x</Unknown><Summary tone=\"info\"badge={\"t\"}>y</Summary>\n",
];

#[test]
fn every_prefix_of_replies_with_cut_off_tags_compiles_like_a_fresh_compile() {
    for reply in REPLIES {
        let mut compiler = UiCompiler::new();
        let mut kept: Vec<Vec<Arc<Block>>> = Vec::new();
        let bounds = reply.char_indices().map(|(i, _)| i).chain([reply.len()]);
        for cut in bounds {
            let prefix = &reply[..cut];
            let incremental = compiler.compile(prefix, &options(false));
            let fresh = compile_reply(prefix, &options(false));
            assert_eq!(incremental.len(), fresh.len(), "at {cut} of {reply:?}");
            for (a, b) in incremental.iter().zip(&fresh) {
                assert_eq!(**a, *b, "at {cut} of {reply:?}");
            }
            // Keep every other preview alive, so resumed nodes are both moved and cloned.
            if cut % 2 == 0 {
                kept.push(incremental);
            }
        }
        let last = compiler.compile(reply, &options(true));
        let fresh = compile_reply(reply, &options(true));
        assert_eq!(last.len(), fresh.len());
        for (a, b) in last.iter().zip(&fresh) {
            assert_eq!(**a, *b, "final {reply:?}");
        }
    }
}
