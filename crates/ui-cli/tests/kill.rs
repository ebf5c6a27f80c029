//! A write and its change event commit together (`sync.md` §3.2, the outbox of a write the
//! server owns): the real `uiblocks serve --demo` is killed with SIGKILL at a random point
//! of a burst of writes through `POST /api/sources/ci.runs/rows`, 20 times over one
//! database, while a client polls `/ui/poll` and resumes from its last cursor after each
//! restart. Then: every committed row has its event, the log's seqs have no gap, and the
//! client got every event of its audiences once, with no gap and no duplicate.
//!
//! Loopback only, bounded: each cycle waits at most 10 s for the server.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use ui_sync::{Audience, Salt};

const CYCLES: usize = 20;
const WRITERS: usize = 8;
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// One HTTP/1.1 request on a fresh connection: the status, the `Set-Cookie` value and the
/// body as JSON (`Null` when it is not JSON).
fn http(
    port: u16,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    body: Option<&Json>,
) -> std::io::Result<(u16, Option<String>, Json)> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let body = body.map(Json::to_string).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        req.push_str("content-type: application/json\r\n");
    }
    if let Some(c) = cookie {
        req.push_str(&format!("cookie: {c}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("a truncated answer"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let cookie = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie:")
                .then(|| l[11..].trim().split(';').next().unwrap_or("").to_owned())
        })
        .filter(|c| !c.is_empty());
    Ok((
        status,
        cookie,
        serde_json::from_str(body).unwrap_or(Json::Null),
    ))
}

/// A free loopback port (the server binds it right after).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the server if the test fails while it runs.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `uiblocks serve --demo` on `db` and waits until it answers; the port and the
/// process.
fn start(db: &Path) -> (u16, Reap) {
    for _ in 0..5 {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_uiblocks"))
            .args(["serve", "--demo", "--port", &port.to_string(), "--db"])
            .arg(db)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = Reap(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok((200, _, _)) = http(port, "GET", "/api/session", None, None) {
                return (port, child);
            }
            if child.0.try_wait().unwrap().is_some() {
                break; // the port was taken meanwhile: another one
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("the server did not start");
}

fn login(port: u16) -> String {
    let (status, cookie, _) = http(
        port,
        "POST",
        "/api/login",
        None,
        Some(&json!({"user": "alice"})),
    )
    .unwrap();
    assert_eq!(status, 200);
    cookie.unwrap()
}

/// What the client has seen: each event (seq → source, scope, key), and its cursor.
#[derive(Default)]
struct Client {
    /// The seq of the first cursor (a fresh client starts at the head).
    start: Option<u64>,
    cursor: Option<String>,
    seen: BTreeMap<u64, (String, String, Option<String>)>,
    duplicates: Vec<u64>,
}

impl Client {
    /// One poll from the last cursor; `false` when the server is gone or busy.
    fn poll(&mut self, port: u16, cookie: &str) -> bool {
        let path = match &self.cursor {
            Some(c) => format!("/ui/poll?cursor={c}"),
            None => "/ui/poll".to_owned(),
        };
        let Ok((200, _, body)) = http(port, "GET", &path, Some(cookie), None) else {
            return false;
        };
        assert!(body["reset"].is_null(), "a reset: {body}");
        for e in body["events"].as_array().unwrap() {
            let seq = e["seq"].as_u64().unwrap();
            let what = (
                e["source"].as_str().unwrap().to_owned(),
                e["scope"].as_str().unwrap().to_owned(),
                e["key"].as_str().map(str::to_owned),
            );
            if self.seen.insert(seq, what).is_some() {
                self.duplicates.push(seq);
            }
        }
        let cursor = body["cursor"].as_str().unwrap().to_owned();
        self.start
            .get_or_insert_with(|| cursor.rsplit_once('.').unwrap().1.parse().unwrap());
        self.cursor = Some(cursor);
        true
    }
}

/// A pseudo-random number from the clock (the kill point; no dependency needed).
fn jitter(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    nanos.wrapping_mul(6_364_136_223_846_793_005) % max
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "uiblocks-kill-{}-{}",
        std::process::id(),
        jitter(1 << 30)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn killed_mid_burst_every_committed_row_has_its_event_and_the_client_misses_nothing() {
    let dir = temp_dir();
    let db = dir.join("app.db");
    let began = Instant::now();
    let mut client = Client::default();
    let mut acknowledged = 0usize;
    for cycle in 0..CYCLES {
        let (port, mut server) = start(&db);
        let cookie = login(port);
        assert!(client.poll(port, &cookie), "the client resumes");
        // A burst: writers each write runs on their own branches (one key per row) until
        // the server dies.
        let alive = Arc::new(AtomicBool::new(true));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (cookie, alive) = (cookie.clone(), alive.clone());
                std::thread::spawn(move || {
                    let mut ok = 0;
                    for i in 0.. {
                        if !alive.load(Ordering::SeqCst) {
                            break;
                        }
                        let row = json!({"rows": [{"branch": format!("k{cycle}-{w}-{i}"),
                                         "name": "kill test", "status": "passed"}]});
                        match http(
                            port,
                            "POST",
                            "/api/sources/ci.runs/rows",
                            Some(&cookie),
                            Some(&row),
                        ) {
                            Ok((200, _, _)) => ok += 1,
                            Ok((status, _, body)) => panic!("write answered {status}: {body}"),
                            Err(_) => break, // killed
                        }
                    }
                    ok
                })
            })
            .collect();
        // The client polls during the burst (within the rate limit) and the server is
        // killed at a random moment.
        let kill_at = Instant::now() + Duration::from_millis(60 + jitter(400));
        while Instant::now() < kill_at {
            client.poll(port, &cookie);
            std::thread::sleep(Duration::from_millis(260).min(kill_at - Instant::now()));
        }
        server.0.kill().unwrap(); // SIGKILL
        server.0.wait().unwrap();
        alive.store(false, Ordering::SeqCst);
        acknowledged += writers
            .into_iter()
            .map(|w| w.join().unwrap())
            .sum::<usize>();
    }
    // A last start: the client catches up from its last cursor.
    let (port, server) = start(&db);
    let cookie = login(port);
    let mut head = None;
    for _ in 0..20 {
        assert!(client.poll(port, &cookie));
        if head.is_some() && head == client.cursor {
            break;
        }
        head = client.cursor.clone();
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(server);
    assert!(
        acknowledged > CYCLES * WRITERS,
        "writes acknowledged: {acknowledged}"
    );

    // The database as the kills left it.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let salt: Vec<u8> = conn
        .query_row("SELECT salt FROM ui_sync_meta WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    let salt = Salt(salt.try_into().unwrap());
    let web = Audience::project("web");
    let branches: Vec<String> = conn
        .prepare("SELECT branch FROM ci_runs WHERE name = 'kill test'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        branches.len() >= acknowledged,
        "acknowledged rows are committed"
    );
    let mut events: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut rows = conn
        .prepare("SELECT seq, key_tok FROM ui_sync_events WHERE source = 'ci.runs'")
        .unwrap();
    for r in rows
        .query_map([], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?))
        })
        .unwrap()
    {
        let (seq, key) = r.unwrap();
        events
            .entry(key.unwrap_or_default())
            .or_default()
            .push(seq as u64);
    }
    let mut without = Vec::new();
    let mut ours = BTreeSet::new();
    for b in &branches {
        let token = salt.key("ci.runs", &web, &format!("branch:{b}")).to_hex();
        match events.get(&token).map(Vec::as_slice) {
            Some([seq]) => {
                ours.insert(*seq);
            }
            Some(more) => panic!("row {b} has {} events", more.len()),
            None => without.push(b.clone()),
        }
    }
    assert!(
        without.is_empty(),
        "{} of {} committed rows have no event: {without:?}",
        without.len(),
        branches.len()
    );
    let test_events: usize = events.values().map(Vec::len).sum();
    assert!(test_events >= ours.len());

    // Seqs are monotonic without gaps.
    let seqs: Vec<u64> = conn
        .prepare("SELECT seq FROM ui_sync_events ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|s| s.unwrap() as u64)
        .collect();
    for pair in seqs.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "a gap in the log's seqs");
    }

    // The client: no duplicate, and every event of its audiences reached it (each test row
    // has its own key, so none were collapsed).
    assert!(
        client.duplicates.is_empty(),
        "duplicates: {:?}",
        client.duplicates
    );
    let missed: Vec<&u64> = ours
        .iter()
        .filter(|s| !client.seen.contains_key(s))
        .collect();
    assert!(missed.is_empty(), "the client missed {missed:?}");
    // Every visible row of the log is covered by what the client saw (other sources'
    // rows may be collapsed into a later one of the same key).
    let mut visible = conn
        .prepare(
            "SELECT seq, source, scope_tok, key_tok FROM ui_sync_events
             WHERE (aud_kind = 'user' AND aud_id = 'alice') OR (aud_kind = 'project' AND aud_id = 'web')
                OR aud_kind = 'global'",
        )
        .unwrap();
    for r in visible
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)? as u64,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        })
        .unwrap()
    {
        let (seq, source, scope, key) = r.unwrap();
        // Events up to the client's first cursor (the demo's seed) are not its business.
        if seq <= client.start.unwrap() {
            continue;
        }
        assert!(
            client
                .seen
                .range(seq..)
                .any(|(_, (s, c, k))| *s == source && *c == scope && (k.is_none() || *k == key)),
            "the client never learned of seq {seq} ({source})"
        );
    }
    eprintln!(
        "{CYCLES} kills, {acknowledged} acknowledged writes, {} committed rows, {} log rows, in {:?}",
        branches.len(),
        seqs.len(),
        began.elapsed()
    );
    std::fs::remove_dir_all(&dir).ok();
}
