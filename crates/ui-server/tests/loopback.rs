//! Black-box tests against a server on a free loopback port: real sockets, real SSE.

#![allow(missing_docs)]

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use serde_json::{Value as Json, json};

const SECS: Duration = Duration::from_secs(5);

/// Streams `text` into a new reply of a new chat in `parts` deltas and finishes it.
async fn streamed_reply(server: &Server, cookie: &str, text: &str, parts: usize) -> (String, Json) {
    let chat = server
        .post("/api/chats", cookie, json!({"title": "runs"}))
        .await;
    assert_eq!(chat.status, StatusCode::CREATED, "{chat:?}");
    let chat = chat.body["id"].as_str().unwrap().to_owned();
    let item = server
        .post(&format!("/api/chats/{chat}/items"), cookie, json!({}))
        .await;
    let id = item.body["id"].as_str().unwrap().to_owned();
    let step = text.len().div_ceil(parts);
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + step).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let d = server
            .post(
                &format!("/api/chats/{chat}/items/{id}/delta"),
                cookie,
                json!({"text": &text[at..end]}),
            )
            .await;
        assert_eq!(d.status, StatusCode::OK, "{d:?}");
        assert_eq!(d.body["bytes"], end);
        at = end;
    }
    let done = server
        .post(
            &format!("/api/chats/{chat}/items/{id}/finish"),
            cookie,
            json!({}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{done:?}");
    (chat, done.body)
}

fn frozen(item: &Json) -> &Json {
    &item["uiQueries"]["blocks"][first_block(item).0.as_str()]
}

async fn shown(server: &Server, cookie: &str, chat: &str, item: &Json) -> Json {
    let (block, revision) = first_block(item);
    let a = server
        .post(
            "/ui/view",
            cookie,
            json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    a.body["view"]["nodes"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_streamed_in_deltas_is_finished_with_its_first_readings_frozen() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let mut stream = server.events(&alice, "").await;
    assert_eq!(stream.next(SECS).await.unwrap().event, "hello");
    let (chat, item) = streamed_reply(&server, &alice, REPLY, 7).await;
    assert_eq!(item["streaming"], false);
    assert_eq!(item["text"], REPLY);
    assert_eq!(first_block(&item).1.len(), 64);
    // Frozen readings are there at once: in the finish answer and in the next read.
    let reading = &frozen(&item)["readings"]["$runs"];
    assert_eq!(reading["state"], "fresh");
    assert_eq!(reading["value"][0]["name"], "web build 1");
    let detail = server.get(&format!("/api/chats/{chat}"), &alice).await;
    assert_eq!(frozen(&detail.body["items"][0]), frozen(&item));
    // The page heard about its chat on the stream.
    let frames = stream.until("changes", SECS).await;
    let changes = frames.last().unwrap();
    assert_eq!(changes.data["events"][0]["source"], "host.chats");
    assert!(changes.id.is_some());
    // Limits hold on the wire too.
    let big = "x".repeat(ui_server::limits::MAX_BODY_BYTES);
    let a = server
        .post(
            &format!("/api/chats/{chat}/messages"),
            &alice,
            json!({"text": big}),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_reads_changed_input_and_refuses_tampered_input() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let (chat, item) = streamed_reply(&server, &alice, REPLY, 3).await;
    // The freeze read `$runs` moments ago; another input waits out the 250 ms gap.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let dev = server
        .post(
            "/ui/query",
            &alice,
            runs_query(&chat, &item, json!({"$branch": "dev"})),
        )
        .await;
    assert_eq!(dev.status, StatusCode::OK);
    assert_eq!(dev.body["state"], "fresh", "{dev:?}");
    assert_eq!(
        dev.body["value"],
        json!([{"name": "web build 2", "status": "failed"}])
    );
    assert!(dev.body["readId"].is_string());
    // `prod` is not an option of the Segmented: nobody could have set it.
    let tampered = server
        .post(
            "/ui/query",
            &alice,
            runs_query(&chat, &item, json!({"$branch": "prod"})),
        )
        .await;
    assert_eq!(tampered.status, StatusCode::OK);
    assert_eq!(tampered.body["state"], "refused");
    assert!(tampered.body.get("value").is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_reading_follows_a_write_of_its_data() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let (chat, item) = streamed_reply(&server, &alice, REPLY, 2).await;
    let sync = frozen(&item)["readings"]["$runs"]["sync"].clone();
    assert_eq!(sync["feed"], "complete");
    assert_eq!(sync["keys"].as_array().unwrap().len(), 1);
    let mut stream = server.events(&alice, "").await;
    assert_eq!(stream.next(SECS).await.unwrap().event, "hello");
    let row = json!({"rows": [{"branch": "main", "name": "web build 3", "status": "failed"}]});
    let (status, _, _) = server
        .open(
            "POST",
            "/api/sources/ci.runs/rows",
            Some(&alice),
            Some(row),
            &[("x-ui-request-source", "p-editor")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // The event names exactly the reading's scope and key (tokens, never the raw key).
    let frames = stream.until("changes", SECS).await;
    let changes = frames.last().unwrap();
    let event = &changes.data["events"][0];
    assert_eq!(event["source"], "ci.runs");
    assert_eq!(event["scope"], sync["scope"]);
    assert_eq!(event["key"], sync["keys"][0]);
    assert_eq!(event["rs"], "p-editor");
    // A change-driven read (with `seen`) gets the new rows, at most after `retryAfterMs`.
    let mut p = runs_query(&chat, &item, json!({}));
    p["seen"] = json!(changes.id.clone().unwrap());
    let deadline = tokio::time::Instant::now() + SECS;
    let reading = loop {
        let a = server.post("/ui/query", &alice, p.clone()).await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        if a.body["value"].as_array().is_some_and(|v| v.len() == 2) {
            break a.body;
        }
        assert!(tokio::time::Instant::now() < deadline, "{a:?}");
        let wait = a.body["retryAfterMs"].as_u64().unwrap_or(250);
        tokio::time::sleep(Duration::from_millis(wait.max(50))).await;
    };
    assert_eq!(reading["state"], "fresh");
    assert_eq!(reading["value"][0]["name"], "web build 3", "newest first");
    assert!(reading["sync"]["version"].as_u64() >= event["seq"].as_u64());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_choice_is_sent_as_the_next_user_message() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let (chat, item) = streamed_reply(&server, &alice, REPLY, 2).await;
    let nodes = shown(&server, &alice, &chat, &item).await;
    let rerun = find_node(&nodes, "Choice", Some("Rerun")).unwrap()["id"].clone();
    let (block, revision) = first_block(&item);
    let read = frozen(&item)["readings"]["$runs"]["readId"].clone();
    let mut stream = server.events(&alice, "").await;
    assert_eq!(stream.next(SECS).await.unwrap().event, "hello");
    let (status, headers, body) = server
        .open(
            "POST",
            "/ui/choice",
            Some(&alice),
            Some(
                json!({"chatId": chat, "itemId": item["id"], "blockId": block,
                        "revision": revision, "choiceId": rerun, "reads": {"$runs": read}}),
            ),
            &[("x-ui-request-source", "p-tab1")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.contains_key("x-ui-sync-seq"));
    drop(body);
    let detail = server.get(&format!("/api/chats/{chat}"), &alice).await.body;
    let last = &detail["items"][1];
    assert_eq!(last["role"], "user");
    assert_eq!(last["text"], "Rerun the failed jobs");
    assert_eq!(last["uiChoice"]["choiceId"], rerun);
    assert_eq!(detail["items"][0]["uiAnswers"][&block]["label"], "Rerun");
    // The echo carries the page's request source.
    let frames = stream.until("changes", SECS).await;
    assert_eq!(frames.last().unwrap().data["events"][0]["rs"], "p-tab1");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_is_resolved_by_the_host() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let (chat, item) = streamed_reply(&server, &alice, REPLY, 2).await;
    let nodes = shown(&server, &alice, &chat, &item).await;
    let commit = find_node(&nodes, "Commit", None).unwrap()["id"].clone();
    let (block, revision) = first_block(&item);
    let read = frozen(&item)["readings"]["$runs"]["readId"].clone();
    let a = server
        .post(
            "/ui/link",
            &alice,
            json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision,
                   "nodeId": commit, "reads": {"$runs": read}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["state"], "chip");
    assert_eq!(
        a.body["target"],
        json!({"type": "Commit", "sha": "0123abcd"})
    );
    assert_eq!(a.body["label"], "0123abc");
    // The frozen resolution of the same node agrees.
    assert_eq!(
        frozen(&item)["links"][commit.as_str().unwrap()]["state"],
        "chip"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_b_never_sees_user_a_chats_readings_or_events() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let bob = server.login("bob").await;
    let mut bob_stream = server.events(&bob, "").await;
    let hello = bob_stream.next(SECS).await.unwrap();
    let bob_cursor = hello.data["cursor"].as_str().unwrap().to_owned();
    let mut alice_stream = server.events(&alice, "").await;
    assert_eq!(alice_stream.next(SECS).await.unwrap().event, "hello");

    // Alice works: a chat, a reply with live data, a query, a choice, a row written.
    let (chat, item) = streamed_reply(&server, &alice, REPLY, 3).await;
    let nodes = shown(&server, &alice, &chat, &item).await;
    let rerun = find_node(&nodes, "Choice", Some("Rerun")).unwrap()["id"].clone();
    let (block, revision) = first_block(&item);
    let read = frozen(&item)["readings"]["$runs"]["readId"].clone();
    let choice = json!({"chatId": chat, "itemId": item["id"], "blockId": block,
                        "revision": revision, "choiceId": rerun, "reads": {"$runs": read}});
    assert_eq!(
        server
            .post("/ui/choice", &alice, choice.clone())
            .await
            .status,
        StatusCode::OK
    );
    let row = json!({"rows": [{"branch": "main", "name": "web secret build", "status": "passed"}]});
    assert_eq!(
        server
            .post("/api/sources/ci.runs/rows", &alice, row)
            .await
            .status,
        StatusCode::OK
    );
    // Alice's stream sees her chat and her project's rows.
    let mut sources = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + SECS;
    while sources.len() < 2 && tokio::time::Instant::now() < deadline {
        if let Some(frame) = alice_stream.next(Duration::from_millis(500)).await
            && frame.event == "changes"
        {
            for e in frame.data["events"].as_array().unwrap() {
                sources.insert(e["source"].as_str().unwrap().to_owned());
            }
        }
    }
    assert_eq!(
        sources.into_iter().collect::<Vec<_>>(),
        ["ci.runs", "host.chats"]
    );

    // Bob: no chats, no chat, no readings, no choice, no link, no view.
    assert_eq!(
        server.get("/api/chats", &bob).await.body["chats"],
        json!([])
    );
    let a = server.get(&format!("/api/chats/{chat}"), &bob).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "chat-not-found")
    );
    let a = server
        .post("/ui/query", &bob, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::FORBIDDEN, "refused-query")
    );
    assert!(a.body.get("value").is_none());
    let a = server.post("/ui/choice", &bob, choice).await;
    assert_eq!(a.code(), "refused-query");
    let a = server
        .post(
            "/ui/view",
            &bob,
            json!({"chatId": chat, "itemId": item["id"], "blockId": block}),
        )
        .await;
    assert_eq!(a.code(), "refused-query");
    // Bob's stream carried nothing but its own heartbeats; his poll has no events.
    let mut bob_frames = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_millis(800);
    while let Some(frame) = bob_stream
        .next(until.saturating_duration_since(tokio::time::Instant::now()))
        .await
    {
        bob_frames.push(frame);
    }
    assert!(!bob_frames.is_empty(), "the stream is alive (ticks)");
    assert!(
        bob_frames.iter().all(|f| f.event == "tick"),
        "bob saw {bob_frames:?}"
    );
    let poll = server
        .get(&format!("/ui/poll?cursor={bob_cursor}"), &bob)
        .await;
    assert_eq!(poll.status, StatusCode::OK);
    assert_eq!(poll.body["events"], json!([]));
    // Bob's own reply reads his project only.
    let (_, bobs) = streamed_reply(&server, &bob, REPLY, 2).await;
    let value = &frozen(&bobs)["readings"]["$runs"]["value"];
    assert_eq!(
        value,
        &json!([{"name": "ops deploy 1", "status": "passed"}])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_says_bye_to_open_streams() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let mut stream = server.events(&alice, "").await;
    assert_eq!(stream.next(SECS).await.unwrap().event, "hello");
    let stopping = tokio::spawn(server.stop());
    let frames = stream.until("bye", SECS).await;
    let bye = frames.last().unwrap();
    assert_eq!(bye.event, "bye");
    assert_eq!(bye.data["reason"], "shutdown");
    assert!(bye.data["retryMs"].as_u64().unwrap() <= 5_000);
    stopping.await.unwrap();
}
