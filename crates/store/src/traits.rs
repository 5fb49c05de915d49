//! The seams between layers: [`Store`] (writes), [`CacheReader`] (reads) and [`Indexer`]
//! (both, and the index registry).

use std::{collections::HashMap, sync::Arc};

use crate::{Object, Result};

/// What a reflector writes into: the writer half of the store seam.
///
/// A cache ([`Cache`](crate::Cache)) implements it, and so do the queues in `kinformer-fifo`
/// that sit between a reflector and a cache. It has no reads: what a cache holds is read through
/// [`CacheReader`], which a queue does not implement. Writes take `Arc<K>`: objects are
/// immutable and shared, never copied.
///
/// The writing half of client-go's `cache.Store`.
pub trait Store<K>: Send + Sync {
    /// Adds an object, replacing any object under the same key.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed; the store is unchanged.
    fn add(&self, obj: Arc<K>) -> Result<()>;

    /// Updates an object (an add when the key is new).
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed; the store is unchanged.
    fn update(&self, obj: Arc<K>) -> Result<()>;

    /// Deletes the object under `obj`'s key; deleting an absent key is not an error.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed; the store is unchanged.
    fn delete(&self, obj: Arc<K>) -> Result<()>;

    /// Replaces the whole contents with `list`, as of `resource_version`.
    ///
    /// # Errors
    ///
    /// When an object cannot be keyed; the store is unchanged.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<()>;

    /// Asks a queue to re-deliver what it knows; a plain cache has nothing to do.
    ///
    /// # Errors
    ///
    /// When the implementation cannot resync.
    fn resync(&self) -> Result<()>;
}

/// A read-only view of a cache: what listers, handlers, controllers and a queue's "known
/// objects" read. Informers hand out only this half; writing is the informer's job.
///
/// The index queries have defaults for a cache without indexes: every index is unknown.
///
/// The reading half of client-go's `cache.Store` and `cache.Indexer`.
#[doc(alias = "Indexer")]
#[doc(alias = "GetStore")]
pub trait CacheReader<K>: Send + Sync {
    /// The object stored under `key`.
    #[doc(alias = "GetByKey")]
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// The object stored under `obj`'s key.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed.
    fn get(&self, obj: &K) -> Result<Option<Arc<K>>>;

    /// Every object, in no particular order.
    fn list(&self) -> Vec<Arc<K>>;

    /// Every key, in no particular order.
    #[doc(alias = "ListKeys")]
    fn list_keys(&self) -> Vec<String>;

    /// The number of objects.
    fn len(&self) -> usize {
        self.list_keys().len()
    }

    /// Whether the cache holds no object.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`](crate::Error::IndexNotFound) for an unknown index.
    #[doc(alias = "ByIndex")]
    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        let _ = indexed_value;
        Err(index_not_found(index_name))
    }

    /// The objects that share any of `obj`'s values of index `index_name`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`](crate::Error::IndexNotFound) for an unknown index.
    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        let _ = obj;
        Err(index_not_found(index_name))
    }

    /// The keys of the objects indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`](crate::Error::IndexNotFound) for an unknown index.
    #[doc(alias = "IndexKeys")]
    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        let _ = indexed_value;
        Err(index_not_found(index_name))
    }

    /// Every value index `index_name` currently holds at least one object under.
    #[doc(alias = "ListIndexFuncValues")]
    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let _ = index_name;
        Vec::new()
    }

    /// The names of the registered indexes, sorted.
    fn index_names(&self) -> Vec<String> {
        Vec::new()
    }
}

fn index_not_found(index_name: &str) -> crate::Error {
    crate::Error::IndexNotFound {
        name: index_name.to_owned(),
    }
}

/// Computes the values an object is indexed under: zero, one or many.
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Index name to index func.
pub type Indexers<K> = HashMap<String, IndexFunc<K>>;

/// The name of the built-in namespace index.
#[doc(alias = "NamespaceIndex")]
pub const NAMESPACE_INDEX: &str = "namespace";

/// Indexes an object by its namespace; cluster-scoped objects are indexed under `""`.
#[doc(alias = "MetaNamespaceIndexFunc")]
pub fn meta_namespace_index_func<K: Object>(obj: &K) -> Vec<String> {
    vec![obj.namespace().unwrap_or_default().to_owned()]
}

/// [`Indexers`] holding only the namespace index, as most informers are built.
pub fn namespace_indexers<K: Object>() -> Indexers<K> {
    let mut indexers: Indexers<K> = HashMap::new();
    indexers.insert(
        NAMESPACE_INDEX.to_owned(),
        Arc::new(meta_namespace_index_func::<K>),
    );
    indexers
}

/// A cache with secondary indexes, whole: the [`Store`] an informer writes, the
/// [`CacheReader`] everyone reads, and the index registry.
///
/// Every index is kept in step with the objects: an object and all its index entries change
/// together, and a reader never finds an object under an index value it no longer has.
///
/// Only the owner of a cache (an informer) holds it as an `Indexer`; an `Arc<dyn Indexer<K>>`
/// coerces to the `Arc<dyn CacheReader<K>>` it hands to readers.
///
/// The Rust shape of client-go's `cache.Indexer`.
pub trait Indexer<K>: Store<K> + CacheReader<K> {
    /// Stores `obj` under its key and returns the object it replaced: one key computation and
    /// one lock, where a `get` then an `update` would take two of each.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed; the cache is unchanged.
    fn upsert(&self, obj: Arc<K>) -> Result<Option<Arc<K>>>;

    /// The registered index funcs.
    #[doc(alias = "GetIndexers")]
    fn indexers(&self) -> Indexers<K>;

    /// Registers more index funcs, indexing every object already stored, under the same lock
    /// as writes: a running informer's cache can gain an index at any time.
    ///
    /// # Errors
    ///
    /// [`Error::IndexerConflict`](crate::Error::IndexerConflict) when a name is taken; nothing is
    /// added then.
    #[doc(alias = "AddIndexers")]
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<()>;
}
