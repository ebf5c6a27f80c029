//! The `GET /ui/poll` body (`sync.md` §4.3), its per-session rate limit (§4.1), and the
//! stream slot counters of `GET /ui/events` (§4.2), all without IO.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Deserializer, Serialize};
use ui_core::SyncLimits;

use crate::error::SyncError;
use crate::types::{Cursor, Epoch, ReadAfter, ResetReason, WireEvent};

/// `Retry-After` (seconds) of a stream refused for the session's or the process's stream
/// limit (`sync.md` §4.2).
pub const STREAM_RETRY_AFTER_SECS: u64 = 30;

/// The reset member of a poll body: `{"reason": …}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct PollReset {
    /// Why the client must re-read what it shows.
    pub reason: ResetReason,
}

/// The `200` body of `/ui/poll`:
/// `{"epoch","cursor","events","reset":null|{"reason"}}`. On a reset, `events` is empty and
/// `cursor` is the head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct PollBody {
    /// The log's epoch.
    pub epoch: Epoch,
    /// The snapshot head: the client's new cursor.
    #[serde(deserialize_with = "cursor_from_str")]
    pub cursor: Cursor,
    /// Collapsed visible events after the request's cursor, by seq.
    pub events: Vec<WireEvent>,
    /// Present when the client must reset.
    pub reset: Option<PollReset>,
}

fn cursor_from_str<'de, D: Deserializer<'de>>(d: D) -> Result<Cursor, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
}

impl PollBody {
    /// The body answering a catch-up read (its cursor carries the log's epoch).
    pub fn new(read: &ReadAfter) -> Self {
        match read {
            ReadAfter::Events { cursor, events } => PollBody {
                epoch: cursor.epoch.clone(),
                cursor: cursor.clone(),
                events: events.clone(),
                reset: None,
            },
            ReadAfter::Reset { cursor, reason } => PollBody {
                epoch: cursor.epoch.clone(),
                cursor: cursor.clone(),
                events: Vec::new(),
                reset: Some(PollReset { reason: *reason }),
            },
        }
    }

    /// The JSON text.
    pub fn to_json(&self) -> String {
        // Strings and integers only: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a body as a page receives it.
    ///
    /// # Errors
    /// [`SyncError::Invalid`] when the text is not a poll body.
    pub fn parse(json: &str) -> Result<Self, SyncError> {
        serde_json::from_str(json).map_err(|e| SyncError::Invalid(format!("poll body: {e}")))
    }
}

impl From<&ReadAfter> for PollBody {
    fn from(read: &ReadAfter) -> Self {
        PollBody::new(read)
    }
}

/// A token bucket for one session's polls: `pollRate` requests per second with a burst of
/// `pollBurst` (4/s, 8). Pure: the caller passes the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimiter {
    /// Refill in thousandths of a token per ms (= tokens per second).
    rate: u64,
    /// Capacity in thousandths of a token.
    capacity: u64,
    /// Current level in thousandths of a token.
    level: u64,
    last_ms: u64,
}

const MILLI: u64 = 1_000;

impl RateLimiter {
    /// A full bucket at `now_ms`.
    pub fn new(limits: &SyncLimits, now_ms: u64) -> Self {
        let capacity = limits.poll_burst().saturating_mul(MILLI);
        RateLimiter {
            rate: limits.poll_rate(),
            capacity,
            level: capacity,
            last_ms: now_ms,
        }
    }

    /// Takes one token at `now_ms`, or says how many ms until one is available (the
    /// request is then answered `429`; see [`retry_after_secs`]).
    ///
    /// # Errors
    /// The wait in ms when the bucket is empty.
    pub fn check(&mut self, now_ms: u64) -> Result<(), u64> {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now_ms);
        self.level = self
            .level
            .saturating_add(elapsed.saturating_mul(self.rate))
            .min(self.capacity);
        if self.level >= MILLI {
            self.level -= MILLI;
            Ok(())
        } else {
            Err((MILLI - self.level).div_ceil(self.rate.max(1)))
        }
    }
}

/// A wait in ms as a `Retry-After` value: whole seconds, rounded up, at least 1.
pub fn retry_after_secs(wait_ms: u64) -> u64 {
    wait_ms.div_ceil(MILLI).max(1)
}

/// Why a stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlotRefused {
    /// The session holds `sessionStreams` (6) streams already: `429`.
    #[error("too many streams for this session")]
    Session,
    /// The process holds `processStreams` (10,000) streams already: `503`.
    #[error("too many streams in this process")]
    Process,
}

impl SlotRefused {
    /// The HTTP status: `429` for the session limit, `503` for the process limit.
    pub fn status(self) -> u16 {
        match self {
            SlotRefused::Session => 429,
            SlotRefused::Process => 503,
        }
    }

    /// The `Retry-After` value in seconds.
    pub fn retry_after_secs(self) -> u64 {
        STREAM_RETRY_AFTER_SECS
    }
}

#[derive(Debug, Default)]
struct Slots {
    total: u64,
    by_session: HashMap<Arc<str>, u64>,
}

/// Open-stream counters per session and per process. Cheap to clone (shared); a granted
/// [`StreamSlot`] gives its place back when dropped.
#[derive(Debug, Clone)]
pub struct StreamSlots {
    inner: Arc<Mutex<Slots>>,
    per_session: u64,
    per_process: u64,
}

/// One open stream's place in [`StreamSlots`], released on drop.
#[derive(Debug)]
pub struct StreamSlot {
    inner: Arc<Mutex<Slots>>,
    session: Arc<str>,
}

fn lock(m: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    // The counters stay consistent even if a holder panicked.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl StreamSlots {
    /// Counters with the `sessionStreams` and `processStreams` limits.
    pub fn new(limits: &SyncLimits) -> Self {
        StreamSlots {
            inner: Arc::default(),
            per_session: limits.session_streams(),
            per_process: limits.process_streams(),
        }
    }

    /// A place for one more stream of `session`.
    ///
    /// # Errors
    /// [`SlotRefused`] when the session or the process is at its limit.
    pub fn try_acquire(&self, session: &str) -> Result<StreamSlot, SlotRefused> {
        let mut slots = lock(&self.inner);
        let held = slots.by_session.get(session).copied().unwrap_or(0);
        if held >= self.per_session {
            return Err(SlotRefused::Session);
        }
        if slots.total >= self.per_process {
            return Err(SlotRefused::Process);
        }
        let session: Arc<str> = session.into();
        *slots.by_session.entry(session.clone()).or_default() += 1;
        slots.total += 1;
        Ok(StreamSlot {
            inner: self.inner.clone(),
            session,
        })
    }

    /// Open streams in the process.
    pub fn open(&self) -> u64 {
        lock(&self.inner).total
    }

    /// Open streams of `session`.
    pub fn open_for(&self, session: &str) -> u64 {
        lock(&self.inner)
            .by_session
            .get(session)
            .copied()
            .unwrap_or(0)
    }
}

impl StreamSlot {
    /// The session holding the slot.
    pub fn session(&self) -> &str {
        &self.session
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut slots = lock(&self.inner);
        slots.total = slots.total.saturating_sub(1);
        if let Some(n) = slots.by_session.get_mut(&self.session) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                slots.by_session.remove(&self.session);
            }
        }
    }
}
