//! A relist into a [`CompactCache`], staged in encoded form and committed under one lock.

use std::sync::Arc;

use super::{
    CompactCache, decode,
    table::{Indexed, Set},
};
use crate::{Error, Incoming, Result, StagedReplace, old::Identity};

/// What a [`CompactCache`] stages of a relist: each changed object encoded with its index
/// values, and the key of every object the list names.
pub(super) struct CompactStaged<K> {
    cache: Arc<CompactCache<K>>,
    /// The index names when the relist began: the staged index values are read with them.
    index_names: Vec<String>,
    staged: Vec<Staged>,
    listed: Set<Arc<str>>,
}

/// An object staged to replace what its key holds.
struct Staged {
    key: Arc<str>,
    bytes: Arc<[u8]>,
    identity: Identity,
    indexed: Indexed,
}

impl<K> CompactStaged<K> {
    pub(super) fn new(cache: Arc<CompactCache<K>>) -> Self {
        let index_names = cache.inner.read().index_names();
        Self {
            index_names,
            cache,
            staged: Vec::new(),
            listed: Set::default(),
        }
    }
}

impl<K: Send + Sync> StagedReplace<K> for CompactStaged<K> {
    fn stage(&mut self, obj: Incoming<K>) -> Result<()> {
        let cache = &*self.cache;
        let (obj, encoded) = obj.into_parts();
        let key: Arc<str> = Arc::from((cache.key_func)(&obj)?);
        let bytes = match encoded.and_then(|encoded| cache.codec.adopt(&encoded)) {
            Some(bytes) => bytes,
            None => cache.encode(&key, &obj)?,
        };
        // Should an index be added before the commit, the commit reads every staged object's
        // values again.
        let indexed = cache.inner.read().index_values(&obj);
        self.listed.insert(Arc::clone(&key));
        self.staged.push(Staged {
            key,
            bytes,
            identity: (cache.identity)(&obj),
            indexed,
        });
        Ok(())
    }

    fn keep(&mut self, key: &str) {
        self.listed.insert(Arc::from(key));
    }

    fn commit(self: Box<Self>, _resource_version: &str) -> Result<()> {
        let Self {
            cache,
            index_names,
            staged,
            listed,
        } = *self;
        let cache = &*cache;
        // Declared before the write, so what the commit lets go of is freed after the unlock.
        let mut freed_bytes: Vec<Arc<[u8]>> = Vec::new();
        let mut freed_objects: Vec<Arc<K>> = Vec::new();
        let mut failed: Vec<Error> = Vec::new();
        {
            let mut write = cache.write();
            let gone: Vec<Arc<str>> = write
                .inner
                .slots_by_key
                .keys()
                .filter(|key| !listed.contains(*key))
                .cloned()
                .collect();
            for key in gone {
                if let Some((slot, bytes, _)) = write.inner.remove(&key) {
                    freed_bytes.push(bytes);
                    freed_objects.extend(write.hot.remove(slot));
                }
            }
            // The decoded set holds at most a share of what is cached: fewer objects now.
            let cached = write.inner.len();
            freed_objects.extend(write.hot.fit(cached));
            let indexes_changed = write.inner.index_names() != index_names;
            for staged in staged {
                let indexed = if indexes_changed {
                    // Rare: an index added during the relist. The object is decoded again to
                    // read its values for every index; one that does not decode is reported
                    // and stored unindexed until a write replaces it.
                    match decode(&*cache.codec, &staged.key, &staged.bytes) {
                        Ok(obj) => write.inner.index_values(&obj),
                        Err(error) => {
                            failed.push(error);
                            write.inner.no_index_values()
                        }
                    }
                } else {
                    staged.indexed
                };
                let upserted =
                    write
                        .inner
                        .upsert_indexed(&staged.key, staged.bytes, staged.identity, indexed);
                if let Some(replaced) = upserted.replaced {
                    freed_bytes.push(replaced.bytes);
                    freed_objects.extend(write.hot.remove(upserted.slot));
                }
            }
        }
        for error in &failed {
            cache.decode_failures.report(error);
        }
        Ok(())
    }
}
