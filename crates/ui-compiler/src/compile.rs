//! Compiling one block (`language.md` §12): declarations, nodes, fallbacks.

use indexmap::IndexMap;
use ui_core::catalog::{self, Component};
use ui_core::text::{Utf16Map, is_blank, trim_js, truncate_utf16, utf16_len};
use ui_core::{
    Budget, CATALOG_VERSION, Clock, Code, Diagnostic, Failure, Record, ReplyLimits, SystemClock,
    TextRange, UiHostLimits, UiLimits, Value,
};

use crate::block::{Block, Node, Query, TEXT_TYPE};
use crate::expr::{Expr, evaluate};
use crate::fallback::node_fallback_with;
use crate::syntax::{DiagSink, SynKind, Syntax, parse};

/// What a host tells the compiler about its query sources: whether a source is registered
/// and whether it accepts a block's evaluated arguments.
pub trait QuerySchemas {
    /// `None` when `source` is not registered; otherwise whether `args` (a record) passes
    /// the source's argument schema, with a reason when it does not.
    fn check(&self, source: &str, args: &Value) -> Option<Result<(), String>>;
}

/// Options of one compile (`UiCompileOptions`).
#[derive(Clone)]
pub struct CompileOptions<'a> {
    /// The compile id: block ids are `<id>:ui:<fence start>`. Default `"reply"`.
    pub id: String,
    /// Whether this is all the text (vs. a streaming preview). Default `false`.
    pub is_final: bool,
    /// The block budget.
    pub limits: UiLimits,
    /// The reply limits.
    pub reply_limits: ReplyLimits,
    /// The host's per-block limits (queries).
    pub host_limits: UiHostLimits,
    /// The attachment id `Image generated="latest"` resolves to.
    pub latest_attachment: Option<String>,
    /// The registered query sources; `None` registers none.
    pub query_schemas: Option<&'a dyn QuerySchemas>,
    /// The host's fence word. Default `"ui"`.
    pub fence_language: String,
    /// The clock for time budgets; `None` reads the system clock.
    pub clock: Option<&'a dyn Clock>,
}

impl Default for CompileOptions<'_> {
    fn default() -> Self {
        CompileOptions {
            id: "reply".to_owned(),
            is_final: false,
            limits: UiLimits::DEFAULT,
            reply_limits: ReplyLimits::DEFAULT,
            host_limits: UiHostLimits::DEFAULT,
            latest_attachment: None,
            query_schemas: None,
            fence_language: ui_core::FENCE_LANGUAGE.to_owned(),
            clock: None,
        }
    }
}

impl std::fmt::Debug for CompileOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileOptions")
            .field("id", &self.id)
            .field("is_final", &self.is_final)
            .field("limits", &self.limits)
            .field("latest_attachment", &self.latest_attachment)
            .field("fence_language", &self.fence_language)
            .finish_non_exhaustive()
    }
}

/// Compiles one block body (`compileUiBlock`). The block's id is `block_id`, its range
/// `[0, len]` of the body; [`crate::UiCompiler`] later moves it to the reply range.
///
/// Never fails: every problem becomes a diagnostic, and a budget failure replaces the block
/// with its bounded fallback (§12.3).
pub fn compile_block(source: &str, block_id: &str, options: &CompileOptions<'_>) -> Block {
    let system;
    let clock: &dyn Clock = match options.clock {
        Some(c) => c,
        None => {
            system = SystemClock::new();
            &system
        }
    };
    let mut budget = Budget::new(options.limits, clock);
    let map = Utf16Map::new(source);
    let len16 = utf16_len(source) as u32;
    let sink = DiagSink {
        block_id,
        map: &map,
        cap: options.limits.diagnostics() as usize,
    };
    let mut block = Block {
        id: block_id.to_owned(),
        catalog_version: CATALOG_VERSION,
        revision: None,
        start: 0,
        end: len16,
        complete: options.is_final,
        defaults: Record::default(),
        queries: IndexMap::new(),
        nodes: Vec::new(),
        diagnostics: Vec::new(),
        fallback: String::new(),
    };
    let full_fallback = || truncate_utf16(source, options.limits.characters() as usize).to_owned();
    let result = (|| -> Result<(), Failure> {
        let syntax = parse(source, options.is_final, &sink, &mut budget)?;
        let mut c = Compiler {
            source,
            syntax: &syntax,
            options,
            budget: &mut budget,
            sink: &sink,
            block: &mut block,
            query_names: Vec::new(),
        };
        c.block.diagnostics = syntax.diagnostics.clone();
        c.declarations(len16)?;
        let mut nodes = Vec::with_capacity(syntax.top.len());
        for &idx in &syntax.top {
            nodes.push(c.node(idx, 0, None)?);
        }
        let mut text = String::new();
        for n in &nodes {
            text.push_str(&n.fallback);
        }
        c.block.fallback = trim_js(&text).to_owned();
        c.block.nodes = nodes;
        Ok(())
    })();
    if let Err(failure) = result {
        let failure = if failure.code == Code::BudgetExceeded || failure.code == Code::RefusedAccess
        {
            failure
        } else {
            // Anything else escaping the guards is an internal error (§12.3).
            Failure::new(Code::InvalidSyntax, failure.message)
        };
        block.defaults = Record::default();
        block.queries = IndexMap::new();
        block.nodes = Vec::new();
        block.diagnostics = vec![
            Diagnostic::new(failure, TextRange::new(0, len16))
                .with_bytes(TextRange::new(0, source.len() as u32)),
        ];
        block.fallback = full_fallback();
    }
    if is_blank(&block.fallback) {
        block.fallback = full_fallback();
    }
    block
}

struct Compiler<'a, 'o, 'b, 'c> {
    source: &'a str,
    syntax: &'a Syntax<'a>,
    options: &'a CompileOptions<'o>,
    budget: &'b mut Budget<'c>,
    sink: &'a DiagSink<'a>,
    block: &'b mut Block,
    query_names: Vec<String>,
}

fn failure(code: Code, message: impl Into<Box<str>>) -> Failure {
    Failure::new(code, message)
}

fn is_budget(f: &Failure) -> bool {
    f.code == Code::BudgetExceeded
}

impl Compiler<'_, '_, '_, '_> {
    fn declaration_diag(&mut self, f: Failure, len16: u32) {
        if self.block.diagnostics.len() < self.sink.cap {
            self.block.diagnostics.push(
                Diagnostic::new(f, TextRange::new(0, len16))
                    .with_bytes(TextRange::new(0, self.source.len() as u32)),
            );
        }
    }

    // ---- §12.1 ----

    fn declarations(&mut self, len16: u32) -> Result<(), Failure> {
        let is_query = |e: &Expr| matches!(e, Expr::Call { name, .. } if name == "Query");
        let empty = Record::default();
        for decl in self.syntax.decls.iter().filter(|d| !is_query(&d.expr)) {
            let result = if decl.expr.is_constant() {
                evaluate(&decl.expr, &empty, self.budget)
            } else {
                Err(failure(
                    Code::InvalidDefault,
                    format!("The default of `{}` must be a literal.", decl.name),
                ))
            };
            match result {
                Ok(v) => {
                    self.block.defaults.insert(decl.name.clone(), v);
                }
                Err(f) if is_budget(&f) => return Err(f),
                Err(f) => self.declaration_diag(f, len16),
            }
        }
        for decl in self.syntax.decls.iter().filter(|d| is_query(&d.expr)) {
            match self.query(&decl.expr) {
                Ok(q) => {
                    self.query_names.push(decl.name.clone());
                    self.block.queries.insert(decl.name.clone(), q);
                }
                Err(f) if is_budget(&f) => return Err(f),
                Err(f) => self.declaration_diag(f, len16),
            }
        }
        Ok(())
    }

    fn query(&mut self, expr: &Expr) -> Result<Query, Failure> {
        let Expr::Call { args, .. } = expr else {
            unreachable!("only @Query calls reach query()")
        };
        let invalid = |m: &str| failure(Code::InvalidQuery, m.to_owned());
        if args.len() != 2 || !args[0].is_constant() || !matches!(args[1], Expr::Object(_)) {
            return Err(invalid("Write a query as @Query(\"source\", {arguments})."));
        }
        let empty = Record::default();
        let source = evaluate(&args[0], &empty, self.budget)?;
        let mut undeclared = None;
        args[1].visit_references(&mut |name| {
            if undeclared.is_none() && !self.block.defaults.contains_key(name) {
                undeclared = Some(name.to_owned());
            }
        });
        if let Some(name) = undeclared {
            return Err(invalid(&format!(
                "Query arguments may only read local state; `{name}` is not."
            )));
        }
        let arguments = evaluate(&args[1], &self.block.defaults, self.budget)?;
        let (Some(source), Some(record)) = (source.as_str(), arguments.as_record()) else {
            return Err(invalid("The query source must be a string."));
        };
        let Some(check) = self
            .options
            .query_schemas
            .and_then(|s| s.check(source, &arguments))
        else {
            return Err(failure(
                Code::UnknownQuery,
                format!("The query source `{source}` is not registered."),
            ));
        };
        if let Err(reason) = check {
            return Err(invalid(&format!(
                "The arguments of `{source}` are invalid: {reason}"
            )));
        }
        if self.block.queries.len() as u64 >= self.options.host_limits.queries() {
            return Err(failure(
                Code::BudgetExceeded,
                format!(
                    "A block may declare at most {} queries.",
                    self.options.host_limits.queries()
                ),
            ));
        }
        Ok(Query {
            source: source.to_owned(),
            args: record.clone(),
            expression: (!args[1].is_constant()).then(|| args[1].clone()),
        })
    }

    fn is_local_state(&self, name: &str) -> bool {
        self.block.defaults.contains_key(name)
    }

    // ---- §12.2 ----

    fn node(&mut self, idx: usize, depth: u64, parent: Option<&str>) -> Result<Node, Failure> {
        self.budget.depth(depth)?;
        let syn = &self.syntax.nodes[idx];
        let map = self.sink.map;
        let mut node = Node {
            id: self.sink.node_id(syn.start),
            kind: String::new(),
            props: Record::default(),
            expressions: IndexMap::new(),
            bindings: IndexMap::new(),
            children: Vec::new(),
            complete: syn.complete,
            fallback: String::new(),
            error: None,
            start: map.utf16(syn.start) as u32,
            end: map.utf16(syn.end) as u32,
            bytes: TextRange::new(syn.start as u32, syn.end as u32),
        };
        let (name, props) = match &syn.kind {
            SynKind::Text(text) => {
                node.kind = TEXT_TYPE.to_owned();
                node.props.insert("text".to_owned(), Value::from(*text));
                node.fallback = (*text).to_owned();
                return Ok(node);
            }
            SynKind::TextExpr(expr) => {
                node.kind = TEXT_TYPE.to_owned();
                match expr {
                    Some(expr) => {
                        node.expressions.insert("text".to_owned(), expr.clone());
                        node.fallback = match evaluate(expr, &self.block.defaults, self.budget) {
                            Ok(v) => v.plain_text(),
                            Err(f) if is_budget(&f) => return Err(f),
                            Err(_) => String::new(),
                        };
                    }
                    None => {
                        node.props.insert("text".to_owned(), Value::from(""));
                    }
                }
                return Ok(node);
            }
            SynKind::Tag { name, props } => (*name, props),
        };
        node.kind = name.to_owned();
        // The values of the node's expressions in the defaults; with `node.props`, what
        // the fallback text reads.
        let mut evaluated = Record::default();
        let guarded = self.component(&mut node, name, props, parent, &mut evaluated);
        match guarded {
            Ok(()) => {}
            Err(f) if is_budget(&f) => return Err(f),
            Err(f) => {
                node.error = Some(f.code);
                self.node_diag(&node, f);
            }
        }
        let child_parent = match catalog::lookup(name) {
            Some(c) if c.is_pass_through() => parent,
            _ => Some(name),
        };
        let mut children_text = String::new();
        node.children.reserve_exact(syn.children.len());
        for &child in &syn.children {
            let compiled = self.node(child, depth + 1, child_parent)?;
            children_text.push_str(&compiled.fallback);
            node.children.push(compiled);
        }
        let props = &node.props;
        let mut fallback = node_fallback_with(
            name,
            |key| props.get(key).or_else(|| evaluated.get(key)),
            &children_text,
        );
        if is_blank(&fallback) {
            let raw = &self.source[syn.start..syn.end];
            let cap = self.options.reply_limits.node_source_fallback() as usize;
            fallback = truncate_utf16(raw, cap).to_owned();
        }
        node.fallback = fallback;
        Ok(node)
    }

    fn node_diag(&mut self, node: &Node, f: Failure) {
        if self.block.diagnostics.len() < self.sink.cap {
            self.block.diagnostics.push(
                Diagnostic::new(f, TextRange::new(node.start, node.end))
                    .with_node(node.id.clone())
                    .with_bytes(node.bytes),
            );
        }
    }

    /// Steps 4a–4g of §12.2, inside the failure guard.
    fn component(
        &mut self,
        node: &mut Node,
        name: &str,
        props: &[(&str, Expr)],
        parent: Option<&str>,
        evaluated: &mut Record,
    ) -> Result<(), Failure> {
        let Some(component) = catalog::lookup(name) else {
            return Err(failure(
                Code::UnknownComponent,
                format!("`{name}` is not a component of the catalog."),
            ));
        };
        if let Some(required) = component.parent()
            && parent != Some(required)
        {
            return Err(failure(
                Code::InvalidParent,
                format!("`{name}` must stand inside `{required}`."),
            ));
        }
        if let Some(parent_component) = parent.and_then(catalog::lookup)
            && let Some(allowed) = parent_component.children()
            && !allowed.contains(&name)
            && !component.is_pass_through()
        {
            return Err(failure(
                Code::InvalidChild,
                format!("`{}` cannot hold `{name}`.", parent_component.name()),
            ));
        }
        let empty = Record::default();
        node.props.reserve(props.len());
        for &(prop, ref expr) in props {
            if component.action() == Some(prop) {
                self.check_action(expr)?;
                node.expressions.insert(prop.to_owned(), expr.clone());
            } else if !component.has_prop(prop) {
                let f = failure(
                    Code::RefusedProp,
                    format!("`{name}` has no prop `{prop}`; it was dropped."),
                );
                self.node_diag(node, f);
            } else if expr.is_constant() {
                let v = evaluate(expr, &empty, self.budget)?;
                node.props.insert(prop.to_owned(), v);
            } else {
                node.expressions.insert(prop.to_owned(), expr.clone());
                if component.binding() == Some(prop)
                    && let Some(reference) = expr.as_reference()
                    && self.is_local_state(reference)
                {
                    node.bindings.insert(prop.to_owned(), reference.to_owned());
                }
            }
        }
        if name == "Image"
            && node.props.get("generated").and_then(Value::as_str) == Some("latest")
            && let Some(latest) = &self.options.latest_attachment
        {
            node.props.shift_remove("generated");
            node.props
                .insert("attachment".to_owned(), Value::from(latest.as_str()));
        }
        if let Some(action) = component.action()
            && node.complete
            && !node.expressions.contains_key(action)
        {
            return Err(failure(
                Code::InvalidProps,
                format!("`{name}` needs an `{action}`."),
            ));
        }
        let mut resolved = true;
        for (prop, expr) in &node.expressions {
            if component.action() == Some(prop.as_str()) {
                continue;
            }
            match evaluate(expr, &self.block.defaults, self.budget) {
                Ok(v) => {
                    evaluated.insert(prop.clone(), v);
                }
                Err(f) if is_budget(&f) => return Err(f),
                Err(_) => resolved = false,
            }
        }
        if resolved && node.complete {
            if evaluated.is_empty() {
                validate(component, &node.props)?;
            } else {
                let mut checked = node.props.clone();
                checked.extend(evaluated.iter().map(|(k, v)| (k.clone(), v.clone())));
                validate(component, &checked)?;
            }
        }
        Ok(())
    }

    /// The action rules of §15.5 plus the compiler's constant `@Set` value rule.
    fn check_action(&self, expr: &Expr) -> Result<(), Failure> {
        check_action_target(expr, &|n| self.is_local_state(n))?;
        if let Expr::Call { name, args } = expr
            && name == "Set"
            && !args[1].is_constant()
        {
            return Err(failure(
                Code::RefusedAction,
                "The value of @Set in a Button must be a literal.",
            ));
        }
        Ok(())
    }
}

fn validate(component: &Component, props: &Record) -> Result<(), Failure> {
    component.check(props).map_err(Failure::from)
}

/// The target rule shared by compiler, evaluator and state (`language.md` §15.5): the
/// action must be `@Set($x, v)`, `@Reset($x)` or `@Reset()` with `$x` local state.
pub(crate) fn check_action_target(
    expr: &Expr,
    is_local: &dyn Fn(&str) -> bool,
) -> Result<(), Failure> {
    let Expr::Call { name, args } = expr else {
        return Err(failure(
            Code::RefusedAction,
            "An action must be @Set($name, value), @Reset($name) or @Reset().",
        ));
    };
    let arity = match name.as_str() {
        "Set" => 2,
        "Reset" if args.is_empty() => return Ok(()),
        "Reset" => 1,
        _ => {
            return Err(failure(
                Code::RefusedAction,
                format!("@{name} is not an action; use @Set or @Reset."),
            ));
        }
    };
    if args.len() != arity {
        return Err(failure(
            Code::RefusedAction,
            format!("@{name} takes {arity} argument(s)."),
        ));
    }
    match args[0].as_reference() {
        Some(target) if is_local(target) => Ok(()),
        _ => Err(failure(
            Code::RefusedBinding,
            "An action may only change a declared `$name`.",
        )),
    }
}
