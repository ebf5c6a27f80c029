//! [`AppState`]: everything a request needs — the store, the host service, the change
//! feed, the authenticator and the per-session counters. Cheap to clone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{broadcast, watch};
use ui_core::SyncLimits;
use ui_host::{LinkResolver, TokioClock, UiQueries, UiStore};
use ui_sync::{
    Audience, ChangeDraft, Cursor, RateLimiter, SqliteStore, StreamSlots, SyncError, SyncService,
};

use crate::auth::{Authenticator, DemoAuth, NoAuth};
use crate::config::{ServerConfig, SourcesConfig};
use crate::db::Db;
use crate::error::ServerError;
use crate::limits::MAX_TRACKED_SESSIONS;
use crate::sources::{DemoLinks, SqlHost, TomlSources};
use crate::store::{SCHEMA, SqliteUiStore};

/// Stripes of the per-item lock that keeps a reply's deltas in order.
const REPLY_STRIPES: usize = 64;

struct Inner {
    store: SqliteUiStore,
    host: Arc<SqlHost>,
    sources: TomlSources,
    queries: Arc<UiQueries>,
    sync: SyncService,
    sync_limits: SyncLimits,
    auth: Arc<dyn Authenticator>,
    demo: Option<Arc<DemoAuth>>,
    origins: Vec<String>,
    streams: StreamSlots,
    polls: Mutex<HashMap<String, RateLimiter>>,
    signed_out: broadcast::Sender<String>,
    shutdown: watch::Sender<bool>,
    replies: Vec<tokio::sync::Mutex<()>>,
    started: tokio::time::Instant,
}

/// The state behind the router: build it with [`AppState::open`] (or
/// [`AppState::builder`] to plug in an authenticator or a link resolver), then mount
/// [`crate::router`].
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("store", &self.inner.store)
            .field("demo", &self.inner.demo.is_some())
            .finish_non_exhaustive()
    }
}

/// Builds an [`AppState`] with a host's own authenticator or link resolver.
pub struct AppBuilder {
    config: ServerConfig,
    auth: Option<Arc<dyn Authenticator>>,
    links: Option<Arc<dyn LinkResolver>>,
}

impl std::fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AppBuilder {
    /// Uses `auth` to find the principal of every request (instead of the demo's cookie
    /// sessions, or nobody).
    pub fn authenticator(mut self, auth: Arc<dyn Authenticator>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Resolves links with `links` (instead of the demo's resolver, or none).
    pub fn links(mut self, links: Arc<dyn LinkResolver>) -> Self {
        self.links = Some(links);
        self
    }

    /// Opens the database, loads and checks the sources, and starts the change feed (on
    /// the current tokio runtime).
    ///
    /// # Errors
    /// [`ServerError`] when the database, the sources or the feed cannot be set up.
    pub async fn open(self) -> Result<AppState, ServerError> {
        let config = self.config;
        let db = Db::open(&config.database, SCHEMA).await?;
        let mut sources = match &config.sources {
            SourcesConfig::None => TomlSources::empty(),
            SourcesConfig::File(path) => TomlSources::load(path)?,
            SourcesConfig::Inline(text) => TomlSources::parse(text)?,
        };
        sources.install(&db).await?;
        // The change log lives in the same file (its own tables, `ui_sync_*`).
        let log = SqliteStore::open(&config.database).await?;
        let sync = SyncService::start(Arc::new(log), config.sync_limits, Vec::new()).await?;
        let store = SqliteUiStore::new(db.clone(), Some(sync.clone()));
        let demo = config.demo.then(|| Arc::new(DemoAuth::new()));
        let auth: Arc<dyn Authenticator> = match (self.auth, &demo) {
            (Some(auth), _) => auth,
            (None, Some(demo)) => demo.clone(),
            (None, None) => Arc::new(NoAuth),
        };
        let links = self.links.or_else(|| {
            config
                .demo
                .then(|| Arc::new(DemoLinks) as Arc<dyn LinkResolver>)
        });
        let host = Arc::new(SqlHost::new(sources.registry(&db)?, links));
        let queries = UiQueries::new(
            host.clone(),
            Arc::new(store.clone()) as Arc<dyn UiStore>,
            Arc::new(TokioClock::new()),
        );
        // Readings of sources with a change feed follow the change log.
        queries.attach_changes(Arc::new(sync.clone()));
        let (signed_out, _) = broadcast::channel(64);
        let (shutdown, _) = watch::channel(false);
        Ok(AppState {
            inner: Arc::new(Inner {
                store,
                host,
                sources,
                queries,
                streams: StreamSlots::new(&config.sync_limits),
                sync,
                sync_limits: config.sync_limits,
                auth,
                demo,
                origins: config.origins,
                polls: Mutex::new(HashMap::new()),
                signed_out,
                shutdown,
                replies: (0..REPLY_STRIPES)
                    .map(|_| tokio::sync::Mutex::new(()))
                    .collect(),
                started: tokio::time::Instant::now(),
            }),
        })
    }
}

impl AppState {
    /// A builder for `config`.
    pub fn builder(config: ServerConfig) -> AppBuilder {
        AppBuilder {
            config,
            auth: None,
            links: None,
        }
    }

    /// Opens the state for `config` with the demo's authenticator and links when
    /// `config.demo` is set (and nobody signed in otherwise).
    ///
    /// # Errors
    /// As [`AppBuilder::open`].
    pub async fn open(config: ServerConfig) -> Result<AppState, ServerError> {
        Self::builder(config).open().await
    }

    /// The store of chats and items.
    pub fn store(&self) -> &SqliteUiStore {
        &self.inner.store
    }

    /// The host service (`ui.query`, `ui.link`, choices, freezing).
    pub fn queries(&self) -> &Arc<UiQueries> {
        &self.inner.queries
    }

    /// The host: sources and links.
    pub fn host(&self) -> &Arc<SqlHost> {
        &self.inner.host
    }

    /// The declared sources.
    pub fn sources(&self) -> &TomlSources {
        &self.inner.sources
    }

    /// The change feed.
    pub fn sync(&self) -> &SyncService {
        &self.inner.sync
    }

    /// The change feed's limits.
    pub fn sync_limits(&self) -> &SyncLimits {
        &self.inner.sync_limits
    }

    /// The authenticator.
    pub fn authenticator(&self) -> &Arc<dyn Authenticator> {
        &self.inner.auth
    }

    /// The demo's sessions, when the demo runs.
    pub fn demo(&self) -> Option<&Arc<DemoAuth>> {
        self.inner.demo.as_ref()
    }

    pub(crate) fn origins(&self) -> &[String] {
        &self.inner.origins
    }

    pub(crate) fn streams(&self) -> &StreamSlots {
        &self.inner.streams
    }

    /// Milliseconds since the state was opened, on tokio's clock (stream timers).
    pub(crate) fn now_ms(&self) -> u64 {
        self.inner.started.elapsed().as_millis() as u64
    }

    pub(crate) fn started(&self) -> tokio::time::Instant {
        self.inner.started
    }

    /// Takes one poll token of `session` (`sync.md` §4.1); the wait in ms when none is
    /// left.
    pub(crate) fn poll_token(&self, session: &str) -> Result<(), u64> {
        let now = self.now_ms();
        let mut polls = self
            .inner
            .polls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if polls.len() >= MAX_TRACKED_SESSIONS && !polls.contains_key(session) {
            // Bounded memory: start every bucket afresh (full) rather than grow.
            polls.clear();
        }
        polls
            .entry(session.to_owned())
            .or_insert_with(|| RateLimiter::new(&self.inner.sync_limits, now))
            .check(now)
    }

    /// Tells open event streams that the projects of `user_id` changed (call it after the
    /// change is committed): records an `audience-changed` event (source
    /// [`crate::MEMBERS_SOURCE`], audience `user:<id>`) and returns its cursor. Each open
    /// stream of the user, on reaching that event in log order, re-resolves the user's
    /// memberships with [`crate::Authenticator::refresh`] and applies them to every later
    /// row; a stream that lost an audience drops what it held and sends a `reset`
    /// (`sync.md` §4.2, §5.1). The event goes through the log, so streams on other
    /// processes sharing it follow too, within the usual delivery time (well under 1 s).
    ///
    /// # Errors
    /// What recording answers ([`SyncError`]).
    pub async fn membership_changed(&self, user_id: &str) -> Result<Cursor, SyncError> {
        self.sync()
            .record_and_wait(ChangeDraft {
                source: crate::auth::MEMBERS_SOURCE.to_owned(),
                audience: Some(Audience::user(user_id)),
                key: None,
                rs: None,
            })
            .await
    }

    /// Ends `session` everywhere: its open event streams send `bye signed-out` and close.
    pub fn end_session(&self, session: &str) {
        let _ = self.inner.signed_out.send(session.to_owned());
        self.inner
            .polls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session);
    }

    pub(crate) fn signed_out(&self) -> broadcast::Receiver<String> {
        self.inner.signed_out.subscribe()
    }

    /// Asks every open event stream to say `bye shutdown` and close (graceful shutdown).
    pub fn shut_down_streams(&self) {
        self.inner.shutdown.send_replace(true);
    }

    pub(crate) fn shutdown_watch(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.subscribe()
    }

    /// The lock that keeps the deltas of one reply in order.
    pub(crate) fn reply_lock(&self, chat_id: &str, item_id: &str) -> &tokio::sync::Mutex<()> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (chat_id, item_id).hash(&mut h);
        &self.inner.replies[(h.finish() as usize) % REPLY_STRIPES]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn poll_buckets_are_bounded() {
        let dir = std::env::temp_dir().join(format!(
            "ui-server-unit-polls-{}-{}",
            std::process::id(),
            crate::store::new_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let state = AppState::open(ServerConfig::new(dir.join("app.db")))
            .await
            .unwrap();
        let burst = state.sync_limits().poll_burst();
        for _ in 0..burst {
            assert!(state.poll_token("first").is_ok());
        }
        assert!(state.poll_token("first").is_err());
        // Up to the limit the spent bucket is kept …
        for i in 1..MAX_TRACKED_SESSIONS {
            assert!(state.poll_token(&format!("s{i}")).is_ok());
        }
        assert!(state.poll_token("first").is_err());
        // … one more session starts every bucket afresh.
        assert!(state.poll_token("one-more").is_ok());
        assert!(state.poll_token("first").is_ok());
        state.sync().shutdown().await;
        std::fs::remove_dir_all(&dir).ok();
    }
}
