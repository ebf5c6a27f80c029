//! # ui-server
//!
//! The HTTP face of uiblocks: an axum [`router`] a host application mounts, around the
//! host service ([`ui_host::UiQueries`]) and the change feed ([`ui_sync::SyncService`]).
//! The two crates do not know each other: [`SyncChanges`] implements the host's
//! `ChangeIndex` over the change feed, so live readings follow change events.
//!
//! - [`AppState`] is opened from a [`ServerConfig`]: one SQLite file for chats, items,
//!   compiled blocks, frozen readings, answers, the sources' tables and the change log —
//!   or a PostgreSQL database ([`ServerConfig::postgres`], `database.url`) for all of them
//!   but the SQL sources, shared by several instances ([`ChatStore`]: every write and its
//!   change event in one transaction; versioned migrations at start on both);
//!   sources declared in TOML as SQL ([`TomlSources`]); the demo's cookie sessions
//!   ([`DemoAuth`]) or a host's own [`Authenticator`].
//! - [`router`] serves the routes below; [`serve`] binds `127.0.0.1:<port>` and serves
//!   until SIGINT or SIGTERM ([`bind`] and [`Bound::run`] in two steps); [`serve_on`]
//!   bounds connections and drains on shutdown (README, "Limits and timeouts").
//! - Every error is an [`ApiError`]: a stable [`ErrorCode`], one HTTP status per code, and
//!   the body `{"error":{"code","message","reason"?}}`.
//! - One configuration reaches every check: the spec's limit groups and the
//!   [`ChatLimits`] of [`ServerConfig`], and the clock of [`AppBuilder::clock`].
//!
//! ## Limits
//!
//! | Limit | Default | Config | Over it |
//! | --- | --- | --- | --- |
//! | text of one item | 1 MiB ([`limits::MAX_ITEM_TEXT_BYTES`]) | [`ChatLimits::item_text_bytes`] | `payload-too-large` |
//! | items per chat | 1,000 ([`limits::MAX_CHAT_ITEMS`]) | [`ChatLimits::chat_items`] | `chat-full`; a choice `refused-choice` |
//! | items per page | 50 ([`limits::MAX_CHAT_PAGE_ITEMS`]) | [`ChatLimits::page_items`] | `bad-request` for a larger `limit` |
//! | bytes per page | 4 MiB ([`limits::MAX_CHAT_PAGE_BYTES`]) | [`ChatLimits::page_bytes`] | the page ends early, `more: true` |
//! | source read timeout | 8 s | [`ServerConfig::host_limits`] `readTimeoutMilliseconds` | `timed-out`; the statement stops |
//! | source connections | 16 | [`ServerConfig::host_limits`] `readSlots` | reads wait for a slot (`busy`) |
//!
//! Source reads run on a pool of their own, one read-only connection per read slot, so
//! the store's reads (chat lists, items, access) never wait behind a slow source; a
//! source read's statement carries a SQLite progress handler that looks at the read's
//! cancellation for the statement's whole life, so a timed-out read stops at once,
//! however early or late the cancellation came. Every write returns its failure: a
//! request fails with `internal` (logged), the host service's freeze retries.
//!
//! Every route is an entry of [`ROUTES`], the one list the router is built from;
//! `docs/http-api.md` describes each with its body, answers and codes (a test holds the
//! two together). A host adds sources written in Rust with [`AppBuilder::source`] (see
//! `examples/embed.rs`: the router nested under a prefix, the host's own
//! [`Authenticator`], a serde + garde `TypedSource`).
//!
//! | Route | What |
//! | --- | --- |
//! | `POST /api/login`, `POST /api/logout` | demo sessions (`alice`/`web`, `bob`/`ops`) |
//! | `POST /api/demo/members` | demo only: add a user to a project or remove them; open streams follow |
//! | `GET /api/me` | the principal |
//! | `GET /api/session` | `{"user": principal}`, or `{"user": null}` when signed out (always `200`) |
//! | `GET`/`POST /api/chats`, `GET /api/chats/{chat}` | the principal's chats; one with a page of its items (`?before={itemId}&limit=`) |
//! | `POST /api/chats/{chat}/messages` | a person's message |
//! | `POST /api/chats/{chat}/items`, `…/items/{item}/delta`, `…/finish` | a reply while it streams |
//! | `POST /ui/query`, `/ui/link`, `/ui/choice` | `host.md` §6, §13, §12 |
//! | `POST /ui/view` | a stored block evaluated with the page's values and readings |
//! | `GET /ui/events`, `GET /ui/poll` | the change feed (`sync.md` §4) |
//! | `GET /api/catalog` | the catalog texts and sources for the agent's prompt |
//! | `GET /api/schema`, `GET /api/schema/{type}` | JSON Schemas of the wire types |
//! | `POST /api/sources/{name}/rows` | a source's write path, recorded as change events |
//! | `POST /ui/changes` | a recorder of `sources.toml` records change events of data written elsewhere |
//! | `GET /healthz`, `GET /readyz` | liveness (`200 ok`); readiness (`200 ready`, `503 unavailable` with a stable reason when the database or the change log fails) |
//! | `GET /metrics` | this server's metrics in the Prometheus text format ([`MetricsConfig`]) |
//! | `GET /`, `/app.css`, `/app.js` | the demo page (plain HTML/CSS/JS, embedded) |
//!
//! ```
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use tower::ServiceExt;
//! use ui_server::{AppState, ServerConfig, SourcesConfig, router};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = std::env::temp_dir().join(format!("ui-server-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let mut config = ServerConfig::new(dir.join("app.db"));
//! config.demo = true;
//! config.sources = SourcesConfig::Inline(
//!     r#"
//!     setup = "CREATE TABLE IF NOT EXISTS runs (project TEXT, branch TEXT, name TEXT)"
//!     [[source]]
//!     name = "ci.runs"
//!     sql = "SELECT name FROM runs WHERE project = @project AND branch = :branch"
//!     args = { type = "object", required = ["branch"], properties = { branch = { type = "string" } } }
//!     "#
//!     .into(),
//! );
//! let state = AppState::open(config).await.unwrap();
//!
//! // Mount the API inside the host's own router.
//! let app = axum::Router::new().merge(router(state));
//!
//! let login = Request::post("/api/login")
//!     .header("content-type", "application/json")
//!     .body(Body::from(r#"{"user":"alice"}"#))
//!     .unwrap();
//! let response = app.clone().oneshot(login).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//!
//! // Without the session cookie: 401 with a stable code.
//! let chats = Request::get("/api/chats").body(Body::empty()).unwrap();
//! let response = app.oneshot(chats).await.unwrap();
//! assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
//! # std::fs::remove_dir_all(&dir).ok();
//! # });
//! ```
//!
//! Serving on a port:
//!
//! ```no_run
//! use ui_server::{ServerConfig, SourcesConfig, serve};
//!
//! # async fn run() -> Result<(), ui_server::ServerError> {
//! let mut config = ServerConfig::new("uiblocks.db");
//! config.sources = SourcesConfig::File("sources.toml".into());
//! config.demo = true;
//! config.bind = "127.0.0.1:8080".parse().unwrap();
//! serve(config).await
//! # }
//! ```
//!
//! Dependencies beyond the lower crates: axum (routing, extractors), tower-http (panic
//! catching and the fixed response headers), schemars (wire schemas, derived
//! on the real types through the `schema` feature of the crates below), toml (the sources
//! file), futures-util (the event stream body), tokio-util (read cancellation); hyper and
//! hyper-util (one HTTP/1.1 connection at a time under [`serve_on`]'s own accept loop,
//! because `axum::serve` has no connection cap and no header, body, idle or write
//! timeouts), http-body and tower (the body and service traits that loop wraps),
//! http-body-util (JSON bodies limited and collected without another box), tracing
//! (the request log, failed writes and database calls, warnings and errors; the binary
//! installs the subscriber), and rusqlite's `hooks` feature (the progress handler that
//! stops a cancelled source read); jsonwebtoken (`auth.mode = "jwt"`: a well-kept JWT
//! crate that checks signatures, `exp`/`nbf`/`iss`/`aud` and reads JWKS, built with its
//! pure-Rust `rust_crypto` backend so no aws-lc or OpenSSL C build is needed);
//! tokio-postgres (`database.url = "postgres://…"`: the client `ui-sync`'s PostgreSQL log
//! already uses, so a store write and its change event share one transaction; always
//! built, so the released binary needs no build flag for PostgreSQL); `metrics` and
//! `metrics-exporter-prometheus` for `/metrics` (the ecosystem's recording facade and its
//! maintained Prometheus recorder, used without its HTTP listener; one recorder per server,
//! see the `metrics` module's docs); foldhash for the store's bounded caches, which every
//! `ui.*` request looks up (SipHash over their string keys was a measurable part of a
//! cached `ui.query`, `benches/NOTES.md`; the caches are bounded, and foldhash seeds each
//! map at random).

mod auth;
mod bodies;
mod cache;
mod changes;
mod config;
mod connections;
mod db;
mod demo;
mod drafts;
mod error;
mod extract;
mod feed;
mod gate;
pub mod limits;
mod metrics;
mod page;
mod pg;
mod recorders;
mod replies;
mod routes;
pub mod schema;
mod server;
mod settings;
mod signin;
mod sources;
mod state;
mod store;
mod view;
mod woken;

pub use auth::{
    Authenticator, DEMO_USERS, DemoAuth, DemoUser, MEMBERS_SOURCE, NoAuth, Principal,
    SESSION_COOKIE, cookie_value,
};
pub use changes::SyncChanges;
pub use config::{
    ChatLimits, ConnSetting, OutOfRange, PostgresConfig, Secret, ServerConfig, SourcesConfig,
};
pub use demo::{MemberBody, MemberChanged, seed_demo, spawn_demo_writer};
pub use error::{ApiError, ErrorCode, ServerError};
pub use extract::{
    JsonBody, Params, QueryParams, REQUEST_SOURCE_HEADER, SYNC_SEQ_HEADER, WriteSource,
};
pub use metrics::MetricsConfig;
pub use replies::ReplyProgress;
pub use routes::{
    CatalogAnswer, ChatList, ChatPageQuery, DeltaBody, FinishBody, LoginBody, MessageBody,
    NewChatBody, NewReplyBody, ROUTES, Route, RouteMethod, RowsBody, RowsWritten, router,
};
pub use server::{Bound, bind, serve, serve_on, shutdown_signal};
pub use settings::{ConfigError, env_name, load_config, parse_duration};
pub use signin::{AuthConfig, JwtAlgorithm, JwtAuth, JwtConfig, JwtKey, ProxyAuth, ProxyConfig};
pub use sources::{DEMO_SOURCES, DemoLinks, MAX_INSERT_ROWS, SourceInfo, SqlHost, TomlSources};
pub use state::{AppBuilder, AppState, Readiness};
pub use store::{CHATS_SOURCE, Chat, ChatDetail, ChatItem, ChatStore, Role, SqliteUiStore};
pub use view::{ViewAnswer, ViewChange, ViewPayload, evaluate as evaluate_view};
