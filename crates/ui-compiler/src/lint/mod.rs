//! Lints: warnings about mistakes the language lets through (`$nope` renders as nothing, a
//! switch nobody can name, an image without a description, …), computed from a compiled
//! [`Block`] and its source.
//!
//! The pass is pure and separate from the compile: it never changes a block's diagnostics,
//! which stay exactly the reference's. Every finding is a [`Lint`] with a stable
//! [`LintCode`], a range in UTF-16 units and in bytes of the block source (like a
//! [`Diagnostic`](ui_core::Diagnostic)), a message for people and, where the correction is
//! mechanical, a [`LintFix`].
//!
//! ```
//! use ui_compiler::{CompileOptions, LintCode, LintOptions, compile_block, lint_block};
//!
//! let source = "$rows = [{name: \"a\"}]\n<Summary>{$rowz}</Summary>\n";
//! let options = CompileOptions { is_final: true, ..CompileOptions::default() };
//! let block = compile_block(source, "b", &options);
//! assert!(block.diagnostics.is_empty());
//! let lints = lint_block(&block, source, &LintOptions::default());
//! // In source order: `$rows` is never read, and `$rowz` is a typo for it.
//! assert_eq!(lints[0].code, LintCode::UnusedDeclaration);
//! assert_eq!(lints[1].code, LintCode::UndeclaredReference);
//! assert_eq!(lints[1].fix.as_ref().unwrap().text, "$rows");
//! ```

mod scan;

use std::collections::HashSet;
use std::ops::Range;

use serde::Serialize;
use ui_core::text::{Utf16Map, is_blank, utf16_len};
use ui_core::{TextRange, Value};

use crate::block::{Block, Node};
use crate::expr::Expr;
use scan::{Declaration, closest, declarations, name_tokens, tag_props};

/// The stable code of a lint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LintCode {
    /// An expression reads a name that is not declared, not a query and not a local in scope.
    UndeclaredReference,
    /// A declared state variable or query that nothing reads or binds.
    UnusedDeclaration,
    /// A control with no visible text label.
    UnlabelledControl,
    /// An `Image` with neither `alt` nor a caption.
    MissingAlt,
    /// A `Show` whose `when` is a literal.
    ConstantCondition,
    /// A `Column` whose `key` is in none of the known rows.
    UnknownColumn,
    /// A `Segmented` or `Checklist` whose value (its literal, or the default of the
    /// variable it binds) is none of the values its `Option`s or `Item`s offer.
    UnknownOption,
    /// An `Option` of a bound `Segmented` whose value is of another kind than the bound
    /// variable's default (text against `null`, say): picking it always fails, since a
    /// variable keeps the kind of its default.
    UnpickableOption,
}

impl LintCode {
    /// Every code, in the order of the documentation.
    pub const ALL: [LintCode; 8] = [
        LintCode::UndeclaredReference,
        LintCode::UnusedDeclaration,
        LintCode::UnlabelledControl,
        LintCode::MissingAlt,
        LintCode::ConstantCondition,
        LintCode::UnknownColumn,
        LintCode::UnknownOption,
        LintCode::UnpickableOption,
    ];

    /// The code as written in output (`undeclared_reference`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            LintCode::UndeclaredReference => "undeclared_reference",
            LintCode::UnusedDeclaration => "unused_declaration",
            LintCode::UnlabelledControl => "unlabelled_control",
            LintCode::MissingAlt => "missing_alt",
            LintCode::ConstantCondition => "constant_condition",
            LintCode::UnknownColumn => "unknown_column",
            LintCode::UnknownOption => "unknown_option",
            LintCode::UnpickableOption => "unpickable_option",
        }
    }
}

impl std::fmt::Display for LintCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mechanical correction: replace `[start, end)` of the block source by `text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintFix {
    /// First UTF-16 offset replaced.
    pub start: u32,
    /// UTF-16 offset just past the replaced text.
    pub end: u32,
    /// The same range in bytes of the block source (never serialised).
    #[serde(skip)]
    pub bytes: TextRange,
    /// The replacement.
    pub text: String,
}

/// One warning about a block.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lint {
    /// The stable code.
    pub code: LintCode,
    /// Text for people.
    pub message: String,
    /// The range in UTF-16 units of the block source.
    #[serde(flatten)]
    pub range: TextRange,
    /// The same range in bytes of the block source (never serialised).
    #[serde(skip)]
    pub bytes: TextRange,
    /// The node the finding is about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// The suggested replacement, when mechanical.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<LintFix>,
}

/// The result fields a query source is known to return, for `unknown_column`.
pub trait QueryFields {
    /// The field names of `source`'s rows, or `None` when unknown.
    fn fields(&self, source: &str) -> Option<Vec<String>>;
}

/// Options of [`lint_block`].
#[derive(Clone, Copy, Default)]
pub struct LintOptions<'a> {
    /// The result fields of the host's query sources, when known.
    pub query_fields: Option<&'a dyn QueryFields>,
}

impl std::fmt::Debug for LintOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LintOptions")
            .field("query_fields", &self.query_fields.is_some())
            .finish()
    }
}

/// The controls that need a visible text label.
const LABELLED_CONTROLS: [&str; 5] = ["Switch", "Slider", "Checklist", "Segmented", "Button"];

/// The largest edit distance at which a name is suggested.
const SUGGEST_DISTANCE: usize = 2;

/// The `@Query` declarations of the block body `source`, in order: the bytes of each one
/// (from `$name` to the end of its value) and the source it names, as written between its
/// quotes. The compile reports a query's diagnostics (`unknown_query`, `invalid_query`)
/// over the whole block, as the wire has them; this is what a tool needs to point at the
/// declaration instead.
///
/// ```
/// let source = "$a = 1\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n<Summary/>";
/// let queries = ui_compiler::query_declarations(source);
/// assert_eq!(queries.len(), 1);
/// assert_eq!(queries[0].1, "ci.runs");
/// assert!(source[queries[0].0.clone()].starts_with("$runs = @Query("));
/// ```
pub fn query_declarations(source: &str) -> Vec<(Range<usize>, &str)> {
    declarations(source)
        .into_iter()
        .filter(|d| d.is_query(source))
        .filter_map(|d| {
            let value = source[d.value_bytes.clone()].trim_start();
            let args = value
                .strip_prefix("@Query")?
                .trim_start()
                .strip_prefix('(')?;
            let quoted = args.trim_start().strip_prefix('"')?;
            let name = &quoted[..quoted.find('"')?];
            Some((d.name_bytes.start..d.value_bytes.end, name))
        })
        .collect()
}

/// The name among `candidates` a typo away from `name` (at most two edits), as the lints
/// suggest one; `None` when none is that close.
pub fn suggest_name<'c>(
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    closest(name, candidates, SUGGEST_DISTANCE)
}

/// Lints `block`, compiled from `source` (the block source its byte ranges refer to), and
/// returns the findings in source order. A block that failed as a whole (one diagnostic over
/// the whole source, nothing else left of it) has none.
pub fn lint_block(block: &Block, source: &str, options: &LintOptions<'_>) -> Vec<Lint> {
    if failed_whole(block, source) {
        return Vec::new();
    }
    let decls = declarations(source);
    let mut seen = HashSet::new();
    let decls: Vec<Declaration<'_>> = decls.into_iter().filter(|d| seen.insert(d.name)).collect();
    let mut linter = Linter {
        block,
        source,
        map: Utf16Map::new(source),
        decls,
        used: HashSet::new(),
        out: Vec::new(),
        options,
    };
    let mut locals = Vec::new();
    for node in &block.nodes {
        linter.visit(node, &mut locals);
    }
    let body = linter.decls.last().map_or(0, |d| d.line_bytes.end);
    linter.gaps(body, source.len(), &block.nodes);
    linter.declaration_reads();
    if block.complete {
        linter.unused();
    }
    let mut out = linter.out;
    out.sort_by_key(|l| (l.bytes.start, l.bytes.end));
    out
}

struct Linter<'a> {
    block: &'a Block,
    source: &'a str,
    map: Utf16Map,
    decls: Vec<Declaration<'a>>,
    used: HashSet<String>,
    out: Vec<Lint>,
    options: &'a LintOptions<'a>,
}

/// One reference met while walking an expression: its name and whether it resolves.
struct Met<'e> {
    name: &'e str,
    resolved: bool,
    /// The locals in scope where an unresolved reference was met (for suggestions).
    scope: Vec<&'e str>,
}

impl<'a> Linter<'a> {
    fn is_declared(&self, name: &str) -> bool {
        self.decls.iter().any(|d| d.name == name)
    }

    fn range(&self, bytes: &Range<usize>) -> (TextRange, TextRange) {
        let b = TextRange::new(bytes.start as u32, bytes.end as u32);
        let u = TextRange::new(
            self.map.utf16(bytes.start) as u32,
            self.map.utf16(bytes.end) as u32,
        );
        (u, b)
    }

    fn push(
        &mut self,
        code: LintCode,
        message: String,
        bytes: Range<usize>,
        node: Option<&Node>,
        fix: Option<(Range<usize>, String)>,
    ) {
        let (range, byte_range) = self.range(&bytes);
        let fix = fix.map(|(at, text)| {
            let (r, b) = self.range(&at);
            LintFix {
                start: r.start,
                end: r.end,
                bytes: b,
                text,
            }
        });
        self.out.push(Lint {
            code,
            message,
            range,
            bytes: byte_range,
            node_id: node.map(|n| n.id.clone()),
            fix,
        });
    }

    /// The bytes of a node's opening tag name (`<Switch`).
    fn tag_span(node: &Node) -> Range<usize> {
        let start = node.bytes.start as usize;
        start..(start + 1 + node.kind.len()).min(node.bytes.end as usize)
    }

    /// Where a node's opening tag can end: its first child's start, or its own end.
    fn tag_limit(node: &Node) -> usize {
        node.children
            .first()
            .map_or(node.bytes.end, |c| c.bytes.start) as usize
    }

    fn visit(&mut self, node: &'a Node, locals: &mut Vec<&'a str>) {
        if node.is_text() {
            if let Some(expr) = node.expressions.get("text") {
                let region = node.bytes.start as usize..node.bytes.end as usize;
                self.expression(expr, locals, region, node);
            }
            return;
        }
        let props = tag_props(
            self.source,
            node.bytes.start as usize,
            Self::tag_limit(node),
        );
        let action = ui_core::catalog::lookup(&node.kind).and_then(|c| c.action());
        for (prop, expr) in node.expressions.iter() {
            if Some(prop) == action {
                // An action's target is checked by the compile (`refused_binding`).
                expr.visit_references(&mut |name| {
                    self.used.insert(name.to_owned());
                });
                continue;
            }
            let region = props
                .iter()
                .find(|p| p.name == prop)
                .map_or(node.bytes.start as usize..Self::tag_limit(node), |p| {
                    p.value_bytes.clone()
                });
            self.expression(expr, locals, region, node);
        }
        for name in node.bindings.values() {
            self.used.insert(name.clone());
        }
        // Props the compile did not keep (a node that failed before reading them, a refused
        // action, an unknown prop) still read the names written in them.
        for prop in &props {
            let kept = node.expressions.contains_key(prop.name)
                || node.props.contains_key(prop.name)
                || node.bindings.contains_key(prop.name);
            if !kept && self.source[prop.value_bytes.clone()].starts_with('{') {
                self.written(
                    prop.value_bytes.clone(),
                    Some(prop.name) != action,
                    Some(node),
                );
            }
        }
        if node.kind != "CodeBlock" {
            let content = props
                .last()
                .map_or(Self::tag_span(node).end, |p| p.value_bytes.end);
            self.gaps(content, node.bytes.end as usize, &node.children);
        }
        // A node still being written may get its label yet (in a final block, one left
        // unclosed will not); a failed one is linted as written, so one reply fixes both.
        if node.complete || self.block.complete {
            self.component(node, &props);
        }
        let local = (node.kind == "Each")
            .then(|| node.props.get("as").and_then(Value::as_str))
            .flatten();
        if let Some(local) = local {
            locals.push(local);
        }
        for child in &node.children {
            self.visit(child, locals);
        }
        if local.is_some() {
            locals.pop();
        }
    }

    /// Reads the expressions written in `[from, to)` outside `children`: a text expression the
    /// compile dropped (`{$x +}`, which failed to parse) still reads its names.
    fn gaps(&mut self, from: usize, to: usize, children: &[Node]) {
        let mut at = from;
        for child in children {
            let start = child.bytes.start as usize;
            if start > at {
                self.braces(at..start);
            }
            at = at.max(child.bytes.end as usize);
        }
        if to > at {
            self.braces(at..to);
        }
    }

    /// Every balanced `{…}` in `region` (text, where quotes are plain characters).
    fn braces(&mut self, region: Range<usize>) {
        let bytes = self.source.as_bytes();
        let mut at = region.start;
        while let Some(i) = bytes[at..region.end].iter().position(|&b| b == b'{') {
            let open = at + i;
            let close = scan::balanced_end(&bytes[..region.end], open);
            self.written(open..close, true, None);
            at = close.max(open + 1);
        }
    }

    /// The `$names` of expression text that the compile did not keep: declared ones are
    /// used; the others are reported when `report`, with a suggestion.
    fn written(&mut self, region: Range<usize>, report: bool, node: Option<&Node>) {
        for (at, name) in scan::reference_tokens(self.source, region) {
            if !name.starts_with('$') {
                continue;
            }
            if self.is_declared(name) {
                self.used.insert(name.to_owned());
            } else if report {
                self.undeclared(name, at, &[], node);
            }
        }
    }

    /// Lints the references of `expr`, written in `region` of the source.
    fn expression(
        &mut self,
        expr: &'a Expr,
        locals: &mut Vec<&'a str>,
        region: Range<usize>,
        node: &Node,
    ) {
        let mut met = Vec::new();
        walk(expr, locals, &mut met, &|name| self.is_declared(name));
        let mut names: Vec<&str> = met.iter().filter(|m| !m.resolved).map(|m| m.name).collect();
        names.dedup();
        let mut done = HashSet::new();
        for m in &met {
            if m.resolved {
                self.used.insert(m.name.to_owned());
            }
        }
        for name in names {
            if !done.insert(name) {
                continue;
            }
            let tokens = name_tokens(self.source, region.clone(), name);
            for (index, m) in met.iter().filter(|m| m.name == name).enumerate() {
                if m.resolved {
                    continue;
                }
                let at = tokens.get(index).cloned().unwrap_or_else(|| region.clone());
                self.undeclared(name, at, &m.scope, Some(node));
            }
        }
    }

    /// Reports `name`, written at `at`, as read but not declared (nor a local of `scope`),
    /// suggesting the closest declared name or local.
    fn undeclared(&mut self, name: &str, at: Range<usize>, scope: &[&str], node: Option<&Node>) {
        let candidates = self
            .decls
            .iter()
            .map(|d| d.name)
            .chain(scope.iter().copied());
        let suggestion = closest(name, candidates, SUGGEST_DISTANCE).map(str::to_owned);
        let what = if name.starts_with('$') {
            "declared in this block"
        } else {
            "a local in scope here"
        };
        let mut message = format!("`{name}` is not {what}, so it reads nothing");
        if let Some(s) = &suggestion {
            message.push_str(&format!("; did you mean `{s}`?"));
        }
        let fix = suggestion.map(|s| (at.clone(), s));
        self.push(LintCode::UndeclaredReference, message, at, node, fix);
    }

    fn component(&mut self, node: &'a Node, props: &[scan::PropText<'_>]) {
        let kind: &str = &node.kind;
        if LABELLED_CONTROLS.contains(&kind) && !has_text(node) {
            self.push(
                LintCode::UnlabelledControl,
                format!("This {kind} has no text label, so a screen reader has nothing to announce; put its label between the tags"),
                Self::tag_span(node),
                Some(node),
                None,
            );
        }
        if kind == "Image"
            && !props.iter().any(|p| p.name == "alt")
            && !node.props.contains_key("alt")
            && !node.expressions.contains_key("alt")
            && !has_text(node)
        {
            self.push(
                LintCode::MissingAlt,
                "This Image has neither `alt` nor a caption, so people who cannot see it get no description".to_owned(),
                Self::tag_span(node),
                Some(node),
                None,
            );
        }
        if kind == "Show"
            && let Some(when) = node.props.get("when").and_then(Value::as_bool)
        {
            let at = props
                .iter()
                .find(|p| p.name == "when")
                .map_or_else(|| Self::tag_span(node), |p| p.value_bytes.clone());
            let message = if when {
                "This Show's condition is the literal `true`: its children are always shown"
            } else {
                "This Show's condition is the literal `false`: its children are never shown"
            };
            self.push(
                LintCode::ConstantCondition,
                message.to_owned(),
                at,
                Some(node),
                None,
            );
        }
        if matches!(kind, "Segmented" | "Checklist") {
            self.offered(node, props);
        }
        if kind == "Table"
            && let Some(fields) = self.row_fields(node)
        {
            let mut columns = Vec::new();
            collect_columns(&node.children, &mut columns);
            for column in columns {
                self.column(column, &fields);
            }
        }
    }

    /// `unknown_option`: a Segmented (or Checklist) whose value, as the block starts, is
    /// none of the values its Options (Items) offer. Nothing is said when the offered values
    /// are not all constants written as its direct children (an Option in Each or Show, a
    /// computed value) or when the value itself is computed: only what the block shows
    /// before anyone acts is judged. A person can never pick such a value back, and a host
    /// refuses a Choice sent while the control holds it (no visible control offers it).
    fn offered(&mut self, node: &Node, props: &[scan::PropText<'_>]) {
        let child = if node.kind == "Segmented" {
            "Option"
        } else {
            "Item"
        };
        let mut offered = Vec::new();
        let mut options = Vec::new();
        for c in &node.children {
            if c.is_text() && c.expressions.is_empty() {
                continue;
            }
            match (c.kind == child, c.props.get("value")) {
                (true, Some(value)) => {
                    offered.push(value);
                    options.push(c);
                }
                _ => return,
            }
        }
        if offered.is_empty() {
            return;
        }
        let bound = node.bindings.get("value");
        // A default that no Option offers is `unknown_option`'s (below, with its fix); one
        // that some Option offers leaves the Options of other kinds unpickable.
        if node.kind == "Segmented"
            && let Some(name) = bound
            && let Some(default) = self.block.defaults.get(name.as_str())
            && offered.contains(&default)
        {
            self.unpickable(name, default, &options, &offered);
        }
        let (value, declaration) = match (bound, node.props.get("value")) {
            (Some(name), _) => match self.block.defaults.get(name.as_str()) {
                Some(default) => (default, self.decls.iter().find(|d| d.name == name)),
                None => return,
            },
            (None, Some(value)) => (value, None),
            (None, None) => return,
        };
        let missing: Vec<&Value> = if node.kind == "Segmented" {
            (!offered.contains(&value))
                .then_some(value)
                .into_iter()
                .collect()
        } else {
            match value {
                Value::Array(items) => items.iter().filter(|v| !offered.contains(v)).collect(),
                _ => return,
            }
        };
        let Some(first) = missing.first() else {
            return;
        };
        let list: Vec<String> = offered.iter().map(|v| v.to_string()).collect();
        let what = if node.kind == "Segmented" {
            format!("This Segmented starts at {first}, which none of its Options offers")
        } else {
            format!("This Checklist starts with {first} checked, which none of its Items offers")
        };
        let message = match bound {
            Some(name) if node.kind == "Segmented" && value.kind() != offered[0].kind() => format!(
                "`{name}` starts as {first}, and a variable keeps the kind of its default, so \
                 picking any of this Segmented's Options ({}) fails; start it at one of them",
                list.join(", ")
            ),
            _ => format!(
                "{what} ({}): a person cannot pick it back, and a Choice sent before they \
                 change it is refused",
                list.join(", ")
            ),
        };
        let at = props
            .iter()
            .find(|p| p.name == "value")
            .map_or_else(|| Self::tag_span(node), |p| p.value_bytes.clone());
        // A Segmented bound to a declared default: start it at its first option.
        let fix = match (node.kind.as_ref(), declaration) {
            ("Segmented", Some(d)) => {
                let text = &self.source[d.value_bytes.clone()];
                let start = d.value_bytes.start + (text.len() - text.trim_start().len());
                let end = d.value_bytes.start + text.trim_end().len();
                Some((start..end, offered[0].to_string()))
            }
            _ => None,
        };
        self.push(LintCode::UnknownOption, message, at, Some(node), fix);
    }

    /// `unpickable_option`: each Option of a Segmented bound to `name` whose value is of
    /// another kind than `name`'s `default` (a change of kind is refused when set).
    fn unpickable(&mut self, name: &str, default: &Value, options: &[&Node], offered: &[&Value]) {
        for (option, value) in options.iter().zip(offered) {
            if value.kind() == default.kind() {
                continue;
            }
            let at = tag_props(
                self.source,
                option.bytes.start as usize,
                Self::tag_limit(option),
            )
            .iter()
            .find(|p| p.name == "value")
            .map_or_else(|| Self::tag_span(option), |p| p.value_bytes.clone());
            self.push(
                LintCode::UnpickableOption,
                format!(
                    "Picking this Option ({value}) always fails: `{name}` starts as {default}, \
                     and a variable keeps the kind of its default; give every Option and the \
                     default values of one kind (for \"not picked yet\", an Option \
                     `value=\"\"` and the default `\"\"`)"
                ),
                at,
                Some(option),
                None,
            );
        }
    }

    fn column(&mut self, column: &Node, fields: &[String]) {
        let Some(key) = column.props.get("key").and_then(Value::as_str) else {
            return;
        };
        if fields.iter().any(|f| f == key) {
            return;
        }
        let props = tag_props(
            self.source,
            column.bytes.start as usize,
            Self::tag_limit(column),
        );
        let value = props
            .iter()
            .find(|p| p.name == "key")
            .map(|p| p.value_bytes.clone());
        let at = value.clone().unwrap_or_else(|| Self::tag_span(column));
        let suggestion = closest(key, fields.iter().map(String::as_str), SUGGEST_DISTANCE);
        let mut message = if fields.is_empty() {
            format!(
                "No row has a field `{key}`, so this column stays empty (the rows have no fields)"
            )
        } else {
            format!(
                "No row has a field `{key}`, so this column stays empty (fields: {})",
                fields.join(", ")
            )
        };
        if let Some(s) = suggestion {
            message.push_str(&format!("; did you mean `{s}`?"));
        }
        // The fix replaces the text inside the quotes (a quoted key is a plain name).
        let fix = match (suggestion, value) {
            (Some(s), Some(v))
                if v.len() >= 2 && matches!(self.source.as_bytes()[v.start], b'"' | b'\'') =>
            {
                Some((v.start + 1..v.end - 1, s.to_owned()))
            }
            _ => None,
        };
        self.push(LintCode::UnknownColumn, message, at, Some(column), fix);
    }

    /// The field names of a Table's rows, when the rows are literal records (their values
    /// may be computed, their keys are written), a declared default of records (with the
    /// records a Button's `@Set` can put in its place), a query whose source's fields are
    /// known, or `@Filter` of those.
    fn row_fields(&self, table: &Node) -> Option<Vec<String>> {
        if let Some(rows) = table.props.get("rows") {
            return fields_of_rows(rows);
        }
        let mut expr = table.expressions.get("rows")?;
        loop {
            match expr {
                Expr::Call { name, args } if name == "Filter" && !args.is_empty() => {
                    expr = &args[0];
                }
                Expr::Array(items) if !items.is_empty() => return record_keys(expr),
                Expr::Literal(rows) => return fields_of_rows(rows),
                Expr::Reference(name) => {
                    if let Some(value) = self.block.defaults.get(name) {
                        let mut fields = fields_of_rows(value)?;
                        for set in sets(&self.block.nodes, name) {
                            let keys = record_keys(set)?;
                            add_keys(&mut fields, keys.iter().map(String::as_str));
                        }
                        return Some(fields);
                    }
                    let source = self.query_source(name)?;
                    return self.options.query_fields?.fields(&source);
                }
                _ => return None,
            }
        }
    }

    /// The source name of the query declared as `name`.
    fn query_source(&self, name: &str) -> Option<String> {
        if let Some(query) = self.block.queries.get(name) {
            return Some(query.source.clone());
        }
        // Queries the compile refused (`unknown_query` without host schemas) are read from
        // their text: `@Query("source", …)`.
        let decl = self.decls.iter().find(|d| d.name == name)?;
        let value = self.source[decl.value_bytes.clone()].trim();
        let rest = value
            .strip_prefix("@Query")?
            .trim_start()
            .strip_prefix('(')?;
        let rest = rest.trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let body = &rest[1..];
        body.find(quote).map(|end| body[..end].to_owned())
    }

    /// The names read by declaration values: a query's arguments use the declared names they
    /// read, and report the `$names` that are not declared.
    fn declaration_reads(&mut self) {
        let values: Vec<(Range<usize>, bool)> = self
            .decls
            .iter()
            .map(|d| (d.value_bytes.clone(), d.is_query(self.source)))
            .collect();
        for (value, query) in values {
            self.written(value, query, None);
        }
    }

    fn unused(&mut self) {
        let unused: Vec<(String, Range<usize>, Range<usize>, bool)> = self
            .decls
            .iter()
            .filter(|d| !self.used.contains(d.name))
            .map(|d| {
                (
                    d.name.to_owned(),
                    d.name_bytes.clone(),
                    d.line_bytes.clone(),
                    d.is_query(self.source),
                )
            })
            .collect();
        for (name, at, line, query) in unused {
            let what = if query { "query" } else { "state variable" };
            let mut message =
                format!("The {what} `{name}` is declared but nothing reads or binds it");
            // When a misspelt read is fixed into this name, deleting the declaration would
            // break that fix: point at the typo instead.
            let typo = self.out.iter().find(|l| {
                l.code == LintCode::UndeclaredReference
                    && l.fix.as_ref().is_some_and(|f| f.text == name)
            });
            let fix = match typo {
                Some(typo) => {
                    let written = &self.source[typo.bytes.start as usize..typo.bytes.end as usize];
                    message.push_str(&format!("; `{written}` may be a typo for it"));
                    None
                }
                None => Some((line, String::new())),
            };
            self.push(LintCode::UnusedDeclaration, message, at, None, fix);
        }
    }
}

/// Whether the compile emptied `block` after a whole-block failure (`budget_exceeded`,
/// `refused_access`, …): no nodes, defaults or queries, and one diagnostic over all of
/// `source`. A block whose declarations failed one by one is not that: its other
/// declarations still count.
fn failed_whole(block: &Block, source: &str) -> bool {
    block.nodes.is_empty()
        && block.defaults.is_empty()
        && block.queries.is_empty()
        && matches!(&block.diagnostics[..], [only] if match only.bytes {
            Some(bytes) => bytes.start == 0 && bytes.end as usize == source.len(),
            None => only.range.start == 0 && only.range.end as usize == utf16_len(source),
        })
}

/// Walks `expr` in source order, recording each reference and whether it resolves to a
/// local in scope or a declared name. `@Filter`'s local is in scope in its predicate.
fn walk<'e>(
    expr: &'e Expr,
    locals: &mut Vec<&'e str>,
    met: &mut Vec<Met<'e>>,
    declared: &dyn Fn(&str) -> bool,
) {
    match expr {
        Expr::Literal(_) | Expr::Unknown(_) => {}
        Expr::Reference(name) => {
            let resolved = locals.contains(&name.as_str()) || declared(name);
            let scope = if resolved { Vec::new() } else { locals.clone() };
            met.push(Met {
                name,
                resolved,
                scope,
            });
        }
        Expr::Call { name, args } if name == "Filter" && args.len() == 3 => {
            walk(&args[0], locals, met, declared);
            // `@Filter`'s local is a bare name; a `$name` there is read like any other.
            if let Expr::Reference(local) = &args[1]
                && !local.starts_with('$')
            {
                met.push(Met {
                    name: local,
                    resolved: true,
                    scope: Vec::new(),
                });
                locals.push(local);
                walk(&args[2], locals, met, declared);
                locals.pop();
            } else {
                walk(&args[1], locals, met, declared);
                walk(&args[2], locals, met, declared);
            }
        }
        Expr::Array(items) | Expr::Call { args: items, .. } => {
            for item in items {
                walk(item, locals, met, declared);
            }
        }
        Expr::Object(entries) => {
            for (_, value) in entries {
                walk(value, locals, met, declared);
            }
        }
        Expr::Member { object, key } => {
            walk(object, locals, met, declared);
            walk(key, locals, met, declared);
        }
        Expr::Unary { value, .. } => walk(value, locals, met, declared),
        Expr::Binary { left, right, .. } => {
            walk(left, locals, met, declared);
            walk(right, locals, met, declared);
        }
    }
}

/// Whether any text descendant of `node` shows something: non-blank text or an expression
/// (but for a literal one that shows nothing: `{""}`, `{null}`).
fn has_text(node: &Node) -> bool {
    node.children.iter().any(|child| {
        if child.is_text() {
            child.expressions.get("text").is_some_and(|expr| {
                expr.as_literal()
                    .is_none_or(|v| !(v.is_null() || v.as_str().is_some_and(is_blank)))
            }) || child
                .props
                .get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| !is_blank(t))
        } else {
            has_text(child)
        }
    })
}

/// The Columns among `children`, looking through `Show` and `Each`.
fn collect_columns<'n>(children: &'n [Node], out: &mut Vec<&'n Node>) {
    for child in children {
        match &*child.kind {
            "Column" => out.push(child),
            "Show" | "Each" => collect_columns(&child.children, out),
            _ => {}
        }
    }
}

/// The keys of an array of records written as an expression: an array literal of record
/// literals (`[{name: $n}]`: the values may be computed, the keys are written) or a literal
/// read from the wire; `None` when an item is not a record.
fn record_keys(expr: &Expr) -> Option<Vec<String>> {
    let Expr::Array(items) = expr else {
        return fields_of(expr.as_literal()?);
    };
    let mut fields = Vec::new();
    for item in items {
        match item {
            Expr::Object(entries) => add_keys(&mut fields, entries.iter().map(|(k, _)| k.as_str())),
            Expr::Literal(value) => {
                add_keys(&mut fields, value.as_record()?.keys().map(String::as_str));
            }
            _ => return None,
        }
    }
    Some(fields)
}

/// The values that `@Set(name, …)` actions among `nodes` (and their descendants) put in.
fn sets<'n>(nodes: &'n [Node], name: &str) -> Vec<&'n Expr> {
    let mut out = Vec::new();
    for node in nodes {
        for (_, expr) in node.expressions.iter() {
            if let Expr::Call { name: helper, args } = expr
                && helper == "Set"
                && args.len() == 2
                && args[0].as_reference() == Some(name)
            {
                out.push(&args[1]);
            }
        }
        out.extend(sets(&node.children, name));
    }
    out
}

/// The fields of `rows` when it is an array of at least one record (no rows say nothing of
/// their fields).
fn fields_of_rows(rows: &Value) -> Option<Vec<String>> {
    rows.as_array().filter(|r| !r.is_empty())?;
    fields_of(rows)
}

/// The union of the field names of `rows` when it is an array of records.
fn fields_of(rows: &Value) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    for item in rows.as_array()? {
        add_keys(&mut fields, item.as_record()?.keys().map(String::as_str));
    }
    Some(fields)
}

/// Adds to `fields` each of `keys` it does not hold yet, in order.
fn add_keys<'k>(fields: &mut Vec<String>, keys: impl Iterator<Item = &'k str>) {
    for key in keys {
        if !fields.iter().any(|f| f == key) {
            fields.push(key.to_owned());
        }
    }
}
