//! Two `uiblocks serve` processes on one PostgreSQL database behave as one service: a
//! write through instance A reaches an event stream of instance B within 1 s; a choice
//! sent to both at once becomes one message; a reply finished on A is frozen once and
//! read the same on B; a choice sent to B names a reading A gave the page; a `NOTIFY` of
//! a source's channel becomes one change event, not one per instance. Signed in
//! through the `proxy` mode (both instances trust the same headers), loopback only, every
//! wait bounded.
//!
//! Needs `UI_SYNC_PG` (a cluster the test may create a database on; `cargo xtask ci`
//! starts one and sets it with `UI_PG_REQUIRED`). Without it the test says so and
//! passes, unless `UI_PG_REQUIRED` is set.

#![cfg(unix)]
#![allow(missing_docs)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

const SECRET: &str = "a-shared-proxy-secret";
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A reply whose block links a commit (so it is captured and frozen; it reads no source)
/// and offers two choices.
const REPLY: &str = "Next:\n```ui\n<Summary>The build failed</Summary>\n<Commit sha=\"0123abcd\"/>\n\
<Choices><Choice context=\"Rerun the failed jobs\">Rerun</Choice><Choice>Ignore</Choice></Choices>\n```\n";

/// A reply whose block reads the source `t.rows` for the branch a person picks, and offers
/// a choice: a choice names the reading on screen by its read id.
const LIVE_REPLY: &str = "```ui\n$branch = \"main\"\n$rows = @Query(\"t.rows\", {branch: $branch})\n\
<Segmented value={$branch}><Option value=\"main\">main</Option><Option value=\"dev\">dev</Option></Segmented>\n\
<Choices><Choice context=\"Deploy\">Deploy</Choice></Choices>\n```\n";

/// The source `t.rows`, on the server's own database (its table made by the test).
const SOURCES: &str = r#"
[[source]]
name = "t.rows"
sql = "SELECT id, branch FROM t_rows WHERE branch = :branch ORDER BY id"
args = { type = "object", required = ["branch"], properties = { branch = { type = "string" } } }
notify = "t_rows_changed"
"#;

/// A change of `t.rows`, as the application's trigger would send it.
const NOTIFY: &str = "NOTIFY t_rows_changed, '{\"audience\": \"project:web\"}'";

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
        eprintln!("skipped: UI_SYNC_PG not set");
    }
    found
}

/// Runs `sql` on the database of `conninfo`; with `fetch`, the first column of its first
/// row, as text.
fn run_sql(conninfo: &str, sql: &str, fetch: bool) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(conninfo, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        let text = if fetch {
            Some(client.query_one(sql, &[]).await.unwrap().get(0))
        } else {
            client.batch_execute(sql).await.unwrap();
            None
        };
        drop(client);
        driver.await.ok();
        text
    })
}

/// The first column of the first row of `sql` on the database of `conninfo`, as text.
fn scalar(conninfo: &str, sql: &str) -> String {
    run_sql(conninfo, sql, true).expect("a value")
}

/// Runs `sql` on the database of `conninfo`.
fn admin(conninfo: &str, sql: &str) {
    run_sql(conninfo, sql, false);
}

/// The `postgres://` URL of the database `name` on the cluster of `conninfo`.
fn url_of(conninfo: &str, name: &str) -> String {
    let config: tokio_postgres::Config = conninfo.parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let auth = match config.get_password() {
        Some(p) => format!("{user}:{}", String::from_utf8_lossy(p)),
        None => user.to_owned(),
    };
    format!("postgres://{auth}@{host}:{port}/{name}")
}

/// Kills the server when the test ends (or fails).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
}

/// Starts `uiblocks serve` on the database `url` with the sources of `sources`; the
/// process and its port.
fn start(url: &str, sources: &std::path::Path) -> (Running, u16) {
    let child = Command::new(env!("CARGO_BIN_EXE_uiblocks"))
        .args(["serve", "--port", "0", "--shutdown-spread", "200ms"])
        .args(["--drain-timeout", "2s"])
        .arg("--sources")
        .arg(sources)
        .env("UIBLOCKS_DATABASE_URL", url)
        .env("UIBLOCKS_AUTH_MODE", "proxy")
        .env("UIBLOCKS_AUTH_PROXY_SECRET", SECRET)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let stdout = server.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).ok();
        tx.send(line).ok();
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a start-up line");
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    assert!(line.contains("database postgres://"), "{line}");
    assert!(!line.contains(":pw@"), "no password printed: {line}");
    (server, port)
}

/// Alice's request headers, as the trusted proxy sets them.
fn head(method: &str, path: &str, port: u16) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-uiblocks-user: alice\r\n\
         x-uiblocks-projects: web\r\nx-uiblocks-proxy-secret: {SECRET}\r\n"
    )
}

/// One request on a fresh connection: the status and the body as JSON.
fn http(port: u16, method: &str, path: &str, body: Option<&Json>) -> (u16, Json) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let body = body.map(Json::to_string).unwrap_or_default();
    let mut req = head(method, path, port);
    req.push_str(&format!(
        "connection: close\r\ncontent-length: {}\r\n",
        body.len()
    ));
    if !body.is_empty() {
        req.push_str("content-type: application/json\r\n");
    }
    req.push_str("\r\n");
    req.push_str(&body);
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Json::Null))
}

fn post(port: u16, path: &str, body: Json) -> Json {
    let (status, answer) = http(port, "POST", path, Some(&body));
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
    answer
}

fn get(port: u16, path: &str) -> Json {
    let (status, answer) = http(port, "GET", path, None);
    assert_eq!(status, 200, "{path}: {answer}");
    answer
}

/// Reads `tcp` until `needle` arrived; what was read. Fails at `deadline`.
fn read_until(tcp: &mut TcpStream, needle: &str, deadline: Instant) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&all).contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no {needle:?} in time: {}",
            String::from_utf8_lossy(&all)
        );
        tcp.set_read_timeout(Some(left)).unwrap();
        match tcp.read(&mut buf) {
            Ok(0) => panic!("the stream closed: {}", String::from_utf8_lossy(&all)),
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("{e}"),
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}

#[test]
fn two_instances_on_one_postgres_database_are_one_service() {
    let Some(cluster) = cluster() else {
        return;
    };
    let name = format!("ui_t_instances_{}", std::process::id());
    admin(
        &cluster,
        &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
    );
    admin(&cluster, &format!("CREATE DATABASE \"{name}\""));
    admin(
        &format!("{cluster} dbname={name}"),
        "CREATE TABLE t_rows (id INT, branch TEXT); \
         INSERT INTO t_rows VALUES (1, 'main'), (2, 'dev');",
    );
    let sources = std::env::temp_dir().join(format!("{name}.sources.toml"));
    std::fs::write(&sources, SOURCES).unwrap();
    let url = url_of(&cluster, &name);
    // Started together: the migrations run once, whoever comes first.
    let (a_started, b_started) = std::thread::scope(|s| {
        let a = s.spawn(|| start(&url, &sources));
        let b = s.spawn(|| start(&url, &sources));
        (a.join().unwrap(), b.join().unwrap())
    });
    let ((a_proc, a), (b_proc, b)) = (a_started, b_started);

    // A chat made on A is read on B.
    let chat = post(a, "/api/chats", json!({"title": "ci"}));
    let chat_id = chat["id"].as_str().unwrap().to_owned();
    assert_eq!(get(b, &format!("/api/chats/{chat_id}"))["title"], "ci");

    // A write through A reaches an event stream of B within 1 s.
    let mut stream = TcpStream::connect(("127.0.0.1", b)).unwrap();
    write!(stream, "{}\r\n", head("GET", "/ui/events", b)).unwrap();
    read_until(&mut stream, "event: hello", Instant::now() + IO_TIMEOUT);
    let written = Instant::now();
    post(
        a,
        &format!("/api/chats/{chat_id}/messages"),
        json!({"text": "CI?"}),
    );
    let frames = read_until(&mut stream, "host.chats", written + Duration::from_secs(1));
    let took = written.elapsed();
    assert!(frames.contains("event: changes"), "{frames}");
    assert!(took < Duration::from_secs(1), "{took:?}");

    // A reply streamed and finished on A is frozen there, once, and read the same on B.
    let item = post(a, &format!("/api/chats/{chat_id}/items"), json!({}));
    let item_id = item["id"].as_str().unwrap().to_owned();
    post(
        a,
        &format!("/api/chats/{chat_id}/items/{item_id}/delta"),
        json!({"text": REPLY}),
    );
    let finished = post(
        a,
        &format!("/api/chats/{chat_id}/items/{item_id}/finish"),
        json!({}),
    );
    assert_eq!(finished["streaming"], false);
    let block = finished["ui"][0]["id"].as_str().unwrap().to_owned();
    let revision = finished["ui"][0]["revision"].as_str().unwrap().to_owned();
    assert_eq!(finished["uiQueries"]["authorChatId"], chat_id.as_str());
    assert!(
        finished["uiQueries"]["blocks"][&block].is_object(),
        "{finished}"
    );
    let on_b = get(b, &format!("/api/chats/{chat_id}"));
    assert_eq!(on_b["items"][1], finished, "B reads what A froze");

    // The same choice sent to both at once becomes one message.
    let view = post(
        b,
        "/ui/view",
        json!({"chatId": chat_id, "itemId": item_id, "blockId": block, "revision": revision}),
    );
    let rerun = find_choice(&view["view"]["nodes"], "Rerun").expect("a Rerun choice");
    let choice = json!({"chatId": chat_id, "itemId": item_id, "blockId": block,
                        "revision": revision, "choiceId": rerun, "reads": {}, "values": {}});
    let choice = &choice;
    let answers: Vec<(u16, Json)> = std::thread::scope(|s| {
        let sends: Vec<_> = [a, b, a, b]
            .into_iter()
            .map(|port| s.spawn(move || http(port, "POST", "/ui/choice", Some(choice))))
            .collect();
        sends.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (status, answer) in &answers {
        assert_eq!(*status, 200, "{answer}");
    }
    for port in [a, b] {
        let detail = get(port, &format!("/api/chats/{chat_id}"));
        let items = detail["items"].as_array().unwrap();
        let messages: Vec<&Json> = items.iter().filter(|i| i["uiChoice"].is_object()).collect();
        assert_eq!(messages.len(), 1, "one message for four sends: {detail}");
        assert_eq!(messages[0]["text"], "Rerun the failed jobs");
        assert_eq!(items[1]["uiAnswers"][&block]["choiceId"], rerun);
        // Still frozen as A froze it.
        assert_eq!(items[1]["uiQueries"], finished["uiQueries"]);
    }

    // A page reads `dev` through A (a fresh reading, not the frozen one) and sends its
    // choice to B, naming that reading. Before: B's cache did not hold the read id, and
    // the choice was refused `stale-ui-query` behind a round-robin balancer.
    let live = post(a, &format!("/api/chats/{chat_id}/items"), json!({}));
    let live_id = live["id"].as_str().unwrap().to_owned();
    let items = format!("/api/chats/{chat_id}/items/{live_id}");
    post(a, &format!("{items}/delta"), json!({"text": LIVE_REPLY}));
    let live = post(a, &format!("{items}/finish"), json!({}));
    let (block, revision) = (&live["ui"][0]["id"], &live["ui"][0]["revision"]);
    let on_screen = json!({"$branch": "dev"});
    let query = json!({"chatId": chat_id, "itemId": live_id, "blockId": block,
                       "revision": revision, "query": "$rows", "values": on_screen});
    // The freeze read `$rows` moments ago: a new key waits out the 250 ms refresh limit.
    let deadline = Instant::now() + Duration::from_secs(5);
    let reading = loop {
        let reading = post(a, "/ui/query", query.clone());
        if reading["state"] == "fresh" || Instant::now() > deadline {
            break reading;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(reading["state"], "fresh", "{reading}");
    assert_eq!(reading["value"], json!([{"id": 2, "branch": "dev"}]));
    let view = post(
        b,
        "/ui/view",
        json!({"chatId": chat_id, "itemId": live_id, "blockId": block, "revision": revision,
               "values": on_screen}),
    );
    let deploy = find_choice(&view["view"]["nodes"], "Deploy").expect("a Deploy choice");
    let choice = json!({"chatId": chat_id, "itemId": live_id, "blockId": block,
                        "revision": revision, "choiceId": deploy,
                        "reads": {"$rows": reading["readId"]}, "values": on_screen});
    // A keeps the reading just after answering the page: wait for it, a bounded while.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (status, answer) = loop {
        let (status, answer) = http(b, "POST", "/ui/choice", Some(&choice));
        if status == 200 || Instant::now() > deadline {
            break (status, answer);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status, 200, "B took A's reading: {answer}");

    // One NOTIFY, two instances listening: one change event. Before: each instance recorded
    // it (two rows, which pages saw as `"n": 2`).
    let db = format!("{cluster} dbname={name}");
    admin(&db, NOTIFY);
    let events = "SELECT count(*)::text FROM ui_sync_events WHERE source = 't.rows'";
    let deadline = Instant::now() + Duration::from_secs(5);
    while scalar(&db, events) == "0" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Long enough for the other instance's event, if it recorded one (coalescing is 50 ms).
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(scalar(&db, events), "1", "one event for one NOTIFY");
    // The instance that records them goes: the other takes over within its 2 s retry.
    let holder = scalar(
        &db,
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.granted \
           AND a.application_name LIKE 'uiblocks-listen pid:%'",
    );
    let a_pid = format!("uiblocks-listen pid:{}", a_proc.0.id());
    let b_pid = format!("uiblocks-listen pid:{}", b_proc.0.id());
    assert!(holder == a_pid || holder == b_pid, "{holder}");
    let standby = if holder == a_pid {
        drop(a_proc);
        b_proc
    } else {
        drop(b_proc);
        a_proc
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while scalar(&db, events) == "1" && Instant::now() < deadline {
        admin(&db, NOTIFY);
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_ne!(
        scalar(&db, events),
        "1",
        "the instance standing by took over"
    );

    drop(standby);
    std::fs::remove_file(&sources).ok();
    admin(
        &cluster,
        &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
    );
}

/// The id of the `Choice` node labelled `label`.
fn find_choice(nodes: &Json, label: &str) -> Option<Json> {
    match nodes {
        Json::Array(list) => list.iter().find_map(|n| find_choice(n, label)),
        Json::Object(map) => {
            let text = map.get("children").map(Json::to_string).unwrap_or_default();
            if map.get("type").and_then(Json::as_str) == Some("Choice") && text.contains(label) {
                return map.get("id").cloned();
            }
            map.values().find_map(|v| find_choice(v, label))
        }
        _ => None,
    }
}
