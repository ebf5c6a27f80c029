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

use ui_compiler::{UiState, evaluate_block, node_fallback};
use ui_core::text::trim_js;
use ui_core::{Clock, Failure, Record, UiLimits, ViewNode};

/// The text of a block evaluated with its first query readings (`uiQueryFallback`,
/// `catalog.md` §7.6), frozen when a reply becomes final: the state starts from the
/// defaults with `readings` stored, Show is resolved and Each expanded; a view with an
/// error keeps its compile-time fallback; the rest use the rules of §7.2 on their evaluated
/// props. The trimmed result, or the block's own fallback when that is empty.
///
/// # Errors
/// [`ui_core::Code::RefusedQuery`] for a reading of a name that is not a query of the
/// block, and [`ui_core::Code::BudgetExceeded`] when the readings do not fit the budget.
pub fn query_fallback(
    block: &Block,
    readings: &Record,
    limits: UiLimits,
    clock: &dyn Clock,
) -> Result<String, Failure> {
    let mut state = UiState::new(block, limits)?;
    for (name, value) in readings {
        state.set_query(name, value, block)?;
    }
    let view = evaluate_block(block, &state, limits, Some(clock))?;
    let mut text = String::new();
    for node in &view.nodes {
        text.push_str(&view_fallback(node));
    }
    let text = trim_js(&text);
    Ok(if text.is_empty() {
        block.fallback.clone()
    } else {
        text.to_owned()
    })
}

/// The fallback of one evaluated view (`catalog.md` §7.6 step 3).
fn view_fallback(node: &ViewNode) -> String {
    if node.error.is_some() {
        return node.fallback.clone();
    }
    let children: String = node.children.iter().map(view_fallback).collect();
    node_fallback(&node.kind, &node.props, &children)
}
