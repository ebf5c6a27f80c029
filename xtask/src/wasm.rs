//! `cargo xtask wasm`: builds `@uiblocks/core`'s WebAssembly and its glue into
//! `packages/core/wasm/` from a clean clone, and checks their sizes.
//!
//! The steps: the `wasm32-unknown-unknown` target (`rustup target add` when missing);
//! wasm-bindgen-cli of exactly the version of the `wasm-bindgen` crate in `Cargo.lock`
//! (`cargo install` into `<target>/tools/` when missing); `cargo build -p ui-wasm` with the
//! `wasm` profile, paths remapped so the bytes do not depend on the checkout's place;
//! wasm-bindgen's `web` glue (ES modules, with the function that starts the module again
//! after a trap); binaryen's `wasm-opt` from the npm package `binaryen` (pinned, installed
//! into `<target>/tools/` when npm is there; without npm the unoptimised module is kept and
//! the run says so); then the sizes gzipped, which must stay within [`MAX_WASM_GZIP`] and
//! [`MAX_GLUE_GZIP`].

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Step, answers, run, target_dir};

/// The WebAssembly target.
const TARGET: &str = "wasm32-unknown-unknown";
/// The binaryen release whose `wasm-opt` shrinks the module (npm package `binaryen`).
const BINARYEN_VERSION: &str = "129.0.0";
/// `wasm-opt`'s optimisation level, chosen by measuring size and speed (`docs/core.md`).
const WASM_OPT_LEVEL: &str = "-O3";
/// The WebAssembly features the Rust target emits, which `wasm-opt` must accept.
const WASM_FEATURES: &[&str] = &[
    "--enable-simd",
    "--enable-bulk-memory",
    "--enable-nontrapping-float-to-int",
    "--enable-sign-ext",
    "--enable-mutable-globals",
    "--enable-reference-types",
    "--enable-multivalue",
];
/// The largest the `.wasm` may be, gzipped at level 9, in bytes (issue 48: 300 KiB).
const MAX_WASM_GZIP: u64 = 300 * 1024;
/// The largest the JavaScript (wasm-bindgen's glue and the package's API) may be, gzipped.
const MAX_GLUE_GZIP: u64 = 20 * 1024;

/// Where the package's built files go, relative to the workspace root.
pub(crate) const OUT_DIR: &str = "packages/core/wasm";

/// Builds the package; see the module docs.
pub(crate) fn build(root: &Path) -> Result<(), String> {
    ensure_target(root)?;
    let bindgen = ensure_bindgen(root)?;
    let target = target_dir(root);
    // Warnings fail the build (dependencies' are capped by cargo), paths are remapped, and
    // WebAssembly SIMD is on: memchr's fence scan then reads 16 bytes at a time (a 2 MB reply
    // 5.6× faster inside the module) and the module is smaller. Every engine we test has it
    // (V8 since 2021, SpiderMonkey, JavaScriptCore since Safari 16.4).
    let rustflags = format!(
        "-Dwarnings -Ctarget-feature=+simd128 --remap-path-prefix={}=/uiblocks \
         --remap-path-prefix={}=/cargo",
        root.display(),
        cargo_home().display()
    );
    run(
        root,
        &Step {
            label: "wasm-build",
            program: "cargo",
            args: &[
                "build",
                "-p",
                "ui-wasm",
                "--target",
                TARGET,
                "--profile",
                "wasm",
            ],
            env: &[("RUSTFLAGS", &rustflags)],
        },
    )?;
    let module = target.join(TARGET).join("wasm").join("ui_wasm.wasm");
    let out = root.join(OUT_DIR);
    std::fs::create_dir_all(&out)
        .map_err(|e| format!("wasm: cannot create {}: {e}", out.display()))?;
    let out_text = out.to_string_lossy().into_owned();
    let module_text = module.to_string_lossy().into_owned();
    run(
        root,
        &Step {
            label: "wasm-bindgen",
            program: &bindgen.to_string_lossy(),
            args: &[
                "--target",
                "web",
                "--out-dir",
                &out_text,
                "--out-name",
                "uiblocks_core",
                "--no-typescript",
                "--remove-producers-section",
                "--experimental-reset-state-function",
                &module_text,
            ],
            env: &[],
        },
    )?;
    optimise(root, &out.join("uiblocks_core_bg.wasm"))?;
    sizes(root)
}

/// Adds the WebAssembly target when rustup lacks it.
fn ensure_target(root: &Path) -> Result<(), String> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("wasm: cannot run rustup: {e}"))?;
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        return Ok(());
    }
    run(
        root,
        &Step {
            label: "wasm-target",
            program: "rustup",
            args: &["target", "add", TARGET],
            env: &[],
        },
    )
}

/// The version of the `wasm-bindgen` crate in `Cargo.lock`.
fn bindgen_version(root: &Path) -> Result<String, String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock"))
        .map_err(|e| format!("wasm: cannot read Cargo.lock: {e}"))?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == "name = \"wasm-bindgen\""
            && let Some(version) = lines
                .next()
                .and_then(|l| l.strip_prefix("version = \""))
                .and_then(|v| v.strip_suffix('"'))
        {
            return Ok(version.to_owned());
        }
    }
    Err("wasm: Cargo.lock has no wasm-bindgen".to_owned())
}

/// The `wasm-bindgen` binary of the crate's version, installed under the target directory
/// when missing (`cargo install`, without the test runner's TLS). Not `--locked`: its lock
/// file names a `webpki-roots` release the registry no longer serves.
fn ensure_bindgen(root: &Path) -> Result<PathBuf, String> {
    let version = bindgen_version(root)?;
    let prefix = target_dir(root)
        .join("tools")
        .join(format!("wasm-bindgen-{version}"));
    let binary = prefix.join("bin").join("wasm-bindgen");
    let reports = |binary: &Path| {
        Command::new(binary)
            .arg("--version")
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(&version))
    };
    if reports(&binary) {
        return Ok(binary);
    }
    let prefix_text = prefix.to_string_lossy().into_owned();
    let pinned = format!("={version}");
    run(
        root,
        &Step {
            label: "wasm-bindgen-install",
            program: "cargo",
            args: &[
                "install",
                "wasm-bindgen-cli",
                "--version",
                &pinned,
                "--no-default-features",
                "--bin",
                "wasm-bindgen",
                // Unoptimised: it installs in under half the time (56 s against 2 min 21 s
                // on 2 cores) and still binds our module in half a second, the same bytes.
                "--debug",
                "--root",
                &prefix_text,
            ],
            env: &[],
        },
    )?;
    if reports(&binary) {
        Ok(binary)
    } else {
        Err(format!(
            "wasm: {} does not report version {version}",
            binary.display()
        ))
    }
}

/// Runs binaryen's `wasm-opt` over `module` in place, installing the npm package when
/// missing; without npm, says so and keeps the module as it is.
fn optimise(root: &Path, module: &Path) -> Result<(), String> {
    let prefix = target_dir(root).join("tools").join("binaryen");
    let wasm_opt = prefix.join("node_modules/binaryen/bin/wasm-opt");
    let version_file = prefix.join("node_modules/binaryen/package.json");
    let pinned = std::fs::read_to_string(&version_file)
        .is_ok_and(|text| text.contains(&format!("\"version\": \"{BINARYEN_VERSION}\"")));
    if !pinned {
        if !answers("npm") || !answers("node") {
            println!(
                "\n==> [wasm-opt] skipped: no Node.js and npm to run binaryen {BINARYEN_VERSION} \
                 with (the module is larger than it could be)"
            );
            return Ok(());
        }
        npm_install(
            root,
            "wasm-opt-install",
            &prefix,
            &format!("binaryen@{BINARYEN_VERSION}"),
            false,
        )?;
    }
    let input = module.with_extension("unoptimised.wasm");
    std::fs::rename(module, &input).map_err(|e| format!("wasm: cannot move the module: {e}"))?;
    let mut args: Vec<String> = vec![
        wasm_opt.to_string_lossy().into_owned(),
        WASM_OPT_LEVEL.to_owned(),
    ];
    args.extend(WASM_FEATURES.iter().map(|f| (*f).to_owned()));
    args.extend([
        input.to_string_lossy().into_owned(),
        "-o".to_owned(),
        module.to_string_lossy().into_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let outcome = run(
        root,
        &Step {
            label: "wasm-opt",
            program: "node",
            args: &args,
            env: &[],
        },
    );
    std::fs::remove_file(&input)
        .map_err(|e| format!("wasm: cannot remove {}: {e}", input.display()))?;
    outcome
}

/// Bytes of `path` gzipped at level 9 (`gzip -9c`).
fn gzipped(path: &Path) -> Result<u64, String> {
    let out = Command::new("gzip")
        .arg("-9c")
        .arg(path)
        .output()
        .map_err(|e| format!("wasm: cannot run gzip: {e}"))?;
    if !out.status.success() {
        return Err(format!("wasm: gzip failed on {}", path.display()));
    }
    Ok(out.stdout.len() as u64)
}

/// Prints the package's sizes and fails when one is over its bound.
pub(crate) fn sizes(root: &Path) -> Result<(), String> {
    let out = root.join(OUT_DIR);
    let module = out.join("uiblocks_core_bg.wasm");
    let glue = [
        out.join("uiblocks_core.js"),
        root.join("packages/core/src/index.js"),
    ];
    let raw = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let wasm_gz = gzipped(&module)?;
    let mut glue_gz = 0;
    for file in &glue {
        glue_gz += gzipped(file)?;
    }
    let glue_raw: u64 = glue.iter().map(|p| raw(p)).sum();
    println!(
        "\nxtask wasm: @uiblocks/core sizes (gzip -9): .wasm {:.1} KiB ({:.1} KiB raw, at most {} KiB); \
         JavaScript {:.1} KiB ({:.1} KiB raw: glue and API, at most {} KiB)",
        wasm_gz as f64 / 1024.0,
        raw(&module) as f64 / 1024.0,
        MAX_WASM_GZIP / 1024,
        glue_gz as f64 / 1024.0,
        glue_raw as f64 / 1024.0,
        MAX_GLUE_GZIP / 1024,
    );
    if wasm_gz > MAX_WASM_GZIP {
        return Err(format!(
            "wasm: the .wasm is {wasm_gz} bytes gzipped, over {MAX_WASM_GZIP}"
        ));
    }
    if glue_gz > MAX_GLUE_GZIP {
        return Err(format!(
            "wasm: the JavaScript is {glue_gz} bytes gzipped, over {MAX_GLUE_GZIP}"
        ));
    }
    Ok(())
}

/// Cargo's home (`CARGO_HOME`, else `~/.cargo`), remapped out of the module's paths.
fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"))
}

/// The Bun release `@uiblocks/core` is tested on (npm package `bun`).
const BUN_VERSION: &str = "1.4.5";

/// `@uiblocks/core`'s own checks, after [`build`]: the npm workspace's pinned tools
/// (`npm ci`: TypeScript, playwright-core), the type check, the tests in Node.js
/// (`node --test`), the smoke script in Node.js and in Bun (from its npm package, installed
/// under the target directory), and the page and module-worker test in `chromium`.
pub(crate) fn test(root: &Path, chromium: &str) -> Result<(), String> {
    let step = |label: &'static str, program: &'static str, args: &[&str]| {
        run(
            root,
            &Step {
                label,
                program,
                args,
                env: &[],
            },
        )
    };
    step(
        "core-npm",
        "npm",
        &["ci", "--prefix", "packages", "--no-audit", "--no-fund"],
    )?;
    step(
        "core-types",
        "npm",
        &[
            "exec",
            "--prefix",
            "packages",
            "--no",
            "--",
            "tsc",
            "-p",
            "packages/core/tsconfig.json",
        ],
    )?;
    // The test files by name: given the folder, Node 20 runs every script in it.
    let dir = root.join("packages/core/test");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("core: cannot list {}: {e}", dir.display()))?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.ends_with(".test.mjs")
                .then(|| format!("packages/core/test/{name}"))
        })
        .collect();
    files.sort();
    let mut args = vec!["--test"];
    args.extend(files.iter().map(String::as_str));
    step("core-test", "node", &args)?;
    step("core-smoke-node", "node", &["packages/core/test/smoke.mjs"])?;
    let bun = ensure_bun(root)?;
    run(
        root,
        &Step {
            label: "core-smoke-bun",
            program: &bun.to_string_lossy(),
            args: &["packages/core/test/smoke.mjs"],
            env: &[],
        },
    )?;
    run(
        root,
        &Step {
            label: "core-browser",
            program: "node",
            args: &["packages/core/test/browser.mjs"],
            env: &[("UI_E2E_CHROMIUM", chromium)],
        },
    )
}

/// Bun [`BUN_VERSION`] from the npm registry, under the target directory.
fn ensure_bun(root: &Path) -> Result<PathBuf, String> {
    let prefix = target_dir(root).join("tools").join("bun");
    let bun = prefix.join("node_modules/.bin/bun");
    let reports = |bun: &Path| {
        Command::new(bun)
            .arg("--version")
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == BUN_VERSION)
    };
    if reports(&bun) {
        return Ok(bun);
    }
    npm_install(
        root,
        "core-bun-install",
        &prefix,
        &format!("bun@{BUN_VERSION}"),
        true,
    )?;
    if reports(&bun) {
        Ok(bun)
    } else {
        Err(format!(
            "core: {} does not report Bun {BUN_VERSION}",
            bun.display()
        ))
    }
}

/// Installs the pinned npm `package` (`name@version`) into the folder `prefix`, without
/// touching a lock file (`npm install --no-save --prefix`): the tools CI installs under the
/// target directory (binaryen, Bun, axe-core). Install scripts run only when `scripts`
/// (Bun's links its platform's binary; the others need none).
pub(crate) fn npm_install(
    root: &Path,
    label: &str,
    prefix: &Path,
    package: &str,
    scripts: bool,
) -> Result<(), String> {
    std::fs::create_dir_all(prefix)
        .map_err(|e| format!("{label}: cannot create {}: {e}", prefix.display()))?;
    let prefix_text = prefix.to_string_lossy().into_owned();
    let mut args = vec!["install", "--no-save", "--no-audit", "--no-fund"];
    if !scripts {
        args.push("--ignore-scripts");
    }
    args.extend(["--prefix", &prefix_text, package]);
    run(
        root,
        &Step {
            label,
            program: "npm",
            args: &args,
            env: &[],
        },
    )
}
