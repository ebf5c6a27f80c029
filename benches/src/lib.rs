//! # benches
//!
//! Criterion benchmarks of the uiblocks compiler over the reference workloads of the
//! project's bench README (`shared/bench/README.md`), which also gives the reference
//! TypeScript implementation's medians that `cargo xtask bench` compares against.
//!
//! This library holds what the bench targets and the fact tests share: loading the inputs,
//! the options of each workload (always with a [`FrozenClock`] reading 0, as the reference
//! frozen-clock column and the conformance corpus run), the workloads themselves, and the
//! checks of their results. A bench calls the check of its workload at setup, before
//! anything is timed, so a wrong result is never benchmarked; `tests/facts.rs` runs the same
//! checks under `cargo test`.
//!
//! | bench (`group/name`) | input | result checked |
//! | --- | --- | --- |
//! | `compile_reply/prose2m` | `prose2m.txt` | 0 blocks |
//! | `compile_reply/proseWithBlock` | `proseWithBlock.txt` | 1 block, 38 nodes |
//! | `compile_reply/fences100k` | `fences100k.txt` | 16 blocks + `budget_exceeded` |
//! | `compile_block/stats100` | `stats100.txt` (one body) | 103 nodes |
//! | `compile_block/table1000_default` | `table1000.txt` (one body) | `budget_exceeded` |
//! | `compile_block/table1000_raised` | `table1000.txt`, [`raised_limits`] | 17 nodes |
//! | `evaluate/table1000` | that block, [`raised_limits`] | 192 filtered rows |
//! | `stream/streaming` | `streaming.txt`, every 64-unit prefix | 321 compiles, 10 blocks, 380 nodes |
//! | `reply_stream/server_deltas`, `reply_stream/from_scratch` | `streaming.txt` in 5-character deltas through the server, or every prefix compiled afresh (process CPU, `benches/replies.rs`) | the final text and 10 blocks |
//!
//! ## Inputs and why this crate depends on `flate2`
//!
//! `data/` holds byte-for-byte copies of the reference inputs, gzipped as they were
//! published (1.4 MB instead of 9.6 MB of text). Keeping the very files the reference was
//! timed on keeps the comparison honest; regenerating them would mean re-implementing the
//! reference generator exactly. [`input`] inflates one at bench setup with `flate2`
//! (pure-Rust `miniz_oxide` backend). `flate2` is a dependency of this unpublished crate
//! only; no library crate of the workspace sees it.
//!
//! ## The allocator
//!
//! With the default feature `mimalloc`, this crate sets mimalloc as the global allocator of
//! every bench, example and test linking it: the same allocator the `uiblocks` binary ships
//! with (see ui-cli), so the figures are those of what it runs. The libraries themselves
//! never choose an allocator. `cargo bench -p benches --no-default-features` times the
//! system allocator instead, which is what an embedder that keeps glibc's malloc gets.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use ui_compiler::{
    Block, CompileOptions, UiCompiler, UiState, View, ViewNode, compile_block, evaluate_block,
};
use ui_core::{Code, FrozenClock, UiLimits};

/// mimalloc as the global allocator of everything linking this crate (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The clock of every workload: always reads 0, so no budget ever reads the wall clock.
pub static CLOCK: FrozenClock = FrozenClock(0.0);

/// The compile id of every workload.
pub const COMPILE_ID: &str = "bench";

/// The block id given to a body compiled on its own.
pub const BLOCK_ID: &str = "bench:ui:0";

/// The prefix step of the streaming workload, in UTF-16 units.
pub const STREAM_STEP: usize = 64;

/// The directory of the gzipped inputs (`benches/data`).
pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// A new empty directory under the system's temporary directory, named after `name`, this
/// process and the time (the server benches keep their database there and remove it).
///
/// # Panics
/// When the directory cannot be made.
pub fn fresh_temp_dir(name: &str) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir =
        std::env::temp_dir().join(format!("uiblocks-{name}-{}-{stamp:x}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// The text of input `name` (`"prose2m.txt"`), inflated from `data/<name>.gz`.
///
/// # Panics
/// When the file is missing, is not gzip, or does not hold UTF-8 text.
pub fn input(name: &str) -> String {
    let path = data_dir().join(format!("{name}.gz"));
    let file = std::fs::File::open(&path)
        .unwrap_or_else(|e| panic!("cannot open bench input {}: {e}", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::io::BufReader::new(file))
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("cannot inflate bench input {}: {e}", path.display()));
    text
}

/// The raised limits of the `table1000` workloads: characters, nodes and stringLength
/// 2^20, steps 2^28, iterations 2^24; the rest at their defaults.
pub fn raised_limits() -> UiLimits {
    let raised = [
        ("characters", 1 << 20),
        ("nodes", 1 << 20),
        ("stringLength", 1 << 20),
        ("steps", 1 << 28),
        ("iterations", 1 << 24),
    ];
    raised
        .into_iter()
        .try_fold(UiLimits::DEFAULT, |limits, (key, value)| {
            limits.with(key, value)
        })
        .expect("the raised limits are valid")
}

/// Compile options on the frozen [`CLOCK`] with the given block `limits` and finality;
/// everything else at its default.
pub fn options(limits: UiLimits, is_final: bool) -> CompileOptions<'static> {
    CompileOptions {
        id: COMPILE_ID.to_owned(),
        is_final,
        limits,
        clock: Some(&CLOCK),
        ..CompileOptions::default()
    }
}

/// Compiles a whole reply as final with a fresh [`UiCompiler`] (the `compile_reply` benches).
pub fn compile_reply(text: &str, options: &CompileOptions<'_>) -> Vec<Arc<Block>> {
    UiCompiler::new().compile(text, options)
}

/// Compiles one block body (the `compile_block` benches).
pub fn compile_body(source: &str, options: &CompileOptions<'_>) -> Block {
    compile_block(source, BLOCK_ID, options)
}

/// The limits of the state of an evaluated block: `limits` with `milliseconds` unbounded.
///
/// [`UiState`] copies values under a budget on the *system* clock whatever clock the
/// evaluation gets, so its `milliseconds` limit stays live even on the frozen clock; a
/// 30 ms stall of a noisy machine would then fail a run. Unbounding it gives the state's
/// copies the frozen-clock behaviour every other part of the workload has.
pub fn state_limits(limits: UiLimits) -> UiLimits {
    limits
        .with("milliseconds", MAX_SAFE_INTEGER)
        .expect("2^53 - 1 is a valid limit")
}

/// The largest limit value (2^53 − 1).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A fresh state for `block` (under [`state_limits`]) and one evaluation of it under
/// `limits` on the frozen [`CLOCK`] (the `evaluate` bench).
///
/// # Panics
/// When the state cannot be created or the evaluation fails as a whole.
pub fn evaluate(block: &Block, limits: UiLimits) -> View {
    let state =
        UiState::new(block, state_limits(limits)).expect("the block's state fits its limits");
    evaluate_block(block, &state, limits, Some(&CLOCK)).expect("the block evaluates")
}

/// The streaming workload: one incremental [`UiCompiler`] compiles every
/// [`STREAM_STEP`]-unit prefix of a reply as a preview, then the whole reply as final.
#[derive(Debug, Clone)]
pub struct Streaming {
    text: String,
    /// Byte ends of the preview prefixes, shortest first.
    cuts: Vec<usize>,
    preview: CompileOptions<'static>,
    last: CompileOptions<'static>,
}

impl Streaming {
    /// The workload over `text`, with default limits. Prefixes are every multiple of
    /// [`STREAM_STEP`] UTF-16 units shorter than the text; a cut that would split a
    /// character moves back to the character's start.
    pub fn new(text: String) -> Self {
        let mut cuts = Vec::new();
        let mut units = 0;
        let mut next = STREAM_STEP;
        for (at, c) in text.char_indices() {
            if units >= next {
                cuts.push(at);
                next += STREAM_STEP;
                while units >= next {
                    next += STREAM_STEP;
                }
            }
            units += c.len_utf16();
        }
        Streaming {
            text,
            cuts,
            preview: options(UiLimits::DEFAULT, false),
            last: options(UiLimits::DEFAULT, true),
        }
    }

    /// How many compiles one run does: the previews plus the final compile.
    pub fn compiles(&self) -> usize {
        self.cuts.len() + 1
    }

    /// Runs every compile and returns the blocks of the final one.
    pub fn run(&self) -> Vec<Arc<Block>> {
        let mut compiler = UiCompiler::new();
        for &cut in &self.cuts {
            std::hint::black_box(compiler.compile(&self.text[..cut], &self.preview));
        }
        compiler.compile(&self.text, &self.last)
    }
}

/// The number of nodes of all `blocks`.
pub fn total_nodes(blocks: &[Arc<Block>]) -> usize {
    blocks.iter().map(|b| b.node_count()).sum()
}

/// Whether `block` carries a `budget_exceeded` diagnostic.
pub fn has_budget_exceeded(block: &Block) -> bool {
    block
        .diagnostics
        .iter()
        .any(|d| d.code == Code::BudgetExceeded)
}

/// The number of rows of the first `Table` view of `view`, if it has one.
pub fn table_rows(view: &View) -> Option<usize> {
    let mut table: Option<&ViewNode> = None;
    view.walk(&mut |node| {
        if table.is_none() && node.kind == "Table" {
            table = Some(node);
        }
    });
    table?.props.get("rows")?.as_array().map(<[_]>::len)
}

/// The checks of each workload's result: each panics, naming the workload, when the
/// result differs from the bench README's.
pub mod facts {
    use super::*;

    /// `prose2m.txt`: no block.
    pub fn prose2m(blocks: &[Arc<Block>]) {
        assert_eq!(blocks.len(), 0, "prose2m: expected 0 blocks");
    }

    /// `proseWithBlock.txt`: 1 block of 38 nodes, without diagnostics.
    pub fn prose_with_block(blocks: &[Arc<Block>]) {
        assert_eq!(blocks.len(), 1, "proseWithBlock: expected 1 block");
        assert_eq!(
            blocks[0].node_count(),
            38,
            "proseWithBlock: expected 38 nodes"
        );
        assert!(
            blocks[0].diagnostics.is_empty(),
            "proseWithBlock: unexpected diagnostics {:?}",
            blocks[0].diagnostics
        );
    }

    /// `fences100k.txt`: the reply cap keeps 16 blocks, the last of which carries
    /// `budget_exceeded`.
    pub fn fences100k(blocks: &[Arc<Block>]) {
        assert_eq!(blocks.len(), 16, "fences100k: expected 16 blocks");
        assert!(
            blocks.last().is_some_and(|b| has_budget_exceeded(b)),
            "fences100k: expected budget_exceeded on the last block"
        );
        assert!(
            blocks[..15].iter().all(|b| !has_budget_exceeded(b)),
            "fences100k: budget_exceeded before the last block"
        );
    }

    /// `stats100.txt` as one body: 103 nodes, without diagnostics.
    pub fn stats100(block: &Block) {
        assert_eq!(block.node_count(), 103, "stats100: expected 103 nodes");
        assert!(
            block.diagnostics.is_empty(),
            "stats100: unexpected diagnostics {:?}",
            block.diagnostics
        );
    }

    /// `table1000.txt` as one body with default limits: the whole block fails with
    /// `budget_exceeded` (no nodes).
    pub fn table1000_default(block: &Block) {
        assert!(
            has_budget_exceeded(block),
            "table1000 (default limits): expected budget_exceeded, got {:?}",
            block.diagnostics
        );
        assert_eq!(
            block.node_count(),
            0,
            "table1000 (default limits): expected no nodes"
        );
    }

    /// `table1000.txt` as one body with [`raised_limits`]: 17 nodes, without diagnostics.
    pub fn table1000_raised(block: &Block) {
        assert_eq!(
            block.node_count(),
            17,
            "table1000 (raised limits): expected 17 nodes"
        );
        assert!(
            block.diagnostics.is_empty(),
            "table1000 (raised limits): unexpected diagnostics {:?}",
            block.diagnostics
        );
    }

    /// The evaluated `table1000` block: its Table shows 192 rows, without diagnostics.
    pub fn table1000_view(view: &View) {
        assert_eq!(
            table_rows(view),
            Some(192),
            "evaluate table1000: expected a Table of 192 rows"
        );
        assert!(
            view.diagnostics.is_empty(),
            "evaluate table1000: unexpected diagnostics {:?}",
            view.diagnostics
        );
    }

    /// `streaming.txt`: 321 compiles; the final one gives 10 blocks of 380 nodes in all.
    pub fn streaming(workload: &Streaming, blocks: &[Arc<Block>]) {
        assert_eq!(workload.compiles(), 321, "streaming: expected 321 compiles");
        assert_eq!(blocks.len(), 10, "streaming: expected 10 blocks");
        assert_eq!(total_nodes(blocks), 380, "streaming: expected 380 nodes");
    }
}
