//! The reply compiler (`language.md` §17): every UI fence of a reply, the reply limits, and
//! the cache that keeps unchanged fences between streaming previews.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use ui_core::text::{truncate_utf16, utf16_len, utf16_len_of_utf8};
use ui_core::{CATALOG_VERSION, Clock, Code, Diagnostic, Failure, Record, SystemClock, TextRange};

use crate::block::Block;
use crate::compile::{CompileOptions, compile_block};
use crate::fence::{Fence, scan_fences_with};

/// Converts byte offsets of the reply to UTF-16 offsets, moving forward only.
struct Cursor<'t> {
    text: &'t [u8],
    byte: usize,
    unit: usize,
}

impl Cursor<'_> {
    fn utf16(&mut self, byte: usize) -> usize {
        if byte < self.byte {
            // Never needed in order; recount from the start for robustness.
            self.byte = 0;
            self.unit = 0;
        }
        let span = &self.text[self.byte..byte];
        self.unit += utf16_len_of_utf8(span);
        self.byte = byte;
        self.unit
    }
}

#[derive(Debug)]
struct Cached {
    source: String,
    end: u32,
    complete: bool,
    latest_attachment: Option<String>,
    block: Arc<Block>,
}

/// Compiles whole replies, reusing blocks whose fence did not change since the previous
/// (non-final) call (`UiCompiler`).
#[derive(Debug, Default)]
pub struct UiCompiler {
    cache: HashMap<u32, Cached>,
}

impl UiCompiler {
    /// A compiler with an empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        self.cache.clear();
    }

    /// Compiles every UI fence of `text`. A block is reused (the same [`Arc`]) when the
    /// call is not final and its source, end, completeness and `latest_attachment` are
    /// unchanged. After the call the cache holds exactly the blocks accepted by it.
    pub fn compile(&mut self, text: &str, options: &CompileOptions<'_>) -> Vec<Arc<Block>> {
        let system;
        let clock: &dyn Clock = match options.clock {
            Some(c) => c,
            None => {
                system = SystemClock::new();
                &system
            }
        };
        let started = clock.now_ms();
        let reply = options.reply_limits;
        let mut cursor = Cursor {
            text: text.as_bytes(),
            byte: 0,
            unit: 0,
        };
        let mut blocks: Vec<Arc<Block>> = Vec::new();
        let mut cache = HashMap::new();
        let mut characters: u64 = 0;
        let mut nodes: u64 = 0;
        let mut block_options = options.clone();
        block_options.clock = Some(clock);
        scan_fences_with(text, &options.fence_language, |fence: Fence| {
            let start = cursor.utf16(fence.start) as u32;
            let end = cursor.utf16(fence.end) as u32;
            let complete = fence.closed || options.is_final;
            let source = &text[fence.code_start..fence.code_end];
            let id = format!("{}:ui:{start}", options.id);
            if blocks.len() as u64 >= reply.blocks() {
                if let Some(last) = blocks.pop() {
                    let mut last = Block::clone(&last);
                    let keep = (options.limits.diagnostics() as usize).saturating_sub(1);
                    last.diagnostics.truncate(keep);
                    last.diagnostics.push(reply_diagnostic(
                        format!("A reply may hold at most {} blocks.", reply.blocks()),
                        start,
                        end,
                    ));
                    blocks.push(Arc::new(last));
                }
                return false;
            }
            characters += utf16_len(source) as u64;
            let elapsed = clock.now_ms() - started;
            if characters > reply.characters() || elapsed > reply.milliseconds() as f64 {
                let why = if characters > reply.characters() {
                    format!(
                        "The reply's blocks are longer than {} characters.",
                        reply.characters()
                    )
                } else {
                    format!(
                        "Compiling the reply took longer than {} ms.",
                        reply.milliseconds()
                    )
                };
                blocks.push(Arc::new(refused_block(
                    id, start, end, complete, source, why, options,
                )));
                return false;
            }
            block_options.is_final = complete;
            let reused = (!options.is_final)
                .then(|| self.cache.get(&start))
                .flatten()
                .filter(|c| {
                    c.source == source
                        && c.end == end
                        && c.complete == complete
                        && c.latest_attachment == options.latest_attachment
                })
                .map(|c| Arc::clone(&c.block));
            let block = reused.unwrap_or_else(|| {
                let mut block = compile_block(source, &id, &block_options);
                block.start = start;
                block.end = end;
                Arc::new(block)
            });
            nodes += block.node_count() as u64;
            if nodes > reply.nodes() {
                blocks.push(Arc::new(refused_block(
                    id,
                    start,
                    end,
                    complete,
                    source,
                    format!("The reply's blocks hold more than {} nodes.", reply.nodes()),
                    options,
                )));
                return false;
            }
            cache.insert(
                start,
                Cached {
                    source: source.to_owned(),
                    end,
                    complete,
                    latest_attachment: options.latest_attachment.clone(),
                    block: Arc::clone(&block),
                },
            );
            blocks.push(block);
            true
        });
        self.cache = cache;
        blocks
    }
}

fn reply_diagnostic(message: String, start: u32, end: u32) -> Diagnostic {
    Diagnostic::new(
        Failure::new(Code::BudgetExceeded, message),
        TextRange::new(start, end),
    )
}

fn refused_block(
    id: String,
    start: u32,
    end: u32,
    complete: bool,
    source: &str,
    why: String,
    options: &CompileOptions<'_>,
) -> Block {
    Block {
        id,
        catalog_version: CATALOG_VERSION,
        revision: None,
        start,
        end,
        complete,
        defaults: Record::default(),
        queries: IndexMap::new(),
        nodes: Vec::new(),
        diagnostics: vec![reply_diagnostic(why, start, end)],
        fallback: truncate_utf16(source, options.reply_limits.refused_fallback() as usize)
            .to_owned(),
    }
}

/// Compiles a whole reply once (`compileUi`), final or not as `options.is_final` says.
pub fn compile_reply(text: &str, options: &CompileOptions<'_>) -> Vec<Block> {
    UiCompiler::new()
        .compile(text, options)
        .into_iter()
        .map(|b| Arc::try_unwrap(b).unwrap_or_else(|b| Block::clone(&b)))
        .collect()
}
