//! What JavaScript passes as options: compile options and limits, read from JSON text.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value as Json;
use ui_compiler::{CompileOptions, JsonSchemas};
use ui_core::{
    Clock, FrozenClock, Record, ReplyLimits, SystemClock, UiHostLimits, UiLimits, Value,
};
use wasm_bindgen::JsValue;

use crate::failure::{throw, thrown, unreadable};

/// Evaluation's time budget under the frozen clock, in ms (as the driver's `clock: "frozen"`).
const FROZEN_MILLISECONDS: u64 = 1_000_000_000;

/// Compile options as JavaScript gives them (`UiCompileOptions`); every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawOptions {
    /// The compile id (`"reply"`).
    id: Option<String>,
    /// Whether the text is all of the reply.
    #[serde(rename = "final")]
    is_final: Option<bool>,
    /// Partial `UI_LIMITS`.
    limits: Option<Json>,
    /// Partial `UI_REPLY_LIMITS`.
    reply_limits: Option<Json>,
    /// Partial `UI_HOST_LIMITS`.
    host_limits: Option<Json>,
    /// What `Image generated="latest"` resolves to.
    latest_attachment: Option<String>,
    /// The host's fence word (`"ui"`).
    fence_language: Option<String>,
    /// `{source: JSON Schema}` of the registered query sources.
    query_schemas: Option<Json>,
    /// `"frozen"` for deterministic budgets; otherwise `performance.now()`.
    clock: Option<String>,
}

/// Compile options read once, owning what [`CompileOptions`] borrows.
pub(crate) struct Options {
    /// The options with everything but the schemas and the clock, which are borrowed.
    base: CompileOptions<'static>,
    schemas: Option<JsonSchemas>,
    clock: TheClock,
}

/// The clock a caller chose.
#[derive(Debug, Clone)]
pub(crate) enum TheClock {
    /// `performance.now()`.
    Real(SystemClock),
    /// Always 0: budgets never run out of time.
    Frozen(FrozenClock),
    /// A JavaScript function answering milliseconds (the reference's `now` option).
    Js(JsClock),
}

/// A clock read by calling a JavaScript function; a call that throws or answers something
/// other than a number reads 0.
#[derive(Debug, Clone)]
pub(crate) struct JsClock(js_sys::Function);

impl Clock for JsClock {
    fn now_ms(&self) -> f64 {
        self.0
            .call0(&JsValue::UNDEFINED)
            .ok()
            .and_then(|v| v.as_f64())
            .filter(|x| x.is_finite())
            .unwrap_or(0.0)
    }
}

impl TheClock {
    /// `now` when given; else `"frozen"` freezes it, and anything else is the real clock.
    pub(crate) fn named(name: Option<&str>, now: Option<js_sys::Function>) -> Self {
        match now {
            Some(now) => TheClock::Js(JsClock(now)),
            None if name == Some("frozen") => TheClock::Frozen(FrozenClock(0.0)),
            None => TheClock::Real(SystemClock::new()),
        }
    }

    /// The clock to read.
    pub(crate) fn get(&self) -> &dyn Clock {
        match self {
            TheClock::Real(c) => c,
            TheClock::Frozen(c) => c,
            TheClock::Js(c) => c,
        }
    }

    /// `limits` as an evaluation under this clock uses them: a frozen clock lifts the time
    /// budget (its `milliseconds` would never be read), as the driver's does.
    pub(crate) fn eval_limits(&self, limits: UiLimits) -> UiLimits {
        match self {
            TheClock::Frozen(_) => limits
                .with("milliseconds", FROZEN_MILLISECONDS)
                .unwrap_or(limits),
            TheClock::Real(_) | TheClock::Js(_) => limits,
        }
    }
}

impl Options {
    /// Reads `json` (`""` and `"null"` are the defaults), with the clock `now` when given.
    pub(crate) fn read(json: &str, now: Option<js_sys::Function>) -> Result<Self, JsValue> {
        let raw: RawOptions = if json.is_empty() {
            RawOptions::default()
        } else {
            serde_json::from_str::<Option<RawOptions>>(
                &ui_core::text::json_lone_surrogates_replaced(json),
            )
            .map_err(|e| unreadable("the options", &e))?
            .unwrap_or_default()
        };
        let defaults = CompileOptions::default();
        let base = CompileOptions {
            id: raw.id.unwrap_or(defaults.id),
            is_final: raw.is_final.unwrap_or(true),
            limits: overrides(
                UiLimits::DEFAULT,
                raw.limits.as_ref(),
                UiLimits::with_overrides,
            )?,
            reply_limits: overrides(
                ReplyLimits::DEFAULT,
                raw.reply_limits.as_ref(),
                ReplyLimits::with_overrides,
            )?,
            host_limits: overrides(
                UiHostLimits::DEFAULT,
                raw.host_limits.as_ref(),
                UiHostLimits::with_overrides,
            )?,
            latest_attachment: raw.latest_attachment,
            query_schemas: None,
            fence_language: raw.fence_language.unwrap_or(defaults.fence_language),
            clock: None,
        };
        Ok(Options {
            base,
            schemas: raw.query_schemas.as_ref().map(JsonSchemas::from_json),
            clock: TheClock::named(raw.clock.as_deref(), now),
        })
    }

    /// The options to compile with, borrowing the schemas and the clock.
    pub(crate) fn get(&self) -> CompileOptions<'_> {
        CompileOptions {
            query_schemas: self
                .schemas
                .as_ref()
                .map(|s| s as &dyn ui_compiler::QuerySchemas),
            clock: Some(self.clock.get()),
            ..self.base.clone()
        }
    }
}

/// `defaults` with the partial `overrides` (a JSON record of wire keys) applied.
fn overrides<L>(
    defaults: L,
    overrides: Option<&Json>,
    apply: impl FnOnce(L, &Value) -> Result<L, ui_core::LimitsError>,
) -> Result<L, JsValue> {
    match overrides {
        None | Some(Json::Null) => Ok(defaults),
        Some(json) => apply(defaults, &Value::from(json)).map_err(|e| thrown(&e.into())),
    }
}

/// A JSON text read as a value (`""` is `null`). Half a surrogate pair, which
/// `JSON.stringify` writes as a lone `\u` escape, reads as U+FFFD, as the driver reads it.
pub(crate) fn value(json: &str, what: &str) -> Result<Value, JsValue> {
    if json.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&ui_core::text::json_lone_surrogates_replaced(json))
        .map_err(|e| unreadable(what, &e))
}

/// A JSON text read as a record of values (`""` and `null` are the empty record).
pub(crate) fn values(json: &str, what: &str) -> Result<Record, JsValue> {
    match value(json, what)? {
        Value::Null => Ok(Record::default()),
        Value::Record(r) => Ok(Arc::unwrap_or_clone(r)),
        _ => Err(throw("invalid_value", &format!("{what} is not a record"))),
    }
}
