//! The server side of one `GET /ui/events` connection (`sync.md` §4.2) as a sans-IO state
//! machine.
//!
//! The HTTP layer owns the IO: it subscribes to the hub, runs the catch-up read, and then
//! drives a [`StreamConn`] with what happens (a hub batch, hub lag, a timer, sign-out,
//! shutdown). Every input returns the [`Frame`]s to write, in order; [`Frame::to_sse`] is
//! their exact wire text. [`StreamConn::next_deadline`] says when to call
//! [`StreamConn::poll_timers`] next.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use ui_core::SyncLimits;

use crate::types::{AudienceSet, Batch, Cursor, Epoch, Op, ReadAfter, ResetReason, Seq, WireEvent};

/// The protocol version announced in `hello` (`"v":1`).
pub const STREAM_PROTOCOL: u64 = 1;

/// The resume position of a connection: the `Last-Event-ID` header if present, else the
/// `cursor` query parameter, else none. The header wins because a browser's automatic
/// reconnect re-sends the URL it was built with together with the newest id it saw; a blank
/// header counts as absent (a browser sends none after an empty id). A `cursor` parameter,
/// once given, is the resume cursor as written, so a blank one (or a repeated one, which the
/// server reads as blank) does not parse and is reset `invalid` (`sync.md` §3.8 step 3), as
/// on `/ui/poll`.
pub fn resume_cursor<'a>(
    last_event_id: Option<&'a str>,
    cursor_param: Option<&'a str>,
) -> Option<&'a str> {
    last_event_id
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .or(cursor_param)
}

/// A connection's lifetime in ms: the stream lifetime plus `unit` (uniform in `[0, 1)`, from
/// the caller's random source) times the lifetime jitter, so rotations spread out.
pub fn stream_lifetime(limits: &SyncLimits, unit: f64) -> u64 {
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.0
    };
    limits.stream_lifetime() + (limits.stream_lifetime_jitter() as f64 * unit) as u64
}

/// Why a stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ByeReason {
    /// The stream reached its lifetime; reconnect at once with the cursor.
    Rotate,
    /// The session ended; do not reconnect.
    SignedOut,
    /// The server is shutting down; reconnect after `retryMs`.
    Shutdown,
}

impl ByeReason {
    /// The wire name: `rotate`, `signed-out`, `shutdown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ByeReason::Rotate => "rotate",
            ByeReason::SignedOut => "signed-out",
            ByeReason::Shutdown => "shutdown",
        }
    }

    /// The reason named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "rotate" => ByeReason::Rotate,
            "signed-out" => ByeReason::SignedOut,
            "shutdown" => ByeReason::Shutdown,
            _ => return None,
        })
    }
}

/// One unit written to an event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame {
    /// `retry: <ms>`: the browser's own reconnect delay, sent once at the start, as the
    /// first line of the `hello` frame's block.
    Retry {
        /// The delay in ms.
        ms: u64,
    },
    /// `hello`: the connection is live from `cursor`.
    Hello {
        /// The log's epoch.
        epoch: Epoch,
        /// The resume cursor, or the head when there was none.
        cursor: Cursor,
        /// The heartbeat interval in ms.
        tick_ms: u64,
    },
    /// `changes`: collapsed events; every visible event up to `cursor` has been sent.
    Changes {
        /// The resume point after this frame.
        cursor: Cursor,
        /// The events, by seq.
        events: Vec<WireEvent>,
    },
    /// `tick`: the heartbeat, and a real resume point.
    Tick {
        /// The connection's cursor.
        cursor: Cursor,
    },
    /// `reset`: re-read everything shown, continue from `cursor`.
    Reset {
        /// The resume point.
        cursor: Cursor,
        /// Why.
        reason: ResetReason,
    },
    /// `bye`: the server ends the stream.
    Bye {
        /// Why.
        reason: ByeReason,
        /// When to reconnect (none for `signed-out`).
        retry_ms: Option<u64>,
    },
}

/// `data` of a `hello` frame: the connection is live from `cursor`.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "StreamHello", deny_unknown_fields)
)]
struct HelloData<'a> {
    /// The protocol version ([`STREAM_PROTOCOL`]).
    v: u64,
    /// The log's epoch.
    #[cfg_attr(feature = "schema", schemars(with = "Epoch"))]
    epoch: &'a str,
    /// The resume cursor, or the head.
    cursor: &'a Cursor,
    /// The heartbeat interval in ms.
    #[serde(rename = "tickMs")]
    tick_ms: u64,
}

/// `data` of a `changes` frame.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "StreamChanges", deny_unknown_fields)
)]
struct ChangesData<'a> {
    /// The resume point after this frame (also its `id`).
    cursor: &'a Cursor,
    /// Collapsed visible events, by seq.
    events: &'a [WireEvent],
}

/// `data` of a `tick` frame: a heartbeat and a real resume point.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "StreamTick", deny_unknown_fields)
)]
struct TickData<'a> {
    /// The connection's cursor (also the frame's `id`).
    cursor: &'a Cursor,
}

/// `data` of a `reset` frame: re-read everything shown.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "StreamReset", deny_unknown_fields)
)]
struct ResetData<'a> {
    /// Why.
    #[cfg_attr(feature = "schema", schemars(with = "ResetReason"))]
    reason: &'a str,
    /// The resume point.
    cursor: &'a Cursor,
}

/// `data` of a `bye` frame (no `id`): the server ends the stream.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "StreamBye", deny_unknown_fields)
)]
struct ByeData<'a> {
    /// Why.
    #[cfg_attr(feature = "schema", schemars(with = "ByeReason"))]
    reason: &'a str,
    /// When to reconnect, in ms (absent after `signed-out`).
    #[serde(rename = "retryMs", skip_serializing_if = "Option::is_none")]
    retry_ms: Option<u64>,
}

#[derive(Deserialize)]
struct FrameIn {
    #[serde(default)]
    epoch: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default, rename = "tickMs")]
    tick_ms: Option<u64>,
    #[serde(default)]
    events: Option<Vec<WireEvent>>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default, rename = "retryMs")]
    retry_ms: Option<u64>,
}

impl Frame {
    /// The SSE `event:` name (`""` for [`Frame::Retry`], which has none).
    pub fn event(&self) -> &'static str {
        match self {
            Frame::Retry { .. } => "",
            Frame::Hello { .. } => "hello",
            Frame::Changes { .. } => "changes",
            Frame::Tick { .. } => "tick",
            Frame::Reset { .. } => "reset",
            Frame::Bye { .. } => "bye",
        }
    }

    /// The SSE `id:`: only `hello`, `changes`, `tick` and `reset` carry one, so a resume
    /// point is never invented.
    pub fn id(&self) -> Option<&Cursor> {
        match self {
            Frame::Hello { cursor, .. }
            | Frame::Changes { cursor, .. }
            | Frame::Tick { cursor }
            | Frame::Reset { cursor, .. } => Some(cursor),
            Frame::Retry { .. } | Frame::Bye { .. } => None,
        }
    }

    /// The one-line JSON `data:` (`""` for [`Frame::Retry`]).
    pub fn data(&self) -> String {
        let json = match self {
            Frame::Retry { .. } => return String::new(),
            Frame::Hello {
                epoch,
                cursor,
                tick_ms,
            } => serde_json::to_string(&HelloData {
                v: STREAM_PROTOCOL,
                epoch: epoch.as_str(),
                cursor,
                tick_ms: *tick_ms,
            }),
            Frame::Changes { cursor, events } => {
                serde_json::to_string(&ChangesData { cursor, events })
            }
            Frame::Tick { cursor } => serde_json::to_string(&TickData { cursor }),
            Frame::Reset { cursor, reason } => serde_json::to_string(&ResetData {
                reason: reason.as_str(),
                cursor,
            }),
            Frame::Bye { reason, retry_ms } => serde_json::to_string(&ByeData {
                reason: reason.as_str(),
                retry_ms: *retry_ms,
            }),
        };
        // These shapes hold only strings and integers: serialising cannot fail.
        json.unwrap_or_default()
    }

    /// The exact SSE text: for [`Frame::Retry`] the `retry:` line only, with no blank line,
    /// so that it opens the block of the `hello` that always follows it (`sync.md` §4.2's
    /// bytes); otherwise `id:` (when the frame has one), `event:`, one `data:` line, and the
    /// blank line that ends the frame.
    pub fn to_sse(&self) -> String {
        let mut out = String::new();
        if let Frame::Retry { ms } = self {
            let _ = writeln!(out, "retry: {ms}");
            return out;
        }
        if let Some(id) = self.id() {
            let _ = writeln!(out, "id: {id}");
        }
        let _ = write!(out, "event: {}\ndata: {}\n\n", self.event(), self.data());
        out
    }

    /// Reads a frame as a page receives it: the SSE `event` name and its `data`. Unknown
    /// events and data that do not fit are `None` (the page ignores them).
    pub fn parse(event: &str, data: &str) -> Option<Frame> {
        let input: FrameIn = serde_json::from_str(data).ok()?;
        let cursor = || input.cursor.as_deref()?.parse::<Cursor>().ok();
        Some(match event {
            "hello" => {
                let cursor = cursor()?;
                let epoch = match &input.epoch {
                    Some(e) => e.parse().ok()?,
                    None => cursor.epoch.clone(),
                };
                Frame::Hello {
                    epoch,
                    cursor,
                    tick_ms: input.tick_ms.unwrap_or(0),
                }
            }
            "changes" => Frame::Changes {
                cursor: cursor()?,
                events: input.events.unwrap_or_default(),
            },
            "tick" => Frame::Tick { cursor: cursor()? },
            "reset" => Frame::Reset {
                cursor: cursor()?,
                reason: serde_json::from_value(serde_json::Value::String(input.reason?)).ok()?,
            },
            "bye" => Frame::Bye {
                reason: ByeReason::parse(input.reason.as_deref()?)?,
                retry_ms: input.retry_ms,
            },
            _ => return None,
        })
    }
}

#[cfg(feature = "schema")]
impl Frame {
    /// The JSON Schema of the `data:` of a frame whose `event:` is `event` (`hello`,
    /// `changes`, `tick`, `reset`, `bye`); `None` for any other name.
    pub fn data_schema(event: &str) -> Option<schemars::Schema> {
        Some(match event {
            "hello" => schemars::schema_for!(HelloData<'static>),
            "changes" => schemars::schema_for!(ChangesData<'static>),
            "tick" => schemars::schema_for!(TickData<'static>),
            "reset" => schemars::schema_for!(ResetData<'static>),
            "bye" => schemars::schema_for!(ByeData<'static>),
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for [`StreamConn::start`].
    New,
    /// Delivering.
    Live,
    /// A `bye` went out.
    Closed,
}

type GroupKey = (String, String, Option<String>);

/// One `/ui/events` connection (`sync.md` §4.2 steps 1–6 and its endings).
///
/// Order of use: subscribe to the hub, then `read_after(resume)`, then [`StreamConn::start`]
/// with that answer, then feed hub batches with [`StreamConn::on_batch`] and call
/// [`StreamConn::poll_timers`] at [`StreamConn::next_deadline`]. After
/// [`StreamConn::on_lagged`] (or when [`StreamConn::needs_catch_up`] is true) run
/// `read_after(cursor())` and pass the answer to [`StreamConn::on_catch_up`]. Close the
/// socket once [`StreamConn::is_closed`] is true.
#[derive(Debug, Clone)]
pub struct StreamConn {
    audiences: AudienceSet,
    epoch: Epoch,
    resume: Option<Cursor>,
    limits: SyncLimits,
    phase: Phase,
    /// The end of the last hub position processed; only moves forward once live.
    cursor: Seq,
    pending: HashMap<GroupKey, WireEvent>,
    flush_at: Option<u64>,
    last_sent_ms: u64,
    ends_at_ms: u64,
    lagged: bool,
}

impl StreamConn {
    /// A connection for `audiences` on the log `epoch`, resuming at `resume` (see
    /// [`resume_cursor`]), opened at `now_ms`, ending after `lifetime_ms` (see
    /// [`stream_lifetime`]).
    pub fn new(
        audiences: AudienceSet,
        epoch: Epoch,
        resume: Option<&str>,
        now_ms: u64,
        lifetime_ms: u64,
        limits: SyncLimits,
    ) -> Self {
        StreamConn {
            audiences,
            epoch,
            resume: resume.and_then(|s| s.parse().ok()),
            limits,
            phase: Phase::New,
            cursor: Seq(0),
            pending: HashMap::new(),
            flush_at: None,
            last_sent_ms: now_ms,
            ends_at_ms: now_ms.saturating_add(lifetime_ms),
            lagged: false,
        }
    }

    /// The connection's cursor: every visible event up to it has been sent or is pending.
    pub fn cursor(&self) -> Cursor {
        self.at(self.cursor)
    }

    /// Whether a `bye` went out; the caller closes the socket.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Whether the caller must run `read_after(cursor())` and pass it to
    /// [`StreamConn::on_catch_up`] (after hub lag, or a batch fed before `start`).
    pub fn needs_catch_up(&self) -> bool {
        self.lagged && self.phase == Phase::Live
    }

    /// How many collapsed entries wait for the next `changes` frame.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Replaces the audience set after an `audience-changed` signal (`sync.md` §4.2,
    /// §5.1); it applies to every row processed from now on, so the caller feeds the rows
    /// up to the signal first. When an audience was lost, what is pending (all of it from
    /// rows up to the signal, visible when they were processed) goes out now, followed by a
    /// `reset` (reason `server`, id = the cursor): the page re-reads what it shows and
    /// learns it lost access; no event of the lost audience is sent afterwards. A set that
    /// only grew sends nothing.
    pub fn set_audiences(&mut self, audiences: AudienceSet, now_ms: u64) -> Vec<Frame> {
        let lost = self.audiences.iter().any(|a| !audiences.contains(a));
        self.audiences = audiences;
        let mut out = Vec::new();
        if !lost || self.phase != Phase::Live {
            return out;
        }
        self.flush(now_ms, &mut out);
        out.push(Frame::Reset {
            cursor: self.cursor(),
            reason: ResetReason::Server,
        });
        self.last_sent_ms = now_ms;
        out
    }

    /// Ends the stream early as at the end of its lifetime: flush, then
    /// `bye {"reason":"rotate","retryMs":0}` (the client reconnects at once with its cursor
    /// and is authenticated afresh).
    pub fn rotate(&mut self, now_ms: u64) -> Vec<Frame> {
        self.bye(ByeReason::Rotate, Some(0), now_ms)
    }

    fn at(&self, seq: Seq) -> Cursor {
        Cursor {
            epoch: self.epoch.clone(),
            seq,
        }
    }

    /// Starts the stream with the catch-up answer of `read_after(resume)` (its cursor is the
    /// snapshot head): `retry`, `hello` (id = the resume cursor, or the head when there was
    /// none or it did not parse), then one `changes` frame (id = head) when there are events,
    /// or a `reset` frame (id = head). Live rows with seq ≤ head are dropped from now on.
    pub fn start(&mut self, catch_up: ReadAfter, now_ms: u64) -> Vec<Frame> {
        if self.phase != Phase::New {
            return Vec::new();
        }
        let head = catch_up.cursor().clone();
        debug_assert_eq!(head.epoch, self.epoch, "the catch-up is of another log");
        self.epoch = head.epoch.clone();
        let hello = self.resume.clone().unwrap_or_else(|| head.clone());
        let mut out = vec![
            Frame::Retry {
                ms: self.limits.reconnect_min(),
            },
            Frame::Hello {
                epoch: self.epoch.clone(),
                cursor: hello,
                tick_ms: self.limits.tick(),
            },
        ];
        self.phase = Phase::Live;
        self.cursor = head.seq;
        match catch_up {
            ReadAfter::Events { events, .. } => {
                if !events.is_empty() {
                    out.extend(self.changes_frames(events, head.seq));
                }
            }
            ReadAfter::Reset { reason, .. } => out.push(Frame::Reset {
                cursor: head,
                reason,
            }),
        }
        self.last_sent_ms = now_ms;
        out
    }

    /// Takes one hub batch: drops rows at or below the cursor and rows outside the audience
    /// set, collects the rest (collapsed by source, scope and key), opens the flush window
    /// on the first pending row, flushes early at the frame key limit, and turns a visible
    /// `op = reset` row into pending `changes` plus a `reset` frame (reason `server`).
    pub fn on_batch(&mut self, batch: &Batch, now_ms: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        match self.phase {
            Phase::Closed => return out,
            Phase::New => {
                // Batches belong after the catch-up; recover with another one.
                self.lagged = true;
                return out;
            }
            Phase::Live => {}
        }
        for row in &batch.rows {
            if row.seq <= self.cursor {
                continue;
            }
            if !self.audiences.contains(&row.row.audience) {
                self.cursor = row.seq;
                continue;
            }
            if row.row.op == Op::Reset {
                self.flush(now_ms, &mut out);
                self.cursor = row.seq;
                out.push(Frame::Reset {
                    cursor: self.at(row.seq),
                    reason: ResetReason::Server,
                });
                self.last_sent_ms = now_ms;
                continue;
            }
            self.merge(WireEvent::from(row));
            self.cursor = row.seq;
            if self.flush_at.is_none() {
                self.flush_at = Some(now_ms.saturating_add(self.limits.flush_window()));
            }
            if self.pending.len() as u64 >= self.limits.frame_keys() {
                self.flush(now_ms, &mut out);
            }
        }
        self.cursor = self.cursor.max(batch.last);
        out
    }

    /// The hub reported lag: batches were lost. The caller runs `read_after(cursor())` and
    /// passes the answer to [`StreamConn::on_catch_up`] before taking more batches.
    pub fn on_lagged(&mut self) {
        if self.phase != Phase::Closed {
            self.lagged = true;
        }
    }

    /// Takes the answer of `read_after(cursor())` after lag: its events join what is
    /// pending and go out at once (id = its head); a reset flushes what is pending and
    /// sends a `reset` frame. Live rows at or below its head are dropped from now on.
    pub fn on_catch_up(&mut self, catch_up: ReadAfter, now_ms: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        if self.phase != Phase::Live {
            return out;
        }
        self.lagged = false;
        let head = catch_up.cursor().clone();
        let reset = match catch_up {
            _ if head.epoch != self.epoch => Some(ResetReason::Epoch),
            ReadAfter::Reset { reason, .. } => Some(reason),
            ReadAfter::Events { events, .. } => {
                for e in events {
                    if Seq(e.seq) > self.cursor {
                        self.merge(e);
                    }
                }
                None
            }
        };
        match reset {
            Some(reason) => {
                self.flush(now_ms, &mut out);
                if head.epoch == self.epoch {
                    self.cursor = self.cursor.max(head.seq);
                } else {
                    // A new log: its positions are unrelated to the old ones.
                    self.epoch = head.epoch;
                    self.cursor = head.seq;
                }
                out.push(Frame::Reset {
                    cursor: self.cursor(),
                    reason,
                });
                self.last_sent_ms = now_ms;
            }
            None => {
                self.cursor = self.cursor.max(head.seq);
                self.flush(now_ms, &mut out);
            }
        }
        out
    }

    /// Runs the timers due at `now_ms`: the `bye rotate` at the end of the lifetime (after
    /// flushing), the flush of the window, and a `tick` after the tick interval of silence
    /// (never while entries are pending).
    pub fn poll_timers(&mut self, now_ms: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        if self.phase != Phase::Live {
            return out;
        }
        if now_ms >= self.ends_at_ms {
            return self.bye(ByeReason::Rotate, Some(0), now_ms);
        }
        if self.flush_at.is_some_and(|at| now_ms >= at) {
            self.flush(now_ms, &mut out);
        }
        if self.pending.is_empty() && now_ms >= self.last_sent_ms.saturating_add(self.limits.tick())
        {
            out.push(Frame::Tick {
                cursor: self.cursor(),
            });
            self.last_sent_ms = now_ms;
        }
        out
    }

    /// When [`StreamConn::poll_timers`] has work next, or `None` when closed or not started.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.phase != Phase::Live {
            return None;
        }
        let tick = self
            .pending
            .is_empty()
            .then(|| self.last_sent_ms.saturating_add(self.limits.tick()));
        [self.flush_at, tick, Some(self.ends_at_ms)]
            .into_iter()
            .flatten()
            .min()
    }

    /// The session ended: flush, then `bye {"reason":"signed-out"}`.
    pub fn sign_out(&mut self, now_ms: u64) -> Vec<Frame> {
        self.bye(ByeReason::SignedOut, None, now_ms)
    }

    /// The server shuts down: flush, then `bye {"reason":"shutdown","retryMs":retry_ms}`
    /// (the caller picks `retry_ms` uniformly so reconnects spread out).
    pub fn shutdown(&mut self, retry_ms: u64, now_ms: u64) -> Vec<Frame> {
        self.bye(ByeReason::Shutdown, Some(retry_ms), now_ms)
    }

    fn bye(&mut self, reason: ByeReason, retry_ms: Option<u64>, now_ms: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        if self.phase == Phase::Closed {
            return out;
        }
        if self.phase == Phase::Live {
            self.flush(now_ms, &mut out);
        }
        out.push(Frame::Bye { reason, retry_ms });
        self.phase = Phase::Closed;
        self.last_sent_ms = now_ms;
        out
    }

    fn merge(&mut self, e: WireEvent) {
        match self
            .pending
            .entry((e.source.clone(), e.scope.clone(), e.key.clone()))
        {
            Entry::Vacant(v) => {
                v.insert(e);
            }
            Entry::Occupied(mut o) => {
                let p = o.get_mut();
                if p.rs != e.rs {
                    p.rs = None;
                }
                p.seq = p.seq.max(e.seq);
                p.n = p.n.saturating_add(e.n);
                p.at = p.at.max(e.at);
            }
        }
    }

    fn flush(&mut self, now_ms: u64, out: &mut Vec<Frame>) {
        self.flush_at = None;
        if self.pending.is_empty() {
            return;
        }
        let mut events: Vec<WireEvent> = self.pending.drain().map(|(_, e)| e).collect();
        events.sort_by_key(|e| e.seq);
        out.extend(self.changes_frames(events, self.cursor));
        self.last_sent_ms = now_ms;
    }

    /// `changes` frames for `events` ending at `cursor`: keyed entries of the largest scope
    /// become one whole-scope entry until the frame fits the byte limit; what still does not
    /// fit (or exceeds the key limit) is split.
    ///
    /// A frame's `id` never claims an event that only a later frame carries: each entry has
    /// a *floor*, the lowest seq below which resuming would not bring it back (its own seq
    /// for an entry of the log; for a whole-scope entry that stands for several keyed ones,
    /// the lowest of their seqs, since resuming after it would replay only the keys changed
    /// later). Entries go out by floor, and an earlier frame's id is the next frame's first
    /// floor minus one: every visible event up to it is in that frame or an earlier one.
    fn changes_frames(&self, events: Vec<WireEvent>, cursor: Seq) -> Vec<Frame> {
        let limit = usize::try_from(self.limits.frame_bytes()).unwrap_or(usize::MAX);
        let keys = usize::try_from(self.limits.frame_keys()).unwrap_or(usize::MAX);
        // The common case without serialising anything: every event fits one frame even
        // at its longest possible text (one change reaches every open stream; measuring
        // each frame's text per stream was a third of a delivery's work).
        // `<epoch>.<seq>`, measured without writing it.
        let cursor_len = self.epoch.as_str().len() + 1 + decimal_len(cursor.0);
        let bound = FRAME_TEXT_MAX
            + 2 * cursor_len
            + events.iter().map(|e| event_len_max(e) + 1).sum::<usize>();
        if events.len() <= keys && bound <= limit {
            return vec![Frame::Changes {
                cursor: self.at(cursor),
                events,
            }];
        }
        let overhead = Frame::Changes {
            cursor: self.at(cursor),
            events: Vec::new(),
        }
        .to_sse()
        .len();
        let mut sized: Vec<Sized> = events
            .into_iter()
            .map(|e| Sized {
                len: event_len(&e),
                floor: e.seq,
                event: e,
            })
            .collect();
        coarsen(&mut sized, overhead, limit);
        let mut frames = Vec::new();
        let mut chunk: Vec<WireEvent> = Vec::new();
        let mut size = overhead;
        for Sized { event, len, floor } in sized {
            let add = len + usize::from(!chunk.is_empty());
            if !chunk.is_empty() && (chunk.len() >= keys || size + add > limit) {
                frames.push(Frame::Changes {
                    cursor: self.at(Seq(floor.saturating_sub(1))),
                    events: std::mem::take(&mut chunk),
                });
                size = overhead + len;
            } else {
                size += add;
            }
            chunk.push(event);
        }
        if !chunk.is_empty() {
            frames.push(Frame::Changes {
                cursor: self.at(cursor),
                events: chunk,
            });
        }
        frames
    }
}

/// An entry of a `changes` frame with its JSON length and its floor (see
/// [`StreamConn::changes_frames`]).
struct Sized {
    event: WireEvent,
    len: usize,
    floor: u64,
}

/// The longest text of a `changes` frame without its cursors and events:
/// `id: <c>\nevent: changes\ndata: {"cursor":"<c>","events":[…]}\n\n`.
const FRAME_TEXT_MAX: usize = 64;

/// The longest JSON text `e` can have: its members' names and punctuation, each number at
/// 20 characters, each string at 6 characters (`\u00XX`) per byte.
fn event_len_max(e: &WireEvent) -> usize {
    let strings = e.source.len()
        + e.scope.len()
        + e.key.as_ref().map_or(4, String::len)
        + e.rs.as_ref().map_or(4, String::len);
    80 + 3 * 20 + 6 * strings
}

fn event_len(e: &WireEvent) -> usize {
    serde_json::to_string(e).map_or(0, |s| s.len())
}

fn frame_len(sized: &[Sized], overhead: usize) -> usize {
    overhead + sized.iter().map(|s| s.len).sum::<usize>() + sized.len().saturating_sub(1)
}

/// Replaces keyed entries of the scope with the most keyed entries by one whole-scope entry
/// (`key: null`, `rs: null`, the lowest floor of what it replaces) until the frame fits
/// `limit`, then sorts by floor.
fn coarsen(sized: &mut Vec<Sized>, overhead: usize, limit: usize) {
    while frame_len(sized, overhead) > limit {
        let mut counts: HashMap<(&str, &str), usize> = HashMap::new();
        for s in sized.iter().filter(|s| s.event.key.is_some()) {
            *counts.entry((&s.event.source, &s.event.scope)).or_default() += 1;
        }
        let Some((source, scope)) = counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|((s, c), _)| (s.to_owned(), c.to_owned()))
        else {
            break;
        };
        let mut whole: Option<(WireEvent, u64)> = None;
        sized.retain(|s| {
            let e = &s.event;
            if e.source != source || e.scope != scope {
                return true;
            }
            match &mut whole {
                None => {
                    whole = Some((
                        WireEvent {
                            key: None,
                            rs: None,
                            ..e.clone()
                        },
                        s.floor,
                    ));
                }
                Some((w, floor)) => {
                    w.seq = w.seq.max(e.seq);
                    w.n = w.n.saturating_add(e.n);
                    w.at = w.at.max(e.at);
                    *floor = (*floor).min(s.floor);
                }
            }
            false
        });
        if let Some((event, floor)) = whole {
            sized.push(Sized {
                len: event_len(&event),
                event,
                floor,
            });
        }
    }
    sized.sort_by_key(|s| s.floor);
}

/// How many digits `n` has in decimal.
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_lengths_match_the_printed_numbers() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX / 10, u64::MAX] {
            assert_eq!(decimal_len(n), n.to_string().len(), "{n}");
        }
    }

    #[test]
    fn the_longest_text_bounds_hold() {
        // Escaped control characters, quotes, extreme numbers: the bound of the fast path
        // is never below the real text.
        let e = WireEvent {
            seq: (1 << 53) - 1,
            source: "a\u{1}\"\\\u{7f}é".repeat(20),
            scope: "0f".repeat(16),
            key: Some("\n".repeat(40)),
            rs: None,
            at: i64::MIN,
            n: u32::MAX,
        };
        assert!(event_len(&e) <= event_len_max(&e));
        let c: Cursor = "mq3x7kd2pa4r.9007199254740991".parse().unwrap();
        let len = c.to_string().len();
        let empty = Frame::Changes {
            cursor: c.clone(),
            events: Vec::new(),
        };
        assert!(empty.to_sse().len() <= FRAME_TEXT_MAX + 2 * len);
        let two = Frame::Changes {
            cursor: c,
            events: vec![e.clone(), e.clone()],
        };
        assert!(two.to_sse().len() <= FRAME_TEXT_MAX + 2 * len + 2 * (event_len_max(&e) + 1));
    }

    #[test]
    fn sse_text_is_exact() {
        let c: Cursor = "mq3x7kd2pa4r.1093".parse().unwrap();
        assert_eq!(
            Frame::Tick { cursor: c.clone() }.to_sse(),
            "id: mq3x7kd2pa4r.1093\nevent: tick\ndata: {\"cursor\":\"mq3x7kd2pa4r.1093\"}\n\n"
        );
        assert_eq!(Frame::Retry { ms: 1000 }.to_sse(), "retry: 1000\n");
        assert_eq!(
            Frame::Bye {
                reason: ByeReason::Rotate,
                retry_ms: Some(0)
            }
            .to_sse(),
            "event: bye\ndata: {\"reason\":\"rotate\",\"retryMs\":0}\n\n"
        );
    }
}
