//! Small in-memory caches of what the store reads on every `ui.*` request, so that a
//! cached `ui.query` answers without touching the database (see [`StoreCache`]).
//!
//! Correctness rests on four rules, kept by [`crate::store::ChatStore`]:
//!
//! - **Only settled facts are cached.** A chat (never changed once created), a finished
//!   item whose UI state names its own chat as the author (its blocks, flags and author
//!   no longer change: `update_reply` serves streaming items only, the author is set once
//!   by the capture), and a granted access (final for its chat and item, `host.md` §4: a
//!   capture stores it last). Absent or denied access, streaming items and items not yet
//!   captured are read from the database every time. So even a writer the cache cannot
//!   see (another process on the same file) cannot leave an entry outdated.
//! - **Every write drops what it changes.** A write to an item or to an item's captured
//!   access calls [`Bounded::invalidate`] for that key *inside* the blocking database
//!   call, right after the change is committed, so it runs even when the request that
//!   started the write is cancelled halfway. (Chats are only ever created; a missing chat
//!   or item is never cached, so a new one needs nothing dropped.)
//! - **A fill never brings back what a write dropped.** A reader takes a [`Ticket`]
//!   before it reads the database and offers what it read with that ticket; every
//!   invalidation moves the cache's generation on, and an offer with an older ticket is
//!   refused. Either the write committed before the read began (the read saw it), or the
//!   invalidation comes after the read began (the offer is refused, or the entry it made
//!   is removed by the invalidation itself).
//! - **Keys name everything the value depends on.** An item is keyed by its chat *and*
//!   its id, so a request that names another person's item under its own chat finds
//!   nothing, exactly as the database query `WHERE chat_id = ? AND id = ?` would.
//!
//! A cached item's facts come with a [`ui_host::Lease`] ([`CachedFacts`]): the host service
//! keeps what it derived from them (a prepared `ui.query`'s read plan) while it holds. The
//! lease is withdrawn with the entry: on every write that drops it (to the item, or to its
//! access, which the lease covers too) and when the entry leaves the cache.
//!
//! Nothing here decides who may read what: the owner check of the wire gate and the
//! host's `authorize` run on every request, with the cached facts as their input.

use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use indexmap::{Equivalent, IndexMap};

use ui_compiler::Block;
use ui_core::Value;
use ui_host::{ChatInfo, Lease, StoredBlock};

use crate::limits::{
    MAX_CACHED_ACCESS, MAX_CACHED_ACCESS_BYTES, MAX_CACHED_CHATS, MAX_CACHED_ITEM_BYTES,
    MAX_CACHED_ITEMS,
};
use crate::store::ChatRow;

/// The generation a reader saw before it read the database (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) struct Ticket(u64);

/// A map of at most `max_entries` entries whose weights add up to at most `max_weight`.
///
/// Two generations of entries keep it bounded without any bookkeeping per lookup: new
/// entries go into the young half; when it is full it becomes the old half (dropping the
/// previous old half) and a new young half starts. A hit in the old half moves the entry
/// back into the young half, so entries in use stay and unused ones age out — an
/// approximate LRU whose every operation is O(1) amortised.
///
/// Keys are looked up borrowed ([`Equivalent`]): an item's entries are found by its two ids
/// as the request holds them ([`ItemRef`]), with no key built per lookup.
pub(crate) struct Bounded<K, V> {
    maps: Mutex<Halves<K, V>>,
    half_entries: usize,
    half_weight: usize,
}

/// One half's entries with their weights. An `IndexMap` for its borrowed lookups; the order
/// it keeps is not used (entries leave by `swap_remove`).
type Half<K, V> = IndexMap<K, (V, usize), foldhash::fast::RandomState>;

struct Halves<K, V> {
    young: Half<K, V>,
    young_weight: usize,
    old: Half<K, V>,
    generation: u64,
}

impl<K, V> std::fmt::Debug for Bounded<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let maps = self.lock();
        f.debug_struct("Bounded")
            .field("entries", &(maps.young.len() + maps.old.len()))
            .field("generation", &maps.generation)
            .finish_non_exhaustive()
    }
}

impl<K, V> Bounded<K, V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Halves<K, V>> {
        self.maps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Hash + Eq, V: Clone> Bounded<K, V> {
    /// An empty map holding at most `max_entries` entries of at most `max_weight` in all.
    pub(crate) fn new(max_entries: usize, max_weight: usize) -> Self {
        Bounded {
            maps: Mutex::new(Halves {
                young: Half::default(),
                young_weight: 0,
                old: Half::default(),
                generation: 0,
            }),
            half_entries: (max_entries / 2).max(1),
            half_weight: max_weight / 2,
        }
    }

    /// The entry of `key`, if cached.
    pub(crate) fn get<Q: ?Sized + Hash + Equivalent<K>>(&self, key: &Q) -> Option<V> {
        let mut maps = self.lock();
        if let Some((value, _)) = maps.young.get(key) {
            return Some(value.clone());
        }
        let (key, (value, weight)) = maps.old.swap_remove_entry(key)?;
        self.put(&mut maps, key, value.clone(), weight);
        Some(value)
    }

    /// The ticket to take before reading what will be offered with [`Bounded::offer`].
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket(self.lock().generation)
    }

    /// Caches `value` under `key` unless something was invalidated since `ticket` was
    /// taken (the value may then be outdated) or `weight` alone would take more than half
    /// the room. Whether it was cached.
    pub(crate) fn offer(&self, ticket: Ticket, key: K, value: V, weight: usize) -> bool {
        if weight > self.half_weight {
            return false;
        }
        let mut maps = self.lock();
        if maps.generation != ticket.0 {
            return false;
        }
        self.put(&mut maps, key, value, weight);
        true
    }

    /// Drops the entry of `key` and refuses every offer whose ticket is older.
    pub(crate) fn invalidate<Q: ?Sized + Hash + Equivalent<K>>(&self, key: &Q) -> Option<V> {
        let mut maps = self.lock();
        maps.generation += 1;
        let young = maps.young.swap_remove(key).map(|(value, weight)| {
            maps.young_weight -= weight;
            value
        });
        let old = maps.old.swap_remove(key).map(|(value, _)| value);
        young.or(old)
    }

    /// Entries cached now (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let maps = self.lock();
        maps.young.len() + maps.old.len()
    }

    /// Inserts into the young half, turning it into the old half first when it is full.
    fn put(&self, maps: &mut Halves<K, V>, key: K, value: V, weight: usize) {
        if let Some((_, w)) = maps.young.swap_remove(&key) {
            maps.young_weight -= w;
        }
        maps.old.swap_remove(&key);
        if maps.young.len() >= self.half_entries || maps.young_weight + weight > self.half_weight {
            maps.old = std::mem::take(&mut maps.young);
            maps.young_weight = 0;
        }
        maps.young_weight += weight;
        maps.young.insert(key, (value, weight));
    }
}

/// The facts of an item that admitting a `ui.query` needs ([`StoredBlock`]), for all its
/// blocks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ItemFacts {
    pub(crate) assistant: bool,
    pub(crate) streaming: bool,
    pub(crate) subagent: bool,
    pub(crate) author_chat_id: Option<String>,
    pub(crate) blocks: Vec<Arc<Block>>,
}

impl ItemFacts {
    /// Whether the facts no longer change, so they may be cached: the reply is finished
    /// and its UI state names `chat_id`, the item's own chat, as the author.
    pub(crate) fn settled(&self, chat_id: &str) -> bool {
        !self.streaming && self.author_chat_id.as_deref() == Some(chat_id)
    }

    /// The block `block_id` with the item's flags, if the item has it, under `lease`.
    pub(crate) fn block(&self, block_id: &str, lease: Option<&Lease>) -> Option<StoredBlock> {
        let block = self.blocks.iter().find(|b| b.id == block_id)?;
        Some(StoredBlock {
            assistant: self.assistant,
            streaming: self.streaming,
            subagent: self.subagent,
            author_chat_id: self.author_chat_id.clone(),
            block: Arc::clone(block),
            lease: lease.cloned(),
        })
    }
}

/// Settled facts as the cache keeps them, with the lease the store hands out with them
/// ([`ui_host::Lease`]: the block, the item's granted access and the chat's info stay as
/// they are). The lease is withdrawn when a write drops the entry
/// ([`StoreCache::item_written`], [`StoreCache::access_written`]) and, at the latest, when
/// the entry is gone from the cache (dropped): a lease stands no longer than the cached
/// facts it came with, which the module's rules keep true.
#[derive(Debug)]
pub(crate) struct CachedFacts {
    pub(crate) facts: ItemFacts,
    lease: Lease,
}

impl CachedFacts {
    /// `facts` under a new lease.
    pub(crate) fn new(facts: ItemFacts) -> Self {
        CachedFacts {
            facts,
            lease: Lease::new(),
        }
    }

    /// The block `block_id` with the item's flags, under the entry's lease.
    pub(crate) fn block(&self, block_id: &str) -> Option<StoredBlock> {
        self.facts.block(block_id, Some(&self.lease))
    }
}

impl Drop for CachedFacts {
    fn drop(&mut self) {
        self.lease.withdraw();
    }
}

/// A chat row with the [`ChatInfo`] the host service asks for, built once.
#[derive(Debug, Clone)]
pub(crate) struct CachedChat {
    pub(crate) row: ChatRow,
    /// Shared with every request that asks for it ([`ui_host::UiStore::chat_info`]).
    pub(crate) info: Arc<ChatInfo>,
}

/// The store's caches, shared by every clone of the store.
#[derive(Debug)]
pub(crate) struct StoreCache {
    /// Chats by id. Chats are never changed or removed once created; a row is small (ids,
    /// a title of at most 200 characters, the owner and project), so only entries count.
    pub(crate) chats: Bounded<String, Arc<CachedChat>>,
    /// Finished items' facts by [`ItemKey`], weighed by their blocks' stored JSON.
    pub(crate) items: Bounded<ItemKey, Arc<CachedFacts>>,
    /// Granted access by [`ItemKey`], weighed by its stored JSON.
    pub(crate) access: Bounded<ItemKey, Arc<Value>>,
}

impl StoreCache {
    /// Drops the cached facts of an item after a write to it (call it right after the
    /// write commits, inside the blocking call), withdrawing their lease.
    pub(crate) fn item_written(&self, chat_id: &str, item_id: &str) {
        if let Some(cached) = self.items.invalidate(&item_key(chat_id, item_id)) {
            cached.lease.withdraw();
        }
    }

    /// Drops the cached access of an item after a write to it, and the item's cached facts
    /// with their lease, which covers the access too.
    pub(crate) fn access_written(&self, chat_id: &str, item_id: &str) {
        self.access.invalidate(&item_key(chat_id, item_id));
        self.item_written(chat_id, item_id);
    }
}

impl Default for StoreCache {
    fn default() -> Self {
        StoreCache {
            chats: Bounded::new(MAX_CACHED_CHATS, usize::MAX),
            items: Bounded::new(MAX_CACHED_ITEMS, MAX_CACHED_ITEM_BYTES),
            access: Bounded::new(MAX_CACHED_ACCESS, MAX_CACHED_ACCESS_BYTES),
        }
    }
}

/// The cache key of an item: its chat and its id, apart, so that no two pairs share a key
/// whatever characters they hold.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ItemKey {
    chat_id: String,
    item_id: String,
}

/// An [`ItemKey`] borrowed from a request: it hashes as the key it names (the same fields
/// in the same order, `str` hashing as `String` does) and is [`Equivalent`] to it.
#[derive(Debug, Clone, Copy, Hash)]
pub(crate) struct ItemRef<'a> {
    chat_id: &'a str,
    item_id: &'a str,
}

impl ItemRef<'_> {
    /// The key this names, owning its ids (for an entry to offer).
    pub(crate) fn to_key(self) -> ItemKey {
        ItemKey {
            chat_id: self.chat_id.to_owned(),
            item_id: self.item_id.to_owned(),
        }
    }
}

impl Equivalent<ItemKey> for ItemRef<'_> {
    fn equivalent(&self, key: &ItemKey) -> bool {
        self.chat_id == key.chat_id && self.item_id == key.item_id
    }
}

/// The cache key of the item `item_id` of `chat_id`, borrowed.
pub(crate) fn item_key<'a>(chat_id: &'a str, item_id: &'a str) -> ItemRef<'a> {
    ItemRef { chat_id, item_id }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_weight_are_bounded() {
        let map: Bounded<String, u32> = Bounded::new(4, 100);
        let ticket = map.ticket();
        for i in 0..10 {
            assert!(map.offer(ticket, format!("k{i}"), i, 1));
            assert!(map.len() <= 4);
        }
        // The newest entries stay.
        assert_eq!(map.get("k9"), Some(9));
        assert_eq!(map.get("k0"), None);
        // One entry heavier than half the room is never cached.
        assert!(!map.offer(map.ticket(), "heavy".into(), 0, 51));
        // Weight turns the halves over as entries do.
        let map: Bounded<String, u32> = Bounded::new(1_000, 100);
        for i in 0..10 {
            assert!(map.offer(map.ticket(), format!("k{i}"), i, 30));
        }
        let maps = map.lock();
        let weight: usize = maps
            .young
            .values()
            .chain(maps.old.values())
            .map(|e| e.1)
            .sum();
        assert!(weight <= 100, "{weight}");
    }

    #[test]
    fn entries_in_use_are_kept() {
        let map: Bounded<String, u32> = Bounded::new(4, usize::MAX);
        let t = map.ticket();
        assert!(map.offer(t, "hot".into(), 1, 1));
        for i in 0..20 {
            assert!(map.offer(t, format!("k{i}"), i, 1));
            assert_eq!(map.get("hot"), Some(1), "round {i}");
        }
    }

    #[test]
    fn an_invalidation_refuses_older_offers() {
        let map: Bounded<String, u32> = Bounded::new(8, usize::MAX);
        let before = map.ticket();
        assert!(map.offer(before, "a".into(), 1, 1));
        // A write commits and drops "a" while a reader holds `before` and an old value.
        map.invalidate("a");
        assert_eq!(map.get("a"), None);
        assert!(!map.offer(before, "a".into(), 1, 1));
        assert_eq!(map.get("a"), None);
        // A read that began after the write may fill.
        assert!(map.offer(map.ticket(), "a".into(), 2, 1));
        assert_eq!(map.get("a"), Some(2));
    }

    #[test]
    fn the_store_caches_hold_their_limits() {
        let cache = StoreCache::default();
        let (chats, items, access) = (
            cache.chats.ticket(),
            cache.items.ticket(),
            cache.access.ticket(),
        );
        let chat = Arc::new(CachedChat {
            row: ChatRow {
                chat: crate::store::Chat {
                    id: "c".into(),
                    title: String::new(),
                    project: "web".into(),
                    created_at: 0,
                },
                owner: "alice".into(),
            },
            info: Arc::default(),
        });
        let facts = Arc::new(CachedFacts::new(settled_facts()));
        for i in 0..MAX_CACHED_CHATS + 10 {
            assert!(
                cache
                    .chats
                    .offer(chats, format!("c{i}"), Arc::clone(&chat), 0)
            );
        }
        assert!(cache.chats.len() <= MAX_CACHED_CHATS);
        let key = |i: usize| item_key("c", &format!("i{i}")).to_key();
        for i in 0..MAX_CACHED_ITEMS + 10 {
            assert!(cache.items.offer(items, key(i), Arc::clone(&facts), 1));
        }
        assert!(cache.items.len() <= MAX_CACHED_ITEMS);
        for i in 0..MAX_CACHED_ACCESS + 10 {
            assert!(cache.access.offer(access, key(i), Arc::new(Value::Null), 1));
        }
        assert!(cache.access.len() <= MAX_CACHED_ACCESS);
        // By bytes: heavy entries turn the halves over long before the entry limits.
        let heavy = MAX_CACHED_ITEM_BYTES / 8;
        for i in 0..64 {
            let heavy_key = item_key("h", &format!("{i}")).to_key();
            assert!(
                cache
                    .items
                    .offer(items, heavy_key, Arc::clone(&facts), heavy)
            );
        }
        assert!(cache.items.len() <= 8 + MAX_CACHED_ITEMS / 2);
        assert!(
            !cache
                .items
                .offer(items, key(0), facts, MAX_CACHED_ITEM_BYTES / 2 + 1)
        );
        let heavy = MAX_CACHED_ACCESS_BYTES / 4;
        for i in 0..16 {
            let heavy_key = item_key("g", &format!("{i}")).to_key();
            assert!(
                cache
                    .access
                    .offer(access, heavy_key, Arc::new(Value::Null), heavy)
            );
        }
        let maps = cache.access.lock();
        let weight: usize = maps
            .young
            .values()
            .chain(maps.old.values())
            .map(|e| e.1)
            .sum();
        assert!(weight <= MAX_CACHED_ACCESS_BYTES, "{weight}");
    }

    /// The facts of a finished item of `c` with one block `b`.
    fn settled_facts() -> ItemFacts {
        let options = ui_compiler::CompileOptions {
            is_final: true,
            ..Default::default()
        };
        let blocks = ui_compiler::compile_reply("```ui\n<Summary>x</Summary>\n```\n", &options);
        ItemFacts {
            assistant: true,
            streaming: false,
            subagent: false,
            author_chat_id: Some("c".into()),
            blocks: blocks.into_iter().map(Arc::new).collect(),
        }
    }

    #[test]
    fn cached_facts_are_handed_out_under_a_lease_their_writes_withdraw() {
        let cache = StoreCache::default();
        let offer = |item: &str| {
            let cached = Arc::new(CachedFacts::new(settled_facts()));
            let block_id = cached.facts.blocks[0].id.clone();
            let key = item_key("c", item).to_key();
            assert!(cache.items.offer(cache.items.ticket(), key, cached, 1));
            let cached = cache.items.get(&item_key("c", item)).expect("cached");
            cached.block(&block_id).expect("the block")
        };
        // Every copy of an entry's facts carries the entry's one lease.
        let first = offer("i1");
        let lease = first.lease.clone().expect("a lease");
        assert!(lease.holds());
        let again = offer("i1");
        assert_ne!(first.lease, again.lease, "a new entry, a new lease");
        assert!(
            !lease.holds(),
            "the entry it replaced is gone, and its lease with it"
        );
        let lease = again.lease.expect("a lease");
        // A write to the item withdraws it, even while someone holds the facts.
        let held = cache.items.get(&item_key("c", "i1")).expect("cached");
        cache.item_written("c", "i1");
        assert!(!lease.holds());
        drop(held);
        // A write to the item's access withdraws the item's lease too.
        let lease = offer("i2").lease.expect("a lease");
        cache.access_written("c", "i2");
        assert!(!lease.holds());
        assert!(cache.items.get(&item_key("c", "i2")).is_none());
        // Facts not cached carry no lease.
        let block_id = settled_facts().blocks[0].id.clone();
        assert_eq!(
            settled_facts()
                .block(&block_id, None)
                .expect("a block")
                .lease,
            None
        );
    }

    #[test]
    fn a_lease_ends_when_its_entry_leaves_the_cache() {
        let items: Bounded<ItemKey, Arc<CachedFacts>> = Bounded::new(2, usize::MAX);
        let t = items.ticket();
        let cached = Arc::new(CachedFacts::new(settled_facts()));
        let block_id = cached.facts.blocks[0].id.clone();
        let lease = cached
            .block(&block_id)
            .expect("a block")
            .lease
            .expect("a lease");
        assert!(items.offer(t, item_key("c", "old").to_key(), cached, 1));
        assert!(lease.holds());
        // Two younger entries turn the halves over twice: the first entry is dropped.
        for item in ["a", "b", "d", "e"] {
            let key = item_key("c", item).to_key();
            assert!(items.offer(t, key, Arc::new(CachedFacts::new(settled_facts())), 1));
        }
        assert!(items.get(&item_key("c", "old")).is_none());
        assert!(!lease.holds());
    }

    #[test]
    fn item_keys_never_collide() {
        let map: Bounded<ItemKey, u32> = Bounded::new(64, usize::MAX);
        let pairs = [
            ("ab", "c"),
            ("a", "bc"),
            ("1:a", "b"),
            ("1", ":ab"),
            ("", "i"),
        ];
        for (n, (chat, item)) in (0..).zip(pairs) {
            assert!(map.offer(map.ticket(), item_key(chat, item).to_key(), n, 1));
        }
        for (n, (chat, item)) in (0..).zip(pairs) {
            assert_eq!(map.get(&item_key(chat, item)), Some(n), "{chat:?} {item:?}");
        }
        assert_eq!(map.get(&item_key("a", "b")), None);
        assert_eq!(map.get(&item_key("abc", "")), None);
    }

    #[test]
    fn a_borrowed_item_key_hashes_as_the_key_it_names() {
        use std::hash::BuildHasher;
        let state = foldhash::fast::RandomState::default();
        let long = "c".repeat(1234);
        for (chat, item) in [("chat", "item"), ("", ""), (long.as_str(), "i"), ("é", "☃")] {
            let borrowed = item_key(chat, item);
            assert_eq!(
                state.hash_one(borrowed),
                state.hash_one(borrowed.to_key()),
                "{chat:?} {item:?}"
            );
            assert!(borrowed.equivalent(&borrowed.to_key()));
        }
        // A hit in the old half is found borrowed and moves back to the young half.
        let map: Bounded<ItemKey, u32> = Bounded::new(2, usize::MAX);
        let t = map.ticket();
        assert!(map.offer(t, item_key("c", "old").to_key(), 1, 1));
        assert!(map.offer(t, item_key("c", "new").to_key(), 2, 1));
        assert_eq!(map.get(&item_key("c", "old")), Some(1));
        map.invalidate(&item_key("c", "old"));
        assert_eq!(map.get(&item_key("c", "old")), None);
        assert_eq!(map.get(&item_key("c", "new")), Some(2));
    }
}
