//! # ui-compiler
//!
//! The block language of uiblocks (`language.md`): an agent's reply goes in while it
//! streams, [`Block`]s with [`Node`]s and diagnostics come out, and a page's [`UiState`]
//! evaluates them to a [`View`] tree.
//!
//! - [`scan_fences`] finds the UI fences of a Markdown reply.
//! - [`UiCompiler`] compiles every fence of a reply, keeps unchanged fences between
//!   streaming previews and enforces the reply limits; [`compile_block`] compiles one body.
//! - [`lint_block`] finds mistakes the language lets through (warnings, never diagnostics).
//! - [`UiStream`] throttles previews while a reply streams (250 ms, injected clock).
//! - [`expr`] is the expression language: parse and evaluate under a work [`Budget`].
//! - [`UiState`] holds a block's variables and query readings; [`evaluate_block`] turns a
//!   block and a state into the view tree, and [`UiState::change`] / [`UiState::press`]
//!   apply a person's edits and presses.
//!
//! Nothing here fails on bad input: every problem is a [`Diagnostic`] with a stable
//! [`Code`](ui_core::Code), and a budget failure replaces only its block by a bounded
//! fallback. Offsets on the wire and in ids count UTF-16 units.
//!
//! ```
//! use ui_compiler::{CompileOptions, UiCompiler, UiState, evaluate_block};
//! use ui_core::{FrozenClock, UiLimits, Value};
//!
//! let reply = "Two jobs ran.\n```ui\n$verbose = false\n\
//!     <Summary tone=\"success\">{@Count([1, 2])} jobs passed</Summary>\n\
//!     <Switch value={$verbose}>Show logs</Switch>\n```\n";
//! let clock = FrozenClock(0.0);
//! let options = CompileOptions { is_final: true, clock: Some(&clock), ..CompileOptions::default() };
//! let blocks = UiCompiler::new().compile(reply, &options);
//! let block = &blocks[0];
//! assert_eq!(block.id, "reply:ui:14");
//! assert!(block.diagnostics.is_empty());
//! assert_eq!(block.fallback, "2 jobs passed\nShow logs");
//!
//! // A page keeps the state and evaluates the block to a view tree.
//! let mut state = UiState::new(block, UiLimits::DEFAULT).unwrap();
//! let view = evaluate_block(block, &state, UiLimits::DEFAULT, Some(&clock)).unwrap();
//! let switch = &view.nodes[1];
//! assert_eq!(switch.bindings["value"].variable, "$verbose");
//!
//! // A person flips the switch: only the declared variable changes.
//! state.change(switch, "value", &Value::Bool(true)).unwrap();
//! assert_eq!(state.values()["$verbose"], Value::Bool(true));
//! ```
//!
//! [`Budget`]: ui_core::Budget
//! [`Diagnostic`]: ui_core::Diagnostic
//!
//! Dependencies: ui-core, serde, serde_json, indexmap (insertion-ordered maps, as in
//! ui-core), thiserror, and memchr for the line scan of long replies; with the `schema`
//! feature, schemars derives the JSON Schema of the compiled block from [`Block`] itself. Its tests also use
//! proptest and insta (the fixtures of `tests/data/`, one snapshot per file).

mod block;
mod compile;
mod compiler;
mod eval;
pub mod expr;
mod fallback;
mod fence;
mod inputs;
pub mod lint;
mod schema;
mod speedups;
mod state;
mod stream;
mod syntax;
mod validate;

pub use block::{Block, Node, Query, TEXT_TYPE};
pub use compile::{CompileOptions, QuerySchemas, compile_block};
pub use compiler::{UiCompiler, compile_reply};
pub use eval::{Applied, evaluate_block};
// The fallback text of one node, for ui-fallback: not part of the API a host uses.
#[doc(hidden)]
pub use fallback::node_fallback;
pub use fence::{Fence, has_fence, may_reference_host, scan_fences, scan_fences_with};
pub use inputs::{input_names, input_values};
pub use lint::{
    Lint, LintCode, LintFix, LintOptions, QueryFields, lint_block, query_declarations, suggest_name,
};
pub use schema::{JsonSchema, JsonSchemas, check as check_json_schema};
pub use state::{Listener, Subscription, UiState};
pub use stream::{Preview, UiStream};
pub use ui_core::{View, ViewAction, ViewBinding, ViewNode};
pub use validate::{Selection, query_arguments, resolve_choice, validated_state, validated_view};
