//! # ui-compiler
//!
//! The block language of uiblocks (work in progress).

pub mod expr;
