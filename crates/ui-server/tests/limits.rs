//! The server under configured limits, an injected clock and failing writes: a chat's
//! growth is bounded and read in pages, a failed write fails its request or is retried,
//! one configuration (limits, clock) reaches every request type, and an event stream whose
//! lag catch-up keeps failing still ticks and ends at sign-out, shutdown or its lifetime.

#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use serde_json::{Value as Json, json};
use ui_core::{HostLimits, ReplyLimits};
use ui_host::TokioClock;
use ui_server::{AppState, ChatLimits, router};

fn frozen_read_id(item: &Json, block: &str) -> String {
    item["uiQueries"]["blocks"][block]["readings"]["$runs"]["readId"]
        .as_str()
        .unwrap_or_else(|| panic!("no frozen reading: {item}"))
        .to_owned()
}

/// The `ui.choice` body that picks "Rerun" in the first block of `item` (`REPLY`).
async fn rerun(app: &App, cookie: &str, chat: &str, item: &Json) -> Json {
    let (block, revision) = first_block(item);
    let shown = app
        .post(
            "/ui/view",
            cookie,
            json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision}),
        )
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{shown:?}");
    let choice =
        find_node(&shown.body["view"]["nodes"], "Choice", Some("Rerun")).unwrap()["id"].clone();
    json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision,
           "choiceId": choice, "reads": {"$runs": frozen_read_id(item, &block)}, "values": {}})
}

async fn new_chat(app: &App, cookie: &str) -> String {
    let a = app.post("/api/chats", cookie, json!({"title": "t"})).await;
    assert_eq!(a.status, StatusCode::CREATED, "{a:?}");
    a.body["id"].as_str().unwrap().to_owned()
}

async fn message(app: &App, cookie: &str, chat: &str, text: &str) -> Answer {
    app.post(
        &format!("/api/chats/{chat}/messages"),
        cookie,
        json!({"text": text}),
    )
    .await
}

fn texts(page: &Json) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap()[..2].to_owned())
        .collect()
}

// ---- item 6: a chat's size ----

#[tokio::test]
async fn a_chat_is_bounded_and_read_in_pages() {
    let dir = TempDir::new("chat-limits");
    let mut config = config(&dir);
    let mut limits = ChatLimits::default();
    limits.item_text_bytes = 1_000;
    limits.chat_items = 6;
    limits.page_items = 3;
    limits.page_bytes = 2_500;
    config.chat_limits = limits;
    let app = App::with_config(config, dir).await;
    let alice = app.login("alice").await;
    let chat = new_chat(&app, &alice).await;

    // An item's text.
    let a = message(&app, &alice, &chat, &"x".repeat(1_001)).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large")
    );
    // Items per chat.
    for i in 0..6 {
        let text = format!("m{i}{}", "x".repeat(898));
        let a = message(&app, &alice, &chat, &text).await;
        assert_eq!(a.status, StatusCode::CREATED, "{a:?}");
    }
    let a = message(&app, &alice, &chat, "one more").await;
    assert_eq!((a.status, a.code()), (StatusCode::CONFLICT, "chat-full"));
    let a = app
        .post(&format!("/api/chats/{chat}/items"), &alice, json!({}))
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::CONFLICT, "chat-full"));

    // Pages: the newest items whose bytes fit (3 × 900 > 2,500), then older ones.
    let path = format!("/api/chats/{chat}");
    let page = app.get(&path, &alice).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(texts(&page.body), ["m4", "m5"]);
    assert_eq!(page.body["more"], true);
    assert!(page.body.to_string().len() < 2_500 + 1_000);
    let first = page.body["items"][0]["id"].as_str().unwrap().to_owned();
    let page = app.get(&format!("{path}?before={first}"), &alice).await;
    assert_eq!(texts(&page.body), ["m2", "m3"]);
    assert_eq!(page.body["more"], true);
    let first = page.body["items"][0]["id"].as_str().unwrap().to_owned();
    let page = app
        .get(&format!("{path}?before={first}&limit=3"), &alice)
        .await;
    assert_eq!(texts(&page.body), ["m0", "m1"]);
    assert_eq!(page.body["more"], false);
    let page = app.get(&format!("{path}?limit=1"), &alice).await;
    assert_eq!(texts(&page.body), ["m5"]);
    assert_eq!(page.body["more"], true);
    // Bad page requests.
    for query in ["limit=4", "limit=0", "limit=x", "before=nope", "after=1"] {
        let a = app.get(&format!("{path}?{query}"), &alice).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::BAD_REQUEST, "bad-request"),
            "{query}: {a:?}"
        );
    }

    // A reply: its deltas and its finish stop at the item's text limit; a choice into a
    // full chat is refused.
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let reply = app
        .post(&format!("/api/chats/{chat}/items"), &alice, json!({}))
        .await;
    let reply_id = reply.body["id"].as_str().unwrap();
    let delta = format!("/api/chats/{chat}/items/{reply_id}/delta");
    let a = app
        .post(&delta, &alice, json!({"text": "y".repeat(600)}))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let a = app
        .post(&delta, &alice, json!({"text": "y".repeat(401)}))
        .await;
    assert_eq!(a.code(), "payload-too-large");
    let a = app
        .post(
            &format!("/api/chats/{chat}/items/{reply_id}/finish"),
            &alice,
            json!({"text": "y".repeat(1_001)}),
        )
        .await;
    assert_eq!(a.code(), "payload-too-large");
    for _ in 0..4 {
        assert_eq!(
            message(&app, &alice, &chat, "hi").await.status,
            StatusCode::CREATED
        );
    }
    let choice = rerun(&app, &alice, &chat, &item).await;
    let a = app.post("/ui/choice", &alice, choice).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "refused-choice"),
        "{a:?}"
    );
}

// ---- item 7: failed writes ----

/// Runs `sql` on the app's database file beside the server (a trigger that makes a
/// write fail, or drops it).
fn inject(app: &App, sql: &str) {
    let conn = rusqlite::Connection::open(app.dir.0.join("app.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute_batch(sql).unwrap();
}

const FAIL_ANSWERS: &str = "CREATE TRIGGER fail_answers BEFORE UPDATE OF answers ON ui_items \
    BEGIN SELECT RAISE(ABORT, 'injected write failure'); END;";
const FAIL_INSERTS: &str = "CREATE TRIGGER fail_inserts BEFORE INSERT ON ui_items \
    BEGIN SELECT RAISE(ABORT, 'injected write failure'); END;";
const FAIL_ACCESS: &str = "CREATE TRIGGER fail_access BEFORE INSERT ON ui_access \
    BEGIN SELECT RAISE(ABORT, 'injected write failure'); END;";
/// Fails the freeze's write (frozen blocks), not the capture's (no blocks yet).
const FAIL_FREEZE: &str = "CREATE TRIGGER fail_freeze BEFORE UPDATE OF ui_queries ON ui_items \
    WHEN json_extract(NEW.ui_queries, '$.blocks') != '{}' \
    BEGIN SELECT RAISE(ABORT, 'injected write failure'); END;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_choice_write_fails_the_request_and_a_retry_sends_once() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let choice = rerun(&app, &alice, &chat, &item).await;

    // The message cannot be stored: the choice fails, nothing is recorded.
    inject(&app, FAIL_INSERTS);
    let a = app.post("/ui/choice", &alice, choice.clone()).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        "{a:?}"
    );
    // The database's words stay in the server's log.
    assert!(!a.body.to_string().contains("injected"), "{a:?}");
    inject(&app, "DROP TRIGGER fail_inserts;");
    // The message is stored but the answer is not: the choice fails too.
    inject(&app, FAIL_ANSWERS);
    let a = app.post("/ui/choice", &alice, choice.clone()).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        "{a:?}"
    );
    let detail = app.get(&format!("/api/chats/{chat}"), &alice).await.body;
    let (block, _) = first_block(&item);
    assert!(detail["items"][0]["uiAnswers"][&block].is_null());
    // Sent again once the database works: answered, and still one message.
    inject(&app, "DROP TRIGGER fail_answers;");
    let a = app.post("/ui/choice", &alice, choice).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    let detail = app.get(&format!("/api/chats/{chat}"), &alice).await.body;
    let items = detail["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{detail}");
    assert_eq!(items[1]["text"], "Rerun the failed jobs");
    assert_eq!(
        items[0]["uiAnswers"][&block]["choiceId"],
        a_choice_id(&detail)
    );
}

fn a_choice_id(detail: &Json) -> Json {
    detail["items"][1]["uiChoice"]["choiceId"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_capture_grants_nothing_and_the_next_read_captures_again() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    inject(&app, FAIL_ACCESS);
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let a = app
        .post("/ui/query", &alice, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["state"], "refused", "{a:?}");
    assert_eq!(a.body["code"], "access-unavailable", "{a:?}");
    inject(&app, "DROP TRIGGER fail_access;");
    let a = app
        .post("/ui/query", &alice, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(a.body["state"], "fresh", "{a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_freeze_write_is_retried() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    inject(&app, FAIL_FREEZE);
    let chat = new_chat(&app, &alice).await;
    let item = app
        .post(
            &format!("/api/chats/{chat}/items"),
            &alice,
            json!({"text": REPLY}),
        )
        .await;
    let item_id = item.body["id"].as_str().unwrap().to_owned();
    let done = app
        .post(
            &format!("/api/chats/{chat}/items/{item_id}/finish"),
            &alice,
            json!({"wait": false}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK);
    let (block, _) = first_block(&done.body);
    // Once the capture is stored the freeze reads (a quick read) and fails to store its
    // readings; then the database works again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while app.get(&format!("/api/chats/{chat}"), &alice).await.body["items"][0]["uiQueries"]
        .is_null()
    {
        assert!(tokio::time::Instant::now() < deadline, "never captured");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(app.state.queries().stats().freezes, 1, "the freeze retries");
    inject(&app, "DROP TRIGGER fail_freeze;");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let detail = app.get(&format!("/api/chats/{chat}"), &alice).await.body;
        let frozen = &detail["items"][0]["uiQueries"]["blocks"][&block];
        if frozen["readings"]["$runs"]["state"] == "fresh" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the frozen readings were never stored: {detail}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---- item 8: one configuration ----

/// The epoch ms the injected clock starts at (2001-09-09), far from today's.
const BASE: u64 = 1_000_000_000_000;

fn near_base(ms: &Json) -> bool {
    ms.as_u64()
        .is_some_and(|ms| (BASE..BASE + 600_000).contains(&ms))
}

#[tokio::test(start_paused = true)]
async fn configured_limits_and_the_injected_clock_reach_every_request() {
    let dir = TempDir::new("configured");
    let mut config = config(&dir);
    config.host_limits = HostLimits::DEFAULT
        .with("payloadKey", 64)
        .unwrap()
        .with("reason", 10)
        .unwrap();
    config.reply_limits = ReplyLimits::DEFAULT.with("blocks", 1).unwrap();
    let mut chat_limits = ChatLimits::default();
    chat_limits.item_text_bytes = 2_000;
    chat_limits.page_items = 2;
    config.chat_limits = chat_limits;
    let state = AppState::builder(config)
        .clock(Arc::new(TokioClock::starting_at(BASE)))
        .open()
        .await
        .unwrap();
    let app = App {
        router: router(state.clone()),
        state,
        dir,
    };
    let alice = app.login("alice").await;

    // Chats and items are stamped by the injected clock.
    let created = app.post("/api/chats", &alice, json!({})).await;
    assert!(near_base(&created.body["createdAt"]), "{created:?}");
    // The reply limits: a second fence is not compiled (16 by default).
    let two = format!("{REPLY}\n```ui\n<Summary>second</Summary>\n```\n");
    let (chat, item) = app.chat_with_reply(&alice, &two).await;
    assert_eq!(item["ui"].as_array().unwrap().len(), 1, "{item}");
    assert!(near_base(&item["createdAt"]));
    let (block, revision) = first_block(&item);
    assert!(near_base(
        &item["uiQueries"]["blocks"][&block]["readings"]["$runs"]["readAt"]
    ));
    // The chat limits: an item's text and a page.
    let a = message(&app, &alice, &chat, &"x".repeat(2_001)).await;
    assert_eq!(a.code(), "payload-too-large");
    let a = message(&app, &alice, &chat, "hello").await;
    assert!(near_base(&a.body["createdAt"]), "{a:?}");
    let a = app.get(&format!("/api/chats/{chat}?limit=3"), &alice).await;
    assert_eq!(a.code(), "bad-request");
    assert_eq!(
        app.get(&format!("/api/chats/{chat}"), &alice).await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // The host limits: a key of 65 units is too long for each `ui.*` request (128 by
    // default).
    let long = "k".repeat(65);
    let mut query = runs_query(&chat, &item, json!({}));
    let a = app.post("/ui/query", &alice, query.clone()).await;
    assert_eq!(a.body["state"], "fresh", "{a:?}");
    assert!(near_base(&a.body["readAt"]), "{a:?}");
    let mut stale = query.clone();
    stale["revision"] = json!("0".repeat(64));
    let a = app.post("/ui/query", &alice, stale).await;
    assert_eq!(a.body["code"], "block-stale", "{a:?}");
    assert_eq!(
        a.body["reason"], "The block ",
        "cut to 10 units (240 by default)"
    );
    query["query"] = json!(long);
    let a = app.post("/ui/query", &alice, query).await;
    assert_eq!(a.code(), "bad-request", "{a:?}");
    let mut link = json!({"chatId": chat, "itemId": item["id"], "blockId": block,
                          "revision": revision, "nodeId": "n", "reads": {}, "values": {}});
    link["values"][&long] = json!(1);
    let a = app.post("/ui/link", &alice, link).await;
    assert_eq!(a.code(), "bad-request", "{a:?}");
    let mut view = json!({"chatId": chat, "itemId": item["id"], "blockId": block,
                          "revision": revision, "values": {}});
    view["values"][&long] = json!(1);
    let a = app.post("/ui/view", &alice, view).await;
    assert_eq!(a.code(), "bad-request", "{a:?}");
    let choice = rerun(&app, &alice, &chat, &item).await;
    let mut tampered = choice.clone();
    tampered["reads"][&long] = json!("r");
    let a = app.post("/ui/choice", &alice, tampered).await;
    assert_eq!(a.code(), "bad-request", "{a:?}");
    // A choice is stamped by the injected clock.
    let a = app.post("/ui/choice", &alice, choice).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    let page = app
        .get(&format!("/api/chats/{chat}?limit=1"), &alice)
        .await
        .body;
    let choice_item = &page["items"][0];
    assert!(near_base(&choice_item["uiChoice"]["at"]), "{page}");
}

// ---- failing catch-up reads of event streams ----

const SECS: Duration = Duration::from_secs(5);

/// `/ui/events` of `cookie` in process: the body is pulled only when the test reads it, so
/// hub batches pile up meanwhile.
async fn stream_of(app: &App, cookie: &str) -> Sse<axum::body::Body> {
    use tower::ServiceExt as _;
    let req = axum::http::Request::builder()
        .uri("/ui/events")
        .header("cookie", cookie)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    Sse::new(response.into_body())
}

/// A server whose hub holds one batch, with `users` signed in, each with an open stream
/// that lagged (two batches went by unread) and whose catch-up read fails (the log's table
/// is gone): each stream still ticks, at the cursor of its `hello` (no event went out).
async fn failing_catch_ups(
    change: impl FnOnce(&mut ui_server::ServerConfig),
    users: &[&str],
) -> (App, Vec<(String, Sse<axum::body::Body>)>) {
    let dir = TempDir::new("catch-up");
    let mut config = config(&dir);
    config.sync_limits = config.sync_limits.with("hubCapacity", 1).unwrap();
    change(&mut config);
    let app = App::with_config(config, dir).await;
    let mut streams = Vec::new();
    let mut hellos = Vec::new();
    for user in users {
        let cookie = app.login(user).await;
        let mut stream = stream_of(&app, &cookie).await;
        let hello = stream.next(SECS).await.unwrap();
        assert_eq!(hello.event, "hello");
        hellos.push(hello.id.unwrap());
        streams.push((cookie, stream));
    }
    for _ in 0..2 {
        let cursor = app
            .state
            .sync()
            .record_and_wait(ui_sync::ChangeDraft {
                source: "ci.runs".into(),
                audience: Some(ui_sync::Audience::project("web")),
                key: None,
                rs: None,
            })
            .await
            .unwrap();
        assert!(app.state.sync().catch_up_to(cursor.seq, SECS).await);
    }
    inject(&app, BREAK_LOG);
    for ((_, stream), hello) in streams.iter_mut().zip(&hellos) {
        let tick = stream
            .next(SECS)
            .await
            .expect("a lagging stream still ticks");
        assert_eq!(tick.event, "tick", "{tick:?}");
        assert_eq!(tick.id.as_ref(), Some(hello), "no catch-up went out");
    }
    (app, streams)
}

const BREAK_LOG: &str = "ALTER TABLE ui_sync_events RENAME TO ui_sync_events_gone;";
const MEND_LOG: &str = "ALTER TABLE ui_sync_events_gone RENAME TO ui_sync_events;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_catch_up_fails_is_signed_out_and_recovers_with_the_log() {
    // Two sessions of alice (project `web`, the events' audience).
    let (app, mut streams) = failing_catch_ups(|_| {}, &["alice", "alice"]).await;
    let (_, mut other_stream) = streams.pop().unwrap();
    let (alice, mut alice_stream) = streams.pop().unwrap();
    let a = app.post("/api/logout", &alice, json!({})).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{a:?}");
    let frames = alice_stream.until("bye", SECS).await;
    let bye = frames.last().expect("the signed-out stream ends");
    assert_eq!(
        (bye.event.as_str(), &bye.data["reason"]),
        ("bye", &json!("signed-out"))
    );
    assert!(alice_stream.next(SECS).await.is_none(), "the stream closed");

    // The other session's stream retries; once the log reads again its catch-up goes out.
    inject(&app, MEND_LOG);
    let frames = other_stream.until("changes", SECS).await;
    let changes = frames.last().expect("the catch-up goes out");
    assert_eq!(changes.event, "changes", "{frames:?}");
    assert_eq!(changes.data["events"][0]["source"], "ci.runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_whose_log_read_fails_is_told_to_come_back_without_the_database_words() {
    // Before: `500 internal` with the database's message ("no such table: …"; on
    // PostgreSQL, "error connecting to server: Connection refused").
    let (app, mut streams) = failing_catch_ups(|_| {}, &["alice"]).await;
    let (alice, _stream) = streams.pop().unwrap();
    let epoch = app.state.sync().head().epoch.to_string();
    let a = app.get(&format!("/ui/poll?cursor={epoch}.1"), &alice).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{a:?}"
    );
    assert_eq!(a.header("retry-after"), Some("10"));
    assert!(!a.body.to_string().contains("ui_sync_events"), "{a:?}");
    inject(&app, MEND_LOG);
    let a = app.get(&format!("/ui/poll?cursor={epoch}.1"), &alice).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_catch_up_fails_rotates_at_the_end_of_its_life() {
    let (_app, mut streams) = failing_catch_ups(
        |config| {
            config.sync_limits = config
                .sync_limits
                .with("streamLifetime", 2_000)
                .unwrap()
                .with("streamLifetimeJitter", 1)
                .unwrap();
        },
        &["alice"],
    )
    .await;
    let (_, mut stream) = streams.pop().unwrap();
    let frames = stream.until("bye", SECS).await;
    let bye = frames.last().expect("the stream ends at its lifetime");
    assert_eq!(
        (bye.event.as_str(), &bye.data["reason"]),
        ("bye", &json!("rotate"))
    );
    assert!(stream.next(SECS).await.is_none(), "the stream closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_catch_up_fails_says_bye_at_a_shutdown() {
    let (app, mut streams) = failing_catch_ups(|_| {}, &["alice"]).await;
    let (_, mut stream) = streams.pop().unwrap();
    app.state.shut_down_streams();
    let frames = stream.until("bye", SECS).await;
    let bye = frames.last().expect("the stream ends at the shutdown");
    assert_eq!(
        (bye.event.as_str(), &bye.data["reason"]),
        ("bye", &json!("shutdown"))
    );
    assert!(stream.next(SECS).await.is_none(), "the stream closed");
}

// ---- connection bounds ----

#[tokio::test]
async fn connection_bounds_out_of_range_do_not_open() {
    type Change = fn(&mut ui_server::ServerConfig);
    let cases: [(Change, &str); 4] = [
        (
            |c| c.idle_timeout = Duration::ZERO,
            "configuration: `idle_timeout` must be from 10ms to 24h; got 0ms",
        ),
        (
            |c| c.header_read_timeout = Duration::MAX,
            "configuration: `header_read_timeout` must be from 10ms to 24h",
        ),
        (
            |c| c.max_connections = usize::MAX,
            "configuration: `max_connections` must be from 1 to 1000000",
        ),
        (
            |c| c.shutdown_spread = Duration::from_secs(100_000),
            "configuration: `shutdown_spread` must be from 0 to 24h; got 100000000ms",
        ),
    ];
    for (change, message) in cases {
        let dir = TempDir::new("bounds");
        let mut config = config(&dir);
        change(&mut config);
        let err = AppState::open(config).await.unwrap_err();
        assert!(
            matches!(err, ui_server::ServerError::OutOfRange(_)),
            "{err:?}"
        );
        assert!(err.to_string().starts_with(message), "{err}");
    }
}
