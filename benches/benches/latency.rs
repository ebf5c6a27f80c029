//! Write-to-delivery latency of the change feed (a bounded benchmark, not criterion):
//! `record` of one change in a process with an SQLite log, until a hub subscriber (what a
//! stream connection reads) has it. Prints p50/p99 over 1,000 writes, each after the
//! previous one was delivered, with the 50 ms coalescing window on and off.

#![allow(missing_docs)]

// mimalloc, the allocator the binary ships with (set by the benches library).
use benches as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ui_core::SyncLimits;
use ui_sync::{Audience, ChangeDraft, SqliteStore, SyncService};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn run(window_ms: u64, writes: usize) -> (Duration, Duration) {
    let store = Arc::new(SqliteStore::open_temp().await.expect("a temp log"));
    let limits = SyncLimits::DEFAULT
        .with("appenderWindow", window_ms)
        .expect("a valid window");
    let service = SyncService::start(store, limits, [])
        .await
        .expect("service");
    let mut hub = service.subscribe();
    let mut samples = Vec::with_capacity(writes);
    for i in 0..writes {
        let started = Instant::now();
        service
            .record(ChangeDraft {
                source: "ci.runs".into(),
                audience: Some(Audience::project("web")),
                key: Some(format!("branch:b{i}")),
                rs: None,
            })
            .expect("recorded");
        let batch = hub.recv().await.expect("delivered");
        assert!(!batch.rows.is_empty());
        samples.push(started.elapsed());
    }
    service.shutdown().await;
    samples.sort();
    (percentile(&samples, 0.50), percentile(&samples, 0.99))
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    for window in [1, 50] {
        let (p50, p99) = runtime.block_on(run(window, 1_000));
        println!(
            "sync/latency window {window:>2} ms: p50 {:.2} ms, p99 {:.2} ms (target p99 < 50 ms + window)",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
}
