//! The demo page: `/`, `/app.css` and `/app.js` are served with their content types, and
//! the script knows every component of the catalog.

#![allow(missing_docs)]

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;
use ui_server::{AppState, ServerConfig, SourcesConfig, router};

/// The 36 components, in catalog order (`catalog.md` §2.1).
const COMPONENTS: [&str; 36] = [
    "Summary",
    "Callout",
    "Tag",
    "Progress",
    "Steps",
    "Step",
    "Stats",
    "Stat",
    "EntityList",
    "Entry",
    "Table",
    "Column",
    "Chart",
    "Tabs",
    "Tab",
    "Sections",
    "Section",
    "CodeBlock",
    "Image",
    "Sources",
    "Source",
    "File",
    "Diff",
    "Commit",
    "Node",
    "Checklist",
    "Item",
    "Switch",
    "Slider",
    "Segmented",
    "Option",
    "Button",
    "Show",
    "Each",
    "Choices",
    "Choice",
];

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
    for name in COMPONENTS {
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
    for (user, chats) in [("alice", 2), ("bob", 1)] {
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
