//! Text fallbacks (`catalog.md` §7). The worked examples of §7.8 at block and reply level
//! and the evaluated fallback of §7.6 are fixtures (ui-compiler's
//! `tests/data/fallback/`, run by `tests/fixtures.rs`); here stay the reply walk of §7.5
//! with invalid or overlapping ranges (blocks edited by hand) and proptests that every truncated fallback (a node's source, 1,024 UTF-16
//! units; a block refused by the reply limits, 4,096; a block over its own budget, 65,536)
//! stays within its cap, is a prefix of its source and only drops a character it could
//! not keep whole.

use proptest::prelude::*;
use ui_compiler::{Block, CompileOptions, QuerySchemas, compile_block, compile_reply};
use ui_core::text::{trim_js, utf16_len};
use ui_core::{Code, FrozenClock, Value};
use ui_fallback::fallback_text;

static CLOCK: FrozenClock = FrozenClock(0.0);

/// Registers the query source `tickets`, accepting any arguments.
struct Sources;

impl QuerySchemas for Sources {
    fn check(&self, source: &str, _: &Value) -> Option<Result<(), String>> {
        (source == "tickets").then_some(Ok(()))
    }
}

fn options() -> CompileOptions<'static> {
    CompileOptions {
        is_final: true,
        clock: Some(&CLOCK),
        query_schemas: Some(&Sources),
        ..CompileOptions::default()
    }
}

fn compile(source: &str) -> Block {
    compile_block(source, "b", &options())
}

fn codes(block: &Block) -> Vec<Code> {
    block.diagnostics.iter().map(|d| d.code).collect()
}

/// A reply with two blocks and the fallback it normally gets.
const TWO: &str = "A\n```ui\n<Tag>x</Tag>\n```\nB\n```ui\n<Tag>y</Tag>\n```\nC";

#[test]
fn overlapping_and_invalid_ranges_are_skipped() {
    let blocks = compile_reply(TWO, &options());
    assert_eq!(blocks.len(), 2);
    assert_eq!(fallback_text(TWO, &blocks), "A\nx\nB\ny\nC");
    // Blocks are taken in order of start, whatever order they come in.
    let reversed = [blocks[1].clone(), blocks[0].clone()];
    assert_eq!(fallback_text(TWO, &reversed), "A\nx\nB\ny\nC");
    let second_fence = &TWO[blocks[1].start as usize..blocks[1].end as usize];
    let with = |edit: &dyn Fn(&mut Block)| {
        let mut second = blocks[1].clone();
        edit(&mut second);
        fallback_text(TWO, &[blocks[0].clone(), second])
    };
    let kept = format!("A\nx\nB\n{second_fence}C");
    // Starts inside the first block's range.
    assert_eq!(with(&|b| b.start = blocks[0].end - 1), kept);
    // Ends before it starts.
    assert_eq!(with(&|b| b.end = b.start - 1), kept);
    // Ends past the text.
    assert_eq!(with(&|b| b.end = utf16_len(TWO) as u32 + 1), kept);
    // Ending exactly at the text's end is fine.
    assert_eq!(with(&|b| b.end = utf16_len(TWO) as u32), "A\nx\nB\ny\n");
    // An empty range inserts the fallback and keeps everything.
    assert_eq!(
        with(&|b| b.end = b.start),
        format!("A\nx\nB\ny\n{second_fence}C")
    );
    // No blocks: the text unchanged.
    assert_eq!(fallback_text::<Block>(TWO, &[]), TWO);
}

// ---- properties: caps hold and characters stay whole ----

/// Text of single characters of 1 and 2 UTF-16 units (and a multi-byte BMP one), so
/// that cut points fall both between and inside surrogate pairs.
fn text(units: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        proptest::sample::select(&['a', ' ', 'é', '😀', '𝄞'][..]),
        units,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// Asserts that `fallback` is `source` cut to at most `cap` UTF-16 units, dropping a
/// surrogate pair only when it would be split.
fn assert_cut(fallback: &str, source: &str, cap: usize) -> Result<(), TestCaseError> {
    prop_assert!(source.starts_with(fallback));
    let units = utf16_len(fallback);
    prop_assert!(units <= cap, "{} > {}", units, cap);
    if utf16_len(source) <= cap {
        prop_assert_eq!(fallback, source);
    } else {
        let next = source[fallback.len()..].chars().next().unwrap();
        prop_assert!(units + next.len_utf16() > cap, "cut too early: {}", units);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A blank node falls back to its own source text, cut to 1,024 units.
    #[test]
    fn node_source_fallback_stays_within_1024_units(
        lead in 990usize..1030,
        note in text(0..40),
    ) {
        let tag = format!("<Gauge note=\"{}{note}\"/>", "x".repeat(lead - 13));
        let block = compile(&tag);
        prop_assert_eq!(codes(&block), [Code::UnknownComponent]);
        let node = &block.nodes[0];
        assert_cut(&node.fallback, &tag, 1024)?;
        prop_assert_eq!(block.fallback.as_str(), trim_js(&node.fallback));
    }

}

proptest! {
    // Each case scans a reply of over 262,144 units (or compiles a 65,536-unit block).
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A fence over the reply's character budget keeps its content cut to 4,096 units,
    /// and the reply text shows that instead of the fence.
    #[test]
    fn refused_block_fallback_stays_within_4096_units(
        lead in 4060usize..4100,
        middle in text(0..40),
    ) {
        let content = format!("{}{middle}\n{}", "y".repeat(lead), "z".repeat(262_144));
        let reply = format!("Before\n```ui\n{content}\n```\nAfter");
        let blocks = compile_reply(&reply, &options());
        prop_assert_eq!(blocks.len(), 1);
        let block = &blocks[0];
        prop_assert_eq!(codes(block), [Code::BudgetExceeded]);
        prop_assert!(block.nodes.is_empty());
        assert_cut(&block.fallback, &content, 4096)?;
        prop_assert_eq!(
            fallback_text(&reply, &blocks),
            format!("Before\n{}\nAfter", block.fallback)
        );
    }

    /// A block longer than its own budget keeps its source cut to 65,536 units.
    #[test]
    fn block_budget_fallback_stays_within_65536_units(
        lead in 65_500usize..65_540,
        tail in text(1..60),
    ) {
        let source = format!("<CodeBlock>{}{tail}", "w".repeat(lead - 11));
        prop_assume!(utf16_len(&source) > 65_536);
        let block = compile(&source);
        prop_assert_eq!(codes(&block), [Code::BudgetExceeded]);
        prop_assert!(block.nodes.is_empty());
        assert_cut(&block.fallback, &source, 65_536)?;
    }
}
