//! Named connections of `sources.toml` (`[connections.NAME]`): the application's own
//! databases that sources read, next to the server's database (the default).
//!
//! ```toml
//! [connections.app]
//! url = "postgres://reader@db.internal/app"   # or "sqlite:///srv/app/data.db"
//! # url_env = "APP_DATABASE_URL"              # instead of url: read it from this variable
//! pool = 4                                    # connections at most (1-64, default 4)
//! connect_timeout_ms = 5000                   # per connection attempt (1-60000, default 5000)
//! ```
//!
//! - **PostgreSQL** (`postgres://`, `postgresql://`): a bounded pool of `tokio-postgres`
//!   clients (plain TCP or a Unix socket, no TLS). Every read runs in its own
//!   `BEGIN READ ONLY` transaction with `SET LOCAL statement_timeout` at the host's read
//!   timeout and `TimeZone` UTC; when the host's timeout fires first, a cancel request
//!   stops the backend's statement and the connection is closed. `:name` and `@name`
//!   become `$1…$n` (outside literals, quoted names, comments and `::` casts) and are
//!   always bound. Rows come back as `row_to_json` of the statement, so every PostgreSQL
//!   type maps the way PostgreSQL's JSON does: integers, floats and numerics are numbers,
//!   booleans, text, `json`/`jsonb` as they are, timestamps as ISO 8601 / RFC 3339 text
//!   (`timestamptz` in UTC with `+00:00`), NULL as null.
//! - **SQLite** (`sqlite://PATH`, `sqlite:///abs/path`): a pool of connections opened
//!   read-only with `PRAGMA query_only`, each read interruptible by a progress handler:
//!   `db::ReadPool`, the pool of the server's own database.
//!
//! `tokio-postgres` is the PostgreSQL client the workspace already uses for the change
//! log (`ui-sync`'s `postgres` feature); `bytes` is its buffer type, needed to bind
//! parameters of the types a statement asks for.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{AsyncMessage, Client};
use tokio_util::sync::CancellationToken;
use ui_sync::PgConnect;

/// Connections one `[connections.NAME]` may open at most.
pub(crate) const MAX_POOL: usize = 64;
/// Connections a `[connections.NAME]` opens at most when it names no `pool`.
pub(crate) const DEFAULT_POOL: usize = 4;
/// The connect timeout of a `[connections.NAME]` that names none, in ms.
pub(crate) const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Longest connect timeout a connection may name, in ms.
pub(crate) const MAX_CONNECT_TIMEOUT_MS: u64 = 60_000;
/// Longest wait of a cancel request sent to PostgreSQL when a read times out.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);
/// First and longest wait of a `LISTEN` connection between two attempts to reconnect.
const LISTEN_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(30));
/// How often an instance standing by (another instance records the channels'
/// notifications) tries to take them over.
const LISTEN_STANDBY_RETRY: Duration = Duration::from_secs(2);
/// The lock that makes one instance of several on a database record a set of channels'
/// notifications: a session advisory lock, released when its connection ends.
const LISTEN_LOCK_SQL: &str =
    "SELECT pg_try_advisory_lock(hashtext('uiblocks.notify'), hashtext($1))";
/// Notifications buffered between a `LISTEN` connection and the recorder; past it the
/// connection is read only as fast as events are recorded.
const LISTEN_QUEUE: usize = 1_024;

/// `[connections.NAME]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConnectionDecl {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    url_env: Option<String>,
    #[serde(default)]
    pool: Option<usize>,
    #[serde(default)]
    connect_timeout_ms: Option<u64>,
}

/// Where a named connection goes.
#[derive(Clone)]
pub(crate) enum Target {
    /// A SQLite file, opened read-only.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(Box<PgConnect>),
}

impl std::fmt::Debug for Target {
    /// Never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            Target::Postgres(c) => write!(f, "postgres (dbname {:?})", c.config().get_dbname()),
        }
    }
}

/// A checked `[connections.NAME]`.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionSpec {
    pub(crate) name: String,
    pub(crate) target: Target,
    pub(crate) pool: usize,
    pub(crate) connect_timeout: Duration,
}

impl ConnectionSpec {
    /// Checks one declaration; errors name the key (`connections.NAME.url`, …).
    pub(crate) fn check(name: &str, decl: ConnectionDecl) -> Result<ConnectionSpec, String> {
        let key = format!("connections.{name}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("{key}: a connection name is [A-Za-z0-9_-]+"));
        }
        let url = match (decl.url, decl.url_env) {
            (Some(url), None) => url,
            (None, Some(var)) => std::env::var(&var).map_err(|_| {
                format!("{key}.url_env: the environment variable `{var}` is not set")
            })?,
            _ => return Err(format!("{key}: give exactly one of `url` and `url_env`")),
        };
        let target = parse_url(&url).map_err(|e| format!("{key}.url: {e}"))?;
        let pool = decl.pool.unwrap_or(DEFAULT_POOL);
        if !(1..=MAX_POOL).contains(&pool) {
            return Err(format!("{key}.pool: {pool} is not in 1..={MAX_POOL}"));
        }
        let ms = decl
            .connect_timeout_ms
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT_MS);
        if !(1..=MAX_CONNECT_TIMEOUT_MS).contains(&ms) {
            return Err(format!(
                "{key}.connect_timeout_ms: {ms} is not in 1..={MAX_CONNECT_TIMEOUT_MS}"
            ));
        }
        Ok(ConnectionSpec {
            name: name.to_owned(),
            target,
            pool,
            connect_timeout: Duration::from_millis(ms),
        })
    }

    /// The server's own database as a connection named `name` (default pool and
    /// timeout).
    pub(crate) fn server(name: &str, url: &str) -> Result<ConnectionSpec, String> {
        Ok(ConnectionSpec {
            name: name.to_owned(),
            target: parse_url(url).map_err(|e| format!("database.url: {e}"))?,
            pool: DEFAULT_POOL,
            connect_timeout: Duration::from_millis(DEFAULT_CONNECT_TIMEOUT_MS),
        })
    }

    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self.target, Target::Postgres(_))
    }
}

/// `sqlite://PATH` or `postgres://…` / `postgresql://…`; the error never repeats the URL
/// (it may hold a password).
fn parse_url(url: &str) -> Result<Target, String> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        if path.is_empty() {
            return Err("`sqlite://` needs a path (`sqlite:///abs/app.db`)".into());
        }
        return Ok(Target::Sqlite(PathBuf::from(path)));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let config = PgConnect::parse(url).map_err(|e| e.to_string())?;
        return Ok(Target::Postgres(Box::new(config)));
    }
    Err("must start with `postgres://`, `postgresql://` or `sqlite://`".into())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// PostgreSQL

/// A bounded pool of PostgreSQL clients.
pub(crate) struct PgPool {
    name: String,
    config: PgConnect,
    connect_timeout: Duration,
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgPool").field("name", &self.name).finish()
    }
}

/// TCP keepalive of every source connection: idle time before the first probe. A
/// connection to a server that vanished without closing it (a dropped route, a failed-over
/// host) fails within about a minute instead of the kernel's two hours: a `LISTEN`
/// connection would otherwise stop passing notifications without a word.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// Time between keepalive probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes before the connection counts as dead.
const KEEPALIVE_RETRIES: u32 = 3;

/// Connects with `config` within `timeout`; the connection's task runs until the client
/// is dropped and passes its notifications (if any) to `notifications`.
async fn pg_connect(
    config: &PgConnect,
    timeout: Duration,
    notifications: Option<tokio::sync::mpsc::Sender<tokio_postgres::Notification>>,
) -> Result<Client, String> {
    let mut config = config.clone();
    config
        .config_mut()
        .connect_timeout(timeout)
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_RETRIES);
    let (client, mut connection) = tokio::time::timeout(timeout, config.connect())
        .await
        .map_err(|_| format!("no connection within {} ms", timeout.as_millis()))?
        .map_err(|e| ui_sync::pg_error_text(&e))?;
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if let Some(tx) = &notifications
                        && tx.send(n).await.is_err()
                    {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %ui_sync::pg_error_text(&e), "a PostgreSQL source connection failed");
                    break;
                }
            }
        }
    });
    Ok(client)
}

impl PgPool {
    /// Opens one connection (the database must be reachable) and keeps it.
    pub(crate) async fn open(spec: &ConnectionSpec) -> Result<Arc<PgPool>, String> {
        let Target::Postgres(config) = &spec.target else {
            return Err("not a PostgreSQL connection".into());
        };
        let first = pg_connect(config, spec.connect_timeout, None).await?;
        Ok(Arc::new(PgPool {
            name: spec.name.clone(),
            config: (**config).clone(),
            connect_timeout: spec.connect_timeout,
            idle: Mutex::new(vec![first]),
            permits: Arc::new(Semaphore::new(spec.pool)),
        }))
    }

    /// A client of the pool (an idle one still open, or a new one) and its permit.
    async fn lease(self: &Arc<Self>) -> Result<PgLease, String> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| "the connection is closed".to_owned())?;
        let idle = loop {
            match lock(&self.idle).pop() {
                Some(c) if c.is_closed() => continue,
                other => break other,
            }
        };
        let client = match idle {
            Some(c) => c,
            None => pg_connect(&self.config, self.connect_timeout, None).await?,
        };
        Ok(PgLease {
            client: Some(client),
            pool: Arc::clone(self),
            _permit: permit,
        })
    }

    /// Prepares `sql` (checking it) and returns its parameter types, within the
    /// connection's `connect_timeout` (for the lease and again for the prepare): a
    /// database that stops answering, or a table locked by another session, fails the
    /// check instead of holding the sources' load. A prepare that timed out is cancelled
    /// in the database and its connection closed.
    pub(crate) async fn param_types(self: &Arc<Self>, sql: &str) -> Result<Vec<Type>, String> {
        let within = self.connect_timeout;
        let late = |what: &str| {
            format!(
                "{what} took longer than the connection's connect_timeout_ms ({} ms)",
                within.as_millis()
            )
        };
        let mut lease = tokio::time::timeout(within, self.lease())
            .await
            .map_err(|_| late("waiting for a connection"))??;
        let prepared = tokio::time::timeout(within, lease.client().prepare(sql)).await;
        match prepared {
            Ok(stmt) => Ok(stmt.map_err(|e| pg_error(&e))?.params().to_vec()),
            Err(_) => {
                let cancel_token = lease.client().cancel_token();
                lease.discard();
                self.cancel_backend(cancel_token).await;
                Err(late("preparing the statement"))
            }
        }
    }

    /// Asks the backend behind `token` to stop its statement (within [`CANCEL_TIMEOUT`]);
    /// a failure is logged.
    async fn cancel_backend(&self, token: tokio_postgres::CancelToken) {
        match tokio::time::timeout(CANCEL_TIMEOUT, token.cancel_query(self.config.tls())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(connection = %self.name, error = %ui_sync::pg_error_text(&e), "a PostgreSQL cancel request failed");
            }
            Err(_) => {
                tracing::warn!(connection = %self.name, "a PostgreSQL cancel request timed out");
            }
        }
    }

    /// Runs `sql` (a statement giving one text column per row: the row's JSON) in a
    /// read-only transaction with `statement_timeout` = `timeout`, binding `params`; at
    /// most `max_rows` rows. When `cancel` fires first, a cancel request stops the
    /// backend's statement and the client is closed.
    pub(crate) async fn read_json(
        self: &Arc<Self>,
        sql: &str,
        params: &[PgParam<'_>],
        timeout: Duration,
        max_rows: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<Json>, PgReadError> {
        if cancel.is_cancelled() {
            return Err(PgReadError::Cancelled);
        }
        let mut lease = tokio::select! {
            lease = self.lease() => lease.map_err(PgReadError::Failed)?,
            () = cancel.cancelled() => return Err(PgReadError::Cancelled),
        };
        let cancel_token = lease.client().cancel_token();
        let work = async {
            let client = lease.client_mut();
            let tx = client
                .build_transaction()
                .read_only(true)
                .start()
                .await
                .map_err(read_error)?;
            // The timeout is ours (a number), never text of a request.
            tx.batch_execute(&format!(
                "SET LOCAL statement_timeout = {}; SET LOCAL TimeZone = 'UTC'",
                timeout.as_millis().max(1)
            ))
            .await
            .map_err(read_error)?;
            let rows = tx
                .query_raw(sql, params.iter().map(|p| p as &(dyn ToSql + Sync)))
                .await
                .map_err(read_error)?;
            let mut rows = std::pin::pin!(rows);
            let mut out = Vec::new();
            while let Some(row) = rows.next().await {
                let row = row.map_err(read_error)?;
                if out.len() == max_rows {
                    return Err(PgReadError::Failed(format!(
                        "The source returned more than {max_rows} rows."
                    )));
                }
                let text: Option<String> = row.try_get(0).map_err(read_error)?;
                let json = match text {
                    Some(t) => {
                        serde_json::from_str(&t).map_err(|e| PgReadError::Failed(e.to_string()))?
                    }
                    None => Json::Null,
                };
                out.push(json);
            }
            tx.commit().await.map_err(read_error)?;
            Ok(out)
        };
        let outcome = tokio::select! {
            outcome = work => outcome,
            () = cancel.cancelled() => Err(PgReadError::Cancelled),
        };
        if outcome.is_err() {
            // After a failure or a cancellation the client's state is unknown: stop what
            // the backend may still run, and close the connection.
            lease.discard();
            if cancel.is_cancelled() {
                self.cancel_backend(cancel_token).await;
            }
        }
        outcome
    }
}

/// Why a PostgreSQL read failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PgReadError {
    /// The host cancelled it (its read timeout fired).
    Cancelled,
    /// PostgreSQL cancelled the statement (`statement_timeout`: the same timeout, measured
    /// in the database).
    TimedOut,
    /// Anything else, as text.
    Failed(String),
}

impl std::fmt::Display for PgReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgReadError::Cancelled => f.write_str("interrupted: the read was cancelled"),
            PgReadError::TimedOut => f.write_str("the database's statement_timeout fired"),
            PgReadError::Failed(e) => f.write_str(e),
        }
    }
}

fn read_error(e: tokio_postgres::Error) -> PgReadError {
    if e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) {
        PgReadError::TimedOut
    } else {
        PgReadError::Failed(pg_error(&e))
    }
}

/// A PostgreSQL error with its detail (`DbError`'s text is only "db error").
fn pg_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => ui_sync::pg_error_text(e),
    }
}

/// A client lent to one read; given back to the pool when dropped unless discarded.
struct PgLease {
    client: Option<Client>,
    pool: Arc<PgPool>,
    _permit: OwnedSemaphorePermit,
}

impl PgLease {
    fn client(&self) -> &Client {
        self.client.as_ref().expect("a leased client")
    }
    fn client_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("a leased client")
    }
    fn discard(&mut self) {
        self.client = None;
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !client.is_closed()
        {
            lock(&self.pool.idle).push(client);
        }
    }
}

/// The types a parameter of a PostgreSQL source may have; other types need a cast in
/// the SQL (`:since::text::timestamptz`).
const PARAM_TYPES: &[Type] = &[
    Type::BOOL,
    Type::INT2,
    Type::INT4,
    Type::INT8,
    Type::FLOAT4,
    Type::FLOAT8,
    Type::TEXT,
    Type::VARCHAR,
    Type::BPCHAR,
    Type::NAME,
    Type::UNKNOWN,
    Type::JSON,
    Type::JSONB,
];

/// Whether a parameter of type `ty` can be bound.
pub(crate) fn param_type_supported(ty: &Type) -> bool {
    PARAM_TYPES.contains(ty)
}

/// One bound parameter: a JSON value (absent = NULL) encoded as the type the statement
/// asks for.
#[derive(Debug)]
pub(crate) struct PgParam<'a>(pub(crate) Option<&'a Json>);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for PgParam<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        let Some(value) = self.0.filter(|v| !v.is_null()) else {
            return Ok(IsNull::Yes);
        };
        let wrong = || -> BoxError { format!("{value} is not a value of type {ty}").into() };
        match *ty {
            Type::BOOL => value.as_bool().ok_or_else(wrong)?.to_sql(ty, out),
            Type::INT2 => i16::try_from(value.as_i64().ok_or_else(wrong)?)?.to_sql(ty, out),
            Type::INT4 => i32::try_from(value.as_i64().ok_or_else(wrong)?)?.to_sql(ty, out),
            Type::INT8 => value.as_i64().ok_or_else(wrong)?.to_sql(ty, out),
            #[allow(clippy::cast_possible_truncation)]
            Type::FLOAT4 => (value.as_f64().ok_or_else(wrong)? as f32).to_sql(ty, out),
            Type::FLOAT8 => value.as_f64().ok_or_else(wrong)?.to_sql(ty, out),
            Type::JSON => {
                out.extend_from_slice(value.to_string().as_bytes());
                Ok(IsNull::No)
            }
            Type::JSONB => {
                out.extend_from_slice(&[1]);
                out.extend_from_slice(value.to_string().as_bytes());
                Ok(IsNull::No)
            }
            _ => value.as_str().ok_or_else(wrong)?.to_sql(&Type::TEXT, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        param_type_supported(ty)
    }

    to_sql_checked!();
}

/// `sql` with each `:name` / `@name` replaced by `$n` (the same name, the same number),
/// and the names in order of their number (with their prefix). Literals (`'…'`, `E'…'`,
/// `$tag$…$tag$`), quoted names, comments and `::` casts are left alone.
///
/// # Errors
/// An unterminated literal, quoted name or comment, or a `?` / `$1` placeholder.
pub(crate) fn number_params(sql: &str) -> Result<(String, Vec<String>), String> {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut names: Vec<String> = Vec::new();
    let mut i = 0;
    let mut copied = 0;
    let ident_start = |c: u8| c.is_ascii_alphabetic() || c == b'_';
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' => {
                // `E'…'` takes backslash escapes.
                let escapes = i > 0 && (b[i - 1] == b'E' || b[i - 1] == b'e');
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err("an unterminated string literal".into()),
                        Some(b'\\') if escapes => i += 2,
                        Some(b'\'') if b.get(i + 1) == Some(&b'\'') => i += 2,
                        Some(b'\'') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            b'"' => {
                let end = sql[i + 1..]
                    .find('"')
                    .ok_or("an unterminated quoted name")?;
                i += end + 2;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i = sql[i..].find('\n').map_or(b.len(), |n| i + n + 1);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                loop {
                    if i + 1 >= b.len() {
                        return Err("an unterminated comment".into());
                    }
                    if b[i] == b'/' && b[i + 1] == b'*' {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b[i + 1] == b'/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'$' => {
                // `$tag$…$tag$` (tag empty or an identifier), or a positional `$1`.
                let tag_end = sql[i + 1..]
                    .bytes()
                    .position(|c| !ident(c))
                    .map(|n| i + 1 + n);
                match tag_end {
                    Some(end) if b[end] == b'$' && (end == i + 1 || ident_start(b[i + 1])) => {
                        let tag = &sql[i..=end];
                        let close = sql[end + 1..]
                            .find(tag)
                            .ok_or("an unterminated dollar-quoted literal")?;
                        i = end + 1 + close + tag.len();
                    }
                    _ if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                        return Err("use named parameters (`:name`, `@name`), not `$1`".into());
                    }
                    _ => i += 1,
                }
            }
            b'?' => return Err("use named parameters (`:name`, `@name`), not `?`".into()),
            b':' if b.get(i + 1) == Some(&b':') => i += 2,
            b':' | b'@'
                if b.get(i + 1).copied().is_some_and(ident_start)
                    && !(i > 0 && ident(b[i - 1]) && c == b'@') =>
            {
                let end = sql[i + 1..]
                    .bytes()
                    .position(|c| !ident(c))
                    .map_or(b.len(), |n| i + 1 + n);
                let name = &sql[i..end];
                let number = match names.iter().position(|n| n == name) {
                    Some(k) => k + 1,
                    None => {
                        names.push(name.to_owned());
                        names.len()
                    }
                };
                out.push_str(&sql[copied..i]);
                out.push_str(&format!("${number}"));
                copied = end;
                i = end;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Ok((out, names))
}

/// The statement a PostgreSQL source runs: its SQL (numbered) as a subquery whose rows
/// come back as JSON text. The source's trailing `;` are dropped.
pub(crate) fn json_rows_sql(numbered: &str) -> String {
    let body = numbered.trim_end().trim_end_matches(';').trim_end();
    format!("SELECT row_to_json(ui_row)::text FROM (\n{body}\n) AS ui_row")
}

/// Whether a PostgreSQL source's SQL starts as a query (`SELECT`, `WITH`, `VALUES`,
/// `TABLE`, or a parenthesis), after comments and blanks.
pub(crate) fn looks_like_query(sql: &str) -> bool {
    let mut rest = sql.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.find('\n').map_or("", |n| &r[n + 1..]).trim_start();
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |n| &r[n + 2..]).trim_start();
        } else {
            break;
        }
    }
    if rest.starts_with('(') {
        return true;
    }
    let word: String = rest
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(word.as_str(), "select" | "with" | "values" | "table")
}

// ---------------------------------------------------------------------------------------
// LISTEN / NOTIFY

/// What a notification on a source's channel records: the source, and how to make its
/// audience when the payload names none.
#[derive(Debug, Clone)]
pub(crate) struct Listened {
    pub(crate) channel: String,
    pub(crate) source: String,
    /// The source's audience when it names no placeholder (`org:acme`).
    pub(crate) fixed_audience: Option<ui_sync::Audience>,
}

/// What a payload asks to record: `None` when it cannot be recorded (why, as text).
pub(crate) fn draft_of(listened: &Listened, payload: &str) -> Result<ui_sync::ChangeDraft, String> {
    let payload = payload.trim();
    let (audience, key) = if payload.starts_with('{') {
        let object: Map<String, Json> = serde_json::from_str(payload)
            .map_err(|e| format!("the payload is not a JSON object: {e}"))?;
        for field in object.keys() {
            if field != "audience" && field != "key" {
                return Err(format!("the payload has an unknown field `{field}`"));
            }
        }
        let text = |field: &str| -> Result<Option<String>, String> {
            match object.get(field) {
                None | Some(Json::Null) => Ok(None),
                Some(Json::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("the payload's `{field}` is not a string")),
            }
        };
        let audience = match text("audience")? {
            Some(a) => Some(
                ui_sync::parse_audience(&a)
                    .ok_or_else(|| format!("the payload's audience `{a}` is not `kind:id`"))?,
            ),
            None => None,
        };
        (audience, text("key")?)
    } else {
        (None, (!payload.is_empty()).then(|| payload.to_owned()))
    };
    let audience = audience
        .or_else(|| listened.fixed_audience.clone())
        .ok_or_else(|| {
            "the source's audience names a placeholder: send `{\"audience\": \"project:…\"}`"
                .to_owned()
        })?;
    Ok(ui_sync::ChangeDraft {
        source: listened.source.clone(),
        audience: Some(audience),
        key,
        rs: None,
    })
}

/// Listens on the channels of one PostgreSQL connection and records a change event for
/// each notification, until `stop` fires or the change feed shuts down. A lost connection
/// is reconnected with backoff (100 ms doubling to 30 s); after each reconnection every
/// listened source is recorded as changed as a whole (notifications sent meanwhile are
/// lost). Of several instances on one database, one records a set of channels (it holds
/// a session advisory lock on them); the others stand by, trying every 2 s, and take over
/// (recording every source as changed) when its connection ends: each notification
/// becomes one change event, not one per instance.
pub(crate) fn spawn_listener(
    spec: &ConnectionSpec,
    listened: Vec<Listened>,
    sync: ui_sync::SyncService,
    stop: CancellationToken,
) {
    let Target::Postgres(config) = &spec.target else {
        return;
    };
    let (config, timeout, name) = ((**config).clone(), spec.connect_timeout, spec.name.clone());
    let mut by_channel: BTreeMap<String, Vec<Listened>> = BTreeMap::new();
    for l in listened {
        by_channel.entry(l.channel.clone()).or_default().push(l);
    }
    tokio::spawn(async move {
        let mut backoff = LISTEN_BACKOFF.0;
        let mut first = true;
        loop {
            let run = listen_once(&config, timeout, &by_channel, &sync, first, &name);
            let outcome = tokio::select! {
                outcome = run => outcome,
                () = stop.cancelled() => return,
            };
            match outcome {
                Ok(Stop::Closed) => return,
                Ok(Stop::Lost) => {
                    backoff = LISTEN_BACKOFF.0;
                    tracing::warn!(connection = %name, "the LISTEN connection was lost; reconnecting");
                }
                Err(e) => {
                    tracing::warn!(connection = %name, error = %e, retry_ms = backoff.as_millis() as u64, "LISTEN failed");
                }
            }
            first = false;
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(LISTEN_BACKOFF.1);
        }
    });
}

enum Stop {
    /// The change feed shut down.
    Closed,
    /// The connection ended.
    Lost,
}

/// The text whose hash names the lock of one listener: each channel with the sources it
/// records, sorted, so that instances lock the same text only for the same work (a
/// source added to a channel during a rolling deploy is its own listener until all run it).
fn listen_lock_text(by_channel: &BTreeMap<String, Vec<Listened>>) -> String {
    let mut text = String::new();
    for (channel, listened) in by_channel {
        let mut sources: Vec<&str> = listened.iter().map(|l| l.source.as_str()).collect();
        sources.sort_unstable();
        text.push_str(&format!(
            "{}:{channel}={};",
            channel.len(),
            sources.join(",")
        ));
    }
    text
}

async fn listen_once(
    config: &PgConnect,
    timeout: Duration,
    by_channel: &BTreeMap<String, Vec<Listened>>,
    sync: &ui_sync::SyncService,
    mut first: bool,
    name: &str,
) -> Result<Stop, String> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(LISTEN_QUEUE);
    let client = pg_connect(config, timeout, Some(tx)).await?;
    // Named after this process (`pg_stat_activity` says which instance listens), and with
    // server-side keepalives: a holder whose host vanished loses its session, and with it
    // the lock, within about a minute rather than the kernel's two hours.
    let session = format!(
        "SET application_name = 'uiblocks-listen pid:{}'; SET tcp_keepalives_idle = 30; \
         SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3;",
        std::process::id()
    );
    tokio::time::timeout(timeout, client.batch_execute(&session))
        .await
        .map_err(|_| "the LISTEN session did not answer in time".to_owned())?
        .map_err(|e| pg_error(&e))?;
    let lock = listen_lock_text(by_channel);
    let mut standing_by = false;
    loop {
        let held: bool = tokio::time::timeout(timeout, client.query_one(LISTEN_LOCK_SQL, &[&lock]))
            .await
            .map_err(|_| "the LISTEN lock did not answer in time".to_owned())?
            .map_err(|e| pg_error(&e))?
            .try_get(0)
            .map_err(|e| pg_error(&e))?;
        if held {
            if standing_by {
                tracing::info!(connection = %name, "taking over the notifications");
            }
            break;
        }
        if !standing_by {
            tracing::info!(connection = %name, "another instance records these notifications; standing by");
            standing_by = true;
            // Whatever was sent until this one takes over is lost to it.
            first = false;
        }
        // On the same session: no new connection per try.
        tokio::time::sleep(LISTEN_STANDBY_RETRY).await;
    }
    let listen: String = by_channel
        .keys()
        .map(|c| format!("LISTEN \"{}\";", c.replace('"', "\"\"")))
        .collect();
    tokio::time::timeout(timeout, client.batch_execute(&listen))
        .await
        .map_err(|_| "LISTEN did not answer in time".to_owned())?
        .map_err(|e| pg_error(&e))?;
    tracing::info!(
        channels = by_channel.len(),
        "listening for PostgreSQL notifications"
    );
    if !first {
        // Notifications sent while the connection was down are lost: every listened source
        // changed, as far as pages know.
        for l in by_channel.values().flatten() {
            if let Some(audience) = &l.fixed_audience {
                let draft = ui_sync::ChangeDraft {
                    source: l.source.clone(),
                    audience: Some(audience.clone()),
                    key: None,
                    rs: None,
                };
                if record(sync, draft).is_err() {
                    return Ok(Stop::Closed);
                }
            }
        }
    }
    while let Some(n) = rx.recv().await {
        for l in by_channel.get(n.channel()).into_iter().flatten() {
            match draft_of(l, n.payload()) {
                Ok(draft) => {
                    if record(sync, draft).is_err() {
                        return Ok(Stop::Closed);
                    }
                }
                Err(why) => {
                    tracing::warn!(channel = %l.channel, source = %l.source, %why, "a notification was not recorded");
                }
            }
        }
    }
    drop(client);
    Ok(Stop::Lost)
}

/// Records `draft`; `Err` only when the feed has shut down (an invalid draft is logged).
fn record(sync: &ui_sync::SyncService, draft: ui_sync::ChangeDraft) -> Result<(), ()> {
    match sync.record(draft) {
        Ok(()) => Ok(()),
        Err(ui_sync::SyncError::Closed) => Err(()),
        Err(e) => {
            tracing::warn!(error = %e, "a notification's change event was refused");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    #[test]
    fn the_listen_lock_names_channels_with_their_sources() {
        let listened = |channel: &str, source: &str| Listened {
            channel: channel.into(),
            source: source.into(),
            fixed_audience: None,
        };
        let text = |all: Vec<Listened>| {
            let mut by_channel: BTreeMap<String, Vec<Listened>> = BTreeMap::new();
            for l in all {
                by_channel.entry(l.channel.clone()).or_default().push(l);
            }
            listen_lock_text(&by_channel)
        };
        let one = text(vec![listened("runs", "ci.runs")]);
        // Another source on the same channel is other work: another lock.
        assert_ne!(one, text(vec![listened("runs", "ci.other")]));
        assert_ne!(
            one,
            text(vec![
                listened("runs", "ci.runs"),
                listened("runs", "ci.jobs")
            ])
        );
        // The same work in another order is the same lock.
        assert_eq!(
            text(vec![
                listened("a", "x"),
                listened("b", "y"),
                listened("a", "z")
            ]),
            text(vec![
                listened("a", "z"),
                listened("b", "y"),
                listened("a", "x")
            ])
        );
        assert_eq!(one, "4:runs=ci.runs;");
    }

    #[test]
    fn named_parameters_become_numbers_outside_literals() {
        let (sql, names) = number_params(
            "SELECT :a::int, ':b', E'\\':c', \"@d\", $$ :e $$, $t$ @f $t$ -- :g\n\
             /* :h /* :i */ */ FROM t WHERE x = @user AND y = :a AND z @> '{}' AND w = :b",
        )
        .unwrap();
        assert_eq!(
            sql,
            "SELECT $1::int, ':b', E'\\':c', \"@d\", $$ :e $$, $t$ @f $t$ -- :g\n\
             /* :h /* :i */ */ FROM t WHERE x = $2 AND y = $1 AND z @> '{}' AND w = $3"
        );
        assert_eq!(names, [":a", "@user", ":b"]);
        assert!(number_params("SELECT ?").is_err());
        assert!(number_params("SELECT $1").is_err());
        assert!(number_params("SELECT 'x").is_err());
        assert!(number_params("SELECT /* x").is_err());
        assert_eq!(
            json_rows_sql("SELECT 1 AS x;\n"),
            "SELECT row_to_json(ui_row)::text FROM (\nSELECT 1 AS x\n) AS ui_row"
        );
        assert!(looks_like_query(
            "-- c\n/* d */ WITH x AS (SELECT 1) SELECT * FROM x"
        ));
        assert!(!looks_like_query("DELETE FROM t"));
    }

    #[test]
    fn urls_are_checked_and_errors_name_the_key() {
        let decl = |url: &str| ConnectionDecl {
            url: Some(url.to_owned()),
            url_env: None,
            pool: None,
            connect_timeout_ms: None,
        };
        let e = ConnectionSpec::check("app", decl("mysql://x")).unwrap_err();
        assert!(e.starts_with("connections.app.url:"), "{e}");
        let e =
            ConnectionSpec::check("app", decl("postgres://u:secret@h:notaport/db")).unwrap_err();
        assert!(
            e.starts_with("connections.app.url:") && !e.contains("secret"),
            "{e}"
        );
        let ok = ConnectionSpec::check("app", decl("postgres://u@127.0.0.1:5/db")).unwrap();
        assert!(ok.is_postgres());
        assert_eq!(ok.pool, DEFAULT_POOL);
        let mut big = decl("sqlite:///tmp/x.db");
        big.pool = Some(MAX_POOL + 1);
        let e = ConnectionSpec::check("app", big).unwrap_err();
        assert!(e.starts_with("connections.app.pool:"), "{e}");
        let mut both = decl("sqlite:///tmp/x.db");
        both.url_env = Some("X".into());
        assert!(ConnectionSpec::check("app", both).is_err());
    }

    #[test]
    fn payloads_become_drafts() {
        let fixed = Listened {
            channel: "c".into(),
            source: "s".into(),
            fixed_audience: ui_sync::parse_audience("org:acme"),
        };
        let d = draft_of(&fixed, "").unwrap();
        assert_eq!(
            (d.key, d.audience.unwrap().to_string()),
            (None, "org:acme".to_owned())
        );
        assert_eq!(
            draft_of(&fixed, "branch:main").unwrap().key.as_deref(),
            Some("branch:main")
        );
        let open = Listened {
            fixed_audience: None,
            ..fixed
        };
        assert!(draft_of(&open, "branch:main").is_err());
        let d = draft_of(
            &open,
            r#"{"audience": "project:web", "key": "branch:main"}"#,
        )
        .unwrap();
        assert_eq!(d.audience.unwrap().to_string(), "project:web");
        assert_eq!(d.key.as_deref(), Some("branch:main"));
        assert!(draft_of(&open, r#"{"audience": "project:web", "x": 1}"#).is_err());
        assert!(draft_of(&open, r#"{"audience": "nonsense"}"#).is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sqlite_connection_is_read_only_and_interruptible() {
        let dir = std::env::temp_dir().join(format!(
            "ui-server-conn-sqlite-{}-{}",
            std::process::id(),
            crate::store::new_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("side.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
        let pool = crate::db::ReadPool::open(path.clone(), 2).await.unwrap();
        let read = pool
            .read(None, |c| {
                Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?)
            })
            .await;
        assert_eq!(read, Ok(1));
        let write = pool
            .read(None, |c| Ok(c.execute("INSERT INTO t VALUES (2)", [])?))
            .await
            .unwrap_err();
        assert!(write.0.contains("readonly"), "{write}");
        let cancel = CancellationToken::new();
        let fire = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            fire.cancel();
        });
        let started = std::time::Instant::now();
        let spin = pool
            .read(Some(cancel), |c| {
                Ok(c.query_row(
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
                     WHERE x < 500000000) SELECT max(x) FROM c",
                    [],
                    |r| r.get::<_, i64>(0),
                )?)
            })
            .await
            .unwrap_err();
        assert!(spin.0.contains("interrupt"), "{spin}");
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(writer);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// `UI_SERVER_PG` (see `tests/pg_sources.rs`), or `None` when the test is skipped.
    fn pg_conninfo() -> Option<String> {
        let found = std::env::var("UI_SERVER_PG")
            .ok()
            .filter(|s| !s.trim().is_empty());
        if found.is_none() {
            assert!(
                std::env::var_os("UI_SERVER_PG_REQUIRED").is_none(),
                "UI_SERVER_PG_REQUIRED is set but UI_SERVER_PG is not"
            );
            eprintln!("skipped: UI_SERVER_PG not set");
        }
        found
    }

    /// The host's cancellation alone (with a `statement_timeout` far away) stops the
    /// backend's statement: the cancel request, not the database's own timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_postgres_read_stops_its_backend() {
        let Some(conninfo) = pg_conninfo() else {
            return;
        };
        let config = PgConnect::parse(&conninfo).unwrap();
        let spec = ConnectionSpec {
            name: "app".into(),
            target: Target::Postgres(Box::new(config.clone())),
            pool: 1,
            connect_timeout: Duration::from_secs(3),
        };
        let pool = PgPool::open(&spec).await.unwrap();
        let observer = pg_connect(&config, Duration::from_secs(3), None)
            .await
            .unwrap();
        let tag = format!(
            "ui_cancel_{}_{}",
            std::process::id(),
            crate::store::new_id()
        );
        let sql = json_rows_sql(&format!(
            "SELECT count(*) AS x, '{tag}' AS tag FROM (SELECT pg_sleep(60)) AS s"
        ));
        let running = |state: &'static str| {
            let (observer, like) = (&observer, format!("%{tag}%"));
            async move {
                let row = observer
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 \
                         AND pid <> pg_backend_pid() AND state LIKE $2",
                        &[&like, &state],
                    )
                    .await
                    .unwrap();
                row.get::<_, i64>(0)
            }
        };
        let cancel = CancellationToken::new();
        let fire = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            fire.cancel();
        });
        let started = std::time::Instant::now();
        let e = pool
            .read_json(&sql, &[], Duration::from_secs(120), 10, &cancel)
            .await
            .unwrap_err();
        assert_eq!(e, PgReadError::Cancelled);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        let cancelled = std::time::Instant::now();
        while running("%").await > 0 {
            assert!(
                cancelled.elapsed() < Duration::from_secs(1),
                "the statement still runs {:?} after the cancellation",
                cancelled.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(running("active").await, 0);
        // The pool opens a fresh client for the next read.
        let rows = pool
            .read_json(
                &json_rows_sql("SELECT $1::text AS v"),
                &[PgParam(Some(&Json::from("ok")))],
                Duration::from_secs(5),
                10,
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(rows, vec![serde_json::json!({"v": "ok"})]);
        // Without the host's cancellation the database's own statement_timeout stops it.
        let started = std::time::Instant::now();
        let e = pool
            .read_json(
                &sql,
                &[],
                Duration::from_millis(200),
                10,
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert_eq!(e, PgReadError::TimedOut);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}
