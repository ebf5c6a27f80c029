//! `uiblocks check`: compile files as final replies and report every diagnostic (error)
//! and lint (warning, `ui_compiler::lint`) in source order, like rustc (with source
//! snippets, fixes as `help:`, follow-on diagnostics of a failed tag as notes under it) or
//! as JSON lines, with a progress bar on standard error when a terminal watches many files
//! go by.
//!
//! Offsets: a node's or diagnostic's range is relative to its block source, which starts
//! at the fence's code start (just after the opening fence line). [`locate`] maps a
//! diagnostic back to a byte range of the file, from [`Diagnostic::bytes`] when present,
//! else from the UTF-16 range (reply-level diagnostics, such as refused blocks, carry
//! reply offsets and no bytes).

use std::io::{IsTerminal as _, Write as _};
use std::ops::Range;
use std::path::Path;

use annotate_snippets::{AnnotationKind, Level, Patch, Renderer, Snippet};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value as Json, json};
use ui_compiler::expr::parse_stop;
use ui_compiler::{
    Block, CompileOptions, Fence, Lint, LintFix, LintOptions, Node, QueryFields, QuerySchemas,
    UiState, evaluate_block, lint_block, scan_fences,
};
use ui_core::text::Utf16Map;
use ui_core::{Code, Diagnostic, FrozenClock, TextRange, UiLimits};

use super::{EXIT_USAGE, compile_text, read_source};
use crate::cli::{CheckArgs, CheckFormat, SourceArgs};

/// A diagnostic placed in its file.
#[derive(Debug, Clone)]
pub struct Located<'d> {
    /// The diagnostic as the compiler reported it.
    pub diagnostic: &'d Diagnostic,
    /// Its byte range in the file.
    pub bytes: Range<usize>,
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column of the start, in characters.
    pub column: usize,
}

/// The host's query sources for `check --sources`: the argument schemas that register them
/// (so a `@Query` of a declared source is checked, not `unknown_query`) and, from a
/// `sources.toml`, the fields of the rows each one answers (for `unknown_column`).
#[derive(Debug, Default)]
pub struct Sources {
    schemas: ui_host::JsonSchemas,
    fields: std::collections::HashMap<String, Vec<String>>,
    /// The registered names, for a suggestion when a query names none of them.
    names: Vec<String>,
    /// Each source as the file describes it, in the file's order, for the guide.
    entries: Vec<SourceEntry>,
}

/// One source as a sources file describes it: what `uiblocks guide --sources` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceEntry {
    /// The name a `@Query` names.
    pub name: String,
    /// What it reads, when the file says.
    pub description: Option<String>,
    /// The JSON Schema of its argument record.
    pub args: Json,
    /// The JSON Schema of its result (an array of rows), when the file gives one.
    pub result: Option<Json>,
}

impl Sources {
    /// [`Sources::load`] of `path` when given, shared by every file (or tool call) checked.
    ///
    /// # Errors
    /// As [`Sources::load`].
    pub fn load_shared(path: Option<&Path>) -> anyhow::Result<Option<std::sync::Arc<Sources>>> {
        path.map(Sources::load)
            .transpose()
            .map(|s| s.map(std::sync::Arc::new))
    }

    /// Reads `path`: a `sources.toml` as `uiblocks serve` reads it (by its `.toml`
    /// extension), else JSON, either `{"querySchemas": {source: schema}}` (the driver's and
    /// the conformance corpus's `hosts.json`) or `{source: schema}`, where each entry may
    /// also be `{"args": schema, "result"?: schema, "description"?: text}` (the agent
    /// tasks' `sources.json`; its result's row fields serve `unknown_column` as a
    /// `sources.toml`'s do).
    ///
    /// # Errors
    /// When the file cannot be read or is not a valid sources file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = read_source(path)?;
        if path.extension().is_some_and(|e| e == "toml") {
            let toml = ui_server::TomlSources::parse(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let infos = toml.schemas();
            let schemas: serde_json::Map<String, Json> = infos
                .iter()
                .map(|info| (info.name.clone(), info.args.clone()))
                .collect();
            let fields = infos
                .iter()
                .filter_map(|info| Some((info.name.clone(), toml.result_fields(&info.name)?)))
                .collect();
            let entries = infos
                .iter()
                .map(|info| SourceEntry {
                    name: info.name.clone(),
                    description: info.description.clone(),
                    args: info.args.clone(),
                    result: toml
                        .result_schema(&info.name)
                        .filter(|r| r.as_object().is_none_or(|o| !o.is_empty()))
                        .cloned(),
                })
                .collect();
            return Ok(Sources {
                names: schemas.keys().cloned().collect(),
                schemas: ui_host::JsonSchemas::from_json(&Json::Object(schemas)),
                fields,
                entries,
            });
        }
        let json: Json = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", path.display()))?;
        let schemas = json.get("querySchemas").unwrap_or(&json);
        let Some(entries) = schemas.as_object() else {
            anyhow::bail!(
                "{}: expected an object of schemas by source",
                path.display()
            );
        };
        // Each entry is the JSON Schema of a source's argument record, which is an object
        // (`sources.toml` asks the same of `args`): a misspelled `querySchemas` wrapper
        // would otherwise register one source named after it, and a typo in a `type`
        // would check nothing. An entry without `type` but with `args` describes the
        // source: its `args` are that schema.
        let mut described = Vec::with_capacity(entries.len());
        for (source, entry) in entries {
            let at = || format!("{}: source `{source}`", path.display());
            let rich = entry.get("type").is_none() && entry.get("args").is_some();
            let schema = if rich { &entry["args"] } else { entry };
            let text = |key: &str| {
                rich.then(|| entry.get(key).and_then(Json::as_str).map(str::to_owned))
                    .flatten()
            };
            let result = if rich {
                entry.get("result").cloned()
            } else {
                None
            };
            described.push(SourceEntry {
                name: source.clone(),
                description: text("description"),
                args: schema.clone(),
                result,
            });
            if schema.get("type").and_then(Json::as_str) != Some("object") {
                let hint = if source.eq_ignore_ascii_case("queryschema") {
                    " (the wrapper is spelled `querySchemas`)"
                } else {
                    ""
                };
                anyhow::bail!(
                    "{}: its argument schema must be a JSON Schema with \"type\": \"object\"{hint}",
                    at()
                );
            }
            ui_host::JsonSchema::new(schema).map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
        }
        let args: serde_json::Map<String, Json> = described
            .iter()
            .map(|e| (e.name.clone(), e.args.clone()))
            .collect();
        let fields = described
            .iter()
            .filter_map(|e| {
                let properties = e.result.as_ref()?.get("items")?.get("properties")?;
                Some((
                    e.name.clone(),
                    properties.as_object()?.keys().cloned().collect(),
                ))
            })
            .collect();
        Ok(Sources {
            names: entries.keys().cloned().collect(),
            schemas: ui_host::JsonSchemas::from_json(&Json::Object(args)),
            fields,
            entries: described,
        })
    }

    /// Each source as the file describes it, in the file's order.
    pub fn entries(&self) -> &[SourceEntry] {
        &self.entries
    }
}

impl QueryFields for Sources {
    fn fields(&self, source: &str) -> Option<Vec<String>> {
        self.fields.get(source).cloned()
    }
}

/// The result of checking one file.
#[derive(Debug)]
pub struct FileReport {
    /// The file's text.
    pub text: String,
    /// The compiled blocks.
    pub blocks: Vec<std::sync::Arc<Block>>,
    /// The UI fences of the text (empty with `--block`).
    pub fences: Vec<Fence>,
    /// Whether the file was checked as one block body.
    pub block_mode: bool,
    /// The host's sources it was checked against, if any.
    pub sources: Option<std::sync::Arc<Sources>>,
}

impl FileReport {
    /// Compiles `text` as a final reply (or one block body).
    pub fn new(text: String, source: &SourceArgs) -> Self {
        Self::compile(text, source, true)
    }

    /// Compiles `text` as a reply (or one block body), final or as a streaming preview.
    pub fn compile(text: String, source: &SourceArgs, is_final: bool) -> Self {
        Self::with_sources(text, source, is_final, None)
    }

    /// As [`FileReport::compile`], with the host's query sources registered.
    pub fn with_sources(
        text: String,
        source: &SourceArgs,
        is_final: bool,
        sources: Option<std::sync::Arc<Sources>>,
    ) -> Self {
        let schemas = sources.as_deref().map(|s| &s.schemas as &dyn QuerySchemas);
        let blocks = compile_text(&text, source, is_final, schemas);
        let fences = if source.block {
            Vec::new()
        } else {
            scan_fences(&text, &source.fence_language)
        };
        FileReport {
            text,
            blocks,
            fences,
            block_mode: source.block,
            sources,
        }
    }

    /// Every diagnostic of block `index`, placed in the file.
    pub fn located(&self, index: usize) -> Vec<Located<'_>> {
        let block = &self.blocks[index];
        let code_start = if self.block_mode {
            Some(0)
        } else {
            self.fences.get(index).map(|f| f.code_start)
        };
        let code_end = if self.block_mode {
            Some(self.text.len())
        } else {
            self.fences.get(index).map(|f| f.code_end)
        };
        block
            .diagnostics
            .iter()
            .map(|d| {
                let bytes = locate(&self.text, code_start.zip(code_end), d);
                let (line, column) = line_column(&self.text, bytes.start);
                Located {
                    diagnostic: d,
                    bytes,
                    line,
                    column,
                }
            })
            .collect()
    }
}

/// The byte range in `text` of `diagnostic`, whose block source is `text[code]` (`None`
/// when the block's fence is unknown). Diagnostics with [`Diagnostic::bytes`] are relative
/// to the block source; the others carry UTF-16 offsets of the whole text (reply-level
/// diagnostics). The range is clamped to `text` and to character boundaries.
pub fn locate(text: &str, code: Option<(usize, usize)>, diagnostic: &Diagnostic) -> Range<usize> {
    let (start, end) = match (diagnostic.bytes, code) {
        (Some(b), Some((code_start, _))) => {
            (code_start + b.start as usize, code_start + b.end as usize)
        }
        _ => {
            let map = Utf16Map::new(text);
            (
                map.byte(diagnostic.range.start as usize),
                map.byte(diagnostic.range.end as usize),
            )
        }
    };
    let floor = |mut i: usize| {
        i = i.min(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(start);
    let mut end = floor(end).max(start);
    // A range ending with its line's terminator is shown up to the terminator.
    while end > start + 1 && matches!(text.as_bytes()[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    start..end
}

/// The 1-based line and column (in characters) of byte offset `at` of `text`.
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// A diagnostic of the compiler (the reference's; the block is wrong).
    Error,
    /// A lint: the block compiles, but probably not as meant.
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// A suggested replacement placed in the file.
#[derive(Debug, Clone)]
pub struct PlacedFix {
    /// The fix as the lint reported it (offsets in the block source).
    pub fix: LintFix,
    /// The replaced bytes of the file.
    pub bytes: Range<usize>,
}

/// One finding (a diagnostic or a lint) of a block, placed in its file.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The stable code (`unknown_component`, `undeclared_reference`, …).
    pub code: &'static str,
    /// Text for people.
    pub message: String,
    /// The wire range (UTF-16 units of the block source, or of the reply for reply-level
    /// diagnostics).
    pub range: TextRange,
    /// The node, if any.
    pub node_id: Option<String>,
    /// The bytes of the file shown (for an expression error, the token where parsing
    /// stopped).
    pub bytes: Range<usize>,
    /// Where in the file the construct the finding is about begins (the diagnostic's own
    /// start, before an expression error moves `bytes` to its stop token).
    pub origin: usize,
    /// 1-based line of the start of `bytes`.
    pub line: usize,
    /// 1-based column (characters) of the start of `bytes`.
    pub column: usize,
    /// The suggested replacement, if any.
    pub fix: Option<PlacedFix>,
    /// The index (in the same block's findings) of the failure this one follows from.
    pub cause: Option<usize>,
}

impl FileReport {
    /// The block source of block `index` and where it starts in the file.
    fn block_source(&self, index: usize) -> Option<(usize, &str)> {
        if self.block_mode {
            return Some((0, self.text.as_str()));
        }
        let fence = self.fences.get(index)?;
        Some((
            fence.code_start,
            self.text.get(fence.code_start..fence.code_end)?,
        ))
    }

    /// The lints of block `index`.
    pub fn lints(&self, index: usize) -> Vec<Lint> {
        match self.block_source(index) {
            Some((_, source)) => {
                let options = LintOptions {
                    query_fields: self.sources.as_deref().map(|s| s as &dyn QueryFields),
                };
                lint_block(&self.blocks[index], source, &options)
            }
            None => Vec::new(),
        }
    }

    /// Every finding of block `index`: its diagnostics and lints in source order of what
    /// they are about (so an expression error, underlined at its stop token, comes where its
    /// braces begin, and `start` grows along the list; errors first at the same offset),
    /// each follow-on diagnostic of a failed tag pointing at its cause.
    pub fn findings(&self, index: usize) -> Vec<Finding> {
        let offset = self.block_source(index).map(|(start, _)| start);
        let located = self.located(index);
        let declared = self.query_diagnostics_at(index, &located);
        let mut findings: Vec<Finding> = located
            .into_iter()
            .zip(declared)
            .map(|(l, declaration)| {
                let d = l.diagnostic;
                // A query's diagnostic is about its declaration; an expression error comes
                // where its braces begin and is underlined at its stop token.
                let origin = declaration.as_ref().map_or(l.bytes.start, |b| b.start);
                let bytes = declaration
                    .or_else(|| self.stop_token(d.code, l.bytes.clone()))
                    .unwrap_or(l.bytes);
                let (line, column) = line_column(&self.text, bytes.start);
                Finding {
                    severity: Severity::Error,
                    code: d.code.as_str(),
                    message: self.with_suggestion(d),
                    range: d.range,
                    node_id: d.node_id.clone(),
                    origin,
                    bytes,
                    line,
                    column,
                    fix: None,
                    cause: None,
                }
            })
            .collect();
        if let Some(offset) = offset {
            for lint in self.lints(index) {
                let bytes = offset + lint.bytes.start as usize..offset + lint.bytes.end as usize;
                let (line, column) = line_column(&self.text, bytes.start);
                let fix = lint.fix.map(|fix| PlacedFix {
                    bytes: offset + fix.bytes.start as usize..offset + fix.bytes.end as usize,
                    fix,
                });
                findings.push(Finding {
                    severity: Severity::Warning,
                    code: lint.code.as_str(),
                    message: lint.message,
                    range: lint.range,
                    node_id: lint.node_id,
                    origin: bytes.start,
                    bytes,
                    line,
                    column,
                    fix,
                    cause: None,
                });
            }
        }
        if let Some(offset) = offset {
            findings.extend(self.drawn(index, offset));
        }
        findings.sort_by_key(|f| (f.origin, f.severity == Severity::Warning));
        let causes = self.causes(&findings);
        for (finding, cause) in findings.iter_mut().zip(causes) {
            finding.cause = cause;
        }
        findings
    }

    /// What drawing block `index` as it starts finds (issue 52: `check` never says ok to a
    /// block that fails when drawn): a complete block without compile diagnostics is
    /// evaluated with its defaults, as a page
    /// first draws it, and each evaluation diagnostic of a node becomes an error, once per
    /// compiled node (a budget once per block), unless it, or a node around it, reads a
    /// live query, which has no reading yet:
    /// such a node draws its fallback until the first reading, which is no failure. The
    /// clock is frozen, so the result does not depend on the machine's speed. `offset` is
    /// where the block source starts in the file.
    fn drawn(&self, index: usize, offset: usize) -> Vec<Finding> {
        let block = &self.blocks[index];
        // A block the compile found problems in is judged by those: drawing it would mostly
        // repeat them (a query that failed reads as an unknown name).
        if !block.complete || !block.diagnostics.is_empty() {
            return Vec::new();
        }
        let clock = FrozenClock(0.0);
        let Ok(state) = UiState::new(block, UiLimits::DEFAULT) else {
            return Vec::new();
        };
        let Ok(view) = evaluate_block(block, &state, UiLimits::DEFAULT, Some(&clock)) else {
            return Vec::new();
        };
        let mut nodes = Vec::new();
        compiled_nodes(&block.nodes, block, false, &mut nodes);
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for d in &view.diagnostics {
            let Some((node, reads_query)) = d.node_id.as_deref().and_then(|id| {
                // An Each's copies are `<compiled id>:<index>`: the compiled node is the
                // longest prefix that is one.
                let mut id = id;
                loop {
                    if let Some(found) = nodes.iter().find(|(n, _)| n.id == id) {
                        return Some(*found);
                    }
                    id = &id[..id.rfind(':')?];
                }
            }) else {
                continue;
            };
            // A budget stops the whole drawing: said once.
            let key = if d.code == Code::BudgetExceeded {
                ""
            } else {
                node.id.as_str()
            };
            if reads_query || !seen.insert((d.code, key)) {
                continue;
            }
            let bytes = offset + node.bytes.start as usize..offset + node.bytes.end as usize;
            let (line, column) = line_column(&self.text, bytes.start);
            out.push(Finding {
                severity: Severity::Error,
                code: d.code.as_str(),
                message: format!("When the block is first drawn: {}", d.message),
                range: d.range,
                node_id: Some(node.id.clone()),
                origin: bytes.start,
                bytes,
                line,
                column,
                fix: None,
                cause: None,
            });
        }
        out
    }

    /// For each of `located` (the diagnostics of block `index`), the bytes of the `@Query`
    /// declaration it is about, when it is a query's diagnostic (`unknown_query`,
    /// `invalid_query`) and the declaration can be told: the wire gives these the whole
    /// block, and their message names the source. The declarations naming that source and
    /// the diagnostics naming it come in the same order, so when there are as many of each
    /// the n-th diagnostic is the n-th declaration; otherwise (a valid and an invalid query
    /// of one source) the whole block stays underlined.
    fn query_diagnostics_at(
        &self,
        index: usize,
        located: &[Located<'_>],
    ) -> Vec<Option<Range<usize>>> {
        let mut out = vec![None; located.len()];
        let Some((offset, source)) = self.block_source(index) else {
            return out;
        };
        let declarations = ui_compiler::query_declarations(source);
        for (i, l) in located.iter().enumerate() {
            let Some(name) = query_source(l.diagnostic) else {
                continue;
            };
            let same: Vec<usize> = (0..located.len())
                .filter(|&j| query_source(located[j].diagnostic) == Some(name))
                .collect();
            let places: Vec<&Range<usize>> = declarations
                .iter()
                .filter(|(_, source)| *source == name)
                .map(|(bytes, _)| bytes)
                .collect();
            if same.len() == places.len() {
                let nth = same.iter().position(|&j| j == i).unwrap_or(0);
                out[i] = Some(offset + places[nth].start..offset + places[nth].end);
            }
        }
        out
    }

    /// `diagnostic`'s message, with the registered source a typo away when it is an
    /// `unknown_query` and `--sources` registered some.
    fn with_suggestion(&self, diagnostic: &Diagnostic) -> String {
        let mut message = diagnostic.message.clone();
        if diagnostic.code == Code::UnknownQuery
            && let Some(sources) = &self.sources
            && let Some(name) = backticked(&diagnostic.message)
            && let Some(near) =
                ui_compiler::suggest_name(name, sources.names.iter().map(String::as_str))
        {
            message.push_str(&format!(" Did you mean `{near}`?"));
        }
        message
    }

    /// The tag a follow-on diagnostic points back to: the closing tag's name for
    /// `unmatched_tag`, the required parent for `invalid_parent`.
    fn follow_on_tag(&self, finding: &Finding) -> Option<&str> {
        let at = self.text.get(finding.origin..)?;
        match finding.code {
            "unmatched_tag" => Some(tag_name(at.strip_prefix("</")?)),
            "invalid_parent" => ui_core::catalog::lookup(tag_name(at.strip_prefix('<')?))?.parent(),
            _ => None,
        }
    }

    /// The name of the tag that failed while it was read (a parser error without a node, so
    /// the tag was never opened), when `finding` is one.
    fn failed_tag(&self, finding: &Finding) -> Option<&str> {
        if finding.severity != Severity::Error
            || finding.node_id.is_some()
            || finding.code == "unmatched_tag"
        {
            return None;
        }
        let name = tag_name(self.text.get(finding.origin..)?.strip_prefix('<')?);
        (!name.is_empty()).then_some(name)
    }

    /// For each finding, the earlier failure it follows from. A tag that failed while it was
    /// read was never opened, so the closing tag meant for it is `unmatched_tag` and the
    /// children that needed it as their parent are `invalid_parent`: those follow from it.
    /// The failed tags are matched like open tags, in source order: a closing tag belongs to
    /// the nearest failed tag of its name not closed yet, and a child to the nearest one
    /// still open where it stands. Nothing after a failed tag's closing tag follows from it.
    fn causes(&self, findings: &[Finding]) -> Vec<Option<usize>> {
        let mut causes = vec![None; findings.len()];
        let mut open: Vec<(usize, &str)> = Vec::new();
        for (i, finding) in findings.iter().enumerate() {
            let follows = self
                .follow_on_tag(finding)
                .and_then(|name| open.iter().rposition(|&(_, n)| n == name));
            match follows {
                Some(at) if finding.code == "unmatched_tag" => causes[i] = Some(open.remove(at).0),
                Some(at) => causes[i] = Some(open[at].0),
                None => {
                    if let Some(name) = self.failed_tag(finding) {
                        open.push((i, name));
                    }
                }
            }
        }
        causes
    }

    /// For an expression error, the bytes of the token where parsing stopped.
    fn stop_token(&self, code: Code, bytes: Range<usize>) -> Option<Range<usize>> {
        if !matches!(
            code,
            Code::InvalidExpression | Code::IncompleteExpression | Code::RefusedCall
        ) {
            return None;
        }
        let (start, expr) = expression_text(self.text.get(bytes.clone())?)?;
        // Only to find the stop token again: a frozen clock, so no time budget can cut it short.
        let clock = ui_core::FrozenClock(0.0);
        let mut budget = ui_core::Budget::new(CompileOptions::default().limits, &clock);
        let stop = parse_stop(expr, &mut budget)?;
        let at = bytes.start + start;
        Some(at + stop.start..at + stop.end)
    }
}

/// The source a query's diagnostic (`unknown_query`, `invalid_query`) names.
/// Every node of `nodes` (depth first) with whether it, or a node around it (`inside`),
/// reads one of `block`'s live queries in a prop or its text.
fn compiled_nodes<'b>(
    nodes: &'b [Node],
    block: &Block,
    inside: bool,
    out: &mut Vec<(&'b Node, bool)>,
) {
    for node in nodes {
        let mut reads = inside;
        for expr in node.expressions.values() {
            expr.visit_references(&mut |name| {
                reads |= block.queries.contains_key(name);
            });
        }
        out.push((node, reads));
        compiled_nodes(&node.children, block, reads, out);
    }
}

fn query_source(diagnostic: &Diagnostic) -> Option<&str> {
    matches!(diagnostic.code, Code::UnknownQuery | Code::InvalidQuery)
        .then(|| backticked(&diagnostic.message))
        .flatten()
}

/// The first name `message` quotes in backticks (a query diagnostic's source).
fn backticked(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once('`')?;
    rest.split_once('`').map(|(name, _)| name)
}

/// The name of the tag whose text (after `<` or `</`) starts `text`.
fn tag_name(text: &str) -> &str {
    let end = text
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(text.len());
    &text[..end]
}

/// The expression inside the text a failed construct covers, and its offset: a text
/// expression's braces, the last prop value of a tag (`{…}` or quoted), or a
/// declaration's value.
fn expression_text(text: &str) -> Option<(usize, &str)> {
    let trimmed = text.trim_end();
    if text.starts_with('$') {
        let eq = text.find('=')? + 1;
        let value = &text[eq..];
        let lead = value.len() - value.trim_start().len();
        return Some((eq + lead, value.trim()));
    }
    if trimmed.ends_with('}') {
        // The `{` that opens the balanced body ending the text, read forwards with quotes
        // tracked as the compiler reads a body (§7.6): a `}` inside a string closes nothing.
        let bytes = trimmed.as_bytes();
        let (mut depth, mut quote, mut open) = (0usize, None, 0usize);
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match quote {
                Some(_) if b == b'\\' => i += 1,
                Some(q) if b == q => quote = None,
                Some(_) => {}
                None => match b {
                    b'"' | b'\'' => quote = Some(b),
                    b'{' => {
                        if depth == 0 {
                            open = i;
                        }
                        depth += 1;
                    }
                    b'}' if depth > 0 => {
                        depth -= 1;
                        if depth == 0 && i == bytes.len() - 1 {
                            return Some((open + 1, &trimmed[open + 1..i]));
                        }
                    }
                    _ => {}
                },
            }
            i += 1;
        }
        return None;
    }
    if let Some(rest) = text.strip_prefix('{') {
        // An unclosed text expression: everything after the brace.
        return Some((1, rest));
    }
    // A quoted prop value: from the last `="` or `='`.
    let quote = trimmed
        .rfind("=\"")
        .into_iter()
        .chain(trimmed.rfind("='"))
        .max()?;
    Some((quote + 1, &text[quote + 1..]))
}

/// Renders the findings of `report` like rustc, for the file shown as `path`: errors and
/// warnings in source order, a fix as a `help:` with the patched source, a follow-on
/// diagnostic as a note under its cause.
pub fn render_human(report: &FileReport, path: &str, renderer: &Renderer) -> String {
    let mut out = String::new();
    let text = report.text.as_str();
    for index in 0..report.blocks.len() {
        let findings = report.findings(index);
        for (i, f) in findings.iter().enumerate() {
            if f.cause.is_some() {
                continue;
            }
            let level = match f.severity {
                Severity::Error => Level::ERROR,
                Severity::Warning => Level::WARNING,
            };
            let mut groups = vec![
                level.primary_title(f.message.as_str()).id(f.code).element(
                    Snippet::source(text)
                        .path(path)
                        .annotation(AnnotationKind::Primary.span(f.bytes.clone())),
                ),
            ];
            for note in findings.iter().filter(|n| n.cause == Some(i)) {
                groups.push(
                    Level::NOTE
                        .secondary_title(format!(
                            "[{}] {} (follows from the failure above)",
                            note.code, note.message
                        ))
                        .element(
                            Snippet::source(text)
                                .path(path)
                                .annotation(AnnotationKind::Context.span(note.bytes.clone())),
                        ),
                );
            }
            if let Some(fix) = &f.fix {
                let title = if fix.fix.text.is_empty() {
                    "remove it".to_owned()
                } else {
                    format!("replace with `{}`", fix.fix.text)
                };
                groups.push(
                    Level::HELP.secondary_title(title).element(
                        Snippet::source(text)
                            .path(path)
                            .patch(Patch::new(fix.bytes.clone(), fix.fix.text.as_str())),
                    ),
                );
            }
            out.push_str(&renderer.render(&groups));
            out.push_str("\n\n");
        }
    }
    out
}

/// One finding as JSON: `{severity, code, message, start, end, line, column, file, nodeId?,
/// fix?: {start, end, text, file}, cause?}`. `start`/`end` are the wire's (UTF-16 units of
/// the block source, as the diagnostic has them); `file` places the finding, and a fix, in
/// the file or reply that was checked, `{start, end}` in UTF-16 units and
/// `{startUtf8, endUtf8}` in bytes, so a tool can apply a fix to the text it sent. `map` is
/// the UTF-16 map of that text.
pub fn finding_json(f: &Finding, map: &Utf16Map) -> Json {
    let file = |bytes: &Range<usize>| {
        json!({
            "start": map.utf16(bytes.start),
            "end": map.utf16(bytes.end),
            "startUtf8": bytes.start,
            "endUtf8": bytes.end,
        })
    };
    let mut v = json!({
        "severity": f.severity.as_str(),
        "code": f.code,
        "message": f.message,
        "start": f.range.start,
        "end": f.range.end,
        "line": f.line,
        "column": f.column,
        "file": file(&f.bytes),
    });
    if let Some(node) = &f.node_id {
        v["nodeId"] = json!(node);
    }
    if let Some(fix) = &f.fix {
        v["fix"] = json!({
            "start": fix.fix.start,
            "end": fix.fix.end,
            "text": fix.fix.text,
            "file": file(&fix.bytes),
        });
    }
    if let Some(cause) = f.cause {
        v["cause"] = json!(cause);
    }
    v
}

/// The JSON report of one file: `{file, blocks:[{id, findings:[…]}]}` with the findings
/// of [`finding_json`] in source order (`cause` is an index into the same list).
pub fn render_json(report: &FileReport, path: &str) -> Json {
    let map = Utf16Map::new(&report.text);
    let blocks: Vec<Json> = (0..report.blocks.len())
        .map(|index| {
            let findings: Vec<Json> = report
                .findings(index)
                .iter()
                .map(|f| finding_json(f, &map))
                .collect();
            json!({"id": report.blocks[index].id, "findings": findings})
        })
        .collect();
    json!({"file": path, "blocks": blocks})
}

/// Errors and warnings counted over a report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Blocks checked.
    pub blocks: usize,
    /// Findings with severity error, but for the notes.
    pub errors: usize,
    /// Errors that follow from an earlier one (shown as notes under it, not counted in
    /// `errors`).
    pub notes: usize,
    /// Findings with severity warning.
    pub warnings: usize,
}

impl Counts {
    /// The counts of every block of `report`.
    pub fn of(report: &FileReport) -> Counts {
        let mut counts = Counts {
            blocks: report.blocks.len(),
            ..Counts::default()
        };
        for index in 0..report.blocks.len() {
            counts.add(&report.findings(index));
        }
        counts
    }

    /// Counts `findings` too.
    pub fn add(&mut self, findings: &[Finding]) {
        for f in findings {
            match (f.severity, f.cause) {
                (Severity::Error, None) => self.errors += 1,
                (Severity::Error, Some(_)) => self.notes += 1,
                (Severity::Warning, _) => self.warnings += 1,
            }
        }
    }

    /// `N blocks, N errors, N warnings`, with `(+N notes)` after the errors when there are
    /// any.
    pub fn summary(&self) -> String {
        let notes = if self.notes > 0 {
            format!(" (+{})", plural(self.notes, "note"))
        } else {
            String::new()
        };
        format!(
            "{}, {}{notes}, {}",
            plural(self.blocks, "block"),
            plural(self.errors, "error"),
            plural(self.warnings, "warning"),
        )
    }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Files from which `check` shows a progress bar (when standard error is a terminal).
pub const PROGRESS_MIN_FILES: usize = 8;

/// The progress bar of a `check` of `total` files: drawn on standard error, and only when
/// that is a terminal that can redraw a line (`TERM` set and not `dumb`) and there are at
/// least [`PROGRESS_MIN_FILES`] files; otherwise hidden (every call on it does nothing).
/// Standard output never sees it, so `--format json` stays one JSON object per line.
pub fn progress_bar(total: usize) -> ProgressBar {
    if total < PROGRESS_MIN_FILES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("checking [{bar:30}] {pos}/{len} {elapsed} {wide_msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Checks every file: exit status 1 when any error was found (or any warning, with
/// `--deny-warnings`), 2 when a file could not be read, 0 otherwise. On success one line
/// `ok: N files, N blocks, N errors, N warnings` goes to standard error (not with
/// `--quiet`). With many files and a terminal on standard error, a progress bar
/// ([`progress_bar`]) is drawn there; it is cleared while anything else is printed.
///
/// # Errors
/// When standard output fails.
pub fn run(args: &CheckArgs) -> anyhow::Result<u8> {
    let sources = Sources::load_shared(args.sources.as_deref())?;
    let stdout = std::io::stdout();
    let on_screen = stdout.is_terminal();
    let renderer = if on_screen {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let total = args.files.len();
    let bar = progress_bar(total);
    let mut counts = Counts::default();
    let mut failed_files = 0usize;
    let mut unreadable = 0usize;
    for path in &args.files {
        let shown = if path == Path::new("-") {
            "<stdin>".to_owned()
        } else {
            path.display().to_string()
        };
        bar.set_message(shown.clone());
        let output = check_one(path, &shown, args, &sources, &renderer);
        let mut write = || -> std::io::Result<()> {
            let mut out = stdout.lock();
            match &output {
                Ok((file, text)) => {
                    counts.blocks += file.blocks;
                    counts.errors += file.errors;
                    counts.notes += file.notes;
                    counts.warnings += file.warnings;
                    let failed = file.errors > 0 || (args.deny_warnings && file.warnings > 0);
                    failed_files += usize::from(failed);
                    out.write_all(text.as_bytes())?;
                }
                Err(e) => {
                    unreadable += 1;
                    if args.format == CheckFormat::Json {
                        let line = json!({"file": shown, "error": format!("{e:#}")});
                        writeln!(out, "{line}")?;
                    }
                    eprintln!("uiblocks: error: {e:#}");
                }
            }
            out.flush()
        };
        // What reaches the terminal the bar is on is written with the bar taken off it.
        if on_screen || output.is_err() {
            bar.suspend(write)?;
        } else {
            write()?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let failed = counts.errors > 0 || (args.deny_warnings && counts.warnings > 0);
    let summary = format!("{}, {}", plural(total, "file"), counts.summary());
    if unreadable == 0 && !failed {
        if !args.quiet {
            eprintln!("ok: {summary}");
        }
    } else if args.format == CheckFormat::Human && failed {
        let denied = if args.deny_warnings && counts.warnings > 0 {
            " (warnings denied)"
        } else {
            ""
        };
        eprintln!(
            "failed: {summary}; {} with findings{denied}",
            plural(failed_files, "file")
        );
    }
    Ok(if unreadable > 0 {
        EXIT_USAGE
    } else {
        u8::from(failed)
    })
}

/// Checks one file: its counts and the text to print.
fn check_one(
    path: &Path,
    shown: &str,
    args: &CheckArgs,
    sources: &Option<std::sync::Arc<Sources>>,
    renderer: &Renderer,
) -> anyhow::Result<(Counts, String)> {
    let text = read_source(path)?;
    let report = FileReport::with_sources(text, &args.source, true, sources.clone());
    let rendered = match args.format {
        CheckFormat::Human => render_human(&report, shown, renderer),
        CheckFormat::Json => format!("{}\n", render_json(&report, shown)),
    };
    Ok((Counts::of(&report), rendered))
}
