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
    let mut delivered: Vec<u64> = frames
        .iter()
        .filter(|f| f.event == "changes")
        .flat_map(|f| f.data["events"].as_array().unwrap().clone())
        .filter(|e| e["source"] == "ci.runs")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
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
        Some(ui_server::Principal {
            session: format!("s-{user}"),
            user_id: user,
            projects: vec!["web".into()],
        })
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
            let mut sse = Sse::new(body);
            assert_eq!(
                sse.next(Duration::from_secs(5)).await.unwrap().event,
                "hello"
            );
            sse
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
