//! Evaluating a compiled block against a state (`language.md` §15): the view tree.

use indexmap::IndexMap;
use ui_core::catalog::{self, Component};
use ui_core::{
    Budget, CATALOG_VERSION, Clock, Code, Diagnostic, Failure, FrozenClock, Record, SystemClock,
    TextRange, UiLimits, Value, View, ViewAction, ViewBinding, ViewNode,
};

use crate::block::{Block, Node};
use crate::compile::check_action_target;
use crate::expr::{Expr, evaluate};
use crate::state::UiState;

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
        scope: &scope,
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
    /// The state's values and readings, without any `Each` local: what a press evaluates
    /// its action against.
    scope: &'c Record,
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
            kind: String::from(&*node.kind),
            props: Record::default(),
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

    /// What a press of `action` (which passed the target rule) does. The `@Set` value of a
    /// compiled Button is a constant; a tampered block's computed value is evaluated here,
    /// outside the evaluation's budget, and an action whose value fails is inert. As the
    /// reference runs a press (`UiState.run`), the value sees the state's scope alone: a
    /// Button inside `Each` neither reads nor pays for the loop's local.
    fn resolve_action(&self, action: &Expr) -> ViewAction {
        let Expr::Call { name, args } = action else {
            return ViewAction::Inert;
        };
        let target = args.first().and_then(Expr::as_reference).map(str::to_owned);
        match (name.as_str(), target, args.get(1)) {
            ("Reset", target, None) => ViewAction::Reset { target },
            ("Set", Some(target), Some(value)) => {
                let clock = FrozenClock(0.0);
                let mut budget = Budget::new(*self.budget.limits(), &clock);
                match evaluate(value, self.scope, &mut budget) {
                    Ok(value) => ViewAction::Set { target, value },
                    Err(_) => ViewAction::Inert,
                }
            }
            _ => ViewAction::Inert,
        }
    }

    /// The node's constant props (copied under the budget) and its evaluated expressions,
    /// but for its action, which runs only when pressed.
    fn evaluated_props(
        &mut self,
        node: &Node,
        vars: &Record,
        action_prop: Option<&str>,
    ) -> Result<Record, Failure> {
        let record: Record = (node.props.iter())
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect();
        let mut props = match self.budget.copy_value(&Value::record(record))? {
            Value::Record(r) => std::sync::Arc::unwrap_or_clone(r),
            _ => Record::default(),
        };
        for (prop, expr) in &node.expressions {
            if Some(prop) == action_prop {
                continue;
            }
            let value = evaluate(expr, vars, &mut self.budget)?;
            props.insert(prop.to_owned(), value);
        }
        Ok(props)
    }

    /// A Show with its validated `props`: its children's views when `when` is `true`, else
    /// none.
    fn show(
        &mut self,
        node: &Node,
        props: &Record,
        vars: &Record,
        depth: u64,
        suffix: &str,
    ) -> Vec<ViewNode> {
        let mut out = Vec::new();
        if props.get("when").and_then(Value::as_bool) == Some(true) {
            for child in &node.children {
                if self.exhausted {
                    break;
                }
                out.extend(self.visit(child, vars, depth + 1, suffix));
            }
        }
        out
    }

    /// An Each with its validated `props`: its children's views once per item, with the
    /// item under the local name and `:<index>` added to the ids.
    fn each(
        &mut self,
        node: &Node,
        props: &Record,
        vars: &Record,
        depth: u64,
        suffix: &str,
    ) -> Result<Vec<ViewNode>, Failure> {
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
            // A fresh allocation, as JavaScript's boundary copy gives the local: the
            // item is not identical (`===`) to the element it came from.
            let mut fresh = Budget::new(*self.budget.limits(), &FrozenClock(0.0));
            let item = fresh.copy_value_fresh(&item).unwrap_or(item);
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
        Ok(out)
    }

    /// The view's bindings: each bound prop of `node` with its variable and current value;
    /// `refused_binding` for a prop the component does not bind or a name that is not
    /// local state (only in a tampered block).
    fn bind(&self, node: &Node, component: &Component, view: &mut ViewNode) -> Result<(), Failure> {
        for (prop, variable) in &node.bindings {
            if component.binding() != Some(prop) || !self.is_local(variable) {
                return Err(fail(
                    Code::RefusedBinding,
                    format!("`{prop}` cannot bind `{variable}`."),
                ));
            }
            let value = view.props.get(prop).cloned().unwrap_or_default();
            view.bindings.insert(
                prop.to_owned(),
                ViewBinding {
                    variable: variable.clone(),
                    value,
                },
            );
        }
        Ok(())
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
        let props = self.evaluated_props(node, vars, action_prop)?;
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
        match component.name() {
            "Show" => return Ok(Some(self.show(node, &view.props, vars, depth, suffix))),
            "Each" => return self.each(node, &view.props, vars, depth, suffix).map(Some),
            _ => {}
        }
        self.bind(node, component, view)?;
        if let Some(action_prop) = action_prop
            && let Some(action) = node.expressions.get(action_prop)
        {
            check_action_target(action, &|n| self.is_local(n))?;
            view.action = Some(self.resolve_action(action));
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
        if !view.complete || view.is_disabled() {
            return Applied::Ignored;
        }
        let result = match action {
            ViewAction::Set { target, value } => self.set(target, value),
            ViewAction::Reset { target: None } => self.reset_all(),
            ViewAction::Reset {
                target: Some(target),
            } => match self.defaults().get(target).cloned() {
                Some(default) => self.set(target, &default),
                None => return Applied::Ignored,
            },
            _ => return Applied::Ignored,
        };
        match result {
            Ok(()) => Applied::Changed,
            Err(_) => Applied::Ignored,
        }
    }
}
