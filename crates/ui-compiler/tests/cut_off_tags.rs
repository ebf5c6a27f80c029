//! An opening tag cut off by the end of a streaming prefix (`language.md` §7.1 steps 3–5):
//! it ends right after its name unless the prefix ends with `/>`, `>`, inside a quoted
//! prop, or right after a complete prop value. Its `end`, fallback and the block fallback
//! follow (the `cut_off_tag_*` fixtures of `tests/data/parse/`, each prefix a preview, and
//! the final-mode diagnostics). Here: every prefix compiled through one `UiCompiler`
//! (resuming from its checkpoint) equals a fresh compile.

use std::sync::Arc;

use ui_compiler::{Block, CompileOptions, UiCompiler, compile_reply};
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
