//! The PostgreSQL log (`sync.md` §3.4, §3.6–§3.8, §6.3, §6.4) against a real database.
//!
//! Compiled with the `postgres` feature only; each test runs only when `UI_SYNC_PG` holds a
//! connection string (`cargo xtask ci` starts a throwaway cluster and sets it), otherwise it
//! prints "skipped: UI_SYNC_PG not set" and passes. Every test works in a fresh schema. The
//! scenarios shared with the SQLite log live in `common`.
#![cfg(feature = "postgres")]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tokio_postgres::NoTls;
use ui_core::SyncLimits;
use ui_sync::{
    Audience, Batch, ChangeDraft, PgStore, ResetReason, Retention, Seq, SyncService, SyncStore,
};

mod common;

use common::{HOUR_MS, cursor, events, now_ms, read, reset_reason, rows, set};

/// The connection string, or `None` (the test prints why it is skipped; with
/// `UI_PG_REQUIRED` set, as `cargo xtask ci` sets it, a missing one fails the test).
fn conninfo() -> Option<String> {
    let found = std::env::var("UI_SYNC_PG")
        .ok()
        .filter(|s| !s.trim().is_empty());
    if found.is_none() {
        assert!(
            std::env::var_os("UI_PG_REQUIRED").is_none(),
            "UI_PG_REQUIRED is set but UI_SYNC_PG is not"
        );
        eprintln!("skipped: UI_SYNC_PG not set");
    }
    found
}

/// A fresh schema of the test database, dropped by [`Db::finish`].
struct Db {
    conninfo: String,
    schema: String,
}

impl Db {
    fn new(conninfo: String, test: &str) -> Db {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "ui_sync_t_{test}_{}_{nanos}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Db { conninfo, schema }
    }

    async fn store(&self) -> PgStore {
        self.store_with(&SyncLimits::DEFAULT).await
    }

    async fn store_with(&self, limits: &SyncLimits) -> PgStore {
        PgStore::connect_with(&self.conninfo, Some(&self.schema), limits)
            .await
            .unwrap()
    }

    /// A plain connection (search path set to the schema) for what the store does not do.
    async fn admin(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.conninfo, NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.schema))
            .await
            .unwrap();
        client
    }

    async fn finish(self) {
        self.admin()
            .await
            .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.schema))
            .await
            .unwrap();
    }
}

fn limits(overrides: &[(&str, u64)]) -> SyncLimits {
    overrides
        .iter()
        .fold(SyncLimits::DEFAULT, |l, (k, v)| l.with(k, *v).unwrap())
}

fn draft(key: &str) -> ChangeDraft {
    ChangeDraft {
        source: "ci.runs".into(),
        audience: Some(Audience::project("p1")),
        key: Some(key.into()),
        rs: None,
    }
}

/// Runs a scenario shared with the SQLite tests on a store in a fresh schema named after
/// `test`.
async fn shared(test: &str, scenario: impl AsyncFnOnce(&dyn SyncStore)) {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, test);
    scenario(&db.store().await).await;
    db.finish().await;
}

/// The seqs the hub publishes until one reaches `upto`, checking batches arrive in order;
/// panics after `within`.
async fn hub_seqs(
    rx: &mut broadcast::Receiver<Arc<Batch>>,
    upto: u64,
    within: Duration,
) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + within;
    let mut seen: Vec<u64> = Vec::new();
    while seen.last().is_none_or(|s| *s < upto) {
        let batch = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("seq {upto} not published within {within:?}; saw {seen:?}"))
            .unwrap();
        seen.extend(batch.rows.iter().map(|r| r.seq.0));
    }
    seen
}

async fn wait_for_listener(store: &PgStore) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pid) = store.listen_pid() {
            return pid;
        }
        assert!(Instant::now() < deadline, "the listener never came up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Terminates the store's listener connection and waits until the backend is gone.
async fn kill_listener(db: &Db, store: &PgStore) -> i32 {
    let pid = wait_for_listener(store).await;
    let gone: bool = db
        .admin()
        .await
        .query_one("SELECT pg_terminate_backend($1, 5000)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(gone);
    pid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_log_and_see_each_others_writes_in_order() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, "share");
    // Both instances start at once on an empty schema: one creates the log, one joins it.
    let (a, b) = tokio::join!(db.store(), db.store());
    assert_eq!(a.meta(), b.meta(), "one log: one epoch and salt");
    wait_for_listener(&b).await;
    // A long tail tick: only the notification can wake the other instance in time.
    let limits = limits(&[("postgresTick", 60_000)]);
    let sa = SyncService::start(Arc::new(a), limits, []).await.unwrap();
    let sb = SyncService::start(Arc::new(b), limits, []).await.unwrap();
    let (mut on_a, mut on_b) = (sa.subscribe(), sb.subscribe());

    let first = sa.record_and_wait(draft("one")).await.unwrap();
    assert_eq!(first.seq, Seq(1));
    let started = Instant::now();
    assert_eq!(
        hub_seqs(&mut on_b, 1, Duration::from_secs(2)).await,
        vec![1]
    );
    let latency = started.elapsed();
    let second = sb.record_and_wait(draft("two")).await.unwrap();
    let third = sa.record_and_wait(draft("three")).await.unwrap();
    assert_eq!((second.seq, third.seq), (Seq(2), Seq(3)));
    assert_eq!(
        hub_seqs(&mut on_a, 3, Duration::from_secs(2)).await,
        vec![1, 2, 3]
    );
    assert_eq!(
        hub_seqs(&mut on_b, 3, Duration::from_secs(2)).await,
        vec![2, 3]
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    for rx in [&mut on_a, &mut on_b] {
        assert!(
            matches!(rx.try_recv(), Err(broadcast::error::TryRecvError::Empty)),
            "nothing twice"
        );
    }
    assert_eq!(sa.head().seq, Seq(3));
    assert_eq!(sb.head().seq, Seq(3));
    let seen_on_b = sb
        .read_after(
            Some(&format!("{}.0", sb.epoch())),
            &set(&[Audience::project("p1")]),
        )
        .await
        .unwrap();
    assert_eq!(
        events(seen_on_b).iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    eprintln!("cross-instance delivery via LISTEN: {latency:?}");
    sa.shutdown().await;
    sb.shutdown().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_listen_connection_loses_nothing_thanks_to_the_reconnect_catch_up() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, "relisten");
    // No tail tick to speak of: the catch-up after the reconnect must find the rows.
    let limits = limits(&[("postgresTick", 60_000), ("listenReconnectMin", 100)]);
    let a = db.store().await;
    let b = Arc::new(db.store_with(&limits).await);
    let sb = SyncService::start(b.clone(), limits, []).await.unwrap();
    let mut on_b = sb.subscribe();

    let old = kill_listener(&db, &b).await;
    let written = a
        .append(rows(&a, &Audience::project("p1"), 5))
        .await
        .unwrap();
    assert_eq!(written.last(), Some(&Seq(5)));
    assert_eq!(
        hub_seqs(&mut on_b, 5, Duration::from_secs(5)).await,
        vec![1, 2, 3, 4, 5]
    );
    let new = wait_for_listener(&b).await;
    assert_ne!(new, old, "a new listener connection");

    // Notifications work again after the reconnect.
    a.append(rows(&a, &Audience::project("p1"), 1))
        .await
        .unwrap();
    assert_eq!(
        hub_seqs(&mut on_b, 6, Duration::from_secs(2)).await,
        vec![6]
    );
    sb.shutdown().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_listener_down_the_tail_tick_finds_the_events() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, "tick");
    // The listener stays down for a minute; the default 2 s tick must do.
    let limits = limits(&[
        ("listenReconnectMin", 60_000),
        ("listenReconnectMax", 60_000),
    ]);
    let a = db.store().await;
    let b = Arc::new(db.store_with(&limits).await);
    let sb = SyncService::start(b.clone(), limits, []).await.unwrap();
    let mut on_b = sb.subscribe();
    kill_listener(&db, &b).await;
    assert_eq!(b.listen_pid(), None);

    a.append(rows(&a, &Audience::project("p1"), 3))
        .await
        .unwrap();
    let tick = Duration::from_millis(SyncLimits::DEFAULT.postgres_tick());
    assert_eq!(
        hub_seqs(&mut on_b, 3, tick + Duration::from_secs(2)).await,
        vec![1, 2, 3]
    );
    assert_eq!(b.listen_pid(), None, "found by the tick, not a reconnect");
    sb.shutdown().await;
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_elsewhere_answers_other_writers_and_reconnects_once() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, "changed");
    let (a, b) = (db.store().await, db.store().await);
    wait_for_listener(&a).await;
    assert!(
        a.changed_elsewhere().await.unwrap(),
        "a connect is a wake-up"
    );
    assert!(!a.changed_elsewhere().await.unwrap(), "once");

    let mut wakeups = a.wakeups();
    wakeups.borrow_and_update();
    b.append(rows(&b, &Audience::org("o"), 2)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), wakeups.changed())
        .await
        .unwrap()
        .unwrap();
    assert!(
        a.changed_elsewhere().await.unwrap(),
        "another writer's commit"
    );
    assert!(!a.changed_elsewhere().await.unwrap());

    a.append(rows(&a, &Audience::org("o"), 2)).await.unwrap();
    // Let the notification of a's own commit arrive; it is not a wake-up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !a.changed_elsewhere().await.unwrap(),
        "own commits do not wake"
    );
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_schema_is_a_new_log_and_reconnecting_keeps_epoch_salt_and_head() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo.clone(), "epoch");
    let first = db.store().await;
    assert_eq!(first.head().await.unwrap(), Seq(0));
    assert_eq!(
        first
            .append(rows(&first, &Audience::org("o"), 4))
            .await
            .unwrap(),
        vec![Seq(1), Seq(2), Seq(3), Seq(4)]
    );
    assert_eq!(first.append(Vec::new()).await.unwrap(), Vec::<Seq>::new());
    let again = db.store().await;
    assert_eq!(again.meta(), first.meta());
    assert_eq!(again.head().await.unwrap(), Seq(4));
    assert_eq!(again.schema(), Some(db.schema.as_str()));

    let other_db = Db::new(conninfo, "epoch_other");
    let other = other_db.store().await;
    assert_ne!(other.meta().epoch, first.meta().epoch);
    assert_ne!(other.meta().salt, first.meta().salt);
    assert_eq!(other.head().await.unwrap(), Seq(0));
    other_db.finish().await;

    // Near 2⁵² the log is re-created with a new epoch on open (§3.4): one `epoch` reset.
    db.admin()
        .await
        .batch_execute("UPDATE ui_sync_seq SET v = 4503599627370496")
        .await
        .unwrap();
    let renewed = db.store().await;
    assert_ne!(renewed.meta().epoch, first.meta().epoch);
    assert_eq!(renewed.head().await.unwrap(), Seq(0));
    let answer = read(
        &renewed,
        Some(&cursor(&first, 4)),
        &set(&[Audience::org("o")]),
    )
    .await;
    assert_eq!(reset_reason(&answer), Some(ResetReason::Epoch));
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reset_reason_answers_the_head() {
    shared("resets", common::every_reset_reason_answers_the_head).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_far_behind_counts_only_visible_rows_and_resets_at_2001() {
    shared(
        "behind",
        common::too_far_behind_counts_only_visible_rows_and_resets_at_2001,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_b_never_receives_user_a_events_and_the_cursor_still_moves() {
    shared("audience", common::user_b_never_receives_user_a_events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_collapses_by_source_scope_and_key() {
    shared(
        "collapse",
        common::catch_up_collapses_by_source_scope_and_key,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seq_order_equals_commit_order_under_concurrent_appends_from_two_stores() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, "order");
    let stores = [Arc::new(db.store().await), Arc::new(db.store().await)];
    let reader = db.store().await;
    const WRITERS_PER_STORE: usize = 3;
    const APPENDS: usize = 40;
    let mut writers = Vec::new();
    for (s, store) in stores.iter().enumerate() {
        for w in 0..WRITERS_PER_STORE {
            let store = store.clone();
            writers.push(tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..APPENDS {
                    let size = 1 + (i * 7 + w * 3 + s) % 13;
                    let seqs = store
                        .append(rows(&*store, &Audience::org("o"), size))
                        .await
                        .unwrap();
                    assert_eq!(seqs.len(), size);
                    assert!(
                        seqs.windows(2).all(|p| p[1].0 == p[0].0 + 1),
                        "one append is one contiguous range: {seqs:?}"
                    );
                    got.extend(seqs.iter().map(|s| s.0));
                }
                got
            }));
        }
    }
    // Meanwhile a reader tails: seqs have no gaps, so any gap it sees would be a row that
    // committed after a higher one.
    let mut last = 0u64;
    let mut reads = 0u32;
    let expected_total: u64 = (0..2)
        .flat_map(|s| {
            (0..WRITERS_PER_STORE)
                .flat_map(move |w| (0..APPENDS).map(move |i| (1 + (i * 7 + w * 3 + s) % 13) as u64))
        })
        .sum();
    let deadline = Instant::now() + Duration::from_secs(60);
    while last < expected_total {
        assert!(Instant::now() < deadline, "stuck at {last}");
        let head = reader.head().await.unwrap().0;
        for r in reader.tail(Seq(last), 1_000).await.unwrap() {
            assert_eq!(r.seq.0, last + 1, "a reader skipped a seq");
            last = r.seq.0;
        }
        assert!(
            last >= head,
            "every row up to the head is visible: {last} < {head}"
        );
        reads += 1;
    }
    let mut all = BTreeSet::new();
    for w in writers {
        for seq in w.await.unwrap() {
            assert!(all.insert(seq), "seq {seq} handed out twice");
        }
    }
    assert_eq!(all.len() as u64, expected_total);
    assert_eq!(all.last(), Some(&expected_total));
    assert_eq!(reader.head().await.unwrap(), Seq(expected_total));
    eprintln!("{expected_total} rows from 6 writers, {reads} concurrent tail reads");
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_an_old_prefix_only_under_the_advisory_lock() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, "prune");
    let store = db.store().await;
    let p = Audience::project("p1");
    let now = now_ms();
    let mut old = rows(&store, &p, 30);
    for r in &mut old {
        r.at_ms = now - 2 * HOUR_MS;
    }
    store.append(old).await.unwrap();
    store.append(rows(&store, &p, 10)).await.unwrap();
    let retention = Retention {
        age_ms: HOUR_MS,
        rows: 100_000,
        batch: 7,
        batches: 20,
    };

    // Another instance holds the prune lock: this run skips.
    let mut admin = db.admin().await;
    let tx = admin.transaction().await.unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('ui_sync.prune'), hashtext($1))",
        &[&db.schema],
    )
    .await
    .unwrap();
    let skipped = store.prune(now, retention).await.unwrap();
    assert_eq!(
        (skipped.deleted, skipped.pruned_through, skipped.rows),
        (0, Seq(0), 40)
    );
    tx.commit().await.unwrap();

    let report = store.prune(now, retention).await.unwrap();
    assert_eq!(
        (report.deleted, report.pruned_through, report.rows),
        (30, Seq(30), 10)
    );
    let left: Vec<u64> = store
        .tail(Seq(0), 100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq.0)
        .collect();
    assert_eq!(
        left,
        (31..=40).collect::<Vec<_>>(),
        "(pruned_through, head]"
    );
    let audiences = set(&[p]);
    let expired = read(&store, Some(&cursor(&store, 29)), &audiences).await;
    assert_eq!(reset_reason(&expired), Some(ResetReason::Expired));
    assert_eq!(
        events(read(&store, Some(&cursor(&store, 30)), &audiences).await).len(),
        10
    );

    // The row cap wins over young rows; each run does at most `batches` batches.
    let capped = Retention {
        age_ms: HOUR_MS,
        rows: 4,
        batch: 2,
        batches: 2,
    };
    let first = store.prune(now, capped).await.unwrap();
    assert_eq!(
        (first.deleted, first.pruned_through, first.rows),
        (4, Seq(34), 6)
    );
    // Two instances pruning at once never delete concurrently and never go past the cap.
    let other = db.store().await;
    let (x, y) = tokio::join!(store.prune(now, capped), other.prune(now, capped));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(x.deleted + y.deleted <= 2, "{x:?} {y:?}");
    let last = store.prune(now, capped).await.unwrap();
    assert_eq!((last.pruned_through, last.rows), (Seq(36), 4));
    assert_eq!(
        store.head().await.unwrap(),
        Seq(40),
        "pruning never lowers the head"
    );
    db.finish().await;
}

/// Prints the append rate of 1,000-row batches (advisory; no threshold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_rate_of_1000_row_batches() {
    let Some(conninfo) = conninfo() else { return };
    let db = Db::new(conninfo, "rate");
    let store = db.store().await;
    let batches = 20;
    let batch = rows(&store, &Audience::project("p1"), 1_000);
    store.append(batch.clone()).await.unwrap();
    let started = Instant::now();
    for _ in 0..batches {
        store.append(batch.clone()).await.unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(store.head().await.unwrap(), Seq(1_000 * (batches + 1)));
    eprintln!(
        "append rate: {batches} batches of 1,000 rows in {elapsed:?}: {:.0} rows/s",
        (batches * 1_000) as f64 / elapsed.as_secs_f64()
    );
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_ids_are_resume_points_over_the_postgres_log() {
    shared("frames", common::frame_ids_are_resume_points).await;
}

/// A server that takes the connection and never answers (a stuck proxy, a TLS handshake
/// that never ends): opening the log fails within the connect timeout. Before, only the
/// TCP connect was bounded, and `PgStore::connect` (and the listener) waited forever. No
/// database needed: the "server" is a loopback socket nobody reads.
#[tokio::test(start_paused = true)]
async fn a_server_that_never_answers_fails_the_connect_in_time() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    for tls in ["disable", "require"] {
        let conninfo = format!("host=127.0.0.1 port={port} user=u dbname=d sslmode={tls}");
        let opened = tokio::time::timeout(
            Duration::from_secs(60),
            ui_sync::PgStore::connect(&conninfo, None),
        )
        .await
        .expect("the connect hung past 60 s");
        let error = opened
            .expect_err("a silent server opens no log")
            .to_string();
        assert!(
            error.contains("no connection within 5000 ms"),
            "{tls}: {error}"
        );
    }
}
