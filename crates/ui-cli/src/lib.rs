//! # ui-cli
//!
//! The library behind the `uiblocks` binary: the command line ([`cli`]), the subcommands
//! ([`commands`]: `check`, `compile`, `fallback`, `catalog`, `guide`, `schema`, `serve`), the MCP
//! server of `uiblocks mcp` ([`mcp`]) and the JSON-lines [`driver`] that exposes the compiler to hosts in any language (`driver.md`).
//!
//! ```
//! let response = ui_cli::driver::handle_line(
//!     r#"{"op":"compile","text":"```ui\n<Summary>Done</Summary>\n```\n"}"#,
//! );
//! assert_eq!(response["ok"], true);
//! assert_eq!(response["fallbackText"], "Done\n");
//! ```
//!
//! Dependencies beyond the workspace's crates: clap (the command line), annotate-snippets
//! (rustc-style diagnostics), anyhow (errors of the commands), tokio (`serve`, `mcp`),
//! rmcp — the official Rust SDK of the Model Context Protocol, for `uiblocks mcp` (only its
//! server side and stdio transport: no macros, no HTTP),
//! indicatif — the progress bar of `check` over many files, drawn on standard error only
//! when that is a terminal (no default features: no wide-character widths, no wasm clock), and
//! on Unix nix, for the safe `poll(2)` with which the driver watches its input before it
//! sleeps ([`driver::input`]; the workspace forbids `unsafe`, and nix is in the lock file
//! already, for the benches).
//! The driver's protocol is ui-driver's ([`ui_driver`]), whose default-on `speedups`
//! feature (sonic-rs, a hand writer of blocks) this crate's `speedups` feature turns on.
//! The binary (not this library) allocates with mimalloc: the compiler builds many small
//! strings, maps and vectors, glibc's malloc and free took about a third of its
//! instructions in profiles, and with mimalloc the compile benchmarks run 10–35% faster
//! (figures in the repository's bench notes). No default features: no secure mode, no
//! override of the C allocator.

pub mod cli;
pub mod commands;
pub mod docs;
pub mod driver;
pub mod examples;
pub mod mcp;
