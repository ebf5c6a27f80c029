//! What a page sends back: the values of the variables a person can set on screen.

use ui_core::catalog;
use ui_core::{Failure, Record};

use crate::block::Block;
use crate::compile::check_action_target;
use crate::expr::Expr;
use crate::state::UiState;

/// The variables of `block` a page sends with a choice or a query, with their current
/// values in `state` (`uiInputValues`, `language.md` §16): over every compiled node
/// (visible or not) that is a complete catalog component without error, each binding to
/// local state and each valid action target.
///
/// # Errors
/// Never today; kept fallible for stores whose values must be copied out.
pub fn input_values(block: &Block, state: &UiState) -> Result<Record, Failure> {
    // Input names are local state, never readings, so the values are the state's own.
    let values = state.values();
    let mut out = Record::default();
    for name in input_names(block) {
        if let Some(value) = values.get(name) {
            out.insert(name.to_owned(), value.clone());
        }
    }
    Ok(out)
}

/// The names [`input_values`] reports, in document order (without repeats): the variables
/// bound by complete, error-free catalog components and the targets of their valid actions.
pub fn input_names(block: &Block) -> Vec<&str> {
    let is_local = |n: &str| block.defaults.contains_key(n) && !block.queries.contains_key(n);
    let mut names: Vec<&str> = Vec::new();
    block.walk(&mut |node| {
        let Some(component) = catalog::lookup(&node.kind) else {
            return;
        };
        if node.error.is_some() || !node.complete {
            return;
        }
        for variable in node.bindings.values() {
            if is_local(variable) && !names.contains(&variable.as_str()) {
                names.push(variable);
            }
        }
        if let Some(action) = component.action().and_then(|a| node.expressions.get(a))
            && check_action_target(action, &is_local).is_ok()
            && let Expr::Call { args, .. } = action
            && let Some(target) = args.first().and_then(Expr::as_reference)
            && !names.contains(&target)
        {
            names.push(target);
        }
    });
    names
}
