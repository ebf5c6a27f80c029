//! `chat.uiChoice` and its issued query values (`host.md` §12): which read ids a choice
//! may rely on, and how its failures map to wire errors (§12.4).

mod common;

use common::{REPLY, World, advance, choice, record, set, settle};
use ui_host::WireRefusal;

fn codes(err: &WireRefusal) -> (&str, Option<&str>) {
    (err.wire.as_str(), err.code.as_deref())
}

/// A final, captured REPLY as item `i1` of `c1` (frozen when `freeze`), with its first
/// Choice id.
async fn reply(w: &World, freeze: bool) -> ((String, String), String) {
    let block = w.put_reply("c1", "i1", REPLY)[0].clone();
    w.service.observe("c1", "i1", freeze).await;
    settle().await;
    let choice = w.node_ids("c1", "i1", "Choice")[0].clone();
    (block, choice)
}

#[tokio::test(start_paused = true)]
async fn a_revision_change_between_read_and_choice_is_stale() {
    let w = World::new();
    let (block, choice_id) = reply(&w, false).await;
    let read = w.read_id(&block, "$runs").await;
    // The reply is edited after the page read it.
    w.put_reply(
        "c1",
        "i1",
        &REPLY.replace("runs</Summary>", "runs now</Summary>"),
    );
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), read);
    let err = w.service.choose(&p).await.unwrap_err();
    assert_eq!(codes(&err), ("stale-ui-block", Some("block-stale")));
    assert!(w.store.sent("c1").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cached_reading_has_no_age_limit_for_a_choice() {
    let w = World::new();
    let (block, choice_id) = reply(&w, false).await;
    let mut q = w.payload("c1", "i1", &block, "$runs");
    q.values = record(r#"{"$branch": "dev"}"#);
    let read = w.service.query(&q).await.read_id.unwrap();
    // Long past the 10 s window, the reading is still held and still accepted.
    advance(10_001).await;
    advance(3_600_000).await;
    let mut p = choice(&block, &choice_id);
    p.values = q.values.clone();
    p.reads.insert("$runs".into(), read);
    let answer = w.service.choose(&p).await.unwrap();
    assert_eq!(answer.origin.label, "Rerun");
    assert_eq!(answer.origin.values, Some(record(r#"{"$branch": "dev"}"#)));
    assert_eq!(w.store.sent("c1").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_frozen_reading_counts_only_for_the_default_inputs() {
    let w = World::new();
    let (block, choice_id) = reply(&w, true).await;
    let frozen =
        w.store.item_now("c1", "i1").ui_queries.unwrap().blocks[&block.0].readings["$runs"]
            .read_id
            .clone()
            .unwrap();
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), frozen.clone());
    p.values = record(r#"{"$branch": "dev"}"#);
    let err = w.service.choose(&p).await.unwrap_err();
    assert_eq!(codes(&err), ("stale-ui-query", Some("stale-read")));
    // The default value sent explicitly gives the defaults' arguments: accepted.
    p.values = record(r#"{"$branch": "main"}"#);
    assert!(w.service.choose(&p).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_frozen_reading_survives_a_restart() {
    let w = World::new();
    let (block, choice_id) = reply(&w, true).await;
    let frozen =
        w.store.item_now("c1", "i1").ui_queries.unwrap().blocks[&block.0].readings["$runs"]
            .read_id
            .clone()
            .unwrap();
    let restarted = ui_host::UiQueries::new(
        w.host.clone(),
        w.store.clone(),
        std::sync::Arc::new(ui_host::TokioClock::starting_at(5_000_000)),
    );
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), frozen);
    assert!(restarted.choose(&p).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn read_ids_of_other_arguments_or_failed_reads_are_stale() {
    let w = World::new();
    let (block, choice_id) = reply(&w, false).await;
    let mut q = w.payload("c1", "i1", &block, "$runs");
    q.values = record(r#"{"$branch": "dev"}"#);
    let dev = w.service.query(&q).await.read_id.unwrap();
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), dev);
    // Sent with the defaults: the dev reading does not vouch for them.
    let err = w.service.choose(&p).await.unwrap_err();
    assert_eq!(codes(&err), ("stale-ui-query", Some("stale-read")));
    // An id the host never issued.
    p.reads.insert("$runs".into(), "made-up".into());
    let err = w.service.choose(&p).await.unwrap_err();
    assert_eq!(codes(&err), ("stale-ui-query", Some("stale-read")));
    assert!(w.store.sent("c1").is_empty());
}

#[tokio::test(start_paused = true)]
async fn choice_refusals_map_to_wire_codes() {
    let w = World::new();
    let (block, choice_id) = reply(&w, true).await;
    let frozen =
        w.store.item_now("c1", "i1").ui_queries.unwrap().blocks[&block.0].readings["$runs"]
            .read_id
            .clone()
            .unwrap();
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), frozen);
    // A host refusal from authorize: refused-query with the host's code.
    set(&w.host.knobs.mode, 3);
    let err = w.service.choose(&p).await.unwrap_err();
    assert_eq!(codes(&err), ("refused-query", Some("outside-project")));
    assert_eq!(err.message, "revoked");
    // A plain error from authorize: refused-query, no code (§17.8).
    set(&w.host.knobs.mode, 5);
    let err = w.service.choose(&p).await.unwrap_err();
    assert_eq!(codes(&err), ("refused-query", None));
    set(&w.host.knobs.mode, 0);
    // A Choice that is not one: the resolver's code.
    let mut other = p.clone();
    other.choice_id = format!("{}:999", block.0);
    let err = w.service.choose(&other).await.unwrap_err();
    assert_eq!(err.wire, "refused_choice");
    // No access: refused-query with access-unavailable.
    let host = common::TestHost::new();
    *host.capture.lock().unwrap() = Err(ui_host::HostError::message("no"));
    let denied = World::with_host(host);
    let (block, choice_id) = reply(&denied, false).await;
    let err = denied
        .service
        .choose(&choice(&block, &choice_id))
        .await
        .unwrap_err();
    assert_eq!(codes(&err), ("refused-query", Some("access-unavailable")));
    assert!(w.store.sent("c1").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_block_without_queries_chooses_without_reads() {
    let w = World::new();
    let text = "```ui\n<Choices><Choice>Yes</Choice><Choice>No</Choice></Choices>\n```\n";
    let block = w.put_reply("c1", "i1", text)[0].clone();
    let no = w.node_ids("c1", "i1", "Choice")[1].clone();
    let answer = w.service.choose(&choice(&block, &no)).await.unwrap();
    assert_eq!(answer.origin.label, "No");
    assert_eq!(w.store.sent("c1")[0].1, "No");
    assert_eq!(w.host.knobs.captures(), 0);
}

#[tokio::test(start_paused = true)]
async fn two_identical_concurrent_picks_send_one_message() {
    let w = World::new();
    let (block, choice_id) = reply(&w, true).await;
    let frozen =
        w.store.item_now("c1", "i1").ui_queries.unwrap().blocks[&block.0].readings["$runs"]
            .read_id
            .clone()
            .unwrap();
    let mut p = choice(&block, &choice_id);
    p.reads.insert("$runs".into(), frozen);
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (service, p) = (w.service.clone(), p.clone());
            tokio::spawn(async move { service.choose(&p).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap().unwrap());
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(w.store.sent("c1").len(), 1);
}
