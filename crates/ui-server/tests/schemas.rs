//! Every route that has a body schema gives one real answer (and takes one real request)
//! that fits the schema `GET /api/schema/{type}` publishes for it. The stream frames are
//! checked in `router.rs`, the compiler's outputs over the conformance corpus in
//! ui-cli's `tests/schemas.rs`.

#![allow(missing_docs)]

mod common;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::{Value as Json, json};

/// Posts `body` (checked against the schema `request`) and checks the answer against
/// `answer`; the answer's body.
async fn post(
    app: &App,
    cookie: &str,
    path: &str,
    (request, body): (&str, Json),
    (status, answer): (StatusCode, &str),
) -> Json {
    conforms(request, &body);
    let a = app.post(path, cookie, body).await;
    assert_eq!(a.status, status, "{path}: {a:?}");
    conforms(answer, &a.body);
    a.body
}

async fn get(app: &App, cookie: &str, path: &str, answer: &str) -> Json {
    let a = app.get(path, cookie).await;
    assert_eq!(a.status, StatusCode::OK, "{path}: {a:?}");
    conforms(answer, &a.body);
    a.body
}

#[tokio::test]
async fn every_route_answers_in_the_shape_of_its_schema() {
    let app = App::new().await;
    // Sessions.
    let login = json!({"user": "alice"});
    conforms("Login", &login);
    let a = app
        .call(Method::POST, "/api/login", None, Some(login))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    conforms("Principal", &a.body);
    let alice = cookie_of(&a.headers);
    get(&app, &alice, "/api/me", "Principal").await;
    get(&app, &alice, "/api/catalog", "Catalog").await;

    // Chats, messages and a streamed reply.
    let ok = StatusCode::OK;
    let created = StatusCode::CREATED;
    let chat = post(
        &app,
        &alice,
        "/api/chats",
        ("NewChat", json!({"title": "runs"})),
        (created, "Chat"),
    )
    .await;
    let chat = chat["id"].as_str().unwrap().to_owned();
    get(&app, &alice, "/api/chats", "ChatList").await;
    let chat_path = format!("/api/chats/{chat}");
    post(
        &app,
        &alice,
        &format!("{chat_path}/messages"),
        ("Message", json!({"text": "How are the runs?"})),
        (created, "ChatItem"),
    )
    .await;
    let item = post(
        &app,
        &alice,
        &format!("{chat_path}/items"),
        ("NewReply", json!({})),
        (created, "ChatItem"),
    )
    .await;
    let item_path = format!("{chat_path}/items/{}", item["id"].as_str().unwrap());
    let (first, second) = REPLY.split_at(REPLY.len() / 2);
    for part in [first, second] {
        post(
            &app,
            &alice,
            &format!("{item_path}/delta"),
            ("Delta", json!({"text": part})),
            (ok, "ReplyProgress"),
        )
        .await;
    }
    let item = post(
        &app,
        &alice,
        &format!("{item_path}/finish"),
        ("Finish", json!({})),
        (ok, "ChatItem"),
    )
    .await;
    assert!(item["uiQueries"].is_object(), "{item}");

    // The block's routes.
    let (block, revision) = first_block(&item);
    let reading = post(
        &app,
        &alice,
        "/ui/query",
        ("ChatUiQueryPayload", runs_query(&chat, &item, json!({}))),
        (ok, "ChatUiQueryReading"),
    )
    .await;
    let read = reading["readId"].clone();
    let shown = post(
        &app,
        &alice,
        "/ui/view",
        (
            "ViewPayload",
            json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision}),
        ),
        (ok, "ViewAnswer"),
    )
    .await;
    let nodes = &shown["view"]["nodes"];
    let file = find_node(nodes, "File", None).unwrap()["id"].clone();
    let link = json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision,
                      "nodeId": file, "reads": {"$runs": read}});
    let resolution = post(
        &app,
        &alice,
        "/ui/link",
        ("ChatUiLinkPayload", link),
        (ok, "UiLinkResolution"),
    )
    .await;
    assert_eq!(resolution["state"], "chip");
    let rerun = find_node(nodes, "Choice", Some("Rerun")).unwrap()["id"].clone();
    let choice = json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision,
                        "choiceId": rerun, "reads": {"$runs": read}, "values": {}});
    post(
        &app,
        &alice,
        "/ui/choice",
        ("ChatUiChoicePayload", choice.clone()),
        (ok, "ChatSendResult"),
    )
    .await;
    // The chat now holds every item field: frozen state, an answer, a choice's origin.
    let detail = get(&app, &alice, &chat_path, "ChatDetail").await;
    let items = detail["items"].as_array().unwrap();
    assert!(items.iter().any(|i| i["uiAnswers"].is_object()), "{detail}");
    assert!(items.iter().any(|i| i["uiChoice"].is_object()), "{detail}");

    // A source write and the change feed.
    let rows = json!({"rows": [{"branch": "main", "name": "web build 3", "status": "passed"}]});
    post(
        &app,
        &alice,
        "/api/sources/ci.runs/rows",
        ("Rows", rows),
        (ok, "RowsWritten"),
    )
    .await;
    get(&app, &alice, "/ui/poll", "PollBody").await;

    // An error answer: the same choice for another pick.
    let ignore = find_node(nodes, "Choice", Some("Ignore")).unwrap()["id"].clone();
    let mut other = choice;
    other["choiceId"] = ignore;
    post(
        &app,
        &alice,
        "/ui/choice",
        ("ChatUiChoicePayload", other),
        (StatusCode::CONFLICT, "WireError"),
    )
    .await;
}
