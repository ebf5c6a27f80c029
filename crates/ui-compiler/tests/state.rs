//! `UiState`, evaluation, edits, presses and the streaming throttle
//! (`language.md` §14, §15, §18).

use std::sync::{Arc, Mutex};

use ui_compiler::{
    Applied, Block, CompileOptions, UiState, UiStream, compile_block, evaluate_block,
};
use ui_core::{Code, FrozenClock, ManualClock, UiLimits, Value};

static FROZEN: FrozenClock = FrozenClock(0.0);

fn compile(source: &str, id: &str) -> Block {
    let options = CompileOptions {
        is_final: true,
        clock: Some(&FROZEN),
        ..CompileOptions::default()
    };
    compile_block(source, id, &options)
}

fn json(text: &str) -> Value {
    Value::from_json_str(text).unwrap()
}

const CONTROLS: &str = r#"$on = false
$n = 5
$mode = "a"
$tags = ["x"]
<Switch value={$on}>On</Switch>
<Slider value={$n} min={0} max={10}>N</Slider>
<Segmented value={$mode}><Option value="a">A</Option><Option value="b">B</Option></Segmented>
<Button action={@Set($n, 10)} disabled={$on}>Max</Button>
<Button action={@Reset()}>Reset</Button>
<Show when={$on}><Summary>{$n} on</Summary></Show>"#;

#[test]
fn set_checks_declaration_and_kind() {
    let block = compile(CONTROLS, "b");
    assert!(block.diagnostics.is_empty(), "{:?}", block.diagnostics);
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    assert_eq!(state.snapshot(), 0);
    state.set("$n", &json("7")).unwrap();
    assert_eq!(state.values()["$n"], json("7"));
    assert_eq!(state.snapshot(), 1);
    assert_eq!(
        state.set("$nope", &json("1")).unwrap_err().code,
        Code::RefusedBinding
    );
    assert_eq!(
        state.set("$n", &json("\"7\"")).unwrap_err().code,
        Code::InvalidValue
    );
    // Element types of arrays are not checked, only the kind.
    state.set("$tags", &json(r#"[1, {"y": 2}]"#)).unwrap();
    assert_eq!(
        state.set("$tags", &json(r#"{"0": 1}"#)).unwrap_err().code,
        Code::InvalidValue
    );
    assert_eq!(
        state
            .set("$tags", &json(r#"[{"__proto__": 1}]"#))
            .unwrap_err()
            .code,
        Code::RefusedAccess
    );
}

#[test]
fn bindings_write_only_values_the_control_allows() {
    let block = compile(CONTROLS, "b");
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&FROZEN)).unwrap();
    let slider = view
        .nodes
        .iter()
        .find(|n| n.kind == "Slider")
        .unwrap()
        .clone();
    assert_eq!(slider.bindings["value"].value, json("5"));
    assert_eq!(
        state.change(&slider, "value", &json("11")).unwrap(),
        Applied::Ignored
    );
    assert_eq!(
        state.change(&slider, "value", &json("10")).unwrap(),
        Applied::Changed
    );
    assert_eq!(state.values()["$n"], json("10"));
    let switch = view
        .nodes
        .iter()
        .find(|n| n.kind == "Switch")
        .unwrap()
        .clone();
    assert_eq!(
        state.change(&switch, "value", &json("\"yes\"")).unwrap(),
        Applied::Ignored
    );
    // A Segmented accepts any scalar, but the state refuses a change of kind.
    let segmented = view
        .nodes
        .iter()
        .find(|n| n.kind == "Segmented")
        .unwrap()
        .clone();
    assert_eq!(
        state
            .change(&segmented, "value", &json("5"))
            .unwrap_err()
            .code,
        Code::InvalidValue
    );
    assert_eq!(
        state.change(&segmented, "value", &json("\"z\"")).unwrap(),
        Applied::Changed
    );
}

#[test]
fn presses_run_actions_unless_disabled() {
    let block = compile(CONTROLS, "b");
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&FROZEN)).unwrap();
    let buttons: Vec<_> = view
        .nodes
        .iter()
        .filter(|n| n.kind == "Button")
        .cloned()
        .collect();
    assert_eq!(state.press(&buttons[0]), Applied::Changed);
    assert_eq!(state.values()["$n"], json("10"));
    state.set("$on", &json("true")).unwrap();
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&FROZEN)).unwrap();
    let max = view.nodes.iter().find(|n| n.kind == "Button").unwrap();
    assert_eq!(max.props["disabled"], json("true"));
    state.set("$n", &json("1")).unwrap();
    assert_eq!(state.press(max), Applied::Ignored);
    assert_eq!(state.values()["$n"], json("1"));
    // Show resolved: its child is spliced in place.
    let summary = view.nodes.last().unwrap();
    assert_eq!(summary.kind, "Summary");
    let reset = view
        .nodes
        .iter()
        .filter(|n| n.kind == "Button")
        .nth(1)
        .unwrap();
    assert_eq!(state.press(reset), Applied::Changed);
    assert_eq!(state.values(), &block.defaults);
}

#[test]
fn run_accepts_computed_values_and_checks_targets() {
    let block = compile(CONTROLS, "b");
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let mut budget = ui_core::Budget::new(UiLimits::DEFAULT, &FROZEN);
    let action = |text: &str, budget: &mut ui_core::Budget<'_>| {
        ui_compiler::expr::parse_expression(text, budget).unwrap()
    };
    state.run(&action("@Set($n, $n + 1)", &mut budget)).unwrap();
    assert_eq!(state.values()["$n"], json("6"));
    state.run(&action("@Reset($n)", &mut budget)).unwrap();
    assert_eq!(state.values()["$n"], json("5"));
    let refused = |text: &str, state: &mut UiState, budget: &mut ui_core::Budget<'_>| {
        state.run(&action(text, budget)).unwrap_err().code
    };
    assert_eq!(
        refused("@Count($n)", &mut state, &mut budget),
        Code::RefusedAction
    );
    assert_eq!(
        refused("@Set($n)", &mut state, &mut budget),
        Code::RefusedAction
    );
    assert_eq!(
        refused("@Set($x, 1)", &mut state, &mut budget),
        Code::RefusedBinding
    );
    assert_eq!(
        refused("@Set($n, \"s\")", &mut state, &mut budget),
        Code::InvalidValue
    );
}

#[test]
fn sync_keeps_edits_of_unchanged_defaults() {
    let block = compile("$a = 1\n$b = 2\n<Tag>{$a}</Tag>", "b");
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    state.set("$a", &json("10")).unwrap();
    state.set("$b", &json("20")).unwrap();
    let next = compile("$a = 1\n$b = 3\n$c = 4\n<Tag>{$a}</Tag>", "b");
    state.sync(&next).unwrap();
    assert_eq!(state.values()["$a"], json("10"));
    assert_eq!(state.values()["$b"], json("3"));
    assert_eq!(state.values()["$c"], json("4"));
    let gone = compile("$c = 4\n<Tag>x</Tag>", "b");
    state.sync(&gone).unwrap();
    assert_eq!(state.values().len(), 1);
    // Another block id starts over.
    state.set("$c", &json("9")).unwrap();
    state
        .sync(&compile("$c = 4\n<Tag>x</Tag>", "other"))
        .unwrap();
    assert_eq!(state.values()["$c"], json("4"));
}

struct Sources;
impl ui_compiler::QuerySchemas for Sources {
    fn check(&self, source: &str, _: &Value) -> Option<Result<(), String>> {
        (source == "tickets").then_some(Ok(()))
    }
}

#[test]
fn readings_follow_the_query_definition() {
    let options = || CompileOptions {
        is_final: true,
        clock: Some(&FROZEN),
        query_schemas: Some(&Sources),
        ..CompileOptions::default()
    };
    let block = compile_block(
        "$t = @Query(\"tickets\", {open: true})\n<Summary>{@Count($t)} open</Summary>",
        "b",
        &options(),
    );
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    // Without a reading the expression fails refused_access.
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&FROZEN)).unwrap();
    assert_eq!(view.nodes[0].children[0].error, Some(Code::RefusedAccess));
    state.set_query("$t", &json("[{}, {}]"), &block).unwrap();
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&FROZEN)).unwrap();
    assert_eq!(view.nodes[0].children[0].props["text"], json("\"2\""));
    assert_eq!(
        state.set_query("$x", &json("1"), &block).unwrap_err().code,
        Code::RefusedQuery
    );
    // Changing the arguments drops the reading.
    let changed = compile_block(
        "$t = @Query(\"tickets\", {open: false})\n<Summary>{@Count($t)} open</Summary>",
        "b",
        &options(),
    );
    state.sync(&changed).unwrap();
    assert!(state.readings().is_empty());
    assert_eq!(
        state.set_query("$t", &json("[]"), &block).unwrap_err().code,
        Code::RefusedQuery
    );
}

#[test]
fn listeners_see_every_revision() {
    let block = compile(CONTROLS, "b");
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let sub = state.subscribe(Box::new(move |r| sink.lock().unwrap().push(r)));
    state.set("$n", &json("1")).unwrap();
    state.set("$n", &json("1")).unwrap();
    state.unsubscribe(sub);
    state.set("$n", &json("2")).unwrap();
    assert_eq!(*seen.lock().unwrap(), [1, 2]);
}

#[test]
fn each_ids_and_budget() {
    let block = compile(
        "$rows = [{n: \"a\"}, {n: \"b\"}]\n<Each items={$rows} as=\"row\"><Tag>{row.n}</Tag></Each>",
        "b",
    );
    let state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let view = evaluate_block(&block, &state, UiLimits::DEFAULT, Some(&FROZEN)).unwrap();
    let ids: Vec<&str> = view.nodes.iter().map(|n| n.id.as_str()).collect();
    let tag = &block.nodes[0].children[0].id;
    assert_eq!(ids, [format!("{tag}:0"), format!("{tag}:1")]);
    assert_eq!(view.nodes[1].source_id, *tag);
    assert_eq!(view.nodes[1].children[0].props["text"], json("\"b\""));
    // 50 × 50 nested repetitions exceed the evaluation's nodes.
    let nested = compile(
        "$l = [0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9]\n<Each items={$l} as=\"a\"><Each items={$l} as=\"b\"><Tag>x</Tag></Each></Each>",
        "b",
    );
    let state = UiState::new(&nested, UiLimits::DEFAULT).unwrap();
    let view = evaluate_block(&nested, &state, UiLimits::DEFAULT, Some(&FROZEN)).unwrap();
    assert!(
        view.diagnostics
            .iter()
            .any(|d| d.code == Code::BudgetExceeded)
    );
}

#[test]
fn stream_throttles_to_250_ms() {
    // Upstream's example: updates every 10 ms from 0 to 490 emit at 0 and 250 (with the
    // text of t=240), and the next emit is at 500 with the text of t=490.
    let clock = ManualClock::new(0.0);
    let options = CompileOptions {
        clock: Some(&FROZEN),
        ..CompileOptions::default()
    };
    let mut stream = UiStream::new(options, &clock);
    let text = |t: u32| format!("```ui\n<Summary>{}</Summary>", "x".repeat(t as usize / 10));
    let mut emitted = Vec::new();
    let mut last_text = 0;
    for t in (0..=490).step_by(10) {
        clock.set(f64::from(t));
        if let Some(deadline) = stream.deadline()
            && deadline <= f64::from(t)
            && let Some(p) = stream.flush()
        {
            emitted.push((t, p.text_length));
        }
        if let Some(p) = stream.update(&text(t), None) {
            emitted.push((t, p.text_length));
        }
        last_text = t;
    }
    let len = |t: u32| text(t).len();
    assert_eq!(emitted, [(0, len(0)), (250, len(240))]);
    assert_eq!(stream.deadline(), Some(500.0));
    clock.set(500.0);
    let p = stream.flush().unwrap();
    assert_eq!(p.text_length, len(last_text));
    let blocks = stream.finish(&format!("{}\n```\n", text(490)), None);
    assert!(blocks[0].complete);
    assert!(stream.update("more", None).is_none());
}

#[test]
fn unchanged_fences_are_reused_between_previews() {
    let options = CompileOptions {
        clock: Some(&FROZEN),
        ..CompileOptions::default()
    };
    let mut compiler = ui_compiler::UiCompiler::new();
    let first = "```ui\n<Tag>a</Tag>\n```\n```ui\n<Tag>b";
    let a = compiler.compile(first, &options);
    let b = compiler.compile(&format!("{first}</Tag>"), &options);
    assert!(Arc::ptr_eq(&a[0], &b[0]));
    assert!(!Arc::ptr_eq(&a[1], &b[1]));
    // A final compile always compiles anew.
    let fin = CompileOptions {
        is_final: true,
        ..options.clone()
    };
    let c = compiler.compile(&format!("{first}</Tag>"), &fin);
    assert!(!Arc::ptr_eq(&b[0], &c[0]));
    assert_eq!(*b[0], *c[0]);
}
