//! [`SyncService`]: one per process (`sync.md` §3.5, §6.1, §11.3). It owns the appender
//! (bounded queue, 50 ms coalescing window, overflow to coarser rows, retries), the tailer
//! (the only publisher to the hub; feeds the latest index and the head), the pruner, and the
//! catch-up semaphore.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, Semaphore, broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use ui_core::SyncLimits;

use crate::error::SyncError;
use crate::latest::LatestIndex;
use crate::store::{Retention, SyncStore};
use crate::types::{
    Audience, AudienceKind, AudienceSet, Batch, ChangeDraft, Cursor, Epoch, NewRow, Op, ReadAfter,
    RequestSource, Seq, Token, is_source_name,
};

/// First delay before a failed append is retried; it doubles up to [`APPEND_RETRY_MAX`]
/// (§3.5 step 5).
const APPEND_RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest delay between append retries.
const APPEND_RETRY_MAX: Duration = Duration::from_secs(5);
/// While degraded, the failing batch is retried this often, so the 503s end within this
/// long of the database healing (§3.5 step 5: at least once a second).
const DEGRADED_PROBE: Duration = Duration::from_millis(500);
/// A process does not prune during its first 60 s (§3.7).
const PRUNE_COLD_START: Duration = Duration::from_secs(60);
/// Longest raw key, in bytes (§2).
const MAX_RAW_KEY_BYTES: usize = 256;
/// The host namespace of the `op = reset` row written when the overflow set is full.
const RESET_SOURCE: &str = "host.sync";

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn size(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX).max(1)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Resolves once the service is asked to stop (or every handle is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A validated draft: the coalescing key (source, audience, raw key, rs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Draft {
    source: String,
    audience: Audience,
    key: Option<String>,
    rs: Option<RequestSource>,
}

type Waiter = oneshot::Sender<Result<Cursor, SyncError>>;

struct Job {
    draft: Draft,
    at_ms: i64,
    waiter: Option<Waiter>,
}

/// One row of a batch and the `record_and_wait` callers it answers.
struct Pending {
    row: NewRow,
    waiters: Vec<Waiter>,
}

/// `(source, audience)` pairs whose drafts did not fit the queue, with their counts; `full`
/// once a pair did not fit the set either; `dropped` counts every overflowed draft.
#[derive(Default)]
struct Overflow {
    pairs: HashMap<(String, Audience), u64>,
    full: bool,
    dropped: u64,
}

#[derive(Default)]
struct Counters {
    drafts: AtomicU64,
    rows: AtomicU64,
    merged: AtomicU64,
    overflowed: AtomicU64,
    resets: AtomicU64,
    append_failures: AtomicU64,
    tail_failures: AtomicU64,
    tailed: AtomicU64,
    prune_failures: AtomicU64,
    pruned_rows: AtomicU64,
    log_rows: AtomicU64,
}

/// Counters of one process's change feed (the metrics of `sync.md` §9.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncStats {
    /// Drafts taken from the queue.
    pub drafts: u64,
    /// Rows appended (after coalescing, overflow rows and resets included).
    pub rows: u64,
    /// Drafts merged into another draft's row.
    pub merged: u64,
    /// Drafts that found the queue full and went to the overflow set.
    pub overflowed: u64,
    /// `op = reset` rows written because the overflow set was full.
    pub resets: u64,
    /// Failed appends (each retry counts).
    pub append_failures: u64,
    /// Failed tail reads.
    pub tail_failures: u64,
    /// Rows the tailer read from the log: every event appended by any writer (this
    /// process's appender, an outbox transaction, another process) once this process
    /// follows it.
    pub tailed: u64,
    /// Failed prune runs.
    pub prune_failures: u64,
    /// Rows deleted by retention.
    pub pruned_rows: u64,
    /// Rows in the log after the last successful prune (gauge).
    pub log_rows: u64,
}

/// State shared by the handles and the three tasks.
struct Shared {
    store: Arc<dyn SyncStore>,
    limits: SyncLimits,
    epoch: Epoch,
    internal: HashSet<String>,
    latest: Mutex<LatestIndex>,
    head: watch::Sender<Cursor>,
    hub: broadcast::Sender<Arc<Batch>>,
    tail_poke: Notify,
    overflow: Mutex<Overflow>,
    overflow_poke: Notify,
    degraded: AtomicBool,
    /// The tailer runs and its last read of the log succeeded.
    tailing: AtomicBool,
    catch_up: Arc<Semaphore>,
    counters: Counters,
}

struct Handle {
    shared: Arc<Shared>,
    queue: mpsc::Sender<Job>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// The process's change feed: records drafts, tails the log into the latest index, the head
/// and the hub, prunes, and serves catch-up reads. Cheap to clone; the tasks stop when
/// [`SyncService::shutdown`] is called or the last clone is dropped.
#[derive(Clone)]
pub struct SyncService {
    inner: Arc<Handle>,
}

impl std::fmt::Debug for SyncService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncService")
            .field("epoch", &self.inner.shared.epoch)
            .field("head", &self.head())
            .finish_non_exhaustive()
    }
}

impl SyncService {
    /// Starts the appender, the tailer and the pruner on the current tokio runtime. Tailing
    /// begins at the log's current head (history is never re-emitted) and the latest index's
    /// `base` is that head. `internal_sources` may be recorded without an audience (they get
    /// `global`); no other source may use `global`.
    ///
    /// # Errors
    /// [`SyncError::Store`] when the head cannot be read.
    pub async fn start(
        store: Arc<dyn SyncStore>,
        limits: SyncLimits,
        internal_sources: impl IntoIterator<Item = String>,
    ) -> Result<SyncService, SyncError> {
        let head = store.head().await?;
        let epoch = store.meta().epoch.clone();
        let (queue, rx) = mpsc::channel(size(limits.appender_queue()));
        let (hub, _) = broadcast::channel(size(limits.hub_capacity()));
        let (stop, _) = watch::channel(false);
        let (head_tx, _) = watch::channel(Cursor {
            epoch: epoch.clone(),
            seq: head,
        });
        let shared = Arc::new(Shared {
            store,
            limits,
            epoch,
            internal: internal_sources.into_iter().collect(),
            latest: Mutex::new(LatestIndex::new(size(limits.latest_index()), head)),
            head: head_tx,
            hub,
            tail_poke: Notify::new(),
            overflow: Mutex::new(Overflow::default()),
            overflow_poke: Notify::new(),
            degraded: AtomicBool::new(false),
            tailing: AtomicBool::new(true),
            catch_up: Arc::new(Semaphore::new(size(limits.catch_up_concurrency()))),
            counters: Counters::default(),
        });
        let tasks = vec![
            tokio::spawn(appender(shared.clone(), rx, stop.subscribe())),
            tokio::spawn(tailer(shared.clone(), head, stop.subscribe())),
            tokio::spawn(pruner(shared.clone(), stop.subscribe())),
        ];
        Ok(SyncService {
            inner: Arc::new(Handle {
                shared,
                queue,
                stop,
                tasks: Mutex::new(tasks),
            }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    fn validate(&self, draft: ChangeDraft) -> Result<Draft, SyncError> {
        let ChangeDraft {
            source,
            audience,
            key,
            rs,
        } = draft;
        if !is_source_name(&source) {
            return Err(SyncError::Invalid(format!(
                "`{source}` is not a source name"
            )));
        }
        let internal = self.shared().internal.contains(&source);
        let audience = match audience {
            None if internal => Audience::global(),
            None => return Err(SyncError::NoAudience(source)),
            Some(a) if a.kind == AudienceKind::Global && !internal => {
                return Err(SyncError::Invalid(format!(
                    "`{source}` is not an internal source; `global` is refused"
                )));
            }
            Some(a) => a,
        };
        if let Some(k) = &key
            && k.len() > MAX_RAW_KEY_BYTES
        {
            return Err(SyncError::Invalid(format!(
                "a raw key of `{source}` is longer than {MAX_RAW_KEY_BYTES} bytes"
            )));
        }
        Ok(Draft {
            source,
            audience,
            key,
            rs,
        })
    }

    /// Records a change without waiting (§3.2, §3.5): the draft joins the appender's queue,
    /// or, when the queue is full, its `(source, audience)` pair is counted in the overflow
    /// set and written later as a whole-source row (or a reset when the set is full too).
    ///
    /// # Errors
    /// [`SyncError::NoAudience`] for a non-internal source without an audience,
    /// [`SyncError::Invalid`] for a bad source name, a `global` audience on a non-internal
    /// source or a raw key over 256 bytes, [`SyncError::Closed`] after shutdown. Nothing is
    /// written then.
    pub fn record(&self, draft: ChangeDraft) -> Result<(), SyncError> {
        let draft = self.validate(draft)?;
        let job = Job {
            draft,
            at_ms: now_ms(),
            waiter: None,
        };
        match self.inner.queue.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Closed(_)) => Err(SyncError::Closed),
            Err(TrySendError::Full(job)) => {
                let shared = self.shared();
                {
                    let mut overflow = lock(&shared.overflow);
                    let cap = size(shared.limits.overflow_pairs());
                    let pair = (job.draft.source, job.draft.audience);
                    overflow.dropped = overflow.dropped.saturating_add(1);
                    if let Some(n) = overflow.pairs.get_mut(&pair) {
                        *n = n.saturating_add(1);
                    } else if overflow.pairs.len() < cap {
                        overflow.pairs.insert(pair, 1);
                    } else {
                        overflow.full = true;
                    }
                }
                shared.counters.overflowed.fetch_add(1, Ordering::Relaxed);
                shared.overflow_poke.notify_one();
                Ok(())
            }
        }
    }

    /// The log row `draft` stands for (validated as [`SyncService::record`] does, `n` = 1,
    /// stamped now), for a write that appends its events in its own transaction (the
    /// outbox, [`crate::SqliteStore::append_in`]); call [`SyncService::appended`] after
    /// that transaction commits.
    ///
    /// Writes the server does not own cannot share a transaction with the log: they record
    /// after their commit ([`SyncService::record_and_wait`]) and retry until it succeeds
    /// (at least once); a crash between the commit and the record loses the event, which
    /// the page's 10 s cadence repairs (the floor, `sync.md` §1).
    ///
    /// # Errors
    /// As [`SyncService::record`].
    pub fn prepare(&self, draft: ChangeDraft) -> Result<NewRow, SyncError> {
        let d = self.validate(draft)?;
        let (scope, key) = self.tokens(&d.source, &d.audience, d.key.as_deref());
        Ok(NewRow {
            source: d.source,
            audience: d.audience,
            scope,
            key,
            rs: d.rs,
            op: Op::Change,
            n: 1,
            at_ms: now_ms(),
        })
    }

    /// Rows were appended to the log outside the appender (an outbox write committed):
    /// the tailer reads them now instead of at its next check.
    pub fn appended(&self) {
        self.shared().tail_poke.notify_one();
    }

    /// Records a change and waits until its row is committed (coalescing window plus the
    /// commit); returns the cursor of the row that holds it (for `X-UI-Sync-Seq`, §4.4).
    /// Waits for queue space instead of overflowing.
    ///
    /// # Errors
    /// As [`SyncService::record`]; [`SyncError::Store`] when the write failed and the
    /// service shut down before a retry succeeded.
    pub async fn record_and_wait(&self, draft: ChangeDraft) -> Result<Cursor, SyncError> {
        let draft = self.validate(draft)?;
        let (tx, rx) = oneshot::channel();
        let job = Job {
            draft,
            at_ms: now_ms(),
            waiter: Some(tx),
        };
        self.inner
            .queue
            .send(job)
            .await
            .map_err(|_| SyncError::Closed)?;
        rx.await.map_err(|_| SyncError::Closed)?
    }

    /// The highest seq the tailer has seen (published to the hub and the latest index).
    pub fn head(&self) -> Cursor {
        self.shared().head.borrow().clone()
    }

    /// A watch of [`SyncService::head`].
    pub fn head_watch(&self) -> watch::Receiver<Cursor> {
        self.shared().head.subscribe()
    }

    /// The log's epoch.
    pub fn epoch(&self) -> Epoch {
        self.shared().epoch.clone()
    }

    /// The limits the service runs with.
    pub fn limits(&self) -> &SyncLimits {
        &self.shared().limits
    }

    /// A receiver of the hub: every tailed batch, in seq order, whatever its audience (the
    /// subscriber filters). Capacity `hubCapacity` batches; a slow receiver gets `Lagged`
    /// and must catch up with [`SyncService::read_after`].
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Batch>> {
        self.shared().hub.subscribe()
    }

    /// The latest-index value of §8.4 step 2: the scope's value when `keys` is empty, else
    /// the maximum of the whole-source entry and each key's entry. A miss answers the index's
    /// `base` (the head at start, raised by evictions).
    pub fn relevant(&self, scope: &Token, keys: &[Token]) -> Seq {
        lock(&self.shared().latest).relevant(scope, keys)
    }

    /// Makes the tailer catch up until the head reaches `seq`, waiting at most `within`
    /// (§6.5; callers pass `seenCatchUp`). Whether the head reached `seq`.
    pub async fn catch_up_to(&self, seq: Seq, within: Duration) -> bool {
        let shared = self.shared();
        let mut head = shared.head.subscribe();
        if head.borrow().seq >= seq {
            return true;
        }
        shared.tail_poke.notify_one();
        matches!(
            tokio::time::timeout(within, head.wait_for(|c| c.seq >= seq)).await,
            Ok(Ok(_))
        )
    }

    /// The scope token and, for a raw key, the key token of `(source, audience, key)`.
    pub fn tokens(
        &self,
        source: &str,
        audience: &Audience,
        key: Option<&str>,
    ) -> (Token, Option<Token>) {
        let salt = &self.shared().store.meta().salt;
        (
            salt.scope(source, audience),
            key.map(|k| salt.key(source, audience, k)),
        )
    }

    /// The catch-up read of §3.8 (poll, stream connect, lag recovery) through the
    /// per-process semaphore of `catchUpConcurrency`. The read runs in its own task that
    /// holds the permit, so a caller that gives up does not free a slot early.
    ///
    /// # Errors
    /// [`SyncError::Busy`] when no slot frees within `catchUpWait` (answer 503), store
    /// failures otherwise. A bad cursor is a reset, never an error.
    pub async fn read_after(
        &self,
        cursor: Option<&str>,
        audiences: &AudienceSet,
    ) -> Result<ReadAfter, SyncError> {
        let shared = self.shared();
        let permit = match tokio::time::timeout(
            ms(shared.limits.catch_up_wait()),
            shared.catch_up.clone().acquire_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(SyncError::Closed),
            Err(_) => return Err(SyncError::Busy),
        };
        let store = shared.store.clone();
        let cursor = cursor.map(str::to_owned);
        let audiences = audiences.clone();
        let limit = size(shared.limits.catch_up_rows());
        tokio::spawn(async move {
            let _permit = permit;
            crate::store::read_after(&*store, cursor.as_deref(), &audiences, limit).await
        })
        .await
        .map_err(|e| SyncError::Store(format!("catch-up read: {e}")))?
    }

    /// Whether log writes have failed for longer than `logFailureGrace`: `/ui/poll` and
    /// `/ui/events` answer 503 until a write succeeds (§3.5 step 5).
    pub fn degraded(&self) -> bool {
        self.shared().degraded.load(Ordering::Relaxed)
    }

    /// Whether the tailer follows the log: it runs (the service was not shut down) and its
    /// last read of the log succeeded. `false` while the log cannot be read, so events
    /// written by this or another process reach nobody here (a readiness probe).
    pub fn tailing(&self) -> bool {
        self.shared().tailing.load(Ordering::Relaxed)
    }

    /// The counters so far.
    pub fn stats(&self) -> SyncStats {
        let c = &self.shared().counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SyncStats {
            drafts: get(&c.drafts),
            rows: get(&c.rows),
            merged: get(&c.merged),
            overflowed: get(&c.overflowed),
            resets: get(&c.resets),
            append_failures: get(&c.append_failures),
            tail_failures: get(&c.tail_failures),
            tailed: get(&c.tailed),
            prune_failures: get(&c.prune_failures),
            pruned_rows: get(&c.pruned_rows),
            log_rows: get(&c.log_rows),
        }
    }

    /// Stops the service: queued drafts are written (one attempt; none while sync is
    /// degraded and the attempt in flight has not answered), then the appender, the
    /// tailer and the pruner end. Drafts the log did not take are logged as lost and their
    /// waiters get the error. Later records fail with [`SyncError::Closed`]. Not bounded
    /// by itself while an append hangs and sync is not yet degraded (up to
    /// `logFailureGrace`): a caller with a deadline wraps it in a timeout.
    pub async fn shutdown(&self) {
        self.inner.stop.send_replace(true);
        let tasks = std::mem::take(&mut *lock(&self.inner.tasks));
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!(target: "ui_sync", error = %e, "a change log task ended abnormally");
            }
        }
    }
}

impl Shared {
    /// Merges drafts with the same (source, audience, raw key, rs), summing `n`.
    fn merge(&self, jobs: Vec<Job>) -> Vec<Pending> {
        let salt = &self.store.meta().salt;
        let drafts = jobs.len();
        let mut index: HashMap<Draft, usize> = HashMap::with_capacity(drafts);
        let mut out: Vec<Pending> = Vec::new();
        for job in jobs {
            if let Some(&i) = index.get(&job.draft) {
                let p = &mut out[i];
                p.row.n = p.row.n.saturating_add(1);
                p.row.at_ms = p.row.at_ms.max(job.at_ms);
                p.waiters.extend(job.waiter);
                continue;
            }
            let d = &job.draft;
            let row = NewRow {
                source: d.source.clone(),
                audience: d.audience.clone(),
                scope: salt.scope(&d.source, &d.audience),
                key: d
                    .key
                    .as_deref()
                    .map(|k| salt.key(&d.source, &d.audience, k)),
                rs: d.rs.clone(),
                op: Op::Change,
                n: 1,
                at_ms: job.at_ms,
            };
            index.insert(job.draft, out.len());
            out.push(Pending {
                row,
                waiters: job.waiter.into_iter().collect(),
            });
        }
        let c = &self.counters;
        c.drafts.fetch_add(drafts as u64, Ordering::Relaxed);
        c.merged
            .fetch_add((drafts - out.len()) as u64, Ordering::Relaxed);
        out
    }

    /// Adds the overflow set's rows: one whole-source row per pair, or one reset row when
    /// the set overflowed too. Clears the set.
    fn take_overflow(&self, out: &mut Vec<Pending>) {
        let (pairs, full, dropped) = {
            let mut o = lock(&self.overflow);
            (
                std::mem::take(&mut o.pairs),
                std::mem::replace(&mut o.full, false),
                std::mem::replace(&mut o.dropped, 0),
            )
        };
        let salt = &self.store.meta().salt;
        let at_ms = now_ms();
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX).max(1);
        if full {
            let global = Audience::global();
            out.push(Pending {
                row: NewRow {
                    source: RESET_SOURCE.into(),
                    scope: salt.scope(RESET_SOURCE, &global),
                    audience: global,
                    key: None,
                    rs: None,
                    op: Op::Reset,
                    n: count(dropped),
                    at_ms,
                },
                waiters: Vec::new(),
            });
            self.counters.resets.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut pairs: Vec<_> = pairs.into_iter().collect();
        pairs.sort();
        for ((source, audience), n) in pairs {
            out.push(Pending {
                row: NewRow {
                    scope: salt.scope(&source, &audience),
                    source,
                    audience,
                    key: None,
                    rs: None,
                    op: Op::Change,
                    n: count(n),
                    at_ms,
                },
                waiters: Vec::new(),
            });
        }
    }

    /// At shutdown, a batch the log did not take: its waiters get `error`, and the loss is
    /// said (pages learn of those changes only at their next read).
    fn give_up(&self, batch: Vec<Pending>, error: &SyncError) {
        tracing::warn!(
            target: "ui_sync",
            events = batch.len(),
            %error,
            "stopping: change events the log did not take are lost"
        );
        for waiter in batch.into_iter().flat_map(|p| p.waiters) {
            // A waiter that gave up has nothing left to tell.
            let _ = waiter.send(Err(error.clone()));
        }
    }

    /// Writes one batch, retrying with backoff until it succeeds or the service stops.
    ///
    /// Degraded mode follows the failures, not the retries (§3.5 step 5): sync turns
    /// degraded the moment the streak's first failure is `logFailureGrace` old, even between
    /// retries or while an attempt hangs, and while degraded the batch is retried every
    /// [`DEGRADED_PROBE`], so the 503s end within that long of the database healing. The
    /// first failure of a streak is logged at warn level, once.
    async fn write(
        &self,
        batch: Vec<Pending>,
        failing_since: &mut Option<Instant>,
        stop: &mut watch::Receiver<bool>,
    ) {
        let rows: Vec<NewRow> = batch.iter().map(|p| p.row.clone()).collect();
        let grace = ms(self.limits.log_failure_grace());
        let mut delay = APPEND_RETRY_MIN;
        loop {
            let attempt = self.store.append(rows.clone());
            tokio::pin!(attempt);
            // An attempt that hangs is a failure in progress: with no streak yet, the grace
            // runs from its start, so a store that never answers turns sync degraded (and
            // its writers get 503s) instead of holding every waiter without a word.
            let started = Instant::now();
            let result = loop {
                if self.degraded.load(Ordering::Relaxed) {
                    // Degraded, the database is known not to answer: a shutdown does not
                    // wait for this attempt (it may never end), it gives the batch up.
                    tokio::select! {
                        result = attempt.as_mut() => break result,
                        () = stopped(stop) => {
                            let error = SyncError::Store(
                                "the service stopped while the change log did not answer".into(),
                            );
                            self.give_up(batch, &error);
                            return;
                        }
                    }
                }
                let degrade_at = failing_since.unwrap_or(started) + grace;
                tokio::select! {
                    result = attempt.as_mut() => break result,
                    () = tokio::time::sleep_until(degrade_at) => {
                        if failing_since.is_none() {
                            tracing::warn!(
                                target: "ui_sync",
                                waited_ms = self.limits.log_failure_grace(),
                                "change log append has not answered; sync is degraded until it does"
                            );
                        }
                        self.set_degraded();
                    }
                }
            };
            match result {
                Ok(seqs) => {
                    // A streak ends here: one of failures, or of one append that hung
                    // until sync turned degraded.
                    let failed = failing_since.take().is_some();
                    let was_degraded = self.degraded.swap(false, Ordering::Relaxed);
                    if failed || was_degraded {
                        tracing::info!(
                            target: "ui_sync",
                            was_degraded,
                            "change log appends succeed again; the failure streak is over"
                        );
                    }
                    self.counters
                        .rows
                        .fetch_add(seqs.len() as u64, Ordering::Relaxed);
                    self.tail_poke.notify_one();
                    for (pending, seq) in batch.into_iter().zip(seqs) {
                        for waiter in pending.waiters {
                            // A waiter that gave up has nothing left to tell.
                            let _ = waiter.send(Ok(Cursor {
                                epoch: self.epoch.clone(),
                                seq,
                            }));
                        }
                    }
                    return;
                }
                Err(error) => {
                    self.counters
                        .append_failures
                        .fetch_add(1, Ordering::Relaxed);
                    let since = match *failing_since {
                        Some(since) => since,
                        None => {
                            tracing::warn!(
                                target: "ui_sync",
                                %error,
                                "change log append failed; retrying with backoff (sync turns degraded after {} ms of failures)",
                                self.limits.log_failure_grace()
                            );
                            *failing_since.insert(Instant::now())
                        }
                    };
                    if since.elapsed() >= grace {
                        self.set_degraded();
                    }
                    if *stop.borrow() {
                        self.give_up(batch, &error);
                        return;
                    }
                    let degrade_at = since + grace;
                    let mut retry_at = Instant::now() + delay;
                    if self.degraded.load(Ordering::Relaxed) {
                        retry_at = retry_at.min(Instant::now() + DEGRADED_PROBE);
                    } else if degrade_at <= retry_at {
                        // Degraded exactly when the streak is `grace` old; from then on
                        // the database is probed every `DEGRADED_PROBE`.
                        tokio::select! {
                            () = tokio::time::sleep_until(degrade_at) => self.set_degraded(),
                            () = stopped(stop) => {}
                        }
                        retry_at = retry_at.min(degrade_at + DEGRADED_PROBE);
                    }
                    tokio::select! {
                        () = tokio::time::sleep_until(retry_at) => {}
                        () = stopped(stop) => {}
                    }
                    delay = (delay * 2).min(APPEND_RETRY_MAX);
                }
            }
        }
    }

    fn set_degraded(&self) {
        if !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::error!(
                target: "ui_sync",
                "change log appends have failed for {} ms: sync is degraded, /ui/events and /ui/poll answer 503",
                self.limits.log_failure_grace()
            );
        }
    }

    /// Reads the log after `last` until caught up: latest index, then head, then the hub.
    async fn catch_up(&self, last: &mut Seq) {
        let limit = size(self.limits.tailer_batch());
        loop {
            let rows = match self.store.tail(*last, limit).await {
                Ok(rows) => rows,
                Err(e) => {
                    // Retried at the next tick or wake-up; `tailing` reports the streak.
                    if self.tailing.load(Ordering::Relaxed) {
                        tracing::warn!(target: "ui_sync", error = %e, "change log tail failed");
                    }
                    self.counters.tail_failures.fetch_add(1, Ordering::Relaxed);
                    self.tailing.store(false, Ordering::Relaxed);
                    return;
                }
            };
            if !self.tailing.swap(true, Ordering::Relaxed) {
                tracing::info!(target: "ui_sync", "change log tail succeeds again");
            }
            let (Some(first), Some(end)) = (rows.first(), rows.last()) else {
                return;
            };
            let (first, end) = (first.seq, end.seq);
            let full = rows.len() >= limit;
            self.counters
                .tailed
                .fetch_add(rows.len() as u64, Ordering::Relaxed);
            lock(&self.latest).apply(&rows);
            *last = end;
            self.head.send_replace(Cursor {
                epoch: self.epoch.clone(),
                seq: end,
            });
            let _ = self.hub.send(Arc::new(Batch {
                first,
                last: end,
                rows,
                published: Some(Instant::now()),
            }));
            if !full {
                return;
            }
        }
    }
}

/// The appender (§3.5, §11.3): the first draft opens the window; at its end the queue is
/// drained, merged and written in one batch with the overflow rows.
async fn appender(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<Job>,
    mut stop: watch::Receiver<bool>,
) {
    let window = ms(shared.limits.appender_window());
    let max_drain = size(shared.limits.appender_queue());
    let mut failing_since = None;
    let mut closing = false;
    loop {
        let mut jobs = Vec::new();
        if !closing {
            tokio::select! {
                job = rx.recv() => match job {
                    Some(job) => jobs.push(job),
                    None => closing = true,
                },
                () = shared.overflow_poke.notified() => {}
                () = stopped(&mut stop) => closing = true,
            }
            if !closing {
                tokio::select! {
                    () = tokio::time::sleep(window) => {}
                    () = stopped(&mut stop) => closing = true,
                }
            }
        }
        if closing {
            rx.close();
        }
        while jobs.len() < max_drain {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let mut batch = shared.merge(jobs);
        shared.take_overflow(&mut batch);
        if batch.is_empty() {
            if closing {
                return;
            }
            continue;
        }
        shared.write(batch, &mut failing_since, &mut stop).await;
    }
}

/// The tailer (§6.1): woken by local pokes, by `changed_elsewhere` every `sqliteCheck` ms,
/// and unconditionally every `postgresTick` ms as a safety net.
async fn tailer(shared: Arc<Shared>, mut last: Seq, mut stop: watch::Receiver<bool>) {
    /// Marks the service as not tailing when the tailer ends, however it ends.
    struct Stopped<'a>(&'a AtomicBool);
    impl Drop for Stopped<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Relaxed);
        }
    }
    let _stopped = Stopped(&shared.tailing);
    let mut check = tokio::time::interval(ms(shared.limits.sqlite_check()));
    check.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut tick = tokio::time::interval(ms(shared.limits.postgres_tick()));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let go = tokio::select! {
            () = stopped(&mut stop) => return,
            () = shared.tail_poke.notified() => true,
            _ = tick.tick() => true,
            _ = check.tick() => shared.store.changed_elsewhere().await.unwrap_or(true),
        };
        if go {
            shared.catch_up(&mut last).await;
        }
    }
}

/// The pruner (§3.7): every `pruneInterval`, never in the process's first 60 s.
async fn pruner(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let every = ms(shared.limits.prune_interval());
    let mut ticker = tokio::time::interval_at(Instant::now() + PRUNE_COLD_START.max(every), every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let retention = Retention {
        age_ms: i64::try_from(shared.limits.retention_age()).unwrap_or(i64::MAX),
        rows: shared.limits.retention_rows(),
        batch: shared.limits.prune_batch(),
        batches: shared.limits.prune_batches(),
    };
    let mut failing = false;
    loop {
        tokio::select! {
            () = stopped(&mut stop) => return,
            _ = ticker.tick() => {}
        }
        let c = &shared.counters;
        match shared.store.prune(now_ms(), retention).await {
            Ok(report) => {
                if std::mem::take(&mut failing) {
                    tracing::info!(target: "ui_sync", "change log pruning succeeds again");
                }
                c.pruned_rows.fetch_add(report.deleted, Ordering::Relaxed);
                c.log_rows.store(report.rows, Ordering::Relaxed);
            }
            Err(error) => {
                c.prune_failures.fetch_add(1, Ordering::Relaxed);
                // A warning on the first failure of a streak only (§3.7); the counter
                // counts every one.
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(
                        target: "ui_sync",
                        %error,
                        "change log pruning failed; the log keeps growing until a run succeeds"
                    );
                }
            }
        }
    }
}
