//! The parse area of the fixtures: every file of `tests/data/parse/{ok,err}/` compiled, its
//! nodes, queries, diagnostics and fallback snapshotted (see `fixture/mod.rs` for the
//! format). Files in `ok/` must compile without a diagnostic, files in `err/` with at least
//! one.
//!
//! `kind` selects what the body is: a block (the default), a whole `reply` (every fence
//! compiled by `compile_reply` under the reply limits), or one `expression` per line,
//! parsed to its wire shape.

mod fixture;

use std::fmt::Write as _;

use fixture::{CLOCK, Fixture, render_block};
use ui_compiler::compile_reply;
use ui_compiler::expr::parse_expression;
use ui_core::Budget;

/// The snapshot of one fixture, and whether it reported any problem.
fn check(fixture: &Fixture) -> (String, bool) {
    match fixture.kind.as_str() {
        "" | "block" => {
            let block = fixture.compile();
            (render_block(&block), !block.diagnostics.is_empty())
        }
        "reply" => {
            let blocks = compile_reply(&fixture.body, &fixture.options());
            let mut out = String::new();
            let mut failed = false;
            for block in &blocks {
                out.push_str(&render_block(block));
                out.push('\n');
                failed |= !block.diagnostics.is_empty();
            }
            writeln!(out, "{} blocks", blocks.len()).unwrap();
            (out, failed)
        }
        "expression" => {
            let mut out = String::new();
            let mut failures = 0;
            let lines: Vec<&str> = fixture.body.lines().collect();
            for line in &lines {
                let mut budget = Budget::new(fixture.limits, &CLOCK);
                match parse_expression(line, &mut budget) {
                    Ok(expr) => {
                        writeln!(
                            out,
                            "{line}\n  => {}",
                            serde_json::to_string(&expr).unwrap()
                        )
                    }
                    Err(e) => {
                        failures += 1;
                        writeln!(out, "{line}\n  => {}: {}", e.code.as_str(), e.message)
                    }
                }
                .unwrap();
            }
            // Every line of an `err` fixture fails, every line of an `ok` one parses.
            let all_failed = failures == lines.len();
            assert!(
                failures == 0 || all_failed,
                "an expression fixture mixes good and bad lines:\n{out}"
            );
            (out, failures > 0)
        }
        other => panic!("unknown kind `{other}`"),
    }
}

#[test]
fn parse() {
    insta::glob!("data/parse/*/*.md", |path| {
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
