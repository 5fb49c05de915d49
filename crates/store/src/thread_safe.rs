//! [`ThreadSafeStore`]: objects by key plus every index, under one lock.
//!
//! The type and its lock live here; the slot table that holds the objects is in `table`, and
//! the indexes over it, with the queries that read them, in `indexes`.

mod indexes;
mod table;

use std::{fmt, sync::Arc};

use parking_lot::RwLock;
use table::Inner;
pub(crate) use table::{Slot, allocate};

use crate::{Error, Indexers, Result};

/// A map from key to `Arc<K>` with secondary indexes that change together with it.
///
/// Items and indexes sit under one `RwLock`, so the invariant "an object is found under exactly
/// the index values its index funcs give" holds for every reader: a write is invisible until it
/// has updated the object and all its index entries.
///
/// Objects live in a slot table; every index set refers to an object by its 4-byte slot number,
/// so an index query walks its set and reads the table directly instead of hashing every key
/// again, and an index entry costs 4 bytes instead of a 16-byte key pointer. The key map holds
/// the slot and the object, so a lookup by key is one probe.
///
/// Memory per object is a key-map entry (key, slot, object: 32 bytes), a table entry (24
/// bytes) and 4 bytes per index value, against 24 bytes plus 16 per index value when index sets
/// hold keys: 8 bytes more at two index values per object (64 against 56), about even at three
/// (68 against 72), less beyond, before hash-table slack. Freed slots are reused by later adds;
/// the table keeps its peak length (24 bytes a slot) until the next [`replace`](Self::replace)
/// rebuilds it densely.
///
/// Callers supply keys; [`Cache`](crate::Cache) wraps this with a key func to implement
/// [`Store`](crate::Store) and [`Indexer`](crate::Indexer).
///
/// The Rust shape of client-go's `cache.ThreadSafeStore` (`threadSafeMap`).
#[doc(alias = "threadSafeMap")]
pub(crate) struct ThreadSafeStore<K> {
    inner: RwLock<Inner<K>>,
}

impl<K> fmt::Debug for ThreadSafeStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("ThreadSafeStore")
            .field("len", &inner.slots_by_key.len())
            .field(
                "indexers",
                &inner.indexes.indexers.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<K> Default for ThreadSafeStore<K> {
    fn default() -> Self {
        Self::new(Indexers::new())
    }
}

impl<K> ThreadSafeStore<K> {
    /// An empty store with the given index funcs.
    #[doc(alias = "NewThreadSafeStore")]
    pub(crate) fn new(indexers: Indexers<K>) -> Self {
        Self {
            inner: RwLock::new(Inner::empty(indexers)),
        }
    }

    /// Stores `obj` under `key`, replacing any object there and moving its index entries;
    /// returns the object it replaced.
    pub(crate) fn upsert(&self, key: &str, obj: Arc<K>) -> Option<Arc<K>> {
        self.inner.write().upsert(key, obj)
    }

    /// Removes the object under `key` and all its index entries; returns it when present.
    pub(crate) fn delete(&self, key: &str) -> Option<Arc<K>> {
        self.inner.write().remove(key)
    }

    /// The object under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().get(key)
    }

    /// The number of objects.
    pub(crate) fn len(&self) -> usize {
        self.inner.read().slots_by_key.len()
    }

    /// Every object, in no particular order.
    pub(crate) fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().list()
    }

    /// Every key, in no particular order.
    pub(crate) fn list_keys(&self) -> Vec<String> {
        self.inner.read().list_keys()
    }

    /// Replaces every object with `items` and rebuilds every index from scratch; when a key
    /// appears twice the last object wins.
    ///
    /// The new contents are built before the lock is taken, so readers wait only for the swap.
    pub(crate) fn replace(&self, items: impl IntoIterator<Item = (String, Arc<K>)>) {
        let indexers = self.inner.read().indexes.indexers.clone();
        let mut fresh = Inner::empty(indexers);
        let items = items.into_iter();
        fresh.entries.reserve(items.size_hint().0);
        for (key, obj) in items {
            fresh.upsert(&key, obj);
        }
        let mut inner = self.inner.write();
        // Indexers added between the snapshot above and now must not be lost.
        if inner.indexes.indexers.len() != fresh.indexes.indexers.len() {
            let missing: Indexers<K> = inner
                .indexes
                .indexers
                .iter()
                .filter(|(name, _)| !fresh.indexes.indexers.contains_key(*name))
                .map(|(name, func)| (name.clone(), Arc::clone(func)))
                .collect();
            fresh.add_indexers(missing);
        }
        // The previous table (every key, index entry and object not listed again) is freed
        // after the lock is released: readers do not wait on it.
        let previous = std::mem::replace(&mut *inner, fresh);
        drop(inner);
        drop(previous);
    }

    /// The objects sharing any of `obj`'s values of index `index_name`, each once.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`] for an unknown index.
    pub(crate) fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        self.inner.read().index(index_name, obj)
    }

    /// The keys indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`] for an unknown index.
    pub(crate) fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        self.inner.read().index_keys(index_name, indexed_value)
    }

    /// Every value under which index `index_name` holds at least one object; empty for an
    /// unknown index, as client-go does.
    pub(crate) fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner.read().list_index_func_values(index_name)
    }

    /// The objects indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`] for an unknown index.
    pub(crate) fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        self.inner.read().by_index(index_name, indexed_value)
    }

    /// The objects that match every term of `query`: for each `(index, values)` pair, an
    /// object indexed under at least one of the values. The smallest candidate set is walked
    /// and every other term is a set lookup, all in one read of the store.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`] for an unknown index.
    pub(crate) fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        self.inner.read().by_indexes(query)
    }

    /// Runs `reader` on the store as it is now: nothing changes until it returns. Writers wait
    /// meanwhile, so keep `reader` short, and never write to the store from it.
    pub(crate) fn read<R>(&self, reader: impl FnOnce(&ReadView<'_, K>) -> R) -> R {
        let inner = self.inner.read();
        reader(&ReadView { inner: &inner })
    }

    /// The registered index funcs.
    pub(crate) fn indexers(&self) -> Indexers<K> {
        self.inner.read().indexes.indexers.clone()
    }

    /// Registers more index funcs and indexes every stored object with them, as today's
    /// client-go does (older releases refused once the store held data).
    ///
    /// # Errors
    ///
    /// [`Error::IndexerConflict`] naming the (alphabetically first) name already registered;
    /// nothing is added then.
    pub(crate) fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        let mut inner = self.inner.write();
        // The smallest conflicting name, so the error does not depend on hash order.
        if let Some(name) = indexers
            .keys()
            .filter(|name| inner.indexes.indexers.contains_key(*name))
            .min()
        {
            return Err(Error::IndexerConflict { name: name.clone() });
        }
        inner.add_indexers(indexers);
        Ok(())
    }
}

/// A read-locked store: every query answers from the same state.
pub(crate) struct ReadView<'a, K> {
    inner: &'a Inner<K>,
}

impl<K> ReadView<'_, K> {
    pub(crate) fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.get(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.slots_by_key.len()
    }

    pub(crate) fn list(&self) -> Vec<Arc<K>> {
        self.inner.list()
    }

    pub(crate) fn list_keys(&self) -> Vec<String> {
        self.inner.list_keys()
    }

    pub(crate) fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        self.inner.index(index_name, obj)
    }

    pub(crate) fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<String>> {
        self.inner.index_keys(index_name, value)
    }

    pub(crate) fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner.list_index_func_values(index_name)
    }

    pub(crate) fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>> {
        self.inner.by_index(index_name, value)
    }

    pub(crate) fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        self.inner.by_indexes(query)
    }

    pub(crate) fn index_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.inner.indexes.indexers.keys().cloned().collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{
        table::{Entry, Keyed, Slot},
        *,
    };

    /// client-go's `Add`, `Update` and the two probes these tests ask of a store by key; the
    /// crate writes through [`ThreadSafeStore::upsert`] alone.
    impl<K> ThreadSafeStore<K> {
        fn add(&self, key: &str, obj: Arc<K>) {
            self.upsert(key, obj);
        }

        fn update(&self, key: &str, obj: Arc<K>) {
            self.upsert(key, obj);
        }

        fn contains_key(&self, key: &str) -> bool {
            self.inner.read().slots_by_key.contains_key(key)
        }

        fn is_empty(&self) -> bool {
            self.len() == 0
        }
    }

    /// A store of plain strings, indexed by `func` under `name`, as client-go's tests build one.
    fn store(name: &str, func: fn(&String) -> Vec<String>) -> ThreadSafeStore<String> {
        let mut indexers: Indexers<String> = Indexers::new();
        indexers.insert(name.to_owned(), Arc::new(func));
        ThreadSafeStore::new(indexers)
    }

    fn s(text: &str) -> Arc<String> {
        Arc::new(text.to_owned())
    }

    /// The keys stored under `value`, straight from the index (not through a query).
    fn index_set(
        store: &ThreadSafeStore<String>,
        index: &str,
        value: &str,
    ) -> Option<BTreeSet<String>> {
        let inner = store.inner.read();
        inner.indexes.indices[index].get(value).map(|slots| {
            slots
                .iter()
                .map(|slot| inner.entry(*slot).key.to_string())
                .collect()
        })
    }

    fn keys(names: &[&str]) -> Option<BTreeSet<String>> {
        Some(names.iter().map(|name| (*name).to_owned()).collect())
    }

    /// Ported from client-go's `TestThreadSafeStoreDeleteRemovesEmptySetsFromIndex`.
    #[test]
    fn deleting_the_last_key_under_a_value_drops_the_value() {
        let store = store("testIndexer", |obj| vec![obj.clone()]);
        store.add("testKey", s("testKey"));
        assert_eq!(
            index_set(&store, "testIndexer", "testKey"),
            keys(&["testKey"])
        );
        store.delete("testKey");
        assert_eq!(index_set(&store, "testIndexer", "testKey"), None);
        assert!(store.list_index_func_values("testIndexer").is_empty());
    }

    /// Ported from client-go's `TestThreadSafeStoreAddKeepsNonEmptySetPostDeleteFromIndex`.
    #[test]
    fn deleting_one_of_two_keys_keeps_the_value() {
        let store = store("testIndexer", |_| vec!["testIndex".to_owned()]);
        store.add("retain", s("retain"));
        store.add("delete", s("delete"));
        assert_eq!(
            index_set(&store, "testIndexer", "testIndex"),
            keys(&["delete", "retain"])
        );
        store.delete("delete");
        assert_eq!(
            index_set(&store, "testIndexer", "testIndex"),
            keys(&["retain"])
        );
    }

    /// Ported from client-go's `TestThreadSafeStoreIndexingFunctionsWithMultipleValues`.
    #[test]
    fn multi_valued_index_funcs_move_keys_between_values_on_update() {
        let store = store("testIndexer", |obj| {
            obj.split(',').map(str::to_owned).collect()
        });
        let check = |foo: &[&str], bar: &[&str], baz: &[&str]| {
            let expect = |names: &[&str]| if names.is_empty() { None } else { keys(names) };
            assert_eq!(index_set(&store, "testIndexer", "foo"), expect(foo), "foo");
            assert_eq!(index_set(&store, "testIndexer", "bar"), expect(bar), "bar");
            assert_eq!(index_set(&store, "testIndexer", "baz"), expect(baz), "baz");
        };

        store.add("key1", s("foo"));
        store.add("key2", s("bar"));
        check(&["key1"], &["key2"], &[]);

        store.update("key2", s("foo,bar"));
        check(&["key1", "key2"], &["key2"], &[]);

        store.update("key1", s("foo,bar"));
        check(&["key1", "key2"], &["key1", "key2"], &[]);

        store.add("key3", s("foo,bar,baz"));
        check(
            &["key1", "key2", "key3"],
            &["key1", "key2", "key3"],
            &["key3"],
        );

        store.update("key1", s("foo"));
        check(&["key1", "key2", "key3"], &["key2", "key3"], &["key3"]);

        store.update("key2", s("bar"));
        check(&["key1", "key3"], &["key2", "key3"], &["key3"]);

        store.delete("key1");
        check(&["key3"], &["key2", "key3"], &["key3"]);

        store.delete("key3");
        check(&[], &["key2"], &[]);
    }

    /// Ported from client-go's `TestAddIndexerAfterAdd`.
    #[test]
    fn indexers_added_after_objects_index_the_existing_and_later_objects() {
        let store = ThreadSafeStore::<String>::default();
        let mut first: Indexers<String> = Indexers::new();
        first.insert("first".into(), Arc::new(|obj: &String| vec![obj.clone()]));
        store.add_indexers(first).unwrap();

        store.add("keya", s("value"));
        store.add("keyb", s("value"));
        let sorted = |mut keys: Vec<String>| {
            keys.sort();
            keys
        };
        assert_eq!(
            sorted(store.index_keys("first", "value").unwrap()),
            ["keya", "keyb"]
        );

        let mut again: Indexers<String> = Indexers::new();
        again.insert("first".into(), Arc::new(|_: &String| Vec::new()));
        assert_eq!(
            store.add_indexers(again).unwrap_err(),
            Error::IndexerConflict {
                name: "first".into()
            }
        );

        let mut second: Indexers<String> = Indexers::new();
        second.insert(
            "second".into(),
            Arc::new(|obj: &String| vec![format!("{obj}2")]),
        );
        store.add_indexers(second).unwrap();
        let registered = store.indexers();
        assert!(registered.contains_key("first") && registered.contains_key("second"));
        assert_eq!(
            sorted(store.index_keys("first", "value").unwrap()),
            ["keya", "keyb"]
        );
        assert_eq!(
            sorted(store.index_keys("second", "value2").unwrap()),
            ["keya", "keyb"]
        );

        store.add("keyc", s("value"));
        store.add("keyd", s("value"));
        assert_eq!(
            sorted(store.index_keys("first", "value").unwrap()),
            ["keya", "keyb", "keyc", "keyd"]
        );
        assert_eq!(
            sorted(store.index_keys("second", "value2").unwrap()),
            ["keya", "keyb", "keyc", "keyd"]
        );
    }

    #[test]
    fn a_conflicting_add_indexers_adds_none_of_its_indexers() {
        let store = store("taken", |obj| vec![obj.clone()]);
        let mut both: Indexers<String> = Indexers::new();
        both.insert("taken".into(), Arc::new(|_: &String| Vec::new()));
        both.insert("fresh".into(), Arc::new(|_: &String| Vec::new()));
        assert!(store.add_indexers(both).is_err());
        assert!(!store.indexers().contains_key("fresh"));
        assert!(store.by_index("fresh", "x").is_err());
    }

    #[test]
    fn replace_frees_the_previous_table_after_releasing_the_lock() {
        use crate::free_probe::FreeLog;

        let log = FreeLog::new();
        let store = Arc::new(ThreadSafeStore::new(Indexers::new()));
        log.watch(&store, |store| store.inner.is_locked());
        store.add("stale", Arc::new(log.probe("stale", 1)));
        store.add("kept", Arc::new(log.probe("kept", 1)));
        store.replace([("kept".to_owned(), Arc::new(log.probe("kept", 2)))]);
        assert_eq!(log.freed(), ["stale:1", "kept:1"], "both replaced");
        let locked = log.freed_under_a_lock();
        assert!(locked.is_empty(), "freed under a lock: {locked:?}");
    }

    #[test]
    fn replace_rebuilds_every_index_and_keeps_the_last_duplicate() {
        let store = store("by-value", |obj| vec![obj.clone()]);
        store.add("old", s("stale"));
        store.replace([
            ("a".to_owned(), s("one")),
            ("b".to_owned(), s("two")),
            ("a".to_owned(), s("three")),
        ]);
        assert_eq!(store.len(), 2);
        assert_eq!(store.get("a").as_deref().map(String::as_str), Some("three"));
        assert!(store.by_index("by-value", "stale").unwrap().is_empty());
        assert!(store.by_index("by-value", "one").unwrap().is_empty());
        assert_eq!(store.index_keys("by-value", "three").unwrap(), ["a"]);
        let mut values = store.list_index_func_values("by-value");
        values.sort();
        assert_eq!(values, ["three", "two"]);
    }

    #[test]
    fn an_object_indexed_under_no_value_is_stored_but_found_by_no_index_query() {
        let store = store("none", |_| Vec::new());
        store.add("k", s("v"));
        assert!(store.contains_key("k"));
        assert!(store.list_index_func_values("none").is_empty());
        assert!(store.index("none", &"v".to_owned()).unwrap().is_empty());
    }

    #[test]
    fn duplicate_values_from_one_index_func_index_the_key_once() {
        let store = store("dup", |obj| vec![obj.clone(), obj.clone()]);
        store.add("k", s("v"));
        assert_eq!(store.index_keys("dup", "v").unwrap(), ["k"]);
        assert_eq!(store.index("dup", &"v".to_owned()).unwrap().len(), 1);
        store.delete("k");
        assert!(store.list_index_func_values("dup").is_empty());
    }

    #[test]
    fn queries_on_an_unknown_index_fail_except_list_index_func_values() {
        let store = ThreadSafeStore::<String>::default();
        let unknown = Error::IndexNotFound {
            name: "nope".into(),
        };
        assert_eq!(store.by_index("nope", "v").unwrap_err(), unknown);
        assert_eq!(store.index_keys("nope", "v").unwrap_err(), unknown);
        assert_eq!(store.index("nope", &"v".to_owned()).unwrap_err(), unknown);
        assert!(store.list_index_func_values("nope").is_empty());
    }

    #[test]
    fn a_key_is_one_allocation_shared_by_the_key_map_and_its_slot() {
        let store = store("by-value", |obj| vec![obj.clone()]);
        store.add("shared", s("v"));
        let inner = store.inner.read();
        let (key, keyed) = inner.slots_by_key.get_key_value("shared").unwrap();
        let entry = inner.entry(keyed.slot);
        assert!(Arc::ptr_eq(key, &entry.key));
        assert!(
            Arc::ptr_eq(&keyed.obj, &entry.obj),
            "one object, referenced twice"
        );
    }

    #[test]
    fn slots_freed_by_deletes_are_reused_without_leaking_index_entries() {
        let store = store("by-value", |obj| vec![obj.clone()]);
        for round in 0..3 {
            for i in 0..10 {
                store.add(&format!("k{i}"), s(&format!("v{}", i % 3)));
            }
            for i in 0..10 {
                store.delete(&format!("k{i}"));
            }
            assert!(store.is_empty(), "round {round}");
            assert!(store.list_index_func_values("by-value").is_empty());
        }
        store.add("again", s("v0"));
        assert_eq!(
            store.inner.read().entries.len(),
            10,
            "the table never grew past its peak"
        );
        assert_eq!(store.index_keys("by-value", "v0").unwrap(), ["again"]);
    }

    /// Pins the per-object sizes the type's docs quote.
    #[test]
    fn slot_and_key_map_entries_are_as_small_as_documented() {
        use std::mem::size_of;
        assert_eq!(size_of::<Option<Entry<String>>>(), 24);
        assert_eq!(size_of::<(Arc<str>, Keyed<String>)>(), 32);
        assert_eq!(size_of::<Slot>(), 4);
    }

    proptest::proptest! {
        /// The store keeps callers' keys as given, whatever the object says: [`Cache`](crate::Cache)
        /// hands it the key its key func computed, and nothing here reads a key from an object.
        #[test]
        fn the_store_keeps_the_callers_keys(
            entries in proptest::collection::vec(
                (
                    proptest::sample::select(&["w", "x", "y", "z"][..]),
                    proptest::collection::vec(
                        proptest::sample::select(&["red", "green", "blue", ""][..]),
                        0..4,
                    ),
                ),
                0..20,
            ),
        ) {
            // Comma-separated tags, each non-empty one an index value: zero, one or many.
            let store = store("tags", |obj| {
                obj.split(',')
                    .filter(|tag| !tag.is_empty())
                    .map(str::to_owned)
                    .collect()
            });
            let mut model: std::collections::BTreeMap<&str, Arc<String>> =
                std::collections::BTreeMap::new();
            for (key, tags) in entries {
                let obj = Arc::new(tags.join(","));
                store.add(key, Arc::clone(&obj));
                model.insert(key, obj);
            }
            let mut keys = store.list_keys();
            keys.sort();
            proptest::prop_assert_eq!(
                keys,
                model.keys().map(|key| (*key).to_owned()).collect::<Vec<_>>()
            );
            for tag in ["red", "green", "blue"] {
                let mut want: Vec<&str> = model
                    .iter()
                    .filter(|(_, obj)| obj.split(',').any(|t| t == tag))
                    .map(|(key, _)| *key)
                    .collect();
                want.sort_unstable();
                let mut got = store.index_keys("tags", tag).unwrap();
                got.sort();
                proptest::prop_assert_eq!(got, want);
            }
        }
    }
}
