//! [`PropMap`]: the small ordered map a compiled node keeps its props in, and [`ReadProps`],
//! the read access the catalog's checks take, so that they serve both a compiled node's
//! [`Props`] and an evaluated view's [`Record`].
//!
//! A node has a handful of props, each named by its component's schema. A vector of pairs
//! finds a key of a few bytes faster than hashing it, and with names borrowed from the
//! catalog ([`Cow::Borrowed`]) building the map allocates once, for the vector. A
//! [`Record`] would allocate its hash table and a `String` per key besides.
//!
//! ```
//! use ui_core::{Props, ReadProps, Value};
//!
//! let mut props = Props::new();
//! props.insert("label", Value::from("p95"));
//! props.insert("value", Value::from(12));
//! assert_eq!(props.insert("label", Value::from("p99")), Some(Value::from("p95")));
//! assert_eq!(props.keys().collect::<Vec<_>>(), ["label", "value"]);
//! assert_eq!(props.get_prop("label"), Some(&Value::from("p99")));
//! assert_eq!(serde_json::to_string(&props).unwrap(), r#"{"label":"p99","value":12}"#);
//! ```

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::value::{Record, Value};

/// An insertion-ordered map from prop names to `V` with unique keys, for the few props of
/// one node. Lookups compare keys one by one.
///
/// `==` ignores the order of the entries, as [`Record`]'s does. On the wire it is a JSON
/// object.
#[derive(Clone)]
pub struct PropMap<V> {
    entries: Vec<(Cow<'static, str>, V)>,
}

/// A compiled node's constant props.
pub type Props = PropMap<Value>;

impl<V> PropMap<V> {
    /// An empty map; allocates nothing.
    #[inline]
    pub const fn new() -> Self {
        PropMap {
            entries: Vec::new(),
        }
    }

    /// An empty map with room for `capacity` entries.
    #[inline]
    pub fn with_capacity(capacity: usize) -> Self {
        PropMap {
            entries: Vec::with_capacity(capacity),
        }
    }

    /// A map of one entry, allocated at its size.
    #[inline]
    pub fn with_entry(key: impl Into<Cow<'static, str>>, value: V) -> Self {
        PropMap {
            entries: vec![(key.into(), value)],
        }
    }

    /// The number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[inline]
    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _)| same_name(k, key))
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries
            .iter()
            .find(|(k, _)| same_name(k, key))
            .map(|(_, v)| v)
    }

    /// The value of `key`, to change.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.entries
            .iter_mut()
            .find(|(k, _)| same_name(k, key))
            .map(|(_, v)| v)
    }

    /// Whether `key` has a value.
    #[inline]
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`. A key already present keeps its place and its old value is
    /// returned; a new key goes last. Pass a `&'static str` (a catalog name) to store the
    /// key without allocating.
    #[inline]
    pub fn insert(&mut self, key: impl Into<Cow<'static, str>>, value: V) -> Option<V> {
        let key = key.into();
        match self.position(&key) {
            Some(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, shifting the entries after it, and returns its value.
    pub fn shift_remove(&mut self, key: &str) -> Option<V> {
        let i = self.position(key)?;
        Some(self.entries.remove(i).1)
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The entries in order, with their keys as stored (borrowed names copy for free).
    #[inline]
    pub fn as_slice(&self) -> &[(Cow<'static, str>, V)] {
        &self.entries
    }

    /// The entries in order.
    #[inline]
    pub fn iter(&self) -> Iter<'_, V> {
        Iter {
            inner: self.entries.iter(),
        }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| &**k)
    }

    /// The values in order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }
}

impl<V> Default for PropMap<V> {
    fn default() -> Self {
        PropMap::new()
    }
}

/// Whether two names are equal, compared byte by byte in line: names are a few bytes long
/// and most pairs differ in length or first byte, where a call to `memcmp` costs more than
/// the comparison.
#[inline]
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The entries of a [`PropMap`] in order.
#[derive(Debug, Clone)]
pub struct Iter<'a, V> {
    inner: std::slice::Iter<'a, (Cow<'static, str>, V)>,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a str, &'a V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| (&**k, v))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(k, v)| (&**k, v))
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

impl<'a, V> IntoIterator for &'a PropMap<V> {
    type Item = (&'a str, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<V> IntoIterator for PropMap<V> {
    type Item = (Cow<'static, str>, V);
    type IntoIter = std::vec::IntoIter<(Cow<'static, str>, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Into<Cow<'static, str>>, V> Extend<(K, V)> for PropMap<V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K: Into<Cow<'static, str>>, V> FromIterator<(K, V)> for PropMap<V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = PropMap::new();
        map.extend(iter);
        map
    }
}

impl<V> std::ops::Index<&str> for PropMap<V> {
    type Output = V;

    /// The value of `key`; panics when there is none, as [`Record`]'s indexing does.
    fn index(&self, key: &str) -> &V {
        self.get(key)
            .unwrap_or_else(|| panic!("no prop `{key}` in the map"))
    }
}

impl<V: PartialEq> PartialEq for PropMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<V: fmt::Debug> fmt::Debug for PropMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Serialize> Serialize for PropMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for PropMap<V> {
    /// A JSON object; a repeated key keeps its first place and takes its last value.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(std::marker::PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = PropMap<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of props")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<PropMap<V>, A::Error> {
                // (Capped: the hint comes from the input.)
                let mut map = PropMap::with_capacity(access.size_hint().unwrap_or(0).min(64));
                while let Some((k, v)) = access.next_entry::<String, V>()? {
                    map.insert(k, v);
                }
                Ok(map)
            }
        }

        deserializer.deserialize_map(MapVisitor(std::marker::PhantomData))
    }
}

/// Read access to a node's props by name: what the catalog's checks
/// ([`Component::check`](crate::catalog::Component::check) and its siblings) need,
/// implemented by [`Props`] (compiled nodes) and [`Record`] (evaluated views and JSON input).
pub trait ReadProps {
    /// The value of the prop `name`.
    fn get_prop(&self, name: &str) -> Option<&Value>;

    /// How many props there are.
    fn prop_count(&self) -> usize;

    /// The props in order.
    fn prop_entries(&self) -> impl Iterator<Item = (&str, &Value)>;
}

impl ReadProps for Props {
    #[inline]
    fn get_prop(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }

    #[inline]
    fn prop_count(&self) -> usize {
        self.len()
    }

    fn prop_entries(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.iter()
    }
}

impl ReadProps for Record {
    #[inline]
    fn get_prop(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }

    #[inline]
    fn prop_count(&self) -> usize {
        self.len()
    }

    fn prop_entries(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_replace_in_place_and_removals_shift() {
        let mut map = PropMap::with_entry("a", 1);
        map.extend([("b", 2), ("c", 3)]);
        assert_eq!(map.insert("b", 20), Some(2));
        assert_eq!(map.insert(String::from("d"), 4), None);
        assert_eq!(map.shift_remove("a"), Some(1));
        assert_eq!(map.shift_remove("a"), None);
        let entries: Vec<_> = map.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(entries, [("b", 20), ("c", 3), ("d", 4)]);
        assert!(map.contains_key("d") && !map.contains_key("a"));
        assert_eq!(map["c"], 3);
        *map.get_mut("c").unwrap() = 30;
        assert_eq!(map.values().copied().collect::<Vec<_>>(), [20, 30, 4]);
    }

    #[test]
    fn equality_ignores_order_like_records() {
        let a: PropMap<i32> = [("x", 1), ("y", 2)].into_iter().collect();
        let b: PropMap<i32> = [("y", 2), ("x", 1)].into_iter().collect();
        let c: PropMap<i32> = [("y", 2), ("x", 3)].into_iter().collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, PropMap::new());
    }

    #[test]
    fn json_round_trips_in_order_and_repeats_keep_first_place() {
        let map: Props = serde_json::from_str(r#"{"b": 1, "a": "x", "b": 2}"#).unwrap();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(map["b"], Value::from(2));
        assert_eq!(serde_json::to_string(&map).unwrap(), r#"{"b":2,"a":"x"}"#);
        assert!(serde_json::from_str::<Props>("[1]").is_err());
    }

    #[test]
    fn props_and_records_read_alike() {
        let record = Value::from_json_str(r#"{"a": 1, "b": null}"#).unwrap();
        let record = record.as_record().unwrap();
        let props: Props = record.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        fn read(p: &impl ReadProps) -> (usize, Option<&Value>, Vec<&str>) {
            let names = p.prop_entries().map(|(k, _)| k).collect();
            (p.prop_count(), p.get_prop("b"), names)
        }
        assert_eq!(read(&props), read(record));
    }
}
