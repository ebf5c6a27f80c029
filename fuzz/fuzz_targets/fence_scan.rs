//! Fuzz target `fence_scan`: see [`uiblocks_fuzz::fence_scan`] for the invariants it checks.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    uiblocks_fuzz::fence_scan(text);
});
