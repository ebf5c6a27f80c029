//! [`SqliteStore`]: the embedded log (`sync.md` §3.6, §3.7, §6.2) in its own SQLite file.
//!
//! rusqlite is blocking, so every connection lives on a dedicated thread and async callers
//! hand it jobs: one writer connection (appends, prunes, `BEGIN IMMEDIATE` each), a small
//! pool of reader connections (heads and catch-up snapshots) and one tail connection that
//! the tailer uses for `tail` and for `PRAGMA data_version`.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

use crate::error::SyncError;
use crate::store::{PruneReport, Retention, Snapshot, SyncStore};
use crate::types::{
    Audience, AudienceKind, AudienceSet, Epoch, LogMeta, LogRow, MAX_SEQ, NewRow, Op,
    RequestSource, Salt, Seq, Token, random_base32,
};

/// `PRAGMA busy_timeout` of every connection (§3.6), in milliseconds.
const BUSY_TIMEOUT_MS: u64 = 5_000;
/// A log whose head reaches this seq is re-created with a new epoch when opened (§3.4).
const RECREATE_AT: u64 = 1 << 52;
/// Reader connections for heads and catch-up snapshots.
const READERS: usize = 2;
/// Jobs queued per connection thread before async callers wait.
const WORKER_QUEUE: usize = 64;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ui_sync_events (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  source      TEXT    NOT NULL,
  aud_kind    TEXT    NOT NULL CHECK (aud_kind IN ('user','org','project','global')),
  aud_id      TEXT    NOT NULL DEFAULT '',
  scope_tok   TEXT    NOT NULL,
  key_tok     TEXT,
  rs          TEXT,
  op          TEXT    NOT NULL DEFAULT 'change' CHECK (op IN ('change','reset')),
  n           INTEGER NOT NULL DEFAULT 1 CHECK (n >= 1),
  at_ms       INTEGER NOT NULL,
  writer      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS ui_sync_events_aud ON ui_sync_events (aud_kind, aud_id, seq);
CREATE INDEX IF NOT EXISTS ui_sync_events_at  ON ui_sync_events (at_ms);
CREATE TABLE IF NOT EXISTS ui_sync_meta (
  id              INTEGER PRIMARY KEY CHECK (id = 1),
  epoch           TEXT    NOT NULL,
  salt            BLOB    NOT NULL,
  pruned_through  INTEGER NOT NULL DEFAULT 0,
  created_at_ms   INTEGER NOT NULL
);
";

/// The highest committed seq: the AUTOINCREMENT high-water mark (never reused, survives a
/// prune of every row), never below `pruned_through`.
const HEAD_SQL: &str = "SELECT pruned_through, MAX(pruned_through, COALESCE(
  (SELECT seq FROM sqlite_sequence WHERE name = 'ui_sync_events'), 0))
FROM ui_sync_meta WHERE id = 1";

/// The visible rows of a catch-up: the audience set (a JSON array of `[kind, id]` pairs) is
/// the outer loop (`CROSS JOIN` fixes the order), each audience a range of the
/// `(aud_kind, aud_id, seq)` index; `LIMIT` keeps the sort to the first rows.
const SNAPSHOT_SQL: &str = "SELECT e.seq, e.source, e.aud_kind, e.aud_id, e.scope_tok, e.key_tok,
       e.rs, e.op, e.n, e.at_ms
FROM json_each(?1) AS a
CROSS JOIN ui_sync_events AS e
WHERE e.aud_kind = json_extract(a.value, '$[0]')
  AND e.aud_id = json_extract(a.value, '$[1]')
  AND e.seq > ?2 AND e.seq <= ?3
ORDER BY e.seq
LIMIT ?4";

const ROW_COLUMNS: &str = "seq, source, aud_kind, aud_id, scope_tok, key_tok, rs, op, n, at_ms";

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// One connection on its own thread. Dropping the worker ends the thread after the jobs
/// already queued and waits for it, so the connection is closed (and SQLite removes the
/// `-wal` and `-shm` files with the last one) before the drop returns, not at some point
/// after — or never, when the process exits first.
struct Worker {
    jobs: mpsc::Sender<Job>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Close the queue (the thread's loop ends when it is empty), then wait.
        let (closed, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.jobs, closed));
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            // Jobs run under `catch_unwind`, so the thread itself does not panic.
            thread.join().ok();
        }
    }
}

impl Worker {
    fn spawn(name: &str, mut conn: Connection) -> Result<Worker, SyncError> {
        let (jobs, mut rx) = mpsc::channel::<Job>(WORKER_QUEUE);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                while let Some(job) = rx.blocking_recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| SyncError::Store(format!("cannot start the {name} thread: {e}")))?;
        Ok(Worker {
            jobs,
            thread: Some(thread),
        })
    }

    /// Runs `f` on the connection's thread; the caller's task only awaits.
    async fn call<R, F>(&self, f: F) -> Result<R, SyncError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, SyncError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let out = std::panic::catch_unwind(AssertUnwindSafe(|| f(conn)))
                .unwrap_or_else(|_| Err(SyncError::Store("a SQLite job panicked".into())));
            let _ = tx.send(out);
        });
        self.jobs.send(job).await.map_err(|_| SyncError::Closed)?;
        rx.await.map_err(|_| SyncError::Closed)?
    }
}

fn db(e: rusqlite::Error) -> SyncError {
    SyncError::Store(e.to_string())
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))?;
    let _mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Creates the tables and the meta row in one transaction; a missing meta row (a new file)
/// means a new epoch and salt, and so does a head at 2⁵² (§3.4).
fn init(conn: &mut Connection) -> rusqlite::Result<LogMeta> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    let existing: Option<(String, Vec<u8>)> = tx
        .query_row(
            "SELECT epoch, salt FROM ui_sync_meta WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let meta = match existing.and_then(|(epoch, salt)| {
        let epoch: Epoch = epoch.parse().ok()?;
        let salt: [u8; 32] = salt.try_into().ok()?;
        Some(LogMeta {
            epoch,
            salt: Salt(salt),
        })
    }) {
        Some(meta) => {
            let (_, head): (i64, i64) =
                tx.query_row(HEAD_SQL, [], |r| Ok((r.get(0)?, r.get(1)?)))?;
            if u64::try_from(head).unwrap_or(0) >= RECREATE_AT {
                let fresh = LogMeta {
                    epoch: Epoch::random(),
                    salt: Salt::random(),
                };
                tx.execute("DELETE FROM ui_sync_events", [])?;
                tx.execute(
                    "DELETE FROM sqlite_sequence WHERE name = 'ui_sync_events'",
                    [],
                )?;
                tx.execute(
                    "UPDATE ui_sync_meta SET epoch = ?1, salt = ?2, pruned_through = 0,
                     created_at_ms = ?3 WHERE id = 1",
                    params![fresh.epoch.as_str(), &fresh.salt.0[..], now_ms()],
                )?;
                fresh
            } else {
                meta
            }
        }
        None => {
            let fresh = LogMeta {
                epoch: Epoch::random(),
                salt: Salt::random(),
            };
            tx.execute(
                "INSERT OR REPLACE INTO ui_sync_meta (id, epoch, salt, pruned_through, created_at_ms)
                 VALUES (1, ?1, ?2, 0, ?3)",
                params![fresh.epoch.as_str(), &fresh.salt.0[..], now_ms()],
            )?;
            fresh
        }
    };
    tx.commit()?;
    Ok(meta)
}

fn bad_column(index: usize, what: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        index,
        Type::Text,
        Box::new(SyncError::Invalid(format!("bad {what} in ui_sync_events"))),
    )
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LogRow> {
    let seq: i64 = r.get(0)?;
    let kind: String = r.get(2)?;
    let id: String = r.get(3)?;
    let scope: String = r.get(4)?;
    let key: Option<String> = r.get(5)?;
    let rs: Option<String> = r.get(6)?;
    let op: String = r.get(7)?;
    let n: i64 = r.get(8)?;
    let kind = AudienceKind::parse(&kind).ok_or_else(|| bad_column(2, "aud_kind"))?;
    let key = match key {
        None => None,
        Some(k) => Some(Token::from_hex(&k).ok_or_else(|| bad_column(5, "key_tok"))?),
    };
    Ok(LogRow {
        seq: Seq(u64::try_from(seq).map_err(|_| bad_column(0, "seq"))?),
        row: NewRow {
            source: r.get(1)?,
            audience: Audience {
                kind,
                id: id.into(),
            },
            scope: Token::from_hex(&scope).ok_or_else(|| bad_column(4, "scope_tok"))?,
            key,
            rs: rs.as_deref().and_then(RequestSource::parse),
            op: if op == "reset" { Op::Reset } else { Op::Change },
            n: u32::try_from(n.max(1)).unwrap_or(u32::MAX),
            at_ms: r.get(9)?,
        },
    })
}

fn to_i64(seq: Seq) -> i64 {
    i64::try_from(seq.0).unwrap_or(i64::MAX)
}

fn head_of(conn: &Connection) -> rusqlite::Result<(Seq, Seq)> {
    let (pruned, head): (i64, i64) =
        conn.query_row(HEAD_SQL, [], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok((
        Seq(u64::try_from(pruned).unwrap_or(0)),
        Seq(u64::try_from(head).unwrap_or(0)),
    ))
}

/// Removes a temporary log's files when the last handle goes; a file that is not there
/// (SQLite makes `-wal`, `-shm` and `-journal` only as it needs them) is fine, any other
/// failure is logged.
struct TempFiles(PathBuf);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = self.0.clone().into_os_string();
            name.push(suffix);
            match std::fs::remove_file(&name) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => tracing::warn!(
                    target: "ui_sync",
                    file = %PathBuf::from(name).display(),
                    error = %e,
                    "a temporary change log's file could not be removed"
                ),
                _ => {}
            }
        }
    }
}

/// The change log in a SQLite file (`sync.md` §3.6): WAL, `synchronous = NORMAL`,
/// `busy_timeout = 5000`, one `BEGIN IMMEDIATE` transaction per appended batch, seqs from
/// `INTEGER PRIMARY KEY AUTOINCREMENT`. Several processes may share the file; each notices
/// the others' commits through [`SyncStore::changed_elsewhere`] (`PRAGMA data_version`).
pub struct SqliteStore {
    path: PathBuf,
    meta: LogMeta,
    writer: Worker,
    readers: Vec<Worker>,
    next_reader: AtomicUsize,
    tail: Worker,
    data_version: Arc<AtomicI64>,
    writer_id: Arc<str>,
    _temp: Option<TempFiles>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("epoch", &self.meta.epoch)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Appends `rows` inside the caller's transaction `tx`, on a connection to the log's
    /// own database file: the outbox of a write the server owns (`sync.md` §3.2 amended).
    /// The rows commit or roll back with the caller's business rows, so a kill between the
    /// business commit and the event append cannot lose the events; seqs stay in commit
    /// order because SQLite has one writer at a time. After the commit, tell the service
    /// with [`crate::SyncService::appended`] so the tailer reads them at once. `writer` is
    /// the diagnostics column. Returns the rows' seqs in order.
    ///
    /// # Errors
    /// [`SyncError::Store`] when an insert fails or the log is full (seq ≥ 2⁵³); the
    /// caller's transaction must then roll back.
    pub fn append_in(
        tx: &rusqlite::Transaction<'_>,
        writer: &str,
        rows: &[NewRow],
    ) -> Result<Vec<Seq>, SyncError> {
        let mut seqs = Vec::with_capacity(rows.len());
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO ui_sync_events
                 (source, aud_kind, aud_id, scope_tok, key_tok, rs, op, n, at_ms, writer)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .map_err(db)?;
        for row in rows {
            insert
                .execute(params![
                    row.source,
                    row.audience.kind.as_str(),
                    &*row.audience.id,
                    row.scope.to_hex(),
                    row.key.map(|k| k.to_hex()),
                    row.rs.as_ref().map(RequestSource::as_str),
                    row.op.as_str(),
                    row.n.max(1),
                    row.at_ms,
                    writer,
                ])
                .map_err(db)?;
            let seq = u64::try_from(tx.last_insert_rowid()).unwrap_or(u64::MAX);
            if seq > MAX_SEQ {
                return Err(SyncError::Store(
                    "the log is full (seq ≥ 2⁵³); re-create it".into(),
                ));
            }
            seqs.push(Seq(seq));
        }
        Ok(seqs)
    }

    /// Opens (or creates) the log in the file at `path`. A file without the meta row gets a
    /// new epoch and salt, created in the same transaction as the tables.
    ///
    /// # Errors
    /// [`SyncError::Store`] when the file cannot be opened or initialised.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, SyncError> {
        Self::open_inner(path.as_ref().to_owned(), None).await
    }

    /// A log in a fresh temporary file that is deleted when the store is dropped (for tests
    /// and benches).
    ///
    /// # Errors
    /// [`SyncError::Store`] when the file cannot be created.
    pub async fn open_temp() -> Result<SqliteStore, SyncError> {
        let path = std::env::temp_dir().join(format!(
            "ui-sync-{}-{}.db",
            std::process::id(),
            random_base32(16)
        ));
        Self::open_inner(path.clone(), Some(TempFiles(path))).await
    }

    async fn open_inner(path: PathBuf, temp: Option<TempFiles>) -> Result<SqliteStore, SyncError> {
        let p = path.clone();
        let opened = tokio::task::spawn_blocking(move || -> rusqlite::Result<_> {
            let mut writer = connect(&p)?;
            let meta = init(&mut writer)?;
            let readers = (0..READERS)
                .map(|_| connect(&p))
                .collect::<Result<Vec<_>, _>>()?;
            let tail = connect(&p)?;
            let version: i64 = tail.query_row("PRAGMA data_version", [], |r| r.get(0))?;
            Ok((meta, writer, readers, tail, version))
        })
        .await
        .map_err(|e| SyncError::Store(format!("opening the log: {e}")))?;
        let (meta, writer, readers, tail, version) = opened.map_err(db)?;
        Ok(SqliteStore {
            path,
            meta,
            writer: Worker::spawn("ui-sync-writer", writer)?,
            readers: readers
                .into_iter()
                .map(|c| Worker::spawn("ui-sync-reader", c))
                .collect::<Result<_, _>>()?,
            next_reader: AtomicUsize::new(0),
            tail: Worker::spawn("ui-sync-tail", tail)?,
            data_version: Arc::new(AtomicI64::new(version)),
            writer_id: format!("pid:{}", std::process::id()).into(),
            _temp: temp,
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn reader(&self) -> &Worker {
        let i = self.next_reader.fetch_add(1, Ordering::Relaxed);
        &self.readers[i % self.readers.len()]
    }
}

#[async_trait]
impl SyncStore for SqliteStore {
    fn meta(&self) -> &LogMeta {
        &self.meta
    }

    async fn append(&self, rows: Vec<NewRow>) -> Result<Vec<Seq>, SyncError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let writer_id = self.writer_id.clone();
        self.writer
            .call(move |conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db)?;
                let seqs = SqliteStore::append_in(&tx, &writer_id, &rows)?;
                tx.commit().map_err(db)?;
                Ok(seqs)
            })
            .await
    }

    async fn head(&self) -> Result<Seq, SyncError> {
        self.reader()
            .call(|conn| head_of(conn).map(|(_, head)| head).map_err(db))
            .await
    }

    async fn tail(&self, after: Seq, limit: usize) -> Result<Vec<LogRow>, SyncError> {
        self.tail
            .call(move |conn| {
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT {ROW_COLUMNS} FROM ui_sync_events WHERE seq > ?1 ORDER BY seq LIMIT ?2"
                    ))
                    .map_err(db)?;
                let rows = stmt
                    .query_map(
                        params![to_i64(after), i64::try_from(limit).unwrap_or(i64::MAX)],
                        read_row,
                    )
                    .map_err(db)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(db)?;
                Ok(rows)
            })
            .await
    }

    async fn snapshot(
        &self,
        after: Seq,
        audiences: &AudienceSet,
        limit: usize,
    ) -> Result<Snapshot, SyncError> {
        // The audience set goes in as one JSON array of [kind, id] pairs; SQLite joins it on
        // (aud_kind, aud_id) and walks the (aud_kind, aud_id, seq) index per audience.
        let mut pairs: Vec<(&str, &str)> = audiences
            .iter()
            .map(|a| (a.kind.as_str(), &*a.id))
            .collect();
        if !audiences.contains(&Audience::global()) {
            pairs.push((AudienceKind::Global.as_str(), ""));
        }
        let json = serde_json::to_string(&pairs)
            .map_err(|e| SyncError::Store(format!("audience set: {e}")))?;
        let epoch = self.meta.epoch.clone();
        self.reader()
            .call(move |conn| {
                let tx = conn.transaction().map_err(db)?;
                let (pruned_through, head) = head_of(&tx).map_err(db)?;
                let rows = {
                    let mut stmt = tx.prepare_cached(SNAPSHOT_SQL).map_err(db)?;
                    stmt.query_map(
                        params![
                            json,
                            to_i64(after),
                            to_i64(head),
                            i64::try_from(limit).unwrap_or(i64::MAX)
                        ],
                        read_row,
                    )
                    .map_err(db)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(db)?
                };
                tx.commit().map_err(db)?;
                Ok(Snapshot {
                    epoch,
                    pruned_through,
                    head,
                    rows,
                })
            })
            .await
    }

    async fn prune(&self, now_ms: i64, retention: Retention) -> Result<PruneReport, SyncError> {
        let cutoff = now_ms.saturating_sub(retention.age_ms);
        let cap = retention.rows;
        let boundary = self
            .writer
            .call(move |conn| {
                let (_, head) = head_of(conn).map_err(db)?;
                let young: Option<i64> = conn
                    .query_row(
                        "SELECT MIN(seq) FROM ui_sync_events WHERE at_ms >= ?1",
                        [cutoff],
                        |r| r.get(0),
                    )
                    .map_err(db)?;
                let by_age =
                    young.map_or(head.0, |s| u64::try_from(s).unwrap_or(1).saturating_sub(1));
                Ok(by_age.max(head.0.saturating_sub(cap)))
            })
            .await?;
        let mut deleted = 0u64;
        let batch = i64::try_from(retention.batch.max(1)).unwrap_or(i64::MAX);
        let b = i64::try_from(boundary).unwrap_or(i64::MAX);
        for _ in 0..retention.batches {
            // One transaction per batch, each its own job, so appends interleave.
            let removed = self
                .writer
                .call(move |conn| {
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(db)?;
                    let last: Option<i64> = tx
                        .query_row(
                            "SELECT MAX(seq) FROM (SELECT seq FROM ui_sync_events
                             WHERE seq <= ?1 ORDER BY seq LIMIT ?2)",
                            params![b, batch],
                            |r| r.get(0),
                        )
                        .map_err(db)?;
                    let Some(last) = last else {
                        return Ok(0);
                    };
                    let n = tx
                        .execute("DELETE FROM ui_sync_events WHERE seq <= ?1", [last])
                        .map_err(db)?;
                    tx.execute(
                        "UPDATE ui_sync_meta SET pruned_through = MAX(pruned_through, ?1) WHERE id = 1",
                        [last],
                    )
                    .map_err(db)?;
                    tx.commit().map_err(db)?;
                    Ok(n as u64)
                })
                .await?;
            deleted += removed;
            if removed == 0 {
                break;
            }
        }
        let (pruned_through, rows) = self
            .writer
            .call(|conn| {
                let (pruned, _) = head_of(conn).map_err(db)?;
                let rows: i64 = conn
                    .query_row("SELECT COUNT(*) FROM ui_sync_events", [], |r| r.get(0))
                    .map_err(db)?;
                Ok((pruned, u64::try_from(rows).unwrap_or(0)))
            })
            .await?;
        Ok(PruneReport {
            deleted,
            pruned_through,
            rows,
        })
    }

    async fn changed_elsewhere(&self) -> Result<bool, SyncError> {
        let last = self.data_version.clone();
        self.tail
            .call(move |conn| {
                let now: i64 = conn
                    .query_row("PRAGMA data_version", [], |r| r.get(0))
                    .map_err(db)?;
                Ok(last.swap(now, Ordering::Relaxed) != now)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_temporary_log_leaves_no_file_behind() {
        let store = SqliteStore::open_temp().await.unwrap();
        let path = store.path().to_owned();
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        assert!(path.exists() && wal.exists(), "a WAL log of two files");
        drop(store);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            assert!(!file.exists(), "{} is left", file.display());
        }
    }

    #[test]
    fn catch_up_reads_walk_the_audience_index() {
        let dir = std::env::temp_dir().join(format!("ui-sync-plan-{}", random_base32(12)));
        let mut conn = connect(&dir).unwrap();
        init(&mut conn).unwrap();
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {SNAPSHOT_SQL}"))
            .unwrap()
            .query_map(params!["[]", 0, 10, 10], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        drop(conn);
        drop(TempFiles(dir));
        let plan = plan.join("\n");
        assert!(plan.starts_with("SCAN a VIRTUAL TABLE"), "{plan}");
        assert!(plan.contains("SEARCH e USING INDEX ui_sync_events_aud (aud_kind=? AND aud_id=? AND seq>? AND seq<?)"), "{plan}");
    }
}
