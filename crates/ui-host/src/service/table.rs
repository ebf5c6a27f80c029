//! The admission table (`host.md` §7): cache, newest reading per key, in-flight reads,
//! attempts and read slots, all behind one lock so that steps 9–13 of §6.2 are atomic (a
//! concurrent map per table could not keep them consistent with each other).

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use foldhash::HashMap;
use indexmap::map::Entry;
use indexmap::{Equivalent, IndexMap};
use tokio::sync::watch;

use super::key::QueryKey;
use crate::reading::{CachedReading, QueryReading};

/// A cached fresh reading.
#[derive(Debug, Clone)]
pub(crate) struct CacheEntry {
    pub(crate) key: QueryKey,
    pub(crate) chat_id: String,
    pub(crate) cached: Arc<CachedReading>,
    /// The change-log head just before the read started (0 without a change feed).
    pub(crate) version: u64,
    /// When the read started (ms).
    pub(crate) started: u64,
}

/// A read in flight: its pending outcome and the change-log head it started at.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    pub(crate) pending: Pending,
    pub(crate) version: u64,
}

/// The pending outcome of an in-flight read: `None` until it settles.
pub(crate) type Pending = watch::Receiver<Option<QueryReading>>;

/// A map of [`QueryKey`]s, looked up by [`QueryKeyRef`](super::key::QueryKeyRef) as well
/// (an `IndexMap` for its `Equivalent` lookups; the order of its entries means nothing).
pub(crate) type KeyMap<V> = IndexMap<QueryKey, V, foldhash::fast::RandomState>;

/// Entries in insertion order: lookups by name and eviction of the oldest entry in
/// constant time (an ordered map's removal from the front would move every later entry on
/// each eviction). An updated entry keeps its first position, as upstream's attempt table.
#[derive(Debug)]
pub(crate) struct Fifo<K, V> {
    /// The entries; their order in the map means nothing (removal swaps the last in).
    map: IndexMap<K, V, foldhash::fast::RandomState>,
    /// Names oldest first; a name removed by [`Fifo::retain`] leaves with it.
    order: VecDeque<K>,
}

impl<K, V> Default for Fifo<K, V> {
    fn default() -> Self {
        Fifo {
            map: IndexMap::default(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, V> Fifo<K, V> {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn get<Q>(&self, name: &Q) -> Option<&V>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.map.get(name)
    }

    /// Inserts `value` under `name`, or updates it in place.
    pub(crate) fn insert(&mut self, name: K, value: V) {
        match self.map.entry(name) {
            Entry::Occupied(mut e) => {
                e.insert(value);
            }
            Entry::Vacant(e) => {
                self.order.push_back(e.key().clone());
                e.insert(value);
            }
        }
    }

    /// Removes the oldest entry.
    pub(crate) fn pop_oldest(&mut self) -> Option<(K, V)> {
        let name = self.order.pop_front()?;
        let value = self.map.swap_remove(&name);
        debug_assert!(value.is_some(), "the order names only live entries");
        value.map(|v| (name, v))
    }

    /// Keeps the entries `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) {
        self.map.retain(|name, value| keep(name, value));
        let map = &self.map;
        self.order.retain(|name| map.contains_key(name));
    }
}

#[derive(Debug, Default)]
pub(crate) struct ReadTable {
    /// Fresh readings by read id, in insertion order (the oldest is evicted first).
    pub(crate) cache: Fifo<String, CacheEntry>,
    /// The read id of the newest fresh reading per key.
    pub(crate) newest: KeyMap<String>,
    pub(crate) inflight: KeyMap<InFlight>,
    /// Last started read per key and per identity (two kinds of key, one table).
    pub(crate) attempts: Fifo<QueryKey, u64>,
    pub(crate) chat_slots: HashMap<String, usize>,
    pub(crate) slots: usize,
}

impl ReadTable {
    /// Inserts a fresh reading, evicting the oldest inserted entries beyond `capacity`.
    pub(crate) fn insert(&mut self, read_id: String, entry: CacheEntry, capacity: usize) {
        self.newest.insert(entry.key.clone(), read_id.clone());
        self.cache.insert(read_id, entry);
        while self.cache.len() > capacity {
            match self.cache.pop_oldest() {
                Some((id, old)) => {
                    if self.newest.get(&old.key) == Some(&id) {
                        self.newest.swap_remove(&old.key);
                    }
                }
                None => break,
            }
        }
    }

    /// Records a started read, evicting the oldest attempts beyond `capacity`.
    pub(crate) fn attempt(&mut self, name: QueryKey, now: u64, capacity: usize) {
        // An updated entry keeps its first position, as upstream.
        self.attempts.insert(name, now);
        while self.attempts.len() > capacity {
            if self.attempts.pop_oldest().is_none() {
                break;
            }
        }
    }

    /// Drops every cached reading of `chat_id`.
    pub(crate) fn forget(&mut self, chat_id: &str) {
        let newest = &mut self.newest;
        self.cache.retain(|id, entry| {
            if entry.chat_id != chat_id {
                return true;
            }
            if newest.get(&entry.key) == Some(id) {
                newest.swap_remove(&entry.key);
            }
            false
        });
    }
}

/// The table behind its lock. The lock is never held across an `.await`.
#[derive(Debug, Default, Clone)]
pub(crate) struct SharedTable(Arc<Mutex<ReadTable>>);

impl SharedTable {
    pub(crate) fn lock(&self) -> MutexGuard<'_, ReadTable> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Occupies one slot of `chat_id` and one global slot; released when the guard drops.
    pub(crate) fn occupy(&self, table: &mut ReadTable, chat_id: &str) -> SlotGuard {
        *table.chat_slots.entry(chat_id.to_owned()).or_insert(0) += 1;
        table.slots += 1;
        SlotGuard {
            table: self.clone(),
            chat_id: chat_id.to_owned(),
        }
    }
}

/// One occupied read slot; dropping it frees the chat slot and the global slot. It moves
/// into the task that runs the source, so a slot stays taken until the source's own work
/// ends — also after a timeout answer.
#[derive(Debug)]
pub(crate) struct SlotGuard {
    table: SharedTable,
    chat_id: String,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut t = self.table.lock();
        t.slots = t.slots.saturating_sub(1);
        if let Some(n) = t.chat_slots.get_mut(&self.chat_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.chat_slots.remove(&self.chat_id);
            }
        }
    }
}
