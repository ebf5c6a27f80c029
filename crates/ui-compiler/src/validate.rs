//! The host's checks of what a page sends (`host.md` §11–§12, `language.md` §16): a
//! validated state for reading queries, query arguments, and choice resolution.
//!
//! The rules over the evaluated view live in [`ui_core::inputs`]; this module builds the
//! state and the view they inspect.

use std::collections::HashMap;
use std::sync::Arc;

use ui_core::inputs::{check_vouched, find_choice};
use ui_core::{
    Budget, CATALOG_VERSION, Clock, Code, Failure, Record, UiLimits, Value, View,
    for_each_in_js_order,
};

use crate::block::{Block, Node};
use crate::eval::evaluate_block;
use crate::expr::evaluate;
use crate::inputs::{input_names, input_values};
use crate::state::UiState;

/// What a choice sends: the label, the message and the values on screen.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Selection {
    /// The Choice's text.
    pub label: String,
    /// The message sent: the Choice's `context`, or its label.
    pub context: String,
    /// The input values a page sends with it ([`input_values`] of the final state).
    pub values: Record,
}

fn copy_record(record: &Record, limits: UiLimits, clock: &dyn Clock) -> Result<Record, Failure> {
    let mut budget = Budget::new(limits, clock);
    match budget.copy_value(&Value::record(record.clone()))? {
        Value::Record(r) => Ok(Arc::unwrap_or_clone(r)),
        _ => Ok(Record::default()),
    }
}

/// A state from the defaults with `queries` stored; a name that is not a query of the
/// block is refused with [`Code::RefusedQuery`].
fn state_with_readings(
    block: &Block,
    queries: &Record,
    limits: UiLimits,
) -> Result<UiState, Failure> {
    let mut state = UiState::new(block, limits)?;
    for (name, value) in queries {
        state.set_query(name, value, block)?;
    }
    Ok(state)
}

/// Walks the submitted `input` as the reference does (`Object.entries`: array-index keys
/// first, ascending, then the rest as written), one key at a time: a name a page could not
/// send is refused with [`Code::RefusedBinding`] when it is reached, and each allowed one
/// goes to `set` before the next is looked at. So which of a wrong-kind value
/// ([`Code::InvalidValue`], from `set`) and an unknown name comes first decides the code.
///
/// First, as the reference lists the names from a copy of the state's scope
/// (`uiInputValues`), the defaults and readings together are charged to a budget of the
/// state's limits: [`Code::BudgetExceeded`] before any input is looked at when they do not
/// fit, even where each reading fitted on its own.
fn set_each_input<'a>(
    block: &Block,
    state: &mut UiState,
    input: &'a Record,
    mut set: impl FnMut(&mut UiState, &'a str, &'a Value) -> Result<(), Failure>,
) -> Result<(), Failure> {
    state.scope()?;
    let allowed = input_names(block);
    for_each_in_js_order(input, |name, value| {
        if !allowed.contains(&name) {
            return Err(Failure::new(
                Code::RefusedBinding,
                format!("`{name}` is not an input of this block."),
            ));
        }
        set(state, name, value)
    })
}

fn evaluate_checked(
    block: &Block,
    state: &UiState,
    limits: UiLimits,
    clock: &dyn Clock,
) -> Result<View, Failure> {
    let view = evaluate_block(block, state, limits, Some(clock))?;
    if view.exceeded_budget() {
        return Err(Failure::new(
            Code::BudgetExceeded,
            "Evaluating the block exceeded its budget.",
        ));
    }
    Ok(view)
}

/// The state a page could have reached (`uiValidatedState`, `host.md` §11.3): the block
/// must be complete and of this catalog version ([`Code::InvalidBlock`]); readings are
/// stored (a non-query name is [`Code::RefusedQuery`]); every input name must be one a page
/// sends ([`Code::RefusedBinding`]) with a value of the default's kind
/// ([`Code::InvalidValue`]); and every value that differs from its default must be offered
/// by a visible control or set by a visible enabled Button ([`Code::InvalidValue`]).
///
/// # Errors
/// The codes above, and [`Code::BudgetExceeded`] when a copy or the evaluation runs out.
pub fn validated_state(
    block: &Block,
    input: &Record,
    queries: &Record,
    limits: UiLimits,
    clock: &dyn Clock,
) -> Result<UiState, Failure> {
    validated_view(block, input, queries, limits, clock).map(|(state, _)| state)
}

/// [`validated_state`] together with the block evaluated in that state, for callers that
/// inspect the view next (link targets) and need not evaluate twice.
///
/// # Errors
/// As [`validated_state`].
pub fn validated_view(
    block: &Block,
    input: &Record,
    queries: &Record,
    limits: UiLimits,
    clock: &dyn Clock,
) -> Result<(UiState, View), Failure> {
    if !block.complete || block.catalog_version != CATALOG_VERSION {
        return Err(Failure::new(
            Code::InvalidBlock,
            "The block is incomplete or of another catalog version.",
        ));
    }
    let input = copy_record(input, limits, clock)?;
    let mut state = state_with_readings(block, queries, limits)?;
    set_each_input(block, &mut state, &input, |state, name, value| {
        state.set(name, value)
    })?;
    let view = evaluate_checked(block, &state, limits, clock)?;
    let changed = input
        .iter()
        .filter(|(name, value)| block.defaults.get(*name) != Some(value))
        .map(|(name, _)| name.as_str());
    check_vouched(&view, state.defaults(), state.values(), changed)?;
    Ok((state, view))
}

/// The arguments of the query `name` for a page's `input` (`uiQueryArguments`): evaluated
/// against the validated input only — never against another query's reading — or the
/// stored literal arguments when they read no state.
///
/// # Errors
/// [`Code::InvalidQuery`] when `name` is not a declared query or its arguments are not a
/// record; [`validated_state`]'s failures; evaluation failures; [`Code::BudgetExceeded`]
/// when the copy of literal arguments runs out.
pub fn query_arguments(
    block: &Block,
    name: &str,
    input: &Record,
    limits: UiLimits,
    clock: &dyn Clock,
) -> Result<Record, Failure> {
    let Some(query) = block.queries.get(name) else {
        return Err(Failure::new(
            Code::InvalidQuery,
            format!("`{name}` is not a query of this block."),
        ));
    };
    let state = validated_state(block, input, &Record::default(), limits, clock)?;
    let Some(expression) = &query.expression else {
        // Literal arguments are copied under a budget of `limits`, as the reference does.
        return copy_record(&query.args, limits, clock);
    };
    let mut budget = Budget::new(limits, clock);
    match evaluate(expression, state.values(), &mut budget)? {
        Value::Record(r) => Ok(Arc::unwrap_or_clone(r)),
        _ => Err(Failure::new(
            Code::InvalidQuery,
            format!("The arguments of `{name}` are not a record."),
        )),
    }
}

/// Resolves the choice `choice_id` a page sent with `input` (`resolveUiChoice`,
/// `host.md` §12.3), with the host's issued query values in `queries`.
///
/// # Errors
/// [`Code::RefusedChoice`] for an incomplete block, a block of another catalog version, or a
/// choice that is missing, hidden, disabled, outside `Choices`, or has an unreadable or
/// empty label; [`Code::RefusedQuery`], [`Code::RefusedBinding`], [`Code::InvalidValue`]
/// (a changed value that a visible control rejects or nothing offers) and
/// [`Code::BudgetExceeded`] as for [`validated_state`].
pub fn resolve_choice(
    block: &Block,
    choice_id: &str,
    input: &Record,
    queries: &Record,
    limits: UiLimits,
    clock: &dyn Clock,
) -> Result<Selection, Failure> {
    if !block.complete || block.catalog_version != CATALOG_VERSION {
        return Err(Failure::new(
            Code::RefusedChoice,
            "The block is incomplete or of another catalog version.",
        ));
    }
    let input = copy_record(input, limits, clock)?;
    let mut state = state_with_readings(block, queries, limits)?;
    let mut changed: Vec<&str> = Vec::new();
    set_each_input(block, &mut state, &input, |state, name, value| {
        if state.values().get(name) != Some(value) {
            state.set(name, value)?;
            changed.push(name);
        }
        Ok(())
    })?;
    let view = evaluate_checked(block, &state, limits, clock)?;
    let mut any_error = false;
    view.walk(&mut |v| any_error |= v.error.is_some());
    if !changed.is_empty() && any_error {
        let mut compiled: HashMap<&str, &Node> = HashMap::new();
        block.walk(&mut |n| {
            compiled.insert(n.id.as_str(), n);
        });
        let mut rejected = None;
        walk_until_incomplete(&view, &mut |node| {
            if node.error.is_some()
                && let Some(source) = compiled.get(node.source_id.as_str())
                && let Some(variable) = source
                    .bindings
                    .values()
                    .find(|v| changed.contains(&v.as_str()))
            {
                rejected.get_or_insert_with(|| variable.clone());
            }
        });
        if let Some(variable) = rejected {
            return Err(Failure::new(
                Code::InvalidValue,
                format!("A visible control does not accept the value of `{variable}`."),
            ));
        }
    }
    check_vouched(&view, state.defaults(), state.values(), changed)?;
    let text = find_choice(&view, choice_id)?;
    Ok(Selection {
        label: text.label,
        context: text.context,
        values: input_values(block, &state)?,
    })
}

/// Visits views in pre-order, not descending below error or incomplete nodes.
fn walk_until_incomplete<'a>(view: &'a View, visit: &mut dyn FnMut(&'a ui_core::ViewNode)) {
    fn go<'a>(node: &'a ui_core::ViewNode, visit: &mut dyn FnMut(&'a ui_core::ViewNode)) {
        visit(node);
        if node.error.is_some() || !node.complete {
            return;
        }
        for child in &node.children {
            go(child, visit);
        }
    }
    for node in &view.nodes {
        go(node, visit);
    }
}
