//! `ui.query` step by step (`host.md` §6–§8) under tokio's paused clock.

mod common;

use std::sync::Arc;

use common::{Anything, LeasingStore, REPLY, TestHost, World, advance, set};
use ui_core::{Record, Value};
use ui_host::{
    FnSource, PreparedQuery, QueryPayload, QueryReading, ReadingState, SourceRegistry, ValueSchema,
};

fn record(json: &str) -> Record {
    Value::from_json_str(json)
        .unwrap()
        .as_record()
        .unwrap()
        .clone()
}

#[tokio::test(start_paused = true)]
async fn fresh_then_cached_for_ten_seconds() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let p = w.payload("c1", "i1", block, "$runs");
    let first = w.service.query(&p).await;
    assert_eq!(first.state, ReadingState::Fresh, "{first:?}");
    assert_eq!(first.read_at, 1_000_000);
    assert_eq!(w.reads(), 1);
    advance(9_999).await;
    let cached = w.service.query(&p).await;
    assert_eq!(cached.read_id, first.read_id);
    assert_eq!(cached.read_at, first.read_at);
    assert_eq!(w.reads(), 1);
    // The 11th second: the cache entry is stale, a new read starts.
    advance(1).await;
    let again = w.service.query(&p).await;
    assert_eq!(again.state, ReadingState::Fresh);
    assert_ne!(again.read_id, first.read_id);
    assert_eq!(w.reads(), 2);
}

#[tokio::test(start_paused = true)]
async fn refresh_limit_after_a_failed_read_and_between_arguments() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let p = w.payload("c1", "i1", block, "$runs");
    set(&w.host.knobs.mode, 1);
    let failed = w.service.query(&p).await;
    assert_eq!(failed.state, ReadingState::Failed);
    assert_eq!(failed.code, None);
    assert_eq!(failed.reason.as_deref(), Some("the CI server is down"));
    set(&w.host.knobs.mode, 0);
    advance(9_999).await;
    let limited = w.service.query(&p).await;
    assert_eq!(limited.code.as_deref(), Some("refresh-limit"));
    advance(1).await;
    assert_eq!(w.service.query(&p).await.state, ReadingState::Fresh);
    // Another argument of the same query within 250 ms.
    let mut dev = p.clone();
    dev.values = record(r#"{"$branch": "dev"}"#);
    advance(249).await;
    assert_eq!(
        w.service.query(&dev).await.code.as_deref(),
        Some("refresh-limit")
    );
    advance(1).await;
    assert_eq!(w.service.query(&dev).await.state, ReadingState::Fresh);
    assert_eq!(w.reads(), 3);
}

#[tokio::test(start_paused = true)]
async fn admission_codes() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let mut p = w.payload("c1", "i1", block, "$runs");
    p.revision = "0".repeat(64);
    assert_eq!(
        w.service.query(&p).await.code.as_deref(),
        Some("block-stale")
    );
    let mut p = w.payload("c1", "i1", block, "$nope");
    assert_eq!(
        w.service.query(&p).await.code.as_deref(),
        Some("query-undeclared")
    );
    p.query = "$branch".to_owned();
    assert_eq!(
        w.service.query(&p).await.code.as_deref(),
        Some("query-undeclared")
    );
    // Tampered input: refused, no code.
    let mut p = w.payload("c1", "i1", block, "$runs");
    for values in [
        r#"{"$branch": "prod"}"#,
        r#"{"$branch": 5}"#,
        r#"{"$nope": 1}"#,
        r#"{"$runs": []}"#,
    ] {
        p.values = record(values);
        let r = w.service.query(&p).await;
        assert_eq!(r.state, ReadingState::Refused, "{values}");
        assert_eq!(r.code, None, "{values}");
    }
    assert_eq!(w.reads(), 0);
    // Another chat's item is stale for this chat.
    let other = w.payload("c2", "i1", block, "$runs");
    assert_eq!(
        w.service.query(&other).await.code.as_deref(),
        Some("block-stale")
    );
}

#[tokio::test(start_paused = true)]
async fn authorize_runs_on_cache_hits() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let p = w.payload("c1", "i1", block, "$runs");
    assert_eq!(w.service.query(&p).await.state, ReadingState::Fresh);
    set(&w.host.knobs.mode, 3);
    let refused = w.service.query(&p).await;
    assert_eq!(refused.state, ReadingState::Refused);
    assert_eq!(refused.code.as_deref(), Some("outside-project"));
    assert_eq!(refused.reason.as_deref(), Some("revoked"));
}

/// `query_answer` answers what `query` answers, as `serde_json` writes it; a cached reading
/// answered as is sends the text written when it was cached (the same allocation every
/// time), while `authorize` still runs on every request.
#[tokio::test(start_paused = true)]
async fn answers_are_the_readings_json_and_cached_text_is_shared() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let p = w.payload("c1", "i1", block, "$runs");
    let json = |a: ui_host::QueryAnswer| a.into_json().unwrap().as_ref().to_vec();
    // The first read, then cache hits.
    let first = w.service.query_answer(&p).await;
    let reading = first.clone().into_reading();
    assert_eq!(reading.state, ReadingState::Fresh);
    assert_eq!(json(first), serde_json::to_vec(&reading).unwrap());
    let a = w.service.query_answer(&p).await.into_json().unwrap();
    let b = w.service.query_answer(&p).await.into_json().unwrap();
    assert_eq!(a.as_ref(), serde_json::to_vec(&reading).unwrap().as_slice());
    assert_eq!(a.as_ref().as_ptr(), b.as_ref().as_ptr(), "written once");
    assert_eq!(w.service.query(&p).await, reading);
    assert_eq!(w.reads(), 1);
    // A refusal of `authorize` on a cache hit is answered, not the cached text.
    set(&w.host.knobs.mode, 3);
    let refused = w.service.query_answer(&p).await;
    let text = json(refused.clone());
    assert_eq!(text, serde_json::to_vec(&refused.into_reading()).unwrap());
    assert!(
        String::from_utf8(text)
            .unwrap()
            .contains("\"state\":\"refused\"")
    );
    set(&w.host.knobs.mode, 0);
    // Past the refresh window: a new reading, a new text.
    advance(10_000).await;
    let second = w.service.query_answer(&p).await.into_reading();
    assert_ne!(second.read_id, reading.read_id);
    let c = w.service.query_answer(&p).await.into_json().unwrap();
    assert_eq!(c.as_ref(), serde_json::to_vec(&second).unwrap().as_slice());
}

#[tokio::test(start_paused = true)]
async fn a_refusal_from_read_fails_with_its_code() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    set(&w.host.knobs.mode, 2);
    let r = w
        .service
        .query(&w.payload("c1", "i1", block, "$runs"))
        .await;
    assert_eq!(r.state, ReadingState::Failed);
    assert_eq!(r.code.as_deref(), Some("outside-project"));
}

#[tokio::test(start_paused = true)]
async fn result_size_limit_is_exact() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let mut p = w.payload("c1", "i1", block, "$runs");
    set(&w.host.knobs.result_len, 65_536);
    let at = w.service.query(&p).await;
    assert_eq!(at.state, ReadingState::Fresh, "{at:?}");
    assert_eq!(at.value.unwrap().js_json_len(), 65_536);
    set(&w.host.knobs.result_len, 65_537);
    p.values = record(r#"{"$branch": "dev"}"#);
    advance(250).await;
    let past = w.service.query(&p).await;
    assert_eq!(past.state, ReadingState::Failed);
    assert_eq!(past.code.as_deref(), Some("result-too-large"));
}

#[tokio::test(start_paused = true)]
async fn concurrent_identical_requests_share_one_read() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    set(&w.host.knobs.delay_ms, 1_000);
    let p = w.payload("c1", "i1", block, "$runs");
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let service = w.service.clone();
        let p = p.clone();
        tasks.push(tokio::spawn(async move { service.query(&p).await }));
    }
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.state, ReadingState::Fresh);
        ids.insert(r.read_id.unwrap());
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(w.reads(), 1);
}

#[tokio::test(start_paused = true)]
async fn slots_two_per_chat_and_timeouts_keep_them() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    set(&w.host.knobs.delay_ms, 10_000);
    let mut tasks = Vec::new();
    for branch in ["main", "dev"] {
        let service = w.service.clone();
        let mut p = w.payload("c1", "i1", block, "$runs");
        p.values = record(&format!(r#"{{"$branch": "{branch}"}}"#));
        tasks.push(tokio::spawn(async move { service.query(&p).await }));
        advance(300).await;
    }
    assert_eq!(w.service.stats().slots, 2);
    // A third read in the same chat (another item, arguments no read in flight has) is
    // busy.
    let block2 = &w.put_reply("c1", "i2", &REPLY.replace("limit: 5", "limit: 7"))[0];
    let busy = w
        .service
        .query(&w.payload("c1", "i2", block2, "$runs"))
        .await;
    assert_eq!(busy.code.as_deref(), Some("busy"));
    // At 8 s both time out, but the slots stay taken until the sources end at 10 s.
    advance(8_000).await;
    for t in tasks {
        assert_eq!(t.await.unwrap().code.as_deref(), Some("timed-out"));
    }
    assert_eq!(w.service.stats().slots, 2);
    advance(2_000).await;
    tokio::task::yield_now().await;
    assert_eq!(w.service.stats().slots, 0);
    assert_eq!(w.service.stats().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn sixteen_slots_in_all() {
    let w = World::new();
    set(&w.host.knobs.delay_ms, 5_000);
    let mut tasks = Vec::new();
    for chat in 0..9 {
        let chat_id = format!("chat{chat}");
        w.store.put_chat(ui_host::ChatInfo {
            chat_id: chat_id.clone(),
            data: Value::Null,
        });
        for item in 0..2 {
            let item_id = format!("i{item}");
            // Arguments of its own: identical reads would share one source read and slot.
            let reply = REPLY.replace("limit: 5", &format!("limit: {}", 1 + chat * 2 + item));
            let block = w.put_reply(&chat_id, &item_id, &reply)[0].clone();
            let service = w.service.clone();
            let p = w.payload(&chat_id, &item_id, &block, "$runs");
            tasks.push(tokio::spawn(async move { service.query(&p).await }));
        }
    }
    tokio::task::yield_now().await;
    advance(10).await;
    let mut busy = 0;
    let mut fresh = 0;
    advance(5_000).await;
    for t in tasks {
        match t.await.unwrap().code.as_deref() {
            Some("busy") => busy += 1,
            None => fresh += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((fresh, busy), (16, 2));
}

#[tokio::test(start_paused = true)]
async fn capture_failures_refuse_with_access_unavailable() {
    let host = common::TestHost::new();
    *host.capture.lock().unwrap() = Err(ui_host::HostError::message("no"));
    let w = World::with_host(host);
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let r = w
        .service
        .query(&w.payload("c1", "i1", block, "$runs"))
        .await;
    assert_eq!(r.code.as_deref(), Some("access-unavailable"));

    // 32,768 bytes of access pass, one more fails (`{"<key>":1}` is the key plus 6).
    for (len, code) in [(32_768usize, None), (32_769, Some("access-unavailable"))] {
        let host = common::TestHost::new();
        let mut access = serde_json::Map::new();
        access.insert("k".repeat(len - 6), serde_json::json!(1));
        *host.capture.lock().unwrap() = Ok(serde_json::Value::Object(access));
        let w = World::with_host(host);
        let block = &w.put_reply("c1", "i1", REPLY)[0];
        let r = w
            .service
            .query(&w.payload("c1", "i1", block, "$runs"))
            .await;
        assert_eq!(r.code.as_deref(), code, "{len}");
    }
}

#[tokio::test(start_paused = true)]
async fn identical_source_reads_are_shared_but_read_ids_are_not() {
    // Two blocks reading the same source with the same arguments and access share one call
    // to `read` (sync.md §8.2); each keeps its own read id and cache entry.
    let w = World::new();
    set(&w.host.knobs.delay_ms, 1_000);
    let a = w.put_reply("c1", "i1", REPLY)[0].clone();
    let b = w.put_reply("c1", "i2", REPLY)[0].clone();
    let (s1, p1) = (w.service.clone(), w.payload("c1", "i1", &a, "$runs"));
    let (s2, p2) = (w.service.clone(), w.payload("c1", "i2", &b, "$runs"));
    let t1 = tokio::spawn(async move { s1.query(&p1).await });
    let t2 = tokio::spawn(async move { s2.query(&p2).await });
    advance(1_000).await;
    let (r1, r2) = (t1.await.unwrap(), t2.await.unwrap());
    assert!(r1.is_fresh() && r2.is_fresh());
    assert_ne!(r1.read_id, r2.read_id);
    assert_eq!(r1.value, r2.value);
    assert_eq!(w.reads(), 1);
}

/// A schema that passes a record and adds `tag` to it: two hosts that parse the same
/// arguments differently.
struct Tagging(&'static str);

impl ValueSchema for Tagging {
    fn parse(&self, value: &Value) -> Result<Value, String> {
        let mut record = value.as_record().ok_or("not a record")?.clone();
        record.insert("tag".into(), Value::from(self.0));
        Ok(Value::record(record))
    }
}

/// A world whose `ci.runs` parses its arguments with `Tagging(tag)` and answers them.
fn tagging_world(tag: &'static str) -> World {
    let mut host = TestHost::build(true);
    host.sources = SourceRegistry::new();
    host.sources.register(
        "ci.runs",
        FnSource::new(Tagging(tag), Anything, |request| async move {
            Ok(Value::record(request.args))
        }),
    );
    World::with_host(Arc::new(host))
}

/// The reading `w`'s service answers for `p` freshly prepared.
async fn prepared_reading(w: &World, p: &QueryPayload) -> QueryReading {
    w.service
        .query_prepared(&PreparedQuery::new(p.clone()))
        .await
        .into_reading()
}

#[tokio::test(start_paused = true)]
async fn a_prepared_payload_answers_as_the_payload_does() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let p = w.payload("c1", "i1", block, "$runs");
    let prepared = PreparedQuery::new(p.clone());
    let first = w.service.query_prepared(&prepared).await.into_reading();
    assert_eq!(first.state, ReadingState::Fresh, "{first:?}");
    // Cached: the prepared payload and the plain one get the same bytes.
    let again = w
        .service
        .query_prepared(&prepared)
        .await
        .into_json()
        .unwrap();
    let plain = w.service.query_answer(&p).await.into_json().unwrap();
    assert_eq!(again.as_ref(), plain.as_ref());
    assert_eq!(w.reads(), 1);
    // Other input: other arguments, another read (past the query's read gap), whether
    // prepared or not.
    advance(1_000).await;
    let mut dev = p.clone();
    dev.values = record(r#"{"$branch":"dev"}"#);
    let dev_prepared = prepared_reading(&w, &dev).await;
    assert_eq!(dev_prepared.state, ReadingState::Fresh);
    assert_ne!(dev_prepared.read_id, first.read_id);
    assert_eq!(w.service.query(&dev).await.read_id, dev_prepared.read_id);
    // Refusals as the payload's: an undeclared query, a revision the block does not have.
    for change in [
        |p: &mut QueryPayload| p.query = "$nope".into(),
        |p: &mut QueryPayload| p.revision = "r0".into(),
    ] {
        let mut bad = p.clone();
        change(&mut bad);
        let refused = prepared_reading(&w, &bad).await;
        assert_eq!(refused.state, ReadingState::Refused);
        assert_eq!(refused.code, w.service.query(&bad).await.code);
    }
}

#[tokio::test(start_paused = true)]
async fn a_payload_prepared_by_one_service_is_worked_out_again_by_another() {
    let (a, b) = (tagging_world("a"), tagging_world("b"));
    let block = &a.put_reply("c1", "i1", REPLY)[0];
    assert_eq!(&b.put_reply("c1", "i1", REPLY)[0], block);
    let prepared = PreparedQuery::new(a.payload("c1", "i1", block, "$runs"));
    let tag = |reading: QueryReading| {
        let value = reading.value.expect("a value");
        value.as_record().expect("a record").get("tag").cloned()
    };
    let from_a = a.service.query_prepared(&prepared).await.into_reading();
    assert_eq!(tag(from_a), Some(Value::from("a")));
    // `b` parses the same payload's arguments its own way, not with `a`'s.
    let from_b = b.service.query_prepared(&prepared).await.into_reading();
    assert_eq!(tag(from_b), Some(Value::from("b")));
    advance(10_000).await;
    let again = a.service.query_prepared(&prepared).await.into_reading();
    assert_eq!(tag(again), Some(Value::from("a")));
}

#[tokio::test(start_paused = true)]
async fn a_prepared_payload_under_a_lease_asks_the_store_again_only_when_it_ends() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    let store = LeasingStore::new(w.store.clone());
    let service = w.service_over(store.clone());
    let prepared = PreparedQuery::new(w.payload("c1", "i1", block, "$runs"));
    let answer = || async { service.query_prepared(&prepared).await.into_reading() };
    // The first request captures the access (not the store's record: no plan is kept).
    let first = answer().await;
    assert_eq!(first.state, ReadingState::Fresh, "{first:?}");
    // The second finds the store's granted access under the lease: its plan is kept...
    assert_eq!(answer().await.read_id, first.read_id);
    let asked = store.asked();
    // ...so the third asks the store nothing, and still answers as the cache does.
    assert_eq!(answer().await.read_id, first.read_id);
    assert_eq!(store.asked(), asked);
    // `authorize` still runs on every request under a kept plan.
    set(&w.host.knobs.mode, 3);
    let denied = answer().await;
    assert_eq!(denied.state, ReadingState::Refused, "{denied:?}");
    assert_eq!(denied.code.as_deref(), Some("outside-project"));
    set(&w.host.knobs.mode, 0);
    assert_eq!(store.asked(), asked);
    // Once the lease is withdrawn the store is asked again, and what it says now counts.
    store.withdraw();
    assert_eq!(answer().await.read_id, first.read_id);
    assert!(store.asked() > asked);
    let mut item = w.store.item_now("c1", "i1");
    item.streaming = true;
    w.store.put_item("c1", item);
    assert_eq!(
        answer().await.read_id,
        first.read_id,
        "the lease still holds"
    );
    store.withdraw();
    let stale = answer().await;
    assert_eq!(stale.state, ReadingState::Refused);
    assert_eq!(stale.code.as_deref(), Some("block-stale"));
}
