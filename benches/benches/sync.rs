//! Change-feed bench (`sync.md`): appends per second on the SQLite log with coalescing off,
//! and the fan-out of one event to 10,000 hub subscribers.
//!
//! | bench (`group/name`) | what one iteration does | target |
//! | --- | --- | --- |
//! | `sync_append/store_batch_1000` | one `BEGIN IMMEDIATE` transaction of 1,000 rows | ≥ 20,000 rows/s |
//! | `sync_append/store_single` | one transaction of one row | — |
//! | `sync_append/record_and_wait_1000` | 1,000 concurrent `record_and_wait` of distinct keys (nothing merges; window 1 ms) | ≥ 20,000 events/s |
//! | `sync_fanout/record_to_last_of_10000` | `record` → the 10,000th hub receiver has the batch | < 100 ms |
//! | `sync_fanout/publish_to_last_of_10000` | tailer publishes → the 10,000th receiver has it | < 100 ms |
//!
//! Everything is set up (files, services, subscriber tasks) before anything is timed.

// mimalloc, the allocator the binary ships with (set by the benches library).
use benches as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_main};
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use ui_core::SyncLimits;
use ui_sync::{Audience, ChangeDraft, NewRow, Op, SqliteStore, SyncService, SyncStore};

const ROWS: usize = 1_000;
const SUBSCRIBERS: usize = 10_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn rows(store: &SqliteStore, count: usize) -> Vec<NewRow> {
    let salt = &store.meta().salt;
    let p = Audience::project("bench");
    (0..count)
        .map(|i| NewRow {
            source: "ci.runs".into(),
            audience: p.clone(),
            scope: salt.scope("ci.runs", &p),
            key: Some(salt.key("ci.runs", &p, &format!("k{i}"))),
            rs: None,
            op: Op::Change,
            n: 1,
            at_ms: 0,
        })
        .collect()
}

fn draft(i: usize) -> ChangeDraft {
    ChangeDraft {
        source: "ci.runs".into(),
        audience: Some(Audience::project("bench")),
        key: Some(format!("k{i}")),
        rs: None,
    }
}

/// Coalescing off: a 1 ms window (the smallest) and distinct keys, so no draft merges.
fn no_coalescing() -> SyncLimits {
    SyncLimits::DEFAULT
        .with("appenderWindow", 1)
        .expect("a valid limit")
}

fn append(c: &mut Criterion) {
    let rt = runtime();
    let store = Arc::new(rt.block_on(SqliteStore::open_temp()).expect("a temp log"));
    let batch = rows(&store, ROWS);
    let single = rows(&store, 1);
    let service = rt
        .block_on(SyncService::start(store.clone(), no_coalescing(), []))
        .expect("the service");

    let mut group = c.benchmark_group("sync_append");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("store_batch_1000", |b| {
        b.iter_batched(
            || batch.clone(),
            |rows| rt.block_on(store.append(rows)).expect("append"),
            BatchSize::SmallInput,
        );
    });
    group.bench_function("record_and_wait_1000", |b| {
        b.iter(|| {
            rt.block_on(async {
                let waits: Vec<_> = (0..ROWS)
                    .map(|i| {
                        let service = service.clone();
                        tokio::spawn(async move { service.record_and_wait(draft(i)).await })
                    })
                    .collect();
                for wait in waits {
                    wait.await.expect("task").expect("recorded");
                }
            });
        });
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("store_single", |b| {
        b.iter_batched(
            || single.clone(),
            |rows| rt.block_on(store.append(rows)).expect("append"),
            BatchSize::SmallInput,
        );
    });
    group.finish();
    let merged = service.stats().merged;
    assert_eq!(merged, 0, "coalescing was off");
    rt.block_on(service.shutdown());
}

/// 10,000 subscriber tasks; the last one to receive a batch stamps the time.
struct Fanout {
    left: Arc<AtomicUsize>,
    last: Arc<Mutex<Option<Instant>>>,
    done: Arc<Notify>,
}

fn fanout(c: &mut Criterion) {
    let rt = runtime();
    let store = Arc::new(rt.block_on(SqliteStore::open_temp()).expect("a temp log"));
    let service = rt
        .block_on(SyncService::start(store, no_coalescing(), []))
        .expect("the service");
    let f = Fanout {
        left: Arc::new(AtomicUsize::new(0)),
        last: Arc::new(Mutex::new(None)),
        done: Arc::new(Notify::new()),
    };
    rt.block_on(async {
        for _ in 0..SUBSCRIBERS {
            let mut rx = service.subscribe();
            let (left, last, done) = (f.left.clone(), f.last.clone(), f.done.clone());
            tokio::spawn(async move {
                while rx.recv().await.is_ok() {
                    if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                        *last.lock().expect("lock") = Some(Instant::now());
                        done.notify_one();
                    }
                }
            });
        }
    });
    // Runs one event through and answers (recorded at, published at, last received at).
    let once = |i: usize| -> (Instant, Instant, Instant) {
        rt.block_on(async {
            f.left.store(SUBSCRIBERS, Ordering::Release);
            let mut head = service.head_watch();
            head.borrow_and_update();
            let recorded = Instant::now();
            service.record(draft(i)).expect("recorded");
            head.changed().await.expect("the tailer runs");
            let published = Instant::now();
            tokio::time::timeout(Duration::from_secs(10), f.done.notified())
                .await
                .expect("every subscriber receives the batch");
            let last = f.last.lock().expect("lock").take().expect("stamped");
            (recorded, published, last)
        })
    };
    let (recorded, _, last) = once(0);
    eprintln!(
        "sync_fanout: one event to {SUBSCRIBERS} subscribers in {:?} (record → last)",
        last - recorded
    );

    let mut group = c.benchmark_group("sync_fanout");
    group.sample_size(20);
    let mut n = 1;
    group.bench_function("record_to_last_of_10000", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    n += 1;
                    let (recorded, _, last) = once(n);
                    last - recorded
                })
                .sum()
        });
    });
    group.bench_function("publish_to_last_of_10000", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    n += 1;
                    let (_, published, last) = once(n);
                    last.saturating_duration_since(published)
                })
                .sum()
        });
    });
    group.finish();
    rt.block_on(service.shutdown());
}

/// The benches of this file with criterion configured from the command line (what
/// `criterion_group!` writes, by hand so that the function is documented).
fn sync() {
    let mut criterion = Criterion::default().configure_from_args();
    append(&mut criterion);
    fanout(&mut criterion);
}

criterion_main!(sync);
