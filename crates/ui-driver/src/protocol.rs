//! One request line in, one answer out: the operations of `driver.md` over the pure crates.
//!
//! The driver only maps requests to the libraries; every rule lives there. Half a
//! surrogate pair, in a request or where a `stream` prefix cuts a pair, reads as U+FFFD
//! (one UTF-16 unit like the half), so offsets and ids stay the host's.

use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value as Json, json};
use ui_compiler::expr::{evaluate, parse_expression};
use ui_compiler::{
    Block, CompileOptions, JsonSchemas, UiCompiler, UiState, View, ViewNode, compile_block,
    evaluate_block, has_fence, input_values, may_reference_host, query_arguments, resolve_choice,
    validated_state,
};
use ui_core::{
    Budget, Clock, Failure, FrozenClock, HostLimits, Record, SystemClock, UiLimits, Value, catalog,
};

/// A failed operation: a stable code and a message.
#[derive(Debug, Clone)]
pub(crate) struct DriverError {
    /// A spec failure code, or a `driver:*` code.
    code: String,
    /// Text for people.
    message: String,
}

impl From<Failure> for DriverError {
    fn from(f: Failure) -> Self {
        DriverError {
            code: f.code.as_str().to_owned(),
            message: f.message.into(),
        }
    }
}

impl From<ui_core::LimitsError> for DriverError {
    fn from(e: ui_core::LimitsError) -> Self {
        Failure::from(e).into()
    }
}

fn driver_error(code: &str, message: impl Into<String>) -> DriverError {
    DriverError {
        code: code.to_owned(),
        message: message.into(),
    }
}

fn error_json(e: &DriverError) -> Json {
    json!({"code": e.code, "message": e.message})
}

fn failure_json(f: &Failure) -> Json {
    json!({"code": f.code.as_str(), "message": &*f.message})
}

/// Appends the answer to the request `line` (one JSON object, without its line feed) to
/// `buffer` as compact JSON, without a line feed. A line that is not JSON answers
/// `driver:bad_json`; an operation that fails answers `ok: false` with its `error`.
///
/// # Errors
/// Only when the answer cannot be written as JSON (never for the answers of this crate's
/// types; the error names what failed).
pub fn answer_line(line: &str, buffer: &mut Vec<u8>) -> std::io::Result<()> {
    answer_line_then(line, buffer, |_| Ok(()))
}

/// [`answer_line`], then `then` with the buffer while the request and its answer are still
/// alive: a caller that sends the answer in `then` frees the compiled blocks (a few percent
/// of a compile request) after the host has its answer, not before.
///
/// # Errors
/// [`answer_line`]'s, and `then`'s.
pub fn answer_line_then(
    line: &str,
    buffer: &mut Vec<u8>,
    then: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match parse_line(line) {
        Ok(request) => {
            let response = respond(&request);
            write_response(buffer, &response)?;
            then(buffer)
        }
        Err(e) => {
            write_json(buffer, &bad_json(&e))?;
            then(buffer)
        }
    }
}

/// Appends `value` to `buffer` as compact JSON: through sonic-rs with the `speedups`
/// feature (`driver/speedups.rs` says why), through serde_json without; the same bytes.
pub(crate) fn write_json<T: Serialize + ?Sized>(
    buffer: &mut Vec<u8>,
    value: &T,
) -> std::io::Result<()> {
    #[cfg(feature = "speedups")]
    {
        crate::speedups::write_json(buffer, value)
    }
    #[cfg(not(feature = "speedups"))]
    {
        serde_json::to_writer(buffer, value).map_err(std::io::Error::from)
    }
}

/// Appends the answer `response` to `buffer` as compact JSON: with the `speedups` feature,
/// a `compile` answer's blocks are written by hand and the rest through sonic-rs
/// (`driver/speedups.rs` says why); without it, through serde_json. The same bytes.
fn write_response(buffer: &mut Vec<u8>, response: &Response<'_>) -> std::io::Result<()> {
    #[cfg(feature = "speedups")]
    {
        crate::speedups::write_response(buffer, response)
    }
    #[cfg(not(feature = "speedups"))]
    {
        write_json(buffer, response)
    }
}

fn bad_json(e: &serde_json::Error) -> Json {
    json!({
        "ok": false,
        "error": {"code": "driver:bad_json", "message": e.to_string()},
    })
}

/// One request line as JSON. Half a surrogate pair, which a JavaScript host's string may
/// hold and `JSON.stringify` writes as a lone `\u` escape, reads as U+FFFD: one UTF-16
/// unit, like the half, so every offset and id in the answer is the one the host counts
/// ([`ui_core::text::json_lone_surrogates_replaced`]).
fn parse_line(line: &str) -> serde_json::Result<Json> {
    serde_json::from_str(&ui_core::text::json_lone_surrogates_replaced(line))
}

/// Answers one request line.
pub fn handle_line(line: &str) -> Json {
    match parse_line(line) {
        Ok(request) => handle(&request),
        Err(e) => bad_json(&e),
    }
}

/// Answers one parsed request.
pub fn handle(request: &Json) -> Json {
    serde_json::to_value(respond(request)).unwrap_or(Json::Null)
}

/// The answer to one request, serialized straight from the compiled types.
pub(crate) fn respond(request: &Json) -> Response<'_> {
    let op = request.get("op").unwrap_or(&Json::Null);
    let result = match op.as_str() {
        Some("compile") => Request::new(request).and_then(|r| r.compile()),
        Some("evaluate") => Request::new(request).and_then(|r| r.evaluate()),
        Some("expression") => Request::new(request)
            .and_then(|r| r.expression())
            .map(fields),
        Some("stream") => Request::new(request).and_then(|r| r.stream()),
        Some("text") => Request::new(request).map(|r| fields(r.text())),
        Some("links") => Request::new(request).and_then(|r| r.links()).map(fields),
        Some("args") => Request::new(request).and_then(|r| r.args()).map(fields),
        Some("choice") => Request::new(request).and_then(|r| r.choice()).map(fields),
        Some("fallback") => Request::new(request).and_then(|r| r.fallback()).map(fields),
        _ => Err(driver_error(
            "driver:unknown_op",
            format!("Unknown op {op}."),
        )),
    };
    Response {
        op,
        tag: request.get("tag"),
        result,
    }
}

/// The fields of an answer built as a JSON object.
fn fields(answer: Json) -> Answer {
    match answer {
        Json::Object(fields) => Answer::Fields(fields),
        other => Answer::Fields(Map::from_iter([("result".to_owned(), other)])),
    }
}

/// A response line: `op`, `tag` (echoed), `ok`, then the answer's fields or `error`.
pub(crate) struct Response<'r> {
    pub(crate) op: &'r Json,
    pub(crate) tag: Option<&'r Json>,
    pub(crate) result: Result<Answer, DriverError>,
}

/// The fields of a successful answer.
pub(crate) enum Answer {
    /// Fields built as JSON (the operations whose answers are small).
    Fields(Map<String, Json>),
    /// `compile`: the blocks and the reply's fallback text.
    Compile {
        blocks: Vec<Arc<Block>>,
        fallback_text: String,
    },
    /// `evaluate`: one entry per selected block.
    Evaluate(Vec<Evaluated>),
    /// `stream`: the blocks of each prefix (by UTF-16 length), then of the final text.
    Stream {
        prefixes: Vec<(usize, Vec<Arc<Block>>)>,
        last: Vec<Arc<Block>>,
    },
}

/// One block of an `evaluate` answer.
pub(crate) struct Evaluated {
    index: usize,
    id: String,
    view: View,
    scope: Record,
    inputs: Record,
    applied: Vec<Json>,
}

impl Serialize for Response<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("op", self.op)?;
        if let Some(tag) = self.tag {
            map.serialize_entry("tag", tag)?;
        }
        map.serialize_entry("ok", &self.result.is_ok())?;
        match &self.result {
            Err(e) => map.serialize_entry("error", &error_json(e))?,
            Ok(Answer::Fields(fields)) => {
                for (key, value) in fields {
                    map.serialize_entry(key, value)?;
                }
            }
            Ok(Answer::Compile {
                blocks,
                fallback_text,
            }) => {
                map.serialize_entry("blocks", blocks)?;
                map.serialize_entry("fallbackText", fallback_text)?;
            }
            Ok(Answer::Evaluate(entries)) => map.serialize_entry("blocks", entries)?,
            Ok(Answer::Stream { prefixes, last }) => {
                let prefixes: Vec<Prefix<'_>> = prefixes
                    .iter()
                    .map(|(length, blocks)| Prefix {
                        length: *length,
                        blocks: Summaries(blocks),
                    })
                    .collect();
                map.serialize_entry("prefixes", &prefixes)?;
                map.serialize_entry("final", &Summaries(last))?;
            }
        }
        map.end()
    }
}

impl Serialize for Evaluated {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("index", &self.index)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("nodes", &self.view.nodes)?;
        map.serialize_entry("diagnostics", &self.view.diagnostics)?;
        map.serialize_entry("scope", &self.scope)?;
        map.serialize_entry("inputValues", &self.inputs)?;
        if !self.applied.is_empty() {
            map.serialize_entry("applied", &self.applied)?;
        }
        map.end()
    }
}

/// One prefix of a `stream` answer.
#[derive(serde::Serialize)]
struct Prefix<'a> {
    length: usize,
    blocks: Summaries<'a>,
}

/// Blocks summarised as `{id, start, end, complete, nodeIds, codes, fallback}`.
struct Summaries<'a>(&'a [Arc<Block>]);

impl Serialize for Summaries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|b| Summary(b)))
    }
}

struct Summary<'a>(&'a Block);

impl Serialize for Summary<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let b = self.0;
        let mut map = serializer.serialize_map(Some(7))?;
        map.serialize_entry("id", &b.id)?;
        map.serialize_entry("start", &b.start)?;
        map.serialize_entry("end", &b.end)?;
        map.serialize_entry("complete", &b.complete)?;
        // The top-level nodes only (`driver.md`, `stream`).
        map.serialize_entry("nodeIds", &TopLevelIds(b))?;
        map.serialize_entry("codes", &Codes(b))?;
        map.serialize_entry("fallback", &b.fallback)?;
        map.end()
    }
}

struct TopLevelIds<'a>(&'a Block);

impl Serialize for TopLevelIds<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.nodes.iter().map(|n| n.id.as_str()))
    }
}

struct Codes<'a>(&'a Block);

impl Serialize for Codes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.diagnostics.iter().map(|d| d.code.as_str()))
    }
}

/// The common fields of a request.
struct Request<'r> {
    raw: &'r Json,
    text: String,
    block: bool,
    id: String,
    is_final: bool,
    fence_language: String,
    latest_attachment: Option<String>,
    limits: UiLimits,
    eval_limits: UiLimits,
    /// The query fallback's limits: `evalLimits` is for evaluate, links, args and choice
    /// only (`driver.md`), as upstream's `uiQueryFallback` takes none.
    fallback_limits: UiLimits,
    schemas: Option<JsonSchemas>,
    frozen: bool,
}

/// Evaluation's time budget under the frozen clock (`driver.md`: `clock`), in ms.
const FROZEN_MILLISECONDS: u64 = 1_000_000_000;

fn str_field(raw: &Json, key: &str) -> Option<String> {
    raw.get(key).and_then(Json::as_str).map(str::to_owned)
}

impl<'r> Request<'r> {
    fn new(raw: &'r Json) -> Result<Self, DriverError> {
        let frozen = raw.get("clock").and_then(Json::as_str) != Some("real");
        let overrides = |key: &str| -> Result<UiLimits, DriverError> {
            let v = raw.get(key).map(Value::from).unwrap_or(Value::Null);
            Ok(UiLimits::DEFAULT.with_overrides(&v)?)
        };
        let limits = overrides("limits")?;
        let mut eval_limits = overrides("evalLimits")?;
        let mut fallback_limits = UiLimits::DEFAULT;
        if frozen {
            eval_limits = eval_limits.with("milliseconds", FROZEN_MILLISECONDS)?;
            fallback_limits = fallback_limits.with("milliseconds", FROZEN_MILLISECONDS)?;
        }
        Ok(Request {
            raw,
            text: str_field(raw, "text").unwrap_or_default(),
            block: raw.get("block").and_then(Json::as_bool).unwrap_or(false),
            id: str_field(raw, "id").unwrap_or_else(|| "reply".to_owned()),
            is_final: raw.get("final").and_then(Json::as_bool).unwrap_or(true),
            fence_language: str_field(raw, "fenceLanguage")
                .unwrap_or_else(|| ui_core::FENCE_LANGUAGE.to_owned()),
            latest_attachment: str_field(raw, "latestAttachment"),
            limits,
            eval_limits,
            fallback_limits,
            schemas: raw.get("querySchemas").map(JsonSchemas::from_json),
            frozen,
        })
    }

    fn clock(&self) -> Box<dyn Clock> {
        if self.frozen {
            Box::new(FrozenClock(0.0))
        } else {
            Box::new(SystemClock::new())
        }
    }

    fn options<'a>(&'a self, clock: &'a dyn Clock) -> CompileOptions<'a> {
        CompileOptions {
            id: self.id.clone(),
            is_final: self.is_final,
            limits: self.limits,
            latest_attachment: self.latest_attachment.clone(),
            query_schemas: self
                .schemas
                .as_ref()
                .map(|s| s as &dyn ui_compiler::QuerySchemas),
            fence_language: self.fence_language.clone(),
            clock: Some(clock),
            ..CompileOptions::default()
        }
    }

    fn compile_blocks(&self) -> Vec<Arc<Block>> {
        let clock = self.clock();
        let options = self.options(&*clock);
        if self.block {
            vec![Arc::new(compile_block(&self.text, &self.id, &options))]
        } else {
            UiCompiler::new().compile(&self.text, &options)
        }
    }

    fn fallback_text(&self, blocks: &[Arc<Block>]) -> String {
        if self.block {
            blocks
                .first()
                .map(|b| b.fallback.clone())
                .unwrap_or_default()
        } else {
            ui_fallback::fallback_text(&self.text, blocks)
        }
    }

    /// The blocks selected by `blockIndex` (all when absent), with their indices.
    fn selected<'b>(&self, blocks: &'b [Arc<Block>]) -> Vec<(usize, &'b Block)> {
        let only = self.raw.get("blockIndex").and_then(Json::as_u64);
        blocks
            .iter()
            .enumerate()
            .filter(|(i, _)| only.is_none_or(|o| o as usize == *i))
            .map(|(i, b)| (i, &**b))
            .collect()
    }

    /// `input` or `queries` for block `index`, honouring `perBlock`.
    fn per_block(&self, key: &str, index: usize) -> Record {
        let per_block = self.raw.get("perBlock").and_then(Json::as_bool) == Some(true);
        let source = self.raw.get(key);
        let source = if per_block {
            source.and_then(|s| s.get(index.to_string()))
        } else {
            source
        };
        match source.map(Value::from) {
            Some(Value::Record(r)) => Arc::unwrap_or_clone(r),
            _ => Record::default(),
        }
    }

    fn compile(&self) -> Result<Answer, DriverError> {
        let blocks = self.compile_blocks();
        let fallback_text = self.fallback_text(&blocks);
        Ok(Answer::Compile {
            blocks,
            fallback_text,
        })
    }

    fn evaluate(&self) -> Result<Answer, DriverError> {
        let blocks = self.compile_blocks();
        let presses = self.presses();
        let mut out = Vec::new();
        for (index, block) in self.selected(&blocks) {
            let (state, applied) = self.page_state(index, block, &presses)?;
            let view = self.view(block, &state)?;
            out.push(Evaluated {
                index,
                id: block.id.clone(),
                scope: state.scope()?,
                inputs: input_values(block, &state)?,
                view,
                applied,
            });
        }
        Ok(Answer::Evaluate(out))
    }

    /// The state a page builds: readings (declared queries only), raw input (declared
    /// variables only, as a person's edits), then each press. Returns the failures and
    /// presses as `applied` entries.
    fn page_state(
        &self,
        index: usize,
        block: &Block,
        presses: &[Json],
    ) -> Result<(UiState, Vec<Json>), DriverError> {
        let mut state = UiState::new(block, self.eval_limits)?;
        let mut applied = Vec::new();
        for (name, value) in &self.per_block("queries", index) {
            if !block.queries.contains_key(name) {
                continue;
            }
            if let Err(f) = state.set_query(name, value, block) {
                applied.push(json!({"setQuery": name, "error": failure_json(&f)}));
            }
        }
        for (name, value) in &self.per_block("input", index) {
            if !block.defaults.contains_key(name) {
                continue;
            }
            if let Err(f) = state.set(name, value) {
                applied.push(json!({"set": name, "error": failure_json(&f)}));
            }
        }
        for press in presses {
            if let Some(entry) = self.press(block, &mut state, press)? {
                applied.push(entry);
            }
        }
        Ok((state, applied))
    }

    /// The `queries` readings for block `index`, only those of names the block declares
    /// as queries (`driver.md`: evaluate, links, choice and fallback drop the rest).
    fn readings(&self, index: usize, block: &Block) -> Record {
        let mut readings = self.per_block("queries", index);
        readings.retain(|name, _| block.queries.contains_key(name));
        readings
    }

    fn presses(&self) -> Vec<Json> {
        self.raw
            .get("press")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default()
    }

    fn links(&self) -> Result<Json, DriverError> {
        let blocks = self.compile_blocks();
        let clock = self.clock();
        let mut out = Vec::new();
        for (index, block) in self.selected(&blocks) {
            let input = self.per_block("input", index);
            let queries = self.readings(index, block);
            let entry = match ui_links::link_targets(
                block,
                &input,
                &queries,
                self.eval_limits,
                &HostLimits::DEFAULT,
                &*clock,
            ) {
                Ok(targets) => json!({"index": index, "id": block.id,
                    "targets": serde_json::to_value(&targets).unwrap_or(Json::Null)}),
                Err(f) => json!({"index": index, "id": block.id, "error": failure_json(&f)}),
            };
            out.push(entry);
        }
        Ok(json!({"blocks": out}))
    }

    fn args(&self) -> Result<Json, DriverError> {
        let blocks = self.compile_blocks();
        let clock = self.clock();
        let only = str_field(self.raw, "name");
        let mut out = Vec::new();
        for (index, block) in self.selected(&blocks) {
            let input = self.per_block("input", index);
            // Every declared query, or only `name`: also when the block does not declare
            // it, which `query_arguments` answers with `invalid_query`.
            let names: Vec<&str> = match &only {
                Some(name) => vec![name.as_str()],
                None => block.queries.keys().map(String::as_str).collect(),
            };
            let mut args = Map::new();
            for name in names {
                let entry = match query_arguments(block, name, &input, self.eval_limits, &*clock) {
                    Ok(v) => json!({"value": serde_json::to_value(&v).unwrap_or(Json::Null)}),
                    Err(f) => json!({"error": failure_json(&f)}),
                };
                args.insert(name.to_owned(), entry);
            }
            let validated =
                match validated_state(block, &input, &Record::default(), self.eval_limits, &*clock)
                    .and_then(|s| s.scope())
                {
                    Ok(scope) => {
                        json!({"scope": serde_json::to_value(&scope).unwrap_or(Json::Null)})
                    }
                    Err(f) => json!({"error": failure_json(&f)}),
                };
            out.push(json!({"index": index, "id": block.id, "args": args, "validated": validated}));
        }
        Ok(json!({"blocks": out}))
    }

    fn choice(&self) -> Result<Json, DriverError> {
        let blocks = self.compile_blocks();
        let clock = self.clock();
        let presses = self.presses();
        let only = str_field(self.raw, "choice");
        let state_input = !presses.is_empty()
            || self.raw.get("choiceInput").and_then(Json::as_str) == Some("state");
        let mut out = Vec::new();
        for (index, block) in self.selected(&blocks) {
            let (state, _) = self.page_state(index, block, &presses)?;
            let input = if state_input {
                input_values(block, &state)?
            } else {
                self.per_block("input", index)
            };
            let queries = self.readings(index, block);
            let view = self.view(block, &state)?;
            let mut ids = Vec::new();
            match &only {
                Some(id) if id.starts_with(&format!("{}:", block.id)) => ids.push(id.clone()),
                Some(_) => {}
                None => view.walk(&mut |v| {
                    if v.kind == "Choice" && v.error.is_none() {
                        ids.push(v.id.clone());
                    }
                }),
            }
            let choices: Vec<Json> = ids
                .into_iter()
                .map(|id| {
                    match resolve_choice(block, &id, &input, &queries, self.eval_limits, &*clock) {
                        Ok(sel) => json!({"id": id,
                            "selection": serde_json::to_value(&sel).unwrap_or(Json::Null)}),
                        Err(f) => json!({"id": id, "error": failure_json(&f)}),
                    }
                })
                .collect();
            out.push(json!({"index": index, "id": block.id, "choices": choices}));
        }
        Ok(json!({"blocks": out}))
    }

    fn fallback(&self) -> Result<Json, DriverError> {
        let blocks = self.compile_blocks();
        let clock = self.clock();
        let mut out = Vec::new();
        for (index, block) in self.selected(&blocks) {
            let mut entry = json!({"index": index, "id": block.id, "fallback": block.fallback});
            if !block.queries.is_empty() {
                let readings = self.readings(index, block);
                match ui_fallback::query_fallback(block, &readings, self.fallback_limits, &*clock) {
                    Ok(text) => entry["queryFallback"] = Json::String(text),
                    Err(f) => entry["queryFallbackError"] = failure_json(&f),
                }
            }
            out.push(entry);
        }
        Ok(json!({"fallbackText": self.fallback_text(&blocks), "blocks": out}))
    }

    fn view(&self, block: &Block, state: &UiState) -> Result<View, DriverError> {
        let clock = self.clock();
        Ok(evaluate_block(
            block,
            state,
            self.eval_limits,
            Some(&*clock),
        )?)
    }

    /// Applies one press; `None` when the press names a node of another block.
    fn press(
        &self,
        block: &Block,
        state: &mut UiState,
        press: &Json,
    ) -> Result<Option<Json>, DriverError> {
        let view = self.view(block, state)?;
        let (echo, found): (Json, Option<&ViewNode>) = match press {
            Json::String(id) => {
                if !id.starts_with(&format!("{}:", block.id)) {
                    return Ok(None);
                }
                let mut found = None;
                view.walk(&mut |v| {
                    if found.is_none() && v.id == *id {
                        found = Some(v);
                    }
                });
                (press.clone(), found)
            }
            _ => {
                let n = press
                    .get("action")
                    .and_then(Json::as_u64)
                    .unwrap_or(u64::MAX);
                let mut seen = 0u64;
                let mut found = None;
                view.walk(&mut |v| {
                    if v.action.is_some() {
                        if seen == n && found.is_none() {
                            found = Some(v);
                        }
                        seen += 1;
                    }
                });
                (Json::String(format!("action#{n}")), found)
            }
        };
        let Some(node) = found else {
            return Ok(Some(json!({"press": echo, "error": {
                "code": "driver:no_node", "message": "No such node in the current evaluation."}})));
        };
        if node.action.is_none() {
            return Ok(Some(json!({"press": echo, "error": {
                "code": "driver:no_action", "message": "The node has no action."}})));
        }
        let node = node.clone();
        state.press(&node);
        Ok(Some(json!({"press": echo, "node": node.id, "ok": true})))
    }

    fn expression(&self) -> Result<Json, DriverError> {
        let clock = self.clock();
        let mut budget = Budget::new(self.limits, &*clock);
        let expr = parse_expression(&self.text, &mut budget)?;
        let vars = match self.raw.get("variables").map(Value::from) {
            Some(Value::Record(r)) => Arc::unwrap_or_clone(r),
            _ => Record::default(),
        };
        let ast = serde_json::to_value(&expr).unwrap_or(Json::Null);
        Ok(match evaluate(&expr, &vars, &mut budget) {
            Ok(v) => json!({"ast": ast, "value": serde_json::to_value(&v).unwrap_or(Json::Null)}),
            Err(f) => json!({"ast": ast, "error": failure_json(&f)}),
        })
    }

    fn text(&self) -> Json {
        let lang = &self.fence_language;
        json!({
            "catalogText": catalog::catalog_text(),
            "compactCatalog": catalog::compact_catalog(),
            "sessionNote": catalog::session_note(lang),
            "referenceText": catalog::reference_text(lang),
            "hasFence": has_fence(&self.text, lang),
            "mayReferenceHost": may_reference_host(&self.text),
        })
    }

    fn stream(&self) -> Result<Answer, DriverError> {
        let step = self
            .raw
            .get("step")
            .and_then(Json::as_u64)
            .filter(|&s| s > 0)
            .unwrap_or(64) as usize;
        let clock = self.clock();
        let mut options = self.options(&*clock);
        options.is_final = false;
        let mut compiler = UiCompiler::new();
        let map = ui_core::text::Utf16Map::new(&self.text);
        let total = map.utf16(self.text.len());
        let mut prefixes = Vec::new();
        let mut length = step;
        while length < total {
            let cut = map.byte(length);
            let prefix = if map.utf16(cut) == length {
                std::borrow::Cow::Borrowed(&self.text[..cut])
            } else {
                // The prefix ends inside a surrogate pair: its first half, which a Rust
                // string cannot hold, is U+FFFD (one unit, as the half is), so the prefix
                // is `length` units long, as a JavaScript host's would be.
                std::borrow::Cow::Owned([&self.text[..cut], "\u{fffd}"].concat())
            };
            prefixes.push((length, compiler.compile(&prefix, &options)));
            length += step;
        }
        options.is_final = true;
        let last = compiler.compile(&self.text, &options);
        Ok(Answer::Stream { prefixes, last })
    }
}
