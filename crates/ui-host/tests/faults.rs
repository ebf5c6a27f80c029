//! Host code that misbehaves (`host.md` §4, §6, §12, §13, §17.7): a `capture`, `authorize`
//! or `link` that never answers is bounded by the read timeout, and a host or source that
//! panics leaves no capture, flight or slot behind for later requests to trip on, a store
//! write that hangs holds up only its own block's choices, and a chat deleted after its
//! capture is stale (`host.md` §12.2, §12.4) instead of reaching the host as a blank chat.
//! Paused clock.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    Anything, Faults, FaultyStore, REPLY, World, advance, choice, compile_final, link, payload_for,
    put_blocks, set, settle, simple_service,
};
use indexmap::IndexMap;
use ui_core::Value;
use ui_host::{AccessRecord, ChoicePayload, FnSource, SourceRegistry, UiStore, ValueSchema};
use ui_links::LinkState;

/// The read timeout of the spec's limits.
const TIMEOUT_MS: u64 = 8_000;

#[tokio::test(start_paused = true)]
async fn a_capture_that_never_answers_fails_at_the_read_timeout() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    // An hour: longer than any request should wait.
    set(&w.host.knobs.capture_delay_ms, 3_600_000);
    let service = w.service.clone();
    let p = w.payload("c1", "i1", &block, "$runs");
    let request = tokio::spawn(async move { service.query(&p).await });
    settle().await;
    assert_eq!(w.service.stats().captures, 1);
    advance(TIMEOUT_MS - 1).await;
    assert!(!request.is_finished(), "answered before the timeout");
    advance(1).await;
    let r = request.await.unwrap();
    assert_eq!(r.code.as_deref(), Some("access-unavailable"), "{r:?}");
    // The capture failed as any failed capture does: "denied" stays, nothing is pending.
    assert_eq!(w.service.stats().captures, 0);
    assert_eq!(w.store.access("c1", "i1").await, AccessRecord::Denied);
    assert_eq!(w.reads(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_capture_that_panics_leaves_no_capture_behind() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.host.knobs.capture_panics.store(true, Ordering::SeqCst);
    let r = w
        .service
        .query(&w.payload("c1", "i1", &block, "$runs"))
        .await;
    assert_eq!(r.code.as_deref(), Some("access-unavailable"), "{r:?}");
    assert_eq!(w.host.knobs.captures(), 1);
    // The capture's entry went with its task: `observe` no longer sees one in flight.
    assert_eq!(w.service.stats().captures, 0);
    // The item of another reply still captures normally.
    w.host.knobs.capture_panics.store(false, Ordering::SeqCst);
    let other = w.put_reply("c1", "i2", REPLY)[0].clone();
    assert!(
        w.service
            .query(&w.payload("c1", "i2", &other, "$runs"))
            .await
            .is_fresh()
    );
}

#[tokio::test(start_paused = true)]
async fn an_authorize_that_never_answers_refuses_the_choice_at_the_read_timeout() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", false).await;
    settle().await;
    let read = w.read_id(&block, "$runs").await;
    let choice_id = w.node_ids("c1", "i1", "Choice")[0].clone();
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), read);
    set(&w.host.knobs.mode, 6);
    let service = w.service.clone();
    let choosing = tokio::spawn(async move { service.choose(&p).await });
    advance(TIMEOUT_MS - 1).await;
    assert!(!choosing.is_finished(), "answered before the timeout");
    advance(1).await;
    let err = choosing.await.unwrap().unwrap_err();
    assert_eq!(
        (err.wire.as_str(), err.code.as_deref()),
        ("refused-query", Some("timed-out"))
    );
    assert!(w.store.sent("c1").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_link_that_never_resolves_is_plain_timed_out_at_the_read_timeout() {
    let w = World::new();
    let text = "```ui\n<File path=\"hang/a.rs\">a</File>\n<File path=\"src/b.rs\">b</File>\n```\n";
    let block = w.put_reply("c1", "i1", text)[0].clone();
    w.service.observe("c1", "i1", false).await;
    settle().await;
    let files = w.node_ids("c1", "i1", "File");
    let service = w.service.clone();
    let hanging = link(&block, &files[0]);
    let resolving = tokio::spawn(async move { service.link(&hanging).await });
    advance(TIMEOUT_MS - 1).await;
    assert!(!resolving.is_finished(), "answered before the timeout");
    advance(1).await;
    let r = resolving.await.unwrap();
    assert_eq!(
        (r.state, r.code.as_deref()),
        (LinkState::Plain, Some("timed-out"))
    );
    // The other link of the block resolves as ever.
    assert_eq!(
        w.service.link(&link(&block, &files[1])).await.state,
        LinkState::Chip
    );
}

/// A result schema with a bug: it panics on every value.
struct Panics;

impl ValueSchema for Panics {
    fn parse(&self, _: &Value) -> Result<Value, String> {
        panic!("a host's result schema with a bug")
    }
}

#[tokio::test(start_paused = true)]
async fn a_read_that_panics_leaves_no_flight_or_slot_behind() {
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&reads);
    let mut sources = SourceRegistry::new();
    sources.register(
        "buggy",
        FnSource::new(Anything, Panics, move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok(Value::from(&serde_json::json!([1, 2]))) }
        }),
    );
    let (host, store, service) = simple_service(sources);
    let text =
        "```ui\n$rows = @Query(\"buggy\", {})\n<Summary>{@Count($rows)} rows</Summary>\n```\n";
    let blocks = compile_final("i1", text, &host.0);
    let p = payload_for("c1", "i1", &blocks[0], "$rows");
    put_blocks(&store, "c1", "i1", text, blocks);
    let r = service.query(&p).await;
    assert_eq!(
        r.reason.as_deref(),
        Some("The read ended without an answer."),
        "{r:?}"
    );
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    settle().await;
    let stats = service.stats();
    assert_eq!((stats.in_flight, stats.slots), (0, 0), "{stats:?}");
    // Past the refresh window the query reads again instead of joining a dead flight.
    advance(10_000).await;
    let r = service.query(&p).await;
    assert_eq!(
        r.reason.as_deref(),
        Some("The read ended without an answer."),
        "{r:?}"
    );
    assert_eq!(reads.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_memory_store_fails_writes_it_cannot_make() {
    // Its contract: every write returns a `StoreError` when it did not happen.
    let store = ui_host::MemoryStore::new();
    assert!(store.set_access("nowhere", "i1", None).await.is_err());
    let state = ui_host::UiQueryState {
        author_chat_id: "nowhere".into(),
        blocks: IndexMap::new(),
    };
    assert!(store.set_ui_queries("nowhere", "i1", state).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_choice_whose_store_write_hangs_holds_up_only_its_own_block() {
    let w = World::new();
    let text = "```ui\n<Choices><Choice>Yes</Choice><Choice>No</Choice></Choices>\n```\n";
    let stuck = w.put_reply("c1", "i1", text)[0].clone();
    let other = w.put_reply("c2", "i1", text)[0].clone();
    let faults = Faults::default();
    faults.send_hangs_for_c1.store(true, Ordering::SeqCst);
    let service = w.service_over(FaultyStore(w.store.clone(), Arc::new(faults)));
    let yes = w.node_ids("c1", "i1", "Choice")[0].clone();
    let spawn_choice = |p: ChoicePayload| {
        let service = service.clone();
        tokio::spawn(async move { service.choose(&p).await })
    };
    let first = spawn_choice(choice(&stuck, &yes));
    settle().await;
    assert!(!first.is_finished());
    // A second pick in the same block waits its turn (the two must not both pass the
    // "already answered" check).
    let second = spawn_choice(choice(&stuck, &yes));
    settle().await;
    assert!(!second.is_finished());
    assert_eq!(service.stats().choices, 1);
    // A pick in another chat's block does not wait behind either.
    let mut elsewhere = choice(&other, &w.node_ids("c2", "i1", "Choice")[1]);
    elsewhere.chat_id = "c2".into();
    let answer = tokio::time::timeout(Duration::from_millis(1), service.choose(&elsewhere))
        .await
        .expect("waited behind another chat's choice")
        .unwrap();
    assert_eq!(answer.origin.label, "No");
    assert_eq!(w.store.sent("c2").len(), 1);
    // The requests of the stuck block go away (their clients left): so does its turn.
    second.abort();
    first.abort();
    settle().await;
    assert!(second.await.unwrap_err().is_cancelled());
    assert!(first.await.unwrap_err().is_cancelled());
    assert_eq!(service.stats().choices, 0);
    // The other order: the holder goes first, handing the turn to a waiter that goes
    // before it ever runs with it.
    let holder = spawn_choice(choice(&stuck, &yes));
    settle().await;
    let waiter = spawn_choice(choice(&stuck, &yes));
    settle().await;
    assert_eq!(service.stats().choices, 1);
    holder.abort();
    waiter.abort();
    settle().await;
    assert!(holder.await.unwrap_err().is_cancelled());
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(service.stats().choices, 0);
}

#[tokio::test(start_paused = true)]
async fn a_chat_deleted_after_its_capture_is_stale_and_its_host_never_sees_a_blank_chat() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let text = "```ui\n<File path=\"src/b.rs\">b</File>\n```\n";
    let links_only = w.put_reply("c1", "i2", text)[0].clone();
    for item in ["i1", "i2"] {
        w.service.observe("c1", item, false).await;
    }
    settle().await;
    let read = w.read_id(&block, "$runs").await;
    let reads_before = w.reads();
    // The chat goes; the replies, their captured access and the readings stay a moment.
    let faults = Faults::default();
    faults.chats_gone.store(true, Ordering::SeqCst);
    let gone = w.service_over(FaultyStore(w.store.clone(), Arc::new(faults)));
    let r = gone.query(&w.payload("c1", "i1", &block, "$runs")).await;
    assert_eq!(r.code.as_deref(), Some("block-stale"), "{r:?}");
    // A choice of a block with queries: its issued values need the chat.
    let choice_id = w.node_ids("c1", "i1", "Choice")[0].clone();
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), read.clone());
    let err = gone.choose(&p).await.unwrap_err();
    assert_eq!(
        (err.wire.as_str(), err.code.as_deref()),
        ("stale-ui-block", Some("block-stale"))
    );
    assert!(w.store.sent("c1").is_empty());
    // Links, of a block with queries and of one without.
    let mut with_queries = link(&block, &w.node_ids("c1", "i1", "File")[0]);
    with_queries.reads.insert("$runs".into(), read);
    let mut without = link(&links_only, &w.node_ids("c1", "i2", "File")[0]);
    without.item_id = "i2".into();
    for p in [with_queries, without] {
        let r = gone.link(&p).await;
        assert_eq!(
            (r.state, r.code.as_deref()),
            (LinkState::Plain, Some("block-stale")),
            "{r:?}"
        );
    }
    assert_eq!(w.reads(), reads_before);
}
