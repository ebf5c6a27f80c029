//! The evaluated view tree (`language.md` §15) as plain data: what a page draws, and what
//! the input and choice rules of [`crate::inputs`] inspect.
//!
//! The compiler produces it; this layer only describes it, so the rules over it stay in the
//! bottom crate.

use indexmap::IndexMap;
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::code::Code;
use crate::diag::Diagnostic;
use crate::value::{Record, Value};

/// A bound control's binding in the view: the variable and its current value.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewBinding {
    /// The `$name` the control writes.
    pub variable: String,
    /// The prop's current (evaluated) value.
    pub value: Value,
}

/// What pressing a node does, resolved at evaluation time.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ViewAction {
    /// `@Set($target, value)`.
    Set {
        /// The variable set.
        target: String,
        /// The value it is set to.
        value: Value,
    },
    /// `@Reset($target)`, or `@Reset()` (every variable) when `target` is `None`.
    Reset {
        /// The variable reset, if one is named.
        target: Option<String>,
    },
    /// An action whose value could not be computed (only in a tampered block): pressing it
    /// does nothing.
    Inert,
}

/// One node of the evaluated view tree (`UiViewNode`).
#[derive(Debug, Clone, PartialEq)]
pub struct ViewNode {
    /// The compiled id plus one `:<index>` per enclosing `Each` iteration.
    pub id: String,
    /// The compiled node's id.
    pub source_id: String,
    /// The component name or `$text`.
    pub kind: String,
    /// The evaluated, schema-normalised props (`{text}` for a text node).
    pub props: Record,
    /// Bound props.
    pub bindings: IndexMap<String, ViewBinding>,
    /// What a press does (Buttons).
    pub action: Option<ViewAction>,
    /// Child views.
    pub children: Vec<ViewNode>,
    /// Whether the compiled node is complete.
    pub complete: bool,
    /// The compiled fallback.
    pub fallback: String,
    /// The failure that keeps this node from being drawn, if any.
    pub error: Option<Code>,
}

impl ViewNode {
    /// Visits this view and its descendants in pre-order.
    pub fn walk<'a>(&'a self, visit: &mut dyn FnMut(&'a ViewNode)) {
        visit(self);
        for child in &self.children {
            child.walk(visit);
        }
    }

    /// Whether the node can be drawn and used: complete and without error.
    pub fn is_live(&self) -> bool {
        self.complete && self.error.is_none()
    }

    /// Whether `disabled` is `true`.
    pub fn is_disabled(&self) -> bool {
        self.props.get("disabled").and_then(Value::as_bool) == Some(true)
    }
}

impl Serialize for ViewNode {
    /// The driver's view-node shape: `bindings` maps each prop to its value, `sourceId`
    /// appears only when it differs from `id`, `action: true` marks a pressable node.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        if self.source_id != self.id {
            map.serialize_entry("sourceId", &self.source_id)?;
        }
        map.serialize_entry("type", &self.kind)?;
        map.serialize_entry("props", &self.props)?;
        let bindings: IndexMap<&str, &Value> = self
            .bindings
            .iter()
            .map(|(k, b)| (k.as_str(), &b.value))
            .collect();
        map.serialize_entry("bindings", &bindings)?;
        map.serialize_entry("children", &self.children)?;
        map.serialize_entry("complete", &self.complete)?;
        map.serialize_entry("fallback", &self.fallback)?;
        if let Some(error) = self.error {
            map.serialize_entry("error", &error)?;
        }
        if self.action.is_some() {
            map.serialize_entry("action", &true)?;
        }
        map.end()
    }
}

/// An evaluated block: the top-level views and the evaluation's diagnostics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "UiView", deny_unknown_fields))]
pub struct View {
    /// Top-level views (Show and Each spliced in place).
    pub nodes: Vec<ViewNode>,
    /// Problems of this evaluation, at most `UI_LIMITS.diagnostics`.
    pub diagnostics: Vec<Diagnostic>,
}

impl View {
    /// Visits every view in pre-order.
    pub fn walk<'a>(&'a self, visit: &mut dyn FnMut(&'a ViewNode)) {
        for node in &self.nodes {
            node.walk(visit);
        }
    }

    /// Visits the views a person can see and use, in pre-order: complete, error-free nodes
    /// whose ancestors are all complete and error-free. `parent` is the visited node's
    /// parent view, if any.
    pub fn walk_live<'a>(&'a self, visit: &mut dyn FnMut(&'a ViewNode, Option<&'a ViewNode>)) {
        fn go<'a>(
            node: &'a ViewNode,
            parent: Option<&'a ViewNode>,
            visit: &mut dyn FnMut(&'a ViewNode, Option<&'a ViewNode>),
        ) {
            if !node.is_live() {
                return;
            }
            visit(node, parent);
            for child in &node.children {
                go(child, Some(node), visit);
            }
        }
        for node in &self.nodes {
            go(node, None, visit);
        }
    }

    /// Whether the evaluation ran out of budget.
    pub fn exceeded_budget(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.code == Code::BudgetExceeded)
    }
}
