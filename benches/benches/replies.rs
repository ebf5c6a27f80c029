//! Streaming replies through the server: the CPU one whole reply costs when it arrives in
//! small deltas, against compiling every prefix from scratch.
//!
//! | bench (`reply_stream/…`) | one iteration |
//! | --- | --- |
//! | `server_deltas` | `streaming.txt` (20 KB, 10 blocks) sent to a real [`AppState`] (SQLite file in a temporary directory, change feed running) as an agent runtime in the same process sends it: `start_reply` (not timed), one `append_delta` per 5 characters (4,000 and more deltas), `finish_reply`; each delta compiles the preview, stores it and records the chat's change |
//! | `from_scratch` | the same prefixes each compiled by a fresh `UiCompiler` (no database), then the whole reply as final: what a server that recompiles the whole reply per delta spends on compiling alone |
//!
//! | `first_half`, `second_half` | the same replies as `server_deltas`, timing only the first or only the second half of the deltas: a server whose work per delta follows the delta spends about as much on each half (ratio about 1), one that rewrites the reply per delta three times as much on the second (the sum of `n` over the second half of `1..N` is three times that over the first) |
//!
//! All figures are process CPU time (user + system, all threads, from `/proc/self/stat`),
//! not wall-clock time, so they count the database's and the change feed's threads too and
//! not the time spent waiting for the machine's other work. A quadratic server shows as a
//! `server_deltas` many times `from_scratch`; one whose work per delta follows the delta
//! shows as a fraction of it. Each iteration is a whole reply in a chat of its own.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, criterion_main};
use tokio::runtime::Runtime;
use ui_compiler::{CompileOptions, UiCompiler};
use ui_server::{AppState, ServerConfig};

use benches::{CLOCK, input};

/// Characters per delta.
const DELTA_CHARS: usize = 5;

/// The deltas of `text`, [`DELTA_CHARS`] characters each.
fn deltas(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(DELTA_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

/// Clock ticks per second of `/proc/self/stat` (`USER_HZ`, 100 on Linux unless
/// `getconf CLK_TCK` says otherwise).
fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|&t| t > 0.0)
        .unwrap_or(100.0)
}

/// The CPU time this process has used (user + system, every thread, ended ones too).
fn process_cpu(ticks: f64) -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command's closing parenthesis start at field 3 (`state`);
    // `utime` and `stime` are fields 14 and 15.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields[11].parse().expect("utime");
    let stime: f64 = fields[12].parse().expect("stime");
    Duration::from_secs_f64((utime + stime) / ticks)
}

/// Which deltas of a reply an iteration times.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Timed {
    /// All of them, and finishing the reply.
    Whole,
    /// The first half of the deltas.
    FirstHalf,
    /// The second half of the deltas.
    SecondHalf,
}

/// A server state on a fresh database in a temporary directory.
struct Server {
    state: AppState,
    dir: std::path::PathBuf,
}

impl Server {
    fn open(runtime: &Runtime) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "uiblocks-replies-bench-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let config = ServerConfig::new(dir.join("app.db"));
        let state = runtime
            .block_on(AppState::open(config))
            .expect("the server's state");
        Server { state, dir }
    }

    /// One whole reply, delta by delta, in a chat of its own: its final text and the CPU
    /// time of the deltas `timed` names.
    async fn reply(&self, deltas: &[String], timed: Timed, ticks: f64) -> (String, Duration) {
        let state = &self.state;
        let chat = state
            .create_chat("alice", "web", "bench")
            .await
            .expect("a chat");
        let item = state.start_reply(&chat.id, "").await.expect("a reply");
        let half = deltas.len() / 2;
        let (from, to) = match timed {
            Timed::Whole => (0, deltas.len() + 1),
            Timed::FirstHalf => (0, half),
            Timed::SecondHalf => (half, deltas.len()),
        };
        let mut start = process_cpu(ticks);
        let mut cpu = Duration::ZERO;
        for (n, delta) in deltas.iter().enumerate() {
            if n == from {
                start = process_cpu(ticks);
            }
            if n == to {
                cpu = process_cpu(ticks) - start;
            }
            state
                .append_delta(&chat.id, &item.id, delta)
                .await
                .expect("the delta is taken");
        }
        if to == deltas.len() {
            cpu = process_cpu(ticks) - start;
        }
        let done = state
            .finish_reply(&chat.id, &item.id, None, false)
            .await
            .expect("the reply finishes");
        if timed == Timed::Whole {
            cpu = process_cpu(ticks) - start;
        }
        assert_eq!(done.ui.len(), 10, "streaming.txt holds 10 blocks");
        (done.text, cpu)
    }

    fn stop(self, runtime: &Runtime) {
        runtime.block_on(self.state.sync().shutdown());
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!(
                "replies bench: could not remove {}: {e}",
                self.dir.display()
            );
        }
    }
}

/// Compiles every prefix of `deltas` with a fresh compiler, then the whole text as final.
fn from_scratch(deltas: &[String]) -> usize {
    let mut options = CompileOptions {
        is_final: false,
        clock: Some(&CLOCK),
        ..CompileOptions::default()
    };
    let mut text = String::new();
    let mut blocks = 0;
    for delta in deltas {
        text.push_str(delta);
        blocks = UiCompiler::new().compile(&text, &options).len();
    }
    options.is_final = true;
    blocks + UiCompiler::new().compile(&text, &options).len()
}

fn replies(c: &mut Criterion) {
    let text = input("streaming.txt");
    let deltas = Arc::new(deltas(&text));
    let ticks = ticks_per_second();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = Server::open(&runtime);
    // Checked (and timed once, for a quick look) before criterion runs.
    let (served_text, served) = runtime.block_on(server.reply(&deltas, Timed::Whole, ticks));
    assert_eq!(served_text, text);
    let start = process_cpu(ticks);
    assert_eq!(from_scratch(&deltas), 20);
    let scratch = process_cpu(ticks) - start;
    eprintln!(
        "reply_stream: {} deltas; first reply through the server {:.3} s CPU, \
         every prefix from scratch {:.3} s CPU",
        deltas.len(),
        served.as_secs_f64(),
        scratch.as_secs_f64()
    );

    let mut group = c.benchmark_group("reply_stream");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1));
    for (name, timed) in [
        ("server_deltas", Timed::Whole),
        ("first_half", Timed::FirstHalf),
        ("second_half", Timed::SecondHalf),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                (0..iterations)
                    .map(|_| runtime.block_on(server.reply(&deltas, timed, ticks)).1)
                    .sum()
            })
        });
    }
    group.bench_function("from_scratch", |b| {
        b.iter_custom(|iterations| {
            let start = process_cpu(ticks);
            for _ in 0..iterations {
                std::hint::black_box(from_scratch(&deltas));
            }
            process_cpu(ticks) - start
        })
    });
    group.finish();
    server.stop(&runtime);
}

/// The benches of this file with criterion configured from the command line.
fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    replies(&mut criterion);
}

criterion_main!(benches);
