//! The page's transport rules (`sync.md` §7) driven through the sans-IO
//! [`Transport`] with a virtual clock.

use std::sync::{Arc, Mutex};

use ui_core::{SyncLimits, UiHostLimits};
use ui_sync::client::{
    BlockId, CounterKey, Counters, EditedField, Effect, Input, PollId, QueryId, Reading,
    ReadingSync, StreamId, SubscribeOptions, SubscriberId, Transport, TransportOptions,
    TransportState,
};
use ui_sync::{
    ByeReason, Cursor, Epoch, Frame, PollBody, PollReset, RequestSource, ResetReason, Seq, Token,
    WireEvent,
};

const L: SyncLimits = SyncLimits::DEFAULT;

fn refresh() -> u64 {
    UiHostLimits::DEFAULT.refresh_milliseconds()
}

fn epoch() -> Epoch {
    "mq3x7kd2pa4r".parse().unwrap()
}

fn other_epoch() -> Epoch {
    "zzzzzzzzzzzz".parse().unwrap()
}

fn cur(seq: u64) -> Cursor {
    Cursor {
        epoch: epoch(),
        seq: Seq(seq),
    }
}

const PAGE: &str = "p-aaaaaaaaaaaaaaaaaaaaaaaaaa";

fn scope(n: u8) -> String {
    Token([n; 16]).to_hex()
}

fn key(n: u8) -> String {
    Token([100 + n; 16]).to_hex()
}

/// An event of scope `s`, key `k` (none: the whole scope), writer `rs`.
fn ev(seq: u64, s: u8, k: Option<u8>, rs: Option<&str>) -> WireEvent {
    WireEvent {
        seq,
        source: "ci.runs".into(),
        scope: scope(s),
        key: k.map(key),
        rs: rs.map(str::to_owned),
        at: 1_767_000_000_000,
        n: 1,
    }
}

fn body(seq: u64, events: Vec<WireEvent>) -> PollBody {
    PollBody {
        epoch: epoch(),
        cursor: cur(seq),
        events,
        reset: None,
    }
}

/// A page around a transport, with a virtual clock and the effects it saw.
struct Page {
    t: Transport,
    now: u64,
    stream: Option<StreamId>,
    poll: Option<PollId>,
    log: Vec<(u64, Effect)>,
}

/// Randomness fixed at the middle of its range: no jitter.
fn steady() -> Box<dyn FnMut() -> f64 + Send> {
    Box::new(|| 0.5)
}

impl Page {
    fn new() -> Self {
        Self::with(TransportOptions::default(), steady())
    }

    fn with(options: TransportOptions, random: Box<dyn FnMut() -> f64 + Send>) -> Self {
        Page {
            t: Transport::new(RequestSource::parse(PAGE).unwrap(), options, random),
            now: 0,
            stream: None,
            poll: None,
            log: Vec::new(),
        }
    }

    fn record(&mut self, fx: Vec<Effect>) -> Vec<Effect> {
        for e in &fx {
            match e {
                Effect::OpenStream { stream, .. } => self.stream = Some(*stream),
                Effect::Poll { poll, .. } => self.poll = Some(*poll),
                _ => {}
            }
            self.log.push((self.now, e.clone()));
        }
        fx
    }

    fn input(&mut self, input: Input) -> Vec<Effect> {
        let fx = self.t.handle(self.now, input);
        self.record(fx)
    }

    /// Runs every deadline up to `t`, then sets the clock to `t`.
    fn advance_to(&mut self, t: u64) -> Vec<Effect> {
        let mut out = Vec::new();
        for _ in 0..100_000 {
            match self.t.next_deadline() {
                Some(d) if d <= t => {
                    self.now = self.now.max(d);
                    let fx = self.t.handle(self.now, Input::Timer);
                    out.extend(self.record(fx));
                }
                _ => {
                    self.now = t;
                    let fx = self.t.handle(t, Input::Timer);
                    out.extend(self.record(fx));
                    return out;
                }
            }
        }
        panic!("deadlines never settle");
    }

    fn subscribe(&mut self, id: u64, options: SubscribeOptions) -> Vec<Effect> {
        self.input(Input::Subscribe {
            subscriber: SubscriberId(id),
            options,
        })
    }

    fn frame(&mut self, frame: Frame) -> Vec<Effect> {
        let stream = self.stream.expect("a stream");
        self.input(Input::StreamFrame { stream, frame })
    }

    fn hello(&mut self, seq: u64) -> Vec<Effect> {
        self.frame(Frame::Hello {
            epoch: epoch(),
            cursor: cur(seq),
            tick_ms: L.tick(),
        })
    }

    fn changes(&mut self, seq: u64, events: Vec<WireEvent>) -> Vec<Effect> {
        self.frame(Frame::Changes {
            cursor: cur(seq),
            events,
        })
    }

    fn stream_error(&mut self, status: Option<u16>, retry_after_ms: Option<u64>) -> Vec<Effect> {
        let stream = self.stream.expect("a stream");
        self.input(Input::StreamError {
            stream,
            status,
            retry_after_ms,
        })
    }

    fn answer(&mut self, body: PollBody) -> Vec<Effect> {
        let poll = self.poll.take().expect("a poll");
        self.input(Input::PollResult { poll, body })
    }

    fn fail(&mut self, status: Option<u16>) -> Vec<Effect> {
        let poll = self.poll.take().expect("a poll");
        self.input(Input::PollFailed {
            poll,
            status,
            retry_after_ms: None,
        })
    }

    /// Subscribed, polled (cursor `seq`) and streaming (hello at `seq`), at t = 0.
    fn streaming(seq: u64) -> Self {
        let mut p = Page::new();
        p.subscribe(1, SubscribeOptions::default());
        p.answer(body(seq, Vec::new()));
        p.hello(seq);
        p
    }

    fn reading(&mut self, q: u64, b: u64, version: u64, s: u8, keys: &[u8]) -> Vec<Effect> {
        self.input(Input::ReadingArrived {
            query: QueryId(q),
            block: BlockId(b),
            reading: Reading {
                sync: Some(sync(version, s, keys)),
                ..Reading::default()
            },
        })
    }

    fn visible(&mut self, b: u64) -> Vec<Effect> {
        self.input(Input::BlockVisible { block: BlockId(b) })
    }

    fn polls_between(&self, from: u64, to: u64) -> Vec<u64> {
        self.log
            .iter()
            .filter(|(t, e)| (from..=to).contains(t) && matches!(e, Effect::Poll { .. }))
            .map(|(t, _)| *t)
            .collect()
    }
}

fn sync(version: u64, s: u8, keys: &[u8]) -> ReadingSync {
    ReadingSync {
        epoch: epoch(),
        version: Seq(version),
        scope: scope(s),
        keys: keys.iter().map(|k| key(*k)).collect(),
    }
}

fn reads(fx: &[Effect]) -> Vec<(QueryId, Option<u64>)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Read { query, seen } => Some((*query, seen.as_ref().map(|c| c.seq.0))),
            _ => None,
        })
        .collect()
}

fn count<F: Fn(&Effect) -> bool>(fx: &[Effect], f: F) -> usize {
    fx.iter().filter(|e| f(e)).count()
}

fn is_open(e: &Effect) -> bool {
    matches!(e, Effect::OpenStream { .. })
}

fn is_poll(e: &Effect) -> bool {
    matches!(e, Effect::Poll { .. })
}

// ---------------------------------------------------------------------------------------
// 7.1 One transport per page

#[test]
fn the_transport_starts_with_the_first_subscriber_and_stops_with_the_last() {
    let mut p = Page::new();
    assert_eq!(p.t.state(), TransportState::Stopped);
    let fx = p.subscribe(1, SubscribeOptions::default());
    assert_eq!(
        fx,
        vec![
            Effect::OpenStream {
                stream: StreamId(1),
                cursor: None
            },
            Effect::Poll {
                poll: PollId(2),
                cursor: None,
                timeout_ms: 4 * L.poll_idle(),
            },
        ]
    );
    assert_eq!(p.t.state(), TransportState::Connecting);
    assert!(
        p.subscribe(2, SubscribeOptions::default()).is_empty(),
        "one stream per page"
    );
    p.answer(body(7, Vec::new()));
    assert!(
        p.input(Input::Unsubscribe {
            subscriber: SubscriberId(1)
        })
        .is_empty()
    );
    assert_eq!(
        p.input(Input::Unsubscribe {
            subscriber: SubscriberId(2)
        }),
        vec![Effect::CloseStream]
    );
    assert_eq!(p.t.state(), TransportState::Stopped);
    assert_eq!(p.t.next_deadline(), None, "no timers left");
    // A later subscriber starts a fresh transport, resuming at the cursor.
    p.now = 100_000;
    let fx = p.subscribe(3, SubscribeOptions::default());
    assert_eq!(count(&fx, is_open), 1);
    assert_eq!(count(&fx, is_poll), 1);
    assert!(matches!(&fx[0], Effect::OpenStream { cursor: Some(c), .. } if *c == cur(7)));
}

// ---------------------------------------------------------------------------------------
// 7.2 Stream management

#[test]
fn stream_states_follow_hello_errors_and_auth() {
    let mut p = Page::new();
    p.subscribe(1, SubscribeOptions::default());
    let stream = p.stream.unwrap();
    p.input(Input::StreamOpened { stream });
    assert_eq!(p.t.state(), TransportState::Connecting);
    assert!(!p.t.is_healthy());
    p.hello(5);
    assert_eq!(p.t.state(), TransportState::Streaming);
    assert!(p.t.is_healthy());
    assert_eq!(p.t.cursor(), Some(&cur(5)));
    assert_eq!(p.stream_error(None, None), vec![Effect::CloseStream]);
    assert_eq!(p.t.state(), TransportState::PollingOnly);
    let fx = p.advance_to(L.reconnect_min());
    assert_eq!(
        fx,
        vec![Effect::OpenStream {
            stream: StreamId(3),
            cursor: Some(cur(5))
        }],
        "every new connection passes the cursor"
    );
    // Frames of an older connection are ignored.
    assert!(
        p.input(Input::StreamFrame {
            stream,
            frame: Frame::Tick { cursor: cur(99) }
        })
        .is_empty()
    );
    assert_eq!(p.t.cursor(), Some(&cur(5)));
}

#[test]
fn silence_reconnects_the_stream() {
    let silence = L.client_silence();
    let mut p = Page::streaming(1);
    assert!(
        p.advance_to(silence - 1)
            .iter()
            .all(|e| !matches!(e, Effect::CloseStream))
    );
    p.frame(Frame::Tick { cursor: cur(2) });
    let hello_at = silence - 1;
    assert!(
        p.advance_to(hello_at + silence - 1)
            .iter()
            .all(|e| !matches!(e, Effect::CloseStream))
    );
    let fx = p.advance_to(hello_at + silence);
    assert_eq!(fx, vec![Effect::CloseStream]);
    assert!(!p.t.is_healthy());
    let fx = p.advance_to(hello_at + silence + L.reconnect_min());
    assert_eq!(count(&fx, is_open), 1);
    // A connection that never speaks is closed after the same silence.
    let opened = p.now;
    let fx = p.advance_to(opened + silence);
    assert_eq!(fx, vec![Effect::CloseStream]);
}

/// The delay until the reconnect after a stream error now (polls are answered meanwhile).
fn error_delay(p: &mut Page) -> u64 {
    p.stream_error(Some(500), None);
    let start = p.now;
    loop {
        let next = p.t.next_deadline().unwrap();
        let fx = p.advance_to(next);
        if count(&fx, is_open) > 0 {
            return next - start;
        }
        if p.poll.is_some() {
            p.answer(body(1, Vec::new()));
        }
    }
}

#[test]
fn reconnect_backoff_doubles_to_the_cap_and_resets_on_hello_only() {
    let mut p = Page::new();
    p.subscribe(1, SubscribeOptions::default());
    p.answer(body(1, Vec::new()));
    let min = L.reconnect_min();
    let max = L.reconnect_max();
    let mut delays = Vec::new();
    for _ in 0..7 {
        delays.push(error_delay(&mut p));
        let stream = p.stream.unwrap();
        p.input(Input::StreamOpened { stream }); // opening is not enough
    }
    assert_eq!(
        delays,
        vec![min, 2 * min, 4 * min, 8 * min, 16 * min, max, max]
    );
    p.hello(1);
    assert_eq!(error_delay(&mut p), min, "hello resets the attempt counter");
    assert_eq!(error_delay(&mut p), 2 * min);
}

#[test]
fn reconnect_jitter_stays_within_twenty_percent() {
    let values: Arc<Mutex<u64>> = Arc::new(Mutex::new(12_345));
    let state = values.clone();
    // A small LCG, plus the extremes of the range.
    let random: Box<dyn FnMut() -> f64 + Send> = Box::new(move || {
        let mut s = state.lock().unwrap();
        *s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        match *s % 10 {
            0 => 0.0,
            1 => 0.999_999,
            _ => (*s >> 11) as f64 / (1u64 << 53) as f64,
        }
    });
    let mut p = Page::with(TransportOptions::default(), random);
    p.subscribe(1, SubscribeOptions::default());
    p.answer(body(1, Vec::new()));
    let j = L.reconnect_jitter();
    let mut spread = (u64::MAX, 0);
    for round in 0..200 {
        let attempt = round % 8;
        let base = (L.reconnect_min() << attempt).min(L.reconnect_max());
        let d = error_delay(&mut p);
        assert!(
            d * 100 >= base * (100 - j) && d * 100 <= base * (100 + j),
            "attempt {attempt}: {d} vs {base}"
        );
        if attempt == 0 {
            spread = (spread.0.min(d), spread.1.max(d));
        }
        if attempt == 7 {
            p.hello(1);
        }
    }
    assert!(spread.0 < spread.1, "jitter varies: {spread:?}");
}

#[test]
fn bye_uses_retry_ms_for_the_first_delay() {
    let mut p = Page::streaming(1);
    let fx = p.frame(Frame::Bye {
        reason: ByeReason::Rotate,
        retry_ms: Some(0),
    });
    assert_eq!(count(&fx, |e| matches!(e, Effect::CloseStream)), 1);
    assert_eq!(count(&fx, is_open), 1, "rotation reconnects at once");
    p.hello(1);
    p.frame(Frame::Bye {
        reason: ByeReason::Shutdown,
        retry_ms: Some(3_000),
    });
    assert_eq!(count(&p.advance_to(2_999), is_open), 0);
    assert_eq!(count(&p.advance_to(3_000), is_open), 1);
    let fx = p.frame(Frame::Bye {
        reason: ByeReason::SignedOut,
        retry_ms: None,
    });
    assert_eq!(fx, vec![Effect::CloseStream, Effect::SignedOut]);
    assert_eq!(p.t.state(), TransportState::SignedOut);
}

#[test]
fn busy_answers_use_retry_after_and_keep_polling() {
    for status in [429, 503] {
        let mut p = Page::new();
        p.subscribe(1, SubscribeOptions::default());
        p.answer(body(1, Vec::new()));
        let retry = 30_000;
        assert_eq!(
            p.stream_error(Some(status), Some(retry)),
            vec![Effect::CloseStream]
        );
        assert_eq!(p.t.state(), TransportState::PollingOnly);
        assert_eq!(count(&p.advance_to(retry - 1), is_open), 0);
        assert_eq!(count(&p.advance_to(retry), is_open), 1);
        p.stream_error(Some(status), Some(retry));
        let fx = p.advance_to(L.poll_idle());
        assert_eq!(count(&fx, is_poll), 1, "polling goes on meanwhile");
    }
}

#[test]
fn auth_failures_sign_out_cool_down_and_poll_once() {
    let cooldown = L.auth_cooldown();
    let mut p = Page::new();
    p.subscribe(1, SubscribeOptions::default());
    p.answer(body(1, Vec::new()));
    p.now = 1_000;
    let fx = p.stream_error(Some(401), None);
    assert_eq!(fx, vec![Effect::CloseStream, Effect::SignedOut]);
    assert_eq!(p.t.state(), TransportState::SignedOut);
    assert!(
        p.advance_to(1_000 + cooldown - 1).is_empty(),
        "no polls, no stream"
    );
    let fx = p.advance_to(1_000 + cooldown);
    assert_eq!(count(&fx, is_poll), 1);
    // Still refused: no second SignedOut, another cooldown.
    assert!(p.fail(Some(403)).is_empty());
    assert!(p.advance_to(1_000 + 2 * cooldown - 1).is_empty());
    assert_eq!(count(&p.advance_to(1_000 + 2 * cooldown), is_poll), 1);
    // Signed in again: the stream reopens at once.
    let fx = p.answer(body(2, Vec::new()));
    assert_eq!(count(&fx, is_open), 1);
    assert_eq!(p.t.state(), TransportState::Connecting);
}

#[test]
fn a_poll_401_signs_out_too() {
    let mut p = Page::new();
    p.subscribe(1, SubscribeOptions::default());
    let fx = p.fail(Some(401));
    assert_eq!(fx, vec![Effect::CloseStream, Effect::SignedOut]);
}

// ---------------------------------------------------------------------------------------
// 7.3 Poll cadence, row by row

/// Subscribed at 0, first poll answered at 0 (cursor 1); the stream stays unhealthy.
fn polling() -> Page {
    let mut p = Page::new();
    p.subscribe(1, SubscribeOptions::default());
    p.answer(body(1, Vec::new()));
    p
}

/// Answers every poll at once until `to`; returns the poll start times after now.
fn run_polls(p: &mut Page, to: u64) -> Vec<u64> {
    drive(p, to, false)
}

/// Like [`run_polls`], keeping the stream healthy with a tick every tick interval.
fn run_polls_healthy(p: &mut Page, to: u64) -> Vec<u64> {
    drive(p, to, true)
}

fn drive(p: &mut Page, to: u64, keep_alive: bool) -> Vec<u64> {
    let from = p.now;
    let mut last_tick = p.now;
    loop {
        let mut next = p.t.next_deadline().unwrap_or(u64::MAX);
        if keep_alive {
            next = next.min(last_tick + L.tick());
        }
        if next > to {
            break;
        }
        p.advance_to(next);
        if keep_alive && p.now >= last_tick + L.tick() {
            p.frame(Frame::Tick { cursor: cur(1) });
            last_tick = p.now;
        }
        if p.poll.is_some() {
            p.answer(body(1, Vec::new()));
        }
    }
    p.advance_to(to);
    p.polls_between(from + 1, to)
}

/// Advances deadline by deadline until a poll starts; returns its time.
fn next_poll(p: &mut Page) -> u64 {
    loop {
        let next = p.t.next_deadline().unwrap();
        if count(&p.advance_to(next), is_poll) > 0 {
            return next;
        }
    }
}

#[test]
fn cadence_run_active_and_stream_unhealthy_is_the_fast_cadence() {
    let fast = L.poll_active();
    let mut p = polling();
    p.now = 1_000;
    let fx = p.input(Input::RunActive);
    assert!(
        matches!(fx[..], [Effect::Poll { timeout_ms, .. }] if timeout_ms == L.poll_timeout().max(4 * fast)),
        "a run starting polls at once: {fx:?}"
    );
    p.answer(body(1, Vec::new()));
    let polls = run_polls(&mut p, 1_000 + 5 * fast);
    assert_eq!(polls, (1..=5).map(|i| 1_000 + i * fast).collect::<Vec<_>>());
}

#[test]
fn cadence_run_active_and_stream_healthy_is_idle() {
    let mut p = polling();
    p.hello(1);
    p.input(Input::RunActive);
    p.answer(body(1, Vec::new()));
    let polls = run_polls_healthy(&mut p, 3 * L.poll_idle());
    assert_eq!(
        polls,
        vec![L.poll_idle(), 2 * L.poll_idle(), 3 * L.poll_idle()]
    );
}

#[test]
fn cadence_without_a_run_is_idle_whether_or_not_the_stream_is_healthy() {
    let idle = L.poll_idle();
    let mut p = polling();
    assert_eq!(run_polls(&mut p, 2 * idle), vec![idle, 2 * idle]);
    let mut p = polling();
    p.hello(1);
    // Keep the stream healthy with ticks.
    assert_eq!(run_polls_healthy(&mut p, 2 * idle), vec![idle, 2 * idle]);
    assert!(p.t.is_healthy());
}

#[test]
fn cadence_of_a_hidden_page_has_a_floor() {
    let floor = L.poll_hidden_floor();
    let mut p = polling();
    p.input(Input::RunActive);
    p.answer(body(1, Vec::new()));
    p.input(Input::Visibility { visible: false });
    // max(2 s, 10 s): from the last start at 0.
    assert_eq!(
        run_polls(&mut p, 3 * floor),
        vec![floor, 2 * floor, 3 * floor]
    );
    // Hidden and idle: max(60 s, 10 s).
    let mut p = polling();
    p.input(Input::Visibility { visible: false });
    assert_eq!(run_polls(&mut p, L.poll_idle()), vec![L.poll_idle()]);
}

#[test]
fn cadence_backs_off_after_failures_and_resets_on_success() {
    let idle = L.poll_idle();
    let cap = L.backoff_cap();
    let mut p = polling();
    let mut t = 0;
    let mut gaps = Vec::new();
    for _ in 0..5 {
        let next = next_poll(&mut p);
        gaps.push(next - t);
        t = next;
        p.fail(Some(502));
    }
    assert_eq!(gaps, vec![idle, 2 * idle, 4 * idle, cap, cap], "capped");
    let next = next_poll(&mut p);
    p.answer(body(1, Vec::new()));
    assert_eq!(next_poll(&mut p) - next, idle, "reset on success");

    // With the fast base: base × 2^min(n, 5).
    let fast = L.poll_active();
    let mut p = polling();
    p.input(Input::RunActive);
    let mut gaps = Vec::new();
    let mut t = p.now;
    p.fail(None);
    for _ in 0..7 {
        let next = next_poll(&mut p);
        gaps.push(next - t);
        t = next;
        p.fail(None);
    }
    assert_eq!(
        gaps,
        vec![
            2 * fast,
            4 * fast,
            8 * fast,
            16 * fast,
            32 * fast,
            32 * fast,
            32 * fast
        ]
    );
}

#[test]
fn polls_time_out_after_four_intervals_or_ten_seconds() {
    let idle = L.poll_idle();
    let mut p = polling();
    let fx: Vec<Effect> = p.advance_to(idle).into_iter().filter(is_poll).collect();
    let timeout = 4 * idle;
    assert!(matches!(fx[..], [Effect::Poll { timeout_ms, .. }] if timeout_ms == timeout));
    let late = p.poll.unwrap();
    // No overlap while it hangs, then a timeout counts as a failure.
    assert_eq!(count(&p.advance_to(idle + timeout - 1), is_poll), 0);
    p.advance_to(idle + timeout);
    assert_eq!(next_poll(&mut p), idle + timeout + 2 * idle);
    // Its late answer is ignored.
    assert!(
        p.input(Input::PollResult {
            poll: late,
            body: body(50, Vec::new())
        })
        .is_empty()
    );
    assert_eq!(p.t.cursor(), Some(&cur(1)));
}

#[test]
fn immediate_polls_come_at_most_once_per_fast_cadence() {
    let fast = L.poll_active();
    let mut p = polling();
    p.hello(1); // healthy: the cadence itself stays at 60 s
    p.now = 5_000;
    assert_eq!(count(&p.input(Input::Focus), is_poll), 1);
    // No overlap: a trigger while a poll is in flight sends nothing.
    assert_eq!(count(&p.input(Input::Focus), is_poll), 0);
    p.answer(body(1, Vec::new()));
    p.now = 5_000 + fast - 1;
    assert_eq!(count(&p.input(Input::Focus), is_poll), 0);
    p.input(Input::Visibility { visible: false });
    assert_eq!(
        count(&p.input(Input::Visibility { visible: true }), is_poll),
        0
    );
    p.now = 5_000 + fast;
    p.input(Input::Visibility { visible: false });
    assert_eq!(
        count(&p.input(Input::Visibility { visible: true }), is_poll),
        1
    );
    p.answer(body(1, Vec::new()));
    p.now = 5_000 + 2 * fast;
    assert_eq!(
        count(&p.input(Input::RunActive), is_poll),
        1,
        "a run starting"
    );
    p.answer(body(1, Vec::new()));
    p.now = 5_000 + 3 * fast;
    assert_eq!(
        count(&p.input(Input::RunActive), is_poll),
        0,
        "renewal is no trigger"
    );
}

#[test]
fn condition_changes_reschedule_from_the_last_poll_start() {
    let idle = L.poll_idle();
    let mut p = polling();
    p.hello(1);
    p.input(Input::RunActive); // an immediate poll at 0
    p.answer(body(1, Vec::new()));
    assert_eq!(p.t.next_deadline(), Some(L.client_silence().min(idle)));
    p.now = 10_000;
    p.frame(Frame::Tick { cursor: cur(1) });
    // Run active, healthy: 60 s. The stream fails at 20 s: max(20 s, 0 + 2 s) = now.
    p.now = 20_000;
    let fx = p.stream_error(None, None);
    assert_eq!(count(&fx, is_poll), 1, "{fx:?}");
    p.answer(body(1, Vec::new()));
    // The 2 s cadence runs until the stream is back; hello makes it healthy again:
    // max(now, last start + 60 s).
    let polls = run_polls(&mut p, 20_000 + L.reconnect_min());
    assert_eq!(polls, Vec::<u64>::new());
    assert_eq!(p.t.state(), TransportState::Connecting);
    p.hello(1);
    assert_eq!(p.polls_between(0, u64::MAX).last(), Some(&20_000));
    let polls = run_polls_healthy(&mut p, 20_000 + idle);
    assert_eq!(polls, vec![20_000 + idle]);
}

#[test]
fn hiding_the_page_moves_the_pending_poll() {
    let floor = L.poll_hidden_floor();
    let mut p = polling();
    p.now = 1_000;
    p.input(Input::RunActive); // poll at 1 s
    p.answer(body(1, Vec::new()));
    p.now = 1_500;
    p.input(Input::Visibility { visible: false });
    // max(now, 1 s + 10 s).
    assert_eq!(p.t.next_deadline(), Some(1_000 + floor));
    assert_eq!(next_poll(&mut p), 1_000 + floor);
}

#[test]
fn a_run_lapses_after_its_ttl() {
    let ttl = L.run_ttl();
    let fast = L.poll_active();
    let mut p = polling();
    p.input(Input::RunActive);
    p.answer(body(1, Vec::new()));
    let polls = run_polls(&mut p, ttl);
    // The poll due exactly at the expiry falls under the idle cadence.
    assert_eq!(polls.len() as u64, ttl / fast - 1);
    let last = *polls.last().unwrap();
    let polls = run_polls(&mut p, last + L.poll_idle() + 1);
    assert_eq!(
        polls,
        vec![last + L.poll_idle()],
        "back to the idle cadence"
    );
    // An explicit end also counts.
    let mut p = polling();
    p.input(Input::RunActive);
    p.answer(body(1, Vec::new()));
    p.input(Input::RunEnded);
    assert_eq!(next_poll(&mut p), L.poll_idle());
}

#[test]
fn hidden_pages_close_the_stream_only_if_every_subscriber_pauses() {
    let pause = SubscribeOptions {
        pause_when_hidden: true,
        ..SubscribeOptions::default()
    };
    let mut p = Page::new();
    p.subscribe(1, pause);
    p.subscribe(2, SubscribeOptions::default());
    p.answer(body(1, Vec::new()));
    p.hello(1);
    assert!(p.input(Input::Visibility { visible: false }).is_empty());
    p.input(Input::Unsubscribe {
        subscriber: SubscriberId(2),
    });
    assert_eq!(p.t.state(), TransportState::PollingOnly);
    assert!(p.log.iter().any(|(_, e)| matches!(e, Effect::CloseStream)));
    p.now = 20_000;
    let fx = p.input(Input::Visibility { visible: true });
    assert!(matches!(&fx[0], Effect::OpenStream { cursor: Some(c), .. } if *c == cur(1)));
}

// ---------------------------------------------------------------------------------------
// 7.4 Cursor handling

#[test]
fn events_at_or_below_the_cursor_are_dropped_before_delivery() {
    let mut p = Page::streaming(1);
    let fx = p.answer_or_poll(body(7, vec![ev(5, 1, None, None), ev(7, 1, Some(1), None)]));
    assert_eq!(delivered(&fx, 1), vec![5, 7]);
    // The stream repeats 7 and adds 9.
    let fx = p.changes(9, vec![ev(7, 1, Some(1), None), ev(9, 2, None, None)]);
    assert_eq!(delivered(&fx, 1), vec![9]);
    // A late, older answer moves nothing back.
    let fx = p.changes(8, vec![ev(8, 3, None, None)]);
    assert!(delivered(&fx, 1).is_empty());
    assert_eq!(p.t.cursor(), Some(&cur(9)));
    p.frame(Frame::Tick { cursor: cur(4) });
    assert_eq!(p.t.cursor(), Some(&cur(9)));
}

impl Page {
    /// Starts a poll now (focus) and answers it with `body`.
    fn answer_or_poll(&mut self, body: PollBody) -> Vec<Effect> {
        if self.poll.is_none() {
            self.now += L.poll_active();
            self.input(Input::Focus);
        }
        self.answer(body)
    }
}

fn delivered(fx: &[Effect], subscriber: u64) -> Vec<u64> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Deliver {
                subscriber: s,
                events,
            } if s.0 == subscriber => Some(events.iter().map(|e| e.seq).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn resets_set_cursor_and_floor_and_tell_subscribers() {
    let mut p = Page::streaming(10);
    p.changes(20, vec![ev(20, 1, None, None)]);
    assert_eq!(
        p.t.counters().get(&CounterKey::Scope(Token([1; 16]))),
        Seq(20)
    );
    // `ahead`: the log went back; the reset may move the cursor down.
    let fx = p.frame(Frame::Reset {
        cursor: cur(15),
        reason: ResetReason::Ahead,
    });
    assert_eq!(
        fx,
        vec![Effect::Reset {
            reason: ResetReason::Ahead
        }]
    );
    assert_eq!(p.t.cursor(), Some(&cur(15)));
    assert_eq!(p.t.counters().floor(), Seq(15));
    assert_eq!(
        p.t.counters().get(&CounterKey::Scope(Token([1; 16]))),
        Seq(15)
    );
    // A poll reset does the same.
    let mut b = body(3_100, Vec::new());
    b.reset = Some(PollReset {
        reason: ResetReason::TooFarBehind,
    });
    let fx = p.answer_or_poll(b);
    assert_eq!(
        fx,
        vec![Effect::Reset {
            reason: ResetReason::TooFarBehind
        }]
    );
    assert_eq!(p.t.counters().floor(), Seq(3_100));
}

#[test]
fn a_head_answered_without_a_cursor_never_skips_events() {
    // The first poll and the first stream both start without a cursor. The poll answers
    // head 100; the stream's hello later says head 105: events 101–105 were never sent
    // here, so the floor rises and readings older than 105 re-read.
    let mut p = Page::new();
    p.subscribe(1, SubscribeOptions::default());
    p.answer(body(100, Vec::new()));
    p.reading(1, 1, 100, 1, &[]);
    p.visible(1);
    assert!(!p.t.is_stale(QueryId(1)));
    let fx = p.hello(105);
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Reset { .. })),
        "no reset: {fx:?}"
    );
    assert_eq!(p.t.counters().floor(), Seq(105));
    assert!(p.t.is_stale(QueryId(1)));
    let fx = p.advance_to(L.client_window());
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(105))]);
    // A connection that resumes from the cursor says hello at it: nothing rises.
    p.reading(1, 1, 105, 1, &[]);
    p.stream_error(None, None);
    let fx = p.advance_to(p.now + L.reconnect_min());
    assert!(matches!(&fx[..], [Effect::OpenStream { cursor: Some(c), .. }] if *c == cur(105)));
    p.hello(105);
    p.changes(110, vec![ev(110, 2, None, None)]);
    assert_eq!(p.t.counters().floor(), Seq(105));
    assert!(!p.t.is_stale(QueryId(1)));
}

#[test]
fn a_new_epoch_is_a_reset() {
    let mut p = Page::streaming(10);
    p.stream_error(None, None);
    p.advance_to(L.reconnect_min());
    let fx = p.frame(Frame::Hello {
        epoch: other_epoch(),
        cursor: Cursor {
            epoch: other_epoch(),
            seq: Seq(3),
        },
        tick_ms: L.tick(),
    });
    assert_eq!(
        fx,
        vec![Effect::Reset {
            reason: ResetReason::Epoch
        }]
    );
    assert_eq!(p.t.cursor().unwrap().epoch, other_epoch());
    assert_eq!(p.t.counters().floor(), Seq(3));
}

// ---------------------------------------------------------------------------------------
// 7.5 Counters

#[test]
fn counters_never_move_backwards() {
    let mut c = Counters::new(L.client_counters() as usize);
    c.reset(&epoch(), Seq(10));
    let s = CounterKey::Scope(Token([1; 16]));
    assert_eq!(c.get(&s), Seq(10), "reads the floor");
    assert!(c.bump(&ev(30, 1, Some(1), None)));
    assert!(!c.bump(&ev(30, 1, Some(1), None)), "a duplicate is a no-op");
    assert!(
        !c.bump(&ev(20, 1, Some(1), None)),
        "a late event is a no-op"
    );
    assert!(!c.bump(&ev(5, 1, None, None)), "below the floor");
    assert_eq!(c.get(&s), Seq(30));
    assert_eq!(c.get(&CounterKey::Key(Token([101; 16]))), Seq(30));
    assert_eq!(c.get(&CounterKey::Whole(Token([1; 16]))), Seq(10));
    assert!(c.bump(&ev(40, 1, None, None)));
    assert_eq!(
        c.relevant(Token([1; 16]), &[Token([101; 16])]),
        Seq(40),
        "whole counts for keys"
    );
    assert_eq!(c.relevant(Token([1; 16]), &[]), Seq(40));
    assert_eq!(c.source("ci.runs"), Seq(40));
    assert_eq!(c.sources(&["ci.runs", "other"]), Seq(40));
    assert_eq!(c.sources(&["other"]), Seq(10));
}

#[test]
fn counters_are_maxima_under_any_delivery_order() {
    // The same events in several orders, with duplicates, give the same counters.
    let events: Vec<WireEvent> = (1..=40)
        .map(|i| {
            ev(
                i,
                (i % 3) as u8,
                (i % 4 != 0).then_some((i % 5) as u8),
                None,
            )
        })
        .collect();
    let snapshot = |order: &[usize]| {
        let mut c = Counters::new(1_000);
        c.reset(&epoch(), Seq(0));
        for i in order {
            c.bump(&events[*i]);
        }
        (0..3u8)
            .flat_map(|s| {
                [
                    c.get(&CounterKey::Scope(Token([s; 16]))),
                    c.get(&CounterKey::Whole(Token([s; 16]))),
                ]
            })
            .chain((0..5u8).map(|k| c.get(&CounterKey::Key(Token([100 + k; 16])))))
            .collect::<Vec<_>>()
    };
    let forward: Vec<usize> = (0..40).collect();
    let backward: Vec<usize> = (0..40).rev().collect();
    let shuffled: Vec<usize> = (0..40).map(|i| (i * 17) % 40).chain(0..40).collect();
    assert_eq!(snapshot(&forward), snapshot(&backward));
    assert_eq!(snapshot(&forward), snapshot(&shuffled));

    // Through the transport: a poll and the stream overlapping, out of order.
    let mut p = Page::streaming(0);
    p.changes(30, vec![ev(10, 1, None, None), ev(30, 1, Some(1), None)]);
    p.answer_or_poll(body(25, vec![ev(25, 1, Some(1), None)]));
    assert_eq!(
        p.t.counters().get(&CounterKey::Key(Token([101; 16]))),
        Seq(30)
    );
}

#[test]
fn the_counter_bound_evicts_unobserved_entries_only() {
    let limit = L.client_counters() as usize;
    let mut c = Counters::new(limit);
    c.reset(&epoch(), Seq(0));
    let watched = CounterKey::Source("watched".into());
    c.observe(watched.clone());
    let mut e = ev(1, 1, None, None);
    e.source = "watched".into();
    c.bump(&e);
    let mut old = ev(2, 1, None, None);
    old.source = "old".into();
    c.bump(&old);
    for i in 0..2 * limit as u64 {
        let mut e = ev(10 + i, 1, None, None);
        e.source = format!("s{i}");
        c.bump(&e);
        if i == limit as u64 + 5 {
            // Bumped again late: now among the most recent.
            c.bump(&WireEvent {
                seq: 5_000,
                ..old.clone()
            });
        }
    }
    assert_eq!(c.len(), limit, "observed entries count towards the bound");
    assert_eq!(c.source("watched"), Seq(1), "observed entries stay");
    assert_eq!(c.source("s0"), Seq(0), "evicted entries read as the floor");
    assert_eq!(
        c.source("old"),
        Seq(5_000),
        "least recently bumped goes first"
    );
    assert_eq!(
        c.source(&format!("s{}", 2 * limit - 1)),
        Seq(10 + 2 * limit as u64 - 1)
    );
    c.unobserve(&watched);
    let mut e = ev(99_999, 1, None, None);
    e.source = "new".into();
    c.bump(&e);
    assert!(c.len() <= limit);
    assert_eq!(
        c.source("watched"),
        Seq(0),
        "unobserved now, and the oldest"
    );
}

// ---------------------------------------------------------------------------------------
// 7.6 Echo suppression

#[test]
fn ignore_own_skips_this_pages_events_only() {
    let mut p = Page::new();
    p.subscribe(
        1,
        SubscribeOptions {
            ignore_own: true,
            ..SubscribeOptions::default()
        },
    );
    p.subscribe(2, SubscribeOptions::default());
    p.answer(body(0, Vec::new()));
    p.hello(0);
    let fx = p.changes(
        3,
        vec![
            ev(1, 1, None, Some(PAGE)),
            ev(2, 1, Some(1), None),
            ev(3, 2, None, Some("p-bbbbbbbbbbbbbbbbbbbbbbbbbb")),
        ],
    );
    assert_eq!(delivered(&fx, 1), vec![2, 3], "null rs is never ignored");
    assert_eq!(delivered(&fx, 2), vec![1, 2, 3]);
    // Counters count echoes too.
    assert_eq!(
        p.t.counters().get(&CounterKey::Whole(Token([1; 16]))),
        Seq(1)
    );
}

#[test]
fn live_queries_re_read_after_the_pages_own_write() {
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    p.now = 100;
    p.changes(11, vec![ev(11, 1, None, Some(PAGE))]);
    let fx = p.advance_to(100 + L.client_window());
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(11))]);
}

// ---------------------------------------------------------------------------------------
// 7.7 Re-reads

#[test]
fn the_stale_rule() {
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[1]); // keyed
    p.reading(2, 1, 10, 1, &[]); // whole source
    p.changes(11, vec![ev(11, 1, Some(2), None)]); // another key of scope 1
    assert!(!p.t.is_stale(QueryId(1)));
    assert!(p.t.is_stale(QueryId(2)));
    p.changes(12, vec![ev(12, 2, None, None)]); // another scope
    assert!(!p.t.is_stale(QueryId(1)));
    p.changes(13, vec![ev(13, 1, Some(1), None)]);
    assert!(p.t.is_stale(QueryId(1)));
    p.reading(1, 1, 13, 1, &[1]);
    assert!(!p.t.is_stale(QueryId(1)));
    p.changes(14, vec![ev(14, 1, None, None)]); // the whole scope concerns keyed readings
    assert!(p.t.is_stale(QueryId(1)));
    // Another epoch, or a version below the floor, is stale.
    p.input(Input::ReadingArrived {
        query: QueryId(3),
        block: BlockId(1),
        reading: Reading {
            sync: Some(ReadingSync {
                epoch: other_epoch(),
                ..sync(99, 1, &[1])
            }),
            ..Reading::default()
        },
    });
    assert!(p.t.is_stale(QueryId(3)));
    p.reading(4, 1, 9, 5, &[]);
    assert!(p.t.is_stale(QueryId(4)));
}

#[test]
fn the_coalescing_window_is_250_ms_and_does_not_extend() {
    let w = L.client_window();
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    p.now = 1_000;
    p.changes(11, vec![ev(11, 1, None, None)]);
    p.now = 1_000 + w - 50;
    p.changes(12, vec![ev(12, 1, None, None)]);
    assert!(reads(&p.advance_to(1_000 + w - 1)).is_empty());
    let fx = p.advance_to(1_000 + w);
    assert_eq!(
        reads(&fx),
        vec![(QueryId(1), Some(12))],
        "seen = the counter that made it stale"
    );
}

#[test]
fn one_request_in_flight_then_exactly_one_trailing() {
    let w = L.client_window();
    let gap = L.client_query_gap();
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    p.changes(11, vec![ev(11, 1, None, None)]);
    let fx = p.advance_to(w);
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(11))]);
    // More changes while in flight.
    for (i, t) in [300u64, 400, 500, 600].iter().enumerate() {
        p.now = *t;
        p.changes(12 + i as u64, vec![ev(12 + i as u64, 1, None, None)]);
    }
    assert!(reads(&p.advance_to(1_000)).is_empty(), "one in flight");
    p.now = 1_100;
    p.reading(1, 1, 11, 1, &[]);
    let fx = p.advance_to(w + gap);
    assert_eq!(
        reads(&fx),
        vec![(QueryId(1), Some(15))],
        "one trailing request, after the gap"
    );
    p.reading(1, 1, 15, 1, &[]);
    assert!(reads(&p.advance_to(5_000)).is_empty());
}

#[test]
fn change_driven_starts_are_at_least_a_second_apart() {
    // A change every 50 ms for 4 s; each read answers 20 ms later with the head at its start.
    let gap = L.client_query_gap();
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    let mut answers: Vec<(u64, u64)> = Vec::new();
    let mut starts = Vec::new();
    for t in 0..=4_000u64 {
        let mut fx = p.advance_to(t);
        let head = 11 + t / 50;
        if t % 50 == 0 {
            fx.extend(p.changes(head, vec![ev(head, 1, None, None)]));
        }
        if let Some(i) = answers.iter().position(|(at, _)| *at == t) {
            let (_, version) = answers.remove(i);
            fx.extend(p.reading(1, 1, version, 1, &[]));
        }
        for (_, seen) in reads(&fx) {
            assert!(seen.is_some(), "no cadence read within 4 s of readings");
            starts.push(t);
            answers.push((t + 20, head));
        }
    }
    assert!(starts.len() >= 3, "{starts:?}");
    assert!(starts.windows(2).all(|w| w[1] - w[0] >= gap), "{starts:?}");
}

#[test]
fn retry_after_ms_is_honoured() {
    let w = L.client_window();
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    p.changes(11, vec![ev(11, 1, None, None)]);
    p.advance_to(w);
    // The server answers the cached reading: staleBy, retryAfterMs 3000.
    p.now = w + 10;
    p.input(Input::ReadingArrived {
        query: QueryId(1),
        block: BlockId(1),
        reading: Reading {
            sync: Some(sync(10, 1, &[])),
            retry_after_ms: Some(3_000),
            refused: false,
        },
    });
    assert!(reads(&p.advance_to(w + 10 + 2_999)).is_empty());
    let fx = p.advance_to(w + 10 + 3_000);
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(11))]);
}

#[test]
fn at_most_four_change_driven_requests_per_page_in_order() {
    let max = L.client_requests();
    let mut p = Page::streaming(10);
    for q in 1..=6 {
        p.reading(q, q, 10, q as u8, &[]);
        p.visible(q);
    }
    let events: Vec<WireEvent> = (1..=6u8)
        .map(|s| ev(10 + s as u64, s, None, None))
        .collect();
    p.changes(16, events);
    let fx = p.advance_to(L.client_window());
    let first: Vec<u64> = reads(&fx).iter().map(|(q, _)| q.0).collect();
    assert_eq!(first.len() as u64, max);
    assert_eq!(first, vec![1, 2, 3, 4]);
    p.now = 400;
    let fx = p.reading(3, 3, 13, 3, &[]);
    assert_eq!(
        reads(&fx),
        vec![(QueryId(5), Some(15))],
        "the queue goes on in order"
    );
    let fx = p.reading(1, 1, 11, 1, &[]);
    assert_eq!(reads(&fx), vec![(QueryId(6), Some(16))]);
}

#[test]
fn no_retry_for_the_same_seen_when_the_version_stays_below() {
    let w = L.client_window();
    let gap = L.client_query_gap();
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    p.changes(11, vec![ev(11, 1, None, None)]);
    p.advance_to(w);
    p.now = w + 10;
    p.reading(1, 1, 10, 1, &[]); // the instance could not catch up
    assert!(p.t.is_stale(QueryId(1)));
    assert!(
        reads(&p.advance_to(w + 3 * gap)).is_empty(),
        "the cadence takes over"
    );
    // A newer change is a new `seen`.
    p.changes(12, vec![ev(12, 1, None, None)]);
    let at = p.now;
    let fx = p.advance_to(at + w);
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(12))]);
}

#[test]
fn hidden_blocks_never_read_and_read_once_when_shown_if_stale() {
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.changes(11, vec![ev(11, 1, None, None)]);
    assert!(
        reads(&p.advance_to(3 * refresh())).is_empty(),
        "no change reads, no cadence"
    );
    let fx = p.visible(1);
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(11))], "exactly one read");
    p.input(Input::BlockHidden { block: BlockId(1) });
    p.now += 100;
    p.reading(1, 1, 11, 1, &[]);
    p.changes(12, vec![ev(12, 1, None, None)]);
    assert!(reads(&p.advance_to(p.now + 5_000)).is_empty());
    // A hidden document hides every block.
    p.visible(1);
    p.now += 10;
    p.reading(1, 1, 12, 1, &[]);
    p.input(Input::Visibility { visible: false });
    p.changes(13, vec![ev(13, 1, None, None)]);
    assert!(reads(&p.advance_to(p.now + 1_000)).is_empty());
    let fx = p.input(Input::Visibility { visible: true });
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(13))]);
}

#[test]
fn every_reading_restarts_the_cadence() {
    let r = refresh();
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    assert!(reads(&p.advance_to(r - 1)).is_empty());
    let fx = p.advance_to(r);
    assert_eq!(
        reads(&fx),
        vec![(QueryId(1), None)],
        "a cadence read carries no seen"
    );
    p.now = r + 30;
    p.reading(1, 1, 10, 1, &[]);
    p.now = r + 6_000;
    p.reading(1, 1, 10, 1, &[]); // e.g. an input change read
    assert!(reads(&p.advance_to(2 * r + 5_999)).is_empty());
    assert_eq!(reads(&p.advance_to(2 * r + 6_000)).len(), 1);
}

#[test]
fn readings_older_than_the_floor_read_at_once() {
    let mut p = Page::new();
    p.subscribe(1, SubscribeOptions::default());
    // A frozen first reading at version 50, before the transport knows its cursor.
    p.reading(1, 1, 50, 1, &[]);
    p.visible(1);
    assert!(reads(&p.log.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>()).is_empty());
    let fx = p.answer(body(80, Vec::new()));
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(80))]);
}

#[test]
fn a_reset_re_reads_visible_readings_once() {
    let w = L.client_window();
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    p.reading(2, 2, 10, 2, &[]); // hidden
    p.frame(Frame::Reset {
        cursor: cur(5_000),
        reason: ResetReason::TooFarBehind,
    });
    let fx = p.advance_to(w);
    assert_eq!(reads(&fx), vec![(QueryId(1), Some(5_000))]);
    p.now = w + 20;
    p.reading(1, 1, 5_000, 1, &[]);
    assert!(reads(&p.advance_to(w + 5_000)).is_empty());
    assert_eq!(
        reads(&p.visible(2)),
        vec![(QueryId(2), Some(5_000))],
        "hidden ones when shown"
    );
}

#[test]
fn refused_readings_are_not_re_read_on_change() {
    let mut p = Page::streaming(10);
    p.visible(1);
    p.input(Input::ReadingArrived {
        query: QueryId(1),
        block: BlockId(1),
        reading: Reading {
            sync: Some(sync(10, 1, &[])),
            retry_after_ms: None,
            refused: true,
        },
    });
    p.changes(11, vec![ev(11, 1, None, None)]);
    assert!(reads(&p.advance_to(refresh() - 1)).is_empty());
    assert_eq!(
        reads(&p.advance_to(refresh())),
        vec![(QueryId(1), None)],
        "the cadence retries"
    );
}

#[test]
fn no_change_driven_reads_while_signed_out() {
    let mut p = Page::streaming(10);
    p.reading(1, 1, 10, 1, &[]);
    p.visible(1);
    p.changes(11, vec![ev(11, 1, None, None)]);
    p.now = 100;
    p.stream_error(Some(401), None);
    assert!(reads(&p.advance_to(L.client_window() + 1_000)).is_empty());
}

#[test]
fn a_burst_makes_at_most_three_reads_per_query_in_three_seconds() {
    // §8.6: 1,000 writes to one key over 1 s, stream frames every 100 ms, reads take 50 ms
    // and reflect the head at their start.
    let mut p = Page::streaming(0);
    p.reading(1, 1, 0, 1, &[1]);
    p.visible(1);
    let mut head = 0u64;
    let mut answers: Vec<(u64, u64)> = Vec::new();
    let mut read_times = Vec::new();
    for t in 0..=3_000u64 {
        let mut fx = p.advance_to(t);
        if t > 0 && t <= 1_000 {
            head = t; // one write per ms
        }
        if t % 100 == 50 && t <= 1_100 {
            fx.extend(p.changes(head, vec![ev(head, 1, Some(1), None)]));
        }
        for (q, _) in reads(&fx) {
            assert_eq!(q, QueryId(1));
            read_times.push(t);
            answers.push((t + 50, head));
        }
        if let Some(i) = answers.iter().position(|(at, _)| *at == t) {
            let (_, version) = answers.remove(i);
            let fx = p.reading(1, 1, version, 1, &[1]);
            for _ in reads(&fx) {
                read_times.push(t);
                answers.push((t + 50, head));
            }
        }
    }
    assert!(read_times.len() <= 3, "{read_times:?}");
    // In fact: one after the first frame's window, one trailing a second later.
    assert_eq!(read_times.len(), 2, "{read_times:?}");
    assert!(read_times[1] - read_times[0] >= L.client_query_gap());
    assert!(
        read_times[0] <= 500,
        "first read within the budget: {read_times:?}"
    );
    assert!(
        !p.t.is_stale(QueryId(1)),
        "the last reading covers the burst"
    );
}

// ---------------------------------------------------------------------------------------
// 7.8 Edited fields

#[test]
fn external_values_replace_a_field_only_while_inactive() {
    let mut f = EditedField::new("a".to_owned());
    assert!(f.set_external("b".into()));
    assert_eq!((f.local().as_str(), f.base().as_str()), ("b", "b"));
    f.focus();
    assert!(!f.set_external("c".into()), "active: local stays");
    assert_eq!(f.local(), "b");
    assert!(f.conflict(), "changed elsewhere");
    assert!(f.blur(), "blur while clean: local = base = external");
    assert_eq!((f.local().as_str(), f.base().as_str()), ("c", "c"));
    assert!(!f.conflict());
}

#[test]
fn a_dirty_field_keeps_its_text_until_saved_or_discarded() {
    let mut f = EditedField::new(1);
    f.focus();
    f.edit(5);
    assert!(!f.blur(), "dirty: still active");
    assert!(f.is_active());
    assert!(!f.set_external(2));
    assert_eq!(*f.local(), 5);
    assert!(f.conflict());
    assert!(f.discard());
    assert_eq!((*f.local(), *f.base(), f.is_active()), (2, 2, false));
}

#[test]
fn saving_rebases_and_the_echo_is_a_no_op() {
    let mut f = EditedField::new("draft".to_owned());
    f.focus();
    f.edit("final".into());
    let saved = f.to_save();
    f.saved(saved);
    assert!(!f.is_dirty());
    assert!(!f.conflict());
    // The next authoritative value equals local: nothing moves.
    assert!(!f.set_external("final".into()));
    assert_eq!(f.local(), "final");
    // Typing went on during the save: still dirty afterwards.
    f.edit("final!".into());
    f.saved("final".into());
    assert!(f.is_dirty());
}

#[test]
fn an_external_value_equal_to_local_never_resets_the_field() {
    let mut f = EditedField::new("x".to_owned());
    f.focus();
    f.edit("y".into());
    // Someone else wrote the same text: no caret jump, and the field is clean again.
    assert!(!f.set_external("y".into()));
    assert!(!f.is_dirty());
    assert!(!f.conflict());
    // Caller's equality: case-insensitive.
    let mut g = EditedField::with_eq("Hi".to_owned(), |a, b| a.eq_ignore_ascii_case(b));
    assert!(!g.set_external("HI".into()));
    assert_eq!(g.local(), "Hi");
}

#[test]
fn a_poll_retry_after_stretches_the_next_poll() {
    let idle = L.poll_idle();
    let mut p = polling();
    p.advance_to(idle);
    let poll = p.poll.take().unwrap();
    p.input(Input::PollFailed {
        poll,
        status: Some(429),
        retry_after_ms: Some(5 * idle),
    });
    assert_eq!(next_poll(&mut p), 6 * idle, "max(backoff, Retry-After)");
}

#[test]
fn removed_blocks_stop_reading_and_free_their_slots() {
    let max = L.client_requests();
    let mut p = Page::streaming(10);
    for q in 1..=5 {
        p.reading(q, q, 10, q as u8, &[]);
        p.visible(q);
    }
    let events: Vec<WireEvent> = (1..=5u8)
        .map(|s| ev(10 + s as u64, s, None, None))
        .collect();
    p.changes(15, events);
    let fx = p.advance_to(L.client_window());
    assert_eq!(reads(&fx).len() as u64, max);
    // Removing a block with a read in flight lets the queue go on.
    let fx = p.input(Input::BlockRemoved { block: BlockId(1) });
    assert_eq!(reads(&fx), vec![(QueryId(5), Some(15))]);
    assert!(!p.t.is_stale(QueryId(1)), "forgotten");
    let now = p.now;
    let fx = p.advance_to(now + 2 * refresh());
    assert!(reads(&fx).iter().all(|(q, _)| *q != QueryId(1)));
}

#[test]
fn observed_sources_survive_the_counter_bound() {
    let limit = L.client_counters();
    let mut p = Page::streaming(0);
    p.t.observe_source("watched");
    let mut e = ev(1, 1, None, None);
    e.source = "watched".into();
    p.changes(1, vec![e]);
    let events: Vec<WireEvent> = (0..2 * limit)
        .map(|i| WireEvent {
            source: format!("s{i}"),
            ..ev(2 + i, 1, None, None)
        })
        .collect();
    p.changes(2 * limit + 1, events);
    assert_eq!(p.t.counters().source("watched"), Seq(1));
    assert_eq!(p.t.counters().source("s0"), Seq(0));
    assert!(p.t.counters().len() as u64 <= limit);
    p.t.unobserve_source("watched");
}
