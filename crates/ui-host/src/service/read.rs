//! One read on its own task (`host.md` §6.2 steps 13–16), and the source-read layer
//! (`sync.md` §8.2): identical reads of one source — same parsed arguments, same captured
//! access — share one call to `read`, while every block keeps its own read id, cache entry
//! and `authorize`. The map of shared reads is a [`DashMap`]: admission consults it under
//! the admission table's lock (so two requests never both start the same read), and a read
//! that ends updates its entry in one step, without that lock.
//!
//! For a source with a change feed the layer also keeps the version bookkeeping of §8.2:
//! a shared read in flight is joined only when it started at or after the newest relevant
//! change (its version), and a change-driven request may take the value of the last
//! finished read when that read reflects the change and is younger than the refresh
//! window. So one change costs one source read per distinct (arguments, access), however
//! many blocks show it (issue 18 item 3); joining or reusing takes no read slot.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::watch;
use ui_core::{Budget, HostCode, Value};

use super::UiQueries;
use super::key::ShareKey;
use crate::clock::BudgetClock;
use crate::reading::{HostError, QueryReading};
use crate::source::{ReadRequest, UiSource};

/// The source-read layer by source-read key.
pub(super) type SourceReads = Arc<DashMap<ShareKey, ShareState>>;

/// One call to a source's `read` that several requests share: `None` until it settles.
pub(super) type SharedRead = watch::Receiver<Option<Result<Value, HostError>>>;

/// What the source-read layer knows of one source-read key.
#[derive(Debug, Default)]
pub(super) struct ShareState {
    /// The read in flight, if any.
    pub(super) flight: Option<Flight>,
    /// The last read that answered a value (feed sources only).
    pub(super) done: Option<Done>,
}

/// A shared read in flight.
#[derive(Debug, Clone)]
pub(super) struct Flight {
    pub(super) read: SharedRead,
    /// The change-log head just before it started (0 without a feed).
    pub(super) version: u64,
    /// When it started (ms).
    pub(super) started: u64,
}

/// The value of the last finished shared read of a feed source.
#[derive(Debug, Clone)]
pub(super) struct Done {
    pub(super) value: Value,
    pub(super) version: u64,
    pub(super) started: u64,
    /// When it answered (ms).
    pub(super) read_at: u64,
}

/// How an admitted read gets its value from the source-read layer.
pub(super) enum ShareStart {
    /// Calls the source; the slot is held until the source's own work ends.
    Lead {
        guard: super::table::SlotGuard,
        tx: watch::Sender<Option<Result<Value, HostError>>>,
        rx: SharedRead,
        /// Whether the value is kept for change-driven reuse (a feed source).
        keep: bool,
    },
    /// Waits for a shared read in flight (no slot).
    Join(SharedRead),
    /// The value of a finished shared read that reflects the change (no slot).
    Reuse(Value),
}

/// How the layer serves one admitted read: the way, the version the reading reflects and
/// when its source read started.
pub(super) struct ShareDecision {
    pub(super) start: ShareStart,
    pub(super) version: u64,
    pub(super) started: u64,
}

/// Removes `read` from the flight of `key`, unless another read has taken its place (a read
/// that timed out is unregistered at once, `host.md` §6.2, so a later request may have
/// started a new one); drops the entry when nothing is left in it.
fn unregister_flight(reads: &DashMap<ShareKey, ShareState>, key: &ShareKey, read: &SharedRead) {
    if let Some(mut state) = reads.get_mut(key)
        && state
            .flight
            .as_ref()
            .is_some_and(|f| f.read.same_channel(read))
    {
        state.flight = None;
    }
    reads.remove_if(key, |_, s| s.flight.is_none() && s.done.is_none());
}

/// Unregisters a lead's flight when its task ends, however it ends (a panicking source
/// included).
struct FlightEntry {
    reads: SourceReads,
    key: ShareKey,
    read: SharedRead,
}

impl Drop for FlightEntry {
    fn drop(&mut self) {
        unregister_flight(&self.reads, &self.key, &self.read);
    }
}

impl UiQueries {
    /// The source-read layer's part of admission (called under the admission table's
    /// lock): join a shared read in flight that started at or after `rel`, or (for a
    /// change-driven request of a feed source) reuse the last finished read when it
    /// reflects `rel` and answered less than `window` ms ago; otherwise `None`, and the
    /// caller takes a slot and calls [`UiQueries::lead`].
    pub(super) fn share(
        &self,
        key: &ShareKey,
        feed: bool,
        rel: u64,
        change_driven: bool,
        now: u64,
        window: u64,
    ) -> Option<ShareDecision> {
        let state = self.source_reads.get(key)?;
        if let Some(f) = &state.flight
            && (!feed || f.version >= rel)
        {
            return Some(ShareDecision {
                start: ShareStart::Join(f.read.clone()),
                version: f.version,
                started: f.started,
            });
        }
        let d = state.done.as_ref()?;
        (feed && change_driven && d.version >= rel && now.saturating_sub(d.read_at) < window).then(
            || ShareDecision {
                start: ShareStart::Reuse(d.value.clone()),
                version: d.version,
                started: d.started,
            },
        )
    }

    /// Registers a new shared read of `key` (called under the admission table's lock, with
    /// the slot taken): later identical requests join it.
    pub(super) fn lead(
        &self,
        key: &ShareKey,
        guard: super::table::SlotGuard,
        feed: bool,
        version: u64,
        now: u64,
    ) -> ShareDecision {
        let (tx, rx) = watch::channel(None);
        let reads = &self.source_reads;
        let capacity = self.limits.cache_entries() as usize;
        if !reads.contains_key(key) && reads.len() >= capacity {
            // Flights are bounded by the read slots; kept values by the cache's capacity:
            // the stale ones go first, then all of them.
            let window = self.ui_host_limits.refresh_milliseconds();
            reads.retain(|_, s| {
                s.flight.is_some()
                    || s.done
                        .as_ref()
                        .is_some_and(|d| now.saturating_sub(d.read_at) < window)
            });
            if reads.len() >= capacity {
                reads.retain(|_, s| s.flight.is_some());
            }
        }
        reads.entry(key.clone()).or_default().flight = Some(Flight {
            read: rx.clone(),
            version,
            started: now,
        });
        ShareDecision {
            start: ShareStart::Lead {
                guard,
                tx,
                rx,
                keep: feed,
            },
            version,
            started: now,
        }
    }

    /// Runs one read on its own task, racing the timeout (§6.2 steps 13–16): the shared
    /// read of `share` as `decision` says.
    pub(super) async fn drive(
        &self,
        share: ShareKey,
        source: Arc<dyn UiSource>,
        request: ReadRequest,
        decision: ShareDecision,
    ) -> QueryReading {
        let cancel = request.cancel.clone();
        let ShareDecision {
            start,
            version,
            started,
        } = decision;
        let mut shared = match start {
            ShareStart::Reuse(value) => return self.reading_of(&*source, Ok(Ok(value))),
            ShareStart::Join(read) => read,
            ShareStart::Lead {
                guard,
                tx,
                rx,
                keep,
            } => {
                let registered = FlightEntry {
                    reads: Arc::clone(&self.source_reads),
                    key: share.clone(),
                    read: tx.subscribe(),
                };
                let reader = Arc::clone(&source);
                let clock = Arc::clone(&self.clock);
                tokio::spawn(async move {
                    let outcome = reader.read(request).await;
                    if keep && let Ok(value) = &outcome {
                        let done = Done {
                            value: value.clone(),
                            version,
                            started,
                            read_at: clock.now_ms(),
                        };
                        keep_done(&registered, done);
                    }
                    // Unregisters the flight even if the source panics (on unwind).
                    drop(registered);
                    if tx.send(Some(outcome)).is_err() {
                        // Every request waiting for it has timed out: the late answer is
                        // discarded, never answered or cached (`host.md` §6.2).
                    }
                    // The slot is freed only now, when the source's own work has ended.
                    drop(guard);
                });
                rx
            }
        };
        let ours = shared.clone();
        let outcome = tokio::select! {
            outcome = shared.wait_for(Option::is_some) => {
                outcome.ok().and_then(|o| o.clone())
            }
            () = self.clock.sleep(self.limits.read_timeout()) => {
                cancel.cancel();
                // No later request joins a read that has answered `timed-out` (§6.2): it
                // starts its own, and this call's late answer reaches nobody new.
                unregister_flight(&self.source_reads, &share, &ours);
                return QueryReading::failed(
                    self.clock.now_ms(),
                    Some(HostCode::TimedOut.as_str()),
                    "The source did not answer in time.",
                );
            }
        };
        self.reading_of(&*source, outcome.ok_or(()))
    }

    /// The reading of a source read's outcome: parsed, copied under the budget and
    /// checked against the size limit, with a read id of its own.
    fn reading_of(
        &self,
        source: &dyn UiSource,
        outcome: Result<Result<Value, HostError>, ()>,
    ) -> QueryReading {
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
}

/// Keeps `done` as the last value of the flight's key when it is not older than what is
/// kept (the entry exists: the flight is registered until after this).
fn keep_done(flight: &FlightEntry, done: Done) {
    if let Some(mut state) = flight.reads.get_mut(&flight.key)
        && state
            .done
            .as_ref()
            .is_none_or(|d| d.version <= done.version)
    {
        state.done = Some(done);
    }
}
