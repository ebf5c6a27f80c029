//! The store's in-memory caches never widen what a request may read: with every cache
//! warmed by one person's requests, another person's requests are refused exactly as with
//! cold caches, and each reply keeps reading with its own writer's access.

#![allow(missing_docs)]

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

#[tokio::test]
async fn warm_caches_keep_people_apart() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let (bob_chat, bob_item) = app.chat_with_reply(&bob, REPLY).await;
    // Alice's requests cache her chat, her item's blocks and its captured access.
    for _ in 0..3 {
        let a = app
            .post("/ui/query", &alice, runs_query(&chat, &item, json!({})))
            .await;
        assert_eq!(a.body["state"], "fresh", "{a:?}");
        assert_eq!(a.body["value"][0]["name"], "web build 1");
    }
    let (block, revision) = first_block(&item);
    let view = json!({"chatId": chat, "itemId": item["id"], "blockId": block,
                      "revision": revision});
    assert_eq!(
        app.post("/ui/view", &alice, view.clone()).await.status,
        StatusCode::OK
    );

    // Bob cannot use Alice's chat, whatever is cached …
    let a = app
        .post("/ui/query", &bob, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::FORBIDDEN, "refused-query")
    );
    assert_eq!(
        app.post("/ui/view", &bob, view).await.code(),
        "refused-query"
    );
    assert_eq!(
        app.get(&format!("/api/chats/{chat}"), &bob).await.code(),
        "chat-not-found"
    );
    // … nor name Alice's item, block and revision under his own chat.
    let mut p = runs_query(&chat, &item, json!({}));
    p["chatId"] = json!(bob_chat);
    let a = app.post("/ui/query", &bob, p).await;
    assert_eq!(
        (a.body["state"].as_str(), a.body["code"].as_str()),
        (Some("refused"), Some("block-stale")),
        "{a:?}"
    );
    let view = json!({"chatId": bob_chat, "itemId": item["id"], "blockId": block,
                      "revision": revision});
    assert_eq!(
        app.post("/ui/view", &bob, view).await.code(),
        "stale-ui-block"
    );
    // His own reply reads his project's rows, Alice's still hers.
    let b = app
        .post(
            "/ui/query",
            &bob,
            runs_query(&bob_chat, &bob_item, json!({})),
        )
        .await;
    assert_eq!(b.body["state"], "fresh", "{b:?}");
    assert_eq!(b.body["value"][0]["name"], "ops deploy 1");
    let a = app
        .post("/ui/query", &alice, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(a.body["value"][0]["name"], "web build 1");
}
