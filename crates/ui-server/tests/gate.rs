//! The shared gates of the chat routes (`src/gate.rs`): which writes answer
//! `X-UI-Sync-Seq`, and the order in which a request's checks refuse it (principal, path,
//! body or query, then ownership), pinned so the extractors keep the handlers' behaviour.

mod common;

use axum::http::{Method, StatusCode};
use common::{App, REPLY, runs_query};
use serde_json::json;

#[tokio::test]
async fn every_store_write_answers_its_cursor_except_a_delta() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let chat = app.post("/api/chats", &alice, json!({})).await;
    assert_eq!(chat.status, StatusCode::CREATED);
    assert!(chat.header("x-ui-sync-seq").is_some(), "{chat:?}");
    let chat_id = chat.body["id"].as_str().unwrap().to_owned();
    let base = format!("/api/chats/{chat_id}");

    let message = app
        .post(&format!("{base}/messages"), &alice, json!({"text": "hi"}))
        .await;
    assert_eq!(message.status, StatusCode::CREATED);
    assert!(message.header("x-ui-sync-seq").is_some());
    let item = app.post(&format!("{base}/items"), &alice, json!({})).await;
    assert_eq!(item.status, StatusCode::CREATED);
    assert!(item.header("x-ui-sync-seq").is_some());
    let item_id = item.body["id"].as_str().unwrap();
    let delta = app
        .post(
            &format!("{base}/items/{item_id}/delta"),
            &alice,
            json!({"text": REPLY}),
        )
        .await;
    assert_eq!(delta.status, StatusCode::OK, "{delta:?}");
    assert_eq!(delta.header("x-ui-sync-seq"), None, "deltas do not wait");
    let done = app
        .post(&format!("{base}/items/{item_id}/finish"), &alice, json!({}))
        .await;
    assert_eq!(done.status, StatusCode::OK);
    assert!(done.header("x-ui-sync-seq").is_some());
    // A refused write answers no cursor.
    let again = app
        .post(
            &format!("{base}/items/{item_id}/delta"),
            &alice,
            json!({"text": "x"}),
        )
        .await;
    assert_eq!(again.code(), "item-not-streaming");
    assert_eq!(again.header("x-ui-sync-seq"), None);
}

#[tokio::test]
async fn checks_refuse_in_the_order_principal_path_body_then_ownership() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let messages = format!("/api/chats/{chat}/messages");

    // No principal: 401 before anything else.
    let a = app
        .call(Method::POST, &messages, None, Some(json!({"nope": 1})))
        .await;
    assert_eq!(a.code(), "unauthenticated");
    // Another person's chat: a bad body is refused as such first …
    let a = app.post(&messages, &bob, json!({"nope": 1})).await;
    assert_eq!(a.code(), "bad-request", "{a:?}");
    // … a good one gets the answer a missing chat gets, and writes nothing.
    let a = app.post(&messages, &bob, json!({"text": "hi"})).await;
    assert_eq!(a.code(), "chat-not-found");
    assert_eq!(a.header("x-ui-sync-seq"), None);
    let missing = app
        .post(
            "/api/chats/no-such-chat/messages",
            &bob,
            json!({"text": "hi"}),
        )
        .await;
    assert_eq!(
        (missing.status, missing.body.clone()),
        (a.status, a.body.clone())
    );
    // The page query is checked before ownership too.
    let a = app.get(&format!("/api/chats/{chat}?limit=0"), &bob).await;
    assert_eq!(a.code(), "bad-request");
    let a = app.get(&format!("/api/chats/{chat}?limit=2"), &bob).await;
    assert_eq!(a.code(), "chat-not-found");
    let a = app.get(&format!("/api/chats/{chat}?limit=2"), &alice).await;
    assert_eq!(a.status, StatusCode::OK);

    // `ui.*`: the payload's shape before attachment, then `refused-query`.
    let mut query = runs_query(&chat, &item, json!({}));
    let a = app.post("/ui/query", &bob, query.clone()).await;
    assert_eq!(a.code(), "refused-query", "{a:?}");
    query["query"] = json!("x".repeat(10_000));
    let a = app.post("/ui/query", &bob, query).await;
    assert_eq!(a.code(), "bad-request", "{a:?}");
    let a = app
        .post("/ui/query", &alice, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.header("x-ui-sync-seq"), None, "reads record nothing");
}
