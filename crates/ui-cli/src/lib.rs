//! # ui-cli
//!
//! The library behind the `uiblocks` binary: the command line ([`cli`]), the subcommands
//! ([`commands`]: `check`, `compile`, `fallback`, `catalog`, `schema`, `serve`) and the
//! JSON-lines [`driver`] that exposes the compiler to hosts in any language (`driver.md`).
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
//! (rustc-style diagnostics), anyhow (errors of the commands), tokio (`serve`), and
//! indicatif — the progress bar of `check` over many files, drawn on standard error only
//! when that is a terminal (no default features: no wide-character widths, no wasm clock).

pub mod cli;
pub mod commands;
pub mod driver;
