//! [`ServerConfig`]: where the database and the sources are, whether the demo runs, and
//! the port.

use std::path::PathBuf;

use ui_core::SyncLimits;

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
    /// The change feed's limits (`sync.md` §9.1); tests shorten ticks and windows.
    pub sync_limits: SyncLimits,
}

impl ServerConfig {
    /// A configuration with the database at `database`, no sources, no demo, port 8080.
    pub fn new(database: impl Into<PathBuf>) -> Self {
        ServerConfig {
            database: database.into(),
            sources: SourcesConfig::None,
            demo: false,
            port: 8080,
            origins: Vec::new(),
            sync_limits: SyncLimits::DEFAULT,
        }
    }
}
