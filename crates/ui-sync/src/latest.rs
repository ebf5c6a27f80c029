//! The server's latest index (`sync.md` §3.3): `(scope, key|whole)` → max seq and
//! `scope` → max seq over all its keys, fed only by the tailer, bounded, with a `base` that
//! answers every miss.

use std::collections::BTreeMap;

use foldhash::HashMap;

use crate::types::{LogRow, Op, Seq, Token};

/// One entry: a scope's maximum, or one key (or the whole source) inside a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Scope(Token),
    Key(Token, Option<Token>),
}

/// Latest seq per scope and per key, at most `cap` entries in all. When full, the least
/// recently updated entry is evicted and `base` rises to its seq; a lookup that misses
/// answers `base`, which is never below the true value of anything evicted or never seen
/// since `base` was set.
#[derive(Debug)]
pub(crate) struct LatestIndex {
    cap: usize,
    base: Seq,
    stamp: u64,
    entries: HashMap<Slot, (Seq, u64)>,
    /// Update stamp → slot, oldest first.
    order: BTreeMap<u64, Slot>,
}

impl LatestIndex {
    /// An empty index whose misses answer `base` (the head at process start).
    pub(crate) fn new(cap: usize, base: Seq) -> Self {
        LatestIndex {
            cap: cap.max(1),
            base,
            stamp: 0,
            entries: HashMap::default(),
            order: BTreeMap::new(),
        }
    }

    /// Applies tailed rows, in seq order. A `reset` row raises `base` to its seq and
    /// forgets every entry: every reading older than it is stale.
    pub(crate) fn apply(&mut self, rows: &[LogRow]) {
        for row in rows {
            if row.row.op == Op::Reset {
                self.entries.clear();
                self.order.clear();
                self.base = self.base.max(row.seq);
                continue;
            }
            self.bump(Slot::Key(row.row.scope, row.row.key), row.seq);
            self.bump(Slot::Scope(row.row.scope), row.seq);
        }
    }

    fn bump(&mut self, slot: Slot, seq: Seq) {
        self.stamp += 1;
        let stamp = self.stamp;
        if let Some((value, old)) = self.entries.get_mut(&slot) {
            self.order.remove(old);
            *value = (*value).max(seq);
            *old = stamp;
            self.order.insert(stamp, slot);
            return;
        }
        self.entries.insert(slot, (seq, stamp));
        self.order.insert(stamp, slot);
        while self.entries.len() > self.cap {
            let Some((_, evicted)) = self.order.pop_first() else {
                break;
            };
            if let Some((value, _)) = self.entries.remove(&evicted) {
                self.base = self.base.max(value);
            }
        }
    }

    fn get(&self, slot: Slot) -> Seq {
        self.entries
            .get(&slot)
            .map_or(self.base, |(seq, _)| (*seq).max(self.base))
    }

    /// §8.4 step 2: the scope's value when `keys` is empty, else the maximum of the
    /// whole-source entry and each key's entry.
    pub(crate) fn relevant(&self, scope: &Token, keys: &[Token]) -> Seq {
        if keys.is_empty() {
            return self.get(Slot::Scope(*scope));
        }
        keys.iter()
            .map(|k| self.get(Slot::Key(*scope, Some(*k))))
            .fold(self.get(Slot::Key(*scope, None)), Seq::max)
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// What a miss answers.
    #[cfg(test)]
    pub(crate) fn base(&self) -> Seq {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Audience, NewRow};

    fn row(seq: u64, scope: u8, key: Option<u8>, op: Op) -> LogRow {
        LogRow {
            seq: Seq(seq),
            row: NewRow {
                source: "ci.runs".into(),
                audience: Audience::project("p"),
                scope: Token([scope; 16]),
                key: key.map(|k| Token([k; 16])),
                rs: None,
                op,
                n: 1,
                at_ms: 0,
            },
        }
    }

    #[test]
    fn lookups_take_the_maximum_of_whole_and_keys() {
        let mut index = LatestIndex::new(100, Seq(5));
        index.apply(&[
            row(6, 1, Some(1), Op::Change),
            row(7, 1, None, Op::Change),
            row(8, 1, Some(2), Op::Change),
        ]);
        let (s, k1, k2, k3) = (
            Token([1; 16]),
            Token([1; 16]),
            Token([2; 16]),
            Token([3; 16]),
        );
        assert_eq!(index.relevant(&s, &[]), Seq(8));
        assert_eq!(index.relevant(&s, &[k1]), Seq(7));
        assert_eq!(index.relevant(&s, &[k2]), Seq(8));
        assert_eq!(index.relevant(&s, &[k3]), Seq(7));
        assert_eq!(index.relevant(&Token([9; 16]), &[k1]), Seq(5));
    }

    #[test]
    fn eviction_raises_the_base_and_stays_bounded() {
        let mut index = LatestIndex::new(4, Seq(0));
        for seq in 1..=10 {
            index.apply(&[row(seq, seq as u8, Some(1), Op::Change)]);
            assert!(index.len() <= 4);
        }
        assert_eq!(index.base(), Seq(8));
        assert_eq!(index.relevant(&Token([1; 16]), &[]), Seq(8));
        assert_eq!(index.relevant(&Token([10; 16]), &[]), Seq(10));
    }

    #[test]
    fn a_reset_row_makes_everything_at_least_its_seq() {
        let mut index = LatestIndex::new(10, Seq(0));
        index.apply(&[row(3, 1, Some(1), Op::Change), row(4, 0, None, Op::Reset)]);
        assert_eq!(index.len(), 0);
        assert_eq!(index.relevant(&Token([1; 16]), &[Token([1; 16])]), Seq(4));
    }
}
