//! A loop over one compile workload, for profilers: `valgrind --tool=callgrind` counts
//! instructions repeatably on a busy machine, where criterion's timings wander.
//!
//! ```text
//! cargo build --release -p benches --example prof
//! valgrind --tool=callgrind target/release/examples/prof stats 200
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>
//! ```
//!
//! Workloads: `stats` (stats100, default limits), `tabled` (table1000, default limits),
//! `table` (table1000, raised limits),
//! `pwb` (proseWithBlock), `fences` (fences100k), `eval` (evaluating the table1000 block,
//! raised limits), `stream` (streaming, every 64-unit prefix); the second argument is the number of runs. Prints the mean time of one run.

use std::hint::black_box;

use benches::{Streaming, compile_body, compile_reply, evaluate, input, options, raised_limits};
use ui_core::UiLimits;

fn main() {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| "stats".to_owned());
    let runs: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let default = options(UiLimits::DEFAULT, true);
    let raised = options(raised_limits(), true);
    let started = std::time::Instant::now();
    match workload.as_str() {
        "stats" => {
            let text = input("stats100.txt");
            (0..runs).for_each(|_| drop(black_box(compile_body(&text, &default))));
        }
        "tabled" => {
            let text = input("table1000.txt");
            (0..runs).for_each(|_| drop(black_box(compile_body(&text, &default))));
        }
        "table" => {
            let text = input("table1000.txt");
            (0..runs).for_each(|_| drop(black_box(compile_body(&text, &raised))));
        }
        "pwb" => {
            let text = input("proseWithBlock.txt");
            (0..runs).for_each(|_| drop(black_box(compile_reply(&text, &default))));
        }
        "fences" => {
            let text = input("fences100k.txt");
            (0..runs).for_each(|_| drop(black_box(compile_reply(&text, &default))));
        }
        "eval" => {
            let block = compile_body(&input("table1000.txt"), &raised);
            (0..runs).for_each(|_| drop(black_box(evaluate(&block, raised_limits()))));
        }
        "stream" => {
            let workload = Streaming::new(input("streaming.txt"));
            (0..runs).for_each(|_| drop(black_box(workload.run())));
        }
        other => {
            panic!("unknown workload {other}: stats, tabled, table, pwb, fences, eval or stream")
        }
    }
    eprintln!("{:?} per run", started.elapsed() / runs.max(1));
}
