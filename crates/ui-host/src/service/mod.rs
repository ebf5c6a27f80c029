//! [`UiQueries`]: the host service (`host.md` §4, §6–§9, §12–§13), split by operation
//! around the shared core in this module (the service's state, its limits, the stored-block
//! lookups of §6.1 step 1):
//!
//! - `capture`: the writing chat's access (§4) and `observe`;
//! - `query`: `ui.query` (§6): admission, the argument memo, prepared payloads and the
//!   plans they keep under a store's lease, serving under the table lock;
//! - `read`: one read on its own task, shared by identical reads (`sync.md` §8.2);
//! - `key`: the typed keys of the admission table and of the source-read map;
//! - `choice`: issued query values (§12.2) and `chat.uiChoice` (§12.1);
//! - `links`: `ui.link` (§13.3);
//! - `freeze`: the first readings of final replies (§9).
//!
//! Admission (steps 9–13 of §6.2: cache, in-flight join, attempt windows, slots) must be
//! atomic across all of its maps, so they sit behind one `std::sync::Mutex` ([`SharedTable`])
//! that is never held across an `.await`; a concurrent map per table would let two requests
//! both pass the attempt window or both take the last slot. The smaller maps (captures,
//! freezes, the argument memo, the choice turns) are each touched once per operation
//! under their own lock.
//! The source-read map is read on every read start from many tasks with no cross-map
//! invariant, so it is a concurrent map.

mod capture;
mod choice;
mod freeze;
mod key;
mod links;
mod memo;
mod query;
mod read;
mod table;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ui_compiler::Block;
use ui_core::{HostLimits, ReplyLimits, SyncLimits, UiHostLimits, UiLimits};

use crate::changes::ChangeIndex;
use crate::clock::HostClock;
use crate::source::UiHost;
use crate::store::{StoredBlock, StoredItem, UiStore};
use table::SharedTable;

pub use capture::admits_by_content;
pub use choice::IssueRequest;
pub use query::PreparedQuery;

use capture::CaptureOutcome;
use memo::ArgumentMemo;
use read::SourceReads;

/// The services made so far in this process (each one's `instance`).
static INSTANCES: AtomicU64 = AtomicU64::new(0);

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
    /// One turn per block with a `chat.uiChoice` being checked and recorded: picks in
    /// one block take turns, picks in other blocks never wait for them.
    choices: Mutex<HashMap<choice::BlockKey, Arc<tokio::sync::Mutex<()>>>>,
    arguments: Mutex<ArgumentMemo>,
    feeds: Mutex<foldhash::HashMap<key::ShareKey, Option<Arc<query::Feed>>>>,
    changes: std::sync::OnceLock<Arc<dyn ChangeIndex>>,
    sync_limits: SyncLimits,
    source_reads: SourceReads,
    /// `ui.query` requests answered from the cache ([`ServiceStats::cache_hits`]).
    cache_hits: AtomicU64,
    /// This service among the process's services: a [`PreparedQuery`] keeps what one
    /// service worked out (its arguments, its read plan) for that service only.
    instance: u64,
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
#[non_exhaustive]
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
    /// Blocks with a `chat.uiChoice` being checked, recorded or waiting its turn.
    pub choices: usize,
    /// `ui.query` requests answered from the reading cache since the service started.
    pub cache_hits: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs its closure when dropped, unless disarmed: the bookkeeping of a spawned task
/// (a capture, a read, a freeze) is undone however the task ends, a panicking host or
/// source included, so no entry outlives its task.
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    fn new(undo: F) -> Self {
        OnDrop(Some(undo))
    }

    /// The task did its own bookkeeping: nothing is left to undo.
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(undo) = self.0.take() {
            undo();
        }
    }
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
            choices: Mutex::new(HashMap::new()),
            arguments: Mutex::new(ArgumentMemo::default()),
            feeds: Mutex::default(),
            changes: std::sync::OnceLock::new(),
            sync_limits: limits.sync,
            source_reads: SourceReads::default(),
            cache_hits: AtomicU64::new(0),
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
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
            choices: lock(&self.choices).len(),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
        }
    }

    /// A call into the host (`authorize`, `capture`, `link`) bounded by the read timeout
    /// (`host.md` §17.7 recommends it for links; a capture or an authorization that never
    /// settles would otherwise hold every request waiting on it): `None` when it did not
    /// settle in time. Polled once first: a call that answers at once (the usual case)
    /// arms no timer.
    async fn within_timeout<T>(&self, call: impl std::future::Future<Output = T>) -> Option<T> {
        let mut call = std::pin::pin!(call);
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx))).await;
        if let std::task::Poll::Ready(done) = first {
            return Some(done);
        }
        tokio::select! {
            biased;
            done = &mut call => Some(done),
            () = self.clock.sleep(self.limits.read_timeout()) => None,
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
}
