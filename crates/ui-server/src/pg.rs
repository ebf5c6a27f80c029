//! The server's database on PostgreSQL (`database.url = "postgres://…"`): a bounded pool
//! of `tokio-postgres` connections, every call bounded by a timeout (on the client, and
//! as the session's `statement_timeout` inside the database), and the versioned
//! migrations of the store's tables.
//!
//! `tokio-postgres` is the client `ui-sync`'s PostgreSQL log already uses; a store write
//! and its change events share one transaction only on the same client type.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::Client;
use ui_sync::PgConnect;

use crate::db::{DbError, DbResult, Migration};
use crate::error::ServerError;

/// Serialises the migrations of instances starting at once on one database.
const MIGRATE_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(hashtext('uiblocks.migrate'))";

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError(format!("postgres: {}", ui_sync::pg_error_text(&e)))
    }
}

/// The connection string of `url` without its password, and its TLS mode (for logs and
/// messages): `postgres://app@db:5432/app (TLS verify-full)`.
pub(crate) fn redacted(url: &str) -> String {
    match PgConnect::parse(url) {
        Ok(connect) => {
            let c = connect.config();
            let hosts: Vec<String> = c
                .get_hosts()
                .iter()
                .map(|h| match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    #[cfg(unix)]
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                })
                .collect();
            format!(
                "postgres://{}@{}:{}/{} (TLS {})",
                c.get_user().unwrap_or(""),
                hosts.join(","),
                c.get_ports().first().copied().unwrap_or(5432),
                c.get_dbname().unwrap_or(""),
                connect.tls_mode()
            )
        }
        Err(_) => "postgres://(unparsable)".to_owned(),
    }
}

struct Inner {
    config: PgConnect,
    /// `SET …` run on every new connection.
    session: String,
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
    timeout: Duration,
}

/// The pool (see the module docs). Cheap to clone.
#[derive(Clone)]
pub(crate) struct PgDb {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDb")
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// A pool connection lent to one call. [`PgConn::release`] gives it back; dropped
/// without it (an error, a timeout, a cancelled call that may have left a statement
/// running) it is closed instead, so a connection in an unknown state is never reused.
pub(crate) struct PgConn {
    client: Option<Client>,
    inner: Arc<Inner>,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for PgConn {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("a leased connection")
    }
}

impl std::ops::DerefMut for PgConn {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("a leased connection")
    }
}

impl PgConn {
    /// Gives the connection back to the pool (a closed one is dropped).
    pub(crate) fn release(mut self) {
        if let Some(client) = self.client.take()
            && !client.is_closed()
        {
            self.inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(client);
        }
    }
}

impl PgDb {
    /// Connects to `url` (a `postgres://` URL or a libpq `key=value` string): at most
    /// `size` connections, every call bounded by `timeout`; then runs `migrations`.
    pub(crate) async fn open(
        url: &str,
        size: usize,
        timeout: Duration,
        migrations: &[Migration],
    ) -> Result<PgDb, ServerError> {
        let mut config =
            PgConnect::parse(url).map_err(|e| ServerError::Config(format!("database.url: {e}")))?;
        config
            .config_mut()
            .connect_timeout(timeout)
            .application_name("uiblocks");
        let ms = timeout.as_millis().max(1);
        let db = PgDb {
            inner: Arc::new(Inner {
                config,
                session: format!(
                    "SET statement_timeout = {ms}; SET lock_timeout = {ms}; \
                     SET idle_in_transaction_session_timeout = {ms};"
                ),
                idle: Mutex::new(Vec::with_capacity(size)),
                permits: Arc::new(Semaphore::new(size.max(1))),
                timeout,
            }),
        };
        db.migrate(migrations)
            .await
            .map_err(|e| ServerError::Database(format!("{}: migrations: {e}", redacted(url))))?;
        Ok(db)
    }

    /// A connection of the pool: an idle one, or a new one while fewer than the pool's
    /// size are lent (waiting otherwise). Call it inside [`PgDb::bounded`].
    pub(crate) async fn get(&self) -> DbResult<PgConn> {
        let permit = Arc::clone(&self.inner.permits)
            .acquire_owned()
            .await
            .map_err(|_| DbError("the database is closed".into()))?;
        let idle = {
            let mut idle = self
                .inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            loop {
                match idle.pop() {
                    Some(c) if c.is_closed() => {}
                    other => break other,
                }
            }
        };
        let client = match idle {
            Some(c) => c,
            None => {
                let (client, connection) = self.inner.config.connect().await?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %ui_sync::pg_error_text(&e), "a database connection ended");
                    }
                });
                client.batch_execute(&self.inner.session).await?;
                client
            }
        };
        Ok(PgConn {
            client: Some(client),
            inner: Arc::clone(&self.inner),
            _permit: permit,
        })
    }

    /// Runs `fut` (which takes its connections with [`PgDb::get`]) within the pool's
    /// timeout.
    pub(crate) async fn bounded<R>(&self, fut: impl Future<Output = DbResult<R>>) -> DbResult<R> {
        tokio::time::timeout(self.inner.timeout, fut)
            .await
            .unwrap_or_else(|_| {
                Err(DbError(format!(
                    "the database did not answer within {} ms",
                    self.inner.timeout.as_millis()
                )))
            })
    }

    /// Runs the write `fut` to its end on a task of its own, within the timeout: a
    /// request that goes away halfway never cancels a write between its commit and what
    /// must follow it (the cache's invalidation).
    pub(crate) async fn write<R: Send + 'static>(
        &self,
        fut: impl Future<Output = DbResult<R>> + Send + 'static,
    ) -> DbResult<R> {
        let db = self.clone();
        tokio::spawn(async move { db.bounded(fut).await })
            .await
            .map_err(|e| DbError(format!("a database task failed: {e}")))?
    }

    /// Applies the migrations this database has not recorded yet, in version order, each
    /// in one transaction with its `ui_migrations` row, under an advisory lock (two
    /// instances starting at once apply each migration once).
    async fn migrate(&self, migrations: &[Migration]) -> DbResult<()> {
        self.bounded(async {
            let mut conn = self.get().await?;
            let tx = conn.transaction().await?;
            tx.batch_execute(MIGRATE_LOCK_SQL).await?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS ui_migrations (
                   version     BIGINT PRIMARY KEY,
                   name        TEXT   NOT NULL,
                   applied_at  BIGINT NOT NULL
                 )",
            )
            .await?;
            let done: Option<i64> = tx
                .query_one("SELECT MAX(version) FROM ui_migrations", &[])
                .await?
                .try_get(0)?;
            let done = done.unwrap_or(0);
            for m in migrations.iter().filter(|m| m.version > done) {
                tx.batch_execute(m.sql).await?;
                tx.execute(
                    "INSERT INTO ui_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    &[&m.version, &m.name, &now_ms()],
                )
                .await?;
                tracing::info!(version = m.version, name = m.name, "database migrated");
            }
            tx.commit().await?;
            conn.release();
            Ok(())
        })
        .await
    }

    /// Runs `SELECT 1` (the readiness probe).
    pub(crate) async fn ping(&self) -> DbResult<()> {
        self.bounded(async {
            let conn = self.get().await?;
            conn.query_one("SELECT 1", &[]).await?;
            conn.release();
            Ok(())
        })
        .await
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Fresh databases on the test cluster, for the tests that run on both databases.
#[cfg(test)]
pub(crate) mod test_db {
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio_postgres::NoTls;

    /// A database made for one test (dropped by [`TestDb::finish`]).
    pub(crate) struct TestDb {
        admin: String,
        name: String,
        /// Its connection string.
        pub(crate) url: String,
    }

    /// The test cluster's connection string: `UI_SYNC_PG` (`cargo xtask ci` sets it on
    /// its PostgreSQL step). Without it the PostgreSQL half of a test says so and passes
    /// — unless `UI_PG_REQUIRED` is set (the CI step sets it), then it fails.
    pub(crate) fn cluster() -> Option<String> {
        let found = std::env::var("UI_SYNC_PG")
            .ok()
            .filter(|s| !s.trim().is_empty());
        if found.is_none() {
            assert!(
                std::env::var_os("UI_PG_REQUIRED").is_none(),
                "UI_PG_REQUIRED is set but UI_SYNC_PG is not: the PostgreSQL tests cannot run"
            );
            eprintln!("skipped on PostgreSQL: UI_SYNC_PG not set");
        }
        found
    }

    /// A fresh, empty database on the test cluster, or `None` (see [`cluster`]).
    pub(crate) async fn fresh(tag: &str) -> Option<TestDb> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let admin = cluster()?;
        let name = format!(
            "ui_t_{tag}_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            crate::store::new_id().get(..8).unwrap_or("0")
        );
        let (client, connection) = tokio_postgres::connect(&admin, NoTls).await.unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .unwrap();
        let url = with_dbname(&admin, &name);
        Some(TestDb { admin, name, url })
    }

    /// `conninfo` (a URL or `key=value` string) naming the database `name` instead.
    pub(crate) fn with_dbname(conninfo: &str, name: &str) -> String {
        let url = ["postgres://", "postgresql://"]
            .iter()
            .find_map(|p| conninfo.strip_prefix(p));
        match url {
            Some(rest) => {
                let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
                let authority = main.split('/').next().unwrap_or("");
                let query = if query.is_empty() {
                    String::new()
                } else {
                    format!("?{query}")
                };
                format!("postgres://{authority}/{name}{query}")
            }
            None => format!("{conninfo} dbname={name}"),
        }
    }

    impl TestDb {
        /// Drops the database (and whatever still uses it).
        pub(crate) async fn finish(self) {
            let (client, connection) = tokio_postgres::connect(&self.admin, NoTls).await.unwrap();
            tokio::spawn(connection);
            client
                .batch_execute(&format!(
                    "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                    self.name
                ))
                .await
                .unwrap();
        }
    }
}
