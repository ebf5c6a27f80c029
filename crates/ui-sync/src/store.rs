//! The durable log boundary ([`SyncStore`]) and the catch-up read built on it
//! ([`read_after`], `sync.md` §3.8).

use async_trait::async_trait;

use crate::error::SyncError;
use crate::types::{
    AudienceSet, Cursor, Epoch, LogMeta, LogRow, NewRow, Op, ReadAfter, ResetReason, Seq, collapse,
};

/// One consistent view of the log: its bounds and the visible rows after a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The log incarnation.
    pub epoch: Epoch,
    /// The highest seq ever deleted by retention.
    pub pruned_through: Seq,
    /// The highest committed seq.
    pub head: Seq,
    /// Up to `limit` rows with `after < seq ≤ head` whose audience is in the set, by seq.
    pub rows: Vec<LogRow>,
}

/// What one prune run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneReport {
    /// Rows deleted.
    pub deleted: u64,
    /// The new `pruned_through`.
    pub pruned_through: Seq,
    /// Rows left.
    pub rows: u64,
}

/// Retention settings of one prune run (`sync.md` §3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Rows younger than this (ms) are kept.
    pub age_ms: i64,
    /// At most this many rows are kept.
    pub rows: u64,
    /// Rows deleted per batch.
    pub batch: u64,
    /// Batches per run.
    pub batches: u64,
}

/// The durable log: SQLite for one machine, PostgreSQL for several instances. Every method
/// is one transaction or statement.
#[async_trait]
pub trait SyncStore: Send + Sync + 'static {
    /// The log's epoch and salt (created with the log).
    fn meta(&self) -> &LogMeta;
    /// Appends rows in one transaction; returns their seqs in order.
    async fn append(&self, rows: Vec<NewRow>) -> Result<Vec<Seq>, SyncError>;
    /// The highest committed seq.
    async fn head(&self) -> Result<Seq, SyncError>;
    /// Up to `limit` rows after `after`, by seq, whatever their audience (for the tailer).
    async fn tail(&self, after: Seq, limit: usize) -> Result<Vec<LogRow>, SyncError>;
    /// One read snapshot for a catch-up: bounds plus up to `limit` visible rows after
    /// `after`.
    async fn snapshot(
        &self,
        after: Seq,
        audiences: &AudienceSet,
        limit: usize,
    ) -> Result<Snapshot, SyncError>;
    /// Deletes a prefix of old rows (§3.7) as of `now_ms`.
    async fn prune(&self, now_ms: i64, retention: Retention) -> Result<PruneReport, SyncError>;
    /// Whether another connection or process committed since the last call (SQLite's
    /// `data_version`); stores that learn of writes otherwise answer `false`.
    async fn changed_elsewhere(&self) -> Result<bool, SyncError> {
        Ok(false)
    }
}

/// The catch-up read (`read_after`, §3.8): the collapsed visible events after `cursor`, or a
/// reset. `limit` is the largest number of visible rows returned as events (2,000); one more
/// is a `too-far-behind` reset.
///
/// # Errors
/// Only store failures; a bad cursor is a reset, never an error.
pub async fn read_after(
    store: &dyn SyncStore,
    cursor: Option<&str>,
    audiences: &AudienceSet,
    limit: usize,
) -> Result<ReadAfter, SyncError> {
    let epoch = store.meta().epoch.clone();
    let at = |seq: Seq| Cursor {
        epoch: epoch.clone(),
        seq,
    };
    let Some(text) = cursor else {
        let head = store.head().await?;
        return Ok(ReadAfter::Events {
            cursor: at(head),
            events: Vec::new(),
        });
    };
    let parsed: Result<Cursor, _> = text.parse();
    let (reason, after) = match parsed {
        Err(_) => (Some(ResetReason::Invalid), Seq(0)),
        Ok(c) if c.epoch != epoch => (Some(ResetReason::Epoch), Seq(0)),
        Ok(c) => (None, c.seq),
    };
    // With a reset already decided only the bounds are needed.
    let wanted = if reason.is_some() { 0 } else { limit + 1 };
    let snapshot = store.snapshot(after, audiences, wanted).await?;
    let head = at(snapshot.head);
    let reset = |reason| ReadAfter::Reset {
        cursor: head.clone(),
        reason,
    };
    if let Some(reason) = reason {
        return Ok(reset(reason));
    }
    if after > snapshot.head {
        return Ok(reset(ResetReason::Ahead));
    }
    if after < snapshot.pruned_through {
        return Ok(reset(ResetReason::Expired));
    }
    if snapshot.rows.len() > limit {
        return Ok(reset(ResetReason::TooFarBehind));
    }
    if snapshot.rows.iter().any(|r| r.row.op == Op::Reset) {
        return Ok(reset(ResetReason::Server));
    }
    Ok(ReadAfter::Events {
        cursor: head.clone(),
        events: collapse(&snapshot.rows),
    })
}
