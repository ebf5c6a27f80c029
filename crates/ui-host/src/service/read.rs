//! One read on its own task (`host.md` §6.2 steps 13–16), and the source-read layer
//! (`sync.md` §8.2): identical reads of one source — same parsed arguments, same captured
//! access — share one call to `read`, while every block keeps its own read id, cache entry
//! and `authorize`. The map of shared reads is a [`DashMap`]: every read start from any task
//! consults it, and no other map has to change with it.

use std::sync::Arc;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use tokio::sync::watch;
use ui_core::{Budget, HostCode, Value};

use super::UiQueries;
use super::key::ShareKey;
use crate::clock::BudgetClock;
use crate::reading::{HostError, QueryReading};
use crate::source::{ReadRequest, UiSource};

/// The shared reads in flight by source-read key.
pub(super) type SourceReads = Arc<DashMap<ShareKey, SharedRead>>;

/// Removes a shared read from the map when its task ends, however it ends.
struct SharedReadEntry {
    reads: SourceReads,
    key: ShareKey,
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
fn unregister_shared(reads: &DashMap<ShareKey, SharedRead>, key: &ShareKey, read: &SharedRead) {
    reads.remove_if(key, |_, r| r.same_channel(read));
}

/// One call to a source's `read` that several requests share: `None` until it settles.
pub(super) type SharedRead = watch::Receiver<Option<Result<Value, HostError>>>;

impl UiQueries {
    /// Runs one read on its own task, racing the timeout (§6.2 steps 13–16).
    pub(super) async fn drive(
        &self,
        source_name: &str,
        source: Arc<dyn UiSource>,
        request: ReadRequest,
        guard: super::table::SlotGuard,
    ) -> QueryReading {
        let cancel = request.cancel.clone();
        // The source-read layer (`sync.md` §8.2): identical reads of one source — same
        // parsed arguments, same captured access — share one call to `read`, while every
        // block keeps its own read id, cache entry and `authorize`.
        let share = ShareKey::new(source_name, &request.args, &request.access);
        let (mut shared, leader) = match self.source_reads.entry(share.clone()) {
            Entry::Occupied(e) => (e.get().clone(), None),
            Entry::Vacant(e) => {
                let (tx, rx) = watch::channel(None);
                e.insert(rx.clone());
                (rx, Some(tx))
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
}
