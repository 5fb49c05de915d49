//! The cache core: objects by key in a slot table. Every write here also updates the
//! [`Indexes`], under the same lock.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use foldhash::fast::RandomState;

use super::indexes::Indexes;
use crate::Indexers;

pub(super) type Map<K, V> = HashMap<K, V, RandomState>;
pub(super) type Set<T> = HashSet<T, RandomState>;
/// Where an object lives in the slot table; index sets hold these instead of keys.
pub(crate) type Slot = u32;

/// Puts `entry` in a free slot of `entries` (listed in `free`), or in a new one at the end.
pub(crate) fn allocate<E>(entries: &mut Vec<Option<E>>, free: &mut Vec<Slot>, entry: E) -> Slot {
    match free.pop() {
        Some(slot) => {
            entries[slot as usize] = Some(entry);
            slot
        }
        None => {
            let slot =
                Slot::try_from(entries.len()).expect("a store holds fewer than 2^32 objects");
            entries.push(Some(entry));
            slot
        }
    }
}

/// A live slot of the table: the object and its key.
pub(super) struct Entry<K> {
    pub(super) key: Arc<str>,
    pub(super) obj: Arc<K>,
}

/// What the key map holds: the slot, and the object again so `get` needs no second lookup.
pub(super) struct Keyed<K> {
    pub(super) slot: Slot,
    pub(super) obj: Arc<K>,
}

/// Everything [`ThreadSafeStore`](super::ThreadSafeStore) keeps under its lock.
pub(super) struct Inner<K> {
    /// Key to slot and object.
    pub(super) slots_by_key: Map<Arc<str>, Keyed<K>>,
    /// The slot table; `None` marks a free slot listed in `free`.
    pub(super) entries: Vec<Option<Entry<K>>>,
    free: Vec<Slot>,
    /// The index funcs and the indexes they fill, by slot.
    pub(super) indexes: Indexes<K>,
}

impl<K> Inner<K> {
    pub(super) fn empty(indexers: Indexers<K>) -> Self {
        Self {
            slots_by_key: Map::default(),
            entries: Vec::new(),
            free: Vec::new(),
            indexes: Indexes::new(indexers),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<Arc<K>> {
        self.slots_by_key
            .get(key)
            .map(|keyed| Arc::clone(&keyed.obj))
    }

    pub(super) fn list(&self) -> Vec<Arc<K>> {
        let mut out = Vec::with_capacity(self.slots_by_key.len());
        out.extend(
            self.entries
                .iter()
                .flatten()
                .map(|entry| Arc::clone(&entry.obj)),
        );
        out
    }

    pub(super) fn list_keys(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.slots_by_key.len());
        out.extend(
            self.entries
                .iter()
                .flatten()
                .map(|entry| entry.key.to_string()),
        );
        out
    }

    /// The live entry in `slot`. Every slot reachable from the key map or an index is live:
    /// both are updated under the same write lock as the table.
    pub(super) fn entry(&self, slot: Slot) -> &Entry<K> {
        self.entries[slot as usize]
            .as_ref()
            .expect("indexed slots are always occupied")
    }

    /// The objects in `slots`, in their order.
    pub(super) fn objects(&self, slots: impl ExactSizeIterator<Item = Slot>) -> Vec<Arc<K>> {
        let mut out = Vec::with_capacity(slots.len());
        out.extend(slots.map(|slot| Arc::clone(&self.entry(slot).obj)));
        out
    }

    fn allocate(&mut self, entry: Entry<K>) -> Slot {
        allocate(&mut self.entries, &mut self.free, entry)
    }

    pub(super) fn upsert(&mut self, key: &str, obj: Arc<K>) -> Option<Arc<K>> {
        let Some(keyed) = self.slots_by_key.get_mut(key) else {
            let key: Arc<str> = Arc::from(key);
            let slot = self.allocate(Entry {
                key: Arc::clone(&key),
                obj: Arc::clone(&obj),
            });
            self.slots_by_key.insert(key, Keyed { slot, obj });
            let obj = &self.entries[slot as usize]
                .as_ref()
                .expect("just allocated")
                .obj;
            self.indexes.add(obj, slot);
            return None;
        };
        let slot = keyed.slot;
        keyed.obj = Arc::clone(&obj);
        let entry = self.entries[slot as usize]
            .as_mut()
            .expect("keyed slots are always occupied");
        let old = std::mem::replace(&mut entry.obj, obj);
        self.indexes.update(&old, &entry.obj, slot);
        Some(old)
    }

    pub(super) fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let slot = self.slots_by_key.remove(key)?.slot;
        let entry = self.entries[slot as usize]
            .take()
            .expect("keyed slots are always occupied");
        self.free.push(slot);
        self.indexes.remove(&entry.obj, slot);
        Some(entry.obj)
    }
}
