//! The typed keys of the service's maps (`host.md` §7, `sync.md` §8.2).
//!
//! - [`QueryKey`] names the admission table's entries: a query of a stored block (chat,
//!   item, block, revision, query name), either with its parsed arguments (cache, reads in
//!   flight, the key's attempt window) or without them (the identity's attempt window).
//! - [`ShareKey`] names a source read that identical reads share: the source, the parsed
//!   arguments and the captured access.
//!
//! A request looks the admission table up by a [`QueryKeyRef`] borrowed from its payload,
//! and copies it into a [`QueryKey`] only for an entry it inserts.
//!
//! Arguments and access compare structurally ([`Structural`]): `ui_core::Value` equality,
//! under which a record's key order does not matter and `-0` equals `0`. Their hash is a
//! digest that agrees with that equality, computed once when the key is made: a cached
//! `ui.query` looks its keys up in several maps, and hashing a record structurally means
//! sorting its entries or combining one hash per entry (`benches/NOTES.md`).

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock};

use indexmap::Equivalent;
use ui_core::{Record, Value};

use crate::payload::QueryPayload;

/// A query of a stored block, whatever its arguments, with a digest (hashed once, though
/// the admission table looks the key up several times).
#[derive(Debug, Clone)]
pub(crate) struct QueryId {
    chat_id: String,
    item_id: String,
    block_id: String,
    revision: String,
    query: String,
    digest: u64,
}

impl QueryId {
    fn parts(&self) -> [&str; 5] {
        [
            &self.chat_id,
            &self.item_id,
            &self.block_id,
            &self.revision,
            &self.query,
        ]
    }

    /// Whether `id` names this query.
    fn is(&self, id: &QueryIdRef<'_>) -> bool {
        self.digest == id.digest && self.parts() == id.parts
    }
}

impl PartialEq for QueryId {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest && self.parts() == other.parts()
    }
}

impl Eq for QueryId {}

/// The parts of a [`QueryId`] borrowed from a request, with their digest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueryIdRef<'a> {
    parts: [&'a str; 5],
    digest: u64,
}

impl<'a> QueryIdRef<'a> {
    /// The query `p` names.
    pub(crate) fn of(p: &'a QueryPayload) -> Self {
        let parts = Self::parts_of(p);
        QueryIdRef {
            parts,
            // Every part, the chat's too: item ids are the host's, and one may number its
            // items per chat (`i1` in every chat). Leaving a part out put the keys of every
            // chat's `i1` in one bucket, and 10,000 pages' lookups went from constant to
            // linear time each (`benches/NOTES.md`).
            digest: DIGEST.hash_one(parts),
        }
    }

    /// The query `p` names, with the digest [`QueryIdRef::of`] gave it before.
    pub(crate) fn with_digest(p: &'a QueryPayload, digest: u64) -> Self {
        QueryIdRef {
            parts: Self::parts_of(p),
            digest,
        }
    }

    /// The digest of the query's parts.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    fn parts_of(p: &'a QueryPayload) -> [&'a str; 5] {
        [
            p.chat_id.as_str(),
            &p.item_id,
            &p.block_id,
            &p.revision,
            &p.query,
        ]
    }
}

/// The name of an admission-table entry (`host.md` §7). The two kinds share the attempt
/// table and never equal each other. A request looks its entries up by a [`QueryKeyRef`],
/// and makes a `QueryKey` only for what it inserts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QueryKey {
    /// A query with any arguments: the identity's attempt window (`readGap`).
    Identity(Arc<QueryId>),
    /// A query with its parsed arguments: cache, reads in flight, the key's attempt window.
    Reading(Arc<QueryId>, Structural<Record>),
}

impl Hash for QueryKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            QueryKey::Identity(id) => hash_key(id.digest, None, state),
            QueryKey::Reading(id, args) => hash_key(id.digest, Some(args.digest), state),
        }
    }
}

/// A [`QueryKey`] borrowed from a request: it hashes as the key it names and is
/// [`Equivalent`] to it, so the maps of [`QueryKey`]s are looked up without copying the
/// request's parts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueryKeyRef<'a> {
    id: QueryIdRef<'a>,
    /// `None` for the identity.
    args: Option<&'a Structural<Record>>,
}

impl<'a> QueryKeyRef<'a> {
    /// The identity of `id`: the query with any arguments.
    pub(crate) fn identity(id: QueryIdRef<'a>) -> Self {
        QueryKeyRef { id, args: None }
    }

    /// The reading key of `id` with its parsed `args`.
    pub(crate) fn reading(id: QueryIdRef<'a>, args: &'a Structural<Record>) -> Self {
        QueryKeyRef {
            id,
            args: Some(args),
        }
    }

    /// The key this names, owning its parts.
    pub(crate) fn to_key(self) -> QueryKey {
        let [chat_id, item_id, block_id, revision, query] = self.id.parts.map(str::to_owned);
        let id = Arc::new(QueryId {
            chat_id,
            item_id,
            block_id,
            revision,
            query,
            digest: self.id.digest,
        });
        match self.args {
            None => QueryKey::Identity(id),
            Some(args) => QueryKey::Reading(id, args.clone()),
        }
    }
}

impl Hash for QueryKeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_key(self.id.digest, self.args.map(|a| a.digest), state);
    }
}

impl Equivalent<QueryKey> for QueryKeyRef<'_> {
    fn equivalent(&self, key: &QueryKey) -> bool {
        match (key, self.args) {
            (QueryKey::Identity(id), None) => id.is(&self.id),
            (QueryKey::Reading(id, args), Some(other)) => id.is(&self.id) && args == other,
            _ => false,
        }
    }
}

/// The hash of a query key, owned or borrowed alike: its kind and its digests.
fn hash_key<H: Hasher>(id: u64, args: Option<u64>, state: &mut H) {
    match args {
        None => {
            state.write_u8(0);
            state.write_u64(id);
        }
        Some(args) => {
            state.write_u8(1);
            state.write_u64(id);
            state.write_u64(args);
        }
    }
}

/// The source-read key (`sync.md` §8.2): source name, parsed arguments and captured access,
/// both compared structurally. The access is kept whole rather than as a digest, so two
/// principals' reads can never share by collision.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ShareKey {
    source: Arc<str>,
    args: Structural<Record>,
    access: Structural<Value>,
}

impl ShareKey {
    /// The key of `source` read with `args` and `access`, sharing their allocations (the
    /// arguments come with their digest, remembered with them).
    pub(crate) fn shared(
        source: &Arc<str>,
        args: &Structural<Record>,
        access: &Arc<Value>,
    ) -> ShareKey {
        ShareKey {
            source: Arc::clone(source),
            args: args.clone(),
            access: Structural::new(Arc::clone(access)),
        }
    }

    /// The source name, the arguments and the access.
    pub(crate) fn parts(&self) -> (&str, &Record, &Value) {
        (&self.source, &self.args.value, &self.access.value)
    }

    /// The arguments with their digest, for the [`QueryKeyRef`] of the same request.
    pub(crate) fn args(&self) -> &Structural<Record> {
        &self.args
    }

    #[cfg(test)]
    pub(crate) fn new(source: &str, args: &Record, access: &Value) -> ShareKey {
        ShareKey::shared(
            &Arc::from(source),
            &Structural::new(Arc::new(args.clone())),
            &Arc::new(access.clone()),
        )
    }
}

/// A value compared by `ui_core::Value` equality (records as maps, numbers by value), with
/// a digest that agrees with it: equal values have equal digests. Values hold only finite
/// numbers, so the equality is total.
#[derive(Debug, Clone)]
pub(crate) struct Structural<T> {
    value: Arc<T>,
    digest: u64,
}

impl<T: Digest> Structural<T> {
    /// `value` with its digest.
    pub(crate) fn new(value: Arc<T>) -> Self {
        let digest = value.digest();
        Structural { value, digest }
    }
}

impl<T> Structural<T> {
    /// The value, shared.
    pub(crate) fn value(&self) -> &Arc<T> {
        &self.value
    }
}

/// What a [`Structural`] can hold: a digest that agrees with `==`.
pub(crate) trait Digest: PartialEq {
    /// Equal for equal values.
    fn digest(&self) -> u64;
}

impl Digest for Record {
    fn digest(&self) -> u64 {
        digest_record(self)
    }
}

impl Digest for Value {
    fn digest(&self) -> u64 {
        digest_value(self)
    }
}

impl<T: PartialEq> PartialEq for Structural<T> {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
            && (Arc::ptr_eq(&self.value, &other.value) || *self.value == *other.value)
    }
}

impl<T: PartialEq> Eq for Structural<T> {}

impl<T> Hash for Structural<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest);
    }
}

/// The digests' hasher: foldhash seeded once per process at random, so that the digests of
/// page-supplied arguments cannot be chosen to collide from outside.
pub(super) static DIGEST: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

/// The digest of `value`, equal for equal values (`Value`'s `==`): `-0` as `0`, and a
/// record's entries in any order.
fn digest_value(value: &Value) -> u64 {
    let mut h = DIGEST.build_hasher();
    match value {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            b.hash(&mut h);
        }
        Value::Number(n) => {
            h.write_u8(2);
            // `+ 0.0` turns `-0` into `0`; every other finite number keeps its bits.
            (n.get() + 0.0).to_bits().hash(&mut h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(&mut h);
        }
        Value::Array(items) => {
            h.write_u8(4);
            items.len().hash(&mut h);
            for item in items.iter() {
                h.write_u64(digest_value(item));
            }
        }
        Value::Record(record) => {
            h.write_u8(5);
            h.write_u64(digest_record(record));
        }
    }
    h.finish()
}

/// The digest of `record`: the wrapping sum of one hash per entry, which does not depend on
/// the entries' order, then hashed with the entry count.
fn digest_record(record: &Record) -> u64 {
    let sum = record.iter().fold(0u64, |sum, (key, item)| {
        sum.wrapping_add(DIGEST.hash_one((key.as_str(), digest_value(item))))
    });
    DIGEST.hash_one((record.len(), sum))
}

/// A canonical text of `value`, equal for equal values (`Value`'s `==`): records' keys sorted,
/// each after its length; scalars as JavaScript JSON (`-0` as `0`). The tests' reference model
/// of the typed keys, and the key text of kept readings.
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
        scalar => scalar.write_js_json(out).expect("a string takes any text"),
    }
}

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

fn push_part(out: &mut String, part: &str) {
    out.push_str(&part.len().to_string());
    out.push(':');
    out.push_str(part);
}

/// The text of the reading key of `p` with its parsed `args` (chat, item, block, revision,
/// query, arguments), equal for equal keys: what a store compares whole for a kept reading
/// ([`crate::KeptReading`]), which another process may have read.
pub(crate) fn reading_key_text(p: &QueryPayload, args: &Record) -> String {
    let mut k = String::new();
    for part in [&p.chat_id, &p.item_id, &p.block_id, &p.revision, &p.query] {
        push_part(&mut k, part);
    }
    canonical_record(args, &mut k);
    k
}

#[cfg(test)]
mod tests {
    //! The typed keys against a reference model, canonical text encodings of the same
    //! payloads: every pair of generated values must be equal under both or under neither
    //! (equal typed keys also hash alike).

    use std::collections::hash_map::DefaultHasher;

    use proptest::prelude::*;

    use super::*;

    /// The reference cache key (`'k'`) or identity (`'i'`) of a payload.
    fn old_key(tag: char, p: &QueryPayload, args: Option<&Record>) -> String {
        let mut k = String::from(tag);
        for part in [&p.chat_id, &p.item_id, &p.block_id, &p.revision, &p.query] {
            push_part(&mut k, part);
        }
        if let Some(args) = args {
            canonical_record(args, &mut k);
        }
        k
    }

    /// The reference share key, with the access text in place of its SHA-256.
    fn old_share(source: &str, args: &Record, access: &Value) -> String {
        let mut k = String::new();
        push_part(&mut k, source);
        let mut text = String::new();
        canonical_record(args, &mut text);
        push_part(&mut k, &text);
        canonical(access, &mut k);
        k
    }

    fn hash_of<T: Hash>(t: &T) -> u64 {
        let mut h = DefaultHasher::new();
        t.hash(&mut h);
        h.finish()
    }

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(1.0),
            Just(-1.5),
            Just(1e21),
            Just(0.1 + 0.2),
            any::<i8>().prop_map(f64::from),
        ]
        .prop_map(|n| Value::number(n).expect("finite"))
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number(),
            prop::sample::select(vec!["", "a", "b", "1:a", "{", "\"", "0", "null"])
                .prop_map(Value::from),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(3, 16, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3)
                    .prop_map(|items| Value::Array(Arc::new(items))),
                prop::collection::vec(
                    (prop::sample::select(vec!["a", "b", "c", "1:a"]), inner),
                    0..3
                )
                .prop_map(|entries| {
                    let record: Record = entries
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect();
                    Value::Record(Arc::new(record))
                }),
            ]
        })
    }

    /// The same value with every record's entries reversed and every zero's sign flipped:
    /// structurally equal, written differently.
    fn twin(value: &Value) -> Value {
        match value {
            Value::Number(n) if n.get() == 0.0 => Value::number(-n.get()).expect("finite"),
            Value::Array(items) => Value::Array(Arc::new(items.iter().map(twin).collect())),
            Value::Record(record) => Value::Record(Arc::new(
                record
                    .iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), twin(v)))
                    .collect(),
            )),
            other => other.clone(),
        }
    }

    fn record(value: &Value) -> Record {
        let mut r = Record::default();
        r.insert("x".to_owned(), value.clone());
        r
    }

    fn payload(query: &str) -> QueryPayload {
        QueryPayload {
            chat_id: "c1".into(),
            item_id: "i1".into(),
            block_id: "b1".into(),
            revision: "r1".into(),
            query: query.into(),
            values: Record::default(),
            seen: None,
        }
    }

    /// The identity and the reading key of `p` with `args`, owned.
    fn keys(p: &QueryPayload, args: &Structural<Record>) -> (QueryKey, QueryKey) {
        let id = QueryIdRef::of(p);
        (
            QueryKeyRef::identity(id).to_key(),
            QueryKeyRef::reading(id, args).to_key(),
        )
    }

    fn check(a: &Value, b: &Value) -> Result<(), TestCaseError> {
        let (ra, rb) = (Arc::new(record(a)), Arc::new(record(b)));
        let p = payload("$q");
        let (sa, sb) = (
            Structural::new(Arc::clone(&ra)),
            Structural::new(Arc::clone(&rb)),
        );
        let (ia, ka) = keys(&p, &sa);
        let (ib, kb) = keys(&p, &sb);
        let old_equal = old_key('k', &p, Some(&ra)) == old_key('k', &p, Some(&rb));
        prop_assert_eq!(ka == kb, old_equal);
        prop_assert_eq!(&ia, &ib);
        if ka == kb {
            prop_assert_eq!(hash_of(&ka), hash_of(&kb));
        }
        // The borrowed key finds what the owned one names, and hashes as it does.
        let borrowed = QueryKeyRef::reading(QueryIdRef::of(&p), &sa);
        prop_assert_eq!(borrowed.equivalent(&kb), ka == kb);
        prop_assert!(borrowed.equivalent(&ka));
        prop_assert!(!borrowed.equivalent(&ia));
        prop_assert_eq!(hash_of(&borrowed), hash_of(&ka));
        let identity = QueryKeyRef::identity(QueryIdRef::of(&p));
        prop_assert!(identity.equivalent(&ib) && !identity.equivalent(&kb));
        prop_assert_eq!(hash_of(&identity), hash_of(&ia));
        let (sa, sb) = (ShareKey::new("s", &ra, a), ShareKey::new("s", &rb, b));
        prop_assert_eq!(sa == sb, old_share("s", &ra, a) == old_share("s", &rb, b));
        if sa == sb {
            prop_assert_eq!(hash_of(&sa), hash_of(&sb));
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn typed_keys_equate_what_the_string_keys_equated(a in value(), b in value()) {
            check(&a, &b)?;
            check(&a, &twin(&a))?;
            check(&twin(&b), &b)?;
        }
    }

    #[test]
    fn the_parts_of_a_key_stay_apart() {
        let args = Structural::new(Arc::new(Record::default()));
        let (identity, key) = keys(&payload("$q"), &args);
        assert_ne!(identity, key, "an identity never names a reading");
        let (other_identity, other_key) = keys(&payload("$r"), &args);
        assert_ne!(identity, other_identity);
        assert_ne!(key, other_key);
        let mut moved = payload("$q");
        moved.chat_id = "c1i".into();
        moved.item_id = "1".into();
        assert_ne!(keys(&moved, &args).1, key, "no part runs into the next");
        // Keys that differ in one part only hash apart (the digests are 64 bits): a map of
        // them keeps its buckets short however a host names its chats and items.
        let p = payload("$q");
        let changed: [fn(&mut QueryPayload); 5] = [
            |p| p.chat_id = "c2".into(),
            |p| p.item_id = "i2".into(),
            |p| p.block_id = "b2".into(),
            |p| p.revision = "r2".into(),
            |p| p.query = "$r".into(),
        ];
        for change in changed {
            let mut other = p.clone();
            change(&mut other);
            let (id, other_id) = (QueryIdRef::of(&p), QueryIdRef::of(&other));
            assert_ne!(id.digest, other_id.digest, "{other:?}");
            let (a, b) = (keys(&p, &args), keys(&other, &args));
            assert_ne!(hash_of(&a.0), hash_of(&b.0), "{other:?}");
            assert_ne!(hash_of(&a.1), hash_of(&b.1), "{other:?}");
        }
        let access = Value::from("u1");
        assert_ne!(
            ShareKey::new("s", &args.value, &access),
            ShareKey::new("t", &args.value, &access)
        );
        assert_ne!(
            ShareKey::new("s", &args.value, &access),
            ShareKey::new("s", &args.value, &Value::from("u2"))
        );
    }
}
