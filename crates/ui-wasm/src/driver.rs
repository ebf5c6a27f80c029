//! The JSON-lines driver of `driver.md`, one line at a time (`packages/core/bin/driver.mjs`).

use wasm_bindgen::prelude::*;

/// The answer to one request line, without its line feed: the bytes `uiblocks driver`
/// writes for it ([`ui_driver::answer_line`]). A blank line (Rust's `trim`) answers `""`:
/// the driver skips it.
#[wasm_bindgen(js_name = driverAnswer)]
pub fn driver_answer(line: &[u8]) -> String {
    let Ok(line) = std::str::from_utf8(line) else {
        return internal("the line is not UTF-8");
    };
    if line.trim().is_empty() {
        return String::new();
    }
    let mut buffer = Vec::with_capacity(1024);
    match ui_driver::answer_line(line, &mut buffer) {
        Ok(()) => String::from_utf8(buffer).unwrap_or_else(|_| internal("the answer is not UTF-8")),
        Err(e) => internal(&e.to_string()),
    }
}

/// The answer of an operation this side could not write (never expected).
fn internal(message: &str) -> String {
    serde_json::json!({"op": null, "ok": false, "error": {"code": "internal", "message": message}})
        .to_string()
}

/// Panics, which traps the module: for the package's test that the glue answers
/// `internal` and instantiates the module again. Harmless in use: a caller can only stop
/// its own instance, which the glue then replaces.
#[wasm_bindgen(js_name = __trapForTests)]
pub fn trap_for_tests() {
    panic!("a trap asked for by a test");
}
