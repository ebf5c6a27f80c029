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
    fn from(e: DbError) -> Self {
        crate::error::ApiError::internal(format!("The database failed: {e}"))
    }
}

pub(crate) type DbResult<T> = Result<T, DbError>;

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_millis(DB_BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

struct Readers {
    conns: Mutex<Vec<Connection>>,
    /// One permit per connection in `conns` (a lease gives its connection back first).
    permits: Arc<Semaphore>,
}

/// The application database (see the module docs). Cheap to clone.
#[derive(Clone)]
pub(crate) struct Db {
    path: Arc<PathBuf>,
    writer: Arc<Mutex<Connection>>,
    readers: Arc<Readers>,
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
    pub(crate) async fn open(path: &Path, schema: &'static str) -> Result<Db, ServerError> {
        let p = path.to_owned();
        let (writer, readers) = tokio::task::spawn_blocking(move || -> rusqlite::Result<_> {
            let writer = Connection::open(&p)?;
            configure(&writer)?;
            let _mode: String =
                writer.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
            writer.pragma_update(None, "synchronous", "NORMAL")?;
            writer.execute_batch(schema)?;
            let readers = (0..DB_READERS)
                .map(|_| open_reader(&p))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((writer, readers))
        })
        .await
        .map_err(|e| ServerError::Database(format!("opening {}: {e}", path.display())))??;
        Ok(Db {
            path: Arc::new(path.to_owned()),
            writer: Arc::new(Mutex::new(writer)),
            readers: Arc::new(Readers {
                conns: Mutex::new(readers),
                permits: Arc::new(Semaphore::new(DB_READERS)),
            }),
        })
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

    /// Runs `f` on a read-only connection.
    pub(crate) async fn read<R, F>(&self, f: F) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<R> + Send + 'static,
    {
        self.run_read(None, f).await
    }

    /// Runs `f` on a read-only connection; when `cancel` fires first, the running
    /// statement is interrupted (it then fails with an "interrupted" error).
    pub(crate) async fn read_cancellable<R, F>(
        &self,
        cancel: CancellationToken,
        f: F,
    ) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<R> + Send + 'static,
    {
        self.run_read(Some(cancel), f).await
    }

    /// Takes a reader connection, runs `f` on it on the blocking pool and gives it back
    /// (see [`Lease`]); with `cancel`, a watcher task interrupts the statement when it
    /// fires.
    async fn run_read<R, F>(&self, cancel: Option<CancellationToken>, f: F) -> DbResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<R> + Send + 'static,
    {
        let permit = Arc::clone(&self.readers.permits)
            .acquire_owned()
            .await
            .map_err(|_| DbError("the database is closed".into()))?;
        let conn = lock(&self.readers.conns)
            .pop()
            .ok_or_else(|| DbError("no reader connection is free".into()))?;
        let done = Arc::new(Mutex::new(false));
        let watcher = cancel.map(|cancel| {
            let interrupt = conn.get_interrupt_handle();
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                cancel.cancelled().await;
                // Under the lock: the lease sets `done` under it before the connection
                // serves anyone else, so an interrupt never reaches a later statement.
                let done = lock(&done);
                if !*done {
                    interrupt.interrupt();
                }
            })
            .abort_handle()
        });
        let lease = Lease {
            conn: Some(conn),
            readers: Arc::clone(&self.readers),
            path: Arc::clone(&self.path),
            done,
            watcher,
            _permit: permit,
        };
        tokio::task::spawn_blocking(move || {
            let conn = lease.conn.as_ref().expect("a leased connection");
            f(conn)
        })
        .await
        .map_err(|e| DbError(format!("a database task failed: {e}")))?
    }
}

/// Opens one read-only connection to `path`.
fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    configure(&conn)?;
    Ok(conn)
}

/// A reader connection lent to one blocking call. Dropping it — when the call returns,
/// also when it panics or when the request awaiting it was cancelled — marks the call
/// done, stops its interrupt watcher and gives the connection back to the pool (after a
/// panic a fresh connection replaces it); the permit is released only then, so a permit
/// always finds a connection.
struct Lease {
    conn: Option<Connection>,
    readers: Arc<Readers>,
    path: Arc<PathBuf>,
    done: Arc<Mutex<bool>>,
    watcher: Option<tokio::task::AbortHandle>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Lease {
    fn drop(&mut self) {
        *lock(&self.done) = true;
        if let Some(watcher) = &self.watcher {
            watcher.abort();
        }
        let conn = self.conn.take();
        let conn = if std::thread::panicking() {
            drop(conn);
            open_reader(&self.path).ok()
        } else {
            conn
        };
        if let Some(conn) = conn {
            lock(&self.readers.conns).push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_reads_give_their_connection_back() {
        let dir = std::env::temp_dir().join(format!(
            "ui-server-db-lease-{}-{}",
            std::process::id(),
            crate::store::new_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::open(&dir.join("app.db"), "CREATE TABLE t (x)")
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
}
