//! [`Cache`]: a [`ThreadSafeStore`] keyed by a key func, implementing [`Store`] and [`Indexer`].

use std::{fmt, sync::Arc};

use crate::{
    Indexer, Indexers, KeyFunc, Object, Result, Store, ThreadSafeStore, default_key_func,
    namespace_indexers,
};

/// The informer's local cache: objects keyed by a key func, with secondary indexes.
///
/// Build one with [`Cache::new`] (any key func and indexers), [`Cache::with_namespace_index`]
/// (the default key func and the namespace index, as informers use) or `Cache::default()`.
///
/// The Rust shape of client-go's `cache.NewIndexer` / `cache.NewStore`.
#[doc(alias = "NewIndexer")]
#[doc(alias = "NewStore")]
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

    /// The key func this cache uses.
    pub fn key_func(&self) -> &KeyFunc<K> {
        &self.key_func
    }

    /// The underlying keyed store.
    pub fn thread_safe_store(&self) -> &ThreadSafeStore<K> {
        &self.store
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    fn key(&self, obj: &K) -> Result<String> {
        (self.key_func)(obj)
    }
}

impl<K: Send + Sync> Store<K> for Cache<K> {
    type Item = Arc<K>;

    fn add(&self, obj: Arc<K>) -> Result<()> {
        let key = self.key(&obj)?;
        self.store.add(&key, obj);
        Ok(())
    }

    fn update(&self, obj: Arc<K>) -> Result<()> {
        let key = self.key(&obj)?;
        self.store.update(&key, obj);
        Ok(())
    }

    fn delete(&self, obj: Arc<K>) -> Result<()> {
        let key = self.key(&obj)?;
        self.store.delete(&key);
        Ok(())
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    fn list_keys(&self) -> Vec<String> {
        self.store.list_keys()
    }

    fn get(&self, obj: &K) -> Result<Option<Arc<K>>> {
        let key = self.key(obj)?;
        Ok(self.store.get(&key))
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.get(key)
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

impl<K: Send + Sync> Indexer<K> for Cache<K> {
    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        self.store.index(index_name, obj)
    }

    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        self.store.index_keys(index_name, indexed_value)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.store.list_index_func_values(index_name)
    }

    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        self.store.by_index(index_name, indexed_value)
    }

    fn get_indexers(&self) -> Indexers<K> {
        self.store.get_indexers()
    }

    fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        self.store.add_indexers(indexers)
    }
}
