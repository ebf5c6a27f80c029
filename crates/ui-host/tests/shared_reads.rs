//! Source reads priced by access class (`sync.md` §8.2, issue 18 item 3): many pages in a
//! few access classes watching one query of one source. One change costs one source read
//! per distinct (arguments, access), every page still gets its own authorized answer, and a
//! failing or hanging `authorize` of one reader does not delay the others. Paused clock.

#![allow(missing_docs)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use ui_core::{HostLimits, Record, Token, Value};
use ui_host::{
    ChangeFeed, ChangeIndex, ChangeScope, ChatInfo, FnSource, HostError, MemoryStore, QueryPayload,
    QueryReading, ReadingState, ServiceLimits, SourceRegistry, TokioClock, UiHost, UiQueries,
    UiRefusal,
};

use common::compile_final;

const REPLY: &str = "Runs:\n```ui\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n<Summary>{@Count($runs)} runs</Summary>\n```\n";

/// How long one source read takes (virtual ms).
const READ_MS: u64 = 50;

/// The change log as a test drives it: one scope, a head the test moves.
struct Index {
    head: AtomicU64,
}

#[async_trait]
impl ChangeIndex for Index {
    fn epoch(&self) -> String {
        "e".to_owned()
    }
    fn head(&self) -> u64 {
        self.head.load(Ordering::SeqCst)
    }
    fn scope(&self, _: &str, _: &str, _: &[String]) -> Option<ChangeScope> {
        // One scope for everything: `relevant` answers the head whatever it is asked.
        Some(ChangeScope {
            scope: Token([0; 16]),
            keys: Vec::new(),
        })
    }
    fn relevant(&self, _: &ChangeScope) -> u64 {
        self.head()
    }
    async fn catch_up_to(&self, seq: u64, _: u64) -> bool {
        self.head() >= seq
    }
}

/// Every reading of `ci.runs` belongs to project `web`.
struct Feed;

impl ChangeFeed for Feed {
    fn audience(&self, _: &Record, _: &Value) -> Option<String> {
        Some("project:web".to_owned())
    }
}

/// Counts of what the source did.
#[derive(Default)]
struct Counts {
    reads: AtomicUsize,
    authorized: AtomicUsize,
}

/// Captures the access class a chat was created with (its info's `class`).
struct Host(SourceRegistry);

#[async_trait]
impl UiHost for Host {
    async fn capture(&self, info: &ChatInfo) -> Result<Value, HostError> {
        let class = info
            .data
            .as_record()
            .and_then(|r| r.get("class"))
            .and_then(|c| c.as_str())
            .unwrap_or_default()
            .to_owned();
        Ok(Value::from(&json!({"projects": ["web"], "class": class})))
    }
    fn sources(&self) -> &SourceRegistry {
        &self.0
    }
}

/// A service with `pages` chats (`p0`, `p1`, …) in `classes` access classes, each showing
/// the same reply; chat `hang` (if `hang`) and `fail` (if `fail`) have an `authorize` that
/// never answers or refuses.
struct World {
    service: Arc<UiQueries>,
    index: Arc<Index>,
    counts: Arc<Counts>,
    payloads: Vec<QueryPayload>,
}

fn world(pages: usize, classes: usize) -> World {
    let counts = Arc::new(Counts::default());
    let (reads, authorized) = (counts.clone(), counts.clone());
    let source = FnSource::from_json_schemas(
        &json!({"type": "object", "properties": {"branch": {"type": "string"}},
                "required": ["branch"], "additionalProperties": false}),
        &json!({}),
        move |request| {
            let counts = reads.clone();
            async move {
                let n = counts.reads.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(Duration::from_millis(READ_MS)).await;
                let class = request
                    .access
                    .as_record()
                    .and_then(|r| r.get("class"))
                    .and_then(|c| c.as_str())
                    .unwrap_or_default()
                    .to_owned();
                Ok(Value::from(&json!({"read": n, "class": class})))
            }
        },
    )
    .unwrap()
    .with_changes(Feed)
    .with_authorize(move |info, _, _| {
        let counts = authorized.clone();
        async move {
            counts.authorized.fetch_add(1, Ordering::SeqCst);
            match info.chat_id.as_str() {
                "hang" => std::future::pending().await,
                "fail" => Err(UiRefusal::new("outside-project", "not yours").into()),
                _ => Ok(()),
            }
        }
    });
    let mut sources = SourceRegistry::new();
    sources.register("ci.runs", source);
    let host = Arc::new(Host(sources));
    let store = Arc::new(MemoryStore::new());
    // Every page's reading stays cached (the cache holds 128 by default).
    let mut limits = ServiceLimits::default();
    limits.host = HostLimits::DEFAULT
        .with("cacheEntries", 4 * pages as u64)
        .and_then(|l| l.with("attemptEntries", 4 * pages as u64))
        .unwrap();
    let service = UiQueries::configured(
        host,
        store.clone(),
        Arc::new(TokioClock::starting_at(1_000_000)),
        limits,
    );
    let index = Arc::new(Index {
        head: AtomicU64::new(1),
    });
    service.attach_changes(index.clone());
    let mut payloads = Vec::with_capacity(pages + 2);
    let chats = (0..pages)
        .map(|i| (format!("p{i}"), i % classes))
        .chain([("hang".to_owned(), 0), ("fail".to_owned(), 1)]);
    let blocks = compile_final("i1", REPLY, service.host().sources());
    for (chat, class) in chats {
        store.put_chat(ChatInfo {
            chat_id: chat.clone(),
            data: Value::from(&json!({"class": format!("c{class}")})),
        });
        common::put_blocks(&store, &chat, "i1", REPLY, blocks.clone());
        payloads.push(common::payload_for(&chat, "i1", &blocks[0], "$runs"));
    }
    World {
        service,
        index,
        counts,
        payloads,
    }
}

/// Sends every payload of `pages` at once (with `seen`, if given); each answer with the
/// virtual ms it took.
async fn ask(
    service: &Arc<UiQueries>,
    pages: &[QueryPayload],
    seen: Option<&str>,
) -> Vec<(QueryReading, u64)> {
    let tasks: Vec<_> = pages
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.seen = seen.map(str::to_owned);
            let service = service.clone();
            tokio::spawn(async move {
                let started = tokio::time::Instant::now();
                let reading = service.query(&p).await;
                (reading, started.elapsed().as_millis() as u64)
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn class_of(r: &QueryReading) -> Option<&str> {
    r.value.as_ref()?.as_record()?.get("class")?.as_str()
}

fn read_of(r: &QueryReading) -> Option<f64> {
    match r.value.as_ref()?.as_record()?.get("read")? {
        Value::Number(n) => Some(n.get()),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn one_change_costs_one_source_read_per_access_class() {
    const PAGES: usize = 10_000;
    const CLASSES: usize = 10;
    let w = world(PAGES, CLASSES);
    let pages = &w.payloads[..PAGES];
    // First readings: identical reads in flight are shared, one per class.
    let first = ask(&w.service, pages, None).await;
    assert!(first.iter().all(|(r, _)| r.state == ReadingState::Fresh));
    assert_eq!(w.counts.reads.load(Ordering::SeqCst), CLASSES);
    assert_eq!(w.counts.authorized.load(Ordering::SeqCst), PAGES);

    // A change, more than the change gap later. Half the pages ask at once, the other half
    // once the shared reads have answered.
    tokio::time::advance(Duration::from_millis(2_000)).await;
    w.index.head.store(2, Ordering::SeqCst);
    let (early, late) = pages.split_at(PAGES / 2);
    let early_answers = ask(&w.service, early, Some("e.2")).await;
    tokio::time::advance(Duration::from_millis(500)).await;
    let late_answers = ask(&w.service, late, Some("e.2")).await;
    assert_eq!(
        w.counts.reads.load(Ordering::SeqCst),
        2 * CLASSES,
        "one source read per access class for the change"
    );
    assert_eq!(
        w.counts.authorized.load(Ordering::SeqCst),
        2 * PAGES,
        "every page was authorized for itself"
    );
    let mut ids = HashSet::new();
    for (i, (r, _)) in early_answers.iter().chain(&late_answers).enumerate() {
        assert_eq!(r.state, ReadingState::Fresh, "page {i}: {r:?}");
        assert!(r.stale_by.is_none(), "page {i}: {r:?}");
        assert_eq!(r.sync.as_ref().map(|s| s.version), Some(2), "page {i}");
        // Read after the change, with the page's own class's access.
        assert!(
            read_of(r).is_some_and(|n| n > CLASSES as f64),
            "page {i}: {r:?}"
        );
        assert_eq!(
            class_of(r),
            Some(format!("c{}", i % CLASSES).as_str()),
            "page {i}"
        );
        assert!(
            ids.insert(r.read_id.clone().unwrap()),
            "page {i}: a read id of its own"
        );
    }
    let old: HashSet<_> = first
        .iter()
        .filter_map(|(r, _)| r.read_id.clone())
        .collect();
    assert!(ids.is_disjoint(&old));
}

#[tokio::test(start_paused = true)]
async fn a_read_in_flight_from_before_the_change_is_not_joined() {
    let w = world(2, 1);
    let first = ask(&w.service, &w.payloads[..1], None).await;
    assert_eq!(first[0].0.state, ReadingState::Fresh);
    tokio::time::advance(Duration::from_millis(2_000)).await;
    w.index.head.store(2, Ordering::SeqCst);
    // Page 0 starts a read at head 2; a change lands while it runs; page 1 (same class)
    // asks for the newer change: it must not take the read that started before it.
    let service = w.service.clone();
    let mut p0 = w.payloads[0].clone();
    p0.seen = Some("e.2".into());
    let early = tokio::spawn(async move { service.query(&p0).await });
    tokio::time::advance(Duration::from_millis(10)).await;
    w.index.head.store(3, Ordering::SeqCst);
    let late = ask(&w.service, &w.payloads[1..2], Some("e.3")).await;
    let early = early.await.unwrap();
    assert_eq!(early.sync.as_ref().map(|s| s.version), Some(2));
    assert_eq!(late[0].0.sync.as_ref().map(|s| s.version), Some(3));
    assert_eq!(w.counts.reads.load(Ordering::SeqCst), 3);
}

/// The virtual ms each of `answers` took, sorted.
fn latencies(answers: &[(QueryReading, u64)]) -> Vec<u64> {
    let mut l: Vec<u64> = answers.iter().map(|(_, ms)| *ms).collect();
    l.sort_unstable();
    l
}

#[tokio::test(start_paused = true)]
async fn a_hanging_or_failing_authorize_delays_no_other_reader() {
    const PAGES: usize = 1_000;
    const CLASSES: usize = 10;
    let w = world(PAGES, CLASSES);
    ask(&w.service, &w.payloads[..PAGES], None).await;
    let reads_before = w.counts.reads.load(Ordering::SeqCst);

    // Without the bad readers: one change, every page asks.
    tokio::time::advance(Duration::from_millis(2_000)).await;
    w.index.head.store(2, Ordering::SeqCst);
    let clean = ask(&w.service, &w.payloads[..PAGES], Some("e.2")).await;
    assert!(clean.iter().all(|(r, _)| r.state == ReadingState::Fresh));

    // With them: the hanging reader (class 0) and the failing one (class 1) ask first.
    tokio::time::advance(Duration::from_millis(2_000)).await;
    w.index.head.store(3, Ordering::SeqCst);
    let bad = w.payloads[PAGES..].to_vec();
    let service = w.service.clone();
    let bad_task = tokio::spawn(async move { ask(&service, &bad, Some("e.3")).await });
    tokio::task::yield_now().await;
    let with_bad = ask(&w.service, &w.payloads[..PAGES], Some("e.3")).await;
    assert!(with_bad.iter().all(|(r, _)| r.state == ReadingState::Fresh));
    assert_eq!(
        latencies(&with_bad),
        latencies(&clean),
        "the others answer exactly as fast as without the bad readers"
    );
    assert_eq!(
        w.counts.reads.load(Ordering::SeqCst) - reads_before,
        2 * CLASSES
    );
    // The hanging one ends at the read timeout, failed; the failing one is refused.
    let bad = bad_task.await.unwrap();
    let (hung, hung_ms) = &bad[0];
    assert_eq!(hung.state, ReadingState::Failed, "{hung:?}");
    assert_eq!(hung.code.as_deref(), Some("timed-out"));
    assert_eq!(*hung_ms, HostLimits::DEFAULT.read_timeout());
    assert_eq!(bad[1].0.state, ReadingState::Refused);
    assert_eq!(bad[1].0.code.as_deref(), Some("outside-project"));
}
