//! Test harness: a temporary database, the demo sources, an in-process app and a tiny
//! HTTP/1.1 client over hyper for the loopback tests.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value as Json, json};
use tower::ServiceExt;
use ui_core::SyncLimits;
use ui_server::{AppState, ServerConfig, SourcesConfig, router, serve_on};

/// The demo's sources: CI runs per project and branch, with a write path.
pub const SOURCES: &str = ui_server::DEMO_SOURCES;

/// A reply with one block: a query on `$branch`, a Segmented to change it, a link and two
/// choices.
pub const REPLY: &str = "Runs:\n```ui\n$branch = \"main\"\n\
$runs = @Query(\"ci.runs\", {branch: $branch, limit: 5})\n\
<Summary>{@Count($runs)} runs</Summary>\n\
<Segmented value={$branch}><Option value=\"main\">main</Option><Option value=\"dev\">dev</Option></Segmented>\n\
<File path=\"src/app.rs\" line={3}>app</File>\n\
<Commit sha=\"0123abcd\"/>\n\
<File path=\"../secret.pem\">key</File>\n\
<Choices><Choice context=\"Rerun the failed jobs\">Rerun</Choice><Choice>Ignore</Choice></Choices>\n```\n";

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "ui-server-{tag}-{}-{}",
            std::process::id(),
            uuid_like()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{t:x}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// A demo configuration in `dir` with short stream ticks and a short shutdown spread.
pub fn config(dir: &TempDir) -> ServerConfig {
    let mut config = ServerConfig::new(dir.0.join("app.db"));
    config.demo = true;
    config.sources = SourcesConfig::Inline(SOURCES.to_owned());
    config.sync_limits = SyncLimits::DEFAULT
        .with("tick", 300)
        .unwrap()
        .with("flushWindow", 20)
        .unwrap()
        .with("appenderWindow", 10)
        .unwrap();
    // Shutdowns spread their streams' `bye` over half a second, not ten.
    config.shutdown_spread = Duration::from_millis(500);
    config
}

/// An answer: status, headers and the body as JSON (or a string when it is not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Json,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

fn body_json(bytes: &[u8]) -> Json {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// The in-process app.
pub struct App {
    pub state: AppState,
    pub router: Router,
    pub dir: TempDir,
}

impl App {
    pub async fn new() -> Self {
        let dir = TempDir::new("app");
        Self::with_config(config(&dir), dir).await
    }

    pub async fn with_config(config: ServerConfig, dir: TempDir) -> Self {
        let state = AppState::open(config).await.unwrap();
        App {
            router: router(state.clone()),
            state,
            dir,
        }
    }

    pub async fn send(&self, req: Request<Body>) -> Answer {
        let response = self.router.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            headers,
            body: body_json(&bytes),
        }
    }

    /// A JSON request with an optional session cookie.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        cookie: Option<&str>,
        body: Option<Json>,
    ) -> Answer {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let body = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        self.send(req.body(body).unwrap()).await
    }

    pub async fn get(&self, path: &str, cookie: &str) -> Answer {
        self.call(Method::GET, path, Some(cookie), None).await
    }

    pub async fn post(&self, path: &str, cookie: &str, body: Json) -> Answer {
        self.call(Method::POST, path, Some(cookie), Some(body))
            .await
    }

    /// A `POST` whose JSON body is sent as written (malformed, oversized, or holding what a
    /// `serde_json::Value` cannot, such as a lone surrogate escape).
    pub async fn post_text(&self, path: &str, cookie: &str, body: impl Into<String>) -> Answer {
        let req = Request::post(path)
            .header("cookie", cookie)
            .header("content-type", "application/json")
            .body(Body::from(body.into()))
            .unwrap();
        self.send(req).await
    }

    /// Signs in a demo user; the cookie to send.
    pub async fn login(&self, user: &str) -> String {
        let a = self
            .call(
                Method::POST,
                "/api/login",
                None,
                Some(json!({"user": user})),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        cookie_of(&a.headers)
    }

    /// A chat of the user with `REPLY` streamed in two deltas and finished. Returns the chat
    /// id and the finished item.
    pub async fn chat_with_reply(&self, cookie: &str, text: &str) -> (String, Json) {
        let chat = self
            .post("/api/chats", cookie, json!({"title": "runs"}))
            .await;
        assert_eq!(chat.status, StatusCode::CREATED, "{chat:?}");
        let chat_id = chat.body["id"].as_str().unwrap().to_owned();
        let item = self
            .post(&format!("/api/chats/{chat_id}/items"), cookie, json!({}))
            .await;
        assert_eq!(item.status, StatusCode::CREATED, "{item:?}");
        let item_id = item.body["id"].as_str().unwrap().to_owned();
        let (a, b) = text.split_at(text.len() / 2);
        for part in [a, b] {
            let d = self
                .post(
                    &format!("/api/chats/{chat_id}/items/{item_id}/delta"),
                    cookie,
                    json!({"text": part}),
                )
                .await;
            assert_eq!(d.status, StatusCode::OK, "{d:?}");
        }
        let done = self
            .post(
                &format!("/api/chats/{chat_id}/items/{item_id}/finish"),
                cookie,
                json!({}),
            )
            .await;
        assert_eq!(done.status, StatusCode::OK, "{done:?}");
        (chat_id, done.body)
    }
}

pub fn cookie_of(headers: &HeaderMap) -> String {
    headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap()
        .to_owned()
}

/// The first block of an item and its revision.
pub fn first_block(item: &Json) -> (String, String) {
    let block = &item["ui"][0];
    (
        block["id"].as_str().unwrap().to_owned(),
        block["revision"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The `ui.query` body that reads `$runs` of the first block of `item` with `values`.
pub fn runs_query(chat: &str, item: &Json, values: Json) -> Json {
    let (block, revision) = first_block(item);
    json!({"chatId": chat, "itemId": item["id"], "blockId": block,
           "revision": revision, "query": "$runs", "values": values})
}

/// Walks a view tree for the first node of `kind` (and `text` among its text children).
pub fn find_node<'a>(nodes: &'a Json, kind: &str, text: Option<&str>) -> Option<&'a Json> {
    for node in nodes.as_array()? {
        if node["type"] == kind
            && text.is_none_or(|t| {
                node["children"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|ch| ch["props"]["text"] == t))
            })
        {
            return Some(node);
        }
        if let Some(found) = find_node(&node["children"], kind, text) {
            return Some(found);
        }
    }
    None
}

// ---- loopback ----

/// A server on a free loopback port, stopped on drop.
pub struct Server {
    pub addr: SocketAddr,
    pub state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    pub dir: TempDir,
}

impl Server {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A server whose demo configuration `change` adjusts first.
    pub async fn start_with(change: impl FnOnce(&mut ServerConfig)) -> Self {
        Self::start_configured(change, None).await
    }

    /// A server whose requests are authenticated by `auth` (instead of the demo's sessions).
    pub async fn start_with_auth(auth: std::sync::Arc<dyn ui_server::Authenticator>) -> Self {
        Self::start_configured(|_| {}, Some(auth)).await
    }

    async fn start_configured(
        change: impl FnOnce(&mut ServerConfig),
        auth: Option<std::sync::Arc<dyn ui_server::Authenticator>>,
    ) -> Self {
        let dir = TempDir::new("loop");
        let mut config = config(&dir);
        change(&mut config);
        let mut builder = AppState::builder(config);
        if let Some(auth) = auth {
            builder = builder.authenticator(auth);
        }
        let state = builder.open().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve_on(listener, state.clone(), async move {
            let _ = stopped.await;
        }));
        Server {
            addr,
            state,
            stop: Some(stop),
            task: Some(tokio::spawn(async move {
                task.await.unwrap().unwrap();
            })),
            dir,
        }
    }

    /// Stops the server and waits until it has stopped.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the server stops")
                .unwrap();
        }
    }

    /// One request on a fresh connection.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        body: Option<Json>,
    ) -> Answer {
        let (status, headers, mut body_stream) = self.open(method, path, cookie, body, &[]).await;
        let mut bytes = Vec::new();
        while let Some(frame) = body_stream.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                bytes.extend_from_slice(&data);
            }
        }
        Answer {
            status,
            headers,
            body: body_json(&bytes),
        }
    }

    pub async fn get(&self, path: &str, cookie: &str) -> Answer {
        self.call("GET", path, Some(cookie), None).await
    }

    pub async fn post(&self, path: &str, cookie: &str, body: Json) -> Answer {
        self.call("POST", path, Some(cookie), Some(body)).await
    }

    pub async fn login(&self, user: &str) -> String {
        let a = self
            .call("POST", "/api/login", None, Some(json!({"user": user})))
            .await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        cookie_of(&a.headers)
    }

    /// Sends a request and returns the response head and the body to read as it comes.
    pub async fn open(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        body: Option<Json>,
        extra: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, hyper::body::Incoming) {
        let stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string());
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let body = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                http_body_util::Full::new(axum::body::Bytes::from(b.to_string()))
            }
            None => http_body_util::Full::new(axum::body::Bytes::new()),
        };
        let response = sender.send_request(req.body(body).unwrap()).await.unwrap();
        let (parts, body) = response.into_parts();
        (parts.status, parts.headers, body)
    }

    /// Opens `/ui/events` for `cookie`.
    pub async fn events(&self, cookie: &str, query: &str) -> Sse<hyper::body::Incoming> {
        let (status, headers, body) = self
            .open(
                "GET",
                &format!("/ui/events{query}"),
                Some(cookie),
                None,
                &[],
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            headers.get("content-type").unwrap().to_str().unwrap(),
            "text/event-stream"
        );
        Sse::new(body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One SSE frame: its id, event name and data.
#[derive(Debug, Clone, PartialEq)]
pub struct SseFrame {
    pub id: Option<String>,
    pub event: String,
    pub data: Json,
}

/// An event stream being read.
pub struct Sse<B> {
    body: B,
    buffer: String,
}

impl<B> Sse<B>
where
    B: hyper::body::Body<Data = axum::body::Bytes> + Unpin,
{
    pub fn new(body: B) -> Self {
        Sse {
            body,
            buffer: String::new(),
        }
    }

    /// The stream of `body` once its first frame, which must be `hello`, was read (within
    /// 5 s).
    pub async fn after_hello(body: B) -> Self {
        let mut sse = Sse::new(body);
        let first = sse.next(Duration::from_secs(5)).await;
        assert_eq!(first.map(|f| f.event).as_deref(), Some("hello"));
        sse
    }

    /// The next frame with an event name, waiting at most `within`.
    pub async fn next(&mut self, within: Duration) -> Option<SseFrame> {
        tokio::time::timeout(within, self.next_frame())
            .await
            .ok()
            .flatten()
    }

    async fn next_frame(&mut self) -> Option<SseFrame> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let text: String = self.buffer.drain(..end + 2).collect();
                let mut frame = SseFrame {
                    id: None,
                    event: String::new(),
                    data: Json::Null,
                };
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        frame.id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        frame.event = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        frame.data = serde_json::from_str(v).unwrap();
                    }
                }
                if !frame.event.is_empty() {
                    return Some(frame);
                }
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }

    /// Frames until one named `event` arrives (or `within` passes): all of them.
    pub async fn until(&mut self, event: &str, within: Duration) -> Vec<SseFrame> {
        let deadline = tokio::time::Instant::now() + within;
        let mut out = Vec::new();
        while let Some(frame) = self
            .next(deadline.saturating_duration_since(tokio::time::Instant::now()))
            .await
        {
            let done = frame.event == event;
            out.push(frame);
            if done {
                break;
            }
        }
        out
    }
}

/// Panics unless `value` is valid against the published JSON Schema of the wire type
/// `name` (`GET /api/schema/{name}`), naming every error.
pub fn conforms(name: &str, value: &Json) {
    let schema = ui_server::schema::wire_schema(name)
        .unwrap_or_else(|| panic!("no wire schema named {name}"));
    let validator = jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|e| panic!("the schema of {name} is not a valid schema: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name} rejects a real output:\n{}\n{value:#}",
        errors.join("\n")
    );
}
