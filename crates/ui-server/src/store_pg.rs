//! The [`ChatStore`] on PostgreSQL: the same tables and answers as on SQLite, with every
//! write and its `host.chats` change event in one PostgreSQL transaction (the event is
//! appended last, right before the commit, by [`PgStore::append_in`]).
//!
//! Writes that add an item lock the chat's row first (`SELECT … FOR UPDATE`), so two
//! instances adding to one chat at once take turns: positions stay unique and the item
//! count is checked against what the other committed. A choice's message is unique in
//! the database (`ui_items_choice`), so the same choice sent to two instances at once
//! becomes one message.

use std::sync::Arc;

use indexmap::IndexMap;
use tokio_postgres::Transaction;
use tokio_postgres::types::ToSql;
use ui_host::{ChoiceAnswer, ChoiceOrigin, SendResult, StoreError, UiQueryState};
use ui_sync::{Audience, ChangeDraft, Cursor, NewRow, PgStore, Seq};

use super::{
    AddError, BlockWrites, CHATS_SOURCE, Chat, ChatItem, ChatRow, ChatStore, ItemPage, ItemRow,
    KeptRow, ReplyUpdate, WRITE, choice_key, json_text, new_id, parse_json, prune_readings_sql,
    scope_source,
};

/// Keeps a reading unless the chat is gone (or the read id is kept already).
const KEEP_READING_PG: &str = "INSERT INTO ui_readings (read_id, chat_id, key, reading, kept_at) \
     SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM ui_chats WHERE id = $2) \
     ON CONFLICT (read_id) DO NOTHING";
use crate::cache::{ItemFacts, StoreCache};
use crate::db::{DbError, DbResult, Migration};
use crate::pg::PgDb;

/// The store's tables on PostgreSQL, by version (the same versions as on SQLite).
pub(crate) const PG_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "chats, items and captured access",
        sql: "
CREATE TABLE IF NOT EXISTS ui_chats (
  id          TEXT    PRIMARY KEY,
  owner       TEXT    NOT NULL,
  project     TEXT    NOT NULL,
  title       TEXT    NOT NULL DEFAULT '',
  created_at  BIGINT  NOT NULL
);
CREATE INDEX IF NOT EXISTS ui_chats_owner ON ui_chats (owner, created_at);
CREATE TABLE IF NOT EXISTS ui_items (
  chat_id     TEXT    NOT NULL REFERENCES ui_chats (id) ON DELETE CASCADE,
  id          TEXT    NOT NULL,
  pos         BIGINT  NOT NULL,
  role        TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
  text        TEXT    NOT NULL DEFAULT '',
  streaming   BOOLEAN NOT NULL DEFAULT FALSE,
  parent_tool_use_id TEXT,
  created_at  BIGINT  NOT NULL,
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
);",
    },
    Migration {
        version: 2,
        name: "one message per choice",
        sql: "
ALTER TABLE ui_items ADD COLUMN IF NOT EXISTS choice_key TEXT;
UPDATE ui_items SET choice_key = json_build_array(
    (ui_choice::json)->>'itemId', (ui_choice::json)->>'blockId', (ui_choice::json)->>'revision'
  )::text
  WHERE ui_choice IS NOT NULL AND choice_key IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS ui_items_choice ON ui_items (chat_id, choice_key);",
    },
    Migration {
        version: 3,
        name: "streaming replies stored delta by delta",
        sql: "
ALTER TABLE ui_items ADD COLUMN IF NOT EXISTS reply_rev BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ui_items ADD COLUMN IF NOT EXISTS blocks_apart BOOLEAN NOT NULL DEFAULT FALSE;
CREATE TABLE IF NOT EXISTS ui_reply_deltas (
  chat_id     TEXT    NOT NULL,
  item_id     TEXT    NOT NULL,
  rev         BIGINT  NOT NULL,
  delta       TEXT    NOT NULL,
  PRIMARY KEY (chat_id, item_id, rev),
  FOREIGN KEY (chat_id, item_id) REFERENCES ui_items (chat_id, id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS ui_reply_blocks (
  chat_id     TEXT    NOT NULL,
  item_id     TEXT    NOT NULL,
  idx         BIGINT  NOT NULL,
  json        TEXT    NOT NULL,
  PRIMARY KEY (chat_id, item_id, idx),
  FOREIGN KEY (chat_id, item_id) REFERENCES ui_items (chat_id, id) ON DELETE CASCADE
);",
    },
    Migration {
        version: 4,
        name: "readings kept for choices",
        sql: super::KEPT_READINGS_TABLE,
    },
];

/// The store's PostgreSQL database and the change log in it.
#[derive(Clone, Debug)]
pub(crate) struct PgBackend {
    pub(crate) db: PgDb,
    /// The log the feed reads (in the same database), when the store has a feed.
    pub(crate) log: Option<Arc<PgStore>>,
}

const ITEM_COLUMNS: &str = item_columns!("string_agg");

fn item_row(r: &tokio_postgres::Row) -> DbResult<ItemRow> {
    Ok(ItemRow {
        id: r.try_get(0)?,
        role: r.try_get(1)?,
        text: r.try_get(2)?,
        streaming: r.try_get(3)?,
        parent: r.try_get(4)?,
        created_at: r.try_get(5)?,
        blocks: r.try_get(6)?,
        ui_queries: r.try_get(7)?,
        answers: r.try_get(8)?,
        ui_choice: r.try_get(9)?,
    })
}

fn chat_row(r: &tokio_postgres::Row) -> DbResult<ChatRow> {
    Ok(ChatRow {
        chat: Chat {
            id: r.try_get(0)?,
            title: r.try_get(1)?,
            project: r.try_get(2)?,
            created_at: u64::try_from(r.try_get::<_, i64>(3)?).unwrap_or(0),
        },
        owner: r.try_get(4)?,
    })
}

/// One statement of a write to an item: `$1` is the chat, `$2` the item, then `params`.
struct ItemWrite {
    sql: &'static str,
    params: Vec<Box<dyn ToSql + Send + Sync>>,
}

impl ItemWrite {
    fn new(sql: &'static str, params: Vec<Box<dyn ToSql + Send + Sync>>) -> Self {
        ItemWrite { sql, params }
    }

    /// The statement's arguments for the item `item` of `chat`.
    fn args<'a>(&'a self, chat: &'a String, item: &'a String) -> Vec<&'a (dyn ToSql + Sync)> {
        let mut args: Vec<&(dyn ToSql + Sync)> = vec![chat, item];
        args.extend(
            self.params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync)),
        );
        args
    }
}

/// A block's index as PostgreSQL's `BIGINT`.
fn index(i: usize) -> i64 {
    i64::try_from(i).unwrap_or(i64::MAX)
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Locks the chat's row for the transaction; its owner (`None`: no such chat).
async fn lock_chat(tx: &Transaction<'_>, chat_id: &str) -> DbResult<Option<String>> {
    Ok(tx
        .query_opt(
            "SELECT owner FROM ui_chats WHERE id = $1 FOR UPDATE",
            &[&chat_id],
        )
        .await?
        .map(|r| r.try_get(0))
        .transpose()?)
}

/// [`AddError::ChatFull`] when the chat holds `max` items (call it with the chat locked).
async fn check_room(tx: &Transaction<'_>, chat_id: &str, max: usize) -> Result<(), AddError> {
    let count: i64 = tx
        .query_one(
            "SELECT COUNT(*) FROM ui_items WHERE chat_id = $1",
            &[&chat_id],
        )
        .await
        .map_err(DbError::from)?
        .try_get(0)
        .map_err(DbError::from)?;
    if usize::try_from(count).unwrap_or(usize::MAX) >= max {
        return Err(AddError::ChatFull(max));
    }
    Ok(())
}

/// What a write needs to append its change event in its own transaction.
struct Events {
    log: Option<Arc<PgStore>>,
    rows: Vec<NewRow>,
}

impl Events {
    /// Appends the rows (last, right before the commit); the highest seq.
    async fn append(&self, tx: &Transaction<'_>) -> DbResult<Option<Seq>> {
        let Some(log) = &self.log else {
            return Ok(None);
        };
        let seqs = log
            .append_in(tx, &self.rows)
            .await
            .map_err(|e| DbError(e.to_string()))?;
        Ok(seqs.into_iter().max())
    }
}

impl ChatStore {
    /// The log row of "`chat_id` (owned by `owner`) changed", made in the caller's task
    /// (it reads the request source of the write scope).
    fn pg_events(&self, pg: &PgBackend, chat_id: &str, owner: &str) -> DbResult<Events> {
        let (Some(feed), Some(log)) = (&self.feed, &pg.log) else {
            return Ok(Events {
                log: None,
                rows: Vec::new(),
            });
        };
        let row = feed
            .prepare(ChangeDraft {
                source: CHATS_SOURCE.to_owned(),
                audience: Some(Audience::user(owner)),
                key: Some(chat_id.to_owned()),
                rs: scope_source(),
            })
            .map_err(|e| DbError(e.to_string()))?;
        Ok(Events {
            log: Some(Arc::clone(log)),
            rows: vec![row],
        })
    }

    /// The events of a write to the chat `chat_id`: its owner's `host.chats` change.
    async fn pg_chat_events(&self, pg: &PgBackend, chat_id: &str) -> DbResult<Events> {
        match self.chat(chat_id).await? {
            Some(chat) => self.pg_events(pg, chat_id, &chat.row.owner),
            None => Ok(Events {
                log: None,
                rows: Vec::new(),
            }),
        }
    }

    /// After a write's commit: wakes the feed's tailer and hands the event's cursor to
    /// the request's write scope (its `X-UI-Sync-Seq`).
    fn pg_committed(&self, seq: Option<Seq>) {
        let (Some(feed), Some(seq)) = (&self.feed, seq) else {
            return;
        };
        feed.appended();
        let cursor = Cursor {
            epoch: feed.epoch(),
            seq,
        };
        let _in_scope = WRITE.try_with(|s| s.committed(cursor)).is_ok();
    }

    pub(super) async fn pg_create_chat(
        &self,
        pg: &PgBackend,
        chat: &Chat,
        owner: &str,
    ) -> DbResult<()> {
        let events = self.pg_events(pg, &chat.id, owner)?;
        let (db, c, o) = (pg.db.clone(), chat.clone(), owner.to_owned());
        let seq = pg
            .db
            .write(async move {
                let mut conn = db.get().await?;
                let tx = conn.transaction().await?;
                tx.execute(
                    "INSERT INTO ui_chats (id, owner, project, title, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                    &[&c.id, &o, &c.project, &c.title, &ms(c.created_at)],
                )
                .await?;
                let seq = events.append(&tx).await?;
                tx.commit().await?;
                conn.release();
                Ok(seq)
            })
            .await?;
        self.pg_committed(seq);
        Ok(())
    }

    pub(super) async fn pg_chats_of(&self, pg: &PgBackend, owner: &str) -> DbResult<Vec<Chat>> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let rows = conn
                    .query(
                        "SELECT id, title, project, created_at, owner FROM ui_chats \
                         WHERE owner = $1 ORDER BY created_at DESC, id",
                        &[&owner],
                    )
                    .await?;
                conn.release();
                rows.iter().map(|r| chat_row(r).map(|r| r.chat)).collect()
            })
            .await
    }

    pub(super) async fn pg_chat_row(
        &self,
        pg: &PgBackend,
        chat_id: &str,
    ) -> DbResult<Option<ChatRow>> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let row = conn
                    .query_opt(
                        "SELECT id, title, project, created_at, owner FROM ui_chats WHERE id = $1",
                        &[&chat_id],
                    )
                    .await?;
                conn.release();
                row.as_ref().map(chat_row).transpose()
            })
            .await
    }

    pub(super) async fn pg_items_page(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        before: Option<&str>,
        limit: usize,
    ) -> DbResult<Option<ItemPage>> {
        let max_bytes = self.limits.page_bytes;
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let below = match before {
                    None => i64::MAX,
                    Some(before) => {
                        let pos = conn
                            .query_opt(
                                "SELECT pos FROM ui_items WHERE chat_id = $1 AND id = $2",
                                &[&chat_id, &before],
                            )
                            .await?;
                        match pos {
                            Some(r) => r.try_get::<_, i64>(0)?,
                            None => {
                                conn.release();
                                return Ok(None);
                            }
                        }
                    }
                };
                // One more row than the page may hold tells whether older ones exist.
                let take = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
                let rows = conn
                    .query(
                        &format!(
                            "SELECT {ITEM_COLUMNS} FROM ui_items WHERE chat_id = $1 AND pos < $2 \
                             ORDER BY pos DESC LIMIT $3"
                        ),
                        &[&chat_id, &below, &take],
                    )
                    .await?;
                conn.release();
                ItemPage::of_newest(rows.iter().map(item_row), limit, max_bytes).map(Some)
            })
            .await
    }

    /// The raw row of an item.
    pub(super) async fn pg_item_row(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
    ) -> DbResult<Option<ItemRow>> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let row = conn
                    .query_opt(
                        &format!(
                            "SELECT {ITEM_COLUMNS} FROM ui_items WHERE chat_id = $1 AND id = $2"
                        ),
                        &[&chat_id, &item_id],
                    )
                    .await?;
                conn.release();
                row.as_ref().map(item_row).transpose()
            })
            .await
    }

    pub(super) async fn pg_add_item(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item: &ChatItem,
    ) -> Result<(), AddError> {
        let events = self.pg_chat_events(pg, chat_id).await?;
        let (db, c, it, max) = (
            pg.db.clone(),
            chat_id.to_owned(),
            item.clone(),
            self.limits.chat_items,
        );
        let seq = pg
            .db
            .write(async move {
                let mut conn = db.get().await?;
                let tx = conn.transaction().await?;
                if lock_chat(&tx, &c).await?.is_none() {
                    return Err(DbError(format!("no chat {c}")));
                }
                match check_room(&tx, &c, max).await {
                    Ok(()) => {}
                    Err(AddError::Db(e)) => return Err(e),
                    Err(full) => return Ok(Err(full)),
                }
                tx.execute(
                    "INSERT INTO ui_items (chat_id, id, pos, role, text, streaming, created_at) \
                     VALUES ($1, $2, \
                       (SELECT COALESCE(MAX(pos), 0) + 1 FROM ui_items WHERE chat_id = $1), \
                       $3, $4, $5, $6)",
                    &[
                        &c,
                        &it.id,
                        &it.role.as_str(),
                        &it.text,
                        &it.streaming,
                        &ms(it.created_at),
                    ],
                )
                .await?;
                let seq = events.append(&tx).await?;
                tx.commit().await?;
                conn.release();
                Ok(Ok(seq))
            })
            .await??;
        self.pg_committed(seq);
        Ok(())
    }

    pub(super) async fn pg_update_reply(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
        update: ReplyUpdate,
    ) -> DbResult<Option<i64>> {
        let blocks = json_text(&update.blocks)?;
        self.pg_update_item(
            pg,
            chat_id,
            item_id,
            ItemWrite::new(
                "UPDATE ui_items SET text = $3, blocks = $4, streaming = $5, \
                   blocks_apart = FALSE, reply_rev = reply_rev + 1 \
                 WHERE chat_id = $1 AND id = $2 RETURNING reply_rev",
                vec![
                    Box::new(update.text),
                    Box::new(blocks),
                    Box::new(update.streaming),
                ],
            ),
            vec![
                ItemWrite::new(
                    "DELETE FROM ui_reply_deltas WHERE chat_id = $1 AND item_id = $2",
                    Vec::new(),
                ),
                ItemWrite::new(
                    "DELETE FROM ui_reply_blocks WHERE chat_id = $1 AND item_id = $2",
                    Vec::new(),
                ),
            ],
        )
        .await
    }

    /// [`ChatStore::append_reply`] on PostgreSQL: the same rows as on SQLite, written by
    /// one statement (one round trip), with the chat's change event in the same
    /// transaction. The statement's parts see one snapshot: the rows it removes past the
    /// new count are never the ones it writes.
    pub(super) async fn pg_append_reply(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
        rev: i64,
        delta: &str,
        blocks: BlockWrites,
    ) -> DbResult<bool> {
        let (indexes, jsons): (Vec<i64>, Vec<String>) = blocks
            .changed
            .into_iter()
            .map(|(idx, json)| (index(idx), json))
            .unzip();
        let written = self
            .pg_update_item(
                pg,
                chat_id,
                item_id,
                ItemWrite::new(
                    "WITH item AS (\
                       UPDATE ui_items SET reply_rev = $4, blocks_apart = TRUE, blocks = '[]' \
                       WHERE chat_id = $1 AND id = $2 AND role = 'assistant' \
                         AND streaming AND reply_rev = $3 RETURNING reply_rev), \
                     delta AS (\
                       INSERT INTO ui_reply_deltas (chat_id, item_id, rev, delta) \
                       SELECT $1, $2, $4, $5 FROM item WHERE $5 <> ''), \
                     changed AS (\
                       INSERT INTO ui_reply_blocks (chat_id, item_id, idx, json) \
                       SELECT $1, $2, b.idx, b.json FROM item, \
                         unnest($6::BIGINT[], $7::TEXT[]) AS b (idx, json) \
                       ON CONFLICT (chat_id, item_id, idx) DO UPDATE SET json = excluded.json), \
                     removed AS (\
                       DELETE FROM ui_reply_blocks \
                       WHERE chat_id = $1 AND item_id = $2 AND idx >= $8 \
                         AND EXISTS (SELECT 1 FROM item)) \
                     SELECT reply_rev FROM item",
                    vec![
                        Box::new(rev),
                        Box::new(rev + 1),
                        Box::new(delta.to_owned()),
                        Box::new(indexes),
                        Box::new(jsons),
                        Box::new(index(blocks.len)),
                    ],
                ),
                Vec::new(),
            )
            .await?;
        Ok(written.is_some())
    }

    /// Runs `first`, a statement that writes one item and answers one `BIGINT` in a row
    /// when it wrote (a `RETURNING` clause), and when it did, the statements `then` and the
    /// chat's change event, all in one transaction; drops the item's cached facts even when the commit
    /// failed (what it left is unknown). Answers what `first` returned, `None` when it
    /// wrote nothing (and nothing else was written).
    async fn pg_update_item(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
        first: ItemWrite,
        then: Vec<ItemWrite>,
    ) -> DbResult<Option<i64>> {
        let events = self.pg_chat_events(pg, chat_id).await?;
        let (db, c, i, cache) = (
            pg.db.clone(),
            chat_id.to_owned(),
            item_id.to_owned(),
            Arc::clone(&self.cache),
        );
        let (returned, seq) = pg
            .db
            .write(async move {
                let mut conn = db.get().await?;
                let tx = conn.transaction().await?;
                let returned = match tx.query_opt(first.sql, &first.args(&c, &i)).await? {
                    Some(row) => Some(row.try_get::<_, i64>(0)?),
                    None => None,
                };
                let seq = if returned.is_some() {
                    for write in &then {
                        tx.execute(write.sql, &write.args(&c, &i)).await?;
                    }
                    events.append(&tx).await?
                } else {
                    None
                };
                let committed = tx.commit().await;
                invalidate_item(&cache, &c, &i);
                committed?;
                conn.release();
                Ok((returned, seq))
            })
            .await?;
        self.pg_committed(seq);
        Ok(returned)
    }

    /// An item's facts (not its text, readings and answers) and, when asked, its access.
    #[allow(clippy::type_complexity)]
    pub(super) async fn pg_facts(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
        with_access: bool,
    ) -> DbResult<(
        Option<(ItemFacts, usize)>,
        Option<DbResult<Option<Option<String>>>>,
    )> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let row = conn
                    .query_opt(
                        concat!(
                            "SELECT role, streaming, parent_tool_use_id IS NOT NULL, ",
                            item_blocks!("string_agg"),
                            ", (ui_queries::jsonb) ->> 'authorChatId' \
                             FROM ui_items WHERE chat_id = $1 AND id = $2"
                        ),
                        &[&chat_id, &item_id],
                    )
                    .await?;
                let Some(row) = row else {
                    conn.release();
                    return Ok((None, None));
                };
                let access = if with_access {
                    Some(pg_access(&conn, chat_id, item_id).await)
                } else {
                    None
                };
                conn.release();
                let role: String = row.try_get(0)?;
                let blocks: String = row.try_get(3)?;
                let author_chat_id: Option<String> = row.try_get(4)?;
                let weight = blocks.len() + author_chat_id.as_ref().map_or(0, String::len);
                let facts = ItemFacts {
                    assistant: role == "assistant",
                    streaming: row.try_get(1)?,
                    subagent: row.try_get(2)?,
                    author_chat_id,
                    blocks: parse_json(&blocks)?,
                };
                Ok((Some((facts, weight)), access))
            })
            .await
    }

    /// Keeps a reading (see [`ChatStore::keep_reading`]) and, with `prune_before`, drops
    /// those older than it or past the newest 4,096.
    pub(super) async fn pg_keep_reading(
        &self,
        pg: &PgBackend,
        row: KeptRow,
        prune_before: Option<i64>,
    ) -> DbResult<()> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                conn.execute(KEEP_READING_PG, &[&row.0, &row.1, &row.2, &row.3, &row.4])
                    .await?;
                if let Some(cutoff) = prune_before {
                    conn.execute(&prune_readings_sql("$1"), &[&cutoff]).await?;
                }
                conn.release();
                Ok(())
            })
            .await
    }

    /// The reading kept under `read_id` since `since`: its chat, key and reading's JSON.
    pub(super) async fn pg_kept_reading(
        &self,
        pg: &PgBackend,
        read_id: &str,
        since: i64,
    ) -> DbResult<Option<(String, String, String)>> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let row = conn
                    .query_opt(
                        "SELECT chat_id, key, reading FROM ui_readings \
                         WHERE read_id = $1 AND kept_at >= $2",
                        &[&read_id, &since],
                    )
                    .await?
                    .map(|r| {
                        Ok::<_, tokio_postgres::Error>((
                            r.try_get(0)?,
                            r.try_get(1)?,
                            r.try_get(2)?,
                        ))
                    })
                    .transpose()?;
                conn.release();
                Ok(row)
            })
            .await
    }

    pub(super) async fn pg_has_newer_item(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
    ) -> DbResult<bool> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let newer: bool = conn
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM ui_items WHERE chat_id = $1 \
                           AND role = 'assistant' AND parent_tool_use_id IS NULL \
                           AND pos > (SELECT pos FROM ui_items WHERE chat_id = $1 AND id = $2))",
                        &[&chat_id, &item_id],
                    )
                    .await?
                    .try_get(0)?;
                conn.release();
                Ok(newer)
            })
            .await
    }

    pub(super) async fn pg_load_access(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
    ) -> DbResult<Option<Option<String>>> {
        pg.db
            .bounded(async {
                let conn = pg.db.get().await?;
                let access = pg_access(&conn, chat_id, item_id).await;
                conn.release();
                access
            })
            .await
    }

    pub(super) async fn pg_set_access(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
        text: Option<String>,
    ) -> DbResult<()> {
        let (db, c, i, cache) = (
            pg.db.clone(),
            chat_id.to_owned(),
            item_id.to_owned(),
            Arc::clone(&self.cache),
        );
        pg.db
            .write(async move {
                let conn = db.get().await?;
                let written = conn
                    .execute(
                        "INSERT INTO ui_access (chat_id, item_id, access) VALUES ($1, $2, $3) \
                         ON CONFLICT (chat_id, item_id) DO UPDATE SET access = excluded.access",
                        &[&c, &i, &text],
                    )
                    .await;
                // Dropped even when the write failed: what it left is unknown.
                cache.access_written(&c, &i);
                written?;
                conn.release();
                Ok(())
            })
            .await
    }

    pub(super) async fn pg_set_ui_queries(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        item_id: &str,
        state: &UiQueryState,
    ) -> DbResult<()> {
        let text = json_text(state)?;
        self.pg_update_item(
            pg,
            chat_id,
            item_id,
            ItemWrite::new(
                "UPDATE ui_items SET ui_queries = $3 WHERE chat_id = $1 AND id = $2 \
                 RETURNING reply_rev",
                vec![Box::new(text)],
            ),
            Vec::new(),
        )
        .await?;
        Ok(())
    }

    pub(super) async fn pg_send_choice(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        origin: &ChoiceOrigin,
        context: &str,
    ) -> Result<SendResult, StoreError> {
        let store_error = |e: DbError| StoreError::Failed(e.0);
        let events = self
            .pg_chat_events(pg, chat_id)
            .await
            .map_err(store_error)?;
        let (db, c, text) = (pg.db.clone(), chat_id.to_owned(), context.to_owned());
        let (max, now) = (self.limits.chat_items, self.clock.now_ms());
        let (key, origin_text) = (choice_key(origin), json_text(origin).map_err(store_error)?);
        let (sent, seq) = pg
            .db
            .write(async move {
                let mut conn = db.get().await?;
                let tx = conn.transaction().await?;
                if lock_chat(&tx, &c).await?.is_none() {
                    return Err(DbError(format!("no chat {c}")));
                }
                let queued: bool = tx
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM ui_items WHERE chat_id = $1 \
                           AND role = 'assistant' AND streaming)",
                        &[&c],
                    )
                    .await?
                    .try_get(0)?;
                // A message already logged for this block and revision is the answer
                // (crash recovery, `host.md` §12.1 step 4; the same choice on another
                // instance).
                let existing: bool = tx
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM ui_items WHERE chat_id = $1 \
                           AND choice_key = $2)",
                        &[&c, &key],
                    )
                    .await?
                    .try_get(0)?;
                let mut seq = None;
                if !existing {
                    match check_room(&tx, &c, max).await {
                        Ok(()) => {}
                        Err(AddError::ChatFull(max)) => {
                            return Ok((
                                Err(StoreError::ChatFull(format!(
                                    "The chat holds {max} items, as many as it may."
                                ))),
                                None,
                            ));
                        }
                        Err(AddError::Db(e)) => return Err(e),
                    }
                    tx.execute(
                        "INSERT INTO ui_items (chat_id, id, pos, role, text, streaming, \
                           created_at, ui_choice, choice_key) \
                         VALUES ($1, $2, \
                           (SELECT COALESCE(MAX(pos), 0) + 1 FROM ui_items WHERE chat_id = $1), \
                           'user', $3, FALSE, $4, $5, $6)",
                        &[&c, &new_id(), &text, &ms(now), &origin_text, &key],
                    )
                    .await?;
                    seq = events.append(&tx).await?;
                }
                tx.commit().await?;
                conn.release();
                Ok((
                    Ok(SendResult {
                        queued,
                        turn_id: None,
                    }),
                    seq,
                ))
            })
            .await
            .map_err(store_error)?;
        self.pg_committed(seq);
        sent
    }

    pub(super) async fn pg_record_answer(
        &self,
        pg: &PgBackend,
        chat_id: &str,
        answer: ChoiceAnswer,
    ) -> DbResult<()> {
        let events = self.pg_chat_events(pg, chat_id).await?;
        let (db, c, cache) = (pg.db.clone(), chat_id.to_owned(), Arc::clone(&self.cache));
        let seq = pg
            .db
            .write(async move {
                let mut conn = db.get().await?;
                let tx = conn.transaction().await?;
                let text: Option<String> = tx
                    .query_opt(
                        "SELECT answers FROM ui_items WHERE chat_id = $1 AND id = $2 FOR UPDATE",
                        &[&c, &answer.origin.item_id],
                    )
                    .await?
                    .map(|r| r.try_get(0))
                    .transpose()?;
                let Some(text) = text else {
                    drop(tx);
                    conn.release();
                    return Ok(None);
                };
                let mut answers: IndexMap<String, ChoiceAnswer> = parse_json(&text)?;
                answers.insert(answer.origin.block_id.clone(), answer.clone());
                tx.execute(
                    "UPDATE ui_items SET answers = $3 WHERE chat_id = $1 AND id = $2",
                    &[&c, &answer.origin.item_id, &json_text(&answers)?],
                )
                .await?;
                let seq = events.append(&tx).await?;
                let committed = tx.commit().await;
                // Answers are not cached; every write to an item drops it all the same.
                invalidate_item(&cache, &c, &answer.origin.item_id);
                committed?;
                conn.release();
                Ok(seq)
            })
            .await?;
        self.pg_committed(seq);
        Ok(())
    }

    /// Runs `SELECT 1` (the readiness probe).
    pub(super) async fn pg_ping(&self, pg: &PgBackend) -> DbResult<()> {
        pg.db.ping().await
    }
}

fn invalidate_item(cache: &StoreCache, chat_id: &str, item_id: &str) {
    cache.item_written(chat_id, item_id);
}

async fn pg_access(
    conn: &tokio_postgres::Client,
    chat_id: &str,
    item_id: &str,
) -> DbResult<Option<Option<String>>> {
    Ok(conn
        .query_opt(
            "SELECT access FROM ui_access WHERE chat_id = $1 AND item_id = $2",
            &[&chat_id, &item_id],
        )
        .await?
        .map(|r| r.try_get(0))
        .transpose()?)
}
