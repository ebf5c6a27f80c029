//! The implementations of the `uiblocks` subcommands: each returns the process exit status
//! (0 success, 1 findings, 2 usage or I/O errors).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use ui_compiler::{Block, CompileOptions, UiCompiler, compile_block};

use crate::cli::{Command, DriverArgs, McpArgs, SourceArgs};

pub mod catalog;
pub mod check;
pub mod compile;
pub mod guide;
pub mod schema;
pub mod serve;

/// The exit status for usage and I/O errors.
pub const EXIT_USAGE: u8 = 2;

/// Runs `command`, printing errors to standard error, and returns the exit status.
pub fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Check(args) => check::run(&args),
        Command::Compile(args) => compile::run_compile(&args),
        Command::Fallback(args) => compile::run_fallback(&args),
        Command::Catalog(args) => catalog::run(&args),
        Command::Guide(args) => guide::run(&args),
        Command::Schema(args) => schema::run(&args),
        Command::Driver(args) => run_driver(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Mcp(args) => run_mcp(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // A reader that stopped early (`uiblocks schema UiBlock | head`) wanted no more:
        // the command ends quietly, as a filter does.
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uiblocks: error: {}", report(&e));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// `error` and its causes, `: `-separated, each cause once: an error whose own text
/// already says its cause (`cannot listen on …: Address already in use`) does not get it
/// said again after it.
fn report(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

/// Whether `error` comes from writing to a pipe whose reader has gone.
fn closed_pipe(error: &anyhow::Error) -> bool {
    let broken = Some(std::io::ErrorKind::BrokenPipe);
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            == broken
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == broken
    })
}

fn run_mcp(args: &McpArgs) -> anyhow::Result<u8> {
    let sources = check::Sources::load_shared(args.sources.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(crate::mcp::serve_stdio(crate::mcp::UiblocksMcp::new(
        sources,
    )))?;
    Ok(0)
}

/// Requests are read through a buffer of 64 KiB (a `compile` request carries the whole
/// reply), filled from standard input's descriptor directly: [`crate::driver::WatchedInput`]
/// polls that descriptor, so no buffer may sit between them.
fn run_driver(args: &DriverArgs) -> anyhow::Result<u8> {
    use std::io::{BufReader, stdin, stdout};
    #[cfg(unix)]
    let source = {
        use std::os::fd::AsFd as _;
        let fd = stdin()
            .as_fd()
            .try_clone_to_owned()
            .context("cannot open standard input")?;
        std::fs::File::from(fd)
    };
    #[cfg(not(unix))]
    let source = stdin().lock();
    let input =
        crate::driver::WatchedInput::new(source, std::time::Duration::from_micros(args.watch));
    crate::driver::run(BufReader::with_capacity(1 << 16, input), stdout().lock())
        .context("driver")?;
    Ok(0)
}

/// Reads `path` as UTF-8 text; `-` is standard input (`… | uiblocks check -`).
///
/// # Errors
/// When the file cannot be read or is not UTF-8.
pub fn read_source(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
            .context("cannot read standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Compiles `text` as a reply (or, with `--block`, as one block body with the id `block`).
///
/// The commands count work, never time: the compile runs under a frozen clock, so the
/// `milliseconds` budget (a host's guard against a slow machine) never cuts it short, and a
/// file gives the same blocks and findings however loaded the machine is. Every other budget
/// applies as in a host.
/// `query_schemas` registers the host's sources; without them every `@Query` is
/// `unknown_query`.
pub fn compile_text(
    text: &str,
    source: &SourceArgs,
    is_final: bool,
    query_schemas: Option<&dyn ui_compiler::QuerySchemas>,
) -> Vec<Arc<Block>> {
    let clock = ui_core::FrozenClock(0.0);
    let options = CompileOptions {
        is_final,
        fence_language: source.fence_language.clone(),
        clock: Some(&clock),
        query_schemas,
        ..CompileOptions::default()
    };
    if source.block {
        vec![Arc::new(compile_block(text, "block", &options))]
    } else {
        UiCompiler::new().compile(text, &options)
    }
}
