//! `uiblocks mcp`: a Model Context Protocol server over standard input and output, so an
//! agent can check and preview a reply while it writes it.
//!
//! - tool `check_reply` `{text, final?, block?}`: every error and warning of `uiblocks
//!   check` (readable text, and `structuredContent` `{findings, blocks, errors, warnings}`);
//! - tool `preview_reply` `{text, readings?, block?}`: the reply's fallback text and an
//!   outline of the evaluated view, with `readings` as sample query results
//!   (`structuredContent` `{fallbackText, blocks: [{id, outline, diagnostics,
//!   evaluationErrors}], unusedReadings}`, `evaluationErrors` what the evaluation could not
//!   draw, each failure once: `{code, message, nodeId?, fallback?}`, a live query without a
//!   reading said as "no reading yet for `$name`");
//! - tool `describe_component` `{name}`: props, types, parent and child rules, an example;
//! - tool `list_sources` `{}`: the host's query sources (`--sources`) with their argument
//!   and result schemas and descriptions, to write `$name = @Query("source", {args})`;
//! - resource `uiblocks://catalog`: the agent-facing catalog reference;
//! - resource `uiblocks://guide`: the writing guide (`uiblocks guide`), with the server's
//!   sources when it has them;
//! - prompt `write_ui_block`: the writing guide (with the server's sources) and how to use
//!   the tools.
//!
//! The tools are plain functions ([`check_reply`], [`preview_reply`],
//! [`describe_component`]); [`UiblocksMcp`] maps the protocol onto them. Built on `rmcp`,
//! the official Rust SDK, with its server and stdio transport only. Bounds: a request line
//! is at most rmcp's 16 MiB, `text` and `readings` at most 1 MiB each, and every compile and
//! evaluation runs under the language's work and time budgets (`UiLimits`).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value as Json, json};
use ui_compiler::{Block, CompileOptions, QuerySchemas, UiCompiler, UiState, compile_block};
use ui_core::catalog::{self, Component};
use ui_core::{Record, SystemClock, UiLimits, Value, ViewNode};

use crate::cli::SourceArgs;
use crate::commands::check::{Counts, FileReport, Sources, finding_json, render_human};
use crate::examples::component_example;

/// The URI of the catalog resource.
pub const CATALOG_URI: &str = "uiblocks://catalog";

/// The URI of the guide resource.
pub const GUIDE_URI: &str = "uiblocks://guide";

/// The largest `text` a tool accepts (bytes); a reply is far smaller.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// The largest `readings` a tool accepts (bytes of compact JSON).
pub const MAX_READINGS_BYTES: usize = 1 << 20;

/// A tool's answer: text for people and the structured content.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    /// Readable text.
    pub text: String,
    /// The `structuredContent`.
    pub structured: Json,
    /// Whether the call failed (an unknown component, a reading of no query).
    pub is_error: bool,
}

fn source_args(block: bool) -> SourceArgs {
    SourceArgs {
        fence_language: ui_core::FENCE_LANGUAGE.to_owned(),
        block,
    }
}

/// `check_reply`: the findings of `text` (a whole reply, or one block body with `block`),
/// compiled as final unless `is_final` is false.
pub fn check_reply(
    text: &str,
    is_final: bool,
    block: bool,
    sources: Option<Arc<Sources>>,
) -> ToolAnswer {
    let report = FileReport::with_sources(text.to_owned(), &source_args(block), is_final, sources);
    let mut findings = Vec::new();
    let mut counts = Counts {
        blocks: report.blocks.len(),
        ..Counts::default()
    };
    let map = ui_core::text::Utf16Map::new(&report.text);
    for index in 0..report.blocks.len() {
        let offset = findings.len();
        let block_findings = report.findings(index);
        counts.add(&block_findings);
        for f in block_findings {
            let mut v = finding_json(&f, &map);
            v["block"] = json!(report.blocks[index].id);
            if let Some(cause) = f.cause {
                v["cause"] = json!(offset + cause);
            }
            findings.push(v);
        }
    }
    let Counts {
        blocks,
        errors,
        notes,
        warnings,
    } = counts;
    let mut out = render_human(&report, "reply", &annotate_snippets::Renderer::plain());
    out.push_str(&format!(
        "{}: {}\n",
        if errors == 0 { "ok" } else { "failed" },
        counts.summary()
    ));
    if blocks == 0 {
        out.push_str("No ```ui fence found; pass block: true to check a block body.\n");
    }
    ToolAnswer {
        text: out,
        structured: json!({"findings": findings, "blocks": blocks, "errors": errors, "notes": notes, "warnings": warnings}),
        is_error: false,
    }
}

/// Accepts every query source, so that a preview can use sample readings for queries of
/// sources this process does not know.
struct AnySource;

impl QuerySchemas for AnySource {
    fn check(&self, _: &str, _: &Value) -> Option<Result<(), String>> {
        Some(Ok(()))
    }
}

/// `preview_reply`: what a person will see — the reply's fallback text and an outline of
/// each block's evaluated view, with `readings` (query name → sample result) as the first
/// readings of the queries. Every query source is taken as registered.
pub fn preview_reply(text: &str, readings: &Record, block: bool) -> ToolAnswer {
    // The same work and time budgets as a host's compile and evaluation.
    let clock = SystemClock::new();
    let limits = UiLimits::DEFAULT;
    let options = CompileOptions {
        is_final: true,
        query_schemas: Some(&AnySource),
        clock: Some(&clock),
        ..CompileOptions::default()
    };
    let blocks: Vec<Arc<Block>> = if block {
        vec![Arc::new(compile_block(text, "block", &options))]
    } else {
        UiCompiler::new().compile(text, &options)
    };
    let mut unused: Vec<&str> = readings.keys().map(String::as_str).collect();
    let mut outlines = Vec::new();
    let mut shown = Vec::new();
    let mut text_out = String::new();
    for (index, b) in blocks.iter().enumerate() {
        let mine: Record = readings
            .iter()
            .filter(|(name, _)| b.queries.contains_key(name.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        unused.retain(|name| !mine.contains_key(*name));
        let mut with_readings = (**b).clone();
        if let Ok(fallback) = ui_fallback::query_fallback(b, &mine, limits, &clock) {
            with_readings.fallback = fallback;
        }
        shown.push(with_readings);
        let mut outline = String::new();
        // What the evaluation could not draw: its diagnostics, each node drawn as its
        // fallback, or the failure of the whole evaluation (the compile's diagnostics are
        // counted apart).
        let mut errors = Vec::new();
        match UiState::new(b, limits).and_then(|mut state| {
            for (name, value) in &mine {
                state.set_query(name, value, b)?;
            }
            ui_compiler::evaluate_block(b, &state, limits, Some(&clock))
        }) {
            Ok(view) => {
                for node in &view.nodes {
                    outline_node(node, 0, &mut outline);
                    node_errors(node, &mut errors);
                }
                // Each failure once: a diagnostic about a node that drew its fallback is
                // that node's entry's message.
                let unread: Vec<&str> = b
                    .queries
                    .keys()
                    .map(String::as_str)
                    .filter(|name| !mine.contains_key(*name))
                    .collect();
                for d in &view.diagnostics {
                    let message = match unread.iter().find(|name| d.message.contains(**name)) {
                        Some(name) if d.code == ui_core::Code::RefusedAccess => format!(
                            "no reading yet for `{name}` (a live query): this part draws its \
                             fallback until the first reading (pass `readings` to preview it)"
                        ),
                        _ => d.message.clone(),
                    };
                    outline.push_str(&format!("! {}: {message}\n", d.code));
                    let known = d.node_id.as_ref().and_then(|id| {
                        errors.iter_mut().find(|e| {
                            e["nodeId"].as_str() == Some(id.as_str())
                                && e["code"].as_str() == Some(d.code.as_str())
                                && e.get("message").is_none()
                        })
                    });
                    match known {
                        Some(entry) => entry["message"] = json!(message),
                        None => {
                            let mut error = json!({"code": d.code.as_str(), "message": message});
                            if let Some(id) = &d.node_id {
                                error["nodeId"] = json!(id);
                            }
                            errors.push(error);
                        }
                    }
                }
            }
            Err(e) => {
                outline.push_str(&format!("! {}: {}\n", e.code, e.message));
                errors.push(json!({"code": e.code.as_str(), "message": e.message}));
            }
        }
        text_out.push_str(&format!("Block {} ({}):\n{outline}\n", index + 1, b.id));
        outlines.push(json!({
            "id": b.id,
            "outline": outline,
            "diagnostics": b.diagnostics.len(),
            "evaluationErrors": errors,
        }));
    }
    let fallback = if block {
        shown
            .first()
            .map(|b| b.fallback.clone())
            .unwrap_or_default()
    } else {
        ui_fallback::fallback_text(text, &shown)
    };
    let mut out = format!("Fallback text:\n{fallback}\n\n{text_out}");
    if !unused.is_empty() {
        out.push_str(&format!(
            "Readings for no query of the reply: {}\n",
            unused.join(", ")
        ));
    }
    ToolAnswer {
        text: out,
        structured: json!({"fallbackText": fallback, "blocks": outlines, "unusedReadings": unused}),
        is_error: false,
    }
}

/// Each node of `node`'s tree that the evaluation drew as its fallback: `{code, nodeId,
/// fallback}`.
fn node_errors(node: &ViewNode, out: &mut Vec<serde_json::Value>) {
    if let Some(code) = node.error {
        out.push(json!({"code": code.as_str(), "nodeId": node.id, "fallback": node.fallback}));
    }
    for child in &node.children {
        node_errors(child, out);
    }
}

/// One line per view node, indented by depth: `Type key=value … "text"`.
fn outline_node(node: &ViewNode, depth: usize, out: &mut String) {
    out.push_str(&"  ".repeat(depth));
    if node.kind == ui_compiler::TEXT_TYPE {
        let text = node
            .props
            .get("text")
            .map(Value::plain_text)
            .unwrap_or_default();
        out.push_str(&format!("{:?}\n", short(&text)));
        return;
    }
    out.push_str(&node.kind);
    for (key, value) in &node.props {
        let shown = match value {
            Value::String(s) => format!("{:?}", short(s)),
            _ => match (value.as_array(), value.as_record()) {
                (Some(items), _) => format!("[{} items]", items.len()),
                (_, Some(fields)) => format!("{{{} fields}}", fields.len()),
                _ => value.plain_text(),
            },
        };
        out.push_str(&format!(" {key}={shown}"));
    }
    for (prop, binding) in &node.bindings {
        out.push_str(&format!(" ({prop} bound to {})", binding.variable));
    }
    if let Some(code) = node.error {
        out.push_str(&format!(
            " [error {code}: drawn as {:?}]",
            short(&node.fallback)
        ));
    }
    out.push('\n');
    for child in &node.children {
        outline_node(child, depth + 1, out);
    }
}

/// At most 80 characters of `s`.
fn short(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(80) {
        Some((at, _)) => Cow::Owned(format!("{}…", &s[..at])),
        None => Cow::Borrowed(s),
    }
}

/// `list_sources`: the host's query sources, each `{name, description?, args, result?}` (the
/// JSON Schemas of its argument record and of its rows), from `--sources`; none without.
pub fn list_sources(sources: Option<&Sources>) -> ToolAnswer {
    let entries = sources.map(Sources::entries).unwrap_or_default();
    if entries.is_empty() {
        return ToolAnswer {
            text: "The host registered no query sources: write no @Query (a block that \
                   declares one fails with unknown_query)."
                .to_owned(),
            structured: json!({"sources": []}),
            is_error: false,
        };
    }
    let mut text = String::from(
        "Query sources (declare one as $name = @Query(\"source\", {args}) before any tag):\n",
    );
    let list: Vec<Json> = entries
        .iter()
        .map(|e| {
            text.push_str(&format!("- {}", e.name));
            if let Some(description) = &e.description {
                text.push_str(&format!(": {description}"));
            }
            text.push_str(&format!("\n  args: {}\n", e.args));
            if let Some(result) = &e.result {
                text.push_str(&format!("  result: {result}\n"));
            }
            let mut entry = json!({"name": e.name, "args": e.args});
            if let Some(description) = &e.description {
                entry["description"] = json!(description);
            }
            if let Some(result) = &e.result {
                entry["result"] = result.clone();
            }
            entry
        })
        .collect();
    ToolAnswer {
        text,
        structured: json!({"sources": list}),
        is_error: false,
    }
}

/// `describe_component`: the catalog entry of `name` with an example block.
pub fn describe_component(name: &str) -> ToolAnswer {
    let Some(component) = catalog::lookup(name) else {
        let names: Vec<&str> = catalog::components().iter().map(Component::name).collect();
        let lower = name.to_ascii_lowercase();
        let close: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| n.to_ascii_lowercase() == lower)
            .collect();
        let hint = if close.is_empty() {
            String::new()
        } else {
            format!(" Names are case-sensitive: {}.", close.join(", "))
        };
        return ToolAnswer {
            text: format!(
                "`{name}` is not in the catalog.{hint} Components: {}.",
                names.join(", ")
            ),
            structured: json!({"error": "unknown_component", "components": names}),
            is_error: true,
        };
    };
    let props: Vec<Json> = component
        .props()
        .iter()
        .map(|p| {
            json!({
                "name": p.name(),
                "type": p.kind().to_string(),
                "required": p.required(),
                "whenAbsent": p.when_absent(),
            })
        })
        .collect();
    let example = component_example(component.name()).unwrap_or_default();
    let mut text = format!(
        "{} ({} group): {}\n",
        component.name(),
        component.group().id(),
        component.description()
    );
    if component.props().is_empty() {
        text.push_str("Props: none.\n");
    } else {
        text.push_str(
            "Props (an optional prop left out stays absent, there are no schema defaults; \
             → says what leaving it out means):\n",
        );
        for p in component.props() {
            let req = match (p.required(), p.when_absent()) {
                (true, _) => "required".to_owned(),
                (false, Some(absent)) => format!("optional; absent → {absent}"),
                (false, None) => "optional".to_owned(),
            };
            text.push_str(&format!("  {}: {} ({req})\n", p.name(), p.kind()));
        }
    }
    if let Some(parent) = component.parent() {
        text.push_str(&format!("Must stand inside: {parent}\n"));
    }
    if let Some(children) = component.children() {
        text.push_str(&format!(
            "Children: only {} (plus text, Show and Each)\n",
            children.join(", ")
        ));
    }
    if let Some(binding) = component.binding() {
        text.push_str(&format!(
            "Binds `{binding}` to local state: {binding}={{$name}}\n"
        ));
    }
    if let Some(action) = component.action() {
        text.push_str(&format!(
            "Acts through `{action}`: {{@Set($name, literal)}}, {{@Reset($name)}} or {{@Reset()}}\n"
        ));
    }
    if let Some(rule) = component.cross_prop_rule() {
        text.push_str(&format!("Also: {rule}\n"));
    }
    text.push_str(&format!("Example:\n```ui\n{example}\n```\n"));
    ToolAnswer {
        text,
        structured: json!({
            "name": component.name(),
            "group": component.group().id(),
            "description": component.description(),
            "props": props,
            "parent": component.parent(),
            "children": component.children(),
            "binding": component.binding(),
            "action": component.action(),
            "rule": component.cross_prop_rule(),
            "example": example,
        }),
        is_error: false,
    }
}

/// The text of the `uiblocks://catalog` resource.
pub fn catalog_resource() -> String {
    catalog::reference_text(ui_core::FENCE_LANGUAGE)
}

/// The text of the `uiblocks://guide` resource: the writing guide, listing the host's
/// `sources` when the server has them.
pub fn guide_resource(sources: Option<&Sources>) -> String {
    crate::commands::guide::text(ui_core::FENCE_LANGUAGE, sources)
}

/// The text of the `write_ui_block` prompt: the writing guide (with the host's `sources`
/// when given) and how to use the tools, for a reply about `task` when given.
pub fn write_ui_block_prompt(task: Option<&str>, sources: Option<&Sources>) -> String {
    let mut text = guide_resource(sources);
    text.push_str(
        "\nBefore you send the reply, call the tool check_reply with the whole reply: fix every \
         error, and every warning unless you mean it. Call preview_reply with sample readings \
         to see what a person will see, describe_component when unsure of a component, and \
         list_sources for the host's live query sources.\n",
    );
    if let Some(task) = task.filter(|t| !t.trim().is_empty()) {
        text.push_str(&format!("\nWrite a reply with a UI block for: {task}\n"));
    }
    text
}

fn schema(value: Json) -> Arc<JsonObject> {
    match value {
        Json::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The four tools with their input schemas.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "check_reply",
            "Check a reply (or one ui block body with block: true) the way `uiblocks check` does: \
             errors (the block is wrong) and warnings (lints) with line, column and suggested fixes.",
            schema(json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The whole reply in Markdown, or a block body with block: true."},
                    "final": {"type": "boolean", "description": "Check as the finished reply (default true); false checks a streaming prefix."},
                    "block": {"type": "boolean", "description": "The text is one block body without fences (default false)."}
                },
                "required": ["text"]
            })),
        ),
        Tool::new(
            "preview_reply",
            "Show what a person will see: the reply's plain-text fallback and an outline of each \
             block's evaluated view, with readings as sample query results.",
            schema(json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The whole reply, or a block body with block: true."},
                    "readings": {"type": "object", "description": "Sample results by query name, e.g. {\"$runs\": [{\"name\": \"build\"}]}.", "additionalProperties": true},
                    "block": {"type": "boolean", "description": "The text is one block body without fences (default false)."}
                },
                "required": ["text"]
            })),
        ),
        Tool::new(
            "describe_component",
            "Describe one catalog component: its props and their types, parent and child rules, \
             binding or action, and an example block.",
            schema(json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The component name, e.g. Table."}},
                "required": ["name"]
            })),
        ),
        Tool::new(
            "list_sources",
            "List the host's live query sources: each name with its description, the JSON \
             Schema of its arguments and of its rows, for `$name = @Query(\"source\", {args})`.",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

fn string_arg<'a>(args: &'a JsonObject, name: &str) -> Result<&'a str, String> {
    args.get(name)
        .and_then(Json::as_str)
        .ok_or_else(|| format!("`{name}` must be a string"))
}

fn bool_arg(args: &JsonObject, name: &str, default: bool) -> Result<bool, String> {
    match args.get(name) {
        None | Some(Json::Null) => Ok(default),
        Some(Json::Bool(b)) => Ok(*b),
        // The Inspector CLI passes `--tool-arg final=false` as a string.
        Some(Json::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(_) => Err(format!("`{name}` must be a boolean")),
    }
}

fn text_arg(args: &JsonObject) -> Result<&str, String> {
    let text = string_arg(args, "text")?;
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!("`text` is longer than {MAX_TEXT_BYTES} bytes"));
    }
    Ok(text)
}

fn readings_arg(args: &JsonObject) -> Result<Record, String> {
    let raw = match args.get("readings") {
        None | Some(Json::Null) => return Ok(Record::default()),
        // The Inspector CLI passes `--tool-arg readings={…}` as a string.
        Some(Json::String(s)) => s.clone(),
        Some(v @ Json::Object(_)) => v.to_string(),
        Some(_) => {
            return Err("`readings` must be an object".to_owned());
        }
    };
    if raw.len() > MAX_READINGS_BYTES {
        return Err(format!(
            "`readings` is longer than {MAX_READINGS_BYTES} bytes"
        ));
    }
    let value =
        Value::from_json_str(&raw).map_err(|e| format!("`readings` is not valid JSON: {e}"))?;
    value
        .as_record()
        .cloned()
        .ok_or_else(|| "`readings` must be an object".to_owned())
}

/// Runs the tool `name` on `args`, `check_reply` against the host's `sources` when given.
/// Arguments of the wrong shape are a failed call (`isError`, so the agent can correct them,
/// as MCP asks of input validation since 2025-11-25), not a protocol error.
///
/// # Errors
/// `invalid_params` for an unknown tool.
pub fn call(
    name: &str,
    args: &JsonObject,
    sources: Option<&Arc<Sources>>,
) -> Result<ToolAnswer, ErrorData> {
    let answer = match name {
        "check_reply" => text_arg(args).and_then(|text| {
            Ok(check_reply(
                text,
                bool_arg(args, "final", true)?,
                bool_arg(args, "block", false)?,
                sources.cloned(),
            ))
        }),
        "preview_reply" => text_arg(args).and_then(|text| {
            Ok(preview_reply(
                text,
                &readings_arg(args)?,
                bool_arg(args, "block", false)?,
            ))
        }),
        "describe_component" => string_arg(args, "name").map(describe_component),
        "list_sources" => Ok(list_sources(sources.map(Arc::as_ref))),
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{other}`"),
                None,
            ));
        }
    };
    Ok(answer.unwrap_or_else(|message| ToolAnswer {
        text: format!("The arguments of `{name}` are wrong: {message}."),
        structured: json!({"error": "invalid_arguments", "message": message}),
        is_error: true,
    }))
}

/// The MCP server of `uiblocks mcp`.
#[derive(Debug, Clone, Default)]
pub struct UiblocksMcp {
    sources: Option<Arc<Sources>>,
}

impl UiblocksMcp {
    /// A server whose `check_reply` checks queries against the host's `sources` (none:
    /// every `@Query` is `unknown_query`).
    pub fn new(sources: Option<Arc<Sources>>) -> Self {
        UiblocksMcp { sources }
    }
}

impl ServerHandler for UiblocksMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new("uiblocks", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Checks and previews replies holding ```ui blocks. Read uiblocks://guide before \
             writing one (the language, every component and its values, the host's sources; \
             list_sources lists the sources alone); call check_reply with the whole reply \
             before sending it.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let answer = call(&request.name, &args, self.sources.as_ref())?;
        let mut result = if answer.is_error {
            CallToolResult::error(vec![ContentBlock::text(answer.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(answer.text)])
        };
        result.structured_content = Some(answer.structured);
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(CATALOG_URI, "catalog")
                .with_description(
                    "The uiblocks component catalog and language reference for agents",
                )
                .with_mime_type("text/plain"),
            Resource::new(GUIDE_URI, "guide")
                .with_description(
                    "The guide to writing ```ui blocks: syntax, queries and the host's sources, \
                     every component with its props' values, examples",
                )
                .with_mime_type("text/markdown"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (text, uri) = match request.uri.as_str() {
            CATALOG_URI => (catalog_resource(), CATALOG_URI),
            GUIDE_URI => (guide_resource(self.sources.as_deref()), GUIDE_URI),
            other => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {other}"),
                    None,
                ));
            }
        };
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri)]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut task = PromptArgument::new("task");
        task.description = Some("What the reply should show (optional)".to_owned());
        task.required = Some(false);
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "write_ui_block",
            Some(
                "The guide to writing a reply with ```ui blocks (with the host's sources), \
                 then checking it with check_reply",
            ),
            Some(vec![task]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "write_ui_block" {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        }
        let task = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("task"))
            .and_then(Json::as_str);
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            write_ui_block_prompt(task, self.sources.as_deref()),
        )])
        .into())
    }
}

/// Serves [`UiblocksMcp`] on standard input and output until the client closes them.
///
/// # Errors
/// When the session cannot start or ends with a transport error.
pub async fn serve_stdio(server: UiblocksMcp) -> anyhow::Result<()> {
    let service = server.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
