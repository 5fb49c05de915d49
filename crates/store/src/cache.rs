//! [`Cache`]: the crate's thread-safe store (objects and indexes under one lock) keyed by a key
//! func, implementing [`Store`], [`CacheReader`] and [`Indexer`].

use std::{fmt, sync::Arc};

use crate::{
    CacheReader, Incoming, Indexer, Indexers, KeyFunc, Object, OldObject, Result, Store,
    default_key_func, namespace_indexers,
    thread_safe::{ReadView, ThreadSafeStore},
};

/// The informer's local cache: objects keyed by a key func, with secondary indexes.
///
/// Build one with [`Cache::new`] (any key func and indexers), [`Cache::with_namespace_index`]
/// (the default key func and the namespace index, as informers use) or `Cache::default()`.
///
/// Objects and their index entries sit under one lock, so an object and its index entries
/// always change together: a reader never finds an object under an index value it no longer
/// has.
///
/// The Rust shape of client-go's `cache.NewIndexer` / `cache.NewStore`, with the
/// `cache.ThreadSafeStore` they wrap inside it.
#[doc(alias = "NewIndexer")]
#[doc(alias = "NewStore")]
#[doc(alias = "ThreadSafeStore")]
#[doc(alias = "NewThreadSafeStore")]
pub struct Cache<K> {
    key_func: KeyFunc<K>,
    store: ThreadSafeStore<K>,
}

impl<K> fmt::Debug for Cache<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache").field("store", &self.store).finish()
    }
}

impl<K: Object> Default for Cache<K> {
    fn default() -> Self {
        Self::new(default_key_func(), Indexers::new())
    }
}

impl<K: Object> Cache<K> {
    /// A cache keyed `namespace/name` with the namespace index.
    pub fn with_namespace_index() -> Self {
        Self::new(default_key_func(), namespace_indexers())
    }
}

impl<K> Cache<K> {
    /// A cache keyed by `key_func`, with `indexers`.
    pub fn new(key_func: KeyFunc<K>, indexers: Indexers<K>) -> Self {
        Self {
            key_func,
            store: ThreadSafeStore::new(indexers),
        }
    }

    fn key(&self, obj: &K) -> Result<String> {
        (self.key_func)(obj)
    }

    /// Stores `obj` under its key, returning what it replaced.
    fn insert(&self, obj: Arc<K>) -> Result<Option<Arc<K>>> {
        let key = self.key(&obj)?;
        Ok(self.store.upsert(&key, obj))
    }
}

impl<K: Send + Sync> Store<K> for Cache<K> {
    fn add(&self, obj: Incoming<K>) -> Result<()> {
        self.insert(obj.into_parts().0).map(drop)
    }

    fn update(&self, obj: Incoming<K>) -> Result<()> {
        self.insert(obj.into_parts().0).map(drop)
    }

    fn delete(&self, obj: Arc<K>) -> Result<()> {
        let key = self.key(&obj)?;
        self.store.delete(&key);
        Ok(())
    }

    fn replace(&self, list: Vec<Arc<K>>, _resource_version: &str) -> Result<()> {
        let keyed = list
            .into_iter()
            .map(|obj| Ok((self.key(&obj)?, obj)))
            .collect::<Result<Vec<_>>>()?;
        self.store.replace(keyed);
        Ok(())
    }

    fn resync(&self) -> Result<()> {
        Ok(())
    }
}

impl<K: Send + Sync> CacheReader<K> for Cache<K> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.get(key)
    }

    fn get(&self, obj: &K) -> Result<Option<Arc<K>>> {
        let key = self.key(obj)?;
        Ok(self.store.get(&key))
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    fn list_keys(&self) -> Vec<String> {
        self.store.list_keys()
    }

    fn len(&self) -> usize {
        self.store.len()
    }

    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        self.store.by_index(index_name, indexed_value)
    }

    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        self.store.index(index_name, obj)
    }

    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        self.store.index_keys(index_name, indexed_value)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.store.list_index_func_values(index_name)
    }

    fn index_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.store.indexers().into_keys().collect();
        names.sort();
        names
    }

    fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        self.store.by_indexes(query)
    }

    fn read_consistent(&self, reader: &mut dyn FnMut(&dyn CacheReader<K>)) -> bool {
        self.store.read(|view| {
            reader(&CacheView {
                view,
                key_func: &self.key_func,
            });
        });
        true
    }
}

/// A [`Cache`] held still: every query answers from the same state.
struct CacheView<'a, 'v, K> {
    view: &'a ReadView<'v, K>,
    key_func: &'a KeyFunc<K>,
}

impl<K: Send + Sync> CacheReader<K> for CacheView<'_, '_, K> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.view.get(key)
    }

    fn get(&self, obj: &K) -> Result<Option<Arc<K>>> {
        Ok(self.view.get(&(self.key_func)(obj)?))
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.view.list()
    }

    fn list_keys(&self) -> Vec<String> {
        self.view.list_keys()
    }

    fn len(&self) -> usize {
        self.view.len()
    }

    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        self.view.by_index(index_name, indexed_value)
    }

    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        self.view.index(index_name, obj)
    }

    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        self.view.index_keys(index_name, indexed_value)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.view.list_index_func_values(index_name)
    }

    fn index_names(&self) -> Vec<String> {
        self.view.index_names()
    }

    fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        self.view.by_indexes(query)
    }

    /// Already still: `reader` reads this view.
    fn read_consistent(&self, reader: &mut dyn FnMut(&dyn CacheReader<K>)) -> bool {
        reader(self);
        true
    }
}

impl<K: Send + Sync> Indexer<K> for Cache<K> {
    fn upsert(&self, obj: Incoming<K>) -> Result<Option<OldObject<K>>> {
        Ok(self.insert(obj.into_parts().0)?.map(OldObject::decoded))
    }

    fn indexers(&self) -> Indexers<K> {
        self.store.indexers()
    }

    fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        self.store.add_indexers(indexers)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::api::core::v1::Pod;
    use kube_core::ObjectMeta;

    use super::*;
    use crate::{Error, IndexFunc, meta_namespace_key_func};

    /// client-go's `testStoreObject`: keyed by `id`, indexed by `val`.
    #[derive(Debug, PartialEq)]
    struct TestObject {
        id: String,
        val: String,
    }

    fn obj(id: &str, val: &str) -> Arc<TestObject> {
        Arc::new(TestObject {
            id: id.into(),
            val: val.into(),
        })
    }

    fn test_cache(indexers: Indexers<TestObject>) -> Cache<TestObject> {
        Cache::new(Arc::new(|obj: &TestObject| Ok(obj.id.clone())), indexers)
    }

    fn by_val() -> Indexers<TestObject> {
        let mut indexers: Indexers<TestObject> = Indexers::new();
        indexers.insert(
            "by_val".into(),
            Arc::new(|obj: &TestObject| vec![obj.val.clone()]),
        );
        indexers
    }

    fn vals(items: &[Arc<TestObject>]) -> BTreeSet<String> {
        items.iter().map(|item| item.val.clone()).collect()
    }

    /// Ported from client-go's `TestCache` (`doTestStore`).
    #[test]
    fn a_cache_adds_updates_deletes_lists_and_replaces() {
        let store = test_cache(Indexers::new());
        store.add(obj("foo", "bar").into()).unwrap();
        assert_eq!(store.get(&obj("foo", "")).unwrap().unwrap().val, "bar");
        store.update(obj("foo", "baz").into()).unwrap();
        assert_eq!(store.get(&obj("foo", "")).unwrap().unwrap().val, "baz");
        store.delete(obj("foo", "")).unwrap();
        assert_eq!(store.get(&obj("foo", "")).unwrap(), None);

        store.add(obj("a", "b").into()).unwrap();
        store.add(obj("c", "d").into()).unwrap();
        store.add(obj("e", "e").into()).unwrap();
        assert_eq!(
            vals(&store.list()),
            BTreeSet::from(["b".into(), "d".into(), "e".into()])
        );

        store
            .replace(vec![obj("foo", "foo"), obj("bar", "bar")], "0")
            .unwrap();
        assert_eq!(
            vals(&store.list()),
            BTreeSet::from(["foo".into(), "bar".into()])
        );
        let mut keys = CacheReader::list_keys(&store);
        keys.sort();
        assert_eq!(keys, ["bar", "foo"]);
        assert!(store.resync().is_ok());
    }

    /// Ported from client-go's `TestIndex` (`doTestIndex`).
    #[test]
    fn index_finds_every_object_sharing_the_probe_value() {
        let indexer = test_cache(by_val());
        indexer.add(obj("a", "b").into()).unwrap();
        indexer.add(obj("c", "b").into()).unwrap();
        indexer.add(obj("e", "f").into()).unwrap();
        indexer.add(obj("g", "h").into()).unwrap();
        let expected: BTreeMap<&str, BTreeSet<String>> = BTreeMap::from([
            ("b", BTreeSet::from(["a".into(), "c".into()])),
            ("f", BTreeSet::from(["e".into()])),
            ("h", BTreeSet::from(["g".into()])),
        ]);
        for (val, ids) in expected {
            let found: BTreeSet<String> = indexer
                .index("by_val", &obj("", val))
                .unwrap()
                .iter()
                .map(|item| item.id.clone())
                .collect();
            assert_eq!(found, ids, "{val}");
        }
    }

    fn pod(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Arc<Pod> {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                    .collect(),
            )
        };
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: map(labels),
                annotations: map(annotations),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    /// Ported from client-go's `TestGetIndexFuncValues`.
    #[test]
    fn list_index_func_values_reports_each_value_once() {
        let by_foo: IndexFunc<Pod> = Arc::new(|pod: &Pod| {
            vec![
                pod.metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get("foo"))
                    .cloned()
                    .unwrap_or_default(),
            ]
        });
        let index = Cache::new(
            Arc::new(meta_namespace_key_func::<Pod>),
            Indexers::from([("testmodes".to_owned(), by_foo)]),
        );
        index
            .add(pod("one", &[("foo", "bar")], &[]).into())
            .unwrap();
        index
            .add(pod("two", &[("foo", "bar")], &[]).into())
            .unwrap();
        index
            .add(pod("tre", &[("foo", "biz")], &[]).into())
            .unwrap();
        let mut values = index.list_index_func_values("testmodes");
        values.sort();
        assert_eq!(values, ["bar", "biz"]);
    }

    /// Ported from client-go's `TestMultiIndexKeys`.
    #[test]
    fn objects_with_several_index_values_are_found_under_each() {
        let by_user: IndexFunc<Pod> = Arc::new(|pod: &Pod| {
            let users = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get("users"))
                .map(String::as_str)
                .unwrap_or_default();
            users.split(',').map(str::to_owned).collect()
        });
        let index = Cache::new(
            Arc::new(meta_namespace_key_func::<Pod>),
            Indexers::from([("byUser".to_owned(), by_user)]),
        );
        let pod1 = pod("one", &[], &[("users", "ernie,bert")]);
        let pod2 = pod("two", &[], &[("users", "bert,oscar")]);
        let pod3 = pod("tre", &[], &[("users", "ernie,elmo")]);
        index.add(Arc::clone(&pod1).into()).unwrap();
        index.add(Arc::clone(&pod2).into()).unwrap();
        index.add(Arc::clone(&pod3).into()).unwrap();

        let count = |user: &str| index.by_index("byUser", user).unwrap().len();
        assert_eq!(count("ernie"), 2);
        assert_eq!(count("bert"), 2);
        assert_eq!(count("oscar"), 1);
        assert_eq!(
            index.index("byUser", &pod1).unwrap().len(),
            3,
            "ernie or bert"
        );

        index.delete(pod3).unwrap();
        assert_eq!(count("ernie"), 1);
        assert_eq!(count("elmo"), 0);

        index
            .update(pod("two", &[], &[("users", "oscar")]).into())
            .unwrap();
        assert_eq!(count("bert"), 1);
    }

    #[test]
    fn objects_the_key_func_refuses_leave_the_cache_unchanged() {
        let cache = Cache::<Pod>::with_namespace_index();
        cache.add(pod("kept", &[], &[]).into()).unwrap();
        let nameless = Arc::new(Pod::default());
        let refused = Error::MissingName { namespace: None };
        assert_eq!(
            cache.add(Arc::clone(&nameless).into()).unwrap_err(),
            refused
        );
        assert_eq!(
            cache.update(Arc::clone(&nameless).into()).unwrap_err(),
            refused
        );
        assert_eq!(cache.delete(Arc::clone(&nameless)).unwrap_err(), refused);
        assert_eq!(cache.get(&nameless).unwrap_err(), refused);
        assert_eq!(
            cache
                .replace(vec![pod("new", &[], &[]), nameless], "1")
                .unwrap_err(),
            refused
        );
        assert_eq!(
            CacheReader::list_keys(&cache),
            ["kept"],
            "a failed replace changes nothing"
        );
    }

    #[test]
    fn deleting_an_absent_object_is_not_an_error() {
        let cache = Cache::<Pod>::default();
        cache.delete(pod("ghost", &[], &[])).unwrap();
        assert!(cache.is_empty());
    }

    #[test]
    fn reads_return_the_stored_allocation_not_a_copy() {
        let cache = Cache::<Pod>::with_namespace_index();
        let stored = pod("shared", &[], &[]);
        cache.add(Arc::clone(&stored).into()).unwrap();
        let got = cache.get_by_key("shared").unwrap();
        assert!(Arc::ptr_eq(&got, &stored));
        assert!(Arc::ptr_eq(
            &cache.by_index(crate::NAMESPACE_INDEX, "").unwrap()[0],
            &stored
        ));
    }
}
