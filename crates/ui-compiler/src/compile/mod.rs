//! Compiling one block (`language.md` §12): declarations, nodes, fallbacks; and resuming
//! the compile of a growing block from a [`Checkpoint`] of an earlier compile.

use std::borrow::Cow;
use std::ops::Range;

use indexmap::IndexMap;
use ui_core::catalog::{self, Component};
use ui_core::text::{Utf16Map, is_blank, trim_js, truncate_utf16, utf16_len};
use ui_core::{
    Budget, CATALOG_VERSION, Clock, Code, Diagnostic, Failure, PropMap, Props, Record, ReplyLimits,
    SystemClock, TextRange, UiHostLimits, UiLimits, Value,
};

use crate::block::{Block, Node, Query, TEXT_TYPE};
use crate::expr::{Expr, evaluate, evaluate_owned};
use crate::fallback::node_fallback_with;
use crate::speedups::Paths;
use crate::syntax::{Decl, DeclValue, DiagSink, SynKind, SynNode, SynProp, Syntax, parse};

mod resume;

pub(crate) use resume::{Checkpoint, Previous};
use resume::{Point, Reuse, Segment, resume};

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
    let id = block_id.to_owned();
    let job = BlockJob {
        id,
        complete: options.is_final,
        clock,
        previous: None,
        keep: false,
    };
    compile_block_with(source, options, job).0
}

/// The steps, iterations and nodes a budget has used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Charges {
    steps: u64,
    iterations: u64,
    nodes: u64,
}

impl Charges {
    fn of(budget: &Budget<'_>) -> Self {
        Charges {
            steps: budget.steps(),
            iterations: budget.iterations(),
            nodes: budget.nodes(),
        }
    }

    /// What was charged between `earlier` and `self`.
    fn since(self, earlier: Charges) -> Charges {
        Charges {
            steps: self.steps - earlier.steps,
            iterations: self.iterations - earlier.iterations,
            nodes: self.nodes - earlier.nodes,
        }
    }
}

/// Empties `block` after a whole-block failure (§12.3) but for one diagnostic over the
/// whole source (`len16` UTF-16 units): `budget_exceeded` and `refused_access` as they
/// are, anything else escaping the guards as an internal error (`invalid_syntax`). The
/// caller sets the fallback.
fn fail_whole_block(block: &mut Block, failure: Failure, source: &str, len16: u32) {
    let failure = if failure.code == Code::BudgetExceeded || failure.code == Code::RefusedAccess {
        failure
    } else {
        Failure::new(Code::InvalidSyntax, failure.message)
    };
    block.defaults = Record::default();
    block.queries = IndexMap::new();
    block.nodes = Vec::new();
    block.diagnostics = vec![
        Diagnostic::new(failure, TextRange::new(0, len16))
            .with_bytes(TextRange::new(0, source.len() as u32)),
    ];
}

/// The counters and the number of diagnostics of a compile now.
fn point(budget: &Budget<'_>, diagnostics: &[Diagnostic]) -> Point {
    (Charges::of(budget), diagnostics.len())
}

/// What [`compile_body`] did.
enum Outcome {
    /// The block is compiled; with the checkpoint it leaves, if any.
    Done(Option<Box<Checkpoint>>),
    /// Resuming is not possible after all; nothing of the block is valid.
    Restart,
}

/// One block for [`compile_block_with`], beside the caller's [`CompileOptions`].
pub(crate) struct BlockJob<'p, 'c> {
    /// The block id.
    pub(crate) id: String,
    /// Whether the block is complete, and the clock: these stand for the options' own
    /// `is_final` and `clock`, which the compile does not read, because a reply decides
    /// them per fence (a closed fence is complete in a preview) and one clock serves the
    /// whole reply.
    pub(crate) complete: bool,
    pub(crate) clock: &'c dyn Clock,
    /// An earlier compile of the same block to resume from, when its checkpoint applies.
    pub(crate) previous: Option<Previous<'p>>,
    /// Whether to return the checkpoint this compile leaves (none after a whole-block
    /// failure, or when its diagnostics reached the cap before the checkpoint).
    pub(crate) keep: bool,
}

/// [`compile_block`] for `job`: resuming from `job.previous` when its checkpoint applies,
/// and returning, with `job.keep`, the checkpoint this compile leaves.
///
/// The result equals `compile_block(source, &block_id, options)` exactly (with that
/// finality and clock). A resumed compile restores the parse at the checkpoint (counters,
/// diagnostics, open tags) and parses the rest, compiles the declarations again, and
/// compiles the nodes in order as a fresh compile does, except that each run of finished
/// nodes before the checkpoint (the earlier top-level nodes, the earlier children of each
/// open tag) is taken from the previous block, its charges added as one lump and its
/// diagnostics pushed again under the cap, at the point where a fresh compile would compile
/// it; and likewise the compile of each open tag itself while it stays incomplete. Counters
/// only grow and every check is `counter > limit`, so when a lump fits, no check inside it
/// fails in a fresh compile either (depth checks do not read the counters and passed at the
/// same depths); when it does not fit, the compile starts over from the beginning, which
/// fails exactly where and how a fresh compile fails.
pub(crate) fn compile_block_with(
    source: &str,
    options: &CompileOptions<'_>,
    job: BlockJob<'_, '_>,
) -> (Block, Option<Box<Checkpoint>>) {
    let BlockJob {
        id: block_id,
        complete: is_final,
        clock,
        previous,
        keep,
    } = job;
    let previous = previous.filter(|p| {
        let checkpoint = &p.checkpoint;
        checkpoint.applies(source, p.source, &p.block.id, &block_id, options)
    });
    let mut budget = Budget::new(options.limits, clock);
    let map = Utf16Map::new(source);
    let len16 = utf16_len(source) as u32;
    let sink = DiagSink {
        block_id: &block_id,
        map: &map,
        cap: options.limits.diagnostics() as usize,
        paths: Paths::DEFAULT,
    };
    let mut block = Block {
        // Set at the end: the sink holds the id meanwhile.
        id: String::new(),
        catalog_version: CATALOG_VERSION,
        revision: None,
        start: 0,
        end: len16,
        complete: is_final,
        defaults: Record::default(),
        queries: IndexMap::new(),
        nodes: Vec::new(),
        diagnostics: Vec::new(),
        fallback: String::new(),
    };
    let full_fallback = || truncate_utf16(source, options.limits.characters() as usize).to_owned();
    let mut checkpoint = None;
    let body = compile_body(
        source,
        options,
        &mut budget,
        &sink,
        &mut block,
        previous,
        keep,
    );
    match body {
        Ok(Outcome::Done(left)) => checkpoint = left,
        Ok(Outcome::Restart) => {
            let afresh = BlockJob {
                id: block_id,
                complete: is_final,
                clock,
                previous: None,
                keep,
            };
            return compile_block_with(source, options, afresh);
        }
        Err(failure) => {
            fail_whole_block(&mut block, failure, source, len16);
            block.fallback = full_fallback();
        }
    }
    if is_blank(&block.fallback) {
        block.fallback = full_fallback();
    }
    block.id = block_id;
    (block, checkpoint)
}

/// Steps of §12 after the initial block (whose `complete` is the compile's `final`): parse
/// (or resume), declarations, nodes, fallback. `Err` is a whole-block failure.
fn compile_body(
    source: &str,
    options: &CompileOptions<'_>,
    budget: &mut Budget<'_>,
    sink: &DiagSink<'_>,
    block: &mut Block,
    previous: Option<Previous<'_>>,
    keep: bool,
) -> Result<Outcome, Failure> {
    let is_final = block.complete;
    let (mut syntax, decls, resumed) = match previous {
        None => {
            let mut syntax = parse(source, is_final, sink, budget, keep)?;
            let decls = std::mem::take(&mut syntax.decls);
            (syntax, decls, None)
        }
        Some(previous) => match resume(source, is_final, sink, budget, previous, keep)? {
            Some(r) => (r.syntax, r.decls, Some((r.top, r.top_segment, r.restored))),
            None => return Ok(Outcome::Restart),
        },
    };
    block.diagnostics = std::mem::take(&mut syntax.diagnostics);
    let len16 = block.end;
    let mark = syntax.mark.take().filter(|_| keep);
    // The prop values leave the syntax for the compile, which moves most of them into the
    // nodes, and come back for the open tags of the checkpoint.
    let mut props = std::mem::take(&mut syntax.props);
    let mut c = Compiler {
        source,
        syntax: &syntax,
        props: &mut props,
        decls: &decls,
        options,
        budget,
        sink,
        block,
        query_names: Vec::new(),
        reuse: Reuse::new(mark),
    };
    c.declarations(len16)?;
    let start = c.snapshot();
    c.reuse.top_starts(start);
    let mut nodes = Vec::new();
    if let Some((reused, segment, restored)) = resumed {
        c.reuse.take_over(restored, reused.len());
        if let Err(f) = c.replay(&segment, None) {
            return if c.reuse.must_restart() {
                Ok(Outcome::Restart)
            } else {
                Err(f)
            };
        }
        nodes = reused;
    }
    // Amortised: a resumed compile's vector is the previous one's, which grows a little at
    // every compile.
    nodes.reserve(syntax.top.len());
    for (i, &idx) in syntax.top.iter().enumerate() {
        c.reuse
            .top_reaches(i, || point(c.budget, &c.block.diagnostics));
        match c.node(idx, 0, None) {
            Ok(node) => nodes.push(node),
            Err(_) if c.reuse.must_restart() => return Ok(Outcome::Restart),
            Err(f) => return Err(f),
        }
    }
    let end = syntax.top.len();
    c.reuse
        .top_reaches(end, || point(c.budget, &c.block.diagnostics));
    c.block.fallback = trimmed(fallbacks(&nodes).into_owned());
    c.block.nodes = nodes;
    let reuse = c.reuse;
    syntax.props = props;
    let checkpoint = reuse.checkpoint(&mut syntax, &block.diagnostics, sink.cap, options, decls);
    Ok(Outcome::Done(checkpoint))
}

/// The effective parent of a node (Show and Each hand theirs down): its tag name and
/// its component, looked up once.
#[derive(Clone, Copy)]
struct Parent<'a> {
    name: &'a str,
    component: Option<&'static Component>,
}

struct Compiler<'a, 'o, 'b, 'c> {
    source: &'a str,
    syntax: &'a Syntax<'a>,
    /// The syntax's props ([`Syntax::props`]), whose values are moved out as the tags
    /// compile but for those of the tags open at the parser's mark.
    props: &'b mut Vec<SynProp>,
    decls: &'a [Decl],
    options: &'a CompileOptions<'o>,
    budget: &'b mut Budget<'c>,
    sink: &'a DiagSink<'a>,
    block: &'b mut Block,
    query_names: Vec<String>,
    /// What this compile takes over from an earlier one and records for the next one
    /// (`resume.rs`).
    reuse: Reuse,
}

/// The concatenated fallbacks of `nodes`.
fn fallbacks(nodes: &[Node]) -> Cow<'_, str> {
    match nodes {
        [] => Cow::Borrowed(""),
        [only] => Cow::Borrowed(&only.fallback),
        _ => {
            let mut text = String::with_capacity(nodes.iter().map(|n| n.fallback.len()).sum());
            for n in nodes {
                text.push_str(&n.fallback);
            }
            Cow::Owned(text)
        }
    }
}

/// `text` without JS whitespace at either end, trimmed in place.
fn trimmed(mut text: String) -> String {
    let kept = trim_js(&text);
    if kept.len() != text.len() {
        let (start, len) = (kept.as_ptr() as usize - text.as_ptr() as usize, kept.len());
        text.truncate(start + len);
        text.drain(..start);
    }
    text
}

fn failure(code: Code, message: impl Into<Box<str>>) -> Failure {
    Failure::new(code, message)
}

fn is_budget(f: &Failure) -> bool {
    f.code == Code::BudgetExceeded
}

impl<'a> Compiler<'a, '_, '_, '_> {
    /// The counters and the number of diagnostics now.
    fn snapshot(&self) -> Point {
        point(self.budget, &self.block.diagnostics)
    }

    /// Replays a segment of the previous compile (see [`Reuse::replay`]).
    fn replay(&mut self, segment: &Segment, node: Option<&Node>) -> Result<(), Failure> {
        let cap = self.sink.cap;
        let diagnostics = &mut self.block.diagnostics;
        self.reuse
            .replay(self.budget, diagnostics, cap, segment, node)
    }

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
        let query = |d: &'a Decl| match &d.value {
            DeclValue::Expr(e @ Expr::Call { name, .. }) if name == "Query" => Some(e),
            _ => None,
        };
        let empty = Record::default();
        for decl in self.decls.iter().filter(|d| query(d).is_none()) {
            let result = match &decl.value {
                #[cfg(feature = "speedups")]
                DeclValue::Literal(literal) => literal.evaluate(self.budget),
                DeclValue::Expr(expr) if expr.is_constant() => evaluate(expr, &empty, self.budget),
                DeclValue::Expr(_) => Err(failure(
                    Code::InvalidDefault,
                    format!("The default of `{}` must be a literal.", decl.name),
                )),
            };
            match result {
                Ok(v) => {
                    self.block.defaults.insert(decl.name.clone(), v);
                }
                Err(f) if is_budget(&f) => return Err(f),
                Err(f) => self.declaration_diag(f, len16),
            }
        }
        for decl in self.decls {
            let Some(expr) = query(decl) else {
                continue;
            };
            match self.query(expr) {
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

    fn node(
        &mut self,
        idx: usize,
        depth: u64,
        parent: Option<Parent<'a>>,
    ) -> Result<Node, Failure> {
        // A tag open at the parser's mark: record its compile for this compile's checkpoint.
        let level = self
            .reuse
            .tag_starts(idx, || point(self.budget, &self.block.diagnostics));
        let syn = &self.syntax.nodes[idx];
        let map = self.sink.map;
        // A tag restored from the previous compile's checkpoint (always empty in a fresh
        // compile): while incomplete, its own compile is replayed.
        let mut restored = self.reuse.take_restored(idx);
        let replayed = !syn.complete && matches!(&restored, Some(r) if r.own.is_some());
        if !replayed {
            self.budget.depth(depth)?;
        }
        let mut node = Node {
            id: self.sink.node_id(syn.start),
            kind: Cow::Borrowed(""),
            props: Props::new(),
            expressions: PropMap::new(),
            bindings: PropMap::new(),
            children: Vec::new(),
            complete: syn.complete,
            fallback: String::new(),
            error: None,
            start: map.utf16(syn.start) as u32,
            end: map.utf16(syn.end) as u32,
            bytes: TextRange::new(syn.start as u32, syn.end as u32),
        };
        // The values of the node's expressions in the defaults; with `node.props`, what
        // the fallback text reads.
        let mut evaluated = Props::new();
        let (name, component) = if replayed
            && let (Some(r), SynKind::Tag { name, .. }) = (&mut restored, &syn.kind)
            && let Some((segment, values)) = r.own.take()
        {
            let shell = &mut r.node;
            node.kind = std::mem::take(&mut shell.kind);
            node.props = std::mem::take(&mut shell.props);
            node.expressions = std::mem::take(&mut shell.expressions);
            node.bindings = std::mem::take(&mut shell.bindings);
            node.error = shell.error;
            self.replay(&segment, Some(&node))?;
            evaluated = values;
            (*name, catalog::lookup(name))
        } else {
            match self.own(&mut node, &mut evaluated, syn, parent, level.is_some())? {
                Some(tag) => tag,
                None => return Ok(node),
            }
        };
        let child_parent = match component {
            Some(c) if c.is_pass_through() => parent,
            _ => Some(Parent { name, component }),
        };
        if let Some(l) = level {
            let point = self.snapshot();
            self.reuse.children_start(l, !syn.complete, point);
        }
        if let Some(r) = restored {
            self.replay(&r.children, None)?;
            node.children = r.finished;
        }
        self.children(&mut node, syn, level, depth, child_parent)?;
        node.fallback = self.fallback(&node, name, &evaluated, syn);
        if let Some(l) = level
            && !syn.complete
        {
            self.reuse.incomplete_tag(l, evaluated);
        }
        Ok(node)
    }

    /// Compiles the children of `syn` after those `node` already holds (reused from the
    /// previous compile), recording where they reach the mark when `syn` is the open tag at
    /// `level`.
    fn children(
        &mut self,
        node: &mut Node,
        syn: &'a SynNode<'a>,
        level: Option<usize>,
        depth: u64,
        parent: Option<Parent<'a>>,
    ) -> Result<(), Failure> {
        match node.children.is_empty() {
            true => node.children.reserve_exact(syn.children.len()),
            // Reused children: the previous vector, which grows a little at every compile.
            false => node.children.reserve(syn.children.len()),
        }
        for (i, &child) in syn.children.iter().enumerate() {
            if let Some(l) = level {
                let diagnostics = &self.block.diagnostics;
                self.reuse
                    .child_reaches(l, i, || point(self.budget, diagnostics));
            }
            let compiled = self.node(child, depth + 1, parent)?;
            node.children.push(compiled);
        }
        if let Some(l) = level {
            let end = syn.children.len();
            let diagnostics = &self.block.diagnostics;
            self.reuse
                .child_reaches(l, end, || point(self.budget, diagnostics));
        }
        Ok(())
    }

    /// The fallback of the tag `name` (§7.2) from its props, the values of its expressions
    /// in the defaults and its children's fallbacks; when blank, its source text, cut. A
    /// value evaluated wins over a constant of the same name: the two meet only in an
    /// `Image generated="latest"` whose `attachment` is an expression, where the constant is
    /// the latest attachment put in by the compiler, and the expression is what evaluation
    /// will show (as the schema check of [`Compiler::check_props`] reads them too).
    fn fallback(&self, node: &Node, name: &str, evaluated: &Props, syn: &SynNode<'_>) -> String {
        let props = &node.props;
        let fallback = node_fallback_with(
            name,
            |key| evaluated.get(key).or_else(|| props.get(key)),
            fallbacks(&node.children),
        );
        if !is_blank(&fallback) {
            return fallback;
        }
        let raw = &self.source[syn.start..syn.end];
        let cap = self.options.reply_limits.node_source_fallback() as usize;
        truncate_utf16(raw, cap).to_owned()
    }

    /// §12.2 steps 2–4 for `syn` into `node` (whose depth is charged) and `evaluated`:
    /// `None` for a text node, which is then finished; a tag's name and component.
    #[inline]
    fn own(
        &mut self,
        node: &mut Node,
        evaluated: &mut Props,
        syn: &'a SynNode<'a>,
        parent: Option<Parent<'a>>,
        at_mark: bool,
    ) -> Result<Option<(&'a str, Option<&'static Component>)>, Failure> {
        let (name, props) = match &syn.kind {
            SynKind::Text(text) => {
                node.kind = Cow::Borrowed(TEXT_TYPE);
                node.props = Props::with_entry("text", Value::from(*text));
                node.fallback = (*text).to_owned();
                return Ok(None);
            }
            SynKind::TextExpr(expr) => {
                node.kind = Cow::Borrowed(TEXT_TYPE);
                match expr {
                    Some(expr) => {
                        node.expressions = PropMap::with_entry("text", expr.clone());
                        node.fallback = match evaluate(expr, &self.block.defaults, self.budget) {
                            Ok(v) => v.plain_text(),
                            Err(f) if is_budget(&f) => return Err(f),
                            Err(_) => String::new(),
                        };
                    }
                    None => {
                        node.props = Props::with_entry("text", Value::from(""));
                    }
                }
                return Ok(None);
            }
            SynKind::Tag { name, props } => (*name, props.clone()),
        };
        let component = catalog::lookup(name);
        node.kind = match component {
            Some(c) => Cow::Borrowed(c.name()),
            None => Cow::Owned(name.to_owned()),
        };
        let guarded = self.component(node, component, props, parent, evaluated, at_mark);
        match guarded {
            Ok(()) => {}
            Err(f) if is_budget(&f) => return Err(f),
            Err(f) => {
                node.error = Some(f.code);
                self.node_diag(node, f);
            }
        }
        Ok(Some((name, component)))
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

    /// Steps 4a–4g of §12.2, inside the failure guard. Kept out of line: inlined into
    /// `node`, it loses the inlining of the map inserts inside it.
    #[inline(never)]
    fn component(
        &mut self,
        node: &mut Node,
        component: Option<&'static Component>,
        props: Range<usize>,
        parent: Option<Parent<'a>>,
        evaluated: &mut Props,
        at_mark: bool,
    ) -> Result<(), Failure> {
        let Some(component) = component else {
            return Err(failure(
                Code::UnknownComponent,
                unknown_component(&node.kind),
            ));
        };
        check_placement(component, parent)?;
        let (mut accepted, required) = self.read_props(node, component, props, at_mark)?;
        let name = component.name();
        if name == "Image"
            && node.props.get("generated").and_then(Value::as_str) == Some("latest")
            && let Some(latest) = &self.options.latest_attachment
        {
            node.props.shift_remove("generated");
            node.props
                .insert("attachment", Value::from(latest.as_str()));
            accepted = false;
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
        self.check_props(node, component, evaluated, accepted, required)
    }

    /// Sorts the props `props` of the tag into `node`: the action, constant props (folded),
    /// expressions and bindings; a prop the component lacks is dropped with a diagnostic.
    /// Answers whether every constant prop has its spec's shape, and how many of them are
    /// required: with no expressions, the schema check then needs no second walk.
    fn read_props(
        &mut self,
        node: &mut Node,
        component: &'static Component,
        props: Range<usize>,
        at_mark: bool,
    ) -> Result<(bool, usize), Failure> {
        let name = component.name();
        let empty = Record::default();
        // (Empty until now, so made at its size rather than grown.)
        node.props = Props::with_capacity(props.len());
        // Only the props of the tags open at the parser's mark are read again (they go into
        // the checkpoint); the others are moved rather than copied.
        let moved = !at_mark;
        let mut accepted = true;
        let mut required = 0;
        for i in props {
            let prop = self.props[i].name(self.source);
            let expr = match moved {
                true => self.props[i].value.take(),
                false => self.props[i].value.clone(),
            };
            // (Every value is there: each tag's props are compiled once.)
            let expr = match expr {
                Some(expr) => expr,
                None => Expr::Literal(Value::Null),
            };
            // (Keys are the catalog's names, so that the maps borrow them.)
            if let Some(action) = component.action()
                && action == prop
            {
                self.check_action(&expr)?;
                node.expressions.insert(action, expr);
            } else if let Some(spec) = component.prop(prop) {
                let key = spec.name();
                if expr.is_constant() {
                    let v = evaluate_owned(expr, &empty, self.budget)?;
                    if accepted {
                        accepted = spec.accepts(&v);
                        required += usize::from(spec.required());
                    }
                    node.props.insert(key, v);
                } else {
                    if component.binding() == Some(key)
                        && let Some(reference) = expr.as_reference()
                        && self.is_local_state(reference)
                    {
                        node.bindings.insert(key, reference.to_owned());
                    }
                    node.expressions.insert(key, expr);
                }
            } else {
                let f = failure(
                    Code::RefusedProp,
                    format!("`{name}` has no prop `{prop}`; it was dropped."),
                );
                self.node_diag(node, f);
            }
        }
        Ok((accepted, required))
    }

    /// Evaluates the node's expressions (but its action) in the defaults into `evaluated`
    /// and, when they all resolve on a complete node, checks the props against the
    /// component's schema (`accepted` and `required` as [`Compiler::read_props`] answers).
    fn check_props(
        &mut self,
        node: &Node,
        component: &'static Component,
        evaluated: &mut Props,
        accepted: bool,
        required: usize,
    ) -> Result<(), Failure> {
        let mut resolved = true;
        for (prop, expr) in node.expressions.as_slice() {
            if component.action() == Some(prop) {
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
                if !(accepted && component.passes_accepted(&node.props, required)) {
                    validate(component, &node.props)?;
                }
            } else {
                let mut checked = node.props.clone();
                checked.extend(evaluated.as_slice().iter().cloned());
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

/// The placement rules of §12.2: the parent a component requires, and the children its
/// effective parent allows.
/// The message of a tag `kind` the catalog does not have, naming the component it is
/// closest to when one is a typo away (`Sumary`, `summary`).
#[cold]
fn unknown_component(kind: &str) -> String {
    let mut message = format!("`{kind}` is not a component of the catalog.");
    let names = ui_core::catalog::components().iter().map(Component::name);
    if let Some(near) = crate::lint::suggest_name(kind, names) {
        message.push_str(&format!(" Did you mean `{near}`?"));
    }
    message
}

fn check_placement(component: &Component, parent: Option<Parent<'_>>) -> Result<(), Failure> {
    let name = component.name();
    if let Some(required) = component.parent()
        && parent.map(|p| p.name) != Some(required)
    {
        return Err(failure(
            Code::InvalidParent,
            format!("`{name}` must stand inside `{required}`."),
        ));
    }
    if let Some(parent_component) = parent.and_then(|p| p.component)
        && let Some(allowed) = parent_component.children()
        && !allowed.contains(&name)
        && !component.is_pass_through()
    {
        return Err(failure(
            Code::InvalidChild,
            format!("`{}` cannot hold `{name}`.", parent_component.name()),
        ));
    }
    Ok(())
}

fn validate(component: &Component, props: &Props) -> Result<(), Failure> {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ui_core::FrozenClock;

    use super::*;

    static CLOCK: FrozenClock = FrozenClock(0.0);

    #[test]
    fn trimmed_drops_js_whitespace_at_both_ends_only() {
        for text in [
            "",
            " ",
            "a",
            " a ",
            "\n\u{a0}a b\u{2028}\t",
            "\u{feff}é x\n",
            "a \n",
        ] {
            assert_eq!(trimmed(text.to_owned()), trim_js(text), "{text:?}");
        }
    }

    fn options(limits: UiLimits) -> CompileOptions<'static> {
        CompileOptions {
            limits,
            clock: Some(&CLOCK),
            ..CompileOptions::default()
        }
    }

    /// Compiles `source` resuming from `previous` (a source, its block and checkpoint),
    /// checks the result against a fresh compile, and returns it with its checkpoint.
    fn resume(
        source: &str,
        options: &CompileOptions<'_>,
        previous: Option<(&str, &mut Arc<Block>, Box<Checkpoint>)>,
    ) -> (Block, Option<Box<Checkpoint>>) {
        let previous = previous.map(|(source, block, checkpoint)| Previous {
            source,
            block,
            checkpoint,
        });
        let job = BlockJob {
            id: "b".to_owned(),
            complete: options.is_final,
            clock: &CLOCK,
            previous,
            keep: true,
        };
        let (block, checkpoint) = compile_block_with(source, options, job);
        assert_eq!(block, compile_block(source, "b", options), "{source:?}");
        (block, checkpoint)
    }

    #[test]
    fn a_resumed_compile_reuses_the_finished_nodes_of_open_tags() {
        let options = options(UiLimits::DEFAULT);
        let first = "$n = 2\n<Stats><Stat label=\"a\" value={$n}/><Stat label=\"b\" val";
        let (block, checkpoint) = resume(first, &options, None);
        let checkpoint = checkpoint.expect("a checkpoint");
        // The mark is the second `<Stat`, inside the open `<Stats>` with one finished child.
        assert_eq!(checkpoint.top, 0);
        assert_eq!(checkpoint.open.len(), 1);
        assert_eq!(checkpoint.open[0].tag.children, 1);
        assert!(checkpoint.open[0].own.is_some());
        let second = "$n = 2\n<Stats><Stat label=\"a\" value={$n}/><Stat label=\"b\" value={3}/>";
        // A shared previous block is cloned from and keeps its nodes.
        let mut shared = Arc::new(block);
        let keep = Arc::clone(&shared);
        let (_, left) = resume(second, &options, Some((first, &mut shared, checkpoint)));
        assert_eq!(keep.node_count(), 3);
        // A block nobody else holds gives its nodes away.
        drop(keep);
        let (block, checkpoint) = resume(second, &options, None);
        assert_eq!(
            left.as_ref().map(|c| c.at),
            checkpoint.as_ref().map(|c| c.at)
        );
        let mut unique = Arc::new(block);
        let third = format!("{second}</Stats>\n<Summary>x</Summary>");
        resume(
            &third,
            &options,
            Some((second, &mut unique, checkpoint.unwrap())),
        );
        assert!(unique.nodes.is_empty());
    }

    #[test]
    fn a_checkpoint_applies_only_to_the_same_prefix_and_options() {
        let options = options(UiLimits::DEFAULT);
        let first = "<Stats><Stat label=\"a\" value={1}/><Stat";
        let (_, checkpoint) = resume(first, &options, None);
        let checkpoint = checkpoint.unwrap();
        assert!(checkpoint.applies(first, first, "b", "b", &options));
        assert!(!checkpoint.applies(first, first, "b", "c", &options));
        let changed = "<Stats><Stat label=\"A\" value={1}/><Stat";
        assert!(!checkpoint.applies(changed, first, "b", "b", &options));
        let mut other = options.clone();
        other.latest_attachment = Some("x".to_owned());
        assert!(!checkpoint.applies(first, first, "b", "b", &other));
        other = options.clone();
        other.limits = UiLimits::DEFAULT.with("steps", 19_999).unwrap();
        assert!(!checkpoint.applies(first, first, "b", "b", &other));
        // The source must go on past the mark.
        assert!(!checkpoint.applies(&first[..checkpoint.at], first, "b", "b", &options));
    }

    /// The smallest `key` limit under which `source` compiles without a budget failure.
    fn smallest_limit(source: &str, key: &str) -> u64 {
        let fits = |n: u64| {
            let limits = UiLimits::DEFAULT.with(key, n).unwrap();
            let block = compile_block(source, "b", &options(limits));
            !block
                .diagnostics
                .iter()
                .any(|d| d.code == Code::BudgetExceeded)
        };
        let (mut lo, mut hi) = (1, 1 << 20);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if fits(mid) { hi = mid } else { lo = mid + 1 }
        }
        lo
    }

    #[test]
    fn a_lump_that_does_not_fit_starts_the_compile_over() {
        // The text expressions copy the defaults: their compile is the bulk of the work. The
        // checks against fresh compiles are in `resume`.
        let first = "$d = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n{$d}{$d}{$d}\nab";
        let second = format!("{first}cdefghij");
        for key in ["steps", "iterations"] {
            let limit = smallest_limit(first, key);
            let options = options(UiLimits::DEFAULT.with(key, limit).unwrap());
            let (block, checkpoint) = resume(first, &options, None);
            assert!(
                block.diagnostics.is_empty(),
                "{key}: {:?}",
                block.diagnostics
            );
            let checkpoint = checkpoint.unwrap();
            assert_eq!(checkpoint.top, 3);
            let mut previous = Arc::new(block);
            // The longer text costs more to parse, so the reused nodes no longer fit.
            if key == "steps" {
                let map = Utf16Map::new(&second);
                let sink = DiagSink {
                    block_id: "b",
                    map: &map,
                    cap: 20,
                    paths: Paths::DEFAULT,
                };
                let mut budget = Budget::new(options.limits, &CLOCK);
                let mut block = compile_block("", "b", &options);
                let previous = Previous {
                    source: first,
                    block: &mut Arc::clone(&previous),
                    checkpoint: resume(first, &options, None).1.unwrap(),
                };
                let outcome = compile_body(
                    &second,
                    &options,
                    &mut budget,
                    &sink,
                    &mut block,
                    Some(previous),
                    true,
                );
                assert!(matches!(outcome, Ok(Outcome::Restart)));
            }
            let (block, _) = resume(&second, &options, Some((first, &mut previous, checkpoint)));
            // Parsing charges no iterations: under that limit the longer text still fits.
            let failed = block
                .diagnostics
                .iter()
                .any(|d| d.code == Code::BudgetExceeded);
            assert_eq!(failed, key == "steps");
        }
    }

    #[test]
    fn replayed_diagnostics_keep_the_cap() {
        let options = options(UiLimits::DEFAULT.with("diagnostics", 3).unwrap());
        let first = "<Foo/><Bar/>x";
        let (block, checkpoint) = resume(first, &options, None);
        assert_eq!(block.diagnostics.len(), 2);
        let checkpoint = checkpoint.unwrap();
        // Two parser diagnostics now come first: one of the replayed ones still fits.
        let second = "<Foo/><Bar/>x< \n< \n";
        let (block, left) = resume(
            second,
            &options,
            Some((first, &mut Arc::new(block), checkpoint)),
        );
        let codes: Vec<Code> = block.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(
            codes,
            [Code::InvalidTag, Code::InvalidTag, Code::UnknownComponent]
        );
        // A diagnostic was dropped before the mark: no checkpoint.
        assert!(left.is_none());
    }

    #[test]
    fn an_open_tags_own_diagnostics_follow_its_end() {
        let options = options(UiLimits::DEFAULT);
        let first = "<Stats nope=\"1\"><Stat label=\"a\" value={1}/><Stat";
        let (block, checkpoint) = resume(first, &options, None);
        assert_eq!(block.diagnostics[0].code, Code::RefusedProp);
        let second = "<Stats nope=\"1\"><Stat label=\"a\" value={1}/><Stat label=\"b\" value={2}/>";
        let (block, _) = resume(
            second,
            &options,
            Some((first, &mut Arc::new(block), checkpoint.unwrap())),
        );
        assert_eq!(block.diagnostics[0].range.end as usize, second.len());
    }

    #[cfg(feature = "speedups")]
    /// What a compile leaves, for comparisons.
    struct Counted {
        /// The outcome (failure, or the checkpoint's mark and charges) and the block as
        /// JSON.
        text: String,
        /// The budget's counters at the end.
        charges: Charges,
        checkpoint: Option<Box<Checkpoint>>,
        block: Block,
    }

    #[cfg(feature = "speedups")]
    /// Compiles `source` (resuming from `previous` when given, as a final compile, else as
    /// a preview) through the given paths.
    fn compile_counted(
        source: &str,
        limits: UiLimits,
        previous: Option<(&str, &mut Arc<Block>, Box<Checkpoint>)>,
        paths: Paths,
    ) -> Counted {
        let options = CompileOptions {
            is_final: previous.is_some(),
            ..options(limits)
        };
        let map = Utf16Map::new(source);
        let sink = DiagSink {
            block_id: "b",
            map: &map,
            cap: limits.diagnostics() as usize,
            paths,
        };
        let mut budget = Budget::new(limits, &CLOCK);
        let mut block = compile_block("", "b", &options);
        block.complete = options.is_final;
        block.end = utf16_len(source) as u32;
        let previous = previous.map(|(source, block, checkpoint)| Previous {
            source,
            block,
            checkpoint,
        });
        let outcome = compile_body(
            source,
            &options,
            &mut budget,
            &sink,
            &mut block,
            previous,
            true,
        );
        let (outcome, checkpoint) = match outcome {
            Ok(Outcome::Done(checkpoint)) => {
                let summary = checkpoint
                    .as_ref()
                    .map(|c| (c.at, c.parse, c.top, c.top_segment.charges));
                (format!("{summary:?}"), checkpoint)
            }
            Ok(Outcome::Restart) => ("restart".to_owned(), None),
            Err(f) => (format!("{f:?}"), None),
        };
        Counted {
            text: format!("{outcome} {}", serde_json::to_string(&block).unwrap()),
            charges: Charges::of(&budget),
            checkpoint,
            block,
        }
    }

    #[cfg(feature = "speedups")]
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A block whose declarations are literals, and whose props are plain strings and
        /// integers, compiles through the fast paths exactly as through the full parser and
        /// evaluator: the same block, failure, counters and checkpoint, also when it resumes
        /// from the checkpoint of a shorter preview, under limits tight enough to fail
        /// anywhere.
        #[test]
        fn literal_declarations_compile_as_the_full_path(
            x in crate::speedups::literal::tests::source(),
            y in crate::speedups::literal::tests::literal(),
            body in proptest::sample::select(vec![
                "",
                "{$x}",
                "<Summary>{$y}</Summary>",
                "{@Count($x)} of {$y}\n<Summary>ab</Summary>",
                "<Stats><Stat label=\"a b\" value={12} unit='ms'/>\n<Stat label=\"é\\\"😀\" value={007} unit=\"\"/></Stats>",
                "<Progress value={1234567890123456}/><Progress value={1}/><Tag tone=\"nope\">t</Tag>",
                "<Stat label='x' value={ 3} unit={4}/><Stat label=\"\" value={-2}/>",
            ]),
            cut in 0usize..40,
            limits in crate::speedups::literal::tests::limits(),
        ) {
            let source = format!("$x = {x}\n$y = {y}\n{body}<Summary>done</Summary>");
            let fast = compile_counted(&source, limits, None, Paths::Fast);
            let full = compile_counted(&source, limits, None, Paths::General);
            proptest::prop_assert_eq!(&fast.text, &full.text);
            proptest::prop_assert_eq!(fast.charges, full.charges);
            // A preview cut short, then the whole block resumed from its checkpoint.
            let mut end = source.len().saturating_sub(cut);
            while !source.is_char_boundary(end) {
                end -= 1;
            }
            let preview = &source[..end];
            let fast = compile_counted(preview, limits, None, Paths::Fast);
            let full = compile_counted(preview, limits, None, Paths::General);
            proptest::prop_assert_eq!(&fast.text, &full.text);
            if let (Some(a), Some(b)) = (fast.checkpoint, full.checkpoint) {
                let fast = compile_counted(&source, limits, Some((preview, &mut Arc::new(fast.block), a)), Paths::Fast);
                let full = compile_counted(&source, limits, Some((preview, &mut Arc::new(full.block), b)), Paths::General);
                proptest::prop_assert_eq!(&fast.text, &full.text);
                proptest::prop_assert_eq!(fast.charges, full.charges);
            }
        }
    }
}
