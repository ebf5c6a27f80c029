//! Freezing the first readings of a final reply (`host.md` §9): the snapshot budget with
//! degraded and dropped blocks, failed and busy first readings, no access, and a revision
//! that changes while the freeze runs.

mod common;

use common::{REPLY, World, advance, set, settle};
use ui_host::{ReadingState, UiStore};
use ui_links::LinkState;

/// Bytes of the compact JSON of an item's frozen blocks.
fn snapshot_bytes(w: &World, item: &str) -> usize {
    let state = w.store.item_now("c1", item).ui_queries.unwrap();
    serde_json::to_string(&state.blocks).unwrap().len()
}

#[tokio::test(start_paused = true)]
async fn an_oversize_snapshot_degrades_links_to_unchecked_then_drops_the_block() {
    let w = World::new();
    // Each reading is 62,000 bytes: two fit the 131,072-byte snapshot, three do not.
    set(&w.host.knobs.result_len, 62_000);
    let long = "é".repeat(5_000);
    let text = format!(
        "```ui\n$a = @Query(\"ci.runs\", {{branch: \"a\"}})\n$b = @Query(\"ci.runs\", {{branch: \"b\"}})\n\
         <Summary>two</Summary>\n```\n\
         ```ui\n<File path=\"src/x.rs\">x</File>\n<Summary>{long}</Summary>\n```\n\
         ```ui\n$c = @Query(\"ci.runs\", {{branch: \"c\"}})\n<Summary>{long}</Summary>\n```\n"
    );
    let blocks = w.put_reply("c1", "i1", &text);
    assert_eq!(blocks.len(), 3);
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    // The first block fits as read.
    let first = &state.blocks[&blocks[0].0];
    assert!(first.readings.values().all(|r| r.is_fresh()));
    // The second (no queries, a link and a long text) does not fit with its 8,192-unit
    // fallback: its link must be checked again, its fallback is the block's own cut to
    // 2,048 units, then the (empty) Sources line and the note.
    let second = &state.blocks[&blocks[1].0];
    assert!(second.readings.is_empty());
    let links = &second.links;
    assert_eq!(links.len(), 1);
    for link in links.values() {
        assert_eq!(link.state, LinkState::Plain);
        assert_eq!(link.code.as_deref(), Some("link-unchecked"));
        assert_eq!(link.target, None);
    }
    let stored = w.store.item_now("c1", "i1");
    let own = ui_core::text::truncate_utf16(&stored.blocks[1].fallback, 2_048).to_owned();
    let (head, tail) = second.fallback.split_at(own.len());
    assert_eq!(head, own);
    assert!(tail.starts_with("\nSources: \n"), "{tail:?}");
    // The third would not fit even degraded: it is left out.
    assert!(!state.blocks.contains_key(&blocks[2].0));
    assert!(snapshot_bytes(&w, "i1") <= 131_072);
    assert_eq!(w.reads(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_degraded_block_fails_its_readings_with_snapshot_too_large() {
    let w = World::new();
    set(&w.host.knobs.result_len, 65_536);
    let text = format!("{REPLY}{}", REPLY.replace("Runs:", "More:"));
    let blocks = w.put_reply("c1", "i1", &text);
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    let second = &state.blocks[&blocks[1].0];
    let reading = &second.readings["$runs"];
    assert_eq!(reading.state, ReadingState::Failed);
    assert_eq!(reading.code.as_deref(), Some("snapshot-too-large"));
    assert!(reading.reason.is_some() && reading.value.is_none());
    let link = &second.links.values().next().unwrap();
    assert_eq!(link.code.as_deref(), Some("link-unchecked"));
    assert!(second.fallback.contains("\nSources: $runs: ci.runs\n"));
    // The first block's link stays a chip.
    let first = &state.blocks[&blocks[0].0];
    let link = &first.links.values().next().unwrap();
    assert_eq!(link.state, LinkState::Chip);
}

#[tokio::test(start_paused = true)]
async fn failed_first_readings_are_frozen_with_a_reason_line() {
    let w = World::new();
    set(&w.host.knobs.mode, 1);
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    let frozen = &state.blocks[&block.0];
    assert_eq!(frozen.readings["$runs"].state, ReadingState::Failed);
    assert!(
        frozen
            .fallback
            .ends_with("\nSources: $runs: ci.runs\n$runs: the CI server is down"),
        "{:?}",
        frozen.fallback
    );
}

#[tokio::test(start_paused = true)]
async fn a_freeze_that_finds_no_slot_freezes_busy() {
    let w = World::new();
    set(&w.host.knobs.delay_ms, 5_000);
    let mut tasks = Vec::new();
    // Two reads of other branches (they cannot be joined) hold the chat's two slots.
    for (item, branch) in [("i1", "dev"), ("i2", "qa")] {
        let reply = REPLY.replace("$branch = \"main\"", &format!("$branch = \"{branch}\""));
        let block = w.put_reply("c1", item, &reply)[0].clone();
        let (service, p) = (w.service.clone(), w.payload("c1", item, &block, "$runs"));
        tasks.push(tokio::spawn(async move { service.query(&p).await }));
    }
    settle().await;
    let block = w.put_reply("c1", "i3", REPLY)[0].clone();
    w.service.observe("c1", "i3", true).await;
    settle().await;
    let state = w.store.item_now("c1", "i3").ui_queries.unwrap();
    let frozen = &state.blocks[&block.0];
    let reading = &frozen.readings["$runs"];
    assert_eq!(reading.code.as_deref(), Some("busy"));
    assert!(
        frozen
            .fallback
            .contains(&format!("\n$runs: {}", reading.reason.as_deref().unwrap()))
    );
    // Re-observing a frozen item does not freeze it again.
    advance(5_000).await;
    for t in tasks {
        assert!(t.await.unwrap().is_fresh());
    }
    w.service.observe("c1", "i3", true).await;
    settle().await;
    let again = w.store.item_now("c1", "i3").ui_queries.unwrap();
    assert_eq!(
        again.blocks[&block.0].readings["$runs"].code.as_deref(),
        Some("busy")
    );
    assert_eq!(w.reads(), 2);
}

#[tokio::test(start_paused = true)]
async fn without_access_readings_are_refused_and_links_stay_plain() {
    let host = common::TestHost::new();
    *host.capture.lock().unwrap() = Err(ui_host::HostError::message("no"));
    let w = World::with_host(host);
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    let frozen = &state.blocks[&block.0];
    let reading = &frozen.readings["$runs"];
    assert_eq!(reading.state, ReadingState::Refused);
    assert_eq!(reading.code.as_deref(), Some("access-unavailable"));
    let links = &frozen.links;
    assert_eq!(links.len(), 1);
    let link = links.values().next().unwrap();
    assert_eq!(link.state, LinkState::Plain);
    assert_eq!(link.code.as_deref(), Some("access-unavailable"));
}

#[tokio::test(start_paused = true)]
async fn a_revision_change_while_freezing_stops_the_freeze() {
    let w = World::new();
    set(&w.host.knobs.delay_ms, 1_000);
    let old = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    assert_eq!(w.service.stats().freezes, 1);
    // The reply is edited while the first reading is in flight: same block id, new
    // revision.
    let edited = REPLY.replace("runs</Summary>", "runs today</Summary>");
    let new = w.put_reply("c1", "i1", &edited)[0].clone();
    assert_eq!(new.0, old.0);
    assert_ne!(new.1, old.1);
    advance(1_000).await;
    settle().await;
    assert_eq!(w.service.stats().freezes, 0);
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    assert!(state.blocks.is_empty(), "{state:?}");
    // The new revision freezes when observed.
    w.service.observe("c1", "i1", true).await;
    settle().await;
    advance(1_000).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    assert_eq!(state.blocks[&new.0].revision, new.1);
    assert!(matches!(
        w.store.access("c1", "i1").await,
        ui_host::AccessRecord::Granted(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_host_without_links_freezes_readings_only() {
    let w = World::with_host(common::TestHost::without_links());
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    let frozen = &state.blocks[&block.0];
    assert!(frozen.readings["$runs"].is_fresh());
    // `links` is always there (`host.md` §9 step f): empty without a link resolver.
    assert!(frozen.links.is_empty());
    let json = serde_json::to_value(frozen).unwrap();
    assert_eq!(json["links"], serde_json::json!({}));
}

#[tokio::test(start_paused = true)]
async fn a_block_without_link_targets_freezes_empty_links() {
    let w = World::new();
    // A host that resolves links, and blocks with no link target: none at all, one only
    // under a false Show, and one only inside an Each over no items.
    let text = "```ui\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n<Summary>{@Count($runs)}</Summary>\n```\n\
                ```ui\n<Show when={false}><File path=\"src/a.rs\">a</File></Show>\n```\n\
                ```ui\n<Each items={[]} as=\"n\"><Node id={n}>x</Node></Each>\n```\n";
    let blocks = w.put_reply("c1", "i1", text);
    assert_eq!(blocks.len(), 3);
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    for (id, _) in &blocks {
        let frozen = &state.blocks[id];
        assert!(frozen.links.is_empty(), "{id}: {:?}", frozen.links);
        let json = serde_json::to_value(frozen).unwrap();
        assert_eq!(json["links"], serde_json::json!({}), "{id}");
    }
}
