//! [`ThreadSafeStore`]: objects by key plus every index, under one lock.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    sync::Arc,
};

use foldhash::fast::RandomState;
use parking_lot::RwLock;

use crate::{Error, IndexFunc, Indexers, Result};

type Map<K, V> = HashMap<K, V, RandomState>;
type Set<T> = HashSet<T, RandomState>;
/// Index value to the keys of the objects indexed under it.
type Index = Map<Arc<str>, Set<Arc<str>>>;

/// A map from key to `Arc<K>` with secondary indexes that change together with it.
///
/// Items and indexes sit under one `RwLock`, so the invariant "an object is found under exactly
/// the index values its index funcs give" holds for every reader: a write is invisible until it
/// has updated the object and all its index entries. Keys are `Arc<str>` shared between the item
/// map and every index set, so a key costs one allocation however many indexes hold it.
///
/// Callers supply keys; [`Cache`](crate::Cache) wraps this with a key func to implement
/// [`Store`](crate::Store) and [`Indexer`](crate::Indexer).
///
/// The Rust shape of client-go's `cache.ThreadSafeStore` (`threadSafeMap`).
pub struct ThreadSafeStore<K> {
    inner: RwLock<Inner<K>>,
}

struct Inner<K> {
    items: Map<Arc<str>, Arc<K>>,
    indexers: Indexers<K>,
    /// Index name to index; an index exists for every indexer.
    indices: Map<String, Index>,
}

impl<K> fmt::Debug for ThreadSafeStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("ThreadSafeStore")
            .field("len", &inner.items.len())
            .field("indexers", &inner.indexers.keys().collect::<Vec<_>>())
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
    pub fn new(indexers: Indexers<K>) -> Self {
        let indices = indexers
            .keys()
            .map(|name| (name.clone(), Index::default()))
            .collect();
        Self {
            inner: RwLock::new(Inner {
                items: Map::default(),
                indexers,
                indices,
            }),
        }
    }

    /// Stores `obj` under `key`, replacing any object there and moving its index entries.
    pub fn add(&self, key: &str, obj: Arc<K>) {
        self.inner.write().upsert(key, obj);
    }

    /// The same as [`add`](Self::add): the store does not tell adds from updates.
    pub fn update(&self, key: &str, obj: Arc<K>) {
        self.add(key, obj);
    }

    /// Removes the object under `key` and all its index entries; returns it when present.
    pub fn delete(&self, key: &str) -> Option<Arc<K>> {
        self.inner.write().remove(key)
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.read().items.contains_key(key)
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Whether the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<String> {
        self.inner
            .read()
            .items
            .keys()
            .map(|key| key.to_string())
            .collect()
    }

    /// Replaces every object with `items` and rebuilds every index from scratch.
    ///
    /// The new contents are built before the lock is taken, so readers wait only for the swap.
    pub fn replace(&self, items: impl IntoIterator<Item = (String, Arc<K>)>) {
        let indexers = self.inner.read().indexers.clone();
        let mut fresh = Inner {
            items: Map::default(),
            indices: indexers
                .keys()
                .map(|name| (name.clone(), Index::default()))
                .collect(),
            indexers,
        };
        for (key, obj) in items {
            fresh.upsert(&key, obj);
        }
        let mut inner = self.inner.write();
        // Indexers added between the snapshot above and now must not be lost.
        if inner.indexers.len() != fresh.indexers.len() {
            let missing: Indexers<K> = inner
                .indexers
                .iter()
                .filter(|(name, _)| !fresh.indexers.contains_key(*name))
                .map(|(name, func)| (name.clone(), Arc::clone(func)))
                .collect();
            fresh.add_indexers(missing);
        }
        *inner = fresh;
    }

    /// The objects sharing any of `obj`'s values of index `index_name`, each once.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`] for an unknown index.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        let inner = self.inner.read();
        let (func, index) = inner.index_named(index_name)?;
        let values = func(obj);
        let out = match values.as_slice() {
            [] => Vec::new(),
            // The common case needs no dedup.
            [value] => index
                .get(value.as_str())
                .map(|keys| inner.objects(keys.iter()))
                .unwrap_or_default(),
            _ => {
                let mut keys: Set<&Arc<str>> = Set::default();
                for value in &values {
                    if let Some(set) = index.get(value.as_str()) {
                        keys.extend(set.iter());
                    }
                }
                inner.objects(keys.into_iter())
            }
        };
        Ok(out)
    }

    /// The keys indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`] for an unknown index.
    pub fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        let inner = self.inner.read();
        let (_, index) = inner.index_named(index_name)?;
        Ok(index
            .get(indexed_value)
            .map(|keys| keys.iter().map(|key| key.to_string()).collect())
            .unwrap_or_default())
    }

    /// Every value under which index `index_name` holds at least one object; empty for an
    /// unknown index, as client-go does.
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner
            .read()
            .indices
            .get(index_name)
            .map(|index| index.keys().map(|value| value.to_string()).collect())
            .unwrap_or_default()
    }

    /// The objects indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`] for an unknown index.
    pub fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        let inner = self.inner.read();
        let (_, index) = inner.index_named(index_name)?;
        Ok(index
            .get(indexed_value)
            .map(|keys| inner.objects(keys.iter()))
            .unwrap_or_default())
    }

    /// The registered index funcs.
    pub fn get_indexers(&self) -> Indexers<K> {
        self.inner.read().indexers.clone()
    }

    /// Registers more index funcs and indexes every stored object with them, as today's
    /// client-go does (older releases refused once the store held data).
    ///
    /// # Errors
    ///
    /// [`Error::IndexerConflict`] when a name is already registered; nothing is added then.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        let mut inner = self.inner.write();
        if let Some(name) = indexers
            .keys()
            .find(|name| inner.indexers.contains_key(*name))
        {
            return Err(Error::IndexerConflict { name: name.clone() });
        }
        inner.add_indexers(indexers);
        Ok(())
    }
}

impl<K> Inner<K> {
    fn index_named(&self, index_name: &str) -> Result<(&IndexFunc<K>, &Index)> {
        match (self.indexers.get(index_name), self.indices.get(index_name)) {
            (Some(func), Some(index)) => Ok((func, index)),
            _ => Err(Error::IndexNotFound {
                name: index_name.to_owned(),
            }),
        }
    }

    fn objects<'a>(&self, keys: impl Iterator<Item = &'a Arc<str>>) -> Vec<Arc<K>> {
        keys.filter_map(|key| self.items.get(key).cloned()).collect()
    }

    fn upsert(&mut self, key: &str, obj: Arc<K>) {
        let (key, old) = match self.items.get_key_value(key) {
            Some((key, old)) => (Arc::clone(key), Some(Arc::clone(old))),
            None => (Arc::<str>::from(key), None),
        };
        for (name, func) in &self.indexers {
            let new_values = func(&obj);
            let old_values = old.as_deref().map(|old| func(old)).unwrap_or_default();
            // Most updates leave index values alone; skip the set churn then.
            if old.is_some() && new_values == old_values {
                continue;
            }
            let index = self.indices.entry(name.clone()).or_default();
            for value in &old_values {
                if !new_values.contains(value) {
                    remove_from_index(index, value, &key);
                }
            }
            for value in new_values {
                if old.is_none() || !old_values.contains(&value) {
                    index
                        .entry(Arc::from(value))
                        .or_default()
                        .insert(Arc::clone(&key));
                }
            }
        }
        self.items.insert(key, obj);
    }

    fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let (key, old) = self.items.remove_entry(key)?;
        for (name, func) in &self.indexers {
            if let Some(index) = self.indices.get_mut(name) {
                for value in func(&old) {
                    remove_from_index(index, &value, &key);
                }
            }
        }
        Some(old)
    }

    fn add_indexers(&mut self, indexers: Indexers<K>) {
        for (name, func) in indexers {
            let mut index = Index::default();
            for (key, obj) in &self.items {
                for value in func(obj) {
                    index
                        .entry(Arc::from(value))
                        .or_default()
                        .insert(Arc::clone(key));
                }
            }
            self.indices.insert(name.clone(), index);
            self.indexers.insert(name, func);
        }
    }
}

/// Drops `key` from the set under `value`, and the set itself once empty, so that
/// `list_index_func_values` never reports a value nothing is indexed under.
fn remove_from_index(index: &mut Index, value: &str, key: &str) {
    if let Some(keys) = index.get_mut(value) {
        keys.remove(key);
        if keys.is_empty() {
            index.remove(value);
        }
    }
}
