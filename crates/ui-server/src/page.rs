//! The demo page: plain HTML, CSS and JavaScript embedded in the binary and served at
//! `GET /`, `GET /app.css` and `GET /app.js`. The page signs in as a demo user, lists the
//! chats, draws each block through `POST /ui/view`, reads live queries and listens to the
//! change feed (one `EventSource` per page, falling back to `/ui/poll`).

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The page's HTML.
pub(crate) const INDEX_HTML: &str = include_str!("../page/index.html");
/// The page's stylesheet.
pub(crate) const APP_CSS: &str = include_str!("../page/app.css");
/// The page's script.
pub(crate) const APP_JS: &str = include_str!("../page/app.js");

/// The page's `Content-Security-Policy`: its own script, style and requests only (no
/// inline script, no `style` attribute), images also from `data:` (the icon), no plugins,
/// and never inside a frame. (Every answer of the router also carries
/// `X-Content-Type-Options: nosniff`.)
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

pub(crate) async fn css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

pub(crate) async fn js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}
