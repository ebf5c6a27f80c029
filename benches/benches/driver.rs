//! Driver bench: the real `uiblocks driver` binary over a pipe, as a host in another
//! language drives it. Each iteration writes one request line (`compile` of `stats100`,
//! `compile` of `table1000` with raised limits, `stream` of `streaming.txt` with step 64)
//! and reads its one answer line, so a request's time includes the JSON in and out, the
//! pipe and the compile. The reference driver's figures (`shared/bench/README.md`, measured
//! side by side on 2026-12-01) are 1.25, 13.8 and 59.6 ms per request.
//!
//! The binary is `$UIBLOCKS_BIN`, else the `uiblocks` of the profile this bench was built
//! in (`cargo xtask bench` builds the release one first; `cargo test --all-targets` builds
//! the debug one and runs this bench once). Each answer is checked before anything is
//! timed.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use criterion::{Criterion, criterion_main};
use serde_json::{Value as Json, json};

use benches::input;

/// A running `uiblocks driver` with its pipes.
struct Driver {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Driver {
    fn start() -> Driver {
        let bin = std::env::var_os("UIBLOCKS_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(binary_beside_this_one);
        let mut child = Command::new(&bin)
            .arg("driver")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}); build it with `cargo build --release -p ui-cli` \
                     or set UIBLOCKS_BIN",
                    bin.display()
                )
            });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
        Driver {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    /// Sends one request line and reads the answer line (left in `self.line`).
    fn ask(&mut self, request: &[u8]) -> usize {
        self.stdin.write_all(request).expect("the driver reads");
        self.stdin.flush().expect("the driver reads");
        self.line.clear();
        self.stdout
            .read_line(&mut self.line)
            .expect("the driver answers")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Err(e) = self.child.kill() {
            eprintln!("driver bench: could not stop the driver: {e}");
        }
        if let Err(e) = self.child.wait() {
            eprintln!("driver bench: could not reap the driver: {e}");
        }
    }
}

/// The `uiblocks` binary of the profile this bench was built in: this executable is
/// `<target>/<profile>/deps/driver-…`, the binary `<target>/<profile>/uiblocks` (the
/// release one under `cargo bench`, which `cargo xtask bench` builds first; the debug one
/// when `cargo test --all-targets` runs this bench once as a test).
fn binary_beside_this_one() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench knows its own path");
    let profile = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("the bench runs from <target>/<profile>/deps");
    profile.join(format!("uiblocks{}", std::env::consts::EXE_SUFFIX))
}

/// A request as one line with its line feed.
fn line(request: &Json) -> Vec<u8> {
    let mut out = serde_json::to_vec(request).expect("a request serializes");
    out.push(b'\n');
    out
}

fn raised() -> Json {
    json!({
        "characters": 1 << 20, "nodes": 1 << 20, "stringLength": 1 << 20,
        "steps": 1 << 28, "iterations": 1 << 24,
    })
}

/// A workload: its bench name, its request line and the check of its answer.
type Workload = (&'static str, Vec<u8>, fn(&Json));

/// The three requests with a check of each answer.
fn workloads() -> Vec<Workload> {
    let stats = input("stats100.txt");
    let table = input("table1000.txt");
    let streaming = input("streaming.txt");
    vec![
        (
            "stats100",
            line(&json!({"op": "compile", "id": "bench", "block": true, "text": stats})),
            |a| {
                let nodes = a["blocks"][0]["nodes"].as_array().expect("nodes");
                let mut count = 0;
                fn walk(n: &Json, count: &mut usize) {
                    *count += 1;
                    for c in n["children"].as_array().into_iter().flatten() {
                        walk(c, count);
                    }
                }
                nodes.iter().for_each(|n| walk(n, &mut count));
                assert_eq!(count, 103, "stats100 compiles to 103 nodes");
            },
        ),
        (
            "table1000_raised",
            line(
                &json!({"op": "compile", "id": "bench", "block": true, "text": table,
                "limits": raised()}),
            ),
            |a| {
                let block = &a["blocks"][0];
                assert_eq!(
                    block["diagnostics"],
                    json!([]),
                    "table1000 raised compiles clean"
                );
            },
        ),
        (
            "streaming",
            line(&json!({"op": "stream", "id": "bench", "step": 64, "text": streaming})),
            |a| {
                assert_eq!(a["prefixes"].as_array().expect("prefixes").len(), 320);
                assert_eq!(a["final"].as_array().expect("final").len(), 10);
            },
        ),
    ]
}

fn driver(c: &mut Criterion) {
    let mut driver = Driver::start();
    let mut group = c.benchmark_group("driver");
    for (name, request, check) in workloads() {
        driver.ask(&request);
        let answer: Json = serde_json::from_str(&driver.line).expect("one JSON answer line");
        assert_eq!(
            answer["ok"],
            true,
            "{name}: {}",
            &driver.line[..200.min(driver.line.len())]
        );
        check(&answer);
        group.bench_function(name, |b| b.iter(|| driver.ask(&request)));
    }
    group.finish();
}

/// The benches of this file with criterion configured from the command line.
fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    driver(&mut criterion);
}

criterion_main!(benches);
