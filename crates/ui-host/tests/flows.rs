//! Freezing, links and choices end to end (`host.md` §9, §12, §13).

mod common;

use common::{REPLY, World, advance, set};
use indexmap::IndexMap;
use ui_core::Record;
use ui_host::{ChoicePayload, LinkPayload, ReadingState};
use ui_links::LinkState;

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn final_replies_freeze_their_first_readings() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let item = w.store.item_now("c1", "i1");
    let state = item.ui_queries.expect("captured and frozen");
    assert_eq!(state.author_chat_id, "c1");
    let frozen = &state.blocks[&block.0];
    assert_eq!(frozen.revision, block.1);
    assert_eq!(frozen.readings["$runs"].state, ReadingState::Fresh);
    assert_eq!(
        frozen.fallback,
        "1 runs\nmain\ndev\nsrc/app.rs app\nRerun\nRerun the failed jobs\nIgnore\nSources: $runs: ci.runs"
    );
    let links = &frozen.links;
    assert_eq!(links.len(), 1);
    assert_eq!(links.values().next().unwrap().state, LinkState::Chip);
    // Observing again freezes nothing new and reads nothing.
    let reads = w.reads();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    assert_eq!(w.reads(), reads);
    assert_eq!(w.service.stats().freezes, 0);
}

#[tokio::test(start_paused = true)]
async fn oversize_snapshots_degrade() {
    let w = World::new();
    set(&w.host.knobs.result_len, 65_500);
    let text = format!("{REPLY}{}", REPLY.replace("Runs:", "More:"));
    let blocks = w.put_reply("c1", "i1", &text);
    w.service.observe("c1", "i1", true).await;
    settle().await;
    advance(1_000).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    // The first block fits (64 KB < 128 KB); the second would not with its reading, so it
    // degrades to snapshot-too-large.
    assert_eq!(
        state.blocks[&blocks[0].0].readings["$runs"].state,
        ReadingState::Fresh
    );
    let second = &state.blocks[&blocks[1].0];
    assert_eq!(
        second.readings["$runs"].code.as_deref(),
        Some("snapshot-too-large")
    );
    assert!(second.fallback.contains("Sources: $runs: ci.runs"));
}

fn link(block: &(String, String), node: &str) -> LinkPayload {
    LinkPayload {
        chat_id: "c1".into(),
        item_id: "i1".into(),
        block_id: block.0.clone(),
        revision: block.1.clone(),
        node_id: node.to_owned(),
        values: Record::default(),
        reads: IndexMap::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn links_resolve_only_visible_targets_of_the_stored_block() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let file_id = {
        let item = w.store.item_now("c1", "i1");
        let mut id = String::new();
        item.blocks[0].walk(&mut |n| {
            if n.kind == "File" {
                id = n.id.clone();
            }
        });
        id
    };
    // Never captured: access-unavailable.
    let r = w.service.link(&link(&block, &file_id)).await;
    assert_eq!(r.code.as_deref(), Some("access-unavailable"));
    w.service.observe("c1", "i1", false).await;
    settle().await;
    // The block has a query: links need the read ids of the values on screen.
    let r = w.service.link(&link(&block, &file_id)).await;
    assert_eq!(r.code.as_deref(), Some("stale-read"));
    let reading = w
        .service
        .query(&w.payload("c1", "i1", &block, "$runs"))
        .await;
    let mut p = link(&block, &file_id);
    p.reads.insert("$runs".into(), reading.read_id.unwrap());
    let r = w.service.link(&p).await;
    assert_eq!(r.state, LinkState::Chip, "{r:?}");
    p.node_id = format!("{}:1", block.0);
    let r = w.service.link(&p).await;
    assert_eq!(r.code.as_deref(), Some("link-unsupported"));
}

fn choice(block: &(String, String), choice_id: &str) -> ChoicePayload {
    ChoicePayload {
        chat_id: "c1".into(),
        item_id: "i1".into(),
        block_id: block.0.clone(),
        revision: block.1.clone(),
        choice_id: choice_id.to_owned(),
        values: Record::default(),
        reads: IndexMap::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn choices_check_read_ids_and_answer_once() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let choice_ids: Vec<String> = {
        let item = w.store.item_now("c1", "i1");
        let mut ids = Vec::new();
        item.blocks[0].walk(&mut |n| {
            if n.kind == "Choice" {
                ids.push(n.id.clone());
            }
        });
        ids
    };
    w.service.observe("c1", "i1", true).await;
    settle().await;
    // Without read ids: stale-read.
    let err = w
        .service
        .choose(&choice(&block, &choice_ids[0]))
        .await
        .unwrap_err();
    assert_eq!(
        (err.wire.as_str(), err.code.as_deref()),
        ("stale-ui-query", Some("stale-read"))
    );
    // With the frozen reading's id the defaults' reading is accepted.
    let frozen =
        w.store.item_now("c1", "i1").ui_queries.unwrap().blocks[&block.0].readings["$runs"]
            .read_id
            .clone()
            .unwrap();
    let mut p = choice(&block, &choice_ids[0]);
    p.reads.insert("$runs".into(), frozen.clone());
    let answer = w.service.choose(&p).await.unwrap();
    assert_eq!(answer.origin.label, "Rerun");
    assert_eq!(w.store.sent("c1").len(), 1);
    assert_eq!(w.store.sent("c1")[0].1, "Rerun the failed jobs");
    // The same pick again answers the same; another choice is refused.
    assert_eq!(w.service.choose(&p).await.unwrap(), answer);
    assert_eq!(w.store.sent("c1").len(), 1);
    let mut other = choice(&block, &choice_ids[1]);
    other.reads.insert("$runs".into(), frozen);
    let err = w.service.choose(&other).await.unwrap_err();
    assert_eq!(err.wire, "ui-already-answered");
}

#[tokio::test(start_paused = true)]
async fn choices_refuse_tampered_values_and_stale_blocks() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let frozen =
        w.store.item_now("c1", "i1").ui_queries.unwrap().blocks[&block.0].readings["$runs"]
            .read_id
            .clone()
            .unwrap();
    let choice_id = format!("{}:1", block.0);
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), frozen.clone());
    p.values = ui_core::Value::from_json_str(r#"{"$branch": "prod"}"#)
        .unwrap()
        .as_record()
        .unwrap()
        .clone();
    let err = w.service.choose(&p).await.unwrap_err();
    assert_eq!(err.wire, "refused-query");
    let mut stale = choice(&block, &choice_id);
    stale.revision = "x".into();
    let err = w.service.choose(&stale).await.unwrap_err();
    assert_eq!(err.wire, "stale-ui-block");
}
