//! Failures as they cross to JavaScript.

use ui_core::Failure;
use wasm_bindgen::JsValue;

/// A failure as the value thrown to JavaScript: the JSON text of `{code, message}`, which
/// the package turns into a `UiFailure`.
pub(crate) fn thrown(failure: &Failure) -> JsValue {
    throw(failure.code.as_str(), &failure.message)
}

/// `{code, message}` as the thrown JSON text.
pub(crate) fn throw(code: &str, message: &str) -> JsValue {
    let text = serde_json::json!({"code": code, "message": message}).to_string();
    JsValue::from_str(&text)
}

/// A value this side cannot read (JSON that does not parse, or parses to the wrong shape):
/// `invalid_value`, naming what was read.
pub(crate) fn unreadable(what: &str, error: &serde_json::Error) -> JsValue {
    throw("invalid_value", &format!("{what} is not readable: {error}"))
}

/// What a writer of JSON failed with, as the `internal` failure it is (never expected: every
/// value written here is a tree of strings, numbers and string-keyed maps).
pub(crate) fn unwritable(error: &std::io::Error) -> JsValue {
    throw("internal", &format!("cannot write the answer: {error}"))
}

/// The JSON text of `value`, written by ui-driver's writer.
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, JsValue> {
    let mut buffer = Vec::new();
    ui_driver::write_json(value, &mut buffer).map_err(|e| unwritable(&e))?;
    String::from_utf8(buffer).map_err(|_| throw("internal", "the answer is not UTF-8"))
}

/// `bytes` as text: the package passes long texts as UTF-8 bytes (`TextEncoder`, which
/// writes a lone surrogate as U+FFFD), one native copy instead of wasm-bindgen's loop over
/// the characters. Bytes that are not UTF-8 are `invalid_value`.
pub(crate) fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, JsValue> {
    std::str::from_utf8(bytes)
        .map_err(|e| throw("invalid_value", &format!("{what} is not UTF-8: {e}")))
}
