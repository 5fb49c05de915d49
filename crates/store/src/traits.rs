//! The seams between layers: [`Store`] (writes), [`CacheReader`] (reads) and [`Indexer`]
//! (both, and the index registry).

use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc};

use crate::{Incoming, Object, OldObject, Result};

/// What a reflector writes into: the writer half of the store seam.
///
/// A cache ([`Cache`](crate::Cache)) implements it, and so do the queues in `kinformer-fifo`
/// that sit between a reflector and a cache. It has no reads: what a cache holds is read through
/// [`CacheReader`], which a queue does not implement. Writes take `Arc<K>`: objects are
/// immutable and shared, never copied.
///
/// The writing half of client-go's `cache.Store`.
pub trait Store<K>: Send + Sync {
    /// Adds an object, replacing any object under the same key. `obj` is the object with the
    /// bytes it was decoded from, when a decoder kept them ([`Incoming`]): a store that holds
    /// objects encoded may keep those bytes rather than encode the object again. Write an
    /// object alone with `.into()`.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed; the store is unchanged.
    fn add(&self, obj: Incoming<K>) -> Result<()>;

    /// Updates an object (an add when the key is new), as [`add`](Self::add).
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed; the store is unchanged.
    fn update(&self, obj: Incoming<K>) -> Result<()>;

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

    /// Starts a replace that takes the list in parts, as it arrives, so that the whole list
    /// is never held at once: [`ListInParts::part`] takes each part, [`ListInParts::finish`]
    /// ends the list. `None`, the default, when the store takes a list only whole, through
    /// [`replace`](Self::replace); a reflector then collects the list first.
    ///
    /// A queue takes the initial list in parts, so that a consumer drains it while the rest is
    /// still on the wire; a cache that readers see whole needs no parts.
    fn replace_in_parts(&self) -> Option<Box<dyn ListInParts<K> + '_>> {
        None
    }

    /// Asks a queue to re-deliver what it knows; a plain cache has nothing to do.
    ///
    /// # Errors
    ///
    /// When the implementation cannot resync.
    fn resync(&self) -> Result<()>;
}

/// A list a [`Store`] takes in parts ([`Store::replace_in_parts`]).
///
/// Each part is applied as it comes: objects listed so far are in the store before the list
/// ends. Dropping it without [`finish`](Self::finish) abandons the list (it failed on the
/// way): what the parts brought stays, and nothing is deleted.
pub trait ListInParts<K>: Send {
    /// Takes the next listed objects.
    ///
    /// # Errors
    ///
    /// When an object cannot be keyed; none of this part is taken.
    fn part(&mut self, items: Vec<Incoming<K>>) -> Result<()>;

    /// Resolves once the store wants the next part: a queue bounded for lists waits until its
    /// consumer has worked through most of what it holds, so that a list is decoded no faster
    /// than it is consumed. The default is ready at once.
    fn ready(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }

    /// Ends the list, taken at `resource_version`: whatever the store holds under a key no
    /// part listed is deleted, as [`Store::replace`] would.
    ///
    /// # Errors
    ///
    /// When the store cannot complete the replace.
    fn finish(self: Box<Self>, resource_version: &str) -> Result<()>;
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

    /// The objects that match every term of `query` (an AND of ORs): for each
    /// `(index, values)` pair, an object indexed under at least one of the values. With
    /// `[("namespace", &["prod"]), ("by-node", &["n1", "n2"])]`, the Pods of `prod` on `n1` or
    /// `n2`. No term means every object; a term without values matches none.
    ///
    /// [`Cache`](crate::Cache) answers from its indexes in one consistent read, walking the
    /// smallest candidate set. The default composes [`by_index`](Self::by_index) calls, which
    /// a cache that changes meanwhile may answer from different states.
    ///
    /// # Errors
    ///
    /// [`Error::IndexNotFound`](crate::Error::IndexNotFound) for an unknown index.
    fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        let mut matches: Option<Vec<Arc<K>>> = None;
        for (index_name, values) in query {
            let mut term: Vec<Arc<K>> = Vec::new();
            for value in *values {
                for obj in self.by_index(index_name, value)? {
                    if !term.iter().any(|seen| Arc::ptr_eq(seen, &obj)) {
                        term.push(obj);
                    }
                }
            }
            matches = Some(match matches {
                None => term,
                Some(so_far) => so_far
                    .into_iter()
                    .filter(|obj| term.iter().any(|other| Arc::ptr_eq(obj, other)))
                    .collect(),
            });
        }
        Ok(matches.unwrap_or_else(|| self.list()))
    }

    /// Calls `reader` once with a view of this cache that does not change while `reader`
    /// runs, so that gets, lists, index queries and key listings on it agree with one another;
    /// returns whether it did. Writers wait meanwhile: keep `reader` short.
    ///
    /// Use [`read_consistently`] rather than calling this: the default returns `false`
    /// without calling `reader` (a cache that cannot hold still), and `read_consistently`
    /// then reads the cache directly. [`Cache`](crate::Cache) holds still.
    fn read_consistent(&self, reader: &mut dyn FnMut(&dyn CacheReader<K>)) -> bool {
        let _ = reader;
        false
    }
}

/// Runs `read` on a view of `cache` in which every query answers from the same state: a
/// list, the keys, index queries and gets all agree, whatever the informer writes meanwhile
/// (it waits until `read` returns, so keep `read` short and never write to the cache from
/// it). A cache that cannot hold still is read directly.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_store::{Cache, CacheReader, NAMESPACE_INDEX, Store, read_consistently};
/// use kube_core::ObjectMeta;
///
/// let cache = Cache::<Pod>::with_namespace_index();
/// for (namespace, name) in [("a", "one"), ("a", "two"), ("b", "three")] {
///     let metadata = ObjectMeta {
///         namespace: Some(namespace.into()),
///         name: Some(name.into()),
///         ..ObjectMeta::default()
///     };
///     cache.add(Pod { metadata, ..Pod::default() }.into())?;
/// }
/// let (total, in_a) = read_consistently(&cache, |view| {
///     (view.len(), view.by_index(NAMESPACE_INDEX, "a").map(|pods| pods.len()))
/// });
/// assert_eq!((total, in_a?), (3, 2));
/// # Ok::<(), kinformer_store::Error>(())
/// ```
pub fn read_consistently<K, R>(
    cache: &dyn CacheReader<K>,
    read: impl FnOnce(&dyn CacheReader<K>) -> R,
) -> R {
    let mut read = Some(read);
    let mut out = None;
    cache.read_consistent(&mut |view| {
        if let Some(read) = read.take() {
            out = Some(read(view));
        }
    });
    match (out, read) {
        (Some(out), _) => out,
        (None, Some(read)) => read(cache),
        (None, None) => unreachable!("`read` ran but returned nothing"),
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
pub(crate) fn meta_namespace_index_func<K: Object>(obj: &K) -> Vec<String> {
    vec![obj.namespace().unwrap_or_default().to_owned()]
}

/// [`Indexers`] holding only the namespace index, [`NAMESPACE_INDEX`], as most informers are
/// built: every object indexed by its namespace, a cluster-scoped one under `""`. Extend them
/// with index funcs of your own.
///
/// client-go's `cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}`.
#[doc(alias = "MetaNamespaceIndexFunc")]
pub fn namespace_indexers<K: Object>() -> Indexers<K> {
    let mut indexers: Indexers<K> = HashMap::new();
    indexers.insert(
        NAMESPACE_INDEX.to_owned(),
        Arc::new(meta_namespace_index_func::<K>),
    );
    indexers
}

/// The name of the label index ([`label_indexers`]).
pub(crate) const LABEL_INDEX: &str = "labels";

/// Indexes an object under `key=value` for each of its labels.
pub(crate) fn label_index_func<K: Object>(obj: &K) -> Vec<String> {
    obj.labels()
        .map(|labels| {
            labels
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect()
        })
        .unwrap_or_default()
}

/// [`Indexers`] holding the label index: a cache with it answers the equality and `in`
/// requirements of a label selector ([`Lister::list`](crate::Lister::list))
/// from the index instead of scanning every object, and checks the rest of the selector on
/// the matches only. It costs an index entry per label of every object.
///
/// The index is named `labels`, and holds each object under `key=value` for each of its
/// labels: `by_index("labels", "app=web")` reads it directly.
pub fn label_indexers<K: Object>() -> Indexers<K> {
    let mut indexers: Indexers<K> = HashMap::new();
    indexers.insert(LABEL_INDEX.to_owned(), Arc::new(label_index_func::<K>));
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
    /// The replaced object comes back as an [`OldObject`]: a cache that holds objects encoded
    /// (a [`CompactCache`](crate::CompactCache)) leaves it encoded, with its UID and
    /// resourceVersion readable, so it is decoded only if someone reads it.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed; the cache is unchanged.
    fn upsert(&self, obj: Incoming<K>) -> Result<Option<OldObject<K>>>;

    /// The object stored under `key`, as an [`OldObject`]: what a relist is about to replace.
    /// A cache that holds objects encoded (a [`CompactCache`](crate::CompactCache)) hands it
    /// over still encoded, with its UID and resourceVersion, so it is decoded only if someone reads it,
    /// and does not count it as read. The default wraps what
    /// [`get_by_key`](CacheReader::get_by_key) returns.
    fn get_lazy(&self, key: &str) -> Option<OldObject<K>> {
        self.get_by_key(key).map(OldObject::decoded)
    }

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

    /// Starts a replace that takes the list part by part and shows it to readers only whole,
    /// at [`StagedReplace::commit`]: a relist that never holds the whole list decoded, yet
    /// never shows a reader half of it. Dropped without a commit, it leaves the cache as it
    /// was.
    ///
    /// The default collects the objects and commits them with one
    /// [`replace`](Store::replace). A [`CompactCache`](crate::CompactCache) stages each object
    /// in its encoded form, and leaves an object the list names unchanged
    /// ([`StagedReplace::keep`]) where it is, so a relist costs about what it changes.
    fn stage_replace(self: Arc<Self>) -> Box<dyn StagedReplace<K>>
    where
        K: Send + Sync + 'static,
        Self: 'static,
    {
        Box::new(CollectedReplace {
            indexer: self,
            list: Vec::new(),
            kept: Vec::new(),
        })
    }
}

/// A replace staged part by part and made visible whole ([`Indexer::stage_replace`]).
///
/// ```
/// use std::sync::Arc;
///
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinformer_store::{Cache, CacheReader, Indexer, Store};
///
/// fn config(name: &str) -> ConfigMap {
///     let mut config = ConfigMap::default();
///     config.metadata.name = Some(name.into());
///     config
/// }
///
/// let cache = Arc::new(Cache::<ConfigMap>::default());
/// cache.add(config("kept").into())?;
/// cache.add(config("gone").into())?;
/// let mut staged = Arc::clone(&cache).stage_replace();
/// staged.stage(config("new").into())?;
/// staged.keep("kept");
/// assert_eq!(cache.len(), 2, "nothing shows before the commit");
/// staged.commit("42")?;
/// let mut keys = cache.list_keys();
/// keys.sort();
/// assert_eq!(keys, ["kept", "new"]);
/// # Ok::<(), kinformer_store::Error>(())
/// ```
pub trait StagedReplace<K>: Send {
    /// Stages `obj` to be what the cache holds under its key after the commit.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed or encoded; nothing of it is staged.
    fn stage(&mut self, obj: Incoming<K>) -> Result<()>;

    /// The list names `key` with the object the cache holds under it: the commit leaves it
    /// as it is (and deletes it if it is gone by then). An object staged under the same key
    /// wins over keeping it.
    fn keep(&mut self, key: &str);

    /// Makes the staged list the cache's contents, in one step, as of `resource_version`:
    /// every key neither staged nor kept is deleted.
    ///
    /// # Errors
    ///
    /// When the cache refuses the list; it is unchanged then.
    fn commit(self: Box<Self>, resource_version: &str) -> Result<()>;
}

/// The default [`StagedReplace`]: the list, collected, for one [`Store::replace`].
struct CollectedReplace<K, I: ?Sized> {
    indexer: Arc<I>,
    list: Vec<Arc<K>>,
    kept: Vec<String>,
}

impl<K, I> StagedReplace<K> for CollectedReplace<K, I>
where
    K: Send + Sync + 'static,
    I: Indexer<K> + ?Sized,
{
    fn stage(&mut self, obj: Incoming<K>) -> Result<()> {
        self.list.push(obj.into_parts().0);
        Ok(())
    }

    fn keep(&mut self, key: &str) {
        self.kept.push(key.to_owned());
    }

    fn commit(self: Box<Self>, resource_version: &str) -> Result<()> {
        let Self {
            indexer,
            list,
            kept,
        } = *self;
        // The kept objects first: a replace keeps the last of two objects under one key, so
        // what was staged wins.
        let mut all: Vec<Arc<K>> = kept
            .iter()
            .filter_map(|key| indexer.get_by_key(key))
            .collect();
        all.extend(list);
        indexer.replace(all, resource_version)
    }
}
