//! # ui-driver
//!
//! The JSON-lines driver protocol of `driver.md`, without I/O: [`answer_line`] takes one
//! request line and appends its answer. The `uiblocks driver` command (ui-cli) feeds it
//! standard input; `@uiblocks/core` (ui-wasm) feeds it lines from JavaScript, so both
//! answer with the same bytes.
//!
//! ```
//! let mut answer = Vec::new();
//! ui_driver::answer_line(
//!     r#"{"op":"compile","text":"```ui\n<Summary>Done</Summary>\n```\n"}"#,
//!     &mut answer,
//! )
//! .unwrap();
//! let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
//! assert_eq!(answer["ok"], true);
//! assert_eq!(answer["fallbackText"], "Done\n");
//! ```
//!
//! Answers are written by serde_json, or with the default-on `speedups` feature by
//! sonic-rs's serializer, a `compile` answer's blocks and nodes by a writer of their own
//! ([`write_blocks`]): the same bytes, property-tested against serde_json. sonic-rs finds
//! the bytes to escape with SIMD compares where the processor has them (a portable loop on
//! `wasm32`) and writes into the buffer directly, where serde_json goes byte by byte
//! through `io::Write`. Answers are mostly strings (ids, props, every node's fallback), so
//! this took 12% of the instructions off a `compile` of the `stats100` benchmark and 30% off
//! a `stream` of `streaming.txt`; the hand-written block skeleton a fifth more off the
//! `stats100` compile (figures in the repository's bench notes).

mod protocol;
#[cfg(feature = "speedups")]
mod speedups;

use std::io;

use serde::Serialize;
use ui_compiler::Block;

pub use protocol::{answer_line, answer_line_then, handle, handle_line};

/// Appends `value` to `buffer` as compact JSON, the bytes serde_json writes.
///
/// # Errors
/// When `value` cannot be written as JSON (a map with keys that are not strings).
pub fn write_json<T: Serialize + ?Sized>(value: &T, buffer: &mut Vec<u8>) -> io::Result<()> {
    protocol::write_json(buffer, value)
}

/// Appends `blocks` to `buffer` as a JSON array of blocks in their wire shape
/// (`language.md` §20), the bytes serde_json writes.
///
/// # Errors
/// Never for blocks the compiler made; the signature is [`write_json`]'s.
pub fn write_blocks<B: AsRef<Block>>(blocks: &[B], buffer: &mut Vec<u8>) -> io::Result<()> {
    #[cfg(feature = "speedups")]
    {
        speedups::write_blocks(buffer, blocks)
    }
    #[cfg(not(feature = "speedups"))]
    {
        let blocks: Vec<&Block> = blocks.iter().map(AsRef::as_ref).collect();
        protocol::write_json(buffer, &blocks)
    }
}
