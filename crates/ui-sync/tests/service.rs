//! The per-process service (`sync.md` §3.5, §6.1, §6.5, §11.3): coalescing, overflow,
//! validation, retries, the tailer, the latest index, catch-up slots, the pruner.
//!
//! Most tests run on a paused clock against an in-memory store (below), so windows,
//! backoff and grace periods are exact; the last ones use the real SQLite log.

mod common;

use common::{MemStore, Warnings};

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use ui_core::SyncLimits;
use ui_sync::{
    Audience, AudienceSet, ChangeDraft, LogRow, NewRow, Op, ReadAfter, RequestSource, Seq,
    SqliteStore, SyncError, SyncService,
};

fn draft(
    source: &str,
    audience: Option<Audience>,
    key: Option<&str>,
    rs: Option<&str>,
) -> ChangeDraft {
    ChangeDraft {
        source: source.into(),
        audience,
        key: key.map(str::to_owned),
        rs: rs.and_then(RequestSource::parse),
    }
}

fn p1() -> Audience {
    Audience::project("p1")
}

fn limits(overrides: &[(&str, u64)]) -> SyncLimits {
    overrides
        .iter()
        .fold(SyncLimits::DEFAULT, |l, (k, v)| l.with(k, *v).unwrap())
}

async fn start(store: &Arc<MemStore>, limits: SyncLimits) -> SyncService {
    SyncService::start(store.clone(), limits, ["host.flags".to_owned()])
        .await
        .unwrap()
}

/// Waits (on the paused clock) until the tailer has published `seq`.
async fn tailed(service: &SyncService, seq: u64) {
    assert!(
        service.catch_up_to(Seq(seq), Duration::from_secs(10)).await,
        "head never reached {seq}"
    );
}

/// (source, key token, rs, n, op) of a row.
type Shape = (String, Option<String>, Option<String>, u32, Op);

/// The [`Shape`] of each row, for comparisons.
fn shape(rows: &[LogRow]) -> Vec<Shape> {
    rows.iter()
        .map(|r| {
            (
                r.row.source.clone(),
                r.row.key.map(|k| k.to_hex()),
                r.row.rs.as_ref().map(|s| s.as_str().to_owned()),
                r.row.n,
                r.row.op,
            )
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn one_window_merges_drafts_with_the_same_source_audience_key_and_rs() {
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    for _ in 0..100 {
        service
            .record(draft("ci.runs", Some(p1()), Some("main"), Some("p-a")))
            .unwrap();
    }
    for _ in 0..3 {
        service
            .record(draft("ci.runs", Some(p1()), Some("main"), Some("p-b")))
            .unwrap();
    }
    service
        .record(draft("ci.runs", Some(p1()), Some("dev"), Some("p-a")))
        .unwrap();
    service
        .record(draft(
            "ci.runs",
            Some(Audience::project("p2")),
            Some("main"),
            Some("p-a"),
        ))
        .unwrap();
    service
        .record(draft("ci.runs", Some(p1()), None, Some("p-a")))
        .unwrap();
    let started = Instant::now();
    let cursor = service
        .record_and_wait(draft("ci.runs", Some(p1()), Some("main"), Some("p-a")))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(SyncLimits::DEFAULT.appender_window()),
        "{waited:?}"
    );
    assert!(waited < Duration::from_millis(100), "{waited:?}");

    let rows = store.rows();
    let (_, main) = service.tokens("ci.runs", &p1(), Some("main"));
    let (_, dev) = service.tokens("ci.runs", &p1(), Some("dev"));
    let main = main.map(|k| k.to_hex());
    let dev = dev.map(|k| k.to_hex());
    let a = Some("p-a".to_owned());
    assert_eq!(
        shape(&rows),
        vec![
            ("ci.runs".into(), main.clone(), a.clone(), 101, Op::Change),
            (
                "ci.runs".into(),
                main.clone(),
                Some("p-b".into()),
                3,
                Op::Change
            ),
            ("ci.runs".into(), dev, a.clone(), 1, Op::Change),
            (
                "ci.runs".into(),
                service
                    .tokens("ci.runs", &Audience::project("p2"), Some("main"))
                    .1
                    .map(|k| k.to_hex()),
                a.clone(),
                1,
                Op::Change
            ),
            ("ci.runs".into(), None, a, 1, Op::Change),
        ]
    );
    assert_eq!(
        cursor.seq, rows[0].seq,
        "the waiter gets its merged row's seq"
    );
    assert_eq!(cursor.epoch, service.epoch());
    let stats = service.stats();
    assert_eq!((stats.drafts, stats.rows, stats.merged), (107, 5, 102));

    // The next window is a new row.
    let next = service
        .record_and_wait(draft("ci.runs", Some(p1()), Some("main"), Some("p-a")))
        .await
        .unwrap();
    assert_eq!(next.seq, Seq(6));
}

#[tokio::test(start_paused = true)]
async fn waiters_merged_into_one_row_get_the_same_cursor() {
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    let d = || draft("ci.runs", Some(p1()), Some("main"), None);
    let (a, b) = tokio::join!(service.record_and_wait(d()), service.record_and_wait(d()));
    assert_eq!(a.unwrap(), b.unwrap());
    assert_eq!(store.rows().len(), 1);
    assert_eq!(store.rows()[0].row.n, 2);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_overflows_to_whole_source_rows_and_a_full_overflow_set_to_a_reset() {
    let store = MemStore::new();
    let service = start(
        &store,
        limits(&[("appenderQueue", 4), ("overflowPairs", 2)]),
    )
    .await;
    let p2 = Audience::project("p2");
    for i in 0..4 {
        service
            .record(draft(
                "ci.runs",
                Some(p1()),
                Some(&format!("k{i}")),
                Some("p-a"),
            ))
            .unwrap();
    }
    // The queue is full: these return at once and are only counted.
    for i in 0..3 {
        service
            .record(draft(
                "ci.runs",
                Some(p1()),
                Some(&format!("x{i}")),
                Some("p-a"),
            ))
            .unwrap();
    }
    for _ in 0..2 {
        service
            .record(draft("ci.builds", Some(p2.clone()), Some("main"), None))
            .unwrap();
    }
    assert_eq!(service.stats().overflowed, 5);
    tailed(&service, 6).await;
    let rows = store.rows();
    assert_eq!(rows.len(), 6);
    let whole: Vec<_> = rows[4..]
        .iter()
        .map(|r| {
            (
                r.row.source.as_str(),
                r.row.audience.clone(),
                r.row.key,
                r.row.rs.clone(),
                r.row.n,
            )
        })
        .collect();
    assert_eq!(
        whole,
        vec![
            ("ci.builds", p2.clone(), None, None, 2),
            ("ci.runs", p1(), None, None, 3),
        ]
    );
    assert_eq!(rows[4].row.scope, service.tokens("ci.builds", &p2, None).0);

    // Fill the queue again, then three pairs for a set of two: one reset row, global.
    for i in 0..4 {
        service
            .record(draft("ci.runs", Some(p1()), Some(&format!("k{i}")), None))
            .unwrap();
    }
    for p in ["a", "b", "c", "c"] {
        service
            .record(draft("ci.runs", Some(Audience::project(p)), None, None))
            .unwrap();
    }
    tailed(&service, 11).await;
    let rows = store.rows();
    assert_eq!(rows.len(), 11);
    let reset = &rows[10].row;
    assert_eq!(reset.op, Op::Reset);
    assert_eq!(reset.audience, Audience::global());
    assert_eq!((reset.key, reset.rs.clone(), reset.n), (None, None, 4));
    assert_eq!(service.stats().resets, 1);

    // The overflow set was cleared: the next overflow is a whole-source row again.
    for i in 0..5 {
        service
            .record(draft("ci.runs", Some(p1()), Some(&format!("y{i}")), None))
            .unwrap();
    }
    tailed(&service, 16).await;
    let last = &store.rows()[15].row;
    assert_eq!((last.op, last.key, last.n), (Op::Change, None, 1));
}

#[tokio::test(start_paused = true)]
async fn drafts_without_a_valid_audience_fail_at_the_call_site_and_write_nothing() {
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    assert_eq!(
        service.record(draft("ci.runs", None, Some("main"), None)),
        Err(SyncError::NoAudience("ci.runs".into()))
    );
    assert_eq!(
        service
            .record_and_wait(draft("ci.runs", None, None, None))
            .await,
        Err(SyncError::NoAudience("ci.runs".into()))
    );
    assert!(matches!(
        service.record(draft("ci.runs", Some(Audience::global()), None, None)),
        Err(SyncError::Invalid(_))
    ));
    assert!(matches!(
        service.record(draft("CI Runs", Some(p1()), None, None)),
        Err(SyncError::Invalid(_))
    ));
    assert!(matches!(
        service.record(draft("ci.runs", Some(p1()), Some(&"k".repeat(257)), None)),
        Err(SyncError::Invalid(_))
    ));
    service
        .record(draft("ci.runs", Some(p1()), Some(&"k".repeat(256)), None))
        .unwrap();
    // An internal source may omit the audience: it is global.
    let cursor = service
        .record_and_wait(draft("host.flags", None, None, None))
        .await
        .unwrap();
    let rows = store.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].seq, cursor.seq);
    assert_eq!(rows[1].row.audience, Audience::global());
    assert_eq!(service.stats().drafts, 2);
}

#[tokio::test(start_paused = true)]
async fn the_tailer_starts_at_the_head_and_publishes_batches_in_order() {
    let store = MemStore::new();
    for i in 0..3 {
        store.append_elsewhere(NewRow {
            source: "ci.runs".into(),
            audience: p1(),
            scope: store.meta.salt.scope("ci.runs", &p1()),
            key: None,
            rs: None,
            op: Op::Change,
            n: 1,
            at_ms: i,
        });
    }
    let service = start(&store, SyncLimits::DEFAULT).await;
    assert_eq!(service.head().seq, Seq(3));
    let mut hub = service.subscribe();
    let first = service
        .record_and_wait(draft("ci.runs", Some(p1()), Some("a"), None))
        .await
        .unwrap();
    let second = service
        .record_and_wait(draft("ci.runs", Some(p1()), Some("b"), None))
        .await
        .unwrap();
    assert_eq!((first.seq, second.seq), (Seq(4), Seq(5)));
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let batch = tokio::time::timeout(Duration::from_secs(5), hub.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(batch.first, batch.rows[0].seq);
        assert_eq!(batch.last, batch.rows.last().unwrap().seq);
        seen.extend(batch.rows.iter().map(|r| r.seq.0));
    }
    assert_eq!(seen, vec![4, 5], "history is never re-emitted");
    assert_eq!(service.head().seq, Seq(5));
}

#[tokio::test(start_paused = true)]
async fn rows_of_other_writers_arrive_by_the_tail_tick_and_catch_up_to_pokes_the_tailer() {
    let store = MemStore::new();
    let started = Instant::now();
    let service = start(&store, SyncLimits::DEFAULT).await;
    let mut hub = service.subscribe();
    let row = NewRow {
        source: "ci.runs".into(),
        audience: p1(),
        scope: service.tokens("ci.runs", &p1(), None).0,
        key: None,
        rs: None,
        op: Op::Change,
        n: 1,
        at_ms: 0,
    };
    // This store never reports `changed_elsewhere`: only the safety tick (every
    // `postgresTick`, the first at start) finds the row.
    tokio::time::sleep(Duration::from_millis(10)).await;
    store.append_elsewhere(row.clone());
    let batch = hub.recv().await.unwrap();
    assert_eq!(batch.rows[0].seq, Seq(1));
    assert_eq!(
        Instant::now() - started,
        Duration::from_millis(SyncLimits::DEFAULT.postgres_tick())
    );

    // A `seen` ahead of the head makes the tailer read at once (§6.5).
    let seq = store.append_elsewhere(row);
    let started = Instant::now();
    let within = Duration::from_millis(SyncLimits::DEFAULT.seen_catch_up());
    assert!(service.catch_up_to(seq, within).await);
    assert!(started.elapsed() < within);
    assert_eq!(service.head().seq, seq);
    // A seq nobody wrote: false after the bound.
    let started = Instant::now();
    assert!(!service.catch_up_to(Seq(99), within).await);
    assert_eq!(started.elapsed(), within);
}

#[tokio::test(start_paused = true)]
async fn the_tailer_reads_in_batches_of_tailer_batch_rows() {
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    let mut hub = service.subscribe();
    for _ in 0..2_500 {
        store.append_elsewhere(NewRow {
            source: "ci.runs".into(),
            audience: p1(),
            scope: store.meta.salt.scope("ci.runs", &p1()),
            key: None,
            rs: None,
            op: Op::Change,
            n: 1,
            at_ms: 0,
        });
    }
    tailed(&service, 2_500).await;
    let mut sizes = Vec::new();
    let mut next = 1;
    while next <= 2_500 {
        let batch = hub.recv().await.unwrap();
        assert_eq!(batch.first, Seq(next));
        assert_eq!(batch.last, Seq(next + batch.rows.len() as u64 - 1));
        next = batch.last.0 + 1;
        sizes.push(batch.rows.len());
    }
    let max = SyncLimits::DEFAULT.tailer_batch() as usize;
    assert_eq!(sizes, vec![max, max, 2_500 - 2 * max]);
}

#[tokio::test(start_paused = true)]
async fn the_latest_index_answers_relevant_with_base_for_misses() {
    let store = MemStore::new();
    for _ in 0..5 {
        store.append_elsewhere(NewRow {
            source: "ci.runs".into(),
            audience: p1(),
            scope: store.meta.salt.scope("ci.runs", &p1()),
            key: None,
            rs: None,
            op: Op::Change,
            n: 1,
            at_ms: 0,
        });
    }
    let service = start(&store, limits(&[("latestIndex", 6)])).await;
    let (scope, main) = service.tokens("ci.runs", &p1(), Some("main"));
    let (_, dev) = service.tokens("ci.runs", &p1(), Some("dev"));
    let (main, dev) = (main.unwrap(), dev.unwrap());
    assert_eq!(
        service.relevant(&scope, &[]),
        Seq(5),
        "base = head at start"
    );
    assert_eq!(service.relevant(&scope, &[main]), Seq(5));

    for (key, expect) in [(Some("main"), 6), (None, 7), (Some("dev"), 8)] {
        let c = service
            .record_and_wait(draft("ci.runs", Some(p1()), key, None))
            .await
            .unwrap();
        assert_eq!(c.seq, Seq(expect));
    }
    tailed(&service, 8).await;
    assert_eq!(service.relevant(&scope, &[]), Seq(8));
    assert_eq!(
        service.relevant(&scope, &[main]),
        Seq(7),
        "the whole-source row counts"
    );
    assert_eq!(service.relevant(&scope, &[dev]), Seq(8));
    assert_eq!(service.relevant(&scope, &[main, dev]), Seq(8));
    let (other, other_key) = service.tokens("ci.runs", &Audience::project("p2"), Some("main"));
    assert_eq!(service.relevant(&other, &[other_key.unwrap()]), Seq(5));

    // Two entries (scope, key) per new project: the least recently updated entries of p1 go,
    // and misses answer the raised base.
    for p in ["p3", "p4"] {
        service
            .record_and_wait(draft(
                "ci.runs",
                Some(Audience::project(p)),
                Some("k"),
                None,
            ))
            .await
            .unwrap();
    }
    tailed(&service, 10).await;
    let (p4, k4) = service.tokens("ci.runs", &Audience::project("p4"), Some("k"));
    assert_eq!(service.relevant(&p4, &[k4.unwrap()]), Seq(10));
    assert_eq!(
        service.relevant(&other, &[]),
        Seq(7),
        "base rose to the evicted seq"
    );
    assert_eq!(
        service.relevant(&scope, &[dev]),
        Seq(8),
        "recent entries stay"
    );
}

#[tokio::test(start_paused = true)]
async fn failed_writes_retry_with_backoff_and_mark_sync_degraded_after_the_grace() {
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    store.fail.store(true, Ordering::SeqCst);
    let waiter = waiting_record(&service);
    let grace = Duration::from_millis(SyncLimits::DEFAULT.log_failure_grace());
    tokio::time::sleep(grace - Duration::from_secs(5)).await;
    assert!(!service.degraded());
    // 100 ms doubling to 5 s: 0.05, 0.15, 0.35, 0.75, 1.55, 3.15, 6.35, 11.35, 16.35, 21.35.
    assert_eq!(service.stats().append_failures, 10);
    service
        .record(draft("ci.runs", Some(p1()), Some("dev"), None))
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(service.degraded());
    assert!(store.rows().is_empty());

    store.fail.store(false, Ordering::SeqCst);
    let cursor = tokio::time::timeout(Duration::from_secs(6), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(cursor.seq, Seq(1));
    assert!(!service.degraded());
    tailed(&service, 2).await;
    assert_eq!(
        store.rows().len(),
        2,
        "drafts queued meanwhile are written too"
    );
}

/// Records a draft of `ci.runs` for `p1` and waits for its row, on a task of its own.
fn waiting_record(
    service: &SyncService,
) -> tokio::task::JoinHandle<Result<ui_sync::Cursor, SyncError>> {
    let service = service.clone();
    tokio::spawn(async move {
        service
            .record_and_wait(draft("ci.runs", Some(p1()), Some("main"), None))
            .await
    })
}

/// Advances the paused clock to `at` after `origin`.
async fn until(origin: Instant, at: Duration) {
    tokio::time::sleep_until(origin + at).await;
}

#[tokio::test(start_paused = true)]
async fn degraded_mode_starts_when_failures_are_thirty_seconds_old_and_ends_within_a_second_of_healing()
 {
    // Today's code turned degraded only at the first failed retry after the grace (31.35 s)
    // and, once degraded, retried every 5 s (healing seen 4–5 s late).
    let store = MemStore::new();
    let origin = Instant::now();
    let service = start(&store, SyncLimits::DEFAULT).await;
    store.fail.store(true, Ordering::SeqCst);
    service
        .record(draft("ci.runs", Some(p1()), Some("main"), None))
        .unwrap();
    // The window closes at 50 ms: the first failure of the streak.
    let first = Duration::from_millis(50);
    let grace = Duration::from_millis(SyncLimits::DEFAULT.log_failure_grace());
    until(origin, first + grace - Duration::from_millis(1)).await;
    assert!(!service.degraded(), "degraded before the grace");
    until(origin, first + grace).await;
    tokio::task::yield_now().await;
    assert!(
        service.degraded(),
        "not degraded the moment the failures are 30 s old"
    );
    // Heal at several odd moments: the 503s end within 1 s each time.
    let mut heal = first + grace + Duration::from_millis(3_333);
    for _ in 0..3 {
        until(origin, heal).await;
        assert!(service.degraded());
        store.fail.store(false, Ordering::SeqCst);
        until(origin, heal + Duration::from_millis(1_000)).await;
        tokio::task::yield_now().await;
        assert!(!service.degraded(), "still degraded 1 s after healing");
        // A new streak: degraded again exactly 30 s after its first failure.
        store.fail.store(true, Ordering::SeqCst);
        service
            .record(draft("ci.runs", Some(p1()), Some("dev"), None))
            .unwrap();
        let failed = Instant::now() + Duration::from_millis(50);
        tokio::time::sleep_until(failed + grace - Duration::from_millis(1)).await;
        assert!(!service.degraded());
        tokio::time::sleep_until(failed + grace).await;
        tokio::task::yield_now().await;
        assert!(service.degraded());
        heal = failed.duration_since(origin) + grace + Duration::from_millis(4_777);
    }
    store.fail.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!service.degraded());
}

#[tokio::test(start_paused = true)]
async fn an_append_that_never_answers_turns_sync_degraded_after_the_grace() {
    // Before: with no failure yet, the first attempt was awaited without a bound, so a
    // database that stopped answering held every waiter and never turned sync degraded.
    let (warnings, _guard) = Warnings::capture();
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    store.hang.store(true, Ordering::SeqCst);
    let origin = Instant::now();
    let waiter = waiting_record(&service);
    // The window closes at 50 ms and the append starts; the grace runs from there.
    let grace = Duration::from_millis(SyncLimits::DEFAULT.log_failure_grace());
    let started = Duration::from_millis(50);
    until(origin, started + grace - Duration::from_millis(1)).await;
    assert!(!service.degraded(), "degraded before the grace");
    until(origin, started + grace).await;
    tokio::task::yield_now().await;
    assert!(
        service.degraded(),
        "a hanging append never turned sync degraded"
    );
    assert_eq!(warnings.containing("has not answered"), 1);
    assert!(!waiter.is_finished());
    // The database answers again: the write lands and sync recovers.
    store.hang.store(false, Ordering::SeqCst);
    let cursor = tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(cursor.seq, Seq(1));
    assert!(!service.degraded());
    // Said once the append answers, though no attempt had failed.
    assert_eq!(warnings.infos_containing("succeed again"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_gives_up_an_append_that_never_answers() {
    // Before: once sync was degraded, the hanging append was awaited without watching the
    // stop, so `shutdown` (and a server's SIGTERM) waited for the database forever.
    let (warnings, _guard) = Warnings::capture();
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    store.hang.store(true, Ordering::SeqCst);
    let waiter = waiting_record(&service);
    let grace = Duration::from_millis(SyncLimits::DEFAULT.log_failure_grace());
    tokio::time::sleep(grace + Duration::from_secs(1)).await;
    assert!(service.degraded());
    tokio::time::timeout(Duration::from_millis(100), service.shutdown())
        .await
        .expect("shutdown waited for a database that does not answer");
    let said = tokio::time::timeout(Duration::from_millis(100), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(said.is_err(), "{said:?}");
    assert_eq!(warnings.containing("are lost"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_during_a_hanging_append_ends_when_sync_turns_degraded() {
    let (warnings, _guard) = Warnings::capture();
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    store.hang.store(true, Ordering::SeqCst);
    let waiter = waiting_record(&service);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!service.degraded());
    let origin = Instant::now();
    let grace = Duration::from_millis(SyncLimits::DEFAULT.log_failure_grace());
    tokio::time::timeout(grace, service.shutdown())
        .await
        .expect("shutdown outlived the grace");
    assert!(origin.elapsed() < grace);
    assert!(waiter.await.unwrap().is_err());
    assert_eq!(warnings.containing("are lost"), 1);
}

#[tokio::test(start_paused = true)]
async fn append_and_prune_failure_streaks_warn_exactly_once_each() {
    let (warnings, _guard) = Warnings::capture();
    let store = MemStore::new();
    let service = start(&store, limits(&[("pruneInterval", 1_000)])).await;
    for streak in 1..=2 {
        store.fail.store(true, Ordering::SeqCst);
        service
            .record(draft("ci.runs", Some(p1()), Some("main"), None))
            .unwrap();
        // Many failed retries, past the grace.
        tokio::time::sleep(Duration::from_secs(40)).await;
        assert!(service.stats().append_failures >= 10 * streak);
        assert_eq!(warnings.containing("append failed"), streak as usize);
        store.fail.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!service.degraded());
        assert_eq!(warnings.infos_containing("succeed again"), streak as usize);
    }
    assert_eq!(warnings.containing("append failed"), 2);

    // The pruner runs every second after its first minute (long past by now).
    assert_eq!(warnings.containing("pruning failed"), 0);
    for streak in 1..=2 {
        let before = service.stats().prune_failures;
        store.fail_prune.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5_500)).await;
        assert!(service.stats().prune_failures >= before + 5);
        assert_eq!(warnings.containing("pruning failed"), streak);
        store.fail_prune.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(2_500)).await;
    }
    assert_eq!(warnings.containing("pruning failed"), 2);
}

#[tokio::test(start_paused = true)]
async fn catch_up_reads_share_a_bounded_semaphore() {
    let store = MemStore::new();
    let service = start(&store, limits(&[("catchUpConcurrency", 1)])).await;
    let audiences = AudienceSet::new([p1()], 1_000);
    let cursor = format!("{}.0", service.epoch());
    store.hold_snapshots.store(true, Ordering::SeqCst);
    let first = tokio::spawn({
        let (service, audiences, cursor) = (service.clone(), audiences.clone(), cursor.clone());
        async move { service.read_after(Some(&cursor), &audiences).await }
    });
    tokio::task::yield_now().await;
    let started = Instant::now();
    assert_eq!(
        service.read_after(Some(&cursor), &audiences).await,
        Err(SyncError::Busy)
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(SyncLimits::DEFAULT.catch_up_wait())
    );
    store.hold_snapshots.store(false, Ordering::SeqCst);
    store.release.notify_one();
    assert!(matches!(first.await.unwrap(), Ok(ReadAfter::Events { .. })));
    assert!(matches!(
        service.read_after(Some(&cursor), &audiences).await,
        Ok(ReadAfter::Events { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn the_pruner_skips_the_first_minute_then_runs_every_interval() {
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert_eq!(store.prunes.load(Ordering::SeqCst), 0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(store.prunes.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(SyncLimits::DEFAULT.prune_interval())).await;
    assert_eq!(store.prunes.load(Ordering::SeqCst), 2);
    drop(service);
}

#[tokio::test(start_paused = true)]
async fn tailing_tells_whether_the_tailer_follows_the_log() {
    let (said, _guard) = Warnings::capture();
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    let draft_row = |_: &str| NewRow {
        source: "ci.runs".into(),
        audience: p1(),
        scope: service.tokens("ci.runs", &p1(), None).0,
        key: None,
        rs: None,
        op: Op::Change,
        n: 1,
        at_ms: 0,
    };
    assert!(service.tailing());
    store.append_elsewhere(draft_row("elsewhere"));
    tailed(&service, 1).await;
    assert!(service.tailing());
    assert_eq!(service.stats().tailed, 1);
    // The log cannot be read: the next look fails, and the service says so.
    store.fail_tail.store(true, Ordering::SeqCst);
    store.append_elsewhere(draft_row("unseen"));
    service.appended();
    tokio::time::sleep(Duration::from_millis(SyncLimits::DEFAULT.postgres_tick())).await;
    assert!(!service.tailing());
    assert!(service.stats().tail_failures >= 1);
    assert_eq!(said.containing("tail failed"), 1);
    // Readable again: the next look catches up, and says so once.
    store.fail_tail.store(false, Ordering::SeqCst);
    tailed(&service, 2).await;
    assert!(service.tailing());
    assert_eq!(service.stats().tailed, 2);
    assert_eq!(said.infos_containing("tail succeeds again"), 1);
    // A stopped service does not tail.
    service.shutdown().await;
    assert!(!service.tailing());
}

#[tokio::test(start_paused = true)]
async fn shutdown_writes_queued_drafts_and_later_records_fail() {
    let store = MemStore::new();
    let service = start(&store, SyncLimits::DEFAULT).await;
    service
        .record(draft("ci.runs", Some(p1()), Some("main"), None))
        .unwrap();
    service.shutdown().await;
    assert_eq!(store.rows().len(), 1);
    assert_eq!(
        service.record(draft("ci.runs", Some(p1()), None, None)),
        Err(SyncError::Closed)
    );
}

// ---- The same service on the real SQLite log (real time, bounded waits). ----

#[tokio::test]
async fn sqlite_end_to_end_record_tail_and_catch_up_per_audience() {
    let store = Arc::new(SqliteStore::open_temp().await.unwrap());
    let service = SyncService::start(store.clone(), SyncLimits::DEFAULT, [])
        .await
        .unwrap();
    let mut hub = service.subscribe();
    let start = service.head();
    let (a, b) = (Audience::user("a"), Audience::user("b"));
    let for_a = service
        .record_and_wait(draft(
            "host.drafts",
            Some(a.clone()),
            Some("d1"),
            Some("p-a"),
        ))
        .await
        .unwrap();
    let for_b = service
        .record_and_wait(draft("host.drafts", Some(b.clone()), Some("d1"), None))
        .await
        .unwrap();
    assert!(for_a.seq < for_b.seq);

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let batch = tokio::time::timeout(Duration::from_secs(5), hub.recv())
            .await
            .expect("the tailer publishes local commits")
            .unwrap();
        seen.extend(batch.rows.iter().map(|r| r.seq));
    }
    assert_eq!(seen, vec![for_a.seq, for_b.seq]);
    assert_eq!(service.head(), for_b);

    let b_set = AudienceSet::new([b.clone()], 1_000);
    let answer = service
        .read_after(Some(&start.to_string()), &b_set)
        .await
        .unwrap();
    let ReadAfter::Events { cursor, events } = answer else {
        panic!("no reset expected");
    };
    assert_eq!(cursor, for_b);
    let seqs: HashSet<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, HashSet::from([for_b.seq.0]), "B never sees A's event");
    assert_eq!(
        events[0].scope,
        service.tokens("host.drafts", &b, None).0.to_hex()
    );
    service.shutdown().await;
}
