//! A test host: JSON Schema sources whose reads a test controls, an in-memory store, and a
//! paused tokio clock.

#![allow(dead_code, unreachable_pub, missing_docs, clippy::new_without_default)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use ui_compiler::{CompileOptions, UiCompiler};
use ui_core::{FrozenClock, Value};
use ui_host::{
    ChatInfo, FnSource, HostError, LinkResolver, MemoryStore, QueryPayload, SourceRegistry,
    StoredItem, TokioClock, UiHost, UiQueries, UiRefusal, block_revision,
};
use ui_links::LinkTarget;

/// How the `slow` and `data` sources behave, set by a test.
#[derive(Debug, Default)]
pub struct Knobs {
    /// Reads started.
    pub reads: AtomicUsize,
    /// Reads that ended (returned or failed).
    pub ended: AtomicUsize,
    /// Milliseconds each read takes.
    pub delay_ms: AtomicUsize,
    /// 0 ok, 1 fail, 2 refuse, 3 deny in authorize.
    pub mode: AtomicUsize,
    /// Length of the string in the result (0: a small record).
    pub result_len: AtomicUsize,
}

pub struct TestHost {
    pub sources: SourceRegistry,
    pub knobs: Arc<Knobs>,
    pub capture: std::sync::Mutex<Result<serde_json::Value, HostError>>,
    pub links: bool,
}

impl TestHost {
    pub fn new() -> Arc<Self> {
        let knobs = Arc::new(Knobs::default());
        let mut sources = SourceRegistry::new();
        let k = Arc::clone(&knobs);
        let read_knobs = Arc::clone(&knobs);
        let source = FnSource::from_json_schemas(
            &json!({"type": "object", "properties": {
                "branch": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
                "required": ["branch"], "additionalProperties": false}),
            &json!({}),
            move |request| {
                let k = Arc::clone(&read_knobs);
                async move {
                    k.reads.fetch_add(1, Ordering::SeqCst);
                    let delay = k.delay_ms.load(Ordering::SeqCst) as u64;
                    if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    k.ended.fetch_add(1, Ordering::SeqCst);
                    match k.mode.load(Ordering::SeqCst) {
                        1 => return Err(HostError::message("the CI server is down")),
                        2 => {
                            return Err(
                                UiRefusal::new("outside-project", "not your project").into()
                            );
                        }
                        _ => {}
                    }
                    let len = k.result_len.load(Ordering::SeqCst);
                    if len > 0 {
                        // `{"<key>":1}` is `len` bytes of JSON; record keys cost the copy
                        // budget nothing, so only the byte limit can refuse it.
                        return Ok(Value::from_json_str(&format!(
                            r#"{{"{}":1}}"#,
                            "k".repeat(len - 6)
                        ))
                        .unwrap());
                    }
                    let branch = request.args.get("branch").cloned().unwrap_or_default();
                    Ok(Value::from_json_str(&format!(
                        r#"[{{"name": "run", "branch": {}, "ok": true}}]"#,
                        branch.to_js_json()
                    ))
                    .unwrap())
                }
            },
        )
        .unwrap()
        .with_authorize(move |_, _, _| {
            let k = Arc::clone(&k);
            async move {
                if k.mode.load(Ordering::SeqCst) == 3 {
                    return Err(UiRefusal::new("outside-project", "revoked").into());
                }
                Ok(())
            }
        });
        sources.register("ci.runs", source);
        Arc::new(TestHost {
            sources,
            knobs,
            capture: std::sync::Mutex::new(Ok(json!({"projects": ["web"]}))),
            links: true,
        })
    }
}

#[async_trait]
impl UiHost for TestHost {
    async fn capture(&self, _info: &ChatInfo) -> Result<Value, HostError> {
        self.capture
            .lock()
            .unwrap()
            .clone()
            .map(|json| Value::from(&json))
    }

    fn sources(&self) -> &SourceRegistry {
        &self.sources
    }

    fn links(&self) -> Option<&dyn LinkResolver> {
        self.links.then_some(self as &dyn LinkResolver)
    }
}

#[async_trait]
impl LinkResolver for TestHost {
    async fn link(
        &self,
        _info: &ChatInfo,
        _access: &Value,
        target: &LinkTarget,
    ) -> Result<serde_json::Value, HostError> {
        match target {
            LinkTarget::File { path, .. } if path.starts_with("secret") => {
                Err(UiRefusal::new("outside-project", "not yours").into())
            }
            _ => Ok(json!({"state": "chip", "target": target, "label": "ok"})),
        }
    }
}

/// A service over a fresh store with one chat `c1` (and `c2`).
pub struct World {
    pub host: Arc<TestHost>,
    pub store: Arc<MemoryStore>,
    pub service: Arc<UiQueries>,
}

pub const REPLY: &str = "Runs:\n```ui\n$branch = \"main\"\n$runs = @Query(\"ci.runs\", {branch: $branch, limit: 5})\n<Summary>{@Count($runs)} runs</Summary>\n<Segmented value={$branch}><Option value=\"main\">main</Option><Option value=\"dev\">dev</Option></Segmented>\n<File path=\"src/app.rs\" line={3}>app</File>\n<Choices><Choice context=\"Rerun the failed jobs\">Rerun</Choice><Choice>Ignore</Choice></Choices>\n```\n";

impl World {
    pub fn new() -> Self {
        Self::with_host(TestHost::new())
    }

    pub fn with_host(host: Arc<TestHost>) -> Self {
        let store = Arc::new(MemoryStore::new());
        for chat in ["c1", "c2"] {
            store.put_chat(ChatInfo {
                chat_id: chat.to_owned(),
                data: Value::Null,
            });
        }
        let service = UiQueries::new(
            host.clone(),
            store.clone(),
            Arc::new(TokioClock::starting_at(1_000_000)),
        );
        World {
            host,
            store,
            service,
        }
    }

    /// Compiles `text` as a final reply with the host's schemas and stores it as item
    /// `item` of `chat`, with revisions. Returns the block ids and revisions.
    pub fn put_reply(&self, chat: &str, item: &str, text: &str) -> Vec<(String, String)> {
        let clock = FrozenClock(0.0);
        let options = CompileOptions {
            id: item.to_owned(),
            is_final: true,
            query_schemas: Some(&self.host.sources),
            clock: Some(&clock),
            ..CompileOptions::default()
        };
        let blocks: Vec<Arc<ui_compiler::Block>> = UiCompiler::new()
            .compile(text, &options)
            .into_iter()
            .map(|b| {
                let mut b = (*b).clone();
                b.revision = Some(block_revision(&b));
                Arc::new(b)
            })
            .collect();
        let ids = blocks
            .iter()
            .map(|b| (b.id.clone(), b.revision.clone().unwrap()))
            .collect();
        self.store.put_item(
            chat,
            StoredItem {
                id: item.to_owned(),
                assistant: true,
                text: text.to_owned(),
                blocks,
                ..StoredItem::default()
            },
        );
        ids
    }

    pub fn payload(
        &self,
        chat: &str,
        item: &str,
        block: &(String, String),
        query: &str,
    ) -> QueryPayload {
        QueryPayload {
            chat_id: chat.to_owned(),
            item_id: item.to_owned(),
            block_id: block.0.clone(),
            revision: block.1.clone(),
            query: query.to_owned(),
            values: ui_core::Record::new(),
        }
    }

    pub fn reads(&self) -> usize {
        self.host.knobs.reads.load(Ordering::SeqCst)
    }
}

pub fn set(knob: &AtomicUsize, value: usize) {
    knob.store(value, Ordering::SeqCst);
}

pub async fn advance(ms: u64) {
    tokio::time::advance(Duration::from_millis(ms)).await;
}
