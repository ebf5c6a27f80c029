//! Captured access (`host.md` §4): when `observe` captures, once per reply with joined
//! callers, "denied" persisted first, the stored access reused, and forks that capture
//! again with their own rights.

mod common;

use std::sync::atomic::Ordering;

use common::{REPLY, World, advance, set, settle};
use indexmap::IndexMap;
use serde_json::json;
use ui_core::{Record, Value};
use ui_host::{
    AccessRecord, HostError, IssueRequest, ReadingState, StoredItem, UiQueries, UiRefusal, UiStore,
};

#[tokio::test(start_paused = true)]
async fn capture_runs_once_per_reply_and_concurrent_callers_join_it() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    set(&w.host.knobs.capture_delay_ms, 1_000);
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let service = w.service.clone();
        let p = w.payload("c1", "i1", &block, "$runs");
        tasks.push(tokio::spawn(async move { service.query(&p).await }));
    }
    w.service.observe("c1", "i1", false).await;
    settle().await;
    assert_eq!(w.service.stats().captures, 1);
    assert_eq!(w.host.knobs.captures(), 1);
    // "Denied" is persisted before the host is asked, with the item claimed for the chat.
    assert_eq!(w.store.access("c1", "i1").await, AccessRecord::Denied);
    let claimed = w.store.item_now("c1", "i1").ui_queries.unwrap();
    assert_eq!(claimed.author_chat_id, "c1");
    assert!(claimed.blocks.is_empty());
    advance(1_000).await;
    // All five waited for the one capture, then shared one read.
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert!(r.is_fresh(), "{r:?}");
        ids.insert(r.read_id);
    }
    assert_eq!((ids.len(), w.reads()), (1, 1));
    assert_eq!(w.host.knobs.captures(), 1);
    assert_eq!(w.service.stats().captures, 0);
    assert!(matches!(
        w.store.access("c1", "i1").await,
        AccessRecord::Granted(_)
    ));
    // Later requests and observations use the stored access.
    set(&w.host.knobs.capture_delay_ms, 0);
    w.service.observe("c1", "i1", false).await;
    settle().await;
    advance(10_000).await;
    assert!(
        w.service
            .query(&w.payload("c1", "i1", &block, "$runs"))
            .await
            .is_fresh()
    );
    assert_eq!(w.host.knobs.captures(), 1);
    // Another reply of the same chat is captured on its own.
    let other = w.put_reply("c1", "i2", REPLY)[0].clone();
    assert!(
        w.service
            .query(&w.payload("c1", "i2", &other, "$runs"))
            .await
            .is_fresh()
    );
    assert_eq!(w.host.knobs.captures(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_captured_access_is_never_captured_again_for_the_chat() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let p = w.payload("c1", "i1", &block, "$runs");
    assert!(w.service.query(&p).await.is_fresh());
    // The host's rights change; the reply keeps what was captured when it was written.
    *w.host.capture.lock().unwrap() = Ok(json!({"projects": ["other"]}));
    advance(10_000).await;
    assert!(w.service.query(&p).await.is_fresh());
    // After a restart (a new service over the same store) the stored access is used too.
    let restarted = UiQueries::new(
        w.host.clone(),
        w.store.clone(),
        std::sync::Arc::new(ui_host::TokioClock::starting_at(2_000_000)),
    );
    assert!(restarted.query(&p).await.is_fresh());
    let web = Value::from(&json!({"projects": ["web"]}));
    assert_eq!(*w.host.knobs.accesses.lock().unwrap(), vec![web; 3]);
    assert_eq!(w.host.knobs.captures(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_capture_stays_denied_after_a_restart() {
    for failure in [
        HostError::message("no"),
        UiRefusal::new("outside-project", "not yours").into(),
    ] {
        let w = World::new();
        *w.host.capture.lock().unwrap() = Err(failure);
        let block = w.put_reply("c1", "i1", REPLY)[0].clone();
        let p = w.payload("c1", "i1", &block, "$runs");
        let r = w.service.query(&p).await;
        // The host's code is lost: only access-unavailable.
        assert_eq!(r.code.as_deref(), Some("access-unavailable"));
        assert_eq!(w.store.access("c1", "i1").await, AccessRecord::Denied);
        *w.host.capture.lock().unwrap() = Ok(json!({"projects": ["web"]}));
        let restarted = UiQueries::new(
            w.host.clone(),
            w.store.clone(),
            std::sync::Arc::new(ui_host::TokioClock::starting_at(2_000_000)),
        );
        let r = restarted.query(&p).await;
        assert_eq!(r.state, ReadingState::Refused);
        assert_eq!(r.code.as_deref(), Some("access-unavailable"));
        assert_eq!(w.host.knobs.captures(), 1);
        assert_eq!(w.reads(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_forked_item_captures_again_with_its_own_rights() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let original = w.store.item_now("c1", "i1");
    let frozen = original.ui_queries.clone().unwrap();
    assert_eq!(frozen.author_chat_id, "c1");
    let frozen_id = frozen.blocks[&block.0].readings["$runs"]
        .read_id
        .clone()
        .unwrap();
    // The fork copies the item, frozen blocks included, into c2; c2 has other rights.
    w.store.put_item("c2", original);
    *w.host.capture.lock().unwrap() = Ok(json!({"projects": ["fork"]}));
    let p = w.payload("c2", "i1", &block, "$runs");
    advance(10_000).await;
    let r = w.service.query(&p).await;
    assert!(r.is_fresh(), "{r:?}");
    assert_eq!(
        *w.host.knobs.captured_for.lock().unwrap(),
        vec!["c1".to_owned(), "c2".to_owned()]
    );
    let accesses = w.host.knobs.accesses.lock().unwrap().clone();
    assert_eq!(
        accesses.last(),
        Some(&Value::from(&json!({"projects": ["fork"]})))
    );
    // The copied frozen blocks are discarded: the fork reads again with its own rights.
    let state = w.store.item_now("c2", "i1").ui_queries.unwrap();
    assert_eq!(state.author_chat_id, "c2");
    assert!(state.blocks.is_empty());
    // So the copied frozen read id is not accepted in the fork.
    let mut reads = IndexMap::new();
    reads.insert("$runs".to_owned(), frozen_id);
    let refused = w
        .service
        .issued_values(&IssueRequest {
            chat_id: "c2",
            item_id: "i1",
            block_id: &block.0,
            revision: &block.1,
            values: &Record::default(),
            reads: &reads,
            for_choice: false,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code.as_deref(), Some("stale-read"));
    // The original keeps its own frozen blocks and access.
    assert_eq!(w.store.item_now("c1", "i1").ui_queries, Some(frozen));
    // A final observe in the fork freezes its own first readings.
    w.service.observe("c2", "i1", true).await;
    settle().await;
    let state = w.store.item_now("c2", "i1").ui_queries.unwrap();
    assert_eq!(
        state.blocks[&block.0].readings["$runs"].state,
        ReadingState::Fresh
    );
    assert_eq!(w.host.knobs.captures(), 2);
}

#[tokio::test(start_paused = true)]
async fn observe_captures_only_replies_that_may_use_the_host() {
    let w = World::new();
    let cases = [
        ("no fence", "Just text mentioning @Query and <File>.", false),
        (
            "plain block",
            "```ui\n<Summary>hello</Summary>\n```\n",
            false,
        ),
        (
            "link tag",
            "```ui\n<File path=\"src/a.rs\">a</File>\n```\n",
            true,
        ),
        (
            "query text",
            "```ui\n<Summary>about @Query</Summary>\n```\n",
            true,
        ),
        (
            "declared query",
            "```ui\n$r = @Query(\"ci.runs\", {branch: \"x\"})\n<Summary>r</Summary>\n```\n",
            true,
        ),
    ];
    for (i, (what, text, captured)) in cases.into_iter().enumerate() {
        let item = format!("i{i}");
        w.put_reply("c1", &item, text);
        let before = w.host.knobs.captures();
        w.service.observe("c1", &item, false).await;
        settle().await;
        assert_eq!(
            w.host.knobs.captures() - before,
            usize::from(captured),
            "{what}"
        );
        let state = w.store.item_now("c1", &item).ui_queries;
        assert_eq!(state.is_some(), captured, "{what}");
        // Not final: nothing is frozen.
        assert!(state.is_none_or(|s| s.blocks.is_empty()), "{what}");
    }
    // A subagent's text and a user item are never observed.
    for (what, change) in [
        (
            "subagent",
            StoredItem {
                parent_tool_use_id: Some("t".into()),
                ..StoredItem::default()
            },
        ),
        (
            "user",
            StoredItem {
                assistant: false,
                ..StoredItem::default()
            },
        ),
    ] {
        w.put_reply("c1", "s", REPLY);
        let item = w.store.item_now("c1", "s");
        w.store.put_item(
            "c1",
            StoredItem {
                parent_tool_use_id: change.parent_tool_use_id,
                assistant: change.assistant && item.assistant,
                ..item
            },
        );
        let before = w.host.knobs.captures();
        w.service.observe("c1", "s", true).await;
        settle().await;
        assert_eq!(w.host.knobs.captures(), before, "{what}");
        assert_eq!(w.store.item_now("c1", "s").ui_queries, None, "{what}");
    }
    assert_eq!(w.reads(), 0);
    assert_eq!(w.host.knobs.reads.load(Ordering::SeqCst), 0);
}
