//! Streaming bench: one incremental compiler compiles every 64-unit prefix of a reply as a
//! preview, then the whole reply as final (321 compiles), on the frozen clock. The prefixes
//! are cut, and the result checked, before anything is timed.

use criterion::{Criterion, criterion_main};

use benches::{Streaming, facts, input};

fn streaming(c: &mut Criterion) {
    let workload = Streaming::new(input("streaming.txt"));
    facts::streaming(&workload, &workload.run());

    let mut group = c.benchmark_group("stream");
    group.bench_function("streaming", |b| b.iter(|| workload.run()));
    group.finish();
}

/// The benches of this file with criterion configured from the command line (what
/// `criterion_group!` writes, by hand so that the function is documented).
fn stream() {
    let mut criterion = Criterion::default().configure_from_args();
    streaming(&mut criterion);
}

criterion_main!(stream);
