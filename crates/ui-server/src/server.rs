//! Serving the router on a socket: the accept loop with its cap on open connections, each
//! connection's timeouts, and the graceful shutdown.
//!
//! Every bound comes from the [`ServerConfig`] the state was opened with:
//!
//! - **Connection cap** (`max_connections`): a connection over it is answered `503
//!   unavailable` (`Retry-After: 1`, `Connection: close`) at once and closed, so it never
//!   hangs; the connections already open are served as before.
//! - **Idle timeout** (`idle_timeout`): a connection without a request in flight that sends
//!   nothing for this long is closed (a fresh connection too).
//! - **Header-read timeout** (`header_read_timeout`): once a request's first byte arrived,
//!   its whole head must follow within this time or the connection is closed.
//! - **Body-read timeout** (`body_read_timeout`): a request's body must arrive within this
//!   time of its head; a handler reading it gets `408 request-timeout`, and the connection
//!   is closed after the answer.
//! - **Write timeout** (the sync limits' `writeTimeout`, `sync.md` §9.2): a write to the
//!   socket that makes no progress for this long fails and closes the connection. An event
//!   stream whose client stopped reading ends there and frees its slot.
//! - **Graceful shutdown**: stop accepting, let the idle connections go, spread the event
//!   streams' `bye shutdown` over `shutdown_spread`, let the requests in flight finish,
//!   then stop the change feed and checkpoint the database — all within `drain_timeout`
//!   (the feed's last write gets at least a second even when the connections took it
//!   all), after which the connections still open are dropped, the change events the
//!   feed could not write are logged as lost, and the process ends: a database that
//!   stopped answering never holds the shutdown.
//!
//! A keep-alive connection that pipelines a request while the previous one is answered is
//! timed as idle (not as reading a head) until its next request is dispatched.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tower::Service as _;

use crate::config::ServerConfig;
use crate::error::{ApiError, ErrorCode, ServerError};
use crate::routes::router;
use crate::state::{AppState, ConnLimits};
use crate::woken::Woken;

/// Connections over the cap that are answered (`503`) at once; more are closed unanswered.
const MAX_REFUSALS: usize = 64;

/// Longest time spent answering a connection over the cap.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);

/// Pause after an accept failure that is not about one connection (out of file
/// descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The least time the change feed gets to stop (and write what it queued) at shutdown,
/// even when draining the connections took the whole `drain_timeout`.
const FEED_STOP_GRACE: Duration = Duration::from_secs(1);

/// Files the process keeps open besides its connections (database, log, listener, …).
const FILES_BESIDE_CONNECTIONS: u64 = 64;

/// The soft limit on open files (Linux: `/proc/self/limits`), when known.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Shortest gap between two warnings that the connection cap was hit.
const CAP_WARNING_GAP: Duration = Duration::from_secs(10);

/// A server whose port is bound and whose state is open: tell where it listens
/// ([`Bound::local_addr`]), then [`Bound::run`] it.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    state: AppState,
    writer: Option<tokio::task::JoinHandle<()>>,
}

/// Binds `config.bind` (before anything else, so a taken port fails at once),
/// opens the state for `config`, and seeds the demo and starts its CI-run writer when
/// `config.demo` is set.
///
/// # Errors
/// [`ServerError::Bind`] when the port cannot be bound; [`ServerError`] when the state
/// cannot be opened.
pub async fn bind(config: ServerConfig) -> Result<Bound, ServerError> {
    let addr = config.bind;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let demo = config.demo;
    let state = AppState::open(config).await?;
    let writer = if demo {
        if let Err(e) = crate::demo::seed_demo(&state).await {
            tracing::error!(error = ?e, "the demo seed failed");
        }
        Some(crate::demo::spawn_demo_writer(state.clone()))
    } else {
        None
    };
    Ok(Bound {
        listener,
        state,
        writer,
    })
}

impl Bound {
    /// The address the server listens on (the real port when `0` was asked for).
    ///
    /// # Errors
    /// When the socket cannot tell.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The state being served.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes (the demo writer stops then), then drains as
    /// [`serve_on`] does.
    ///
    /// # Errors
    /// As [`serve_on`].
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let writer = self.writer;
        serve_on(self.listener, self.state, async move {
            shutdown.await;
            if let Some(writer) = writer {
                writer.abort();
            }
        })
        .await
    }
}

/// Binds, opens and serves `config` ([`bind`], [`Bound::run`]) until SIGINT (Ctrl-C) or
/// SIGTERM, then drains.
///
/// # Errors
/// As [`bind`] and [`serve_on`].
pub async fn serve(config: ServerConfig) -> Result<(), ServerError> {
    bind(config).await?.run(shutdown_signal()).await
}

/// Completes at the first SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT: shutting down"),
        () = term => tracing::info!("SIGTERM: shutting down"),
    }
}

/// Serves the router of `state` on `listener` until `shutdown` completes, with the
/// connection cap and timeouts of the state's configuration (see the module docs); then
/// drains: no new connections, idle ones closed, event streams end with `bye shutdown`
/// spread over `shutdown_spread`, requests in flight finish, all within `drain_timeout`;
/// then the change feed writes what it holds and the database is checkpointed.
///
/// # Errors
/// [`ServerError::Io`] when the listener fails.
pub async fn serve_on(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let limits = *state.conn_limits();
    if let Some(files) = open_files_limit()
        && files < limits.max_connections as u64 + FILES_BESIDE_CONNECTIONS
    {
        tracing::warn!(
            max_connections = limits.max_connections,
            open_files = files,
            "the process may open fewer files than the connection cap needs: lower \
             max_connections or raise `ulimit -n`"
        );
    }
    let app = router(state.clone());
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let over_cap: Arc<[u8]> = over_cap_answer().into();
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut cap_warned: Option<(Instant, u64)> = None;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(joined) = connections.join_next(), if !connections.is_empty() => {
                log_connection_end(joined);
            }
            accepted = listener.accept() => {
                let tcp = match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(e) if is_connection_error(&e) => continue,
                    Err(e) => {
                        tracing::error!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let conn = connection(tcp, app.clone(), limits, stopping.clone(), permit);
                        connections.spawn(conn);
                    }
                    Err(_) => {
                        warn_cap(&mut cap_warned, limits.max_connections);
                        // Answered by a bounded number of tasks; past them, closed at once.
                        if let Ok(permit) = refusals.clone().try_acquire_owned() {
                            tokio::spawn(refuse(tcp, over_cap.clone(), permit));
                        }
                    }
                }
            }
        }
    }
    drop(listener);
    tracing::info!(
        connections = connections.len(),
        "draining: no new connections"
    );
    state.shut_down_streams();
    stop.send_replace(true);
    let deadline = tokio::time::Instant::now() + limits.drain_timeout;
    let drained = tokio::time::timeout_at(deadline, async {
        while let Some(joined) = connections.join_next().await {
            log_connection_end(joined);
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            timeout_ms = limits.drain_timeout.as_millis() as u64,
            "the drain timed out: dropping the connections still open"
        );
        connections.shutdown().await;
    }
    // The change feed and the checkpoint get what is left of the drain (at least
    // FEED_STOP_GRACE, for the feed's last write): a database that stopped answering must
    // not keep the process from exiting.
    let deadline = deadline.max(tokio::time::Instant::now() + FEED_STOP_GRACE);
    if tokio::time::timeout_at(deadline, state.sync().shutdown())
        .await
        .is_err()
    {
        tracing::error!(
            timeout_ms = limits.drain_timeout.as_millis() as u64,
            "the change feed did not stop within the drain: its unwritten change events are lost"
        );
    }
    match tokio::time::timeout_at(deadline, state.checkpoint()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "the database checkpoint at shutdown failed"),
        Err(_) => {
            tracing::warn!("the database checkpoint at shutdown did not end within the drain")
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// Logs a connection task that panicked or was cancelled (its `JoinError`); one that
/// returned has logged its own end.
fn log_connection_end(joined: Result<(), tokio::task::JoinError>) {
    if let Err(e) = joined {
        if e.is_panic() {
            tracing::error!(error = %e, "a connection's task panicked");
        } else {
            tracing::debug!(error = %e, "a connection's task was cancelled");
        }
    }
}

/// Warns that the cap was hit, at most once per [`CAP_WARNING_GAP`] (counting the
/// connections refused in between).
fn warn_cap(warned: &mut Option<(Instant, u64)>, cap: usize) {
    let now = Instant::now();
    match warned {
        Some((at, refused)) if now.duration_since(*at) < CAP_WARNING_GAP => *refused += 1,
        _ => {
            let refused = warned.map_or(0, |(_, n)| n) + 1;
            tracing::warn!(
                cap,
                refused,
                "connection cap reached: new connections are answered 503"
            );
            *warned = Some((now, 0));
        }
    }
}

/// Failures of one connection that `accept` reports; the listener itself is fine.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The whole HTTP/1.1 answer to a connection over the cap.
fn over_cap_answer() -> Vec<u8> {
    let body = ApiError::new(
        ErrorCode::Unavailable,
        "The server has too many open connections; retry shortly.",
    )
    .body();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         cache-control: no-store\r\nx-content-type-options: nosniff\r\nretry-after: 1\r\n\
         connection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over the cap with `503` and closes it; reads what the client sent
/// until it closes (at most [`REFUSAL_TIMEOUT`]), so that the close does not reset the
/// connection before the client read the answer.
async fn refuse(mut tcp: TcpStream, answer: Arc<[u8]>, _permit: OwnedSemaphorePermit) {
    let answered = tokio::time::timeout(REFUSAL_TIMEOUT, async {
        tcp.write_all(&answer).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 1024];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<_, io::Error>(())
    })
    .await;
    match answered {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "answering a connection over the cap failed"),
        Err(_) => tracing::debug!("a connection over the cap was closed unread"),
    }
}

/// One connection: HTTP/1.1 with keep-alive, its watchdog (idle and header timeouts) and
/// the graceful shutdown; holds its `permit` of the cap until it closes.
async fn connection(
    tcp: TcpStream,
    app: Router,
    limits: ConnLimits,
    mut stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    // Answers and event frames are small writes that should leave at once: without
    // `TCP_NODELAY`, Nagle's algorithm may hold one back until the previous is acked.
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(GuardedIo::new(tcp, activity.clone(), limits.write_timeout));
    let service = ConnService {
        app,
        activity: activity.clone(),
        body_timeout: limits.body_read_timeout,
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    // The watchdog and the stop signal are polled only when they themselves woke the task,
    // not at every write of an event stream ([`Woken`]).
    let expired = std::pin::pin!(activity.expired(&limits));
    let mut expired = Woken::new(expired);
    let stop = std::pin::pin!(async {
        // An error means the server is gone: stop too.
        if stopping.wait_for(|stop| *stop).await.is_err() {
            tracing::debug!("the server's stop signal closed");
        }
    });
    let mut stop = Woken::new(stop);
    let mut draining = false;
    loop {
        tokio::select! {
            biased;
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "a connection ended with an error");
                }
                return;
            }
            expired = &mut expired => {
                tracing::debug!(timeout = expired, "closing a connection");
                return;
            }
            () = &mut stop, if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// `at + d`, or a moment decades away when that overflows the clock: a deadline computed
/// from a configured duration never panics (the configuration is range-checked too,
/// [`crate::ServerConfig::check_connections`]).
fn after(at: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a connection is doing, for its watchdog.
struct Phase {
    /// Requests dispatched whose answer has not been fully written.
    in_flight: u32,
    /// When `in_flight` last became 0 (or the connection opened).
    quiet_since: Instant,
    /// The first byte read while nothing was in flight: a request head is arriving.
    first_byte: Option<Instant>,
}

/// A connection's activity, shared by its socket, its service and its watchdog. Nothing
/// wakes the watchdog: it looks again at least every `min(header-read, idle)` timeout, and
/// no deadline can fall before that (a deadline starts with an event after the look, and
/// lasts a timeout), so none is missed and a request costs no wake-up.
struct Activity {
    phase: Mutex<Phase>,
}

impl Activity {
    fn new() -> Self {
        Activity {
            phase: Mutex::new(Phase {
                in_flight: 0,
                quiet_since: Instant::now(),
                first_byte: None,
            }),
        }
    }

    /// Bytes arrived from the client.
    fn on_read(&self) {
        let mut phase = lock(&self.phase);
        if phase.in_flight == 0 && phase.first_byte.is_none() {
            phase.first_byte = Some(Instant::now());
        }
    }

    /// A request was dispatched; it is in flight until the guard drops (with its answer's
    /// body).
    fn enter(self: &Arc<Self>) -> InFlight {
        let mut phase = lock(&self.phase);
        phase.in_flight += 1;
        phase.first_byte = None;
        InFlight(self.clone())
    }

    /// The running deadline and what it times: none while a request is in flight.
    fn deadline(&self, limits: &ConnLimits) -> Option<(Instant, &'static str)> {
        let phase = lock(&self.phase);
        if phase.in_flight > 0 {
            None
        } else if let Some(first) = phase.first_byte {
            Some((after(first, limits.header_read_timeout), "header-read"))
        } else {
            Some((after(phase.quiet_since, limits.idle_timeout), "idle"))
        }
    }

    /// Completes when the connection was idle, or reading a request head, for too long:
    /// the name of the timeout.
    async fn expired(&self, limits: &ConnLimits) -> &'static str {
        let step = limits.header_read_timeout.min(limits.idle_timeout);
        let sleep = tokio::time::sleep(Duration::ZERO);
        let mut sleep = std::pin::pin!(sleep);
        loop {
            let now = Instant::now();
            let next = match self.deadline(limits) {
                Some((at, what)) if at <= now => return what,
                Some((at, _)) => at.min(after(now, step)),
                None => after(now, step),
            };
            sleep.as_mut().reset(next);
            sleep.as_mut().await;
        }
    }
}

/// One request in flight on a connection.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut phase = lock(&self.0.phase);
        phase.in_flight = phase.in_flight.saturating_sub(1);
        if phase.in_flight == 0 {
            phase.quiet_since = Instant::now();
            phase.first_byte = None;
        }
    }
}

/// The per-connection service: marks requests in flight, puts the body-read deadline on
/// request bodies, and hands the request to the router.
#[derive(Clone)]
struct ConnService {
    app: Router,
    activity: Arc<Activity>,
    body_timeout: Duration,
}

type AnswerFuture = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = AnswerFuture;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let guard = self.activity.enter();
        let deadline = after(Instant::now(), self.body_timeout);
        let req = req.map(|body| DeadlineBody::new(body, deadline));
        let answer = self.app.clone().call(req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Tracked {
                body,
                _in_flight: guard,
            }))
        })
    }
}

/// An answer's body that keeps its request in flight until it is written or dropped.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body's read ran past the body-read timeout.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive within the body-read timeout")]
pub(crate) struct BodyTimeout;

/// Whether `error` (a failed body read, through any wrapping) is a [`BodyTimeout`].
pub(crate) fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<BodyTimeout>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// A request body that fails with [`BodyTimeout`] once its deadline passed.
struct DeadlineBody {
    inner: Incoming,
    deadline: Instant,
    /// Made on the first wait: a body that is already there needs no timer.
    sleep: Option<Pin<Box<Sleep>>>,
}

impl DeadlineBody {
    fn new(inner: Incoming, deadline: Instant) -> Self {
        DeadlineBody {
            inner,
            deadline,
            sleep: None,
        }
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(Some(Err(Box::new(BodyTimeout))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A connection's socket: reads tell the watchdog that a request is arriving; a write
/// that makes no progress for the write timeout fails with `TimedOut`.
struct GuardedIo {
    tcp: TcpStream,
    activity: Arc<Activity>,
    write_timeout: Duration,
    /// Runs while writes are stalled; made on the first stall.
    stall: Option<Pin<Box<Sleep>>>,
    stalled: bool,
}

impl GuardedIo {
    fn new(tcp: TcpStream, activity: Arc<Activity>, write_timeout: Duration) -> Self {
        GuardedIo {
            tcp,
            activity,
            write_timeout,
            stall: None,
            stalled: false,
        }
    }

    /// Passes a write's outcome on; a `Pending` starts (or keeps) the stall timer, and
    /// fails the write once it ran out.
    fn guard<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = false;
            return polled;
        }
        let at = after(Instant::now(), self.write_timeout);
        let sleep = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if !self.stalled {
            self.stalled = true;
            sleep.as_mut().reset(at);
        }
        ready!(sleep.as_mut().poll(cx));
        tracing::info!(
            timeout_ms = self.write_timeout.as_millis() as u64,
            "closing a connection whose client stopped reading"
        );
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the write made no progress within the write timeout",
        )))
    }
}

impl AsyncRead for GuardedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.on_read();
        }
        polled
    }
}

impl AsyncWrite for GuardedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.guard(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.guard(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.tcp).poll_flush(cx);
        self.guard(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.tcp).poll_shutdown(cx);
        self.guard(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnLimits {
        ConnLimits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
            max_connections: 1,
            shutdown_spread: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(15),
        }
    }

    #[test]
    fn a_deadline_past_the_clock_does_not_overflow() {
        let now = Instant::now();
        assert!(after(now, Duration::MAX) > now);
        assert_eq!(
            after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }

    #[test]
    fn the_open_files_limit_is_read_where_the_system_tells_it() {
        if std::path::Path::new("/proc/self/limits").exists() {
            assert!(open_files_limit().is_some_and(|n| n > 0));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_times_idle_connections_and_heads_never_a_request_in_flight() {
        let limits = limits();
        // Nothing sent: idle.
        let idle = Arc::new(Activity::new());
        let opened = Instant::now();
        assert_eq!(idle.expired(&limits).await, "idle");
        assert_eq!(opened.elapsed(), Duration::from_secs(60));

        // A first byte after 5 s: the head has 10 s from it, sooner than the idle timeout.
        let heading = Arc::new(Activity::new());
        let watch = tokio::spawn({
            let heading = heading.clone();
            async move { heading.expired(&limits).await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        heading.on_read();
        let first = Instant::now();
        assert_eq!(watch.await.unwrap(), "header-read");
        assert_eq!(first.elapsed(), Duration::from_secs(10));

        // A request in flight (an event stream) is never timed here, however long; its end
        // starts the idle timeout.
        let busy = Arc::new(Activity::new());
        let request = busy.enter();
        let hour = Duration::from_secs(3_600);
        assert!(
            tokio::time::timeout(hour, busy.expired(&limits))
                .await
                .is_err()
        );
        let ended = Instant::now();
        drop(request);
        assert_eq!(busy.expired(&limits).await, "idle");
        assert_eq!(ended.elapsed(), Duration::from_secs(60));
    }
}
