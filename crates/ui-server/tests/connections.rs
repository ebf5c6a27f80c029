//! Hostile and unlucky connections against a server on a loopback port: idle and
//! half-sent requests, the connection cap, a client that stops reading its event stream,
//! and the spread of `bye` at shutdown. Every timeout is configured small; every wait is
//! bounded.

#![allow(missing_docs)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};
use ui_sync::{Audience, ChangeDraft};

const MS: Duration = Duration::from_millis(1);

/// Reads until the peer closes the connection (within `within`): what it sent, and when
/// it closed.
async fn read_to_close(tcp: &mut TcpStream, within: Duration) -> (String, Instant) {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match timeout(within, tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server kept the connection open for {within:?}"),
        }
    }
    (String::from_utf8_lossy(&all).into_owned(), Instant::now())
}

/// One whole answer (head and `content-length` body) read from a kept-alive connection.
async fn read_answer(tcp: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = timeout(Duration::from_secs(5), tcp.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(
            n > 0,
            "closed before the answer: {:?}",
            String::from_utf8_lossy(&all)
        );
        all.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if all.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

fn get(path: &str, cookie: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncookie: {cookie}\r\n\r\n")
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_connections_are_closed_after_their_timeouts() {
    let server = Server::start_with(|c| {
        c.idle_timeout = 400 * MS;
        c.header_read_timeout = 200 * MS;
        c.body_read_timeout = 300 * MS;
    })
    .await;
    let alice = server.login("alice").await;
    let bound = Duration::from_secs(3);

    // A connection that never sends anything: closed after the idle timeout.
    let opened = Instant::now();
    let mut idle = connect(server.addr).await;
    let (_, closed) = read_to_close(&mut idle, bound).await;
    assert!(closed - opened >= 350 * MS, "{:?}", closed - opened);

    // A kept-alive connection after its answer: idle again, closed the same way.
    let mut kept = connect(server.addr).await;
    kept.write_all(get("/api/session", &alice).as_bytes())
        .await
        .unwrap();
    assert!(read_answer(&mut kept).await.starts_with("HTTP/1.1 200"));
    let answered = Instant::now();
    let (_, closed) = read_to_close(&mut kept, bound).await;
    assert!(closed - answered >= 350 * MS, "{:?}", closed - answered);

    // A head that trickles in, a byte every 50 ms (4 s for all of it), never quiet long
    // enough for an inactivity timer: the header-read timeout (from the first byte) cuts
    // it off.
    let mut slow = connect(server.addr).await;
    let started = Instant::now();
    let head = get("/api/session", &alice);
    for byte in head.as_bytes().iter().take(head.len() - 2) {
        if slow.write_all(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(50 * MS).await;
        if started.elapsed() > bound {
            panic!("the trickled head was not cut off");
        }
    }
    let (_, closed) = read_to_close(&mut slow, bound).await;
    assert!(closed - started < 1_500 * MS, "{:?}", closed - started);

    // A body that stops halfway: `408 request-timeout`, then the connection closes.
    let mut half = connect(server.addr).await;
    half.write_all(
        format!(
            "POST /api/chats HTTP/1.1\r\nhost: 127.0.0.1\r\ncookie: {alice}\r\n\
             content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"title\":"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let sent = Instant::now();
    let (answer, closed) = read_to_close(&mut half, bound).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request-timeout\""), "{answer}");
    assert!(closed - sent >= 250 * MS, "{:?}", closed - sent);

    // The server still answers.
    assert_eq!(
        server.get("/api/session", &alice).await.body["user"]["userId"],
        "alice"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_answered_at_once_and_the_server_keeps_answering() {
    let server = Server::start_with(|c| c.max_connections = 4).await;
    let alice = server.login("alice").await;
    // One kept-alive client and three idle connections fill the cap.
    let mut client = connect(server.addr).await;
    client
        .write_all(get("/api/session", &alice).as_bytes())
        .await
        .unwrap();
    assert!(read_answer(&mut client).await.starts_with("HTTP/1.1 200"));
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(connect(server.addr).await);
    }
    tokio::time::sleep(100 * MS).await;

    // A fifth connection: `503 unavailable` with `Retry-After`, at once, then closed.
    let mut late_room = 0;
    for _ in 0..3 {
        let asked = Instant::now();
        let mut over = connect(server.addr).await;
        over.write_all(get("/api/session", &alice).as_bytes())
            .await
            .unwrap();
        let head = read_answer(&mut over).await;
        if head.starts_with("HTTP/1.1 200") && late_room < 2 {
            // The login's own connection ended late (its server side notices the close on
            // a busy machine after the idle ones connected) and freed its place: this
            // connection fills the cap instead, and the next one is over it.
            late_room += 1;
            idle.push(over);
            continue;
        }
        let (rest, closed) = read_to_close(&mut over, Duration::from_secs(2)).await;
        let answer = head + &rest;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("retry-after: 1"), "{answer}");
        assert!(
            answer.contains("x-content-type-options: nosniff"),
            "{answer}"
        );
        assert!(answer.contains("\"code\":\"unavailable\""), "{answer}");
        assert!(
            closed - asked < Duration::from_secs(1),
            "{:?}",
            closed - asked
        );
    }

    // The connections inside the cap are served as before …
    client
        .write_all(get("/api/session", &alice).as_bytes())
        .await
        .unwrap();
    assert!(read_answer(&mut client).await.starts_with("HTTP/1.1 200"));
    // … and a connection that closes makes room for a new one.
    drop(idle.pop());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let mut again = connect(server.addr).await;
        again
            .write_all(get("/api/session", &alice).as_bytes())
            .await
            .unwrap();
        let answer = read_answer(&mut again).await;
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "no room after a close: {answer}");
        tokio::time::sleep(50 * MS).await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_stops_reading_is_closed_and_frees_its_slot() {
    let server = Server::start_with(|c| {
        c.sync_limits = c
            .sync_limits
            .with("writeTimeout", 300)
            .unwrap()
            .with("sessionStreams", 1)
            .unwrap();
    })
    .await;
    let alice = server.login("alice").await;
    // A client with a tiny receive buffer that never reads its stream.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let mut stalled = socket.connect(server.addr).await.unwrap();
    stalled
        .write_all(get("/ui/events", &alice).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(200 * MS).await;
    // Its one slot is taken.
    let (status, _, _) = server
        .open("GET", "/ui/events", Some(&alice), None, &[])
        .await;
    assert_eq!(status, axum::http::StatusCode::TOO_MANY_REQUESTS);

    // Changes pour in until the stream's writes stall; then the write timeout closes it
    // and frees the slot.
    let started = Instant::now();
    let mut round = 0u32;
    loop {
        for i in 0..400 {
            server
                .state
                .sync()
                .record(ChangeDraft {
                    source: "ci.runs".into(),
                    audience: Some(Audience::user("alice")),
                    key: Some(format!("run-{round}-{i}-{}", "x".repeat(200))),
                    rs: None,
                })
                .unwrap();
        }
        round += 1;
        tokio::time::sleep(20 * MS).await;
        let (status, _, _) = server
            .open("GET", "/ui/events", Some(&alice), None, &[])
            .await;
        if status == axum::http::StatusCode::OK {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the stalled stream kept its slot for {:?}",
            started.elapsed()
        );
    }
    drop(stalled);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_spreads_the_streams_bye_and_ends_within_its_bound() {
    let server = Server::start_with(|c| {
        c.shutdown_spread = Duration::from_millis(1_000);
        c.drain_timeout = Duration::from_secs(5);
    })
    .await;
    let mut streams = Vec::new();
    for user in ["alice", "bob"] {
        let cookie = server.login(user).await;
        for _ in 0..6 {
            let mut stream = server.events(&cookie, "").await;
            assert_eq!(
                stream.next(Duration::from_secs(5)).await.unwrap().event,
                "hello"
            );
            streams.push(stream);
        }
    }
    let stopped = Instant::now();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|mut stream| {
            tokio::spawn(async move {
                let frames = stream.until("bye", Duration::from_secs(5)).await;
                let bye = frames.last().cloned().expect("a bye");
                (bye, Instant::now())
            })
        })
        .collect();
    server.stop().await;
    let ended = stopped.elapsed();
    let mut at = Vec::new();
    for reader in readers {
        let (bye, when) = reader.await.unwrap();
        assert_eq!(bye.event, "bye");
        assert_eq!(bye.data["reason"], "shutdown");
        at.push(when - stopped);
    }
    at.sort();
    let (first, last) = (at[0], at[at.len() - 1]);
    // Spread over the second (12 uniform turns all within 300 ms: p < 1e-4) …
    assert!(last - first >= 300 * MS, "{at:?}");
    assert!(last <= Duration::from_millis(2_500), "{at:?}");
    // … and the drain ended on its own, before its bound.
    assert!(ended < Duration::from_secs(4), "{ended:?}");
}
