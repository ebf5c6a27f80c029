//! Differential test against the reference implementation's outputs
//! (`tests/data/conformance`, `driver.md` "Comparing with the corpus").
//!
//! Every case is run through the driver exactly as the corpus README says; two responses
//! match when they are equal as JSON after removing `message`, `expressions`,
//! `expression`, `tag` and `op` at any depth. Every section of every case must match; the
//! per-section summary is a snapshot so drift shows in review. The same requests sent as
//! lines through `driver::run` (the process's own loop: one line buffer, one write per
//! answer) answer with exactly the bytes `serde_json` writes for `driver::handle`'s
//! answers, and so does `@uiblocks/core`'s `bin/driver.mjs` (the WebAssembly build, in
//! Node.js) when `cargo xtask wasm` has built it: byte for byte, so the corpus passes
//! through both drivers alike. `UI_CORE_DRIVER_REQUIRED=1` (CI) makes a missing build or
//! a missing `node` a failure instead of a skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json, json};

const OPS: [&str; 5] = ["evaluate", "links", "args", "choice", "fallback"];

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/conformance")
}

fn read_json(path: &Path) -> Json {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Removes the keys that are not compared, at any depth.
fn strip(v: &Json) -> Json {
    match v {
        Json::Object(m) => Json::Object(
            m.iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "message" | "expressions" | "expression" | "tag" | "op"
                    )
                })
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

/// The first difference between `ours` and `expected`, as a path and both values.
fn first_difference(ours: &Json, expected: &Json, path: &str) -> Option<String> {
    match (ours, expected) {
        (Json::Number(a), Json::Number(b)) => {
            (a.as_f64() != b.as_f64()).then(|| format!("{path}: {a} != {b}"))
        }
        (Json::Object(a), Json::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => first_difference(x, y, &format!("{path}.{k}")),
                (None, Some(y)) => Some(format!("{path}.{k}: missing, expected {y}")),
                (Some(x), None) => Some(format!("{path}.{k}: unexpected {x}")),
                (None, None) => None,
            })
        }
        (Json::Array(a), Json::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]"))),
        _ => (ours != expected).then(|| format!("{path}: {ours} != {expected}")),
    }
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

#[test]
fn corpus_matches_the_reference() {
    let dir = corpus();
    let hosts = read_json(&dir.join("hosts.json"))["querySchemas"].clone();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("corpus directory")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".md")?;
            (stem != "README").then(|| stem.to_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 50, "the corpus has {} cases", names.len());

    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut cases = Vec::new();
    let mut lines = String::new();
    let mut answers = String::new();
    for name in &names {
        let text = std::fs::read_to_string(dir.join(format!("{name}.md"))).unwrap();
        let expected = read_json(&dir.join(format!("{name}.expected.json")));
        let input_path = dir.join(format!("{name}.input.json"));
        let input = if input_path.exists() {
            read_json(&input_path)
        } else {
            json!({})
        };
        let mut base = Map::new();
        base.insert("text".into(), Json::String(text));
        base.insert("id".into(), json!("reply"));
        base.insert(
            "final".into(),
            input.get("final").cloned().unwrap_or(json!(true)),
        );
        base.insert("querySchemas".into(), hosts.clone());
        for key in ["fenceLanguage", "latestAttachment"] {
            if let Some(v) = input.get(key) {
                base.insert(key.into(), v.clone());
            }
        }
        let mut runs: Vec<(String, Json, &Json)> = Vec::new();
        let mut compile = base.clone();
        compile.insert("op".into(), json!("compile"));
        runs.push((
            "compile".into(),
            Json::Object(compile),
            &expected["compile"],
        ));
        for op in OPS {
            let mut request = base.clone();
            request.insert("op".into(), json!(op));
            runs.push((
                format!("default.{op}"),
                Json::Object(request.clone()),
                &expected["default"][op],
            ));
            if let Some(scenario) = expected.get("scenario") {
                for key in ["input", "queries", "press", "perBlock"] {
                    if let Some(v) = input.get(key) {
                        request.insert(key.into(), v.clone());
                    }
                }
                runs.push((
                    format!("scenario.{op}"),
                    Json::Object(request),
                    &scenario[op],
                ));
            }
        }
        let mut case_ok = true;
        for (section, request, expected) in runs {
            let ours = ui_cli::driver::handle(&request);
            lines.push_str(&format!("{request}\n"));
            answers.push_str(&format!("{ours}\n"));
            let tally = tallies.entry(section.clone()).or_default();
            match first_difference(&strip(&ours), &strip(expected), "") {
                None => tally.passed += 1,
                Some(diff) => {
                    tally.failed += 1;
                    case_ok = false;
                    failures.push(format!("{name} {section}: {diff}"));
                }
            }
        }
        cases.push(format!("{} {name}", if case_ok { "ok  " } else { "FAIL" }));
    }

    let mut summary = String::new();
    for (section, t) in &tallies {
        summary.push_str(&format!(
            "{section:<20} {} passed, {} failed\n",
            t.passed, t.failed
        ));
    }
    summary.push('\n');
    summary.push_str(&cases.join("\n"));
    summary.push('\n');
    insta::assert_snapshot!("conformance_summary", summary);
    let mut piped = Vec::new();
    ui_cli::driver::run(lines.as_bytes(), &mut piped).expect("the driver runs");
    let piped = String::from_utf8(piped).expect("the driver writes UTF-8");
    for (line, (ours, request)) in piped.lines().zip(answers.lines().zip(lines.lines())) {
        assert_eq!(
            line, ours,
            "driver::run and driver::handle differ on {request}"
        );
    }
    assert_eq!(piped.lines().count(), lines.lines().count());
    compare_core_driver(&lines, &answers);
    assert!(
        failures.is_empty(),
        "{} sections differ from the reference:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// How long the WebAssembly driver may take over the whole corpus.
const CORE_DRIVER_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Sends `lines` through `node packages/core/bin/driver.mjs` and holds its answers to
/// `answers` (the Rust driver's), line by line and byte for byte.
fn compare_core_driver(lines: &str, answers: &str) {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("packages/core/bin/driver.mjs");
    let built = root
        .join("packages/core/wasm/uiblocks_core_bg.wasm")
        .exists();
    let required = std::env::var("UI_CORE_DRIVER_REQUIRED").is_ok_and(|v| v == "1");
    let child = if built {
        Command::new("node")
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()
    } else {
        None
    };
    let Some(mut child) = child else {
        assert!(
            !required,
            "UI_CORE_DRIVER_REQUIRED: `node {}` cannot run (build it with `cargo xtask wasm`)",
            script.display()
        );
        eprintln!("skipping the @uiblocks/core driver: not built, or no node");
        return;
    };
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = lines.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the driver's status") {
            break status;
        }
        if started.elapsed() > CORE_DRIVER_LIMIT {
            child.kill().expect("the driver stops");
            panic!("the @uiblocks/core driver took over {CORE_DRIVER_LIMIT:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    writer
        .join()
        .expect("the writer")
        .expect("the requests are written");
    let out = reader
        .join()
        .expect("the reader")
        .expect("the answers are read");
    assert!(
        status.success(),
        "the @uiblocks/core driver failed: {status}"
    );
    for (i, (theirs, (ours, request))) in out
        .lines()
        .zip(answers.lines().zip(lines.lines()))
        .enumerate()
    {
        assert_eq!(
            theirs, ours,
            "line {i}: @uiblocks/core's driver and uiblocks driver differ on {request}"
        );
    }
    assert_eq!(out.lines().count(), answers.lines().count());
}
