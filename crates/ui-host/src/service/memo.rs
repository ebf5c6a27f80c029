//! The argument memo: the arguments `query_arguments` evaluated for a block revision, query
//! and input and parsed by the query's source, so a cached `ui.query` answer neither
//! evaluates the block nor parses the arguments again.

use std::hash::{BuildHasher, Hash, Hasher};

use indexmap::{Equivalent, IndexMap};
use ui_core::{Record, Value};

use super::key::{DIGEST, Structural};

/// How many evaluated query arguments the service remembers (see [`ArgumentMemo`]).
const MAX_MEMOIZED_ARGUMENTS: usize = 256;

/// The parsed arguments of a block revision, query and input, oldest first.
/// `query_arguments` is a pure function of the block, the query name and the input (under
/// the service's fixed limits); a revision names one block content (`host.md` §2.2), whose
/// query names one source of the host's fixed registry; and a source's argument schema
/// parses as a function of its input (`ValueSchema::parse`). So a remembered result is the
/// result evaluating and parsing again would give. Only successes are kept: a failure may
/// be the copy's or the evaluation's wall-time budget, which a retry may pass.
#[derive(Debug, Default)]
pub(super) struct ArgumentMemo {
    /// Oldest first (insertion order): the oldest goes when the memo is full.
    /// With their digest ([`Structural`]), which every read's [`ShareKey`] needs.
    ///
    /// [`ShareKey`]: super::key::ShareKey
    args: IndexMap<MemoKey, Structural<Record>, foldhash::fast::RandomState>,
}

impl ArgumentMemo {
    pub(super) fn get(&self, key: &MemoKeyRef<'_>) -> Option<Structural<Record>> {
        self.args.get(key).cloned()
    }

    pub(super) fn insert(&mut self, key: &MemoKeyRef<'_>, args: Structural<Record>) {
        if self.args.contains_key(key) {
            return;
        }
        if self.args.len() >= MAX_MEMOIZED_ARGUMENTS {
            // Shifts the rest: only after an evaluation, which costs far more.
            self.args.shift_remove_index(0);
        }
        self.args.insert(key.to_key(), args);
    }
}

/// The memo's key: a block revision, the block's id, the query name and the input, which
/// is compared exactly (its own key order, numbers by their bits: `-0` is not `0`), as
/// evaluating it could tell those apart.
#[derive(Debug, Clone)]
struct MemoKey {
    parts: [Box<str>; 3],
    values: Record,
    digest: u64,
}

/// A [`MemoKey`] borrowed from a request: the memo is looked up without copying it.
#[derive(Debug, Clone, Copy)]
pub(super) struct MemoKeyRef<'a> {
    parts: [&'a str; 3],
    values: &'a Record,
    digest: u64,
}

impl<'a> MemoKeyRef<'a> {
    /// The key of `name` in the block `block_id` at `revision`, with the input `values`.
    pub(super) fn new(
        revision: &'a str,
        block_id: &'a str,
        name: &'a str,
        values: &'a Record,
    ) -> Self {
        let parts = [revision, block_id, name];
        let mut h = DIGEST.build_hasher();
        parts.hash(&mut h);
        hash_record(values, &mut h);
        MemoKeyRef {
            parts,
            values,
            digest: h.finish(),
        }
    }

    fn to_key(self) -> MemoKey {
        MemoKey {
            parts: self.parts.map(Box::from),
            values: self.values.clone(),
            digest: self.digest,
        }
    }
}

impl Hash for MemoKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest);
    }
}

impl Hash for MemoKeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest);
    }
}

impl PartialEq for MemoKey {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
            && self.parts == other.parts
            && same_record(&self.values, &other.values)
    }
}

impl Eq for MemoKey {}

impl Equivalent<MemoKey> for MemoKeyRef<'_> {
    fn equivalent(&self, key: &MemoKey) -> bool {
        self.digest == key.digest
            && self
                .parts
                .iter()
                .copied()
                .eq(key.parts.iter().map(|p| &**p))
            && same_record(self.values, &key.values)
    }
}

/// Writes `record` into `h` in its own key order, numbers by their bits: identical records
/// write alike.
fn hash_record<H: Hasher>(record: &Record, h: &mut H) {
    record.len().hash(h);
    for (key, item) in record {
        key.hash(h);
        hash_value(item, h);
    }
}

fn hash_value<H: Hasher>(value: &Value, h: &mut H) {
    match value {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            b.hash(h);
        }
        Value::Number(n) => {
            h.write_u8(2);
            n.get().to_bits().hash(h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(h);
        }
        Value::Array(items) => {
            h.write_u8(4);
            items.len().hash(h);
            for item in items.iter() {
                hash_value(item, h);
            }
        }
        Value::Record(record) => {
            h.write_u8(5);
            hash_record(record, h);
        }
    }
}

/// Whether `a` and `b` are identical: the same entries in the same order, numbers with
/// the same bits.
fn same_record(a: &Record, b: &Record) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && same_value(va, vb))
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.get().to_bits() == y.get().to_bits(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| same_value(a, b))
        }
        (Value::Record(x), Value::Record(y)) => same_record(x, y),
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn record(entries: &[(&str, Value)]) -> Record {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn number(n: f64) -> Value {
        Value::number(n).expect("finite")
    }

    /// The memo tells apart inputs that evaluation could tell apart: key order, the sign
    /// of zero, the parts of the key.
    #[test]
    fn keys_are_exact() {
        let memo_of = |values: &Record| {
            let mut memo = ArgumentMemo::default();
            memo.insert(
                &MemoKeyRef::new("r1", "b1", "$q", values),
                Structural::new(Arc::new(Record::default())),
            );
            memo
        };
        let ab = record(&[("a", number(0.0)), ("b", Value::from("x"))]);
        let memo = memo_of(&ab);
        let found = |r: &str, b: &str, q: &str, v: &Record| {
            memo.get(&MemoKeyRef::new(r, b, q, v)).is_some()
        };
        assert!(found("r1", "b1", "$q", &ab.clone()));
        assert!(!found("r1", "b1", "$r", &ab));
        assert!(!found("r2", "b1", "$q", &ab));
        assert!(!found("r1", "b2", "$q", &ab));
        let ba = record(&[("b", Value::from("x")), ("a", number(0.0))]);
        assert!(!found("r1", "b1", "$q", &ba), "key order");
        let negative = record(&[("a", number(-0.0)), ("b", Value::from("x"))]);
        assert!(!found("r1", "b1", "$q", &negative), "the sign of zero");
        let nested = record(&[("a", Value::record(ab.clone()))]);
        let memo = memo_of(&nested);
        assert!(
            memo.get(&MemoKeyRef::new("r1", "b1", "$q", &nested.clone()))
                .is_some()
        );
        let other = record(&[("a", Value::record(ba))]);
        assert!(
            memo.get(&MemoKeyRef::new("r1", "b1", "$q", &other))
                .is_none()
        );
    }

    /// The memo keeps the newest entries up to its bound.
    #[test]
    fn the_oldest_entry_goes_first() {
        let mut memo = ArgumentMemo::default();
        let values = Record::default();
        let names: Vec<String> = (0..=MAX_MEMOIZED_ARGUMENTS)
            .map(|i| format!("$q{i}"))
            .collect();
        for name in &names {
            memo.insert(
                &MemoKeyRef::new("r", "b", name, &values),
                Structural::new(Arc::new(Record::default())),
            );
        }
        assert_eq!(memo.args.len(), MAX_MEMOIZED_ARGUMENTS);
        assert!(
            memo.get(&MemoKeyRef::new("r", "b", &names[0], &values))
                .is_none()
        );
        assert!(
            memo.get(&MemoKeyRef::new("r", "b", &names[1], &values))
                .is_some()
        );
        assert!(
            memo.get(&MemoKeyRef::new(
                "r",
                "b",
                &names[MAX_MEMOIZED_ARGUMENTS],
                &values
            ))
            .is_some()
        );
    }
}
