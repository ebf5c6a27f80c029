//! The compiler's fast paths, behind the default-on `speedups` feature.
//!
//! Each fast path answers a common input shape without the general machinery, and answers
//! exactly as the general path would: the same value or failure, the same budget counters
//! (see each module for why). Where a fast path cannot vouch for the result it declines,
//! having charged nothing, and the general path runs.
//!
//! - [`literal`]: constant declaration literals (`$rows = [{…}, …]`) parsed straight into
//!   their value, without tokens or an expression tree.
//! - [`props`]: the commonest prop values, a quoted string without escapes and a small
//!   integer, without the expression lexer and parser.
//! - [`filter`]: a `@Filter` predicate prepared once per call and run per item.
//!
//! Without the feature only the general paths exist; CI runs the compiler's tests both
//! ways. With it, [`Paths::General`] selects the general paths explicitly, which the
//! property tests use as the reference for the fast ones.

#[cfg(feature = "speedups")]
pub(crate) mod filter;
#[cfg(feature = "speedups")]
pub(crate) mod literal;
#[cfg(feature = "speedups")]
pub(crate) mod props;

/// Which paths a parse or an evaluation takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Paths {
    /// The fast paths where they apply, the general ones elsewhere.
    #[cfg(feature = "speedups")]
    Fast,
    /// The general paths only: the reference the fast paths are checked against.
    #[cfg_attr(all(feature = "speedups", not(test)), allow(dead_code))]
    General,
}

impl Paths {
    /// The paths every public entry point takes: the fast ones when the feature is on.
    #[cfg(feature = "speedups")]
    pub(crate) const DEFAULT: Paths = Paths::Fast;
    /// The paths every public entry point takes: the general ones without the feature.
    #[cfg(not(feature = "speedups"))]
    pub(crate) const DEFAULT: Paths = Paths::General;

    /// Whether the fast paths are tried.
    #[cfg(feature = "speedups")]
    #[inline(always)]
    pub(crate) fn fast(self) -> bool {
        matches!(self, Paths::Fast)
    }
}
