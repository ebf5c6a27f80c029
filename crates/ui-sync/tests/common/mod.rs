//! An in-memory log with switches for failures and stalls, shared by the service tests here
//! and `ui-server`'s live-reading test (`crates/ui-server/tests/live.rs`) so they run on
//! tokio's paused clock; and the helpers and scenarios that the SQLite and PostgreSQL log
//! tests (`sqlite.rs`, `postgres.rs`) run on either database.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::Notify;
use ui_core::SyncLimits;
use ui_sync::{
    Audience, AudienceKind, AudienceSet, Epoch, LogMeta, LogRow, NewRow, Op, PruneReport,
    ReadAfter, RequestSource, ResetReason, Retention, Salt, Seq, Snapshot, SyncError, SyncStore,
    WireEvent, read_after,
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

/// Warn- and info-level `tracing` events, captured by a subscriber installed for the
/// current thread (tests on tokio's current-thread runtime run every task there).
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<(tracing::Level, String)>>>);

impl Warnings {
    /// Installs the capture for the current thread until the guard drops.
    pub fn capture() -> (Warnings, tracing::subscriber::DefaultGuard) {
        let w = Warnings::default();
        let guard = tracing::subscriber::set_default(w.clone());
        (w, guard)
    }

    /// The messages of the warnings so far that contain `needle`.
    pub fn containing(&self, needle: &str) -> usize {
        self.at(tracing::Level::WARN, needle)
    }

    /// The messages of the `info` events so far that contain `needle`.
    pub fn infos_containing(&self, needle: &str) -> usize {
        self.at(tracing::Level::INFO, needle)
    }

    fn at(&self, level: tracing::Level, needle: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, m)| *l == level && m.contains(needle))
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
        let level = *event.metadata().level();
        if level == tracing::Level::WARN || level == tracing::Level::INFO {
            let mut m = Message(String::new());
            event.record(&mut m);
            self.0.lock().unwrap().push((level, m.0));
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

// Helpers of the log tests over either database.

/// An hour in milliseconds.
pub const HOUR_MS: i64 = 3_600_000;

/// The wall clock in milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A change row written now, its scope and key salted with the store's salt.
pub fn row(
    store: &dyn SyncStore,
    source: &str,
    audience: &Audience,
    key: Option<&str>,
    rs: Option<&str>,
) -> NewRow {
    let salt = &store.meta().salt;
    NewRow {
        source: source.into(),
        audience: audience.clone(),
        scope: salt.scope(source, audience),
        key: key.map(|k| salt.key(source, audience, k)),
        rs: rs.and_then(RequestSource::parse),
        op: Op::Change,
        n: 1,
        at_ms: now_ms(),
    }
}

/// `count` rows of `audience`, each with its own key (so none collapse).
pub fn rows(store: &dyn SyncStore, audience: &Audience, count: usize) -> Vec<NewRow> {
    (0..count)
        .map(|i| row(store, "ci.runs", audience, Some(&format!("k{i}")), None))
        .collect()
}

/// The audiences a reader may see.
pub fn set(audiences: &[Audience]) -> AudienceSet {
    AudienceSet::new(audiences.iter().cloned(), 1_000)
}

/// How many visible rows a catch-up returns before it answers a reset.
pub fn catch_up_rows() -> usize {
    SyncLimits::DEFAULT.catch_up_rows() as usize
}

/// A catch-up read after `cursor` with the default cap.
pub async fn read(
    store: &dyn SyncStore,
    cursor: Option<&str>,
    audiences: &AudienceSet,
) -> ReadAfter {
    read_after(store, cursor, audiences, catch_up_rows())
        .await
        .unwrap()
}

/// The cursor at `seq` in the store's epoch.
pub fn cursor(store: &dyn SyncStore, seq: u64) -> String {
    format!("{}.{seq}", store.meta().epoch)
}

/// The reason of a reset, `None` for events.
pub fn reset_reason(answer: &ReadAfter) -> Option<ResetReason> {
    match answer {
        ReadAfter::Reset { reason, .. } => Some(*reason),
        ReadAfter::Events { .. } => None,
    }
}

/// The events of an answer; panics on a reset.
pub fn events(answer: ReadAfter) -> Vec<WireEvent> {
    match answer {
        ReadAfter::Events { events, .. } => events,
        ReadAfter::Reset { reason, .. } => panic!("unexpected reset {reason:?}"),
    }
}

/// Prunes as if two hours from now with an age limit of an hour, so every row is old enough;
/// at most `batches` batches of `batch` rows go.
pub async fn prune_two_hours_later(store: &dyn SyncStore, batch: u64, batches: u64) -> PruneReport {
    let retention = Retention {
        age_ms: HOUR_MS,
        rows: 100_000,
        batch,
        batches,
    };
    store
        .prune(now_ms() + 2 * HOUR_MS, retention)
        .await
        .unwrap()
}

// Scenarios of the log tests over either database, each on an empty log.

/// Every reset reason answers the head in the store's epoch: a text that is not a cursor,
/// another epoch, a cursor ahead of the head, one behind pruned rows, and an `op = reset`
/// row the reader may see. No cursor and the head itself read nothing new.
pub async fn every_reset_reason_answers_the_head(store: &dyn SyncStore) {
    let p = Audience::project("p1");
    let audiences = set(std::slice::from_ref(&p));
    store.append(rows(store, &p, 10)).await.unwrap();

    let fresh = read(store, None, &audiences).await;
    assert_eq!(fresh.cursor().seq, Seq(10), "no cursor: start at the head");
    assert!(events(fresh).is_empty());

    let cases = [
        ("not a cursor".to_owned(), ResetReason::Invalid),
        ("aaaaaaaaaaaa.3".to_owned(), ResetReason::Epoch),
        (cursor(store, 11), ResetReason::Ahead),
    ];
    for (text, reason) in cases {
        let answer = read(store, Some(&text), &audiences).await;
        assert_eq!(reset_reason(&answer), Some(reason), "{text}");
        assert_eq!(answer.cursor().seq, Seq(10));
        assert_eq!(answer.cursor().epoch, store.meta().epoch);
    }
    // The head itself is fine: nothing new.
    assert!(events(read(store, Some(&cursor(store, 10)), &audiences).await).is_empty());

    // Expired: retention deleted rows the cursor has not seen.
    let report = prune_two_hours_later(store, 4, 1).await;
    assert_eq!((report.deleted, report.pruned_through), (4, Seq(4)));
    let answer = read(store, Some(&cursor(store, 3)), &audiences).await;
    assert_eq!(reset_reason(&answer), Some(ResetReason::Expired));
    assert_eq!(
        events(read(store, Some(&cursor(store, 4)), &audiences).await).len(),
        6
    );

    // Server: an `op = reset` row the caller may see.
    let mut reset = row(store, "host.sync", &Audience::global(), None, None);
    reset.op = Op::Reset;
    store.append(vec![reset]).await.unwrap();
    let answer = read(store, Some(&cursor(store, 8)), &audiences).await;
    assert_eq!(reset_reason(&answer), Some(ResetReason::Server));
    assert_eq!(answer.cursor().seq, Seq(11));
}

/// A catch-up counts only the rows the reader may see: thousands of other audiences' rows
/// are skipped, while global rows count for everyone, 2,000 of them are events and 2,001 a
/// reset.
pub async fn too_far_behind_counts_only_visible_rows_and_resets_at_2001(store: &dyn SyncStore) {
    let mine = Audience::project("mine");
    store
        .append(rows(store, &Audience::project("other"), 5_000))
        .await
        .unwrap();
    store.append(rows(store, &mine, 3)).await.unwrap();
    store
        .append(rows(store, &Audience::user("someone"), 5_000))
        .await
        .unwrap();
    let mine_only = set(std::slice::from_ref(&mine));
    let answer = read(store, Some(&cursor(store, 0)), &mine_only).await;
    assert_eq!(answer.cursor().seq, Seq(10_003));
    assert_eq!(
        events(answer).iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![5_001, 5_002, 5_003]
    );

    // Global rows are visible to everyone: 2,000 of them are events, 2,001 a reset.
    store
        .append(rows(store, &Audience::global(), catch_up_rows() - 2))
        .await
        .unwrap();
    let at_limit = events(read(store, Some(&cursor(store, 5_001)), &mine_only).await);
    assert_eq!(at_limit.len(), catch_up_rows());
    let over = read(store, Some(&cursor(store, 5_000)), &mine_only).await;
    assert_eq!(reset_reason(&over), Some(ResetReason::TooFarBehind));
    assert_eq!(over.cursor().seq, Seq(10_003 + catch_up_rows() as u64 - 2));
    let elsewhere = read(
        store,
        Some(&cursor(store, 10_003)),
        &set(&[Audience::user("nobody")]),
    )
    .await;
    assert_eq!(
        events(elsewhere).len(),
        catch_up_rows() - 2,
        "global rows only"
    );
}

/// User B never sees user A's rows, from any cursor, yet B's cursor still moves to the head;
/// A sees its own, the two rows of one key collapsed.
pub async fn user_b_never_receives_user_a_events(store: &dyn SyncStore) {
    let (a, b) = (Audience::user("a"), Audience::user("b"));
    store.append(rows(store, &a, 4)).await.unwrap();
    store
        .append(vec![row(store, "host.settings", &b, None, None)])
        .await
        .unwrap();
    store
        .append(vec![row(store, "ci.runs", &a, Some("other"), None); 2])
        .await
        .unwrap();
    let for_b = set(&[b.clone(), Audience::org("shared")]);
    let answer = read(store, Some(&cursor(store, 0)), &for_b).await;
    assert_eq!(
        answer.cursor().seq,
        Seq(7),
        "the cursor still moves to the head"
    );
    let seen = events(answer);
    assert_eq!(seen.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![5]);
    assert_eq!(
        seen[0].scope,
        store.meta().salt.scope("host.settings", &b).to_hex()
    );
    let idle = read(store, Some(&cursor(store, 5)), &for_b).await;
    assert_eq!(idle.cursor().seq, Seq(7), "filtered out, still the head");
    assert!(events(idle).is_empty());
    // Reading from any cursor never shows A's rows to B.
    for from in 0..7 {
        let seqs: HashSet<u64> = events(read(store, Some(&cursor(store, from)), &for_b).await)
            .iter()
            .map(|e| e.seq)
            .collect();
        assert!(seqs.is_subset(&HashSet::from([5])), "{from}: {seqs:?}");
    }
    let for_a = events(read(store, Some(&cursor(store, 0)), &set(&[a])).await);
    assert_eq!(
        for_a.iter().map(|e| (e.seq, e.n)).collect::<Vec<_>>(),
        vec![(1, 1), (2, 1), (3, 1), (4, 1), (7, 2)]
    );
}

/// A catch-up collapses rows of one source, scope and key into one event: `n` summed, the
/// latest `at`, `rs` kept only if every row shares it. The tail still reads the rows as
/// appended.
pub async fn catch_up_collapses_by_source_scope_and_key(store: &dyn SyncStore) {
    let p = Audience::project("p1");
    let mut written = vec![
        row(store, "ci.runs", &p, Some("main"), Some("p-a")),
        row(store, "ci.runs", &p, Some("main"), Some("p-b")),
        row(store, "ci.runs", &p, Some("dev"), Some("p-a")),
        row(store, "ci.runs", &p, Some("main"), Some("p-a")),
        row(store, "ci.runs", &p, Some("dev"), Some("p-a")),
        row(store, "ci.runs", &p, None, None),
    ];
    for (i, r) in written.iter_mut().enumerate() {
        r.at_ms = 1_000 + i as i64;
        r.n = 2;
    }
    written[3].at_ms = 500;
    store.append(written).await.unwrap();
    let got = events(
        read(
            store,
            Some(&cursor(store, 0)),
            &set(std::slice::from_ref(&p)),
        )
        .await,
    );
    let salt = &store.meta().salt;
    assert_eq!(got.len(), 3);
    // Sorted by their largest seq: main (4), dev (5), the whole source (6).
    let main = &got[0];
    assert_eq!(main.seq, 4);
    assert_eq!(main.key, Some(salt.key("ci.runs", &p, "main").to_hex()));
    assert_eq!(main.n, 6);
    assert_eq!(main.rs, None, "page B wrote in between: rs is null");
    assert_eq!(main.at, 1_001, "the latest at, not the last row's");
    let dev = &got[1];
    assert_eq!((dev.seq, dev.n), (5, 4));
    assert_eq!(dev.rs.as_deref(), Some("p-a"), "every row shares rs: kept");
    let whole = &got[2];
    assert_eq!((whole.seq, whole.key.as_deref(), whole.n), (6, None, 2));

    // What the tailer reads is the row as appended.
    let tailed = store.tail(Seq(1), 2).await.unwrap();
    assert_eq!(
        tailed.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![Seq(2), Seq(3)]
    );
    assert_eq!(tailed[0].row.rs, RequestSource::parse("p-b"));
    assert_eq!(tailed[0].row.audience, p);
    assert_eq!(tailed[0].row.n, 2);
}

/// Frame boundaries over a real log (`sync.md` §4.2): appends a mix that is both coarsened
/// and split under small frame caps (keyed rows of one source around whole-source rows of
/// 40 others, plus rows of another project), opens a stream from the position before them
/// with the store's own catch-up read, and resumes from every `changes` frame's `id` with
/// that read again. Nothing visible is lost, no frame repeats an event at or below an
/// earlier id, and a resume brings back only rows after its id.
pub async fn frame_ids_are_resume_points(store: &dyn SyncStore) {
    use ui_sync::{Cursor, Frame, StreamConn};

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
        op: Op::Change,
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
