//! Fuzz target `compile_evaluate`: see [`uiblocks_fuzz::compile_evaluate`] for the invariants it checks.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    uiblocks_fuzz::compile_evaluate(text);
});
