//! [`Interned`]: one shared copy of each repeated string across every cached object.
//!
//! A cache of 100k Pods holds "kube-system", "app.kubernetes.io/name", the names of a few
//! hundred nodes and a few dozen images a hundred thousand times over, each in its own heap
//! allocation. A projection type (see [`Object`](crate::Object)) that declares such fields as
//! [`Interned`] keeps one copy of each distinct value, shared by reference count: 16 bytes a
//! field instead of a 24-byte `String` plus its allocation.
//!
//! Interning costs a hash and a lookup in a sharded set per decoded string; unique strings
//! (names, uids, resourceVersions) gain nothing and should stay `String`. Values no object uses
//! any more stay in the set until [`Interned::purge_unused`] runs.
//!
//! `benches/interning.rs` measures both sides on a slim Pod projection (identity, labels, node,
//! phase, container names and images): the memory a cached Pod takes with those values
//! interned and with `String`s, the intern table included, and the time to decode one.

use std::{
    borrow::Borrow,
    fmt,
    hash::{Hash, Hasher},
    ops::Deref,
    sync::{Arc, LazyLock},
};

use dashmap::{DashMap, mapref::entry::Entry};

static STRINGS: LazyLock<DashMap<Key, (), foldhash::fast::RandomState>> =
    LazyLock::new(|| DashMap::with_hasher(foldhash::fast::RandomState::default()));

/// The set's element: hashed and compared as the `str` it holds, so lookups borrow.
#[derive(Clone, PartialEq, Eq)]
struct Key(Arc<str>);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// A string stored once per process and shared by every value equal to it.
///
/// It derefs to `str`, compares, hashes and orders as its text, and deserializes (from JSON or
/// protobuf alike) by interning what it reads.
///
/// ```
/// use kinformer_store::Interned;
///
/// let a = Interned::new("kube-system");
/// let b: Interned = serde_json::from_str("\"kube-system\"")?;
/// assert_eq!(a, b);
/// assert!(std::ptr::eq(a.as_ptr(), b.as_ptr()), "one copy, shared");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone)]
pub struct Interned(Arc<str>);

impl Interned {
    /// The shared copy of `text`, made on first use.
    pub fn new(text: &str) -> Self {
        if let Some(existing) = STRINGS.get(text) {
            return Interned(Arc::clone(&existing.key().0));
        }
        // Two threads may race to insert the same text: the entry keeps whichever came first.
        match STRINGS.entry(Key(Arc::from(text))) {
            Entry::Occupied(existing) => Interned(Arc::clone(&existing.key().0)),
            Entry::Vacant(vacant) => {
                let shared = Arc::clone(&vacant.key().0);
                vacant.insert(());
                Interned(shared)
            }
        }
    }

    /// Whether `a` and `b` share one copy.
    #[cfg(test)]
    fn ptr_eq(a: &Interned, b: &Interned) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// Drops every interned string that no value uses any more; returns how many went. Call it
    /// now and then in a process whose repeated values change (nodes come and go, images are
    /// rolled): nothing else empties the set.
    pub fn purge_unused() -> usize {
        let before = STRINGS.len();
        STRINGS.retain(|key, ()| Arc::strong_count(&key.0) > 1);
        before - STRINGS.len()
    }
}

impl Deref for Interned {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Interned {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Interned {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Interned {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for Interned {}

impl PartialOrd for Interned {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Interned {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

impl Hash for Interned {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialEq<str> for Interned {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Interned {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl fmt::Debug for Interned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Interned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for Interned {
    fn from(text: &str) -> Self {
        Interned::new(text)
    }
}

impl serde::Serialize for Interned {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Interned {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = Interned;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Interned, E> {
                Ok(Interned::new(text))
            }
        }

        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn equal_texts_share_one_copy_across_threads() {
        let copies: Vec<Interned> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| Interned::new("intern-test-shared")))
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().expect("no panic"))
                .collect()
        });
        assert!(
            copies
                .windows(2)
                .all(|pair| Interned::ptr_eq(&pair[0], &pair[1]))
        );
        assert_eq!(copies[0], "intern-test-shared");
    }

    #[test]
    fn interned_values_deserialize_in_maps_and_order_as_text() {
        let labels: BTreeMap<Interned, Interned> =
            serde_json::from_str(r#"{"tier":"web","app":"web"}"#).expect("JSON");
        let keys: Vec<&str> = labels.keys().map(|key| &**key).collect();
        assert_eq!(keys, ["app", "tier"]);
        assert!(Interned::ptr_eq(
            &labels[&Interned::new("app")],
            &labels[&Interned::new("tier")]
        ));
    }

    #[test]
    fn unused_strings_are_purged() {
        let kept = Interned::new("intern-test-kept");
        drop(Interned::new("intern-test-dropped"));
        Interned::purge_unused();
        assert!(STRINGS.contains_key("intern-test-kept"));
        assert!(!STRINGS.contains_key("intern-test-dropped"));
        drop(kept);
    }
}
