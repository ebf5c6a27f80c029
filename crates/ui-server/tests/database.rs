//! The server's routes on either database: the same scenario — chats, items, a reply
//! streamed in deltas and finished, its frozen readings, a choice sent twice, its
//! answer, paging, and the change events of every write — on the SQLite file and on
//! PostgreSQL (`database.url = "postgres://…"`).
//!
//! The PostgreSQL run needs `UI_SYNC_PG` (a connection string of a cluster the test may
//! create databases on; `cargo xtask ci` starts one and sets it together with
//! `UI_PG_REQUIRED`). Without it that test says so and passes, unless `UI_PG_REQUIRED`
//! is set.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{Answer, App, TempDir, config, find_node, first_block};
use serde_json::{Value as Json, json};
use ui_core::Value;
use ui_host::FnSource;
use ui_server::{AppState, PostgresConfig, ServerConfig, SourceInfo, SourcesConfig, router};

/// A reply whose block reads the Rust source `app.runs` and offers two choices.
const REPLY: &str = "Runs:\n```ui\n$runs = @Query(\"app.runs\", {branch: \"main\"})\n\
<Summary>{@Count($runs)} runs</Summary>\n\
<Choices><Choice context=\"Rerun the failed jobs\">Rerun</Choice><Choice>Ignore</Choice></Choices>\n```\n";

/// The PostgreSQL cluster of the tests, or `None` (said, or a failure when required).
fn cluster() -> Option<String> {
    let found = std::env::var("UI_SYNC_PG")
        .ok()
        .filter(|s| !s.trim().is_empty());
    if found.is_none() {
        assert!(
            std::env::var_os("UI_PG_REQUIRED").is_none(),
            "UI_PG_REQUIRED is set but UI_SYNC_PG is not"
        );
        eprintln!("skipped on PostgreSQL: UI_SYNC_PG not set");
    }
    found
}

/// `conninfo` (a URL or `key=value` string) naming the database `name` instead.
fn with_dbname(conninfo: &str, name: &str) -> String {
    match ["postgres://", "postgresql://"]
        .iter()
        .find_map(|p| conninfo.strip_prefix(p))
    {
        Some(rest) => {
            let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
            let authority = main.split('/').next().unwrap_or("");
            let query = if query.is_empty() {
                String::new()
            } else {
                format!("?{query}")
            };
            format!("postgres://{authority}/{name}{query}")
        }
        None => format!("{conninfo} dbname={name}"),
    }
}

/// Runs `sql` on the cluster's own database.
async fn admin(conninfo: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(conninfo, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
}

/// The in-process app on `config` with the Rust source `app.runs` (no SQL sources: they
/// read the SQLite file).
async fn app(mut config: ServerConfig, dir: TempDir) -> App {
    config.sources = SourcesConfig::None;
    let source = FnSource::from_json_schemas(
        &json!({"type": "object", "additionalProperties": false,
                "properties": {"branch": {"type": "string"}}}),
        &json!({"type": "array", "items": {"type": "object",
                "properties": {"name": {"type": "string"}}}}),
        |_| async {
            Ok(Value::from_json_str(r#"[{"name":"build 1"},{"name":"build 2"}]"#).unwrap())
        },
    )
    .unwrap();
    let info = SourceInfo {
        name: "app.runs".into(),
        description: Some("Runs".into()),
        args: json!({"type": "object"}),
        writable: false,
    };
    let state = AppState::builder(config)
        .source(info, source)
        .open()
        .await
        .unwrap();
    App {
        router: router(state.clone()),
        state,
        dir,
    }
}

async fn poll(app: &App, cookie: &str, cursor: &str) -> Answer {
    app.get(&format!("/ui/poll?cursor={cursor}"), cookie).await
}

/// Polls until the events after `cursor` reach the seq of `header`; those events.
async fn events_through(app: &App, cookie: &str, cursor: &str, header: &str) -> Vec<Json> {
    let seq: u64 = header.split('.').nth(1).unwrap().parse().unwrap();
    let mut seen = Vec::new();
    let mut cursor = cursor.to_owned();
    for _ in 0..200 {
        let a = poll(app, cookie, &cursor).await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        seen.extend(a.body["events"].as_array().cloned().unwrap_or_default());
        cursor = a.body["cursor"].as_str().unwrap().to_owned();
        if seen.iter().any(|e| e["seq"].as_u64() >= Some(seq)) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no event reached seq {seq}: {seen:?}");
}

/// The scenario (see the module docs).
async fn scenario(app: &App) {
    let alice = app.login("alice").await;
    let bob = app.login("bob").await;
    let start = app.get("/ui/poll", &alice).await.body["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let bob_start = app.get("/ui/poll", &bob).await.body["cursor"]
        .as_str()
        .unwrap()
        .to_owned();

    // A chat, listed for its owner only; its creation is an event of alice's.
    let chat = app
        .post("/api/chats", &alice, json!({"title": "runs"}))
        .await;
    assert_eq!(chat.status, StatusCode::CREATED, "{chat:?}");
    let chat_id = chat.body["id"].as_str().unwrap().to_owned();
    let events = events_through(app, &alice, &start, chat.header("x-ui-sync-seq").unwrap()).await;
    assert!(
        events
            .iter()
            .any(|e| e["source"] == "host.chats" && e["key"].is_string()),
        "{events:?}"
    );
    assert_eq!(
        app.get("/api/chats", &alice).await.body["chats"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(app.get("/api/chats", &bob).await.body["chats"], json!([]));
    assert_eq!(
        app.get(&format!("/api/chats/{chat_id}"), &bob).await.status,
        StatusCode::NOT_FOUND
    );

    // A message, then a reply streamed in deltas and finished: revisions and frozen
    // readings.
    let m = app
        .post(
            &format!("/api/chats/{chat_id}/messages"),
            &alice,
            json!({"text": "CI?"}),
        )
        .await;
    assert!(m.status.is_success(), "{m:?}");
    let item = app
        .post(
            &format!("/api/chats/{chat_id}/items"),
            &alice,
            json!({"text": "Runs:\n"}),
        )
        .await;
    assert_eq!(item.status, StatusCode::CREATED, "{item:?}");
    let item_id = item.body["id"].as_str().unwrap().to_owned();
    let rest = &REPLY["Runs:\n".len()..];
    let cut = rest.find("<Choices>").unwrap();
    for part in [&rest[..cut], &rest[cut..]] {
        let d = app
            .post(
                &format!("/api/chats/{chat_id}/items/{item_id}/delta"),
                &alice,
                json!({"text": part}),
            )
            .await;
        assert_eq!(d.status, StatusCode::OK, "{d:?}");
    }
    let streaming = app.get(&format!("/api/chats/{chat_id}"), &alice).await.body;
    assert_eq!(streaming["items"][1]["streaming"], true);
    let done = app
        .post(
            &format!("/api/chats/{chat_id}/items/{item_id}/finish"),
            &alice,
            json!({}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{done:?}");
    let item = done.body;
    assert_eq!(
        (item["streaming"].clone(), item["text"].clone()),
        (json!(false), json!(REPLY))
    );
    let (block, revision) = first_block(&item);
    assert_eq!(revision.len(), 64);
    let reading = &item["uiQueries"]["blocks"][&block]["readings"]["$runs"];
    assert_eq!(reading["state"], "fresh", "{item}");
    assert_eq!(
        reading["value"],
        json!([{"name": "build 1"}, {"name": "build 2"}])
    );
    let read = reading["readId"].as_str().unwrap().to_owned();
    let detail = app.get(&format!("/api/chats/{chat_id}"), &alice).await.body;
    assert_eq!(detail["items"][1], item, "read back as finished");

    // A live read of the block.
    let q = app
        .post(
            "/ui/query",
            &alice,
            json!({"chatId": chat_id, "itemId": item_id, "blockId": block,
                   "revision": revision, "query": "$runs", "values": {}}),
        )
        .await;
    assert_eq!(q.status, StatusCode::OK, "{q:?}");

    // A choice sent twice is one message and one answer; the other choice is refused.
    let shown = app
        .post(
            "/ui/view",
            &alice,
            json!({"chatId": chat_id, "itemId": item_id, "blockId": block, "revision": revision}),
        )
        .await
        .body;
    let rerun = find_node(&shown["view"]["nodes"], "Choice", Some("Rerun")).unwrap()["id"].clone();
    let ignore =
        find_node(&shown["view"]["nodes"], "Choice", Some("Ignore")).unwrap()["id"].clone();
    let choice = |id: &Json| {
        json!({"chatId": chat_id, "itemId": item_id, "blockId": block, "revision": revision,
               "choiceId": id, "reads": {"$runs": read}, "values": {}})
    };
    let a = app.post("/ui/choice", &alice, choice(&rerun)).await;
    assert_eq!(a.status, StatusCode::OK, "{a:?}");
    let again = app.post("/ui/choice", &alice, choice(&rerun)).await;
    assert_eq!(again.body, a.body);
    let other = app.post("/ui/choice", &alice, choice(&ignore)).await;
    assert_eq!(other.code(), "ui-already-answered", "{other:?}");
    let detail = app.get(&format!("/api/chats/{chat_id}"), &alice).await.body;
    let items = detail["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "one message for two picks: {detail}");
    assert_eq!(items[2]["text"], "Rerun the failed jobs");
    assert_eq!(items[2]["uiChoice"]["label"], "Rerun");
    assert_eq!(items[1]["uiAnswers"][&block]["choiceId"], rerun);
    let events = events_through(app, &alice, &start, a.header("x-ui-sync-seq").unwrap()).await;
    assert!(
        events.iter().all(|e| e["source"] == "host.chats"),
        "{events:?}"
    );

    // Pages of the chat.
    let page = app
        .get(&format!("/api/chats/{chat_id}?limit=2"), &alice)
        .await
        .body;
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["more"], true);
    let first = page["items"][0]["id"].as_str().unwrap();
    let older = app
        .get(
            &format!("/api/chats/{chat_id}?limit=2&before={first}"),
            &alice,
        )
        .await
        .body;
    assert_eq!(older["items"][0]["text"], "CI?");
    assert_eq!(older["more"], false);

    // None of it reached bob.
    let b = poll(app, &bob, &bob_start).await;
    assert_eq!(b.body["events"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_on_sqlite() {
    let dir = TempDir::new("db-sqlite");
    let app = app(config(&dir), dir).await;
    scenario(&app).await;
    app.state.sync().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_on_postgres() {
    let Some(cluster) = cluster() else {
        return;
    };
    let name = format!(
        "ui_t_routes_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    admin(&cluster, &format!("CREATE DATABASE \"{name}\"")).await;
    let dir = TempDir::new("db-pg");
    let mut config = config(&dir);
    config.postgres = Some(PostgresConfig::new(with_dbname(&cluster, &name)));
    let app = app(config, dir).await;
    scenario(&app).await;
    app.state.sync().shutdown().await;
    drop(app);
    admin(&cluster, &format!("DROP DATABASE \"{name}\" WITH (FORCE)")).await;
}
