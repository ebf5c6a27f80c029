//! `uiblocks`: the command-line entry point. See `uiblocks --help`; the commands live in
//! [`ui_cli::commands`].

use std::process::ExitCode;

use clap::Parser as _;

/// The binary allocates with mimalloc rather than the system allocator: compiling a block
/// builds many small strings, maps and vectors, and glibc's malloc and free took about a
/// third of the compiler's instructions in profiles (`benches/examples/prof.rs`). The
/// libraries leave the allocator to whoever links them.
///
/// It is built with `no_thp` (the workspace's `mimalloc` dependency): mimalloc otherwise asks
/// for transparent huge pages on the memory it reserves, and a server holding thousands of
/// idle event streams then grew by 22 KB of resident memory per stream instead of 14 KB
/// (`cargo bench -p benches --bench fanout`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = ui_cli::cli::Cli::parse();
    ui_cli::commands::run(cli.command)
}
