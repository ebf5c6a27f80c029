//! JSON Schemas of the wire types whose serde form is written by hand (feature `schema`):
//! the epoch, the cursor and the bye reason. The derived ones are on the types themselves;
//! [`Frame::data_schema`](crate::Frame::data_schema) gives a stream frame's.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::stream::ByeReason;
use crate::types::{Cursor, Epoch};

/// 12 lowercase base32 characters.
const EPOCH_PATTERN: &str = "^[a-z2-7]{12}$";
/// `<epoch>.<seq>`, the seq of at most 16 digits.
const CURSOR_PATTERN: &str = "^[a-z2-7]{12}\\.[0-9]{1,16}$";

impl JsonSchema for Epoch {
    fn schema_name() -> Cow<'static, str> {
        "Epoch".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "One incarnation of the log: 12 lowercase base32 characters.",
            "type": "string",
            "pattern": EPOCH_PATTERN,
        })
    }
}

impl JsonSchema for Cursor {
    fn schema_name() -> Cow<'static, str> {
        "Cursor".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "`<epoch>.<seq>`: everything visible up to and including `seq` is known.",
            "type": "string",
            "pattern": CURSOR_PATTERN,
        })
    }
}

impl JsonSchema for ByeReason {
    fn schema_name() -> Cow<'static, str> {
        "ByeReason".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = [ByeReason::Rotate, ByeReason::SignedOut, ByeReason::Shutdown]
            .into_iter()
            .map(ByeReason::as_str)
            .collect();
        json_schema!({
            "description": "Why a stream ends.",
            "type": "string",
            "enum": names,
        })
    }
}
