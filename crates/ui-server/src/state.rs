//! [`AppState`]: everything a request needs — the store, the host service, the change
//! feed, the authenticator and the per-session counters. Cheap to clone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use ui_core::SyncLimits;
use ui_host::{
    HostClock, LinkResolver, ServiceLimits, SourceRegistry, TokioClock, UiQueries, UiSource,
    UiStore,
};
use ui_sync::{
    Audience, ChangeDraft, Cursor, RateLimiter, SqliteStore, StreamSlots, SyncError, SyncService,
};

use crate::auth::{Authenticator, DemoAuth, NoAuth};
use crate::config::{ChatLimits, ServerConfig, SourcesConfig};
use crate::db::Db;
use crate::drafts::ReplyDrafts;
use crate::error::ServerError;
use crate::limits::MAX_TRACKED_SESSIONS;
use crate::metrics::{MeteredSource, Metrics, Snapshot};
use crate::pg::PgDb;
use crate::signin::{AuthConfig, JwtAuth, ProxyAuth};
use crate::sources::{DemoLinks, SourceInfo, SqlHost, TomlSources};
use crate::store::{ChatStore, PG_MIGRATIONS, PgBackend, SQLITE_MIGRATIONS};

/// Stripes of the per-item lock that keeps a reply's deltas in order.
const REPLY_STRIPES: usize = 64;

/// Sign-outs kept for the event streams that have not read them yet. A stream that falls
/// further behind cannot know whether its own session was signed out, and rotates.
const SIGN_OUTS_UNREAD: usize = 64;

/// The bounds of connections and of shutdown, from [`ServerConfig`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub(crate) header_read_timeout: Duration,
    pub(crate) body_read_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    /// `writeTimeout` of the sync limits.
    pub(crate) write_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) shutdown_spread: Duration,
    pub(crate) drain_timeout: Duration,
}

struct Inner {
    /// The SQLite file (`None` on PostgreSQL).
    db: Option<Db>,
    store: ChatStore,
    host: Arc<SqlHost>,
    sources: TomlSources,
    /// What the catalog tells agents of the sources registered in Rust.
    rust_sources: Vec<SourceInfo>,
    queries: Arc<UiQueries>,
    sync: SyncService,
    sync_limits: SyncLimits,
    auth: Arc<dyn Authenticator>,
    demo: Option<Arc<DemoAuth>>,
    origins: Vec<String>,
    streams: StreamSlots,
    polls: Mutex<HashMap<String, RateLimiter>>,
    signed_out: broadcast::Sender<String>,
    /// When the graceful shutdown began (`None` while serving).
    shutdown: watch::Sender<Option<tokio::time::Instant>>,
    conn_limits: ConnLimits,
    secure_cookies: bool,
    replies: Vec<tokio::sync::Mutex<()>>,
    drafts: ReplyDrafts,
    started: tokio::time::Instant,
    limits: ServiceLimits,
    chat_limits: ChatLimits,
    clock: Arc<dyn HostClock>,
    /// This server's recorder (`metrics.enabled`).
    metrics: Option<Arc<Metrics>>,
    /// The bearer token `GET /metrics` needs, when set.
    metrics_token: Option<crate::config::Secret>,
    /// The last readiness probe's answer: probes run one at a time, and the callers that
    /// waited for a running probe take its answer.
    readiness: tokio::sync::Mutex<Readiness>,
    /// Readiness probes completed (read before waiting for the lock).
    probes: std::sync::atomic::AtomicU64,
    /// Event streams whose lag catch-up is failing now: the first one of a run warns,
    /// the others log at debug (a log outage fails every lagging stream at once).
    failing_catch_ups: std::sync::atomic::AtomicUsize,
}

/// Longest wait for the database in a readiness probe.
const READINESS_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the instance can serve (`GET /readyz`), and if not, why: each reason is a
/// stable string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// The database answers and the change log is written and tailed.
    Ready,
    /// The database cannot be opened or read.
    DatabaseUnreachable,
    /// The database did not answer within 2 s.
    DatabaseTimedOut,
    /// Writes to the change log have failed for longer than `logFailureGrace`.
    ChangeLogDegraded,
    /// The change log's tailer stopped or its last read failed: changes reach no stream.
    ChangeLogNotTailing,
}

impl Readiness {
    /// `ready`, or the stable reason: `database-unreachable`, `database-timed-out`,
    /// `change-log-degraded`, `change-log-not-tailing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Ready => "ready",
            Readiness::DatabaseUnreachable => "database-unreachable",
            Readiness::DatabaseTimedOut => "database-timed-out",
            Readiness::ChangeLogDegraded => "change-log-degraded",
            Readiness::ChangeLogNotTailing => "change-log-not-tailing",
        }
    }
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
    clock: Option<Arc<dyn HostClock>>,
    rust_sources: Vec<(SourceInfo, Arc<dyn UiSource>)>,
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

    /// Registers a source written in Rust next to the ones of the sources file: any
    /// [`UiSource`], typically a [`ui_host::TypedAdapter`] of a [`ui_host::TypedSource`]
    /// whose serde + garde argument type is its schema. `info` is what
    /// `GET /api/catalog` tells agents about it: its `name` (what `@Query("…")` names),
    /// `description` and the JSON Schema of its arguments; such a source has no write path
    /// (`writable` must be `false`). Its reads get the access the server captures for
    /// every reply: `{"user", "project", "chat"}` of the writing chat.
    ///
    /// [`AppBuilder::open`] fails when the name is taken or `writable` is set.
    pub fn source(mut self, info: SourceInfo, source: impl UiSource) -> Self {
        self.rust_sources.push((info, Arc::new(source)));
        self
    }

    /// Reads time from `clock` (instead of a [`TokioClock`] started now): readings'
    /// `readAt`, chats' and items' `createdAt`, choices' `at`, the read timeout and every
    /// work budget. Tests pass a [`TokioClock::starting_at`] under a paused tokio clock.
    pub fn clock(mut self, clock: Arc<dyn HostClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Opens the database, loads and checks the sources, and starts the change feed (on
    /// the current tokio runtime).
    ///
    /// # Errors
    /// [`ServerError`] when the database, the sources or the feed cannot be set up.
    pub async fn open(self) -> Result<AppState, ServerError> {
        let config = self.config;
        let chat_limits = config.chat_limits;
        if chat_limits.item_text_bytes == 0
            || chat_limits.chat_items == 0
            || chat_limits.page_items == 0
            || chat_limits.page_bytes == 0
        {
            return Err(ServerError::Config(
                "every chat limit must be at least 1".into(),
            ));
        }
        config.check_connections()?;
        let clock = self
            .clock
            .unwrap_or_else(|| Arc::new(TokioClock::new()) as Arc<dyn HostClock>);
        let mut limits = ServiceLimits::default();
        limits.host = config.host_limits;
        limits.ui_host = config.ui_host_limits;
        limits.ui = config.ui_limits;
        limits.reply = config.reply_limits;
        limits.sync = config.sync_limits;
        let read_timeout = Duration::from_millis(limits.host.read_timeout());
        let (db, sources, sync, store) = match &config.postgres {
            None => {
                // Source reads get a connection per read slot, apart from the store's.
                let db = Db::open(
                    &config.database,
                    "",
                    usize::try_from(limits.host.read_slots()).unwrap_or(usize::MAX),
                )
                .await?;
                db.migrate(SQLITE_MIGRATIONS).await.map_err(|e| {
                    ServerError::Database(format!("{}: migrations: {e}", config.database.display()))
                })?;
                let mut sources = load_sources(&config.sources)?;
                // The server's database is the sources' default connection; named ones
                // open here.
                sources.install(Some(&db), read_timeout).await?;
                // The change log lives in the same file (its own tables, `ui_sync_*`).
                let log = SqliteStore::open(&config.database).await?;
                let sync =
                    SyncService::start(Arc::new(log), config.sync_limits, Vec::new()).await?;
                let store = ChatStore::new(
                    db.clone(),
                    Some(sync.clone()),
                    Arc::clone(&clock),
                    chat_limits,
                );
                (Some(db), sources, sync, store)
            }
            Some(pg) => {
                let url = pg.url.expose();
                // Sources that name no connection read the server's PostgreSQL database.
                let mut sources = load_sources(&config.sources)?;
                sources.read_default_from(url)?;
                sources.install(None, read_timeout).await?;
                let pgdb = PgDb::open(url, pg.pool, pg.timeout, PG_MIGRATIONS).await?;
                // The change log lives in the same database (its own tables, `ui_sync_*`).
                let log = Arc::new(
                    ui_sync::PgStore::connect_with(url, None, &config.sync_limits)
                        .await
                        .map_err(|e| {
                            ServerError::Database(format!(
                                "{}: the change log: {e}",
                                crate::pg::redacted(url)
                            ))
                        })?,
                );
                let sync = SyncService::start(
                    Arc::clone(&log) as Arc<dyn ui_sync::SyncStore>,
                    config.sync_limits,
                    Vec::new(),
                )
                .await?;
                let store = ChatStore::new_pg(
                    PgBackend {
                        db: pgdb,
                        log: Some(log),
                    },
                    Some(sync.clone()),
                    Arc::clone(&clock),
                    chat_limits,
                );
                (None, sources, sync, store)
            }
        };
        // Notifications on the sources' PostgreSQL channels become change events.
        sources.listen(&sync);
        let demo_sessions = match &config.auth {
            AuthConfig::Auto => config.demo,
            AuthConfig::Demo if !config.demo => {
                return Err(ServerError::Config(
                    "auth.mode = \"demo\" needs server.demo = true (or `uiblocks serve --demo`)"
                        .into(),
                ));
            }
            AuthConfig::Demo => true,
            _ => false,
        };
        let demo = demo_sessions.then(|| Arc::new(DemoAuth::new()));
        let auth: Arc<dyn Authenticator> = match (self.auth, &demo, &config.auth) {
            (Some(auth), _, _) => auth,
            (None, Some(demo), _) => demo.clone(),
            (None, None, AuthConfig::Jwt(jwt)) => Arc::new(JwtAuth::new(jwt)?),
            (None, None, AuthConfig::Proxy(proxy)) => Arc::new(ProxyAuth::new(proxy)?),
            (None, None, _) => Arc::new(NoAuth),
        };
        let links = self.links.or_else(|| {
            config
                .demo
                .then(|| Arc::new(DemoLinks) as Arc<dyn LinkResolver>)
        });
        let mut registry = sources.registry(db.as_ref())?;
        let rust_sources = register_rust_sources(&mut registry, self.rust_sources)?;
        let metrics = config.metrics.enabled.then(Metrics::new);
        if let Some(metrics) = &metrics {
            registry = metered(&registry, metrics);
        }
        let host = Arc::new(SqlHost::new(registry, links));
        let queries = UiQueries::configured(
            host.clone(),
            Arc::new(store.clone()) as Arc<dyn UiStore>,
            Arc::clone(&clock),
            limits,
        );
        // Readings of sources with a change feed follow the change log.
        queries.attach_changes(Arc::new(crate::changes::SyncChanges::new(sync.clone())));
        let (signed_out, _) = broadcast::channel(SIGN_OUTS_UNREAD);
        let (shutdown, _) = watch::channel(None);
        let conn_limits = ConnLimits {
            header_read_timeout: config.header_read_timeout,
            body_read_timeout: config.body_read_timeout,
            idle_timeout: config.idle_timeout,
            write_timeout: Duration::from_millis(config.sync_limits.write_timeout()),
            max_connections: config.max_connections,
            shutdown_spread: config.shutdown_spread,
            drain_timeout: config.drain_timeout,
        };
        Ok(AppState {
            inner: Arc::new(Inner {
                db,
                store,
                host,
                sources,
                rust_sources,
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
                conn_limits,
                secure_cookies: config.secure_cookies,
                replies: (0..REPLY_STRIPES)
                    .map(|_| tokio::sync::Mutex::new(()))
                    .collect(),
                drafts: ReplyDrafts::default(),
                started: tokio::time::Instant::now(),
                limits,
                chat_limits,
                clock,
                metrics,
                metrics_token: config.metrics.token,
                readiness: tokio::sync::Mutex::new(Readiness::Ready),
                probes: std::sync::atomic::AtomicU64::new(0),
                failing_catch_ups: std::sync::atomic::AtomicUsize::new(0),
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
            clock: None,
            rust_sources: Vec::new(),
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
    pub fn store(&self) -> &ChatStore {
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

    /// What the catalog tells agents of every source: the sources file's, then the ones
    /// registered in Rust ([`AppBuilder::source`]).
    pub fn source_infos(&self) -> Vec<SourceInfo> {
        let mut infos = self.inner.sources.schemas();
        infos.extend(self.inner.rust_sources.iter().cloned());
        infos
    }

    /// The change feed.
    pub fn sync(&self) -> &SyncService {
        &self.inner.sync
    }

    /// Every limit group the server checks (as configured).
    pub fn limits(&self) -> &ServiceLimits {
        &self.inner.limits
    }

    /// The chat limits (as configured).
    pub fn chat_limits(&self) -> &ChatLimits {
        &self.inner.chat_limits
    }

    /// The clock of the server.
    pub fn clock(&self) -> &Arc<dyn HostClock> {
        &self.inner.clock
    }

    /// The change feed's limits.
    pub fn sync_limits(&self) -> &SyncLimits {
        &self.inner.sync_limits
    }

    /// Opens the store's database afresh and reads its schema (the readiness probe: a
    /// pooled connection would still read a file that was removed).
    ///
    /// # Errors
    /// The database's failure, as text.
    pub async fn ping_database(&self) -> Result<(), String> {
        self.inner.store.ping().await.map_err(|e| e.0)
    }

    /// Whether the instance can serve (`GET /readyz`): the database answers within 2 s, the
    /// change log's writes succeed and its tailer follows it. Probes run one at a time;
    /// the callers that waited for a running probe take its answer, so a flood of probes
    /// costs one database call at a time.
    pub async fn readiness(&self) -> Readiness {
        use std::sync::atomic::Ordering;
        let seen = self.inner.probes.load(Ordering::Acquire);
        let mut last = self.inner.readiness.lock().await;
        if self.inner.probes.load(Ordering::Acquire) != seen {
            return *last;
        }
        let (answer, why) =
            match tokio::time::timeout(READINESS_TIMEOUT, self.ping_database()).await {
                Err(_) => (
                    Readiness::DatabaseTimedOut,
                    format!("no answer within {} ms", READINESS_TIMEOUT.as_millis()),
                ),
                Ok(Err(e)) => (Readiness::DatabaseUnreachable, e),
                Ok(Ok(())) if self.sync().degraded() => (
                    Readiness::ChangeLogDegraded,
                    "change log writes keep failing".to_owned(),
                ),
                Ok(Ok(())) if !self.sync().tailing() => (
                    Readiness::ChangeLogNotTailing,
                    "the change log's tailer does not follow it".to_owned(),
                ),
                Ok(Ok(())) => (Readiness::Ready, String::new()),
            };
        // Said when the answer changes, not at every probe of a balancer.
        if answer != *last {
            if answer == Readiness::Ready {
                tracing::info!(was = last.as_str(), "readiness: ready again");
            } else {
                tracing::warn!(reason = answer.as_str(), %why, "readiness: not ready");
            }
        }
        *last = answer;
        self.inner.probes.fetch_add(1, Ordering::Release);
        answer
    }

    /// This server's metrics recorder (`None` with `metrics.enabled = false`).
    pub(crate) fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.inner.metrics.as_ref()
    }

    /// The bearer token `GET /metrics` needs, when set.
    pub(crate) fn metrics_token(&self) -> Option<&crate::config::Secret> {
        self.inner.metrics_token.as_ref()
    }

    /// What the server holds now, for the gauges of `/metrics`.
    pub(crate) fn metrics_snapshot(&self) -> Snapshot {
        let sync = self.sync().stats();
        let queries = self.queries().stats();
        Snapshot {
            read_slots_in_use: queries.slots,
            cache_hits: queries.cache_hits,
            read_slots: self.limits().host.read_slots(),
            streams_open: self.streams().open(),
            events_appended: sync.tailed,
            append_failures: sync.append_failures,
            tail_failures: sync.tail_failures,
        }
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

    /// The event streams whose lag catch-up is failing now (`GET /ui/events`).
    pub(crate) fn failing_catch_ups(&self) -> &std::sync::atomic::AtomicUsize {
        &self.inner.failing_catch_ups
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
    /// Waits at most the feed's `logFailureGrace` for the event to be committed (while the
    /// log cannot be written the appender retries it until it succeeds; it stays queued).
    ///
    /// # Errors
    /// What recording answers ([`SyncError`]); [`SyncError::Store`] when the event was not
    /// committed within the wait.
    pub async fn membership_changed(&self, user_id: &str) -> Result<Cursor, SyncError> {
        let wait = Duration::from_millis(self.sync_limits().log_failure_grace());
        let recorded = tokio::time::timeout(
            wait,
            self.sync().record_and_wait(ChangeDraft {
                source: crate::auth::MEMBERS_SOURCE.to_owned(),
                audience: Some(Audience::user(user_id)),
                key: None,
                rs: None,
            }),
        )
        .await;
        match recorded {
            Ok(recorded) => recorded,
            Err(_) => Err(SyncError::Store(format!(
                "the audience-changed event of `{user_id}` was not committed within {} ms \
                 (logFailureGrace); it stays queued",
                wait.as_millis()
            ))),
        }
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

    /// Asks every open event stream to say `bye shutdown` and close (graceful shutdown),
    /// each at its own moment spread uniformly over the configured `shutdown_spread`
    /// (`sync.md` §4.2), so that their clients do not reconnect at once.
    pub fn shut_down_streams(&self) {
        self.inner.shutdown.send_if_modified(|began| {
            if began.is_some() {
                return false;
            }
            *began = Some(tokio::time::Instant::now());
            true
        });
    }

    pub(crate) fn shutdown_watch(&self) -> watch::Receiver<Option<tokio::time::Instant>> {
        self.inner.shutdown.subscribe()
    }

    /// Completes at a stream's turn to close in a graceful shutdown: `turn` (in `[0, 1)`,
    /// drawn once per stream) of the way through the spread after the shutdown began.
    pub(crate) async fn shutdown_turn(
        &self,
        shutdown: &mut watch::Receiver<Option<tokio::time::Instant>>,
        turn: f64,
    ) {
        // `self` holds the sender, so the channel stays open.
        let began = shutdown
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|b| *b);
        if let Some(began) = began {
            let spread = self
                .inner
                .conn_limits
                .shutdown_spread
                .mul_f64(turn.clamp(0.0, 1.0));
            tokio::time::sleep_until(began + spread).await;
        }
    }

    pub(crate) fn conn_limits(&self) -> &ConnLimits {
        &self.inner.conn_limits
    }

    /// Whether cookies carry `Secure` (the server is reached over HTTPS).
    pub(crate) fn secure_cookies(&self) -> bool {
        self.inner.secure_cookies
    }

    /// Writes the database's WAL back into the main file and empties it (`PRAGMA
    /// wal_checkpoint(TRUNCATE)`), the last step of a graceful shutdown before the
    /// connections close. Stop the change feed first ([`SyncService::shutdown`]).
    ///
    /// # Errors
    /// [`ServerError::Database`] when the checkpoint fails or another connection keeps
    /// it from completing.
    pub async fn checkpoint(&self) -> Result<(), ServerError> {
        // PostgreSQL keeps its own write-ahead log.
        let Some(db) = &self.inner.db else {
            return Ok(());
        };
        let busy = db
            .write(|conn| {
                Ok(conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    r.get::<_, i64>(0)
                })?)
            })
            .await
            .map_err(|e| ServerError::Database(format!("checkpoint: {e}")))?;
        if busy != 0 {
            return Err(ServerError::Database(
                "checkpoint: the database was busy".to_owned(),
            ));
        }
        Ok(())
    }

    /// The drafts of the replies that stream (take one only under its reply's lock).
    pub(crate) fn drafts(&self) -> &ReplyDrafts {
        &self.inner.drafts
    }

    /// The lock that keeps the deltas of one reply in order.
    pub(crate) fn reply_lock(&self, chat_id: &str, item_id: &str) -> &tokio::sync::Mutex<()> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (chat_id, item_id).hash(&mut h);
        &self.inner.replies[(h.finish() as usize) % REPLY_STRIPES]
    }
}

/// `registry` with every source wrapped in a [`MeteredSource`] of `metrics`.
fn metered(registry: &SourceRegistry, metrics: &Arc<Metrics>) -> SourceRegistry {
    let mut out = SourceRegistry::new();
    for name in registry.names() {
        if let Some(source) = registry.get(name) {
            let source = MeteredSource::new(name, Arc::clone(source), Arc::clone(metrics));
            out.register(name.to_owned(), source);
        }
    }
    out
}

/// Adds the sources registered in Rust to `registry`; their catalog entries.
fn register_rust_sources(
    registry: &mut SourceRegistry,
    sources: Vec<(SourceInfo, Arc<dyn UiSource>)>,
) -> Result<Vec<SourceInfo>, ServerError> {
    let mut infos = Vec::with_capacity(sources.len());
    for (info, source) in sources {
        if registry.get(&info.name).is_some() {
            return Err(ServerError::Config(format!(
                "the source `{}` is registered twice",
                info.name
            )));
        }
        if info.writable {
            return Err(ServerError::Config(format!(
                "the source `{}` is registered in Rust and has no write path: `writable` must be false",
                info.name
            )));
        }
        registry.register_shared(info.name.clone(), source);
        infos.push(info);
    }
    Ok(infos)
}

/// The sources file or text of the configuration (none: no SQL sources).
fn load_sources(config: &SourcesConfig) -> Result<TomlSources, ServerError> {
    match config {
        SourcesConfig::None => Ok(TomlSources::empty()),
        SourcesConfig::File(path) => TomlSources::load(path),
        SourcesConfig::Inline(text) => TomlSources::parse(text),
    }
}

/// A state on a fresh SQLite file in a directory of its own under the system's temporary
/// directory, for the unit tests; the caller removes the directory. Its clock stands still
/// ([`StillClock`]), so no work budget runs out of wall time however loaded the machine is
/// (the tests compare compiles, which a budget cut short would change).
#[cfg(test)]
pub(crate) async fn temp_state(name: &str) -> (AppState, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "ui-server-unit-{name}-{}-{}",
        std::process::id(),
        crate::store::new_id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let state = AppState::builder(ServerConfig::new(dir.join("app.db")))
        .clock(Arc::new(StillClock))
        .open()
        .await
        .unwrap();
    (state, dir)
}

/// A clock for unit tests on a real-time runtime: reads one fixed time; its timers are
/// tokio's.
#[cfg(test)]
pub(crate) struct StillClock;

#[cfg(test)]
impl HostClock for StillClock {
    fn now_ms(&self) -> u64 {
        1_800_000_000_000
    }

    fn sleep(&self, ms: u64) -> ui_host::Sleep {
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn poll_buckets_are_bounded() {
        let (state, dir) = temp_state("polls").await;
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
