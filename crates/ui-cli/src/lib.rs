//! # ui-cli
//!
//! The library behind the `uiblocks` binary: the command line ([`cli`]), the subcommands
//! ([`commands`]: `check`, `compile`, `fallback`, `catalog`, `schema`, `serve`), the MCP
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
//! With the default `speedups` feature, sonic-rs writes the driver's answers: its serializer
//! finds the bytes to escape with SIMD compares and writes into the buffer directly, where
//! serde_json goes byte by byte through `io::Write`. The driver's answers are mostly strings
//! (ids, props, every node's fallback), so this took 12% of the instructions off a `compile`
//! of the `stats100` benchmark and 30% off a `stream` of `streaming.txt`. A `compile`
//! answer's blocks and nodes are written by hand on top of it (every key a ready-made run of
//! bytes, sonic-rs escaping the strings): a fifth of the instructions more off the
//! `stats100` compile. The bytes are serde_json's, property-tested in the driver's
//! `speedups` module and compared over the whole corpus.
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
