//! Re-read scheduling from counters (`sync.md` §7.7) and the 10 s cadence of visible
//! readings.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::counters::{CounterKey, Counters};
use super::{BlockId, Effect, QueryId};
use crate::types::{Cursor, Epoch, Seq, Token};

/// The `sync` member of a reading (`sync.md` §8.3): which log position it reflects and
/// which scope and keys it depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadingSync {
    /// The log epoch of `version`.
    pub epoch: Epoch,
    /// The head seq the server had seen just before it started the read.
    pub version: Seq,
    /// The scope token (hex).
    pub scope: String,
    /// Key tokens (hex); empty means the whole source.
    #[serde(default)]
    pub keys: Vec<String>,
}

/// What the page learned from one settled `ui.query` (fresh, cached, failed or refused).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reading {
    /// The reading's `sync`; `None` keeps the previous one (a failed reading shows the last
    /// value, and a source without a change feed never has one).
    pub sync: Option<ReadingSync>,
    /// The server's `retryAfterMs`, honoured before the next change-driven request.
    pub retry_after_ms: Option<u64>,
    /// The answer was refused for authorization (or 401/403): change events no longer
    /// re-read this query; only the cadence, a user action or a remount does.
    pub refused: bool,
}

/// The settings of the scheduler, in ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadLimits {
    pub(crate) window: u64,
    pub(crate) gap: u64,
    pub(crate) in_flight: usize,
    pub(crate) refresh: u64,
}

#[derive(Debug, Clone)]
struct Dep {
    epoch: Epoch,
    version: Seq,
    scope: Token,
    keys: Vec<Token>,
}

impl Dep {
    fn parse(sync: &ReadingSync) -> Option<Dep> {
        Some(Dep {
            epoch: sync.epoch.clone(),
            version: sync.version,
            scope: Token::from_hex(&sync.scope)?,
            keys: sync
                .keys
                .iter()
                .map(|k| Token::from_hex(k))
                .collect::<Option<Vec<_>>>()?,
        })
    }

    fn observed(&self) -> Vec<CounterKey> {
        if self.keys.is_empty() {
            vec![CounterKey::Scope(self.scope)]
        } else {
            std::iter::once(CounterKey::Whole(self.scope))
                .chain(self.keys.iter().map(|k| CounterKey::Key(*k)))
                .collect()
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    /// Started because of a change (counts against the per-page limit).
    change: bool,
    /// The `seen` it carried.
    seen: Option<Seq>,
    /// Started after a reset: its answer clears the reset.
    covers_reset: bool,
}

#[derive(Debug, Clone)]
struct Query {
    block: BlockId,
    dep: Option<Dep>,
    in_flight: Option<InFlight>,
    queued: bool,
    last_change_start: Option<u64>,
    not_before: u64,
    gave_up: Option<Seq>,
    reset_pending: bool,
    refused: bool,
    last_reading_at: u64,
}

/// Per-page read scheduling state.
#[derive(Debug, Clone)]
pub(crate) struct Reads {
    limits: ReadLimits,
    queries: BTreeMap<QueryId, Query>,
    blocks: HashMap<BlockId, bool>,
    page_visible: bool,
    queue: VecDeque<QueryId>,
    window_end: Option<u64>,
    change_in_flight: usize,
}

impl Reads {
    pub(crate) fn new(limits: ReadLimits) -> Self {
        Reads {
            limits,
            queries: BTreeMap::new(),
            blocks: HashMap::new(),
            page_visible: true,
            queue: VecDeque::new(),
            window_end: None,
            change_in_flight: 0,
        }
    }

    fn visible(&self, q: &Query) -> bool {
        self.page_visible && self.blocks.get(&q.block).copied().unwrap_or(false)
    }

    /// The counter value that makes `q` stale, if it is.
    fn stale(q: &Query, counters: &Counters) -> Option<Seq> {
        let epoch = counters.epoch()?;
        match &q.dep {
            None => q.reset_pending.then(|| counters.floor()),
            Some(d) => {
                let relevant = counters.relevant(d.scope, &d.keys);
                (q.reset_pending || d.epoch != *epoch || relevant > d.version).then_some(relevant)
            }
        }
    }

    /// The `seen` of a change-driven read `q` should get now, if any.
    fn eligible(&self, q: &Query, counters: &Counters, signed_out: bool) -> Option<Seq> {
        if signed_out || q.refused || !self.visible(q) {
            return None;
        }
        let seen = Self::stale(q, counters)?;
        if q.gave_up.is_some_and(|g| seen <= g) {
            return None;
        }
        Some(seen)
    }

    pub(crate) fn is_stale(&self, query: QueryId, counters: &Counters) -> bool {
        self.queries
            .get(&query)
            .is_some_and(|q| Self::stale(q, counters).is_some())
    }

    fn enqueue(&mut self, id: QueryId) {
        if let Some(q) = self.queries.get_mut(&id)
            && !q.queued
        {
            q.queued = true;
            self.queue.push_back(id);
        }
    }

    /// Queues every visible stale reading of `filter`.
    fn sweep_where(
        &mut self,
        counters: &Counters,
        signed_out: bool,
        filter: impl Fn(&Query) -> bool,
    ) {
        let due: Vec<QueryId> = self
            .queries
            .iter()
            .filter(|(_, q)| filter(q) && self.eligible(q, counters, signed_out).is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.enqueue(id);
        }
    }

    /// Queues every visible stale reading at once (the first cursor: readings older than
    /// the floor read immediately).
    pub(crate) fn sweep(&mut self, counters: &Counters, signed_out: bool) {
        self.sweep_where(counters, signed_out, |_| true);
    }

    /// A counter advanced: open the non-resetting window unless one is open.
    pub(crate) fn counters_advanced(&mut self, now: u64) {
        if self.window_end.is_none() {
            self.window_end = Some(now.saturating_add(self.limits.window));
        }
    }

    /// A reset: every reading is stale; earlier give-ups no longer apply.
    pub(crate) fn reset(&mut self, now: u64) {
        for q in self.queries.values_mut() {
            q.reset_pending = true;
            q.gave_up = None;
        }
        self.counters_advanced(now);
    }

    pub(crate) fn set_page_visible(
        &mut self,
        visible: bool,
        counters: &Counters,
        signed_out: bool,
    ) {
        let was = self.page_visible;
        self.page_visible = visible;
        if visible && !was {
            self.sweep(counters, signed_out);
        }
    }

    pub(crate) fn set_block_visible(
        &mut self,
        block: BlockId,
        visible: bool,
        counters: &Counters,
        signed_out: bool,
    ) {
        let was = self.blocks.insert(block, visible).unwrap_or(false);
        if visible && !was {
            self.sweep_where(counters, signed_out, |q| q.block == block);
        }
    }

    pub(crate) fn remove_block(&mut self, block: BlockId, counters: &mut Counters) {
        self.blocks.remove(&block);
        let gone: Vec<QueryId> = self
            .queries
            .iter()
            .filter(|(_, q)| q.block == block)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(q) = self.queries.remove(&id) {
                if q.in_flight.is_some_and(|f| f.change) {
                    self.change_in_flight = self.change_in_flight.saturating_sub(1);
                }
                for key in q.dep.iter().flat_map(Dep::observed) {
                    counters.unobserve(&key);
                }
            }
        }
        let queries = &self.queries;
        self.queue.retain(|id| queries.contains_key(id));
    }

    /// A reading of `query` (shown in `block`) arrived at `now`.
    pub(crate) fn arrived(
        &mut self,
        now: u64,
        query: QueryId,
        block: BlockId,
        reading: Reading,
        counters: &mut Counters,
        signed_out: bool,
    ) {
        let q = self.queries.entry(query).or_insert_with(|| Query {
            block,
            dep: None,
            in_flight: None,
            queued: false,
            last_change_start: None,
            not_before: 0,
            gave_up: None,
            reset_pending: false,
            refused: false,
            last_reading_at: now,
        });
        q.block = block;
        if let Some(dep) = reading.sync.as_ref().and_then(Dep::parse) {
            for key in q.dep.iter().flat_map(Dep::observed) {
                counters.unobserve(&key);
            }
            for key in dep.observed() {
                counters.observe(key);
            }
            q.dep = Some(dep);
        }
        let settled = q.in_flight.take();
        if settled.is_some_and(|f| f.change) {
            self.change_in_flight = self.change_in_flight.saturating_sub(1);
        }
        if settled.is_none_or(|f| f.covers_reset) {
            q.reset_pending = false;
        }
        if let Some(seen) = settled.and_then(|f| f.seen)
            && reading.retry_after_ms.is_none()
        {
            let covered = match (&q.dep, counters.epoch()) {
                (Some(d), Some(epoch)) => d.epoch == *epoch && d.version >= seen,
                (Some(_), None) => false,
                (None, _) => true,
            };
            if !covered {
                // The instance could not catch up: no retry for this `seen`; the cadence
                // takes over.
                q.gave_up = Some(q.gave_up.map_or(seen, |g| g.max(seen)));
            }
        }
        if let Some(ms) = reading.retry_after_ms {
            q.not_before = now.saturating_add(ms);
        }
        q.refused = reading.refused;
        q.last_reading_at = now;
        let q = &self.queries[&query];
        if self.eligible(q, counters, signed_out).is_some() {
            self.enqueue(query);
        }
    }

    fn ready_at(&self, q: &Query) -> u64 {
        q.last_change_start
            .map_or(0, |t| t.saturating_add(self.limits.gap))
            .max(q.not_before)
    }

    /// Closes a due window, starts what may start, and runs the cadence.
    pub(crate) fn run(
        &mut self,
        now: u64,
        counters: &Counters,
        signed_out: bool,
        out: &mut Vec<Effect>,
    ) {
        if self.window_end.is_some_and(|t| now >= t) {
            self.window_end = None;
            self.sweep(counters, signed_out);
        }
        self.dispatch(now, counters, signed_out, out);
        self.cadence(now, out);
    }

    fn dispatch(&mut self, now: u64, counters: &Counters, signed_out: bool, out: &mut Vec<Effect>) {
        let Some(epoch) = counters.epoch().cloned() else {
            return;
        };
        let mut i = 0;
        while i < self.queue.len() {
            let id = self.queue[i];
            let Some(q) = self.queries.get(&id) else {
                self.queue.remove(i);
                continue;
            };
            let Some(seen) = self.eligible(q, counters, signed_out) else {
                self.queue.remove(i);
                if let Some(q) = self.queries.get_mut(&id) {
                    q.queued = false;
                }
                continue;
            };
            if q.in_flight.is_some() || now < self.ready_at(q) {
                i += 1;
                continue;
            }
            if self.change_in_flight >= self.limits.in_flight {
                break;
            }
            self.queue.remove(i);
            self.change_in_flight += 1;
            if let Some(q) = self.queries.get_mut(&id) {
                q.queued = false;
                q.last_change_start = Some(now);
                q.in_flight = Some(InFlight {
                    change: true,
                    seen: Some(seen),
                    covers_reset: q.reset_pending,
                });
            }
            out.push(Effect::Read {
                query: id,
                seen: Some(Cursor {
                    epoch: epoch.clone(),
                    seq: seen,
                }),
            });
        }
    }

    fn cadence(&mut self, now: u64, out: &mut Vec<Effect>) {
        let due: Vec<QueryId> = self
            .queries
            .iter()
            .filter(|(_, q)| {
                q.in_flight.is_none()
                    && self.visible(q)
                    && now >= q.last_reading_at.saturating_add(self.limits.refresh)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            if let Some(q) = self.queries.get_mut(&id) {
                q.in_flight = Some(InFlight {
                    change: false,
                    seen: None,
                    covers_reset: q.reset_pending,
                });
            }
            out.push(Effect::Read {
                query: id,
                seen: None,
            });
        }
    }

    /// When [`Reads::run`] has work next.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        let mut next = self.window_end;
        let mut consider = |t: u64| next = Some(next.map_or(t, |n| n.min(t)));
        if self.change_in_flight < self.limits.in_flight {
            for id in &self.queue {
                if let Some(q) = self.queries.get(id)
                    && q.in_flight.is_none()
                {
                    consider(self.ready_at(q));
                }
            }
        }
        for q in self.queries.values() {
            if q.in_flight.is_none() && self.visible(q) {
                consider(q.last_reading_at.saturating_add(self.limits.refresh));
            }
        }
        next
    }
}
