//! Security headers, `Secure` cookies and the duplicated `cursor` of `/ui/poll`, on the
//! in-process router.

#![allow(missing_docs)]

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;
use tower::ServiceExt as _;

#[tokio::test]
async fn every_answer_carries_nosniff_and_the_page_a_strict_policy() {
    let app = App::new().await;
    let page = app.call(axum::http::Method::GET, "/", None, None).await;
    assert_eq!(page.status, StatusCode::OK);
    let csp = page.header("content-security-policy").unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    // The page itself needs nothing the policy refuses: no inline script or style.
    let html = match &page.body {
        serde_json::Value::String(html) => html.clone(),
        other => panic!("{other}"),
    };
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "{html}"
    );
    assert!(html.contains("<script src=\"/app.js\"></script>"));

    let alice = app.login("alice").await;
    for answer in [
        app.get("/api/chats", &alice).await,
        app.get("/api/nowhere", &alice).await,
        app.call(axum::http::Method::GET, "/app.js", None, None)
            .await,
    ] {
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    }
    let script = app
        .call(axum::http::Method::GET, "/app.js", None, None)
        .await;
    assert_eq!(script.header("content-security-policy"), Some(csp));
}

#[tokio::test]
async fn cookies_are_secure_when_the_server_is_behind_https() {
    let app = App::new().await;
    let plain = app
        .call(
            axum::http::Method::POST,
            "/api/login",
            None,
            Some(json!({"user": "alice"})),
        )
        .await;
    assert!(!plain.header("set-cookie").unwrap().contains("Secure"));

    let dir = TempDir::new("secure");
    let mut config = config(&dir);
    config.secure_cookies = true;
    let app = App::with_config(config, dir).await;
    let login = app
        .call(
            axum::http::Method::POST,
            "/api/login",
            None,
            Some(json!({"user": "alice"})),
        )
        .await;
    let cookie = login.header("set-cookie").unwrap();
    assert!(
        cookie.contains("; Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let out = app
        .call(
            axum::http::Method::POST,
            "/api/logout",
            Some(&cookie_of(&login.headers)),
            None,
        )
        .await;
    assert!(out.header("set-cookie").unwrap().contains("; Secure"));
}

#[tokio::test]
async fn a_duplicated_cursor_is_a_reset_not_a_bad_request() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let head = app.get("/ui/poll", &alice).await;
    assert_eq!(head.status, StatusCode::OK, "{head:?}");
    let cursor = head.body["cursor"].as_str().unwrap().to_owned();
    let twice = app
        .get(&format!("/ui/poll?cursor={cursor}&cursor={cursor}"), &alice)
        .await;
    assert_eq!(twice.status, StatusCode::OK, "{twice:?}");
    assert_eq!(twice.body["reset"]["reason"], "invalid");
    assert_eq!(twice.body["events"], json!([]));
    // The stream reads the same parameters the same way: hello, then the reset `invalid`;
    // so does an empty cursor on both (a cursor given but not parsing, sync.md §3.8).
    for query in [
        format!("cursor={cursor}&cursor={cursor}"),
        "cursor=".to_owned(),
    ] {
        let response = app
            .router
            .clone()
            .oneshot(
                axum::http::Request::get(format!("/ui/events?{query}"))
                    .header("cookie", &alice)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut sse = Sse::new(response.into_body());
        let within = std::time::Duration::from_secs(10);
        assert_eq!(sse.next(within).await.unwrap().event, "hello", "{query}");
        let reset = sse.next(within).await.unwrap();
        assert_eq!(
            (reset.event.as_str(), &reset.data["reason"]),
            ("reset", &json!("invalid")),
            "{query}"
        );
        let poll = app.get(&format!("/ui/poll?{query}"), &alice).await;
        assert_eq!(poll.body["reset"]["reason"], "invalid", "{query}");
    }
    // Once is still a cursor, and other parameters are ignored.
    let once = app
        .get(&format!("/ui/poll?cursor={cursor}&x=1"), &alice)
        .await;
    assert_eq!(once.body["reset"], json!(null), "{once:?}");
}

/// An authenticator with a bug: it panics.
struct Panics;

#[async_trait::async_trait]
impl ui_server::Authenticator for Panics {
    async fn principal(&self, _: &axum::http::request::Parts) -> Option<ui_server::Principal> {
        panic!("a bug in the host's authenticator");
    }
}

#[tokio::test]
async fn a_panic_answers_500_with_the_headers_of_every_answer() {
    let dir = TempDir::new("panic");
    let state = ui_server::AppState::builder(config(&dir))
        .authenticator(std::sync::Arc::new(Panics))
        .open()
        .await
        .unwrap();
    let req = axum::http::Request::get("/api/me")
        .body(axum::body::Body::empty())
        .unwrap();
    let answer = ui_server::router(state).oneshot(req).await.unwrap();
    assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let header = |name: &str| answer.headers().get(name).map(|v| v.to_str().unwrap());
    assert_eq!(header("x-content-type-options"), Some("nosniff"));
    assert_eq!(header("cache-control"), Some("no-store"));
}
