//! `GET /ui/events` (SSE) and `GET /ui/poll` (`sync.md` §4): the change feed scoped to the
//! principal's audiences (`user:<id>`, `project:<id>`, `global`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt as _;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::ReusableBoxFuture;
use ui_sync::{
    Audience, Batch, Frame, LogRow, PollBody, ReadAfter, SlotRefused, StreamConn, StreamSlot,
    SyncError, resume_cursor, retry_after_secs, stream_lifetime,
};

use crate::auth::{MEMBERS_SOURCE, Principal};
use crate::error::{ApiError, ErrorCode};
use crate::extract::{CursorParam, QueryParams};
use crate::limits::{
    AUTH_TIMEOUT, CATCH_UP_RETRY_AFTER_SECS, DEGRADED_RETRY_AFTER_SECS, SHUTDOWN_RETRY_MS,
};
use crate::state::AppState;
use crate::woken::Woken;

/// Delay before a failed lag catch-up is tried again, in ms. The wait races the stream's
/// timers (flush, tick, lifetime), its sign-out and the graceful shutdown, so a stream
/// whose catch-up keeps failing still ticks, rotates at the end of its life and ends when
/// its session or the server does.
const CATCH_UP_RETRY_MS: u64 = 1_000;
/// Longest wait for the authenticator to re-resolve a principal's memberships
/// ([`AUTH_TIMEOUT`]); a stream whose memberships cannot be re-resolved in time rotates
/// (the client reconnects at once and is authenticated afresh).
const REFRESH_TIMEOUT: Duration = AUTH_TIMEOUT;

/// A uniform number in `[0, 1)` from the OS's random source.
fn random_unit() -> f64 {
    (uuid::Uuid::new_v4().as_u128() >> 75) as f64 / (1u64 << 53) as f64
}

fn sync_error(e: SyncError) -> ApiError {
    match e {
        SyncError::Busy => ApiError::new(ErrorCode::Unavailable, "Too many catch-up reads.")
            .with_retry_after(CATCH_UP_RETRY_AFTER_SECS),
        SyncError::Closed => ApiError::new(ErrorCode::Unavailable, "The change feed is closed.")
            .with_retry_after(DEGRADED_RETRY_AFTER_SECS),
        // The log cannot be read (the database is unreachable, a permission was taken
        // away): a page retries after the degraded pause and polls its readings meanwhile.
        // The database's words go to the log, not to the client.
        other => {
            tracing::warn!(target: "ui_sync", error = %other, "a read of the change log failed");
            ApiError::new(
                ErrorCode::Unavailable,
                "The change feed cannot read its log right now.",
            )
            .with_retry_after(DEGRADED_RETRY_AFTER_SECS)
        }
    }
}

fn degraded(state: &AppState) -> Result<(), ApiError> {
    if state.sync().degraded() {
        return Err(
            ApiError::new(ErrorCode::Unavailable, "The change feed is degraded.")
                .with_retry_after(DEGRADED_RETRY_AFTER_SECS),
        );
    }
    Ok(())
}

/// The change log's head as the request arrived, taken before its [`Principal`] is
/// resolved (an extractor runs in the order of the handler's arguments): a change of the
/// principal's memberships recorded after it may be missing from their audiences.
pub(crate) struct HeadBefore(u64);

impl FromRequestParts<AppState> for HeadBefore {
    type Rejection = Infallible;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        Ok(HeadBefore(state.sync().head().seq.0))
    }
}

/// Whether `read` may have passed over a change of the memberships of `member_of` (the
/// `user:<id>` audience of its `audience-changed` events): one of its events is such a
/// change, or it is a reset, which skips rows unseen.
fn passes_membership_change(state: &AppState, member_of: &Audience, read: &ReadAfter) -> bool {
    let ReadAfter::Events { events, .. } = read else {
        return true;
    };
    let (scope, _) = state.sync().tokens(MEMBERS_SOURCE, member_of, None);
    let scope = scope.to_hex();
    events
        .iter()
        .any(|e| e.source == MEMBERS_SOURCE && e.scope == scope)
}

/// `principal` with its memberships re-resolved now, or `None` when the authenticator
/// cannot (it does not implement [`crate::Authenticator::refresh`], answers for another
/// user, or not within [`REFRESH_TIMEOUT`]); said in the log.
async fn re_resolved(state: &AppState, principal: &Principal) -> Option<Principal> {
    let refreshed =
        tokio::time::timeout(REFRESH_TIMEOUT, state.authenticator().refresh(principal)).await;
    match refreshed {
        Ok(Some(fresh)) if fresh.user_id == principal.user_id => Some(fresh),
        Ok(None) => None,
        Ok(Some(other)) => {
            tracing::warn!(
                user = %principal.user_id,
                answered = %other.user_id,
                "the authenticator refreshed another user; the stream rotates"
            );
            None
        }
        Err(_) => {
            tracing::warn!(
                user = %principal.user_id,
                "memberships could not be re-resolved in time; the stream rotates"
            );
            None
        }
    }
}

/// `GET /ui/poll?cursor=`: one catch-up read (`sync.md` §4.3), rate-limited per session.
pub(crate) async fn poll(
    State(state): State<AppState>,
    principal: Principal,
    QueryParams(q): QueryParams<CursorParam>,
) -> Result<Response, ApiError> {
    if let Err(wait_ms) = state.poll_token(&principal.session) {
        return Err(
            ApiError::new(ErrorCode::RateLimited, "Too many polls; slow down.")
                .with_retry_after(retry_after_secs(wait_ms)),
        );
    }
    degraded(&state)?;
    let audiences = principal.audiences(state.sync_limits());
    let read = state
        .sync()
        .read_after(q.cursor.as_deref(), &audiences)
        .await
        .map_err(sync_error)?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        PollBody::new(&read).to_json(),
    )
        .into_response())
}

/// `GET /ui/events`: the event stream (`sync.md` §4.2).
pub(crate) async fn events(
    State(state): State<AppState>,
    HeadBefore(before): HeadBefore,
    mut principal: Principal,
    headers: HeaderMap,
    QueryParams(q): QueryParams<CursorParam>,
) -> Result<Response, ApiError> {
    degraded(&state)?;
    let slot = state
        .streams()
        .try_acquire(&principal.session)
        .map_err(|refused| {
            match refused {
                SlotRefused::Session => ApiError::new(
                    ErrorCode::TooManyStreams,
                    "This session holds too many event streams; poll instead.",
                ),
                _ => ApiError::new(ErrorCode::Unavailable, "Too many event streams."),
            }
            .with_retry_after(refused.retry_after_secs())
        })?;
    // Subscribe first, then read: nothing falls between the snapshot and live delivery.
    let hub = state.sync().subscribe();
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let resume = resume_cursor(last_event_id, q.cursor.as_deref()).map(str::to_owned);
    let member_of = Audience::user(&principal.user_id);
    let mut audiences = principal.audiences(state.sync_limits());
    let mut catch_up = state
        .sync()
        .read_after(resume.as_deref(), &audiences)
        .await
        .map_err(sync_error)?;
    // A change of the memberships recorded between the principal's resolution and this
    // read lies at or below the stream's start, where the live rows it judges will never
    // show it: the memberships are re-resolved first, so the stream starts with them.
    if catch_up.cursor().seq.0 > before
        && memberships_changed_after(&state, &member_of, before).await?
    {
        principal = re_resolved(&state, &principal).await.ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unavailable,
                "Your memberships changed as the stream opened; connect again.",
            )
            .with_retry_after(0)
        })?;
        audiences = principal.audiences(state.sync_limits());
        catch_up = state
            .sync()
            .read_after(resume.as_deref(), &audiences)
            .await
            .map_err(sync_error)?;
    }
    let now = state.now_ms();
    let lifetime = stream_lifetime(state.sync_limits(), random_unit());
    let mut conn = StreamConn::new(
        audiences.clone(),
        state.sync().epoch(),
        resume.as_deref(),
        now,
        lifetime,
        *state.sync_limits(),
    );
    let first = conn.start(catch_up, now);
    let connection = Connection {
        conn,
        audiences,
        member_of,
        hub: Woken::new(ReusableBoxFuture::new(next_batch(hub))),
        ended: Woken::new(Box::pin(
            session_ended(state.signed_out(), principal.session.clone()).fuse(),
        )),
        shutdown: Woken::new(Box::pin(shutdown_turn(state.clone()).fuse())),
        principal,
        _slot: slot,
        state,
        queue: first.into(),
        // Set before its first poll (a branch without a deadline is never polled).
        timer: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
        timer_at: None,
        catch_up_retry_at: None,
        catch_up_failing: None,
    };
    // The socket pulls the frames: no task or channel of its own per stream, and a client
    // that stops reading stops the stream (backpressure, `sync.md` §9.2).
    let body = Body::from_stream(futures_util::stream::unfold(
        Box::new(connection),
        |mut c| async move {
            let frame = c.next_frame().await?;
            Some((Ok::<_, Infallible>(wire(frame)), c))
        },
    ));
    let mut response = (StatusCode::OK, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// Whether the log holds a change of the memberships of `member_of` after seq `after`
/// (or cannot say, after a reset).
async fn memberships_changed_after(
    state: &AppState,
    member_of: &Audience,
    after: u64,
) -> Result<bool, ApiError> {
    let cursor = ui_sync::Cursor {
        epoch: state.sync().epoch(),
        seq: ui_sync::Seq(after),
    };
    // `global` and the user's own audience.
    let own = ui_sync::AudienceSet::new([member_of.clone()], 2);
    let read = state
        .sync()
        .read_after(Some(&cursor.to_string()), &own)
        .await
        .map_err(sync_error)?;
    Ok(passes_membership_change(state, member_of, &read))
}

thread_local! {
    /// The text of the last `changes` or `tick` frame this thread wrote, with the frame.
    /// One change reaches every open stream as the same frame (same events, same cursor),
    /// and idle streams tick with the same cursor: the frame is serialised once per worker
    /// thread, with no lock between them, and every stream writes the same [`Bytes`]. A
    /// memo of [`Frame::to_sse`], whose text depends only on the frame, so it is right
    /// however many servers run in the process.
    static LAST_FRAME: std::cell::RefCell<Option<(Frame, Bytes)>> =
        const { std::cell::RefCell::new(None) };
}

/// The wire text of `frame`, shared with the streams that write the same frame.
fn wire(frame: Frame) -> Bytes {
    if !matches!(frame, Frame::Changes { .. } | Frame::Tick { .. }) {
        return Bytes::from(frame.to_sse());
    }
    LAST_FRAME.with_borrow_mut(|last| {
        if let Some((f, bytes)) = &*last
            && *f == frame
        {
            return bytes.clone();
        }
        let bytes = Bytes::from(frame.to_sse());
        *last = Some((frame, bytes.clone()));
        bytes
    })
}

/// One open stream: its state machine, who it serves and what they may see, what wakes it,
/// the frames due, and its slot (freed on drop, when the client goes away or the stream
/// ends).
///
/// What wakes it (the hub, the timer, a sign-out, the shutdown) are futures kept for the
/// stream's life, not made anew at every step, and each is polled only when its own waker
/// fired ([`Woken`]): a stream woken by its timer polls nothing else, so one change costs
/// 10,000 streams no trips through the channels' waiter locks beyond the hub's own.
struct Connection {
    state: AppState,
    /// The next hub batch, with the receiver.
    hub: Woken<ReusableBoxFuture<'static, (HubItem, broadcast::Receiver<Arc<Batch>>)>>,
    /// Completes when this session is signed out ([`session_ended`]).
    ended: Woken<Pin<Box<dyn Future<Output = Ended> + Send>>>,
    /// Completes at this stream's turn in a graceful shutdown ([`shutdown_turn`]).
    shutdown: Woken<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Frames due, in order.
    queue: std::collections::VecDeque<Frame>,
    conn: StreamConn,
    audiences: ui_sync::AudienceSet,
    principal: Principal,
    /// `user:<id>`: the audience of this principal's `audience-changed` events.
    member_of: Audience,
    /// The stream's timer (flush, tick, lifetime: [`StreamConn::next_deadline`]) and the
    /// deadline it is set to.
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    timer_at: Option<tokio::time::Instant>,
    /// When a failed lag catch-up is tried again, on the stream clock (ms).
    catch_up_retry_at: Option<u64>,
    /// Held while this stream's catch-ups fail (counted in the state).
    catch_up_failing: Option<CatchUpFailing>,
    _slot: StreamSlot,
}

/// One stream in a run of failed lag catch-ups: counted in
/// [`AppState::failing_catch_ups`] from the first failure until a catch-up succeeds or the
/// stream ends. The first stream of a process-wide run warns; the others (a log outage
/// fails every lagging stream at once, maybe 10,000) log at debug.
struct CatchUpFailing(AppState);

impl CatchUpFailing {
    fn begin(state: &AppState, error: &SyncError) -> Self {
        let before = state
            .failing_catch_ups()
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if before == 0 {
            tracing::warn!(
                %error,
                retry_ms = CATCH_UP_RETRY_MS,
                "an event stream's catch-up read failed; lagging streams retry until it \
                 succeeds (further failures of this run log at debug)"
            );
        }
        CatchUpFailing(state.clone())
    }

    /// A catch-up succeeded again.
    fn end(self) {
        if self
            .0
            .failing_catch_ups()
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
        {
            tracing::info!("event streams' catch-up reads succeed again");
        }
    }
}

impl Drop for CatchUpFailing {
    fn drop(&mut self) {
        self.0
            .failing_catch_ups()
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What woke a stream up.
enum Step {
    /// Frames to write.
    Frames(Vec<Frame>),
    /// A hub batch to take.
    Batch(Arc<Batch>),
}

impl Connection {
    /// Whether `row` says this principal's memberships changed.
    fn membership_row(&self, row: &LogRow) -> bool {
        row.row.source == MEMBERS_SOURCE && row.row.audience == self.member_of
    }

    /// Re-resolves the principal's memberships and applies them from the current position
    /// on: a lost audience sends what was collected before the change, then a `reset`.
    /// When the authenticator cannot re-resolve them (it does not implement
    /// [`crate::Authenticator::refresh`], or not in time), the stream rotates so the client
    /// reconnects and is authenticated afresh.
    async fn refresh(&mut self) -> Vec<Frame> {
        let refreshed = re_resolved(&self.state, &self.principal).await;
        let now = self.state.now_ms();
        match refreshed {
            Some(principal) => {
                self.audiences = principal.audiences(self.state.sync_limits());
                self.principal = principal;
                self.conn.set_audiences(self.audiences.clone(), now)
            }
            None => self.conn.rotate(now),
        }
    }

    /// When `batch` reached this process, on the stream clock: its hub publication (never
    /// later than now). The flush window of its rows opens then, not when this stream got
    /// round to taking it, so one change flushes on every stream at the same instant.
    fn arrived(&self, batch: &Batch) -> u64 {
        let now = self.state.now_ms();
        batch.published.map_or(now, |at| {
            let since = at.saturating_duration_since(self.state.started());
            u64::try_from(since.as_millis())
                .unwrap_or(u64::MAX)
                .min(now)
        })
    }

    /// Takes one hub batch in log order: rows up to an `audience-changed` event of this
    /// principal with the audiences held so far, the rows after it with the re-resolved
    /// ones. Exact: no row after the change is judged by the old memberships.
    async fn take_batch(&mut self, batch: &Batch) -> Vec<Frame> {
        let cursor = self.conn.cursor().seq;
        let split = |c: &Connection, rows: &[LogRow]| {
            rows.iter()
                .position(|r| r.seq > cursor && c.membership_row(r))
        };
        let arrived = self.arrived(batch);
        if split(self, &batch.rows).is_none() {
            return self.conn.on_batch(batch, arrived);
        }
        let mut out = Vec::new();
        let mut rest: &[LogRow] = &batch.rows;
        while let Some(i) = split(self, rest) {
            let (upto, after) = rest.split_at(i + 1);
            let part = Batch {
                first: upto[0].seq,
                last: upto[i].seq,
                rows: upto.to_vec(),
                published: batch.published,
            };
            out.extend(self.conn.on_batch(&part, arrived));
            out.extend(self.refresh().await);
            if self.conn.is_closed() {
                return out;
            }
            rest = after;
        }
        let part = Batch {
            first: rest.first().map_or(batch.last, |r| r.seq),
            last: batch.last,
            rows: rest.to_vec(),
            published: batch.published,
        };
        out.extend(self.conn.on_batch(&part, arrived));
        out
    }

    /// The lag catch-up: `read_after(cursor)`; when it holds an `audience-changed` event
    /// of this principal, or is a reset (which moves the stream to the head past rows it
    /// did not look at), the memberships are re-resolved first and the read is done again
    /// with them, so nothing of a lost audience goes out.
    async fn catch_up(&mut self) -> Result<Vec<Frame>, SyncError> {
        let cursor = self.conn.cursor().to_string();
        let sync = self.state.sync().clone();
        let mut read = sync.read_after(Some(&cursor), &self.audiences).await?;
        let mut frames = Vec::new();
        if passes_membership_change(&self.state, &self.member_of, &read) {
            frames.extend(self.refresh().await);
            if self.conn.is_closed() {
                return Ok(frames);
            }
            read = sync.read_after(Some(&cursor), &self.audiences).await?;
        }
        frames.extend(self.conn.on_catch_up(read, self.state.now_ms()));
        Ok(frames)
    }
}

impl Connection {
    /// The next frame to write: feeds the [`StreamConn`] with hub batches, timers, sign-out
    /// and shutdown until it has one; `None` once the stream has ended.
    async fn next_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.queue.pop_front() {
                return Some(frame);
            }
            if self.conn.is_closed() {
                return None;
            }
            let frames = self.step().await;
            self.queue.extend(frames);
        }
    }

    /// Waits for what happens next and returns the frames it makes (maybe none).
    async fn step(&mut self) -> Vec<Frame> {
        if self.conn.needs_catch_up()
            && self
                .catch_up_retry_at
                .is_none_or(|at| self.state.now_ms() >= at)
        {
            match Box::pin(self.catch_up()).await {
                Ok(frames) => {
                    self.catch_up_retry_at = None;
                    if let Some(failing) = self.catch_up_failing.take() {
                        failing.end();
                    }
                    return frames;
                }
                Err(error) => {
                    tracing::debug!(
                        user = %self.principal.user_id,
                        %error,
                        retry_ms = CATCH_UP_RETRY_MS,
                        "an event stream's catch-up read failed; it retries"
                    );
                    if self.catch_up_failing.is_none() {
                        self.catch_up_failing = Some(CatchUpFailing::begin(&self.state, &error));
                    }
                    self.catch_up_retry_at =
                        Some(self.state.now_ms().saturating_add(CATCH_UP_RETRY_MS));
                }
            }
        }
        let state = &self.state;
        let conn = &mut self.conn;
        // Lagging (its catch-up failed): no hub batch is taken until a catch-up succeeds;
        // the retry waits beside the timers, the sign-out and the shutdown.
        let lagging = conn.needs_catch_up();
        let retry = futures_util::future::OptionFuture::from(
            self.catch_up_retry_at
                .filter(|_| lagging)
                .map(|ms| tokio::time::sleep_until(state.started() + Duration::from_millis(ms))),
        );
        let deadline = conn
            .next_deadline()
            .map(|ms| state.started() + Duration::from_millis(ms));
        // One timer for the stream's life, moved rather than made anew at every step: a
        // later deadline (flush, then tick) is an atomic store, not a trip through the timer
        // wheel's lock.
        if let Some(at) = deadline
            && self.timer_at != Some(at)
        {
            self.timer.as_mut().reset(at);
            self.timer_at = Some(at);
        }
        let timer = &mut self.timer;
        let hub = &mut self.hub;
        let step = tokio::select! {
            // The timer first: a stream woken by it goes on to write at once.
            biased;
            () = timer, if deadline.is_some() => Step::Frames(conn.poll_timers(state.now_ms())),
            (batch, receiver) = &mut *hub, if !lagging => {
                hub.inner_mut().set(next_batch(receiver));
                match batch {
                    Ok(batch) => Step::Batch(batch),
                    Err(RecvError::Lagged(_)) => {
                        conn.on_lagged();
                        Step::Frames(Vec::new())
                    }
                    Err(RecvError::Closed) => Step::Frames(conn.shutdown(0, state.now_ms())),
                }
            }
            ended = &mut self.ended => Step::Frames(match ended {
                Ended::SignedOut => conn.sign_out(state.now_ms()),
                Ended::Unknown => {
                    tracing::warn!(
                        user = %self.principal.user_id,
                        "sign-outs were missed; the stream rotates to be authenticated afresh"
                    );
                    conn.rotate(state.now_ms())
                }
            }),
            () = &mut self.shutdown => {
                let retry = (random_unit() * SHUTDOWN_RETRY_MS as f64) as u64;
                Step::Frames(conn.shutdown(retry, state.now_ms()))
            }
            // The catch-up is due again (the next step runs it).
            Some(()) = retry, if lagging => Step::Frames(Vec::new()),
        };
        let frames = match step {
            Step::Frames(frames) => frames,
            Step::Batch(batch) => Box::pin(self.take_batch(&batch)).await,
        };
        record_delivery_lag(&self.state, &frames);
        frames
    }
}

/// What the hub gave a stream.
type HubItem = Result<Arc<Batch>, RecvError>;

/// The next hub batch, handing the receiver back for the one after.
async fn next_batch(
    mut receiver: broadcast::Receiver<Arc<Batch>>,
) -> (HubItem, broadcast::Receiver<Arc<Batch>>) {
    let batch = receiver.recv().await;
    (batch, receiver)
}

/// Why a stream's session may be over.
enum Ended {
    /// It was signed out.
    SignedOut,
    /// Sign-outs went by unread (the channel lagged): whether this one was among them is
    /// unknown.
    Unknown,
}

/// Completes when `session` is signed out, or when sign-outs were missed; never while the
/// server (which holds the sender) runs otherwise.
async fn session_ended(mut signed_out: broadcast::Receiver<String>, session: String) -> Ended {
    loop {
        match signed_out.recv().await {
            Ok(ended) if ended == session => return Ended::SignedOut,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return Ended::Unknown,
            Err(RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// Completes at this stream's turn to say `bye` in a graceful shutdown: a uniform draw
/// over the spread ([`AppState::shutdown_turn`]).
async fn shutdown_turn(state: AppState) {
    let mut shutdown = state.shutdown_watch();
    state.shutdown_turn(&mut shutdown, random_unit()).await;
}

/// Records the delivery lag of every event of live `frames` (catch-up reads after a
/// connect or a hub lag are not live and are not counted): from the writer's wall clock
/// when the change was recorded (`at`, stamped by the change feed with the system clock)
/// to now on the same clock.
fn record_delivery_lag(state: &AppState, frames: &[Frame]) {
    let Some(metrics) = state.metrics() else {
        return;
    };
    let mut now_ms = None;
    for frame in frames {
        if let Frame::Changes { events, .. } = frame {
            let now = *now_ms.get_or_insert_with(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            });
            for event in events {
                let lag = u64::try_from(now.saturating_sub(event.at)).unwrap_or(0);
                metrics.delivery_lag(Duration::from_millis(lag));
            }
        }
    }
}
