//! The application database: one SQLite file, one writer connection and a few read-only
//! reader connections. rusqlite is blocking, so every call runs on tokio's blocking pool;
//! async callers only await.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::error::ServerError;
use crate::limits::{DB_BUSY_TIMEOUT_MS, DB_READERS};

/// A database failure, as text (the caller decides whether it is `internal`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct DbError(pub(crate) String);

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        DbError(e.to_string())
    }
}

impl From<serde_json::Error> for DbError {
    fn from(e: serde_json::Error) -> Self {
        DbError(format!("stored JSON: {e}"))
    }
}

impl From<DbError> for crate::error::ApiError {
    /// `internal`, logged: a request whose database call failed fails, never silently.
    /// The answer does not repeat the database's words (they name tables, roles and
    /// hosts); the log has them.
    fn from(e: DbError) -> Self {
        tracing::error!(error = %e, "a database call failed");
        crate::error::ApiError::internal("The database failed; the server's log says why.")
    }
}

pub(crate) type DbResult<T> = Result<T, DbError>;

/// One versioned migration of the store's tables: applied once, in version order, in
/// one transaction with its row in `ui_migrations` (on SQLite and on PostgreSQL alike).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    /// The version (1, 2, …): a database records every version it applied.
    pub(crate) version: i64,
    /// What it does (the `ui_migrations.name` column).
    pub(crate) name: &'static str,
    /// The statements.
    pub(crate) sql: &'static str,
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_millis(DB_BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

/// SQLite virtual-machine steps between two looks of a source read at its cancellation
/// (a few microseconds of work).
const PROGRESS_STEPS: i32 = 1_000;

/// A pool of read-only connections to one SQLite file: at most `size` lent at once,
/// opened when first needed and kept for the next read. The server's database has two
/// (its own reads and source reads); every `sqlite://` connection of `sources.toml` has
/// one. Each read runs on tokio's blocking pool; with a cancellation token, SQLite looks
/// at it every [`PROGRESS_STEPS`] steps of a statement and stops the statement with an
/// "interrupted" error once it fired.
pub(crate) struct ReadPool {
    path: PathBuf,
    conns: Mutex<Vec<Connection>>,
    /// One permit per connection the pool may have lent (a lease gives its connection
    /// back before its permit).
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for ReadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadPool")
            .field("path", &self.path)
            .finish()
    }
}

impl ReadPool {
    fn new(path: PathBuf, size: usize, first: Connection) -> Arc<ReadPool> {
        let mut conns = Vec::with_capacity(size);
        conns.push(first);
        Arc::new(ReadPool {
            path,
            conns: Mutex::new(conns),
            permits: Arc::new(Semaphore::new(size.max(1))),
        })
    }

    /// Opens one connection to the file at `path` (it must exist and be readable) and
    /// keeps it as the first of at most `size`.
    pub(crate) async fn open(path: PathBuf, size: usize) -> DbResult<Arc<ReadPool>> {
        let p = path.clone();
        let first = tokio::task::spawn_blocking(move || open_reader(&p))
            .await
            .map_err(|e| DbError(format!("a database task failed: {e}")))??;
        Ok(ReadPool::new(path, size, first))
    }

    /// Takes a connection, runs `f` on it on the blocking pool and gives it back (see
    /// [`Lease`]); with `cancel`, a progress handler interrupts the statements of `f` once
    /// it fired, however early or late that is.
    pub(crate) async fn read<R, F>(
        self: &Arc<Self>,
        cancel: Option<CancellationToken>,
        f: F,
    ) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<R> + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| DbError("the database is closed".into()))?;
        let mut lease = Lease {
            conn: lock(&self.conns).pop(),
            pool: Arc::clone(self),
            _permit: permit,
        };
        tokio::task::spawn_blocking(move || {
            if lease.conn.is_none() {
                lease.conn = Some(open_reader(&lease.pool.path)?);
            }
            let conn = lease.conn.as_ref().expect("a leased connection");
            if let Some(cancel) = cancel {
                if cancel.is_cancelled() {
                    return Err(DbError("interrupted: the read was cancelled".into()));
                }
                conn.progress_handler(PROGRESS_STEPS, Some(move || cancel.is_cancelled()));
            }
            f(conn)
        })
        .await
        .map_err(|e| DbError(format!("a database task failed: {e}")))?
    }
}

/// The application database (see the module docs). Cheap to clone.
#[derive(Clone)]
pub(crate) struct Db {
    path: Arc<PathBuf>,
    writer: Arc<Mutex<Connection>>,
    /// The store's own reads: never shared with source reads, so a slow source never
    /// delays a chat list or a `ui.query`'s stored block.
    readers: Arc<ReadPool>,
    /// Source reads (`ui.query`): one connection per read slot of the host.
    sources: Arc<ReadPool>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Db {
    /// Opens (or creates) the file at `path` in WAL mode and runs `schema` on the writer.
    /// Source reads get a pool of `source_readers` connections of their own (the host's
    /// `readSlots`), the store's reads [`DB_READERS`].
    pub(crate) async fn open(
        path: &Path,
        schema: &'static str,
        source_readers: usize,
    ) -> Result<Db, ServerError> {
        let p = path.to_owned();
        let (writer, reader, source_reader) =
            tokio::task::spawn_blocking(move || -> rusqlite::Result<_> {
                let writer = Connection::open(&p)?;
                configure(&writer)?;
                let _mode: String =
                    writer.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
                writer.pragma_update(None, "synchronous", "NORMAL")?;
                writer.execute_batch(schema)?;
                // One reader of each pool up front: the file is readable read-only.
                Ok((writer, open_reader(&p)?, open_reader(&p)?))
            })
            .await
            .map_err(|e| ServerError::Database(format!("opening {}: {e}", path.display())))??;
        Ok(Db {
            path: Arc::new(path.to_owned()),
            writer: Arc::new(Mutex::new(writer)),
            readers: ReadPool::new(path.to_owned(), DB_READERS, reader),
            sources: ReadPool::new(path.to_owned(), source_readers, source_reader),
        })
    }

    /// Applies the migrations the file has not recorded in `ui_migrations` yet, in version
    /// order, each in one `IMMEDIATE` transaction with its row (another process opening
    /// the same file waits, then sees them applied). A file made before migrations existed
    /// has no `ui_migrations` table: every migration runs, the first one's
    /// `CREATE … IF NOT EXISTS` finds its tables there, and the later ones upgrade them.
    pub(crate) async fn migrate(&self, migrations: &'static [Migration]) -> DbResult<()> {
        self.write(move |conn| {
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS ui_migrations (
                   version     INTEGER PRIMARY KEY,
                   name        TEXT    NOT NULL,
                   applied_at  INTEGER NOT NULL
                 )",
            )?;
            for m in migrations {
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let done: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM ui_migrations WHERE version = ?1)",
                    [m.version],
                    |r| r.get(0),
                )?;
                if !done {
                    tx.execute_batch(m.sql)?;
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                    tx.execute(
                        "INSERT INTO ui_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
                        rusqlite::params![m.version, m.name, now],
                    )?;
                    tracing::info!(version = m.version, name = m.name, "database migrated");
                }
                tx.commit()?;
            }
            Ok(())
        })
        .await
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the writer connection (one writer at a time).
    pub(crate) async fn write<R, F>(&self, f: F) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> DbResult<R> + Send + 'static,
    {
        let writer = Arc::clone(&self.writer);
        tokio::task::spawn_blocking(move || f(&mut lock(&writer)))
            .await
            .map_err(|e| DbError(format!("a database task failed: {e}")))?
    }

    /// Opens a fresh read-only connection and reads the schema: whether the file can be
    /// opened and read now (a pooled connection would still read a removed file).
    pub(crate) async fn ping(&self) -> DbResult<()> {
        let path = Arc::clone(&self.path);
        tokio::task::spawn_blocking(move || {
            let conn = open_reader(&path)?;
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
            Ok(())
        })
        .await
        .map_err(|e| DbError(format!("a database task failed: {e}")))?
    }

    /// Runs `f` on a read-only connection of the store's own pool.
    pub(crate) async fn read<R, F>(&self, f: F) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<R> + Send + 'static,
    {
        self.readers.read(None, f).await
    }

    /// Runs `f` (a source read) on a read-only connection of the sources' pool. From
    /// before `f` starts until it returns, SQLite looks at `cancel` every
    /// [`PROGRESS_STEPS`] steps of the statement: once it fired, the running statement
    /// stops with an "interrupted" error at its next look (within microseconds), however
    /// early or late the cancellation came.
    pub(crate) async fn read_source<R, F>(&self, cancel: CancellationToken, f: F) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<R> + Send + 'static,
    {
        self.sources.read(Some(cancel), f).await
    }
}

/// Opens one read-only connection to `path`, with `PRAGMA query_only` besides the flag.
fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    configure(&conn)?;
    conn.pragma_update(None, "query_only", "ON")?;
    Ok(conn)
}

/// A pool connection lent to one blocking call. Dropping it — when the call returns,
/// also when it panics or when the request awaiting it was cancelled before it ran —
/// removes the call's progress handler and gives the connection back to its pool (after
/// a panic the connection is dropped; the next lease opens a fresh one); the permit is
/// released only then.
struct Lease {
    conn: Option<Connection>,
    pool: Arc<ReadPool>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if std::thread::panicking() {
            return;
        }
        // A source read's handler must not look at its cancellation for the next read.
        conn.progress_handler(0, None::<fn() -> bool>);
        lock(&self.pool.conns).push(conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test's database file.
    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "{tag}-{}-{}",
            std::process::id(),
            crate::store::new_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_reads_give_their_connection_back() {
        let dir = temp_dir("ui-server-db-lease");
        let db = Db::open(&dir.join("app.db"), "CREATE TABLE t (x)", 4)
            .await
            .unwrap();
        // More reads than connections, each abandoned by its caller while it runs.
        for _ in 0..DB_READERS * 2 {
            let slow = db.read(|c| {
                std::thread::sleep(Duration::from_millis(20));
                Ok(c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?)
            });
            assert!(tokio::time::timeout(Duration::ZERO, slow).await.is_err());
        }
        // A read that panics loses its connection; a fresh one replaces it.
        let panicked = db
            .read(|_| -> DbResult<()> { panic!("a bug in a read") })
            .await;
        assert!(panicked.is_err());
        for _ in 0..DB_READERS * 2 {
            let one = db
                .read(|c| Ok(c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?))
                .await;
            assert_eq!(one, Ok(1));
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_cannot_write_the_servers_file() {
        let dir = temp_dir("ui-server-db-readonly");
        let db = Db::open(&dir.join("app.db"), "CREATE TABLE t (x)", 2)
            .await
            .unwrap();
        let write = |c: &Connection| Ok(c.execute("INSERT INTO t VALUES (1)", [])?);
        let own = db.read(write).await.unwrap_err();
        assert!(own.0.contains("readonly"), "{own}");
        let source = db
            .read_source(CancellationToken::new(), write)
            .await
            .unwrap_err();
        assert!(source.0.contains("readonly"), "{source}");
        let pragma = db
            .read_source(CancellationToken::new(), |c| {
                Ok(c.query_row("PRAGMA query_only", [], |r| r.get::<_, i64>(0))?)
            })
            .await;
        assert_eq!(pragma, Ok(1));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Counts to half a billion in one step: a minute of work unless interrupted.
    const SPIN: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
                        WHERE x < 500000000) SELECT max(x) FROM c";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_source_read_stops_however_early_or_late_it_is_cancelled() {
        let dir = temp_dir("ui-server-db-cancel");
        let db = Db::open(&dir.join("app.db"), "CREATE TABLE t (x)", 2)
            .await
            .unwrap();
        let spin = |c: &Connection| Ok(c.query_row(SPIN, [], |r| r.get::<_, i64>(0))?);
        // Cancelled before the statement starts (a read that waited for its turn): an
        // interrupt sent then would be lost when the statement begins.
        let cancel = CancellationToken::new();
        cancel.cancel();
        let started = std::time::Instant::now();
        let e = db.read_source(cancel, spin).await.unwrap_err();
        assert!(e.0.contains("interrupt"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(2));
        // Cancelled just as the blocking call starts, and while it runs.
        for delay in [0, 1, 5, 50] {
            let cancel = CancellationToken::new();
            let fire = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                fire.cancel();
            });
            let started = std::time::Instant::now();
            let e = db.read_source(cancel, spin).await.unwrap_err();
            assert!(e.0.contains("interrupt"), "{delay} ms: {e}");
            assert!(started.elapsed() < Duration::from_secs(2), "{delay} ms");
        }
        // The pool's connections serve the next reads normally, without the old handler.
        for _ in 0..4 {
            let one = db
                .read_source(CancellationToken::new(), |c| {
                    Ok(c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?)
                })
                .await;
            assert_eq!(one, Ok(1));
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
