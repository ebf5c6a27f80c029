//! The embedding example (`examples/embed.rs`) end to end: the application's own routes
//! and sign-in next to uiblocks under `/assist`, its `Authenticator`, and its Rust source
//! (`shop.orders`, serde + garde) read through `/assist/ui/query`; arguments that break
//! the garde rules are `invalid_query` in a compiled reply and a refused reading for a
//! person's input.

mod common;
#[path = "../examples/embed.rs"]
#[allow(dead_code, unreachable_pub)]
mod embed;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value as Json, json};
use tower::ServiceExt;

struct Shop {
    app: Router,
    state: ui_server::AppState,
    _dir: common::TempDir,
}

impl Shop {
    async fn new() -> Self {
        let dir = common::TempDir::new("embed");
        let (app, state) = embed::app(&dir.0.join("shop.db")).await.unwrap();
        Shop {
            app,
            state,
            _dir: dir,
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        cookie: Option<&str>,
        body: Option<Json>,
    ) -> (StatusCode, HeaderMap, Json) {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(c) = cookie {
            req = req.header(header::COOKIE, c);
        }
        let body = match body {
            Some(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        let response = self
            .app
            .clone()
            .oneshot(req.body(body).unwrap())
            .await
            .unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, headers, body)
    }

    /// Signs in through the application's own route; the cookie to send.
    async fn sign_in(&self, user: &str) -> String {
        let (status, headers, _) = self
            .call(Method::POST, "/login", None, Some(json!({ "user": user })))
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let cookie = headers[header::SET_COOKIE].to_str().unwrap();
        cookie.split(';').next().unwrap().to_owned()
    }

    /// A chat of `cookie`'s user with `reply` finished in it: the chat id and the item.
    async fn reply(&self, cookie: &str, reply: &str) -> (String, Json) {
        let (status, _, chat) = self
            .call(
                Method::POST,
                "/assist/api/chats",
                Some(cookie),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{chat}");
        let chat_id = chat["id"].as_str().unwrap().to_owned();
        let (status, _, item) = self
            .call(
                Method::POST,
                &format!("/assist/api/chats/{chat_id}/items"),
                Some(cookie),
                Some(json!({ "text": reply })),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{item}");
        let item_id = item["id"].as_str().unwrap();
        let (status, _, item) = self
            .call(
                Method::POST,
                &format!("/assist/api/chats/{chat_id}/items/{item_id}/finish"),
                Some(cookie),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{item}");
        (chat_id, item)
    }
}

const ORDERS_REPLY: &str = "Open orders:\n```ui\n$limit = 1\n\
$orders = @Query(\"shop.orders\", {status: \"open\", limit: $limit})\n\
<Summary>{@Count($orders)} open orders</Summary>\n\
<Slider value={$limit} min={1} max={100}/>\n```\n";

fn query(chat_id: &str, item: &Json, limit: u32) -> Json {
    json!({
        "chatId": chat_id,
        "itemId": item["id"],
        "blockId": item["ui"][0]["id"],
        "revision": item["ui"][0]["revision"],
        "query": "$orders",
        "values": {"$limit": limit},
    })
}

#[tokio::test]
async fn the_application_signs_in_and_uiblocks_follows_under_its_prefix() {
    let shop = Shop::new().await;
    let (status, _, body) = shop.call(Method::GET, "/", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.as_str().unwrap().contains("/assist"));

    // Without the application's cookie uiblocks knows nobody.
    let (status, _, body) = shop.call(Method::GET, "/assist/api/me", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthenticated");
    let (status, _, _) = shop
        .call(
            Method::POST,
            "/login",
            None,
            Some(json!({"user": "mallory"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let carol = shop.sign_in("carol").await;
    let (status, _, me) = shop
        .call(Method::GET, "/assist/api/me", Some(&carol), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me, json!({"userId": "carol", "projects": ["north"]}));

    // The Rust source is in the catalog agents read, with its rules as JSON Schema.
    let (status, _, catalog) = shop
        .call(Method::GET, "/assist/api/catalog", Some(&carol), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let source = &catalog["sources"][0];
    assert_eq!(source["name"], "shop.orders");
    assert_eq!(source["args"]["properties"]["limit"]["maximum"], 20);

    // Unknown routes under the prefix answer uiblocks' error body; the demo's are absent.
    let (status, _, body) = shop
        .call(
            Method::POST,
            "/assist/api/login",
            None,
            Some(json!({"user": "carol"})),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("not-found"))
    );
    shop.state.sync().shutdown().await;
}

#[tokio::test]
async fn the_rust_source_reads_for_the_writing_shop_and_refuses_what_garde_refuses() {
    let shop = Shop::new().await;
    let carol = shop.sign_in("carol").await;
    let (chat_id, item) = shop.reply(&carol, ORDERS_REPLY).await;
    let diagnostics = &item["ui"][0]["diagnostics"];
    assert!(diagnostics.as_array().is_none_or(Vec::is_empty), "{item}");

    // Within the rules: the orders of carol's shop, serialized from `Order` (the reading
    // the finish froze, cached: another limit within 250 ms would be `refresh-limit`).
    let (status, _, reading) = shop
        .call(
            Method::POST,
            "/assist/ui/query",
            Some(&carol),
            Some(query(&chat_id, &item, 1)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reading["state"], "fresh", "{reading}");
    assert_eq!(
        reading["value"],
        json!([{"id": "N-1001", "customer": "Ada", "status": "open", "totalCents": 4200}])
    );

    // A limit the Slider allows but the source's garde rule does not: refused before the
    // source runs, with garde's message and no code (`host.md` §6.1 step 6).
    let (status, _, reading) = shop
        .call(
            Method::POST,
            "/assist/ui/query",
            Some(&carol),
            Some(query(&chat_id, &item, 50)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reading["state"], "refused", "{reading}");
    assert_eq!(reading.get("code"), None, "{reading}");
    assert!(
        reading["reason"].as_str().unwrap().contains("limit"),
        "{reading}"
    );

    // Another shop's user cannot read carol's chat.
    let dave = shop.sign_in("dave").await;
    let (status, _, body) = shop
        .call(
            Method::POST,
            "/assist/ui/query",
            Some(&dave),
            Some(query(&chat_id, &item, 1)),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::FORBIDDEN, &json!("refused-query"))
    );

    // An agent's arguments that break the rules: the reply's block says `invalid_query`.
    let lost = "Lost orders:\n```ui\n$orders = @Query(\"shop.orders\", {status: \"lost\"})\n\
        <Summary>{@Count($orders)} lost orders</Summary>\n```\n";
    let (_, item) = shop.reply(&carol, lost).await;
    let codes: Vec<&Json> = item["ui"][0]["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics: {item}"))
        .iter()
        .map(|d| &d["code"])
        .collect();
    assert!(codes.contains(&&json!("invalid_query")), "{item}");
    let message = item["ui"][0]["diagnostics"][0]["message"].as_str().unwrap();
    assert!(message.contains("open"), "{message}");
    shop.state.sync().shutdown().await;
}
