//! The page's side of the change feed (`sync.md` §7, §11.4) as a sans-IO state machine.
//!
//! A page holds one [`Transport`]. The runtime feeds it [`Input`]s with the current time and
//! performs the [`Effect`]s it returns: open or close the event stream, send a poll, deliver
//! events to subscribers, tell them about a reset or sign-out, and send `ui.query` re-reads.
//! [`Transport::next_deadline`] says when to feed [`Input::Timer`]. Nothing here does IO or
//! reads a clock, so every cadence, backoff and coalescing rule is testable with a virtual
//! clock, and a wasm build of the same code can drive a browser page.
//!
//! [`EditedField`] is the separate reconciliation rule for editable copies of authoritative
//! values (§7.8).

mod counters;
mod field;
mod reads;

use std::collections::BTreeMap;

use ui_core::{SyncLimits, UiHostLimits};

use crate::poll::PollBody;
use crate::stream::{ByeReason, Frame};
use crate::types::{Cursor, RequestSource, ResetReason, WireEvent};

pub use counters::{CounterKey, Counters};
pub use field::EditedField;
pub use reads::{Reading, ReadingSync};

use reads::{ReadLimits, Reads};

/// Poll failures double the interval at most this many times (`base × 2^min(n, 5)`).
const MAX_BACKOFF_DOUBLINGS: u32 = 5;

/// A poll times out after this many intervals (or the poll timeout, whichever is longer).
const POLL_TIMEOUT_INTERVALS: u64 = 4;

/// A feature listening to the transport (chosen by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberId(pub u64);

/// A live query on the page (chosen by the caller): one query of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueryId(pub u64);

/// A block on the page (chosen by the caller); visibility is per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u64);

/// One event-stream connection attempt (assigned by the transport; inputs about older
/// attempts are ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// One poll request (assigned by the transport; late answers of abandoned polls are
/// ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PollId(pub u64);

/// How a subscriber listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscribeOptions {
    /// Skip events whose `rs` is this page's id (editors holding local state). Events with
    /// a null `rs` are never skipped. Live queries leave this `false`.
    pub ignore_own: bool,
    /// The stream may close while the page is hidden (it closes only when every subscriber
    /// asks for this).
    pub pause_when_hidden: bool,
}

/// The transport's connection state (`sync.md` §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportState {
    /// No subscribers: no stream, no polls.
    Stopped,
    /// A stream was opened; nothing arrived on it yet.
    Connecting,
    /// The stream is open and spoke within the silence limit: healthy.
    Streaming,
    /// No stream (waiting to reconnect, refused, or paused while hidden); polls carry on.
    PollingOnly,
    /// A 401/403: no stream, one poll per auth cooldown, no change-driven re-reads.
    SignedOut,
}

/// Something that happened, fed to [`Transport::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// Nothing but the passing of time (call at [`Transport::next_deadline`]).
    Timer,
    /// A feature starts listening; the first one starts the transport.
    Subscribe {
        /// Its id.
        subscriber: SubscriberId,
        /// How it listens.
        options: SubscribeOptions,
    },
    /// A feature stops listening; the last one stops the transport.
    Unsubscribe {
        /// Its id.
        subscriber: SubscriberId,
    },
    /// The stream's response headers arrived (`200`).
    StreamOpened {
        /// The attempt.
        stream: StreamId,
    },
    /// A frame arrived on the stream (see [`Frame::parse`]).
    StreamFrame {
        /// The attempt.
        stream: StreamId,
        /// The frame.
        frame: Frame,
    },
    /// The stream failed to open or dropped.
    StreamError {
        /// The attempt.
        stream: StreamId,
        /// The HTTP status, when there was a response.
        status: Option<u16>,
        /// Its `Retry-After`, in ms.
        retry_after_ms: Option<u64>,
    },
    /// A poll answered `200`.
    PollResult {
        /// The poll.
        poll: PollId,
        /// Its body.
        body: PollBody,
    },
    /// A poll failed (status, network, or the runtime's timeout).
    PollFailed {
        /// The poll.
        poll: PollId,
        /// The HTTP status, when there was a response.
        status: Option<u16>,
        /// Its `Retry-After`, in ms.
        retry_after_ms: Option<u64>,
    },
    /// The document became visible or hidden.
    Visibility {
        /// Whether it is visible now.
        visible: bool,
    },
    /// The window gained focus.
    Focus,
    /// An agent reply is being generated in a chat this page shows (renew on every chat
    /// stream message; it lapses after the run TTL).
    RunActive,
    /// The run finished.
    RunEnded,
    /// A reading of a live query settled (fresh, cached, failed or refused), whatever
    /// caused it. Every [`Effect::Read`] must end in one of these.
    ReadingArrived {
        /// The query.
        query: QueryId,
        /// The block showing it.
        block: BlockId,
        /// What the reading says.
        reading: Reading,
    },
    /// A block came on screen.
    BlockVisible {
        /// The block.
        block: BlockId,
    },
    /// A block left the screen.
    BlockHidden {
        /// The block.
        block: BlockId,
    },
    /// A block is gone with its queries.
    BlockRemoved {
        /// The block.
        block: BlockId,
    },
}

/// Something the runtime must do, returned by [`Transport::handle`] in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Effect {
    /// Open `GET /ui/events?cursor=<cursor>` (no parameter when `None`); report with
    /// [`Input::StreamOpened`], [`Input::StreamFrame`], [`Input::StreamError`].
    OpenStream {
        /// The attempt id.
        stream: StreamId,
        /// The cursor to resume from.
        cursor: Option<Cursor>,
    },
    /// Close the stream (and stop the browser's own reconnect).
    CloseStream,
    /// Send `GET /ui/poll?cursor=<cursor>`, aborting after `timeout_ms`; report with
    /// [`Input::PollResult`] or [`Input::PollFailed`].
    Poll {
        /// The poll id.
        poll: PollId,
        /// The cursor.
        cursor: Option<Cursor>,
        /// The timeout: max(poll timeout, 4 × the interval).
        timeout_ms: u64,
    },
    /// Hand new events to one subscriber (never the same seq twice in an epoch).
    Deliver {
        /// The subscriber.
        subscriber: SubscriberId,
        /// The events, by seq.
        events: Vec<WireEvent>,
    },
    /// Call every subscriber's `on_reset`; everything shown is stale.
    Reset {
        /// Why.
        reason: ResetReason,
    },
    /// Ask `ui.query` for `query` again; `seen` is the cursor that made it stale (none for
    /// a cadence read).
    Read {
        /// The query.
        query: QueryId,
        /// The `seen` member of the request.
        seen: Option<Cursor>,
    },
    /// The session ended (401/403): tell subscribers.
    SignedOut,
}

/// Settings of a [`Transport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportOptions {
    /// The change feed's limits (client values).
    pub limits: SyncLimits,
    /// The live-query cadence of a visible reading, in ms (`refreshMilliseconds`).
    pub refresh_ms: u64,
}

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            limits: SyncLimits::DEFAULT,
            refresh_ms: UiHostLimits::DEFAULT.refresh_milliseconds(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct PollInFlight {
    id: PollId,
    deadline: u64,
    /// Sent without a cursor: its head says nothing about events before it.
    blind: bool,
}

/// A uniform random number in `[0, 1)`, for jitter.
pub type Random = Box<dyn FnMut() -> f64 + Send>;

/// The page's single transport: one event stream, one poll loop, one cursor, the counter
/// store and the re-read scheduler (`sync.md` §7.1–§7.7).
pub struct Transport {
    page_id: RequestSource,
    limits: SyncLimits,
    random: Random,
    subscribers: BTreeMap<SubscriberId, SubscribeOptions>,
    running: bool,
    state: TransportState,
    cursor: Option<Cursor>,
    counters: Counters,
    reads: Reads,
    page_visible: bool,
    run_until: Option<u64>,
    next_id: u64,
    stream: Option<StreamId>,
    /// The stream was opened without a cursor: its `hello` is a head, not a resume point.
    stream_blind: bool,
    last_activity: u64,
    attempt: u32,
    reconnect_at: Option<u64>,
    poll: Option<PollInFlight>,
    poll_at: Option<u64>,
    last_poll_start: Option<u64>,
    failures: u32,
    last_trigger: Option<u64>,
    /// The pending poll was asked for now (start or trigger): rescheduling never delays it.
    poll_now: bool,
    conditions: (bool, bool, bool),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("page_id", &self.page_id)
            .field("state", &self.state)
            .field("cursor", &self.cursor)
            .field("subscribers", &self.subscribers.len())
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// A stopped transport for the page `page_id` (kept in memory, one per page load).
    /// `random` returns uniform numbers in `[0, 1)` for reconnect jitter.
    pub fn new(page_id: RequestSource, options: TransportOptions, random: Random) -> Self {
        let limits = options.limits;
        let reads = Reads::new(ReadLimits {
            window: limits.client_window(),
            gap: limits.client_query_gap(),
            in_flight: usize::try_from(limits.client_requests()).unwrap_or(usize::MAX),
            refresh: options.refresh_ms,
        });
        Transport {
            page_id,
            limits,
            random,
            subscribers: BTreeMap::new(),
            running: false,
            state: TransportState::Stopped,
            cursor: None,
            counters: Counters::new(
                usize::try_from(limits.client_counters()).unwrap_or(usize::MAX),
            ),
            reads,
            page_visible: true,
            run_until: None,
            next_id: 0,
            stream: None,
            stream_blind: false,
            last_activity: 0,
            attempt: 0,
            reconnect_at: None,
            poll: None,
            poll_at: None,
            last_poll_start: None,
            failures: 0,
            last_trigger: None,
            poll_now: false,
            conditions: (false, false, false),
        }
    }

    /// This page's id (sent as `X-UI-Request-Source`).
    pub fn page_id(&self) -> &RequestSource {
        &self.page_id
    }

    /// The connection state.
    pub fn state(&self) -> TransportState {
        self.state
    }

    /// Whether the stream is healthy (open, and it spoke within the silence limit).
    pub fn is_healthy(&self) -> bool {
        self.state == TransportState::Streaming
    }

    /// The cursor (none before the first `hello` or poll answer).
    pub fn cursor(&self) -> Option<&Cursor> {
        self.cursor.as_ref()
    }

    /// The counter store (`counter(source)`, `counters([sources])`, …).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A host component starts observing the counter of `source` (never evicted while
    /// observed).
    pub fn observe_source(&mut self, source: &str) {
        self.counters.observe(CounterKey::Source(source.into()));
    }

    /// A host component stops observing the counter of `source`.
    pub fn unobserve_source(&mut self, source: &str) {
        self.counters.unobserve(&CounterKey::Source(source.into()));
    }

    /// Whether the reading of `query` is stale (§7.7).
    pub fn is_stale(&self, query: QueryId) -> bool {
        self.reads.is_stale(query, &self.counters)
    }

    /// Feeds one input at `now_ms` and returns the effects, in order.
    pub fn handle(&mut self, now_ms: u64, input: Input) -> Vec<Effect> {
        let now = now_ms;
        let mut fx = Vec::new();
        match input {
            Input::Timer => {}
            Input::Subscribe {
                subscriber,
                options,
            } => {
                self.subscribers.insert(subscriber, options);
                if !self.running {
                    self.start(now);
                }
            }
            Input::Unsubscribe { subscriber } => {
                self.subscribers.remove(&subscriber);
                if self.subscribers.is_empty() && self.running {
                    self.stop(&mut fx);
                }
            }
            Input::StreamOpened { stream } => {
                if self.stream == Some(stream) {
                    self.last_activity = now;
                }
            }
            Input::StreamFrame { stream, frame } => {
                if self.stream == Some(stream) {
                    self.on_frame(now, frame, &mut fx);
                }
            }
            Input::StreamError {
                stream,
                status,
                retry_after_ms,
            } => {
                if self.stream == Some(stream) {
                    self.on_stream_error(now, status, retry_after_ms, &mut fx);
                }
            }
            Input::PollResult { poll, body } => {
                if self.poll.is_some_and(|p| p.id == poll) {
                    self.on_poll_result(now, body, &mut fx);
                }
            }
            Input::PollFailed {
                poll,
                status,
                retry_after_ms,
            } => {
                if self.poll.is_some_and(|p| p.id == poll) {
                    self.on_poll_failed(now, status, retry_after_ms, &mut fx);
                }
            }
            Input::Visibility { visible } => {
                if self.page_visible != visible {
                    self.page_visible = visible;
                    self.reads
                        .set_page_visible(visible, &self.counters, self.signed_out());
                    if visible {
                        self.trigger_poll(now);
                    }
                }
            }
            Input::Focus => self.trigger_poll(now),
            Input::RunActive => {
                let was = self.run_active(now);
                self.run_until = Some(now.saturating_add(self.limits.run_ttl()));
                if !was {
                    self.trigger_poll(now);
                }
            }
            Input::RunEnded => self.run_until = None,
            Input::ReadingArrived {
                query,
                block,
                reading,
            } => {
                let signed_out = self.signed_out();
                self.reads
                    .arrived(now, query, block, reading, &mut self.counters, signed_out);
            }
            Input::BlockVisible { block } => {
                self.reads
                    .set_block_visible(block, true, &self.counters, self.signed_out());
            }
            Input::BlockHidden { block } => {
                self.reads
                    .set_block_visible(block, false, &self.counters, self.signed_out());
            }
            Input::BlockRemoved { block } => self.reads.remove_block(block, &mut self.counters),
        }
        self.run_timers(now, &mut fx);
        fx
    }

    /// When [`Input::Timer`] has work next (none when nothing is scheduled).
    pub fn next_deadline(&self) -> Option<u64> {
        let mut next = self.reads.next_deadline();
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if self.running {
            if self.stream.is_some() {
                consider(Some(
                    self.last_activity
                        .saturating_add(self.limits.client_silence()),
                ));
            } else if self.state != TransportState::SignedOut && !self.paused() {
                consider(self.reconnect_at);
            }
            consider(self.run_until);
            match self.poll {
                Some(p) => consider(Some(p.deadline)),
                None => consider(self.poll_at),
            }
        }
        next
    }

    fn signed_out(&self) -> bool {
        self.state == TransportState::SignedOut
    }

    fn run_active(&self, now: u64) -> bool {
        self.run_until.is_some_and(|t| now < t)
    }

    fn paused(&self) -> bool {
        !self.page_visible
            && !self.subscribers.is_empty()
            && self.subscribers.values().all(|s| s.pause_when_hidden)
    }

    fn conditions_at(&self, now: u64) -> (bool, bool, bool) {
        (self.run_active(now), self.is_healthy(), !self.page_visible)
    }

    /// The poll interval for the current conditions (§7.3), before failure backoff.
    fn interval(&self, now: u64) -> u64 {
        let base = if self.run_active(now) && !self.is_healthy() {
            self.limits.poll_active()
        } else {
            self.limits.poll_idle()
        };
        if self.page_visible {
            base
        } else {
            base.max(self.limits.poll_hidden_floor())
        }
    }

    /// The interval after `failures` consecutive failures: base × 2^min(n, 5), capped.
    fn next_interval(&self, now: u64) -> u64 {
        let base = self.interval(now);
        if self.failures == 0 {
            return base;
        }
        base.saturating_mul(1 << self.failures.min(MAX_BACKOFF_DOUBLINGS))
            .min(self.limits.backoff_cap())
    }

    /// The next reconnect delay: min × 2^attempt up to max, ±jitter; counts the attempt.
    fn backoff_delay(&mut self) -> u64 {
        let base = self
            .limits
            .reconnect_min()
            .saturating_mul(1u64.checked_shl(self.attempt).unwrap_or(u64::MAX))
            .min(self.limits.reconnect_max());
        self.attempt = self.attempt.saturating_add(1);
        let r = (self.random)();
        let r = if r.is_finite() {
            r.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let jitter = self.limits.reconnect_jitter().min(100) as f64 / 100.0;
        (base as f64 * (1.0 + jitter * (2.0 * r - 1.0))).round() as u64
    }

    fn start(&mut self, now: u64) {
        self.running = true;
        self.state = TransportState::PollingOnly;
        self.stream = None;
        self.reconnect_at = None;
        self.attempt = 0;
        self.poll = None;
        self.poll_at = Some(now);
        self.poll_now = true;
        self.failures = 0;
        self.last_trigger = None;
        self.conditions = self.conditions_at(now);
    }

    fn stop(&mut self, fx: &mut Vec<Effect>) {
        self.close_stream(fx);
        self.running = false;
        self.state = TransportState::Stopped;
        self.reconnect_at = None;
        self.poll = None;
        self.poll_at = None;
        self.poll_now = false;
    }

    fn open_stream(&mut self, now: u64, fx: &mut Vec<Effect>) {
        self.next_id += 1;
        let id = StreamId(self.next_id);
        self.stream = Some(id);
        self.stream_blind = self.cursor.is_none();
        self.last_activity = now;
        self.reconnect_at = None;
        self.state = TransportState::Connecting;
        fx.push(Effect::OpenStream {
            stream: id,
            cursor: self.cursor.clone(),
        });
    }

    fn close_stream(&mut self, fx: &mut Vec<Effect>) {
        if self.stream.take().is_some() {
            fx.push(Effect::CloseStream);
        }
        if self.state != TransportState::SignedOut && self.running {
            self.state = TransportState::PollingOnly;
        }
    }

    /// The stream is gone; reconnect after `delay`.
    fn reconnect_after(&mut self, now: u64, delay: u64, fx: &mut Vec<Effect>) {
        self.close_stream(fx);
        self.reconnect_at = Some(now.saturating_add(delay));
    }

    fn enter_signed_out(&mut self, now: u64, fx: &mut Vec<Effect>) {
        self.close_stream(fx);
        if self.state != TransportState::SignedOut {
            fx.push(Effect::SignedOut);
        }
        self.state = TransportState::SignedOut;
        self.reconnect_at = None;
        // A poll started before the refusal must not sign the page back in.
        self.poll = None;
        self.poll_at = Some(now.saturating_add(self.limits.auth_cooldown()));
        self.poll_now = false;
        self.failures = 0;
    }

    fn on_frame(&mut self, now: u64, frame: Frame, fx: &mut Vec<Effect>) {
        self.last_activity = now;
        match frame {
            Frame::Hello { cursor, .. } => {
                self.attempt = 0;
                self.state = TransportState::Streaming;
                if self.stream_blind {
                    self.take_blind_cursor(now, &cursor, fx);
                } else {
                    self.take_cursor(now, &cursor, fx);
                }
            }
            Frame::Changes { cursor, events } => {
                self.state = TransportState::Streaming;
                self.take_events(now, &cursor, events, fx);
            }
            Frame::Tick { cursor } => {
                self.state = TransportState::Streaming;
                self.take_cursor(now, &cursor, fx);
            }
            Frame::Reset { cursor, reason } => self.reset(now, cursor, reason, fx),
            Frame::Bye { reason, retry_ms } => {
                if reason == ByeReason::SignedOut {
                    self.enter_signed_out(now, fx);
                } else {
                    let delay = match retry_ms {
                        Some(ms) => ms,
                        None => self.backoff_delay(),
                    };
                    self.reconnect_after(now, delay, fx);
                }
            }
            _ => {}
        }
    }

    fn on_stream_error(
        &mut self,
        now: u64,
        status: Option<u16>,
        retry_after_ms: Option<u64>,
        fx: &mut Vec<Effect>,
    ) {
        match status {
            Some(401 | 403) => self.enter_signed_out(now, fx),
            Some(429 | 503) if retry_after_ms.is_some() => {
                self.reconnect_after(now, retry_after_ms.unwrap_or(0), fx);
            }
            _ => {
                let delay = self.backoff_delay();
                self.reconnect_after(now, delay, fx);
            }
        }
    }

    fn on_poll_result(&mut self, now: u64, body: PollBody, fx: &mut Vec<Effect>) {
        let blind = self.poll.is_some_and(|p| p.blind);
        self.poll = None;
        self.failures = 0;
        if self.state == TransportState::SignedOut {
            // Signed in again: the stream reopens at once.
            self.state = TransportState::PollingOnly;
            self.reconnect_at = None;
            self.attempt = 0;
        }
        match body.reset {
            Some(reset) => self.reset(now, body.cursor, reset.reason, fx),
            None if blind => self.take_blind_cursor(now, &body.cursor, fx),
            None => self.take_events(now, &body.cursor, body.events, fx),
        }
        self.poll_at = Some(now.saturating_add(self.interval(now)));
    }

    fn on_poll_failed(
        &mut self,
        now: u64,
        status: Option<u16>,
        retry_after_ms: Option<u64>,
        fx: &mut Vec<Effect>,
    ) {
        self.poll = None;
        if matches!(status, Some(401 | 403)) {
            self.enter_signed_out(now, fx);
            return;
        }
        if self.state == TransportState::SignedOut {
            self.poll_at = Some(now.saturating_add(self.limits.auth_cooldown()));
            return;
        }
        self.failures = self.failures.saturating_add(1);
        let delay = self.next_interval(now).max(retry_after_ms.unwrap_or(0));
        self.poll_at = Some(now.saturating_add(delay));
    }

    /// An immediate poll (run started, page shown, focus), at most once per fast cadence.
    fn trigger_poll(&mut self, now: u64) {
        if !self.running || self.signed_out() || self.poll.is_some() {
            return;
        }
        if self
            .last_trigger
            .is_some_and(|t| now < t.saturating_add(self.limits.poll_active()))
        {
            return;
        }
        self.last_trigger = Some(now);
        self.poll_at = Some(now);
        self.poll_now = true;
    }

    /// A cursor from a frame or poll: the first sets the floor, another epoch is a reset,
    /// otherwise the cursor only moves forward.
    fn take_cursor(&mut self, now: u64, cursor: &Cursor, fx: &mut Vec<Effect>) {
        match &mut self.cursor {
            None => {
                self.cursor = Some(cursor.clone());
                self.counters.reset(&cursor.epoch, cursor.seq);
                self.reads.sweep(&self.counters, self.signed_out());
            }
            Some(current) if current.epoch != cursor.epoch => {
                self.reset(now, cursor.clone(), ResetReason::Epoch, fx);
            }
            Some(current) => current.seq = current.seq.max(cursor.seq),
        }
    }

    /// The head answered to a request sent without a cursor. When the transport got a
    /// cursor meanwhile and this head is past it, the events in between were never sent
    /// here: the floor rises to the head, so every reading and counter older than it is
    /// stale (a few extra reads instead of a silent loss).
    fn take_blind_cursor(&mut self, now: u64, cursor: &Cursor, fx: &mut Vec<Effect>) {
        match &mut self.cursor {
            Some(current) if current.epoch == cursor.epoch && cursor.seq > current.seq => {
                current.seq = cursor.seq;
                self.counters.raise_floor(cursor.seq);
                self.reads.counters_advanced(now);
            }
            _ => self.take_cursor(now, cursor, fx),
        }
    }

    /// Events up to `cursor`: those at or below the current cursor are dropped, the rest
    /// bump counters and go to subscribers, then the cursor moves.
    fn take_events(
        &mut self,
        now: u64,
        cursor: &Cursor,
        events: Vec<WireEvent>,
        fx: &mut Vec<Effect>,
    ) {
        let after = match &self.cursor {
            Some(c) if c.epoch == cursor.epoch => c.seq,
            // First contact or another epoch: the cursor (and floor) come first.
            _ => return self.take_cursor(now, cursor, fx),
        };
        let fresh: Vec<WireEvent> = events.into_iter().filter(|e| e.seq > after.0).collect();
        self.deliver(now, fresh, fx);
        self.take_cursor(now, cursor, fx);
    }

    fn deliver(&mut self, now: u64, events: Vec<WireEvent>, fx: &mut Vec<Effect>) {
        if events.is_empty() {
            return;
        }
        let mut advanced = false;
        for e in &events {
            advanced |= self.counters.bump(e);
        }
        if advanced {
            self.reads.counters_advanced(now);
        }
        let own = self.page_id.as_str();
        for (id, options) in &self.subscribers {
            let mine: Vec<WireEvent> = events
                .iter()
                .filter(|e| !(options.ignore_own && e.rs.as_deref() == Some(own)))
                .cloned()
                .collect();
            if !mine.is_empty() {
                fx.push(Effect::Deliver {
                    subscriber: *id,
                    events: mine,
                });
            }
        }
    }

    fn reset(&mut self, now: u64, cursor: Cursor, reason: ResetReason, fx: &mut Vec<Effect>) {
        self.counters.reset(&cursor.epoch, cursor.seq);
        self.cursor = Some(cursor);
        self.reads.reset(now);
        fx.push(Effect::Reset { reason });
    }

    fn run_timers(&mut self, now: u64, fx: &mut Vec<Effect>) {
        if self.running {
            if self.stream.is_some()
                && now
                    >= self
                        .last_activity
                        .saturating_add(self.limits.client_silence())
            {
                // Open but mute (a buffering proxy): reconnect.
                let delay = self.backoff_delay();
                self.reconnect_after(now, delay, fx);
            }
            if self.paused() {
                if self.stream.is_some() {
                    self.close_stream(fx);
                    self.reconnect_at = None;
                }
            } else if self.stream.is_none()
                && !self.signed_out()
                && self.reconnect_at.is_none_or(|t| now >= t)
            {
                self.open_stream(now, fx);
            }
            if self.run_until.is_some_and(|t| now >= t) {
                self.run_until = None;
            }
            let conditions = self.conditions_at(now);
            if conditions != self.conditions {
                self.conditions = conditions;
                self.reschedule_poll(now);
            }
            if self.poll.is_some_and(|p| now >= p.deadline) {
                self.on_poll_failed(now, None, None, fx);
            }
            if self.poll.is_none() && self.poll_at.is_some_and(|t| now >= t) {
                self.start_poll(now, fx);
            }
        }
        let signed_out = self.signed_out();
        self.reads.run(now, &self.counters, signed_out, fx);
    }

    /// The conditions changed: the pending poll moves to max(now, last start + the new
    /// interval).
    fn reschedule_poll(&mut self, now: u64) {
        if self.signed_out() || self.poll.is_some() || self.poll_at.is_none() || self.poll_now {
            return;
        }
        if let Some(last) = self.last_poll_start {
            self.poll_at = Some(now.max(last.saturating_add(self.next_interval(now))));
        }
    }

    fn start_poll(&mut self, now: u64, fx: &mut Vec<Effect>) {
        self.next_id += 1;
        let id = PollId(self.next_id);
        let timeout_ms = self
            .limits
            .poll_timeout()
            .max(self.interval(now).saturating_mul(POLL_TIMEOUT_INTERVALS));
        self.poll = Some(PollInFlight {
            id,
            deadline: now.saturating_add(timeout_ms),
            blind: self.cursor.is_none(),
        });
        self.poll_at = None;
        self.poll_now = false;
        self.last_poll_start = Some(now);
        fx.push(Effect::Poll {
            poll: id,
            cursor: self.cursor.clone(),
            timeout_ms,
        });
    }
}
