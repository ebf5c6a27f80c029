//! Admission of `ui.query` (`host.md` §6.1), the compile-time rules the host relies on
//! (§3), and the frame layer's payload shapes (§2.1).

mod common;

use std::sync::Arc;

use common::{REPLY, World, record, set};
use indexmap::IndexMap;
use serde_json::json;
use ui_core::{Code, HostLimits, Record};
use ui_host::{
    ChoicePayload, JsonSchemas, LinkPayload, QueryPayload, ReadingState, StoredItem, block_revision,
};

#[tokio::test(start_paused = true)]
async fn only_a_finished_top_level_complete_block_of_this_revision_is_read() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let p = w.payload("c1", "i1", &block, "$runs");
    let stored = w.store.item_now("c1", "i1");
    let variants: Vec<(&str, StoredItem)> = vec![
        (
            "streaming",
            StoredItem {
                streaming: true,
                ..stored.clone()
            },
        ),
        (
            "subagent",
            StoredItem {
                parent_tool_use_id: Some("tool-1".into()),
                ..stored.clone()
            },
        ),
        (
            "user item",
            StoredItem {
                assistant: false,
                ..stored.clone()
            },
        ),
        ("incomplete", {
            let mut b = (*stored.blocks[0]).clone();
            b.complete = false;
            StoredItem {
                blocks: vec![Arc::new(b)],
                ..stored.clone()
            }
        }),
        ("no revision", {
            let mut b = (*stored.blocks[0]).clone();
            b.revision = None;
            StoredItem {
                blocks: vec![Arc::new(b)],
                ..stored.clone()
            }
        }),
        (
            "no block",
            StoredItem {
                blocks: Vec::new(),
                ..stored.clone()
            },
        ),
    ];
    for (what, item) in variants {
        w.store.put_item("c1", item);
        let r = w.service.query(&p).await;
        assert_eq!(r.state, ReadingState::Refused, "{what}");
        assert_eq!(r.code.as_deref(), Some("block-stale"), "{what}");
        assert_eq!((r.value, r.read_id), (None, None), "{what}");
    }
    // A removed chat, and an item that is gone.
    w.store.put_item("c1", stored);
    let mut gone = p.clone();
    gone.item_id = "nope".into();
    assert_eq!(
        w.service.query(&gone).await.code.as_deref(),
        Some("block-stale")
    );
    w.store.remove_chat("c1");
    assert_eq!(
        w.service.query(&p).await.code.as_deref(),
        Some("block-stale")
    );
    assert_eq!(w.reads(), 0);
}

/// The REPLY block with `extra` more copies of `$runs` declared, stored as item `i1`.
fn with_queries(w: &World, extra: usize) -> (String, String) {
    w.put_reply("c1", "i1", REPLY);
    let stored = w.store.item_now("c1", "i1");
    let mut block = (*stored.blocks[0]).clone();
    let runs = block.queries["$runs"].clone();
    for i in 0..extra {
        block.queries.insert(format!("$q{i}"), runs.clone());
    }
    block.revision = None;
    block.revision = Some(block_revision(&block));
    let ids = (block.id.clone(), block.revision.clone().unwrap());
    w.store.put_item(
        "c1",
        StoredItem {
            blocks: vec![Arc::new(block)],
            ..stored
        },
    );
    ids
}

#[tokio::test(start_paused = true)]
async fn a_stored_block_with_more_than_eight_queries_declares_none() {
    let w = World::new();
    let block = with_queries(&w, 7);
    let r = w.service.query(&w.payload("c1", "i1", &block, "$q6")).await;
    assert!(r.is_fresh(), "8 queries: {r:?}");
    let block = with_queries(&w, 8);
    for name in ["$runs", "$q7"] {
        let r = w.service.query(&w.payload("c1", "i1", &block, name)).await;
        assert_eq!(r.state, ReadingState::Refused);
        assert_eq!(
            r.code.as_deref(),
            Some("query-undeclared"),
            "9 queries: {name}"
        );
    }
    assert_eq!(w.reads(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_source_the_host_does_not_register_is_refused() {
    let w = World::new();
    let schemas = JsonSchemas::from_json(&json!({"ci.gone": {"type": "object"}}));
    let text =
        "```ui\n$old = @Query(\"ci.gone\", {branch: \"main\"})\n<Summary>old</Summary>\n```\n";
    let block = w.put_reply_with("c1", "i1", text, &schemas)[0].clone();
    let r = w
        .service
        .query(&w.payload("c1", "i1", &block, "$old"))
        .await;
    assert_eq!(r.state, ReadingState::Refused);
    assert_eq!(r.code.as_deref(), Some("source-unregistered"));
}

#[tokio::test(start_paused = true)]
async fn arguments_the_source_schema_rejects_are_refused_without_a_code() {
    let w = World::new();
    // The Slider offers 60, the source accepts at most 50: the input is valid, the parsed
    // arguments are not.
    let text = "```ui\n$limit = 5\n$runs = @Query(\"ci.runs\", {branch: \"main\", limit: $limit})\n\
        <Slider value={$limit} min={1} max={100} step={1}>Runs</Slider>\n```\n";
    let block = w.put_reply("c1", "i1", text)[0].clone();
    let mut p = w.payload("c1", "i1", &block, "$runs");
    p.values = record(r#"{"$limit": 50}"#);
    assert!(w.service.query(&p).await.is_fresh());
    p.values = record(r#"{"$limit": 60}"#);
    let r = w.service.query(&p).await;
    assert_eq!(r.state, ReadingState::Refused, "{r:?}");
    assert_eq!(r.code, None);
    assert!(r.reason.unwrap().contains("limit"));
    assert_eq!(w.reads(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_plain_authorize_error_refuses_with_its_message_and_no_code() {
    let w = World::new();
    let block = &w.put_reply("c1", "i1", REPLY)[0];
    set(&w.host.knobs.mode, 5);
    let r = w
        .service
        .query(&w.payload("c1", "i1", block, "$runs"))
        .await;
    assert_eq!(r.state, ReadingState::Refused);
    assert_eq!(r.code, None);
    assert_eq!(r.reason.as_deref(), Some("no rights"));
    assert_eq!(w.reads(), 0);
}

#[test]
fn a_query_reading_another_querys_result_is_refused_when_compiled() {
    let host = common::TestHost::new();
    let text = "```ui\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n\
        $more = @Query(\"ci.runs\", {branch: $runs})\n<Summary>{@Count($runs)}</Summary>\n```\n";
    let blocks = common::compile_final("i1", text, &host.sources);
    let block = &blocks[0];
    let codes: Vec<Code> = block.diagnostics.iter().map(|d| d.code).collect();
    assert!(codes.contains(&Code::InvalidQuery), "{codes:?}");
    assert!(block.queries.contains_key("$runs"));
    assert!(!block.queries.contains_key("$more"));
    // Arguments that fail the source's schema with the defaults, and an unknown source.
    let text = "```ui\n$a = @Query(\"ci.runs\", {branch: \"main\", limit: 99})\n\
        $b = @Query(\"ci.nope\", {})\n<Summary>x</Summary>\n```\n";
    let block = &common::compile_final("i1", text, &host.sources)[0];
    let codes: Vec<Code> = block.diagnostics.iter().map(|d| d.code).collect();
    assert!(codes.contains(&Code::InvalidQuery), "{codes:?}");
    assert!(codes.contains(&Code::UnknownQuery), "{codes:?}");
    assert!(block.queries.is_empty());
}

fn query_payload() -> QueryPayload {
    QueryPayload {
        chat_id: "c1".into(),
        item_id: "i".repeat(256),
        block_id: "b".repeat(256),
        revision: "r".repeat(128),
        query: format!("${}", "q".repeat(127)),
        values: record(&format!(r#"{{"{}": 1}}"#, "v".repeat(128))),
        seen: None,
    }
}

/// A change that breaks one field of a payload.
type Change = Box<dyn Fn(&mut QueryPayload)>;

#[test]
fn payload_shapes_hold_at_their_limits_and_fail_past_them() {
    let limits = HostLimits::DEFAULT;
    let ok = query_payload();
    assert_eq!(ok.validate(&limits), Ok(()));
    let past: Vec<(&str, Change)> = vec![
        ("chatId", Box::new(|p| p.chat_id.clear())),
        ("itemId", Box::new(|p| p.item_id.push('i'))),
        ("itemId", Box::new(|p| p.item_id.clear())),
        ("blockId", Box::new(|p| p.block_id.push('b'))),
        ("revision", Box::new(|p| p.revision.push('r'))),
        ("revision", Box::new(|p| p.revision.clear())),
        ("query", Box::new(|p| p.query.push('q'))),
        ("query", Box::new(|p| p.query.clear())),
        (
            "values",
            Box::new(|p| p.values = record(&format!(r#"{{"{}": 1}}"#, "v".repeat(129)))),
        ),
    ];
    for (field, change) in past {
        let mut p = query_payload();
        change(&mut p);
        let err = p.validate(&limits).unwrap_err();
        assert!(err.contains(field), "{field}: {err}");
    }
    // Lengths are UTF-16 units: 64 astral characters are 128 units.
    let mut p = query_payload();
    p.revision = "😀".repeat(64);
    assert_eq!(p.validate(&limits), Ok(()));
    p.revision.push('x');
    assert!(p.validate(&limits).is_err());

    let reads: IndexMap<String, String> =
        [("$".to_owned() + &"q".repeat(127), "r".repeat(128))].into();
    let link = LinkPayload {
        chat_id: "c1".into(),
        item_id: "i".repeat(256),
        block_id: "b".repeat(256),
        revision: "r".repeat(128),
        node_id: "n".repeat(256),
        values: Record::default(),
        reads: reads.clone(),
    };
    assert_eq!(link.validate(&limits), Ok(()));
    let mut bad = link.clone();
    bad.node_id.push('n');
    assert!(bad.validate(&limits).unwrap_err().contains("nodeId"));
    let mut bad = link.clone();
    bad.node_id.clear();
    assert!(bad.validate(&limits).is_err());
    let mut bad = link.clone();
    bad.reads.insert("k".repeat(129), "r".into());
    assert!(bad.validate(&limits).unwrap_err().contains("reads"));
    let mut bad = link.clone();
    bad.reads.insert("k".into(), "r".repeat(129));
    assert!(bad.validate(&limits).unwrap_err().contains("reads"));

    let choice = ChoicePayload {
        chat_id: "c1".into(),
        item_id: "i".repeat(256),
        block_id: "b".repeat(256),
        revision: "r".repeat(128),
        choice_id: "c".repeat(256),
        values: Record::default(),
        reads,
    };
    assert_eq!(choice.validate(&limits), Ok(()));
    let mut bad = choice.clone();
    bad.choice_id.push('c');
    assert!(bad.validate(&limits).unwrap_err().contains("choiceId"));
    let mut bad = choice.clone();
    bad.reads.insert("k".into(), String::new());
    assert!(bad.validate(&limits).is_err());
    let mut bad = choice;
    bad.values = record(&format!(r#"{{"{}": 1}}"#, "v".repeat(129)));
    assert!(bad.validate(&limits).unwrap_err().contains("values"));
}

#[test]
fn payloads_refuse_unknown_fields_and_wrong_types() {
    // The frame layer's serde shape: an unknown field or a wrong type is a bad request.
    let ok = json!({"chatId": "c1", "itemId": "i", "blockId": "b", "revision": "r",
        "query": "$q"});
    assert!(serde_json::from_value::<QueryPayload>(ok.clone()).is_ok());
    let mut extra = ok.clone();
    extra["source"] = json!("ci.runs");
    assert!(serde_json::from_value::<QueryPayload>(extra).is_err());
    let mut wrong = ok;
    wrong["values"] = json!([1]);
    assert!(serde_json::from_value::<QueryPayload>(wrong).is_err());
}
