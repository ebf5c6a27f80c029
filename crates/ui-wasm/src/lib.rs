//! # ui-wasm
//!
//! The block language compiled to WebAssembly: the Rust side of the npm package
//! `@uiblocks/core` (`packages/core`), built by `cargo xtask wasm` for
//! `wasm32-unknown-unknown` and bound with wasm-bindgen.
//!
//! These are the low-level exports the package's JavaScript wraps; a user calls the
//! package's functions (`compileUi`, `evaluateUiBlock`, `UiState`, …), not these. Their
//! contract is narrow on purpose:
//!
//! - Everything larger than a name crosses as JSON text: JavaScript's `JSON.parse` builds a
//!   page's objects faster than one boundary call per field, and the text is the wire
//!   shape of `driver.md`, written by the same writers as `uiblocks driver`'s answers
//!   ([`ui_driver::write_json`], [`ui_driver::write_blocks`]).
//! - Compiled blocks and page states stay on this side, behind handles ([`BlockHandle`],
//!   [`StateHandle`]) that the package attaches to the JavaScript objects, so evaluating a
//!   block never copies it back across the boundary.
//! - A failure is thrown as the JSON text of `{code, message}` (a spec failure code), which
//!   the package turns into a `UiFailure`; nothing here panics on input.
//! - Time comes from JavaScript's `performance.now()` (ui-core's `SystemClock` on `wasm32`),
//!   or a frozen clock when the caller asks for deterministic budgets.
//!
//! The same crate builds natively (an `rlib`), where the workspace lints, tests and
//! documents it; the functions then run as plain Rust.

mod bench;
mod compile;
mod driver;
mod failure;
mod options;
mod state;
mod texts;

#[doc(hidden)]
pub use bench::{bench_compile, bench_evaluate, bench_stream};
pub use compile::{
    BlockHandle, BlockList, Compiled, IncrementalCompiler, compile_block, compile_reply,
    fallback_text,
};
pub use driver::driver_answer;
#[doc(hidden)]
pub use driver::trap_for_tests;
pub use state::{
    StateHandle, evaluate, link_targets, query_arguments, query_fallback, resolve_choice,
    validated_state,
};
pub use texts::{catalog_json, catalog_texts, has_fence, limits_json, may_reference_host};
