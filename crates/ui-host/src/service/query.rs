//! `ui.query` (`host.md` §6): admission of a stored block's declared query, its arguments
//! (remembered per revision, query and input), and serving under the admission table's lock
//! (cache, in-flight join, attempt windows, slots; `sync.md` §8.4–§8.5 for feed sources).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use ui_compiler::{Block, query_arguments};
use ui_core::{HostCode, Record, Token, Value};

use super::key::{QueryIdRef, QueryKeyRef, ShareKey, Structural, reading_key_text};
use super::memo::MemoKeyRef;
use super::read::ShareDecision;
use super::table::{CacheEntry, InFlight};
use super::{OnDrop, UiQueries, lock};
use crate::changes::{ChangeFeed, ChangeIndex, ChangeScope};
use crate::clock::BudgetClock;
use crate::payload::QueryPayload;
use crate::reading::{CachedReading, HostError, QueryAnswer, QueryReading, ReadingSync};
use crate::source::{ChatInfo, ReadRequest, UiSource};
use crate::store::{KeptReading, Lease};

/// What serving a `ui.query` gives before its reason is cut: a reading made for the
/// request, or a cached reading as is.
enum Served {
    Made(Box<QueryReading>),
    Cached(Arc<CachedReading>),
}

impl From<QueryReading> for Served {
    fn from(reading: QueryReading) -> Self {
        Served::Made(Box::new(reading))
    }
}

/// The outcome of admission under the table lock.
enum Admit {
    Answer(QueryReading),
    /// The cached reading of the key, fresh and reflecting every change: answered as is.
    Cached(Arc<CachedReading>),
    Wait(super::table::Pending),
    /// A read in flight started before the newest change: wait, then decide again.
    WaitThenRetry(super::table::Pending),
    /// A change-driven request found no free slot (with the cached reading, if any).
    NoSlot(Option<QueryReading>),
    Start(
        ShareDecision,
        watch::Sender<Option<QueryReading>>,
        super::table::Pending,
    ),
}

/// How often a change-driven request looks for a free slot while it waits (ms).
const SLOT_POLL_MS: u64 = 50;

/// Everything a read needs once the request is admitted (§6.1 done).
struct ReadPlan {
    share: ShareKey,
    source: Arc<dyn UiSource>,
    info: Arc<ChatInfo>,
    access: Arc<Value>,
    args: Structural<Record>,
    feed: Option<Arc<Feed>>,
}

/// What §6.1 admitted a request with, before its own `authorize`.
struct Admitted {
    source_name: Arc<str>,
    source: Arc<dyn UiSource>,
    info: Arc<ChatInfo>,
    access: Arc<Value>,
    args: Structural<Record>,
    /// The store's lease on the block, the access and the chat's info, when all three came
    /// under it.
    lease: Option<Lease>,
}

/// A request's plan: kept from an earlier request of the same prepared payload, or
/// admitted now.
enum Planned {
    Kept(Arc<ReadPlan>),
    Admitted(Box<Admitted>),
}

/// How many feeds the service remembers ([`UiQueries::feed_of`]); when full it forgets
/// them all and starts again (a page's readings name a handful, so it refills at once).
const MAX_MEMOIZED_FEEDS: usize = 1024;

/// A feed source's reading: its tokens and whether the feed is complete.
#[derive(Debug, Clone)]
pub(super) struct Feed {
    scope: ChangeScope,
    complete: bool,
}

/// A `ui.query` payload with what answering it derives from the payload alone, worked out
/// once: the digest of the query it names and, after a request of it was admitted, its
/// evaluated and parsed arguments. A host that meets the same payload again and again (a
/// page re-reads its readings with the very same body) keeps one and answers it with
/// [`UiQueries::query_prepared`]; the answer is the one [`UiQueries::query_answer`] gives
/// for the payload.
///
/// The arguments are a function of the payload: a revision names one block content, whose
/// query names one source of the service's fixed registry (as for the service's own
/// argument memo). When the store admitted the request under a [`Lease`] (the block, the
/// item's granted access and the chat's info), the whole plan of the read is kept too
/// (arguments, access, chat info, the shared read's key and feed), and the next request
/// asks the store nothing while the lease holds; the source's `authorize` runs on every
/// request. What is kept is for the service that worked it out; any other service works it
/// out again.
///
/// ```
/// # use ui_host::{PreparedQuery, QueryPayload};
/// let payload = QueryPayload {
///     chat_id: "c1".into(),
///     item_id: "i1".into(),
///     block_id: "b1".into(),
///     revision: "r1".into(),
///     query: "$runs".into(),
///     values: Default::default(),
///     seen: None,
/// };
/// let prepared = PreparedQuery::new(payload.clone());
/// assert_eq!(prepared.payload(), &payload);
/// ```
#[derive(Debug)]
pub struct PreparedQuery {
    payload: QueryPayload,
    derived: Derived,
}

impl PreparedQuery {
    /// `payload`, prepared.
    pub fn new(payload: QueryPayload) -> Self {
        let derived = Derived::of(&payload);
        PreparedQuery { payload, derived }
    }

    /// The payload.
    pub fn payload(&self) -> &QueryPayload {
        &self.payload
    }
}

/// What [`PreparedQuery`] keeps beside its payload.
#[derive(Debug)]
struct Derived {
    /// [`QueryIdRef::of`]'s digest of the payload.
    id_digest: u64,
    /// The parsed arguments, with the number of the service that parsed them.
    args: OnceLock<(u64, Structural<Record>)>,
    /// The plan of the last request admitted under a store's lease ([`Derived::keep`]).
    plan: Mutex<Option<KeptPlan>>,
}

/// A plan kept under a store's lease, for the service that made it.
struct KeptPlan {
    instance: u64,
    /// Whether the service had its change index when it made the plan (a plan made
    /// before has no feed).
    indexed: bool,
    lease: Lease,
    plan: Arc<ReadPlan>,
}

impl std::fmt::Debug for KeptPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptPlan")
            .field("instance", &self.instance)
            .field("indexed", &self.indexed)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Derived {
    fn of(p: &QueryPayload) -> Self {
        Derived {
            id_digest: QueryIdRef::of(p).digest(),
            args: OnceLock::new(),
            plan: Mutex::new(None),
        }
    }

    /// The plan kept for `instance` while its lease holds.
    fn planned(&self, instance: u64, indexed: bool) -> Option<Planned> {
        let kept = lock(&self.plan);
        let kept = kept.as_ref()?;
        (kept.instance == instance && kept.indexed == indexed && kept.lease.holds())
            .then(|| Planned::Kept(Arc::clone(&kept.plan)))
    }

    /// Keeps `plan`, made by `instance` under `lease`, for the next request.
    fn keep(&self, instance: u64, indexed: bool, lease: Lease, plan: &Arc<ReadPlan>) {
        *lock(&self.plan) = Some(KeptPlan {
            instance,
            indexed,
            lease,
            plan: Arc::clone(plan),
        });
    }
}

fn busy(now: u64) -> QueryReading {
    QueryReading::failed(
        now,
        Some(HostCode::Busy.as_str()),
        "Too many reads are running; try again shortly.",
    )
}

impl UiQueries {
    // ---- ui.query (§6) ----

    /// Answers `ui.query` (§6.1–6.2). Always a reading; never fails.
    pub async fn query(self: &Arc<Self>, p: &QueryPayload) -> QueryReading {
        self.query_answer(p).await.into_reading()
    }

    /// [`UiQueries::query`] as a [`QueryAnswer`]: the same reading, and for a cached
    /// reading answered as is, its JSON text written once when it was cached (an HTTP
    /// host sends those bytes without serializing the reading again).
    pub async fn query_answer(self: &Arc<Self>, p: &QueryPayload) -> QueryAnswer {
        self.answer(p, &Derived::of(p)).await
    }

    /// [`UiQueries::query_answer`] of a prepared payload: the same answer, without working
    /// out again what `prepared` remembers.
    pub async fn query_prepared(self: &Arc<Self>, prepared: &PreparedQuery) -> QueryAnswer {
        self.answer(&prepared.payload, &prepared.derived).await
    }

    /// [`UiQueries::query_answer`] of `p`, whose `derived` is its own.
    async fn answer(self: &Arc<Self>, p: &QueryPayload, derived: &Derived) -> QueryAnswer {
        let limit = self.limits.reason();
        match self.query_uncut(p, derived).await {
            Served::Made(reading) => QueryAnswer::made(*reading, limit),
            Served::Cached(cached) => QueryAnswer::cached(cached, limit),
        }
    }

    /// [`UiQueries::query_answer`] before its reason is cut to the configured limit.
    async fn query_uncut(self: &Arc<Self>, p: &QueryPayload, derived: &Derived) -> Served {
        let indexed = self.changes.get().is_some();
        let plan = match derived.planned(self.instance, indexed) {
            Some(plan) => plan,
            None => match self.admit_request(p, derived).await {
                Ok(admitted) => admitted,
                Err(refused) => return refused,
            },
        };
        let (source, info, access, args) = match &plan {
            Planned::Kept(plan) => (&plan.source, &plan.info, &plan.access, &plan.args),
            Planned::Admitted(a) => (&a.source, &a.info, &a.access, &a.args),
        };
        // Each request's own `authorize`, bounded by the read timeout: a hanging one fails
        // only its own request (`timed-out`), never the others sharing its source read.
        let Some(authorized) = self
            .within_timeout(source.authorize(info, access, args.value()))
            .await
        else {
            return QueryReading::failed(
                self.clock.now_ms(),
                Some(HostCode::TimedOut.as_str()),
                "The source's authorization did not answer in time.",
            )
            .into();
        };
        if let Err(e) = authorized {
            return QueryReading::refused(self.clock.now_ms(), None, "")
                .with_host_error(&e)
                .into();
        }
        let plan = match plan {
            Planned::Kept(plan) => plan,
            Planned::Admitted(a) => {
                let share = ShareKey::shared(&a.source_name, &a.args, &a.access);
                let feed = a
                    .source
                    .changes()
                    .zip(self.changes.get())
                    .and_then(|(changes, index)| self.feed_of(&share, changes, &**index));
                let plan = Arc::new(ReadPlan {
                    share,
                    source: a.source,
                    info: a.info,
                    access: a.access,
                    args: a.args,
                    feed,
                });
                if let Some(lease) = a.lease {
                    derived.keep(self.instance, indexed, lease, &plan);
                }
                plan
            }
        };
        self.serve(p, derived.id_digest, &plan).await
    }

    /// §6.1: the stored block, the declared query and its source, the arguments, the
    /// writing chat's access and the chat's info, or the refusal. With the store's lease
    /// when every fact came under it ([`StoredBlock::lease`](crate::StoredBlock::lease)).
    async fn admit_request(
        self: &Arc<Self>,
        p: &QueryPayload,
        derived: &Derived,
    ) -> Result<Planned, Served> {
        let refused = |code: Option<HostCode>, reason: &str| {
            Served::from(QueryReading::refused(
                self.clock.now_ms(),
                code.map(HostCode::as_str),
                reason,
            ))
        };
        let Some(stored) = self
            .admitted_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return Err(refused(
                Some(HostCode::BlockStale),
                "The block changed or is not final.",
            ));
        };
        let block = &stored.block;
        let Some(query) = block
            .queries
            .get(&p.query)
            .filter(|_| block.queries.len() as u64 <= self.ui_host_limits.queries())
        else {
            return Err(refused(
                Some(HostCode::QueryUndeclared),
                "The block does not declare this query.",
            ));
        };
        let Some((source_name, source)) = self.host.sources().named(&query.source) else {
            return Err(refused(
                Some(HostCode::SourceUnregistered),
                "The query's source is not registered.",
            ));
        };
        let source = Arc::clone(source);
        let args = match derived.args.get() {
            Some((instance, args)) if *instance == self.instance => args.clone(),
            _ => match self.arguments(block, &p.query, &p.values, &*source) {
                Ok(args) => {
                    // Kept once: a payload another service prepared keeps that one's.
                    derived.args.get_or_init(|| (self.instance, args.clone()));
                    args
                }
                Err(reason) => return Err(refused(None, &reason)),
            },
        };
        let Some((access, stored_access)) = self
            .access_of(stored.author_chat_id.as_deref(), &p.chat_id, &p.item_id)
            .await
        else {
            return Err(refused(
                Some(HostCode::AccessUnavailable),
                "The writing chat's access is not available.",
            ));
        };
        let Some(info) = self.store.chat_info(&p.chat_id).await else {
            return Err(refused(Some(HostCode::BlockStale), "The chat is gone."));
        };
        Ok(Planned::Admitted(Box::new(Admitted {
            source_name: Arc::clone(source_name),
            source,
            info,
            access,
            args,
            // An access captured now (not the store's record) is not under the lease.
            lease: stored.lease.filter(|_| stored_access),
        })))
    }

    /// The feed of a reading of `share`'s source with its arguments and access: the
    /// audience and keys the source's `changes` names, and their tokens in `index`.
    /// Remembered per [`ShareKey`] (source, arguments and access, compared structurally):
    /// a source's feed is a function of its arguments and access, and the index gives a
    /// `(source, audience, keys)` the same tokens for its lifetime (a log's salt is fixed),
    /// so a remembered feed is what computing it again would give.
    fn feed_of(
        &self,
        share: &ShareKey,
        changes: &dyn ChangeFeed,
        index: &dyn ChangeIndex,
    ) -> Option<Arc<Feed>> {
        if let Some(feed) = lock(&self.feeds).get(share) {
            return feed.clone();
        }
        let (source, args, access) = share.parts();
        let feed = changes.audience(args, access).and_then(|audience| {
            let keys = changes.keys(args);
            let scope = index.scope(source, &audience, &keys)?;
            Some(Arc::new(Feed {
                scope,
                complete: changes.complete(),
            }))
        });
        let mut feeds = lock(&self.feeds);
        if feeds.len() >= MAX_MEMOIZED_FEEDS {
            feeds.clear();
        }
        feeds.insert(share.clone(), feed.clone());
        feed
    }

    /// §6.1 steps 4–6: validated input, the stored definition's arguments
    /// (`uiQueryArguments`), the source's argument schema; remembered per block revision,
    /// query and input ([`ArgumentMemo`]).
    pub(super) fn arguments(
        &self,
        block: &Block,
        name: &str,
        values: &Record,
        source: &dyn UiSource,
    ) -> Result<Structural<Record>, String> {
        let memo_key = block
            .revision
            .as_deref()
            .map(|revision| MemoKeyRef::new(revision, &block.id, name, values));
        if let Some(args) = memo_key.as_ref().and_then(|k| lock(&self.arguments).get(k)) {
            return Ok(args);
        }
        let clock = BudgetClock(&*self.clock);
        let args = query_arguments(block, name, values, self.ui_limits, &clock)
            .map_err(|f| f.message.to_string())?;
        let Value::Record(args) = source.args().parse(&Value::record(args))? else {
            return Err("The parsed arguments are not a record.".to_owned());
        };
        let args = Structural::new(args);
        if let Some(k) = memo_key {
            lock(&self.arguments).insert(&k, args.clone());
        }
        Ok(args)
    }

    /// §6.2 steps 9–18, amended by `sync.md` §8.4–§8.5 for a source with a change feed.
    async fn serve(self: &Arc<Self>, p: &QueryPayload, id_digest: u64, plan: &ReadPlan) -> Served {
        let ReadPlan {
            share,
            source,
            info,
            access,
            args,
            feed,
        } = plan;
        let id = QueryIdRef::with_digest(p, id_digest);
        let (identity, key) = (
            QueryKeyRef::identity(id),
            QueryKeyRef::reading(id, share.args()),
        );
        // A change-driven request: the seq that made the page ask (this epoch only).
        let seen = feed.as_ref().and(p.seen.as_deref()).and_then(|s| {
            let (epoch, seq) = s.split_once('.')?;
            let index = self.changes.get()?;
            (epoch == index.epoch())
                .then(|| seq.parse::<u64>().ok())
                .flatten()
        });
        if let (Some(seen), Some(index)) = (seen, self.changes.get())
            && seen > index.head()
            && !index
                .catch_up_to(seen, self.sync_limits.seen_catch_up())
                .await
            && let Some(mut cached) = self.cached(&key)
        {
            // This instance cannot see `seen` yet: a read now would not reflect it either,
            // so the cached reading answers, marked stale (`sync.md` §8.4 steps 1–2).
            cached.stale_by = Some(seen);
            cached.retry_after_ms = Some(self.sync_limits.change_gap());
            return cached.into();
        }
        // Set when a change-driven request first finds no free slot.
        let mut slot_deadline = None;
        let mut rounds = 0;
        loop {
            rounds += 1;
            let rel = match (feed, self.changes.get()) {
                (Some(f), Some(index)) => index.relevant(&f.scope).max(seen.unwrap_or(0)),
                _ => 0,
            };
            let admit = self.admit(
                p,
                (&key, &identity, share),
                feed.as_ref(),
                rel,
                seen.is_some(),
            );
            match admit {
                Admit::Answer(reading) => return reading.into(),
                Admit::Cached(cached) => return Served::Cached(cached),
                Admit::Wait(pending) => return wait(pending, self.clock.now_ms()).await.into(),
                Admit::WaitThenRetry(pending) => {
                    // A read that started before the newest change may not reflect it:
                    // decide again once it ends (its reading is cached by then), at most
                    // three times; then its own answer goes out, marked as behind `rel`.
                    let mut reading = wait(pending, self.clock.now_ms()).await;
                    if rounds < 3 {
                        continue;
                    }
                    if reading.read_id.is_some() {
                        reading.stale_by = Some(rel);
                        reading.retry_after_ms = Some(self.sync_limits.change_gap());
                    }
                    return reading.into();
                }
                Admit::NoSlot(cached) => {
                    // A change-driven request waits up to the slot wait for a slot.
                    let now = self.clock.now_ms();
                    let deadline = *slot_deadline.get_or_insert(now + self.sync_limits.slot_wait());
                    if now < deadline && rounds < 1_000 {
                        self.clock.sleep(SLOT_POLL_MS.min(deadline - now)).await;
                        continue;
                    }
                    return match cached {
                        Some(mut reading) => {
                            reading.stale_by = Some(rel);
                            reading.retry_after_ms = Some(self.sync_limits.change_gap());
                            reading
                        }
                        None => busy(now),
                    }
                    .into();
                }
                Admit::Start(decision, tx, rx) => {
                    let this = Arc::clone(self);
                    let version = decision.version;
                    let started = decision.started;
                    let kept = (p.chat_id.clone(), reading_key_text(p, args.value()));
                    let request = ReadRequest {
                        info: Arc::clone(info),
                        args: Arc::unwrap_or_clone(Arc::clone(args.value())),
                        access: Arc::clone(access),
                        cancel: CancellationToken::new(),
                    };
                    let chat_id = p.chat_id.clone();
                    let key = key.to_key();
                    let sync =
                        feed.as_ref()
                            .zip(self.changes.get())
                            .map(|(f, index)| ReadingSync {
                                epoch: index.epoch(),
                                version,
                                scope: f.scope.scope.to_hex(),
                                keys: f.scope.keys.iter().map(Token::to_hex).collect(),
                                feed: if f.complete { "complete" } else { "partial" }.to_owned(),
                            });
                    // A read that panics (a host's schema, say) must not leave its flight
                    // behind: every later request for the key would join it and get no
                    // answer. Its waiters see the sender dropped and answer at once.
                    let mut unregister = OnDrop::new({
                        let (this, key) = (Arc::clone(&this), key.clone());
                        move || {
                            this.table.lock().inflight.swap_remove(&key);
                        }
                    });
                    let (share, source) = (share.clone(), Arc::clone(source));
                    tokio::spawn(async move {
                        let mut reading = this.drive(share, source, request, decision).await;
                        reading.sync = sync;
                        {
                            let mut t = this.table.lock();
                            // Done here, under the same lock as the reading's caching.
                            unregister.disarm();
                            t.inflight.swap_remove(&key);
                            if let Some(read_id) = reading.read_id.clone() {
                                let cached =
                                    CachedReading::new(reading.clone(), this.limits.reason());
                                let entry = CacheEntry {
                                    key,
                                    chat_id,
                                    cached: Arc::new(cached),
                                    version,
                                    started,
                                };
                                t.insert(read_id, entry, this.limits.cache_entries() as usize);
                            }
                        }
                        // A fresh reading is also kept by the store (for a choice that
                        // reaches another process), after the page has its answer.
                        let kept = reading
                            .is_fresh()
                            .then(|| KeptReading::new(kept.0, kept.1, reading.clone()));
                        let _ = tx.send(Some(reading));
                        if let Some(kept) = kept
                            && let Err(e) = this.store.keep_reading(kept).await
                        {
                            tracing::warn!(error = %e, "a fresh reading could not be kept for choices");
                        }
                    });
                    return wait(rx, self.clock.now_ms()).await.into();
                }
            }
        }
    }

    /// The newest cached reading of `key`, if any.
    fn cached(&self, key: &QueryKeyRef<'_>) -> Option<QueryReading> {
        let t = self.table.lock();
        t.newest
            .get(key)
            .and_then(|id| t.cache.get(id))
            .map(|e| e.cached.reading.clone())
    }

    /// Steps 9–13 under the table lock: answer from the cache, join a read in flight,
    /// refuse by the attempt windows or the slots, or start a read. `rel` is the newest
    /// relevant change for a feed source (0 otherwise); `change_driven` marks a request
    /// carrying `seen`.
    fn admit(
        &self,
        p: &QueryPayload,
        (key, identity, share): (&QueryKeyRef<'_>, &QueryKeyRef<'_>, &ShareKey),
        feed: Option<&Arc<Feed>>,
        rel: u64,
        change_driven: bool,
    ) -> Admit {
        let mut t = self.table.lock();
        let now = self.clock.now_ms();
        let window = self.ui_host_limits.refresh_milliseconds();
        let gap = self.sync_limits.change_gap();
        let entry = t
            .newest
            .get(key)
            .and_then(|id| t.cache.get(id))
            .map(|e| (Arc::clone(&e.cached), e.version, e.started));
        // A newer change than the cached reading reflects (feed sources only).
        let changed = feed.is_some() && entry.as_ref().is_some_and(|(_, v, _)| rel > *v);
        if let Some(flight) = t.inflight.get(key) {
            if feed.is_none() || flight.version >= rel {
                return Admit::Wait(flight.pending.clone());
            }
            return Admit::WaitThenRetry(flight.pending.clone());
        }
        if let Some((cached, _, started)) = &entry {
            let reading = &cached.reading;
            let fresh_window = now.saturating_sub(reading.read_at) < window;
            if fresh_window && !changed {
                self.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Admit::Cached(Arc::clone(cached));
            }
            if changed && now.saturating_sub(*started) < gap {
                let mut stale = reading.clone();
                stale.stale_by = Some(rel);
                stale.retry_after_ms = Some(gap - now.saturating_sub(*started));
                return Admit::Answer(stale);
            }
        }
        let key_limited = t.attempts.get(key).is_some_and(|&at| {
            now.saturating_sub(at) < window
                // With a feed, a newer change allows a read 1 s after the previous start.
                && !(changed && now.saturating_sub(at) >= gap)
        });
        let identity_limited = t
            .attempts
            .get(identity)
            .is_some_and(|&at| now.saturating_sub(at) < self.limits.read_gap());
        if key_limited || identity_limited {
            if change_driven {
                // Change-driven requests never get `refresh-limit` (§8.5.2).
                return match entry {
                    Some((cached, _, _)) => {
                        let mut reading = cached.reading.clone();
                        reading.stale_by = Some(rel);
                        reading.retry_after_ms = Some(gap);
                        Admit::Answer(reading)
                    }
                    None => {
                        let mut r = busy(now);
                        r.retry_after_ms = Some(gap);
                        Admit::Answer(r)
                    }
                };
            }
            return Admit::Answer(QueryReading::failed(
                now,
                Some(HostCode::RefreshLimit.as_str()),
                "This query was read moments ago; try again shortly.",
            ));
        }
        let capacity = self.limits.attempt_entries() as usize;
        // The source-read layer first: joining an identical read in flight, or reusing
        // one that reflects the change, calls no source and takes no slot.
        let decision = match self.share(share, feed.is_some(), rel, change_driven, now, window) {
            Some(decision) => decision,
            None => {
                if t.chat_slots.get(&p.chat_id).copied().unwrap_or(0)
                    >= self.limits.chat_read_slots() as usize
                    || t.slots >= self.limits.read_slots() as usize
                {
                    if change_driven {
                        return Admit::NoSlot(entry.map(|(c, _, _)| c.reading.clone()));
                    }
                    return Admit::Answer(busy(now));
                }
                let version = match (feed, self.changes.get()) {
                    (Some(_), Some(index)) => index.head(),
                    _ => 0,
                };
                let guard = self.table.occupy(&mut t, &p.chat_id);
                self.lead(share, guard, feed.is_some(), version, now)
            }
        };
        let key = key.to_key();
        t.attempt(key.clone(), now, capacity);
        t.attempt(identity.to_key(), now, capacity);
        let version = decision.version;
        let (tx, rx) = watch::channel(None);
        t.inflight.insert(
            key,
            InFlight {
                pending: rx.clone(),
                version,
            },
        );
        Admit::Start(decision, tx, rx)
    }
}

/// Waits for a pending read's outcome.
async fn wait(mut pending: super::table::Pending, now: u64) -> QueryReading {
    match pending.wait_for(Option::is_some).await {
        Ok(reading) => reading.clone().unwrap_or_else(|| lost(now)),
        Err(_) => lost(now),
    }
}

fn lost(now: u64) -> QueryReading {
    QueryReading::failed(now, None, "The read ended without an answer.")
}

impl QueryReading {
    /// The same reading with the reason and code of a host's failure.
    pub(super) fn with_host_error(mut self, error: &HostError) -> Self {
        self.code = error.code().map(str::to_owned);
        self.reason = Some(crate::reading::reason_text(error.reason()));
        self
    }
}
