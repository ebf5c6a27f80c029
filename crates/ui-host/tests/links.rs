//! `ui.link` end to end (`host.md` §13): hosts without links, what a host's answer
//! becomes (§13.5), its refusals, and the issued values a link needs.

mod common;

use common::{REPLY, World, link, record, settle};
use indexmap::IndexMap;
use ui_links::{LinkResolution, LinkState, LinkTarget};

const LINKS: &str = "```ui\n<File path=\"src/app.rs\">app</File>\n<File path=\"secret/key.pem\">key</File>\n\
<File path=\"offline/x.rs\">x</File>\n<File path=\"chipless/y.rs\">y</File>\n\
<File path=\"badsha/z.rs\">z</File>\n<File path=\"gone/w.rs\">w</File>\n\
<File path=\"extra/v.rs\">v</File>\n<Summary>files</Summary>\n```\n";

/// The resolution of each File of the LINKS reply, by the first segment of its path.
async fn resolve_all(w: &World) -> IndexMap<String, LinkResolution> {
    let block = w.put_reply("c1", "i1", LINKS)[0].clone();
    w.service.observe("c1", "i1", false).await;
    settle().await;
    let item = w.store.item_now("c1", "i1");
    let mut files = Vec::new();
    item.blocks[0].walk(&mut |n| {
        if n.kind == "File" {
            let path = n.props["path"].as_str().unwrap().to_owned();
            files.push((path.split('/').next().unwrap().to_owned(), n.id.clone()));
        }
    });
    let mut out = IndexMap::new();
    for (name, id) in files {
        out.insert(name, w.service.link(&link(&block, &id)).await);
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_host_without_links_answers_links_unsupported() {
    let w = World::with_host(common::TestHost::without_links());
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let file = &w.node_ids("c1", "i1", "File")[0];
    let r = w.service.link(&link(&block, file)).await;
    assert_eq!(r.state, LinkState::Plain);
    assert_eq!(r.code.as_deref(), Some("links-unsupported"));
    assert!(r.reason.is_some_and(|r| !r.is_empty()));
    // Even for a stale block: the host's lack of links is checked first.
    let mut stale = link(&block, file);
    stale.revision = "x".into();
    let r = w.service.link(&stale).await;
    assert_eq!(r.code.as_deref(), Some("links-unsupported"));
}

#[tokio::test(start_paused = true)]
async fn what_a_hosts_answer_becomes() {
    let w = World::new();
    let out = resolve_all(&w).await;
    // A chip with a valid target.
    assert_eq!(out["src"].state, LinkState::Chip);
    assert_eq!(
        out["src"].target,
        Some(LinkTarget::File {
            path: "src/app.rs".into(),
            line: None
        })
    );
    // A refusal passes its code and message through.
    assert_eq!(out["secret"].state, LinkState::Plain);
    assert_eq!(out["secret"].code.as_deref(), Some("outside-project"));
    assert_eq!(out["secret"].reason.as_deref(), Some("not yours"));
    // A plain error: its message, no code.
    assert_eq!(out["offline"].state, LinkState::Plain);
    assert_eq!(out["offline"].code, None);
    assert_eq!(
        out["offline"].reason.as_deref(),
        Some("the repository is offline")
    );
    // A chip without a target, or with an invalid one, becomes plain without a code.
    for name in ["chipless", "badsha"] {
        let r = &out[name];
        assert_eq!(r.state, LinkState::Plain, "{name}");
        assert_eq!(r.target, None, "{name}");
        assert_eq!(r.code, None, "{name}");
        assert!(r.reason.as_deref().is_some_and(|r| !r.is_empty()), "{name}");
        assert_eq!(r.label, None, "{name}");
    }
    // A plain answer keeps its own code and reason; unknown fields are dropped.
    assert_eq!(out["gone"].state, LinkState::Plain);
    assert_eq!(out["gone"].code.as_deref(), Some("target-unavailable"));
    assert_eq!(out["gone"].reason.as_deref(), Some("deleted"));
    assert_eq!(out["extra"].state, LinkState::Chip);
    let wire = serde_json::to_value(&out["extra"]).unwrap();
    assert_eq!(
        wire,
        serde_json::json!({"state": "chip", "label": "ok",
            "target": {"type": "File", "path": "extra/v.rs"}})
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_link_error_is_cut_to_240_units() {
    let w = World::new();
    *w.host.knobs.message.lock().unwrap() = format!("{}{}", "b".repeat(239), "😀".repeat(3));
    let out = resolve_all(&w).await;
    assert_eq!(out["offline"].reason, Some("b".repeat(239)));
    assert_eq!(out["secret"].reason, Some("b".repeat(239)));
    assert_eq!(out["secret"].code.as_deref(), Some("outside-project"));
}

#[tokio::test(start_paused = true)]
async fn links_are_derived_from_the_stored_block_and_validated_input() {
    let w = World::new();
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    let file = w.node_ids("c1", "i1", "File")[0].clone();
    w.service.observe("c1", "i1", false).await;
    settle().await;
    // A stale revision.
    let mut p = link(&block, &file);
    p.revision = "0".repeat(64);
    assert_eq!(
        w.service.link(&p).await.code.as_deref(),
        Some("block-stale")
    );
    // The values on screen need the read id of their own reading.
    let mut dev = w.payload("c1", "i1", &block, "$runs");
    dev.values = record(r#"{"$branch": "dev"}"#);
    let dev_read = w.service.query(&dev).await.read_id.unwrap();
    let mut p = link(&block, &file);
    p.reads.insert("$runs".into(), dev_read.clone());
    // …the dev reading does not vouch for the defaults…
    assert_eq!(w.service.link(&p).await.code.as_deref(), Some("stale-read"));
    // …but does for dev.
    p.values = record(r#"{"$branch": "dev"}"#);
    assert_eq!(w.service.link(&p).await.state, LinkState::Chip);
    // Tampered input: plain, no code.
    p.values = record(r#"{"$branch": "prod"}"#);
    let r = w.service.link(&p).await;
    assert_eq!((r.state, r.code), (LinkState::Plain, None));
    // A host refusal from authorize becomes plain with its code.
    p.values = record(r#"{"$branch": "dev"}"#);
    common::set(&w.host.knobs.mode, 3);
    let r = w.service.link(&p).await;
    assert_eq!(r.code.as_deref(), Some("outside-project"));
    assert_eq!(r.reason.as_deref(), Some("revoked"));
}

#[tokio::test(start_paused = true)]
async fn a_block_without_queries_needs_no_reads() {
    let w = World::new();
    let out = resolve_all(&w).await;
    assert_eq!(out.len(), 7);
    assert_eq!(w.reads(), 0);
    // Never captured: access-unavailable even for a block without queries.
    let block = w.put_reply("c1", "i2", LINKS)[0].clone();
    let file = w.node_ids("c1", "i2", "File")[0].clone();
    let mut p = link(&block, &file);
    p.item_id = "i2".into();
    let r = w.service.link(&p).await;
    assert_eq!(r.code.as_deref(), Some("access-unavailable"));
}

const ONE_FILE: &str = "```ui\n<File path=\"src/app.rs\">app</File>\n```\n";

/// The configured host limits reach `ui.link` and the freeze: a path longer than the
/// configured `linkPath` is no link target, and reasons are cut to the configured `reason`.
#[tokio::test(start_paused = true)]
async fn configured_host_limits_bound_link_targets_and_reasons() {
    let limits = ui_core::HostLimits::DEFAULT
        .with("linkPath", 8)
        .and_then(|l| l.with("reason", 12))
        .unwrap();
    let w = World::with_host_limits(common::TestHost::new(), limits);
    let block = w.put_reply("c1", "i1", ONE_FILE)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    // `src/app.rs` is 10 units: no target under an 8-unit path limit.
    let file = &w.node_ids("c1", "i1", "File")[0];
    let r = w.service.link(&link(&block, file)).await;
    assert_eq!(r.state, LinkState::Plain);
    assert_eq!(r.code.as_deref(), Some("link-unsupported"), "{r:?}");
    let reason = r.reason.unwrap();
    assert_eq!(reason.encode_utf16().count(), 12, "{reason:?}");
    // The freeze resolved no link either.
    let state = w.store.item_now("c1", "i1").ui_queries.unwrap();
    assert!(state.blocks[&block.0].links.is_empty());
    // Under the spec's limits the same node is a chip.
    let w = World::new();
    let block = w.put_reply("c1", "i1", ONE_FILE)[0].clone();
    w.service.observe("c1", "i1", true).await;
    settle().await;
    let file = &w.node_ids("c1", "i1", "File")[0];
    assert_eq!(
        w.service.link(&link(&block, file)).await.state,
        LinkState::Chip
    );
}
