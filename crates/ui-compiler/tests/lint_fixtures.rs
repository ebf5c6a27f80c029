//! The lint area of the fixtures: every file of `tests/data/lint/{ok,err}/` compiled and
//! linted, each finding snapshotted with its code, UTF-16 range, the source text it covers,
//! its node and its fix (see `fixture/mod.rs` for the format). Files in `ok/` must have no
//! finding, files in `err/` some. The compile's diagnostics are printed too: lints never
//! touch them.
//!
//! Header keys of this area: `fields: <source> = <field>, …` names the result fields of a
//! query source (for `unknown_column`); `only: <code>` keeps the findings of one lint.

mod fixture;

use std::fmt::Write as _;

use fixture::{Fixture, render_diagnostics};
use ui_compiler::{LintOptions, QueryFields, lint_block};

/// The result fields a fixture names.
struct Fields(Vec<(String, Vec<String>)>);

impl QueryFields for Fields {
    fn fields(&self, source: &str) -> Option<Vec<String>> {
        let (_, fields) = self.0.iter().find(|(name, _)| name == source)?;
        Some(fields.clone())
    }
}

/// The snapshot of one fixture, and whether it found anything.
fn check(fixture: &Fixture) -> (String, bool) {
    let fields = Fields(
        fixture
            .header
            .iter()
            .filter(|(key, _)| key == "fields")
            .map(|(_, value)| {
                let (source, list) = value.split_once('=').expect("fields: <source> = <list>");
                let list = list.split(',').map(|f| f.trim().to_owned()).collect();
                (source.trim().to_owned(), list)
            })
            .collect(),
    );
    let source = &fixture.body;
    let block = fixture.compile();
    let before = block.diagnostics.clone();
    let options = LintOptions {
        query_fields: Some(&fields),
    };
    let lints = lint_block(&block, source, &options);
    assert_eq!(block.diagnostics, before, "lints never touch diagnostics");
    let mut out = String::new();
    render_diagnostics(&mut out, &block.diagnostics);
    let only = fixture.get("only");
    let mut found = false;
    for lint in &lints {
        if only.is_some_and(|code| code != lint.code.as_str()) {
            continue;
        }
        found = true;
        let at = &source[lint.bytes.start as usize..lint.bytes.end as usize];
        write!(
            out,
            "lint {} {}..{} {:?}",
            lint.code.as_str(),
            lint.range.start,
            lint.range.end,
            at
        )
        .unwrap();
        if let Some(node) = &lint.node_id {
            write!(out, " node={node}").unwrap();
        }
        writeln!(out, ": {}", lint.message).unwrap();
        if let Some(fix) = &lint.fix {
            let replaced = &source[fix.bytes.start as usize..fix.bytes.end as usize];
            writeln!(
                out,
                "  fix {}..{} {replaced:?} -> {:?}",
                fix.start, fix.end, fix.text
            )
            .unwrap();
        }
    }
    (out, found)
}

#[test]
fn lint() {
    insta::glob!("data/lint/*/*.md", |path| {
        let fixture = Fixture::read(path);
        let (snapshot, found) = check(&fixture);
        assert_eq!(
            found,
            !fixture.ok,
            "{}: `ok` fixtures have no findings, `err` fixtures have some\n{snapshot}",
            path.display()
        );
        insta::with_settings!({description => fixture.body.as_str(), omit_expression => true}, {
            insta::assert_snapshot!(snapshot);
        });
    });
}
