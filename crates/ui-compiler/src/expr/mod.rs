//! Expressions (in progress).
