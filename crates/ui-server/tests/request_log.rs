//! The request log's lines, on the in-process router. Alone in its test binary: `tracing`
//! caches per call site whether anyone listens, so a test on another thread without the
//! subscriber could hide the lines of this one.

#![allow(missing_docs)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;
use common::*;

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_request_log_has_one_line_per_request_and_never_a_session() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(move || writer.clone())
        .finish();
    let _log = tracing::subscriber::set_default(subscriber);

    let app = App::new().await;
    let alice = app.login("alice").await;
    let session = alice.split_once('=').unwrap().1.to_owned();
    let (chat, _) = app.chat_with_reply(&alice, REPLY).await;
    let read = app.get(&format!("/api/chats/{chat}"), &alice).await;
    assert_eq!(read.status, StatusCode::OK);
    let denied = app
        .call(axum::http::Method::GET, "/api/chats", None, None)
        .await;
    assert_eq!(denied.status, StatusCode::UNAUTHORIZED);

    let text = captured.text();
    let lines: Vec<&str> = text.lines().collect();
    // login, create, new reply, two deltas, finish, read, the refused list.
    assert_eq!(lines.len(), 8, "{text}");
    let read_line = lines[6];
    for field in [
        "method=GET",
        "route=/api/chats/{chat}",
        "status=200",
        "latency_ms=",
        "user=alice",
    ] {
        assert!(read_line.contains(field), "{field} in {read_line}");
    }
    assert!(lines[0].contains("route=/api/login") && lines[0].contains("user=-"));
    assert!(
        lines[7].contains("status=401") && lines[7].contains("user=-"),
        "{}",
        lines[7]
    );
    // Routes are patterns: no ids, query strings, tokens or cookies.
    assert!(!text.contains(&session), "{text}");
    assert!(!text.contains(&chat), "{text}");
    assert!(!text.contains("cookie"), "{text}");
}
