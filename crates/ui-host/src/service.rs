//! [`UiQueries`]: the host service (`host.md` §4, §6–§9, §12–§13).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use indexmap::IndexMap;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use ui_compiler::{Block, has_fence, may_reference_host, query_arguments, resolve_choice};
use ui_core::text::truncate_utf16;
use ui_core::{
    Budget, HostCode, HostLimits, Record, ReplyLimits, SyncLimits, UiHostLimits, UiLimits, Value,
    WireCode,
};
use ui_links::{LinkResolution, link_targets};

use crate::changes::{ChangeIndex, ChangeScope};
use crate::clock::{BudgetClock, HostClock};
use crate::payload::{ChoicePayload, LinkPayload, QueryPayload};
use crate::reading::ReadingSync;
use crate::reading::{HostError, QueryReading, WireRefusal};
use crate::source::{ChatInfo, ReadRequest, UiHost, UiSource};
use crate::store::{
    AccessRecord, ChoiceAnswer, ChoiceOrigin, FrozenBlock, StoreError, StoredBlock, StoredItem,
    UiQueryState, UiStore,
};
use crate::table::{CacheEntry, InFlight, SharedTable};

/// The live-query service of one host: reads registered sources for stored blocks with the
/// writing chat's captured access, caches and bounds the reads, resolves links, issues the
/// query values of choices and freezes the first readings of final replies.
pub struct UiQueries {
    host: Arc<dyn UiHost>,
    store: Arc<dyn UiStore>,
    clock: Arc<dyn HostClock>,
    limits: HostLimits,
    ui_host_limits: UiHostLimits,
    ui_limits: UiLimits,
    reply_limits: ReplyLimits,
    fence_language: String,
    table: SharedTable,
    captures: Mutex<HashMap<(String, String), CaptureOutcome>>,
    freezing: Mutex<HashSet<(String, String)>>,
    choices: tokio::sync::Mutex<()>,
    arguments: Mutex<ArgumentMemo>,
    changes: std::sync::OnceLock<Arc<dyn ChangeIndex>>,
    sync_limits: SyncLimits,
    source_reads: Arc<Mutex<HashMap<String, SharedRead>>>,
}

/// Every limit group the service checks. Start from [`ServiceLimits::default`] (the
/// spec's values) and set the groups a deployment configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ServiceLimits {
    /// Serving limits: slots, timeout, sizes, payload shapes (`host.md` §16).
    pub host: HostLimits,
    /// Queries and links per block, the refresh window.
    pub ui_host: UiHostLimits,
    /// The work budget of every evaluation and value copy.
    pub ui: UiLimits,
    /// What one reply may hold (blocks frozen per item).
    pub reply: ReplyLimits,
    /// The change feed's windows (slot wait, change gap, catch-up).
    pub sync: SyncLimits,
}

/// Attempts of a freeze to store its frozen readings before it gives up (and logs).
const FREEZE_WRITE_ATTEMPTS: u32 = 5;
/// The first wait between two attempts, in ms; it doubles after each.
const FREEZE_RETRY_MS: u64 = 100;

/// Removes a shared read from the map when its task ends, however it ends.
struct SharedReadEntry {
    reads: Arc<Mutex<HashMap<String, SharedRead>>>,
    key: String,
    read: SharedRead,
}

impl Drop for SharedReadEntry {
    fn drop(&mut self) {
        unregister_shared(&self.reads, &self.key, &self.read);
    }
}

/// Unregisters the shared read `read` under `key`, unless it is gone already and another
/// read of the same key has taken its place (a read that timed out is unregistered at
/// once, `host.md` §6.2, so a later request may have started a new one).
fn unregister_shared(reads: &Mutex<HashMap<String, SharedRead>>, key: &str, read: &SharedRead) {
    let mut reads = lock(reads);
    if reads.get(key).is_some_and(|r| r.same_channel(read)) {
        reads.remove(key);
    }
}

/// One call to a source's `read` that several requests share: `None` until it settles.
type SharedRead = watch::Receiver<Option<Result<Value, HostError>>>;

/// The source-read key: source name, canonical parsed arguments, and a fingerprint of the
/// captured access (`sync.md` §2 "reading key").
fn share_key(source: &str, args: &Record, access: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut text = String::with_capacity(64);
    canonical_record(args, &mut text);
    let mut access_text = String::new();
    canonical(access, &mut access_text);
    let digest = Sha256::digest(access_text.as_bytes());
    let mut key = String::with_capacity(source.len() + text.len() + 70);
    push_part(&mut key, source);
    push_part(&mut key, &text);
    for b in digest {
        key.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        key.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    key
}

/// How many evaluated query arguments the service remembers (see [`ArgumentMemo`]).
const MAX_MEMOIZED_ARGUMENTS: usize = 256;

/// The arguments `query_arguments` evaluated for a block revision, query and input, oldest
/// first. `query_arguments` is a pure function of the block, the query name and the input
/// (under the service's fixed limits), and a revision names one block content (`host.md`
/// §2.2), so a remembered result is the result evaluating again would give. Only successes
/// are kept: a failure may be the copy's or the evaluation's wall-time budget, which a
/// retry may pass. This keeps a cached `ui.query` answer from evaluating the block again.
#[derive(Debug, Default)]
struct ArgumentMemo {
    args: HashMap<String, Arc<Record>>,
    order: std::collections::VecDeque<String>,
}

impl ArgumentMemo {
    fn get(&self, key: &str) -> Option<Arc<Record>> {
        self.args.get(key).cloned()
    }

    fn insert(&mut self, key: String, args: Arc<Record>) {
        if self.args.contains_key(&key) {
            return;
        }
        self.order.push_back(key.clone());
        self.args.insert(key, args);
        while self.args.len() > MAX_MEMOIZED_ARGUMENTS {
            match self.order.pop_front() {
                Some(old) => {
                    self.args.remove(&old);
                }
                None => break,
            }
        }
    }
}

/// A text of `value` in its own key order, with every number by its bits (`-0` and `0`
/// differ) and every key after its length: equal texts ⇔ identical values, as the argument
/// memo needs.
fn exact(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                exact(item, out);
            }
            out.push(']');
        }
        Value::Record(record) => exact_record(record, out),
        Value::Number(n) => {
            out.push('#');
            push_digits(out, n.get().to_bits(), 16);
        }
        scalar => {
            let _ = scalar.write_js_json(out);
        }
    }
}

/// [`exact`] of a record.
fn exact_record(record: &Record, out: &mut String) {
    out.push('{');
    for (key, item) in record {
        push_part(out, key);
        exact(item, out);
        out.push(',');
    }
    out.push('}');
}

impl std::fmt::Debug for UiQueries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiQueries")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// How many reads, cache entries and the like the service holds right now (for tests and
/// metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServiceStats {
    /// Cached fresh readings.
    pub cached: usize,
    /// Reads whose outcome is pending.
    pub in_flight: usize,
    /// Attempt entries.
    pub attempts: usize,
    /// Occupied global read slots.
    pub slots: usize,
    /// The largest number of slots one chat occupies.
    pub max_chat_slots: usize,
    /// Captures in flight.
    pub captures: usize,
    /// Freezes running.
    pub freezes: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A text of `value` with every record's keys sorted, each after its length: equal texts ⇔
/// structurally equal values, so it serves as a cache key.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        Value::Record(record) => canonical_record(record, out),
        scalar => {
            let _ = scalar.write_js_json(out);
        }
    }
}

/// [`canonical`] of a record.
fn canonical_record(record: &Record, out: &mut String) {
    let mut entries: Vec<(&String, &Value)> = record.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (key, item) in entries {
        push_part(out, key);
        canonical(item, out);
        out.push(',');
    }
    out.push('}');
}

/// Appends `part` after its length, so that the parts of a key never run into each other
/// (whatever characters they hold) and nothing needs escaping.
fn push_part(out: &mut String, part: &str) {
    push_digits(out, part.len() as u64, 10);
    out.push(':');
    out.push_str(part);
}

/// Appends `n` in `radix` (2..=16) without the formatting machinery (keys are built on
/// every request).
fn push_digits(out: &mut String, mut n: u64, radix: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 64];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = DIGITS[(n % radix) as usize];
        n /= radix;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[at..] {
        out.push(char::from(d));
    }
}

/// Appends the parts that name a query of a stored block, after `tag`.
fn push_identity(out: &mut String, tag: char, p: &QueryPayload) {
    out.push(tag);
    for part in [&p.chat_id, &p.item_id, &p.block_id, &p.revision, &p.query] {
        push_part(out, part);
    }
}

/// The attempt-table name of a query's identity (any arguments).
fn identity(p: &QueryPayload) -> String {
    let mut k = String::with_capacity(192);
    push_identity(&mut k, 'i', p);
    k
}

/// The cache and attempt-table name of a query with its parsed arguments.
fn key(p: &QueryPayload, args: &Record) -> String {
    let mut k = String::with_capacity(256);
    push_identity(&mut k, 'k', p);
    canonical_record(args, &mut k);
    k
}

/// A capture in flight: `None` until it settles, then the access (or none).
type CaptureOutcome = watch::Receiver<Option<Option<Arc<Value>>>>;

/// What a choice or link asks issued query values for (`host.md` §12.2).
#[derive(Debug, Clone, Copy)]
pub struct IssueRequest<'a> {
    /// The chat.
    pub chat_id: &'a str,
    /// The assistant item.
    pub item_id: &'a str,
    /// The block.
    pub block_id: &'a str,
    /// The block revision the page drew.
    pub revision: &'a str,
    /// The input values on screen.
    pub values: &'a Record,
    /// The read id of each query's reading on screen.
    pub reads: &'a IndexMap<String, String>,
    /// Whether a choice asks (an answered block then needs no values).
    pub for_choice: bool,
}

/// The outcome of admission under the table lock.
enum Admit {
    Answer(QueryReading),
    Wait(crate::table::Pending),
    /// A read in flight started before the newest change: wait, then decide again.
    WaitThenRetry(crate::table::Pending),
    /// A change-driven request found no free slot (with the cached reading, if any).
    NoSlot(Option<QueryReading>),
    Start(
        crate::table::SlotGuard,
        watch::Sender<Option<QueryReading>>,
        crate::table::Pending,
        u64,
    ),
}

/// How often a change-driven request looks for a free slot while it waits (ms).
const SLOT_POLL_MS: u64 = 50;

/// Everything a read needs once the request is admitted (§6.1 done).
struct ReadPlan {
    source_name: String,
    source: Arc<dyn UiSource>,
    info: Arc<ChatInfo>,
    access: Arc<Value>,
    args: Arc<Record>,
    feed: Option<Feed>,
}

/// A feed source's reading: its tokens and whether the feed is complete.
#[derive(Debug, Clone)]
struct Feed {
    scope: ChangeScope,
    complete: bool,
}

fn busy(now: u64) -> QueryReading {
    QueryReading::failed(
        now,
        Some(HostCode::Busy.as_str()),
        "Too many reads are running; try again shortly.",
    )
}

impl UiQueries {
    /// A service for `host`, keeping its state in `store`, reading time from `clock`, with
    /// the spec's limits.
    pub fn new(
        host: Arc<dyn UiHost>,
        store: Arc<dyn UiStore>,
        clock: Arc<dyn HostClock>,
    ) -> Arc<Self> {
        Self::with_limits(
            host,
            store,
            clock,
            HostLimits::DEFAULT,
            UiHostLimits::DEFAULT,
        )
    }

    /// A service with other host limits (tests, tuning); the other groups are the spec's.
    pub fn with_limits(
        host: Arc<dyn UiHost>,
        store: Arc<dyn UiStore>,
        clock: Arc<dyn HostClock>,
        limits: HostLimits,
        ui_host_limits: UiHostLimits,
    ) -> Arc<Self> {
        let all = ServiceLimits {
            host: limits,
            ui_host: ui_host_limits,
            ..ServiceLimits::default()
        };
        Self::configured(host, store, clock, all)
    }

    /// A service checking every limit group of `limits`: one configuration reaches every
    /// check, and every budget measures time on `clock`.
    pub fn configured(
        host: Arc<dyn UiHost>,
        store: Arc<dyn UiStore>,
        clock: Arc<dyn HostClock>,
        limits: ServiceLimits,
    ) -> Arc<Self> {
        Arc::new(UiQueries {
            host,
            store,
            clock,
            limits: limits.host,
            ui_host_limits: limits.ui_host,
            ui_limits: limits.ui,
            reply_limits: limits.reply,
            fence_language: ui_core::FENCE_LANGUAGE.to_owned(),
            table: SharedTable::default(),
            captures: Mutex::new(HashMap::new()),
            freezing: Mutex::new(HashSet::new()),
            choices: tokio::sync::Mutex::new(()),
            arguments: Mutex::new(ArgumentMemo::default()),
            changes: std::sync::OnceLock::new(),
            sync_limits: limits.sync,
            source_reads: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// Lets readings of sources with a change feed follow the change log (`sync.md` §8):
    /// readings carry `sync`, a newer change allows a re-read 1 s after the previous one,
    /// and change-driven requests (with `seen`) get the cached reading with `staleBy` and
    /// `retryAfterMs` instead of `refresh-limit`. Only the first index attached counts.
    pub fn attach_changes(&self, index: Arc<dyn ChangeIndex>) {
        let _ = self.changes.set(index);
    }

    /// The limits the service checks.
    pub fn limits(&self) -> ServiceLimits {
        ServiceLimits {
            host: self.limits,
            ui_host: self.ui_host_limits,
            ui: self.ui_limits,
            reply: self.reply_limits,
            sync: self.sync_limits,
        }
    }

    /// The clock the service reads.
    pub fn clock(&self) -> &Arc<dyn HostClock> {
        &self.clock
    }

    /// The host this service serves.
    pub fn host(&self) -> &Arc<dyn UiHost> {
        &self.host
    }

    /// What the service holds right now.
    pub fn stats(&self) -> ServiceStats {
        let t = self.table.lock();
        ServiceStats {
            cached: t.cache.len(),
            in_flight: t.inflight.len(),
            attempts: t.attempts.len(),
            slots: t.slots,
            max_chat_slots: t.chat_slots.values().copied().max().unwrap_or(0),
            captures: lock(&self.captures).len(),
            freezes: lock(&self.freezing).len(),
        }
    }

    /// Evicts every cached reading of a removed chat.
    pub fn forget(&self, chat_id: &str) {
        self.table.lock().forget(chat_id);
    }

    // ---- stored blocks (§6.1 step 1) ----

    /// [`UiQueries::stored_block`] without the rest of the item (`ui.query` and issued
    /// values need only the block, the flags and the author).
    async fn admitted_block(
        &self,
        chat_id: &str,
        item_id: &str,
        block_id: &str,
        revision: &str,
    ) -> Option<StoredBlock> {
        let stored = self.store.block(chat_id, item_id, block_id).await?;
        let block = &stored.block;
        (stored.assistant
            && !stored.streaming
            && !stored.subagent
            && block.complete
            && block.revision.as_deref() == Some(revision))
        .then_some(stored)
    }

    /// The stored item and block when the item is a finished top-level assistant item and
    /// the block is complete with this revision.
    async fn stored_block(
        &self,
        chat_id: &str,
        item_id: &str,
        block_id: &str,
        revision: &str,
    ) -> Option<(StoredItem, Arc<Block>)> {
        let item = self.store.item(chat_id, item_id).await?;
        if !item.assistant || item.streaming || item.parent_tool_use_id.is_some() {
            return None;
        }
        let block = item.blocks.iter().find(|b| b.id == block_id)?.clone();
        (block.complete && block.revision.as_deref() == Some(revision)).then_some((item, block))
    }

    // ---- capture (§4) ----

    /// The captured access of an item: joins a capture in flight, returns the stored access
    /// for an item authored here, or captures now (first time, or a forked item).
    pub async fn access(self: &Arc<Self>, chat_id: &str, item_id: &str) -> Option<Arc<Value>> {
        let k = (chat_id.to_owned(), item_id.to_owned());
        let mut rx = {
            let mut captures = lock(&self.captures);
            match captures.get(&k) {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    captures.insert(k.clone(), rx.clone());
                    let this = Arc::clone(self);
                    tokio::spawn(async move {
                        let outcome = this.capture(&k.0, &k.1).await;
                        lock(&this.captures).remove(&k);
                        let _ = tx.send(Some(outcome));
                    });
                    rx
                }
            }
        };
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().flatten(),
            Err(_) => None,
        }
    }

    /// [`UiQueries::access`] for an item just read (`author_chat_id` is its
    /// `uiQueries.authorChatId`): an item this chat authored whose access
    /// is granted answers that access without a capture task (§4.2 step 2). Granted access
    /// is final for the chat and item — a capture in flight stores it last — so this is
    /// the outcome joining would give; anything else takes the full path.
    async fn access_of(
        self: &Arc<Self>,
        author_chat_id: Option<&str>,
        chat_id: &str,
        item_id: &str,
    ) -> Option<Arc<Value>> {
        if author_chat_id == Some(chat_id)
            && let AccessRecord::Granted(access) = self.store.access(chat_id, item_id).await
        {
            return Some(access);
        }
        self.access(chat_id, item_id).await
    }

    /// §4.2 steps 2–3 (the leader of a capture).
    async fn capture(&self, chat_id: &str, item_id: &str) -> Option<Arc<Value>> {
        let item = self.store.item(chat_id, item_id).await?;
        if item
            .ui_queries
            .as_ref()
            .is_some_and(|q| q.author_chat_id == chat_id)
        {
            return match self.store.access(chat_id, item_id).await {
                AccessRecord::Granted(v) => Some(v),
                _ => None,
            };
        }
        // Persist "denied" first, so a crash during capture never widens rights. A failed
        // write fails the capture (nothing is granted that the store does not hold); the
        // next request captures again.
        let denied = self.store.set_access(chat_id, item_id, None).await;
        let authored = match denied {
            Ok(()) => {
                self.store
                    .set_ui_queries(
                        chat_id,
                        item_id,
                        UiQueryState {
                            author_chat_id: chat_id.to_owned(),
                            blocks: IndexMap::new(),
                        },
                    )
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = authored {
            tracing::error!(chat_id, item_id, error = %e, "the capture could not be stored");
            return None;
        }
        let info = self.store.chat_info(chat_id).await?;
        let captured = self.host.capture(&info).await.ok()?;
        let clock = BudgetClock(&*self.clock);
        let copy = Budget::new(self.ui_limits, &clock)
            .copy_value(&captured)
            .ok()?;
        if copy.js_json_len() as u64 > self.limits.access_bytes() {
            return None;
        }
        let copy = Arc::new(copy);
        if let Err(e) = self
            .store
            .set_access(chat_id, item_id, Some(Arc::clone(&copy)))
            .await
        {
            tracing::error!(chat_id, item_id, error = %e, "the captured access could not be stored");
            return None;
        }
        Some(copy)
    }

    /// Called for every change of an assistant item that may carry UI (`observe`, §4.1,
    /// §9): starts or joins the capture when the item may reference the host, and when the
    /// reply is final starts one background freeze of its first readings.
    pub async fn observe(self: &Arc<Self>, chat_id: &str, item_id: &str, is_final: bool) {
        let Some(item) = self.store.item(chat_id, item_id).await else {
            return;
        };
        if !item.assistant
            || item.parent_tool_use_id.is_some()
            || !has_fence(&item.text, &self.fence_language)
        {
            return;
        }
        let capturing =
            lock(&self.captures).contains_key(&(chat_id.to_owned(), item_id.to_owned()));
        let admitted = capturing
            || item
                .ui_queries
                .as_ref()
                .is_some_and(|q| q.author_chat_id == chat_id)
            || may_reference_host(&item.text)
            || item.blocks.iter().any(|b| !b.queries.is_empty());
        if !admitted {
            return;
        }
        let this = Arc::clone(self);
        let (chat, id) = (chat_id.to_owned(), item_id.to_owned());
        tokio::spawn(async move {
            this.access(&chat, &id).await;
        });
        if is_final && !item.blocks.is_empty() {
            let k = (chat_id.to_owned(), item_id.to_owned());
            if lock(&self.freezing).insert(k.clone()) {
                let this = Arc::clone(self);
                tokio::spawn(async move {
                    this.freeze(&k.0, &k.1).await;
                    lock(&this.freezing).remove(&k);
                });
            }
        }
    }

    // ---- ui.query (§6) ----

    /// Answers `ui.query` (§6.1–6.2). Always a reading; never fails.
    pub async fn query(self: &Arc<Self>, p: &QueryPayload) -> QueryReading {
        self.query_uncut(p).await.cut_reason(self.limits.reason())
    }

    /// [`UiQueries::query`] before its reason is cut to the configured limit.
    async fn query_uncut(self: &Arc<Self>, p: &QueryPayload) -> QueryReading {
        let refused = |code: Option<HostCode>, reason: &str| {
            QueryReading::refused(self.clock.now_ms(), code.map(HostCode::as_str), reason)
        };
        let Some(stored) = self
            .admitted_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return refused(
                Some(HostCode::BlockStale),
                "The block changed or is not final.",
            );
        };
        let block = &stored.block;
        let Some(query) = block
            .queries
            .get(&p.query)
            .filter(|_| block.queries.len() as u64 <= self.ui_host_limits.queries())
        else {
            return refused(
                Some(HostCode::QueryUndeclared),
                "The block does not declare this query.",
            );
        };
        let Some(source) = self.host.sources().get(&query.source).cloned() else {
            return refused(
                Some(HostCode::SourceUnregistered),
                "The query's source is not registered.",
            );
        };
        let args = match self.arguments(block, &p.query, &p.values, &*source) {
            Ok(args) => args,
            Err(reason) => return refused(None, &reason),
        };
        let Some(access) = self
            .access_of(stored.author_chat_id.as_deref(), &p.chat_id, &p.item_id)
            .await
        else {
            return refused(
                Some(HostCode::AccessUnavailable),
                "The writing chat's access is not available.",
            );
        };
        let Some(info) = self.store.chat_info(&p.chat_id).await else {
            return refused(Some(HostCode::BlockStale), "The chat is gone.");
        };
        let info = Arc::new(info);
        if let Err(e) = source.authorize(&info, &access, &args).await {
            return refused(None, "").with_host_error(&e);
        }
        let feed = source
            .changes()
            .zip(self.changes.get())
            .and_then(|(changes, index)| {
                let audience = changes.audience(&args, &access)?;
                let keys = changes.keys(&args);
                let scope = index.scope(&query.source, &audience, &keys)?;
                Some(Feed {
                    scope,
                    complete: changes.complete(),
                })
            });
        let plan = ReadPlan {
            source_name: query.source.clone(),
            source,
            info,
            access,
            args,
            feed,
        };
        self.serve(p, plan).await
    }

    /// §6.1 steps 4–6: validated input, the stored definition's arguments, the source's
    /// argument schema.
    fn arguments(
        &self,
        block: &Block,
        name: &str,
        values: &Record,
        source: &dyn UiSource,
    ) -> Result<Arc<Record>, String> {
        let args = self.query_arguments(block, name, values)?;
        match source.args().parse(&Value::Record(args))? {
            Value::Record(r) => Ok(r),
            _ => Err("The parsed arguments are not a record.".to_owned()),
        }
    }

    /// §6.1 steps 4–5 (`uiQueryArguments`), remembered per block revision, query and
    /// input ([`ArgumentMemo`]).
    fn query_arguments(
        &self,
        block: &Block,
        name: &str,
        values: &Record,
    ) -> Result<Arc<Record>, String> {
        let memo_key = block.revision.as_deref().map(|revision| {
            let mut k = String::with_capacity(192);
            for part in [revision, &block.id, name] {
                push_part(&mut k, part);
            }
            exact_record(values, &mut k);
            k
        });
        if let Some(args) = memo_key
            .as_deref()
            .and_then(|k| lock(&self.arguments).get(k))
        {
            return Ok(args);
        }
        let clock = BudgetClock(&*self.clock);
        let args = query_arguments(block, name, values, self.ui_limits, &clock)
            .map_err(|f| f.message.to_string())?;
        let args = Arc::new(args);
        if let Some(k) = memo_key {
            lock(&self.arguments).insert(k, Arc::clone(&args));
        }
        Ok(args)
    }

    /// §6.2 steps 9–18, amended by `sync.md` §8.4–§8.5 for a source with a change feed.
    async fn serve(self: &Arc<Self>, p: &QueryPayload, plan: ReadPlan) -> QueryReading {
        let ReadPlan {
            source_name,
            source,
            info,
            access,
            args,
            feed,
        } = plan;
        let key = key(p, &args);
        let identity = identity(p);
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
            return cached;
        }
        let slot_deadline = self.clock.now_ms() + self.sync_limits.slot_wait();
        let mut rounds = 0;
        loop {
            rounds += 1;
            let rel = match (&feed, self.changes.get()) {
                (Some(f), Some(index)) => index.relevant(&f.scope).max(seen.unwrap_or(0)),
                _ => 0,
            };
            let admit = self.admit(p, &key, &identity, feed.as_ref(), rel, seen.is_some());
            match admit {
                Admit::Answer(reading) => return reading,
                Admit::Wait(pending) => return wait(pending, self.clock.now_ms()).await,
                Admit::WaitThenRetry(pending) => {
                    let _ = wait(pending, self.clock.now_ms()).await;
                    if rounds < 3 {
                        continue;
                    }
                }
                Admit::NoSlot(cached) => {
                    // A change-driven request waits up to the slot wait for a slot.
                    let now = self.clock.now_ms();
                    if now < slot_deadline && rounds < 1_000 {
                        self.clock
                            .sleep(SLOT_POLL_MS.min(slot_deadline - now))
                            .await;
                        continue;
                    }
                    return match cached {
                        Some(mut reading) => {
                            reading.stale_by = Some(rel);
                            reading.retry_after_ms = Some(self.sync_limits.change_gap());
                            reading
                        }
                        None => busy(now),
                    };
                }
                Admit::Start(guard, tx, rx, version) => {
                    let this = Arc::clone(self);
                    let request = ReadRequest {
                        info,
                        args: Arc::unwrap_or_clone(args),
                        access,
                        cancel: CancellationToken::new(),
                    };
                    let chat_id = p.chat_id.clone();
                    let started = self.clock.now_ms();
                    let sync =
                        feed.as_ref()
                            .zip(self.changes.get())
                            .map(|(f, index)| ReadingSync {
                                epoch: index.epoch(),
                                version,
                                scope: f.scope.scope.clone(),
                                keys: f.scope.keys.clone(),
                                feed: if f.complete { "complete" } else { "partial" }.to_owned(),
                            });
                    tokio::spawn(async move {
                        let mut reading = this.drive(&source_name, source, request, guard).await;
                        reading.sync = sync;
                        {
                            let mut t = this.table.lock();
                            t.inflight.remove(&key);
                            if let Some(read_id) = reading.read_id.clone() {
                                let entry = CacheEntry {
                                    key,
                                    chat_id,
                                    reading: reading.clone(),
                                    version,
                                    started,
                                };
                                t.insert(read_id, entry, this.limits.cache_entries() as usize);
                            }
                        }
                        let _ = tx.send(Some(reading));
                    });
                    return wait(rx, self.clock.now_ms()).await;
                }
            }
        }
    }

    /// The newest cached reading of `key`, if any.
    fn cached(&self, key: &str) -> Option<QueryReading> {
        let t = self.table.lock();
        t.newest
            .get(key)
            .and_then(|id| t.cache.get(id))
            .map(|e| e.reading.clone())
    }

    /// Steps 9–13 under the table lock: answer from the cache, join a read in flight,
    /// refuse by the attempt windows or the slots, or start a read. `rel` is the newest
    /// relevant change for a feed source (0 otherwise); `change_driven` marks a request
    /// carrying `seen`.
    fn admit(
        &self,
        p: &QueryPayload,
        key: &str,
        identity: &str,
        feed: Option<&Feed>,
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
            .map(|e| (e.reading.clone(), e.version, e.started));
        // A newer change than the cached reading reflects (feed sources only).
        let changed = feed.is_some() && entry.as_ref().is_some_and(|(_, v, _)| rel > *v);
        if let Some(flight) = t.inflight.get(key) {
            if feed.is_none() || flight.version >= rel {
                return Admit::Wait(flight.pending.clone());
            }
            return Admit::WaitThenRetry(flight.pending.clone());
        }
        if let Some((reading, _, started)) = &entry {
            let fresh_window = now.saturating_sub(reading.read_at) < window;
            if fresh_window && !changed {
                return Admit::Answer(reading.clone());
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
                    Some((mut reading, _, _)) => {
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
        if t.chat_slots.get(&p.chat_id).copied().unwrap_or(0)
            >= self.limits.chat_read_slots() as usize
            || t.slots >= self.limits.read_slots() as usize
        {
            if change_driven {
                return Admit::NoSlot(entry.map(|(r, _, _)| r));
            }
            return Admit::Answer(busy(now));
        }
        let capacity = self.limits.attempt_entries() as usize;
        t.attempt(key.to_owned(), now, capacity);
        t.attempt(identity.to_owned(), now, capacity);
        let version = match (feed, self.changes.get()) {
            (Some(_), Some(index)) => index.head(),
            _ => 0,
        };
        let guard = self.table.occupy(&mut t, &p.chat_id);
        let (tx, rx) = watch::channel(None);
        t.inflight.insert(
            key.to_owned(),
            InFlight {
                pending: rx.clone(),
                version,
            },
        );
        Admit::Start(guard, tx, rx, version)
    }

    /// Runs one read on its own task, racing the timeout (§6.2 steps 13–16).
    async fn drive(
        &self,
        source_name: &str,
        source: Arc<dyn UiSource>,
        request: ReadRequest,
        guard: crate::table::SlotGuard,
    ) -> QueryReading {
        let cancel = request.cancel.clone();
        // The source-read layer (`sync.md` §8.2): identical reads of one source — same
        // parsed arguments, same captured access — share one call to `read`, while every
        // block keeps its own read id, cache entry and `authorize`.
        let share = share_key(source_name, &request.args, &request.access);
        let (mut shared, leader) = {
            let mut reads = lock(&self.source_reads);
            match reads.get(&share) {
                Some(rx) => (rx.clone(), None),
                None => {
                    let (tx, rx) = watch::channel(None);
                    reads.insert(share.clone(), rx.clone());
                    (rx, Some(tx))
                }
            }
        };
        let reads = Arc::clone(&self.source_reads);
        let reader = Arc::clone(&source);
        let key_of_share = share.clone();
        let ours = shared.clone();
        match leader {
            Some(tx) => {
                tokio::spawn(async move {
                    // Unregisters the shared read even if the source panics.
                    let registered = SharedReadEntry {
                        reads,
                        key: key_of_share,
                        read: tx.subscribe(),
                    };
                    let outcome = reader.read(request).await;
                    drop(registered);
                    if tx.send(Some(outcome)).is_err() {
                        // Every request waiting for it has timed out: the late answer is
                        // discarded, never answered or cached (`host.md` §6.2).
                    }
                    // The slot is freed only now, when the source's own work has ended.
                    drop(guard);
                });
            }
            None => {
                let mut joined = shared.clone();
                tokio::spawn(async move {
                    let _ = joined.wait_for(Option::is_some).await;
                    drop(guard);
                });
            }
        }
        let outcome = tokio::select! {
            outcome = shared.wait_for(Option::is_some) => {
                outcome.ok().and_then(|o| o.clone())
            }
            () = self.clock.sleep(self.limits.read_timeout()) => {
                cancel.cancel();
                // No later request joins a read that has answered `timed-out` (§6.2): it
                // starts its own, and this call's late answer reaches nobody new.
                unregister_shared(&self.source_reads, &share, &ours);
                return QueryReading::failed(
                    self.clock.now_ms(),
                    Some(HostCode::TimedOut.as_str()),
                    "The source did not answer in time.",
                );
            }
        };
        let outcome = outcome.ok_or(());
        let now = self.clock.now_ms();
        let value = match outcome {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => return QueryReading::failed(now, None, "").with_host_error(&e),
            Err(_) => {
                return QueryReading::failed(now, None, "The source stopped without an answer.");
            }
        };
        let parsed = match source.result().parse(&value) {
            Ok(v) => v,
            Err(reason) => return QueryReading::failed(now, None, &reason),
        };
        let clock = BudgetClock(&*self.clock);
        let copy = match Budget::new(self.ui_limits, &clock).copy_value(&parsed) {
            Ok(v) => v,
            Err(f) => return QueryReading::failed(now, None, &f.message),
        };
        if copy.js_json_len() as u64 > self.limits.result_bytes() {
            return QueryReading::failed(
                now,
                Some(HostCode::ResultTooLarge.as_str()),
                &format!(
                    "The result is larger than {} bytes.",
                    self.limits.result_bytes()
                ),
            );
        }
        QueryReading::fresh(copy, uuid::Uuid::new_v4().to_string(), now)
    }

    // ---- issued query values (§12.2) ----

    /// The query values a choice or link may rely on (`choiceValues`): for every declared
    /// query, the reading the page names in `reads`, accepted only when it was read for the
    /// current arguments (cache, any age) or is the frozen first reading for the defaults.
    ///
    /// # Errors
    /// A [`WireRefusal`]: `stale-ui-block`, `refused-query` (undeclared query, unregistered
    /// source, missing access, argument failures, a refusal of `authorize`) or
    /// `stale-ui-query` with `stale-read`.
    pub async fn issued_values(
        self: &Arc<Self>,
        request: &IssueRequest<'_>,
    ) -> Result<Record, WireRefusal> {
        let IssueRequest {
            chat_id,
            item_id,
            block_id,
            revision,
            values,
            reads,
            for_choice,
        } = *request;
        let Some(item) = self.store.item(chat_id, item_id).await else {
            return Ok(Record::default());
        };
        let Some(block) = item.blocks.iter().find(|b| b.id == block_id).cloned() else {
            return Ok(Record::default());
        };
        if for_choice
            && item
                .answers
                .get(block_id)
                .is_some_and(|a| a.origin.revision == revision)
        {
            return Ok(Record::default());
        }
        if block.queries.is_empty() {
            return Ok(Record::default());
        }
        let Some(access) = self.access(chat_id, item_id).await else {
            return Err(WireRefusal::new(
                WireCode::RefusedQuery,
                Some(HostCode::AccessUnavailable),
                "The writing chat's access is not available.",
            ));
        };
        let info = self.store.chat_info(chat_id).await.unwrap_or_default();
        let mut issued = Record::default();
        for name in block.queries.keys() {
            let p = QueryPayload {
                chat_id: chat_id.to_owned(),
                item_id: item_id.to_owned(),
                block_id: block_id.to_owned(),
                revision: revision.to_owned(),
                query: name.clone(),
                values: values.clone(),
                seen: None,
            };
            let (source, args) = self.admit_for_values(&p).await?;
            if let Err(e) = source.authorize(&info, &access, &args).await {
                return Err(WireRefusal::from_host(&e));
            }
            let stale = || {
                WireRefusal::new(
                    WireCode::StaleUiQuery,
                    Some(HostCode::StaleRead),
                    "The values on screen are no longer the ones the host read.",
                )
            };
            let Some(read_id) = reads.get(name) else {
                return Err(stale());
            };
            let current = key(&p, &args);
            let cached = {
                let t = self.table.lock();
                t.cache
                    .get(read_id)
                    .filter(|e| e.key == current)
                    .map(|e| e.reading.clone())
            };
            let reading = match cached {
                Some(r) => Some(r),
                None => {
                    self.frozen_for(&item, &block, name, read_id, &p, &args)
                        .await
                }
            };
            match reading {
                Some(r) if r.is_fresh() => {
                    issued.insert(name.clone(), r.value.unwrap_or_default());
                }
                _ => return Err(stale()),
            }
        }
        Ok(issued)
    }

    /// §6.1 steps 1–6 for issued values: failures are wire refusals.
    async fn admit_for_values(
        &self,
        p: &QueryPayload,
    ) -> Result<(Arc<dyn UiSource>, Arc<Record>), WireRefusal> {
        let Some(StoredBlock { block, .. }) = self
            .admitted_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return Err(WireRefusal::new(
                WireCode::StaleUiBlock,
                Some(HostCode::BlockStale),
                "The block changed or is not final.",
            ));
        };
        let Some(query) = block
            .queries
            .get(&p.query)
            .filter(|_| block.queries.len() as u64 <= self.ui_host_limits.queries())
        else {
            return Err(WireRefusal::new(
                WireCode::RefusedQuery,
                Some(HostCode::QueryUndeclared),
                "The block does not declare this query.",
            ));
        };
        let Some(source) = self.host.sources().get(&query.source).cloned() else {
            return Err(WireRefusal::new(
                WireCode::RefusedQuery,
                Some(HostCode::SourceUnregistered),
                "The query's source is not registered.",
            ));
        };
        let args = self
            .arguments(&block, &p.query, &p.values, &*source)
            .map_err(|m| WireRefusal::new(WireCode::RefusedQuery, None, m))?;
        Ok((source, args))
    }

    /// The frozen reading of `name` when its revision and read id match and the current
    /// arguments equal the arguments of the defaults (§12.2 step 4d).
    async fn frozen_for(
        &self,
        item: &StoredItem,
        block: &Block,
        name: &str,
        read_id: &str,
        p: &QueryPayload,
        args: &Arc<Record>,
    ) -> Option<QueryReading> {
        let frozen = item.ui_queries.as_ref()?.blocks.get(&block.id)?;
        if Some(frozen.revision.as_str()) != block.revision.as_deref() {
            return None;
        }
        let reading = frozen.readings.get(name)?;
        if reading.read_id.as_deref() != Some(read_id) {
            return None;
        }
        let source = self.host.sources().get(&block.queries.get(name)?.source)?;
        let defaults = self
            .arguments(block, &p.query, &Record::default(), &**source)
            .ok()?;
        (Value::Record(defaults) == Value::Record(Arc::clone(args))).then(|| reading.clone())
    }

    // ---- ui.link (§13.3) ----

    /// Answers `ui.link`: always a resolution, `plain` with a code when the host cannot or
    /// will not make it a chip.
    pub async fn link(self: &Arc<Self>, p: &LinkPayload) -> LinkResolution {
        let Some(resolver) = self.host.links() else {
            return plain(HostCode::LinksUnsupported, "The host resolves no links.");
        };
        let Some((item, block)) = self
            .stored_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return plain(HostCode::BlockStale, "The block changed or is not final.");
        };
        if item.ui_queries.is_none() {
            return plain(HostCode::AccessUnavailable, "The item was never captured.");
        }
        let Some(access) = self.access(&p.chat_id, &p.item_id).await else {
            return plain(
                HostCode::AccessUnavailable,
                "The writing chat's access is not available.",
            );
        };
        let issued = match self
            .issued_values(&IssueRequest {
                chat_id: &p.chat_id,
                item_id: &p.item_id,
                block_id: &p.block_id,
                revision: &p.revision,
                values: &p.values,
                reads: &p.reads,
                for_choice: false,
            })
            .await
        {
            Ok(v) => v,
            Err(r) => return LinkResolution::plain(r.code.as_deref(), &r.message),
        };
        let clock = BudgetClock(&*self.clock);
        let targets = match link_targets(&block, &p.values, &issued, self.ui_limits, &clock) {
            Ok(t) => t,
            Err(f) => return LinkResolution::plain(None, &f.message),
        };
        let Some(target) = targets.get(&p.node_id) else {
            return plain(
                HostCode::LinkUnsupported,
                "The node is not a visible link of this block.",
            );
        };
        let info = self.store.chat_info(&p.chat_id).await.unwrap_or_default();
        match resolver.link(&info, &access, target).await {
            Ok(answer) => LinkResolution::from_host_answer(&answer),
            Err(e) => LinkResolution::plain(e.code(), e.reason()),
        }
    }

    // ---- chat.uiChoice (§12.1) ----

    /// Answers `chat.uiChoice`: checks the issued query values and the input, resolves the
    /// choice, sends its context as the person's next message and records the answer. A
    /// repeated identical pick answers the recorded answer again.
    ///
    /// # Errors
    /// A [`WireRefusal`] with the wire code of `host.md` §12.4.
    pub async fn choose(self: &Arc<Self>, p: &ChoicePayload) -> Result<ChoiceAnswer, WireRefusal> {
        let issued = self
            .issued_values(&IssueRequest {
                chat_id: &p.chat_id,
                item_id: &p.item_id,
                block_id: &p.block_id,
                revision: &p.revision,
                values: &p.values,
                reads: &p.reads,
                for_choice: true,
            })
            .await?;
        let _one_at_a_time = self.choices.lock().await;
        let Some((item, block)) = self
            .stored_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return Err(WireRefusal::new(
                WireCode::StaleUiBlock,
                None,
                "The block changed or is not final.",
            ));
        };
        if let Some(answer) = item
            .answers
            .get(&p.block_id)
            .filter(|a| a.origin.revision == p.revision)
        {
            if answer.origin.choice_id == p.choice_id {
                return Ok(answer.clone());
            }
            return Err(WireRefusal::new(
                WireCode::UiAlreadyAnswered,
                None,
                "Another choice of this block was already sent.",
            ));
        }
        let clock = BudgetClock(&*self.clock);
        let selection = resolve_choice(
            &block,
            &p.choice_id,
            &p.values,
            &issued,
            self.ui_limits,
            &clock,
        )
        .map_err(|f| WireRefusal::from_failure(&f))?;
        let origin = ChoiceOrigin {
            item_id: p.item_id.clone(),
            block_id: p.block_id.clone(),
            revision: p.revision.clone(),
            choice_id: p.choice_id.clone(),
            label: selection.label,
            source_at: item.created_at,
            older: self.store.has_newer_item(&p.chat_id, &p.item_id).await,
            values: Some(selection.values),
            at: self.clock.now_ms(),
        };
        let failed = |e: StoreError| match e {
            StoreError::ChatFull(reason) => WireRefusal::new(WireCode::RefusedChoice, None, reason),
            e => {
                tracing::error!(chat_id = %p.chat_id, item_id = %p.item_id, error = %e,
                    "a choice could not be stored");
                WireRefusal::new(
                    WireCode::Internal,
                    None,
                    "The choice could not be stored; send it again.",
                )
            }
        };
        let sent = self
            .store
            .send_choice(&p.chat_id, &origin, &selection.context)
            .await
            .map_err(failed)?;
        let answer = ChoiceAnswer { origin, sent };
        self.store
            .record_answer(&p.chat_id, answer.clone())
            .await
            .map_err(failed)?;
        Ok(answer)
    }

    // ---- freezing (§9) ----

    async fn freeze(self: &Arc<Self>, chat_id: &str, item_id: &str) {
        let access = self.access(chat_id, item_id).await;
        let Some(item) = self.store.item(chat_id, item_id).await else {
            return;
        };
        let blocks: Vec<Arc<Block>> = item
            .blocks
            .iter()
            .take(self.reply_limits.blocks() as usize)
            .cloned()
            .collect();
        for block in blocks {
            let Some(revision) = block.revision.clone() else {
                return;
            };
            let Some(now_item) = self.store.item(chat_id, item_id).await else {
                return;
            };
            if !now_item
                .blocks
                .iter()
                .any(|b| b.id == block.id && b.revision.as_deref() == Some(&revision))
            {
                return;
            }
            if now_item
                .ui_queries
                .as_ref()
                .and_then(|q| q.blocks.get(&block.id))
                .is_some_and(|f| f.revision == revision)
            {
                continue;
            }
            let mut readings = IndexMap::new();
            let mut fresh = Record::default();
            for name in block
                .queries
                .keys()
                .take(self.ui_host_limits.queries() as usize)
            {
                let p = QueryPayload {
                    chat_id: chat_id.to_owned(),
                    item_id: item_id.to_owned(),
                    block_id: block.id.clone(),
                    revision: revision.clone(),
                    query: name.clone(),
                    values: Record::default(),
                    seen: None,
                };
                let reading = self.query(&p).await;
                if let Some(v) = reading.value.clone().filter(|_| reading.is_fresh()) {
                    fresh.insert(name.clone(), v);
                }
                readings.insert(name.clone(), reading);
            }
            let links = self
                .freeze_links(chat_id, &block, &fresh, access.as_ref())
                .await;
            let Some(now_item) = self.store.item(chat_id, item_id).await else {
                return;
            };
            let Some(state) = now_item.ui_queries.clone() else {
                return;
            };
            if !now_item
                .blocks
                .iter()
                .any(|b| b.id == block.id && b.revision.as_deref() == Some(&revision))
            {
                return;
            }
            let clock = BudgetClock(&*self.clock);
            let text = ui_fallback::query_fallback(&block, &fresh, self.ui_limits, &clock)
                .unwrap_or_else(|_| block.fallback.clone());
            let mut fallback =
                truncate_utf16(&text, self.limits.frozen_fallback() as usize).to_owned();
            let sources = sources_line(&block);
            if !block.queries.is_empty() {
                fallback.push_str(&sources);
            }
            for (name, reading) in &readings {
                if !reading.is_fresh() {
                    fallback.push_str(&format!(
                        "\n{name}: {}",
                        reading.reason.as_deref().unwrap_or_default()
                    ));
                }
            }
            let entry = FrozenBlock {
                revision: revision.clone(),
                readings,
                links,
                fallback,
            };
            let mut map = state.blocks.clone();
            map.insert(block.id.clone(), entry);
            if self.snapshot_bytes(&map) > self.limits.snapshot_bytes() {
                let now = self.clock.now_ms();
                let reason = "The first values were too large to keep.";
                let entry = map.get_mut(&block.id).expect("just inserted");
                for reading in entry.readings.values_mut() {
                    *reading = QueryReading::failed(
                        now,
                        Some(HostCode::SnapshotTooLarge.as_str()),
                        reason,
                    );
                }
                for link in entry.links.values_mut() {
                    *link = LinkResolution::plain(Some(HostCode::LinkUnchecked.as_str()), reason);
                }
                entry.fallback = format!(
                    "{}{sources}\nThe live values were too large to keep.",
                    truncate_utf16(&block.fallback, self.limits.oversize_fallback() as usize)
                );
                if self.snapshot_bytes(&map) > self.limits.snapshot_bytes() {
                    map.shift_remove(&block.id);
                }
            }
            let state = UiQueryState {
                author_chat_id: state.author_chat_id,
                blocks: map,
            };
            if !self.store_frozen(chat_id, item_id, state).await {
                return;
            }
        }
    }

    /// Stores a freeze's UI query state, retrying a failed write up to
    /// [`FREEZE_WRITE_ATTEMPTS`] times with a doubling wait; whether it was stored.
    async fn store_frozen(&self, chat_id: &str, item_id: &str, state: UiQueryState) -> bool {
        let mut wait = FREEZE_RETRY_MS;
        for attempt in 1..=FREEZE_WRITE_ATTEMPTS {
            match self
                .store
                .set_ui_queries(chat_id, item_id, state.clone())
                .await
            {
                Ok(()) => return true,
                Err(e) if attempt < FREEZE_WRITE_ATTEMPTS => {
                    tracing::warn!(chat_id, item_id, attempt, error = %e,
                        "the frozen readings could not be stored; retrying");
                    self.clock.sleep(wait).await;
                    wait *= 2;
                }
                Err(e) => {
                    tracing::error!(chat_id, item_id, attempt, error = %e,
                        "the frozen readings could not be stored; giving up");
                }
            }
        }
        false
    }

    /// §9 step 2d: resolutions of the first 64 link targets for the defaults and the fresh
    /// values; empty when the host resolves no links or the block has no targets (step f).
    async fn freeze_links(
        &self,
        chat_id: &str,
        block: &Block,
        fresh: &Record,
        access: Option<&Arc<Value>>,
    ) -> IndexMap<String, LinkResolution> {
        let Some(resolver) = self.host.links() else {
            return IndexMap::new();
        };
        let clock = BudgetClock(&*self.clock);
        let Ok(targets) = link_targets(block, &Record::default(), fresh, self.ui_limits, &clock)
        else {
            return IndexMap::new();
        };
        let info = self.store.chat_info(chat_id).await.unwrap_or_default();
        let mut out = IndexMap::new();
        for (node_id, target) in targets.iter().take(self.ui_host_limits.links() as usize) {
            let resolution = match access {
                None => plain(
                    HostCode::AccessUnavailable,
                    "The writing chat's access is not available.",
                ),
                Some(access) => match resolver.link(&info, access, target).await {
                    Ok(answer) => LinkResolution::from_host_answer(&answer),
                    Err(e) => LinkResolution::plain(e.code(), e.reason()),
                },
            };
            out.insert(node_id.clone(), resolution);
        }
        out
    }

    fn snapshot_bytes(&self, map: &IndexMap<String, FrozenBlock>) -> u64 {
        serde_json::to_value(map)
            .map(|json| Value::from(&json).js_json_len() as u64)
            .unwrap_or(u64::MAX)
    }
}

/// `\nSources: name: source, …` for a block's declared queries.
fn sources_line(block: &Block) -> String {
    let list: Vec<String> = block
        .queries
        .iter()
        .map(|(name, q)| format!("{name}: {}", q.source))
        .collect();
    format!("\nSources: {}", list.join(", "))
}

fn plain(code: HostCode, reason: &str) -> LinkResolution {
    LinkResolution::plain(Some(code.as_str()), reason)
}

/// Waits for a pending read's outcome.
async fn wait(mut pending: crate::table::Pending, now: u64) -> QueryReading {
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
    fn with_host_error(mut self, error: &HostError) -> Self {
        self.code = error.code().map(str::to_owned);
        self.reason = Some(crate::reading::reason_text(error.reason()));
        self
    }
}
