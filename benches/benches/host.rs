//! Host bench (`host.md` §6): one `ui.query` answered from the cache for a corpus-like
//! block (two queries, a Segmented input), one evaluation of that block for comparison, and
//! one fresh read against a source that answers at once.
//!
//! | bench (`group/name`) | what one iteration does | target |
//! | --- | --- | --- |
//! | `host_query/cached` | `ui.query` answered from the cache (admission, `authorize`, cache hit) | ≥ 100,000/s on one core; ≤ 2 × `evaluate_block` |
//! | `host_query/evaluate_block` | `evaluate_block` of the same block with its default state | — |
//! | `host_query/fresh` | `ui.query` that reads the source (spawned driver and source tasks) | — |
//!
//! Everything runs on a current-thread tokio runtime (one core). The timed loop runs inside
//! one `Runtime::block_on` ([`Bencher::iter_custom`]) so that entering the runtime is not
//! part of an answer's cost. The service, its store, the capture and the first read happen
//! before anything is timed.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use benches::CLOCK;
use criterion::{Bencher, Criterion, Throughput, criterion_main};
use serde_json::json;
use tokio::runtime::Runtime;
use ui_compiler::{Block, CompileOptions, UiCompiler, UiState, evaluate_block};
use ui_core::{Record, UiLimits, Value};
use ui_host::{
    ChatInfo, FnSource, HostClock, HostError, MemoryStore, QueryPayload, ReadingState, Sleep,
    SourceRegistry, StoredItem, UiHost, UiQueries, block_revision,
};

/// A reply like the corpus's CI block (`ok-02-ci-live-runs`), with a second query.
const REPLY: &str = "Here are the latest runs.\n\n```ui\n$branch = \"main\"\n$limit = 5\n\
$runs = @Query(\"ci.runs\", {branch: $branch, limit: $limit})\n\
$failures = @Query(\"ci.failures\", {branch: $branch})\n\
<Summary>Latest CI runs on {$branch}</Summary>\n\
<Segmented value={$branch}>\n<Option value=\"main\">main</Option>\n\
<Option value=\"release/3.2\">release/3.2</Option>\n<Option value=\"next\">next</Option>\n</Segmented>\n\
<Stats><Stat label=\"Runs\" value={@Count($runs)}/><Stat label=\"Failures\" value={@Count($failures)}/></Stats>\n\
<Table rows={$runs}>\n<Column key=\"name\" title=\"Run\"/>\n<Column key=\"status\" title=\"Status\" as=\"tag\"/>\n\
<Column key=\"ms\" title=\"Duration\" as=\"duration\"/>\n<Column key=\"started\" title=\"Started\" as=\"date\"/>\n</Table>\n\
<Choices>\n<Choice context={\"Investigate the newest failing run on \" + $branch}>Investigate the newest failure</Choice>\n</Choices>\n\
```\n";

/// The host's clock for the bench: `now_ms` is a number the bench sets, timers are tokio's.
///
/// The cached bench never moves it, so every answer comes from the cache. The fresh bench
/// moves it 10,000 ms before every request: the previous reading is then past its cache
/// window and the previous attempt past both the 10 s and the 250 ms windows, so every
/// request reads the source again with the same arguments — what a page's 10 s refresh
/// cycle does — without a paused runtime, a fresh service per iteration or arguments
/// that differ per iteration. The cache fills to its 128 entries and then evicts one per
/// read, as in a long-running host.
#[derive(Debug, Default)]
struct BenchClock(AtomicU64);

impl HostClock for BenchClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn sleep(&self, ms: u64) -> Sleep {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

struct Host(SourceRegistry);

#[async_trait]
impl UiHost for Host {
    async fn capture(&self, info: &ChatInfo) -> Result<Value, HostError> {
        Ok(Value::from(
            &json!({"chat": info.chat_id, "projects": ["web"]}),
        ))
    }

    fn sources(&self) -> &SourceRegistry {
        &self.0
    }
}

/// `ci.runs` and `ci.failures`, described by JSON Schemas, answering at once.
fn sources() -> SourceRegistry {
    let runs = Value::from(&json!([
        {"name": "main #902", "status": "failed", "ms": 612_000, "started": "2025-11-28T09:14:00Z"},
        {"name": "main #901", "status": "passed", "ms": 588_000, "started": "2025-11-27T21:02:00Z"},
        {"name": "main #900", "status": "passed", "ms": 590_500, "started": "2025-11-27T15:40:00Z"},
        {"name": "main #899", "status": "passed", "ms": 601_000, "started": "2025-11-27T09:11:00Z"},
        {"name": "main #898", "status": "failed", "ms": 640_250, "started": "2025-11-26T18:30:00Z"},
    ]));
    let failures = Value::from(&json!([{"name": "main #902", "test": "checkout flow"}]));
    let row = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "status": {"type": "string", "enum": ["passed", "failed"]},
        "ms": {"type": "number", "minimum": 0}, "started": {"type": "string"}},
        "required": ["name", "status"]});
    let mut sources = SourceRegistry::new();
    sources.register(
        "ci.runs",
        FnSource::from_json_schemas(
            &json!({"type": "object", "properties": {
                "branch": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
                "required": ["branch"], "additionalProperties": false}),
            &json!({"type": "array", "items": row}),
            move |_| {
                let runs = runs.clone();
                async move { Ok(runs) }
            },
        )
        .expect("the schemas are in the subset"),
    );
    sources.register(
        "ci.failures",
        FnSource::from_json_schemas(
            &json!({"type": "object", "properties": {"branch": {"type": "string"}},
                "required": ["branch"], "additionalProperties": false}),
            &json!({"type": "array"}),
            move |_| {
                let failures = failures.clone();
                async move { Ok(failures) }
            },
        )
        .expect("the schemas are in the subset"),
    );
    sources
}

/// A service with the reply stored as the final item `i1` of chat `c1` (captured, first
/// readings frozen), and the payload of `$runs` with the Segmented set to `release/3.2`.
struct Setup {
    runtime: Runtime,
    clock: Arc<BenchClock>,
    service: Arc<UiQueries>,
    block: Arc<Block>,
    payload: QueryPayload,
}

fn setup() -> Setup {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    let host = Arc::new(Host(sources()));
    let options = CompileOptions {
        id: "i1".to_owned(),
        is_final: true,
        query_schemas: Some(&host.0),
        clock: Some(&CLOCK),
        ..CompileOptions::default()
    };
    let blocks = UiCompiler::new().compile(REPLY, &options);
    assert_eq!(blocks.len(), 1);
    let mut block = (*blocks[0]).clone();
    assert!(block.diagnostics.is_empty(), "{:?}", block.diagnostics);
    assert_eq!(block.queries.len(), 2);
    block.revision = Some(block_revision(&block));
    let block = Arc::new(block);
    let store = Arc::new(MemoryStore::new());
    store.put_chat(ChatInfo {
        chat_id: "c1".to_owned(),
        data: Value::Null,
    });
    store.put_item(
        "c1",
        StoredItem {
            id: "i1".to_owned(),
            assistant: true,
            text: REPLY.to_owned(),
            blocks: vec![Arc::clone(&block)],
            ..StoredItem::default()
        },
    );
    let clock = Arc::new(BenchClock(AtomicU64::new(1_700_000_000_000)));
    let service = UiQueries::new(host, store.clone(), clock.clone());
    // The reply is final: capture and freeze its first readings, as a chat session does, so
    // that the stored item carries its frozen state like every item a page reads.
    runtime.block_on(async {
        service.observe("c1", "i1", true).await;
        while service.stats().freezes > 0 || service.stats().captures > 0 {
            tokio::task::yield_now().await;
        }
    });
    let frozen = store.item_now("c1", "i1").ui_queries.expect("captured");
    assert_eq!(frozen.blocks[&block.id].readings.len(), 2);
    // Past the 250 ms gap after the freeze's reads.
    clock.0.fetch_add(10_000, Ordering::Relaxed);
    let mut values = Record::default();
    values.insert("$branch".to_owned(), Value::from("release/3.2"));
    let payload = QueryPayload {
        chat_id: "c1".to_owned(),
        item_id: "i1".to_owned(),
        block_id: block.id.clone(),
        revision: block.revision.clone().expect("set above"),
        query: "$runs".to_owned(),
        values,
        seen: None,
    };
    Setup {
        runtime,
        clock,
        service,
        block,
        payload,
    }
}

/// Times `iters` awaits of `step` inside one `block_on`.
fn timed<F, Fut>(b: &mut Bencher<'_>, runtime: &Runtime, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    b.iter_custom(|iters| {
        runtime.block_on(async {
            let start = Instant::now();
            for _ in 0..iters {
                step().await;
            }
            start.elapsed()
        })
    });
}

fn query(c: &mut Criterion) {
    let s = setup();
    // The first answer for these inputs reads the source; check it once.
    let first = s.runtime.block_on(s.service.query(&s.payload));
    assert_eq!(first.state, ReadingState::Fresh, "{first:?}");
    assert_eq!(
        first
            .value
            .as_ref()
            .and_then(Value::as_array)
            .map(|a| a.len()),
        Some(5)
    );
    let cached = s.runtime.block_on(s.service.query(&s.payload));
    assert_eq!(cached.read_id, first.read_id);

    let mut group = c.benchmark_group("host_query");
    group.throughput(Throughput::Elements(1));
    group.bench_function("cached", |b| {
        timed(b, &s.runtime, || async {
            let reading = s.service.query(black_box(&s.payload)).await;
            debug_assert_eq!(reading.read_id, first.read_id);
            black_box(reading);
        })
    });

    // The evaluation the cached answer is compared with: the block with its defaults
    // (what an answer validates the input against), the state made at setup.
    let state = UiState::new(&s.block, UiLimits::DEFAULT).expect("the state fits");
    group.bench_function("evaluate_block", |b| {
        b.iter(|| evaluate_block(black_box(&s.block), &state, UiLimits::DEFAULT, Some(&CLOCK)))
    });

    let (reads, fresh_reads) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    group.bench_function("fresh", |b| {
        timed(b, &s.runtime, || {
            s.clock.0.fetch_add(10_000, Ordering::Relaxed);
            async {
                let reading = s.service.query(black_box(&s.payload)).await;
                reads.set(reads.get() + 1);
                fresh_reads.set(fresh_reads.get() + u64::from(reading.is_fresh()));
                black_box(reading);
            }
        })
    });
    group.finish();
    // Every request of the fresh bench read the source.
    assert_eq!(fresh_reads.get(), reads.get());
    let stats = s.service.stats();
    assert_eq!((stats.slots, stats.in_flight), (0, 0), "{stats:?}");
}

/// The benches of this file with criterion configured from the command line (what
/// `criterion_group!` writes, by hand so that the function is documented).
fn host_benches() {
    let mut criterion = Criterion::default().configure_from_args();
    query(&mut criterion);
}

criterion_main!(host_benches);
