//! What the host answers: [`QueryReading`] and [`UiRefusal`], the one way a host gives a
//! stable code (`host.md` §8, §15).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use ui_core::text::truncate_utf16;
use ui_core::{HostCode, Value, WireCode};

/// The state of a reading: a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ReadingState {
    /// A value the source returned and the host accepted.
    Fresh,
    /// The read was allowed but produced nothing usable.
    Failed,
    /// The request was not admitted.
    Refused,
}

/// The answer to one live query read (`ChatUiQueryReading`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "ChatUiQueryReading", deny_unknown_fields)
)]
#[serde(rename_all = "camelCase")]
pub struct QueryReading {
    /// Fresh, failed or refused.
    pub state: ReadingState,
    /// The value (fresh only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The opaque id of this reading (fresh only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_id: Option<String>,
    /// When the reading was produced, in epoch milliseconds.
    pub read_at: u64,
    /// A stable reason code, when the failure carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why the reading failed or was refused, for people (≤ 240 UTF-16 units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How the reading follows change events, for a source with a change feed
    /// (`sync.md` §8.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<ReadingSync>,
    /// The seq of the newest change the reading does not reflect yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_by: Option<u64>,
    /// When the page may ask again for this change, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// The change-feed position of a reading (`sync.md` §8.3): the log head the host had seen
/// just before it started the read, and the opaque tokens the reading depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
#[serde(rename_all = "camelCase")]
pub struct ReadingSync {
    /// The log incarnation.
    pub epoch: String,
    /// The reading's version: the head seq just before the read started.
    pub version: u64,
    /// The scope token (hex).
    pub scope: String,
    /// The key tokens (hex); empty = the whole scope.
    pub keys: Vec<String>,
    /// `"partial"` or `"complete"`.
    pub feed: String,
}

/// A reason as readings carry it: an empty one gets a generic sentence. The service cuts
/// it to its configured `reason` limit when it answers ([`QueryReading::cut_reason`]).
pub(crate) fn reason_text(reason: &str) -> String {
    if reason.trim().is_empty() {
        return "The live data could not be read.".to_owned();
    }
    reason.to_owned()
}

impl QueryReading {
    /// A fresh reading.
    pub fn fresh(value: Value, read_id: String, read_at: u64) -> Self {
        QueryReading {
            state: ReadingState::Fresh,
            value: Some(value),
            read_id: Some(read_id),
            read_at,
            code: None,
            reason: None,
            sync: None,
            stale_by: None,
            retry_after_ms: None,
        }
    }

    /// A failed reading with an optional stable code.
    pub fn failed(read_at: u64, code: Option<&str>, reason: &str) -> Self {
        QueryReading {
            state: ReadingState::Failed,
            value: None,
            read_id: None,
            read_at,
            code: code.map(str::to_owned),
            reason: Some(reason_text(reason)),
            sync: None,
            stale_by: None,
            retry_after_ms: None,
        }
    }

    /// A refused reading with an optional stable code.
    pub fn refused(read_at: u64, code: Option<&str>, reason: &str) -> Self {
        QueryReading {
            state: ReadingState::Refused,
            ..QueryReading::failed(read_at, code, reason)
        }
    }

    /// The same reading with its reason cut to `limit` UTF-16 units (`HostLimits::reason`,
    /// 240 by default); the service answers every reading so cut.
    pub fn cut_reason(mut self, limit: u64) -> Self {
        if let Some(reason) = self.reason.as_mut() {
            let cut = truncate_utf16(reason, usize::try_from(limit).unwrap_or(usize::MAX));
            if cut.len() < reason.len() {
                *reason = cut.to_owned();
            }
        }
        self
    }

    /// Whether the reading is fresh.
    pub fn is_fresh(&self) -> bool {
        self.state == ReadingState::Fresh
    }
}

/// A fresh reading as the admission table caches it, with the JSON text of its answer
/// (the reading with its reason cut to the service's limit), written once when it was
/// cached: every request the cache answers with the reading as is sends these bytes.
#[derive(Debug)]
pub(crate) struct CachedReading {
    /// The reading as read.
    pub(crate) reading: QueryReading,
    /// `serde_json` text of the answer; `None` if writing it failed (then every answer
    /// writes the reading itself, as any other).
    json: Option<Arc<[u8]>>,
}

impl CachedReading {
    /// `reading`, with the JSON text of its answer under the reason limit `limit`.
    pub(crate) fn new(reading: QueryReading, limit: u64) -> Self {
        let json = serde_json::to_vec(&reading.clone().cut_reason(limit))
            .ok()
            .map(Arc::from);
        CachedReading { reading, json }
    }
}

/// What [`UiQueries::query_answer`](crate::UiQueries::query_answer) answers: a reading,
/// which for a cached reading served as is comes with the JSON text written when it was
/// cached, so answering it serializes nothing.
#[derive(Debug, Clone)]
pub struct QueryAnswer(Answer);

#[derive(Debug, Clone)]
enum Answer {
    /// A reading made for this request (its reason already cut).
    Made(Box<QueryReading>),
    /// A cached reading as is, and the reason limit of the answer.
    Cached(Arc<CachedReading>, u64),
}

/// The JSON text of a [`QueryAnswer`] ([`QueryAnswer::into_json`]).
#[derive(Debug, Clone)]
pub struct AnswerJson(JsonText);

#[derive(Debug, Clone)]
enum JsonText {
    Written(Vec<u8>),
    Shared(Arc<[u8]>),
}

impl AsRef<[u8]> for AnswerJson {
    fn as_ref(&self) -> &[u8] {
        match &self.0 {
            JsonText::Written(v) => v,
            JsonText::Shared(a) => a,
        }
    }
}

impl QueryAnswer {
    /// An answer made for the request: `reading` with its reason cut to `limit`.
    pub(crate) fn made(reading: QueryReading, limit: u64) -> Self {
        QueryAnswer(Answer::Made(Box::new(reading.cut_reason(limit))))
    }

    /// A cached reading answered as is, under the reason limit `limit`.
    pub(crate) fn cached(cached: Arc<CachedReading>, limit: u64) -> Self {
        QueryAnswer(Answer::Cached(cached, limit))
    }

    /// The reading answered.
    pub fn into_reading(self) -> QueryReading {
        match self.0 {
            Answer::Made(reading) => *reading,
            Answer::Cached(cached, limit) => cached.reading.clone().cut_reason(limit),
        }
    }

    /// The reading answered as `serde_json` writes it (`serde_json::to_vec` of
    /// [`QueryAnswer::into_reading`]); a cached reading's text is the one written when it
    /// was cached.
    ///
    /// # Errors
    /// When `serde_json` fails to write the reading.
    pub fn into_json(self) -> serde_json::Result<AnswerJson> {
        if let Answer::Cached(cached, _) = &self.0
            && let Some(json) = &cached.json
        {
            return Ok(AnswerJson(JsonText::Shared(Arc::clone(json))));
        }
        serde_json::to_vec(&self.into_reading()).map(|v| AnswerJson(JsonText::Written(v)))
    }
}

/// A failure a host raises with a stable code (`ChatUiRefusal`): from `authorize` it
/// refuses a reading, from `read` it fails one, from `link` it makes the link plain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct UiRefusal {
    /// The stable code (`host.md` §14, or the host's own).
    pub code: String,
    /// The message, passed through to `reason`.
    pub reason: String,
}

impl UiRefusal {
    /// A refusal with `code` and `reason`.
    pub fn new(code: impl Into<String>, reason: impl Into<String>) -> Self {
        UiRefusal {
            code: code.into(),
            reason: reason.into(),
        }
    }
}

/// How a host's callback failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// A failure with a stable code.
    #[error(transparent)]
    Refusal(#[from] UiRefusal),
    /// Any other failure: its message becomes the reason, with no code.
    #[error("{0}")]
    Message(String),
}

impl HostError {
    /// A failure without a code.
    pub fn message(message: impl Into<String>) -> Self {
        HostError::Message(message.into())
    }

    /// The stable code, for a [`UiRefusal`].
    pub fn code(&self) -> Option<&str> {
        match self {
            HostError::Refusal(r) => Some(&r.code),
            HostError::Message(_) => None,
        }
    }

    /// The message.
    pub fn reason(&self) -> &str {
        match self {
            HostError::Refusal(r) => &r.reason,
            HostError::Message(m) => m,
        }
    }
}

/// A refusal of a wire request (a choice): the wire code, the stable code when there is
/// one, and the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{wire}: {message}")]
pub struct WireRefusal {
    /// The wire error code (`refused-query`, `stale-ui-block`, …) or a `UiFailure` code.
    pub wire: String,
    /// The stable reason code, when there is one (`stale-read`, `access-unavailable`, …).
    pub code: Option<String>,
    /// The message.
    pub message: String,
}

impl WireRefusal {
    pub(crate) fn new(wire: WireCode, code: Option<HostCode>, message: impl Into<String>) -> Self {
        WireRefusal {
            wire: wire.as_str().to_owned(),
            code: code.map(|c| c.as_str().to_owned()),
            message: message.into(),
        }
    }

    pub(crate) fn from_host(error: &HostError) -> Self {
        WireRefusal {
            wire: WireCode::RefusedQuery.as_str().to_owned(),
            code: error.code().map(str::to_owned),
            message: error.reason().to_owned(),
        }
    }

    pub(crate) fn from_failure(failure: &ui_core::Failure) -> Self {
        WireRefusal {
            wire: failure.code.as_str().to_owned(),
            code: None,
            message: failure.message.to_string(),
        }
    }
}
