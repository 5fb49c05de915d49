//! [`CompactCache`]: an [`Indexer`] that holds each object encoded, with keys and index entries
//! held directly, and keeps only a bounded set of objects decoded.

#[cfg(test)]
mod cache_tests;
mod hot;
mod staged;
mod table;
#[cfg(test)]
mod tests;

use std::{fmt, sync::Arc};

use hot::Hot;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockWriteGuard};
use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};
use table::{Inner, Slot};

use crate::{
    CacheReader, Encoded, Error, Incoming, Indexer, Indexers, KeyFunc, Object, OldObject, Result,
    StagedReplace, Store, default_key_func, old::Identity,
};

/// Why a [`Codec`] could not encode or decode.
pub type CodecError = Box<dyn std::error::Error + Send + Sync>;

/// How a [`CompactCache`] turns an object into bytes and back.
///
/// `decode(encode(obj))` must equal `obj`. kinformer-reflector has the codecs for Kubernetes
/// kinds (protobuf where the kind has it, JSON otherwise); a codec of your own fits a type of
/// your own.
pub trait Codec<K>: Send + Sync {
    /// The compact form of `obj`.
    ///
    /// # Errors
    ///
    /// When `obj` cannot be encoded; the cache then refuses the write and is unchanged.
    fn encode(&self, obj: &K) -> Result<Vec<u8>, CodecError>;

    /// The object `bytes` (made by [`encode`](Self::encode)) hold.
    ///
    /// # Errors
    ///
    /// When `bytes` do not decode.
    fn decode(&self, bytes: &[u8]) -> Result<K, CodecError>;

    /// `encoded` as this codec's compact form, when it already is one: the bytes an object
    /// arrived in ([`Encoded`]), which [`decode`](Self::decode) reads back to that object. A
    /// cache stores them and skips [`encode`](Self::encode). The default adopts nothing.
    fn adopt(&self, encoded: &Encoded) -> Option<Arc<[u8]>> {
        let _ = encoded;
        None
    }
}

/// An informer cache that holds each object in a compact encoded form rather than decoded:
/// the same [`Store`], [`CacheReader`] and [`Indexer`] as [`Cache`](crate::Cache), for a
/// fraction of the memory, at the price of a decode on reads.
///
/// - **Held directly**: keys, index entries (each entry also keeps its own index values, so
///   moving or dropping them never decodes), and the encoded bytes.
/// - **Decoded on demand**: every read returns `Arc<K>` as [`Cache`](crate::Cache) does,
///   decoding outside the lock, so a large read never holds up the writer. A read with more
///   than a few objects to decode, and a large replace, spread over rayon's pool.
/// - **Kept decoded**: a bounded set of objects recently written or fetched by key
///   ([`hot_capacity`](Self::hot_capacity), at most one in 64 of the objects, evicted by the
///   clock policy); a get of one of them
///   costs no decode. Lists and index queries use the set but do not fill it, so a scan does
///   not push out what gets keep reading.
/// - **Writes** encode outside the lock (or keep the bytes the object arrived in, when the
///   codec adopts them: [`Incoming`], [`Codec::adopt`]), and free what they displace (an
///   evicted object, the replaced bytes, a relist's whole previous contents) after releasing
///   it.
/// - **Replaced objects stay encoded**: each object's UID and resourceVersion are held beside
///   its bytes (a few dozen bytes an object), so [`Indexer::upsert`], which is where an
///   informer's update gets its old object, hands the replaced object back as an
///   [`OldObject`] that is decoded only if a handler reads it (unless it was kept decoded),
///   and [`Indexer::get_lazy`] hands over what a relist replaces the same way.
///
/// Objects come back equal, not identical: two reads of an object the set does not hold give
/// two `Arc`s. A decode that fails (a codec that cannot read what it wrote) is reported as an
/// [`Error::Decode`] naming the key ([`on_decode_failure`](Self::on_decode_failure); logged
/// without one), and the read leaves that object out.
///
/// ```
/// use std::sync::Arc;
///
/// use kinformer_store::{
///     CacheReader, Codec, CodecError, CompactCache, Indexers, Store, meta_namespace_key_func,
/// };
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// /// JSON, for the example; kinformer-reflector has protobuf codecs for built-in kinds.
/// struct Json;
/// impl Codec<ConfigMap> for Json {
///     fn encode(&self, obj: &ConfigMap) -> Result<Vec<u8>, CodecError> {
///         Ok(serde_json::to_vec(obj)?)
///     }
///     fn decode(&self, bytes: &[u8]) -> Result<ConfigMap, CodecError> {
///         Ok(serde_json::from_slice(bytes)?)
///     }
/// }
///
/// let cache = CompactCache::new(
///     Arc::new(meta_namespace_key_func::<ConfigMap>),
///     Indexers::new(),
///     Arc::new(Json),
/// );
/// let mut config = ConfigMap::default();
/// config.metadata.namespace = Some("prod".into());
/// config.metadata.name = Some("settings".into());
/// cache.add(config.clone().into())?;
/// assert_eq!(cache.get_by_key("prod/settings").as_deref(), Some(&config));
/// # Ok::<(), kinformer_store::Error>(())
/// ```
pub struct CompactCache<K> {
    key_func: KeyFunc<K>,
    codec: Arc<dyn Codec<K>>,
    inner: RwLock<Inner<K>>,
    hot: Mutex<Hot<K>>,
    /// Reads an object's UID and resourceVersion.
    identity: fn(&K) -> Identity,
    decode_failures: Arc<DecodeFailures>,
}

/// What a compact cache hands each decode failure to.
type ReportDecodeFailure = Box<dyn Fn(&Error) + Send + Sync>;

/// Where a compact cache reports the bytes it could not decode.
#[derive(Default)]
pub(crate) struct DecodeFailures {
    report: Option<ReportDecodeFailure>,
}

impl DecodeFailures {
    /// Hands `error` to the reporter, or logs it when there is none.
    fn report(&self, error: &Error) {
        match &self.report {
            Some(report) => report(error),
            None => tracing::error!(%error, "a compact cache could not decode an object"),
        }
    }
}

impl<K> fmt::Debug for CompactCache<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("CompactCache")
            .field("len", &inner.len())
            .field("indexers", &inner.index_names())
            .field("hot", &self.hot.lock().len())
            .finish_non_exhaustive()
    }
}

impl<K: Object> CompactCache<K> {
    /// A cache keyed `namespace/name` with the namespace index, holding objects with `codec`.
    pub fn with_namespace_index(codec: Arc<dyn Codec<K>>) -> Self {
        Self::new(default_key_func(), crate::namespace_indexers::<K>(), codec)
    }

    /// A cache keyed by `key_func`, with `indexers`, holding objects with `codec`.
    pub fn new(key_func: KeyFunc<K>, indexers: Indexers<K>, codec: Arc<dyn Codec<K>>) -> Self {
        Self {
            key_func,
            codec,
            inner: RwLock::new(Inner::empty(indexers)),
            hot: Mutex::new(Hot::new(Self::DEFAULT_HOT_CAPACITY)),
            identity: Identity::of::<K>,
            decode_failures: Arc::default(),
        }
    }
}

impl<K> CompactCache<K> {
    /// How many objects a cache keeps decoded unless told otherwise.
    pub const DEFAULT_HOT_CAPACITY: usize = 1024;

    /// Keeps at most `capacity` objects decoded ([`DEFAULT_HOT_CAPACITY`](Self::DEFAULT_HOT_CAPACITY)
    /// unless set), and at most one in 64 of the cached objects (but 64 at least): a decoded
    /// object weighs about ten times its bytes. Zero keeps none.
    #[must_use]
    pub fn hot_capacity(self, capacity: usize) -> Self {
        *self.hot.lock() = Hot::new(capacity);
        self
    }

    /// How many objects are decoded right now.
    #[cfg(test)]
    pub(crate) fn hot_len(&self) -> usize {
        self.hot.lock().len()
    }

    /// Hands every decode failure to `report`, as an [`Error::Decode`] naming the key and what
    /// the codec said, instead of logging it. An informer counts them and passes them to its watch error handler. `report`
    /// runs on the reading thread, outside the cache's locks.
    #[must_use]
    pub fn on_decode_failure(mut self, report: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.decode_failures = Arc::new(DecodeFailures {
            report: Some(Box::new(report)),
        });
        self
    }

    fn encode(&self, key: &str, obj: &K) -> Result<Arc<[u8]>> {
        match self.codec.encode(obj) {
            Ok(bytes) => Ok(Arc::from(bytes)),
            Err(error) => Err(Error::Encode {
                key: key.to_owned(),
                reason: error.to_string(),
            }),
        }
    }

    fn decode(&self, key: &str, bytes: &[u8]) -> Option<Arc<K>> {
        decode_or_report(&*self.codec, &self.decode_failures, key, bytes)
    }

    /// Stores `obj`, as the bytes it arrived in when the codec adopts them, and returns the
    /// object it replaced in the form `old` asks for.
    fn store(&self, obj: Incoming<K>, old: Old) -> Result<Option<OldObject<K>>> {
        let (obj, encoded) = obj.into_parts();
        let key = (self.key_func)(&obj)?;
        let bytes = match encoded.and_then(|encoded| self.codec.adopt(&encoded)) {
            Some(bytes) => bytes,
            None => self.encode(&key, &obj)?,
        };
        let identity = (self.identity)(&obj);
        let (replaced, held_old) = {
            let mut write = self.write();
            let upserted = write.inner.upsert(&key, bytes, identity, &obj);
            let held_old = match (&upserted.replaced, old) {
                (Some(replaced), Old::Lazy) => write.hot.peek(upserted.slot, replaced.stamp),
                _ => None,
            };
            write.hold(upserted.slot, upserted.stamp, obj);
            (upserted.replaced, held_old)
        };
        let Some(replaced) = replaced.filter(|_| old != Old::Ignored) else {
            return Ok(None);
        };
        if let Some(held) = held_old {
            return Ok(Some(OldObject::decoded(held)));
        }
        Ok(Some(self.lazy(
            replaced.key,
            replaced.bytes,
            replaced.identity,
        )))
    }

    /// `bytes`, the object under `key`, left encoded, to be decoded by this cache's codec when
    /// first read.
    fn lazy(&self, key: Arc<str>, bytes: Arc<[u8]>, identity: Identity) -> OldObject<K> {
        OldObject::encoded(
            key,
            bytes,
            identity,
            Arc::clone(&self.codec),
            Arc::clone(&self.decode_failures),
        )
    }

    /// Both locks, for a write; see [`Write`].
    fn write(&self) -> Write<'_, K> {
        let inner = self.inner.write();
        Write {
            inner,
            hot: self.hot.lock(),
            retired: Retired::default(),
        }
    }

    /// What `slots` hold: objects kept decoded, and the bytes of the others. With `remember`,
    /// the kept ones are marked read.
    fn pending(&self, inner: &Inner<K>, slots: &[Slot], remember: bool) -> Vec<Pending<K>> {
        let mut hot = self.hot.lock();
        slots
            .iter()
            .map(|&slot| {
                let entry = inner.entry(slot);
                let held = if remember {
                    hot.get(slot, entry.stamp)
                } else {
                    hot.peek(slot, entry.stamp)
                };
                match held {
                    Some(obj) => Pending::Decoded(obj),
                    None => Pending::Encoded {
                        slot,
                        stamp: entry.stamp,
                        key: Arc::clone(&entry.key),
                        bytes: Arc::clone(&entry.bytes),
                    },
                }
            })
            .collect()
    }
}

impl<K: Send + Sync> CompactCache<K> {
    /// Reads `slots(inner)` under the lock and decodes them after releasing it.
    fn read_objects(
        &self,
        remember: bool,
        slots: impl FnOnce(&Inner<K>) -> Result<Vec<Slot>>,
    ) -> Result<Vec<Arc<K>>> {
        let pending = {
            let inner = self.inner.read();
            let slots = slots(&inner)?;
            self.pending(&inner, &slots, remember)
        };
        Ok(self.finish(pending, remember))
    }

    fn get_key(&self, key: &str) -> Option<Arc<K>> {
        let found = self.read_objects(true, |inner| Ok(inner.slot(key).into_iter().collect()));
        found.ok().and_then(|mut objects| objects.pop())
    }

    /// Encodes `list` on every core, keyed, outside any lock.
    fn encode_all(&self, list: Vec<Arc<K>>) -> Result<Vec<Keyed<K>>> {
        let parallel = list.len() >= PARALLEL_WRITE_ITEMS;
        on_every_core(list, parallel, |obj| {
            let key = (self.key_func)(&obj)?;
            let bytes = self.encode(&key, &obj)?;
            Ok((key, bytes, obj))
        })
        .into_iter()
        .collect()
    }

    /// Decodes what `pending` still holds encoded (a large read on every core); with
    /// `remember`, keeps what it decodes.
    fn finish(&self, pending: Vec<Pending<K>>, remember: bool) -> Vec<Arc<K>> {
        let encoded: usize = pending
            .iter()
            .map(|item| match item {
                Pending::Decoded(_) => 0,
                Pending::Encoded { bytes, .. } => bytes.len(),
            })
            .sum();
        on_every_core(pending, encoded >= PARALLEL_READ_BYTES, |item| match item {
            Pending::Decoded(obj) => Some(obj),
            Pending::Encoded {
                slot,
                stamp,
                key,
                bytes,
            } => {
                let obj = self.decode(&key, &bytes)?;
                if remember {
                    // The guard is a temporary: what it displaces is freed after the unlock.
                    let _displaced = self.hot.lock().insert(slot, stamp, Arc::clone(&obj));
                }
                Some(obj)
            }
        })
        .into_iter()
        .flatten()
        .collect()
    }
}

/// A read decodes on every core once it holds this many encoded bytes (about 20 full Pods,
/// 200 µs of decoding), and a replace encodes on every core from this many objects: below
/// them, handing work to the pool costs more than it saves.
const PARALLEL_READ_BYTES: usize = 64 * 1024;
const PARALLEL_WRITE_ITEMS: usize = 64;

/// `items` mapped by `f`, in order; with `parallel`, on rayon's pool, whose threads (unlike a
/// thread spawned per call) keep warm allocator heaps from one read to the next.
fn on_every_core<T: Send, R: Send>(
    items: Vec<T>,
    parallel: bool,
    f: impl Fn(T) -> R + Sync + Send,
) -> Vec<R> {
    if !parallel || rayon::current_num_threads() < 2 {
        return items.into_iter().map(f).collect();
    }
    items.into_par_iter().with_min_len(4).map(f).collect()
}

/// `bytes`, the object under `key`, decoded by `codec`.
fn decode<K>(codec: &dyn Codec<K>, key: &str, bytes: &[u8]) -> Result<Arc<K>> {
    codec
        .decode(bytes)
        .map(Arc::new)
        .map_err(|error| Error::Decode {
            key: key.to_owned(),
            reason: error.to_string(),
        })
}

/// `bytes` decoded by `codec`; a failure is counted and reported with `key`.
pub(crate) fn decode_or_report<K>(
    codec: &dyn Codec<K>,
    failures: &DecodeFailures,
    key: &str,
    bytes: &[u8],
) -> Option<Arc<K>> {
    decode(codec, key, bytes)
        .map_err(|error| failures.report(&error))
        .ok()
}

/// An object ready to store: its key, its bytes, and the object for its index funcs.
type Keyed<K> = (String, Arc<[u8]>, Arc<K>);

/// What a write hands back of the object it replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Old {
    /// Nothing: a `Store` write.
    Ignored,
    /// The object, left encoded unless it is kept decoded: [`Indexer::upsert`].
    Lazy,
}

/// An object found by a read: kept decoded, or still to decode.
enum Pending<K> {
    Decoded(Arc<K>),
    Encoded {
        slot: Slot,
        stamp: u64,
        key: Arc<str>,
        bytes: Arc<[u8]>,
    },
}

impl<K: Send + Sync> Store<K> for CompactCache<K> {
    fn add(&self, obj: Incoming<K>) -> Result<()> {
        self.store(obj, Old::Ignored).map(drop)
    }

    fn update(&self, obj: Incoming<K>) -> Result<()> {
        self.store(obj, Old::Ignored).map(drop)
    }

    fn delete(&self, obj: Arc<K>) -> Result<()> {
        let key = (self.key_func)(&obj)?;
        self.write().remove(&key);
        Ok(())
    }

    fn replace(&self, list: Vec<Arc<K>>, _resource_version: &str) -> Result<()> {
        let encoded = self.encode_all(list)?;
        let indexers = self.inner.read().indexers();
        let mut fresh = Inner::empty(indexers);
        for (key, bytes, obj) in &encoded {
            fresh.upsert(key, Arc::clone(bytes), (self.identity)(obj), obj);
        }
        let mut write = self.write();
        // Indexers added since the snapshot above must not be lost.
        let missing: Indexers<K> = write
            .inner
            .indexers()
            .into_iter()
            .filter(|(name, _)| !fresh.index_names().contains(name))
            .collect();
        if !missing.is_empty() {
            let by_key: std::collections::HashMap<&str, &Arc<K>> = encoded
                .iter()
                .map(|(key, _, obj)| (key.as_str(), obj))
                .collect();
            fresh.add_indexers(missing, |entry| {
                by_key.get(&*entry.key).map(|obj| Arc::clone(obj))
            });
        }
        // Stamped after every stamp of the table it replaces, so a read that decoded an
        // object of that table just before the swap cannot file it under a new object's
        // slot and stamp.
        fresh.restamp_after(&write.inner);
        write.swap(fresh);
        Ok(())
    }

    fn resync(&self) -> Result<()> {
        Ok(())
    }
}

impl<K: Send + Sync> CacheReader<K> for CompactCache<K> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.get_key(key)
    }

    fn get(&self, obj: &K) -> Result<Option<Arc<K>>> {
        Ok(self.get_key(&(self.key_func)(obj)?))
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.read_objects(false, |inner| Ok(inner.slots().collect()))
            .unwrap_or_default()
    }

    fn list_keys(&self) -> Vec<String> {
        let inner = self.inner.read();
        inner
            .slots()
            .map(|slot| inner.entry(slot).key.to_string())
            .collect()
    }

    fn len(&self) -> usize {
        self.inner.read().len()
    }

    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        self.read_objects(false, |inner| {
            inner.slots_under(index_name, &[indexed_value.to_owned()])
        })
    }

    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        self.read_objects(false, |inner| {
            let values = inner.func(index_name)?(obj);
            inner.slots_under(index_name, &values)
        })
    }

    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        View::new(self, &self.inner.read()).index_keys(index_name, indexed_value)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner.read().list_index_func_values(index_name)
    }

    fn index_names(&self) -> Vec<String> {
        self.inner.read().index_names()
    }

    fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        self.read_objects(false, |inner| inner.slots_matching(query))
    }

    fn read_consistent(&self, reader: &mut dyn FnMut(&dyn CacheReader<K>)) -> bool {
        let inner = self.inner.read();
        reader(&View::new(self, &inner));
        true
    }
}

impl<K: Send + Sync> Indexer<K> for CompactCache<K> {
    fn upsert(&self, obj: Incoming<K>) -> Result<Option<OldObject<K>>> {
        self.store(obj, Old::Lazy)
    }

    fn get_lazy(&self, key: &str) -> Option<OldObject<K>> {
        let inner = self.inner.read();
        let slot = inner.slot(key)?;
        let entry = inner.entry(slot);
        // Peeked, not marked read: a relist asks for every key it lists, and reads are what
        // the decoded set keeps.
        if let Some(held) = self.hot.lock().peek(slot, entry.stamp) {
            return Some(OldObject::decoded(held));
        }
        let (key, bytes) = (Arc::clone(&entry.key), Arc::clone(&entry.bytes));
        Some(self.lazy(key, bytes, entry.identity.clone()))
    }

    fn indexers(&self) -> Indexers<K> {
        self.inner.read().indexers()
    }

    /// Stages each object encoded (in the bytes it arrived in, when the codec adopts them)
    /// with its index values; a kept object stays where it is, bytes and decoded copy alike.
    /// The commit deletes, then writes what was staged, under one write lock.
    fn stage_replace(self: Arc<Self>) -> Box<dyn StagedReplace<K>>
    where
        K: Send + Sync + 'static,
        Self: 'static,
    {
        Box::new(staged::CompactStaged::new(self))
    }

    /// An object whose bytes do not decode cannot be indexed: the indexes added leave it out
    /// until a write replaces it, and the failure is reported once the lock is released.
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        let mut failed = Vec::new();
        {
            let mut inner = self.inner.write();
            let names = inner.index_names();
            if let Some(name) = indexers.keys().filter(|name| names.contains(name)).min() {
                return Err(Error::IndexerConflict { name: name.clone() });
            }
            // Every object is decoded once under the write lock: an index added to a running
            // informer is rare, and its entries must appear together.
            inner.add_indexers(indexers, |entry| {
                decode(&*self.codec, &entry.key, &entry.bytes)
                    .map_err(|error| failed.push(error))
                    .ok()
            });
        }
        for error in &failed {
            self.decode_failures.report(error);
        }
        Ok(())
    }
}

/// Both locks of a [`CompactCache`] held for a write, and what the write lets go of: an
/// object evicted, replaced or deleted, deleted bytes, a relist's previous contents. Fields
/// drop in declaration order, so what a write lets go of is freed after both locks are
/// released, however the write ends: a full object takes microseconds to free, and readers
/// would wait on the lock meanwhile. Writes change the hot set and remove entries only
/// through these methods, but for a staged replace's commit (`staged.rs`), which frees what it
/// lets go of the same way, after the unlock.
struct Write<'a, K> {
    inner: RwLockWriteGuard<'a, Inner<K>>,
    hot: MutexGuard<'a, Hot<K>>,
    retired: Retired<K>,
}

/// What a [`Write`] lets go of.
struct Retired<K> {
    object: Option<Arc<K>>,
    /// Objects a shrinking set let go of ([`Hot::fit`]).
    evicted: Vec<Arc<K>>,
    bytes: Option<Arc<[u8]>>,
    relisted: Option<(Inner<K>, Vec<Arc<K>>)>,
}

impl<K> Default for Retired<K> {
    fn default() -> Self {
        Self {
            object: None,
            evicted: Vec::new(),
            bytes: None,
            relisted: None,
        }
    }
}

impl<K> Write<'_, K> {
    /// Keeps `obj` decoded as the version of `slot` stamped `stamp`.
    fn hold(&mut self, slot: Slot, stamp: u64, obj: Arc<K>) {
        let evicted = self.hot.fit(self.inner.len());
        self.retired.evicted.extend(evicted);
        let displaced = self.hot.insert(slot, stamp, obj);
        self.retire(displaced);
    }

    /// A write lets go of one decoded object at most; a second would be freed here, locked.
    fn retire(&mut self, obj: Option<Arc<K>>) {
        debug_assert!(self.retired.object.is_none(), "one object per write");
        self.retired.object = obj;
    }

    /// Removes the object under `key`, encoded and decoded.
    fn remove(&mut self, key: &str) {
        if let Some((slot, bytes, _)) = self.inner.remove(key) {
            self.retired.bytes = Some(bytes);
            let held = self.hot.remove(slot);
            self.retire(held);
        }
    }

    /// Makes `fresh` the cache's contents, holding nothing decoded.
    fn swap(&mut self, fresh: Inner<K>) {
        let previous = std::mem::replace(&mut *self.inner, fresh);
        self.retired.relisted = Some((previous, self.hot.clear()));
    }
}

/// A [`CompactCache`] held still: every query answers from the same state, decoding under the
/// read lock.
struct View<'a, K> {
    cache: &'a CompactCache<K>,
    inner: &'a Inner<K>,
}

impl<'a, K: Send + Sync> View<'a, K> {
    fn new(cache: &'a CompactCache<K>, inner: &'a Inner<K>) -> Self {
        Self { cache, inner }
    }

    fn objects(&self, slots: Result<Vec<Slot>>, remember: bool) -> Result<Vec<Arc<K>>> {
        let pending = self.cache.pending(self.inner, &slots?, remember);
        Ok(self.cache.finish(pending, remember))
    }
}

impl<K: Send + Sync> CacheReader<K> for View<'_, K> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let slots = Ok(self.inner.slot(key).into_iter().collect());
        self.objects(slots, true)
            .ok()
            .and_then(|mut found| found.pop())
    }

    fn get(&self, obj: &K) -> Result<Option<Arc<K>>> {
        Ok(self.get_by_key(&(self.cache.key_func)(obj)?))
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.objects(Ok(self.inner.slots().collect()), false)
            .unwrap_or_default()
    }

    fn list_keys(&self) -> Vec<String> {
        self.inner
            .slots()
            .map(|slot| self.inner.entry(slot).key.to_string())
            .collect()
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        let slots = self
            .inner
            .slots_under(index_name, &[indexed_value.to_owned()]);
        self.objects(slots, false)
    }

    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        let values = self.inner.func(index_name)?(obj);
        self.objects(self.inner.slots_under(index_name, &values), false)
    }

    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        let slots = self
            .inner
            .slots_under(index_name, &[indexed_value.to_owned()])?;
        Ok(slots
            .into_iter()
            .map(|slot| self.inner.entry(slot).key.to_string())
            .collect())
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner.list_index_func_values(index_name)
    }

    fn index_names(&self) -> Vec<String> {
        self.inner.index_names()
    }

    fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        self.objects(self.inner.slots_matching(query), false)
    }

    fn read_consistent(&self, reader: &mut dyn FnMut(&dyn CacheReader<K>)) -> bool {
        reader(self);
        true
    }
}
