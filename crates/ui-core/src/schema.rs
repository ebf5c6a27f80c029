//! JSON Schemas of the types whose serde form is written by hand (feature `schema`): the
//! schema sits beside the type it describes, so a change of the wire form shows here.
//! The derived ones are on the types themselves.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::code::Code;
use crate::props::PropMap;
use crate::value::{Number, Record, Value};
use crate::view::ViewNode;

impl JsonSchema for Value {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Value".into()
    }

    /// Any JSON value: numbers are finite, as JSON's are.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!(true)
    }
}

impl JsonSchema for Number {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Number".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "number" })
    }
}

impl<V: JsonSchema> JsonSchema for PropMap<V> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("PropMap_{}", V::schema_name()).into()
    }

    /// A JSON object of `V`s.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": generator.subschema_for::<V>(),
        })
    }
}

impl JsonSchema for ViewNode {
    fn schema_name() -> Cow<'static, str> {
        "UiViewNode".into()
    }

    /// The shape its `Serialize` writes: `sourceId` only when it differs from `id`,
    /// `bindings` as prop → value, `action: true` on a pressable node.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "One evaluated node of a view tree.",
            "type": "object",
            "properties": {
                "id": { "type": "string" },
                "sourceId": { "type": "string" },
                "type": { "type": "string" },
                "props": generator.subschema_for::<Record>(),
                "bindings": generator.subschema_for::<Record>(),
                "children": {
                    "type": "array",
                    "items": generator.subschema_for::<ViewNode>(),
                },
                "complete": { "type": "boolean" },
                "fallback": { "type": "string" },
                "error": generator.subschema_for::<Code>(),
                "action": { "const": true },
            },
            "required": ["id", "type", "props", "bindings", "children", "complete", "fallback"],
            "additionalProperties": false,
        })
    }
}
