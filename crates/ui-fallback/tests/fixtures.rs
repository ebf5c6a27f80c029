//! The fallback area of the fixtures: every file of ui-compiler's
//! `tests/data/fallback/{ok,err}/` (the format is described in that crate's
//! `tests/fixture/mod.rs`, shared here), its text fallbacks snapshotted. Files in `ok/` must
//! compile without a diagnostic, files in `err/` with at least one.
//!
//! A block fixture (the default `kind`) prints the block's diagnostics, its compile-time
//! fallback (`catalog.md` §7.2) and its evaluated fallback (`query_fallback`, §7.6) with the
//! header's `readings` (a JSON record, empty by default). A fixture of `kind: reply`
//! compiles a whole reply and prints each block's diagnostics and fallback, then the reply's
//! fallback text (§7.5).

#[path = "../../ui-compiler/tests/fixture/mod.rs"]
mod fixture;

use std::fmt::Write as _;

use fixture::{CLOCK, Fixture, render_diagnostics};
use ui_compiler::compile_reply;
use ui_fallback::{fallback_text, query_fallback};

fn json(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// The snapshot of one fixture, and whether it reported any problem.
fn check(fixture: &Fixture) -> (String, bool) {
    let mut out = String::new();
    let mut failed = false;
    match fixture.kind.as_str() {
        "" | "block" => {
            let block = fixture.compile();
            render_diagnostics(&mut out, &block.diagnostics);
            failed |= !block.diagnostics.is_empty();
            writeln!(out, "fallback: {}", json(&block.fallback)).unwrap();
            let readings = fixture.record("readings");
            match query_fallback(&block, &readings, fixture.limits, &CLOCK) {
                Ok(text) => writeln!(out, "evaluated: {}", json(&text)).unwrap(),
                Err(e) => {
                    failed = true;
                    writeln!(out, "evaluated: {}: {}", e.code.as_str(), e.message).unwrap();
                }
            }
        }
        "reply" => {
            let blocks = compile_reply(&fixture.body, &fixture.options());
            for block in &blocks {
                writeln!(out, "block {} {}..{}", block.id, block.start, block.end).unwrap();
                render_diagnostics(&mut out, &block.diagnostics);
                failed |= !block.diagnostics.is_empty();
                writeln!(out, "fallback: {}", json(&block.fallback)).unwrap();
            }
            let text = fallback_text(&fixture.body, &blocks);
            writeln!(out, "text: {}", json(&text)).unwrap();
        }
        other => panic!("unknown kind `{other}`"),
    }
    (out, failed)
}

#[test]
fn fallback() {
    insta::glob!("../../ui-compiler/tests/data", "fallback/*/*.md", |path| {
        let fixture = Fixture::read(path);
        let (snapshot, failed) = check(&fixture);
        assert_eq!(
            failed,
            !fixture.ok,
            "{}: `ok` fixtures have no diagnostics, `err` fixtures have some\n{snapshot}",
            path.display()
        );
        insta::with_settings!({description => fixture.body.as_str(), omit_expression => true}, {
            insta::assert_snapshot!(snapshot);
        });
    });
}
