//! # ui-core
//!
//! The bottom layer of uiblocks: the [`Value`]s blocks compute with, every limit of the spec
//! ([`UiLimits`] and its sibling groups), the metered [`Budget`], the stable [`Code`]s and
//! [`Diagnostic`]s, the component [`catalog`] with its prop validation and agent-facing
//! texts, and [`Props`], the small map a compiled node keeps its props in. It does no IO and
//! depends only on serde, serde_json, indexmap, foldhash and thiserror, and with the `schema`
//! feature on schemars, to derive the JSON Schemas of its wire types (codes, diagnostics,
//! views) from the types themselves.
//!
//! ```
//! use ui_core::{catalog, Budget, Code, FrozenClock, UiLimits, Value};
//!
//! // Values print exactly as JavaScript prints them.
//! let v = Value::from_json_str(r#"{"b": 0.1, "2": 1e21, "a": -0}"#).unwrap();
//! assert_eq!(v.to_js_json(), r#"{"2":1e+21,"b":0.1,"a":0}"#);
//!
//! // Every copy into the interpreter is metered.
//! let clock = FrozenClock(0.0);
//! let mut budget = Budget::new(UiLimits::DEFAULT.with("iterations", 2).unwrap(), &clock);
//! assert_eq!(budget.copy_value(&v).unwrap_err().code, Code::BudgetExceeded);
//!
//! // The catalog validates props and normalises them.
//! let file = catalog::lookup("File").unwrap();
//! let props = Value::from_json_str(r#"{"path": "src/main.rs", "line": "148"}"#).unwrap();
//! let normalised = file.validate(props.as_record().unwrap()).unwrap();
//! assert_eq!(normalised["line"], Value::from(148));
//! ```
//!
//! [`indexmap`] keeps records in insertion order, which every fallback text and query
//! signature depends on; it is the map `serde_json`'s own `preserve_order` feature uses.
//! Records hash with [`foldhash`]'s seeded fast hasher ([`RecordHasher`]): a block's compile
//! hashes many short prop names, which a fast hasher does much cheaper than the standard
//! library's SipHash (`benches/NOTES.md`), and foldhash is the hasher `hashbrown` itself
//! defaults to, well kept and dependency-free.

mod budget;
pub mod catalog;
mod code;
mod diag;
pub mod inputs;
pub mod limits;
pub mod props;
#[cfg(feature = "schema")]
mod schema;
pub mod text;
mod token;
mod value;
pub mod view;

pub use budget::{Budget, Clock, FrozenClock, ManualClock, SystemClock};
pub use code::{Code, HostCode, WireCode};
pub use diag::{Diagnostic, Failure, TextRange};
pub use limits::{HostLimits, LimitsError, ReplyLimits, SyncLimits, UiHostLimits, UiLimits};
pub use props::{PropMap, Props, ReadProps};
pub use token::Token;
pub use value::{FORBIDDEN_KEYS, Kind, Number, Record, Value, is_forbidden_key, number_text};
pub use view::{View, ViewAction, ViewBinding, ViewNode};

// Helpers the compiler shares with this crate (the declaration-name check, the record
// hasher and preallocation, canonical array indices): public for the workspace, not part of
// the API a host uses. The same holds for the `#[doc(hidden)]` items of `text` and `inputs`.
#[doc(hidden)]
pub use budget::check_key;
#[doc(hidden)]
pub use value::{RecordHasher, array_index, for_each_in_js_order, record_with_capacity};

/// The catalog version every compiled block carries (`UI_CATALOG_VERSION`).
pub const CATALOG_VERSION: u32 = 1;

/// The default fence info string of a UI block (`UI_FENCE_LANGUAGE`).
pub const FENCE_LANGUAGE: &str = "ui";
