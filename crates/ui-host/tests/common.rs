//! A test host: JSON Schema sources whose reads a test controls, an in-memory store, and a
//! paused tokio clock.

#![allow(dead_code, unreachable_pub, missing_docs, clippy::new_without_default)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use ui_compiler::{Block, CompileOptions, QuerySchemas, UiCompiler};
use ui_core::{FrozenClock, Record, Value};
use ui_host::{
    AccessRecord, ChatInfo, ChoiceAnswer, ChoiceOrigin, FnSource, HostError, Lease, LinkResolver,
    MemoryStore, QueryPayload, SendResult, SourceRegistry, StoreError, StoredBlock, StoredItem,
    TokioClock, UiHost, UiQueries, UiQueryState, UiRefusal, UiStore, ValueSchema, block_revision,
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
    /// 0 ok, 1 fail, 2 refuse, 3 deny in authorize, 4 wait for the cancellation token
    /// (then fail), 5 deny in authorize with a plain error, 6 authorize never answers.
    pub mode: AtomicUsize,
    /// Length of the string in the result (0: a small record).
    pub result_len: AtomicUsize,
    /// The message of a failing `read` or `authorize` (empty: the default message).
    pub message: std::sync::Mutex<String>,
    /// Reads that saw their cancellation token fire.
    pub cancelled: AtomicUsize,
    /// The access each read received, in order.
    pub accesses: std::sync::Mutex<Vec<Value>>,
    /// The arguments each read received, in order.
    pub args: std::sync::Mutex<Vec<Record>>,
    /// `capture` calls, with the chat id of the info each received.
    pub captured_for: std::sync::Mutex<Vec<String>>,
    /// Milliseconds each `capture` takes.
    pub capture_delay_ms: AtomicUsize,
    /// Whether `capture` panics (a host with a bug).
    pub capture_panics: std::sync::atomic::AtomicBool,
}

impl Knobs {
    /// The failure message a test set, or `default`.
    pub fn message_or(&self, default: &str) -> String {
        let m = self.message.lock().unwrap();
        if m.is_empty() {
            default.to_owned()
        } else {
            m.clone()
        }
    }

    /// How many times `capture` ran.
    pub fn captures(&self) -> usize {
        self.captured_for.lock().unwrap().len()
    }
}

pub struct TestHost {
    pub sources: SourceRegistry,
    pub knobs: Arc<Knobs>,
    pub capture: std::sync::Mutex<Result<serde_json::Value, HostError>>,
    pub links: bool,
}

impl TestHost {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::build(true))
    }

    /// A host that resolves no links.
    pub fn without_links() -> Arc<Self> {
        Arc::new(Self::build(false))
    }

    pub fn build(links: bool) -> Self {
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
                    k.accesses.lock().unwrap().push((*request.access).clone());
                    k.args.lock().unwrap().push(request.args.clone());
                    if k.mode.load(Ordering::SeqCst) == 4 {
                        request.cancel.cancelled().await;
                        k.cancelled.fetch_add(1, Ordering::SeqCst);
                        return Err(HostError::message("cancelled"));
                    }
                    let delay = k.delay_ms.load(Ordering::SeqCst) as u64;
                    if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    k.ended.fetch_add(1, Ordering::SeqCst);
                    match k.mode.load(Ordering::SeqCst) {
                        1 => return Err(HostError::message(k.message_or("the CI server is down"))),
                        2 => {
                            return Err(UiRefusal::new(
                                "outside-project",
                                k.message_or("not your project"),
                            )
                            .into());
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
                match k.mode.load(Ordering::SeqCst) {
                    3 => Err(UiRefusal::new("outside-project", k.message_or("revoked")).into()),
                    5 => Err(HostError::message(k.message_or("no rights"))),
                    6 => std::future::pending().await,
                    _ => Ok(()),
                }
            }
        });
        sources.register("ci.runs", source);
        TestHost {
            sources,
            knobs,
            capture: std::sync::Mutex::new(Ok(json!({"projects": ["web"]}))),
            links,
        }
    }
}

#[async_trait]
impl UiHost for TestHost {
    async fn capture(&self, info: &ChatInfo) -> Result<Value, HostError> {
        self.knobs
            .captured_for
            .lock()
            .unwrap()
            .push(info.chat_id.clone());
        let delay = self.knobs.capture_delay_ms.load(Ordering::SeqCst) as u64;
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        assert!(
            !self.knobs.capture_panics.load(Ordering::SeqCst),
            "a host's capture with a bug"
        );
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
        // The path's first segment picks the answer.
        let path = match target {
            LinkTarget::File { path, .. } | LinkTarget::Diff { path } => path.as_str(),
            _ => "",
        };
        match path.split('/').next().unwrap_or_default() {
            "secret" => {
                Err(UiRefusal::new("outside-project", self.knobs.message_or("not yours")).into())
            }
            "hang" => std::future::pending().await,
            "offline" => Err(HostError::message(
                self.knobs.message_or("the repository is offline"),
            )),
            "chipless" => Ok(json!({"state": "chip", "label": "no target"})),
            "badsha" => Ok(json!({"state": "chip", "target": {"type": "Commit", "sha": "xyz"}})),
            "gone" => Ok(json!({
                "state": "plain", "code": "target-unavailable", "reason": "deleted", "extra": 1
            })),
            "extra" => Ok(json!({
                "state": "chip", "target": target, "label": "ok", "unknown": {"a": 1}
            })),
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
        Self::with_host_limits(host, ui_core::HostLimits::DEFAULT)
    }

    /// A world whose service checks `limits` instead of the spec's host limits.
    pub fn with_host_limits(host: Arc<TestHost>, limits: ui_core::HostLimits) -> Self {
        let store = Arc::new(MemoryStore::new());
        for chat in ["c1", "c2"] {
            store.put_chat(ChatInfo {
                chat_id: chat.to_owned(),
                data: Value::Null,
            });
        }
        let service = UiQueries::with_limits(
            host.clone(),
            store.clone(),
            Arc::new(TokioClock::starting_at(1_000_000)),
            limits,
            ui_core::UiHostLimits::DEFAULT,
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
        self.put_reply_with(chat, item, text, &self.host.sources)
    }

    /// [`World::put_reply`] compiled against other query schemas.
    pub fn put_reply_with(
        &self,
        chat: &str,
        item: &str,
        text: &str,
        schemas: &dyn QuerySchemas,
    ) -> Vec<(String, String)> {
        let blocks = compile_final(item, text, schemas);
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

    /// The ids of the compiled nodes of `kind` in the first block of an item.
    pub fn node_ids(&self, chat: &str, item: &str, kind: &str) -> Vec<String> {
        let item = self.store.item_now(chat, item);
        let mut ids = Vec::new();
        item.blocks[0].walk(&mut |n| {
            if n.kind == kind {
                ids.push(n.id.clone());
            }
        });
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
            values: ui_core::Record::default(),
            seen: None,
        }
    }

    /// The read id of a `ui.query` of `query` in the block of `c1`/`i1` (it must answer one).
    pub async fn read_id(&self, block: &(String, String), query: &str) -> String {
        self.service
            .query(&self.payload("c1", "i1", block, query))
            .await
            .read_id
            .expect("a reading with a read id")
    }

    pub fn reads(&self) -> usize {
        self.host.knobs.reads.load(Ordering::SeqCst)
    }

    /// A second service of this world's host (the spec's limits, a clock of its own) over
    /// `store`, typically a [`FaultyStore`] of the world's store.
    pub fn service_over(&self, store: impl UiStore) -> Arc<UiQueries> {
        UiQueries::new(
            self.host.clone(),
            Arc::new(store),
            Arc::new(TokioClock::starting_at(1_000_000)),
        )
    }
}

/// A store that implements only what `UiStore` requires (so `block` is the provided
/// method) over a [`MemoryStore`], with the faults of its [`Faults`].
pub struct FaultyStore(pub Arc<MemoryStore>, pub Arc<Faults>);

/// What a [`FaultyStore`] does wrong; nothing by default.
#[derive(Debug, Default)]
pub struct Faults {
    /// `set_access` calls to fail.
    pub access: AtomicUsize,
    /// `set_ui_queries` calls with frozen blocks (a freeze's, not a capture's) to fail.
    pub frozen: AtomicUsize,
    /// `send_choice` never answers for chat `c1` (a database stuck on one chat's row).
    pub send_hangs_for_c1: AtomicBool,
    /// Every chat is gone (`chat_info` answers `None`) while its items stay: deleted after
    /// its replies were captured.
    pub chats_gone: AtomicBool,
}

/// Takes one failure of `left` when any is left.
fn fail(left: &AtomicUsize) -> Result<(), StoreError> {
    match left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
        Ok(_) => Err(StoreError::Failed("injected".into())),
        Err(_) => Ok(()),
    }
}

#[async_trait]
impl UiStore for FaultyStore {
    async fn chat_info(&self, chat_id: &str) -> Option<Arc<ChatInfo>> {
        if self.1.chats_gone.load(Ordering::SeqCst) {
            return None;
        }
        self.0.chat_info(chat_id).await
    }
    async fn item(&self, chat_id: &str, item_id: &str) -> Option<StoredItem> {
        self.0.item(chat_id, item_id).await
    }
    async fn has_newer_item(&self, chat_id: &str, item_id: &str) -> bool {
        self.0.has_newer_item(chat_id, item_id).await
    }
    async fn access(&self, chat_id: &str, item_id: &str) -> AccessRecord {
        self.0.access(chat_id, item_id).await
    }
    async fn set_access(
        &self,
        chat_id: &str,
        item_id: &str,
        access: Option<Arc<Value>>,
    ) -> Result<(), StoreError> {
        fail(&self.1.access)?;
        self.0.set_access(chat_id, item_id, access).await
    }
    async fn set_ui_queries(
        &self,
        chat_id: &str,
        item_id: &str,
        state: UiQueryState,
    ) -> Result<(), StoreError> {
        if !state.blocks.is_empty() {
            fail(&self.1.frozen)?;
        }
        self.0.set_ui_queries(chat_id, item_id, state).await
    }
    async fn send_choice(
        &self,
        chat_id: &str,
        origin: &ChoiceOrigin,
        context: &str,
    ) -> Result<SendResult, StoreError> {
        if chat_id == "c1" && self.1.send_hangs_for_c1.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.0.send_choice(chat_id, origin, context).await
    }
    async fn record_answer(&self, chat_id: &str, answer: ChoiceAnswer) -> Result<(), StoreError> {
        self.0.record_answer(chat_id, answer).await
    }
}

/// Compiles `text` as the final reply `item` against `schemas`, with revisions.
pub fn compile_final(item: &str, text: &str, schemas: &dyn QuerySchemas) -> Vec<Arc<Block>> {
    let clock = FrozenClock(0.0);
    let options = CompileOptions {
        id: item.to_owned(),
        is_final: true,
        query_schemas: Some(schemas),
        clock: Some(&clock),
        ..CompileOptions::default()
    };
    UiCompiler::new()
        .compile(text, &options)
        .into_iter()
        .map(|b| {
            let mut b = (*b).clone();
            b.revision = Some(block_revision(&b));
            Arc::new(b)
        })
        .collect()
}

/// A record from JSON text.
pub fn record(json: &str) -> Record {
    Value::from_json_str(json)
        .unwrap()
        .as_record()
        .unwrap()
        .clone()
}

/// Lets spawned tasks (captures, freezes, reads without delay) run to their next timer.
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

pub fn set(knob: &AtomicUsize, value: usize) {
    knob.store(value, Ordering::SeqCst);
}

pub async fn advance(ms: u64) {
    tokio::time::advance(Duration::from_millis(ms)).await;
}

/// A host with the given sources, a fixed captured access and no links.
pub struct SimpleHost(pub SourceRegistry);

#[async_trait]
impl UiHost for SimpleHost {
    async fn capture(&self, _info: &ChatInfo) -> Result<Value, HostError> {
        Ok(Value::from(&json!({"projects": ["web"]})))
    }

    fn sources(&self) -> &SourceRegistry {
        &self.0
    }
}

/// A service for a [`SimpleHost`] over a fresh store with chat `c1`.
pub fn simple_service(
    sources: SourceRegistry,
) -> (Arc<SimpleHost>, Arc<MemoryStore>, Arc<UiQueries>) {
    let host = Arc::new(SimpleHost(sources));
    let store = Arc::new(MemoryStore::new());
    store.put_chat(ChatInfo {
        chat_id: "c1".to_owned(),
        data: Value::Null,
    });
    let service = UiQueries::new(
        host.clone(),
        store.clone(),
        Arc::new(TokioClock::starting_at(1_000_000)),
    );
    (host, store, service)
}

/// Stores `blocks` as the final assistant item `item` of `chat`.
pub fn put_blocks(
    store: &MemoryStore,
    chat: &str,
    item: &str,
    text: &str,
    blocks: Vec<Arc<Block>>,
) {
    store.put_item(
        chat,
        StoredItem {
            id: item.to_owned(),
            assistant: true,
            text: text.to_owned(),
            blocks,
            ..StoredItem::default()
        },
    );
}

/// A payload for the first block of `blocks`.
pub fn payload_for(chat: &str, item: &str, block: &Block, query: &str) -> QueryPayload {
    QueryPayload {
        chat_id: chat.to_owned(),
        item_id: item.to_owned(),
        block_id: block.id.clone(),
        revision: block.revision.clone().unwrap_or_default(),
        query: query.to_owned(),
        values: Record::default(),
        seen: None,
    }
}

/// A `ui.link` payload for node `node` of `block` (item `i1` of `c1`), with no values or reads.
pub fn link(block: &(String, String), node: &str) -> ui_host::LinkPayload {
    ui_host::LinkPayload {
        chat_id: "c1".into(),
        item_id: "i1".into(),
        block_id: block.0.clone(),
        revision: block.1.clone(),
        node_id: node.to_owned(),
        values: ui_core::Record::default(),
        reads: indexmap::IndexMap::new(),
    }
}

/// A `chat.uiChoice` payload for `choice_id` of `block` (item `i1` of `c1`), with no values
/// or reads.
pub fn choice(block: &(String, String), choice_id: &str) -> ui_host::ChoicePayload {
    ui_host::ChoicePayload {
        chat_id: "c1".into(),
        item_id: "i1".into(),
        block_id: block.0.clone(),
        revision: block.1.clone(),
        choice_id: choice_id.to_owned(),
        values: ui_core::Record::default(),
        reads: indexmap::IndexMap::new(),
    }
}

/// A schema that parses every value as itself.
pub struct Anything;

impl ValueSchema for Anything {
    fn parse(&self, value: &Value) -> Result<Value, String> {
        Ok(value.clone())
    }
}

/// A [`MemoryStore`] that hands out its blocks under one lease ([`StoredBlock::lease`]) and
/// counts the service's questions about blocks, access and chats.
#[derive(Clone, Default)]
pub struct LeasingStore {
    pub inner: Arc<MemoryStore>,
    pub lease: Arc<std::sync::Mutex<Lease>>,
    /// `block`, `access` and `chat_info` calls.
    pub asked: Arc<AtomicUsize>,
}

impl LeasingStore {
    pub fn new(inner: Arc<MemoryStore>) -> Self {
        LeasingStore {
            inner,
            ..LeasingStore::default()
        }
    }

    /// Withdraws the lease handed out so far; later blocks come under a new one.
    pub fn withdraw(&self) {
        let mut lease = self.lease.lock().unwrap();
        lease.withdraw();
        *lease = Lease::new();
    }

    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl UiStore for LeasingStore {
    async fn chat_info(&self, chat_id: &str) -> Option<Arc<ChatInfo>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.inner.chat_info(chat_id).await
    }
    async fn item(&self, chat_id: &str, item_id: &str) -> Option<StoredItem> {
        self.inner.item(chat_id, item_id).await
    }
    async fn block(&self, chat_id: &str, item_id: &str, block_id: &str) -> Option<StoredBlock> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let mut block = self.inner.block(chat_id, item_id, block_id).await?;
        block.lease = Some(self.lease.lock().unwrap().clone());
        Some(block)
    }
    async fn has_newer_item(&self, chat_id: &str, item_id: &str) -> bool {
        self.inner.has_newer_item(chat_id, item_id).await
    }
    async fn access(&self, chat_id: &str, item_id: &str) -> AccessRecord {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.inner.access(chat_id, item_id).await
    }
    async fn set_access(
        &self,
        chat_id: &str,
        item_id: &str,
        access: Option<Arc<Value>>,
    ) -> Result<(), StoreError> {
        self.inner.set_access(chat_id, item_id, access).await
    }
    async fn set_ui_queries(
        &self,
        chat_id: &str,
        item_id: &str,
        state: UiQueryState,
    ) -> Result<(), StoreError> {
        self.inner.set_ui_queries(chat_id, item_id, state).await
    }
    async fn send_choice(
        &self,
        chat_id: &str,
        origin: &ChoiceOrigin,
        context: &str,
    ) -> Result<SendResult, StoreError> {
        self.inner.send_choice(chat_id, origin, context).await
    }
    async fn record_answer(&self, chat_id: &str, answer: ChoiceAnswer) -> Result<(), StoreError> {
        self.inner.record_answer(chat_id, answer).await
    }
}
