//! The reply compiler (`language.md` §17): every UI fence of a reply, the reply limits, and
//! the cache that keeps unchanged fences between streaming previews and lets a growing
//! fence resume from the checkpoint of its previous compile.

use std::sync::Arc;

use indexmap::IndexMap;
use ui_core::text::{push_decimal, truncate_utf16, utf16_len_of_utf8};
use ui_core::{CATALOG_VERSION, Clock, Code, Diagnostic, Failure, Record, SystemClock, TextRange};

use crate::block::Block;
use crate::compile::{BlockJob, Checkpoint, CompileOptions, Previous, compile_block_with};
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

/// A UI fence of the reply with its offsets in UTF-16 units.
#[derive(Debug, Clone, Copy)]
struct Found {
    fence: Fence,
    /// Offset of the opening fence line.
    start: u32,
    /// Offset just past the closing fence line, or the reply's end.
    end: u32,
    /// Length of the block source.
    units: u64,
}

/// What the fence scan of earlier calls settled, so that a call on a longer reply scans only
/// what follows it.
#[derive(Debug, Default)]
struct Scanned {
    /// The fence word of the scan.
    language: String,
    /// The reply up to just after the line feed that ends the last closing line of a UI
    /// fence (empty when there is none; final calls do not extend it). The scan of any reply that starts with it finds the
    /// same fences in it, and is at its end at a line start outside any fence: the fence
    /// state machine (§3.3) decides each line from that line's bytes only.
    text: String,
    /// The UTF-16 length of `text`.
    units: usize,
    /// The UI fences in `text`, in order, all closed.
    fences: Vec<Found>,
}

#[derive(Debug)]
struct Cached {
    /// The fence's offset in the reply: the cache key.
    start: u32,
    source: String,
    end: u32,
    complete: bool,
    latest_attachment: Option<String>,
    block: Arc<Block>,
    /// `block.node_count()`.
    nodes: u64,
    /// Where the next compile of this fence may resume.
    checkpoint: Option<Box<Checkpoint>>,
}

/// Compiles whole replies, reusing blocks whose fence did not change since the previous
/// (non-final) call (`UiCompiler`).
///
/// A fence that did change is compiled anew, but when its source extends the previous one
/// (the open fence of a streaming reply, or the fence that just closed) the compile resumes
/// from the checkpoint the previous compile left: the top-level nodes before it are reused
/// instead of parsed and compiled again. Likewise the fence scan skips the part of the reply
/// that earlier non-final calls settled. The results are the same as a fresh compile's. A
/// final call (the last of a stream, or a one-shot compile) uses what earlier calls left but
/// leaves nothing new: the copies it would take are not worth it.
#[derive(Debug, Default)]
pub struct UiCompiler {
    /// The blocks accepted by the previous call, in reply order.
    cache: Vec<Cached>,
    scanned: Scanned,
}

impl UiCompiler {
    /// A compiler with an empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        self.cache.clear();
        self.scanned = Scanned::default();
    }

    /// Compiles every UI fence of `text`. A block is reused (the same [`Arc`]) when the
    /// call is not final and its source, end, completeness and `latest_attachment` are
    /// unchanged. After a non-final call the cache holds exactly the blocks accepted by it;
    /// after a final call it is empty, since a final block is never reused.
    pub fn compile(&mut self, text: &str, options: &CompileOptions<'_>) -> Vec<Arc<Block>> {
        let system;
        let clock: &dyn Clock = match options.clock {
            Some(c) => c,
            None => {
                system = SystemClock::new();
                &system
            }
        };
        let fences = self.cache.len() + 1;
        let mut run = Run {
            text,
            options,
            clock,
            started: clock.now_ms(),
            previous: std::mem::take(&mut self.cache).into_iter().peekable(),
            cache: Vec::with_capacity(fences),
            blocks: Vec::with_capacity(fences),
            characters: 0,
            nodes: 0,
        };
        let scanned = &mut self.scanned;
        if scanned.language != options.fence_language
            || !text.as_bytes().starts_with(scanned.text.as_bytes())
        {
            *scanned = Scanned {
                language: options.fence_language.clone(),
                ..Scanned::default()
            };
        }
        // The fences of the settled part of the reply, then a scan of the rest.
        if scanned.fences.iter().all(|&found| run.visit(found, true)) {
            let from = scanned.text.len();
            let mut cursor = Cursor {
                text: text.as_bytes(),
                byte: from,
                unit: scanned.units,
            };
            let mut settled = None;
            scan_fences_with(&text[from..], &options.fence_language, |f: Fence| {
                let fence = Fence {
                    start: from + f.start,
                    code_start: from + f.code_start,
                    code_end: from + f.code_end,
                    end: from + f.end,
                    closed: f.closed,
                };
                let start = cursor.utf16(fence.start);
                let code_start = cursor.utf16(fence.code_start);
                let code_end = cursor.utf16(fence.code_end);
                let end = cursor.utf16(fence.end);
                let found = Found {
                    fence,
                    start: start as u32,
                    end: end as u32,
                    units: (code_end - code_start) as u64,
                };
                if !options.is_final
                    && fence.closed
                    && text.as_bytes()[..fence.end].ends_with(b"\n")
                {
                    scanned.fences.push(found);
                    settled = Some((fence.end, end));
                }
                run.visit(found, false)
            });
            if let Some((byte, unit)) = settled {
                scanned.text.push_str(&text[from..byte]);
                scanned.units = unit;
            }
        }
        self.cache = run.cache;
        run.blocks
    }
}

/// One call of [`UiCompiler::compile`]: the reply limits' running totals and the blocks and
/// cache it builds.
struct Run<'t, 'o, 'c> {
    text: &'t str,
    options: &'t CompileOptions<'o>,
    clock: &'c dyn Clock,
    started: f64,
    /// The previous call's cache, in reply order, consumed as the fences go by.
    previous: std::iter::Peekable<std::vec::IntoIter<Cached>>,
    cache: Vec<Cached>,
    blocks: Vec<Arc<Block>>,
    characters: u64,
    nodes: u64,
}

impl Run<'_, '_, '_> {
    /// Handles one UI fence (§17.2); `false` stops the scan. `settled` says that the fence
    /// lies in the part of the reply the previous call settled, so its source is the one
    /// the previous call compiled at the same offset.
    fn visit(&mut self, found: Found, settled: bool) -> bool {
        let Found {
            fence, start, end, ..
        } = found;
        let options = self.options;
        let reply = options.reply_limits;
        let complete = fence.closed || options.is_final;
        let source = &self.text[fence.code_start..fence.code_end];
        // `<compile id>:ui:<fence start>`
        let id = || {
            let mut id = String::with_capacity(options.id.len() + 14);
            id.push_str(&options.id);
            id.push_str(":ui:");
            push_decimal(&mut id, u64::from(start));
            id
        };
        if self.blocks.len() as u64 >= reply.blocks() {
            if let Some(last) = self.blocks.last_mut() {
                // Copied only when the cache shares it (a final call caches nothing).
                let last = Arc::make_mut(last);
                let keep = (options.limits.diagnostics() as usize).saturating_sub(1);
                last.diagnostics.truncate(keep);
                last.diagnostics.push(reply_diagnostic(
                    format!("A reply may hold at most {} blocks.", reply.blocks()),
                    start,
                    end,
                ));
            }
            return false;
        }
        self.characters += found.units;
        let elapsed = self.clock.now_ms() - self.started;
        if self.characters > reply.characters() || elapsed > reply.milliseconds() as f64 {
            let why = if self.characters > reply.characters() {
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
            return self.refuse(id(), &found, source, why);
        }
        let entry = self.entry(source, start, end, complete, settled, id);
        self.nodes += entry.nodes;
        if self.nodes > reply.nodes() {
            let why = format!("The reply's blocks hold more than {} nodes.", reply.nodes());
            return self.refuse(id(), &found, source, why);
        }
        if options.is_final {
            self.blocks.push(entry.block);
        } else {
            self.blocks.push(Arc::clone(&entry.block));
            self.cache.push(entry);
        }
        true
    }
}

impl Run<'_, '_, '_> {
    /// The cached compile of the fence `source` at `start`..`end`: the previous call's
    /// block when the fence is unchanged (its source, or `settled`), else a compile that
    /// resumes from the previous call's checkpoint where one applies.
    fn entry(
        &mut self,
        source: &str,
        start: u32,
        end: u32,
        complete: bool,
        settled: bool,
        id: impl FnOnce() -> String,
    ) -> Cached {
        let options = self.options;
        while self.previous.next_if(|c| c.start < start).is_some() {}
        let mut previous = self.previous.next_if(|c| c.start == start);
        match previous.take_if(|c| {
            !options.is_final
                && c.end == end
                && c.complete == complete
                && c.latest_attachment == options.latest_attachment
                && (settled || c.source == source)
        }) {
            Some(same) => {
                debug_assert_eq!(same.source, source);
                same
            }
            None => {
                let resume = previous.as_mut().and_then(|c| {
                    Some(Previous {
                        checkpoint: c.checkpoint.take()?,
                        source: &c.source,
                        block: &mut c.block,
                    })
                });
                let job = BlockJob {
                    id: id(),
                    complete,
                    clock: self.clock,
                    previous: resume,
                    keep: !options.is_final,
                };
                let (mut block, checkpoint) = compile_block_with(source, options, job);
                block.start = start;
                block.end = end;
                // The previous source's buffer, when there is one, has about the right size.
                // A final call caches nothing (no later call reuses a final block), so it
                // keeps no copy.
                let mut kept = previous.map(|c| c.source).unwrap_or_default();
                kept.clear();
                if !options.is_final {
                    kept.push_str(source);
                }
                Cached {
                    start,
                    source: kept,
                    end,
                    complete,
                    latest_attachment: options.latest_attachment.clone(),
                    nodes: block.node_count() as u64,
                    block: Arc::new(block),
                    checkpoint,
                }
            }
        }
    }

    /// Adds the block of `found` refused by a reply limit, with `why`; `false`, which stops
    /// the scan.
    fn refuse(&mut self, id: String, found: &Found, source: &str, why: String) -> bool {
        let complete = found.fence.closed || self.options.is_final;
        let block = refused_block(
            id,
            found.start,
            found.end,
            complete,
            source,
            why,
            self.options,
        );
        self.blocks.push(Arc::new(block));
        false
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
