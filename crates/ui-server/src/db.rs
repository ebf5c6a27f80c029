//! The application database: one SQLite file, one writer connection and a few read-only
//! reader connections. rusqlite is blocking, so every call runs on tokio's blocking pool;
//! async callers only await.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;
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
    permits: Semaphore,
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
                .map(|_| {
                    let conn = Connection::open_with_flags(
                        &p,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )?;
                    configure(&conn)?;
                    Ok(conn)
                })
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
                permits: Semaphore::new(DB_READERS),
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
        self.read_cancellable(CancellationToken::new(), f).await
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
        let _permit = self
            .readers
            .permits
            .acquire()
            .await
            .map_err(|_| DbError("the database is closed".into()))?;
        let conn = lock(&self.readers.conns)
            .pop()
            .ok_or_else(|| DbError("no reader connection is free".into()))?;
        let interrupt = conn.get_interrupt_handle();
        // `done` is set under its lock before the connection serves anyone else, so an
        // interrupt never reaches a later statement.
        let done = Arc::new(Mutex::new(false));
        let watcher = {
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                cancel.cancelled().await;
                if !*lock(&done) {
                    interrupt.interrupt();
                }
            })
        };
        let joined = tokio::task::spawn_blocking(move || {
            let out = f(&conn);
            (conn, out)
        })
        .await;
        *lock(&done) = true;
        watcher.abort();
        match joined {
            Ok((conn, out)) => {
                lock(&self.readers.conns).push(conn);
                out
            }
            Err(e) => {
                // The connection went down with the task; open a replacement.
                let path = Arc::clone(&self.path);
                if let Ok(Ok(conn)) = tokio::task::spawn_blocking(move || {
                    let conn = Connection::open_with_flags(
                        &*path,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )?;
                    configure(&conn)?;
                    Ok::<_, rusqlite::Error>(conn)
                })
                .await
                {
                    lock(&self.readers.conns).push(conn);
                }
                Err(DbError(format!("a database task failed: {e}")))
            }
        }
    }
}
