//! # ui-links
//!
//! `File`, `Diff`, `Commit` and `Node` components name things the host owns; the host
//! decides whether each becomes a chip a person can open or stays plain text
//! (`host.md` §13). This crate derives the [`LinkTarget`]s of a completed block from its
//! evaluated view ([`link_targets`]) and defines the host's answer, [`LinkResolution`], with
//! the validation that refuses a chip without a valid target.
//!
//! ```
//! use ui_compiler::{CompileOptions, compile_block};
//! use ui_core::{FrozenClock, HostLimits, Record, UiLimits};
//! use ui_links::{LinkTarget, link_targets};
//!
//! let clock = FrozenClock(0.0);
//! let options = CompileOptions { is_final: true, clock: Some(&clock), ..CompileOptions::default() };
//! let block = compile_block(
//!     "$more = false\n<File path=\"src/lib.rs\" line=\"12\">entry</File>\n\
//!      <Show when={$more}><Commit sha=\"0123abc\"/></Show>",
//!     "b",
//!     &options,
//! );
//! let (input, readings) = (Record::default(), Record::default());
//! let targets =
//!     link_targets(&block, &input, &readings, UiLimits::DEFAULT, &HostLimits::DEFAULT, &clock)
//!         .unwrap();
//! // The Commit is hidden by a false Show, so only the File is a target.
//! assert_eq!(targets.len(), 1);
//! assert_eq!(
//!     targets.values().next().unwrap(),
//!     &LinkTarget::File { path: "src/lib.rs".into(), line: Some(12) }
//! );
//! ```
//!
//! With the `schema` feature, schemars derives the JSON Schemas of [`LinkTarget`] and
//! [`LinkResolution`] from the types.

mod resolution;
mod target;

pub use resolution::{LinkResolution, LinkState};
pub use target::{LinkTarget, LinkTargetError, link_targets};
