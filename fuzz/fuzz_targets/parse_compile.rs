//! Fuzz target `parse_compile`: see [`uiblocks_fuzz::parse_compile`] for the invariants it checks.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    uiblocks_fuzz::parse_compile(text);
});
