//! # ui-compiler
//!
//! The block language of uiblocks (work in progress).

mod block;
mod compile;
mod compiler;
mod eval;
pub mod expr;
mod fallback;
mod fence;
mod inputs;
mod state;
mod stream;
mod syntax;

pub use block::{Block, Node, Query, TEXT_TYPE};
pub use compile::{CompileOptions, QuerySchemas, compile_block};
pub use compiler::{UiCompiler, compile_reply};
pub use eval::{Applied, View, ViewBinding, ViewNode, evaluate_block};
pub use fallback::node_fallback;
pub use fence::{Fence, has_fence, may_reference_host, scan_fences, scan_fences_with};
pub use inputs::input_values;
pub use state::{Listener, Subscription, UiState};
pub use stream::{Preview, UiStream};
