//! The router and its handlers. Handlers stay thin: their extractors check the caller
//! ([`crate::gate::Owned`], [`crate::gate::Attached`]), they call the store, the replies or
//! the host service and answer JSON; a route's [`Writes`] mounts the
//! [`crate::gate::record_writes`] layer that records their change events and answers
//! `X-UI-Sync-Seq`.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequest as _, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use ui_core::{CATALOG_VERSION, FENCE_LANGUAGE, catalog};
use ui_host::{ChoicePayload, LinkPayload, PreparedQuery};
use ui_sync::Cursor;

use crate::auth::{DemoAuth, Principal};
use crate::error::{ApiError, ErrorCode};
use crate::extract::{JsonBody, Params, QueryParams, SYNC_SEQ_HEADER, WriteSource};
use crate::feed;
use crate::gate::{Attached, Owned, Writes, record_writes};
use crate::limits::MAX_BODY_BYTES;
use crate::metrics::Metrics;
use crate::schema::{wire_schema, wire_types};
use crate::sources::{InsertError, SourceInfo};
use crate::state::{AppState, Readiness};
use crate::store::{Chat, ChatDetail, record_all};
use crate::view::{ViewPayload, evaluate};

/// An HTTP method of a [`Route`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RouteMethod {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
}

impl RouteMethod {
    /// `GET` or `POST`.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteMethod::Get => "GET",
            RouteMethod::Post => "POST",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            RouteMethod::Get => MethodFilter::GET,
            RouteMethod::Post => MethodFilter::POST,
        }
    }
}

/// One route of [`router`]: its method, its path pattern (axum's, `{chat}` for a path
/// parameter) and whether only the demo serves it. [`ROUTES`] is the one list the router
/// is built from; `docs/http-api.md` documents each entry (a test holds the two together).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Route {
    /// The method.
    pub method: RouteMethod,
    /// The path pattern.
    pub path: &'static str,
    /// Served only with `ServerConfig::demo`.
    pub demo_only: bool,
    /// How its writes reach the change feed (the [`record_writes`] layer), if it writes
    /// through the store.
    writes: Option<Writes>,
    handler: fn(MethodFilter) -> MethodRouter<AppState>,
}

const fn route(
    method: RouteMethod,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        demo_only: false,
        writes: None,
        handler,
    }
}

/// A route whose store writes are recorded by the [`record_writes`] layer.
const fn write_route(
    method: RouteMethod,
    path: &'static str,
    writes: Writes,
    handler: fn(MethodFilter) -> MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        demo_only: false,
        writes: Some(writes),
        handler,
    }
}

const fn demo_route(
    method: RouteMethod,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        demo_only: true,
        writes: None,
        handler,
    }
}

use RouteMethod::{Get, Post};

/// Every route of [`router`], in the order of `docs/http-api.md`.
pub const ROUTES: &[Route] = &[
    demo_route(Post, "/api/login", |m| on(m, login)),
    demo_route(Post, "/api/logout", |m| on(m, logout)),
    demo_route(Post, "/api/demo/members", |m| {
        on(m, crate::demo::set_member)
    }),
    route(Get, "/api/me", |m| on(m, me)),
    route(Get, "/api/session", |m| on(m, session)),
    route(Get, "/api/chats", |m| on(m, list_chats)),
    write_route(Post, "/api/chats", Writes::Wait, |m| on(m, create_chat)),
    route(Get, "/api/chats/{chat}", |m| on(m, read_chat)),
    write_route(Post, "/api/chats/{chat}/messages", Writes::Wait, |m| {
        on(m, post_message)
    }),
    write_route(Post, "/api/chats/{chat}/items", Writes::Wait, |m| {
        on(m, new_reply)
    }),
    write_route(
        Post,
        "/api/chats/{chat}/items/{item}/delta",
        Writes::NoWait,
        |m| on(m, delta),
    ),
    write_route(
        Post,
        "/api/chats/{chat}/items/{item}/finish",
        Writes::Wait,
        |m| on(m, finish),
    ),
    route(Post, "/ui/query", |m| on(m, ui_query)),
    route(Post, "/ui/link", |m| on(m, ui_link)),
    write_route(Post, "/ui/choice", Writes::Wait, |m| on(m, ui_choice)),
    route(Post, "/ui/view", |m| on(m, ui_view)),
    route(Get, "/ui/events", |m| on(m, feed::events)),
    route(Get, "/ui/poll", |m| on(m, feed::poll)),
    route(Get, "/api/catalog", |m| on(m, catalog_texts)),
    route(Get, "/api/schema", |m| on(m, schema_list)),
    route(Get, "/api/schema/{name}", |m| on(m, schema_one)),
    route(Post, "/api/sources/{name}/rows", |m| on(m, write_rows)),
    route(Post, "/ui/changes", |m| on(m, record_changes)),
    route(Get, "/", |m| on(m, crate::page::index)),
    route(Get, "/app.css", |m| on(m, crate::page::css)),
    route(Get, "/app.js", |m| on(m, crate::page::js)),
    route(Get, "/healthz", |m| on(m, healthz)),
    route(Get, "/readyz", |m| on(m, readyz)),
    route(Get, "/metrics", |m| on(m, metrics)),
];

/// The router of the whole API: every entry of [`ROUTES`] (the demo's only with
/// `ServerConfig::demo`). Mount it as is, or `merge`/`nest` it into a host application's
/// router.
pub fn router(state: AppState) -> Router {
    let demo = state.demo().is_some();
    let mut routes = Router::new();
    for r in ROUTES.iter().filter(|r| demo || !r.demo_only) {
        let mut handler = (r.handler)(r.method.filter());
        if let Some(writes) = r.writes {
            handler = handler.layer(middleware::from_fn_with_state(
                (state.clone(), writes),
                record_writes,
            ));
        }
        routes = routes.route(r.path, handler);
    }
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), check_origin))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        // Outside the header layers (where it costs every request least), so its answer
        // sets their headers itself.
        .layer(CatchPanicLayer::custom(|_| panicked()))
        .layer(RequestLayer {
            metrics: state.metrics().cloned(),
        })
        .with_state(state)
}

/// The answer to a request whose handling panicked: `500 internal`, with the headers every
/// answer carries.
fn panicked() -> Response {
    let mut answer = ApiError::internal("The server failed while answering.").into_response();
    let headers = answer.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    answer
}

/// The target of the request log's lines (`RUST_LOG=ui_server::request=info`).
pub(crate) const REQUEST_LOG: &str = "ui_server::request";

/// The id of a request's principal, set by the [`Principal`] extractor for the request
/// log (which never sees tokens or cookies).
#[derive(Debug, Clone, Default)]
pub(crate) struct LoggedUser(pub(crate) Arc<OnceLock<String>>);

/// The request log and the request metrics, measured once for both: the method, the
/// route (the pattern, never the raw path or the query string; `unmatched` when no route
/// matched), the status and the latency to the answer's head.
///
/// - The log: one line per request with those and the principal id (`-` when none);
///   `error` level for a 5xx answer, `info` otherwise.
/// - The metrics (`metrics.enabled`): `uiblocks_http_requests_total` and
///   `uiblocks_http_request_duration_seconds`; the request's future is polled with the
///   server's recorder in scope (see [`crate::metrics`]).
///
/// A hand-written layer rather than `from_fn`, so that with the log and the metrics off a
/// request costs one check and no allocation.
#[derive(Debug, Clone)]
struct RequestLayer {
    metrics: Option<Arc<Metrics>>,
}

impl<S> tower::Layer<S> for RequestLayer {
    type Service = RequestLog<S>;

    fn layer(&self, inner: S) -> RequestLog<S> {
        RequestLog {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service of [`RequestLayer`].
#[derive(Debug, Clone)]
struct RequestLog<S> {
    inner: S,
    metrics: Option<Arc<Metrics>>,
}

/// The route label of a matched pattern: the `'static` pattern of [`ROUTES`] when it is
/// one (no allocation), the pattern as matched otherwise (the router nested in a host's),
/// `unmatched` without one.
fn route_label(route: Option<&MatchedPath>) -> std::borrow::Cow<'static, str> {
    match route {
        None => std::borrow::Cow::Borrowed("unmatched"),
        Some(m) => match ROUTES.iter().find(|r| r.path == m.as_str()) {
            Some(r) => std::borrow::Cow::Borrowed(r.path),
            None => std::borrow::Cow::Owned(m.as_str().to_owned()),
        },
    }
}

type Logged = std::pin::Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S> tower::Service<Request> for RequestLog<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = futures_util::future::Either<S::Future, Logged>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        use futures_util::future::Either;
        let log = tracing::enabled!(target: REQUEST_LOG, tracing::Level::ERROR);
        if !log && self.metrics.is_none() {
            return Either::Left(self.inner.call(req));
        }
        let started = std::time::Instant::now();
        let method = req.method().clone();
        let route = req.extensions().get::<MatchedPath>().cloned();
        let user = LoggedUser::default();
        if log {
            req.extensions_mut().insert(user.clone());
        }
        let answer = self.inner.call(req);
        let metrics = self.metrics.clone();
        Either::Right(Box::pin(async move {
            let response = match &metrics {
                Some(m) => {
                    let scoped = crate::metrics::Scoped {
                        inner: Box::pin(answer),
                        metrics: Arc::clone(m),
                    };
                    scoped.await?
                }
                None => answer.await?,
            };
            let status = response.status().as_u16();
            let took = started.elapsed();
            if let Some(m) = &metrics {
                let method = crate::metrics::method_label(&method);
                m.request(method, route_label(route.as_ref()), status, took);
            }
            if log {
                let latency_ms = (took.as_secs_f64() * 1e6).round() / 1e3;
                let route = route.as_ref().map_or("-", MatchedPath::as_str);
                let user = user.0.get().map_or("-", String::as_str);
                if status >= 500 {
                    tracing::error!(target: REQUEST_LOG, %method, %route, status, latency_ms, %user, "request");
                } else {
                    tracing::info!(target: REQUEST_LOG, %method, %route, status, latency_ms, %user, "request");
                }
            }
            Ok(response)
        }))
    }
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "No such route.")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "The route does not take this method.",
    )
}

/// The host part (`host:port`) of an origin `scheme://host:port`.
fn origin_host(origin: &str) -> Option<&str> {
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
}

/// `sync.md` §4.1: a `Sec-Fetch-Site: cross-site` request, or one whose `Origin` is
/// neither the request's own host nor a configured origin, gets `403 forbidden`.
async fn check_origin(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let forbidden =
        || ApiError::new(ErrorCode::Forbidden, "Cross-site requests are refused.").into_response();
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("cross-site"))
    {
        return forbidden();
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let same =
            origin_host(origin).is_some_and(|h| !h.is_empty() && h.eq_ignore_ascii_case(host));
        if !same && !state.origins().iter().any(|o| o == origin) {
            return forbidden();
        }
    }
    next.run(req).await
}

/// A JSON answer with `status`, and `X-UI-Sync-Seq` when the request recorded events
/// itself (the routes of the [`record_writes`] layer get it from the layer).
fn json<T: Serialize>(status: StatusCode, body: &T, seq: Option<Cursor>) -> Response {
    let text = match serde_json::to_string(body) {
        Ok(text) => text,
        Err(e) => return ApiError::internal(format!("The answer failed: {e}")).into_response(),
    };
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], text).into_response();
    if let Some(seq) = seq
        && let Ok(value) = HeaderValue::from_str(&seq.to_string())
    {
        response.headers_mut().insert(SYNC_SEQ_HEADER, value);
    }
    response
}

fn ok<T: Serialize>(body: &T) -> Response {
    json(StatusCode::OK, body, None)
}

// ---- session ----

/// `POST /api/login` (demo only).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginBody {
    /// `alice` or `bob`.
    pub user: String,
}

async fn login(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<LoginBody>,
) -> Result<Response, ApiError> {
    let demo = state
        .demo()
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "No such route."))?;
    let (principal, evicted) = demo
        .login(&body.user)
        .ok_or_else(|| ApiError::new(ErrorCode::Unauthenticated, "No such demo user."))?;
    for session in evicted {
        state.end_session(&session);
    }
    let mut response = ok(&principal);
    if let Ok(cookie) = HeaderValue::from_str(&DemoAuth::cookie(
        &principal.session,
        state.secure_cookies(),
    )) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

async fn logout(State(state): State<AppState>, principal: Principal) -> Response {
    if let Some(demo) = state.demo() {
        demo.logout(&principal.session);
    }
    state.end_session(&principal.session);
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(cookie) = HeaderValue::from_str(&DemoAuth::expired_cookie(state.secure_cookies())) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

async fn me(principal: Principal) -> Response {
    ok(&principal)
}

/// `GET /api/session`: `{"user": <principal>}`, or `{"user": null}` when signed out —
/// `200` either way, so a page can ask at load without a failed request.
async fn session(principal: Result<Principal, ApiError>) -> Response {
    ok(&serde_json::json!({ "user": principal.ok() }))
}

// ---- chats ----

/// `POST /api/chats`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewChatBody {
    /// The title (at most 200 characters).
    #[serde(default)]
    pub title: Option<String>,
    /// One of the principal's projects; the first by default.
    #[serde(default)]
    pub project: Option<String>,
}

/// `GET /api/chats`: the principal's chats, newest first.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ChatList {
    /// The chats.
    pub chats: Vec<Chat>,
}

/// The project a request names, which the user must belong to (`forbidden` otherwise),
/// or the user's first project when it names none.
fn project_of(principal: &Principal, named: Option<String>) -> Result<String, ApiError> {
    match named {
        Some(p) if principal.in_project(&p) => Ok(p),
        Some(_) => Err(ApiError::new(
            ErrorCode::Forbidden,
            "You are not a member of that project.",
        )),
        None => principal
            .projects
            .first()
            .cloned()
            .ok_or_else(|| ApiError::bad_request("You belong to no project.")),
    }
}

async fn create_chat(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(body): JsonBody<NewChatBody>,
) -> Result<Response, ApiError> {
    let title = body.title.unwrap_or_default();
    let project = project_of(&principal, body.project)?;
    let chat = state
        .create_chat(&principal.user_id, &project, &title)
        .await?;
    Ok(json(StatusCode::CREATED, &chat, None))
}

async fn list_chats(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Response, ApiError> {
    let chats = state.store().chats_of(&principal.user_id).await?;
    Ok(ok(&ChatList { chats }))
}

/// The query of `GET /api/chats/{chat}`: which page of items.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatPageQuery {
    /// Only items older than this item (the first item of the page before); the newest
    /// items when absent.
    #[serde(default)]
    pub before: Option<String>,
    /// Items at most: 1 to `ChatLimits::page_items` (the default).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// [`ChatPageQuery`] with `limit` checked against `ChatLimits::page_items` (and defaulted
/// to it): `bad-request` otherwise.
struct PageQuery {
    before: Option<String>,
    limit: usize,
}

impl axum::extract::FromRequestParts<AppState> for PageQuery {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, ApiError> {
        let QueryParams(page) =
            QueryParams::<ChatPageQuery>::from_request_parts(parts, state).await?;
        let max = state.chat_limits().page_items;
        let limit = page.limit.unwrap_or(max);
        if limit == 0 || limit > max {
            return Err(ApiError::bad_request(format!("`limit` must be 1 to {max}")));
        }
        Ok(PageQuery {
            before: page.before,
            limit,
        })
    }
}

async fn read_chat(
    State(state): State<AppState>,
    owned: Owned<PageQuery>,
) -> Result<Response, ApiError> {
    let page = &owned.inner;
    let items = state
        .store()
        .items_page(owned.chat_id(), page.before.as_deref(), page.limit)
        .await?
        .ok_or_else(|| ApiError::bad_request("`before` is not an item of this chat"))?;
    Ok(ok(&ChatDetail {
        chat: owned.chat.row.chat.clone(),
        items: items.items,
        more: items.more,
    }))
}

/// `POST /api/chats/{chat}/messages`: a person's message.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    /// The text.
    pub text: String,
}

async fn post_message(
    State(state): State<AppState>,
    owned: Owned<JsonBody<MessageBody>>,
) -> Result<Response, ApiError> {
    let JsonBody(body) = &owned.inner;
    let item = state.post_message(owned.chat_id(), &body.text).await?;
    Ok(json(StatusCode::CREATED, &item, None))
}

/// `POST /api/chats/{chat}/items`: a new streaming assistant reply.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewReplyBody {
    /// The text so far.
    #[serde(default)]
    pub text: String,
}

async fn new_reply(
    State(state): State<AppState>,
    owned: Owned<JsonBody<NewReplyBody>>,
) -> Result<Response, ApiError> {
    let JsonBody(body) = &owned.inner;
    let item = state.start_reply(owned.chat_id(), &body.text).await?;
    Ok(json(StatusCode::CREATED, &item, None))
}

/// `POST /api/chats/{chat}/items/{item}/delta`: text to append.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeltaBody {
    /// The text to append.
    pub text: String,
}

/// Deltas come fast: their events are recorded without waiting for a seq
/// ([`Writes::NoWait`]).
async fn delta(
    State(state): State<AppState>,
    owned: Owned<JsonBody<DeltaBody>>,
) -> Result<Response, ApiError> {
    let JsonBody(body) = &owned.inner;
    let progress = state
        .append_delta(owned.chat_id(), owned.item_id(), &body.text)
        .await?;
    Ok(ok(&progress))
}

/// `POST /api/chats/{chat}/items/{item}/finish`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishBody {
    /// The reply's whole text, replacing what the deltas sent.
    #[serde(default)]
    pub text: Option<String>,
    /// Answer only once the first readings are frozen (default `true`).
    #[serde(default)]
    pub wait: Option<bool>,
}

async fn finish(
    State(state): State<AppState>,
    owned: Owned<JsonBody<FinishBody>>,
) -> Result<Response, ApiError> {
    let wait = owned.inner.0.wait.unwrap_or(true);
    let text = owned.inner.0.text.clone();
    let item = state
        .finish_reply(owned.chat_id(), owned.item_id(), text, wait)
        .await?;
    Ok(ok(&item))
}

// ---- ui.* ----

/// A cached reading answered as is goes out as the JSON text written when it was cached
/// ([`ui_host::QueryAnswer::into_json`]): the same bytes `ok` would write.
async fn ui_query(
    State(state): State<AppState>,
    Attached(p): Attached<Arc<PreparedQuery>>,
) -> Response {
    match state.queries().query_prepared(&p).await.into_json() {
        Ok(json) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(bytes::Bytes::from_owner(json)),
        )
            .into_response(),
        Err(e) => ApiError::internal(format!("The answer failed: {e}")).into_response(),
    }
}

async fn ui_link(State(state): State<AppState>, Attached(p): Attached<LinkPayload>) -> Response {
    ok(&state.queries().link(&p).await)
}

/// A choice's events are recorded even when it is refused ([`Writes`]).
async fn ui_choice(
    State(state): State<AppState>,
    Attached(p): Attached<ChoicePayload>,
) -> Result<Response, ApiError> {
    let answer = state.queries().choose(&p).await?;
    Ok(ok(&answer.sent))
}

async fn ui_view(
    State(state): State<AppState>,
    Attached(p): Attached<ViewPayload>,
) -> Result<Response, ApiError> {
    let stale = || ApiError::new(ErrorCode::StaleUiBlock, "The block changed or is gone.");
    let block = state
        .store()
        .stored_block(&p.chat_id, &p.item_id, &p.block_id)
        .await?
        .ok_or_else(stale)?
        .block;
    if p.revision.is_some() && p.revision != block.revision {
        return Err(stale());
    }
    let (limits, clock) = (state.limits().ui, Arc::clone(state.clock()));
    let answer = tokio::task::spawn_blocking(move || {
        evaluate(
            &Arc::clone(&block),
            &p,
            limits,
            &ui_host::BudgetClock(&*clock),
        )
    })
    .await
    .map_err(|e| ApiError::internal(format!("The evaluation failed: {e}")))??;
    Ok(ok(&answer))
}

// ---- catalog, schemas ----

/// `GET /api/catalog`: what an agent's prompt needs.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAnswer {
    /// The fence word of UI blocks.
    pub fence_language: String,
    /// The catalog version blocks compile against.
    pub catalog_version: u32,
    /// The short instructions for every session (`uiSessionNote`).
    pub session_note: String,
    /// The long form on request (`uiReferenceText`).
    pub reference_text: String,
    /// The one-line catalog (`uiCompactCatalog`).
    pub compact_catalog: String,
    /// One line per component (`uiCatalogText`).
    pub catalog_text: String,
    /// The sources a block may query.
    pub sources: Vec<SourceInfo>,
}

async fn catalog_texts(State(state): State<AppState>, _: Principal) -> Response {
    ok(&CatalogAnswer {
        fence_language: FENCE_LANGUAGE.to_owned(),
        catalog_version: CATALOG_VERSION,
        session_note: catalog::session_note(FENCE_LANGUAGE),
        reference_text: catalog::reference_text(FENCE_LANGUAGE),
        compact_catalog: catalog::compact_catalog(),
        catalog_text: catalog::catalog_text(),
        sources: state.source_infos(),
    })
}

#[derive(Serialize)]
struct SchemaList {
    types: Vec<&'static str>,
}

async fn schema_list() -> Response {
    ok(&SchemaList {
        types: wire_types(),
    })
}

async fn schema_one(Params(name): Params<String>) -> Result<Response, ApiError> {
    wire_schema(&name)
        .map(|schema| ok(&schema))
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("No wire type `{name}`.")))
}

// ---- source writes ----

/// `POST /api/sources/{name}/rows`: rows to insert through the source's write path.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RowsBody {
    /// The project the rows belong to: one of the principal's (the first by default).
    #[serde(default)]
    pub project: Option<String>,
    /// 1 to 100 records, each checked against the source's `insert.args`.
    pub rows: Vec<Map<String, Json>>,
}

/// What a write answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RowsWritten {
    /// Rows inserted.
    pub rows: usize,
    /// The cursor of the recorded change events (also in `X-UI-Sync-Seq`).
    pub cursor: Option<String>,
}

/// Records its events itself rather than through the [`Writes`] layer: with the change
/// log in the server's database they were appended in the rows' own transaction (the
/// outbox), and the body reports the cursor the header carries.
async fn write_rows(
    State(state): State<AppState>,
    principal: Principal,
    WriteSource(rs): WriteSource,
    Params(name): Params<String>,
    JsonBody(body): JsonBody<RowsBody>,
) -> Result<Response, ApiError> {
    let project = project_of(&principal, body.project)?;
    let mut writer = Map::new();
    writer.insert("user".into(), Json::from(principal.user_id.clone()));
    writer.insert("project".into(), Json::from(project));
    writer.insert("now".into(), Json::from(state.clock().now_ms()));
    let outcome = state
        .sources()
        .insert(state.store(), &name, &writer, body.rows, rs)
        .await
        .map_err(|e| match e {
            InsertError::UnknownSource => {
                ApiError::new(ErrorCode::NotFound, format!("No source `{name}`."))
            }
            InsertError::NotWritable => ApiError::new(
                ErrorCode::NotFound,
                format!("The source `{name}` has no write path."),
            ),
            InsertError::Invalid(m) => ApiError::bad_request(m),
            InsertError::Database(m) => ApiError::internal(format!("The write failed: {m}")),
        })?;
    // A failed event was logged (with its source); the rows are written, and readers'
    // cadence repairs the missed signal (`sync.md` §1, the floor).
    let seq = record_all(state.sync(), outcome.drafts)
        .await
        .cursor
        .or(outcome.cursor);
    let body = RowsWritten {
        rows: outcome.rows,
        cursor: seq.as_ref().map(ToString::to_string),
    };
    Ok(json(StatusCode::OK, &body, seq))
}

/// `POST /ui/changes` (`sync.md` §4.5): a recorder of `sources.toml` (`[recorders.NAME]`,
/// its bearer token) records change events of the sources it may record; answers the
/// cursor after commit. Anything else — a user session, no token — is `403 forbidden`.
///
/// The token is checked, and the recorder's rate, before the body is read: a request
/// without a recorder's token never has its body read.
async fn record_changes(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let token = crate::auth::bearer_token(req.headers());
    let recorder = token
        .and_then(|t| crate::recorders::find(state.sources().recorders(), t))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Forbidden,
                "Recording changes needs a recorder's token ([recorders] in sources.toml).",
            )
        })?;
    if !recorder.admit(state.clock().now_ms()) {
        return Err(ApiError::new(
            ErrorCode::RateLimited,
            format!(
                "The recorder `{}` sent more than {} requests a second.",
                recorder.name(),
                crate::recorders::RECORDER_RATE
            ),
        )
        .with_retry_after(1));
    }
    let crate::extract::JsonObjectOrList(body) = crate::extract::JsonObjectOrList::<
        crate::recorders::ChangesBody,
    >::from_request(req, &state)
    .await?;
    let drafts = crate::recorders::drafts(recorder, body).map_err(|e| match e {
        crate::recorders::Refused::NotAllowed(m) => ApiError::new(ErrorCode::Forbidden, m),
        crate::recorders::Refused::Invalid(m) => ApiError::bad_request(m),
    })?;
    for draft in &drafts {
        state
            .sync()
            .prepare(draft.clone())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    // Recording the events is this request's whole work: one the change log did not
    // take (refused, the feed closed, or not committed within `logFailureGrace` while the
    // log cannot be written) fails it, so the recorder sends it again (a repeated event is
    // harmless: it only makes readers look again).
    let recorded = record_all(state.sync(), drafts).await;
    let cursor = recorded
        .cursor
        .filter(|_| recorded.failed == 0)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unavailable,
                format!(
                    "The change log did not take {} of the events; send them again.",
                    recorded.failed.max(1)
                ),
            )
            .with_retry_after(crate::limits::DEGRADED_RETRY_AFTER_SECS)
        })?;
    let body = serde_json::json!({"cursor": cursor.to_string()});
    Ok(json(StatusCode::OK, &body, Some(cursor)))
}

/// `GET /healthz`: the process is up and serving (always `200 ok`).
async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: `200 ready` when the database answers within 2 s, the change log's
/// writes succeed and its tailer follows it ([`AppState::readiness`]); otherwise `503
/// unavailable` with the stable reason (`database-unreachable`, `database-timed-out`,
/// `change-log-degraded`, `change-log-not-tailing`).
async fn readyz(State(state): State<AppState>) -> Response {
    match state.readiness().await {
        Readiness::Ready => "ready\n".into_response(),
        not => ApiError::new(ErrorCode::Unavailable, "The instance is not ready.")
            .with_reason(not.as_str())
            .into_response(),
    }
}

/// `GET /metrics`: the Prometheus text of this server's recorder (see [`crate::metrics`]).
/// `404 not-found` with `metrics.enabled = false`; with `metrics.token` set, `401
/// unauthenticated` unless `Authorization: Bearer <token>`.
async fn metrics(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let Some(recorder) = state.metrics() else {
        return not_found().await.into_response();
    };
    if let Some(token) = state.metrics_token()
        && !crate::metrics::bearer_matches(&headers, token)
    {
        return ApiError::new(
            ErrorCode::Unauthenticated,
            "Send the metrics token as `Authorization: Bearer <token>`.",
        )
        .into_response();
    }
    let text = recorder.render(&state.metrics_snapshot());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
