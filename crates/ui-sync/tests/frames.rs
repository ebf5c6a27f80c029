//! Frame boundaries of `/ui/events` (`sync.md` §4.2): when a catch-up, a lag catch-up or a
//! flush is both coarsened (over the frame byte cap) and split (over the key cap or the
//! byte cap), every frame's `id` is a true resume point. A property test over random event
//! mixes, caps and disconnect points: resuming from any frame's `id` loses no event, no
//! frame carries an event at or below an earlier frame's `id` (a client drops those), and
//! a resume brings back only rows after the `id`.

use proptest::prelude::*;
use ui_core::SyncLimits;
use ui_sync::{
    Audience, AudienceSet, Batch, Cursor, Epoch, Frame, LogRow, NewRow, Op, ReadAfter, Salt, Seq,
    StreamConn, WireEvent, collapse,
};

fn epoch() -> Epoch {
    "mq3x7kd2pa4r".parse().unwrap()
}

fn cur(seq: u64) -> Cursor {
    Cursor {
        epoch: epoch(),
        seq: Seq(seq),
    }
}

fn project() -> Audience {
    Audience::project("p1")
}

/// A visible row: one of a few sources, a key among a few (or the whole source).
fn row(seq: u64, source: u8, key: Option<u8>) -> LogRow {
    let salt = Salt([7; 32]);
    let source = format!("src.s{source}");
    let audience = project();
    LogRow {
        seq: Seq(seq),
        row: NewRow {
            scope: salt.scope(&source, &audience),
            key: key.map(|k| salt.key(&source, &audience, &format!("key:{k}"))),
            source,
            audience,
            rs: None,
            op: Op::Change,
            n: 1,
            at_ms: 1_767_000_000_000,
        },
    }
}

/// Whether `event` tells a client that `row` changed: same source and scope, the same key
/// or the whole scope, and a seq at least the row's.
fn covers(event: &WireEvent, row: &LogRow) -> bool {
    let w = WireEvent::from(row);
    event.source == w.source
        && event.scope == w.scope
        && (event.key.is_none() || event.key == w.key)
        && event.seq >= w.seq
}

/// How the frames under test were produced.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// The catch-up at connect (`start`).
    Start,
    /// A lag catch-up (`on_catch_up`).
    Lag,
    /// Live rows, flushed at the end of the window.
    Flush,
}

/// The `changes` frames for `rows` (all after position 0) ending at `head`, by `path`.
fn frames(
    path: Path,
    rows: &[LogRow],
    head: u64,
    limits: SyncLimits,
) -> Vec<(u64, Vec<WireEvent>)> {
    let set = AudienceSet::new([project()], 1_000);
    let mut c = StreamConn::new(set, epoch(), Some("mq3x7kd2pa4r.0"), 0, 900_000, limits);
    let mut out = Vec::new();
    let empty = ReadAfter::Events {
        cursor: cur(0),
        events: Vec::new(),
    };
    let all = ReadAfter::Events {
        cursor: cur(head),
        events: collapse(rows),
    };
    match path {
        Path::Start => out.extend(c.start(all, 0)),
        Path::Lag => {
            c.start(empty, 0);
            c.on_lagged();
            assert!(c.needs_catch_up());
            out.extend(c.on_catch_up(all, 0));
        }
        Path::Flush => {
            c.start(empty, 0);
            // Live batches are flushed early at the key cap, so feed one row at a time.
            for r in rows {
                out.extend(c.on_batch(
                    &Batch {
                        first: r.seq,
                        last: r.seq,
                        rows: vec![r.clone()],
                        published: None,
                    },
                    0,
                ));
            }
            out.extend(c.on_batch(
                &Batch {
                    first: Seq(head),
                    last: Seq(head),
                    rows: Vec::new(),
                    published: None,
                },
                0,
            ));
            out.extend(c.poll_timers(limits.flush_window()));
        }
    }
    out.into_iter()
        .filter_map(|f| match f {
            Frame::Changes { cursor, events } => Some((cursor.seq.0, events)),
            _ => None,
        })
        .collect()
}

fn check(path: Path, rows: &[LogRow], head: u64, limits: SyncLimits) -> Result<(), TestCaseError> {
    let frames = frames(path, rows, head, limits);
    prop_assert!(!frames.is_empty());
    let last_row = rows.last().map_or(0, |r| r.seq.0);
    let last_id = frames.last().map_or(0, |f| f.0);
    prop_assert!(
        last_id >= last_row && last_id <= head,
        "the last id {} claims every row",
        last_id
    );
    let mut previous = 0;
    let mut delivered: Vec<WireEvent> = Vec::new();
    for (i, (id, events)) in frames.iter().enumerate() {
        prop_assert!(
            *id >= previous,
            "ids go backwards: {} after {}",
            id,
            previous
        );
        for e in events {
            prop_assert!(
                e.seq > previous,
                "frame {} repeats seq {} at or below {}",
                i,
                e.seq,
                previous
            );
        }
        previous = *id;
        delivered.extend(events.iter().cloned());
        // Disconnect after this frame, resume from its id: the server answers the
        // collapsed rows after it (`read_after`).
        let resumed = collapse(rows.iter().filter(|r| r.seq.0 > *id));
        for r in rows {
            // Every row is known from what arrived, or comes back after the id (a later
            // change of the same key or scope, which the client counts as a maximum).
            prop_assert!(
                delivered.iter().chain(&resumed).any(|e| covers(e, r)),
                "{:?}: frame {} has id {} and row {} ({:?}) is lost when resuming there",
                path,
                i,
                id,
                r.seq.0,
                r.row.key.map(|k| k.to_hex())
            );
        }
    }
    Ok(())
}

fn limits(frame_keys: u64, frame_bytes: u64) -> SyncLimits {
    SyncLimits::DEFAULT
        .with("frameKeys", frame_keys)
        .unwrap()
        .with("frameBytes", frame_bytes)
        .unwrap()
}

/// Rows with strictly increasing seqs (gaps stand for rows of other audiences).
fn rows_strategy() -> impl Strategy<Value = (Vec<LogRow>, u64)> {
    prop::collection::vec(
        (1u64..4, 0u8..4, prop::option::weighted(0.85, 0u8..40)),
        1..120,
    )
    .prop_map(|specs| {
        let mut seq = 0;
        let rows = specs
            .into_iter()
            .map(|(gap, source, key)| {
                seq += gap;
                row(seq, source, key)
            })
            .collect();
        (rows, seq + 3)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_frame_id_is_a_true_resume_point(
        (rows, head) in rows_strategy(),
        frame_keys in 1u64..40,
        frame_bytes in 400u64..6_000,
    ) {
        let limits = limits(frame_keys, frame_bytes);
        for path in [Path::Start, Path::Lag, Path::Flush] {
            check(path, &rows, head, limits)?;
        }
    }
}

#[test]
fn a_coarsened_scope_in_a_later_frame_holds_back_the_earlier_id() {
    // Keys of source s0 at seqs 1..=39 and 81, whole-source rows of 40 other sources at
    // 41..=80. Over the byte cap s0 becomes one whole-scope entry whose seq is 81; with 10
    // entries per frame the old code sent it last and gave the first frame id 50, claiming
    // seqs 1..=39 that only the last frame carried.
    let mut rows: Vec<LogRow> = (1..=39).map(|k| row(k, 0, Some(k as u8))).collect();
    rows.extend((41..=80).map(|s| row(s, s as u8, None)));
    rows.push(row(81, 0, Some(200)));
    let limits = limits(10, 2_000);
    let frames = frames(Path::Start, &rows, 85, limits);
    assert!(frames.len() > 1);
    let (first_id, first) = &frames[0];
    assert!(
        first
            .iter()
            .any(|e| e.key.is_none() && e.source == "src.s0"),
        "the coarsened scope goes out first: {first:?}"
    );
    assert!(*first_id < 85);
    check(Path::Start, &rows, 85, limits).unwrap();
}
