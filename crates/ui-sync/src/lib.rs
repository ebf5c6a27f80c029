//! # ui-sync
//!
//! The change feed (`sync.md`): every write is recorded as a change event in a durable log;
//! pages learn of changes over one event stream (poll as fallback) and re-read just the
//! readings whose source changed. Events never carry data, only invalidation signals scoped
//! to an audience.

pub mod client;
mod error;
mod host;
mod latest;
mod poll;
#[cfg(feature = "postgres")]
mod postgres;
mod service;
mod sqlite;
mod store;
mod stream;
mod types;

pub use error::SyncError;
pub use host::parse_audience;
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
