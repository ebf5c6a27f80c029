//! `UiState` across revisions of a block, listeners and the streaming throttle
//! (`language.md` §14, §15, §18). Evaluation, edits, presses and actions are the
//! `state_*` fixtures of `tests/data/eval/`.

use std::sync::{Arc, Mutex};

use ui_compiler::{Block, CompileOptions, UiState, UiStream, compile_block};
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
fn changed_query_arguments_drop_the_reading() {
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
    // Readings with and without a reading: `tests/data/eval/*/state_*reading*.md`.
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    state.set_query("$t", &json("[{}, {}]"), &block).unwrap();
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

/// A clock that counts its reads.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicU64);

impl Counting {
    fn take(&self) -> u64 {
        self.0.swap(0, std::sync::atomic::Ordering::SeqCst)
    }
}

impl ui_core::Clock for Counting {
    fn now_ms(&self) -> f64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        0.0
    }
}

#[test]
fn an_action_is_evaluated_under_the_states_clock() {
    let items: Vec<String> = (1..=100).map(|i| i.to_string()).collect();
    let source = format!("$n = 0\n$xs = [{}]\n<Tag>{{$n}}</Tag>", items.join(", "));
    let block = compile(&source, "b");
    let mut state = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let mut budget = ui_core::Budget::new(UiLimits::DEFAULT, &FrozenClock(0.0));
    let action = ui_compiler::expr::parse_expression("@Set($n, @Sum($xs))", &mut budget).unwrap();
    let clock = Arc::new(Counting::default());
    state.set_clock(clock.clone());
    // What charging the scope and copying the result into the state read of the clock...
    state.scope().unwrap();
    state.set("$n", &json("5050")).unwrap();
    let copy_only = clock.take();
    // ...and what the whole action reads: the evaluation is timed on the same clock, not
    // on one of its own.
    state.run(&action).unwrap();
    assert_eq!(state.values()["$n"], json("5050"));
    let action_reads = clock.take();
    assert!(
        action_reads > copy_only,
        "the action read the state's clock {action_reads} times, its scope and copy alone \
         {copy_only}"
    );
}
