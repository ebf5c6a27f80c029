//! # ui-host
//!
//! The host serves live data to blocks (`host.md`): it reads registered sources for a
//! stored block on behalf of the chat that wrote it, with the access captured when the reply
//! was written; nothing a page sends can widen what is read.
//!
//! - A host application implements [`UiHost`]: it captures access and owns a
//!   [`SourceRegistry`] of [`UiSource`]s (write Rust `Args`/`Output` types with serde +
//!   garde and a [`TypedSource`], or describe a source by JSON Schema with [`FnSource`],
//!   whose permission check is a future ([`FnSource::with_authorize`]) or, when it needs no
//!   I/O, a function run in place ([`FnSource::with_authorize_check`]: `authorize` runs on
//!   every cache hit too). The registry is also the compiler's
//!   [`QuerySchemas`](ui_compiler::QuerySchemas).
//! - [`UiQueries`] answers `ui.query` ([`UiQueries::query`]), `ui.link`
//!   ([`UiQueries::link`]) and `chat.uiChoice` ([`UiQueries::choose`]), and freezes the first
//!   readings of a final reply ([`UiQueries::observe`]). It authorizes every read, caches
//!   10 s, caps reads at 2 per chat and 16 in all, times out at 8 s and refuses results over
//!   64 KB, with the codes of `host.md` §14. An HTTP host answers with
//!   [`UiQueries::query_answer`]: a cached reading comes with the JSON text written once
//!   when it was cached, so a cache hit serializes nothing. A host that meets the same
//!   payload again and again keeps it as a [`PreparedQuery`] and answers with
//!   [`UiQueries::query_prepared`]: what the payload alone determines (the query's digest,
//!   its parsed arguments) is worked out once, and while the store's [`Lease`] on the facts
//!   it was admitted with holds, the plan of its read is kept too (`authorize` still runs
//!   on every request).
//! - It talks to chats only through a [`UiStore`]; [`MemoryStore`] keeps them in memory. A
//!   store whose facts settle may hand out a [`Lease`] with a block
//!   ([`StoredBlock::lease`]) and withdraw it when they change.
//!   Every write returns a [`StoreError`] when it did not happen: a capture or a choice
//!   then fails (`internal`, or `refused-choice` for a full chat), a freeze retries.
//! - [`UiQueries::configured`] takes every limit group ([`ServiceLimits`]); every budget
//!   measures time on the injected [`HostClock`] ([`BudgetClock`]), never a fresh clock.
//! - Every call into host code is bounded by the read timeout (`readTimeoutMilliseconds`),
//!   not only `read`: a `capture` that does not settle fails the capture
//!   (`access-unavailable`, as any failed capture), an `authorize` answers `timed-out` (a
//!   failed reading, or a choice refused `refused-query`), a `link` is `plain` with
//!   `timed-out` (`host.md` §17.7). Host code that panics fails only its own request: the
//!   capture, read or freeze it ran in leaves nothing behind for later requests to join.
//!
//! ```
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use serde::{Deserialize, Serialize};
//! use ui_compiler::{CompileOptions, UiCompiler};
//! use ui_core::{FrozenClock, Record, Value};
//! use ui_host::*;
//!
//! #[derive(Serialize, Deserialize, garde::Validate)]
//! #[serde(deny_unknown_fields)]
//! struct RunsArgs {
//!     #[garde(length(min = 1))]
//!     branch: String,
//! }
//!
//! #[derive(Serialize, Deserialize, garde::Validate)]
//! struct Run {
//!     #[garde(skip)]
//!     name: String,
//! }
//!
//! struct Runs;
//!
//! #[async_trait]
//! impl TypedSource for Runs {
//!     type Args = RunsArgs;
//!     type Output = Vec<Run>;
//!     async fn authorize(&self, _: &ChatInfo, _: &Value, _: &RunsArgs) -> Result<(), HostError> {
//!         Ok(())
//!     }
//!     async fn read(
//!         &self, _: &ChatInfo, _: &Value, args: RunsArgs, _: tokio_util::sync::CancellationToken,
//!     ) -> Result<Vec<Run>, HostError> {
//!         Ok(vec![Run { name: format!("{} #1", args.branch) }])
//!     }
//! }
//!
//! struct Host(SourceRegistry);
//!
//! #[async_trait]
//! impl UiHost for Host {
//!     async fn capture(&self, info: &ChatInfo) -> Result<Value, HostError> {
//!         Ok(Value::from(info.chat_id.as_str()))
//!     }
//!     fn sources(&self) -> &SourceRegistry {
//!         &self.0
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let mut sources = SourceRegistry::new();
//! sources.register("ci.runs", TypedAdapter::new(Runs));
//! let host = Arc::new(Host(sources));
//!
//! // The agent's reply, compiled with the host's schemas and stored with revisions.
//! let reply = "```ui\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n\
//!     <Summary>{@Count($runs)} runs</Summary>\n```\n";
//! let clock = FrozenClock(0.0);
//! let options = CompileOptions {
//!     id: "item-1".into(), is_final: true, query_schemas: Some(&host.0),
//!     clock: Some(&clock), ..CompileOptions::default()
//! };
//! let mut block = (*UiCompiler::new().compile(reply, &options)[0]).clone();
//! block.revision = Some(block_revision(&block));
//! let (block_id, revision) = (block.id.clone(), block.revision.clone().unwrap());
//!
//! let store = Arc::new(MemoryStore::new());
//! store.put_chat(ChatInfo { chat_id: "chat-1".into(), data: Value::Null });
//! store.put_item("chat-1", StoredItem {
//!     id: "item-1".into(), assistant: true, text: reply.into(),
//!     blocks: vec![Arc::new(block)], ..StoredItem::default()
//! });
//!
//! let service = UiQueries::new(host, store, Arc::new(TokioClock::new()));
//! let payload = QueryPayload {
//!     chat_id: "chat-1".into(), item_id: "item-1".into(), block_id, revision,
//!     query: "$runs".into(), values: Record::default(), seen: None,
//! };
//! let reading = service.query(&payload).await;
//! assert_eq!(reading.state, ReadingState::Fresh);
//! assert_eq!(reading.value.as_ref().unwrap().to_js_json(), r#"[{"name":"main #1"}]"#);
//!
//! // An HTTP host answers with the JSON text: a cache hit sends the text written when the
//! // reading was cached, the same bytes serde_json writes for the reading.
//! let json = service.query_answer(&payload).await.into_json().unwrap();
//! assert_eq!(json.as_ref(), serde_json::to_vec(&reading).unwrap().as_slice());
//! # });
//! ```
//!
//! ## Sources in Rust: serde + garde
//!
//! A source's argument schema guards two doors: the compiler refuses a `@Query` whose
//! arguments (evaluated with the defaults) fail it with `invalid_query`, and every read
//! parses the arguments a person's input produced before `authorize` and `read` run,
//! refusing the reading with the schema's message when they fail (`host.md` §3, §6.1).
//! For a Rust host that schema is simply the argument type of its [`TypedSource`]: serde
//! gives the shape (`deny_unknown_fields`, `default`), and garde the rules serde cannot
//! state (`length`, `range`, `custom` checks), declared on the fields next to the types
//! the source reads with. That is why garde is a dependency: one derive states the rules
//! once, the compiler and the reads apply the same ones, and the source only ever sees
//! arguments that passed them. The result type is checked the same way
//! ([`Typed`]), so a source cannot hand a page a value its own type forbids. What agents
//! read about the arguments in the catalog is a description written apart (the server's
//! `SourceInfo::args`, a JSON Schema): it enforces nothing, so a source that changes its
//! rules changes that description with them (`crates/ui-server/examples/embed.rs` keeps
//! the two side by side).
//!
//! Dependencies beyond the card's (tokio, async-trait, garde, thiserror, serde; `schemars`
//! with the `schema` feature, for the JSON Schemas of payloads, readings and frozen state):
//! `tokio-util`
//! for the `CancellationToken` a read receives, `uuid` for the v4 read ids the spec names,
//! `sha2` for block revisions, `indexmap` for insertion-ordered maps as everywhere else,
//! `tracing` to log the store writes that failed (a capture or a choice then fails, a
//! freeze retries its write), and `dashmap` for the map of shared source reads that every
//! read start consults from its own task (the admission table stays one lock: its steps
//! must be atomic together), and `foldhash` for the maps a `ui.query` looks its keys up in
//! (the admission table, the argument and feed memos): SipHash over those keys was about a
//! third of a cached answer's instructions (`benches/NOTES.md`); the maps are bounded, so a
//! fast hasher seeded at random per map needs no flood resistance beyond that. It does not
//! depend on `ui-sync`: a host attaches any [`ChangeIndex`] (`ui-server` adapts `ui-sync`'s
//! service). Counts a host exports (`ui.query` answers from the cache, slots in use) are in
//! [`UiQueries::stats`].

mod changes;
mod clock;
mod payload;
mod reading;
mod service;
mod source;
mod store;

pub use changes::{ChangeFeed, ChangeIndex, ChangeScope};
pub use clock::{BudgetClock, HostClock, Sleep, TokioClock};
pub use payload::{ChoicePayload, LinkPayload, QueryPayload};
pub use reading::{
    AnswerJson, HostError, QueryAnswer, QueryReading, ReadingState, ReadingSync, UiRefusal,
    WireRefusal,
};
pub use service::{
    IssueRequest, PreparedQuery, ServiceLimits, ServiceStats, UiQueries, admits_by_content,
};
pub use source::{
    BoxFuture, ChatInfo, FnSource, LinkResolver, ReadRequest, SourceRegistry, Typed, TypedAdapter,
    TypedSource, UiHost, UiSource, ValueSchema,
};
pub use store::{
    AccessRecord, ChoiceAnswer, ChoiceOrigin, FrozenBlock, KeptReading, Lease, MemoryStore,
    SendResult, StoreError, StoredBlock, StoredItem, UiQueryState, UiStore, block_revision,
};
pub use ui_compiler::{JsonSchema, JsonSchemas, check_json_schema};
