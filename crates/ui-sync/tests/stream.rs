//! The server side of `/ui/events` and `/ui/poll` (`sync.md` §4), driven with a virtual
//! clock: frames, flush windows, ticks, limits, audience filtering, lag, endings, the poll
//! body, the poll rate limit and the stream slots.

use ui_core::SyncLimits;
use ui_sync::{
    Audience, AudienceSet, Batch, ByeReason, Cursor, Epoch, Frame, LogRow, NewRow, Op, PollBody,
    RateLimiter, ReadAfter, ResetReason, Salt, Seq, SlotRefused, StreamConn, StreamSlots,
    SyncStore, WireEvent, collapse, read_after, resume_cursor, retry_after_secs, stream_lifetime,
};

const L: SyncLimits = SyncLimits::DEFAULT;

fn epoch() -> Epoch {
    "mq3x7kd2pa4r".parse().unwrap()
}

fn cur(seq: u64) -> Cursor {
    Cursor {
        epoch: epoch(),
        seq: Seq(seq),
    }
}

fn new_row(source: &str, audience: &Audience, key: Option<&str>, rs: Option<&str>) -> NewRow {
    let salt = Salt([7; 32]);
    NewRow {
        source: source.to_owned(),
        audience: audience.clone(),
        scope: salt.scope(source, audience),
        key: key.map(|k| salt.key(source, audience, k)),
        rs: rs.and_then(ui_sync::RequestSource::parse),
        op: Op::Change,
        n: 1,
        at_ms: 1_767_000_000_000,
    }
}

fn row(seq: u64, source: &str, audience: &Audience, key: Option<&str>) -> LogRow {
    LogRow {
        seq: Seq(seq),
        row: new_row(source, audience, key, None),
    }
}

fn reset_row(seq: u64) -> LogRow {
    let mut r = row(seq, "host.sync", &Audience::global(), None);
    r.row.op = Op::Reset;
    r
}

fn batch(rows: Vec<LogRow>) -> Batch {
    Batch {
        first: rows.first().map_or(Seq(0), |r| r.seq),
        last: rows.last().map_or(Seq(0), |r| r.seq),
        rows,
        published: None,
    }
}

fn project() -> Audience {
    Audience::project("p1")
}

fn audiences(list: &[Audience]) -> AudienceSet {
    AudienceSet::new(list.iter().cloned(), 1_000)
}

const LIFETIME: u64 = 900_000;

/// A live connection for project p1, started at `head` with no catch-up events at t = 0.
fn live(head: u64) -> StreamConn {
    live_with(head, L)
}

fn live_with(head: u64, limits: SyncLimits) -> StreamConn {
    let mut c = StreamConn::new(audiences(&[project()]), epoch(), None, 0, LIFETIME, limits);
    c.start(
        ReadAfter::Events {
            cursor: cur(head),
            events: Vec::new(),
        },
        0,
    );
    c
}

fn changes(frames: &[Frame]) -> Vec<(&Cursor, &Vec<WireEvent>)> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Changes { cursor, events } => Some((cursor, events)),
            _ => None,
        })
        .collect()
}

#[test]
fn resume_cursor_prefers_last_event_id_over_the_cursor_parameter() {
    let header = "mq3x7kd2pa4r.20";
    let param = "mq3x7kd2pa4r.10";
    assert_eq!(resume_cursor(Some(header), Some(param)), Some(header));
    assert_eq!(resume_cursor(None, Some(param)), Some(param));
    assert_eq!(resume_cursor(Some(" "), Some(param)), Some(param));
    assert_eq!(resume_cursor(Some(header), None), Some(header));
    assert_eq!(resume_cursor(None, None), None);
    // A blank parameter is a cursor that does not parse, not an absent one.
    assert_eq!(resume_cursor(None, Some("")), Some(""));
    assert_eq!(resume_cursor(Some(""), Some(" ")), Some(" "));

    // The connection says hello at the header's position.
    let mut c = StreamConn::new(
        audiences(&[project()]),
        epoch(),
        resume_cursor(Some(header), Some(param)),
        0,
        LIFETIME,
        L,
    );
    let frames = c.start(
        ReadAfter::Events {
            cursor: cur(30),
            events: vec![WireEvent::from(&row(25, "ci.runs", &project(), None))],
        },
        0,
    );
    assert_eq!(frames[1].id(), Some(&cur(20)));
    assert_eq!(frames[2].id(), Some(&cur(30)));
}

#[test]
fn start_without_a_cursor_says_hello_at_the_head_exactly() {
    let mut c = StreamConn::new(audiences(&[project()]), epoch(), None, 0, LIFETIME, L);
    let frames = c.start(
        ReadAfter::Events {
            cursor: cur(1042),
            events: Vec::new(),
        },
        0,
    );
    let text: String = frames.iter().map(Frame::to_sse).collect();
    assert_eq!(
        text,
        "retry: 1000\n\
         id: mq3x7kd2pa4r.1042\nevent: hello\n\
         data: {\"v\":1,\"epoch\":\"mq3x7kd2pa4r\",\"cursor\":\"mq3x7kd2pa4r.1042\",\"tickMs\":15000}\n\n"
    );
    assert_eq!(c.cursor(), cur(1042));
}

#[test]
fn start_sends_catch_up_changes_with_the_head_as_id() {
    let mut c = StreamConn::new(
        audiences(&[project()]),
        epoch(),
        Some("mq3x7kd2pa4r.1000"),
        0,
        LIFETIME,
        L,
    );
    let rows = [
        row(1047, "ci.runs", &project(), Some("branch:main")),
        row(1050, "ci.runs", &project(), Some("branch:dev")),
    ];
    let frames = c.start(
        ReadAfter::Events {
            cursor: cur(1050),
            events: collapse(&rows),
        },
        0,
    );
    assert_eq!(frames.len(), 3);
    assert!(matches!(frames[0], Frame::Retry { ms: 1000 }));
    assert_eq!(frames[1].id(), Some(&cur(1000)));
    let text = frames[2].to_sse();
    assert!(text.starts_with(
        "id: mq3x7kd2pa4r.1050\nevent: changes\ndata: {\"cursor\":\"mq3x7kd2pa4r.1050\",\"events\":[{\"seq\":1047,\"source\":\"ci.runs\",\"scope\":\""
    ));
    assert!(text.ends_with("\"rs\":null,\"at\":1767000000000,\"n\":1}]}\n\n"));
    assert_eq!(text.matches('\n').count(), 4, "one data line: {text}");
}

#[test]
fn start_with_a_reset_sends_the_reset_after_hello() {
    let mut c = StreamConn::new(
        audiences(&[project()]),
        epoch(),
        Some("mq3x7kd2pa4r.5"),
        0,
        LIFETIME,
        L,
    );
    let frames = c.start(
        ReadAfter::Reset {
            cursor: cur(3100),
            reason: ResetReason::TooFarBehind,
        },
        0,
    );
    assert_eq!(
        frames[2].to_sse(),
        "id: mq3x7kd2pa4r.3100\nevent: reset\ndata: {\"reason\":\"too-far-behind\",\"cursor\":\"mq3x7kd2pa4r.3100\"}\n\n"
    );
    // A resume cursor that does not parse: hello at the head, then the reset.
    let mut c = StreamConn::new(
        audiences(&[project()]),
        epoch(),
        Some("junk"),
        0,
        LIFETIME,
        L,
    );
    let frames = c.start(
        ReadAfter::Reset {
            cursor: cur(9),
            reason: ResetReason::Invalid,
        },
        0,
    );
    assert_eq!(frames[1].id(), Some(&cur(9)));
    assert!(matches!(
        frames[2],
        Frame::Reset {
            reason: ResetReason::Invalid,
            ..
        }
    ));
}

#[test]
fn a_thousand_events_in_one_second_make_at_most_eleven_frames() {
    // One row per ms for 1 s; the 100 ms flush window allows ⌈1000 / 100⌉ + 1 = 11 frames.
    let bound = 1_000 / L.flush_window() + 1;
    let mut c = live(0);
    let mut frames = Vec::new();
    for t in 0..=1_300u64 {
        if (1..=1_000).contains(&t) {
            let key = format!("branch:{}", t % 50);
            frames.extend(c.on_batch(&batch(vec![row(t, "ci.runs", &project(), Some(&key))]), t));
        }
        frames.extend(c.poll_timers(t));
    }
    let sent = changes(&frames);
    assert!(sent.len() as u64 <= bound, "{} frames", sent.len());
    assert!(sent.len() >= 9);
    let total: u32 = sent.iter().flat_map(|(_, e)| e.iter()).map(|e| e.n).sum();
    assert_eq!(total, 1_000, "every write is accounted for");
    assert_eq!(sent.last().unwrap().0, &cur(1_000));
    for (_, events) in &sent {
        assert!(events.len() <= 50, "collapsed by key");
        assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}

#[test]
fn the_flush_window_opens_with_the_first_pending_row_and_never_extends() {
    let mut c = live(0);
    assert!(
        c.on_batch(&batch(vec![row(1, "ci.runs", &project(), Some("a"))]), 10)
            .is_empty()
    );
    assert_eq!(c.next_deadline(), Some(110));
    c.on_batch(&batch(vec![row(2, "ci.runs", &project(), Some("a"))]), 100);
    assert_eq!(c.next_deadline(), Some(110), "the window is not extended");
    assert!(c.poll_timers(109).is_empty());
    let frames = c.poll_timers(110);
    let sent = changes(&frames);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, &cur(2));
    assert_eq!((sent[0].1[0].seq, sent[0].1[0].n), (2, 2));
    assert_eq!(c.pending_len(), 0);
}

#[test]
fn ticks_follow_fifteen_seconds_of_silence_with_the_connection_cursor() {
    let tick = L.tick();
    let mut c = live(10);
    assert_eq!(c.next_deadline(), Some(tick));
    assert!(c.poll_timers(tick - 1).is_empty());
    assert_eq!(c.poll_timers(tick), vec![Frame::Tick { cursor: cur(10) }]);
    // Rows nobody here may see still move the cursor, silently.
    let other = Audience::project("p2");
    assert!(
        c.on_batch(
            &batch(vec![
                row(11, "ci.runs", &other, None),
                row(50, "ci.runs", &other, None)
            ]),
            tick + 1
        )
        .is_empty()
    );
    assert_eq!(
        c.poll_timers(2 * tick),
        vec![Frame::Tick { cursor: cur(50) }]
    );
    assert_eq!(
        Frame::Tick { cursor: cur(50) }.to_sse(),
        "id: mq3x7kd2pa4r.50\nevent: tick\ndata: {\"cursor\":\"mq3x7kd2pa4r.50\"}\n\n"
    );
}

#[test]
fn no_tick_while_entries_are_pending() {
    let tick = L.tick();
    let window = L.flush_window();
    let mut c = live(0);
    let arrive = tick - window / 2;
    c.on_batch(&batch(vec![row(1, "ci.runs", &project(), None)]), arrive);
    // The tick is due, but an entry is pending: no tick.
    assert!(c.poll_timers(tick).is_empty());
    assert_eq!(c.pending_len(), 1);
    assert_eq!(c.next_deadline(), Some(arrive + window));
    let frames = c.poll_timers(arrive + window);
    assert_eq!(frames.len(), 1, "only the flush: {frames:?}");
    assert!(matches!(frames[0], Frame::Changes { .. }));
    assert_eq!(c.next_deadline(), Some(arrive + window + tick));
}

#[test]
fn the_key_limit_closes_the_window_early() {
    let keys = L.frame_keys();
    for (count, early) in [(keys - 1, false), (keys, true), (keys + 1, true)] {
        let mut c = live(0);
        let rows: Vec<LogRow> = (1..=count)
            .map(|i| row(i, "ci.runs", &project(), Some(&format!("k{i}"))))
            .collect();
        let frames = c.on_batch(&batch(rows), 0);
        let sent = changes(&frames);
        if early {
            assert_eq!(sent.len(), 1, "{count} keys");
            assert_eq!(sent[0].1.len() as u64, keys);
            assert_eq!(sent[0].0, &cur(keys), "id = the last row in the frame");
            assert_eq!(c.pending_len() as u64, count - keys);
        } else {
            assert!(sent.is_empty(), "{count} keys");
            let later = c.poll_timers(L.flush_window());
            assert_eq!(changes(&later)[0].1.len() as u64, count);
        }
    }
}

fn long_row(seq: u64, scope: &str, key: &str) -> LogRow {
    let source = format!("{scope}.{}", "x".repeat(120));
    let rs = format!("agent:{}", "c".repeat(58));
    LogRow {
        seq: Seq(seq),
        row: new_row(&source, &project(), Some(key), Some(&rs)),
    }
}

#[test]
fn frames_over_the_byte_limit_merge_the_largest_scope() {
    // At the limit the frame goes out as is; one byte less and the largest scope's keyed
    // entries become one whole-scope entry.
    let rows: Vec<LogRow> = (1..=10)
        .map(|i| long_row(i, "a", &format!("k{i}")))
        .chain((11..=12).map(|i| long_row(i, "b", &format!("k{i}"))))
        .collect();
    let exact = Frame::Changes {
        cursor: cur(12),
        events: collapse(&rows),
    }
    .to_sse()
    .len() as u64;
    let mut c = live_with(0, L.with("frameBytes", exact).unwrap());
    c.on_batch(&batch(rows.clone()), 0);
    let frames = c.poll_timers(L.flush_window());
    assert_eq!(changes(&frames)[0].1.len(), 12);
    assert_eq!(frames[0].to_sse().len() as u64, exact);

    let mut c = live_with(0, L.with("frameBytes", exact - 1).unwrap());
    c.on_batch(&batch(rows.clone()), 0);
    let frames = c.poll_timers(L.flush_window());
    let sent = changes(&frames);
    assert_eq!(sent.len(), 1);
    let events = sent[0].1;
    assert_eq!(events.len(), 3, "{events:?}");
    let whole = events.iter().find(|e| e.key.is_none()).unwrap();
    assert!(whole.source.starts_with("a."));
    assert_eq!((whole.seq, whole.n, whole.rs.as_deref()), (10, 10, None));
    assert!(
        events
            .iter()
            .filter(|e| e.key.is_some())
            .all(|e| e.source.starts_with("b."))
    );
    assert!((frames[0].to_sse().len() as u64) < exact);
}

#[test]
fn default_frames_stay_within_sixty_four_kib() {
    // 256 long keyed events of one scope exceed 64 KiB; the scope becomes one entry.
    let keys = L.frame_keys();
    let rows: Vec<LogRow> = (1..=keys)
        .map(|i| long_row(i, "a", &format!("k{i}")))
        .collect();
    let raw = Frame::Changes {
        cursor: cur(keys),
        events: collapse(&rows),
    }
    .to_sse()
    .len() as u64;
    assert!(
        raw > L.frame_bytes(),
        "the test needs an oversized frame: {raw}"
    );
    let mut c = live(0);
    let frames = c.on_batch(&batch(rows), 0);
    let sent = changes(&frames);
    assert_eq!(sent.len(), 1);
    assert!(frames[0].to_sse().len() as u64 <= L.frame_bytes());
    assert_eq!(sent[0].1.len(), 1);
    assert_eq!(sent[0].1[0].n as u64, keys);
}

#[test]
fn a_catch_up_too_big_for_one_frame_is_split_at_true_resume_points() {
    // 600 scopes (no keys to merge) cannot fit in one frame: parts of at most 256 keys, the
    // earlier ones identified by their last event.
    let rows: Vec<LogRow> = (1..=600)
        .map(|i| row(i, &format!("src.{i}"), &project(), None))
        .collect();
    let mut c = StreamConn::new(
        audiences(&[project()]),
        epoch(),
        Some("mq3x7kd2pa4r.0"),
        0,
        LIFETIME,
        L,
    );
    let frames = c.start(
        ReadAfter::Events {
            cursor: cur(700),
            events: collapse(&rows),
        },
        0,
    );
    let sent = changes(&frames);
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].0, &cur(256));
    assert_eq!(sent[1].0, &cur(512));
    assert_eq!(sent[2].0, &cur(700));
    assert!(
        frames
            .iter()
            .all(|f| f.to_sse().len() as u64 <= L.frame_bytes())
    );
    assert_eq!(sent.iter().map(|(_, e)| e.len()).sum::<usize>(), 600);
}

#[test]
fn user_b_never_sees_user_a_on_the_stream() {
    let a = Audience::user("a");
    let b = Audience::user("b");
    let mut c = StreamConn::new(
        audiences(std::slice::from_ref(&b)),
        epoch(),
        None,
        0,
        LIFETIME,
        L,
    );
    c.start(
        ReadAfter::Events {
            cursor: cur(0),
            events: Vec::new(),
        },
        0,
    );
    let mut a_reset = reset_row(5);
    a_reset.row.audience = a.clone();
    let rows = vec![
        row(1, "notes", &a, Some("n1")),
        row(2, "notes", &b, Some("n1")),
        row(3, "ci.runs", &project(), None),
        row(4, "host.settings", &Audience::global(), None),
        a_reset,
    ];
    let mut frames = c.on_batch(&batch(rows), 0);
    frames.extend(c.poll_timers(L.flush_window()));
    assert_eq!(frames.len(), 1, "{frames:?}");
    let sent = changes(&frames);
    let seqs: Vec<u64> = sent[0].1.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![2, 4]);
    assert_eq!(sent[0].0, &cur(5));
    let salt = Salt([7; 32]);
    let a_scope = salt.scope("notes", &a).to_hex();
    assert!(!frames.iter().any(|f| f.to_sse().contains(&a_scope)));
}

#[tokio::test]
async fn user_b_never_sees_user_a_in_the_poll_body() {
    let store = ui_sync::SqliteStore::open_temp().await.unwrap();
    let salt = store.meta().salt.clone();
    let e = store.meta().epoch.clone();
    let a = Audience::user("a");
    let b = Audience::user("b");
    let mk = |aud: &Audience| NewRow {
        source: "notes".into(),
        audience: aud.clone(),
        scope: salt.scope("notes", aud),
        key: None,
        rs: None,
        op: Op::Change,
        n: 1,
        at_ms: 1,
    };
    store.append(vec![mk(&a), mk(&b), mk(&a)]).await.unwrap();
    let start = format!("{e}.0");
    let read = read_after(
        &store,
        Some(&start),
        &audiences(std::slice::from_ref(&b)),
        2_000,
    )
    .await
    .unwrap();
    let body = PollBody::new(&read);
    assert_eq!(body.events.len(), 1);
    assert_eq!(body.events[0].seq, 2);
    assert_eq!(
        body.cursor.seq,
        Seq(3),
        "the cursor is the head even past A's rows"
    );
    assert!(!body.to_json().contains(&salt.scope("notes", &a).to_hex()));
}

#[test]
fn a_reset_row_flushes_pending_then_resets_at_its_seq() {
    let mut c = live(4);
    let frames = c.on_batch(
        &batch(vec![
            row(5, "ci.runs", &project(), Some("a")),
            reset_row(6),
            row(7, "ci.runs", &project(), Some("b")),
        ]),
        0,
    );
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(changes(&frames)[0].0, &cur(5));
    assert_eq!(
        frames[1],
        Frame::Reset {
            cursor: cur(6),
            reason: ResetReason::Server
        }
    );
    assert_eq!(c.pending_len(), 1);
    let later = c.poll_timers(L.flush_window());
    assert_eq!(changes(&later)[0].0, &cur(7));
}

#[test]
fn the_cursor_only_moves_forward_and_old_rows_are_dropped() {
    let mut c = live(10);
    // Live rows at or below the snapshot head were in the catch-up.
    assert!(
        c.on_batch(
            &batch(vec![
                row(9, "ci.runs", &project(), None),
                row(10, "ci.runs", &project(), None)
            ]),
            0
        )
        .is_empty()
    );
    assert_eq!(c.pending_len(), 0);
    assert_eq!(c.cursor(), cur(10));
    c.on_batch(&batch(vec![row(12, "ci.runs", &project(), None)]), 0);
    c.on_batch(
        &batch(vec![row(11, "ci.runs", &project(), Some("late"))]),
        0,
    );
    assert_eq!(c.cursor(), cur(12));
    assert_eq!(c.pending_len(), 1);
}

#[test]
fn lag_switches_to_catch_up_and_back() {
    let mut c = live(10);
    c.on_batch(&batch(vec![row(11, "ci.runs", &project(), Some("a"))]), 0);
    assert!(!c.needs_catch_up());
    c.on_lagged();
    assert!(c.needs_catch_up());
    assert_eq!(c.cursor(), cur(11), "catch up from here");
    let caught = [
        row(15, "ci.runs", &project(), Some("a")),
        row(18, "ci.runs", &project(), Some("b")),
    ];
    let frames = c.on_catch_up(
        ReadAfter::Events {
            cursor: cur(20),
            events: collapse(&caught),
        },
        5,
    );
    assert!(!c.needs_catch_up());
    let sent = changes(&frames);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, &cur(20));
    let a = &sent[0].1[0];
    assert_eq!((a.seq, a.n), (15, 2), "pending and caught-up rows collapse");
    // Buffered hub batches overlapping the catch-up are dropped.
    assert!(
        c.on_batch(
            &batch(vec![
                row(19, "ci.runs", &project(), None),
                row(20, "ci.runs", &project(), None)
            ]),
            6
        )
        .is_empty()
    );
    assert_eq!(c.pending_len(), 0);
    c.on_lagged();
    let frames = c.on_catch_up(
        ReadAfter::Reset {
            cursor: cur(5_000),
            reason: ResetReason::TooFarBehind,
        },
        7,
    );
    assert_eq!(
        frames,
        vec![Frame::Reset {
            cursor: cur(5_000),
            reason: ResetReason::TooFarBehind
        }]
    );
}

#[test]
fn a_batch_before_start_asks_for_another_catch_up() {
    let mut c = StreamConn::new(audiences(&[project()]), epoch(), None, 0, LIFETIME, L);
    assert!(
        c.on_batch(&batch(vec![row(3, "ci.runs", &project(), None)]), 0)
            .is_empty()
    );
    c.start(
        ReadAfter::Events {
            cursor: cur(2),
            events: Vec::new(),
        },
        0,
    );
    assert!(c.needs_catch_up());
}

#[test]
fn rotation_flushes_then_says_bye_at_the_end_of_the_lifetime() {
    assert_eq!(stream_lifetime(&L, 0.0), L.stream_lifetime());
    assert_eq!(
        stream_lifetime(&L, 1.0),
        L.stream_lifetime() + L.stream_lifetime_jitter()
    );
    let life = stream_lifetime(&L, 0.5);
    assert!(
        (L.stream_lifetime()..=L.stream_lifetime() + L.stream_lifetime_jitter()).contains(&life)
    );

    let mut c = StreamConn::new(audiences(&[project()]), epoch(), None, 0, life, L);
    c.start(
        ReadAfter::Events {
            cursor: cur(0),
            events: Vec::new(),
        },
        0,
    );
    c.on_batch(&batch(vec![row(1, "ci.runs", &project(), None)]), life - 10);
    let frames = c.poll_timers(life);
    assert_eq!(frames.len(), 2);
    assert!(matches!(frames[0], Frame::Changes { .. }));
    assert_eq!(
        frames[1].to_sse(),
        "event: bye\ndata: {\"reason\":\"rotate\",\"retryMs\":0}\n\n"
    );
    assert!(c.is_closed());
    assert_eq!(c.next_deadline(), None);
    assert!(c.poll_timers(life + L.tick()).is_empty());
    assert!(
        c.on_batch(&batch(vec![row(2, "ci.runs", &project(), None)]), life)
            .is_empty()
    );
}

#[test]
fn sign_out_and_shutdown_flush_then_say_bye() {
    let mut c = live(0);
    c.on_batch(&batch(vec![row(1, "ci.runs", &project(), None)]), 0);
    let frames = c.sign_out(1);
    assert_eq!(frames.len(), 2);
    assert_eq!(
        frames[1].to_sse(),
        "event: bye\ndata: {\"reason\":\"signed-out\"}\n\n"
    );
    assert!(c.is_closed());
    assert!(c.sign_out(2).is_empty());

    let mut c = live(0);
    let frames = c.shutdown(3_210, 0);
    assert_eq!(
        frames,
        vec![Frame::Bye {
            reason: ByeReason::Shutdown,
            retry_ms: Some(3_210)
        }]
    );
    assert_eq!(
        frames[0].to_sse(),
        "event: bye\ndata: {\"reason\":\"shutdown\",\"retryMs\":3210}\n\n"
    );
}

#[test]
fn only_resume_points_carry_ids() {
    let frames = [
        Frame::Retry { ms: 1000 },
        Frame::Hello {
            epoch: epoch(),
            cursor: cur(1),
            tick_ms: 15_000,
        },
        Frame::Changes {
            cursor: cur(2),
            events: Vec::new(),
        },
        Frame::Tick { cursor: cur(3) },
        Frame::Reset {
            cursor: cur(4),
            reason: ResetReason::Server,
        },
        Frame::Bye {
            reason: ByeReason::Rotate,
            retry_ms: Some(0),
        },
    ];
    let with_id: Vec<bool> = frames.iter().map(|f| f.to_sse().contains("id: ")).collect();
    assert_eq!(with_id, vec![false, true, true, true, true, false]);
    for f in &frames[1..] {
        let text = f.to_sse();
        assert!(text.ends_with("\n\n"));
        assert_eq!(text.lines().filter(|l| l.starts_with("data: ")).count(), 1);
        // What the page reads back is the same frame.
        let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        assert_eq!(Frame::parse(f.event(), data).as_ref(), Some(f));
    }
    assert_eq!(Frame::parse("comment", "{}"), None);
    assert_eq!(Frame::parse("tick", "{\"cursor\":\"nope\"}"), None);
}

#[test]
fn poll_bodies_are_exact() {
    let rows = [LogRow {
        seq: Seq(1047),
        row: NewRow {
            n: 12,
            at_ms: 1_767_000_000_123,
            ..new_row("ci.runs", &project(), Some("branch:main"), None)
        },
    }];
    let events = collapse(&rows);
    let body = PollBody::new(&ReadAfter::Events {
        cursor: cur(1050),
        events: events.clone(),
    });
    let json = body.to_json();
    assert_eq!(
        json,
        format!(
            "{{\"epoch\":\"mq3x7kd2pa4r\",\"cursor\":\"mq3x7kd2pa4r.1050\",\"events\":[{{\"seq\":1047,\"source\":\"ci.runs\",\"scope\":\"{}\",\"key\":\"{}\",\"rs\":null,\"at\":1767000000123,\"n\":12}}],\"reset\":null}}",
            events[0].scope,
            events[0].key.as_deref().unwrap()
        )
    );
    assert_eq!(PollBody::parse(&json).unwrap(), body);
    let reset = PollBody::new(&ReadAfter::Reset {
        cursor: cur(3100),
        reason: ResetReason::Expired,
    });
    assert_eq!(
        reset.to_json(),
        "{\"epoch\":\"mq3x7kd2pa4r\",\"cursor\":\"mq3x7kd2pa4r.3100\",\"events\":[],\"reset\":{\"reason\":\"expired\"}}"
    );
    assert!(PollBody::parse("{\"epoch\":1}").is_err());
}

#[test]
fn the_poll_rate_limit_allows_a_burst_then_four_per_second() {
    let burst = L.poll_burst();
    let per_token = 1_000 / L.poll_rate();
    let mut r = RateLimiter::new(&L, 0);
    for _ in 0..burst {
        assert_eq!(r.check(0), Ok(()));
    }
    assert_eq!(
        r.check(0),
        Err(per_token),
        "request {} is refused",
        burst + 1
    );
    assert_eq!(retry_after_secs(per_token), 1);
    assert_eq!(r.check(per_token - 1), Err(1));
    assert_eq!(r.check(per_token), Ok(()));
    assert!(r.check(per_token).is_err());
    // A long pause refills only up to the burst.
    let later = 60_000;
    for _ in 0..burst {
        assert_eq!(r.check(later), Ok(()));
    }
    assert!(r.check(later).is_err());
}

#[test]
fn stream_slots_limit_sessions_and_the_process() {
    let slots = StreamSlots::new(&L);
    let held: Vec<_> = (0..L.session_streams())
        .map(|_| slots.try_acquire("s1").unwrap())
        .collect();
    let refused = slots.try_acquire("s1").unwrap_err();
    assert_eq!(refused, SlotRefused::Session);
    assert_eq!((refused.status(), refused.retry_after_secs()), (429, 30));
    let other = slots.try_acquire("s2").unwrap();
    assert_eq!(other.session(), "s2");
    assert_eq!(slots.open(), L.session_streams() + 1);
    drop(held);
    assert_eq!(slots.open_for("s1"), 0);
    assert!(slots.try_acquire("s1").is_ok());

    let small = L.with("processStreams", 3).unwrap();
    let slots = StreamSlots::new(&small);
    let held: Vec<_> = (0..3)
        .map(|i| slots.try_acquire(&format!("s{i}")).unwrap())
        .collect();
    let refused = slots.try_acquire("s9").unwrap_err();
    assert_eq!((refused.status(), refused.retry_after_secs()), (503, 30));
    drop(held);
    assert_eq!(slots.open(), 0);
}

#[test]
fn stream_slots_are_thread_safe() {
    let slots = StreamSlots::new(&L.with("processStreams", 50).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let slots = slots.clone();
            std::thread::spawn(move || {
                (0..20)
                    .filter_map(|i| slots.try_acquire(&format!("s{t}-{}", i % 10)).ok())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let held: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(held.len(), 50);
    assert_eq!(slots.open(), 50);
    drop(held);
    assert_eq!(slots.open(), 0);
}

#[test]
fn an_audience_change_applies_from_the_next_row() {
    let mut c = live(0);
    c.on_batch(&batch(vec![row(1, "ci.runs", &project(), None)]), 0);
    // The principal left the project: what was collected while a member goes out, then a
    // reset, and later rows of the project are dropped.
    let frames = c.set_audiences(audiences(&[Audience::user("u")]), 10);
    assert_eq!(frames.len(), 2);
    let sent = changes(&frames);
    assert_eq!(sent[0].1.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        frames[1],
        Frame::Reset {
            cursor: cur(1),
            reason: ResetReason::Server
        }
    );
    c.on_batch(&batch(vec![row(2, "ci.runs", &project(), Some("k"))]), 20);
    assert!(changes(&c.poll_timers(L.flush_window() + 20)).is_empty());
    assert_eq!(c.cursor(), cur(2));
    // Joining again sends nothing by itself; rows from then on are delivered.
    let frames = c.set_audiences(audiences(&[Audience::user("u"), project()]), 30);
    assert!(frames.is_empty());
    c.on_batch(&batch(vec![row(3, "ci.runs", &project(), Some("k"))]), 40);
    let frames = c.poll_timers(L.flush_window() + 40);
    let sent = changes(&frames);
    assert_eq!(sent[0].1.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3]);
    assert_eq!(sent[0].0, &cur(3));
}
