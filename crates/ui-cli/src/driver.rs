//! The JSON-lines driver (`driver.md`): one request per line in, one response per line out.
//!
//! The driver only maps requests to the libraries; every rule lives there.

use std::io::{BufRead, Write};
use std::sync::Arc;

use serde_json::{Map, Value as Json, json};
use ui_compiler::expr::{evaluate, parse_expression};
use ui_compiler::{
    Block, CompileOptions, UiCompiler, UiState, View, ViewNode, compile_block, evaluate_block,
    has_fence, input_values, may_reference_host, query_arguments, resolve_choice, validated_state,
};
use ui_core::{Budget, Clock, Failure, FrozenClock, Record, SystemClock, UiLimits, Value, catalog};

use ui_host::JsonSchemas;

/// A failed operation: a stable code and a message.
#[derive(Debug, Clone)]
pub struct DriverError {
    /// A spec failure code, or a `driver:*` code.
    pub code: String,
    /// Text for people.
    pub message: String,
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

/// Runs the driver over `input` until it ends, writing one response per request line.
///
/// # Errors
/// Only I/O errors of `input` or `output`.
pub fn run(input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let response = handle_line(&line);
        serde_json::to_writer(&mut output, &response)?;
        output.write_all(b"\n")?;
        output.flush()?;
    }
    Ok(())
}

/// Answers one request line.
pub fn handle_line(line: &str) -> Json {
    match serde_json::from_str::<Json>(line) {
        Ok(request) => handle(&request),
        Err(e) => json!({
            "ok": false,
            "error": {"code": "driver:bad_json", "message": e.to_string()},
        }),
    }
}

/// Answers one parsed request.
pub fn handle(request: &Json) -> Json {
    let op = request.get("op").cloned().unwrap_or(Json::Null);
    let result = match op.as_str() {
        Some("compile") => Request::new(request).and_then(|r| r.compile()),
        Some("evaluate") => Request::new(request).and_then(|r| r.evaluate()),
        Some("expression") => Request::new(request).and_then(|r| r.expression()),
        Some("stream") => Request::new(request).and_then(|r| r.stream()),
        Some("text") => Request::new(request).map(|r| r.text()),
        Some("links") => Request::new(request).and_then(|r| r.links()),
        Some("args") => Request::new(request).and_then(|r| r.args()),
        Some("choice") => Request::new(request).and_then(|r| r.choice()),
        Some("fallback") => Request::new(request).and_then(|r| r.fallback()),
        _ => Err(driver_error(
            "driver:unknown_op",
            format!("Unknown op {op}."),
        )),
    };
    let mut out = Map::new();
    out.insert("op".to_owned(), op);
    if let Some(tag) = request.get("tag") {
        out.insert("tag".to_owned(), tag.clone());
    }
    match result {
        Ok(Json::Object(fields)) => {
            out.insert("ok".to_owned(), Json::Bool(true));
            out.extend(fields);
        }
        Ok(other) => {
            out.insert("ok".to_owned(), Json::Bool(true));
            out.insert("result".to_owned(), other);
        }
        Err(e) => {
            out.insert("ok".to_owned(), Json::Bool(false));
            out.insert("error".to_owned(), error_json(&e));
        }
    }
    Json::Object(out)
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
    schemas: Option<JsonSchemas>,
    frozen: bool,
}

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
        if frozen {
            eval_limits = eval_limits.with("milliseconds", 1_000_000_000)?;
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

    fn compile(&self) -> Result<Json, DriverError> {
        let blocks = self.compile_blocks();
        Ok(json!({
            "blocks": blocks.iter().map(|b| serde_json::to_value(&**b).unwrap_or(Json::Null)).collect::<Vec<_>>(),
            "fallbackText": self.fallback_text(&blocks),
        }))
    }

    fn evaluate(&self) -> Result<Json, DriverError> {
        let blocks = self.compile_blocks();
        let presses = self.presses();
        let mut out = Vec::new();
        for (index, block) in self.selected(&blocks) {
            let (state, applied) = self.page_state(index, block, &presses)?;
            let view = self.view(block, &state)?;
            let scope = state.scope()?;
            let inputs = input_values(block, &state)?;
            let mut entry = json!({
                "index": index,
                "id": block.id,
                "nodes": serde_json::to_value(&view.nodes).unwrap_or(Json::Null),
                "diagnostics": serde_json::to_value(&view.diagnostics).unwrap_or(Json::Null),
                "scope": serde_json::to_value(&scope).unwrap_or(Json::Null),
                "inputValues": serde_json::to_value(&inputs).unwrap_or(Json::Null),
            });
            if !applied.is_empty() {
                entry["applied"] = Json::Array(applied);
            }
            out.push(entry);
        }
        Ok(json!({"blocks": out}))
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
            let entry =
                match ui_links::link_targets(block, &input, &queries, self.eval_limits, &*clock) {
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
                match ui_fallback::query_fallback(block, &readings, self.eval_limits, &*clock) {
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

    fn stream(&self) -> Result<Json, DriverError> {
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
            let prefix = &self.text[..cut];
            let blocks = compiler.compile(prefix, &options);
            prefixes.push(json!({"length": length, "blocks": summaries(&blocks)}));
            length += step;
        }
        options.is_final = true;
        let blocks = compiler.compile(&self.text, &options);
        Ok(json!({"prefixes": prefixes, "final": summaries(&blocks)}))
    }
}

fn summaries(blocks: &[Arc<Block>]) -> Json {
    Json::Array(
        blocks
            .iter()
            .map(|b| {
                // The top-level nodes only (`driver.md`, `stream`).
                let ids: Vec<&str> = b.nodes.iter().map(|n| n.id.as_str()).collect();
                let codes: Vec<&str> = b.diagnostics.iter().map(|d| d.code.as_str()).collect();
                json!({
                    "id": b.id, "start": b.start, "end": b.end, "complete": b.complete,
                    "nodeIds": ids, "codes": codes, "fallback": b.fallback,
                })
            })
            .collect(),
    )
}
