//! [`Diagnostic`] and [`Failure`]: how every problem is reported.

use serde::{Deserialize, Serialize};

use crate::code::Code;

/// A half-open range `[start, end)` of offsets.
///
/// On the wire and in ids, offsets count UTF-16 code units; [`Diagnostic::bytes`] carries the
/// same range in UTF-8 bytes for Rust callers that slice the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TextRange {
    /// First offset.
    pub start: u32,
    /// Offset just past the end.
    pub end: u32,
}

impl TextRange {
    /// A range from `start` to `end`.
    pub const fn new(start: u32, end: u32) -> Self {
        TextRange { start, end }
    }
}

/// One problem found in a block, with a stable [`Code`].
///
/// Serialised in the wire shape of `language.md` §20:
/// `{code, message, start, end, nodeId?}` with UTF-16 offsets into the block source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// Text for people; not part of the contract.
    pub message: String,
    /// The range in UTF-16 code units.
    #[serde(flatten)]
    pub range: TextRange,
    /// The id of the node the problem belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// The same range in UTF-8 bytes of the source, when known (never on the wire).
    #[serde(skip)]
    pub bytes: Option<TextRange>,
}

impl Diagnostic {
    /// A diagnostic for `failure` over `range` (UTF-16 units).
    pub fn new(failure: Failure, range: TextRange) -> Self {
        Diagnostic {
            code: failure.code,
            message: failure.message.into(),
            range,
            node_id: None,
            bytes: None,
        }
    }

    /// The same diagnostic attached to the node `id`.
    pub fn with_node(mut self, id: impl Into<String>) -> Self {
        self.node_id = Some(id.into());
        self
    }

    /// The same diagnostic with its range in UTF-8 bytes.
    pub fn with_bytes(mut self, bytes: TextRange) -> Self {
        self.bytes = Some(bytes);
        self
    }
}

/// A failure of an operation: a stable [`Code`] and a message for people (upstream's
/// `UiFailure`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{code}: {message}")]
pub struct Failure {
    /// The stable code.
    pub code: Code,
    /// Text for people; not part of the contract.
    pub message: Box<str>,
}

impl Failure {
    /// A failure with `code` and `message`.
    pub fn new(code: Code, message: impl Into<Box<str>>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape() {
        let d = Diagnostic::new(
            Failure::new(Code::UnclosedTag, "Tag is not closed"),
            TextRange::new(3, 9),
        )
        .with_node("reply:ui:0:3")
        .with_bytes(TextRange::new(3, 12));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": "unclosed_tag", "message": "Tag is not closed",
                "start": 3, "end": 9, "nodeId": "reply:ui:0:3"})
        );
        let back: Diagnostic = serde_json::from_value(json).unwrap();
        assert_eq!(back.bytes, None);
        assert_eq!(back.range, d.range);
    }
}
