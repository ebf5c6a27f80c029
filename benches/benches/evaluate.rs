//! Evaluation bench: the `table1000` block compiled with raised limits, evaluated with a
//! fresh state under the same limits on the frozen clock. The block is compiled, and the
//! view checked, before anything is timed.

use criterion::{Criterion, criterion_main};
use std::hint::black_box;

use benches::{CLOCK, compile_body, evaluate, facts, input, options, raised_limits, state_limits};
use ui_compiler::{UiState, evaluate_block};

fn table(c: &mut Criterion) {
    let limits = raised_limits();
    let block = compile_body(&input("table1000.txt"), &options(limits, true));
    facts::table1000_raised(&block);
    facts::table1000_view(&evaluate(&block, limits));
    let state =
        UiState::new(&block, state_limits(limits)).expect("the block's state fits its limits");

    let mut group = c.benchmark_group("evaluate");
    // The reference workload: a fresh state (copying the defaults) plus one evaluation.
    group.bench_function("table1000", |b| {
        b.iter(|| evaluate(black_box(&block), limits))
    });
    // The evaluation alone, with the state made at setup.
    group.bench_function("table1000_view_only", |b| {
        b.iter(|| evaluate_block(black_box(&block), &state, limits, Some(&CLOCK)))
    });
    group.finish();
}

/// The benches of this file with criterion configured from the command line (what
/// `criterion_group!` writes, by hand so that the function is documented).
fn evaluate_benches() {
    let mut criterion = Criterion::default().configure_from_args();
    table(&mut criterion);
}

criterion_main!(evaluate_benches);
