//! A writer process killed with SIGKILL in the middle of a burst (`sync.md` §1 goal 4,
//! §3.6): every event it reported as committed is in the log, every batch is all or
//! nothing, and a client that resumes with its cursor sees no event twice and misses none.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ui_core::SyncLimits;
use ui_sync::{
    Audience, AudienceSet, NewRow, Op, ReadAfter, RequestSource, Seq, SqliteStore, SyncService,
    SyncStore,
};

/// Selects the child's role.
const ROLE: &str = "UI_SYNC_TEST_ROLE";
/// The log file the child opens.
const DB: &str = "UI_SYNC_TEST_DB";
const TEST: &str = "a_writer_killed_mid_burst_loses_no_committed_event";
/// Rows per appended transaction.
const BATCH: u64 = 5;
/// Committed rows the parent waits for before it kills the writer.
const KILL_AFTER: usize = 500;
/// How long the child writes if nobody kills it.
const CHILD_LIMIT: Duration = Duration::from_secs(30);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn p1() -> Audience {
    Audience::project("p1")
}

/// The child: batches of `BATCH` rows, one transaction each, as fast as a short pause
/// allows; prints each batch's seqs after its commit.
async fn burst() {
    let path = std::env::var(DB).expect("the log path");
    let store = SqliteStore::open(&path).await.unwrap();
    let salt = store.meta().salt.clone();
    let started = std::time::Instant::now();
    let mut batch = 0u64;
    while started.elapsed() < CHILD_LIMIT {
        let rows = (0..BATCH)
            .map(|j| {
                let key = format!("k{}", batch * BATCH + j);
                NewRow {
                    source: "ci.runs".into(),
                    audience: p1(),
                    scope: salt.scope("ci.runs", &p1()),
                    key: Some(salt.key("ci.runs", &p1(), &key)),
                    rs: RequestSource::parse(&format!("script:b{batch}")),
                    op: Op::Change,
                    n: 1,
                    at_ms: now_ms(),
                }
            })
            .collect();
        let seqs = store.append(rows).await.unwrap();
        println!("committed {} {}", seqs[0], seqs[seqs.len() - 1]);
        batch += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Kills the child if the test fails before it does.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One catch-up read of the client; its events' seqs are appended to `seen`.
async fn poll(service: &SyncService, cursor: &mut String, seen: &mut Vec<u64>) -> usize {
    let audiences = AudienceSet::new([p1()], 1_000);
    match service.read_after(Some(cursor), &audiences).await.unwrap() {
        ReadAfter::Events {
            cursor: next,
            events,
        } => {
            *cursor = next.to_string();
            seen.extend(events.iter().map(|e| e.seq));
            events.len()
        }
        ReadAfter::Reset { reason, .. } => panic!("unexpected reset {reason:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_burst_loses_no_committed_event() {
    if std::env::var(ROLE).as_deref() == Ok("burst") {
        burst().await;
        return;
    }
    let store = Arc::new(SqliteStore::open_temp().await.unwrap());
    let service = SyncService::start(store.clone(), SyncLimits::DEFAULT, [])
        .await
        .unwrap();
    let start = service.head().seq;
    let mut cursor = service
        .read_after(None, &AudienceSet::new([p1()], 1_000))
        .await
        .unwrap()
        .cursor()
        .to_string();
    let mut seen = Vec::new();

    let mut child = Reap(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env(ROLE, "burst")
            .env(DB, store.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest may print `test … ... ` before the first line.
            if let Some((_, rest)) = line.split_once("committed ") {
                let (a, b) = rest.split_once(' ').unwrap();
                let _ = tx.send((a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()));
            }
        }
    });

    let mut committed: Vec<u64> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut batches = 0;
    while committed.len() < KILL_AFTER {
        let (a, b) = tokio::time::timeout_at(deadline, lines.recv())
            .await
            .expect("the writer commits")
            .expect("the writer is running");
        committed.extend(a..=b);
        batches += 1;
        if batches % 10 == 0 {
            // The client keeps up while the burst runs.
            poll(&service, &mut cursor, &mut seen).await;
        }
    }
    child.0.kill().unwrap(); // SIGKILL on Unix
    let status = child.0.wait().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "killed mid-burst, not finished: {status}"
        );
    }
    assert!(!status.success());
    // Lines the child printed before it died are still in the pipe.
    while let Some((a, b)) = lines.recv().await {
        committed.extend(a..=b);
    }

    // The client resumes with its cursor.
    while poll(&service, &mut cursor, &mut seen).await > 0 {}

    let log = store.tail(start, usize::MAX).await.unwrap();
    let logged: HashSet<u64> = log.iter().map(|r| r.seq.0).collect();
    let missing: Vec<u64> = committed
        .iter()
        .copied()
        .filter(|s| !logged.contains(s))
        .collect();
    assert!(missing.is_empty(), "committed but lost: {missing:?}");
    assert!(log.len() >= committed.len());

    // Each transaction is all or nothing: whole batches of contiguous seqs.
    let mut by_batch: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for row in &log {
        let rs = row.row.rs.as_ref().expect("every row names its batch");
        by_batch
            .entry(rs.as_str().to_owned())
            .or_default()
            .push(row.seq.0);
    }
    for (batch, seqs) in &by_batch {
        assert_eq!(seqs.len() as u64, BATCH, "{batch}");
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{batch}");
    }

    // No event twice, none missed.
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "an event was delivered twice"
    );
    let all: Vec<u64> = log.iter().map(|r| r.seq.0).collect();
    assert_eq!(seen, all);
    assert_eq!(
        cursor,
        format!("{}.{}", service.epoch(), store.head().await.unwrap()),
        "the resumed client is at the head"
    );

    // The killed writer left no lock behind.
    let more = store
        .append(vec![NewRow {
            source: "ci.runs".into(),
            audience: p1(),
            scope: store.meta().salt.scope("ci.runs", &p1()),
            key: None,
            rs: None,
            op: Op::Change,
            n: 1,
            at_ms: now_ms(),
        }])
        .await
        .unwrap();
    assert_eq!(more, vec![Seq(all.last().unwrap() + 1)]);
}
