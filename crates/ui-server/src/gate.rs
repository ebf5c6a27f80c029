//! What the chat routes share, folded out of their handlers the way axum composes: custom
//! extractors for who may touch a chat, and a `middleware::from_fn` layer for how a
//! route's writes reach the change feed.
//!
//! - [`Owned`]: the principal, the `{chat}` (and `{item}`) of the path and the chat itself,
//!   when the principal owns it; `chat-not-found` otherwise (never tells which). It wraps
//!   the rest of the request (`T`: a JSON body, a query), so the checks run in the order the
//!   handlers always ran them: principal (`401`), path (`400`), `T`'s own rejection, then
//!   ownership.
//! - [`Attached`]: a `ui.*` payload whose shape passed the host limits and whose chat the
//!   principal is attached to (`host.md` §6.0): `refused-query` otherwise.
//! - [`record_writes`]: runs the route in a write scope that collects the change events
//!   its store writes produce (tagged with the request's `X-UI-Request-Source`), then
//!   records them (whatever the answer) as the route's [`Writes`] says and answers the
//!   newest cursor in `X-UI-Sync-Seq`. Inside the request log and metrics layer, so what
//!   it records is counted with the request.

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use serde::Deserialize;
use ui_core::HostLimits;
use ui_host::{ChoicePayload, LinkPayload, PreparedQuery};

use crate::auth::Principal;
use crate::cache::CachedChat;
use crate::error::ApiError;
use crate::extract::{Params, SYNC_SEQ_HEADER, decode, json_bytes, request_source};
use crate::state::AppState;
use crate::store::{record_all, write_scope};
use crate::view::ViewPayload;

/// The path parameters of a chat route: `{chat}`, and `{item}` on the item routes.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChatPath {
    pub(crate) chat: String,
    #[serde(default)]
    pub(crate) item: Option<String>,
}

/// A request on a chat the principal owns (see the module docs): the chat, its path and
/// `T` extracted from the rest of the request.
#[derive(Debug)]
pub(crate) struct Owned<T> {
    pub(crate) chat: Arc<CachedChat>,
    pub(crate) path: ChatPath,
    pub(crate) inner: T,
}

impl<T> Owned<T> {
    /// The chat's id.
    pub(crate) fn chat_id(&self) -> &str {
        &self.path.chat
    }

    /// The `{item}` of the path (empty on routes without one).
    pub(crate) fn item_id(&self) -> &str {
        self.path.item.as_deref().unwrap_or_default()
    }
}

/// The chat, when `principal` owns it: `chat-not-found` otherwise (never tells which).
pub(crate) async fn owned(
    state: &AppState,
    principal: &Principal,
    chat_id: &str,
) -> Result<Arc<CachedChat>, ApiError> {
    match state.store().chat(chat_id).await? {
        Some(chat) if chat.row.owner == principal.user_id => Ok(chat),
        _ => Err(ApiError::chat_not_found()),
    }
}

impl<T, M> FromRequest<AppState, M> for Owned<T>
where
    T: FromRequest<AppState, M, Rejection = ApiError> + Send,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let principal = Principal::from_request_parts(&mut parts, state).await?;
        let Params(path) = Params::<ChatPath>::from_request_parts(&mut parts, state).await?;
        let inner = T::from_request(Request::from_parts(parts, body), state).await?;
        let chat = owned(state, &principal, &path.chat).await?;
        Ok(Owned { chat, path, inner })
    }
}

/// A payload of a `ui.*` route: how it is read from a body, its chat and its shape check.
pub(crate) trait UiPayload: Sized + Send {
    /// The payload of a JSON body's bytes: `bad-request` when they are not one.
    fn from_body(bytes: &[u8]) -> Result<Self, ApiError>;
    /// The chat it names.
    fn chat_id(&self) -> &str;
    /// Its shape against the host limits: `bad-request` when it fails.
    fn check(&self, limits: &HostLimits) -> Result<(), ApiError>;
}

/// `UiPayload` for payload types validated with `HostLimits`, each read by its function.
macro_rules! ui_payload {
    ($($t:ty => $read:path),*) => {$(
        impl UiPayload for $t {
            fn from_body(bytes: &[u8]) -> Result<Self, ApiError> {
                $read(bytes)
            }

            fn chat_id(&self) -> &str {
                &self.chat_id
            }

            fn check(&self, limits: &HostLimits) -> Result<(), ApiError> {
                self.validate(limits).map_err(ApiError::bad_request)
            }
        }
    )*};
}

// A `ui.query` payload is shared: a page sends the same body again and again, and a body
// met before on this thread answers with its payload decoded then ([`crate::bodies`]).
ui_payload!(LinkPayload => decode, ChoicePayload => decode);

/// A `ui.query` body decoded once per body and prepared ([`crate::bodies`]).
impl UiPayload for Arc<PreparedQuery> {
    fn from_body(bytes: &[u8]) -> Result<Self, ApiError> {
        crate::bodies::query_payload(bytes)
    }

    fn chat_id(&self) -> &str {
        &self.payload().chat_id
    }

    fn check(&self, limits: &HostLimits) -> Result<(), ApiError> {
        self.payload()
            .validate(limits)
            .map_err(ApiError::bad_request)
    }
}

impl UiPayload for ViewPayload {
    fn from_body(bytes: &[u8]) -> Result<Self, ApiError> {
        decode(bytes)
    }

    fn chat_id(&self) -> &str {
        &self.chat_id
    }

    fn check(&self, limits: &HostLimits) -> Result<(), ApiError> {
        self.validate(limits)
    }
}

/// A `ui.*` payload the principal may send (see the module docs): extracted in the order
/// principal (`401`), body (`415`, `413`, `400`), shape (`400`), attachment (`403
/// refused-query`).
#[derive(Debug)]
pub(crate) struct Attached<P>(pub(crate) P);

impl<P: UiPayload> FromRequest<AppState> for Attached<P> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let principal = Principal::from_request_parts(&mut parts, state).await?;
        let payload = P::from_body(&json_bytes(Request::from_parts(parts, body)).await?)?;
        payload.check(&state.limits().host)?;
        owned(state, &principal, payload.chat_id())
            .await
            .map_err(|_| ApiError::unattached())?;
        Ok(Attached(payload))
    }
}

/// How a route's writes reach the change feed ([`record_writes`]). The events are recorded
/// whatever the answer: each was collected after its store write committed, so a request
/// that failed after a write (a choice refused once its message was stored, a finished
/// reply whose final read failed) still tells the streams of the write that stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// The answer waits for the events' cursor and, on a success, carries it
    /// (`X-UI-Sync-Seq`).
    Wait,
    /// The events are recorded without waiting and without `X-UI-Sync-Seq`: a reply's
    /// deltas come fast.
    NoWait,
}

/// The write layer of a route (see the module docs); mount it with
/// `middleware::from_fn_with_state((state, writes), record_writes)`.
pub(crate) async fn record_writes(
    State((state, writes)): State<(AppState, Writes)>,
    req: Request,
    next: Next,
) -> Response {
    let rs = request_source(req.headers());
    let ids = (writes == Writes::NoWait).then(|| req.uri().path().to_owned());
    let (mut response, drafts) = write_scope(rs, next.run(req)).await;
    let success = response.status().is_success();
    let seq = match writes {
        // A failed event was logged (with its source); the write itself stands, and the
        // page's cadence repairs the missed signal (`sync.md` §1, the floor).
        Writes::Wait => record_all(state.sync(), drafts).await.cursor,
        Writes::NoWait => {
            for draft in drafts {
                if let Err(e) = state.sync().record(draft) {
                    let path = ids.as_deref().unwrap_or_default();
                    tracing::warn!(path, error = %e, "a reply's change could not be recorded");
                }
            }
            None
        }
    };
    if success
        && let Some(seq) = seq
        && let Ok(value) = HeaderValue::from_str(&seq.to_string())
    {
        response.headers_mut().insert(SYNC_SEQ_HEADER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::middleware;
    use axum::routing::post;
    use tower::ServiceExt;
    use ui_sync::{Audience, AudienceSet, ReadAfter};

    use super::*;

    /// A route that creates a chat for `alice` and then fails, as a handler whose last
    /// step (a read, a send) failed after its write committed.
    async fn writes_then_fails(State(state): State<AppState>) -> StatusCode {
        state
            .store()
            .create_chat("alice", "web", "t")
            .await
            .unwrap();
        StatusCode::INTERNAL_SERVER_ERROR
    }

    #[tokio::test]
    async fn a_request_that_fails_after_its_write_still_records_the_event() {
        let (state, dir) = crate::state::temp_state("gate").await;
        let alice = AudienceSet::new([Audience::user("alice")], 16);
        let start = state
            .sync()
            .read_after(None, &alice)
            .await
            .unwrap()
            .cursor()
            .to_string();
        for (path, writes) in [("/wait", Writes::Wait), ("/no-wait", Writes::NoWait)] {
            let app = Router::new()
                .route(path, post(writes_then_fails))
                .layer(middleware::from_fn_with_state(
                    (state.clone(), writes),
                    record_writes,
                ))
                .with_state(state.clone());
            let response = app
                .oneshot(Request::post(path).body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            // A failed request carries no cursor.
            assert!(response.headers().get(SYNC_SEQ_HEADER).is_none());
        }
        // `NoWait` records without waiting for the row: poll for a bounded while.
        let mut events = Vec::new();
        for _ in 0..250 {
            match state.sync().read_after(Some(&start), &alice).await.unwrap() {
                ReadAfter::Events { events: got, .. } => events = got,
                other => panic!("{other:?}"),
            }
            if events.len() >= 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            events
                .iter()
                .all(|e| e.source == crate::store::CHATS_SOURCE)
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
