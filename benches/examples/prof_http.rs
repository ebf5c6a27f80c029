//! The server's router answering one route in a loop, without sockets, for profilers: what
//! a request costs in our code (routing, the layers, the extractors, the handler, the
//! answer), apart from hyper and the kernel. `valgrind --tool=callgrind` counts it
//! repeatably on a busy machine.
//!
//! ```text
//! cargo build --release -p benches --example prof_http
//! valgrind --tool=callgrind --toggle-collect='prof_http::measured_*' \
//!     --callgrind-out-file=q5 target/release/examples/prof_http query 5000
//! callgrind_annotate --inclusive=yes q5     # the total divided by 5,000 is one request
//! ```
//!
//! Routes: `query` (a cached `POST /ui/query`, as `http_load/query_floor_ratio` sends it),
//! `floor` (`GET /api/me`, that bench's floor) and `service` (the same cached answer from
//! `UiQueries::query_answer` alone, without the router, the session or the body); the
//! second argument is the number of requests. The setup (the demo server's state in a
//! temporary directory, a session, a chat with a finished reply whose `$runs` reading is
//! cached) runs first and is the same for all three; `--toggle-collect` leaves it out of the
//! count. (The difference of two runs of different lengths leaves it out too, but not its
//! variance: the metrics' clock calibrates itself once per process for a varying number of
//! clock reads, up to ±800 instructions per request in a difference over 4,000 requests.)
//! Keep a run under the 10 s cache window, or it reads the source again. Prints the mean
//! time of one request.

use benches as _;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use http_body_util::BodyExt as _;
use hyper::StatusCode;
use serde_json::{Value as Json, json};
use tower::ServiceExt as _;
use ui_server::{AppState, ServerConfig, SourcesConfig, router};

type Request = hyper::Request<axum::body::Body>;

/// The reply of `http_load`: one live block whose `$runs` reads `ci.runs`.
const REPLY: &str = "```ui\n$branch = \"main\"\n\
$runs = @Query(\"ci.runs\", {branch: $branch, limit: 5})\n\
<Summary>{@Count($runs)} runs on {$branch}</Summary>\n\
<Segmented value={$branch}><Option value=\"main\">main</Option><Option value=\"dev\">dev</Option></Segmented>\n\
<Table rows={$runs}><Column key=\"name\" title=\"Run\"/><Column key=\"status\" title=\"Status\" as=\"tag\"/></Table>\n```\n";

fn request(method: &str, path: &str, cookie: Option<&str>, body: Option<&[u8]>) -> Request {
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1:8080");
    if let Some(cookie) = cookie {
        req = req.header("cookie", cookie);
    }
    let body = match body {
        Some(bytes) => {
            req = req.header("content-type", "application/json");
            axum::body::Body::from(bytes.to_vec())
        }
        None => axum::body::Body::empty(),
    };
    req.body(body).expect("a valid request")
}

/// Answers `req` through a clone of `app`: the status, the `set-cookie` header, the body.
async fn send(app: &axum::Router, req: Request) -> (StatusCode, Option<String>, Vec<u8>) {
    let response = app.clone().oneshot(req).await.expect("infallible");
    let status = response.status();
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned);
    let body = response.into_body().collect().await.expect("the body");
    (status, cookie, body.to_bytes().to_vec())
}

async fn call(app: &axum::Router, path: &str, cookie: Option<&str>, body: &Json) -> Json {
    let (status, _, bytes) = send(
        app,
        request("POST", path, cookie, Some(body.to_string().as_bytes())),
    )
    .await;
    assert!(
        status.is_success(),
        "POST {path}: {status} {}",
        String::from_utf8_lossy(&bytes)
    );
    serde_json::from_slice(&bytes).unwrap_or(Json::Null)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let route = args.next().unwrap_or_else(|| "query".to_owned());
    let runs: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let dir = benches::fresh_temp_dir("prof-http");
    let mut config = ServerConfig::new(dir.join("app.db"));
    config.demo = true;
    config.sources = SourcesConfig::Inline(ui_server::DEMO_SOURCES.to_owned());
    // Under valgrind everything runs tens of times slower: a wall-time budget of 30 ms could
    // end the block's compile early and leave `$runs` undeclared.
    let budget = ui_core::Value::from_json_str(r#"{"milliseconds": 10000}"#).expect("json");
    config.ui_limits = config
        .ui_limits
        .with_overrides(&budget)
        .expect("a valid override");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let setup = runtime.block_on(setup(config));
    let cookie = Some(setup.cookie.as_str());
    let elapsed = match route.as_str() {
        "service" => {
            let p: ui_host::QueryPayload = serde_json::from_str(&setup.payload).expect("a payload");
            measured_service(&runtime, &setup.state, &p, runs)
        }
        "query" => measured_route(&runtime, &setup.app, runs, || {
            request("POST", "/ui/query", cookie, Some(setup.payload.as_bytes()))
        }),
        "floor" => measured_route(&runtime, &setup.app, runs, || {
            request("GET", "/api/me", cookie, None)
        }),
        other => panic!("unknown route {other}: query, floor or service"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{:?} per request", elapsed / runs.max(1));
}

/// What the timed loops use.
struct Setup {
    state: AppState,
    app: axum::Router,
    cookie: String,
    /// The `ui.query` body of `$runs`, whose reading is cached.
    payload: String,
}

/// The server's state and router, a session, and a chat with a finished reply whose `$runs`
/// reading is cached.
async fn setup(config: ServerConfig) -> Setup {
    let state = AppState::open(config).await.expect("the server's state");
    let app = router(state.clone());
    let login = request("POST", "/api/login", None, Some(br#"{"user":"alice"}"#));
    let (status, cookie, _) = send(&app, login).await;
    assert_eq!(status, StatusCode::OK);
    let cookie = cookie.expect("a session cookie");
    let session = Some(cookie.as_str());
    let chat = call(&app, "/api/chats", session, &json!({"title": "prof"})).await;
    let chat = chat["id"].as_str().expect("a chat id").to_owned();
    let items = format!("/api/chats/{chat}/items");
    let item = call(&app, &items, session, &json!({})).await;
    let item = item["id"].as_str().expect("an item id").to_owned();
    let delta = format!("{items}/{item}/delta");
    call(&app, &delta, session, &json!({"text": REPLY})).await;
    let done = call(&app, &format!("{items}/{item}/finish"), session, &json!({})).await;
    let block = &done["ui"][0];
    let payload = json!({
        "chatId": chat, "itemId": item, "blockId": block["id"], "revision": block["revision"],
        "query": "$runs", "values": {},
    });
    let first = call(&app, "/ui/query", session, &payload).await;
    assert_eq!(first["state"], "fresh", "{first}");
    Setup {
        state,
        app,
        cookie,
        payload: payload.to_string(),
    }
}

/// `runs` answers of the service alone. Not inlined, so that a profile can count only the
/// timed loops: `--toggle-collect='prof_http::measured_*'`.
#[inline(never)]
fn measured_service(
    runtime: &Runtime,
    state: &AppState,
    p: &ui_host::QueryPayload,
    runs: u32,
) -> Duration {
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..runs {
            let json = state.queries().query_answer(p).await.into_json();
            std::hint::black_box(json.expect("json"));
        }
        started.elapsed()
    })
}

/// `runs` requests made by `make`, through the router (see [`measured_service`]).
#[inline(never)]
fn measured_route(
    runtime: &Runtime,
    app: &axum::Router,
    runs: u32,
    make: impl Fn() -> Request,
) -> Duration {
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..runs {
            let (status, _, body) = send(app, make()).await;
            assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        }
        started.elapsed()
    })
}
