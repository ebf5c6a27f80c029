//! Serving a read (`host.md` §6.2, §7, §8): the cache and attempt tables at their
//! capacities, `forget`, the refresh limit, slots, the timeout, result checks and `readAt`,
//! under tokio's paused clock.

mod common;

use std::sync::Arc;

use common::{Faults, FaultyStore, REPLY, World, advance, record, set, settle};
use indexmap::IndexMap;
use serde_json::json;
use ui_core::{Record, Value};
use ui_host::{
    FnSource, HostError, IssueRequest, QueryPayload, QueryReading, ReadingState, SourceRegistry,
    UiStore,
};

/// The issued values of `$runs` for the payload's block and values with `read_id`, or the
/// refusal's stable code.
async fn issue(w: &World, p: &QueryPayload, read_id: &str) -> Result<Record, Option<String>> {
    let mut reads = IndexMap::new();
    reads.insert("$runs".to_owned(), read_id.to_owned());
    w.service
        .issued_values(&IssueRequest {
            chat_id: &p.chat_id,
            item_id: &p.item_id,
            block_id: &p.block_id,
            revision: &p.revision,
            values: &p.values,
            reads: &reads,
            for_choice: false,
        })
        .await
        .map_err(|r| r.code)
}

fn stale() -> Result<Record, Option<String>> {
    Err(Some("stale-read".to_owned()))
}

#[tokio::test(start_paused = true)]
async fn the_cache_holds_128_readings_and_drops_the_oldest_inserted() {
    let w = World::new();
    // One key read 128 times, 10 s apart: each read adds an entry (the older ones are past
    // their window but stay cached for choices), and the attempt table stays at 2 entries.
    let block = &w.put_reply("c1", "i0", REPLY)[0];
    let p = w.payload("c1", "i0", block, "$runs");
    let mut ids = Vec::new();
    for _ in 0..128 {
        let r = w.service.query(&p).await;
        assert_eq!(r.state, ReadingState::Fresh, "{r:?}");
        ids.push(r.read_id.unwrap());
        advance(10_000).await;
    }
    assert_eq!(w.service.stats().cached, 128);
    assert_eq!(w.service.stats().attempts, 2);
    // The oldest reading is still accepted for a choice: no age limit.
    assert!(issue(&w, &p, &ids[0]).await.is_ok());
    // The 129th insert evicts the oldest inserted entry, and only it.
    let newest = w.service.query(&p).await.read_id.unwrap();
    assert_eq!(w.service.stats().cached, 128);
    assert_eq!(issue(&w, &p, &ids[0]).await, stale());
    assert!(issue(&w, &p, &ids[1]).await.is_ok());
    // Evicting an older reading of the key keeps the newest one as the key's answer.
    let again = w.service.query(&p).await;
    assert_eq!(again.read_id.as_deref(), Some(newest.as_str()));
    assert_eq!(w.reads(), 129);
}

#[tokio::test(start_paused = true)]
async fn evicting_the_newest_reading_of_a_key_drops_it_inside_the_window() {
    let w = World::new();
    // 129 items read at the same instant: the first item's reading is evicted while it is
    // still inside its 10 s window, so the next request reads again instead of answering
    // the dropped reading. (Its attempts are evicted too: 258 entries > 256.)
    let mut payloads = Vec::new();
    for i in 0..129 {
        let item = format!("i{i}");
        let block = w.put_reply("c1", &item, REPLY)[0].clone();
        payloads.push(w.payload("c1", &item, &block, "$runs"));
    }
    let first = w.service.query(&payloads[0]).await.read_id.unwrap();
    for p in &payloads[1..128] {
        assert!(w.service.query(p).await.is_fresh());
    }
    // 128 entries: the first reading is still the answer of its key.
    let cached = w.service.query(&payloads[0]).await;
    assert_eq!(cached.read_id.as_deref(), Some(first.as_str()));
    assert!(w.service.query(&payloads[128]).await.is_fresh());
    assert_eq!(w.service.stats().cached, 128);
    assert_eq!(w.reads(), 129);
    let reread = w.service.query(&payloads[0]).await;
    assert!(reread.is_fresh(), "{reread:?}");
    assert_ne!(reread.read_id.as_deref(), Some(first.as_str()));
    assert_eq!(w.reads(), 130);
}

#[tokio::test(start_paused = true)]
async fn the_attempt_table_holds_256_entries() {
    let w = World::new();
    let mut payloads = Vec::new();
    for i in 0..129 {
        let item = format!("i{i}");
        let block = w.put_reply("c1", &item, REPLY)[0].clone();
        payloads.push(w.payload("c1", &item, &block, "$runs"));
    }
    // A failed read is not cached; its attempts (key and identity) refuse a retry for 10 s.
    set(&w.host.knobs.mode, 1);
    assert_eq!(
        w.service.query(&payloads[0]).await.state,
        ReadingState::Failed
    );
    set(&w.host.knobs.mode, 0);
    // 127 more reads: 2 + 254 = 256 entries, the first key is still limited.
    for p in &payloads[1..128] {
        assert!(w.service.query(p).await.is_fresh());
    }
    assert_eq!(w.service.stats().attempts, 256);
    let limited = w.service.query(&payloads[0]).await;
    assert_eq!(limited.code.as_deref(), Some("refresh-limit"));
    // One more read evicts the two oldest entries: the first key may read again at once.
    assert!(w.service.query(&payloads[128]).await.is_fresh());
    assert_eq!(w.service.stats().attempts, 256);
    let retried = w.service.query(&payloads[0]).await;
    assert!(retried.is_fresh(), "{retried:?}");
}

#[tokio::test(start_paused = true)]
async fn forget_evicts_every_cached_reading_of_the_chat() {
    let w = World::new();
    let b1 = w.put_reply("c1", "i1", REPLY)[0].clone();
    let b2 = w.put_reply("c2", "i1", REPLY)[0].clone();
    let p1 = w.payload("c1", "i1", &b1, "$runs");
    let p2 = w.payload("c2", "i1", &b2, "$runs");
    let r1 = w.service.query(&p1).await.read_id.unwrap();
    let r2 = w.service.query(&p2).await.read_id.unwrap();
    assert_eq!(w.service.stats().cached, 2);
    w.service.forget("c1");
    assert_eq!(w.service.stats().cached, 1);
    // The other chat keeps its reading.
    assert_eq!(w.service.query(&p2).await.read_id, Some(r2));
    // The forgotten reading is gone for choices; the attempts stay (memory only, §7), so
    // the same key inside 10 s is refresh-limited rather than answered from the cache.
    assert_eq!(issue(&w, &p1, &r1).await, stale());
    assert_eq!(
        w.service.query(&p1).await.code.as_deref(),
        Some("refresh-limit")
    );
    assert_eq!(w.reads(), 2);
}

#[tokio::test(start_paused = true)]
async fn read_at_is_the_time_the_outcome_was_produced() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let p = w.payload("c1", "i1", block, "$runs");
    set(&w.host.knobs.delay_ms, 7_999);
    let task = {
        let (service, p) = (w.service.clone(), p.clone());
        tokio::spawn(async move { service.query(&p).await })
    };
    settle().await;
    advance(7_999).await;
    let fresh = task.await.unwrap();
    assert!(fresh.is_fresh(), "{fresh:?}");
    assert_eq!(fresh.read_at, 1_007_999);
    // The cache window runs from readAt, not from the start of the read.
    set(&w.host.knobs.delay_ms, 0);
    advance(9_999).await;
    assert_eq!(w.service.query(&p).await.read_id, fresh.read_id);
    advance(1).await;
    let next = w.service.query(&p).await;
    assert!(next.is_fresh());
    assert_ne!(next.read_id, fresh.read_id);
    assert_eq!(next.read_at, 1_017_999);

    // A failure carries the time it happened; so does a timeout.
    let mut dev = p.clone();
    dev.values = record(r#"{"$branch": "dev"}"#);
    set(&w.host.knobs.mode, 1);
    set(&w.host.knobs.delay_ms, 3_000);
    advance(250).await;
    let task = {
        let (service, dev) = (w.service.clone(), dev.clone());
        tokio::spawn(async move { service.query(&dev).await })
    };
    settle().await;
    advance(3_000).await;
    let failed = task.await.unwrap();
    assert_eq!(failed.state, ReadingState::Failed);
    assert_eq!(failed.read_at, 1_018_249 + 3_000);

    set(&w.host.knobs.delay_ms, 9_000);
    let block2 = &w.put_reply("c1", "i2", REPLY)[0];
    let task = {
        let service = w.service.clone();
        let p = w.payload("c1", "i2", block2, "$runs");
        tokio::spawn(async move { service.query(&p).await })
    };
    settle().await;
    let start = 1_021_249;
    advance(8_000).await;
    let timed_out = task.await.unwrap();
    assert_eq!(timed_out.code.as_deref(), Some("timed-out"));
    assert_eq!(timed_out.read_at, start + 8_000);
}

#[tokio::test(start_paused = true)]
async fn refresh_limit_for_a_cadence_read_inside_250_ms() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let main = w.payload("c1", "i1", block, "$runs");
    let mut dev = main.clone();
    dev.values = record(r#"{"$branch": "dev"}"#);
    assert!(w.service.query(&main).await.is_fresh());
    // The cycle after the 10 s window reads the same arguments again at once.
    advance(10_000).await;
    let second = w.service.query(&main).await;
    assert!(second.is_fresh());
    // Other arguments of the same query inside 250 ms of that read are limited; the
    // answer is failed, carries `now` and a reason, and records no attempt.
    for gap in [0, 100, 149] {
        advance(gap).await;
        let limited = w.service.query(&dev).await;
        assert_eq!(limited.state, ReadingState::Failed);
        assert_eq!(limited.code.as_deref(), Some("refresh-limit"));
        assert!(limited.reason.as_deref().is_some_and(|r| !r.is_empty()));
        assert_eq!(limited.value, None);
        assert_eq!(limited.read_id, None);
    }
    assert_eq!(w.service.query(&dev).await.read_at, second.read_at + 249);
    advance(1).await;
    assert!(w.service.query(&dev).await.is_fresh());
    // A cached reading is answered even inside the 250 ms gap.
    assert_eq!(w.service.query(&main).await.read_id, second.read_id);
    // Another query identity (another item) is not limited by this one.
    let other = &w.put_reply("c1", "i2", REPLY)[0];
    assert!(
        w.service
            .query(&w.payload("c1", "i2", other, "$runs"))
            .await
            .is_fresh()
    );
    assert_eq!(w.reads(), 4);
}

#[tokio::test(start_paused = true)]
async fn busy_records_no_attempt() {
    let w = World::new();
    set(&w.host.knobs.delay_ms, 1_000);
    // Each item reads other arguments: identical reads would share one source read (and
    // take no slot of their own).
    let reply = |limit: u32| REPLY.replace("limit: 5", &format!("limit: {limit}"));
    let mut tasks = Vec::new();
    for (item, limit) in [("i1", 1), ("i2", 2)] {
        let block = w.put_reply("c1", item, &reply(limit))[0].clone();
        let (service, p) = (w.service.clone(), w.payload("c1", item, &block, "$runs"));
        tasks.push(tokio::spawn(async move { service.query(&p).await }));
    }
    settle().await;
    assert_eq!(w.service.stats().max_chat_slots, 2);
    let block = &w.put_reply("c1", "i3", &reply(3))[0];
    let p = w.payload("c1", "i3", block, "$runs");
    let busy = w.service.query(&p).await;
    assert_eq!(busy.state, ReadingState::Failed);
    assert_eq!(busy.code.as_deref(), Some("busy"));
    // Another chat still has its slots.
    let other = &w.put_reply("c2", "i1", &reply(4))[0];
    let task = {
        let (service, p) = (w.service.clone(), w.payload("c2", "i1", other, "$runs"));
        tokio::spawn(async move { service.query(&p).await })
    };
    settle().await;
    assert_eq!(w.service.stats().slots, 3);
    advance(1_000).await;
    for t in tasks {
        assert!(t.await.unwrap().is_fresh());
    }
    assert!(task.await.unwrap().is_fresh());
    assert_eq!(w.service.stats().slots, 0);
    // The busy request left no attempt behind: it reads at once.
    set(&w.host.knobs.delay_ms, 0);
    assert!(w.service.query(&p).await.is_fresh());
}

#[tokio::test(start_paused = true)]
async fn other_arguments_share_no_in_flight_read() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    set(&w.host.knobs.delay_ms, 1_000);
    let mut tasks = Vec::new();
    for branch in ["main", "dev"] {
        let service = w.service.clone();
        let mut p = w.payload("c1", "i1", block, "$runs");
        p.values = record(&format!(r#"{{"$branch": "{branch}"}}"#));
        tasks.push(tokio::spawn(async move { service.query(&p).await }));
        settle().await;
        advance(250).await;
    }
    assert_eq!(w.service.stats().in_flight, 2);
    advance(1_000).await;
    let a = tasks.remove(0).await.unwrap();
    let b = tasks.remove(0).await.unwrap();
    assert!(a.is_fresh() && b.is_fresh());
    assert_ne!(a.read_id, b.read_id);
    assert_eq!(w.reads(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_timeout_cancels_the_source_and_ignores_its_late_answer() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    // A source that only stops when cancelled: the slot is released when it does.
    set(&w.host.knobs.mode, 4);
    let task = {
        let (service, p) = (w.service.clone(), w.payload("c1", "i1", block, "$runs"));
        tokio::spawn(async move { service.query(&p).await })
    };
    settle().await;
    advance(7_999).await;
    assert_eq!(
        w.host
            .knobs
            .cancelled
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert_eq!(w.service.stats().slots, 1);
    advance(1).await;
    let r = task.await.unwrap();
    assert_eq!(r.code.as_deref(), Some("timed-out"));
    settle().await;
    assert_eq!(
        w.host
            .knobs
            .cancelled
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    assert_eq!(w.service.stats().slots, 0);
    assert_eq!(w.service.stats().in_flight, 0);

    // A refusal that arrives after the timeout does not change the answer.
    set(&w.host.knobs.mode, 2);
    set(&w.host.knobs.delay_ms, 9_000);
    let block2 = &w.put_reply("c1", "i2", REPLY)[0];
    let task = {
        let (service, p) = (w.service.clone(), w.payload("c1", "i2", block2, "$runs"));
        tokio::spawn(async move { service.query(&p).await })
    };
    settle().await;
    advance(8_000).await;
    let r = task.await.unwrap();
    assert_eq!(r.code.as_deref(), Some("timed-out"));
    assert_eq!(w.service.stats().slots, 1);
    advance(1_000).await;
    settle().await;
    assert_eq!(w.service.stats().slots, 0);
}

/// `host.md` §6.2 (after step 18): a read that has answered `timed-out` is never joined.
/// A later request for the same key (and one of another block sharing the source call,
/// `sync.md` §8.2) starts a read of its own, taking a slot, while the old call still
/// runs; the old call's late answer is never answered or cached.
#[tokio::test(start_paused = true)]
async fn a_timed_out_read_is_never_joined_and_its_late_answer_is_dropped() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let query = |item: &str, block: &(String, String)| {
        let (service, p) = (w.service.clone(), w.payload("c1", item, block, "$runs"));
        tokio::spawn(async move { service.query(&p).await })
    };
    // The first call takes 20 s (it ignores its cancellation).
    set(&w.host.knobs.delay_ms, 20_000);
    let first = query("i1", block);
    settle().await;
    advance(8_000).await;
    let r = first.await.unwrap();
    assert_eq!(r.code.as_deref(), Some("timed-out"));
    assert_eq!(w.service.stats().in_flight, 0, "unregistered at once");
    assert_eq!(
        w.service.stats().slots,
        1,
        "the old call still holds its slot"
    );

    // Another block of the chat with the same source arguments and access: its own call.
    let other = &w.put_reply("c1", "i2", REPLY)[0];
    set(&w.host.knobs.delay_ms, 1_000);
    let second = query("i2", other);
    settle().await;
    assert_eq!(w.reads(), 2, "a new source call, not the timed-out one");
    assert_eq!(w.service.stats().slots, 2);
    advance(1_000).await;
    let r = second.await.unwrap();
    assert!(r.is_fresh(), "{r:?}");

    // The same key once its attempt window has passed (t = 10.5 s): a new read as well.
    advance(1_500).await;
    let third = query("i1", block);
    settle().await;
    assert_eq!(w.reads(), 3);
    assert_eq!(w.service.stats().in_flight, 1);
    advance(1_000).await;
    let r = third.await.unwrap();
    assert!(r.is_fresh(), "{r:?}");
    let read_at = r.read_at;

    // The old call ends at 20 s: its answer reaches nobody and changes no cache entry.
    advance(8_500).await;
    settle().await;
    assert_eq!(
        w.host.knobs.ended.load(std::sync::atomic::Ordering::SeqCst),
        3
    );
    assert_eq!(w.service.stats().slots, 0);
    assert_eq!(w.service.stats().in_flight, 0);
    set(&w.host.knobs.delay_ms, 0);
    let again = query("i1", block);
    settle().await;
    let r = again.await.unwrap();
    assert!(r.is_fresh());
    assert_eq!(
        r.read_at, read_at,
        "answered from the third read's cache entry"
    );
    assert_eq!(w.reads(), 3);
}

/// A host whose sources return what their names say.
fn shapes() -> SourceRegistry {
    let mut sources = SourceRegistry::new();
    let any = json!({"type": "object"});
    let add =
        |sources: &mut SourceRegistry, name: &str, result: serde_json::Value, value: Value| {
            let source = FnSource::from_json_schemas(&any, &result, move |_| {
                let value = value.clone();
                async move { Ok(value) }
            })
            .unwrap();
            sources.register(name, source);
        };
    let array = |n: usize| Value::from_json_str(&format!("[{}]", vec!["1"; n].join(","))).unwrap();
    add(
        &mut sources,
        "t.record",
        json!({"type": "array"}),
        Value::from_json_str(r#"{"a":1}"#).unwrap(),
    );
    add(&mut sources, "t.items2000", json!({}), array(2_000));
    add(&mut sources, "t.items2001", json!({}), array(2_001));
    add(
        &mut sources,
        "t.proto",
        json!({}),
        Value::from_json_str(r#"{"ok":{"__proto__":1}}"#).unwrap(),
    );
    add(
        &mut sources,
        "t.long",
        json!({}),
        Value::from("x".repeat(16_385)),
    );
    sources.register(
        "t.panics",
        FnSource::from_json_schemas(&any, &json!({}), |_| async {
            panic!("the source broke");
        })
        .unwrap(),
    );
    sources.register(
        "t.silent",
        FnSource::from_json_schemas(&any, &json!({}), |_| async {
            Err(HostError::message("   "))
        })
        .unwrap(),
    );
    sources
}

#[tokio::test(start_paused = true)]
async fn results_that_fail_their_checks_fail_without_a_code() {
    let (host, store, service) = common::simple_service(shapes());
    let names = [
        "t.record",
        "t.items2000",
        "t.items2001",
        "t.proto",
        "t.long",
        "t.panics",
        "t.silent",
    ];
    let text = format!(
        "```ui\n{}\n<Summary>x</Summary>\n```\n",
        names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("$q{i} = @Query(\"{n}\", {{}})"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let blocks = common::compile_final("i1", &text, &host.0);
    assert!(
        blocks[0].diagnostics.is_empty(),
        "{:?}",
        blocks[0].diagnostics
    );
    common::put_blocks(&store, "c1", "i1", &text, blocks.clone());
    let mut outcomes: Vec<QueryReading> = Vec::new();
    for i in 0..names.len() {
        let p = common::payload_for("c1", "i1", &blocks[0], &format!("$q{i}"));
        outcomes.push(service.query(&p).await);
    }
    // 2,000 elements is the copy's iteration budget; one more fails it.
    assert!(outcomes[1].is_fresh(), "{:?}", outcomes[1]);
    for (name, r) in names.iter().zip(&outcomes) {
        if *name == "t.items2000" {
            continue;
        }
        assert_eq!(r.state, ReadingState::Failed, "{name}: {r:?}");
        assert_eq!(r.code, None, "{name}");
        assert!(
            r.reason.as_deref().is_some_and(|r| !r.trim().is_empty()),
            "{name}"
        );
    }
    // Failed readings are not cached; a panicking source released its slot.
    let stats = service.stats();
    assert_eq!((stats.cached, stats.slots, stats.in_flight), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn host_messages_pass_through_cut_to_240_utf16_units() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    // 239 units and a surrogate pair at the boundary: the pair is not split.
    let long = format!("{}{}", "a".repeat(239), "😀".repeat(10));
    *w.host.knobs.message.lock().unwrap() = long.clone();
    let cut = "a".repeat(239);
    for (i, (mode, state, code)) in [
        (1, ReadingState::Failed, None),
        (2, ReadingState::Failed, Some("outside-project")),
        (3, ReadingState::Refused, Some("outside-project")),
        (5, ReadingState::Refused, None),
    ]
    .into_iter()
    .enumerate()
    {
        set(&w.host.knobs.mode, mode);
        let item = format!("m{i}");
        let block = w.put_reply("c1", &item, REPLY)[0].clone();
        let r = w
            .service
            .query(&w.payload("c1", &item, &block, "$runs"))
            .await;
        assert_eq!((r.state, r.code.as_deref()), (state, code), "mode {mode}");
        assert_eq!(r.reason.as_deref(), Some(cut.as_str()), "mode {mode}");
    }
    // Exactly 240 units pass whole; the 241st is cut.
    set(&w.host.knobs.mode, 5);
    for (len, want) in [(240, 240), (241, 240), (12, 12)] {
        *w.host.knobs.message.lock().unwrap() = "é".repeat(len);
        let r = w
            .service
            .query(&w.payload("c1", "i1", block, "$runs"))
            .await;
        assert_eq!(r.reason.unwrap().chars().count(), want);
    }
}

#[tokio::test(start_paused = true)]
async fn ids_holding_nul_characters_never_share_a_reading() {
    // Two queries whose ids joined with NUL separators would read alike: chat "x\0y" item
    // "z" and chat "x" item "y\0z", with the same block id and revision. Each must read for
    // itself (cache keys compare every id as a whole string, `host.md` §7).
    let w = World::new();
    let block = {
        w.put_reply("c1", "i0", REPLY);
        let mut b = (*w.store.item_now("c1", "i0").blocks[0]).clone();
        b.id = "b".into();
        b.revision = None;
        b.revision = Some(ui_host::block_revision(&b));
        std::sync::Arc::new(b)
    };
    let mut readings = Vec::new();
    for (chat, item) in [("x\u{0}y", "z"), ("x", "y\u{0}z")] {
        w.store.put_chat(ui_host::ChatInfo {
            chat_id: chat.into(),
            data: Value::Null,
        });
        common::put_blocks(&w.store, chat, item, REPLY, vec![block.clone()]);
        let p = common::payload_for(chat, item, &block, "$runs");
        let r = w.service.query(&p).await;
        assert!(r.is_fresh(), "{r:?}");
        readings.push(r.read_id.unwrap());
    }
    assert_ne!(readings[0], readings[1]);
    assert_eq!(w.reads(), 2);
}

#[tokio::test(start_paused = true)]
async fn arguments_follow_the_input_and_the_block_revision() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let mut p = w.payload("c1", "i1", &block, "$runs");
    let mut seen = Vec::new();
    for (values, branch) in [
        (r#"{"$branch": "dev"}"#, "dev"),
        (r#"{}"#, "main"),
        (r#"{"$branch": "main"}"#, "main"),
    ] {
        advance(10_000).await;
        p.values = record(values);
        assert!(w.service.query(&p).await.is_fresh());
        seen.push(branch);
    }
    // A value no control offers is refused however often valid ones were read.
    p.values = record(r#"{"$branch": "prod"}"#);
    assert_eq!(w.service.query(&p).await.state, ReadingState::Refused);
    // An edited reply (new revision, same block id) reads its own arguments.
    let edited = w.put_reply("c1", "i1", &REPLY.replace("limit: 5", "limit: 7"))[0].clone();
    assert_eq!(edited.0, block.0);
    advance(10_000).await;
    let r = w
        .service
        .query(&w.payload("c1", "i1", &edited, "$runs"))
        .await;
    assert!(r.is_fresh());
    seen.push("main");
    let args = w.host.knobs.args.lock().unwrap().clone();
    let got: Vec<(String, f64)> = args
        .iter()
        .map(|a| {
            (
                a["branch"].as_str().unwrap().to_owned(),
                a["limit"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("dev".to_owned(), 5.0),
            ("main".to_owned(), 5.0),
            ("main".to_owned(), 5.0),
            ("main".to_owned(), 7.0),
        ]
    );
    assert_eq!(seen.len(), got.len());
}

#[tokio::test(start_paused = true)]
async fn a_store_with_only_the_required_methods_serves_reads() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let service = w.service_over(FaultyStore(w.store.clone(), Arc::default()));
    let p = w.payload("c1", "i1", &block, "$runs");
    let first = service.query(&p).await;
    assert!(first.is_fresh(), "{first:?}");
    assert_eq!(service.query(&p).await.read_id, first.read_id);
    let mut stale = p.clone();
    stale.revision = "0".repeat(64);
    assert_eq!(
        service.query(&stale).await.code.as_deref(),
        Some("block-stale")
    );
    // The provided method and the memory store's own answer alike.
    assert_eq!(
        FaultyStore(w.store.clone(), Arc::default())
            .block("c1", "i1", &block.0)
            .await,
        w.store.block("c1", "i1", &block.0).await
    );
    assert!(w.store.block("c1", "i1", "nope").await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_capture_whose_write_fails_grants_nothing_until_it_is_stored() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let failures = Arc::new(Faults::default());
    set(&failures.access, 1);
    let service = w.service_over(FaultyStore(w.store.clone(), Arc::clone(&failures)));
    let p = w.payload("c1", "i1", &block, "$runs");
    let refused = service.query(&p).await;
    assert_eq!(refused.state, ReadingState::Refused, "{refused:?}");
    assert_eq!(refused.code.as_deref(), Some("access-unavailable"));
    assert_eq!(w.reads(), 0);
    // The next request captures again, and its write is stored.
    let read = service.query(&p).await;
    assert!(read.is_fresh(), "{read:?}");
    assert!(matches!(
        w.store.access("c1", "i1").await,
        ui_host::AccessRecord::Granted(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_freeze_whose_write_fails_retries_it() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let failures = Arc::new(Faults::default());
    set(&failures.frozen, 3);
    let service = w.service_over(FaultyStore(w.store.clone(), Arc::clone(&failures)));
    service.observe("c1", "i1", true).await;
    settle().await;
    // Three failed writes, each retried after a doubling wait; the fourth is stored.
    let mut waited = 0;
    while w
        .store
        .item_now("c1", "i1")
        .ui_queries
        .is_none_or(|q| q.blocks.is_empty())
    {
        assert!(waited < 5_000, "never frozen: {:?}", service.stats());
        advance(50).await;
        settle().await;
        waited += 50;
    }
    assert!(waited >= 100 + 200 + 400, "frozen after {waited} ms");
    assert_eq!(failures.frozen.load(std::sync::atomic::Ordering::SeqCst), 0);
    let item = w.store.item_now("c1", "i1");
    let frozen = &item.ui_queries.unwrap().blocks[&block.0];
    assert_eq!(frozen.revision, block.1);
    assert!(frozen.readings["$runs"].is_fresh());
    settle().await;
    assert_eq!(service.stats().freezes, 0);
}
