//! A block's state on a page, evaluation, and the checks a host repeats (validated input,
//! query arguments, link targets, choices, the query fallback).

use std::sync::Arc;

use serde::Deserialize;
use ui_compiler::{Block, UiState, View, ViewNode, evaluate_block, input_values};
use ui_core::{Clock, HostLimits, Record, UiLimits, Value};
use wasm_bindgen::prelude::*;

use crate::compile::BlockHandle;
use crate::failure::{thrown, to_json, unreadable};
use crate::options::{TheClock, value, values};

/// What the evaluating functions take besides their inputs: partial `UI_LIMITS`, partial
/// host limits (links) and the clock (`"frozen"` or the real one).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RawEvalOptions {
    limits: Option<serde_json::Value>,
    host_limits: Option<serde_json::Value>,
    clock: Option<String>,
}

/// Evaluation options read once.
#[derive(Debug, Clone)]
pub(crate) struct EvalOptions {
    limits: UiLimits,
    host: HostLimits,
    clock: TheClock,
}

impl EvalOptions {
    /// Reads `json` (`""` and `"null"` are the defaults).
    pub(crate) fn read(json: &str) -> Result<Self, JsValue> {
        let raw: RawEvalOptions = if json.is_empty() {
            RawEvalOptions::default()
        } else {
            serde_json::from_str::<Option<RawEvalOptions>>(json)
                .map_err(|e| unreadable("the options", &e))?
                .unwrap_or_default()
        };
        let limits = match &raw.limits {
            None => UiLimits::DEFAULT,
            Some(l) => UiLimits::DEFAULT
                .with_overrides(&Value::from(l))
                .map_err(|e| thrown(&e.into()))?,
        };
        let host = match &raw.host_limits {
            None => HostLimits::DEFAULT,
            Some(l) => HostLimits::DEFAULT
                .with_overrides(&Value::from(l))
                .map_err(|e| thrown(&e.into()))?,
        };
        let clock = TheClock::named(raw.clock.as_deref(), None);
        Ok(EvalOptions {
            limits: clock.eval_limits(limits),
            host,
            clock,
        })
    }

    /// The clock to read.
    pub(crate) fn clock(&self) -> &dyn Clock {
        self.clock.get()
    }

    /// The limits, with the time budget lifted under a frozen clock.
    pub(crate) fn limits(&self) -> UiLimits {
        self.limits
    }
}

/// The state of one block on a page (`UiState`): the values of its declared variables, as
/// a person edits them, and the readings of its queries.
#[wasm_bindgen]
pub struct StateHandle {
    state: UiState,
    clock: TheClock,
    /// The last evaluation: its block, the state's revision then, and the view, so that a
    /// press or a change finds the node the person saw without evaluating again.
    seen: Option<(Arc<Block>, u64, View)>,
}

impl std::fmt::Debug for StateHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateHandle")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[wasm_bindgen]
impl StateHandle {
    /// A fresh state for `block`: its defaults, copied under the options' limits.
    ///
    /// # Errors
    /// `budget_exceeded` when the defaults do not fit; unreadable options.
    #[wasm_bindgen(constructor)]
    pub fn new(block: &BlockHandle, options: &str) -> Result<StateHandle, JsValue> {
        let options = EvalOptions::read(options)?;
        let state = UiState::new(&block.block, options.limits).map_err(|f| thrown(&f))?;
        Ok(StateHandle::wrap(state, options.clock.clone()))
    }

    /// Sets a declared variable, as a person's edit does.
    ///
    /// # Errors
    /// `refused_binding`, `invalid_value`, `budget_exceeded` (`UiState.set`).
    pub fn set(&mut self, name: &str, json: &str) -> Result<(), JsValue> {
        let value = value(json, "the value")?;
        self.state.set(name, &value).map_err(|f| thrown(&f))
    }

    /// Stores a reading of the query `name` of `block`.
    ///
    /// # Errors
    /// `refused_query` and copy failures (`UiState.setQuery`).
    #[wasm_bindgen(js_name = setQuery)]
    pub fn set_query(
        &mut self,
        name: &str,
        json: &str,
        block: &BlockHandle,
    ) -> Result<(), JsValue> {
        let value = value(json, "the reading")?;
        self.state
            .set_query(name, &value, &block.block)
            .map_err(|f| thrown(&f))
    }

    /// Runs a state action written as an expression (`@Set($n, $n + 1)`, `@Reset($x)`,
    /// `@Reset()`).
    ///
    /// # Errors
    /// A syntax failure, `refused_action`, `refused_binding` and `set`'s failures.
    pub fn run(&mut self, action: &str) -> Result<(), JsValue> {
        let mut budget = ui_core::Budget::new(self.state.limits(), self.clock.get());
        let action =
            ui_compiler::expr::parse_expression(action, &mut budget).map_err(|f| thrown(&f))?;
        self.state.run(&action).map_err(|f| thrown(&f))
    }

    /// Runs a state action given as an expression tree in its wire shape (a Button's
    /// `expressions.action`).
    ///
    /// # Errors
    /// `invalid_value` for JSON that is no expression, and [`StateHandle::run`]'s failures.
    #[wasm_bindgen(js_name = runTree)]
    pub fn run_tree(&mut self, json: &str) -> Result<(), JsValue> {
        let json = ui_core::text::json_lone_surrogates_replaced(json);
        let action: ui_compiler::expr::Expr =
            serde_json::from_str(&json).map_err(|e| unreadable("the action", &e))?;
        self.state.run(&action).map_err(|f| thrown(&f))
    }

    /// Puts every variable back to its default (`@Reset()`).
    ///
    /// # Errors
    /// `budget_exceeded` when the defaults do not fit.
    #[wasm_bindgen(js_name = resetAll)]
    pub fn reset_all(&mut self) -> Result<(), JsValue> {
        self.state.reset_all().map_err(|f| thrown(&f))
    }

    /// Follows a recompiled `block`: new or changed defaults take effect, edits of
    /// unchanged ones stay.
    ///
    /// # Errors
    /// `budget_exceeded` when the defaults do not fit.
    pub fn sync(&mut self, block: &BlockHandle) -> Result<(), JsValue> {
        self.state.sync(&block.block).map_err(|f| thrown(&f))
    }

    /// Evaluates `block` in this state (`evaluateUiBlock`): the JSON text of
    /// `{nodes, diagnostics}` in `driver.md`'s view shape. The view is kept for
    /// [`StateHandle::press`] and [`StateHandle::change`].
    ///
    /// # Errors
    /// `budget_exceeded` when the state does not fit the options' copy budget; unreadable
    /// options.
    pub fn evaluate(&mut self, block: &BlockHandle, options: &str) -> Result<String, JsValue> {
        let options = EvalOptions::read(options)?;
        let view = evaluate_block(
            &block.block,
            &self.state,
            options.limits,
            Some(options.clock()),
        )
        .map_err(|f| thrown(&f))?;
        let json = to_json(&view)?;
        self.seen = Some((Arc::clone(&block.block), self.state.snapshot(), view));
        Ok(json)
    }

    /// A person pressed the node `node_id` of `block` as last evaluated (evaluating it
    /// first when the state changed since): its action runs unless the node is incomplete
    /// or disabled. Answers whether the state changed.
    ///
    /// # Errors
    /// `refused_action` when the view has no such pressable node.
    pub fn press(&mut self, block: &BlockHandle, node_id: &str) -> Result<bool, JsValue> {
        let node = self.seen_node(block, node_id)?;
        if node.action.is_none() {
            return Err(crate::failure::throw(
                "refused_action",
                &format!("`{node_id}` has no action."),
            ));
        }
        Ok(matches!(
            self.state.press(&node),
            ui_compiler::Applied::Changed
        ))
    }

    /// A person changed the bound `prop` of the node `node_id` of `block` to the value in
    /// `json` (`onValueChange`): the variable is set when the node is complete and the
    /// component takes the new value. Answers whether the state changed.
    ///
    /// # Errors
    /// `refused_binding` for a prop that is not bound; `set`'s failures.
    pub fn change(
        &mut self,
        block: &BlockHandle,
        node_id: &str,
        prop: &str,
        json: &str,
    ) -> Result<bool, JsValue> {
        let next = value(json, "the value")?;
        let node = self.seen_node(block, node_id)?;
        let applied = self
            .state
            .change(&node, prop, &next)
            .map_err(|f| thrown(&f))?;
        Ok(matches!(applied, ui_compiler::Applied::Changed))
    }

    /// The revision: bumped by every change.
    pub fn revision(&self) -> f64 {
        self.state.snapshot() as f64
    }

    /// The JSON text of every variable and reading (what expressions read).
    ///
    /// # Errors
    /// `budget_exceeded` when the state does not fit its copy budget.
    pub fn scope(&self) -> Result<String, JsValue> {
        to_json(&self.state.scope().map_err(|f| thrown(&f))?)
    }

    /// The JSON text of the variables' current values.
    ///
    /// # Errors
    /// `internal` when they cannot be written (never expected).
    pub fn values(&self) -> Result<String, JsValue> {
        to_json(self.state.values())
    }

    /// The JSON text of the declared defaults.
    ///
    /// # Errors
    /// As [`StateHandle::values`].
    pub fn defaults(&self) -> Result<String, JsValue> {
        to_json(self.state.defaults())
    }

    /// The JSON text of the readings held.
    ///
    /// # Errors
    /// As [`StateHandle::values`].
    pub fn readings(&self) -> Result<String, JsValue> {
        to_json(self.state.readings())
    }

    /// The JSON text of what a page sends with a choice (`uiInputValues`).
    ///
    /// # Errors
    /// `budget_exceeded` when the values do not fit the copy budget.
    #[wasm_bindgen(js_name = inputValues)]
    pub fn input_values(&self, block: &BlockHandle) -> Result<String, JsValue> {
        to_json(&input_values(&block.block, &self.state).map_err(|f| thrown(&f))?)
    }
}

impl StateHandle {
    fn wrap(mut state: UiState, clock: TheClock) -> StateHandle {
        if let TheClock::Frozen(frozen) = &clock {
            state.set_clock(Arc::new(*frozen));
        }
        StateHandle {
            state,
            clock,
            seen: None,
        }
    }

    /// The node `node_id` in the view of `block` the person saw: the last evaluation's
    /// while it is still this block and this revision, else a fresh one.
    fn seen_node(&mut self, block: &BlockHandle, node_id: &str) -> Result<ViewNode, JsValue> {
        let current = matches!(&self.seen, Some((b, revision, _))
            if Arc::ptr_eq(b, &block.block) && *revision == self.state.snapshot());
        if !current {
            let limits = self.clock.eval_limits(self.state.limits());
            let view = evaluate_block(&block.block, &self.state, limits, Some(self.clock.get()))
                .map_err(|f| thrown(&f))?;
            self.seen = Some((Arc::clone(&block.block), self.state.snapshot(), view));
        }
        let mut found = None;
        if let Some((_, _, view)) = &self.seen {
            view.walk(&mut |v| {
                if found.is_none() && v.id == node_id {
                    found = Some(v.clone());
                }
            });
        }
        found.ok_or_else(|| {
            crate::failure::throw(
                "refused_binding",
                &format!("No node `{node_id}` is on screen."),
            )
        })
    }
}

/// What a page submits: its input values and the readings it was shown (JSON records).
fn submitted(input: &str, queries: &str) -> Result<(Record, Record), JsValue> {
    Ok((
        values(input, "the input")?,
        values(queries, "the readings")?,
    ))
}

/// The state a host rebuilds from a page's submission (`uiValidatedState`): every value
/// checked as something a person could have set on screen.
///
/// # Errors
/// `refused_query`, `refused_binding`, `invalid_value`, `budget_exceeded`.
#[wasm_bindgen(js_name = validatedState)]
pub fn validated_state(
    block: &BlockHandle,
    input: &str,
    queries: &str,
    options: &str,
) -> Result<StateHandle, JsValue> {
    let options = EvalOptions::read(options)?;
    let (input, queries) = submitted(input, queries)?;
    let state = ui_compiler::validated_state(
        &block.block,
        &input,
        &queries,
        options.limits,
        options.clock(),
    )
    .map_err(|f| thrown(&f))?;
    Ok(StateHandle::wrap(state, options.clock.clone()))
}

/// The JSON text of the arguments of the query `name` with a page's `input`
/// (`uiQueryArguments`).
///
/// # Errors
/// `invalid_query` and [`validated_state`]'s failures.
#[wasm_bindgen(js_name = queryArguments)]
pub fn query_arguments(
    block: &BlockHandle,
    name: &str,
    input: &str,
    options: &str,
) -> Result<String, JsValue> {
    let options = EvalOptions::read(options)?;
    let input = values(input, "the input")?;
    let args =
        ui_compiler::query_arguments(&block.block, name, &input, options.limits, options.clock())
            .map_err(|f| thrown(&f))?;
    to_json(&args)
}

/// The JSON text of the link targets of the nodes on screen (`uiLinkTargets`):
/// `{nodeId: {type, path | sha | id, line?}}`.
///
/// # Errors
/// [`validated_state`]'s failures.
#[wasm_bindgen(js_name = linkTargets)]
pub fn link_targets(
    block: &BlockHandle,
    input: &str,
    queries: &str,
    options: &str,
) -> Result<String, JsValue> {
    let options = EvalOptions::read(options)?;
    let (input, queries) = submitted(input, queries)?;
    let targets = ui_links::link_targets(
        &block.block,
        &input,
        &queries,
        options.limits,
        &options.host,
        options.clock(),
    )
    .map_err(|f| thrown(&f))?;
    to_json(&targets)
}

/// The JSON text of what the choice `choice_id` sends (`resolveUiChoice`):
/// `{label, context, values}`, every value checked as in [`validated_state`].
///
/// # Errors
/// `refused_choice` and [`validated_state`]'s failures.
#[wasm_bindgen(js_name = resolveChoice)]
pub fn resolve_choice(
    block: &BlockHandle,
    choice_id: &str,
    input: &str,
    queries: &str,
    options: &str,
) -> Result<String, JsValue> {
    let options = EvalOptions::read(options)?;
    let (input, queries) = submitted(input, queries)?;
    let selection = ui_compiler::resolve_choice(
        &block.block,
        choice_id,
        &input,
        &queries,
        options.limits,
        options.clock(),
    )
    .map_err(|f| thrown(&f))?;
    to_json(&selection)
}

/// The block's text with its queries' readings (`uiQueryFallback`): what a final reply
/// keeps for clients that cannot draw it.
///
/// # Errors
/// `refused_query` for a reading of a name that is not a query; copy failures.
#[wasm_bindgen(js_name = queryFallback)]
pub fn query_fallback(
    block: &BlockHandle,
    readings: &str,
    options: &str,
) -> Result<String, JsValue> {
    let options = EvalOptions::read(options)?;
    let readings: Record = values(readings, "the readings")?;
    ui_fallback::query_fallback(&block.block, &readings, options.limits, options.clock())
        .map_err(|f| thrown(&f))
}

/// Evaluates `block` in a fresh state of its defaults (`evaluateUiBlock` without a state).
///
/// # Errors
/// As [`StateHandle::evaluate`].
#[wasm_bindgen]
pub fn evaluate(block: &BlockHandle, options: &str) -> Result<String, JsValue> {
    let eval = EvalOptions::read(options)?;
    let mut state = StateHandle::new(block, options)?;
    let view = evaluate_block(&block.block, &state.state, eval.limits, Some(eval.clock()))
        .map_err(|f| thrown(&f))?;
    state.seen = None;
    to_json(&view)
}
