//! An in-memory log with switches for failures and stalls, shared by the service and live
//! tests so they run on tokio's paused clock.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::Notify;
use ui_sync::{
    AudienceKind, AudienceSet, Epoch, LogMeta, LogRow, NewRow, PruneReport, Retention, Salt, Seq,
    Snapshot, SyncError, SyncStore,
};

/// A log in memory with switches for failures and stalls.
pub struct MemStore {
    pub meta: LogMeta,
    pub rows: Mutex<Vec<LogRow>>,
    pub fail: AtomicBool,
    pub hold_snapshots: AtomicBool,
    pub release: Notify,
    pub prunes: AtomicU64,
}

impl MemStore {
    pub fn new() -> Arc<Self> {
        Arc::new(MemStore {
            meta: LogMeta {
                epoch: Epoch::random(),
                salt: Salt([3; 32]),
            },
            rows: Mutex::new(Vec::new()),
            fail: AtomicBool::new(false),
            hold_snapshots: AtomicBool::new(false),
            release: Notify::new(),
            prunes: AtomicU64::new(0),
        })
    }

    pub fn rows(&self) -> Vec<LogRow> {
        self.rows.lock().unwrap().clone()
    }

    /// Appends as another process would: the service is not told.
    pub fn append_elsewhere(&self, row: NewRow) -> Seq {
        let mut rows = self.rows.lock().unwrap();
        let seq = Seq(rows.len() as u64 + 1);
        rows.push(LogRow { seq, row });
        seq
    }
}

#[async_trait]
impl SyncStore for MemStore {
    fn meta(&self) -> &LogMeta {
        &self.meta
    }

    async fn append(&self, rows: Vec<NewRow>) -> Result<Vec<Seq>, SyncError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(SyncError::Store("injected failure".into()));
        }
        Ok(rows.into_iter().map(|r| self.append_elsewhere(r)).collect())
    }

    async fn head(&self) -> Result<Seq, SyncError> {
        Ok(Seq(self.rows.lock().unwrap().len() as u64))
    }

    async fn tail(&self, after: Seq, limit: usize) -> Result<Vec<LogRow>, SyncError> {
        let rows = self.rows.lock().unwrap();
        Ok(rows
            .iter()
            .filter(|r| r.seq > after)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn snapshot(
        &self,
        after: Seq,
        audiences: &AudienceSet,
        limit: usize,
    ) -> Result<Snapshot, SyncError> {
        if self.hold_snapshots.load(Ordering::SeqCst) {
            self.release.notified().await;
        }
        let rows = self.rows.lock().unwrap();
        Ok(Snapshot {
            epoch: self.meta.epoch.clone(),
            pruned_through: Seq(0),
            head: Seq(rows.len() as u64),
            rows: rows
                .iter()
                .filter(|r| r.seq > after)
                .filter(|r| {
                    r.row.audience.kind == AudienceKind::Global
                        || audiences.contains(&r.row.audience)
                })
                .take(limit)
                .cloned()
                .collect(),
        })
    }

    async fn prune(&self, _now_ms: i64, _retention: Retention) -> Result<PruneReport, SyncError> {
        self.prunes.fetch_add(1, Ordering::SeqCst);
        Ok(PruneReport {
            deleted: 0,
            pruned_through: Seq(0),
            rows: self.rows.lock().unwrap().len() as u64,
        })
    }
}
