//! Evaluating a compiled block against a state (`language.md` §15): the view tree.

use indexmap::IndexMap;
use serde::ser::{Serialize, SerializeMap, Serializer};
use ui_core::catalog;
use ui_core::{
    Budget, CATALOG_VERSION, Clock, Code, Diagnostic, Failure, Record, SystemClock, TextRange,
    UiLimits, Value,
};

use crate::block::{Block, Node};
use crate::compile::check_action_target;
use crate::expr::{Expr, evaluate};
use crate::state::UiState;

/// A bound control's binding in the view: the variable and its current value.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewBinding {
    /// The `$name` the control writes.
    pub variable: String,
    /// The prop's current (evaluated) value.
    pub value: Value,
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
    /// The action a press runs (Buttons).
    pub action: Option<Expr>,
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

/// The result of [`evaluate_block`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
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
}

/// Evaluates `block` with the values and readings of `state` under a fresh budget of
/// `limits` on `clock` (`evaluateUiBlock`).
///
/// # Errors
/// Only when the state itself cannot be copied ([`Code::BudgetExceeded`]); every other
/// problem is a per-node error and a diagnostic.
pub fn evaluate_block(
    block: &Block,
    state: &UiState,
    limits: UiLimits,
    clock: Option<&dyn Clock>,
) -> Result<View, Failure> {
    let system;
    let clock: &dyn Clock = match clock {
        Some(c) => c,
        None => {
            system = SystemClock::new();
            &system
        }
    };
    let scope = state.scope()?;
    let mut e = Evaluator {
        block,
        budget: Budget::new(limits, clock),
        diagnostics: Vec::new(),
        cap: limits.diagnostics() as usize,
        exhausted: false,
    };
    let mut nodes = Vec::new();
    for node in &block.nodes {
        if e.exhausted {
            break;
        }
        nodes.extend(e.visit(node, &scope, 0, ""));
    }
    Ok(View {
        nodes,
        diagnostics: e.diagnostics,
    })
}

struct Evaluator<'b, 'c> {
    block: &'b Block,
    budget: Budget<'c>,
    diagnostics: Vec<Diagnostic>,
    cap: usize,
    exhausted: bool,
}

fn fail(code: Code, message: impl Into<Box<str>>) -> Failure {
    Failure::new(code, message)
}

impl Evaluator<'_, '_> {
    fn is_local(&self, name: &str) -> bool {
        self.block.defaults.contains_key(name) && !self.block.queries.contains_key(name)
    }

    fn visit(&mut self, node: &Node, vars: &Record, depth: u64, suffix: &str) -> Vec<ViewNode> {
        if self.exhausted {
            return Vec::new();
        }
        let mut view = ViewNode {
            id: format!("{}{suffix}", node.id),
            source_id: node.id.clone(),
            kind: node.kind.clone(),
            props: Record::new(),
            bindings: IndexMap::new(),
            action: None,
            children: Vec::new(),
            complete: node.complete,
            fallback: node.fallback.clone(),
            error: None,
        };
        match self.visit_inner(node, &mut view, vars, depth, suffix) {
            Ok(Some(spliced)) => spliced,
            Ok(None) => vec![view],
            Err(f) => {
                if f.code == Code::BudgetExceeded {
                    self.exhausted = true;
                }
                view.error = Some(f.code);
                view.children.clear();
                view.bindings.clear();
                view.action = None;
                if self.diagnostics.len() < self.cap {
                    self.diagnostics.push(
                        Diagnostic::new(f, TextRange::new(node.start, node.end))
                            .with_node(node.id.clone())
                            .with_bytes(node.bytes),
                    );
                }
                vec![view]
            }
        }
    }

    /// `Ok(Some(views))` replaces the node (Show, Each); `Ok(None)` keeps `view`.
    fn visit_inner(
        &mut self,
        node: &Node,
        view: &mut ViewNode,
        vars: &Record,
        depth: u64,
        suffix: &str,
    ) -> Result<Option<Vec<ViewNode>>, Failure> {
        self.budget.depth(depth)?;
        self.budget.node()?;
        if let Some(code) = node.error {
            return Err(fail(code, "The node failed to compile."));
        }
        if self.block.catalog_version != CATALOG_VERSION {
            return Err(fail(
                Code::UnknownCatalog,
                format!(
                    "The block uses catalog version {}.",
                    self.block.catalog_version
                ),
            ));
        }
        let component = catalog::lookup(&node.kind);
        let action_prop = component.and_then(|c| c.action());
        let mut props = match self.budget.copy_value(&Value::record(node.props.clone()))? {
            Value::Record(r) => std::sync::Arc::unwrap_or_clone(r),
            _ => Record::new(),
        };
        for (prop, expr) in &node.expressions {
            if Some(prop.as_str()) == action_prop {
                continue;
            }
            let value = evaluate(expr, vars, &mut self.budget)?;
            props.insert(prop.clone(), value);
        }
        if node.is_text() {
            let text = match props.get("text") {
                None => String::new(),
                Some(v) => v.scalar_text().ok_or_else(|| {
                    fail(
                        Code::InvalidValue,
                        "Only text, numbers and booleans can be shown.",
                    )
                })?,
            };
            view.props.insert("text".to_owned(), Value::from(text));
            return Ok(None);
        }
        let Some(component) = component else {
            return Err(fail(
                Code::UnknownComponent,
                format!("`{}` is not a component of the catalog.", node.kind),
            ));
        };
        let props = component.validate(&props).map_err(Failure::from)?;
        view.props = props;
        let props = &view.props;
        match component.name() {
            "Show" => {
                if props.get("when").and_then(Value::as_bool) == Some(true) {
                    let mut out = Vec::new();
                    for child in &node.children {
                        if self.exhausted {
                            break;
                        }
                        out.extend(self.visit(child, vars, depth + 1, suffix));
                    }
                    return Ok(Some(out));
                }
                return Ok(Some(Vec::new()));
            }
            "Each" => {
                let items = props
                    .get("items")
                    .and_then(Value::as_array)
                    .map(<[Value]>::to_vec)
                    .unwrap_or_default();
                let local = props
                    .get("as")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.budget.iteration(items.len() as u64)?;
                let mut out = Vec::new();
                let mut scope = vars.clone();
                for (i, item) in items.into_iter().enumerate() {
                    scope.insert(local.clone(), item);
                    let suffix = format!("{suffix}:{i}");
                    for child in &node.children {
                        if self.exhausted {
                            break;
                        }
                        out.extend(self.visit(child, &scope, depth + 1, &suffix));
                    }
                    if self.exhausted {
                        return Err(fail(
                            Code::BudgetExceeded,
                            "The block exceeded its work budget while repeating `Each`.",
                        ));
                    }
                }
                return Ok(Some(out));
            }
            _ => {}
        }
        for (prop, variable) in &node.bindings {
            if component.binding() != Some(prop.as_str()) || !self.is_local(variable) {
                return Err(fail(
                    Code::RefusedBinding,
                    format!("`{prop}` cannot bind `{variable}`."),
                ));
            }
            let value = view.props.get(prop).cloned().unwrap_or_default();
            view.bindings.insert(
                prop.clone(),
                ViewBinding {
                    variable: variable.clone(),
                    value,
                },
            );
        }
        if let Some(action_prop) = action_prop
            && let Some(action) = node.expressions.get(action_prop)
        {
            check_action_target(action, &|n| self.is_local(n))?;
            view.action = Some(action.clone());
        }
        for child in &node.children {
            if self.exhausted {
                break;
            }
            let views = self.visit(child, vars, depth + 1, suffix);
            view.children.extend(views);
        }
        Ok(None)
    }
}

/// What happened to an edit or a press.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Applied {
    /// The state changed.
    Changed,
    /// Nothing happened: the node is incomplete, disabled, or the value is not allowed.
    Ignored,
}

impl UiState {
    /// A person changed the bound `prop` of `view` to `next` (`onValueChange`): nothing
    /// happens while the node is incomplete or when the component's schema rejects the
    /// new props; otherwise the variable is set.
    ///
    /// # Errors
    /// [`UiState::set`] failures, notably [`Code::InvalidValue`] for a change of kind.
    pub fn change(
        &mut self,
        view: &ViewNode,
        prop: &str,
        next: &Value,
    ) -> Result<Applied, Failure> {
        let Some(binding) = view.bindings.get(prop) else {
            return Err(fail(
                Code::RefusedBinding,
                format!("`{prop}` of `{}` is not bound.", view.id),
            ));
        };
        if !view.complete {
            return Ok(Applied::Ignored);
        }
        let Some(component) = catalog::lookup(&view.kind) else {
            return Ok(Applied::Ignored);
        };
        let mut props = view.props.clone();
        props.insert(prop.to_owned(), next.clone());
        if component.validate(&props).is_err() {
            return Ok(Applied::Ignored);
        }
        self.set(&binding.variable, next)?;
        Ok(Applied::Changed)
    }

    /// A person pressed `view` (`onAction`): nothing happens while the node is incomplete
    /// or `disabled` is `true`; otherwise its action runs, and a failure of the action
    /// leaves the state unchanged.
    pub fn press(&mut self, view: &ViewNode) -> Applied {
        let Some(action) = &view.action else {
            return Applied::Ignored;
        };
        if !view.complete || view.props.get("disabled").and_then(Value::as_bool) == Some(true) {
            return Applied::Ignored;
        }
        match self.run(action) {
            Ok(()) => Applied::Changed,
            Err(_) => Applied::Ignored,
        }
    }
}
