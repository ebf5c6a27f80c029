//! What a host checks before it reads data or sends a message for a person: resolving a
//! choice, validating state and computing link targets for the corpus blocks (each beside
//! one evaluation of the same block, the yardstick of the issue), and the reply fallback of
//! `proseWithBlock`.

#![allow(missing_docs)]

use std::hint::black_box;

use benches::{CLOCK, compile_reply, input, options};
use criterion::{Criterion, criterion_main};
use ui_compiler::{UiState, evaluate_block, resolve_choice, validated_state};
use ui_core::{HostLimits, Record, UiLimits, Value};
use ui_host::JsonSchemas;

fn corpus(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/conformance")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn schemas() -> JsonSchemas {
    let hosts: serde_json::Value = serde_json::from_str(&corpus("hosts.json")).unwrap();
    JsonSchemas::from_json(&hosts["querySchemas"])
}

/// Corpus replies with a Choice and bound controls: (file, input as JSON).
const CASES: &[(&str, &str)] = &[
    ("ok-05-flaky-tests.md", r#"{"$onlyFlaky": true}"#),
    ("ok-19-next-step-segmented.md", "{}"),
    ("ok-37-data-export-confirm.md", r#"{"$confirm": true}"#),
];

fn checks(c: &mut Criterion) {
    let schemas = schemas();
    let mut group = c.benchmark_group("checks");
    for (file, input_json) in CASES {
        let text = corpus(file);
        let mut opts = options(UiLimits::DEFAULT, true);
        opts.query_schemas = Some(&schemas);
        let blocks = compile_reply(&text, &opts);
        let block = blocks[0].clone();
        let input: Record = Value::from_json_str(input_json)
            .unwrap()
            .as_record()
            .unwrap()
            .clone();
        let queries = Record::default();
        let mut choice = None;
        block.walk(&mut |n| {
            if n.kind == "Choice" && choice.is_none() {
                choice = Some(n.id.clone());
            }
        });
        let choice = choice.expect("the case has a Choice");
        let limits = UiLimits::DEFAULT;
        // Checked once before timing: the paths succeed.
        validated_state(&block, &input, &queries, limits, &CLOCK).expect("valid input");
        resolve_choice(&block, &choice, &input, &queries, limits, &CLOCK).expect("a choice");
        let name = file.trim_end_matches(".md");
        // The yardstick: one evaluation of the block in the state the input gives.
        group.bench_function(format!("{name}/evaluate"), |b| {
            b.iter(|| {
                let mut state = UiState::new(&block, limits).unwrap();
                for (name, value) in &input {
                    state.set(name, value).unwrap();
                }
                black_box(evaluate_block(&block, &state, limits, Some(&CLOCK)).unwrap())
            })
        });
        group.bench_function(format!("{name}/validated_state"), |b| {
            b.iter(|| black_box(validated_state(&block, &input, &queries, limits, &CLOCK)))
        });
        group.bench_function(format!("{name}/resolve_choice"), |b| {
            b.iter(|| {
                black_box(resolve_choice(
                    &block, &choice, &input, &queries, limits, &CLOCK,
                ))
            })
        });
        group.bench_function(format!("{name}/link_targets"), |b| {
            b.iter(|| {
                black_box(ui_links::link_targets(
                    &block,
                    &input,
                    &queries,
                    limits,
                    &HostLimits::DEFAULT,
                    &CLOCK,
                ))
            })
        });
    }
    let text = input("proseWithBlock.txt");
    let blocks = compile_reply(&text, &options(UiLimits::DEFAULT, true));
    group.bench_function("proseWithBlock/fallback_text", |b| {
        b.iter(|| black_box(ui_fallback::fallback_text(&text, &blocks)))
    });
    group.finish();
}

/// Runs the group (written by hand: `criterion_group!` makes an undocumented `pub fn`).
fn benches() {
    let mut c = Criterion::default().configure_from_args();
    checks(&mut c);
}

criterion_main!(benches);
