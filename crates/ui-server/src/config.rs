//! [`ServerConfig`]: where the database and the sources are, whether the demo runs, the
//! port, and the bounds of connections and of shutdown.

use std::path::PathBuf;
use std::time::Duration;

use ui_core::SyncLimits;

use crate::limits;

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
    /// sources' tables and the change log (created when missing).
    pub database: PathBuf,
    /// The sources.
    pub sources: SourcesConfig,
    /// Serve the demo: cookie sessions for `alice` (project `web`) and `bob` (project
    /// `ops`) through `POST /api/login`, and the demo link resolver.
    pub demo: bool,
    /// The port [`crate::serve`] binds on 127.0.0.1 (0 picks a free one).
    pub port: u16,
    /// Origins (`scheme://host:port`) besides the request's own host that may send
    /// requests; any other `Origin`, and every `Sec-Fetch-Site: cross-site` request, gets
    /// `403 forbidden`.
    pub origins: Vec<String>,
    /// The change feed's limits (`sync.md` §9.1); tests shorten ticks and windows. Its
    /// `writeTimeout` (30 s) is also the write timeout of every accepted socket: a write
    /// that makes no progress for that long closes the connection (`sync.md` §9.2).
    pub sync_limits: SyncLimits,
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
}

impl ServerConfig {
    /// A configuration with the database at `database`, no sources, no demo, port 8080,
    /// and the default bounds of [`crate::limits`].
    pub fn new(database: impl Into<PathBuf>) -> Self {
        ServerConfig {
            database: database.into(),
            sources: SourcesConfig::None,
            demo: false,
            port: 8080,
            origins: Vec::new(),
            sync_limits: SyncLimits::DEFAULT,
            header_read_timeout: limits::HEADER_READ_TIMEOUT,
            body_read_timeout: limits::BODY_READ_TIMEOUT,
            idle_timeout: limits::IDLE_TIMEOUT,
            max_connections: limits::MAX_CONNECTIONS,
            shutdown_spread: limits::SHUTDOWN_SPREAD,
            drain_timeout: limits::DRAIN_TIMEOUT,
            secure_cookies: false,
        }
    }
}
