//! What a person could have set (`host.md` §11–§12, `language.md` §16): tampered input
//! sent back by a page is refused by [`validated_state`], `query_arguments` and
//! [`resolve_choice`] with the spec's stable code — never a panic — and honest input is
//! accepted. The cases live in `tests/data/eval/*/{input,choices}_*.md` (`kind: requests`);
//! here stay the API checks and a proptest that holds both functions against a small model
//! of "every changed value is offered by a visible control or set by a visible, enabled
//! Button".

use proptest::prelude::*;
use ui_compiler::{
    Block, CompileOptions, QuerySchemas, Selection, UiState, compile_block, input_values,
    query_arguments, resolve_choice, validated_state,
};
use ui_core::{Code, Failure, FrozenClock, Record, UiLimits, Value};

static CLOCK: FrozenClock = FrozenClock(0.0);

/// Registers the query sources `tickets` and `hosts`, accepting any arguments.
struct Sources;

impl QuerySchemas for Sources {
    fn check(&self, source: &str, _: &Value) -> Option<Result<(), String>> {
        matches!(source, "tickets" | "hosts").then_some(Ok(()))
    }
}

fn compile_with(source: &str, is_final: bool) -> Block {
    let options = CompileOptions {
        is_final,
        clock: Some(&CLOCK),
        query_schemas: Some(&Sources),
        ..CompileOptions::default()
    };
    compile_block(source, "b", &options)
}

/// A final block that must compile without diagnostics.
fn compile(source: &str) -> Block {
    let block = compile_with(source, true);
    assert!(
        block.diagnostics.is_empty(),
        "{source}\n{:?}",
        block.diagnostics
    );
    block
}

fn value(json: &str) -> Value {
    Value::from_json_str(json).unwrap()
}

fn record(json: &str) -> Record {
    value(json).as_record().unwrap().clone()
}

fn validate(block: &Block, input: &str, queries: &str) -> Result<UiState, Failure> {
    validated_state(
        block,
        &record(input),
        &record(queries),
        UiLimits::DEFAULT,
        &CLOCK,
    )
}

fn choose(
    block: &Block,
    choice_id: &str,
    input: &str,
    queries: &str,
) -> Result<Selection, Failure> {
    resolve_choice(
        block,
        choice_id,
        &record(input),
        &record(queries),
        UiLimits::DEFAULT,
        &CLOCK,
    )
}

/// The code of a failed result, `None` for success.
fn code<T>(result: Result<T, Failure>) -> Option<Code> {
    result.err().map(|f| f.code)
}

/// Compiled ids of the nodes of `kind`, in document order.
fn ids(block: &Block, kind: &str) -> Vec<String> {
    let mut out = Vec::new();
    block.walk(&mut |n| {
        if n.kind == kind {
            out.push(n.id.clone());
        }
    });
    out
}

/// One control of every kind, a hidden control, a disabled and an enabled Button, a
/// variable no control binds, and one choice.
const CONTROLS: &str = r#"$mode = "a"
$tags = ["x"]
$on = false
$n = 5
$hidden = "h"
$free = 1
$locked = "off"
$open = "off"
$odd = "q"
$cfg = {a: 1, b: 2}
<Segmented value={$mode}><Option value="a">A</Option><Option value="b">B</Option></Segmented>
<Checklist value={$tags}><Item value="x">X</Item><Item value="y">Y</Item></Checklist>
<Switch value={$on}>On</Switch>
<Slider value={$n} min={0} max={10}>N</Slider>
<Show when={false}><Segmented value={$hidden}><Option value="h">H</Option><Option value="k">K</Option></Segmented></Show>
<Button action={@Set($locked, "on")} disabled={true}>Locked</Button>
<Button action={@Set($open, "on")} disabled={false}>Open</Button>
<Segmented value={$odd}><Option value="a">A</Option></Segmented>
<Button action={@Set($cfg, {a: 2, b: 1})}>Swap</Button>
<Summary>{$free} free</Summary>
<Choices><Choice context={"Mode " + $mode}>Go</Choice></Choices>"#;

/// The controls block and the id of its one Choice.
fn controls() -> (Block, String) {
    let block = compile(CONTROLS);
    let choice = ids(&block, "Choice").remove(0);
    (block, choice)
}

/// Asserts that both [`validated_state`] and [`resolve_choice`] answer `expected` for
/// `input` on the controls block.
#[track_caller]
fn assert_both(input: &str, expected: Option<Code>) {
    let (block, choice) = controls();
    assert_eq!(
        code(validate(&block, input, "{}")),
        expected,
        "validated_state({input})"
    );
    assert_eq!(
        code(choose(&block, &choice, input, "{}")),
        expected,
        "resolve_choice({input})"
    );
}

#[test]
fn defaults_and_empty_input_are_accepted() {
    let (block, choice) = controls();
    let fresh = UiState::new(&block, UiLimits::DEFAULT).unwrap();
    let sendable = input_values(&block, &fresh).unwrap();
    // Bound variables and Button targets, visible or not; never `$free`.
    let names: Vec<&str> = sendable.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "$mode", "$tags", "$on", "$n", "$hidden", "$locked", "$open", "$odd", "$cfg"
        ]
    );
    let all = Value::record(sendable.clone()).to_js_json();
    assert_both("{}", None);
    assert_both(&all, None);
    let state = validate(&block, &all, "{}").unwrap();
    assert_eq!(state.values(), fresh.values());
    let selection = choose(&block, &choice, &all, "{}").unwrap();
    assert_eq!(selection.values, sendable);
}

#[test]
fn a_selection_s_values_are_the_input_values_of_its_state() {
    let (block, choice) = controls();
    let input = r#"{"$mode": "b"}"#;
    let selection = choose(&block, &choice, input, "{}").unwrap();
    let state = validate(&block, input, "{}").unwrap();
    assert_eq!(selection.values, input_values(&block, &state).unwrap());
}

#[test]
fn a_block_of_another_catalog_version_is_refused() {
    let (mut block, choice) = controls();
    assert!(validate(&block, "{}", "{}").is_ok());
    block.catalog_version = 2;
    assert_eq!(code(validate(&block, "{}", "{}")), Some(Code::InvalidBlock));
    assert_eq!(
        code(choose(&block, &choice, "{}", "{}")),
        Some(Code::RefusedChoice)
    );
}

/// The reference lists a page's input names from a copy of the whole scope
/// (`uiInputValues`), so defaults and readings together must fit the budget before any
/// input is looked at, even where each reading fitted on its own.
#[test]
fn defaults_and_readings_together_must_fit_before_the_input_is_read() {
    let source = r#"$x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
$t = @Query("tickets", {open: true})
<Checklist value={$x}><Item value={1}>One</Item></Checklist>
<Choices><Choice>Go</Choice></Choices>"#;
    let block = compile(source);
    let choice = ids(&block, "Choice").remove(0);
    let readings = record(&format!("{{\"$t\": [{}]}}", vec!["0"; 20].join(", ")));
    let input = record(r#"{"$x": []}"#);
    // The two lists and their records: about 44 iterations together, 22 each.
    let tight = UiLimits::DEFAULT.with("iterations", 35).unwrap();
    for limits in [tight, UiLimits::DEFAULT] {
        let expected = (limits == tight).then_some(Code::BudgetExceeded);
        assert_eq!(
            code(validated_state(&block, &input, &readings, limits, &CLOCK)),
            expected
        );
        assert_eq!(
            code(resolve_choice(
                &block, &choice, &input, &readings, limits, &CLOCK
            )),
            expected
        );
    }
}

/// A query whose arguments read no state answers a copy of its stored arguments, made
/// under the budget as the reference's `copyUiValue(query.args, …)`.
#[test]
fn literal_query_arguments_are_copied_under_the_budget() {
    let block = compile(
        r#"$t = @Query("tickets", {branch: "abcd"})
<Summary>Hi</Summary>"#,
    );
    // Only the argument's string is longer than 3: the page itself fits.
    let empty = Record::default();
    let short = UiLimits::DEFAULT.with("stringLength", 3).unwrap();
    assert_eq!(
        code(query_arguments(&block, "$t", &empty, short, &CLOCK)),
        Some(Code::BudgetExceeded)
    );
    let args = query_arguments(&block, "$t", &empty, UiLimits::DEFAULT, &CLOCK).unwrap();
    assert_eq!(args, record(r#"{"branch": "abcd"}"#));
}

// ---- model-based property ----

/// The variables of the generated block: one per control kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    Seg,
    List,
    Sw,
    Num,
}

impl Var {
    const ALL: [Var; 4] = [Var::Seg, Var::List, Var::Sw, Var::Num];

    fn name(self) -> &'static str {
        match self {
            Var::Seg => "$seg",
            Var::List => "$list",
            Var::Sw => "$sw",
            Var::Num => "$num",
        }
    }
}

#[derive(Debug, Clone)]
struct ButtonSpec {
    target: Var,
    sets: Value,
    disabled: Option<bool>,
    hidden: bool,
}

#[derive(Debug, Clone)]
struct Case {
    options: Vec<&'static str>,
    seg_default: &'static str,
    items: Vec<&'static str>,
    list_default: Vec<&'static str>,
    min: i32,
    max: i32,
    num_default: i32,
    /// Whether the Segmented, Checklist, Switch and Slider sit in `<Show when={false}>`.
    hidden: [bool; 4],
    buttons: Vec<ButtonSpec>,
    input: Vec<(&'static str, Value)>,
}

fn strings(values: &[&str]) -> Value {
    Value::array(values.iter().map(|s| Value::from(*s)).collect())
}

impl Case {
    fn default_of(&self, var: Var) -> Value {
        match var {
            Var::Seg => Value::from(self.seg_default),
            Var::List => strings(&self.list_default),
            Var::Sw => Value::from(false),
            Var::Num => Value::from(self.num_default),
        }
    }

    fn source(&self) -> String {
        let hide = |hidden: bool, node: String| {
            if hidden {
                format!("<Show when={{false}}>{node}</Show>")
            } else {
                node
            }
        };
        let mut out = format!(
            "$seg = {}\n$list = {}\n$sw = false\n$num = {}\n$free = 0\n",
            Value::from(self.seg_default).to_js_json(),
            strings(&self.list_default).to_js_json(),
            self.num_default,
        );
        let options: String = self
            .options
            .iter()
            .map(|o| format!("<Option value=\"{o}\">{o}</Option>"))
            .collect();
        out += &hide(
            self.hidden[0],
            format!("<Segmented value={{$seg}}>{options}</Segmented>"),
        );
        out += "\n";
        let items: String = self
            .items
            .iter()
            .map(|i| format!("<Item value=\"{i}\">{i}</Item>"))
            .collect();
        out += &hide(
            self.hidden[1],
            format!("<Checklist value={{$list}}>{items}</Checklist>"),
        );
        out += "\n";
        out += &hide(self.hidden[2], "<Switch value={$sw}>On</Switch>".to_owned());
        out += "\n";
        out += &hide(
            self.hidden[3],
            format!(
                "<Slider value={{$num}} min={{{}}} max={{{}}}>N</Slider>",
                self.min, self.max
            ),
        );
        out += "\n";
        for b in &self.buttons {
            let disabled = match b.disabled {
                None => String::new(),
                Some(d) => format!(" disabled={{{d}}}"),
            };
            let button = format!(
                "<Button action={{@Set({}, {})}}{disabled}>Set</Button>",
                b.target.name(),
                b.sets.to_js_json()
            );
            out += &hide(b.hidden, button);
            out += "\n";
        }
        out += "<Summary>{$free}</Summary>\n<Choices><Choice>Go</Choice></Choices>";
        out
    }

    /// A Slider whose bounds or default its schema rejects is an error node from the
    /// compile on: it binds `$num` but is no input and offers nothing.
    fn slider_broken(&self) -> bool {
        self.min >= self.max || !self.slider_accepts(&Value::from(self.num_default))
    }

    /// Whether a page could send `var` at all (host.md §11.1).
    fn is_input(&self, var: Var) -> bool {
        var != Var::Num || !self.slider_broken() || self.buttons.iter().any(|b| b.target == var)
    }

    fn offers(&self, var: Var, v: &Value) -> bool {
        let visible = !self.hidden[Var::ALL.iter().position(|x| *x == var).unwrap()];
        let offered = match var {
            Var::Seg => self.options.iter().any(|o| Value::from(*o) == *v),
            Var::List => v.as_array().is_some_and(|checked| {
                checked
                    .iter()
                    .all(|c| self.items.iter().any(|i| Value::from(*i) == *c))
            }),
            Var::Sw => true,
            Var::Num => !self.slider_broken() && self.slider_accepts(v),
        };
        visible && offered
    }

    fn slider_accepts(&self, v: &Value) -> bool {
        v.as_f64()
            .is_some_and(|x| f64::from(self.min) <= x && x <= f64::from(self.max))
    }

    fn vouched(&self, var: Var, v: &Value) -> bool {
        self.offers(var, v)
            || self
                .buttons
                .iter()
                .any(|b| !b.hidden && b.disabled != Some(true) && b.target == var && b.sets == *v)
    }

    /// The code the spec gives for this input; `strict` applies `resolveUiChoice`'s extra
    /// rule (a visible control bound to a changed value rejects it).
    fn expected(&self, strict: bool) -> Option<Code> {
        let var_of = |name: &str| Var::ALL.into_iter().find(|v| v.name() == name);
        // One key at a time, as written: an unknown name, or a value of another kind than
        // its default, fails where it is met.
        for (name, v) in &self.input {
            match var_of(name).filter(|var| self.is_input(*var)) {
                None => return Some(Code::RefusedBinding),
                Some(var) if self.default_of(var).kind() != v.kind() => {
                    return Some(Code::InvalidValue);
                }
                Some(_) => {}
            }
        }
        let changed: Vec<(Var, &Value)> = self
            .input
            .iter()
            .map(|(name, v)| (var_of(name).unwrap(), v))
            .filter(|(var, v)| self.default_of(*var) != **v)
            .collect();
        if strict
            && !self.hidden[3]
            && changed.iter().any(|(var, v)| {
                *var == Var::Num && (self.slider_broken() || !self.slider_accepts(v))
            })
        {
            return Some(Code::InvalidValue);
        }
        if changed.iter().any(|(var, v)| !self.vouched(*var, v)) {
            return Some(Code::InvalidValue);
        }
        None
    }

    fn input_record(&self) -> Record {
        self.input
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }
}

const SEG_POOL: [&str; 5] = ["a", "b", "c", "d", "e"];
const ITEM_POOL: [&str; 4] = ["x", "y", "z", "w"];

fn button() -> impl Strategy<Value = ButtonSpec> {
    let target_and_value = prop_oneof![
        proptest::sample::select(&SEG_POOL[..]).prop_map(|s| (Var::Seg, Value::from(s))),
        proptest::sample::subsequence(&ITEM_POOL[..], 0..=2).prop_map(|l| (Var::List, strings(&l))),
        any::<bool>().prop_map(|b| (Var::Sw, Value::from(b))),
        (-8..16i32).prop_map(|n| (Var::Num, Value::from(n))),
    ];
    (
        target_and_value,
        proptest::option::of(any::<bool>()),
        proptest::bool::weighted(0.3),
    )
        .prop_map(|((target, sets), disabled, hidden)| ButtonSpec {
            target,
            sets,
            disabled,
            hidden,
        })
}

/// A value for `var`: often one the controls or Buttons of `case` offer, sometimes a
/// random one of the right kind, rarely one of the wrong kind.
fn value_for(case: &Case, var: Var) -> BoxedStrategy<Value> {
    let sets: Vec<Value> = case
        .buttons
        .iter()
        .filter(|b| b.target == var)
        .map(|b| b.sets.clone())
        .collect();
    let (offered, random, wrong): (BoxedStrategy<Value>, BoxedStrategy<Value>, Value) = match var {
        Var::Seg => (
            proptest::sample::select(case.options.clone())
                .prop_map(Value::from)
                .boxed(),
            proptest::sample::select(&SEG_POOL[..])
                .prop_map(Value::from)
                .boxed(),
            Value::from(1),
        ),
        Var::List => (
            proptest::sample::subsequence(case.items.clone(), 0..=case.items.len())
                .prop_map(|l| strings(&l))
                .boxed(),
            proptest::sample::subsequence(&ITEM_POOL[..], 0..=3)
                .prop_map(|l| strings(&l))
                .boxed(),
            Value::from("x"),
        ),
        Var::Sw => (
            any::<bool>().prop_map(Value::from).boxed(),
            any::<bool>().prop_map(Value::from).boxed(),
            Value::from(0),
        ),
        Var::Num => (
            (case.min..=case.max.max(case.min))
                .prop_map(Value::from)
                .boxed(),
            (-8..16i32).prop_map(Value::from).boxed(),
            Value::from("3"),
        ),
    };
    if sets.is_empty() {
        prop_oneof![4 => offered, 3 => random, 1 => Just(wrong)].boxed()
    } else {
        prop_oneof![
            3 => offered,
            3 => proptest::sample::select(sets),
            2 => random,
            1 => Just(wrong),
        ]
        .boxed()
    }
}

fn input_for(case: &Case) -> impl Strategy<Value = Vec<(&'static str, Value)>> + use<> {
    (
        proptest::option::weighted(0.6, value_for(case, Var::Seg)),
        proptest::option::weighted(0.6, value_for(case, Var::List)),
        proptest::option::weighted(0.5, value_for(case, Var::Sw)),
        proptest::option::weighted(0.6, value_for(case, Var::Num)),
        proptest::option::weighted(
            0.1,
            (
                proptest::sample::select(&["$free", "$zz", "$ui"][..]),
                any::<proptest::sample::Index>(),
            ),
        ),
    )
        .prop_map(|(seg, list, sw, num, extra)| {
            let mut out = Vec::new();
            for (name, v) in [("$seg", seg), ("$list", list), ("$sw", sw), ("$num", num)] {
                if let Some(v) = v {
                    out.push((name, v));
                }
            }
            // Anywhere among the others: which bad key comes first decides the code.
            if let Some((extra, at)) = extra {
                out.insert(at.index(out.len() + 1), (extra, Value::from(0)));
            }
            out
        })
}

/// The controls of a case (no input yet).
fn controls_case() -> impl Strategy<Value = Case> {
    (
        proptest::sample::subsequence(&SEG_POOL[..4], 1..=4),
        proptest::sample::select(&SEG_POOL[..]),
        proptest::sample::subsequence(&ITEM_POOL[..3], 0..=3),
        proptest::sample::subsequence(&ITEM_POOL[..3], 0..=2),
        // Bounds, and a default that is mostly within them (else the Slider is broken).
        (
            -5..5i32,
            prop_oneof![1 => Just(0), 19 => 1..8i32],
            // Where the default sits: -1 below `min`, 101 above `max`, else a percentage.
            prop_oneof![1 => Just(-1), 18 => 0..=100i32, 1 => Just(101)],
        ),
        proptest::array::uniform4(proptest::bool::weighted(0.2)),
        proptest::collection::vec(button(), 0..4),
    )
        .prop_map(
            |(options, seg_default, items, list_default, (min, span, offset), hidden, buttons)| {
                Case {
                    options,
                    seg_default,
                    items,
                    list_default,
                    min,
                    max: min + span,
                    num_default: match offset {
                        -1 => min - 2,
                        101 => min + span + 2,
                        p => min + span * p / 100,
                    },
                    hidden,
                    buttons,
                    input: Vec::new(),
                }
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    controls_case().prop_flat_map(|controls| {
        input_for(&controls).prop_map(move |input| Case {
            input,
            ..controls.clone()
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `validated_state` and `resolve_choice` accept exactly what the model accepts, and
    /// refuse the rest with the model's code.
    #[test]
    fn validation_agrees_with_the_model(case in case()) {
        let source = case.source();
        let block = compile_with(&source, true);
        let codes: Vec<Code> = block.diagnostics.iter().map(|d| d.code).collect();
        let broken: &[Code] = if case.slider_broken() { &[Code::InvalidProps] } else { &[] };
        prop_assert_eq!(codes, broken, "{}", source);
        let choice = ids(&block, "Choice").remove(0);
        let input = case.input_record();
        let validated = validated_state(&block, &input, &Record::default(), UiLimits::DEFAULT, &CLOCK);
        prop_assert_eq!(
            validated.as_ref().err().map(|f| f.code),
            case.expected(false),
            "validated_state\n{}\n{:?}", source, case.input
        );
        let resolved = resolve_choice(&block, &choice, &input, &Record::default(), UiLimits::DEFAULT, &CLOCK);
        prop_assert_eq!(
            resolved.as_ref().err().map(|f| f.code),
            case.expected(true),
            "resolve_choice\n{}\n{:?}", source, case.input
        );
        if let Ok(selection) = resolved {
            // resolve_choice is never looser than validated_state.
            let state = validated.expect("resolve_choice accepted what validated_state refused");
            prop_assert_eq!(&selection.label, "Go");
            prop_assert_eq!(&selection.context, "Go");
            prop_assert_eq!(selection.values, input_values(&block, &state).unwrap());
            for (name, v) in &case.input {
                prop_assert_eq!(&state.values()[*name], v);
            }
        }
    }
}
