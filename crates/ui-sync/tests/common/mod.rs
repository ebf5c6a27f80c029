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
    pub fail_prune: AtomicBool,
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
            fail_prune: AtomicBool::new(false),
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
        if self.fail_prune.load(Ordering::SeqCst) {
            return Err(SyncError::Store("injected prune failure".into()));
        }
        Ok(PruneReport {
            deleted: 0,
            pruned_through: Seq(0),
            rows: self.rows.lock().unwrap().len() as u64,
        })
    }
}

/// Warn-level `tracing` events, captured by a subscriber installed for the current thread
/// (tests on tokio's current-thread runtime run every task there).
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Installs the capture for the current thread until the guard drops.
    pub fn capture() -> (Warnings, tracing::subscriber::DefaultGuard) {
        let w = Warnings::default();
        let guard = tracing::subscriber::set_default(w.clone());
        (w, guard)
    }

    /// The messages of the warnings so far that contain `needle`.
    pub fn containing(&self, needle: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m.contains(needle))
            .count()
    }
}

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut m = Message(String::new());
            event.record(&mut m);
            self.0.lock().unwrap().push(m.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
