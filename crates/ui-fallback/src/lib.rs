//! # ui-fallback
//!
//! The text a reply keeps for clients that cannot draw its blocks (`catalog.md` §7.5): every
//! UI fence replaced by its block's fallback, the prose around it kept.
//!
//! ```
//! use ui_compiler::{CompileOptions, compile_reply};
//! use ui_fallback::fallback_text;
//!
//! let reply = "Result:\n```ui\n<Summary>Green</Summary>\n```\nThanks.";
//! let options = CompileOptions { is_final: true, ..CompileOptions::default() };
//! let blocks = compile_reply(reply, &options);
//! assert_eq!(fallback_text(reply, &blocks), "Result:\nGreen\nThanks.");
//! ```

use ui_compiler::Block;
use ui_core::text::Utf16Map;

/// The reply `text` with each block's fence replaced by the block's fallback plus a line
/// feed (`uiFallbackText`). Blocks are taken in order of `start`; a block whose range is
/// invalid or overlaps an earlier one is skipped, so its fence text stays.
pub fn fallback_text<B: AsRef<Block>>(text: &str, blocks: &[B]) -> String {
    let mut sorted: Vec<&Block> = blocks.iter().map(AsRef::as_ref).collect();
    sorted.sort_by_key(|b| b.start);
    let map = Utf16Map::new(text);
    let len16 = map.utf16(text.len());
    let mut out = String::with_capacity(text.len());
    let mut pos16 = 0usize;
    let mut pos = 0usize;
    for block in sorted {
        let (start, end) = (block.start as usize, block.end as usize);
        if start < pos16 || end < start || end > len16 {
            continue;
        }
        let start_byte = map.byte(start);
        out.push_str(&text[pos..start_byte]);
        out.push_str(&block.fallback);
        out.push('\n');
        pos16 = end;
        pos = map.byte(end);
    }
    out.push_str(&text[pos..]);
    out
}
