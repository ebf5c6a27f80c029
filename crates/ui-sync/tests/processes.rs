//! Two OS processes share one SQLite log (`sync.md` §6.2): the test re-executes its own
//! binary as a writer, and the service in this process sees the writer's events, in order,
//! through `PRAGMA data_version` alone (the safety tick is pushed out of reach).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ui_core::SyncLimits;
use ui_sync::{
    Audience, AudienceSet, ChangeDraft, Cursor, ReadAfter, SqliteStore, SyncService, SyncStore,
};

/// Selects the child's role.
const ROLE: &str = "UI_SYNC_TEST_ROLE";
/// The log file the child opens.
const DB: &str = "UI_SYNC_TEST_DB";
const EVENTS: usize = 40;
const TEST: &str = "another_process_writes_reach_this_process_in_order";

fn draft(i: usize) -> ChangeDraft {
    ChangeDraft {
        source: "ci.runs".into(),
        audience: Some(Audience::project("p1")),
        key: Some(format!("k{i}")),
        rs: None,
    }
}

/// The child: its own service on the same file, one committed row per event.
async fn write_events() {
    let path = std::env::var(DB).expect("the log path");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let limits = SyncLimits::DEFAULT.with("appenderWindow", 5).unwrap();
    let service = SyncService::start(store, limits, []).await.unwrap();
    for i in 0..EVENTS {
        let cursor = service.record_and_wait(draft(i)).await.unwrap();
        println!("committed {cursor}");
        if i % 10 == 9 {
            // Spread the burst over several data_version checks.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    service.shutdown().await;
}

/// Kills the child if the test fails before it ends.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_writes_reach_this_process_in_order() {
    if std::env::var(ROLE).as_deref() == Ok("writer") {
        write_events().await;
        return;
    }
    let store = Arc::new(SqliteStore::open_temp().await.unwrap());
    let limits = SyncLimits::DEFAULT.with("postgresTick", 600_000).unwrap();
    let service = SyncService::start(store.clone(), limits, []).await.unwrap();
    let mut hub = service.subscribe();
    let start = service.head();

    let mut child = Reap(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env(ROLE, "writer")
            .env(DB, store.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let printed = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // libtest may print `test … ... ` before the first line.
            .filter_map(|l| l.split_once("committed ").map(|(_, c)| c.to_owned()))
            .collect::<Vec<_>>()
    });

    let p1 = Audience::project("p1");
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while received.len() < EVENTS {
        let batch = tokio::time::timeout_at(deadline, hub.recv())
            .await
            .unwrap_or_else(|_| panic!("only {} of {EVENTS} events arrived", received.len()))
            .unwrap();
        for row in &batch.rows {
            let i = received.len();
            assert_eq!(row.row.audience, p1);
            assert_eq!(
                (Some(row.row.scope), row.row.key),
                {
                    let (s, k) = service.tokens("ci.runs", &p1, Some(&format!("k{i}")));
                    (Some(s), k)
                },
                "event {i} arrives in the order it was written"
            );
            received.push(row.seq);
        }
    }
    assert!(received.windows(2).all(|w| w[0] < w[1]));

    let status = child.0.wait().unwrap();
    assert!(status.success());
    let printed: Vec<Cursor> = printed
        .join()
        .unwrap()
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(printed.len(), EVENTS);
    assert!(
        printed.iter().all(|c| c.epoch == service.epoch()),
        "one log, one epoch"
    );
    assert_eq!(printed.iter().map(|c| c.seq).collect::<Vec<_>>(), received);
    assert_eq!(service.head().seq, *received.last().unwrap());
    assert_eq!(store.head().await.unwrap(), *received.last().unwrap());

    // A page in this process catches up on the other process's events.
    let answer = service
        .read_after(Some(&start.to_string()), &AudienceSet::new([p1], 1_000))
        .await
        .unwrap();
    let ReadAfter::Events { events, .. } = answer else {
        panic!("no reset expected");
    };
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        received.iter().map(|s| s.0).collect::<Vec<_>>()
    );
}
