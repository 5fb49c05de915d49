//! The seams between layers: [`Store`], [`Indexer`] and [`KeyListerGetter`].

use std::{collections::HashMap, sync::Arc};

use crate::{Object, Result};

/// A keyed collection of objects that a reflector writes into.
///
/// A cache ([`Cache`](crate::Cache)) implements it with `Item = Arc<K>`; a queue (the DeltaFIFO
/// in `kinformer-fifo`) implements it with its own `Item` (the deltas queued for a key), which is
/// why reads return `Self::Item`. Writes take `Arc<K>`: objects are immutable and shared, never
/// copied.
///
/// The Rust shape of client-go's `cache.Store`.
pub trait Store<K>: Send + Sync {
    /// What reads return: `Arc<K>` for a cache.
    type Item;

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

    /// Every item, in no particular order.
    fn list(&self) -> Vec<Self::Item>;

    /// Every key, in no particular order.
    fn list_keys(&self) -> Vec<String>;

    /// The item stored under `obj`'s key.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed.
    fn get(&self, obj: &K) -> Result<Option<Self::Item>>;

    /// The item stored under `key`.
    fn get_by_key(&self, key: &str) -> Option<Self::Item>;

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

/// A [`Store`] that can also answer queries by secondary index.
///
/// Every index is kept in step with the objects: an object and all its index entries change
/// together, and a reader never finds an object under an index value it no longer has.
///
/// The Rust shape of client-go's `cache.Indexer`.
pub trait Indexer<K>: Store<K, Item = Arc<K>> {
    /// The objects that share any of `obj`'s values of index `index_name`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`](crate::Error::IndexNotFound) for an unknown index.
    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>>;

    /// The keys of the objects indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`](crate::Error::IndexNotFound) for an unknown index.
    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>>;

    /// Every value index `index_name` currently holds at least one object under.
    fn list_index_func_values(&self, index_name: &str) -> Vec<String>;

    /// The objects indexed under `indexed_value`.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`](crate::Error::IndexNotFound) for an unknown index.
    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>>;

    /// The registered index funcs.
    fn get_indexers(&self) -> Indexers<K>;

    /// Registers more index funcs, indexing every object already stored.
    ///
    /// # Errors
    ///
    /// [`Error::IndexerConflict`](crate::Error::IndexerConflict) when a name is taken; nothing is
    /// added then.
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<()>;
}

/// What a queue needs of the cache behind it: its keys and the object under a key.
///
/// The DeltaFIFO consults it ("known objects") to tell which keys a relist no longer has.
/// Every [`Store`] whose items are `Arc<K>` provides it.
pub trait KeyListerGetter<K>: Send + Sync {
    /// Every key known.
    fn list_keys(&self) -> Vec<String>;
    /// The object under `key`.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;
}

impl<K, S> KeyListerGetter<K> for S
where
    S: Store<K, Item = Arc<K>> + ?Sized,
{
    fn list_keys(&self) -> Vec<String> {
        Store::list_keys(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        Store::get_by_key(self, key)
    }
}
