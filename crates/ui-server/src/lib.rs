//! # ui-server
//!
//! The HTTP face of uiblocks: an axum [`router`] a host application mounts, around the
//! host service ([`ui_host::UiQueries`]) and the change feed ([`ui_sync::SyncService`]).
//!
//! - [`AppState`] is opened from a [`ServerConfig`]: one SQLite file for chats, items,
//!   compiled blocks, frozen readings, answers, the sources' tables and the change log;
//!   sources declared in TOML as SQL ([`TomlSources`]); the demo's cookie sessions
//!   ([`DemoAuth`]) or a host's own [`Authenticator`].
//! - [`router`] serves the routes below; [`serve`] binds `127.0.0.1:<port>`.
//! - Every error is an [`ApiError`]: a stable [`ErrorCode`], one HTTP status per code, and
//!   the body `{"error":{"code","message","reason"?}}`.
//!
//! | Route | What |
//! | --- | --- |
//! | `POST /api/login`, `POST /api/logout` | demo sessions (`alice`/`web`, `bob`/`ops`) |
//! | `POST /api/demo/members` | demo only: add a user to a project or remove them; open streams follow |
//! | `GET /api/me` | the principal |
//! | `GET /api/session` | `{"user": principal}`, or `{"user": null}` when signed out (always `200`) |
//! | `GET`/`POST /api/chats`, `GET /api/chats/{chat}` | the principal's chats; one with its items |
//! | `POST /api/chats/{chat}/messages` | a person's message |
//! | `POST /api/chats/{chat}/items`, `…/items/{item}/delta`, `…/finish` | a reply while it streams |
//! | `POST /ui/query`, `/ui/link`, `/ui/choice` | `host.md` §6, §13, §12 |
//! | `POST /ui/view` | a stored block evaluated with the page's values and readings |
//! | `GET /ui/events`, `GET /ui/poll` | the change feed (`sync.md` §4) |
//! | `GET /api/catalog` | the catalog texts and sources for the agent's prompt |
//! | `GET /api/schema`, `GET /api/schema/{type}` | JSON Schemas of the wire types |
//! | `POST /api/sources/{name}/rows` | a source's write path, recorded as change events |
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
//! config.port = 8080;
//! serve(config).await
//! # }
//! ```
//!
//! Dependencies beyond the lower crates: axum (routing, extractors, serving), tower-http
//! (panic catching and the `Cache-Control` header), schemars (wire schemas), toml (the
//! sources file), futures-util (the event stream body), tokio-util (read cancellation).

mod auth;
mod cache;
mod config;
mod db;
mod demo;
mod error;
mod extract;
mod feed;
pub mod limits;
mod page;
mod replies;
mod routes;
pub mod schema;
mod server;
mod sources;
mod state;
mod store;
mod view;

pub use auth::{
    Authenticator, DEMO_USERS, DemoAuth, DemoUser, MEMBERS_SOURCE, NoAuth, Principal,
    SESSION_COOKIE, cookie_value,
};
pub use config::{ServerConfig, SourcesConfig};
pub use demo::{MemberBody, MemberChanged, seed_demo, spawn_demo_writer};
pub use error::{ApiError, ErrorCode, ServerError};
pub use extract::{
    JsonBody, Params, QueryParams, REQUEST_SOURCE_HEADER, SYNC_SEQ_HEADER, WriteSource,
};
pub use replies::ReplyProgress;
pub use routes::{
    CatalogAnswer, ChatList, DeltaBody, FinishBody, LoginBody, MessageBody, NewChatBody,
    NewReplyBody, RowsBody, RowsWritten, router,
};
pub use server::{serve, serve_on};
pub use sources::{DEMO_SOURCES, DemoLinks, MAX_INSERT_ROWS, SourceInfo, SqlHost, TomlSources};
pub use state::{AppBuilder, AppState};
pub use store::{CHATS_SOURCE, Chat, ChatDetail, ChatItem, Role, SqliteUiStore};
pub use view::{ViewAnswer, ViewChange, ViewPayload, evaluate as evaluate_view};
