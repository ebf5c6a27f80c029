//! JSON Schemas (draft 2020-12, by schemars) of every wire type: `GET /api/schema` lists
//! them, `GET /api/schema/{type}` returns one, `uiblocks schema` prints them.
//!
//! Each schema is derived from the type that is serialised on the wire: the lower crates
//! derive `schemars::JsonSchema` behind their `schema` feature, which this crate enables;
//! the server's own types derive it here. `tests/schemas.rs` checks that every schema
//! accepts the real outputs of the conformance corpus and of the server.

use schemars::{JsonSchema, Schema, schema_for};
use serde_json::Value as Json;

use crate::routes::{
    CatalogAnswer, ChatList, DeltaBody, FinishBody, LoginBody, MessageBody, NewChatBody,
    NewReplyBody, RowsBody, RowsWritten,
};

/// The schema of `T`, titled `name`.
fn named<T: JsonSchema>(name: &'static str) -> (&'static str, Schema) {
    let mut schema = schema_for!(T);
    schema.insert("title".to_owned(), Json::from(name));
    (name, schema)
}

/// The schema of the `data:` of the stream frames named `event`, titled `name`.
fn frame(name: &'static str, event: &str) -> (&'static str, Schema) {
    let mut schema = ui_sync::Frame::data_schema(event).unwrap_or_else(|| Schema::from(false));
    schema.insert("title".to_owned(), Json::from(name));
    (name, schema)
}

/// The names `GET /api/schema/{type}` knows, with their schemas.
fn all() -> Vec<(&'static str, Schema)> {
    vec![
        named::<ui_host::QueryPayload>("ChatUiQueryPayload"),
        named::<ui_host::QueryReading>("ChatUiQueryReading"),
        named::<ui_host::LinkPayload>("ChatUiLinkPayload"),
        named::<ui_links::LinkResolution>("UiLinkResolution"),
        named::<ui_links::LinkTarget>("UiLinkTarget"),
        named::<ui_host::ChoicePayload>("ChatUiChoicePayload"),
        named::<ui_host::SendResult>("ChatSendResult"),
        named::<ui_host::UiQueryState>("ChatUiQueryState"),
        named::<ui_host::ChoiceAnswer>("ChatUiAnswer"),
        named::<ui_host::ChoiceOrigin>("ChatUiChoiceOrigin"),
        named::<ui_compiler::Block>("UiBlock"),
        named::<ui_core::View>("UiView"),
        named::<crate::view::ViewPayload>("ViewPayload"),
        named::<crate::view::ViewAnswer>("ViewAnswer"),
        named::<ui_sync::WireEvent>("WireEvent"),
        named::<ui_sync::PollBody>("PollBody"),
        frame("StreamHello", "hello"),
        frame("StreamChanges", "changes"),
        frame("StreamTick", "tick"),
        frame("StreamReset", "reset"),
        frame("StreamBye", "bye"),
        named::<crate::error::Envelope<'static>>("WireError"),
        named::<crate::store::Chat>("Chat"),
        named::<crate::store::ChatItem>("ChatItem"),
        named::<crate::store::ChatDetail>("ChatDetail"),
        named::<ChatList>("ChatList"),
        named::<NewChatBody>("NewChat"),
        named::<MessageBody>("Message"),
        named::<NewReplyBody>("NewReply"),
        named::<DeltaBody>("Delta"),
        named::<FinishBody>("Finish"),
        named::<crate::replies::ReplyProgress>("ReplyProgress"),
        named::<LoginBody>("Login"),
        named::<crate::auth::Principal>("Principal"),
        named::<CatalogAnswer>("Catalog"),
        named::<RowsBody>("Rows"),
        named::<RowsWritten>("RowsWritten"),
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
