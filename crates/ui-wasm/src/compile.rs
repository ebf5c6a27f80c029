//! Compiling replies and blocks: one-shot, and incremental while a reply streams.

use std::sync::Arc;

use ui_compiler::{Block, UiCompiler};
use wasm_bindgen::prelude::*;

use crate::failure::{unreadable, unwritable, utf8};
use crate::options::Options;

/// A compiled block kept on this side: the package attaches it to the block's JavaScript
/// object, so that evaluating the block never copies it back.
#[wasm_bindgen]
#[derive(Debug, Clone)]
pub struct BlockHandle {
    pub(crate) block: Arc<Block>,
}

#[wasm_bindgen]
impl BlockHandle {
    /// Reads a block in its wire shape (a block a host sent, or one whose handle was lost).
    ///
    /// # Errors
    /// `invalid_value` when `json` is not a block.
    #[wasm_bindgen(js_name = fromJson)]
    pub fn from_json(json: &str) -> Result<BlockHandle, JsValue> {
        let json = ui_core::text::json_lone_surrogates_replaced(json);
        serde_json::from_str::<Block>(&json)
            .map(|block| BlockHandle {
                block: Arc::new(block),
            })
            .map_err(|e| unreadable("the block", &e))
    }
}

/// Blocks gathered from their handles, for the functions that take a reply's blocks.
#[wasm_bindgen]
#[derive(Debug, Default)]
pub struct BlockList {
    blocks: Vec<Arc<Block>>,
}

#[wasm_bindgen]
impl BlockList {
    /// An empty list.
    #[wasm_bindgen(constructor)]
    pub fn new() -> BlockList {
        BlockList::default()
    }

    /// Appends the block of `handle` (shared, not copied).
    pub fn push(&mut self, handle: &BlockHandle) {
        self.blocks.push(Arc::clone(&handle.block));
    }
}

/// The answer of a compile: the JSON text of the blocks that are new, their handles, and for
/// an incremental compile which earlier block each one is.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Compiled {
    json: String,
    handles: Vec<BlockHandle>,
    reused: Vec<i32>,
}

#[wasm_bindgen]
impl Compiled {
    /// The JSON text of an array of the new blocks, in reply order (once; then `""`).
    #[wasm_bindgen(js_name = takeJson)]
    pub fn take_json(&mut self) -> String {
        std::mem::take(&mut self.json)
    }

    /// The handles of the new blocks, in reply order (once; then empty).
    #[wasm_bindgen(js_name = takeHandles)]
    pub fn take_handles(&mut self) -> Vec<BlockHandle> {
        std::mem::take(&mut self.handles)
    }

    /// For each block in reply order, the index of the same block in the previous compile's
    /// answer, or -1 for a block that is new (and in the JSON). Empty for a one-shot compile,
    /// whose blocks are all new.
    pub fn reused(&self) -> Vec<i32> {
        self.reused.clone()
    }
}

impl Compiled {
    /// All of `blocks` as new.
    fn all(blocks: Vec<Arc<Block>>) -> Result<Compiled, JsValue> {
        let mut buffer = Vec::with_capacity(4096);
        ui_driver::write_blocks(&blocks, &mut buffer).map_err(|e| unwritable(&e))?;
        Ok(Compiled {
            json: text(buffer)?,
            handles: handles(blocks),
            reused: Vec::new(),
        })
    }
}

fn handles(blocks: Vec<Arc<Block>>) -> Vec<BlockHandle> {
    blocks
        .into_iter()
        .map(|block| BlockHandle { block })
        .collect()
}

fn text(buffer: Vec<u8>) -> Result<String, JsValue> {
    String::from_utf8(buffer)
        .map_err(|_| crate::failure::throw("internal", "the answer is not UTF-8"))
}

/// Compiles every UI fence of a reply (`compileUi`): `text` is its UTF-8, `options` the
/// JSON text of `UiCompileOptions`, and `now`, when given, the compile clock (the
/// reference's option: JavaScript milliseconds, read as the budgets need them).
///
/// # Errors
/// `invalid_value` for options that cannot be read, or limits outside their range.
#[wasm_bindgen(js_name = compileReply)]
pub fn compile_reply(
    text: &[u8],
    options: &str,
    now: Option<js_sys::Function>,
) -> Result<Compiled, JsValue> {
    let text = utf8(text, "the reply")?;
    let options = Options::read(options, now)?;
    Compiled::all(UiCompiler::new().compile(text, &options.get()))
}

/// Compiles one block body (`compileUiBlock`); the block's id is the options' `id`.
///
/// # Errors
/// As [`compile_reply`].
#[wasm_bindgen(js_name = compileBlock)]
pub fn compile_block(
    source: &[u8],
    options: &str,
    now: Option<js_sys::Function>,
) -> Result<Compiled, JsValue> {
    let source = utf8(source, "the source")?;
    let options = Options::read(options, now)?;
    let options = options.get();
    let block = ui_compiler::compile_block(source, &options.id, &options);
    Compiled::all(vec![Arc::new(block)])
}

/// The reply `text` with each of its blocks replaced by the block's fallback
/// (`language.md` §16): what a client that cannot draw blocks shows.
///
/// # Errors
/// `invalid_value` for bytes that are not UTF-8.
#[wasm_bindgen(js_name = fallbackText)]
pub fn fallback_text(text: &[u8], blocks: &BlockList) -> Result<String, JsValue> {
    Ok(ui_fallback::fallback_text(
        utf8(text, "the reply")?,
        &blocks.blocks,
    ))
}

/// One streaming reply's compiler (`UiCompiler`): each call compiles the reply so far,
/// reusing the blocks whose fences did not change and resuming a growing fence where the
/// previous call left it, and answers only the blocks that changed.
#[wasm_bindgen]
pub struct IncrementalCompiler {
    compiler: UiCompiler,
    options: Options,
    previous: Vec<Arc<Block>>,
}

impl std::fmt::Debug for IncrementalCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncrementalCompiler")
            .field("previous", &self.previous.len())
            .finish_non_exhaustive()
    }
}

#[wasm_bindgen]
impl IncrementalCompiler {
    /// A compiler for one reply, with the options every call uses (their `final` is each
    /// call's own).
    ///
    /// # Errors
    /// As [`compile_reply`].
    #[wasm_bindgen(constructor)]
    pub fn new(
        options: &str,
        now: Option<js_sys::Function>,
    ) -> Result<IncrementalCompiler, JsValue> {
        Ok(IncrementalCompiler {
            compiler: UiCompiler::new(),
            options: Options::read(options, now)?,
            previous: Vec::new(),
        })
    }

    /// Compiles the reply so far (`is_final`: all of it). The answer's JSON holds only the
    /// blocks that are not the same as one of the previous call's; [`Compiled::reused`]
    /// says which earlier block each other one is. After a final call the compiler starts
    /// afresh.
    ///
    /// # Errors
    /// `internal` when the answer cannot be written (never expected).
    pub fn compile(
        &mut self,
        reply: &[u8],
        is_final: bool,
        latest_attachment: Option<String>,
    ) -> Result<Compiled, JsValue> {
        let reply = utf8(reply, "the reply")?;
        let mut options = self.options.get();
        options.is_final = is_final;
        if latest_attachment.is_some() {
            options.latest_attachment = latest_attachment;
        }
        let blocks = self.compiler.compile(reply, &options);
        let mut reused = Vec::with_capacity(blocks.len());
        let mut fresh: Vec<Arc<Block>> = Vec::new();
        for block in &blocks {
            match self.previous.iter().position(|p| Arc::ptr_eq(p, block)) {
                Some(i) => reused.push(i as i32),
                None => {
                    reused.push(-1);
                    fresh.push(Arc::clone(block));
                }
            }
        }
        let mut buffer = Vec::with_capacity(1024);
        ui_driver::write_blocks(&fresh, &mut buffer).map_err(|e| unwritable(&e))?;
        let json = text(buffer)?;
        self.previous = if is_final { Vec::new() } else { blocks };
        Ok(Compiled {
            json,
            handles: handles(fresh),
            reused,
        })
    }

    /// Forgets the previous calls' blocks: the next call compiles from scratch.
    pub fn reset(&mut self) {
        self.compiler.clear();
        self.previous.clear();
    }
}
