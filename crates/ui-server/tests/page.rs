//! The demo page: `/`, `/app.css` and `/app.js` are served with their content types, the
//! script knows every component of the catalog, the page's session route answers signed
//! out without an error, and the demo replies compile cleanly.

#![allow(missing_docs)]

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value as Json, json};
use tower::ServiceExt;
use ui_server::{AppState, ServerConfig, SourcesConfig, router};

async fn app(tag: &str, demo: bool) -> (axum::Router, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("ui-server-page-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = ServerConfig::new(dir.join("app.db"));
    config.demo = demo;
    config.sources = SourcesConfig::Inline(ui_server::DEMO_SOURCES.into());
    let state = AppState::open(config).await.unwrap();
    (router(state), dir)
}

async fn get(app: &axum::Router, path: &str) -> (StatusCode, String, String) {
    let response = app
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn the_page_and_its_assets_are_served() {
    let (app, dir) = app("assets", true).await;

    let (status, ct, html) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(html.contains("<script src=\"/app.js\">"));
    assert!(html.contains("href=\"/app.css\""));
    assert!(html.contains("data-user=\"alice\"") && html.contains("data-user=\"bob\""));

    let (status, ct, css) = get(&app, "/app.css").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/css"), "{ct}");
    assert!(css.contains(".block"));

    let (status, ct, js) = get(&app, "/app.js").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/javascript"), "{ct}");
    for path in [
        "/ui/view",
        "/ui/query",
        "/ui/link",
        "/ui/choice",
        "/ui/events",
        "/ui/poll",
        "/api/sources/ci.runs/rows",
    ] {
        assert!(js.contains(path), "app.js never calls {path}");
    }
    assert_eq!(
        js.matches("new EventSource(").count(),
        1,
        "one stream per page"
    );

    // Unknown paths stay JSON errors.
    let (status, ct, _) = get(&app, "/nope.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(ct.starts_with("application/json"), "{ct}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn the_script_knows_every_component() {
    let (app, dir) = app("components", false).await;
    let (status, _, js) = get(&app, "/app.js").await;
    assert_eq!(status, StatusCode::OK);
    let components = ui_core::catalog::components();
    assert_eq!(components.len(), 36, "catalog.md §2.1 lists 36 components");
    for name in components.iter().map(|c| c.name()) {
        let as_renderer = format!("  {name}(");
        assert!(
            js.contains(&as_renderer),
            "app.js has no renderer for `{name}`"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn the_demo_seed_gives_alice_and_bob_chats() {
    let dir = std::env::temp_dir().join(format!("ui-server-page-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = ServerConfig::new(dir.join("app.db"));
    config.demo = true;
    config.sources = SourcesConfig::Inline(ui_server::DEMO_SOURCES.into());
    let state = AppState::open(config).await.unwrap();
    ui_server::seed_demo(&state).await.unwrap();
    // Seeding twice does not duplicate.
    ui_server::seed_demo(&state).await.unwrap();
    let app = router(state);
    for (user, chats) in [("alice", 3), ("bob", 1)] {
        let login = Request::post("/api/login")
            .header("content-type", "application/json")
            .body(Body::from(format!(r#"{{"user":"{user}"}}"#)))
            .unwrap();
        let response = app.clone().oneshot(login).await.unwrap();
        let cookie = response
            .headers()
            .get(header::SET_COOKIE)
            .unwrap()
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let list = Request::get("/api/chats")
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(list).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["chats"].as_array().unwrap().len(), chats, "{user}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `GET path` with `cookie` (if any): the status and the JSON body.
async fn get_json(app: &axum::Router, path: &str, cookie: Option<&str>) -> (StatusCode, Json) {
    let mut request = Request::get(path);
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Json::Null))
}

/// Signs in as the demo user `user`: the session cookie (`name=value`).
async fn sign_in(app: &axum::Router, user: &str) -> String {
    let login = Request::post("/api/login")
        .header("content-type", "application/json")
        .body(Body::from(format!(r#"{{"user":"{user}"}}"#)))
        .unwrap();
    let response = app.clone().oneshot(login).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response
        .headers()
        .get(header::SET_COOKIE)
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// The page asks `GET /api/session` when it loads: `200` signed in or out, so a signed-out
/// load has no failed request; `GET /api/me` keeps answering `401` then.
#[tokio::test]
async fn the_session_route_answers_200_signed_in_or_out() {
    let (app, dir) = app("session", true).await;
    assert_eq!(
        get_json(&app, "/api/session", None).await,
        (StatusCode::OK, json!({"user": null}))
    );
    assert_eq!(
        get_json(&app, "/api/session", Some("uiblocks_session=forged")).await,
        (StatusCode::OK, json!({"user": null}))
    );
    let (status, body) = get_json(&app, "/api/me", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["code"], "unauthenticated", "{body}");

    let cookie = sign_in(&app, "alice").await;
    assert_eq!(
        get_json(&app, "/api/session", Some(&cookie)).await,
        (
            StatusCode::OK,
            json!({"user": {"userId": "alice", "projects": ["web"]}})
        )
    );
    let (_, me) = get_json(&app, "/api/me", Some(&cookie)).await;
    assert_eq!(me, json!({"userId": "alice", "projects": ["web"]}));
    std::fs::remove_dir_all(&dir).ok();
}

/// Every demo reply compiles without a diagnostic under the demo's sources, except the two
/// the content reply shows on purpose (an unknown component and a bad tone, drawn as their
/// fallbacks).
#[tokio::test]
async fn the_demo_replies_compile_without_diagnostics() {
    let dir = std::env::temp_dir().join(format!("ui-server-page-replies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = ServerConfig::new(dir.join("app.db"));
    config.demo = true;
    config.sources = SourcesConfig::Inline(ui_server::DEMO_SOURCES.into());
    let state = AppState::open(config).await.unwrap();
    ui_server::seed_demo(&state).await.unwrap();
    let app = router(state);
    let mut replies = 0;
    for user in ["alice", "bob"] {
        let cookie = sign_in(&app, user).await;
        let (_, list) = get_json(&app, "/api/chats", Some(&cookie)).await;
        for chat in list["chats"].as_array().unwrap() {
            let path = format!("/api/chats/{}", chat["id"].as_str().unwrap());
            let (status, detail) = get_json(&app, &path, Some(&cookie)).await;
            assert_eq!(status, StatusCode::OK, "{detail}");
            for item in detail["items"].as_array().unwrap() {
                let Some(blocks) = item["ui"].as_array() else {
                    continue;
                };
                for block in blocks {
                    replies += 1;
                    let codes: Vec<&str> = block["diagnostics"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d["code"].as_str().unwrap())
                        .collect();
                    let text = item["text"].as_str().unwrap();
                    let expected: &[&str] = if text.starts_with("The fix touches two files.") {
                        &["unknown_component", "invalid_props"]
                    } else {
                        &[]
                    };
                    assert_eq!(codes, expected, "{user}: {text}\n{block:#}");
                }
            }
        }
    }
    assert_eq!(replies, 6, "the six demo replies hold one block each");
    std::fs::remove_dir_all(&dir).ok();
}
