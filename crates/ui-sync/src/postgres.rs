//! [`PgStore`]: the log for several instances (`sync.md` §3.4, §3.6–§3.8, §6.3, §6.4) in a
//! PostgreSQL schema.
//!
//! Connections: one writer (appends), a small pool for heads, catch-up snapshots and prunes,
//! one tail connection for the tailer, and one dedicated listener connection that
//! `LISTEN ui_sync` and reconnects with backoff. Each data connection reconnects lazily:
//! a call that finds its client closed opens a new one first. The connection futures run as
//! tokio tasks.
//!
//! Seqs come from a one-row allocator (`ui_sync_seq`): an append advances it and inserts its
//! rows in one statement, so the allocator row stays locked until the commit and seq order
//! equals commit order (§3.4). A rolled-back append rolls the allocator back too, so seqs
//! have no gaps.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Mutex, MutexGuard, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client, IsolationLevel, Statement};

use crate::pg_connect::{PgConnect, PgConnection, pg_error_text};
use ui_core::SyncLimits;

use crate::error::SyncError;
use crate::store::{PruneReport, Retention, Snapshot, SyncStore};
use crate::types::{
    Audience, AudienceKind, AudienceSet, Epoch, LogMeta, LogRow, MAX_SEQ, NewRow, Op,
    RequestSource, Salt, Seq, Token,
};

/// The notification channel of appends (§6.3); the payload is `<epoch>.<last seq>`.
const CHANNEL: &str = "ui_sync";
/// A log whose head reaches this seq is re-created with a new epoch when opened (§3.4).
const RECREATE_AT: u64 = 1 << 52;
/// Pool connections for heads, catch-up snapshots and prunes.
const POOL: usize = 2;
/// Longest wait for a new connection, in milliseconds: the TCP connect (as
/// `connect_timeout`) and also the whole of opening it, TLS handshake and sign-in
/// included ([`open_bounded`]), which `tokio-postgres` leaves unbounded.
const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// `statement_timeout` of the data connections, in milliseconds: a stuck statement fails
/// (and the appender retries) instead of holding its connection forever.
const STATEMENT_TIMEOUT_MS: u64 = 30_000;
/// TCP keepalive idle time of every connection (the listener and the data connections),
/// in milliseconds: a silently dead connection (a peer gone without a FIN, a dropped
/// route) is noticed, and the call on it fails and is retried on a new one, instead of
/// waiting for the kernel's default of two hours. `statement_timeout` cannot do this: the
/// server that would enforce it is no longer reachable.
const KEEPALIVE_IDLE_MS: u64 = 30_000;
/// Time between keepalive probes once a connection is idle, in milliseconds.
const KEEPALIVE_INTERVAL_MS: u64 = 10_000;
/// Unanswered keepalive probes before the connection counts as dead: with the idle time,
/// a dead connection fails within about a minute.
const KEEPALIVE_RETRIES: u32 = 3;
/// `application_name` of the data connections.
const APP_NAME: &str = "ui-sync";
/// `application_name` of the listener connection.
const LISTEN_APP_NAME: &str = "ui-sync-listen";

/// The tables, the indexes and the allocator row (§3.6). Idempotent; run in the creating
/// transaction after the schema exists.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ui_sync_events (
  seq         BIGINT  PRIMARY KEY,
  source      TEXT    NOT NULL,
  aud_kind    TEXT    NOT NULL CHECK (aud_kind IN ('user','org','project','global')),
  aud_id      TEXT    NOT NULL DEFAULT '',
  scope_tok   TEXT    NOT NULL,
  key_tok     TEXT,
  rs          TEXT,
  op          TEXT    NOT NULL DEFAULT 'change' CHECK (op IN ('change','reset')),
  n           BIGINT  NOT NULL DEFAULT 1 CHECK (n >= 1),
  at_ms       BIGINT  NOT NULL,
  writer      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS ui_sync_events_aud ON ui_sync_events (aud_kind, aud_id, seq);
CREATE INDEX IF NOT EXISTS ui_sync_events_at  ON ui_sync_events (at_ms);
CREATE TABLE IF NOT EXISTS ui_sync_meta (
  id              INT     PRIMARY KEY CHECK (id = 1),
  epoch           TEXT    NOT NULL,
  salt            BYTEA   NOT NULL,
  pruned_through  BIGINT  NOT NULL DEFAULT 0,
  created_at_ms   BIGINT  NOT NULL
);
CREATE TABLE IF NOT EXISTS ui_sync_seq (id INT PRIMARY KEY CHECK (id = 1), v BIGINT NOT NULL);
INSERT INTO ui_sync_seq (id, v) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
";

/// Serialises concurrent creators of a log (two instances starting on an empty database).
const INIT_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(hashtext('ui_sync.init'))";

/// `pruned_through` and the head: the committed allocator value (every row up to it is
/// visible, §3.4), never below `pruned_through`.
const HEAD_SQL: &str = "SELECT m.pruned_through, GREATEST(m.pruned_through, s.v)
FROM ui_sync_meta AS m, ui_sync_seq AS s WHERE m.id = 1 AND s.id = 1";

/// One append (§6.3): locks and advances the allocator and inserts every row. `$1` is the
/// row count, `$2`…`$10` the column arrays, `$11` the writer.
const APPEND_SQL: &str = "WITH a AS (UPDATE ui_sync_seq SET v = v + $1 WHERE id = 1 RETURNING v)
INSERT INTO ui_sync_events (seq, source, aud_kind, aud_id, scope_tok, key_tok, rs, op, n, at_ms, writer)
SELECT a.v - $1 + r.ord, r.source, r.aud_kind, r.aud_id, r.scope_tok, r.key_tok, r.rs, r.op, r.n,
       r.at_ms, $11
FROM a, unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
               $8::text[], $9::bigint[], $10::bigint[])
     WITH ORDINALITY AS r(source, aud_kind, aud_id, scope_tok, key_tok, rs, op, n, at_ms, ord)
RETURNING seq";

/// The wake-up of an append, in its transaction: delivered after the commit.
const NOTIFY_SQL: &str = "SELECT pg_notify($1, $2)";

/// The tailer's read: every row after `$1`, by seq.
const TAIL_SQL: &str = "SELECT seq, source, aud_kind, aud_id, scope_tok, key_tok, rs, op, n, at_ms
FROM ui_sync_events WHERE seq > $1 ORDER BY seq LIMIT $2";

/// The visible rows of a catch-up (§3.8 step 7): the audience set (`$1` kinds, `$2` ids)
/// is the outer loop, each audience one range of the `(aud_kind, aud_id, seq)` index cut to
/// the limit, then the union is sorted and cut again.
const SNAPSHOT_SQL: &str = "SELECT e.seq, e.source, e.aud_kind, e.aud_id, e.scope_tok, e.key_tok,
       e.rs, e.op, e.n, e.at_ms
FROM unnest($1::text[], $2::text[]) AS a(kind, id)
CROSS JOIN LATERAL (
  SELECT x.seq, x.source, x.aud_kind, x.aud_id, x.scope_tok, x.key_tok, x.rs, x.op, x.n, x.at_ms
  FROM ui_sync_events AS x
  WHERE x.aud_kind = a.kind AND x.aud_id = a.id AND x.seq > $3 AND x.seq <= $4
  ORDER BY x.seq
  LIMIT $5
) AS e
ORDER BY e.seq
LIMIT $5";

/// The age boundary of a prune (§3.7): the smallest seq of a row at least as young as `$1`.
const YOUNGEST_SQL: &str = "SELECT MIN(seq) FROM ui_sync_events WHERE at_ms >= $1";

/// The prune lock: one per schema, so instances never run concurrent deletes (§3.7).
const PRUNE_LOCK_SQL: &str = "SELECT pg_try_advisory_xact_lock(hashtext('ui_sync.prune'),
  hashtext(COALESCE(current_schema(), '')))";

/// One prune batch: deletes the first `$2` rows with `seq ≤ $1` (a prefix) and raises
/// `pruned_through` to the last deleted seq; answers the number deleted (no row when none).
const PRUNE_BATCH_SQL: &str = "WITH d AS (
  DELETE FROM ui_sync_events WHERE seq <= (
    SELECT MAX(seq) FROM (SELECT seq FROM ui_sync_events WHERE seq <= $1 ORDER BY seq LIMIT $2) AS b)
  RETURNING seq)
UPDATE ui_sync_meta SET pruned_through = GREATEST(pruned_through, (SELECT MAX(seq) FROM d))
WHERE id = 1 AND EXISTS (SELECT 1 FROM d)
RETURNING (SELECT COUNT(*) FROM d)";

const COUNT_SQL: &str = "SELECT COUNT(*) FROM ui_sync_events";

fn db(e: tokio_postgres::Error) -> SyncError {
    SyncError::Store(format!("postgres: {}", pg_error_text(&e)))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_seq(v: i64) -> Seq {
    Seq(u64::try_from(v).unwrap_or(0))
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// How every connection is opened: the parsed connection string and the session settings.
struct Setup {
    config: PgConnect,
    /// `SET …` statements run on every new data connection.
    session: String,
}

impl Setup {
    async fn open(&self) -> Result<Live, SyncError> {
        let (client, connection) = open_bounded(&self.config).await?;
        tokio::spawn(async move {
            // Ends with an error when the server goes away; the next call reconnects.
            if let Err(e) = connection.await {
                tracing::warn!(target: "ui_sync", error = %pg_error_text(&e), "a change log connection failed");
            }
        });
        client.batch_execute(&self.session).await.map_err(db)?;
        Ok(Live {
            client,
            prepared: HashMap::new(),
        })
    }
}

/// An open data connection and its prepared statements.
struct Live {
    client: Client,
    prepared: HashMap<&'static str, Statement>,
}

impl Live {
    async fn statement(&mut self, sql: &'static str) -> Result<Statement, SyncError> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await.map_err(db)?;
        self.prepared.insert(sql, s.clone());
        Ok(s)
    }
}

/// One data connection, opened on first use and again after it closed.
struct Conn {
    setup: Arc<Setup>,
    live: Mutex<Option<Live>>,
}

impl Conn {
    fn new(setup: Arc<Setup>, live: Option<Live>) -> Conn {
        Conn {
            setup,
            live: Mutex::new(live),
        }
    }

    /// The connection, reconnected first when it is missing or closed.
    async fn get(&self) -> Result<tokio::sync::MappedMutexGuard<'_, Live>, SyncError> {
        let mut slot = self.live.lock().await;
        if slot.as_ref().is_none_or(|l| l.client.is_closed()) {
            *slot = None;
            *slot = Some(self.setup.open().await?);
        }
        MutexGuard::try_map(slot, Option::as_mut)
            .map_err(|_| SyncError::Store("postgres: no connection".into()))
    }
}

/// What the listener task shares with the store.
struct Listen {
    epoch: Epoch,
    /// A wake-up arrived (or the listener reconnected) since the last `changed_elsewhere`.
    pending: AtomicBool,
    /// The last seq this store appended: its own notification is not a wake-up.
    own_last: AtomicU64,
    /// The listener's backend pid, 0 while it is down.
    pid: AtomicI32,
    /// Counts wake-ups.
    wakeups: watch::Sender<u64>,
}

impl Listen {
    fn wake(&self) {
        self.pending.store(true, Ordering::SeqCst);
        self.wakeups.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Handles a notification on the channel: another writer's commit of this log wakes.
    fn notified(&self, payload: &str) {
        match payload.split_once('.') {
            Some((epoch, seq)) if epoch == self.epoch.as_str() => {
                if seq.parse::<u64>().ok() != Some(self.own_last.load(Ordering::SeqCst)) {
                    self.wake();
                }
            }
            // Another log on the same database (another schema).
            Some((epoch, _)) if epoch.parse::<Epoch>().is_ok() => {}
            _ => self.wake(),
        }
    }
}

/// Opens a connection of `config` within [`CONNECT_TIMEOUT_MS`]: a server that accepts
/// the socket and then says nothing (a stuck proxy, a handshake that never ends) fails the
/// call, which is retried, instead of holding it (and the listener) forever.
async fn open_bounded(config: &PgConnect) -> Result<(Client, PgConnection), SyncError> {
    tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), config.connect())
        .await
        .map_err(|_| {
            SyncError::Store(format!(
                "postgres: no connection within {CONNECT_TIMEOUT_MS} ms"
            ))
        })?
        .map_err(db)
}

/// The listener (§6.3): a dedicated connection that `LISTEN ui_sync`; every (re)connect is
/// a wake-up (notifications sent while it was down are gone); reconnects back off from
/// `min` doubling to `max`.
async fn listener(config: PgConnect, listen: Arc<Listen>, min: Duration, max: Duration) {
    let mut delay = min;
    loop {
        match open_bounded(&config).await {
            Ok((client, connection)) => {
                if listen_on(&client, connection, &listen).await {
                    delay = min;
                }
            }
            Err(e) => tracing::warn!(
                target: "ui_sync",
                error = %e,
                retry_ms = delay.as_millis() as u64,
                "the change log's listener cannot connect"
            ),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(max);
    }
}

/// One connection of the [`listener`]: `LISTEN`, wake the tailer, and pass notifications
/// on until the connection ends; whether `LISTEN` was accepted. Every way it ends is
/// logged: the listener then connects again.
async fn listen_on(client: &Client, mut connection: PgConnection, listen: &Arc<Listen>) -> bool {
    let state = Arc::clone(listen);
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == CHANNEL => {
                    state.notified(n.payload());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    });
    let started = async {
        client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
        client.query_one("SELECT pg_backend_pid()", &[]).await
    };
    let row = match started.await {
        Ok(row) => row,
        Err(e) => {
            driver.abort();
            tracing::warn!(target: "ui_sync", error = %pg_error_text(&e), "the change log's listener cannot LISTEN");
            return false;
        }
    };
    listen
        .pid
        .store(row.try_get::<_, i32>(0).unwrap_or(0), Ordering::SeqCst);
    // Listening from here on; whatever was committed before is caught up.
    tracing::info!(target: "ui_sync", "the change log's listener is listening");
    listen.wake();
    // Runs until the connection ends; the client lives as long (it is borrowed).
    match driver.await {
        Ok(Ok(())) => {
            tracing::info!(target: "ui_sync", "the change log's listener connection closed")
        }
        Ok(Err(e)) => {
            tracing::warn!(target: "ui_sync", error = %pg_error_text(&e), "the change log's listener connection failed")
        }
        Err(e) => {
            tracing::error!(target: "ui_sync", error = %e, "the change log's listener task ended abnormally")
        }
    }
    listen.pid.store(0, Ordering::SeqCst);
    true
}

/// The column arrays of an append ([`APPEND_SQL`]).
struct Columns<'a> {
    count: i64,
    source: Vec<&'a str>,
    aud_kind: Vec<&'a str>,
    aud_id: Vec<&'a str>,
    scope: Vec<String>,
    key: Vec<Option<String>>,
    rs: Vec<Option<&'a str>>,
    op: Vec<&'a str>,
    n: Vec<i64>,
    at_ms: Vec<i64>,
    writer: &'a str,
}

impl<'a> Columns<'a> {
    fn of(rows: &'a [NewRow], writer: &'a str) -> Columns<'a> {
        let mut c = Columns {
            count: i64::try_from(rows.len()).unwrap_or(i64::MAX),
            source: Vec::with_capacity(rows.len()),
            aud_kind: Vec::with_capacity(rows.len()),
            aud_id: Vec::with_capacity(rows.len()),
            scope: Vec::with_capacity(rows.len()),
            key: Vec::with_capacity(rows.len()),
            rs: Vec::with_capacity(rows.len()),
            op: Vec::with_capacity(rows.len()),
            n: Vec::with_capacity(rows.len()),
            at_ms: Vec::with_capacity(rows.len()),
            writer,
        };
        for row in rows {
            c.source.push(row.source.as_str());
            c.aud_kind.push(row.audience.kind.as_str());
            c.aud_id.push(&*row.audience.id);
            c.scope.push(row.scope.to_hex());
            c.key.push(row.key.map(|k| k.to_hex()));
            c.rs.push(row.rs.as_ref().map(RequestSource::as_str));
            c.op.push(row.op.as_str());
            c.n.push(i64::from(row.n.max(1)));
            c.at_ms.push(row.at_ms);
        }
        c
    }

    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 11] {
        [
            &self.count,
            &self.source,
            &self.aud_kind,
            &self.aud_id,
            &self.scope,
            &self.key,
            &self.rs,
            &self.op,
            &self.n,
            &self.at_ms,
            &self.writer,
        ]
    }
}

/// The seqs an append's `RETURNING seq` answered, in order; an error when there are not
/// `expected` of them or the log is full.
fn appended_seqs(inserted: &[tokio_postgres::Row], expected: usize) -> Result<Vec<Seq>, SyncError> {
    let mut seqs = inserted
        .iter()
        .map(|r| r.try_get::<_, i64>(0).map(to_seq).map_err(db))
        .collect::<Result<Vec<_>, _>>()?;
    seqs.sort_unstable();
    if seqs.last().is_some_and(|last| last.0 > MAX_SEQ) {
        return Err(SyncError::Store(
            "the log is full (seq ≥ 2⁵³); re-create it".into(),
        ));
    }
    if seqs.len() != expected {
        return Err(SyncError::Store(
            "postgres: the append inserted a wrong number of rows".into(),
        ));
    }
    Ok(seqs)
}

fn read_row(r: &tokio_postgres::Row) -> Result<LogRow, SyncError> {
    let bad = |what: &str| SyncError::Invalid(format!("bad {what} in ui_sync_events"));
    let seq: i64 = r.try_get(0).map_err(db)?;
    let source: String = r.try_get(1).map_err(db)?;
    let kind: &str = r.try_get(2).map_err(db)?;
    let id: &str = r.try_get(3).map_err(db)?;
    let scope: &str = r.try_get(4).map_err(db)?;
    let key: Option<&str> = r.try_get(5).map_err(db)?;
    let rs: Option<&str> = r.try_get(6).map_err(db)?;
    let op: &str = r.try_get(7).map_err(db)?;
    let n: i64 = r.try_get(8).map_err(db)?;
    let at_ms: i64 = r.try_get(9).map_err(db)?;
    let key = match key {
        None => None,
        Some(k) => Some(Token::from_hex(k).ok_or_else(|| bad("key_tok"))?),
    };
    Ok(LogRow {
        seq: Seq(u64::try_from(seq).map_err(|_| bad("seq"))?),
        row: NewRow {
            source,
            audience: Audience {
                kind: AudienceKind::parse(kind).ok_or_else(|| bad("aud_kind"))?,
                id: id.into(),
            },
            scope: Token::from_hex(scope).ok_or_else(|| bad("scope_tok"))?,
            key,
            rs: rs.and_then(RequestSource::parse),
            op: if op == "reset" { Op::Reset } else { Op::Change },
            n: u32::try_from(n.max(1)).unwrap_or(u32::MAX),
            at_ms,
        },
    })
}

/// `(pruned_through, head)` in the connection's current transaction (or a statement of
/// its own); `statement` is [`HEAD_SQL`], prepared or not.
async fn bounds<S>(
    client: &impl tokio_postgres::GenericClient,
    statement: &S,
) -> Result<(Seq, Seq), SyncError>
where
    S: tokio_postgres::ToStatement + Sync + Send + ?Sized,
{
    let row = client.query_one(statement, &[]).await.map_err(db)?;
    let pruned: i64 = row.try_get(0).map_err(db)?;
    let head: i64 = row.try_get(1).map_err(db)?;
    Ok((to_seq(pruned), to_seq(head)))
}

/// Creates the schema, the tables and the meta row in one transaction; a missing meta row
/// (a new log) means a new epoch and salt, and so does a head at 2⁵² (§3.4, §6.4).
async fn init(live: &mut Live, schema: Option<&str>) -> Result<LogMeta, SyncError> {
    let tx = live.client.transaction().await.map_err(db)?;
    tx.batch_execute(INIT_LOCK_SQL).await.map_err(db)?;
    if let Some(schema) = schema {
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            quote_ident(schema)
        ))
        .await
        .map_err(db)?;
    }
    tx.batch_execute(SCHEMA).await.map_err(db)?;
    let existing = tx
        .query_opt("SELECT epoch, salt FROM ui_sync_meta WHERE id = 1", &[])
        .await
        .map_err(db)?;
    let existing = existing.and_then(|row| {
        let epoch: Epoch = row.try_get::<_, &str>(0).ok()?.parse().ok()?;
        let salt: [u8; 32] = row.try_get::<_, Vec<u8>>(1).ok()?.try_into().ok()?;
        Some(LogMeta {
            epoch,
            salt: Salt(salt),
        })
    });
    let fresh = || LogMeta {
        epoch: Epoch::random(),
        salt: Salt::random(),
    };
    let meta = match existing {
        Some(meta) => {
            let (_, head) = bounds(&tx, HEAD_SQL).await?;
            if head.0 < RECREATE_AT {
                meta
            } else {
                let meta = fresh();
                tx.batch_execute("DELETE FROM ui_sync_events; UPDATE ui_sync_seq SET v = 0")
                    .await
                    .map_err(db)?;
                tx.execute(
                    "UPDATE ui_sync_meta SET epoch = $1, salt = $2, pruned_through = 0,
                     created_at_ms = $3 WHERE id = 1",
                    &[&meta.epoch.as_str(), &&meta.salt.0[..], &now_ms()],
                )
                .await
                .map_err(db)?;
                meta
            }
        }
        None => {
            let meta = fresh();
            tx.execute(
                "INSERT INTO ui_sync_meta (id, epoch, salt, pruned_through, created_at_ms)
                 VALUES (1, $1, $2, 0, $3)
                 ON CONFLICT (id) DO UPDATE SET epoch = EXCLUDED.epoch, salt = EXCLUDED.salt,
                   pruned_through = 0, created_at_ms = EXCLUDED.created_at_ms",
                &[&meta.epoch.as_str(), &&meta.salt.0[..], &now_ms()],
            )
            .await
            .map_err(db)?;
            meta
        }
    };
    tx.commit().await.map_err(db)?;
    Ok(meta)
}

/// The change log in a PostgreSQL schema (`sync.md` §3.6, §6.3), shared by every instance
/// that connects to it.
///
/// - The tables are `ui_sync_events` (`seq BIGINT PRIMARY KEY` without a default),
///   `ui_sync_meta` (epoch, `BYTEA` salt, `pruned_through`) and the one-row allocator
///   `ui_sync_seq`, created idempotently together with the meta row.
/// - An append is one transaction: one statement that advances the allocator and inserts
///   the rows, and `pg_notify('ui_sync', '<epoch>.<last seq>')`.
/// - Heads and catch-up snapshots read in one `REPEATABLE READ` transaction with the
///   audience filter in SQL.
/// - Each prune batch is a transaction that first takes
///   `pg_try_advisory_xact_lock(hashtext('ui_sync.prune'), hashtext(<schema>))`; a store
///   that does not get it skips the rest of the run.
/// - A dedicated listener connection `LISTEN ui_sync`. [`SyncStore::changed_elsewhere`]
///   answers `true` once after another writer's notification arrived and after every
///   (re)connect of the listener, whose notifications may have been lost.
///
/// The store spawns tokio tasks (connections, listener); create it inside a runtime. The
/// listener stops when the store is dropped.
pub struct PgStore {
    meta: LogMeta,
    schema: Option<Arc<str>>,
    writer: Conn,
    pool: Vec<Conn>,
    next: AtomicU64,
    tail: Conn,
    listen: Arc<Listen>,
    listener: JoinHandle<()>,
    writer_id: Arc<str>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("schema", &self.schema)
            .field("epoch", &self.meta.epoch)
            .finish_non_exhaustive()
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PgStore {
    /// Connects to the database of `conninfo` (a libpq-style string such as
    /// `host=127.0.0.1 port=5432 user=postgres dbname=app`, or a `postgresql://` URL, with
    /// TLS as its `sslmode` says: [`crate::PgConnect`]) and opens the log in `schema` (created when missing; `None`: the connection's default
    /// search path). A schema without the meta row gets a new log: a new epoch and salt,
    /// created in the same transaction as the tables. The listener reconnects with the
    /// default backoff (`listenReconnectMin`/`Max` of [`SyncLimits::DEFAULT`]).
    ///
    /// # Errors
    /// [`SyncError::Invalid`] for a bad connection string or an empty schema name,
    /// [`SyncError::Store`] when the database cannot be reached or initialised.
    pub async fn connect(conninfo: &str, schema: Option<&str>) -> Result<PgStore, SyncError> {
        Self::connect_with(conninfo, schema, &SyncLimits::DEFAULT).await
    }

    /// [`PgStore::connect`] with the listener's reconnect backoff from `limits`
    /// (`listenReconnectMin` doubling to `listenReconnectMax`).
    ///
    /// # Errors
    /// As [`PgStore::connect`].
    pub async fn connect_with(
        conninfo: &str,
        schema: Option<&str>,
        limits: &SyncLimits,
    ) -> Result<PgStore, SyncError> {
        let mut config = PgConnect::parse(conninfo)
            .map_err(|e| SyncError::Invalid(format!("connection string: {e}")))?;
        config
            .config_mut()
            .connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
            .keepalives(true)
            .keepalives_idle(Duration::from_millis(KEEPALIVE_IDLE_MS))
            .keepalives_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
            .keepalives_retries(KEEPALIVE_RETRIES);
        if schema.is_some_and(str::is_empty) {
            return Err(SyncError::Invalid("an empty schema name".into()));
        }
        let mut listen_config = config.clone();
        listen_config.config_mut().application_name(LISTEN_APP_NAME);
        config.config_mut().application_name(APP_NAME);
        let mut session = format!("SET statement_timeout = {STATEMENT_TIMEOUT_MS};");
        if let Some(schema) = schema {
            session.push_str(&format!("SET search_path TO {};", quote_ident(schema)));
        }
        let setup = Arc::new(Setup { config, session });

        let mut first = setup.open().await?;
        let meta = init(&mut first, schema).await?;
        let listen = Arc::new(Listen {
            epoch: meta.epoch.clone(),
            pending: AtomicBool::new(false),
            own_last: AtomicU64::new(0),
            pid: AtomicI32::new(0),
            wakeups: watch::Sender::new(0),
        });
        let listener = tokio::spawn(listener(
            listen_config,
            listen.clone(),
            Duration::from_millis(limits.listen_reconnect_min().max(1)),
            Duration::from_millis(limits.listen_reconnect_max().max(1)),
        ));
        Ok(PgStore {
            meta,
            schema: schema.map(Arc::from),
            writer: Conn::new(setup.clone(), Some(first)),
            pool: (0..POOL).map(|_| Conn::new(setup.clone(), None)).collect(),
            next: AtomicU64::new(0),
            tail: Conn::new(setup, None),
            listen,
            listener,
            writer_id: format!("pid:{}", std::process::id()).into(),
        })
    }

    /// The schema the log lives in (`None`: the connection's default search path).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The backend pid of the listener connection while it is up (diagnostics and tests).
    pub fn listen_pid(&self) -> Option<i32> {
        Some(self.listen.pid.load(Ordering::SeqCst)).filter(|p| *p != 0)
    }

    /// A watch that changes on every wake-up the listener sees: another writer's
    /// notification, or a (re)connect of the listener. A tailer may wait on it to read
    /// right away instead of at its next [`SyncStore::changed_elsewhere`] check.
    pub fn wakeups(&self) -> watch::Receiver<u64> {
        self.listen.wakeups.subscribe()
    }

    /// Appends `rows` inside the caller's transaction `tx` on a connection to the log's
    /// database (the outbox of a write the server owns, as
    /// [`crate::SqliteStore::append_in`] for SQLite): the same statement as an append of
    /// the store — it advances the allocator and inserts the rows — and the
    /// `pg_notify` wake-up, both committed or rolled back with the caller's rows. The
    /// allocator row stays locked until `tx` ends, so seqs stay in commit order: append
    /// last, right before the commit. `tx` must see the log's schema on its search path.
    /// After the commit, tell the service with [`crate::SyncService::appended`]. Returns
    /// the rows' seqs in order.
    ///
    /// # Errors
    /// [`SyncError::Store`] when the statement fails or the log is full (seq ≥ 2⁵³); the
    /// caller's transaction must then roll back.
    pub async fn append_in(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        rows: &[NewRow],
    ) -> Result<Vec<Seq>, SyncError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let cols = Columns::of(rows, &self.writer_id);
        let inserted = tx.query(APPEND_SQL, &cols.params()).await.map_err(db)?;
        let seqs = appended_seqs(&inserted, rows.len())?;
        if let Some(last) = seqs.last() {
            let payload = format!("{}.{}", self.meta.epoch, last);
            tx.query(NOTIFY_SQL, &[&CHANNEL, &payload])
                .await
                .map_err(db)?;
        }
        Ok(seqs)
    }

    fn pooled(&self) -> &Conn {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        &self.pool[usize::try_from(i).unwrap_or(0) % self.pool.len()]
    }
}

#[async_trait]
impl SyncStore for PgStore {
    fn meta(&self) -> &LogMeta {
        &self.meta
    }

    async fn append(&self, rows: Vec<NewRow>) -> Result<Vec<Seq>, SyncError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let cols = Columns::of(&rows, &self.writer_id);
        let mut live = self.writer.get().await?;
        let append = live.statement(APPEND_SQL).await?;
        let notify = live.statement(NOTIFY_SQL).await?;
        let tx = live.client.transaction().await.map_err(db)?;
        let inserted = tx.query(&append, &cols.params()).await.map_err(db)?;
        // On an error, dropping the transaction rolls the batch (and the allocator) back.
        let seqs = appended_seqs(&inserted, rows.len())?;
        let Some(&last) = seqs.last() else {
            return Err(SyncError::Store(
                "postgres: the append inserted nothing".into(),
            ));
        };
        let payload = format!("{}.{}", self.meta.epoch, last);
        tx.query(&notify, &[&CHANNEL, &payload]).await.map_err(db)?;
        self.listen.own_last.store(last.0, Ordering::SeqCst);
        tx.commit().await.map_err(db)?;
        Ok(seqs)
    }

    async fn head(&self) -> Result<Seq, SyncError> {
        let mut live = self.pooled().get().await?;
        let stmt = live.statement(HEAD_SQL).await?;
        bounds(&live.client, &stmt).await.map(|(_, head)| head)
    }

    async fn tail(&self, after: Seq, limit: usize) -> Result<Vec<LogRow>, SyncError> {
        let mut live = self.tail.get().await?;
        let stmt = live.statement(TAIL_SQL).await?;
        let rows = live
            .client
            .query(
                &stmt,
                &[&to_i64(after.0), &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await
            .map_err(db)?;
        rows.iter().map(read_row).collect()
    }

    async fn snapshot(
        &self,
        after: Seq,
        audiences: &AudienceSet,
        limit: usize,
    ) -> Result<Snapshot, SyncError> {
        let mut kinds: Vec<&str> = Vec::with_capacity(audiences.len() + 1);
        let mut ids: Vec<&str> = Vec::with_capacity(audiences.len() + 1);
        for a in audiences.iter() {
            kinds.push(a.kind.as_str());
            ids.push(&a.id);
        }
        if !audiences.contains(&Audience::global()) {
            kinds.push(AudienceKind::Global.as_str());
            ids.push("");
        }
        let mut live = self.pooled().get().await?;
        let head_stmt = live.statement(HEAD_SQL).await?;
        let stmt = live.statement(SNAPSHOT_SQL).await?;
        let tx = live
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db)?;
        let (pruned_through, head) = bounds(&tx, &head_stmt).await?;
        let rows = if limit == 0 {
            Vec::new()
        } else {
            tx.query(
                &stmt,
                &[
                    &kinds,
                    &ids,
                    &to_i64(after.0),
                    &to_i64(head.0),
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(db)?
            .iter()
            .map(read_row)
            .collect::<Result<Vec<_>, _>>()?
        };
        tx.commit().await.map_err(db)?;
        Ok(Snapshot {
            epoch: self.meta.epoch.clone(),
            pruned_through,
            head,
            rows,
        })
    }

    async fn prune(&self, now_ms: i64, retention: Retention) -> Result<PruneReport, SyncError> {
        let cutoff = now_ms.saturating_sub(retention.age_ms);
        let conn = self.pooled();
        let boundary = {
            let live = conn.get().await?;
            let (_, head) = bounds(&live.client, HEAD_SQL).await?;
            let young: Option<i64> = live
                .client
                .query_one(YOUNGEST_SQL, &[&cutoff])
                .await
                .and_then(|r| r.try_get(0))
                .map_err(db)?;
            let by_age = young.map_or(head.0, |s| u64::try_from(s).unwrap_or(1).saturating_sub(1));
            by_age.max(head.0.saturating_sub(retention.rows))
        };
        let batch = to_i64(retention.batch.max(1));
        let b = to_i64(boundary);
        let mut deleted = 0u64;
        for _ in 0..retention.batches {
            // One transaction per batch, the connection released in between.
            let mut live = conn.get().await?;
            let stmt = live.statement(PRUNE_BATCH_SQL).await?;
            let tx = live.client.transaction().await.map_err(db)?;
            let locked: Option<bool> = tx
                .query_one(PRUNE_LOCK_SQL, &[])
                .await
                .and_then(|r| r.try_get(0))
                .map_err(db)?;
            if locked != Some(true) {
                // Another instance prunes now: skip the rest of this run.
                break;
            }
            let removed: i64 = match tx.query_opt(&stmt, &[&b, &batch]).await.map_err(db)? {
                Some(row) => row.try_get(0).map_err(db)?,
                None => 0,
            };
            tx.commit().await.map_err(db)?;
            deleted += u64::try_from(removed).unwrap_or(0);
            if removed == 0 {
                break;
            }
        }
        let live = conn.get().await?;
        let (pruned_through, _) = bounds(&live.client, HEAD_SQL).await?;
        let rows: i64 = live
            .client
            .query_one(COUNT_SQL, &[])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(db)?;
        Ok(PruneReport {
            deleted,
            pruned_through,
            rows: u64::try_from(rows).unwrap_or(0),
        })
    }

    async fn changed_elsewhere(&self) -> Result<bool, SyncError> {
        Ok(self.listen.pending.swap(false, Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("ui_sync"), "\"ui_sync\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn own_and_foreign_notifications() {
        let epoch: Epoch = "abcdefghijkl".parse().unwrap();
        let listen = Listen {
            epoch: epoch.clone(),
            pending: AtomicBool::new(false),
            own_last: AtomicU64::new(7),
            pid: AtomicI32::new(0),
            wakeups: watch::Sender::new(0),
        };
        listen.notified("abcdefghijkl.7");
        assert!(!listen.pending.load(Ordering::SeqCst), "own commit");
        listen.notified("mnopqrstuvwx.9");
        assert!(!listen.pending.load(Ordering::SeqCst), "another log");
        listen.notified("abcdefghijkl.9");
        assert!(listen.pending.swap(false, Ordering::SeqCst));
        listen.notified("junk");
        assert!(
            listen.pending.load(Ordering::SeqCst),
            "unknown payloads wake"
        );
    }
}
