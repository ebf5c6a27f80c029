//! # ui-sync
//!
//! The change feed (`sync.md`): every write is recorded as a change event in a durable log;
//! pages learn of changes over one event stream (poll as fallback) and re-read just the
//! readings whose source changed. Events never carry data, only invalidation signals scoped
//! to an audience.
//!
//! - [`SqliteStore`] (one file, several processes) and, with the `postgres` feature,
//!   `PgStore` (several instances) keep the log behind [`SyncStore`]: seqs in commit order,
//!   epochs, cursors `<epoch>.<seq>`, retention from the oldest end. `PgConnect` reads a
//!   PostgreSQL connection string with its TLS keys as libpq does (`sslmode`,
//!   `sslrootcert`, `sslcert`, `sslkey`); the log and `ui-server` connect through it.
//! - [`SyncService`] is the per-process part: it records drafts (coalesced in a 50 ms
//!   window, never lost: overflow becomes coarser rows), tails the log into a bounded hub,
//!   keeps the latest-change index that live readings consult (`ui-server` adapts it to
//!   `ui-host`'s `ChangeIndex`; this crate depends on neither), answers catch-up reads
//!   with resets instead of unbounded history, and prunes.
//! - [`StreamConn`] and [`PollBody`] are the server side of `/ui/events` and `/ui/poll` as
//!   sans-IO machines; [`client::Transport`] is the page's side (§7), so the browser page
//!   follows rules tested here.
//!
//! ```
//! use std::sync::Arc;
//! use ui_core::SyncLimits;
//! use ui_sync::{Audience, AudienceSet, ChangeDraft, ReadAfter, SqliteStore, SyncService};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let store = Arc::new(SqliteStore::open_temp().await.unwrap());
//! let sync = SyncService::start(store, SyncLimits::DEFAULT, []).await.unwrap();
//! let start = sync.head().to_string();
//!
//! // A CI webhook records that runs of branch main changed in project web.
//! let cursor = sync
//!     .record_and_wait(ChangeDraft {
//!         source: "ci.runs".into(),
//!         audience: Some(Audience::project("web")),
//!         key: Some("branch:main".into()),
//!         rs: None,
//!     })
//!     .await
//!     .unwrap();
//!
//! // A member of project web catching up from `start` learns of it; others do not.
//! let member = AudienceSet::new([Audience::user("ann"), Audience::project("web")], 1_000);
//! let ReadAfter::Events { events, .. } = sync.read_after(Some(&start), &member).await.unwrap()
//! else { panic!("a reset") };
//! assert_eq!(events.len(), 1);
//! assert_eq!(events[0].seq, cursor.seq.0);
//! let outsider = AudienceSet::new([Audience::user("bob")], 1_000);
//! let ReadAfter::Events { events, .. } = sync.read_after(Some(&start), &outsider).await.unwrap()
//! else { panic!("a reset") };
//! assert!(events.is_empty());
//! sync.shutdown().await;
//! # });
//! ```
//!
//! Dependencies beyond the card's: `rusqlite` (bundled SQLite, the embedded log),
//! `tokio-postgres` (optional, several instances) with `rustls`, `tokio-rustls` and
//! `rustls-native-certs` for its TLS (the `ring` provider: no OpenSSL or aws-lc C build;
//! TLS is not code to write ourselves), `hmac`/`sha2` for the salted tokens and
//! `getrandom` for epochs, salts and page ids — each the smallest well-kept crate for the job;
//! `foldhash` for the latest index, which every `ui.query` of a feed source looks up (its
//! keys are salted tokens, so a fast hasher needs no flood resistance);
//! `schemars` (optional, feature `schema`) derives the JSON Schemas of the wire events, poll
//! bodies and stream frames (`Frame::data_schema`) from the types that write them.

mod audience;
pub mod client;
mod error;
mod latest;
#[cfg(feature = "postgres")]
mod pg_connect;
mod poll;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "schema")]
mod schema;
mod service;
mod sqlite;
mod store;
mod stream;
mod types;

pub use audience::parse_audience;
pub use error::SyncError;
#[cfg(feature = "postgres")]
pub use pg_connect::{
    PgConnect, PgConnectError, PgConnection, PgTls, PgTlsConnect, PgTlsStream, pg_error_text,
};
pub use poll::{
    PollBody, PollReset, RateLimiter, STREAM_RETRY_AFTER_SECS, SlotRefused, StreamSlot,
    StreamSlots, retry_after_secs,
};
#[cfg(feature = "postgres")]
pub use postgres::PgStore;
pub use service::{SyncService, SyncStats};
pub use sqlite::SqliteStore;
pub use store::{PruneReport, Retention, Snapshot, SyncStore, read_after};
pub use stream::{ByeReason, Frame, STREAM_PROTOCOL, StreamConn, resume_cursor, stream_lifetime};
pub use types::{
    Audience, AudienceKind, AudienceSet, Batch, ChangeDraft, Cursor, Epoch, LogMeta, LogRow,
    MAX_SEQ, NewRow, Op, ReadAfter, RequestSource, ResetReason, Salt, Seq, Token, WireEvent,
    collapse, is_source_name,
};
