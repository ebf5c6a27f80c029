//! `cargo xtask`: the project's automation, run from any directory of the workspace.
//!
//! - `cargo xtask ci` — everything CI checks: formatting, clippy with warnings denied, every
//!   test, the docs with warnings denied, and a build of the benches and fuzz targets.
//! - `cargo xtask bench [ARGS]` — the criterion benchmarks (`cargo bench -p benches`).
//!
//! Each step prints the command it runs; the first failing step stops the run with a
//! non-zero exit code.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(&root),
        Some("bench") => bench(&root, &args[1..]),
        _ => {
            eprintln!("usage: cargo xtask <ci | bench [criterion args]>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(step) => {
            eprintln!("\nxtask: FAILED at step: {step}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// One command of a run: a label, the program and its arguments, extra environment.
struct Step<'a> {
    label: &'a str,
    program: &'a str,
    args: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
}

fn run(root: &Path, step: &Step<'_>) -> Result<(), String> {
    let shown: Vec<String> = step
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .chain(std::iter::once(step.program.to_owned()))
        .chain(step.args.iter().map(|a| (*a).to_owned()))
        .collect();
    println!("\n==> [{}] {}", step.label, shown.join(" "));
    let started = Instant::now();
    let status = Command::new(step.program)
        .args(step.args)
        .envs(step.env.iter().copied())
        .current_dir(root)
        .status()
        .map_err(|e| format!("{}: cannot start {}: {e}", step.label, step.program))?;
    println!(
        "<== [{}] {} in {:.1}s",
        step.label,
        if status.success() { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} ({})", step.label, shown.join(" ")))
    }
}

fn ci(root: &Path) -> Result<(), String> {
    let started = Instant::now();
    let steps = [
        Step {
            label: "fmt",
            program: "cargo",
            args: &["fmt", "--all", "--check"],
            env: &[],
        },
        Step {
            label: "clippy",
            program: "cargo",
            args: &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            env: &[],
        },
        Step {
            label: "test",
            program: "cargo",
            args: &["test", "--workspace", "--all-targets"],
            env: &[("INSTA_UPDATE", "no")],
        },
        Step {
            label: "doctest",
            program: "cargo",
            args: &["test", "--workspace", "--doc"],
            env: &[],
        },
        Step {
            label: "doc",
            program: "cargo",
            args: &["doc", "--workspace", "--no-deps"],
            env: &[("RUSTDOCFLAGS", "-D warnings")],
        },
    ];
    for step in &steps {
        run(root, step)?;
    }
    if root.join("fuzz/Cargo.toml").exists() {
        run(
            root,
            &Step {
                label: "fuzz-build",
                program: "cargo",
                args: &["check", "--manifest-path", "fuzz/Cargo.toml"],
                env: &[],
            },
        )?;
    }
    println!(
        "\nxtask ci: all steps passed in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn bench(root: &Path, extra: &[String]) -> Result<(), String> {
    let mut args = vec!["bench", "--workspace"];
    if !extra.is_empty() {
        args.push("--");
        args.extend(extra.iter().map(String::as_str));
    }
    run(
        root,
        &Step {
            label: "bench",
            program: "cargo",
            args: &args,
            env: &[],
        },
    )
}
