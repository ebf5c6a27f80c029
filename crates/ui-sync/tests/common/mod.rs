//! An in-memory log with switches for failures and stalls, shared by the service tests here
//! and `ui-server`'s live-reading test (`crates/ui-server/tests/live.rs`) so they run on
//! tokio's paused clock.

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
    /// Appends wait while set (a database that stopped answering).
    pub hang: AtomicBool,
    pub fail_prune: AtomicBool,
    pub fail_tail: AtomicBool,
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
            hang: AtomicBool::new(false),
            fail_prune: AtomicBool::new(false),
            fail_tail: AtomicBool::new(false),
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
        while self.hang.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        if self.fail.load(Ordering::SeqCst) {
            return Err(SyncError::Store("injected failure".into()));
        }
        Ok(rows.into_iter().map(|r| self.append_elsewhere(r)).collect())
    }

    async fn head(&self) -> Result<Seq, SyncError> {
        Ok(Seq(self.rows.lock().unwrap().len() as u64))
    }

    async fn tail(&self, after: Seq, limit: usize) -> Result<Vec<LogRow>, SyncError> {
        if self.fail_tail.load(Ordering::SeqCst) {
            return Err(SyncError::Store("injected tail failure".into()));
        }
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

/// Frame boundaries over a real log (`sync.md` §4.2): appends a mix that is both coarsened
/// and split under small frame caps (keyed rows of one source around whole-source rows of
/// 40 others, plus rows of another project), opens a stream from the position before them
/// with the store's own catch-up read, and resumes from every `changes` frame's `id` with
/// that read again. Nothing visible is lost, no frame repeats an event at or below an
/// earlier id, and a resume brings back only rows after its id.
pub async fn frame_ids_are_resume_points(store: &dyn SyncStore) {
    use ui_core::SyncLimits;
    use ui_sync::{Audience, Cursor, Frame, ReadAfter, StreamConn, WireEvent, read_after};

    let salt = store.meta().salt.clone();
    let epoch = store.meta().epoch.clone();
    let mine = Audience::project("p1");
    let other = Audience::project("p2");
    let new_row = |source: &str, audience: &Audience, key: Option<String>| NewRow {
        source: source.to_owned(),
        audience: audience.clone(),
        scope: salt.scope(source, audience),
        key: key.map(|k| salt.key(source, audience, &k)),
        rs: None,
        op: ui_sync::Op::Change,
        n: 1,
        at_ms: 1_767_000_000_000,
    };
    let mut rows: Vec<NewRow> = (1..=39)
        .map(|k| new_row("src.s0", &mine, Some(format!("k{k}"))))
        .collect();
    for s in 1..=40 {
        rows.push(new_row(&format!("src.s{s}"), &mine, None));
        rows.push(new_row("src.hidden", &other, Some(format!("h{s}"))));
    }
    rows.push(new_row("src.s0", &mine, Some("k200".into())));
    let start = store.head().await.unwrap();
    let seqs = store.append(rows.clone()).await.unwrap();
    let visible: Vec<LogRow> = rows
        .into_iter()
        .zip(seqs)
        .filter(|(r, _)| r.audience == mine)
        .map(|(row, seq)| LogRow { seq, row })
        .collect();
    let set = AudienceSet::new([mine.clone()], 1_000);
    let at = |seq: u64| {
        Cursor {
            epoch: epoch.clone(),
            seq: Seq(seq),
        }
        .to_string()
    };
    let read = |cursor: String| {
        let set = set.clone();
        async move { read_after(store, Some(&cursor), &set, 2_000).await.unwrap() }
    };
    let limits = SyncLimits::DEFAULT
        .with("frameKeys", 10)
        .unwrap()
        .with("frameBytes", 2_000)
        .unwrap();
    let resume = at(start.0);
    let mut conn = StreamConn::new(
        set.clone(),
        epoch.clone(),
        Some(&resume),
        0,
        900_000,
        limits,
    );
    let frames: Vec<(u64, Vec<WireEvent>)> = conn
        .start(read(resume.clone()).await, 0)
        .into_iter()
        .filter_map(|f| match f {
            Frame::Changes { cursor, events } => Some((cursor.seq.0, events)),
            _ => None,
        })
        .collect();
    assert!(
        frames.len() > 2,
        "the catch-up is split: {} frames",
        frames.len()
    );
    let covers = |e: &WireEvent, r: &LogRow| {
        let w = WireEvent::from(r);
        e.source == w.source
            && e.scope == w.scope
            && (e.key.is_none() || e.key == w.key)
            && e.seq >= w.seq
    };
    let mut delivered: Vec<WireEvent> = Vec::new();
    let mut previous = start.0;
    for (id, events) in &frames {
        assert!(
            events.iter().all(|e| e.seq > previous),
            "an event at or below {previous}"
        );
        assert!(*id >= previous);
        previous = *id;
        delivered.extend(events.iter().cloned());
        let ReadAfter::Events {
            events: resumed, ..
        } = read(at(*id)).await
        else {
            panic!("a reset resuming from {id}");
        };
        assert!(resumed.iter().all(|e| e.seq > *id));
        for r in &visible {
            assert!(
                delivered.iter().chain(&resumed).any(|e| covers(e, r)),
                "row {} is lost resuming from frame id {id}",
                r.seq.0
            );
        }
    }
    // The fix: the coarsened source (floor 1) goes out first.
    assert!(
        frames[0]
            .1
            .iter()
            .any(|e| e.source == "src.s0" && e.key.is_none()),
        "the coarsened source goes out first"
    );
}
