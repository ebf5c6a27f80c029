//! The eval area of the fixtures: every file of `tests/data/eval/{ok,err}/` compiled and
//! evaluated, its view tree, diagnostics and state snapshotted (see `fixture/mod.rs` for the
//! format). Files in `ok/` must evaluate without a diagnostic or a refusal, files in `err/`
//! with at least one.
//!
//! A block fixture (the default `kind`) may set, in its header:
//! - `readings`: query readings (a JSON record), stored in the state before evaluating;
//! - `input`: a page's input (a JSON record); then the block goes through
//!   `validated_view`, the host's check of what a person could have set, with `readings`
//!   as the issued query values, and a refusal is snapshotted with its code;
//! - steps, applied in order after the first evaluation, each followed by its outcome, the
//!   state's values and the new view when it changed: `press: <view>` and
//!   `change: <view> <prop> <JSON value>` (a person's press and edit), `set: <$name> <JSON
//!   value>` (`UiState::set`) and `run: <action expression>` (`UiState::run`). A view is
//!   named by its id or `Kind[i]`, the `i`-th view of that kind in pre-order.
//!
//! A fixture of `kind: requests` compiles its block and answers each `validate: <input>`,
//! `choose: <choice id> <input>` and `arguments: <query> <input>` header line in order
//! (`validated_state`, `resolve_choice`, `query_arguments`: what a host checks of a page's
//! input); `<input>` is a JSON record, optionally followed by ` queries <JSON record>` (the
//! issued query readings), and a node id may be written `Kind[i]` (the `i`-th node of that
//! kind). An `ok` fixture compiles cleanly and has every request accepted; an `err` one has
//! a diagnostic or a refusal.
//!
//! A fixture of `kind: expressions` holds one expression per line, each parsed and
//! evaluated against the header's `vars` (a JSON record) under a fresh budget; the value
//! is printed as JavaScript's `JSON.stringify` would print it. Every line of an `ok`
//! fixture must succeed and every line of an `err` fixture must fail.

mod fixture;

use std::fmt::Write as _;

use fixture::{CLOCK, Fixture, render_block, render_diagnostics, render_view};
use ui_compiler::expr::{evaluate, parse_expression};
use ui_compiler::{
    Block, UiState, evaluate_block, query_arguments, resolve_choice, validated_state,
    validated_view,
};
use ui_core::{Budget, Failure, Record, Value, View};

fn render(out: &mut String, view: &View) {
    for node in &view.nodes {
        render_view(out, node, 0);
    }
    render_diagnostics(out, &view.diagnostics);
}

fn refused(out: &mut String, step: &str, failure: &Failure) {
    writeln!(
        out,
        "{step} refused {}: {}",
        failure.code.as_str(),
        failure.message
    )
    .unwrap();
}

/// Finds the view `name` in `view`: its id, or `Kind[i]`, the `i`-th view of that kind in
/// pre-order.
fn find<'a>(view: &'a View, name: &str) -> &'a ui_core::ViewNode {
    let mut found = Vec::new();
    let by_kind = name.strip_suffix(']').and_then(|n| n.split_once('['));
    view.walk(&mut |node| {
        let hit = match by_kind {
            Some((kind, _)) => node.kind == kind,
            None => node.id == name,
        };
        if hit {
            found.push(node);
        }
    });
    let index = by_kind.map_or(0, |(_, i)| i.parse().expect("an index"));
    found
        .get(index)
        .copied()
        .unwrap_or_else(|| panic!("no view `{name}`"))
}

/// The snapshot of a block fixture, and whether it reported any problem.
fn check_block(fixture: &Fixture) -> (String, bool) {
    let block = fixture.compile();
    let mut out = String::new();
    let mut failed = !block.diagnostics.is_empty();
    if failed {
        // The compile's own problems, with the nodes they belong to.
        out.push_str(&render_block(&block));
        out.push_str("--- view\n");
    }
    let readings = fixture.record("readings");
    let limits = fixture.limits;
    let (mut state, mut view) = if let Some(input) = fixture.json("input") {
        let input = input.as_record().expect("input is a record");
        match validated_view(&block, input, &readings, limits, &CLOCK) {
            Ok(pair) => pair,
            Err(failure) => {
                refused(&mut out, "input", &failure);
                return (out, true);
            }
        }
    } else {
        let mut state = match UiState::new(&block, limits) {
            Ok(state) => state,
            Err(failure) => {
                refused(&mut out, "state", &failure);
                return (out, true);
            }
        };
        for (name, value) in &readings {
            if let Err(failure) = state.set_query(name, value, &block) {
                refused(&mut out, &format!("reading {name}"), &failure);
                failed = true;
            }
        }
        match evaluate_block(&block, &state, limits, Some(&CLOCK)) {
            Ok(view) => (state, view),
            Err(failure) => {
                refused(&mut out, "evaluation", &failure);
                return (out, true);
            }
        }
    };
    failed |= !view.diagnostics.is_empty();
    let mut shown = String::new();
    render(&mut shown, &view);
    out.push_str(&shown);
    for (step, argument) in &fixture.header {
        let applied = match step.as_str() {
            "press" => Ok(format!("{:?}", state.press(find(&view, argument)))),
            "change" => {
                let mut parts = argument.splitn(3, ' ');
                let (Some(id), Some(prop), Some(value)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    panic!("change: <view> <prop> <JSON value>");
                };
                let value = Value::from_json_str(value).unwrap();
                state
                    .change(find(&view, id), prop, &value)
                    .map(|applied| format!("{applied:?}"))
            }
            "set" => {
                let (name, value) = argument.split_once(' ').expect("set: <$name> <JSON value>");
                let value = Value::from_json_str(value).unwrap();
                state.set(name, &value).map(|()| "set".to_owned())
            }
            "run" => {
                let mut budget = Budget::new(limits, &CLOCK);
                parse_expression(argument, &mut budget)
                    .and_then(|action| state.run(&action))
                    .map(|()| "ran".to_owned())
            }
            _ => continue,
        };
        writeln!(out, "\n--- {step} {argument}").unwrap();
        match applied {
            Ok(applied) => writeln!(out, "{applied}").unwrap(),
            Err(failure) => {
                refused(&mut out, step, &failure);
                failed = true;
            }
        }
        writeln!(
            out,
            "values: {}",
            Value::record(state.values().clone()).to_js_json()
        )
        .unwrap();
        view = evaluate_block(&block, &state, limits, Some(&CLOCK)).unwrap();
        // The view again only when it changed.
        let mut next = String::new();
        render(&mut next, &view);
        if next != shown {
            out.push_str(&next);
            shown = next;
        }
        failed |= !view.diagnostics.is_empty();
    }
    (out, failed)
}

/// The compiled id a request names: `Kind[i]` is the `i`-th node of that kind in document
/// order (with any `:<index>` suffix of an Each iteration kept), anything else is taken as
/// written.
fn node_id(block: &Block, name: &str) -> String {
    let Some((kind, rest)) = name.split_once('[') else {
        return name.to_owned();
    };
    let (index, suffix) = rest.split_once(']').expect("`Kind[i]`");
    let index: usize = index.parse().expect("an index");
    let mut ids = Vec::new();
    block.walk(&mut |n| {
        if n.kind == kind {
            ids.push(n.id.clone());
        }
    });
    format!("{}{suffix}", ids[index])
}

/// Splits `<input JSON>[ queries <queries JSON>]`.
fn input_and_queries(text: &str) -> (Record, Record) {
    let (input, queries) = text.split_once(" queries ").unwrap_or((text, "{}"));
    let record = |json: &str| {
        Value::from_json_str(json)
            .unwrap_or_else(|e| panic!("`{json}`: {e}"))
            .as_record()
            .expect("a record")
            .clone()
    };
    (record(input), record(queries))
}

/// The snapshot of a request list, and whether the block or any request failed.
fn check_requests(fixture: &Fixture) -> (String, bool) {
    let block = fixture.compile();
    let limits = fixture.limits;
    let mut out = String::new();
    let mut failed = !block.diagnostics.is_empty();
    if failed {
        out.push_str(&render_block(&block));
        out.push_str("--- requests\n");
    }
    for (request, argument) in &fixture.header {
        let result: Result<String, Failure> = match request.as_str() {
            "validate" => {
                let (input, queries) = input_and_queries(argument);
                validated_state(&block, &input, &queries, limits, &CLOCK).map(|state| {
                    format!(
                        "values {}",
                        Value::record(state.values().clone()).to_js_json()
                    )
                })
            }
            "choose" => {
                let (name, rest) = argument.split_once(' ').expect("choose: <id> <input>");
                let (input, queries) = input_and_queries(rest);
                let id = if name == "\"\"" {
                    String::new()
                } else {
                    node_id(&block, name)
                };
                resolve_choice(&block, &id, &input, &queries, limits, &CLOCK).map(|s| {
                    format!(
                        "label {:?} context {:?} values {}",
                        s.label,
                        s.context,
                        Value::record(s.values).to_js_json()
                    )
                })
            }
            "arguments" => {
                let (name, input) = argument.split_once(' ').expect("arguments: <name> <input>");
                let name = if name == "\"\"" { "" } else { name };
                let (input, _) = input_and_queries(input);
                query_arguments(&block, name, &input, limits, &CLOCK)
                    .map(|args| format!("arguments {}", Value::record(args).to_js_json()))
            }
            _ => continue,
        };
        match result {
            Ok(answer) => writeln!(out, "{request} {argument}\n  => {answer}"),
            Err(e) => {
                failed = true;
                writeln!(
                    out,
                    "{request} {argument}\n  => {}: {}",
                    e.code.as_str(),
                    e.message
                )
            }
        }
        .unwrap();
    }
    (out, failed)
}

/// The snapshot of an expression list, and whether its lines failed.
fn check_expressions(fixture: &Fixture) -> (String, bool) {
    let vars = fixture.record("vars");
    let mut out = String::new();
    let mut failures = 0;
    let lines: Vec<&str> = fixture.body.lines().collect();
    for line in &lines {
        let mut budget = Budget::new(fixture.limits, &CLOCK);
        let result = parse_expression(line, &mut budget)
            .and_then(|expr| evaluate(&expr, &vars, &mut budget));
        match result {
            Ok(value) => writeln!(out, "{line}\n  => {}", value.to_js_json()),
            Err(e) => {
                failures += 1;
                writeln!(out, "{line}\n  => {}: {}", e.code.as_str(), e.message)
            }
        }
        .unwrap();
    }
    assert!(
        failures == 0 || failures == lines.len(),
        "an expression fixture mixes good and bad lines:\n{out}"
    );
    (out, failures > 0)
}

#[test]
fn eval() {
    insta::glob!("data/eval/*/*.md", |path| {
        let fixture = Fixture::read(path);
        let (snapshot, failed) = match fixture.kind.as_str() {
            "" | "block" => check_block(&fixture),
            "expressions" => check_expressions(&fixture),
            "requests" => check_requests(&fixture),
            other => panic!("unknown kind `{other}`"),
        };
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
