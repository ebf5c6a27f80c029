//! A source written in Rust with serde + garde ([`TypedSource`]): arguments that break its
//! garde rules are `invalid_query` when the reply is compiled and a refused reading (the
//! rule's message as the reason, no code, `host.md` §6.1 step 6) when a person's input
//! breaks them, without the source being asked; the parsed arguments (serde defaults
//! filled in) are what `authorize` and `read` receive; a result that breaks the output
//! rules fails the reading.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use ui_compiler::{Block, CompileOptions, QuerySchemas, UiCompiler};
use ui_core::{Code, FrozenClock, Record, Value};
use ui_host::{
    ChatInfo, HostError, MemoryStore, QueryPayload, ReadingState, SourceRegistry, StoredItem,
    TokioClock, TypedAdapter, TypedSource, UiHost, UiQueries, block_revision,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, garde::Validate)]
#[serde(deny_unknown_fields)]
struct OrdersArgs {
    /// `open`, `shipped` or `returned`.
    #[garde(custom(known_status))]
    status: String,
    /// 1 to 20; 5 when absent.
    #[garde(range(min = 1, max = 20))]
    #[serde(default = "five")]
    limit: u32,
}

fn five() -> u32 {
    5
}

fn known_status(value: &str, _: &()) -> garde::Result {
    match value {
        "open" | "shipped" | "returned" => Ok(()),
        _ => Err(garde::Error::new("not an order status")),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
struct Order {
    #[garde(length(min = 1))]
    id: String,
    #[garde(range(max = 1_000_000))]
    total_cents: u64,
}

#[derive(Default)]
struct Orders {
    authorized: Mutex<Vec<OrdersArgs>>,
    reads: AtomicUsize,
    broken_result: AtomicBool,
}

/// The source: reads the orders the test controls.
struct OrdersSource(Arc<Orders>);

#[async_trait]
impl TypedSource for OrdersSource {
    type Args = OrdersArgs;
    type Output = Vec<Order>;

    async fn authorize(&self, _: &ChatInfo, _: &Value, args: &OrdersArgs) -> Result<(), HostError> {
        self.0.authorized.lock().unwrap().push(args.clone());
        Ok(())
    }

    async fn read(
        &self,
        _: &ChatInfo,
        _: &Value,
        args: OrdersArgs,
        _: CancellationToken,
    ) -> Result<Vec<Order>, HostError> {
        self.0.reads.fetch_add(1, Ordering::SeqCst);
        let id = if self.0.broken_result.load(Ordering::SeqCst) {
            String::new()
        } else {
            format!("{}-1", args.status)
        };
        Ok((0..args.limit.min(2))
            .map(|i| Order {
                id: id.clone(),
                total_cents: 1_000 * u64::from(i + 1),
            })
            .collect())
    }
}

struct Host(SourceRegistry);

#[async_trait]
impl UiHost for Host {
    async fn capture(&self, info: &ChatInfo) -> Result<Value, HostError> {
        Ok(Value::from(info.chat_id.as_str()))
    }
    fn sources(&self) -> &SourceRegistry {
        &self.0
    }
}

fn host() -> (Arc<Host>, Arc<Orders>) {
    let orders = Arc::new(Orders::default());
    let mut sources = SourceRegistry::new();
    sources.register(
        "shop.orders",
        TypedAdapter::new(OrdersSource(Arc::clone(&orders))),
    );
    (Arc::new(Host(sources)), orders)
}

fn compile(host: &Host, reply: &str) -> Block {
    let clock = FrozenClock(0.0);
    let options = CompileOptions {
        id: "item-1".into(),
        is_final: true,
        query_schemas: Some(&host.0),
        clock: Some(&clock),
        ..CompileOptions::default()
    };
    let mut block = (*UiCompiler::new().compile(reply, &options)[0]).clone();
    block.revision = Some(block_revision(&block));
    block
}

fn fence(body: &str) -> String {
    format!("Orders:\n```ui\n{body}\n```\n")
}

#[test]
fn arguments_that_break_the_garde_rules_are_invalid_query_at_compile_time() {
    let (host, _) = host();
    for (args, rule) in [
        (r#"{status: "lost"}"#, "not an order status"),
        (r#"{status: "open", limit: 50}"#, "limit"),
        (r#"{status: "open", colour: "red"}"#, "colour"),
    ] {
        let block = compile(
            &host,
            &fence(&format!(
                "$orders = @Query(\"shop.orders\", {args})\n<Summary>{{@Count($orders)}} orders</Summary>"
            )),
        );
        let refused: Vec<_> = block
            .diagnostics
            .iter()
            .filter(|d| d.code == Code::InvalidQuery)
            .collect();
        assert_eq!(refused.len(), 1, "{args}: {:?}", block.diagnostics);
        assert!(
            refused[0].message.contains(rule),
            "{args}: {}",
            refused[0].message
        );
        assert!(
            !refused[0].message.contains('\n'),
            "one line: {:?}",
            refused[0].message
        );
        // The registry is the compiler's schema: the same rules, the same verdict.
        let value = Value::from_json_str(
            &args
                .replace("status", "\"status\"")
                .replace("limit", "\"limit\"")
                .replace("colour", "\"colour\""),
        )
        .unwrap();
        assert!(matches!(host.0.check("shop.orders", &value), Some(Err(_))));
    }
    let block = compile(
        &host,
        &fence(
            "$orders = @Query(\"shop.orders\", {status: \"open\"})\n<Summary>{@Count($orders)} orders</Summary>",
        ),
    );
    assert!(
        block
            .diagnostics
            .iter()
            .all(|d| d.code != Code::InvalidQuery),
        "{:?}",
        block.diagnostics
    );
}

/// A stored final reply whose `$limit` a person sets with a Slider up to 100, while the
/// source accepts at most 20.
async fn service(host: Arc<Host>) -> (Arc<UiQueries>, Block) {
    let reply = fence(
        "$limit = 5\n$orders = @Query(\"shop.orders\", {status: \"open\", limit: $limit})\n\
         <Summary>{@Count($orders)} orders</Summary>\n\
         <Slider value={$limit} min={1} max={100}/>",
    );
    let block = compile(&host, &reply);
    assert!(block.diagnostics.is_empty(), "{:?}", block.diagnostics);
    let store = Arc::new(MemoryStore::new());
    store.put_chat(ChatInfo {
        chat_id: "chat-1".into(),
        data: Value::Null,
    });
    store.put_item(
        "chat-1",
        StoredItem {
            id: "item-1".into(),
            assistant: true,
            text: reply,
            blocks: vec![Arc::new(block.clone())],
            ..StoredItem::default()
        },
    );
    (
        UiQueries::new(host, store, Arc::new(TokioClock::new())),
        block,
    )
}

fn payload(block: &Block, limit: u32) -> QueryPayload {
    let mut values = Record::default();
    values.insert("$limit".into(), Value::from(limit));
    QueryPayload {
        chat_id: "chat-1".into(),
        item_id: "item-1".into(),
        block_id: block.id.clone(),
        revision: block.revision.clone().unwrap(),
        query: "$orders".into(),
        values,
        seen: None,
    }
}

#[tokio::test(start_paused = true)]
async fn input_that_breaks_the_garde_rules_is_refused_before_the_source_runs() {
    let (host, orders) = host();
    let (service, block) = service(host).await;

    let reading = service.query(&payload(&block, 50)).await;
    assert_eq!(reading.state, ReadingState::Refused, "{reading:?}");
    assert_eq!(reading.code, None, "a schema failure carries no code");
    let reason = reading.reason.unwrap();
    assert!(reason.contains("limit"), "{reason}");
    assert_eq!(orders.reads.load(Ordering::SeqCst), 0);
    assert!(orders.authorized.lock().unwrap().is_empty());

    let reading = service.query(&payload(&block, 2)).await;
    assert_eq!(reading.state, ReadingState::Fresh, "{reading:?}");
    assert_eq!(
        reading.value.unwrap().to_js_json(),
        r#"[{"id":"open-1","total_cents":1000},{"id":"open-1","total_cents":2000}]"#
    );
    assert_eq!(
        *orders.authorized.lock().unwrap(),
        [OrdersArgs {
            status: "open".into(),
            limit: 2
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn a_result_that_breaks_the_output_rules_fails_the_reading() {
    let (host, orders) = host();
    orders.broken_result.store(true, Ordering::SeqCst);
    let (service, block) = service(host).await;
    let reading = service.query(&payload(&block, 1)).await;
    assert_eq!(reading.state, ReadingState::Failed, "{reading:?}");
    assert!(reading.reason.unwrap().contains("id"));
    assert_eq!(orders.reads.load(Ordering::SeqCst), 1);
}
