//! The result facts of every bench workload (bench README table), checked under
//! `cargo test` with the same code the benches time.

use benches::{Streaming, compile_body, compile_reply, evaluate, facts, input, options};
use benches::{raised_limits, total_nodes};
use ui_core::UiLimits;

#[test]
fn prose2m_has_no_block() {
    let blocks = compile_reply(&input("prose2m.txt"), &options(UiLimits::DEFAULT, true));
    facts::prose2m(&blocks);
}

#[test]
fn prose_with_block_has_one_block_of_38_nodes() {
    let blocks = compile_reply(
        &input("proseWithBlock.txt"),
        &options(UiLimits::DEFAULT, true),
    );
    facts::prose_with_block(&blocks);
    assert_eq!(total_nodes(&blocks), 38);
}

#[test]
fn fences100k_stops_at_the_reply_cap() {
    let blocks = compile_reply(&input("fences100k.txt"), &options(UiLimits::DEFAULT, true));
    facts::fences100k(&blocks);
}

#[test]
fn stats100_has_103_nodes() {
    let block = compile_body(&input("stats100.txt"), &options(UiLimits::DEFAULT, true));
    facts::stats100(&block);
}

#[test]
fn table1000_exceeds_the_default_budget() {
    let block = compile_body(&input("table1000.txt"), &options(UiLimits::DEFAULT, true));
    facts::table1000_default(&block);
}

#[test]
fn table1000_with_raised_limits_compiles_and_evaluates() {
    let limits = raised_limits();
    let block = compile_body(&input("table1000.txt"), &options(limits, true));
    facts::table1000_raised(&block);
    facts::table1000_view(&evaluate(&block, limits));
}

#[test]
fn streaming_makes_321_compiles_and_10_blocks() {
    let workload = Streaming::new(input("streaming.txt"));
    facts::streaming(&workload, &workload.run());
}

#[test]
fn stream_prefixes_step_by_utf16_units() {
    // 2 units, 1 unit, then 64 ASCII: cuts land on character starts only.
    let text = format!("\u{1F600}é{}", "a".repeat(200));
    let workload = Streaming::new(text);
    assert_eq!(workload.compiles(), 4);
}
