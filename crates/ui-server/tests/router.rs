//! In-process tests of every endpoint, its errors and its limits: the router as a tower
//! service (`oneshot`), no socket.

#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Method, Request, StatusCode};
use common::*;
use serde_json::{Value as Json, json};
use tower::ServiceExt;
use ui_server::limits::{MAX_BODY_BYTES, MAX_ITEM_TEXT_BYTES, MAX_TITLE_CHARS};
use ui_server::schema::wire_types;
use ui_server::{AppState, Authenticator, MAX_INSERT_ROWS, Principal, ServerConfig, SourcesConfig};

const SECS: Duration = Duration::from_secs(5);

fn frozen_read_id(item: &Json, block: &str) -> String {
    item["uiQueries"]["blocks"][block]["readings"]["$runs"]["readId"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn view(app: &App, cookie: &str, chat: &str, item: &Json, extra: Json) -> Answer {
    let (block, revision) = first_block(item);
    let mut body =
        json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    app.post("/ui/view", cookie, body).await
}

// ---- sessions ----

#[tokio::test]
async fn login_sets_a_cookie_and_me_answers_the_principal() {
    let app = App::new().await;
    let login = app
        .call(
            Method::POST,
            "/api/login",
            None,
            Some(json!({"user": "alice"})),
        )
        .await;
    assert_eq!(login.status, StatusCode::OK);
    let cookie = login.header("set-cookie").unwrap();
    assert!(cookie.starts_with("uiblocks_session="));
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert_eq!(login.body, json!({"userId": "alice", "projects": ["web"]}));
    let me = app.get("/api/me", &cookie_of(&login.headers)).await;
    assert_eq!(me.body, json!({"userId": "alice", "projects": ["web"]}));
}

#[tokio::test]
async fn unknown_users_and_sessions_are_unauthenticated() {
    let app = App::new().await;
    let a = app
        .call(
            Method::POST,
            "/api/login",
            None,
            Some(json!({"user": "mallory"})),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::UNAUTHORIZED, "unauthenticated")
    );
    let a = app.get("/api/me", "uiblocks_session=forged").await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::UNAUTHORIZED, "unauthenticated")
    );
}

#[tokio::test]
async fn every_private_route_needs_a_session() {
    let app = App::new().await;
    let routes = [
        (Method::GET, "/api/me"),
        (Method::GET, "/api/chats"),
        (Method::POST, "/api/chats"),
        (Method::GET, "/api/chats/c"),
        (Method::POST, "/api/chats/c/messages"),
        (Method::POST, "/api/chats/c/items"),
        (Method::POST, "/api/chats/c/items/i/delta"),
        (Method::POST, "/api/chats/c/items/i/finish"),
        (Method::GET, "/api/catalog"),
        (Method::POST, "/api/sources/ci.runs/rows"),
        (Method::POST, "/ui/query"),
        (Method::POST, "/ui/link"),
        (Method::POST, "/ui/choice"),
        (Method::POST, "/ui/view"),
        (Method::GET, "/ui/events"),
        (Method::GET, "/ui/poll"),
        (Method::POST, "/api/logout"),
    ];
    for (method, path) in routes {
        let body = (method == Method::POST).then(|| json!({}));
        let a = app.call(method.clone(), path, None, body).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(a.code(), "unauthenticated", "{method} {path}");
        assert_eq!(a.header("content-type"), Some("application/json"));
    }
}

#[tokio::test]
async fn logout_ends_the_session() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let a = app
        .call(Method::POST, "/api/logout", Some(&alice), None)
        .await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert!(a.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(
        app.get("/api/me", &alice).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn without_the_demo_there_is_no_login_and_nobody() {
    let dir = TempDir::new("nodemo");
    let mut config = config(&dir);
    config.demo = false;
    let app = App::with_config(config, dir).await;
    let a = app
        .call(
            Method::POST,
            "/api/login",
            None,
            Some(json!({"user": "alice"})),
        )
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::NOT_FOUND, "not-found"));
    assert_eq!(app.get("/api/me", "x=y").await.code(), "unauthenticated");
}

/// A host's own authenticator: the principal comes from a trusted proxy header.
struct ProxyAuth;

#[async_trait]
impl Authenticator for ProxyAuth {
    async fn principal(&self, parts: &Parts) -> Option<Principal> {
        let user = parts.headers.get("x-user")?.to_str().ok()?.to_owned();
        Some(Principal::new(
            user.clone(),
            vec!["web".into()],
            format!("proxy:{user}"),
        ))
    }
}

#[tokio::test]
async fn the_authenticator_is_pluggable() {
    let dir = TempDir::new("auth");
    let state = AppState::builder(config(&dir))
        .authenticator(Arc::new(ProxyAuth))
        .open()
        .await
        .unwrap();
    let app = ui_server::router(state);
    let req = Request::get("/api/me")
        .header("x-user", "carol")
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

// ---- request hygiene ----

#[tokio::test]
async fn bad_json_unknown_fields_and_wrong_types_are_bad_requests() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    for body in ["{", "[]", r#"{"title": 1}"#, r#"{"nope": 1}"#, ""] {
        let a = app.post_text("/api/chats", &alice, body).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::BAD_REQUEST, "bad-request"),
            "{body}"
        );
    }
    let a = app.post_text("/api/chats", &alice, r#"{"nope": 1}"#).await;
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field")
    );
    let a = app.post("/ui/query", &alice, json!({"chatId": "c"})).await;
    assert_eq!(a.code(), "bad-request");
    let a = app
        .post(
            "/ui/choice",
            &alice,
            json!({"chatId": "c", "itemId": "i", "blockId": "b",
            "revision": "r", "choiceId": "x", "extra": true}),
        )
        .await;
    assert_eq!(a.code(), "bad-request");
}

/// A JavaScript client that cuts a reply into deltas by UTF-16 units can split a surrogate
/// pair, and its `JSON.stringify` then writes each half as a lone `\u` escape. Each half is
/// kept as U+FFFD (one UTF-16 unit, like the half) instead of the delta being refused, so
/// the reply keeps its length and every later block keeps its offsets.
#[tokio::test]
async fn a_delta_that_splits_a_surrogate_pair_is_kept_as_replacement_characters() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let chat = app.post("/api/chats", &alice, json!({})).await;
    let base = format!("/api/chats/{}/items", chat.body["id"].as_str().unwrap());
    let item = app.post(&base, &alice, json!({})).await;
    let item = format!("{base}/{}", item.body["id"].as_str().unwrap());
    let delta = format!("{item}/delta");
    // "Ship it 🚀" cut after the rocket's first half, then a block.
    let first = app
        .post_text(&delta, &alice, r#"{"text":"Ship it \ud83d"}"#)
        .await;
    assert_eq!(first.status, StatusCode::OK, "{first:?}");
    let second = app
        .post_text(
            &delta,
            &alice,
            r#"{"text":"\ude80\n```ui\n<Summary>ok</Summary>\n```\n"}"#,
        )
        .await;
    assert_eq!(second.status, StatusCode::OK, "{second:?}");
    let done = app.post(&format!("{item}/finish"), &alice, json!({})).await;
    assert_eq!(done.status, StatusCode::OK, "{done:?}");
    assert_eq!(
        done.body["text"],
        "Ship it \u{fffd}\u{fffd}\n```ui\n<Summary>ok</Summary>\n```\n"
    );
    // The fence starts at UTF-16 unit 11, as it does in the client's own string.
    let block = &done.body["ui"][0];
    assert_eq!(
        (&block["start"], &block["complete"]),
        (&json!(11), &json!(true)),
        "{done:?}"
    );
    assert!(block["id"].as_str().unwrap().ends_with(":ui:11"), "{block}");
}

#[tokio::test]
async fn json_needs_its_content_type() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let req = Request::post("/api/chats")
        .header("cookie", alice)
        .header("content-type", "text/plain")
        .body(Body::from("{}"))
        .unwrap();
    let a = app.send(req).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type")
    );
}

#[tokio::test]
async fn bodies_up_to_the_limit_pass_and_one_byte_more_is_too_large() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let chat = app.post("/api/chats", &alice, json!({})).await;
    let path = format!("/api/chats/{}/messages", chat.body["id"].as_str().unwrap());
    let body = |len: usize| {
        let overhead = r#"{"text":""}"#.len();
        format!(r#"{{"text":"{}"}}"#, "a".repeat(len - overhead))
    };
    let at = app.post_text(&path, &alice, body(MAX_BODY_BYTES)).await;
    assert_eq!(at.status, StatusCode::CREATED);
    let over = app.post_text(&path, &alice, body(MAX_BODY_BYTES + 1)).await;
    assert_eq!(
        (over.status, over.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large")
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let a = app.get("/api/nope", &alice).await;
    assert_eq!((a.status, a.code()), (StatusCode::NOT_FOUND, "not-found"));
    let a = app
        .call(Method::DELETE, "/api/chats", Some(&alice), None)
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed")
    );
}

#[tokio::test]
async fn cross_site_requests_are_forbidden() {
    let dir = TempDir::new("origin");
    let mut config = config(&dir);
    config.origins = vec!["https://app.example".into()];
    let app = App::with_config(config, dir).await;
    let alice = app.login("alice").await;
    let with = |k: &str, v: &str| {
        Request::get("/api/me")
            .header("cookie", alice.clone())
            .header("host", "localhost:8080")
            .header(k, v)
            .body(Body::empty())
            .unwrap()
    };
    let a = app.send(with("sec-fetch-site", "cross-site")).await;
    assert_eq!((a.status, a.code()), (StatusCode::FORBIDDEN, "forbidden"));
    let a = app.send(with("origin", "https://evil.example")).await;
    assert_eq!((a.status, a.code()), (StatusCode::FORBIDDEN, "forbidden"));
    let a = app.send(with("origin", "null")).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.send(with("origin", "http://localhost:8080"))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(with("origin", "https://app.example")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(with("sec-fetch-site", "same-origin")).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn every_answer_is_no_store() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    for a in [
        app.get("/api/me", &alice).await,
        app.get("/api/nope", &alice).await,
        app.get("/api/schema", &alice).await,
    ] {
        assert_eq!(a.header("cache-control"), Some("no-store"));
    }
}

// ---- chats ----

#[tokio::test]
async fn chats_are_created_listed_and_read_by_their_owner() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let chat = app.post("/api/chats", &alice, json!({"title": "CI"})).await;
    assert_eq!(chat.status, StatusCode::CREATED);
    assert!(chat.header("x-ui-sync-seq").is_some(), "{chat:?}");
    assert_eq!(chat.body["project"], "web");
    let id = chat.body["id"].as_str().unwrap();
    let list = app.get("/api/chats", &alice).await;
    assert_eq!(list.body["chats"][0]["id"], id);
    let detail = app.get(&format!("/api/chats/{id}"), &alice).await;
    assert_eq!(detail.body["title"], "CI");
    assert_eq!(detail.body["items"], json!([]));
    let msg = app
        .post(
            &format!("/api/chats/{id}/messages"),
            &alice,
            json!({"text": "hi"}),
        )
        .await;
    assert_eq!(msg.status, StatusCode::CREATED);
    assert_eq!(msg.body["role"], "user");
    let detail = app.get(&format!("/api/chats/{id}"), &alice).await;
    assert_eq!(detail.body["items"][0]["text"], "hi");
}

#[tokio::test]
async fn others_chats_are_not_found_like_missing_ones() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let item_id = item["id"].as_str().unwrap();
    assert_eq!(app.get("/api/chats", &bob).await.body["chats"], json!([]));
    for path in [
        format!("/api/chats/{chat}"),
        "/api/chats/missing".to_owned(),
    ] {
        let a = app.get(&path, &bob).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::NOT_FOUND, "chat-not-found")
        );
    }
    let writes = [
        (format!("/api/chats/{chat}/messages"), json!({"text": "x"})),
        (format!("/api/chats/{chat}/items"), json!({})),
        (
            format!("/api/chats/{chat}/items/{item_id}/delta"),
            json!({"text": "x"}),
        ),
        (
            format!("/api/chats/{chat}/items/{item_id}/finish"),
            json!({}),
        ),
    ];
    for (path, body) in writes {
        let a = app.post(&path, &bob, body).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::NOT_FOUND, "chat-not-found"),
            "{path}"
        );
    }
    // Nothing changed for alice.
    let detail = app.get(&format!("/api/chats/{chat}"), &alice).await;
    assert_eq!(detail.body["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn chat_titles_and_projects_are_checked() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let at = app
        .post(
            "/api/chats",
            &alice,
            json!({"title": "t".repeat(MAX_TITLE_CHARS)}),
        )
        .await;
    assert_eq!(at.status, StatusCode::CREATED);
    let over = app
        .post(
            "/api/chats",
            &alice,
            json!({"title": "t".repeat(MAX_TITLE_CHARS + 1)}),
        )
        .await;
    assert_eq!(over.code(), "bad-request");
    let other = app
        .post("/api/chats", &alice, json!({"project": "ops"}))
        .await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
}

// ---- replies ----

#[tokio::test]
async fn a_reply_streams_in_deltas_then_finishes_with_revisions_and_frozen_readings() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let chat = app.post("/api/chats", &alice, json!({})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let item = app
        .post(
            &format!("/api/chats/{chat}/items"),
            &alice,
            json!({"text": "Runs:\n"}),
        )
        .await;
    assert_eq!(item.status, StatusCode::CREATED);
    assert_eq!(item.body["streaming"], true);
    let id = item.body["id"].as_str().unwrap().to_owned();
    let rest = &REPLY["Runs:\n".len()..];
    let cut = rest.find("<File").unwrap();
    let d = app
        .post(
            &format!("/api/chats/{chat}/items/{id}/delta"),
            &alice,
            json!({"text": &rest[..cut]}),
        )
        .await;
    assert_eq!(d.status, StatusCode::OK);
    assert_eq!(d.body["blocks"], 1);
    assert_eq!(d.body["streaming"], true);
    let preview = app.get(&format!("/api/chats/{chat}"), &alice).await.body["items"][0].clone();
    assert_eq!(preview["streaming"], true);
    assert_eq!(preview["ui"][0]["complete"], false);
    assert!(preview["ui"][0].get("revision").is_none());
    app.post(
        &format!("/api/chats/{chat}/items/{id}/delta"),
        &alice,
        json!({"text": &rest[cut..]}),
    )
    .await;
    let done = app
        .post(
            &format!("/api/chats/{chat}/items/{id}/finish"),
            &alice,
            json!({}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK);
    let item = done.body;
    assert_eq!(item["streaming"], false);
    assert_eq!(item["text"], REPLY);
    let (block, revision) = first_block(&item);
    assert_eq!(revision.len(), 64);
    assert!(revision.bytes().all(|b| b.is_ascii_hexdigit()));
    // The first readings are frozen and present at once: alice's project only.
    let frozen = &item["uiQueries"]["blocks"][&block];
    assert_eq!(frozen["revision"], revision.as_str());
    let reading = &frozen["readings"]["$runs"];
    assert_eq!(reading["state"], "fresh");
    assert_eq!(
        reading["value"],
        json!([{"name": "web build 1", "status": "passed"}])
    );
    assert!(
        frozen["fallback"]
            .as_str()
            .unwrap()
            .contains("Sources: $runs: ci.runs")
    );
    // Links were checked at freeze time by the demo resolver.
    let links = frozen["links"].as_object().unwrap();
    assert_eq!(links.values().filter(|l| l["state"] == "chip").count(), 2);
    assert!(links.values().any(|l| l["code"] == "outside-project"));
    // The same from a fresh read of the chat; the shapes are the schemas' shapes.
    let detail = app.get(&format!("/api/chats/{chat}"), &alice).await;
    assert_eq!(detail.body["items"][0], item);
    conforms("UiBlock", &item["ui"][0]);
    conforms("ChatUiQueryState", &item["uiQueries"]);
}

#[tokio::test]
async fn finished_and_unknown_items_refuse_deltas() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, "no blocks here").await;
    let id = item["id"].as_str().unwrap();
    let a = app
        .post(
            &format!("/api/chats/{chat}/items/{id}/delta"),
            &alice,
            json!({"text": "x"}),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "item-not-streaming")
    );
    let a = app
        .post(
            &format!("/api/chats/{chat}/items/{id}/finish"),
            &alice,
            json!({}),
        )
        .await;
    assert_eq!(a.code(), "item-not-streaming");
    let a = app
        .post(
            &format!("/api/chats/{chat}/items/nope/delta"),
            &alice,
            json!({"text": "x"}),
        )
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::NOT_FOUND, "not-found"));
    let msg = app
        .post(
            &format!("/api/chats/{chat}/messages"),
            &alice,
            json!({"text": "q"}),
        )
        .await;
    let user_item = msg.body["id"].as_str().unwrap();
    let a = app
        .post(
            &format!("/api/chats/{chat}/items/{user_item}/delta"),
            &alice,
            json!({"text": "x"}),
        )
        .await;
    assert_eq!(a.code(), "item-not-streaming");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_holds_up_to_its_byte_limit() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let chat = app.post("/api/chats", &alice, json!({})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let item = app
        .post(&format!("/api/chats/{chat}/items"), &alice, json!({}))
        .await;
    let path = format!(
        "/api/chats/{chat}/items/{}/delta",
        item.body["id"].as_str().unwrap()
    );
    let chunk = 200_000;
    let mut sent = 0;
    while sent < MAX_ITEM_TEXT_BYTES {
        let n = chunk.min(MAX_ITEM_TEXT_BYTES - sent);
        let a = app
            .post(&path, &alice, json!({"text": "x".repeat(n)}))
            .await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        sent += n;
    }
    assert_eq!(sent, MAX_ITEM_TEXT_BYTES);
    let a = app.post(&path, &alice, json!({"text": "x"})).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large")
    );
}

// ---- ui.query ----

#[tokio::test]
async fn queries_read_the_writers_project_with_changed_input() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let a = app
        .post("/ui/query", &alice, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["state"], "fresh");
    assert_eq!(
        a.body["value"],
        json!([{"name": "web build 1", "status": "passed"}])
    );
    conforms("ChatUiQueryReading", &a.body);
    // Another input of the same query reads once 250 ms passed since the freeze's read.
    let soon = app
        .post(
            "/ui/query",
            &alice,
            runs_query(&chat, &item, json!({"$branch": "dev"})),
        )
        .await;
    if soon.body["state"] == "failed" {
        assert_eq!(soon.body["code"], "refresh-limit");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let dev = app
        .post(
            "/ui/query",
            &alice,
            runs_query(&chat, &item, json!({"$branch": "dev"})),
        )
        .await;
    assert_eq!(dev.body["state"], "fresh", "{dev:?}");
    assert_eq!(
        dev.body["value"],
        json!([{"name": "web build 2", "status": "failed"}])
    );
}

#[tokio::test]
async fn tampered_input_is_a_refused_reading() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    for values in [
        json!({"$branch": "prod"}),
        json!({"$nope": 1}),
        json!({"$branch": 7}),
    ] {
        let a = app
            .post(
                "/ui/query",
                &alice,
                runs_query(&chat, &item, values.clone()),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK);
        assert_eq!(a.body["state"], "refused", "{values}");
        assert!(a.body.get("value").is_none());
    }
    let mut stale = runs_query(&chat, &item, json!({}));
    stale["revision"] = json!("0".repeat(64));
    let a = app.post("/ui/query", &alice, stale).await;
    assert_eq!(
        (a.body["state"].as_str(), a.body["code"].as_str()),
        (Some("refused"), Some("block-stale"))
    );
}

#[tokio::test]
async fn the_wire_gate_refuses_other_peoples_chats() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let a = app
        .post("/ui/query", &bob, runs_query(&chat, &item, json!({})))
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::FORBIDDEN, "refused-query")
    );
    let a = app
        .post("/ui/query", &bob, runs_query("missing", &item, json!({})))
        .await;
    assert_eq!(a.code(), "refused-query");
}

#[tokio::test]
async fn payload_ids_hold_up_to_their_limits() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let mut p = runs_query(&chat, &item, json!({}));
    p["itemId"] = json!("i".repeat(256));
    let a = app.post("/ui/query", &alice, p.clone()).await;
    assert_eq!(
        (a.status, a.body["code"].as_str()),
        (StatusCode::OK, Some("block-stale"))
    );
    p["itemId"] = json!("i".repeat(257));
    let a = app.post("/ui/query", &alice, p).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::BAD_REQUEST, "bad-request")
    );
    let mut p = runs_query(&chat, &item, json!({}));
    p["query"] = json!("q".repeat(129));
    assert_eq!(app.post("/ui/query", &alice, p).await.code(), "bad-request");
}

// ---- ui.link ----

#[tokio::test]
async fn links_become_chips_or_stay_plain() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let (block, revision) = first_block(&item);
    let read = frozen_read_id(&item, &block);
    let shown = view(&app, &alice, &chat, &item, json!({})).await.body;
    let node = |path: &str| {
        find_node(&shown["view"]["nodes"], "File", None)
            .into_iter()
            .chain(std::iter::once(
                &shown["view"]["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|n| n["props"]["path"] == path)
                    .unwrap()["id"],
            ))
            .last()
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    };
    let link = |node_id: String, reads: Json| {
        json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision,
               "nodeId": node_id, "reads": reads})
    };
    let a = app
        .post(
            "/ui/link",
            &alice,
            link(node("src/app.rs"), json!({"$runs": read})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["state"], "chip");
    assert_eq!(
        a.body["target"],
        json!({"type": "File", "path": "src/app.rs", "line": 3})
    );
    assert_eq!(a.body["projectId"], "web");
    conforms("UiLinkResolution", &a.body);
    let a = app
        .post(
            "/ui/link",
            &alice,
            link(node("../secret.pem"), json!({"$runs": read})),
        )
        .await;
    assert_eq!(
        (a.body["state"].as_str(), a.body["code"].as_str()),
        (Some("plain"), Some("outside-project"))
    );
    let a = app
        .post(
            "/ui/link",
            &alice,
            link("nope".into(), json!({"$runs": read})),
        )
        .await;
    assert_eq!(a.body["code"], "link-unsupported");
    let a = app
        .post("/ui/link", &alice, link(node("src/app.rs"), json!({})))
        .await;
    assert_eq!(a.body["code"], "stale-read");
    let a = app
        .post(
            "/ui/link",
            &bob,
            link(node("src/app.rs"), json!({"$runs": read})),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::FORBIDDEN, "refused-query")
    );
}

// ---- ui.choice ----

#[tokio::test]
async fn a_choice_becomes_the_next_user_message_once() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let (block, revision) = first_block(&item);
    let read = frozen_read_id(&item, &block);
    let shown = view(&app, &alice, &chat, &item, json!({})).await.body;
    let rerun = find_node(&shown["view"]["nodes"], "Choice", Some("Rerun")).unwrap()["id"].clone();
    let ignore =
        find_node(&shown["view"]["nodes"], "Choice", Some("Ignore")).unwrap()["id"].clone();
    let choice = |choice_id: &Json, reads: Json, values: Json| {
        json!({"chatId": chat, "itemId": item["id"], "blockId": block, "revision": revision,
               "choiceId": choice_id, "reads": reads, "values": values})
    };
    // Refusals first: another person, a missing read id, a tampered value, a stale block.
    let a = app
        .post(
            "/ui/choice",
            &bob,
            choice(&rerun, json!({"$runs": read}), json!({})),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::FORBIDDEN, "refused-query")
    );
    let a = app
        .post("/ui/choice", &alice, choice(&rerun, json!({}), json!({})))
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "stale-ui-query")
    );
    assert_eq!(a.body["error"]["reason"], "stale-read");
    let a = app
        .post(
            "/ui/choice",
            &alice,
            choice(&rerun, json!({"$runs": read}), json!({"$branch": "prod"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{a:?}");
    assert_eq!(a.code(), "refused-query");
    let mut stale = choice(&rerun, json!({"$runs": read}), json!({}));
    stale["revision"] = json!("f".repeat(64));
    let a = app.post("/ui/choice", &alice, stale).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "stale-ui-block")
    );
    conforms("WireError", &a.body);
    // The pick.
    let a = app
        .post(
            "/ui/choice",
            &alice,
            choice(&rerun, json!({"$runs": read}), json!({})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    assert_eq!(a.body, json!({"queued": false}));
    assert!(a.header("x-ui-sync-seq").is_some());
    let again = app
        .post(
            "/ui/choice",
            &alice,
            choice(&rerun, json!({"$runs": read}), json!({})),
        )
        .await;
    assert_eq!(again.body, a.body);
    let other = app
        .post(
            "/ui/choice",
            &alice,
            choice(&ignore, json!({"$runs": read}), json!({})),
        )
        .await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::CONFLICT, "ui-already-answered")
    );
    let detail = app.get(&format!("/api/chats/{chat}"), &alice).await.body;
    let items = detail["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "one message for two identical picks");
    assert_eq!(items[1]["role"], "user");
    assert_eq!(items[1]["text"], "Rerun the failed jobs");
    assert_eq!(items[1]["uiChoice"]["label"], "Rerun");
    let answer = &items[0]["uiAnswers"][&block];
    assert_eq!(answer["choiceId"], rerun);
    conforms("ChatUiAnswer", answer);
}

#[tokio::test]
async fn a_choice_with_an_invalid_value_fails_with_the_interpreter_code() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let text = "```ui\n$n = 1\n<Slider value={$n} min={0} max={5}/>\n\
                <Choices><Choice>Go</Choice></Choices>\n```\n";
    let (chat, item) = app.chat_with_reply(&alice, text).await;
    let (block, revision) = first_block(&item);
    let shown = view(&app, &alice, &chat, &item, json!({})).await.body;
    let go = find_node(&shown["view"]["nodes"], "Choice", None).unwrap()["id"].clone();
    let a = app
        .post(
            "/ui/choice",
            &alice,
            json!({"chatId": chat, "itemId": item["id"], "blockId": block,
            "revision": revision, "choiceId": go, "values": {"$n": 9}}),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_value")
    );
    let a = app
        .post(
            "/ui/choice",
            &alice,
            json!({"chatId": chat, "itemId": item["id"], "blockId": block,
            "revision": revision, "choiceId": "nope"}),
        )
        .await;
    assert_eq!(a.code(), "refused_choice");
}

// ---- ui.view ----

/// The text of a view node's `$text` descendants.
fn text_of(node: &Json) -> String {
    let mut out = node["props"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for child in node["children"].as_array().into_iter().flatten() {
        out.push_str(&text_of(child));
    }
    out
}

#[tokio::test]
async fn the_view_evaluates_values_readings_edits_and_presses() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let text = "```ui\n$branch = \"main\"\n$n = 1\n$runs = @Query(\"ci.runs\", {branch: $branch})\n\
                <Summary>{@Count($runs)} runs on {$branch}, n={$n}</Summary>\n\
                <Segmented value={$branch}><Option value=\"main\">main</Option><Option value=\"dev\">dev</Option></Segmented>\n\
                <Button action={@Set($n, 3)}>three</Button>\n```\n";
    let (chat, item) = app.chat_with_reply(&alice, text).await;
    let runs = json!([{"name": "a"}, {"name": "b"}]);
    let a = view(
        &app,
        &alice,
        &chat,
        &item,
        json!({"readings": {"$runs": runs}}),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    conforms("UiView", &a.body["view"]);
    let summary = find_node(&a.body["view"]["nodes"], "Summary", None).unwrap();
    assert_eq!(text_of(summary), "2 runs on main, n=1");
    let segmented = find_node(&a.body["view"]["nodes"], "Segmented", None).unwrap()["id"].clone();
    let button = find_node(&a.body["view"]["nodes"], "Button", None).unwrap()["id"].clone();
    let a = view(
        &app,
        &alice,
        &chat,
        &item,
        json!({"readings": {"$runs": runs},
        "change": {"nodeId": segmented, "prop": "value", "value": "dev"}}),
    )
    .await;
    assert_eq!(a.body["changed"], true);
    assert_eq!(a.body["values"], json!({"$branch": "dev", "$n": 1}));
    let a = view(
        &app,
        &alice,
        &chat,
        &item,
        json!({"values": {"$branch": "dev"}, "press": button}),
    )
    .await;
    assert_eq!(a.body["values"], json!({"$branch": "dev", "$n": 3}));
    // Refusals carry the interpreter's codes.
    let a = view(&app, &alice, &chat, &item, json!({"values": {"$nope": 1}})).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "refused_binding")
    );
    let a = view(&app, &alice, &chat, &item, json!({"values": {"$n": "x"}})).await;
    assert_eq!(a.code(), "invalid_value");
    let a = view(&app, &alice, &chat, &item, json!({"readings": {"$n": 1}})).await;
    assert_eq!(a.code(), "refused_query");
    let a = view(
        &app,
        &alice,
        &chat,
        &item,
        json!({"revision": "0".repeat(64)}),
    )
    .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "stale-ui-block")
    );
    let a = view(&app, &bob, &chat, &item, json!({})).await;
    assert_eq!(a.code(), "refused-query");
}

// ---- catalog, schemas ----

#[tokio::test]
async fn the_catalog_has_the_prompt_texts_and_sources() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let a = app.get("/api/catalog", &alice).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["sessionNote"], ui_core::catalog::session_note("ui"));
    assert_eq!(
        a.body["compactCatalog"],
        ui_core::catalog::compact_catalog()
    );
    assert!(a.body["referenceText"].as_str().unwrap().len() > 1000);
    assert_eq!(a.body["sources"][0]["name"], "ci.runs");
    assert_eq!(a.body["sources"][0]["writable"], true);
    assert_eq!(a.body["sources"][0]["args"]["required"], json!(["branch"]));
}

#[tokio::test]
async fn every_wire_type_has_a_schema() {
    let app = App::new().await;
    let list = app.call(Method::GET, "/api/schema", None, None).await;
    let types = list.body["types"].as_array().unwrap();
    assert_eq!(types.len(), wire_types().len());
    for name in [
        "ChatUiQueryPayload",
        "ChatUiQueryReading",
        "UiLinkResolution",
        "ChatUiAnswer",
        "PollBody",
        "WireError",
        "ChatItem",
        "UiView",
    ] {
        assert!(types.iter().any(|t| t == name), "{name}");
    }
    for name in types {
        let a = app
            .call(
                Method::GET,
                &format!("/api/schema/{}", name.as_str().unwrap()),
                None,
                None,
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{name}");
        assert!(
            a.body["$schema"]
                .as_str()
                .unwrap()
                .contains("json-schema.org"),
            "{name}"
        );
    }
    let payload = app
        .call(Method::GET, "/api/schema/ChatUiQueryPayload", None, None)
        .await
        .body;
    assert_eq!(payload["additionalProperties"], false);
    assert_eq!(
        payload["required"],
        json!(["chatId", "itemId", "blockId", "revision", "query"])
    );
    let a = app.call(Method::GET, "/api/schema/Nope", None, None).await;
    assert_eq!((a.status, a.code()), (StatusCode::NOT_FOUND, "not-found"));
}

// ---- the change feed ----

async fn poll(app: &App, cookie: &str, cursor: Option<&str>) -> Answer {
    let path = match cursor {
        Some(c) => format!("/ui/poll?cursor={c}"),
        None => "/ui/poll".to_owned(),
    };
    app.get(&path, cookie).await
}

#[tokio::test]
async fn polls_carry_only_the_principals_events() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let a0 = poll(&app, &alice, None).await;
    assert_eq!(a0.status, StatusCode::OK);
    assert_eq!(a0.body["events"], json!([]));
    conforms("PollBody", &a0.body);
    let b0 = poll(&app, &bob, None).await.body["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let cursor = a0.body["cursor"].as_str().unwrap().to_owned();
    let chat = app.post("/api/chats", &alice, json!({})).await;
    let seq = chat.header("x-ui-sync-seq").unwrap().to_owned();
    // The tailer publishes shortly after the commit.
    let mut events = Json::Null;
    for _ in 0..100 {
        let a = poll(&app, &alice, Some(&cursor)).await;
        if a.body["events"].as_array().is_some_and(|e| !e.is_empty()) {
            events = a.body["events"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(events[0]["source"], "host.chats");
    assert_eq!(
        events[0]["seq"].as_u64().unwrap().to_string(),
        seq.split('.').nth(1).unwrap()
    );
    let b = poll(&app, &bob, Some(&b0)).await;
    assert_eq!(b.body["events"], json!([]));
}

#[tokio::test]
async fn a_malformed_cursor_is_a_reset() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let a = poll(&app, &alice, Some("junk")).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["reset"], json!({"reason": "invalid"}));
}

#[tokio::test]
async fn polls_are_rate_limited_per_session() {
    // One token a second, so the burst is spent well within the refill of one token.
    let dir = TempDir::new("rate");
    let mut config = config(&dir);
    config.sync_limits = config.sync_limits.with("pollRate", 1).unwrap();
    let burst = config.sync_limits.poll_burst();
    let app = App::with_config(config, dir).await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    for i in 0..burst {
        assert_eq!(
            poll(&app, &alice, None).await.status,
            StatusCode::OK,
            "poll {i}"
        );
    }
    let a = poll(&app, &alice, None).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::TOO_MANY_REQUESTS, "rate-limited")
    );
    assert_eq!(a.header("retry-after"), Some("1"));
    // Another session has its own bucket; time refills this one.
    assert_eq!(poll(&app, &bob, None).await.status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(poll(&app, &alice, None).await.status, StatusCode::OK);
}

async fn open_events(
    app: &App,
    cookie: &str,
    last_event_id: Option<&str>,
) -> axum::response::Response {
    let mut req = Request::get("/ui/events").header("cookie", cookie);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    app.router
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_say_hello_tick_with_ids_and_resume_from_last_event_id() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let response = open_events(&app, &alice, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let mut sse = Sse::new(response.into_body());
    let hello = sse.next(SECS).await.unwrap();
    assert_eq!(hello.event, "hello");
    conforms("StreamHello", &hello.data);
    let start = hello.id.clone().unwrap();
    assert_eq!(hello.data["cursor"], start.as_str());
    assert_eq!(hello.data["tickMs"], 300);
    let tick = sse.next(SECS).await.unwrap();
    assert_eq!(tick.event, "tick");
    assert_eq!(tick.id.as_deref(), Some(start.as_str()));
    conforms("StreamTick", &tick.data);
    // A change arrives live …
    let chat = app.post("/api/chats", &alice, json!({})).await;
    let frames = sse.until("changes", SECS).await;
    let changes = frames.last().unwrap();
    assert_eq!(changes.event, "changes");
    assert_eq!(changes.data["events"][0]["source"], "host.chats");
    assert_eq!(changes.id.as_deref(), chat.header("x-ui-sync-seq"));
    conforms("StreamChanges", &changes.data);
    // … and a reconnect from before it catches up.
    let response = open_events(&app, &alice, Some(&start)).await;
    let mut again = Sse::new(response.into_body());
    assert_eq!(
        again.next(SECS).await.unwrap().id.as_deref(),
        Some(start.as_str())
    );
    let caught = again.next(SECS).await.unwrap();
    assert_eq!(caught.event, "changes");
    assert_eq!(caught.data["events"][0]["source"], "host.chats");
    // A resume point that does not parse is a reset, never an error.
    let mut junk = Sse::new(open_events(&app, &alice, Some("junk")).await.into_body());
    assert_eq!(junk.next(SECS).await.unwrap().event, "hello");
    let reset = junk.next(SECS).await.unwrap();
    assert_eq!(
        (reset.event.as_str(), &reset.data["reason"]),
        ("reset", &json!("invalid"))
    );
    conforms("StreamReset", &reset.data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_holds_at_most_six_streams() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let limit = ui_core::SyncLimits::DEFAULT.session_streams() as usize;
    let mut open = Vec::new();
    for _ in 0..limit {
        let r = open_events(&app, &alice, None).await;
        assert_eq!(r.status(), StatusCode::OK);
        open.push(r);
    }
    let r = open_events(&app, &alice, None).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "30");
    assert_eq!(open_events(&app, &bob, None).await.status(), StatusCode::OK);
    // Closing one frees its place.
    drop(open.pop());
    let mut reopened = false;
    for _ in 0..100 {
        if open_events(&app, &alice, None).await.status() == StatusCode::OK {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_ends_the_sessions_streams() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let mut sse = Sse::new(open_events(&app, &alice, None).await.into_body());
    assert_eq!(sse.next(SECS).await.unwrap().event, "hello");
    app.call(Method::POST, "/api/logout", Some(&alice), None)
        .await;
    let frames = sse.until("bye", SECS).await;
    let bye = frames.last().unwrap();
    assert_eq!(bye.event, "bye");
    assert_eq!(bye.data, json!({"reason": "signed-out"}));
    conforms("StreamBye", &bye.data);
    assert!(bye.id.is_none());
    assert!(sse.next(Duration::from_millis(500)).await.is_none());
}

#[tokio::test]
async fn a_stream_that_missed_sign_outs_rotates_to_be_authenticated_again() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let mut sse = Sse::new(open_events(&app, &alice, None).await.into_body());
    assert_eq!(sse.next(SECS).await.unwrap().event, "hello");
    // More sign-outs than the server keeps unread (64, `SIGN_OUTS_UNREAD`), with no chance
    // for the stream to read them (one thread, no await): whether its own session was among
    // them is unknown.
    for i in 0..100 {
        app.state.end_session(&format!("someone-else-{i}"));
    }
    let frames = sse.until("bye", SECS).await;
    let bye = frames.last().unwrap();
    assert_eq!(bye.event, "bye");
    assert_eq!(bye.data, json!({"reason": "rotate", "retryMs": 0}));
    assert!(sse.next(Duration::from_millis(500)).await.is_none());
    // Its session is still good: the client reconnects and is served.
    let again = open_events(&app, &alice, None).await;
    assert_eq!(again.status(), StatusCode::OK);
}

// ---- source writes ----

#[tokio::test]
async fn rows_are_written_and_recorded_for_the_project() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let a0 = poll(&app, &alice, None).await.body["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let b0 = poll(&app, &bob, None).await.body["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let req = Request::post("/api/sources/ci.runs/rows")
        .header("cookie", alice.clone())
        .header("content-type", "application/json")
        .header("x-ui-request-source", "p-page1")
        .body(Body::from(
            json!({"rows": [{"branch": "main", "name": "web build 3", "status": "passed"}]})
                .to_string(),
        ))
        .unwrap();
    let a = app.send(req).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    assert_eq!(a.body["rows"], 1);
    assert_eq!(a.header("x-ui-sync-seq"), a.body["cursor"].as_str());
    let mut events = Json::Null;
    for _ in 0..100 {
        let p = poll(&app, &alice, Some(&a0)).await;
        if p.body["events"].as_array().is_some_and(|e| !e.is_empty()) {
            events = p.body["events"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(events[0]["source"], "ci.runs");
    assert_eq!(events[0]["rs"], "p-page1");
    assert!(events[0]["key"].is_string());
    assert_eq!(poll(&app, &bob, Some(&b0)).await.body["events"], json!([]));
    // The new row is read for alice's project.
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let frozen = &item["uiQueries"]["blocks"][first_block(&item).0]["readings"]["$runs"];
    assert_eq!(frozen["value"].as_array().unwrap().len(), 2, "{chat}");
}

#[tokio::test]
async fn row_writes_are_checked() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let row = json!({"branch": "main", "name": "n", "status": "passed"});
    let a = app
        .post("/api/sources/nope/rows", &alice, json!({"rows": [row]}))
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::NOT_FOUND, "not-found"));
    let a = app
        .post(
            "/api/sources/ci.runs/rows",
            &alice,
            json!({"rows": [{"branch": "main"}]}),
        )
        .await;
    assert_eq!(a.code(), "bad-request");
    let a = app
        .post(
            "/api/sources/ci.runs/rows",
            &alice,
            json!({"rows": [{"branch": "main", "name": "n", "status": "meh"}]}),
        )
        .await;
    assert_eq!(a.code(), "bad-request");
    let a = app
        .post(
            "/api/sources/ci.runs/rows",
            &alice,
            json!({"project": "ops", "rows": [row]}),
        )
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::FORBIDDEN, "forbidden"));
    let a = app
        .post("/api/sources/ci.runs/rows", &alice, json!({"rows": []}))
        .await;
    assert_eq!(a.code(), "bad-request");
    let rows = |n: usize| Json::Array(vec![row.clone(); n]);
    let a = app
        .post(
            "/api/sources/ci.runs/rows",
            &alice,
            json!({"rows": rows(MAX_INSERT_ROWS)}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["rows"], MAX_INSERT_ROWS);
    let a = app
        .post(
            "/api/sources/ci.runs/rows",
            &alice,
            json!({"rows": rows(MAX_INSERT_ROWS + 1)}),
        )
        .await;
    assert_eq!(a.code(), "bad-request");
}

// ---- configuration ----

async fn open_with(sources: &str) -> Result<AppState, String> {
    let dir = TempDir::new("cfg");
    let mut config = ServerConfig::new(dir.0.join("app.db"));
    config.sources = SourcesConfig::Inline(sources.to_owned());
    let out = AppState::open(config).await.map_err(|e| e.to_string());
    drop(dir);
    out
}

#[tokio::test]
async fn source_statements_are_checked_when_the_server_opens() {
    let table = "setup = \"CREATE TABLE IF NOT EXISTS t (a TEXT)\"\n";
    let source = |sql: &str| {
        format!(
            "{table}[[source]]\nname = \"s\"\nsql = \"{sql}\"\nargs = {{ type = \"object\", properties = {{ a = {{ type = \"string\" }} }} }}\n"
        )
    };
    assert!(
        open_with(&source("SELECT a FROM t WHERE a = :a"))
            .await
            .is_ok()
    );
    let e = open_with(&source("DELETE FROM t")).await.unwrap_err();
    assert!(e.contains("read-only"), "{e}");
    let e = open_with(&source("SELECT a FROM t WHERE a = :b"))
        .await
        .unwrap_err();
    assert!(e.contains(":b"), "{e}");
    let e = open_with(&source("SELECT a FROM t WHERE a = ?"))
        .await
        .unwrap_err();
    assert!(e.contains("named parameters"), "{e}");
    let e = open_with(&source("SELECT a FROM t WHERE a = @secret"))
        .await
        .unwrap_err();
    assert!(e.contains("@secret"), "{e}");
    let e = open_with(&source("SELECT nope FROM t")).await.unwrap_err();
    assert!(e.contains("nope"), "{e}");
    let e = open_with("[[source]]\nname = \"s\"").await.unwrap_err();
    assert!(e.contains("missing field"), "{e}");
}

#[tokio::test]
async fn the_database_survives_a_restart() {
    let dir = TempDir::new("restart");
    let (chat, item_id) = {
        let app = App::with_config(config(&dir), TempDir::new("unused")).await;
        let alice = app.login("alice").await;
        let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
        app.state.sync().shutdown().await;
        (chat, item["id"].as_str().unwrap().to_owned())
    };
    let app = App::with_config(config(&dir), TempDir::new("unused")).await;
    let alice = app.login("alice").await;
    let detail = app.get(&format!("/api/chats/{chat}"), &alice).await;
    assert_eq!(detail.status, StatusCode::OK);
    assert_eq!(detail.body["items"][0]["id"], item_id.as_str());
    assert_eq!(
        detail.body["items"][0]["uiQueries"]["blocks"]
            .as_object()
            .unwrap()
            .len(),
        1
    );
    drop(dir);
}

// ---- echo suppression (sync.md §4.4) ----

/// The events recorded after `cursor`, polling until some arrive.
async fn events_after(app: &App, cookie: &str, cursor: &str) -> Vec<Json> {
    for _ in 0..100 {
        let p = poll(app, cookie, Some(cursor)).await;
        if let Some(events) = p.body["events"].as_array().filter(|e| !e.is_empty()) {
            return events.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Vec::new()
}

#[tokio::test]
async fn a_choice_records_the_pages_request_source_and_answers_its_seq() {
    let app = App::new().await;
    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, REPLY).await;
    let (block, revision) = first_block(&item);
    let read = frozen_read_id(&item, &block);
    let shown = view(&app, &alice, &chat, &item, json!({})).await.body;
    let rerun = find_node(&shown["view"]["nodes"], "Choice", Some("Rerun")).unwrap()["id"].clone();
    let choose = |rs: &str| {
        Request::post("/ui/choice")
            .header("cookie", alice.clone())
            .header("content-type", "application/json")
            .header("x-ui-request-source", rs)
            .body(Body::from(
                json!({"chatId": chat, "itemId": item["id"], "blockId": block,
                       "revision": revision, "choiceId": rerun, "reads": {"$runs": read},
                       "values": {}})
                .to_string(),
            ))
            .unwrap()
    };
    let page = format!("p-{}", "a".repeat(26));
    let before = poll(&app, &alice, None).await.body["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let a = app.send(choose(&page)).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    let seq = a.header("x-ui-sync-seq").expect("a write answers its seq");
    let events = events_after(&app, &alice, &before).await;
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|e| e["source"] == "host.chats" && e["rs"] == page.as_str()),
        "{events:?}"
    );
    let top = events
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .unwrap();
    assert_eq!(top.to_string(), seq.split('.').nth(1).unwrap());
    // An invalid request source counts as absent, never as an error.
    let (chat2, _) = app.chat_with_reply(&alice, REPLY).await;
    let before = poll(&app, &alice, None).await.body["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let req = Request::post(format!("/api/chats/{chat2}/messages"))
        .header("cookie", alice.clone())
        .header("content-type", "application/json")
        .header("x-ui-request-source", "not a page id!")
        .body(Body::from(json!({"text": "hi"}).to_string()))
        .unwrap();
    let a = app.send(req).await;
    assert_eq!(a.status, StatusCode::CREATED, "{a:?}");
    assert!(a.header("x-ui-sync-seq").is_some());
    let events = events_after(&app, &alice, &before).await;
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e["rs"].is_null()), "{events:?}");
}
