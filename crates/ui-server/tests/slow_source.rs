//! A source whose SQL runs far longer than the read timeout (a recursive CTE counting to
//! an argument), on loopback-free in-process requests. Its own test binary: the CPU the
//! process uses is measured, so no other test may run beside it.

#![allow(missing_docs)]

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::*;
use serde_json::{Value as Json, json};
use ui_core::{HostLimits, UiHostLimits};
use ui_server::SourcesConfig;

/// Counts to `:n` (a string, so a Segmented can choose it) in one step of SQLite.
const SLOW_SOURCE: &str = r#"
[[source]]
name = "slow.count"
sql = """WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < CAST(:n AS INTEGER))
         SELECT max(x) AS top, :lane AS lane FROM c"""
args = { type = "object", required = ["n", "lane"], additionalProperties = false, properties = { n = { type = "string" }, lane = { type = "integer" } } }
"#;

/// What the slow option counts to: some 20 s of SQLite work, far beyond the timeout.
const SLOW_N: &str = "200000000";

/// A block with two reads of the slow source (different arguments, so they are two
/// statements); their defaults count to 1, so the freeze is quick.
fn reply() -> String {
    format!(
        "Counting:\n```ui\n$n = \"1\"\n\
         $a = @Query(\"slow.count\", {{n: $n, lane: 1}})\n\
         $b = @Query(\"slow.count\", {{n: $n, lane: 2}})\n\
         <Summary>{{@Count($a)}} and {{@Count($b)}}</Summary>\n\
         <Segmented value={{$n}}><Option value=\"1\">quick</Option>\
         <Option value=\"{SLOW_N}\">slow</Option></Segmented>\n```\n"
    )
}

/// The read timeout the test configures (the default is 8 s).
const TIMEOUT_MS: u64 = 1_500;

/// CPU time of this process so far (user + system), in ms; `None` without `/proc`.
fn cpu_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(ticks * 10)
}

fn slow_query(chat: &str, item: &Json, query: &str) -> Json {
    let (block, revision) = first_block(item);
    json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision,
           "query": query, "values": {"$n": SLOW_N}})
}

async fn median_list_ms(app: &App, cookie: &str, times: usize) -> u128 {
    let mut took = Vec::new();
    for _ in 0..times {
        let started = Instant::now();
        let a = app.get("/api/chats", cookie).await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        took.push(started.elapsed().as_millis());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    took.sort_unstable();
    took[took.len() / 2]
}

async fn wait_for_free_slots(app: &App, within: Duration) -> Duration {
    let started = Instant::now();
    while app.state.queries().stats().slots > 0 {
        assert!(
            started.elapsed() < within,
            "read slots still held after {within:?}: {:?}",
            app.state.queries().stats()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_source_stops_at_the_timeout_and_never_delays_the_store() {
    let dir = TempDir::new("slow-source");
    let mut config = config(&dir);
    config.sources = SourcesConfig::Inline(format!("{SOURCES}\n{SLOW_SOURCE}"));
    config.host_limits = HostLimits::DEFAULT
        .with("readTimeoutMilliseconds", TIMEOUT_MS)
        .unwrap()
        .with("readGapMilliseconds", 1)
        .unwrap();
    config.ui_host_limits = UiHostLimits::DEFAULT
        .with("refreshMilliseconds", 1)
        .unwrap();
    let app = App::with_config(config, dir).await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let reply = reply();
    let mut chats = Vec::new();
    for _ in 0..3 {
        let (chat, item) = app.chat_with_reply(&alice, &reply).await;
        assert_eq!(
            item["uiQueries"]["blocks"][first_block(&item).0]["readings"]["$a"]["state"],
            "fresh",
            "{item}"
        );
        chats.push((chat, item));
    }
    let created = app.post("/api/chats", &bob, json!({"title": "mine"})).await;
    assert_eq!(created.status, StatusCode::CREATED);
    wait_for_free_slots(&app, Duration::from_secs(5)).await;
    let baseline = median_list_ms(&app, &bob, 7).await;

    // Two slow reads of one chat: Bob's chat list is not delayed by them.
    let (chat, item) = chats[0].clone();
    let mut reads = Vec::new();
    for query in ["$a", "$b"] {
        let body = slow_query(&chat, &item, query);
        let app_router = app.router.clone();
        let cookie = alice.clone();
        reads.push(tokio::spawn(async move {
            let started = Instant::now();
            let a = post_to(&app_router, "/ui/query", &cookie, body).await;
            (a, started.elapsed())
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(app.state.queries().stats().slots, 2, "both reads run");
    let during = median_list_ms(&app, &bob, 7).await;
    eprintln!("GET /api/chats: {baseline} ms median alone, {during} ms beside two slow reads");
    assert!(
        during <= baseline + 100,
        "GET /api/chats took {during} ms (median) beside two slow reads, {baseline} ms without"
    );
    for read in reads {
        let (a, took) = read.await.unwrap();
        assert_eq!(a.body["state"], "failed", "{a:?}");
        assert_eq!(a.body["code"], "timed-out", "{a:?}");
        assert!(took < Duration::from_millis(TIMEOUT_MS + 1_000), "{took:?}");
    }
    wait_for_free_slots(&app, Duration::from_secs(1)).await;

    // Six slow reads of one person (3 chats × 2, within the slot limits): all answer
    // `timed-out` at the configured timeout, and every statement stops then — the slots
    // are free within 1 s and the process is idle again.
    let mut reads = Vec::new();
    for (chat, item) in &chats {
        for query in ["$a", "$b"] {
            let body = slow_query(chat, item, query);
            let app_router = app.router.clone();
            let cookie = alice.clone();
            reads.push(tokio::spawn(async move {
                post_to(&app_router, "/ui/query", &cookie, body).await
            }));
        }
    }
    for read in reads {
        let a = read.await.unwrap();
        assert_eq!(a.body["code"], "timed-out", "{a:?}");
    }
    let released = wait_for_free_slots(&app, Duration::from_secs(1)).await;
    eprintln!("slots released {released:?} after the last timed-out answer");
    if let Some(before) = cpu_ms() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let used = cpu_ms().unwrap() - before;
        assert!(
            used < 250,
            "the process used {used} ms of CPU in 500 ms after the reads timed out"
        );
    }
    // Fast reads work as before.
    let (chat, item) = &chats[1];
    let mut quick = slow_query(chat, item, "$a");
    quick["values"] = json!({"$n": "1"});
    tokio::time::sleep(Duration::from_millis(5)).await;
    let a = app.post("/ui/query", &alice, quick).await;
    assert_eq!(a.body["state"], "fresh", "{a:?}");
}

/// A POST through a clone of the router (for spawned requests).
async fn post_to(router: &axum::Router, path: &str, cookie: &str, body: Json) -> Answer {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let req = axum::http::Request::post(path)
        .header("cookie", cookie)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Json::Null),
    }
}
