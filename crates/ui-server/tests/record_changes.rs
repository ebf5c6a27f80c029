//! `POST /ui/changes`: a recorder of `sources.toml` records change events for data written
//! outside the server; nobody else can.

#![allow(missing_docs)]

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use serde_json::{Value as Json, json};
use ui_server::SourcesConfig;
use ui_sync::{AudienceSet, ReadAfter};

const TOKEN: &str = "a-recorder-token-0123456789";

fn recorder_sources() -> String {
    format!("{SOURCES}\n[recorders.ci]\ntoken = \"{TOKEN}\"\nsources = [\"ci.runs\"]\n")
}

async fn record(app: &App, token: Option<&str>, cookie: Option<&str>, body: Json) -> Answer {
    let mut req = Request::post("/ui/changes").header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    app.send(req.body(Body::from(body.to_string())).unwrap())
        .await
}

#[tokio::test]
async fn a_recorder_records_and_nobody_else_can() {
    let dir = TempDir::new("record-changes");
    let mut config = config(&dir);
    config.sources = SourcesConfig::Inline(recorder_sources());
    let app = App::with_config(config, dir).await;
    let sync = app.state.sync().clone();
    let web = AudienceSet::new(ui_sync::parse_audience("project:web"), 16);
    let start = sync
        .read_after(None, &web)
        .await
        .unwrap()
        .cursor()
        .to_string();

    let change = json!({"source": "ci.runs", "audience": {"kind": "project", "id": "web"},
                        "key": "branch:main"});
    let a = record(&app, Some(TOKEN), None, change.clone()).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    let cursor = a.body["cursor"].as_str().unwrap().to_owned();
    assert_eq!(a.header("x-ui-sync-seq"), Some(cursor.as_str()));
    match sync.read_after(Some(&start), &web).await.unwrap() {
        ReadAfter::Events { events, .. } => {
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0].source, "ci.runs");
            assert!(events[0].key.is_some());
        }
        other => panic!("{other:?}"),
    }

    // A list of changes, the whole source of another project.
    let many = json!([change, {"source": "ci.runs", "audience": {"kind": "project", "id": "ops"}}]);
    let a = record(&app, Some(TOKEN), None, many).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");

    // Nobody else: no token, a user's session, a wrong token.
    let alice = app.login("alice").await;
    for (token, cookie) in [
        (None, None),
        (None, Some(alice.as_str())),
        (Some("a-recorder-token-0123456780"), None),
    ] {
        let a = record(&app, token, cookie, change.clone()).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{a:?}");
        assert_eq!(a.code(), "forbidden");
    }
    // Only its sources; only real audiences.
    let other = json!({"source": "other.source", "audience": {"kind": "project", "id": "web"}});
    assert_eq!(
        record(&app, Some(TOKEN), None, other).await.code(),
        "forbidden"
    );
    let global = json!({"source": "ci.runs", "audience": {"kind": "global", "id": ""}});
    assert_eq!(
        record(&app, Some(TOKEN), None, global).await.code(),
        "bad-request"
    );
    let empty = record(&app, Some(TOKEN), None, json!([])).await;
    assert_eq!(empty.code(), "bad-request");
    // The body is a change or an array of them (`sync.md` §4.5), nothing else.
    for wrong in [
        json!("ci.runs"),
        json!(7),
        json!({"changes": [change.clone()]}),
    ] {
        let a = record(&app, Some(TOKEN), None, wrong).await;
        assert_eq!(a.code(), "bad-request", "{a:?}");
    }

    // 50 requests a second per recorder.
    let refused = json!({"source": "other.source", "audience": {"kind": "project", "id": "web"}});
    let mut limited = 0;
    for _ in 0..80 {
        if record(&app, Some(TOKEN), None, refused.clone())
            .await
            .status
            == StatusCode::TOO_MANY_REQUESTS
        {
            limited += 1;
        }
    }
    assert!(limited > 0, "80 requests at once were never rate-limited");
    let a = record(&app, Some(TOKEN), None, refused).await;
    assert_eq!(a.code(), "rate-limited", "{a:?}");
    assert_eq!(a.header("retry-after"), Some("1"), "{a:?}");
}

#[tokio::test]
async fn without_a_recorders_token_the_body_is_never_read() {
    let dir = TempDir::new("record-changes");
    let mut config = config(&dir);
    config.sources = SourcesConfig::Inline(recorder_sources());
    let app = App::with_config(config, dir).await;
    // No token, a wrong token: 403 whatever the body, also one of the wrong type, too
    // large or not JSON at all.
    let huge = "x".repeat(ui_server::limits::MAX_BODY_BYTES + 1);
    for token in [None, Some("a-recorder-token-0123456780")] {
        for (content_type, body) in [
            ("text/plain", "ci.runs".to_owned()),
            ("application/json", "{not json".to_owned()),
            ("application/json", huge.clone()),
        ] {
            let mut req = Request::post("/ui/changes").header("content-type", content_type);
            if let Some(t) = token {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            let a = app.send(req.body(Body::from(body)).unwrap()).await;
            assert_eq!(
                (a.status, a.code()),
                (StatusCode::FORBIDDEN, "forbidden"),
                "{token:?} {content_type}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_the_change_log_cannot_take_are_503_not_200() {
    let dir = TempDir::new("record-changes");
    let mut config = config(&dir);
    config.sources = SourcesConfig::Inline(recorder_sources());
    config.sync_limits = config.sync_limits.with("logFailureGrace", 300).unwrap();
    let app = App::with_config(config, dir).await;
    // The log's table is gone: the appender fails and retries until it comes back.
    let db = rusqlite::Connection::open(app.dir.0.join("app.db")).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    db.execute_batch("ALTER TABLE ui_sync_events RENAME TO ui_sync_events_gone;")
        .unwrap();

    let change = json!({"source": "ci.runs", "audience": {"kind": "project", "id": "web"}});
    let a = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        record(&app, Some(TOKEN), None, change.clone()),
    )
    .await
    .expect("the request is answered within logFailureGrace, not held for the outage");
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{a:?}"
    );
    assert_eq!(a.header("retry-after"), Some("10"));
    assert!(a.header("x-ui-sync-seq").is_none());
    // A host's membership change is not held for the outage either.
    let changed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        app.state.membership_changed("alice"),
    )
    .await
    .expect("answered within logFailureGrace");
    assert!(
        matches!(changed, Err(ui_sync::SyncError::Store(_))),
        "{changed:?}"
    );

    // Once the log is back, the same change is recorded.
    db.execute_batch("ALTER TABLE ui_sync_events_gone RENAME TO ui_sync_events;")
        .unwrap();
    let a = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        record(&app, Some(TOKEN), None, change),
    )
    .await
    .expect("answered");
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
}
