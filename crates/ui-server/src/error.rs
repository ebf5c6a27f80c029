//! The server's one error type: a stable [`ErrorCode`], a message and an optional stable
//! reason, mapped in one place to an HTTP status and the JSON body
//! `{"error":{"code","message","reason"?}}` (`host.md` §14.3, §17.9; `sync.md` §4.1).

use std::borrow::Cow;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use ui_core::Code;
use ui_host::WireRefusal;

/// A stable error code of the server's HTTP API. The strings never change; new codes may
/// be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The request has the wrong shape: bad JSON, an unknown field, a value out of range.
    BadRequest,
    /// A JSON body was sent without `Content-Type: application/json`.
    UnsupportedMediaType,
    /// No session: sign in first.
    Unauthenticated,
    /// A cross-site request, or an `Origin` the server does not serve.
    Forbidden,
    /// No such route, item, schema or source.
    NotFound,
    /// The route exists but not for this method.
    MethodNotAllowed,
    /// The chat does not exist or is not the caller's (never tells which).
    ChatNotFound,
    /// The item is not (or no longer) a streaming assistant item.
    ItemNotStreaming,
    /// The chat holds as many items as it may (`ChatLimits::chat_items`).
    ChatFull,
    /// A read or choice was refused: not the caller's chat, access, source, declaration
    /// or host.
    RefusedQuery,
    /// The block changed since the page drew it.
    StaleUiBlock,
    /// A query value the choice relied on is no longer held.
    StaleUiQuery,
    /// The block's one choice was already sent.
    UiAlreadyAnswered,
    /// The choice cannot be sent.
    RefusedChoice,
    /// An interpreter failure (`refused_binding`, `invalid_value`, …), by its own code.
    Failure(Code),
    /// The body is larger than the server accepts.
    PayloadTooLarge,
    /// Too many requests of this session; retry after `Retry-After` seconds.
    RateLimited,
    /// The session holds too many event streams; poll instead.
    TooManyStreams,
    /// The server cannot answer now (degraded feed, busy catch-up, too many
    /// connections); retry later.
    Unavailable,
    /// The request's body did not arrive within the body-read timeout.
    RequestTimeout,
    /// An uncoded failure escaped a handler.
    Internal,
}

impl ErrorCode {
    /// The stable string.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad-request",
            ErrorCode::UnsupportedMediaType => "unsupported-media-type",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not-found",
            ErrorCode::MethodNotAllowed => "method-not-allowed",
            ErrorCode::ChatNotFound => "chat-not-found",
            ErrorCode::ItemNotStreaming => "item-not-streaming",
            ErrorCode::ChatFull => "chat-full",
            ErrorCode::RefusedQuery => "refused-query",
            ErrorCode::StaleUiBlock => "stale-ui-block",
            ErrorCode::StaleUiQuery => "stale-ui-query",
            ErrorCode::UiAlreadyAnswered => "ui-already-answered",
            ErrorCode::RefusedChoice => "refused-choice",
            ErrorCode::Failure(code) => code.as_str(),
            ErrorCode::PayloadTooLarge => "payload-too-large",
            ErrorCode::RateLimited => "rate-limited",
            ErrorCode::TooManyStreams => "too-many-streams",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::RequestTimeout => "request-timeout",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status of the code: the one mapping of the server.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden | ErrorCode::RefusedQuery => StatusCode::FORBIDDEN,
            ErrorCode::NotFound | ErrorCode::ChatNotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::ItemNotStreaming
            | ErrorCode::ChatFull
            | ErrorCode::StaleUiBlock
            | ErrorCode::StaleUiQuery
            | ErrorCode::UiAlreadyAnswered => StatusCode::CONFLICT,
            ErrorCode::RefusedChoice | ErrorCode::Failure(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::RateLimited | ErrorCode::TooManyStreams => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Every code of the server's own, in the order of `docs/http-api.md`: all but
    /// [`ErrorCode::Failure`], whose strings are the interpreter's [`Code`]s.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::BadRequest,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::ChatNotFound,
        ErrorCode::ItemNotStreaming,
        ErrorCode::ChatFull,
        ErrorCode::RefusedQuery,
        ErrorCode::StaleUiBlock,
        ErrorCode::StaleUiQuery,
        ErrorCode::UiAlreadyAnswered,
        ErrorCode::RefusedChoice,
        ErrorCode::PayloadTooLarge,
        ErrorCode::RateLimited,
        ErrorCode::TooManyStreams,
        ErrorCode::Unavailable,
        ErrorCode::RequestTimeout,
        ErrorCode::Internal,
    ];

    /// The code named `text`: a server code, a wire code of `host.md` §14.3 or an
    /// interpreter code of §14.4.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == text)
            .or_else(|| Code::parse(text).map(ErrorCode::Failure))
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed request: its code, a message for people, the optional stable reason code of a
/// UI refusal (`stale-read`, `access-unavailable`, …) and an optional `Retry-After`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    code: ErrorCode,
    message: Cow<'static, str>,
    reason: Option<String>,
    retry_after: Option<u64>,
}

/// The body of every error response: `{"error": {code, message, reason?}}`.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "WireError", deny_unknown_fields)]
pub(crate) struct Envelope<'a> {
    /// The error.
    error: Body<'a>,
}

/// `{code, message, reason?}` of an error.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "ErrorDetail", deny_unknown_fields)]
struct Body<'a> {
    /// The stable code.
    code: &'a str,
    /// Text for people.
    message: &'a str,
    /// The stable reason code of a UI refusal (`stale-read`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        ApiError {
            code,
            message: message.into(),
            reason: None,
            retry_after: None,
        }
    }

    /// `bad-request` with `message`.
    pub fn bad_request(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// `chat-not-found`: the same answer for a missing chat and another person's.
    pub fn chat_not_found() -> Self {
        Self::new(ErrorCode::ChatNotFound, "No such chat.")
    }

    /// `refused-query` for a request about a chat the caller is not attached to.
    pub fn unattached() -> Self {
        Self::new(
            ErrorCode::RefusedQuery,
            "This client is not attached to the chat.",
        )
    }

    /// `unauthenticated`.
    pub fn unauthenticated() -> Self {
        Self::new(ErrorCode::Unauthenticated, "Sign in first.")
    }

    /// `internal`, logging nothing but the message given.
    pub fn internal(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// The same error with a stable reason code.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The same error with a `Retry-After` of `secs` seconds.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The stable reason code, if any.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The JSON body text.
    pub fn body(&self) -> String {
        let envelope = Envelope {
            error: Body {
                code: self.code.as_str(),
                message: &self.message,
                reason: self.reason.as_deref(),
            },
        };
        // Strings only: serialising cannot fail.
        serde_json::to_string(&envelope).unwrap_or_default()
    }
}

impl From<WireRefusal> for ApiError {
    /// A refusal of the host service: its wire code (or interpreter code) and message,
    /// with the stable code as the reason (`host.md` §17.9). An unknown code becomes
    /// `refused-choice` (§12.1 step 5: "any other error").
    fn from(refusal: WireRefusal) -> Self {
        let code = ErrorCode::parse(&refusal.wire).unwrap_or(ErrorCode::RefusedChoice);
        let mut error = ApiError::new(code, refusal.message);
        error.reason = refusal.code;
        error
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.code == ErrorCode::Internal {
            tracing::error!(message = %self.message, "internal error");
        }
        let mut response = (self.code.status(), self.body()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A failure while opening or running the server (configuration, database, socket).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The sources file or another setting is invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// A bound of connections or of shutdown is out of its allowed range.
    #[error("configuration: {0}")]
    OutOfRange(#[from] crate::config::OutOfRange),
    /// The database could not be opened or written.
    #[error("database: {0}")]
    Database(String),
    /// The change feed failed to start.
    #[error("change feed: {0}")]
    Sync(#[from] ui_sync::SyncError),
    /// The port could not be bound (taken, or not allowed).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The socket could not be served.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl From<rusqlite::Error> for ServerError {
    fn from(e: rusqlite::Error) -> Self {
        ServerError::Database(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The place of `code` in [`ErrorCode::ALL`]. A new variant fails to compile here
    /// until it has an arm, and the test below fails until it is listed in `ALL` (which
    /// `docs/http-api.md` must then document: `tests/http_api.rs`).
    fn place(code: ErrorCode) -> Option<usize> {
        Some(match code {
            ErrorCode::BadRequest => 0,
            ErrorCode::UnsupportedMediaType => 1,
            ErrorCode::Unauthenticated => 2,
            ErrorCode::Forbidden => 3,
            ErrorCode::NotFound => 4,
            ErrorCode::MethodNotAllowed => 5,
            ErrorCode::ChatNotFound => 6,
            ErrorCode::ItemNotStreaming => 7,
            ErrorCode::ChatFull => 8,
            ErrorCode::RefusedQuery => 9,
            ErrorCode::StaleUiBlock => 10,
            ErrorCode::StaleUiQuery => 11,
            ErrorCode::UiAlreadyAnswered => 12,
            ErrorCode::RefusedChoice => 13,
            ErrorCode::PayloadTooLarge => 14,
            ErrorCode::RateLimited => 15,
            ErrorCode::TooManyStreams => 16,
            ErrorCode::Unavailable => 17,
            ErrorCode::RequestTimeout => 18,
            ErrorCode::Internal => 19,
            ErrorCode::Failure(_) => return None,
        })
    }

    #[test]
    fn all_lists_every_code_once() {
        assert_eq!(ErrorCode::ALL.len(), 20);
        for (i, code) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(place(*code), Some(i), "{code}");
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
        }
        let failure = ErrorCode::Failure(Code::InvalidQuery);
        assert_eq!(place(failure), None);
        assert_eq!(ErrorCode::parse("invalid_query"), Some(failure));
    }
}
