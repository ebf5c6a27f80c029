//! Sources on the application's own databases (`[connections.NAME]` of `sources.toml`)
//! against a real PostgreSQL: rows and their types, read-only transactions, bound
//! parameters, the read timeout inside the database, `LISTEN/NOTIFY` change events, and a
//! second SQLite file as a named connection.
//!
//! The PostgreSQL tests need `UI_SERVER_PG` (a libpq conninfo, `host=… port=… user=…
//! dbname=…`); `cargo xtask ci` starts a throwaway cluster and sets it. Without it they
//! print "skipped: UI_SERVER_PG not set" and pass, unless `UI_SERVER_PG_REQUIRED` is set
//! (CI sets both), when they fail.

#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::*;
use serde_json::{Value as Json, json};
use tokio_postgres::NoTls;
use tokio_util::sync::CancellationToken;
use ui_core::{HostLimits, UiHostLimits, Value};
use ui_host::{ChatInfo, ReadRequest, UiHost as _};
use ui_server::{AppState, SourcesConfig};
use ui_sync::{AudienceSet, ReadAfter};

/// The conninfo, or `None` (the test prints why it is skipped).
fn conninfo() -> Option<String> {
    let found = std::env::var("UI_SERVER_PG")
        .ok()
        .filter(|s| !s.trim().is_empty());
    if found.is_none() {
        assert!(
            std::env::var_os("UI_SERVER_PG_REQUIRED").is_none(),
            "UI_SERVER_PG_REQUIRED is set but UI_SERVER_PG is not"
        );
        eprintln!("skipped: UI_SERVER_PG not set");
    }
    found
}

/// `postgres://user@host:port/dbname` of a `key=value` conninfo.
fn url_of(conninfo: &str) -> String {
    let field = |key: &str, default: &str| {
        conninfo
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .unwrap_or(default)
            .to_owned()
    };
    format!(
        "postgres://{}@{}:{}/{}",
        field("user", "postgres"),
        field("host", "127.0.0.1"),
        field("port", "5432"),
        field("dbname", "postgres")
    )
}

/// A fresh schema with the test's tables, dropped by [`Pg::finish`].
struct Pg {
    client: tokio_postgres::Client,
    schema: String,
    url: String,
}

impl Pg {
    async fn new(conninfo: &str, test: &str) -> Pg {
        let (client, connection) = tokio_postgres::connect(conninfo, NoTls).await.unwrap();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("test connection: {e}");
            }
        });
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!("ui_src_{test}_{}_{nanos}", std::process::id());
        client
            .batch_execute(&format!(
                "CREATE SCHEMA {schema};
                 CREATE TABLE {schema}.runs (id bigserial PRIMARY KEY, project text NOT NULL,
                   branch text NOT NULL, status text NOT NULL, passed boolean,
                   started timestamptz, meta jsonb, ratio numeric(6,2), score float8);
                 INSERT INTO {schema}.runs (project, branch, status, passed, started, meta, ratio, score)
                   VALUES ('web', 'main', 'passed', true, '2026-03-04 05:06:07.5+02', '{{\"jobs\": [1, 2]}}', 12.50, 0.25),
                          ('web', 'main', 'failed', false, NULL, NULL, NULL, NULL),
                          ('ops', 'main', 'secret', true, NULL, NULL, NULL, NULL),
                          ('web', 'x'' OR ''1''=''1', 'odd', NULL, NULL, NULL, NULL, NULL);
                 CREATE TABLE {schema}.log (id serial PRIMARY KEY);
                 CREATE FUNCTION {schema}.bump() RETURNS int LANGUAGE sql
                   AS $$ INSERT INTO {schema}.log DEFAULT VALUES RETURNING 1 $$;"
            ))
            .await
            .unwrap();
        Pg {
            client,
            schema,
            url: url_of(conninfo),
        }
    }

    /// The `sources.toml` of the tests: a connection `app` to this database, one `side`
    /// to the SQLite file `side`.
    fn sources(&self, side: &std::path::Path) -> String {
        let s = &self.schema;
        format!(
            r#"
[connections.app]
url = "{url}"
pool = 3
connect_timeout_ms = 3000

[connections.side]
url = "sqlite://{side}"

[[source]]
name = "pg.runs"
connection = "app"
notify = "{s}_runs"
sql = """SELECT id, branch, status, passed, started, meta, ratio, score
         FROM {s}.runs WHERE project = @project AND branch = :branch ORDER BY id"""
args = {{ type = "object", required = ["branch"], additionalProperties = false, properties = {{ branch = {{ type = "string" }} }} }}
keys = ["branch:{{branch}}"]

[[source]]
name = "pg.write"
connection = "app"
sql = "SELECT {s}.bump() AS x"
args = {{ type = "object" }}

[[source]]
name = "pg.sleep"
connection = "app"
sql = "SELECT count(*) AS x, '{s}_sleep' AS tag FROM (SELECT pg_sleep(:n::text::float8)) AS s"
args = {{ type = "object", required = ["n"], properties = {{ n = {{ type = "string" }} }} }}

[[source]]
name = "side.items"
connection = "side"
sql = "SELECT name, size FROM items WHERE :name IS NULL OR name = :name ORDER BY name"
args = {{ type = "object", properties = {{ name = {{ type = "string" }} }} }}
"#,
            url = self.url,
            side = side.display(),
        )
    }

    /// Rows of `pg_stat_activity` running the sleep source's statement.
    async fn sleeping(&self, state: Option<&str>) -> i64 {
        let tag = format!("%{}_sleep%", self.schema);
        let row = self
            .client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 \
                 AND pid <> pg_backend_pid() AND ($2::text IS NULL OR state = $2)",
                &[&tag, &state],
            )
            .await
            .unwrap();
        row.get(0)
    }

    async fn finish(self) {
        self.client
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .await
            .unwrap();
    }
}

/// Where the SQLite file of the named connection `side` lies.
fn side_db(dir: &TempDir) -> std::path::PathBuf {
    dir.0.join("side.db")
}

async fn app_with(dir: TempDir, sources: String, timeout_ms: u64) -> App {
    let mut config = config(&dir);
    config.sources = SourcesConfig::Inline(format!("{SOURCES}\n{sources}"));
    config.host_limits = HostLimits::DEFAULT
        .with("readTimeoutMilliseconds", timeout_ms)
        .unwrap()
        .with("readGapMilliseconds", 1)
        .unwrap();
    config.ui_host_limits = UiHostLimits::DEFAULT
        .with("refreshMilliseconds", 1)
        .unwrap();
    App::with_config(config, dir).await
}

/// Reads `source` directly with `args` as Alice of project `web`.
async fn read(state: &AppState, source: &str, args: Json) -> Result<Json, String> {
    let access = Value::from(&json!({"user": "alice", "project": "web", "chat": "c1"}));
    let args = Value::from(&args);
    let request = ReadRequest {
        info: Arc::new(ChatInfo::default()),
        args: args.as_record().cloned().unwrap_or_default(),
        access: Arc::new(access),
        cancel: CancellationToken::new(),
    };
    let source = state.host().sources().get(source).expect("the source");
    source
        .read(request)
        .await
        .map(|v| Json::from(&v))
        .map_err(|e| e.to_string())
}

/// Makes `side.db` with rows, through a server whose own database it is (no second SQLite
/// library in the test).
async fn make_side_db(path: &std::path::Path) {
    let dir = TempDir::new("side-maker");
    let mut config = ui_server::ServerConfig::new(path.to_owned());
    config.sources = SourcesConfig::Inline(
        "setup = \"CREATE TABLE IF NOT EXISTS items (name TEXT NOT NULL, size INTEGER); \
         INSERT INTO items VALUES ('bolt', 3), ('nut', 1);\""
            .to_owned(),
    );
    let state = AppState::open(config).await.unwrap();
    state.sync().shutdown().await;
    drop(state);
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_read_the_applications_postgres_and_sqlite() {
    let Some(conninfo) = conninfo() else { return };
    let pg = Pg::new(&conninfo, "read").await;
    let dir = TempDir::new("pg-read");
    let side = side_db(&dir);
    make_side_db(&side).await;
    let app = app_with(dir, pg.sources(&side), 8_000).await;

    // Rows and their types; `@project` keeps Alice to `web`.
    let rows = read(&app.state, "pg.runs", json!({"branch": "main"}))
        .await
        .unwrap();
    assert_eq!(
        rows,
        json!([
            {"id": 1, "branch": "main", "status": "passed", "passed": true,
             "started": "2026-03-04T03:06:07.5+00:00", "meta": {"jobs": [1, 2]},
             "ratio": 12.5, "score": 0.25},
            {"id": 2, "branch": "main", "status": "failed", "passed": false,
             "started": null, "meta": null, "ratio": null, "score": null}
        ]),
        "{rows}"
    );

    // Parameters are bound: an injection attempt is only a value.
    let odd = read(&app.state, "pg.runs", json!({"branch": "x' OR '1'='1"}))
        .await
        .unwrap();
    assert_eq!(odd.as_array().unwrap().len(), 1, "{odd}");
    assert_eq!(odd[0]["status"], "odd");
    let none = read(
        &app.state,
        "pg.runs",
        json!({"branch": "main'; DROP TABLE runs; --"}),
    )
    .await
    .unwrap();
    assert_eq!(none, json!([]));
    let still = read(&app.state, "pg.runs", json!({"branch": "main"}))
        .await
        .unwrap();
    assert_eq!(still.as_array().unwrap().len(), 2);

    // Reads run in read-only transactions: a write inside the query fails, nothing written.
    let e = read(&app.state, "pg.write", json!({})).await.unwrap_err();
    assert!(e.contains("read-only transaction"), "{e}");
    let written: i64 = pg
        .client
        .query_one(&format!("SELECT count(*) FROM {}.log", pg.schema), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(written, 0);

    // A second SQLite file as a named connection.
    let items = read(&app.state, "side.items", json!({})).await.unwrap();
    assert_eq!(
        items,
        json!([{"name": "bolt", "size": 3}, {"name": "nut", "size": 1}])
    );
    let one = read(&app.state, "side.items", json!({"name": "nut' OR 1=1 --"}))
        .await
        .unwrap();
    assert_eq!(one, json!([]));

    pg.finish().await;
}

/// A reply whose block reads `pg.sleep` for `$n` seconds (`0` when frozen).
const SLEEP_REPLY: &str = "Sleeping:\n```ui\n$n = \"0\"\n\
$s = @Query(\"pg.sleep\", {n: $n})\n\
<Summary>{@Count($s)}</Summary>\n\
<Segmented value={$n}><Option value=\"0\">quick</Option><Option value=\"30\">slow</Option></Segmented>\n```\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_postgres_read_times_out_and_the_backend_stops() {
    let Some(conninfo) = conninfo() else { return };
    let pg = Pg::new(&conninfo, "timeout").await;
    let dir = TempDir::new("pg-timeout");
    let side = side_db(&dir);
    make_side_db(&side).await;
    const TIMEOUT_MS: u64 = 2_000;
    let app = app_with(dir, pg.sources(&side), TIMEOUT_MS).await;
    let alice = app.login("alice").await;
    let (chat, item) = app.chat_with_reply(&alice, SLEEP_REPLY).await;
    let (block, revision) = first_block(&item);
    let body = json!({"chatId": chat, "itemId": item["id"], "blockId": block,
                      "revision": revision, "query": "$s", "values": {"$n": "30"}});
    let started = Instant::now();
    let asked = tokio::spawn({
        let router = app.router.clone();
        let alice = alice.clone();
        async move { post(&router, "/ui/query", &alice, body).await }
    });
    // The statement runs in PostgreSQL meanwhile.
    let mut seen = false;
    while started.elapsed() < Duration::from_millis(TIMEOUT_MS - 200) && !seen {
        seen = pg.sleeping(Some("active")).await > 0;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen, "the sleep never ran in PostgreSQL");
    let (status, answer) = asked.await.unwrap();
    let answered = Instant::now();
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["state"], "failed", "{answer}");
    assert_eq!(answer["code"], "timed-out", "{answer}");
    assert!(
        started.elapsed() < Duration::from_millis(TIMEOUT_MS + 1_000),
        "{:?}",
        started.elapsed()
    );
    // The backend's statement is gone within a second of the answer (the cancel request),
    // and so is its connection.
    loop {
        if pg.sleeping(None).await == 0 {
            break;
        }
        assert!(
            answered.elapsed() < Duration::from_secs(1),
            "the sleep still runs in PostgreSQL {:?} after the timed-out answer",
            answered.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "backend gone {:?} after the timed-out answer",
        answered.elapsed()
    );
    // The pool serves the next read.
    let quick = read(&app.state, "pg.sleep", json!({"n": "0"}))
        .await
        .unwrap();
    assert_eq!(quick[0]["x"], 1);
    pg.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_stuck_on_a_locked_table_fails_the_load_at_the_connect_timeout() {
    let Some(conninfo) = conninfo() else { return };
    let pg = Pg::new(&conninfo, "locked").await;
    // Another session holds the table: preparing a statement on it waits for the lock.
    let (locker, connection) = tokio_postgres::connect(&conninfo, NoTls).await.unwrap();
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("locking connection: {e}");
        }
    });
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {}.runs IN ACCESS EXCLUSIVE MODE",
            pg.schema
        ))
        .await
        .unwrap();
    let dir = TempDir::new("pg-locked");
    let side = side_db(&dir);
    make_side_db(&side).await;
    let mut config = config(&dir);
    config.sources = SourcesConfig::Inline(format!("{SOURCES}\n{}", pg.sources(&side)));
    let started = Instant::now();
    let opened = tokio::time::timeout(Duration::from_secs(30), AppState::open(config))
        .await
        .expect("the load waited for the lock");
    let e = match opened {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the sources loaded against a locked table"),
    };
    // `connect_timeout_ms = 3000` in the test's sources.
    assert!(
        e.contains("pg.runs") && e.contains("connect_timeout_ms (3000 ms)"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The prepare was cancelled in the database: nobody waits on the lock any more.
    let waiting = format!("%{}.runs%", pg.schema);
    let gone = Instant::now();
    loop {
        let row = pg
            .client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND query LIKE $1",
                &[&waiting],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) == 0 {
            break;
        }
        assert!(
            gone.elapsed() < Duration::from_secs(2),
            "the prepare still waits on the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    locker.batch_execute("ROLLBACK").await.unwrap();
    pg.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_on_the_channel_records_a_change_event() {
    let Some(conninfo) = conninfo() else { return };
    let pg = Pg::new(&conninfo, "notify").await;
    let dir = TempDir::new("pg-notify");
    let side = side_db(&dir);
    make_side_db(&side).await;
    let app = app_with(dir, pg.sources(&side), 8_000).await;
    let sync = app.state.sync().clone();
    let audiences = AudienceSet::new(ui_sync::parse_audience("project:web"), 16);
    let mut cursor = sync
        .read_after(None, &audiences)
        .await
        .unwrap()
        .cursor()
        .to_string();
    let channel = format!("{}_runs", pg.schema);
    // Another program writes and notifies (repeated until the listener has started).
    let started = Instant::now();
    let mut keyed = None;
    while keyed.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no change event of pg.runs within 5 s of NOTIFY"
        );
        pg.client
            .batch_execute(&format!(
                "INSERT INTO {s}.runs (project, branch, status) VALUES ('web', 'main', 'queued');
                 NOTIFY {channel}, '{{\"audience\": \"project:web\", \"key\": \"branch:main\"}}'",
                s = pg.schema
            ))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = sync
            .read_after(Some(cursor.as_str()), &audiences)
            .await
            .unwrap();
        cursor = answer.cursor().to_string();
        if let ReadAfter::Events { events, .. } = answer {
            keyed = events.into_iter().find(|e| e.source == "pg.runs");
        }
    }
    let event = keyed.unwrap();
    assert!(event.key.is_some(), "{event:?}");
    eprintln!(
        "change event {:?} after the first NOTIFY",
        started.elapsed()
    );

    // The listening connection dies: the server reconnects (backoff from 100 ms) and
    // later notifications are recorded again.
    let killed: i64 = pg
        .client
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE query LIKE 'LISTEN%' AND query LIKE $1",
            &[&format!("%{channel}%")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1, "one listening connection");
    let killed_at = Instant::now();
    let mut again = None;
    while again.is_none() {
        assert!(
            killed_at.elapsed() < Duration::from_secs(5),
            "no change event within 5 s of the listener's reconnection"
        );
        pg.client
            .batch_execute(&format!(
                "NOTIFY {channel}, '{{\"audience\": \"project:web\"}}'"
            ))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = sync
            .read_after(Some(cursor.as_str()), &audiences)
            .await
            .unwrap();
        cursor = answer.cursor().to_string();
        if let ReadAfter::Events { events, .. } = answer {
            again = events.into_iter().find(|e| e.source == "pg.runs");
        }
    }
    assert_eq!(again.unwrap().key, None, "no key: the whole source");
    eprintln!(
        "recorded again {:?} after the listener was killed",
        killed_at.elapsed()
    );

    // A notification without an audience (the source's names a placeholder) records
    // nothing, and neither does one for another project than Alice's.
    pg.client
        .batch_execute(&format!(
            "NOTIFY {channel}, 'branch:main'; NOTIFY {channel}, '{{\"audience\": \"project:ops\"}}'"
        ))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    match sync
        .read_after(Some(cursor.as_str()), &audiences)
        .await
        .unwrap()
    {
        ReadAfter::Events { events, .. } => assert!(events.is_empty(), "{events:?}"),
        other => panic!("{other:?}"),
    }
    pg.finish().await;
}

/// A POST through a clone of the router: the status and the JSON body.
async fn post(router: &axum::Router, path: &str, cookie: &str, body: Json) -> (StatusCode, Json) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let req = axum::http::Request::post(path)
        .header("cookie", cookie)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Json::Null))
}

/// With `database.url = "postgres://…"`, a source that names no connection reads the
/// server's own PostgreSQL database; `setup` and write paths are refused at start there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_without_a_connection_read_the_servers_postgres() {
    let Some(conninfo) = conninfo() else { return };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let name = format!("ui_src_default_{}_{nanos}", std::process::id());
    let (admin, connection) = tokio_postgres::connect(&conninfo, NoTls).await.unwrap();
    tokio::spawn(connection);
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .unwrap();
    let base = url_of(&conninfo);
    let url = format!("{}/{name}", base.rsplit_once('/').unwrap().0);
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE TABLE notes (id int PRIMARY KEY, project text NOT NULL, body text NOT NULL);
             INSERT INTO notes VALUES (1, 'web', 'first'), (2, 'ops', 'hidden'), (3, 'web', 'second');",
        )
        .await
        .unwrap();
    drop(client);

    let source = r#"
[[source]]
name = "app.notes"
notify = "notes_changed"
sql = "SELECT id, body FROM notes WHERE project = @project ORDER BY id"
args = { type = "object" }
"#;
    let open = |sources: String| {
        let dir = TempDir::new("pg-default");
        let mut config = config(&dir);
        config.postgres = Some(ui_server::PostgresConfig::new(url.clone()));
        config.sources = SourcesConfig::Inline(sources);
        async move { (AppState::builder(config).open().await, dir) }
    };
    let (state, _dir) = open(source.to_owned()).await;
    let state = state.unwrap();
    let rows = read(&state, "app.notes", json!({})).await.unwrap();
    assert_eq!(
        rows,
        json!([{"id": 1, "body": "first"}, {"id": 3, "body": "second"}])
    );
    // A NOTIFY on the server's own database records a change of the source.
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let web = AudienceSet::new(ui_sync::parse_audience("project:web"), 16);
    let cursor = state
        .sync()
        .read_after(None, &web)
        .await
        .unwrap()
        .cursor()
        .to_string();
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no change event of app.notes within 5 s of NOTIFY"
        );
        client
            .batch_execute("NOTIFY notes_changed, '{\"audience\": \"project:web\"}'")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = state.sync().read_after(Some(&cursor), &web).await.unwrap();
        if let ReadAfter::Events { events, .. } = answer
            && events.iter().any(|e| e.source == "app.notes")
        {
            break;
        }
    }
    drop(client);
    state.sync().shutdown().await;
    drop(state);

    for (extra, key) in [
        ("setup = \"CREATE TABLE t (x int)\"\n", "setup"),
        (
            "[source.insert]\nsql = \"INSERT INTO notes VALUES (:id, @project, :body)\"\nargs = { type = \"object\" }\n",
            "insert",
        ),
    ] {
        let text = if key == "setup" {
            format!("{extra}{source}")
        } else {
            format!("{source}{extra}")
        };
        let (refused, _dir) = open(text).await;
        let Err(error) = refused else {
            panic!("{key}: started");
        };
        let error = error.to_string();
        assert!(error.contains(key), "{error}");
    }

    admin
        .batch_execute(&format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
        .await
        .unwrap();
}
