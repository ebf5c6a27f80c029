//! Live readings that follow change events (`sync.md` §8): `ui-host`'s service with a
//! [`SyncService`] attached through [`SyncChanges`], on a paused clock and the in-memory log
//! of `ui-sync`'s tests.

#[path = "../../ui-sync/tests/common/mod.rs"]
mod sync_common;

use sync_common::MemStore;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use ui_compiler::{CompileOptions, UiCompiler};
use ui_core::{FrozenClock, Record, SyncLimits, Value};
use ui_host::{
    ChangeFeed, ChatInfo, FnSource, HostError, MemoryStore, QueryPayload, ReadingState,
    SourceRegistry, StoredItem, TokioClock, UiHost, UiQueries, block_revision,
};
use ui_server::SyncChanges;
use ui_sync::{Audience, ChangeDraft, SyncService};

/// The `ci.runs` feed: project `web`, one key per branch.
struct RunsFeed;

impl ChangeFeed for RunsFeed {
    fn audience(&self, _args: &Record, _access: &Value) -> Option<String> {
        Some("project:web".into())
    }
    fn keys(&self, args: &Record) -> Vec<String> {
        let branch = args
            .get("branch")
            .and_then(Value::as_str)
            .unwrap_or_default();
        vec![format!("branch:{branch}")]
    }
}

struct Host {
    sources: SourceRegistry,
}

#[async_trait]
impl UiHost for Host {
    async fn capture(&self, _info: &ChatInfo) -> Result<Value, HostError> {
        Ok(Value::Null)
    }
    fn sources(&self) -> &SourceRegistry {
        &self.sources
    }
}

const REPLY: &str = "```ui\n$branch = \"main\"\n$runs = @Query(\"ci.runs\", {branch: $branch})\n<Summary>{@Count($runs)} runs</Summary>\n<Segmented value={$branch}><Option value=\"main\">main</Option><Option value=\"dev\">dev</Option></Segmented>\n```\n";

struct World {
    service: Arc<UiQueries>,
    sync: SyncService,
    reads: Arc<AtomicUsize>,
    block: (String, String),
}

async fn world() -> World {
    let reads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&reads);
    let source = FnSource::from_json_schemas(
        &json!({"type": "object", "properties": {"branch": {"type": "string"}},
                "required": ["branch"], "additionalProperties": false}),
        &json!({}),
        move |_| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(Value::from_json_str("[{\"id\": 1}]").unwrap())
            }
        },
    )
    .unwrap()
    .with_changes(RunsFeed);
    let mut sources = SourceRegistry::new();
    sources.register("ci.runs", source);
    let host = Arc::new(Host { sources });
    let clock = FrozenClock(0.0);
    let options = CompileOptions {
        id: "i1".into(),
        is_final: true,
        query_schemas: Some(&host.sources),
        clock: Some(&clock),
        ..CompileOptions::default()
    };
    let mut block = (*UiCompiler::new().compile(REPLY, &options)[0]).clone();
    block.revision = Some(block_revision(&block));
    let ids = (block.id.clone(), block.revision.clone().unwrap());
    let store = Arc::new(MemoryStore::new());
    store.put_chat(ChatInfo {
        chat_id: "c1".into(),
        data: Value::Null,
    });
    store.put_item(
        "c1",
        StoredItem {
            id: "i1".into(),
            assistant: true,
            text: REPLY.into(),
            blocks: vec![Arc::new(block)],
            ..StoredItem::default()
        },
    );
    let service = UiQueries::new(host, store, Arc::new(TokioClock::starting_at(1_000_000)));
    let sync = SyncService::start(MemStore::new(), SyncLimits::DEFAULT, [])
        .await
        .unwrap();
    service.attach_changes(Arc::new(SyncChanges::new(sync.clone())));
    World {
        service,
        sync,
        reads,
        block: ids,
    }
}

impl World {
    fn payload(&self, seen: Option<String>) -> QueryPayload {
        QueryPayload {
            chat_id: "c1".into(),
            item_id: "i1".into(),
            block_id: self.block.0.clone(),
            revision: self.block.1.clone(),
            query: "$runs".into(),
            values: Record::default(),
            seen,
        }
    }

    async fn write(&self, branch: &str) -> u64 {
        let cursor = self
            .sync
            .record_and_wait(ChangeDraft {
                source: "ci.runs".into(),
                audience: Some(Audience::project("web")),
                key: Some(format!("branch:{branch}")),
                rs: None,
            })
            .await
            .unwrap();
        assert!(
            self.sync
                .catch_up_to(cursor.seq, Duration::from_secs(5))
                .await
        );
        cursor.seq.0
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn readings_follow_changes_of_their_key() {
    let w = world().await;
    let first = w.service.query(&w.payload(None)).await;
    assert_eq!(first.state, ReadingState::Fresh);
    let sync = first
        .sync
        .clone()
        .expect("a feed source's reading carries sync");
    assert_eq!(sync.version, 0);
    assert_eq!(sync.keys.len(), 1);
    assert_eq!(sync.feed, "partial");
    assert_eq!(w.reads(), 1);

    // A change of another key does not make the reading stale.
    w.write("dev").await;
    let cached = w.service.query(&w.payload(None)).await;
    assert_eq!(cached.read_id, first.read_id);
    assert_eq!(cached.stale_by, None);

    // A change of its key does; within 1 s of the previous read's start the cached
    // reading comes back with `staleBy` and `retryAfterMs`.
    let seq = w.write("main").await;
    let stale = w.service.query(&w.payload(None)).await;
    assert_eq!(stale.read_id, first.read_id);
    assert_eq!(stale.stale_by, Some(seq));
    assert!(stale.retry_after_ms.is_some_and(|ms| ms > 0 && ms <= 1_000));
    // 1 s after the previous start a new read may start (not 10 s).
    tokio::time::advance(Duration::from_millis(1_000)).await;
    let again = w.service.query(&w.payload(None)).await;
    assert_eq!(again.state, ReadingState::Fresh);
    assert_ne!(again.read_id, first.read_id);
    assert_eq!(again.sync.unwrap().version, seq);
    assert_eq!(w.reads(), 2);
}

#[tokio::test(start_paused = true)]
async fn change_driven_requests_never_get_refresh_limit() {
    let w = world().await;
    w.service.query(&w.payload(None)).await;
    let seq = w.write("main").await;
    let seen = format!("{}.{seq}", w.sync.epoch());
    let r = w.service.query(&w.payload(Some(seen))).await;
    assert_ne!(r.code.as_deref(), Some("refresh-limit"));
    assert_eq!(r.stale_by, Some(seq));
}

#[tokio::test(start_paused = true)]
async fn a_seen_this_instance_cannot_catch_up_with_answers_the_cached_reading() {
    // sync.md §8.4 steps 1–2: `seen` is ahead of this instance's head and the catch-up
    // does not get there within 250 ms (the change is on another instance's log tail):
    // the cached reading answers, stale, instead of a new source read.
    let w = world().await;
    let first = w.service.query(&w.payload(None)).await;
    assert_eq!(w.reads(), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    let ahead = w.sync.head().seq.0 + 5;
    let seen = format!("{}.{ahead}", w.sync.epoch());
    let r = w.service.query(&w.payload(Some(seen))).await;
    assert_eq!(
        w.reads(),
        1,
        "a source read started for a seen it cannot reflect"
    );
    assert_eq!(r.read_id, first.read_id);
    assert_eq!(r.stale_by, Some(ahead));
    assert_eq!(r.retry_after_ms, Some(1_000));
    // Once the instance has caught up, the change is read.
    w.write("main").await;
    tokio::time::advance(Duration::from_secs(1)).await;
    let head = w.sync.head().to_string();
    let again = w.service.query(&w.payload(Some(head))).await;
    assert_ne!(again.read_id, first.read_id);
    assert_eq!(w.reads(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_1000_writes_causes_at_most_three_reads() {
    // sync.md §8.6: 1,000 writes to one key over 1 s, one visible block whose page asks
    // after each 250 ms window with the newest cursor: at most 3 source reads in 3 s.
    let w = world().await;
    w.service.query(&w.payload(None)).await;
    let start_reads = w.reads();
    let mut requests = 0;
    for tick in 0..60u64 {
        // 50 ms per tick: writes during the first second, the page asks every 250 ms.
        if tick < 20 {
            for _ in 0..50 {
                w.sync
                    .record(ChangeDraft {
                        source: "ci.runs".into(),
                        audience: Some(Audience::project("web")),
                        key: Some("branch:main".into()),
                        rs: None,
                    })
                    .unwrap();
            }
        }
        tokio::time::advance(Duration::from_millis(50)).await;
        if tick % 5 == 4 {
            let head = w.sync.head();
            w.service.query(&w.payload(Some(head.to_string()))).await;
            requests += 1;
        }
    }
    let reads = w.reads() - start_reads;
    assert!(requests >= 12);
    assert!(reads <= 3, "{reads} source reads for one burst");
    assert!(reads >= 1, "the burst was never read");
}
