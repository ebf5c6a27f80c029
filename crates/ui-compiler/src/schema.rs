//! Schemas in the JSON Schema subset of `driver.md`: `type` (`object`, `string`, `integer`,
//! `number`, `boolean`, `array`), `properties`, `required`, `additionalProperties: false`,
//! `enum`, `minLength`, `maxLength`, `minimum`, `maximum`, `items`.
//!
//! They are read as the reference reads them (zod 4's `fromJSONSchema`). String lengths
//! count characters (Unicode code points, so a character outside the BMP counts once). A
//! `required` name that `properties` does not list is not required. An `enum` is the whole
//! schema where it appears: the value must equal one of its members, and `type` and its
//! keywords beside it are not checked (`{"type": "string", "enum": [1]}` takes `1`); members
//! are compared as literals, so an array or object member never matches.

use std::collections::HashMap;

use serde_json::Value as Json;
use ui_core::Value;

use crate::compile::QuerySchemas;

/// One schema of the subset, usable as a source's argument or result schema. It is compiled
/// once, when made, so that a check looks nothing up by name.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema {
    json: Json,
    compiled: Compiled,
}

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
        Ok(JsonSchema {
            json: schema.clone(),
            compiled: Compiled::new(schema),
        })
    }
}

impl JsonSchema {
    /// Checks `value` against the schema.
    ///
    /// # Errors
    /// A message naming the first path that fails (from `value`) and why.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        self.compiled.check(value, &Path::Root("value"))
    }

    /// The schema as it was given.
    pub fn json(&self) -> &Json {
        &self.json
    }
}

/// Query sources registered only by JSON Schemas of their argument records (the driver's
/// `querySchemas`).
#[derive(Debug, Clone, Default)]
pub struct JsonSchemas {
    sources: HashMap<String, Compiled>,
}

impl JsonSchemas {
    /// Registers every `{source: schema}` entry of `schemas` (a JSON object).
    pub fn from_json(schemas: &Json) -> Self {
        let sources = schemas
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), Compiled::new(v)))
                    .collect()
            })
            .unwrap_or_default();
        JsonSchemas { sources }
    }
}

impl QuerySchemas for JsonSchemas {
    fn check(&self, source: &str, args: &Value) -> Option<Result<(), String>> {
        self.sources
            .get(source)
            .map(|schema| schema.check(args, &Path::Root("args")))
    }
}

/// Checks `value` against `schema`; the error names the path that failed.
///
/// # Errors
/// A message naming the first path that fails and why.
pub fn check(schema: &Json, value: &Value, path: &str) -> Result<(), String> {
    Compiled::new(schema).check(value, &Path::Root(path))
}

/// Where a checked value sits, written out only when a check fails (a successful check
/// allocates no path text).
#[derive(Clone, Copy)]
enum Path<'a> {
    Root(&'a str),
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root(root) => f.write_str(root),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// A schema with every keyword the subset reads taken out once. Keywords that do not have
/// the expected JSON type are ignored, as when they are absent.
#[derive(Debug, Clone, PartialEq)]
struct Compiled {
    /// `enum`: the allowed values; when present, the only check.
    options: Option<Vec<Value>>,
    kind: Kind,
}

/// What `type` asks for, with its keywords.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// No `type`, or one outside the subset: anything passes.
    Any,
    Object {
        /// `properties`, in order (`None` when it is not an object).
        properties: Option<Vec<(String, Compiled)>>,
        /// The string entries of `required` (only those `properties` lists count).
        required: Vec<String>,
        /// `additionalProperties: false`.
        closed: bool,
    },
    Array {
        items: Option<Box<Compiled>>,
    },
    String {
        min: Option<f64>,
        max: Option<f64>,
    },
    Number {
        integer: bool,
        min: Option<f64>,
        max: Option<f64>,
    },
    Boolean,
}

impl Compiled {
    fn new(schema: &Json) -> Self {
        let number = |key: &str| schema.get(key).and_then(Json::as_f64);
        let kind = match schema.get("type").and_then(Json::as_str) {
            Some("object") => Kind::Object {
                properties: schema.get("properties").and_then(Json::as_object).map(|p| {
                    p.iter()
                        .map(|(k, sub)| (k.clone(), Compiled::new(sub)))
                        .collect()
                }),
                // Only the names `properties` lists are required.
                required: schema
                    .get("required")
                    .and_then(Json::as_array)
                    .map(|r| {
                        let listed = schema.get("properties").and_then(Json::as_object);
                        r.iter()
                            .filter_map(Json::as_str)
                            .filter(|name| listed.is_some_and(|p| p.contains_key(*name)))
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
                closed: schema.get("additionalProperties") == Some(&Json::Bool(false)),
            },
            Some("array") => Kind::Array {
                items: schema.get("items").map(|sub| Box::new(Compiled::new(sub))),
            },
            Some("string") => Kind::String {
                min: number("minLength"),
                max: number("maxLength"),
            },
            Some(kind @ ("number" | "integer")) => Kind::Number {
                integer: kind == "integer",
                min: number("minimum"),
                max: number("maximum"),
            },
            Some("boolean") => Kind::Boolean,
            _ => Kind::Any,
        };
        Compiled {
            options: schema
                .get("enum")
                .and_then(Json::as_array)
                .map(|o| o.iter().map(Value::from).collect()),
            kind,
        }
    }

    fn check(&self, value: &Value, path: &Path<'_>) -> Result<(), String> {
        let fail = |what: &str| Err(format!("{path}: {what}"));
        if let Some(options) = &self.options {
            let literal = |o: &Value| !matches!(o, Value::Array(_) | Value::Record(_));
            return if options.iter().any(|o| literal(o) && o == value) {
                Ok(())
            } else {
                fail("is not one of the allowed values")
            };
        }
        match &self.kind {
            Kind::Object {
                properties,
                required,
                closed,
            } => {
                let Some(record) = value.as_record() else {
                    return fail("expected an object");
                };
                for name in required {
                    if !record.contains_key(name) {
                        return Err(format!("{path}.{name}: is required"));
                    }
                }
                for (key, item) in record {
                    let sub = properties
                        .as_ref()
                        .and_then(|p| p.iter().find(|(k, _)| k == key));
                    match sub {
                        Some((_, sub)) => sub.check(item, &Path::Key(path, key))?,
                        None if *closed => return Err(format!("{path}.{key}: is not allowed")),
                        None => {}
                    }
                }
                Ok(())
            }
            Kind::Array { items: sub } => {
                let Some(items) = value.as_array() else {
                    return fail("expected an array");
                };
                if let Some(sub) = sub {
                    for (i, item) in items.iter().enumerate() {
                        sub.check(item, &Path::Index(path, i))?;
                    }
                }
                Ok(())
            }
            Kind::String { min, max } => {
                let Some(s) = value.as_str() else {
                    return fail("expected a string");
                };
                let len = s.chars().count() as f64;
                if min.is_some_and(|m| len < m) {
                    return fail("is too short");
                }
                if max.is_some_and(|m| len > m) {
                    return fail("is too long");
                }
                Ok(())
            }
            Kind::Number { integer, min, max } => {
                let Some(x) = value.as_f64() else {
                    return fail("expected a number");
                };
                if *integer && (x.fract() != 0.0 || x.abs() > 9_007_199_254_740_991.0) {
                    return fail("expected an integer");
                }
                if min.is_some_and(|m| x < m) {
                    return fail("is too small");
                }
                if max.is_some_and(|m| x > m) {
                    return fail("is too large");
                }
                Ok(())
            }
            Kind::Boolean if value.as_bool().is_none() => fail("expected a boolean"),
            Kind::Boolean | Kind::Any => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use ui_core::Value;

    use super::check;

    /// Each `(schema, value, accepted)` was answered by the reference (zod 4.6.5's
    /// `fromJSONSchema`), through the driver's `querySchemas`.
    #[test]
    fn the_subset_reads_as_the_reference_reads_it() {
        let cases = [
            // An enum is the whole schema: type and its keywords beside it are not checked.
            (
                json!({"type": "string", "minLength": 2, "enum": ["a", "b"]}),
                json!("a"),
                true,
            ),
            (
                json!({"type": "string", "minLength": 2, "enum": ["a", "b"]}),
                json!("c"),
                false,
            ),
            (
                json!({"type": "integer", "minimum": 5, "enum": [1, 2]}),
                json!(1),
                true,
            ),
            (
                json!({"type": "integer", "enum": [0.5, 1]}),
                json!(0.5),
                true,
            ),
            (json!({"type": "string", "enum": [1, 2]}), json!(1), true),
            (json!({"type": "string", "enum": [1, 2]}), json!("1"), false),
            (json!({"type": "string", "enum": []}), json!("a"), false),
            // Its members are literals: an array or object member never matches.
            (
                json!({"type": "array", "enum": [["a"]]}),
                json!(["a"]),
                false,
            ),
            (
                json!({"type": "object", "enum": [{"a": 1}]}),
                json!({"a": 1}),
                false,
            ),
            // String lengths count characters, not UTF-16 units.
            (
                json!({"type": "string", "maxLength": 2}),
                json!("😀a"),
                true,
            ),
            (
                json!({"type": "string", "minLength": 2}),
                json!("😀"),
                false,
            ),
            (json!({"type": "string", "maxLength": 1}), json!("é"), true),
            // A required name that `properties` does not list is not required.
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]}),
                json!({"a": "x"}),
                true,
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
                json!({}),
                false,
            ),
            (
                json!({"type": "integer"}),
                json!(9_007_199_254_740_991_i64),
                true,
            ),
            (
                json!({"type": "integer"}),
                json!(9_007_199_254_740_992_i64),
                false,
            ),
        ];
        for (schema, value, accepted) in cases {
            let got = check(&schema, &Value::from(&value), "value");
            assert_eq!(got.is_ok(), accepted, "{schema} {value}: {got:?}");
        }
    }
}
