//! `GET /metrics` and `GET /readyz`: the metrics appear and change with requests, source
//! reads, cache hits and event streams; each server keeps its own; the access rule; the
//! readiness probe's answers.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{App, REPLY, Server, TempDir, config, runs_query};
use serde_json::json;
use ui_server::{Secret, ServerConfig};

const SECS: Duration = Duration::from_secs(5);

/// The value of the sample of `name` whose labels include `labels` (summed over the other
/// labels), or `None` when there is none.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
        if metric != name {
            continue;
        }
        let wanted = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        if wanted {
            *found.get_or_insert(0.0) += value.parse::<f64>().unwrap();
        }
    }
    found
}

async fn metrics_text(app: &App, auth: Option<&str>) -> (StatusCode, String) {
    let mut req = Request::get("/metrics");
    if let Some(auth) = auth {
        req = req.header("authorization", auth);
    }
    let a = app.send(req.body(Body::empty()).unwrap()).await;
    let text = match a.body {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    };
    (a.status, text)
}

async fn scrape(app: &App) -> String {
    let (status, text) = metrics_text(app, None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    text
}

#[tokio::test]
async fn requests_reads_and_cache_hits_are_counted_by_route_pattern() {
    let app = App::new().await;
    let before = scrape(&app).await;
    assert!(
        before.contains("# TYPE uiblocks_streams_open gauge"),
        "{before}"
    );
    assert_eq!(
        sample(
            &before,
            "uiblocks_http_requests_total",
            &[("route", "/api/login")]
        ),
        None
    );

    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    for _ in 0..2 {
        let a = app
            .post("/ui/query", &alice, runs_query(&chat, &item, json!({})))
            .await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        assert_eq!(a.body["state"], "fresh", "{a:?}");
    }
    let missing = app.get("/api/chats/no-such-chat", &alice).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let read = app.get(&format!("/api/chats/{chat}"), &alice).await;
    assert_eq!(read.status, StatusCode::OK);

    let text = scrape(&app).await;
    let requests = |labels: &[(&str, &str)]| sample(&text, "uiblocks_http_requests_total", labels);
    assert_eq!(
        requests(&[
            ("method", "POST"),
            ("route", "/api/login"),
            ("status", "200")
        ]),
        Some(1.0)
    );
    assert_eq!(
        requests(&[("route", "/ui/query"), ("status", "200")]),
        Some(2.0)
    );
    // The route pattern, never the raw path.
    assert_eq!(
        requests(&[("route", "/api/chats/{chat}"), ("status", "404")]),
        Some(1.0)
    );
    assert_eq!(
        requests(&[("route", "/api/chats/{chat}"), ("status", "200")]),
        Some(1.0)
    );
    assert!(!text.contains(&chat), "a raw path leaked into a label");
    assert!(!text.contains("no-such-chat"));
    // The scrape before counts; this one is answered after it is rendered.
    assert_eq!(requests(&[("route", "/metrics")]), Some(1.0));
    // Latency histogram with buckets, one observation per request.
    assert_eq!(
        sample(
            &text,
            "uiblocks_http_request_duration_seconds_count",
            &[("route", "/ui/query")]
        ),
        Some(2.0)
    );
    assert!(
        sample(
            &text,
            "uiblocks_http_request_duration_seconds_bucket",
            &[("route", "/ui/query"), ("le", "+Inf")]
        ) == Some(2.0),
        "{text}"
    );
    // The reply's freeze read the source once; the page's two queries came from the cache.
    let reads = sample(
        &text,
        "uiblocks_source_reads_total",
        &[("source", "ci.runs"), ("outcome", "ok")],
    )
    .unwrap_or(0.0);
    assert!(reads >= 1.0, "{text}");
    let hits = sample(&text, "uiblocks_cache_hits_total", &[]).unwrap_or(0.0);
    assert!(hits >= 1.0, "{text}");
    assert_eq!(
        reads + hits,
        3.0,
        "every read is a source read or a cache hit: {text}"
    );
    assert_eq!(
        sample(
            &text,
            "uiblocks_source_read_duration_seconds_count",
            &[("source", "ci.runs")]
        ),
        Some(reads)
    );
    // The replies' writes were recorded in the change log.
    assert!(sample(&text, "uiblocks_sync_events_appended_total", &[]).unwrap() >= 1.0);
    assert_eq!(sample(&text, "uiblocks_read_slots_in_use", &[]), Some(0.0));
    assert_eq!(sample(&text, "uiblocks_streams_open", &[]), Some(0.0));
}

#[tokio::test]
async fn each_server_keeps_its_own_figures() {
    let (a, b) = (App::new().await, App::new().await);
    for _ in 0..3 {
        a.login("alice").await;
    }
    b.login("bob").await;
    let route = [("route", "/api/login")];
    let (ta, tb) = (scrape(&a).await, scrape(&b).await);
    assert_eq!(
        sample(&ta, "uiblocks_http_requests_total", &route),
        Some(3.0)
    );
    assert_eq!(
        sample(&tb, "uiblocks_http_requests_total", &route),
        Some(1.0)
    );
}

#[tokio::test]
async fn a_token_guards_metrics_and_disabled_metrics_are_not_served() {
    let dir = TempDir::new("metrics-token");
    let mut guarded = config(&dir);
    guarded.metrics.token = Some(Secret::new("metrics-token-0123456789"));
    let app = App::with_config(guarded, dir).await;
    for auth in [
        None,
        Some("Bearer wrong-token-0123456789"),
        Some("metrics-token-0123456789"),
    ] {
        let (status, text) = metrics_text(&app, auth).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth:?}: {text}");
        assert!(text.contains("unauthenticated"));
    }
    let (status, text) = metrics_text(&app, Some("Bearer metrics-token-0123456789")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("uiblocks_http_requests_total"));

    let dir = TempDir::new("metrics-off");
    let mut off: ServerConfig = config(&dir);
    off.metrics.enabled = false;
    let app = App::with_config(off, dir).await;
    app.login("alice").await;
    let (status, text) = metrics_text(&app, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{text}");
    assert!(text.contains("not-found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_appended_events_and_delivery_lag_are_measured() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let scrape = || async {
        let a = server.get("/metrics", &alice).await;
        assert_eq!(a.status, StatusCode::OK);
        a.body.as_str().unwrap().to_owned()
    };
    let before = scrape().await;
    assert_eq!(sample(&before, "uiblocks_streams_open", &[]), Some(0.0));
    let appended = sample(&before, "uiblocks_sync_events_appended_total", &[]).unwrap();

    let mut stream = server.events(&alice, "").await;
    assert_eq!(stream.next(SECS).await.unwrap().event, "hello");
    let open = scrape().await;
    assert_eq!(sample(&open, "uiblocks_streams_open", &[]), Some(1.0));
    // Registered when the server starts, so it is there, empty, before any delivery.
    assert_eq!(
        sample(&open, "uiblocks_sync_delivery_lag_seconds_count", &[]),
        Some(0.0)
    );

    let row = json!({"rows": [{"branch": "main", "name": "web build 3", "status": "failed"}]});
    let wrote = server.post("/api/sources/ci.runs/rows", &alice, row).await;
    assert_eq!(wrote.status, StatusCode::OK, "{wrote:?}");
    let frames = stream.until("changes", SECS).await;
    assert!(!frames.is_empty());

    let after = scrape().await;
    assert!(
        sample(&after, "uiblocks_sync_events_appended_total", &[]).unwrap() > appended,
        "{after}"
    );
    let lag_count = sample(&after, "uiblocks_sync_delivery_lag_seconds_count", &[]).unwrap();
    assert!(lag_count >= 1.0, "{after}");
    let lag_sum = sample(&after, "uiblocks_sync_delivery_lag_seconds_sum", &[]).unwrap();
    assert!(lag_sum / lag_count < 5.0, "{after}");
    assert_eq!(
        sample(
            &after,
            "uiblocks_http_requests_total",
            &[("route", "/ui/events"), ("status", "200")]
        ),
        Some(1.0)
    );
    drop(stream);
    // The stream's slot is given back once the server sees the client gone.
    let deadline = tokio::time::Instant::now() + SECS;
    loop {
        let now = scrape().await;
        if sample(&now, "uiblocks_streams_open", &[]) == Some(0.0) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{now}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}

async fn ready(app: &App) -> common::Answer {
    app.send(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
}

#[tokio::test]
async fn readyz_is_503_when_the_database_is_unreachable() {
    let app = App::new().await;
    let a = ready(&app).await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (StatusCode::OK, Some("ready\n"))
    );
    // The database's files disappear (a lost volume); the open connections cannot tell.
    std::fs::remove_dir_all(&app.dir.0).unwrap();
    let a = ready(&app).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{a:?}");
    assert_eq!(a.code(), "unavailable");
    assert_eq!(a.body["error"]["reason"], "database-unreachable");
    app.state.sync().shutdown().await;
}

#[tokio::test]
async fn readyz_is_503_when_the_change_log_is_not_tailed() {
    let app = App::new().await;
    assert_eq!(ready(&app).await.status, StatusCode::OK);
    // The change feed stops: its tailer no longer follows the log.
    app.state.sync().shutdown().await;
    assert!(!app.state.sync().tailing());
    let a = ready(&app).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{a:?}");
    assert_eq!(a.code(), "unavailable");
    assert_eq!(a.body["error"]["reason"], "change-log-not-tailing");
}
