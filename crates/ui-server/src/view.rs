//! `POST /ui/view`: evaluates a stored block with the page's local values and readings
//! into the view tree, optionally applying one edit or one press first, so a page needs
//! no interpreter of its own.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use ui_compiler::{Block, UiState, ViewNode, evaluate_block};
use ui_core::{Clock, Code, Failure, HostLimits, Record, UiLimits, Value, View};

use crate::error::{ApiError, ErrorCode};

/// A person's edit of a bound control: set `prop` of the node `nodeId` to `value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewChange {
    /// The evaluated node id of the control.
    pub node_id: String,
    /// The bound prop (`value` for most controls).
    pub prop: String,
    /// The new value.
    pub value: Value,
}

/// What a page asks `/ui/view` for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewPayload {
    /// The chat.
    pub chat_id: String,
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The revision the page drew; when given it must match (`stale-ui-block`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Local values by declared variable (`$name`), as the page holds them.
    #[serde(default)]
    pub values: Record,
    /// Query values by declared query (`$name`), from the page's readings.
    #[serde(default)]
    pub readings: Record,
    /// An edit to apply after `values` and `readings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<ViewChange>,
    /// The evaluated id of a node to press (a Button's action).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub press: Option<String>,
}

/// The evaluated block and the values it was evaluated with (after the edit or press).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ViewAnswer {
    /// The values of the declared variables.
    pub values: Record,
    /// Whether the edit or press changed the state.
    pub changed: bool,
    /// The view tree.
    pub view: View,
}

impl ViewPayload {
    /// The shape checks of the other payloads: ids 1..=256, revision and keys ≤ 128.
    ///
    /// # Errors
    /// `bad-request` naming the field.
    pub fn validate(&self, limits: &HostLimits) -> Result<(), ApiError> {
        let id = limits.payload_id() as usize;
        let key = limits.payload_key() as usize;
        let len = |s: &str| s.encode_utf16().count();
        let check = |field: &str, value: &str, max: usize| {
            if value.is_empty() || len(value) > max {
                Err(ApiError::bad_request(format!(
                    "`{field}` must be 1 to {max} characters long"
                )))
            } else {
                Ok(())
            }
        };
        check("chatId", &self.chat_id, usize::MAX)?;
        check("itemId", &self.item_id, id)?;
        check("blockId", &self.block_id, id)?;
        if let Some(revision) = &self.revision {
            check("revision", revision, key)?;
        }
        for k in self.values.keys().chain(self.readings.keys()) {
            check("a key of values or readings", k, key)?;
        }
        if let Some(change) = &self.change {
            check("change.nodeId", &change.node_id, id)?;
            check("change.prop", &change.prop, key)?;
        }
        if let Some(press) = &self.press {
            check("press", press, id)?;
        }
        Ok(())
    }
}

fn failure(f: Failure) -> ApiError {
    ApiError::new(ErrorCode::Failure(f.code), f.message.into_string())
}

fn find<'a>(view: &'a View, id: &str) -> Option<&'a ViewNode> {
    let mut found = None;
    view.walk(&mut |node| {
        if found.is_none() && node.id == id {
            found = Some(node);
        }
    });
    found
}

/// Evaluates `block` for the payload under `limits`, measuring wall time on `clock` (on
/// the calling thread; callers move it off the async workers).
///
/// # Errors
/// The interpreter's code: `refused_binding` (not a declared variable, or not a bound
/// prop), `invalid_value` (a value of another kind), `refused_query` (not a declared
/// query), `budget_exceeded`.
pub fn evaluate(
    block: &Arc<Block>,
    p: &ViewPayload,
    limits: UiLimits,
    clock: &dyn Clock,
) -> Result<ViewAnswer, ApiError> {
    let mut state = UiState::new(block, limits).map_err(failure)?;
    for (name, value) in &p.values {
        state.set(name, value).map_err(failure)?;
    }
    for (name, value) in &p.readings {
        state.set_query(name, value, block).map_err(failure)?;
    }
    let mut view = evaluate_block(block, &state, limits, Some(clock)).map_err(failure)?;
    let before = state.snapshot();
    if let Some(change) = &p.change {
        let node = find(&view, &change.node_id).ok_or_else(|| {
            failure(Failure::new(
                Code::RefusedBinding,
                format!("`{}` is not a node of this view.", change.node_id),
            ))
        })?;
        state
            .change(node, &change.prop, &change.value)
            .map_err(failure)?;
    }
    if let Some(press) = &p.press {
        let node = find(&view, press).ok_or_else(|| {
            failure(Failure::new(
                Code::RefusedAction,
                format!("`{press}` is not a node of this view."),
            ))
        })?;
        state.press(node);
    }
    let changed = state.snapshot() != before;
    if changed {
        view = evaluate_block(block, &state, limits, Some(clock)).map_err(failure)?;
    }
    Ok(ViewAnswer {
        values: state.values().clone(),
        changed,
        view,
    })
}
