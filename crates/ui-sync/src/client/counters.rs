//! The page's counter store (`sync.md` §7.5): maxima of seqs per scope, whole scope, key
//! and source name, read through a floor.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::types::{Epoch, Seq, Token, WireEvent};

/// What a counter counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CounterKey {
    /// Every event of a scope (`scope[S]`).
    Scope(Token),
    /// Events of a scope without a key (`whole[S]`).
    Whole(Token),
    /// Events of one key (`key[K]`).
    Key(Token),
    /// Events of a source name (`source[name]`), for host pages.
    Source(Arc<str>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    seq: Seq,
    /// When it was last bumped (a sequence number of bumps).
    stamp: u64,
    observers: u32,
}

/// The counter store: every value is the largest seq seen, read as `max(value, floor)`
/// within the current epoch, so duplicate, late and re-ordered events never move anything
/// backwards. At most `limit` tracked entries; beyond that the least recently bumped entry
/// nobody observes is evicted (it then reads as the floor). Observed entries stay.
#[derive(Debug, Clone)]
pub struct Counters {
    epoch: Option<Epoch>,
    floor: Seq,
    entries: HashMap<CounterKey, Entry>,
    /// Unobserved entries by last bump stamp, oldest first.
    unobserved: BTreeMap<u64, CounterKey>,
    stamp: u64,
    limit: usize,
}

impl Counters {
    /// An empty store keeping at most `limit` entries (`clientCounters`).
    pub fn new(limit: usize) -> Self {
        Counters {
            epoch: None,
            floor: Seq(0),
            entries: HashMap::new(),
            unobserved: BTreeMap::new(),
            stamp: 0,
            limit,
        }
    }

    /// The epoch the values belong to (none before the first cursor).
    pub fn epoch(&self) -> Option<&Epoch> {
        self.epoch.as_ref()
    }

    /// The floor: the cursor seq the transport started at, raised by resets.
    pub fn floor(&self) -> Seq {
        self.floor
    }

    /// Tracked entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `key`: `max(value, floor)`.
    pub fn get(&self, key: &CounterKey) -> Seq {
        self.entries
            .get(key)
            .map_or(self.floor, |e| e.seq.max(self.floor))
    }

    /// `counter(source)`.
    pub fn source(&self, name: &str) -> Seq {
        self.get(&CounterKey::Source(name.into()))
    }

    /// `counters([sources])`: the maximum over them.
    pub fn sources(&self, names: &[&str]) -> Seq {
        names
            .iter()
            .map(|n| self.source(n))
            .max()
            .unwrap_or(self.floor)
    }

    /// The version a reading of `scope` (and `keys`) must reach: `scope[S]` when `keys` is
    /// empty, otherwise the maximum of `whole[S]` and every `key[k]`.
    pub fn relevant(&self, scope: Token, keys: &[Token]) -> Seq {
        if keys.is_empty() {
            self.get(&CounterKey::Scope(scope))
        } else {
            keys.iter()
                .map(|k| self.get(&CounterKey::Key(*k)))
                .fold(self.get(&CounterKey::Whole(scope)), Seq::max)
        }
    }

    /// Starts an epoch at `floor` (the first cursor, or a reset): values of an earlier
    /// epoch, or above a reset's position, mean nothing any more and are cleared.
    /// Observations are kept.
    pub fn reset(&mut self, epoch: &Epoch, floor: Seq) {
        self.epoch = Some(epoch.clone());
        self.floor = floor;
        self.unobserved.clear();
        self.entries.retain(|_, e| e.observers > 0);
        for e in self.entries.values_mut() {
            e.seq = Seq(0);
        }
    }

    /// Raises the floor to `floor` within the current epoch (values stay).
    pub(crate) fn raise_floor(&mut self, floor: Seq) {
        self.floor = self.floor.max(floor);
    }

    /// Bumps the counters of one event; returns whether any value advanced.
    pub fn bump(&mut self, event: &WireEvent) -> bool {
        let seq = Seq(event.seq);
        let mut advanced = self.bump_key(CounterKey::Source(event.source.as_str().into()), seq);
        if let Some(scope) = Token::from_hex(&event.scope) {
            advanced |= self.bump_key(CounterKey::Scope(scope), seq);
            match event.key.as_deref() {
                None => advanced |= self.bump_key(CounterKey::Whole(scope), seq),
                Some(k) => {
                    if let Some(k) = Token::from_hex(k) {
                        advanced |= self.bump_key(CounterKey::Key(k), seq);
                    }
                }
            }
        }
        self.evict();
        advanced
    }

    fn bump_key(&mut self, key: CounterKey, seq: Seq) -> bool {
        self.stamp += 1;
        let stamp = self.stamp;
        let floor = self.floor;
        match self.entries.get_mut(&key) {
            Some(e) => {
                let advanced = seq > e.seq.max(floor);
                e.seq = e.seq.max(seq);
                if e.observers == 0 {
                    self.unobserved.remove(&e.stamp);
                    self.unobserved.insert(stamp, key);
                }
                e.stamp = stamp;
                advanced
            }
            None => {
                self.entries.insert(
                    key.clone(),
                    Entry {
                        seq,
                        stamp,
                        observers: 0,
                    },
                );
                self.unobserved.insert(stamp, key);
                seq > floor
            }
        }
    }

    fn evict(&mut self) {
        while self.entries.len() > self.limit {
            let Some((_, key)) = self.unobserved.pop_first() else {
                break;
            };
            self.entries.remove(&key);
        }
    }

    /// A component starts observing `key`; observed entries are never evicted.
    pub fn observe(&mut self, key: CounterKey) {
        self.stamp += 1;
        let stamp = self.stamp;
        let e = self.entries.entry(key).or_insert(Entry {
            seq: Seq(0),
            stamp,
            observers: 0,
        });
        if e.observers == 0 {
            self.unobserved.remove(&e.stamp);
        }
        e.observers = e.observers.saturating_add(1);
    }

    /// A component stops observing `key`.
    pub fn unobserve(&mut self, key: &CounterKey) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        if e.observers == 0 {
            return;
        }
        e.observers -= 1;
        if e.observers == 0 {
            self.unobserved.insert(e.stamp, key.clone());
            self.evict();
        }
    }
}
