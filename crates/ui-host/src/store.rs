//! The store boundary (`host.md` §2.5, §2.6, §4.5): chats, assistant items with their
//! compiled blocks and revisions, captured access, frozen readings and answers. The service
//! talks to a chat only through [`UiStore`]; [`MemoryStore`] is the in-memory
//! implementation (the server adds a durable one).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use ui_compiler::Block;
use ui_core::{Record, Value};
use ui_links::LinkResolution;

use crate::reading::QueryReading;
use crate::source::ChatInfo;

/// The frozen state of one block (`host.md` §9): its first readings, link resolutions and
/// text fallback, for the block's revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
#[serde(rename_all = "camelCase")]
pub struct FrozenBlock {
    /// The block revision the entry belongs to.
    pub revision: String,
    /// The first reading of each query, by declared name.
    pub readings: IndexMap<String, QueryReading>,
    /// The resolution of each link target, by evaluated node id: always present, empty
    /// when the host resolves no links or the block has no link targets (`host.md` §9
    /// step f).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(required))]
    pub links: IndexMap<String, LinkResolution>,
    /// The text fallback built from the first readings.
    pub fallback: String,
}

/// An item's UI query state (`ChatUiQueryState`, item field `uiQueries`): sent to clients;
/// never holds the access.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "ChatUiQueryState", deny_unknown_fields)
)]
#[serde(rename_all = "camelCase")]
pub struct UiQueryState {
    /// The chat that wrote (and captured for) the item.
    pub author_chat_id: String,
    /// Frozen blocks by block id.
    pub blocks: IndexMap<String, FrozenBlock>,
}

/// Where a choice came from (`ChatUiChoiceOrigin`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "ChatUiChoiceOrigin", deny_unknown_fields)
)]
#[serde(rename_all = "camelCase")]
pub struct ChoiceOrigin {
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The block revision the person saw.
    pub revision: String,
    /// The evaluated id of the chosen `Choice`.
    pub choice_id: String,
    /// The Choice's label.
    pub label: String,
    /// When the item was created.
    pub source_at: u64,
    /// Whether a newer top-level assistant item exists.
    pub older: bool,
    /// The input values on screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Record>,
    /// When the choice was made.
    pub at: u64,
}

/// What sending a message answered (`ChatSendResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "ChatSendResult", deny_unknown_fields)
)]
#[serde(rename_all = "camelCase")]
pub struct SendResult {
    /// Whether the message waits behind a running turn.
    pub queued: bool,
    /// The turn that handles it, if one started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// A recorded answer (`ChatUiAnswer`, item field `uiAnswers[blockId]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "ChatUiAnswer"))]
#[serde(rename_all = "camelCase")]
pub struct ChoiceAnswer {
    /// Where it came from.
    #[serde(flatten)]
    pub origin: ChoiceOrigin,
    /// What sending the message answered.
    #[serde(flatten)]
    pub sent: SendResult,
}

/// An assistant item as the host sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoredItem {
    /// The item id.
    pub id: String,
    /// Whether the item is the assistant's.
    pub assistant: bool,
    /// Whether the reply still streams.
    pub streaming: bool,
    /// Set for a subagent's text.
    pub parent_tool_use_id: Option<String>,
    /// The reply text.
    pub text: String,
    /// When the item was created (epoch ms).
    pub created_at: u64,
    /// The compiled blocks (final ones carry a revision).
    pub blocks: Vec<Arc<Block>>,
    /// The UI query state, once captured.
    pub ui_queries: Option<UiQueryState>,
    /// Answers by block id.
    pub answers: IndexMap<String, ChoiceAnswer>,
}

/// One block of an assistant item with what admitting a read needs of the item
/// (`host.md` §6.1 step 1, §4.2 step 2) — without the item's text, frozen readings and
/// answers, which every `ui.query` would otherwise copy.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredBlock {
    /// Whether the item is the assistant's.
    pub assistant: bool,
    /// Whether the reply still streams.
    pub streaming: bool,
    /// Whether the item is a subagent's text (it has a `parentToolUseId`).
    pub subagent: bool,
    /// The chat that wrote (and captured for) the item (`uiQueries.authorChatId`), once
    /// captured.
    pub author_chat_id: Option<String>,
    /// The block.
    pub block: Arc<Block>,
    /// The store's promise that these facts stay as they are ([`Lease`]); `None` promises
    /// nothing, and every request asks again.
    pub lease: Option<Lease>,
}

/// A store's promise about what it answered for one block of an item: the block with the
/// item's flags and author ([`UiStore::block`]), the item's captured access
/// ([`UiStore::access`]) and the chat's info ([`UiStore::chat_info`]) stay as they are
/// until the store withdraws the lease ([`Lease::withdraw`]), which it must do before (or
/// as) any of them changes. While a lease holds, the service answers a prepared payload
/// ([`PreparedQuery`](crate::PreparedQuery)) from what it derived under it, without asking
/// the store again; `authorize` still runs on every request.
///
/// A store whose facts settle (a finished reply, an access captured once) hands one out
/// with them; the withdrawal is one flag that every copy of the lease sees.
///
/// ```
/// use ui_host::Lease;
/// let lease = Lease::new();
/// let copy = lease.clone();
/// assert!(copy.holds());
/// lease.withdraw();
/// assert!(!copy.holds());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Lease(Arc<AtomicBool>);

impl Lease {
    /// A lease that holds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Withdraws the lease: every copy stops holding, for good.
    pub fn withdraw(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the lease still holds.
    pub fn holds(&self) -> bool {
        !self.0.load(Ordering::Acquire)
    }
}

/// Two leases are equal when they are copies of one lease.
impl PartialEq for Lease {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl StoredBlock {
    /// The block `block_id` of `item`, if the item has it.
    pub fn of(item: &StoredItem, block_id: &str) -> Option<Self> {
        let block = item.blocks.iter().find(|b| b.id == block_id)?;
        Some(StoredBlock {
            assistant: item.assistant,
            streaming: item.streaming,
            subagent: item.parent_tool_use_id.is_some(),
            author_chat_id: item.ui_queries.as_ref().map(|q| q.author_chat_id.clone()),
            block: Arc::clone(block),
            lease: None,
        })
    }
}

/// The captured access of an item as stored (`host.md` §4.5).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum AccessRecord {
    /// Nothing recorded.
    #[default]
    Absent,
    /// Recorded as none: denied, failed, too large or lost.
    Denied,
    /// The captured value.
    Granted(Arc<Value>),
}

/// The SHA-256 of a final block's compact JSON (without `revision`), as 64 lowercase hex
/// digits: the block's revision (`host.md` §2.2).
pub fn block_revision(block: &Block) -> String {
    let mut unrevised = block.clone();
    unrevised.revision = None;
    let bytes = serde_json::to_vec(&unrevised).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A write the store could not make. The service never drops one: a capture or a choice
/// fails with it, a freeze retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The chat holds as many items as it may; a choice's message is refused
    /// (`refused-choice`).
    #[error("the chat is full: {0}")]
    ChatFull(String),
    /// The write failed (the database, …); a choice answers `internal`.
    #[error("the store failed to write: {0}")]
    Failed(String),
}

/// A fresh reading a page was given, kept by the store so that a choice naming its read
/// id can be checked by another process serving the same store ([`UiStore::keep_reading`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KeptReading {
    /// The chat the reading was read for.
    pub chat_id: String,
    /// The reading's key as text: the chat, item, block, revision, query and parsed
    /// arguments, compared whole.
    pub key: String,
    /// The reading (fresh, with its read id).
    pub reading: QueryReading,
}

impl KeptReading {
    /// A kept reading of `chat_id` under `key`.
    pub fn new(chat_id: impl Into<String>, key: impl Into<String>, reading: QueryReading) -> Self {
        KeptReading {
            chat_id: chat_id.into(),
            key: key.into(),
            reading,
        }
    }
}

/// Where the host keeps what it needs of chats. Implementations must be cheap to call
/// concurrently; every method is one atomic step.
#[async_trait]
pub trait UiStore: Send + Sync + 'static {
    /// The chat's current info, if the chat exists. Shared, not copied: every `ui.query`
    /// asks for it, and a host's `data` may be large.
    async fn chat_info(&self, chat_id: &str) -> Option<Arc<ChatInfo>>;
    /// The item `item_id` of the chat.
    async fn item(&self, chat_id: &str, item_id: &str) -> Option<StoredItem>;
    /// The block `block_id` of the item `item_id` with the item's flags and author. Every
    /// `ui.query` asks for it; the provided method reads the whole item, a store should
    /// answer without copying the item's text, frozen readings and answers.
    async fn block(&self, chat_id: &str, item_id: &str, block_id: &str) -> Option<StoredBlock> {
        let item = self.item(chat_id, item_id).await?;
        StoredBlock::of(&item, block_id)
    }
    /// Whether a top-level assistant item newer than `item_id` exists.
    async fn has_newer_item(&self, chat_id: &str, item_id: &str) -> bool;
    /// The item's captured access.
    async fn access(&self, chat_id: &str, item_id: &str) -> AccessRecord;
    /// Stores the item's captured access (`None` = denied).
    ///
    /// # Errors
    /// [`StoreError`] when the write did not happen.
    async fn set_access(
        &self,
        chat_id: &str,
        item_id: &str,
        access: Option<Arc<Value>>,
    ) -> Result<(), StoreError>;
    /// Stores the item's UI query state (and tells the chat's clients).
    ///
    /// # Errors
    /// [`StoreError`] when the write did not happen.
    async fn set_ui_queries(
        &self,
        chat_id: &str,
        item_id: &str,
        state: UiQueryState,
    ) -> Result<(), StoreError>;
    /// Sends `context` as the person's next message with `origin` (queued behind a
    /// running turn if needed). Sending again for the same block and revision must not
    /// add a second message (a retry after a failed [`UiStore::record_answer`]).
    ///
    /// # Errors
    /// [`StoreError`] when the message was not stored.
    async fn send_choice(
        &self,
        chat_id: &str,
        origin: &ChoiceOrigin,
        context: &str,
    ) -> Result<SendResult, StoreError>;
    /// Records an answer for its block.
    ///
    /// # Errors
    /// [`StoreError`] when the write did not happen.
    async fn record_answer(&self, chat_id: &str, answer: ChoiceAnswer) -> Result<(), StoreError>;
    /// Keeps a fresh reading the host just gave a page (its read id is
    /// `kept.reading.read_id`), for [`UiStore::kept_reading`]. A host whose pages may send
    /// their choices to another process (several servers on one database behind a
    /// balancer) keeps them where every process reads; the provided method keeps nothing,
    /// which is right for one process: its own cache holds the read ids it issued.
    ///
    /// # Errors
    /// [`StoreError`] when the write did not happen (the host logs it; the page's reading
    /// is unaffected).
    async fn keep_reading(&self, kept: KeptReading) -> Result<(), StoreError> {
        drop(kept);
        Ok(())
    }
    /// The reading kept under `read_id` by any process, if the store still holds it (a
    /// choice whose read id is in no cache of this process, `host.md` §12.2 step 4c).
    async fn kept_reading(&self, read_id: &str) -> Option<KeptReading> {
        let _ = read_id;
        None
    }
}

#[derive(Debug, Default)]
struct ChatRecord {
    info: Arc<ChatInfo>,
    items: IndexMap<String, StoredItem>,
    access: HashMap<String, Option<Arc<Value>>>,
    sent: Vec<(ChoiceOrigin, String)>,
}

/// An in-memory [`UiStore`], for tests, demos and embedding.
#[derive(Debug, Default)]
pub struct MemoryStore {
    chats: Mutex<HashMap<String, ChatRecord>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, ChatRecord>) -> T) -> T {
        f(&mut self.chats.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Creates or replaces a chat's info.
    pub fn put_chat(&self, info: ChatInfo) {
        let id = info.chat_id.clone();
        self.with(|chats| chats.entry(id).or_default().info = Arc::new(info));
    }

    /// Removes a chat and everything in it.
    pub fn remove_chat(&self, chat_id: &str) {
        self.with(|chats| chats.remove(chat_id));
    }

    /// Creates or replaces an item (keeping its UI state and answers when it exists).
    pub fn put_item(&self, chat_id: &str, mut item: StoredItem) {
        self.with(|chats| {
            let chat = chats.entry(chat_id.to_owned()).or_default();
            if let Some(old) = chat.items.get(&item.id) {
                if item.ui_queries.is_none() {
                    item.ui_queries = old.ui_queries.clone();
                }
                if item.answers.is_empty() {
                    item.answers = old.answers.clone();
                }
            }
            chat.items.insert(item.id.clone(), item);
        });
    }

    /// The item now (a synchronous read for tests and demos).
    pub fn item_now(&self, chat_id: &str, item_id: &str) -> StoredItem {
        self.with(|chats| {
            chats
                .get(chat_id)
                .and_then(|c| c.items.get(item_id).cloned())
                .unwrap_or_default()
        })
    }

    /// The messages sent by choices, in order.
    pub fn sent(&self, chat_id: &str) -> Vec<(ChoiceOrigin, String)> {
        self.with(|chats| {
            chats
                .get(chat_id)
                .map(|c| c.sent.clone())
                .unwrap_or_default()
        })
    }
}

#[async_trait]
impl UiStore for MemoryStore {
    async fn chat_info(&self, chat_id: &str) -> Option<Arc<ChatInfo>> {
        self.with(|chats| chats.get(chat_id).map(|c| Arc::clone(&c.info)))
    }

    async fn item(&self, chat_id: &str, item_id: &str) -> Option<StoredItem> {
        self.with(|chats| chats.get(chat_id)?.items.get(item_id).cloned())
    }

    async fn block(&self, chat_id: &str, item_id: &str, block_id: &str) -> Option<StoredBlock> {
        self.with(|chats| StoredBlock::of(chats.get(chat_id)?.items.get(item_id)?, block_id))
    }

    async fn has_newer_item(&self, chat_id: &str, item_id: &str) -> bool {
        self.with(|chats| {
            let Some(chat) = chats.get(chat_id) else {
                return false;
            };
            let Some(at) = chat.items.get_index_of(item_id) else {
                return false;
            };
            chat.items
                .values()
                .skip(at + 1)
                .any(|i| i.assistant && i.parent_tool_use_id.is_none())
        })
    }

    async fn access(&self, chat_id: &str, item_id: &str) -> AccessRecord {
        self.with(
            |chats| match chats.get(chat_id).and_then(|c| c.access.get(item_id)) {
                None => AccessRecord::Absent,
                Some(None) => AccessRecord::Denied,
                Some(Some(v)) => AccessRecord::Granted(Arc::clone(v)),
            },
        )
    }

    async fn set_access(
        &self,
        chat_id: &str,
        item_id: &str,
        access: Option<Arc<Value>>,
    ) -> Result<(), StoreError> {
        self.with(|chats| {
            let chat = chats.get_mut(chat_id).ok_or_else(|| no_chat(chat_id))?;
            chat.access.insert(item_id.to_owned(), access);
            Ok(())
        })
    }

    async fn set_ui_queries(
        &self,
        chat_id: &str,
        item_id: &str,
        state: UiQueryState,
    ) -> Result<(), StoreError> {
        self.with(|chats| {
            let item = chats
                .get_mut(chat_id)
                .and_then(|c| c.items.get_mut(item_id))
                .ok_or_else(|| no_item(chat_id, item_id))?;
            item.ui_queries = Some(state);
            Ok(())
        })
    }

    async fn send_choice(
        &self,
        chat_id: &str,
        origin: &ChoiceOrigin,
        context: &str,
    ) -> Result<SendResult, StoreError> {
        self.with(|chats| {
            let chat = chats.get_mut(chat_id).ok_or_else(|| no_chat(chat_id))?;
            let sent = chat.sent.iter().any(|(o, _)| {
                o.item_id == origin.item_id
                    && o.block_id == origin.block_id
                    && o.revision == origin.revision
            });
            if !sent {
                chat.sent.push((origin.clone(), context.to_owned()));
            }
            Ok::<_, StoreError>(())
        })?;
        Ok(SendResult {
            queued: false,
            turn_id: Some(format!("turn-{}", origin.choice_id)),
        })
    }

    async fn record_answer(&self, chat_id: &str, answer: ChoiceAnswer) -> Result<(), StoreError> {
        self.with(|chats| {
            let item = chats
                .get_mut(chat_id)
                .and_then(|c| c.items.get_mut(&answer.origin.item_id))
                .ok_or_else(|| no_item(chat_id, &answer.origin.item_id))?;
            item.answers.insert(answer.origin.block_id.clone(), answer);
            Ok(())
        })
    }
}

/// A write to a chat the store does not hold did not happen.
fn no_chat(chat_id: &str) -> StoreError {
    StoreError::Failed(format!("no chat `{chat_id}`"))
}

/// A write to an item the store does not hold did not happen.
fn no_item(chat_id: &str, item_id: &str) -> StoreError {
    StoreError::Failed(format!("no item `{item_id}` in chat `{chat_id}`"))
}
