//! Compile benches: whole replies (`compile_reply`) and single block bodies
//! (`compile_block`), on the frozen clock. Every input is loaded, and its result checked,
//! before anything is timed.

use criterion::{Criterion, Throughput, criterion_main};
use std::hint::black_box;

use benches::{compile_body, compile_reply, facts, input, options, raised_limits};
use ui_core::UiLimits;

fn replies(c: &mut Criterion) {
    let reply = options(UiLimits::DEFAULT, true);
    let prose = input("prose2m.txt");
    let with_block = input("proseWithBlock.txt");
    let fences = input("fences100k.txt");
    facts::prose2m(&compile_reply(&prose, &reply));
    facts::prose_with_block(&compile_reply(&with_block, &reply));
    facts::fences100k(&compile_reply(&fences, &reply));

    let mut group = c.benchmark_group("compile_reply");
    // The reply cap stops the scan early, so a bytes-per-second figure means nothing here.
    group.bench_function("fences100k", |b| {
        b.iter(|| compile_reply(black_box(&fences), &reply))
    });
    group.throughput(Throughput::Bytes(prose.len() as u64));
    group.bench_function("prose2m", |b| {
        b.iter(|| compile_reply(black_box(&prose), &reply))
    });
    group.throughput(Throughput::Bytes(with_block.len() as u64));
    group.bench_function("proseWithBlock", |b| {
        b.iter(|| compile_reply(black_box(&with_block), &reply))
    });
    group.finish();
}

fn blocks(c: &mut Criterion) {
    let default = options(UiLimits::DEFAULT, true);
    let raised = options(raised_limits(), true);
    let stats = input("stats100.txt");
    let table = input("table1000.txt");
    facts::stats100(&compile_body(&stats, &default));
    facts::table1000_default(&compile_body(&table, &default));
    facts::table1000_raised(&compile_body(&table, &raised));

    let mut group = c.benchmark_group("compile_block");
    group.bench_function("stats100", |b| {
        b.iter(|| compile_body(black_box(&stats), &default))
    });
    group.bench_function("table1000_default", |b| {
        b.iter(|| compile_body(black_box(&table), &default))
    });
    group.bench_function("table1000_raised", |b| {
        b.iter(|| compile_body(black_box(&table), &raised))
    });
    group.finish();
}

/// The benches of this file with criterion configured from the command line (what
/// `criterion_group!` writes, by hand so that the function is documented).
fn compile() {
    let mut criterion = Criterion::default().configure_from_args();
    replies(&mut criterion);
    blocks(&mut criterion);
}

criterion_main!(compile);
