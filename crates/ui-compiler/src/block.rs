//! The compiled block in its wire shape (`language.md` §20): [`Block`], [`Node`], [`Query`].
//!
//! Field names are camelCase on the wire. Ranges are UTF-16 offsets; the UTF-8 byte ranges
//! are kept beside them for Rust callers and never serialised.

use std::borrow::Cow;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use ui_core::{Code, Diagnostic, PropMap, Props, Record, TextRange};

use crate::expr::Expr;

/// One compiled UI block (`UiBlock`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "UiBlock", deny_unknown_fields))]
#[serde(rename_all = "camelCase")]
pub struct Block {
    /// `<compile id>:ui:<fence start>`.
    pub id: String,
    /// The catalog version the block was compiled against (always 1 from this compiler).
    pub catalog_version: u32,
    /// Set by a host on a final block, never by the compiler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Offset of the opening fence line in the reply (UTF-16 units).
    pub start: u32,
    /// Offset just past the closing fence line, or the reply's end (UTF-16 units).
    pub end: u32,
    /// Whether the fence was closed or the reply is final.
    pub complete: bool,
    /// Local state: each declared `$name` with its literal default.
    pub defaults: Record,
    /// Live queries: each `$name = @Query(...)` declaration.
    pub queries: IndexMap<String, Query>,
    /// The top-level nodes.
    pub nodes: Vec<Node>,
    /// Problems found, at most `UI_LIMITS.diagnostics`.
    pub diagnostics: Vec<Diagnostic>,
    /// Plain text for clients that cannot draw the block.
    pub fallback: String,
}

/// One declared live query (`UiQuery`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "UiQuery", deny_unknown_fields))]
#[serde(rename_all = "camelCase")]
pub struct Query {
    /// The registered source name.
    pub source: String,
    /// The arguments evaluated with the defaults.
    pub args: Record,
    /// The argument expression, present only when the arguments read state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<Expr>,
}

/// The `type` of a text node.
pub const TEXT_TYPE: &str = "$text";

/// One compiled node (`UiNode`): a component or a `$text`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "UiNode", deny_unknown_fields))]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// `<block id>:<start>`.
    pub id: String,
    /// The component name, or `$text`. Unknown names are kept as written. Borrowed from
    /// the catalog for the names it knows, so that compiling a node allocates no name.
    #[serde(rename = "type")]
    pub kind: Cow<'static, str>,
    /// Props whose values are constants, folded at compile time.
    pub props: Props,
    /// Props (and a text node's `text`) that are evaluated against state.
    pub expressions: PropMap<Expr>,
    /// Bound props: prop name to the `$name` of local state it writes.
    pub bindings: PropMap<String>,
    /// Child nodes.
    pub children: Vec<Node>,
    /// Whether the node's closing tag (or `/>`) arrived.
    pub complete: bool,
    /// Plain text for clients that cannot draw the node.
    pub fallback: String,
    /// The node's compile-time failure, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Code>,
    /// Start offset in the block source (UTF-16 units).
    pub start: u32,
    /// End offset in the block source (UTF-16 units).
    pub end: u32,
    /// The same range in UTF-8 bytes of the block source (never on the wire).
    #[serde(skip)]
    pub bytes: TextRange,
}

impl Node {
    /// Whether this is a text node.
    pub fn is_text(&self) -> bool {
        self.kind == TEXT_TYPE
    }

    /// Visits this node and its descendants in pre-order.
    pub fn walk<'a>(&'a self, visit: &mut dyn FnMut(&'a Node)) {
        visit(self);
        for child in &self.children {
            child.walk(visit);
        }
    }
}

impl Block {
    /// Visits every node of the block in pre-order.
    pub fn walk<'a>(&'a self, visit: &mut dyn FnMut(&'a Node)) {
        for node in &self.nodes {
            node.walk(visit);
        }
    }

    /// Number of nodes in the block's tree.
    pub fn node_count(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |_| n += 1);
        n
    }
}

impl AsRef<Block> for Block {
    fn as_ref(&self) -> &Block {
        self
    }
}
