//! Membership changes reach open event streams (`sync.md` §4.2, §5.1): over real sockets,
//! alice is added to project `ops` and removed again while bob writes `ops` runs without
//! pause; her open stream carries exactly the runs committed between the two changes, and
//! after the removal a `reset` and nothing more of `ops`.

#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

/// The seq of a cursor `<epoch>.<seq>`.
fn seq_of(cursor: &str) -> u64 {
    cursor.rsplit_once('.').unwrap().1.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_member_stops_receiving_the_projects_events_at_the_exact_seq() {
    let server = Arc::new(Server::start().await);
    let alice = server.login("alice").await;
    let bob = server.login("bob").await;
    let mut stream = server.events(&alice, "").await;
    assert_eq!(
        stream.next(Duration::from_secs(5)).await.unwrap().event,
        "hello"
    );

    // Bob writes one `ops` run after another, each on its own branch (its own key), and
    // keeps the seq of each.
    let writing = Arc::new(AtomicBool::new(true));
    let writer = tokio::spawn({
        let (server, writing) = (server.clone(), writing.clone());
        async move {
            let mut seqs = Vec::new();
            let mut i = 0;
            while writing.load(Ordering::SeqCst) {
                i += 1;
                let row = json!({"project": "ops",
                    "rows": [{"branch": format!("b{i}"), "name": format!("deploy {i}"), "status": "passed"}]});
                let a = server.post("/api/sources/ci.runs/rows", &bob, row).await;
                assert_eq!(a.status, StatusCode::OK, "{a:?}");
                seqs.push(seq_of(a.body["cursor"].as_str().unwrap()));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            seqs
        }
    });

    let member = |on: bool| {
        let server = server.clone();
        let alice = alice.clone();
        async move {
            let a = server
                .post(
                    "/api/demo/members",
                    &alice,
                    json!({"user": "alice", "project": "ops", "member": on}),
                )
                .await;
            assert_eq!(a.status, StatusCode::OK, "{a:?}");
            assert_eq!(a.body["changed"], true);
            seq_of(a.body["cursor"].as_str().unwrap())
        }
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let joined = member(true).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let left = member(false).await;
    let left_at = tokio::time::Instant::now();
    // Frames until the reset that follows the removal: it arrives within 1 s.
    let mut frames = stream.until("reset", Duration::from_secs(1)).await;
    let reset = frames.last().cloned().expect("frames");
    assert_eq!(reset.event, "reset", "no reset within 1 s of the removal");
    assert!(left_at.elapsed() <= Duration::from_secs(1));
    assert!(seq_of(reset.id.as_deref().unwrap()) >= left);
    // Writes go on for a while; nothing of `ops` reaches alice any more.
    tokio::time::sleep(Duration::from_millis(600)).await;
    writing.store(false, Ordering::SeqCst);
    let written = writer.await.unwrap();
    frames.extend(stream.until("never", Duration::from_millis(800)).await);

    let ops_after = written.iter().filter(|&&s| s > left).count();
    assert!(
        ops_after > 10,
        "the writer kept writing after the removal ({ops_after})"
    );
    let mut delivered = run_seqs(&frames);
    delivered.sort_unstable();
    let expected: Vec<u64> = written
        .iter()
        .copied()
        .filter(|&s| s > joined && s < left)
        .collect();
    assert!(
        expected.len() > 10,
        "runs written while a member: {expected:?}"
    );
    assert_eq!(
        delivered, expected,
        "alice gets exactly the runs committed while she was a member"
    );
    // The reset is the last frame that mentions anything after the removal.
    for f in frames.iter().skip_while(|f| f.event != "reset") {
        if f.event == "changes" {
            assert!(
                f.data["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|e| e["source"] != "ci.runs"),
                "an ops run after the removal: {f:?}"
            );
        }
    }
    Arc::try_unwrap(server).ok().unwrap().stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_member_route_is_checked() {
    let server = Server::start().await;
    let alice = server.login("alice").await;
    let bad = server
        .post(
            "/api/demo/members",
            &alice,
            json!({"user": "alice", "project": "a b", "member": true}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let unknown = server
        .post(
            "/api/demo/members",
            &alice,
            json!({"user": "mallory", "project": "ops", "member": true}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let same = server
        .post(
            "/api/demo/members",
            &alice,
            json!({"user": "alice", "project": "web", "member": true}),
        )
        .await;
    assert_eq!(same.status, StatusCode::OK);
    assert_eq!(same.body["changed"], false);
    // A member of `ops` now may write there; the principal says so.
    server
        .post(
            "/api/demo/members",
            &alice,
            json!({"user": "alice", "project": "ops", "member": true}),
        )
        .await;
    let me = server.get("/api/me", &alice).await;
    assert_eq!(me.body["projects"], json!(["ops", "web"]));
    server.stop().await;
}

/// A host's authenticator: the user named by the `x-user` header, member of `web`; it does
/// not implement `refresh`.
struct HeaderAuth;

#[async_trait::async_trait]
impl ui_server::Authenticator for HeaderAuth {
    async fn principal(&self, parts: &axum::http::request::Parts) -> Option<ui_server::Principal> {
        let user = parts.headers.get("x-user")?.to_str().ok()?.to_owned();
        Some(ui_server::Principal::new(
            user.clone(),
            vec!["web".into()],
            format!("s-{user}"),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_refresh_a_membership_change_rotates_the_users_streams_only() {
    let server = Server::start_with_auth(Arc::new(HeaderAuth)).await;
    let open = |user: &'static str| {
        let server = &server;
        async move {
            let (status, _, body) = server
                .open("GET", "/ui/events", None, None, &[("x-user", user)])
                .await;
            assert_eq!(status, StatusCode::OK);
            Sse::after_hello(body).await
        }
    };
    let mut u1 = open("u1").await;
    let mut u2 = open("u2").await;
    let changed = tokio::time::Instant::now();
    server.state.membership_changed("u1").await.unwrap();
    let frames = u1.until("bye", Duration::from_secs(1)).await;
    let bye = frames.last().expect("a frame");
    assert_eq!(bye.event, "bye", "{frames:?}");
    assert_eq!(bye.data, json!({"reason": "rotate", "retryMs": 0}));
    assert!(changed.elapsed() <= Duration::from_secs(1));
    // The other user's stream stays open.
    let others = u2.until("bye", Duration::from_millis(500)).await;
    assert!(others.iter().all(|f| f.event != "bye"), "{others:?}");
    server.stop().await;
}

/// A host's authenticator over a table of memberships the test changes: the user named by
/// `x-user`. With `x-hold`, a sign-in waits after it read the table until the test lets it
/// go, which opens the window between a principal's resolution and its stream's start.
struct TableAuth {
    projects: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
    refreshes: bool,
    /// A held sign-in has read the table.
    held: tokio::sync::Notify,
    release: tokio::sync::Semaphore,
}

impl TableAuth {
    fn new(refreshes: bool) -> Self {
        let projects = [("u1", vec!["ops", "web"]), ("u2", vec!["ops"])]
            .into_iter()
            .map(|(u, p)| (u.to_owned(), p.into_iter().map(str::to_owned).collect()))
            .collect();
        TableAuth {
            projects: std::sync::Mutex::new(projects),
            refreshes,
            held: tokio::sync::Notify::new(),
            release: tokio::sync::Semaphore::new(0),
        }
    }

    fn principal_of(&self, user: &str) -> Option<ui_server::Principal> {
        let projects = self.projects.lock().unwrap().get(user)?.clone();
        Some(ui_server::Principal::new(
            user,
            projects,
            format!("s-{user}"),
        ))
    }
}

#[async_trait::async_trait]
impl ui_server::Authenticator for TableAuth {
    async fn principal(&self, parts: &axum::http::request::Parts) -> Option<ui_server::Principal> {
        let user = parts.headers.get("x-user")?.to_str().ok()?;
        let principal = self.principal_of(user)?;
        if parts.headers.contains_key("x-hold") {
            self.held.notify_one();
            self.release.acquire().await.unwrap().forget();
        }
        Some(principal)
    }

    async fn refresh(&self, principal: &ui_server::Principal) -> Option<ui_server::Principal> {
        self.refreshes
            .then(|| self.principal_of(&principal.user_id))
            .flatten()
    }
}

/// Opens u1's stream while its sign-in is held, removes u1 from `ops` in that window (the
/// table, then the `audience-changed` event), and lets the sign-in go with the old
/// memberships. Returns the stream's answer.
async fn open_across_a_removal(
    server: &Server,
    auth: &TableAuth,
) -> (StatusCode, axum::http::HeaderMap, hyper::body::Incoming) {
    let open = server.open(
        "GET",
        "/ui/events",
        None,
        None,
        &[("x-user", "u1"), ("x-hold", "1")],
    );
    let change = async {
        auth.held.notified().await;
        auth.projects
            .lock()
            .unwrap()
            .insert("u1".into(), vec!["web".into()]);
        server.state.membership_changed("u1").await.unwrap();
        auth.release.add_permits(1);
    };
    let (answer, ()) =
        tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(open, change) })
            .await
            .expect("the stream answers");
    answer
}

/// Records a change of `source` for `audience` (of `key`, or the whole source), waits until
/// the tailer published it, and returns its seq.
async fn changed(
    state: &ui_server::AppState,
    source: &str,
    audience: ui_sync::Audience,
    key: Option<&str>,
) -> u64 {
    let cursor = state
        .sync()
        .record_and_wait(ui_sync::ChangeDraft {
            source: source.into(),
            audience: Some(audience),
            key: key.map(str::to_owned),
            rs: None,
        })
        .await
        .unwrap();
    assert!(
        state
            .sync()
            .catch_up_to(cursor.seq, Duration::from_secs(5))
            .await
    );
    cursor.seq.0
}

/// A change of `ci.runs` of `project`, keyed `key`: its seq.
async fn run_changed(state: &ui_server::AppState, project: &str, key: &str) -> u64 {
    changed(
        state,
        "ci.runs",
        ui_sync::Audience::project(project),
        Some(key),
    )
    .await
}

/// The seqs of the `ci.runs` changes the `changes` frames among `frames` carry.
fn run_seqs(frames: &[SseFrame]) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| f.event == "changes")
        .flat_map(|f| f.data["events"].as_array().unwrap().clone())
        .filter(|e| e["source"] == "ci.runs")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_between_sign_in_and_stream_start_applies_from_the_first_frame() {
    let auth = Arc::new(TableAuth::new(true));
    let server = Server::start_with_auth(auth.clone()).await;
    let (status, _, body) = open_across_a_removal(&server, &auth).await;
    assert_eq!(status, StatusCode::OK);
    let mut stream = Sse::after_hello(body).await;
    let ops = run_changed(&server.state, "ops", "deploy").await;
    let web = run_changed(&server.state, "web", "build").await;
    let frames = stream.until("never", Duration::from_millis(800)).await;
    let delivered = run_seqs(&frames);
    assert_eq!(delivered, vec![web], "not the ops change {ops}: {frames:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_refresh_a_removal_between_sign_in_and_stream_start_asks_to_reconnect() {
    let auth = Arc::new(TableAuth::new(false));
    let server = Server::start_with_auth(auth.clone()).await;
    let (status, headers, _) = open_across_a_removal(&server, &auth).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers.get("retry-after").unwrap(), "0");
    // Connecting again signs in with the memberships as they are now.
    let (status, _, body) = server
        .open("GET", "/ui/events", None, None, &[("x-user", "u1")])
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut stream = Sse::after_hello(body).await;
    let ops = run_changed(&server.state, "ops", "deploy").await;
    let frames = stream.until("never", Duration::from_millis(600)).await;
    assert!(
        frames.iter().all(|f| f.event != "changes"),
        "the ops change {ops} reached a former member: {frames:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_passed_over_by_a_lagging_streams_reset_still_applies() {
    use tower::ServiceExt as _;
    let auth = Arc::new(TableAuth::new(true));
    // A hub of one batch, so a stream not read for two batches lags, and a catch-up of at
    // most two rows, so its catch-up is a `too-far-behind` reset.
    let dir = TempDir::new("lag");
    let mut config = config(&dir);
    config.sync_limits = config
        .sync_limits
        .with("hubCapacity", 1)
        .and_then(|l| l.with("catchUpRows", 2))
        .unwrap();
    let state = ui_server::AppState::builder(config)
        .authenticator(auth.clone())
        .open()
        .await
        .unwrap();
    // In process: the stream's body is pulled only when the test reads it.
    let open = axum::http::Request::builder()
        .uri("/ui/events")
        .header("x-user", "u1")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = ui_server::router(state.clone())
        .oneshot(open)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = Sse::after_hello(response.into_body()).await;
    // Unread by the stream: u1 leaves `ops`, then three `web` changes go by.
    auth.projects
        .lock()
        .unwrap()
        .insert("u1".into(), vec!["web".into()]);
    changed(&state, "host.members", ui_sync::Audience::user("u1"), None).await;
    for i in 0..3 {
        run_changed(&state, "web", &format!("b{i}")).await;
    }
    // Read now: the catch-up answers a reset.
    let frames = stream.until("reset", Duration::from_secs(5)).await;
    assert_eq!(
        frames.last().map(|f| f.event.as_str()),
        Some("reset"),
        "{frames:?}"
    );
    let ops = run_changed(&state, "ops", "deploy").await;
    let web = run_changed(&state, "web", "build").await;
    let frames = stream.until("never", Duration::from_millis(800)).await;
    let delivered = run_seqs(&frames);
    assert_eq!(delivered, vec![web], "not the ops change {ops}: {frames:?}");
}
