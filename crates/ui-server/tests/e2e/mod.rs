//! Plumbing of the browser end-to-end test: chromedriver as a child process, a headless
//! Chromium session through fantoccini, the demo server on a loopback port, waits with
//! deadlines, screenshots as artifacts and a tiny HTTP client.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::http::{Request, StatusCode};
use fantoccini::{Client, ClientBuilder};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value as Json, json};
use ui_server::{AppState, ServerConfig, SourcesConfig, serve_on};

use crate::common::TempDir;

/// Where chromedriver is: `UI_E2E_CHROMEDRIVER`, else Debian's `chromium-driver` path.
pub fn chromedriver_path() -> PathBuf {
    env_path("UI_E2E_CHROMEDRIVER", "/usr/bin/chromedriver")
}

/// Where Chromium is: `UI_E2E_CHROMIUM`, else Debian's `chromium` path.
pub fn chromium_path() -> PathBuf {
    env_path("UI_E2E_CHROMIUM", "/usr/bin/chromium")
}

fn env_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// The directory screenshots go to: `UI_E2E_ARTIFACTS`, else `$CARGO_TARGET_DIR/e2e`,
/// else `<workspace>/target/e2e` (relative directories count from the workspace root).
pub fn artifacts_dir() -> PathBuf {
    from_workspace(
        from_env("UI_E2E_ARTIFACTS")
            .or_else(|| from_env("CARGO_TARGET_DIR").map(|t| t.join("e2e")))
            .unwrap_or_else(|| PathBuf::from("target/e2e")),
    )
}

fn from_env(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `dir`, relative to the workspace root when it is not absolute.
fn from_workspace(dir: PathBuf) -> PathBuf {
    if dir.is_absolute() {
        return dir;
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join(dir)
}

/// The axe-core release the accessibility checks run (`cargo xtask ci` installs this one
/// from the npm registry).
pub const AXE_VERSION: &str = "4.14.1";

/// The axe-core rules the checks run: WCAG 2.0 and 2.1, levels A and AA.
pub const AXE_TAGS: [&str; 4] = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

/// Where `axe.min.js` is: `UI_E2E_AXE`, else
/// `$CARGO_TARGET_DIR/axe-core/node_modules/axe-core/axe.min.js` (`target/…` without it),
/// where `cargo xtask ci` installs it.
pub fn axe_path() -> PathBuf {
    from_workspace(from_env("UI_E2E_AXE").unwrap_or_else(|| {
        from_env("CARGO_TARGET_DIR")
            .unwrap_or_else(|| PathBuf::from("target"))
            .join("axe-core/node_modules/axe-core/axe.min.js")
    }))
}

/// The source of axe-core [`AXE_VERSION`]; panics with the command that installs it when
/// it is missing or another version (the checks never skip silently).
pub fn axe_source() -> String {
    let path = axe_path();
    let install = format!(
        "npm install --no-save --prefix {} axe-core@{AXE_VERSION}",
        path.ancestors().nth(3).map_or_else(
            || "<target>/axe-core".to_owned(),
            |p| p.display().to_string()
        )
    );
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "axe-core {AXE_VERSION} not found at {} ({e}) — the browser test's accessibility \
             checks need it: run `{install}` (`cargo xtask ci` does), or set UI_E2E_AXE to an \
             axe.min.js of that version",
            path.display()
        )
    });
    let banner = format!("axe v{AXE_VERSION}");
    assert!(
        source[..source.len().min(200)].contains(&banner),
        "{} is not axe-core {AXE_VERSION}: run `{install}`",
        path.display()
    );
    source
}

/// A free port on 127.0.0.1 (the one the OS hands a listener bound to port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// chromedriver running as our child, in a process group of its own; dropping it kills
/// the group (chromedriver and the Chromium it started), also when the test panics.
pub struct ChromeDriver {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl ChromeDriver {
    /// Starts chromedriver on a free loopback port and waits (at most 20 s) until it
    /// accepts connections. Panics with a clear message when it is not installed.
    pub fn start(dir: &Path) -> Self {
        let path = chromedriver_path();
        assert!(
            path.is_file(),
            "chromedriver not found at {} — the browser test needs Debian's `chromium` and \
             `chromium-driver` (`apt-get install -y chromium chromium-driver`; `cargo xtask ci` \
             installs them), or set UI_E2E_CHROMEDRIVER to its path",
            path.display()
        );
        let chromium = chromium_path();
        assert!(
            chromium.is_file(),
            "Chromium not found at {} — install Debian's `chromium` (`cargo xtask ci` does), or \
             set UI_E2E_CHROMIUM to its path",
            chromium.display()
        );
        let port = free_port();
        let log = dir.join("chromedriver.log");
        let out = std::fs::File::create(&log).expect("the chromedriver log");
        let err = out.try_clone().expect("the chromedriver log");
        let child = {
            use std::os::unix::process::CommandExt;
            Command::new(&path)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()))
        };
        let driver = ChromeDriver { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on 127.0.0.1:{port} within 20 s; its log:\n{}",
                driver.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        driver
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        // The negative id names the process group started above (our child's own).
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Opens a headless Chromium session on `driver` with a fresh profile in `profile`.
pub async fn open_browser(driver: &ChromeDriver, profile: &Path) -> Client {
    let args = [
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--window-size=1280,1800".to_owned(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), json!("chrome"));
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": chromium_path(), "args": args}),
    );
    let mut builder = ClientBuilder::new(HttpConnector::new());
    builder.capabilities(caps);
    match tokio::time::timeout(Duration::from_secs(60), builder.connect(&driver.url())).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => panic!(
            "chromedriver could not start Chromium: {e}\n--- chromedriver log ---\n{}",
            driver.log_text()
        ),
        Err(_) => panic!(
            "no WebDriver session within 60 s\n--- chromedriver log ---\n{}",
            driver.log_text()
        ),
    }
}

/// The demo server on a free loopback port: the demo's sources and seed (alice's and
/// bob's chats), the default change-feed limits, and **no** background writer, so the
/// only CI runs are the seeded ones and those the test inserts.
pub struct DemoServer {
    pub addr: SocketAddr,
    pub state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), ui_server::ServerError>>>,
}

impl DemoServer {
    pub async fn start(dir: &TempDir) -> Self {
        let mut config = ServerConfig::new(dir.0.join("app.db"));
        config.demo = true;
        config.sources = SourcesConfig::Inline(ui_server::DEMO_SOURCES.to_owned());
        let state = AppState::open(config).await.expect("the demo state opens");
        ui_server::seed_demo(&state)
            .await
            .expect("the demo seed is stored");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback listener");
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve_on(listener, state.clone(), async move {
            let _ = stopped.await;
        }));
        DemoServer {
            addr,
            state,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the server (event streams say `bye`) and waits at most 10 s for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }

    /// `GET path` on a fresh connection with `cookie`: the status and the JSON body.
    pub async fn get(&self, path: &str, cookie: &str) -> (StatusCode, Json) {
        let stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = Request::get(path)
            .header("host", self.addr.to_string())
            .header("cookie", cookie)
            .body(http_body_util::Empty::<axum::body::Bytes>::new())
            .unwrap();
        let response = sender.send_request(req).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, body)
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Polls `script` (the body of a function run in the page) every 25 ms until `ready`
/// holds for its value, and returns that value; panics with `what` and the last value seen
/// when `within` passes first.
pub async fn wait_until(
    client: &Client,
    what: &str,
    within: Duration,
    script: &str,
    ready: impl Fn(&Json) -> bool,
) -> Json {
    let deadline = Instant::now() + within;
    loop {
        let last = match client.execute(script, Vec::new()).await {
            Ok(v) if ready(&v) => return v,
            Ok(v) => v,
            Err(e) => json!(format!("script error: {e}")),
        };
        if Instant::now() >= deadline {
            panic!("timed out after {within:?} waiting for {what}; last value: {last:#}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// [`wait_until`] the value of `script` is truthy.
pub async fn wait_js(client: &Client, what: &str, within: Duration, script: &str) -> Json {
    wait_until(client, what, within, script, truthy).await
}

fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(_) | Json::Object(_) => true,
    }
}

/// Runs `script` in the page and returns its value (panics on a script error).
pub async fn js(client: &Client, script: &str, args: Vec<Json>) -> Json {
    client
        .execute(script, args)
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
}

/// Saves a screenshot of the page as `name` in [`artifacts_dir`]; the path.
pub async fn screenshot(client: &Client, name: &str) -> Result<PathBuf, String> {
    let png = client
        .screenshot()
        .await
        .map_err(|e| format!("screenshot failed: {e}"))?;
    let dir = artifacts_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, png).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Finds the element at `xpath` and clicks it with a real WebDriver click, retrying every
/// 25 ms (the page redraws a block on every reading, which can make a found element
/// stale) until `within` passes.
pub async fn click(client: &Client, what: &str, within: Duration, xpath: &str) {
    let deadline = Instant::now() + within;
    loop {
        let outcome = match client.find(fantoccini::Locator::XPath(xpath)).await {
            Ok(el) => el.click().await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => return,
            Err(e) if Instant::now() >= deadline => {
                panic!("could not click {what} ({xpath}) within {within:?}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
}
