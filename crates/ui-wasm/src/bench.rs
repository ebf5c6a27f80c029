//! Timings of the work inside WebAssembly alone, for `packages/core/bench/bench.mjs`: the
//! same compiles and evaluations as the package's functions, without the answer's JSON or
//! its crossing to JavaScript. Not part of the package's API.

use std::sync::Arc;

use ui_compiler::{UiCompiler, UiState, evaluate_block};
use ui_core::Clock;
use wasm_bindgen::prelude::*;

use crate::compile::BlockHandle;
use crate::failure::thrown;
use crate::options::Options;
use crate::state::EvalOptions;

/// Milliseconds (`performance.now()`) of `iterations` compiles of `text` (UTF-8, as the
/// package passes it) as a reply, or as one block body when `block`; the time includes the
/// UTF-8 check of the text, as the package's compile does.
///
/// # Errors
/// Unreadable options.
#[wasm_bindgen(js_name = __benchCompile)]
pub fn bench_compile(
    text: &[u8],
    options: &str,
    block: bool,
    iterations: u32,
) -> Result<f64, JsValue> {
    let clock = ui_core::SystemClock::new();
    let started = clock.now_ms();
    let text = crate::failure::utf8(text, "the text")?;
    let options = Options::read(options, None)?;
    let options = options.get();
    let mut nodes = 0;
    for _ in 0..iterations {
        if block {
            nodes += ui_compiler::compile_block(text, &options.id, &options).node_count();
        } else {
            nodes += UiCompiler::new().compile(text, &options).len();
        }
    }
    std::hint::black_box(nodes);
    Ok(clock.now_ms() - started)
}

/// Milliseconds of `iterations` streams of `text`: one incremental compiler over every
/// `step`-unit prefix (UTF-16), then the whole text as final.
///
/// # Errors
/// Unreadable options.
#[wasm_bindgen(js_name = __benchStream)]
pub fn bench_stream(text: &str, options: &str, step: u32, iterations: u32) -> Result<f64, JsValue> {
    let options = Options::read(options, None)?;
    let mut options = options.get();
    let map = ui_core::text::Utf16Map::new(text);
    let total = map.utf16(text.len());
    let step = step.max(1) as usize;
    let clock = ui_core::SystemClock::new();
    let started = clock.now_ms();
    for _ in 0..iterations {
        let mut compiler = UiCompiler::new();
        options.is_final = false;
        let mut length = step;
        while length < total {
            let cut = map.byte(length);
            std::hint::black_box(compiler.compile(&text[..cut], &options));
            length += step;
        }
        options.is_final = true;
        std::hint::black_box(compiler.compile(text, &options));
    }
    Ok(clock.now_ms() - started)
}

/// Milliseconds of `iterations` evaluations of `block`, each in a fresh state of its
/// defaults (as `evaluateUiBlock(block, new UiState(block, limits), limits)`).
///
/// # Errors
/// Unreadable options; the first failure of a state or an evaluation.
#[wasm_bindgen(js_name = __benchEvaluate)]
pub fn bench_evaluate(block: &BlockHandle, options: &str, iterations: u32) -> Result<f64, JsValue> {
    let options = EvalOptions::read(options)?;
    let block = Arc::clone(&block.block);
    let clock = ui_core::SystemClock::new();
    let started = clock.now_ms();
    for _ in 0..iterations {
        let state = UiState::new(&block, options.limits()).map_err(|f| thrown(&f))?;
        let view = evaluate_block(&block, &state, options.limits(), Some(options.clock()))
            .map_err(|f| thrown(&f))?;
        std::hint::black_box(view);
    }
    Ok(clock.now_ms() - started)
}
