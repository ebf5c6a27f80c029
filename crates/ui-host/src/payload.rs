//! What a page sends (`host.md` §2.1), with the shape checks of the frame layer
//! (`bad-request`).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use ui_core::text::utf16_len;
use ui_core::{HostLimits, Record};

fn check_len(field: &str, value: &str, max: u64) -> Result<(), String> {
    let n = utf16_len(value) as u64;
    if n == 0 || n > max {
        return Err(format!("`{field}` must be 1 to {max} characters long"));
    }
    Ok(())
}

fn check_keys<'a>(
    field: &str,
    keys: impl Iterator<Item = &'a String>,
    max: u64,
) -> Result<(), String> {
    for key in keys {
        if utf16_len(key) as u64 > max {
            return Err(format!(
                "a key of `{field}` is longer than {max} characters"
            ));
        }
    }
    Ok(())
}

/// `ui.query`: read one declared query of a stored block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "ChatUiQueryPayload"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryPayload {
    /// The chat.
    pub chat_id: String,
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The block revision the page drew.
    pub revision: String,
    /// The declared query name, with its `$`.
    pub query: String,
    /// The input values on screen.
    #[serde(default)]
    pub values: Record,
    /// The cursor (`<epoch>.<seq>`) of the change that made the page ask, for a
    /// change-driven request (`sync.md` §8.3); absent on a cadence read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
}

/// `ui.link`: resolve one link node of a stored block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "ChatUiLinkPayload"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkPayload {
    /// The chat.
    pub chat_id: String,
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The block revision.
    pub revision: String,
    /// The evaluated node id of the link.
    pub node_id: String,
    /// The input values on screen.
    #[serde(default)]
    pub values: Record,
    /// The read id of each query's reading on screen.
    #[serde(default)]
    pub reads: IndexMap<String, String>,
}

/// `chat.uiChoice`: send one Choice of a stored block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "ChatUiChoicePayload"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChoicePayload {
    /// The chat.
    pub chat_id: String,
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The block revision.
    pub revision: String,
    /// The evaluated id of the Choice.
    pub choice_id: String,
    /// The input values on screen.
    #[serde(default)]
    pub values: Record,
    /// The read id of each query's reading on screen.
    #[serde(default)]
    pub reads: IndexMap<String, String>,
}

impl QueryPayload {
    /// The frame layer's shape checks.
    ///
    /// # Errors
    /// A message for the `bad-request` wire error.
    pub fn validate(&self, limits: &HostLimits) -> Result<(), String> {
        if self.chat_id.is_empty() {
            return Err("`chatId` must not be empty".to_owned());
        }
        check_len("itemId", &self.item_id, limits.payload_id())?;
        check_len("blockId", &self.block_id, limits.payload_id())?;
        check_len("revision", &self.revision, limits.payload_key())?;
        check_len("query", &self.query, limits.payload_key())?;
        check_keys("values", self.values.keys(), limits.payload_key())
    }
}

impl LinkPayload {
    /// The frame layer's shape checks.
    ///
    /// # Errors
    /// A message for the `bad-request` wire error.
    pub fn validate(&self, limits: &HostLimits) -> Result<(), String> {
        if self.chat_id.is_empty() {
            return Err("`chatId` must not be empty".to_owned());
        }
        check_len("itemId", &self.item_id, limits.payload_id())?;
        check_len("blockId", &self.block_id, limits.payload_id())?;
        check_len("revision", &self.revision, limits.payload_key())?;
        check_len("nodeId", &self.node_id, limits.payload_id())?;
        check_keys("values", self.values.keys(), limits.payload_key())?;
        check_keys("reads", self.reads.keys(), limits.payload_key())?;
        for id in self.reads.values() {
            check_len("reads", id, limits.payload_key())?;
        }
        Ok(())
    }
}

impl ChoicePayload {
    /// The frame layer's shape checks.
    ///
    /// # Errors
    /// A message for the `bad-request` wire error.
    pub fn validate(&self, limits: &HostLimits) -> Result<(), String> {
        if self.chat_id.is_empty() {
            return Err("`chatId` must not be empty".to_owned());
        }
        check_len("itemId", &self.item_id, limits.payload_id())?;
        check_len("blockId", &self.block_id, limits.payload_id())?;
        check_len("revision", &self.revision, limits.payload_key())?;
        check_len("choiceId", &self.choice_id, limits.payload_id())?;
        check_keys("values", self.values.keys(), limits.payload_key())?;
        check_keys("reads", self.reads.keys(), limits.payload_key())?;
        for id in self.reads.values() {
            check_len("reads", id, limits.payload_key())?;
        }
        Ok(())
    }
}
