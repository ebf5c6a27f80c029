//! JSON Schemas (draft 2020-12, by schemars) of every wire type: `GET /api/schema` lists
//! them, `GET /api/schema/{type}` returns one.
//!
//! The types of the lower crates do not depend on schemars, so this module keeps a mirror
//! of each with the same serde attributes; a test round-trips real values through every
//! mirror (with `deny_unknown_fields`), so a mirror that drifts fails the build's tests.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, schema_for};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

type Record = Map<String, Json>;

/// `ChatUiQueryPayload`: the body of `POST /ui/query`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ChatUiQueryPayload")]
pub struct QueryPayloadSchema {
    /// The chat.
    pub chat_id: String,
    /// The assistant item (1..=256 UTF-16 units).
    pub item_id: String,
    /// The block (1..=256).
    pub block_id: String,
    /// The block revision the page drew (1..=128).
    pub revision: String,
    /// The declared query name with its `$` (1..=128).
    pub query: String,
    /// The input values on screen (keys ≤ 128).
    #[serde(default)]
    pub values: Record,
    /// The cursor of the change that made the page ask (a change-driven request,
    /// `sync.md` §8.3); absent on a cadence read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
}

/// `ChatUiLinkPayload`: the body of `POST /ui/link`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ChatUiLinkPayload")]
pub struct LinkPayloadSchema {
    /// The chat.
    pub chat_id: String,
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The block revision.
    pub revision: String,
    /// The evaluated node id of the link (1..=256).
    pub node_id: String,
    /// The input values on screen.
    #[serde(default)]
    pub values: Record,
    /// The read id of each query's reading on screen.
    #[serde(default)]
    pub reads: BTreeMap<String, String>,
}

/// `ChatUiChoicePayload`: the body of `POST /ui/choice`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ChatUiChoicePayload")]
pub struct ChoicePayloadSchema {
    /// The chat.
    pub chat_id: String,
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The block revision.
    pub revision: String,
    /// The evaluated id of the Choice (1..=256).
    pub choice_id: String,
    /// The input values on screen.
    #[serde(default)]
    pub values: Record,
    /// The read id of each query's reading on screen.
    #[serde(default)]
    pub reads: BTreeMap<String, String>,
}

/// Fresh, failed or refused: a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadingStateSchema {
    /// A value the host accepted.
    Fresh,
    /// The read was allowed but produced nothing usable.
    Failed,
    /// The request was not admitted.
    Refused,
}

/// `ChatUiQueryReading`: the answer of `POST /ui/query`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ChatUiQueryReading")]
pub struct ReadingSchema {
    /// Fresh, failed or refused.
    pub state: ReadingStateSchema,
    /// The value (fresh only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Json>,
    /// The opaque read id (fresh only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_id: Option<String>,
    /// When it was produced (epoch ms).
    pub read_at: u64,
    /// A stable reason code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why, for people (≤ 240 UTF-16 units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How the reading follows change events (sources with a change feed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<ReadingSyncSchema>,
    /// The seq of the newest change the reading does not reflect yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_by: Option<u64>,
    /// When the page may ask again for this change, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// The change-feed position of a reading (`sync.md` §8.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadingSyncSchema {
    /// The log's epoch.
    pub epoch: String,
    /// The head seq just before the read started.
    pub version: u64,
    /// The scope token (hex).
    pub scope: String,
    /// The key tokens (hex); empty = the whole scope.
    pub keys: Vec<String>,
    /// `partial` or `complete`.
    pub feed: String,
}

/// `UiLinkTarget`: what a link names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", deny_unknown_fields)]
#[schemars(title = "UiLinkTarget")]
pub enum LinkTargetSchema {
    /// A file, optionally at a line.
    File {
        /// 1..=4,096 UTF-16 units.
        path: String,
        /// A positive line number.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<u64>,
    },
    /// The changes of one file.
    Diff {
        /// 1..=4,096 UTF-16 units.
        path: String,
    },
    /// A commit.
    Commit {
        /// 7..=64 hexadecimal digits.
        sha: String,
    },
    /// Something the host knows by id.
    Node {
        /// 1..=256 UTF-16 units.
        id: String,
    },
}

/// Chip or plain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkStateSchema {
    /// An openable chip.
    Chip,
    /// Plain text.
    Plain,
}

/// `UiLinkResolution` (`ChatUiLinkReading`): the answer of `POST /ui/link`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "UiLinkResolution")]
pub struct LinkResolutionSchema {
    /// Chip or plain.
    pub state: LinkStateSchema,
    /// What a chip opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<LinkTargetSchema>,
    /// The host's name for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Path relative to `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_path: Option<String>,
    /// The host view that opens it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_id: Option<String>,
    /// The project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Whether a changed file is staged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<bool>,
    /// Whether a changed file has conflicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicted: Option<bool>,
    /// Why it is plain: a stable code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why it is plain, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One frozen block: first readings, link resolutions and the text fallback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrozenBlockSchema {
    /// The block revision.
    pub revision: String,
    /// The first reading of each query.
    pub readings: BTreeMap<String, ReadingSchema>,
    /// Link resolutions by evaluated node id; always present, `{}` when the host resolves
    /// no links or the block has no link targets.
    pub links: BTreeMap<String, LinkResolutionSchema>,
    /// The text fallback with the first values.
    pub fallback: String,
}

/// `ChatUiQueryState`: an item's `uiQueries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ChatUiQueryState")]
pub struct UiQueryStateSchema {
    /// The chat that wrote the item.
    pub author_chat_id: String,
    /// Frozen blocks by block id.
    pub blocks: BTreeMap<String, FrozenBlockSchema>,
}

/// `ChatUiChoiceOrigin`: where a choice message came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ChatUiChoiceOrigin")]
pub struct ChoiceOriginSchema {
    /// The assistant item.
    pub item_id: String,
    /// The block.
    pub block_id: String,
    /// The revision the person saw.
    pub revision: String,
    /// The evaluated id of the Choice.
    pub choice_id: String,
    /// The Choice's label.
    pub label: String,
    /// When the item was created (epoch ms).
    pub source_at: u64,
    /// Whether a newer reply exists.
    pub older: bool,
    /// The input values on screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Record>,
    /// When the choice was made (epoch ms).
    pub at: u64,
}

/// `ChatSendResult`: the answer of `POST /ui/choice`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ChatSendResult")]
pub struct SendResultSchema {
    /// Whether the message waits behind a running reply.
    pub queued: bool,
    /// The turn that handles it, if one started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// `ChatUiAnswer`: an item's `uiAnswers[blockId]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "ChatUiAnswer")]
pub struct AnswerSchema {
    /// Where it came from.
    #[serde(flatten)]
    pub origin: ChoiceOriginSchema,
    /// What sending answered.
    #[serde(flatten)]
    pub sent: SendResultSchema,
}

/// A diagnostic: `{code, message, start, end, nodeId?}` (UTF-16 offsets).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiagnosticSchema {
    /// The stable code.
    pub code: String,
    /// Text for people.
    pub message: String,
    /// First offset.
    pub start: u32,
    /// Offset past the end.
    pub end: u32,
    /// The node it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// One declared live query of a block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockQuerySchema {
    /// The registered source name.
    pub source: String,
    /// The arguments evaluated with the defaults.
    pub args: Record,
    /// The argument expression when it reads state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<Json>,
}

/// One compiled node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSchema {
    /// `<block id>:<start>`.
    pub id: String,
    /// The component name, or `$text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Constant props.
    pub props: Record,
    /// Props evaluated against state.
    pub expressions: Record,
    /// Bound props: prop → `$name`.
    pub bindings: BTreeMap<String, String>,
    /// Children.
    pub children: Vec<NodeSchema>,
    /// Whether the node is complete.
    pub complete: bool,
    /// Plain-text fallback.
    pub fallback: String,
    /// The compile-time failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Start offset in the block source.
    pub start: u32,
    /// End offset.
    pub end: u32,
}

/// `UiBlock`: one compiled block (an item's `ui[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "UiBlock")]
pub struct BlockSchema {
    /// `<item id>:ui:<offset>`.
    pub id: String,
    /// The catalog version.
    pub catalog_version: u32,
    /// SHA-256 hex of the block, on final blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Offset of the opening fence in the reply.
    pub start: u32,
    /// Offset past the closing fence.
    pub end: u32,
    /// Whether the block is complete.
    pub complete: bool,
    /// Declared local state with defaults.
    pub defaults: Record,
    /// Declared live queries.
    pub queries: BTreeMap<String, BlockQuerySchema>,
    /// Top-level nodes.
    pub nodes: Vec<NodeSchema>,
    /// Problems found.
    pub diagnostics: Vec<DiagnosticSchema>,
    /// Plain text of the block.
    pub fallback: String,
}

/// One evaluated node of a view tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewNodeSchema {
    /// The evaluated id (`:<index>` per enclosing `Each`).
    pub id: String,
    /// The compiled node's id, when it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// The component name or `$text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Evaluated props.
    pub props: Record,
    /// Bound props with their current values.
    pub bindings: Record,
    /// Children.
    pub children: Vec<ViewNodeSchema>,
    /// Whether the node is complete.
    pub complete: bool,
    /// Plain-text fallback.
    pub fallback: String,
    /// Why the node cannot be drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `true` on a pressable node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<bool>,
}

/// `UiView`: an evaluated block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "UiView")]
pub struct ViewSchema {
    /// Top-level views.
    pub nodes: Vec<ViewNodeSchema>,
    /// Problems of this evaluation.
    pub diagnostics: Vec<DiagnosticSchema>,
}

/// A change event on the wire (`sync.md` §3.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "WireEvent")]
pub struct WireEventSchema {
    /// Its position in the log.
    pub seq: u64,
    /// The source name.
    pub source: String,
    /// The scope token.
    pub scope: String,
    /// The key token, or null for the whole source.
    pub key: Option<String>,
    /// The writer's request source, or null.
    pub rs: Option<String>,
    /// The writer's clock (epoch ms).
    pub at: i64,
    /// How many writes it stands for.
    pub n: u32,
}

/// `{reason}` of a poll reset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PollResetSchema {
    /// `invalid`, `epoch`, `ahead`, `expired`, `too-far-behind` or `server`.
    pub reason: String,
}

/// The answer of `GET /ui/poll` (`sync.md` §4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "PollBody")]
pub struct PollBodySchema {
    /// The log's epoch.
    pub epoch: String,
    /// The new cursor `<epoch>.<seq>`.
    pub cursor: String,
    /// Collapsed visible events.
    pub events: Vec<WireEventSchema>,
    /// Present when the client must re-read what it shows.
    pub reset: Option<PollResetSchema>,
}

/// `data` of a `hello` frame of `GET /ui/events` (`sync.md` §4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "StreamHello")]
pub struct StreamHelloSchema {
    /// The protocol version (1).
    pub v: u64,
    /// The log's epoch.
    pub epoch: String,
    /// The resume cursor, or the head.
    pub cursor: String,
    /// The heartbeat interval in ms.
    pub tick_ms: u64,
}

/// `data` of a `changes` frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "StreamChanges")]
pub struct StreamChangesSchema {
    /// The resume point after this frame (also its `id`).
    pub cursor: String,
    /// Collapsed visible events, by seq.
    pub events: Vec<WireEventSchema>,
}

/// `data` of a `tick` frame: a heartbeat and a real resume point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "StreamTick")]
pub struct StreamTickSchema {
    /// The connection's cursor (also the frame's `id`).
    pub cursor: String,
}

/// `data` of a `reset` frame: re-read everything shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "StreamReset")]
pub struct StreamResetSchema {
    /// `invalid`, `epoch`, `ahead`, `expired`, `too-far-behind` or `server`.
    pub reason: String,
    /// The resume point.
    pub cursor: String,
}

/// `data` of a `bye` frame (no `id`): the server ends the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "StreamBye")]
pub struct StreamByeSchema {
    /// `rotate`, `signed-out` or `shutdown`.
    pub reason: String,
    /// When to reconnect (absent after `signed-out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_ms: Option<u64>,
}

/// `{code, message, reason?}` of an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetailSchema {
    /// The stable code.
    pub code: String,
    /// Text for people.
    pub message: String,
    /// The stable reason code of a UI refusal (`stale-read`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The body of every error response: `{"error": {code, message, reason?}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "WireError")]
pub struct WireErrorSchema {
    /// The error.
    pub error: ErrorDetailSchema,
}

/// The names `GET /api/schema/{type}` knows, with their schemas.
fn all() -> Vec<(&'static str, Schema)> {
    use crate::routes::{
        CatalogAnswer, ChatList, DeltaBody, FinishBody, LoginBody, MessageBody, NewChatBody,
        NewReplyBody, RowsBody, RowsWritten,
    };
    vec![
        ("ChatUiQueryPayload", schema_for!(QueryPayloadSchema)),
        ("ChatUiQueryReading", schema_for!(ReadingSchema)),
        ("ChatUiLinkPayload", schema_for!(LinkPayloadSchema)),
        ("UiLinkResolution", schema_for!(LinkResolutionSchema)),
        ("UiLinkTarget", schema_for!(LinkTargetSchema)),
        ("ChatUiChoicePayload", schema_for!(ChoicePayloadSchema)),
        ("ChatSendResult", schema_for!(SendResultSchema)),
        ("ChatUiQueryState", schema_for!(UiQueryStateSchema)),
        ("ChatUiAnswer", schema_for!(AnswerSchema)),
        ("ChatUiChoiceOrigin", schema_for!(ChoiceOriginSchema)),
        ("UiBlock", schema_for!(BlockSchema)),
        ("UiView", schema_for!(ViewSchema)),
        ("ViewPayload", schema_for!(crate::view::ViewPayload)),
        ("ViewAnswer", schema_for!(crate::view::ViewAnswer)),
        ("WireEvent", schema_for!(WireEventSchema)),
        ("PollBody", schema_for!(PollBodySchema)),
        ("StreamHello", schema_for!(StreamHelloSchema)),
        ("StreamChanges", schema_for!(StreamChangesSchema)),
        ("StreamTick", schema_for!(StreamTickSchema)),
        ("StreamReset", schema_for!(StreamResetSchema)),
        ("StreamBye", schema_for!(StreamByeSchema)),
        ("WireError", schema_for!(WireErrorSchema)),
        ("Chat", schema_for!(crate::store::Chat)),
        ("ChatItem", schema_for!(crate::store::ChatItem)),
        ("ChatDetail", schema_for!(crate::store::ChatDetail)),
        ("ChatList", schema_for!(ChatList)),
        ("NewChat", schema_for!(NewChatBody)),
        ("Message", schema_for!(MessageBody)),
        ("NewReply", schema_for!(NewReplyBody)),
        ("Delta", schema_for!(DeltaBody)),
        ("Finish", schema_for!(FinishBody)),
        ("ReplyProgress", schema_for!(crate::replies::ReplyProgress)),
        ("Login", schema_for!(LoginBody)),
        ("Principal", schema_for!(crate::auth::Principal)),
        ("Catalog", schema_for!(CatalogAnswer)),
        ("Rows", schema_for!(RowsBody)),
        ("RowsWritten", schema_for!(RowsWritten)),
    ]
}

/// The names of every wire type with a schema, sorted.
pub fn wire_types() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = all().into_iter().map(|(n, _)| n).collect();
    names.sort_unstable();
    names
}

/// The JSON Schema of the wire type `name`.
pub fn wire_schema(name: &str) -> Option<Json> {
    all()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s.to_value())
}
