//! [`ChatStore`]: chats, items (text, streaming flag, compiled blocks, frozen readings,
//! answers, the origin of choice messages) and captured access in the application's
//! SQLite file; the durable [`UiStore`] of the host service.
//!
//! Every change a page should see records a `host.chats` change event for the chat's owner
//! (`user:<owner>`, key = chat id) on the change feed. Inside a request's
//! [`write_scope`] the events are collected and recorded by the handler (which waits for
//! their seq, `X-UI-Sync-Seq`); elsewhere (a background freeze) they are recorded at once.
//!
//! What every `ui.*` request reads — the chat (owner, project), a finished item's blocks
//! and flags, an item's granted access — is kept in a [`StoreCache`], so a `ui.query`
//! answered from the host's cache touches no database. Only facts that no longer change
//! are cached, and every write below drops the cached entries it touches, inside its
//! blocking database call (see [`crate::cache`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use indexmap::IndexMap;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use ui_compiler::Block;
use ui_core::Value;
use ui_host::{
    AccessRecord, ChatInfo, ChoiceAnswer, ChoiceOrigin, HostClock, KeptReading, SendResult,
    StoreError, StoredBlock, StoredItem, UiQueryState, UiStore,
};
use ui_sync::{Audience, ChangeDraft, Cursor, RequestSource, SyncService};

use crate::cache::{CachedChat, CachedFacts, ItemFacts, ItemRef, StoreCache, item_key};
use crate::config::ChatLimits;
use crate::db::{Db, DbError, DbResult, Migration};
use crate::error::{ApiError, ErrorCode};

/// An item's blocks as a JSON array: the `blocks` column, or, while the reply streams
/// delta by delta (`blocks_apart`), the JSON of each block in its own row
/// (`ui_reply_blocks`) joined in order. `$agg` is the database's ordered string aggregate
/// (`group_concat` on SQLite, `string_agg` on PostgreSQL).
macro_rules! item_blocks {
    ($agg:literal) => {
        concat!(
            "CASE WHEN blocks_apart THEN '[' || COALESCE((SELECT ",
            $agg,
            "(json, ',' ORDER BY idx) FROM ui_reply_blocks b \
               WHERE b.chat_id = ui_items.chat_id AND b.item_id = ui_items.id), '') || ']' \
             ELSE blocks END"
        )
    };
}

/// The columns of an item row as [`ItemRow`] reads them. Its text is whole: while the
/// reply streams, the stored text followed by the deltas appended since it was last written
/// whole (`ui_reply_deltas`, in the order of the revisions that wrote them). `$agg` as in
/// `item_blocks!`.
macro_rules! item_columns {
    ($agg:literal) => {
        concat!(
            "id, role, CASE WHEN streaming THEN text || COALESCE((SELECT ",
            $agg,
            "(delta, '' ORDER BY rev) FROM ui_reply_deltas d \
               WHERE d.chat_id = ui_items.chat_id AND d.item_id = ui_items.id), '') \
             ELSE text END, streaming, parent_tool_use_id, created_at, ",
            item_blocks!($agg),
            ", ui_queries, answers, ui_choice"
        )
    };
}

#[path = "store_pg.rs"]
mod pg;
pub(crate) use pg::{PG_MIGRATIONS, PgBackend};

/// The source name of chat change events (a host namespace, `sync.md` §3.1).
pub const CHATS_SOURCE: &str = "host.chats";

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ui_chats (
  id          TEXT    PRIMARY KEY,
  owner       TEXT    NOT NULL,
  project     TEXT    NOT NULL,
  title       TEXT    NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ui_chats_owner ON ui_chats (owner, created_at);
CREATE TABLE IF NOT EXISTS ui_items (
  chat_id     TEXT    NOT NULL REFERENCES ui_chats (id) ON DELETE CASCADE,
  id          TEXT    NOT NULL,
  pos         INTEGER NOT NULL,
  role        TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
  text        TEXT    NOT NULL DEFAULT '',
  streaming   INTEGER NOT NULL DEFAULT 0,
  parent_tool_use_id TEXT,
  created_at  INTEGER NOT NULL,
  blocks      TEXT    NOT NULL DEFAULT '[]',
  ui_queries  TEXT,
  answers     TEXT    NOT NULL DEFAULT '{}',
  ui_choice   TEXT,
  PRIMARY KEY (chat_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS ui_items_pos ON ui_items (chat_id, pos);
CREATE TABLE IF NOT EXISTS ui_access (
  chat_id     TEXT    NOT NULL,
  item_id     TEXT    NOT NULL,
  access      TEXT,
  PRIMARY KEY (chat_id, item_id),
  FOREIGN KEY (chat_id, item_id) REFERENCES ui_items (chat_id, id) ON DELETE CASCADE
);
";

/// The store's tables on SQLite, by version: [`SCHEMA`] as it was before migrations
/// existed, then what changed since (the same versions as on PostgreSQL).
pub(crate) const SQLITE_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "chats, items and captured access",
        sql: SCHEMA,
    },
    Migration {
        version: 2,
        name: "one message per choice",
        sql: "
ALTER TABLE ui_items ADD COLUMN choice_key TEXT;
UPDATE ui_items SET choice_key = json_array(
    json_extract(ui_choice, '$.itemId'), json_extract(ui_choice, '$.blockId'),
    json_extract(ui_choice, '$.revision'))
  WHERE ui_choice IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS ui_items_choice ON ui_items (chat_id, choice_key);",
    },
    Migration {
        version: 3,
        name: "streaming replies stored delta by delta",
        sql: "
ALTER TABLE ui_items ADD COLUMN reply_rev INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ui_items ADD COLUMN blocks_apart INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS ui_reply_deltas (
  chat_id     TEXT    NOT NULL,
  item_id     TEXT    NOT NULL,
  rev         INTEGER NOT NULL,
  delta       TEXT    NOT NULL,
  PRIMARY KEY (chat_id, item_id, rev),
  FOREIGN KEY (chat_id, item_id) REFERENCES ui_items (chat_id, id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ui_reply_blocks (
  chat_id     TEXT    NOT NULL,
  item_id     TEXT    NOT NULL,
  idx         INTEGER NOT NULL,
  json        TEXT    NOT NULL,
  PRIMARY KEY (chat_id, item_id, idx),
  FOREIGN KEY (chat_id, item_id) REFERENCES ui_items (chat_id, id) ON DELETE CASCADE
);",
    },
    Migration {
        version: 4,
        name: "readings kept for choices",
        sql: KEPT_READINGS_TABLE,
    },
];

/// Migration 4, the same text on SQLite and PostgreSQL: the fresh readings kept for
/// choices ([`ChatStore::keep_reading`]).
pub(crate) const KEPT_READINGS_TABLE: &str = "
CREATE TABLE IF NOT EXISTS ui_readings (
  read_id     TEXT    PRIMARY KEY,
  chat_id     TEXT    NOT NULL REFERENCES ui_chats (id) ON DELETE CASCADE,
  key         TEXT    NOT NULL,
  reading     TEXT    NOT NULL,
  kept_at     BIGINT  NOT NULL
);
CREATE INDEX IF NOT EXISTS ui_readings_kept_at ON ui_readings (kept_at);";

/// How long a fresh reading stays valid for choices sent to another process (or after a
/// restart): an hour. Within one process the host's cache decides (`host.md` §7).
const KEEP_READINGS_MS: i64 = 3_600_000;
/// The most readings kept: past it the oldest go first (a busy server keeps them for less
/// than the hour). 32 times the host's cache.
const KEEP_READINGS_CAP: i64 = 4_096;
/// Kept readings are pruned (by age and by count) at every this many keeps.
const KEEP_PRUNE_EVERY: u64 = 64;
/// The prune of kept readings: older than the `cutoff` parameter (`?1` or `$1`), or past
/// the newest [`KEEP_READINGS_CAP`].
fn prune_readings_sql(cutoff: &str) -> String {
    format!(
        "DELETE FROM ui_readings WHERE kept_at < {cutoff} OR read_id NOT IN \
         (SELECT read_id FROM ui_readings ORDER BY kept_at DESC, read_id DESC \
          LIMIT {KEEP_READINGS_CAP})"
    )
}

/// A kept reading's row: read id, chat, key text, the reading's JSON, when it was kept.
pub(crate) type KeptRow = (String, String, String, String, i64);

/// What makes a choice's message unique in its chat: the block and revision it answers
/// (`ui_items.choice_key`, a JSON array as SQLite's `json_array` writes it).
fn choice_key(o: &ChoiceOrigin) -> String {
    serde_json::to_string(&[&o.item_id, &o.block_id, &o.revision]).unwrap_or_default()
}

/// Who wrote an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person.
    User,
    /// The agent.
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// A chat as listed: `{id, title, project, createdAt}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Chat {
    /// The chat id.
    pub id: String,
    /// The title.
    pub title: String,
    /// The project the chat belongs to (the writer's access).
    pub project: String,
    /// When it was created (epoch ms).
    pub created_at: u64,
}

/// One item of a chat as a page reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatItem {
    /// The item id.
    pub id: String,
    /// Who wrote it.
    pub role: Role,
    /// The text (Markdown with UI fences for the assistant).
    pub text: String,
    /// Whether the reply still streams.
    pub streaming: bool,
    /// When it was created (epoch ms).
    pub created_at: u64,
    /// The compiled blocks (final ones carry a `revision`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ui: Vec<Arc<Block>>,
    /// Frozen first readings (`ChatUiQueryState`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui_queries: Option<UiQueryState>,
    /// Answers by block id (`ChatUiAnswer`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub ui_answers: IndexMap<String, ChoiceAnswer>,
    /// On a user item a choice produced: where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui_choice: Option<ChoiceOrigin>,
}

/// A chat with its items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatDetail {
    /// The chat.
    #[serde(flatten)]
    pub chat: Chat,
    /// Its items, oldest first: the newest page of them, or the page before the item
    /// named by `before` (see [`crate::ChatLimits`]).
    pub items: Vec<ChatItem>,
    /// Whether older items exist than the page holds: ask again with `before` set to the
    /// first item's id.
    #[serde(default)]
    pub more: bool,
}

/// One page of a chat's items, oldest first, and whether older ones exist.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ItemPage {
    pub(crate) items: Vec<ChatItem>,
    pub(crate) more: bool,
}

impl ItemPage {
    /// The page of `rows`, read newest first and only as far as the page goes: at most
    /// `limit` items within `max_bytes` of stored bytes, but always at least one.
    fn of_newest(
        rows: impl IntoIterator<Item = DbResult<ItemRow>>,
        limit: usize,
        max_bytes: usize,
    ) -> DbResult<ItemPage> {
        let (mut items, mut bytes, mut more) = (Vec::new(), 0usize, false);
        for row in rows {
            let row = row?;
            let weight = row.weight();
            if items.len() == limit || (!items.is_empty() && bytes + weight > max_bytes) {
                more = true;
                break;
            }
            bytes += weight;
            items.push(row.into_item()?);
        }
        items.reverse();
        Ok(ItemPage { items, more })
    }
}

/// Why adding an item failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AddError {
    /// The chat already holds `ChatLimits::chat_items` items.
    #[error("A chat may hold at most {0} items.")]
    ChatFull(usize),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<AddError> for ApiError {
    fn from(e: AddError) -> Self {
        match e {
            AddError::ChatFull(_) => ApiError::new(ErrorCode::ChatFull, e.to_string()),
            AddError::Db(e) => {
                tracing::error!(error = %e, "an item could not be stored");
                e.into()
            }
        }
    }
}

/// The chat's item count, or [`AddError::ChatFull`] when it holds `max` already (inside
/// the writing transaction, so two writers never both pass).
fn check_room(conn: &rusqlite::Connection, chat_id: &str, max: usize) -> Result<(), AddError> {
    let count: i64 = conn
        .prepare_cached("SELECT COUNT(*) FROM ui_items WHERE chat_id = ?1")
        .and_then(|mut s| s.query_row(params![chat_id], |r| r.get(0)))
        .map_err(DbError::from)?;
    if usize::try_from(count).unwrap_or(usize::MAX) >= max {
        return Err(AddError::ChatFull(max));
    }
    Ok(())
}

fn store_error(e: DbError) -> StoreError {
    StoreError::Failed(e.0)
}

/// A chat row with its owner (server side only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChatRow {
    pub(crate) chat: Chat,
    pub(crate) owner: String,
}

// ---- write scopes ----

#[derive(Debug)]
pub(crate) struct WriteScope {
    rs: Option<RequestSource>,
    drafts: Mutex<Vec<ChangeDraft>>,
    /// The highest cursor of the events the writes appended in their own transactions.
    cursor: Mutex<Option<Cursor>>,
}

impl WriteScope {
    fn committed(&self, cursor: Cursor) {
        let mut c = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        if c.as_ref().is_none_or(|c| c.seq < cursor.seq) {
            *c = Some(cursor);
        }
    }
}

/// What the writes of a [`write_scope`] left to record: the change events to record
/// after the commit, and the cursor of those already appended with their write.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pub(crate) drafts: Vec<ChangeDraft>,
    pub(crate) cursor: Option<Cursor>,
}

impl From<Vec<ChangeDraft>> for Pending {
    fn from(drafts: Vec<ChangeDraft>) -> Self {
        Pending {
            drafts,
            cursor: None,
        }
    }
}

impl IntoIterator for Pending {
    type Item = ChangeDraft;
    type IntoIter = std::vec::IntoIter<ChangeDraft>;
    fn into_iter(self) -> Self::IntoIter {
        self.drafts.into_iter()
    }
}

tokio::task_local! {
    static WRITE: WriteScope;
}

/// Runs `fut` collecting the change events the store records into a list (with `rs` as
/// their request source) instead of recording them; returns the output and what is left
/// to record (on PostgreSQL the store appends each write's event in the write's own
/// transaction: then only its cursor is left).
pub(crate) async fn write_scope<F: Future>(
    rs: Option<RequestSource>,
    fut: F,
) -> (F::Output, Pending) {
    let scope = WriteScope {
        rs,
        drafts: Mutex::new(Vec::new()),
        cursor: Mutex::new(None),
    };
    WRITE
        .scope(scope, async {
            let out = fut.await;
            let pending = WRITE
                .try_with(|s| Pending {
                    drafts: std::mem::take(
                        &mut *s.drafts.lock().unwrap_or_else(PoisonError::into_inner),
                    ),
                    cursor: s
                        .cursor
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take(),
                })
                .unwrap_or_default();
            (out, pending)
        })
        .await
}

/// The request source of the current write scope, if any.
pub(crate) fn scope_source() -> Option<RequestSource> {
    WRITE.try_with(|s| s.rs.clone()).ok().flatten()
}

/// What [`record_all`] recorded: the highest cursor (of the events recorded and of those
/// already appended), and how many events the change log did not take.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub(crate) cursor: Option<Cursor>,
    /// Events not recorded (refused, the feed closed, or not committed within the wait);
    /// each was logged.
    pub(crate) failed: usize,
}

/// Records the drafts of `pending` (deduplicated) at once — they share one coalescing
/// window — and waits for their rows; the highest cursor (of those and of the events
/// already appended), and how many failed.
///
/// The wait is bounded by the feed's `logFailureGrace`: while the log cannot be written
/// the appender retries an event until it succeeds, so a write never waits longer than
/// the outage takes to make the feed degraded (the event stays queued and is recorded
/// when the log heals). Every failure is logged with its source.
pub(crate) async fn record_all(sync: &SyncService, pending: impl Into<Pending>) -> Recorded {
    let Pending { drafts, cursor } = pending.into();
    let mut unique: Vec<ChangeDraft> = Vec::new();
    for d in drafts {
        if !unique.contains(&d) {
            unique.push(d);
        }
    }
    let wait = Duration::from_millis(sync.limits().log_failure_grace());
    let recorded = futures_util::future::join_all(unique.into_iter().map(|d| async move {
        let source = d.source.clone();
        (
            source,
            tokio::time::timeout(wait, sync.record_and_wait(d)).await,
        )
    }))
    .await;
    let mut out = Recorded { cursor, failed: 0 };
    for (source, result) in recorded {
        match result {
            Ok(Ok(c)) => {
                if out.cursor.as_ref().is_none_or(|best| best.seq < c.seq) {
                    out.cursor = Some(c);
                }
            }
            Ok(Err(error)) => {
                out.failed += 1;
                tracing::warn!(%source, %error, "a change event could not be recorded");
            }
            Err(_) => {
                out.failed += 1;
                tracing::warn!(
                    %source,
                    wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    "the change log did not take an event in time (it stays queued)"
                );
            }
        }
    }
    out
}

fn json_text<T: Serialize>(value: &T) -> DbResult<String> {
    Ok(serde_json::to_string(value)?)
}

fn parse_json<T: for<'de> Deserialize<'de>>(text: &str) -> DbResult<T> {
    Ok(serde_json::from_str(text)?)
}

/// A new id: 32 random hex digits.
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The raw columns of an item row.
struct ItemRow {
    id: String,
    role: String,
    text: String,
    streaming: bool,
    parent: Option<String>,
    created_at: i64,
    blocks: String,
    ui_queries: Option<String>,
    answers: String,
    ui_choice: Option<String>,
}

const ITEM_COLUMNS: &str = item_columns!("group_concat");

fn item_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ItemRow> {
    Ok(ItemRow {
        id: r.get(0)?,
        role: r.get(1)?,
        text: r.get(2)?,
        streaming: r.get(3)?,
        parent: r.get(4)?,
        created_at: r.get(5)?,
        blocks: r.get(6)?,
        ui_queries: r.get(7)?,
        answers: r.get(8)?,
        ui_choice: r.get(9)?,
    })
}

impl ItemRow {
    /// The stored bytes of the row a page counts (text, blocks, frozen readings, answers,
    /// choice origin).
    fn weight(&self) -> usize {
        self.text.len()
            + self.blocks.len()
            + self.ui_queries.as_ref().map_or(0, String::len)
            + self.answers.len()
            + self.ui_choice.as_ref().map_or(0, String::len)
    }

    fn into_item(self) -> DbResult<ChatItem> {
        Ok(ChatItem {
            id: self.id,
            role: if self.role == "user" {
                Role::User
            } else {
                Role::Assistant
            },
            text: self.text,
            streaming: self.streaming,
            created_at: u64::try_from(self.created_at).unwrap_or(0),
            ui: parse_json(&self.blocks)?,
            ui_queries: self.ui_queries.as_deref().map(parse_json).transpose()?,
            ui_answers: parse_json(&self.answers)?,
            ui_choice: self.ui_choice.as_deref().map(parse_json).transpose()?,
        })
    }

    fn into_stored(self) -> DbResult<StoredItem> {
        let parent = self.parent.clone();
        let item = self.into_item()?;
        Ok(StoredItem {
            id: item.id,
            assistant: item.role == Role::Assistant,
            streaming: item.streaming,
            parent_tool_use_id: parent,
            text: item.text,
            created_at: item.created_at,
            blocks: item.ui,
            ui_queries: item.ui_queries,
            answers: item.ui_answers,
        })
    }
}

fn load_item(
    conn: &rusqlite::Connection,
    chat_id: &str,
    item_id: &str,
) -> DbResult<Option<ItemRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {ITEM_COLUMNS} FROM ui_items WHERE chat_id = ?1 AND id = ?2"
        ))?
        .query_row(params![chat_id, item_id], item_row)
        .optional()?)
}

/// The facts of an item a `ui.query` needs, without its text, frozen readings and answers
/// (the author is read out of `ui_queries` by SQLite), and the stored JSON's length.
fn load_facts(
    conn: &rusqlite::Connection,
    chat_id: &str,
    item_id: &str,
) -> DbResult<Option<(ItemFacts, usize)>> {
    let row = conn
        .prepare_cached(concat!(
            "SELECT role, streaming, parent_tool_use_id IS NOT NULL, ",
            item_blocks!("group_concat"),
            ", json_extract(ui_queries, '$.authorChatId') \
                 FROM ui_items WHERE chat_id = ?1 AND id = ?2"
        ))?
        .query_row(params![chat_id, item_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, bool>(1)?,
                r.get::<_, bool>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })
        .optional()?;
    let Some((role, streaming, subagent, blocks, author_chat_id)) = row else {
        return Ok(None);
    };
    let weight = blocks.len() + author_chat_id.as_ref().map_or(0, String::len);
    let facts = ItemFacts {
        assistant: role == "assistant",
        streaming,
        subagent,
        author_chat_id,
        blocks: parse_json(&blocks)?,
    };
    Ok(Some((facts, weight)))
}

/// The stored access of an item: `None` when nothing is recorded, `Some(None)` when it is
/// recorded as denied.
fn load_access(
    conn: &rusqlite::Connection,
    chat_id: &str,
    item_id: &str,
) -> DbResult<Option<Option<String>>> {
    Ok(conn
        .prepare_cached("SELECT access FROM ui_access WHERE chat_id = ?1 AND item_id = ?2")?
        .query_row(params![chat_id, item_id], |r| r.get(0))
        .optional()?)
}

/// An access row as the host sees it, and its weight in the access cache (the stored
/// JSON's length).
fn access_record(row: DbResult<Option<Option<String>>>) -> (AccessRecord, usize) {
    match row {
        Ok(Some(Some(text))) => match Value::from_json_str(&text) {
            Ok(v) => (AccessRecord::Granted(Arc::new(v)), text.len()),
            Err(e) => {
                tracing::error!(error = %e, "a stored access is not JSON; it counts as denied");
                (AccessRecord::Denied, 0)
            }
        },
        Ok(Some(None)) => (AccessRecord::Denied, 0),
        Ok(None) => (AccessRecord::Absent, 0),
        // Unknown is never a grant.
        Err(e) => {
            tracing::error!(error = %e, "reading an access failed; it counts as denied");
            (AccessRecord::Denied, 0)
        }
    }
}

/// The value of a read the [`UiStore`] answers as `Option` or `bool`, where a failure can
/// only read as "absent": the failure is logged first, so it never passes for a fact.
fn logged<T, E: std::fmt::Display>(what: &str, read: Result<T, E>) -> Option<T> {
    read.map_err(|e| tracing::error!(error = %e, "reading {what} failed; it counts as absent"))
        .ok()
}

fn chat_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChatRow> {
    Ok(ChatRow {
        chat: Chat {
            id: r.get(0)?,
            title: r.get(1)?,
            project: r.get(2)?,
            created_at: u64::try_from(r.get::<_, i64>(3)?).unwrap_or(0),
        },
        owner: r.get(4)?,
    })
}

/// The server's database: the SQLite file or a PostgreSQL database.
#[derive(Clone)]
enum Backend {
    Sqlite(Db),
    Pg(PgBackend),
}

/// The chats, items and captured access of the server, in the server's database (the
/// SQLite file, or PostgreSQL with `database.url = "postgres://…"`: the same answers, the
/// same tests). Cheap to clone.
#[derive(Clone)]
pub struct ChatStore {
    /// Readings kept so far (every [`KEEP_PRUNE_EVERY`]th keep prunes).
    keeps: Arc<std::sync::atomic::AtomicU64>,
    backend: Backend,
    feed: Option<SyncService>,
    cache: Arc<StoreCache>,
    clock: Arc<dyn HostClock>,
    limits: ChatLimits,
}

impl std::fmt::Debug for ChatStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ChatStore");
        match &self.backend {
            Backend::Sqlite(db) => d.field("path", &db.path()),
            Backend::Pg(pg) => d.field("postgres", &pg.db),
        };
        d.finish_non_exhaustive()
    }
}

/// The store's former name, from when it lived in SQLite only.
pub type SqliteUiStore = ChatStore;

/// The blocks of a streaming reply that one delta changed ([`ChatStore::append_reply`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct BlockWrites {
    /// Each block whose index holds a block it did not hold before, with its JSON.
    pub(crate) changed: Vec<(usize, String)>,
    /// How many blocks the reply has now (the rows from this index on are removed).
    pub(crate) len: usize,
}

/// What [`ChatStore::update_reply`] writes.
#[derive(Debug, Clone)]
pub(crate) struct ReplyUpdate {
    pub(crate) text: String,
    pub(crate) blocks: Vec<Arc<Block>>,
    pub(crate) streaming: bool,
}

impl ChatStore {
    pub(crate) fn new(
        db: Db,
        feed: Option<SyncService>,
        clock: Arc<dyn HostClock>,
        limits: ChatLimits,
    ) -> Self {
        ChatStore {
            keeps: Arc::default(),
            backend: Backend::Sqlite(db),
            feed,
            cache: Arc::new(StoreCache::default()),
            clock,
            limits,
        }
    }

    /// The store on PostgreSQL: `pg` holds its tables (migrated) and, with a feed, the
    /// feed's log, to which every write appends its change event in its own transaction.
    pub(crate) fn new_pg(
        pg: PgBackend,
        feed: Option<SyncService>,
        clock: Arc<dyn HostClock>,
        limits: ChatLimits,
    ) -> Self {
        ChatStore {
            keeps: Arc::default(),
            backend: Backend::Pg(pg),
            feed,
            cache: Arc::new(StoreCache::default()),
            clock,
            limits,
        }
    }

    /// The SQLite database, when the store lives there.
    #[cfg(test)]
    pub(crate) fn sqlite(&self) -> Option<&Db> {
        match &self.backend {
            Backend::Sqlite(db) => Some(db),
            Backend::Pg(_) => None,
        }
    }

    /// Runs `SELECT 1` on the database (the readiness probe).
    pub(crate) async fn ping(&self) -> DbResult<()> {
        match &self.backend {
            // A fresh connection: a pooled one would still read a removed file.
            Backend::Sqlite(db) => db.ping().await,
            Backend::Pg(pg) => self.pg_ping(pg).await,
        }
    }

    /// The change feed whose log lives in this database, if any.
    pub(crate) fn feed(&self) -> Option<&SyncService> {
        self.feed.as_ref()
    }

    /// Records that `chat_id` (owned by `owner`) changed: into the request's write scope,
    /// or on the feed at once.
    fn touched(&self, chat_id: &str, owner: &str) {
        let draft = ChangeDraft {
            source: CHATS_SOURCE.to_owned(),
            audience: Some(Audience::user(owner)),
            key: Some(chat_id.to_owned()),
            rs: scope_source(),
        };
        let in_scope = WRITE
            .try_with(|s| {
                s.drafts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(draft.clone());
            })
            .is_ok();
        if !in_scope
            && let Some(feed) = &self.feed
            && let Err(e) = feed.record(draft)
        {
            tracing::warn!(chat_id, error = %e, "a chat change could not be recorded");
        }
    }

    async fn touch(&self, chat_id: &str) {
        if let Ok(Some(chat)) = self.chat(chat_id).await {
            self.touched(chat_id, &chat.row.owner);
        }
    }

    /// Drops the cached facts of the item `item_id` of `chat_id` (call it right after a
    /// write to the item commits, inside the blocking call).
    fn item_written(cache: &StoreCache, chat_id: &str, item_id: &str) {
        cache.item_written(chat_id, item_id);
    }

    /// Creates a chat owned by `owner` in `project`.
    pub(crate) async fn create_chat(
        &self,
        owner: &str,
        project: &str,
        title: &str,
    ) -> DbResult<Chat> {
        let chat = Chat {
            id: new_id(),
            title: title.to_owned(),
            project: project.to_owned(),
            created_at: self.clock.now_ms(),
        };
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                self.pg_create_chat(pg, &chat, owner).await?;
                return Ok(chat);
            }
        };
        let (c, o) = (chat.clone(), owner.to_owned());
        db.write(move |conn| {
            conn.execute(
                "INSERT INTO ui_chats (id, owner, project, title, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                params![c.id, o, c.project, c.title, c.created_at as i64],
            )?;
            Ok(())
        })
        .await?;
        self.touched(&chat.id, owner);
        Ok(chat)
    }

    /// The chats of `owner`, newest first.
    pub(crate) async fn chats_of(&self, owner: &str) -> DbResult<Vec<Chat>> {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => return self.pg_chats_of(pg, owner).await,
        };
        let owner = owner.to_owned();
        db.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, title, project, created_at, owner FROM ui_chats \
                     WHERE owner = ?1 ORDER BY created_at DESC, id",
            )?;
            let rows = stmt.query_map(params![owner], chat_row)?;
            Ok(rows
                .collect::<rusqlite::Result<Vec<_>>>()?
                .into_iter()
                .map(|r| r.chat)
                .collect())
        })
        .await
    }

    /// The chat `chat_id` with its owner and the host's [`ChatInfo`] (cached: chats never
    /// change once created).
    pub(crate) async fn chat(&self, chat_id: &str) -> DbResult<Option<Arc<CachedChat>>> {
        if let Some(chat) = self.cache.chats.get(chat_id) {
            return Ok(Some(chat));
        }
        // Boxed, as the other cached reads' database paths: that future is large, and every
        // caller's future would otherwise hold it, to be copied whole into the box of each
        // `UiStore` call (`async_trait`) even when the cache answers.
        Box::pin(self.chat_uncached(chat_id)).await
    }

    /// [`ChatStore::chat`] from the database, then cached.
    async fn chat_uncached(&self, chat_id: &str) -> DbResult<Option<Arc<CachedChat>>> {
        let ticket = self.cache.chats.ticket();
        let id = chat_id.to_owned();
        let row = match &self.backend {
            Backend::Sqlite(db) => {
                db.read(move |c| {
                    Ok(c.prepare_cached(
                        "SELECT id, title, project, created_at, owner FROM ui_chats WHERE id = ?1",
                    )?
                    .query_row(params![id], chat_row)
                    .optional()?)
                })
                .await?
            }
            Backend::Pg(pg) => self.pg_chat_row(pg, chat_id).await?,
        };
        let Some(row) = row else {
            return Ok(None);
        };
        let mut data = ui_core::Record::default();
        data.insert("owner".into(), Value::from(row.owner.as_str()));
        data.insert("project".into(), Value::from(row.chat.project.as_str()));
        let chat = Arc::new(CachedChat {
            info: Arc::new(ChatInfo {
                chat_id: row.chat.id.clone(),
                data: Value::record(data),
            }),
            row,
        });
        self.cache
            .chats
            .offer(ticket, chat_id.to_owned(), Arc::clone(&chat), 0);
        Ok(Some(chat))
    }

    /// A page of the items of `chat_id`, oldest first: the newest `limit` items (before
    /// the item `before` when given) whose stored bytes stay within
    /// [`ChatLimits::page_bytes`] — but always at least one. `None` when `before` is not
    /// an item of the chat. Rows are read newest first and only as far as the page goes.
    pub(crate) async fn items_page(
        &self,
        chat_id: &str,
        before: Option<&str>,
        limit: usize,
    ) -> DbResult<Option<ItemPage>> {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => return self.pg_items_page(pg, chat_id, before, limit).await,
        };
        let (id, before) = (chat_id.to_owned(), before.map(str::to_owned));
        let max_bytes = self.limits.page_bytes;
        db.read(move |c| {
            let below = match before {
                None => i64::MAX,
                Some(before) => {
                    let pos = c
                        .prepare_cached("SELECT pos FROM ui_items WHERE chat_id = ?1 AND id = ?2")?
                        .query_row(params![id, before], |r| r.get::<_, i64>(0))
                        .optional()?;
                    match pos {
                        Some(pos) => pos,
                        None => return Ok(None),
                    }
                }
            };
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {ITEM_COLUMNS} FROM ui_items WHERE chat_id = ?1 AND pos < ?2 \
                     ORDER BY pos DESC"
            ))?;
            let mut rows = stmt.query(params![id, below])?;
            let rows = std::iter::from_fn(|| match rows.next() {
                Ok(row) => row.map(|r| Ok(item_row(r)?)),
                Err(e) => Some(Err(e.into())),
            });
            ItemPage::of_newest(rows, limit, max_bytes).map(Some)
        })
        .await
    }

    /// The item `item_id` of `chat_id` as a page reads it.
    pub(crate) async fn chat_item(
        &self,
        chat_id: &str,
        item_id: &str,
    ) -> DbResult<Option<ChatItem>> {
        self.item_as(chat_id, item_id, ItemRow::into_item).await
    }

    /// The stored row of the item `item_id` of `chat_id`, made into a `T` by `into` (on
    /// SQLite in the blocking call that read it).
    async fn item_as<T: Send + 'static>(
        &self,
        chat_id: &str,
        item_id: &str,
        into: fn(ItemRow) -> DbResult<T>,
    ) -> DbResult<Option<T>> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (c, i) = (chat_id.to_owned(), item_id.to_owned());
                db.read(move |conn| load_item(conn, &c, &i)?.map(into).transpose())
                    .await
            }
            Backend::Pg(pg) => self
                .pg_item_row(pg, chat_id, item_id)
                .await?
                .map(into)
                .transpose(),
        }
    }

    /// Appends an item to the chat: an assistant reply (`streaming` while it streams) or a
    /// person's message.
    ///
    /// # Errors
    /// [`AddError::ChatFull`] when the chat holds [`ChatLimits::chat_items`] items.
    pub(crate) async fn add_item(
        &self,
        chat_id: &str,
        role: Role,
        text: &str,
        streaming: bool,
    ) -> Result<ChatItem, AddError> {
        let item = ChatItem {
            id: new_id(),
            role,
            text: text.to_owned(),
            streaming,
            created_at: self.clock.now_ms(),
            ui: Vec::new(),
            ui_queries: None,
            ui_answers: IndexMap::new(),
            ui_choice: None,
        };
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                self.pg_add_item(pg, chat_id, &item).await?;
                return Ok(item);
            }
        };
        let (chat, it, max) = (chat_id.to_owned(), item.clone(), self.limits.chat_items);
        db.write(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if let Err(e) = check_room(&tx, &chat, max) {
                return Ok(Err(e));
            }
            tx.execute(
                "INSERT INTO ui_items (chat_id, id, pos, role, text, streaming, created_at) \
                     VALUES (?1, ?2, \
                       (SELECT COALESCE(MAX(pos), 0) + 1 FROM ui_items WHERE chat_id = ?1), \
                       ?3, ?4, ?5, ?6)",
                params![
                    chat,
                    it.id,
                    it.role.as_str(),
                    it.text,
                    it.streaming,
                    it.created_at as i64
                ],
            )?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await??;
        self.touch(chat_id).await;
        Ok(item)
    }

    /// Stores a reply's text, compiled blocks and streaming flag, whole: the deltas and
    /// blocks stored apart since the last whole write are dropped. Answers the reply's new
    /// revision (what the next [`ChatStore::append_reply`] must name), `None` when there is
    /// no such item.
    pub(crate) async fn update_reply(
        &self,
        chat_id: &str,
        item_id: &str,
        update: ReplyUpdate,
    ) -> DbResult<Option<i64>> {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => return self.pg_update_reply(pg, chat_id, item_id, update).await,
        };
        let blocks = json_text(&update.blocks)?;
        let (c, i, cache) = (
            chat_id.to_owned(),
            item_id.to_owned(),
            Arc::clone(&self.cache),
        );
        let rev = db
            .write(move |conn| {
                let tx = conn.transaction()?;
                let rev: Option<i64> = tx
                    .prepare_cached(
                        "UPDATE ui_items SET text = ?3, blocks = ?4, streaming = ?5, \
                           blocks_apart = 0, reply_rev = reply_rev + 1 \
                         WHERE chat_id = ?1 AND id = ?2 RETURNING reply_rev",
                    )?
                    .query_row(params![c, i, update.text, blocks, update.streaming], |r| {
                        r.get(0)
                    })
                    .optional()?;
                if rev.is_some() {
                    for sql in [
                        "DELETE FROM ui_reply_deltas WHERE chat_id = ?1 AND item_id = ?2",
                        "DELETE FROM ui_reply_blocks WHERE chat_id = ?1 AND item_id = ?2",
                    ] {
                        tx.prepare_cached(sql)?.execute(params![c, i])?;
                    }
                }
                tx.commit()?;
                Self::item_written(&cache, &c, &i);
                Ok(rev)
            })
            .await?;
        self.touch(chat_id).await;
        Ok(rev)
    }

    /// Appends `delta` to the text of the streaming reply `item_id` and writes the blocks
    /// that changed, when the item is a streaming assistant reply still at revision `rev`
    /// (nothing else wrote it since); answers whether it was (and so whether anything was
    /// written). The write is in proportion to the delta and the changed blocks, not to the
    /// reply: the delta gets a row of its own (an empty one none, so the rows of a reply
    /// are bounded by its length), each changed block's JSON replaces its row, and the
    /// item's row only takes the next revision. The reply is then at `rev + 1`.
    pub(crate) async fn append_reply(
        &self,
        chat_id: &str,
        item_id: &str,
        rev: i64,
        delta: &str,
        blocks: BlockWrites,
    ) -> DbResult<bool> {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                return self
                    .pg_append_reply(pg, chat_id, item_id, rev, delta, blocks)
                    .await;
            }
        };
        let (c, i, d, cache) = (
            chat_id.to_owned(),
            item_id.to_owned(),
            delta.to_owned(),
            Arc::clone(&self.cache),
        );
        let appended = db
            .write(move |conn| {
                let tx = conn.transaction()?;
                let rows = tx
                    .prepare_cached(
                        "UPDATE ui_items SET reply_rev = ?4, blocks_apart = 1, blocks = '[]' \
                         WHERE chat_id = ?1 AND id = ?2 AND role = 'assistant' \
                           AND streaming = 1 AND reply_rev = ?3",
                    )?
                    .execute(params![c, i, rev, rev + 1])?;
                if rows == 0 {
                    return Ok(false);
                }
                if !d.is_empty() {
                    tx.prepare_cached(
                        "INSERT INTO ui_reply_deltas (chat_id, item_id, rev, delta) \
                         VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![c, i, rev + 1, d])?;
                }
                let mut upsert = tx.prepare_cached(
                    "INSERT INTO ui_reply_blocks (chat_id, item_id, idx, json) \
                     VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (chat_id, item_id, idx) DO UPDATE SET json = excluded.json",
                )?;
                for (idx, json) in &blocks.changed {
                    upsert.execute(params![c, i, idx, json])?;
                }
                drop(upsert);
                tx.prepare_cached(
                    "DELETE FROM ui_reply_blocks WHERE chat_id = ?1 AND item_id = ?2 AND idx >= ?3",
                )?
                .execute(params![c, i, blocks.len])?;
                tx.commit()?;
                Self::item_written(&cache, &c, &i);
                Ok(true)
            })
            .await?;
        if appended {
            self.touch(chat_id).await;
        }
        Ok(appended)
    }

    /// The stored item, as the host service sees it.
    pub(crate) async fn stored_item(
        &self,
        chat_id: &str,
        item_id: &str,
    ) -> DbResult<Option<StoredItem>> {
        self.item_as(chat_id, item_id, ItemRow::into_stored).await
    }

    /// The block `block_id` of the item with the item's flags and author (`UiStore::block`).
    /// From the cache for a settled item ([`ItemFacts::settled`]); otherwise one database
    /// call reads the item's facts (not its text, frozen readings or answers) and, unless
    /// cached, its access, which the service asks for next.
    pub(crate) async fn stored_block(
        &self,
        chat_id: &str,
        item_id: &str,
        block_id: &str,
    ) -> DbResult<Option<StoredBlock>> {
        let key = item_key(chat_id, item_id);
        if let Some(cached) = self.cache.items.get(&key) {
            return Ok(cached.block(block_id));
        }
        // Boxed (see `chat`).
        Box::pin(self.stored_block_uncached(key, chat_id, item_id, block_id)).await
    }

    /// [`ChatStore::stored_block`] from the database (`key` is the item's cache key).
    async fn stored_block_uncached(
        &self,
        key: ItemRef<'_>,
        chat_id: &str,
        item_id: &str,
        block_id: &str,
    ) -> DbResult<Option<StoredBlock>> {
        let with_access = self.cache.access.get(&key).is_none();
        let (item_ticket, access_ticket) = (self.cache.items.ticket(), self.cache.access.ticket());
        let (c, i) = (chat_id.to_owned(), item_id.to_owned());
        let (facts, access) = match &self.backend {
            Backend::Sqlite(db) => {
                db.read(move |conn| {
                    let tx = conn.unchecked_transaction()?;
                    let facts = load_facts(&tx, &c, &i)?;
                    let access = match &facts {
                        Some(_) if with_access => Some(load_access(&tx, &c, &i)),
                        _ => None,
                    };
                    tx.finish()?;
                    Ok((facts, access))
                })
                .await?
            }
            Backend::Pg(pg) => self.pg_facts(pg, chat_id, item_id, with_access).await?,
        };
        if let Some((AccessRecord::Granted(access), weight)) = access.map(access_record) {
            self.cache
                .access
                .offer(access_ticket, key.to_key(), access, weight);
        }
        let Some((facts, weight)) = facts else {
            return Ok(None);
        };
        if !facts.settled(chat_id) {
            return Ok(facts.block(block_id, None));
        }
        // Settled: cached, and handed out under the entry's lease (withdrawn at once if
        // the offer is refused and this was the entry's last holder).
        let cached = Arc::new(CachedFacts::new(facts));
        self.cache
            .items
            .offer(item_ticket, key.to_key(), Arc::clone(&cached), weight);
        Ok(cached.block(block_id))
    }

    /// A granted access from the database, then cached (`UiStore::access` on a miss; `key`
    /// is the item's cache key).
    async fn access_uncached(
        &self,
        key: ItemRef<'_>,
        chat_id: &str,
        item_id: &str,
    ) -> AccessRecord {
        let ticket = self.cache.access.ticket();
        let (c, i) = (chat_id.to_owned(), item_id.to_owned());
        let row = match &self.backend {
            Backend::Sqlite(db) => db.read(move |conn| load_access(conn, &c, &i)).await,
            Backend::Pg(pg) => self.pg_load_access(pg, chat_id, item_id).await,
        };
        let (access, weight) = access_record(row);
        if let AccessRecord::Granted(granted) = &access {
            self.cache
                .access
                .offer(ticket, key.to_key(), Arc::clone(granted), weight);
        }
        access
    }

    /// Runs `f` in one write transaction on the application database (the write path of
    /// sources). `f` must not write the store's own tables (`ui_chats`, `ui_items`,
    /// `ui_access`): their cached entries would not be dropped.
    pub(crate) async fn transaction<R, F>(&self, f: F) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> DbResult<R> + Send + 'static,
    {
        let Backend::Sqlite(db) = &self.backend else {
            return Err(DbError(
                "the sources' write path needs the SQLite database".into(),
            ));
        };
        db.write(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
        .await
    }
}

#[async_trait]
impl UiStore for ChatStore {
    /// Kept in the store's database for an hour (at most the newest 4,096), on SQLite as on
    /// PostgreSQL: several servers on one database check each other's read ids, and a
    /// server that restarted still takes a choice made on the page it served before.
    async fn keep_reading(&self, kept: KeptReading) -> Result<(), StoreError> {
        let Some(read_id) = kept.reading.read_id.clone() else {
            return Ok(());
        };
        let now = i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX);
        let reading = json_text(&kept.reading).map_err(store_error)?;
        let row: KeptRow = (read_id, kept.chat_id, kept.key, reading, now);
        let kept = self
            .keeps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prune_before = (kept % KEEP_PRUNE_EVERY == KEEP_PRUNE_EVERY - 1)
            .then(|| now.saturating_sub(KEEP_READINGS_MS));
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                return self
                    .pg_keep_reading(pg, row, prune_before)
                    .await
                    .map_err(store_error);
            }
        };
        db.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO ui_readings (read_id, chat_id, key, reading, kept_at) \
                 SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM ui_chats WHERE id = ?2) \
                 ON CONFLICT (read_id) DO NOTHING",
            )?
            .execute(params![row.0, row.1, row.2, row.3, row.4])?;
            if let Some(cutoff) = prune_before {
                conn.prepare_cached(&prune_readings_sql("?1"))?
                    .execute(params![cutoff])?;
            }
            Ok(())
        })
        .await
        .map_err(store_error)
    }

    /// Only a reading kept within the hour (older rows wait for the next keep's
    /// pruning). A failed read is logged and answers `None` (the choice is then refused
    /// `stale-read`, as with a read id no process kept).
    async fn kept_reading(&self, read_id: &str) -> Option<KeptReading> {
        let now = i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX);
        let since = now.saturating_sub(KEEP_READINGS_MS);
        let row = match &self.backend {
            Backend::Pg(pg) => self.pg_kept_reading(pg, read_id, since).await,
            Backend::Sqlite(db) => {
                let id = read_id.to_owned();
                db.read(move |conn| {
                    Ok(conn
                        .prepare_cached(
                            "SELECT chat_id, key, reading FROM ui_readings \
                             WHERE read_id = ?1 AND kept_at >= ?2",
                        )?
                        .query_row(params![id, since], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                        })
                        .optional()?)
                })
                .await
            }
        };
        let (chat_id, key, reading): (String, String, String) = logged("a kept reading", row)??;
        let reading = logged("a kept reading", parse_json(&reading))?;
        Some(KeptReading::new(chat_id, key, reading))
    }

    async fn chat_info(&self, chat_id: &str) -> Option<Arc<ChatInfo>> {
        Some(Arc::clone(
            &logged("a chat", self.chat(chat_id).await)??.info,
        ))
    }

    async fn item(&self, chat_id: &str, item_id: &str) -> Option<StoredItem> {
        logged("an item", self.stored_item(chat_id, item_id).await).flatten()
    }

    async fn block(&self, chat_id: &str, item_id: &str, block_id: &str) -> Option<StoredBlock> {
        logged(
            "a block",
            self.stored_block(chat_id, item_id, block_id).await,
        )
        .flatten()
    }

    async fn has_newer_item(&self, chat_id: &str, item_id: &str) -> bool {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                let newer = self.pg_has_newer_item(pg, chat_id, item_id).await;
                return logged("the newer items", newer).unwrap_or(false);
            }
        };
        let (c, i) = (chat_id.to_owned(), item_id.to_owned());
        let newer = db.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM ui_items WHERE chat_id = ?1 \
                           AND role = 'assistant' AND parent_tool_use_id IS NULL \
                           AND pos > (SELECT pos FROM ui_items WHERE chat_id = ?1 AND id = ?2))",
                )?
                .query_row(params![c, i], |r| r.get(0))?)
        });
        logged("the newer items", newer.await).unwrap_or(false)
    }

    /// A granted access from the cache; anything else from the database (absent and denied
    /// change during a capture, a failed read may pass next time).
    async fn access(&self, chat_id: &str, item_id: &str) -> AccessRecord {
        let key = item_key(chat_id, item_id);
        if let Some(access) = self.cache.access.get(&key) {
            return AccessRecord::Granted(access);
        }
        // Boxed (see `chat`).
        Box::pin(self.access_uncached(key, chat_id, item_id)).await
    }

    async fn set_access(
        &self,
        chat_id: &str,
        item_id: &str,
        access: Option<Arc<Value>>,
    ) -> Result<(), StoreError> {
        let (c, i, cache) = (
            chat_id.to_owned(),
            item_id.to_owned(),
            Arc::clone(&self.cache),
        );
        let text = access.map(|a| a.to_js_json());
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                return self
                    .pg_set_access(pg, chat_id, item_id, text)
                    .await
                    .map_err(store_error);
            }
        };
        db.write(move |conn| {
            let written = conn
                .prepare_cached(
                    "INSERT INTO ui_access (chat_id, item_id, access) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (chat_id, item_id) DO UPDATE SET access = excluded.access",
                )
                .and_then(|mut s| s.execute(params![c, i, text]));
            // Dropped even when the write failed: what it left is unknown.
            cache.access_written(&c, &i);
            written?;
            Ok(())
        })
        .await
        .map_err(store_error)
    }

    async fn set_ui_queries(
        &self,
        chat_id: &str,
        item_id: &str,
        state: UiQueryState,
    ) -> Result<(), StoreError> {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                return self
                    .pg_set_ui_queries(pg, chat_id, item_id, &state)
                    .await
                    .map_err(store_error);
            }
        };
        let text = json_text(&state).map_err(store_error)?;
        let (c, i, cache) = (
            chat_id.to_owned(),
            item_id.to_owned(),
            Arc::clone(&self.cache),
        );
        let written = db
            .write(move |conn| {
                let written = conn
                    .prepare_cached(
                        "UPDATE ui_items SET ui_queries = ?3 WHERE chat_id = ?1 AND id = ?2",
                    )
                    .and_then(|mut s| s.execute(params![c, i, text]));
                Self::item_written(&cache, &c, &i);
                Ok(written?)
            })
            .await
            .map_err(store_error)?;
        if written > 0 {
            self.touch(chat_id).await;
        }
        Ok(())
    }

    async fn send_choice(
        &self,
        chat_id: &str,
        origin: &ChoiceOrigin,
        context: &str,
    ) -> Result<SendResult, StoreError> {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => return self.pg_send_choice(pg, chat_id, origin, context).await,
        };
        let (c, o, text) = (chat_id.to_owned(), origin.clone(), context.to_owned());
        let (max, now, key) = (
            self.limits.chat_items,
            self.clock.now_ms(),
            choice_key(origin),
        );
        let sent = db
            .write(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                // A message already logged for this block and revision is the answer
                // (crash recovery, `host.md` §12.1 step 4).
                let existing: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM ui_items WHERE chat_id = ?1 \
                       AND choice_key = ?2)",
                    params![c, key],
                    |r| r.get(0),
                )?;
                let queued: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM ui_items WHERE chat_id = ?1 \
                       AND role = 'assistant' AND streaming = 1)",
                    params![c],
                    |r| r.get(0),
                )?;
                if !existing {
                    match check_room(&tx, &c, max) {
                        Ok(()) => {}
                        Err(AddError::ChatFull(max)) => {
                            return Ok(Err(StoreError::ChatFull(format!(
                                "The chat holds {max} items, as many as it may."
                            ))));
                        }
                        Err(AddError::Db(e)) => return Err(e),
                    }
                    tx.execute(
                        "INSERT INTO ui_items (chat_id, id, pos, role, text, streaming, \
                           created_at, ui_choice, choice_key) \
                         VALUES (?1, ?2, \
                           (SELECT COALESCE(MAX(pos), 0) + 1 FROM ui_items WHERE chat_id = ?1), \
                           'user', ?3, 0, ?4, ?5, ?6)",
                        params![c, new_id(), text, now as i64, json_text(&o)?, key],
                    )?;
                }
                tx.commit()?;
                Ok(Ok(SendResult {
                    queued,
                    turn_id: None,
                }))
            })
            .await
            .map_err(store_error)??;
        self.touch(chat_id).await;
        Ok(sent)
    }

    async fn record_answer(&self, chat_id: &str, answer: ChoiceAnswer) -> Result<(), StoreError> {
        let db = match &self.backend {
            Backend::Sqlite(db) => db,
            Backend::Pg(pg) => {
                return self
                    .pg_record_answer(pg, chat_id, answer)
                    .await
                    .map_err(store_error);
            }
        };
        let (c, a, cache) = (chat_id.to_owned(), answer, Arc::clone(&self.cache));
        let written = db
            .write(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let text: Option<String> = tx
                    .query_row(
                        "SELECT answers FROM ui_items WHERE chat_id = ?1 AND id = ?2",
                        params![c, a.origin.item_id],
                        |r| r.get(0),
                    )
                    .optional()?;
                let Some(text) = text else {
                    return Ok(false);
                };
                let mut answers: IndexMap<String, ChoiceAnswer> = parse_json(&text)?;
                answers.insert(a.origin.block_id.clone(), a.clone());
                tx.execute(
                    "UPDATE ui_items SET answers = ?3 WHERE chat_id = ?1 AND id = ?2",
                    params![c, a.origin.item_id, json_text(&answers)?],
                )?;
                tx.commit()?;
                // Answers are not cached; every write to an item drops it all the same.
                Self::item_written(&cache, &c, &a.origin.item_id);
                Ok(true)
            })
            .await
            .map_err(store_error)?;
        if written {
            self.touch(chat_id).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ui_compiler::{CompileOptions, UiCompiler};
    use ui_host::TokioClock;

    use super::*;

    struct Fixture {
        store: ChatStore,
        dir: std::path::PathBuf,
        pg: Option<crate::pg::test_db::TestDb>,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    impl Fixture {
        async fn finish(mut self) {
            if let Some(pg) = self.pg.take() {
                pg.finish().await;
            }
        }
    }

    /// The store on a fresh PostgreSQL database of the test cluster (`None`: no cluster,
    /// see [`crate::pg::test_db::cluster`]).
    async fn pg_fixture(tag: &str) -> Option<Fixture> {
        let pg = crate::pg::test_db::fresh(tag).await?;
        let db = crate::pg::PgDb::open(&pg.url, 4, Duration::from_secs(5), PG_MIGRATIONS)
            .await
            .unwrap();
        Some(Fixture {
            store: ChatStore::new_pg(
                PgBackend { db, log: None },
                None,
                Arc::new(TokioClock::new()),
                ChatLimits::default(),
            ),
            dir: std::env::temp_dir().join(format!("ui-server-store-pg-{}", new_id())),
            pg: Some(pg),
        })
    }

    async fn fixture(tag: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "ui-server-store-{tag}-{}-{}",
            std::process::id(),
            new_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::open(&dir.join("app.db"), "", 2).await.unwrap();
        db.migrate(SQLITE_MIGRATIONS).await.unwrap();
        Fixture {
            store: ChatStore::new(db, None, Arc::new(TokioClock::new()), ChatLimits::default()),
            dir,
            pg: None,
        }
    }

    /// A scenario taking a [`Fixture`] as two tests: on a fresh SQLite file, and on a fresh
    /// database of the PostgreSQL test cluster (see [`pg_fixture`]).
    macro_rules! on_both_databases {
        ($sqlite:ident, $postgres:ident, $scenario:ident, $tag:literal) => {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $sqlite() {
                $scenario(fixture($tag).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $postgres() {
                if let Some(f) = pg_fixture($tag).await {
                    $scenario(f).await;
                }
            }
        };
    }

    /// The final blocks of a reply whose one block shows `text`.
    fn final_blocks(item_id: &str, text: &str) -> Vec<Arc<Block>> {
        let reply = format!("```ui\n<Summary>{text}</Summary>\n```\n");
        let options = CompileOptions {
            id: item_id.to_owned(),
            is_final: true,
            ..CompileOptions::default()
        };
        UiCompiler::new()
            .compile(&reply, &options)
            .into_iter()
            .map(|b| {
                let mut block = Block::clone(&b);
                block.revision = Some(ui_host::block_revision(&block));
                Arc::new(block)
            })
            .collect()
    }

    fn finished(item_id: &str, text: &str) -> ReplyUpdate {
        ReplyUpdate {
            text: text.to_owned(),
            blocks: final_blocks(item_id, text),
            streaming: false,
        }
    }

    /// A new chat of alice's holding an empty streaming reply: their ids.
    async fn streaming_reply(store: &ChatStore) -> (String, String) {
        let chat = store.create_chat("alice", "web", "t").await.unwrap();
        let item = store
            .add_item(&chat.id, Role::Assistant, "", true)
            .await
            .unwrap();
        (chat.id, item.id)
    }

    /// The UI state a capture writes first: the chat is the item's author.
    fn authored_by(chat_id: &str) -> UiQueryState {
        UiQueryState {
            author_chat_id: chat_id.to_owned(),
            blocks: IndexMap::new(),
        }
    }

    on_both_databases!(
        fresh_readings_are_kept_for_choices_of_any_process,
        fresh_readings_are_kept_for_choices_of_any_process_on_postgres,
        kept_readings,
        "kept"
    );

    async fn kept_readings(f: Fixture) {
        let store = &f.store;
        let chat = store.create_chat("alice", "web", "t").await.unwrap();
        let reading = |id: &str| {
            let rows = ui_core::Value::from_json_str(r#"[{"id": 2, "branch": "dev"}]"#).unwrap();
            ui_host::QueryReading::fresh(rows, id.to_owned(), 5)
        };
        let keep = |chat: &str, key: &str, id: &str| {
            store.keep_reading(KeptReading::new(chat, key, reading(id)))
        };
        keep(&chat.id, "k1", "r1").await.unwrap();
        let kept = store.kept_reading("r1").await.expect("kept");
        assert_eq!(kept, KeptReading::new(&chat.id, "k1", reading("r1")));
        assert!(store.kept_reading("r2").await.is_none());
        // A read id is kept once: the first reading stays.
        keep(&chat.id, "k2", "r1").await.unwrap();
        assert_eq!(store.kept_reading("r1").await.unwrap().key, "k1");
        // A chat that is gone keeps nothing (and no error: the page has its answer).
        keep("no-such-chat", "k", "r3").await.unwrap();
        assert!(store.kept_reading("r3").await.is_none());
        // At most the newest KEEP_READINGS_CAP (pruned every KEEP_PRUNE_EVERY keeps).
        let more = KEEP_READINGS_CAP as usize + 2 * KEEP_PRUNE_EVERY as usize;
        for n in 0..more {
            keep(&chat.id, "k", &format!("n{n:05}")).await.unwrap();
        }
        assert!(store.kept_reading("r1").await.is_none(), "the oldest went");
        assert!(store.kept_reading("n00000").await.is_none());
        let last = format!("n{:05}", more - 1);
        assert!(store.kept_reading(&last).await.is_some());
        f.finish().await;
    }

    on_both_databases!(
        only_settled_facts_are_cached_and_writes_drop_them,
        only_settled_facts_are_cached_and_writes_drop_them_on_postgres,
        settled_facts,
        "writes"
    );

    async fn settled_facts(f: Fixture) {
        let store = &f.store;
        let (chat, item) = streaming_reply(store).await;
        let (c, i) = (chat.as_str(), item.as_str());
        let block_id = final_blocks(i, "one")[0].id.clone();

        // A streaming item is read from the database every time, never cached.
        let first = final_blocks(i, "one");
        store
            .update_reply(
                c,
                i,
                ReplyUpdate {
                    text: "one".into(),
                    blocks: first.clone(),
                    streaming: true,
                },
            )
            .await
            .unwrap();
        let stored = store.stored_block(c, i, &block_id).await.unwrap().unwrap();
        assert!(stored.streaming);
        assert_eq!(store.cache.items.len(), 0);

        // Finished but not captured yet: the author may still change, so not cached.
        store.update_reply(c, i, finished(i, "one")).await.unwrap();
        let stored = store.stored_block(c, i, &block_id).await.unwrap().unwrap();
        assert!(!stored.streaming && stored.assistant && !stored.subagent);
        assert_eq!(stored.block.revision, first[0].revision);
        assert_eq!(stored.author_chat_id, None);
        assert_eq!(store.cache.items.len(), 0);

        // Captured: settled, cached, and its author is seen at once.
        store.set_ui_queries(c, i, authored_by(c)).await.unwrap();
        let stored = store.stored_block(c, i, &block_id).await.unwrap().unwrap();
        assert_eq!(stored.author_chat_id.as_deref(), Some(c));
        assert_eq!(store.cache.items.len(), 1);

        // A rewrite of the item (which the replies never do once finished) shows at once.
        store.update_reply(c, i, finished(i, "two")).await.unwrap();
        let two = final_blocks(i, "two");
        assert_ne!(two[0].revision, first[0].revision);
        let stored = store.stored_block(c, i, &block_id).await.unwrap().unwrap();
        assert_eq!(stored.block.revision, two[0].revision);
        // So does another author (as a fork's capture would write): no longer settled.
        assert_eq!(store.cache.items.len(), 1);
        store
            .set_ui_queries(c, i, authored_by("other"))
            .await
            .unwrap();
        let stored = store.stored_block(c, i, &block_id).await.unwrap().unwrap();
        assert_eq!(stored.author_chat_id.as_deref(), Some("other"));
        assert_eq!(store.cache.items.len(), 0);

        // Captured access: absent and denied are never cached, granted is; every write to
        // it is seen at once.
        assert_eq!(store.access(c, i).await, AccessRecord::Absent);
        store.set_access(c, i, None).await.unwrap();
        assert_eq!(store.access(c, i).await, AccessRecord::Denied);
        assert_eq!(store.cache.access.len(), 0);
        let access = Arc::new(Value::from("web"));
        store
            .set_access(c, i, Some(Arc::clone(&access)))
            .await
            .unwrap();
        assert_eq!(
            store.access(c, i).await,
            AccessRecord::Granted(Arc::clone(&access))
        );
        assert_eq!(store.cache.access.len(), 1);
        store.set_access(c, i, None).await.unwrap();
        assert_eq!(store.access(c, i).await, AccessRecord::Denied);

        // The chat's info comes from the cache once read.
        let info = store.chat_info(c).await.unwrap();
        assert_eq!(info.chat_id, chat);
        let data = info.data.as_record().unwrap();
        assert_eq!(data.get("owner").and_then(Value::as_str), Some("alice"));
        assert_eq!(data.get("project").and_then(Value::as_str), Some("web"));
        assert!(store.cache.chats.get(c).is_some());
        f.finish().await;
    }

    on_both_databases!(
        a_streaming_reply_is_stored_delta_by_delta,
        a_streaming_reply_is_stored_delta_by_delta_on_postgres,
        delta_by_delta,
        "deltas"
    );

    /// How many deltas and blocks of the item are stored apart, and the length of the text
    /// and blocks in the item's own row.
    async fn apart(store: &ChatStore, c: &str, i: &str) -> (i64, i64, i64) {
        const SQL: [&str; 3] = [
            "SELECT COUNT(*) FROM ui_reply_deltas WHERE chat_id = $1 AND item_id = $2",
            "SELECT COUNT(*) FROM ui_reply_blocks WHERE chat_id = $1 AND item_id = $2",
            "SELECT CAST(length(text) + length(blocks) AS BIGINT) FROM ui_items \
             WHERE chat_id = $1 AND id = $2",
        ];
        let mut counts = [0; 3];
        for (count, sql) in counts.iter_mut().zip(SQL) {
            *count = match &store.backend {
                Backend::Sqlite(db) => {
                    let (c, i, sql) = (c.to_owned(), i.to_owned(), sql.replace('$', "?"));
                    db.read(move |conn| Ok(conn.query_row(&sql, params![c, i], |r| r.get(0))?))
                        .await
                        .unwrap()
                }
                Backend::Pg(pg) => {
                    let conn = pg.db.get().await.unwrap();
                    let n = conn.query_one(sql, &[&c, &i]).await.unwrap().get(0);
                    conn.release();
                    n
                }
            };
        }
        (counts[0], counts[1], counts[2])
    }

    async fn delta_by_delta(f: Fixture) {
        let store = &f.store;
        let (chat, item) = streaming_reply(store).await;
        let (c, i) = (chat.as_str(), item.as_str());
        let (one, two) = (final_blocks(i, "one"), final_blocks(i, "two"));
        let json = |b: &Arc<Block>| serde_json::to_string(&**b).unwrap();
        let writes = |changed: Vec<(usize, String)>, len| BlockWrites { changed, len };
        let read = async || store.chat_item(c, i).await.unwrap().unwrap();
        let append = async |rev, delta: &str, blocks| {
            store.append_reply(c, i, rev, delta, blocks).await.unwrap()
        };
        let blocks = |item: &ChatItem| serde_json::to_value(&item.ui).unwrap();

        // Written whole, the reply gets a revision; each append names the one it follows.
        let rev = store
            .update_reply(
                c,
                i,
                ReplyUpdate {
                    text: "Hi ".into(),
                    blocks: one.clone(),
                    streaming: true,
                },
            )
            .await
            .unwrap()
            .expect("the item exists");
        assert!(append(rev, "there", writes(vec![(1, json(&two[0]))], 2)).await);
        // The first append after a whole write stores every block apart (as the draft of a
        // reply written whole does); later ones only the blocks that changed.
        assert!(append(rev + 1, "", writes(vec![(0, json(&one[0]))], 2)).await);
        assert!(append(rev + 2, ", you", writes(Vec::new(), 2)).await);
        let now = read().await;
        assert_eq!(now.text, "Hi there, you");
        assert!(now.streaming);
        assert_eq!(blocks(&now), serde_json::json!([&*one[0], &*two[0]]));
        // So do the host service's reads: the item, and the facts a `ui.query` reads.
        let stored = store.stored_item(c, i).await.unwrap().unwrap();
        assert_eq!(stored.text, now.text);
        assert_eq!(serde_json::to_value(&stored.blocks).unwrap(), blocks(&now));
        let stored = store.stored_block(c, i, &one[0].id).await.unwrap().unwrap();
        assert_eq!(stored.block.revision, one[0].revision);
        // Two deltas (the empty one adds no row), both blocks apart, and the item's own
        // row still holds only what the whole write left ("Hi " and no blocks): a delta
        // does not rewrite the reply.
        assert_eq!(apart(store, c, i).await, (2, 2, 5));

        // A revision that is no longer the reply's writes nothing.
        assert!(!append(rev + 1, "!", writes(vec![(0, json(&two[0]))], 1)).await);
        assert_eq!(read().await, now);

        // Fewer blocks than before: the rows past the count go.
        assert!(append(rev + 3, "!", writes(Vec::new(), 1)).await);
        let now = read().await;
        assert_eq!(now.text, "Hi there, you!");
        assert_eq!(blocks(&now), serde_json::json!([&*one[0]]));

        // Written whole again (finished): what was apart is folded into the item.
        let done = store
            .update_reply(c, i, finished(i, "done"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(done, rev + 5);
        let now = read().await;
        assert_eq!((now.text.as_str(), now.streaming), ("done", false));
        assert_eq!(blocks(&now), serde_json::json!(final_blocks(i, "done")));
        let whole = ("done".len() + json_text(&final_blocks(i, "done")).unwrap().len()) as i64;
        assert_eq!(apart(store, c, i).await, (0, 0, whole));
        assert!(
            !append(done, "x", writes(Vec::new(), 0)).await,
            "a finished reply takes no delta"
        );
        assert_eq!(
            store
                .update_reply(c, "nope", finished(i, "x"))
                .await
                .unwrap(),
            None
        );
        f.finish().await;
    }

    on_both_databases!(
        entries_belong_to_their_chat,
        entries_belong_to_their_chat_on_postgres,
        isolation,
        "isolation"
    );

    async fn isolation(f: Fixture) {
        let store = &f.store;
        let alice = store.create_chat("alice", "web", "a").await.unwrap();
        let bob = store.create_chat("bob", "ops", "b").await.unwrap();
        let item = store
            .add_item(&alice.id, Role::Assistant, "", true)
            .await
            .unwrap();
        store
            .update_reply(&alice.id, &item.id, finished(&item.id, "one"))
            .await
            .unwrap();
        store
            .set_ui_queries(&alice.id, &item.id, authored_by(&alice.id))
            .await
            .unwrap();
        let access = Arc::new(Value::from("alice"));
        store
            .set_access(&alice.id, &item.id, Some(Arc::clone(&access)))
            .await
            .unwrap();
        let block_id = final_blocks(&item.id, "one")[0].id.clone();
        // Warm every cache with Alice's chat …
        assert!(
            store
                .stored_block(&alice.id, &item.id, &block_id)
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(store.cache.items.len(), 1);
        assert_eq!(
            store.access(&alice.id, &item.id).await,
            AccessRecord::Granted(access)
        );
        assert_eq!(
            store.chat(&alice.id).await.unwrap().unwrap().row.owner,
            "alice"
        );
        // … Alice's item named under Bob's chat is not there.
        assert_eq!(
            store
                .stored_block(&bob.id, &item.id, &block_id)
                .await
                .unwrap(),
            None
        );
        assert_eq!(store.access(&bob.id, &item.id).await, AccessRecord::Absent);
        assert_eq!(store.chat(&bob.id).await.unwrap().unwrap().row.owner, "bob");
        assert!(store.chat("missing").await.unwrap().is_none());
        f.finish().await;
    }

    on_both_databases!(
        chats_items_choices_and_answers,
        chats_items_choices_and_answers_on_postgres,
        chats_items_choices,
        "items"
    );

    fn ids(page: &ItemPage) -> Vec<&str> {
        page.items.iter().map(|i| i.id.as_str()).collect()
    }

    async fn chats_items_choices(f: Fixture) {
        let store = &f.store;
        let chat = store.create_chat("alice", "web", "t").await.unwrap();
        store.create_chat("alice", "web", "u").await.unwrap();
        assert_eq!(store.chats_of("alice").await.unwrap().len(), 2);
        assert!(store.chats_of("bob").await.unwrap().is_empty());
        let c = chat.id.as_str();
        let m = store.add_item(c, Role::User, "hi", false).await.unwrap();
        let r = store.add_item(c, Role::Assistant, "", true).await.unwrap();
        assert!(
            store
                .stored_item(c, &r.id)
                .await
                .unwrap()
                .unwrap()
                .streaming
        );
        store
            .update_reply(c, &r.id, finished(&r.id, "one"))
            .await
            .unwrap();
        let read = store.chat_item(c, &r.id).await.unwrap().unwrap();
        assert_eq!(
            (read.text.as_str(), read.streaming, read.ui.len()),
            ("one", false, 1)
        );

        // Pages, newest first as far as they go.
        let page = store.items_page(c, None, 10).await.unwrap().unwrap();
        assert_eq!(ids(&page), [m.id.as_str(), r.id.as_str()]);
        assert!(!page.more);
        let page = store.items_page(c, None, 1).await.unwrap().unwrap();
        assert_eq!((ids(&page), page.more), (vec![r.id.as_str()], true));
        let page = store.items_page(c, Some(&r.id), 1).await.unwrap().unwrap();
        assert_eq!((ids(&page), page.more), (vec![m.id.as_str()], false));
        assert!(
            store
                .items_page(c, Some("missing"), 1)
                .await
                .unwrap()
                .is_none()
        );
        assert!(store.has_newer_item(c, &m.id).await);
        assert!(!store.has_newer_item(c, &r.id).await);

        // Frozen readings.
        store
            .set_ui_queries(c, &r.id, authored_by(c))
            .await
            .unwrap();
        let read = store.chat_item(c, &r.id).await.unwrap().unwrap();
        assert_eq!(read.ui_queries, Some(authored_by(c)));

        // A choice becomes one message, however often (and however concurrently) it is
        // sent.
        let block = final_blocks(&r.id, "one")[0].clone();
        let origin = ChoiceOrigin {
            item_id: r.id.clone(),
            block_id: block.id.clone(),
            revision: block.revision.clone().unwrap(),
            choice_id: "yes".into(),
            label: "Yes".into(),
            source_at: 1,
            older: false,
            values: None,
            at: 2,
        };
        let sends = (0..4).map(|_| store.send_choice(c, &origin, "Yes"));
        for sent in futures_util::future::join_all(sends).await {
            assert!(!sent.unwrap().queued);
        }
        let page = store.items_page(c, None, 10).await.unwrap().unwrap();
        assert_eq!(page.items.len(), 3, "{:?}", ids(&page));
        let message = &page.items[2];
        assert_eq!((message.role, message.text.as_str()), (Role::User, "Yes"));
        assert_eq!(message.ui_choice.as_ref(), Some(&origin));
        // Another revision of the block is another message.
        let newer = ChoiceOrigin {
            revision: "other".into(),
            ..origin.clone()
        };
        store.send_choice(c, &newer, "Yes").await.unwrap();
        assert_eq!(
            store
                .items_page(c, None, 10)
                .await
                .unwrap()
                .unwrap()
                .items
                .len(),
            4
        );

        // The answer is kept on the reply, by block.
        let answer = ChoiceAnswer {
            origin: origin.clone(),
            sent: SendResult::default(),
        };
        store.record_answer(c, answer.clone()).await.unwrap();
        let read = store.chat_item(c, &r.id).await.unwrap().unwrap();
        assert_eq!(read.ui_answers.get(&block.id), Some(&answer));

        // A full chat refuses one more item, message or choice.
        let small = ChatLimits {
            chat_items: 4,
            ..ChatLimits::default()
        };
        let full = ChatStore {
            limits: small,
            ..store.clone()
        };
        assert_eq!(
            full.add_item(c, Role::User, "more", false)
                .await
                .unwrap_err(),
            AddError::ChatFull(4)
        );
        let third = ChoiceOrigin {
            revision: "third".into(),
            ..origin.clone()
        };
        assert!(matches!(
            full.send_choice(c, &third, "Yes").await,
            Err(StoreError::ChatFull(_))
        ));
        // The same choice again is still answered (nothing is added).
        assert!(full.send_choice(c, &origin, "Yes").await.is_ok());
        f.finish().await;
    }

    /// A file made by the schema from before migrations existed (with a choice message
    /// in it) upgrades in place: its rows stay, the versions are recorded, and the
    /// choice it holds is found again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_sqlite_file_upgrades_in_place() {
        let dir = std::env::temp_dir().join(format!("ui-server-store-old-{}", new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("app.db");
        let origin = ChoiceOrigin {
            item_id: "r1".into(),
            block_id: "b1".into(),
            revision: "rev1".into(),
            choice_id: "yes".into(),
            label: "Yes".into(),
            source_at: 1,
            older: false,
            values: None,
            at: 2,
        };
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            conn.execute_batch(
                "INSERT INTO ui_chats (id, owner, project, title, created_at) \
                 VALUES ('c1', 'alice', 'web', 'old', 1); \
                 INSERT INTO ui_items (chat_id, id, pos, role, text, created_at) \
                 VALUES ('c1', 'r1', 1, 'assistant', 'reply', 1);",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO ui_items (chat_id, id, pos, role, text, created_at, ui_choice) \
                 VALUES ('c1', 'm1', 2, 'user', 'Yes', 2, ?1)",
                [json_text(&origin).unwrap()],
            )
            .unwrap();
        }
        for _ in 0..2 {
            // Opened twice: the second time nothing is left to apply.
            let db = Db::open(&path, "", 2).await.unwrap();
            db.migrate(SQLITE_MIGRATIONS).await.unwrap();
            let versions = db
                .read(|c| {
                    let mut s = c.prepare("SELECT version FROM ui_migrations ORDER BY version")?;
                    let v = s.query_map([], |r| r.get::<_, i64>(0))?;
                    Ok(v.collect::<rusqlite::Result<Vec<_>>>()?)
                })
                .await
                .unwrap();
            assert_eq!(versions, [1, 2, 3, 4]);
            let store =
                ChatStore::new(db, None, Arc::new(TokioClock::new()), ChatLimits::default());
            assert_eq!(store.chats_of("alice").await.unwrap()[0].title, "old");
            store.send_choice("c1", &origin, "Yes").await.unwrap();
            let page = store.items_page("c1", None, 10).await.unwrap().unwrap();
            assert_eq!(ids(&page), ["r1", "m1"], "the old choice is found again");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A write stuck behind another session's lock fails at the configured timeout
    /// instead of hanging, and the pool serves the next calls normally.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stuck_postgres_call_fails_at_its_timeout() {
        let Some(pg) = crate::pg::test_db::fresh("stuck").await else {
            return;
        };
        let timeout = Duration::from_millis(300);
        let db = crate::pg::PgDb::open(&pg.url, 2, timeout, PG_MIGRATIONS)
            .await
            .unwrap();
        let store = ChatStore::new_pg(
            PgBackend { db, log: None },
            None,
            Arc::new(TokioClock::new()),
            ChatLimits::default(),
        );
        let chat = store.create_chat("alice", "web", "t").await.unwrap();
        // Another session holds the chat's row.
        let (mut holder, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let tx = holder.transaction().await.unwrap();
        tx.execute(
            "SELECT 1 FROM ui_chats WHERE id = $1 FOR UPDATE",
            &[&chat.id],
        )
        .await
        .unwrap();
        for _ in 0..3 {
            let started = std::time::Instant::now();
            let e = store
                .add_item(&chat.id, Role::User, "hi", false)
                .await
                .unwrap_err();
            let took = started.elapsed();
            assert!(matches!(e, AddError::Db(_)), "{e:?}");
            assert!(took < Duration::from_secs(2), "{took:?}");
        }
        // Reads go on meanwhile, and writes once the lock is gone.
        assert_eq!(store.chats_of("alice").await.unwrap().len(), 1);
        tx.rollback().await.unwrap();
        store
            .add_item(&chat.id, Role::User, "hi", false)
            .await
            .unwrap();
        let page = store.items_page(&chat.id, None, 10).await.unwrap().unwrap();
        assert_eq!(page.items.len(), 1);
        drop(holder);
        pg.finish().await;
    }

    /// Two instances starting at once on one empty PostgreSQL database apply each
    /// migration once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_migrations_run_once_when_instances_start_together() {
        let Some(pg) = crate::pg::test_db::fresh("migrate").await else {
            return;
        };
        let open = || crate::pg::PgDb::open(&pg.url, 2, Duration::from_secs(5), PG_MIGRATIONS);
        let (a, b) = tokio::join!(open(), open());
        let (a, _b) = (a.unwrap(), b.unwrap());
        let versions: Vec<i64> = a
            .bounded(async {
                let conn = a.get().await?;
                let rows = conn
                    .query("SELECT version FROM ui_migrations ORDER BY version", &[])
                    .await?;
                conn.release();
                Ok(rows.iter().map(|r| r.get(0)).collect())
            })
            .await
            .unwrap();
        assert_eq!(versions, [1, 2, 3, 4]);
        pg.finish().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_write_still_drops_the_cached_facts() {
        let f = fixture("cancelled").await;
        let store = &f.store;
        let (chat, item) = streaming_reply(store).await;
        let (c, i) = (chat.as_str(), item.as_str());
        store.update_reply(c, i, finished(i, "one")).await.unwrap();
        store.set_ui_queries(c, i, authored_by(c)).await.unwrap();
        let block_id = final_blocks(i, "one")[0].id.clone();
        let cached = store.stored_block(c, i, &block_id).await.unwrap().unwrap();
        assert_eq!(store.cache.items.len(), 1);
        // The request that writes goes away before the write is done (a client that
        // disconnects); the write still commits, and must still drop the entry. Another
        // write holds the writer meanwhile, so the dropped one is surely not done yet.
        let db = store.sqlite().unwrap().clone();
        let busy = tokio::spawn(async move {
            db.write(|_| {
                std::thread::sleep(Duration::from_millis(100));
                Ok(())
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let write = store.update_reply(c, i, finished(i, "two"));
        // Polled once (the blocking call starts), then dropped.
        let polled = futures_util::FutureExt::now_or_never(write);
        assert!(polled.is_none(), "{polled:?}");
        busy.await.unwrap().unwrap();
        let two = final_blocks(i, "two")[0].revision.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let now = store.stored_block(c, i, &block_id).await.unwrap().unwrap();
            if now.block.revision == two {
                break;
            }
            assert_eq!(now.block.revision, cached.block.revision);
            assert!(
                tokio::time::Instant::now() < deadline,
                "the stale entry stayed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
