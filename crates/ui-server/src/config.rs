//! [`ServerConfig`]: where the database and the sources are, whether the demo runs, the
//! address, who may sign in, every limit group the server checks ([`ChatLimits`] and the spec's groups), and the
//! bounds of connections and of shutdown.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use ui_core::{HostLimits, ReplyLimits, SyncLimits, UiHostLimits, UiLimits};

use crate::limits::{
    self, MAX_CHAT_ITEMS, MAX_CHAT_PAGE_BYTES, MAX_CHAT_PAGE_ITEMS, MAX_ITEM_TEXT_BYTES,
};
use crate::metrics::MetricsConfig;
use crate::signin::AuthConfig;

/// How large a chat may grow and how much of it one read answers. Build it with
/// [`ChatLimits::default`] and set the fields; every field must be at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChatLimits {
    /// Longest text of one item, in bytes of UTF-8 ([`MAX_ITEM_TEXT_BYTES`]); a message,
    /// delta or finish over it is refused with `payload-too-large`.
    pub item_text_bytes: usize,
    /// Items one chat may hold ([`MAX_CHAT_ITEMS`]); one more message, reply or choice is
    /// refused with `chat-full`.
    pub chat_items: usize,
    /// Items one page of `GET /api/chats/{chat}` holds at most ([`MAX_CHAT_PAGE_ITEMS`]);
    /// a larger `limit` is `bad-request`.
    pub page_items: usize,
    /// Bytes of item text, blocks, frozen readings and answers one page holds at most
    /// ([`MAX_CHAT_PAGE_BYTES`]); a page always holds at least its newest item.
    pub page_bytes: usize,
}

impl Default for ChatLimits {
    fn default() -> Self {
        ChatLimits {
            item_text_bytes: MAX_ITEM_TEXT_BYTES,
            chat_items: MAX_CHAT_ITEMS,
            page_items: MAX_CHAT_PAGE_ITEMS,
            page_bytes: MAX_CHAT_PAGE_BYTES,
        }
    }
}

/// Where the sources come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SourcesConfig {
    /// No sources: blocks with queries compile with `unknown_query`.
    #[default]
    None,
    /// A `sources.toml` file.
    File(PathBuf),
    /// TOML text (tests, embedding).
    Inline(String),
}

/// How to start a server. Build it with [`ServerConfig::new`] and set the fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The SQLite file holding chats, items, blocks, frozen readings, answers, the
    /// sources' tables and the change log (created when missing). Not used when
    /// [`ServerConfig::postgres`] is set.
    pub database: PathBuf,
    /// The server's database on PostgreSQL instead of the SQLite file
    /// (`database.url = "postgres://…"`): chats, items, blocks, frozen readings, answers
    /// and the change log live there, so several instances on one database behave as one
    /// service. Default `None`.
    pub postgres: Option<PostgresConfig>,
    /// The sources.
    pub sources: SourcesConfig,
    /// Serve the demo: cookie sessions for `alice` (project `web`) and `bob` (project
    /// `ops`) through `POST /api/login`, and the demo link resolver.
    pub demo: bool,
    /// The address [`crate::serve`] binds (port 0 picks a free one). Default
    /// `127.0.0.1:8080`.
    pub bind: SocketAddr,
    /// Origins (`scheme://host:port`) besides the request's own host that may send
    /// requests; any other `Origin`, and every `Sec-Fetch-Site: cross-site` request, gets
    /// `403 forbidden`.
    pub origins: Vec<String>,
    /// The change feed's limits (`sync.md` §9.1); tests shorten ticks and windows. Its
    /// `writeTimeout` (30 s) is also the write timeout of every accepted socket: a write
    /// that makes no progress for that long closes the connection (`sync.md` §9.2).
    pub sync_limits: SyncLimits,
    /// The host's serving limits (`host.md` §16): payload shapes, read slots (also the
    /// size of the source reads' connection pool), the read timeout, result sizes.
    pub host_limits: HostLimits,
    /// `UI_HOST_LIMITS`: queries and links per block, the refresh window.
    pub ui_host_limits: UiHostLimits,
    /// `UI_LIMITS`: the work budget of every compile, evaluation and value copy.
    pub ui_limits: UiLimits,
    /// `UI_REPLY_LIMITS`: what one reply may hold.
    pub reply_limits: ReplyLimits,
    /// How large a chat may grow and how much of it one read answers.
    pub chat_limits: ChatLimits,
    /// Longest wait for a request's head once its first byte arrived; the connection is
    /// closed after it. Default 10 s.
    pub header_read_timeout: Duration,
    /// Longest time to receive a request's whole body, from its head; the request is
    /// answered `408 request-timeout` and the connection closed after it. Default 30 s.
    pub body_read_timeout: Duration,
    /// Longest time a kept-alive connection may wait for its next request; it is closed
    /// after it. Default 60 s.
    pub idle_timeout: Duration,
    /// Open connections at most (event streams included, so keep it above
    /// `processStreams`, and below the process's file-descriptor limit). A connection
    /// over the cap is answered `503 unavailable` with `Retry-After: 1` at once and
    /// closed. Default 11,000.
    pub max_connections: usize,
    /// Over how long a graceful shutdown spreads the event streams' `bye shutdown`
    /// (`sync.md` §4.2: min(10 s, the grace period)). Default 10 s.
    pub shutdown_spread: Duration,
    /// Longest graceful shutdown: after it the connections still open are dropped, and
    /// the change feed and the database are closed. Default 15 s.
    pub drain_timeout: Duration,
    /// The server is reached over HTTPS (behind a TLS proxy): cookies are `Secure`.
    /// Default `false`.
    pub secure_cookies: bool,
    /// Who may sign in: see [`AuthConfig`]. Default [`AuthConfig::Auto`] (the demo's
    /// sessions with `demo`, nobody otherwise).
    pub auth: AuthConfig,
    /// Whether the server records metrics and who may read `GET /metrics`: see
    /// [`MetricsConfig`]. Default: on, readable by anyone who reaches the port.
    pub metrics: MetricsConfig,
}

/// The server's database on PostgreSQL (see [`ServerConfig::postgres`]). Build it with
/// [`PostgresConfig::new`] and set the fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PostgresConfig {
    /// The connection string: a `postgres://user:password@host:port/dbname` URL (or a
    /// libpq `key=value` string). Secret: it may hold a password.
    pub url: Secret,
    /// Connections of the store's pool at most (the change log opens five more of its
    /// own). Default [`limits::DB_PG_POOL`].
    pub pool: usize,
    /// Longest database call: enforced by the client and, as `statement_timeout`,
    /// `lock_timeout` and `idle_in_transaction_session_timeout`, inside the database.
    /// Default [`limits::DB_PG_TIMEOUT`].
    pub timeout: Duration,
}

impl PostgresConfig {
    /// The database at `url` with the default pool size and timeout.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: Secret::new(url),
            pool: limits::DB_PG_POOL,
            timeout: limits::DB_PG_TIMEOUT,
        }
    }
}

/// A secret setting (a JWT key, a shared secret, a token): compared in constant time, and
/// never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret's text.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` equals the secret, in time that depends only on the lengths.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let secret = self.0.as_bytes();
        let mut diff = u8::from(secret.len() != candidate.len());
        for (i, s) in secret.iter().enumerate() {
            diff |= s ^ candidate.get(i).copied().unwrap_or(!s);
        }
        diff == 0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl ServerConfig {
    /// What the log and the start-up line say of the database: the SQLite file's path, or
    /// the PostgreSQL URL without its password.
    pub fn database_label(&self) -> String {
        match &self.postgres {
            Some(pg) => crate::pg::redacted(pg.url.expose()),
            None => format!("sqlite://{}", self.database.display()),
        }
    }

    /// A configuration with the database at `database`, no sources, no demo, port 8080,
    /// and the default bounds of [`crate::limits`].
    pub fn new(database: impl Into<PathBuf>) -> Self {
        ServerConfig {
            database: database.into(),
            postgres: None,
            sources: SourcesConfig::None,
            demo: false,
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            origins: Vec::new(),
            sync_limits: SyncLimits::DEFAULT,
            host_limits: HostLimits::DEFAULT,
            ui_host_limits: UiHostLimits::DEFAULT,
            ui_limits: UiLimits::DEFAULT,
            reply_limits: ReplyLimits::DEFAULT,
            chat_limits: ChatLimits::default(),
            header_read_timeout: limits::HEADER_READ_TIMEOUT,
            body_read_timeout: limits::BODY_READ_TIMEOUT,
            idle_timeout: limits::IDLE_TIMEOUT,
            max_connections: limits::MAX_CONNECTIONS,
            shutdown_spread: limits::SHUTDOWN_SPREAD,
            drain_timeout: limits::DRAIN_TIMEOUT,
            secure_cookies: false,
            auth: AuthConfig::Auto,
            metrics: MetricsConfig::default(),
        }
    }

    /// Sets the change feed's write timeout (`[connections] write_timeout`,
    /// `--write-timeout`), which the feed reads from [`ServerConfig::sync_limits`], after
    /// checking its range.
    ///
    /// # Errors
    /// [`OutOfRange`] when `timeout` is outside 10 ms to 24 h.
    pub fn set_write_timeout(&mut self, timeout: Duration) -> Result<(), OutOfRange> {
        ConnSetting::WriteTimeout.check(timeout)?;
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.sync_limits = self
            .sync_limits
            .with("writeTimeout", ms)
            .map_err(|_| OutOfRange {
                setting: ConnSetting::WriteTimeout,
                value: format!("{ms}ms"),
            })?;
        Ok(())
    }

    /// Checks the bounds of connections and of shutdown against their allowed ranges
    /// ([`ConnSetting::range`]); [`crate::AppBuilder::open`] refuses a configuration that
    /// fails it.
    ///
    /// # Errors
    /// [`OutOfRange`] naming the first setting out of its range.
    pub fn check_connections(&self) -> Result<(), OutOfRange> {
        use ConnSetting as S;
        if !(1..=limits::MAX_MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(OutOfRange {
                setting: S::MaxConnections,
                value: self.max_connections.to_string(),
            });
        }
        let write_timeout = Duration::from_millis(self.sync_limits.write_timeout());
        for (setting, value) in [
            (S::HeaderReadTimeout, self.header_read_timeout),
            (S::BodyReadTimeout, self.body_read_timeout),
            (S::IdleTimeout, self.idle_timeout),
            (S::WriteTimeout, write_timeout),
            (S::ShutdownSpread, self.shutdown_spread),
            (S::DrainTimeout, self.drain_timeout),
        ] {
            setting.check(value)?;
        }
        Ok(())
    }
}

/// A bound of connections or of shutdown in [`ServerConfig`], with its allowed range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnSetting {
    /// [`ServerConfig::max_connections`]: 1 to [`limits::MAX_MAX_CONNECTIONS`].
    MaxConnections,
    /// [`ServerConfig::header_read_timeout`]: [`limits::MIN_CONN_TIMEOUT`] to
    /// [`limits::MAX_CONN_DURATION`].
    HeaderReadTimeout,
    /// [`ServerConfig::body_read_timeout`]: as the header-read timeout.
    BodyReadTimeout,
    /// [`ServerConfig::idle_timeout`]: as the header-read timeout.
    IdleTimeout,
    /// The sync limits' `writeTimeout`: as the header-read timeout.
    WriteTimeout,
    /// [`ServerConfig::shutdown_spread`]: 0 to [`limits::MAX_CONN_DURATION`].
    ShutdownSpread,
    /// [`ServerConfig::drain_timeout`]: 0 to [`limits::MAX_CONN_DURATION`].
    DrainTimeout,
}

impl ConnSetting {
    /// The setting's key in the configuration file (`connections.idle_timeout`).
    pub fn key(self) -> &'static str {
        match self {
            ConnSetting::MaxConnections => "connections.max",
            ConnSetting::HeaderReadTimeout => "connections.header_timeout",
            ConnSetting::BodyReadTimeout => "connections.body_timeout",
            ConnSetting::IdleTimeout => "connections.idle_timeout",
            ConnSetting::WriteTimeout => "connections.write_timeout",
            ConnSetting::ShutdownSpread => "connections.shutdown_spread",
            ConnSetting::DrainTimeout => "connections.drain_timeout",
        }
    }

    /// The field of [`ServerConfig`] that holds it (`idle_timeout`; the write timeout is
    /// `sync_limits.writeTimeout`).
    pub fn field(self) -> &'static str {
        match self {
            ConnSetting::MaxConnections => "max_connections",
            ConnSetting::HeaderReadTimeout => "header_read_timeout",
            ConnSetting::BodyReadTimeout => "body_read_timeout",
            ConnSetting::IdleTimeout => "idle_timeout",
            ConnSetting::WriteTimeout => "sync_limits.writeTimeout",
            ConnSetting::ShutdownSpread => "shutdown_spread",
            ConnSetting::DrainTimeout => "drain_timeout",
        }
    }

    /// The allowed range, as the error and the documentation say it.
    pub fn range(self) -> &'static str {
        match self {
            ConnSetting::MaxConnections => "from 1 to 1000000",
            ConnSetting::HeaderReadTimeout
            | ConnSetting::BodyReadTimeout
            | ConnSetting::IdleTimeout
            | ConnSetting::WriteTimeout => "from 10ms to 24h",
            ConnSetting::ShutdownSpread | ConnSetting::DrainTimeout => "from 0 to 24h",
        }
    }

    /// Whether `value` is within the range of this (duration) setting.
    fn check(self, value: Duration) -> Result<(), OutOfRange> {
        let min = match self {
            ConnSetting::ShutdownSpread | ConnSetting::DrainTimeout => Duration::ZERO,
            _ => limits::MIN_CONN_TIMEOUT,
        };
        if (min..=limits::MAX_CONN_DURATION).contains(&value) {
            return Ok(());
        }
        Err(OutOfRange {
            setting: self,
            value: format!("{}ms", value.as_millis()),
        })
    }
}

/// A bound of connections or of shutdown out of its allowed range
/// ([`ServerConfig::check_connections`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` must be {}; got {value}", setting.field(), setting.range())]
pub struct OutOfRange {
    /// The setting.
    pub setting: ConnSetting,
    /// The value given (durations in ms).
    pub value: String,
}

impl OutOfRange {
    /// The message without the setting's name: `must be from 10ms to 24h; got 0ms`.
    pub fn message(&self) -> String {
        format!("must be {}; got {}", self.setting.range(), self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_bounds_are_in_range_and_each_bound_is_checked() {
        let base = ServerConfig::new("x.db");
        assert_eq!(base.check_connections(), Ok(()));
        let out = |change: fn(&mut ServerConfig)| {
            let mut c = base.clone();
            change(&mut c);
            c.check_connections().map_err(|e| e.setting)
        };
        assert_eq!(
            out(|c| c.max_connections = 0),
            Err(ConnSetting::MaxConnections)
        );
        assert_eq!(
            out(|c| c.header_read_timeout = Duration::from_millis(9)),
            Err(ConnSetting::HeaderReadTimeout)
        );
        assert_eq!(
            out(|c| c.body_read_timeout = Duration::ZERO),
            Err(ConnSetting::BodyReadTimeout)
        );
        assert_eq!(
            out(|c| c.idle_timeout = Duration::MAX),
            Err(ConnSetting::IdleTimeout)
        );
        assert_eq!(
            out(|c| c.sync_limits = c.sync_limits.with("writeTimeout", 1 << 50).unwrap()),
            Err(ConnSetting::WriteTimeout)
        );
        assert_eq!(
            out(|c| c.drain_timeout = limits::MAX_CONN_DURATION + Duration::from_millis(1)),
            Err(ConnSetting::DrainTimeout)
        );
        assert_eq!(out(|c| c.shutdown_spread = Duration::ZERO), Ok(()));
    }
}
