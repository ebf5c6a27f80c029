//! Schemas in the JSON Schema subset of `driver.md`: `type` (`object`, `string`, `integer`,
//! `number`, `boolean`, `array`), `properties`, `required`, `additionalProperties: false`,
//! `enum`, `minLength`, `maxLength` (UTF-16 units), `minimum`, `maximum`, `items`.

use std::collections::HashMap;

use serde_json::Value as Json;
use ui_compiler::QuerySchemas;
use ui_core::Value;
use ui_core::text::utf16_len;

use crate::source::ValueSchema;

/// One schema of the subset, usable as a source's argument or result schema.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema(Json);

impl JsonSchema {
    /// Wraps `schema` after checking that its `type`s are in the subset.
    ///
    /// # Errors
    /// A message naming an unsupported `type`.
    pub fn new(schema: &Json) -> Result<Self, String> {
        fn types_ok(s: &Json) -> Result<(), String> {
            if let Some(t) = s.get("type") {
                match t.as_str() {
                    Some("object" | "string" | "integer" | "number" | "boolean" | "array") => {}
                    _ => return Err(format!("unsupported schema type {t}")),
                }
            }
            if let Some(props) = s.get("properties").and_then(Json::as_object) {
                for sub in props.values() {
                    types_ok(sub)?;
                }
            }
            if let Some(items) = s.get("items") {
                types_ok(items)?;
            }
            Ok(())
        }
        types_ok(schema)?;
        Ok(JsonSchema(schema.clone()))
    }
}

impl ValueSchema for JsonSchema {
    fn parse(&self, value: &Value) -> Result<Value, String> {
        check(&self.0, value, "value").map(|()| value.clone())
    }
}

/// Query sources registered only by JSON Schemas of their argument records (the driver's
/// `querySchemas`).
#[derive(Debug, Clone, Default)]
pub struct JsonSchemas {
    sources: HashMap<String, Json>,
}

impl JsonSchemas {
    /// Registers every `{source: schema}` entry of `schemas` (a JSON object).
    pub fn from_json(schemas: &Json) -> Self {
        let sources = schemas
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        JsonSchemas { sources }
    }
}

impl QuerySchemas for JsonSchemas {
    fn check(&self, source: &str, args: &Value) -> Option<Result<(), String>> {
        self.sources
            .get(source)
            .map(|schema| check(schema, args, "args"))
    }
}

/// Checks `value` against `schema`; the error names the path that failed.
pub fn check(schema: &Json, value: &Value, path: &str) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{path}: {what}"));
    if let Some(options) = schema.get("enum").and_then(Json::as_array)
        && !options.iter().any(|o| Value::from(o) == *value)
    {
        return fail("is not one of the allowed values");
    }
    match schema.get("type").and_then(Json::as_str) {
        Some("object") => {
            let Some(record) = value.as_record() else {
                return fail("expected an object");
            };
            let properties = schema.get("properties").and_then(Json::as_object);
            if let Some(required) = schema.get("required").and_then(Json::as_array) {
                for name in required.iter().filter_map(Json::as_str) {
                    if !record.contains_key(name) {
                        return Err(format!("{path}.{name}: is required"));
                    }
                }
            }
            for (key, item) in record {
                match properties.and_then(|p| p.get(key)) {
                    Some(sub) => check(sub, item, &format!("{path}.{key}"))?,
                    None if schema.get("additionalProperties") == Some(&Json::Bool(false)) => {
                        return Err(format!("{path}.{key}: is not allowed"));
                    }
                    None => {}
                }
            }
            Ok(())
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                return fail("expected an array");
            };
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(sub, item, &format!("{path}[{i}]"))?;
                }
            }
            Ok(())
        }
        Some("string") => {
            let Some(s) = value.as_str() else {
                return fail("expected a string");
            };
            let len = utf16_len(s) as f64;
            if schema
                .get("minLength")
                .and_then(Json::as_f64)
                .is_some_and(|m| len < m)
            {
                return fail("is too short");
            }
            if schema
                .get("maxLength")
                .and_then(Json::as_f64)
                .is_some_and(|m| len > m)
            {
                return fail("is too long");
            }
            Ok(())
        }
        Some(kind @ ("number" | "integer")) => {
            let Some(x) = value.as_f64() else {
                return fail("expected a number");
            };
            if kind == "integer" && (x.fract() != 0.0 || x.abs() > 9_007_199_254_740_991.0) {
                return fail("expected an integer");
            }
            if schema
                .get("minimum")
                .and_then(Json::as_f64)
                .is_some_and(|m| x < m)
            {
                return fail("is too small");
            }
            if schema
                .get("maximum")
                .and_then(Json::as_f64)
                .is_some_and(|m| x > m)
            {
                return fail("is too large");
            }
            Ok(())
        }
        Some("boolean") if value.as_bool().is_none() => fail("expected a boolean"),
        _ => Ok(()),
    }
}
