//! What a [`CompactCache`](super::CompactCache) keeps under its lock: encoded objects in a slot
//! table, keys, and indexes whose values each entry also holds, so that moving or dropping an
//! object's index entries never decodes it.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use foldhash::fast::RandomState;

use crate::{Error, IndexFunc, Indexers, Result, old::Identity};

pub(super) use crate::thread_safe::{Slot, allocate};

pub(super) type Map<K, V> = HashMap<K, V, RandomState>;
pub(super) type Set<T> = HashSet<T, RandomState>;

/// One stored object: its key, its encoded form, and the values it is indexed under.
pub(super) struct Entry {
    pub(super) key: Arc<str>,
    pub(super) bytes: Arc<[u8]>,
    /// The object's UID and resourceVersion, so an upsert can hand the replaced object back
    /// undecoded.
    pub(super) identity: Identity,
    /// Bumped on every write to the cache, so a decoded copy can tell which version it is.
    pub(super) stamp: u64,
    /// For each index, in [`Indexes::named`] order, the distinct values the object has.
    values: Box<[Box<[Arc<str>]>]>,
}

/// One index: its func, and value to the slots indexed under it.
struct Index<K> {
    name: String,
    func: IndexFunc<K>,
    slots: Map<Arc<str>, Set<Slot>>,
}

/// The slot table, the key map and the indexes.
pub(super) struct Inner<K> {
    pub(super) slots_by_key: Map<Arc<str>, Slot>,
    /// `None` marks a free slot listed in `free`.
    entries: Vec<Option<Entry>>,
    free: Vec<Slot>,
    indexes: Vec<Index<K>>,
    next_stamp: u64,
}

/// What an object gives every index func, in index order.
pub(super) struct Indexed {
    values: Vec<Vec<String>>,
}

/// Where an upsert put the object, and what it replaced.
pub(super) struct Upserted {
    pub(super) slot: Slot,
    pub(super) stamp: u64,
    pub(super) replaced: Option<Replaced>,
}

/// What an upsert replaced: the entry's key, bytes, stamp and identity.
pub(super) struct Replaced {
    pub(super) key: Arc<str>,
    pub(super) bytes: Arc<[u8]>,
    pub(super) stamp: u64,
    pub(super) identity: Identity,
}

/// Empty indexes for `indexers`, sorted by name.
fn empty_indexes<K>(indexers: Indexers<K>) -> Vec<Index<K>> {
    let mut indexes: Vec<Index<K>> = indexers
        .into_iter()
        .map(|(name, func)| Index {
            name,
            func,
            slots: Map::default(),
        })
        .collect();
    indexes.sort_by(|a, b| a.name.cmp(&b.name));
    indexes
}

impl<K> Inner<K> {
    pub(super) fn empty(indexers: Indexers<K>) -> Self {
        Self {
            slots_by_key: Map::default(),
            entries: Vec::new(),
            free: Vec::new(),
            indexes: empty_indexes(indexers),
            next_stamp: 1,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.slots_by_key.len()
    }

    pub(super) fn indexers(&self) -> Indexers<K> {
        self.indexes
            .iter()
            .map(|index| (index.name.clone(), Arc::clone(&index.func)))
            .collect()
    }

    /// The registered index names, sorted.
    pub(super) fn index_names(&self) -> Vec<String> {
        self.indexes
            .iter()
            .map(|index| index.name.clone())
            .collect()
    }

    /// What `obj` gives each index func, in index order, deduplicated.
    pub(super) fn index_values(&self, obj: &K) -> Indexed {
        Indexed {
            values: self
                .indexes
                .iter()
                .map(|index| distinct((index.func)(obj)))
                .collect(),
        }
    }

    /// Moves every stamp of this table past those `previous` has given, before this table
    /// replaces it: a (slot, stamp) pair of one never names an object of the other.
    pub(super) fn restamp_after(&mut self, previous: &Self) {
        let offset = previous.next_stamp;
        for entry in self.entries.iter_mut().flatten() {
            entry.stamp += offset;
        }
        self.next_stamp += offset;
    }

    /// No value for any index: an object stored unindexed.
    pub(super) fn no_index_values(&self) -> Indexed {
        Indexed {
            values: self.indexes.iter().map(|_| Vec::new()).collect(),
        }
    }

    pub(super) fn entry(&self, slot: Slot) -> &Entry {
        self.entries[slot as usize]
            .as_ref()
            .expect("keyed and indexed slots are always occupied")
    }

    pub(super) fn slot(&self, key: &str) -> Option<Slot> {
        self.slots_by_key.get(key).copied()
    }

    /// Every live slot, in table order.
    pub(super) fn slots(&self) -> impl Iterator<Item = Slot> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry.is_some())
            .map(|(slot, _)| slot as Slot)
    }

    /// Stores `bytes`, the encoded `obj`, and its `identity` under `key`, indexed as `obj` is;
    /// returns the slot and stamp, and what the key held before.
    pub(super) fn upsert(
        &mut self,
        key: &str,
        bytes: Arc<[u8]>,
        identity: Identity,
        obj: &K,
    ) -> Upserted {
        let indexed = self.index_values(obj);
        self.upsert_indexed(key, bytes, identity, indexed)
    }

    /// [`upsert`](Self::upsert) of an object whose index values were read before, from
    /// these indexes.
    pub(super) fn upsert_indexed(
        &mut self,
        key: &str,
        bytes: Arc<[u8]>,
        identity: Identity,
        indexed: Indexed,
    ) -> Upserted {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let values = self.intern(indexed);
        if let Some(slot) = self.slot(key) {
            let entry = self.entries[slot as usize]
                .as_mut()
                .expect("keyed slots are always occupied");
            let old_values = std::mem::replace(&mut entry.values, values);
            let old_bytes = std::mem::replace(&mut entry.bytes, bytes);
            let old_stamp = std::mem::replace(&mut entry.stamp, stamp);
            let old_identity = std::mem::replace(&mut entry.identity, identity);
            let replaced = Replaced {
                key: Arc::clone(&entry.key),
                bytes: old_bytes,
                stamp: old_stamp,
                identity: old_identity,
            };
            move_index_entries(&mut self.indexes, slot, &old_values, &entry.values);
            return Upserted {
                slot,
                stamp,
                replaced: Some(replaced),
            };
        }
        let key: Arc<str> = Arc::from(key);
        let entry = Entry {
            key: Arc::clone(&key),
            bytes,
            identity,
            stamp,
            values,
        };
        let slot = allocate(&mut self.entries, &mut self.free, entry);
        self.slots_by_key.insert(key, slot);
        let values = &self.entries[slot as usize]
            .as_ref()
            .expect("just allocated")
            .values;
        move_index_entries(&mut self.indexes, slot, &[], values);
        Upserted {
            slot,
            stamp,
            replaced: None,
        }
    }

    /// Removes the object under `key` and its index entries; returns its slot, bytes and stamp.
    pub(super) fn remove(&mut self, key: &str) -> Option<(Slot, Arc<[u8]>, u64)> {
        let slot = self.slots_by_key.remove(key)?;
        let entry = self.entries[slot as usize]
            .take()
            .expect("keyed slots are always occupied");
        self.free.push(slot);
        move_index_entries(&mut self.indexes, slot, &entry.values, &[]);
        Some((slot, entry.bytes, entry.stamp))
    }

    /// Registers `indexers`, indexing every stored object with them through `decode`.
    pub(super) fn add_indexers(
        &mut self,
        indexers: Indexers<K>,
        mut decode: impl FnMut(&Entry) -> Option<Arc<K>>,
    ) {
        let added = empty_indexes(indexers);
        let mut new_values: Vec<(Slot, Vec<Vec<String>>)> = Vec::new();
        for slot in self.slots().collect::<Vec<_>>() {
            let Some(obj) = decode(self.entry(slot)) else {
                new_values.push((slot, vec![Vec::new(); added.len()]));
                continue;
            };
            let values = added
                .iter()
                .map(|index| distinct((index.func)(&obj)))
                .collect();
            new_values.push((slot, values));
        }
        let old_names = self.index_names();
        self.indexes.extend(added);
        self.indexes.sort_by(|a, b| a.name.cmp(&b.name));
        // Each entry's values are re-laid in the new index order.
        for (slot, added_values) in new_values {
            let entry = self.entries[slot as usize]
                .as_mut()
                .expect("live slots are occupied");
            let mut by_name: Map<&str, Box<[Arc<str>]>> = old_names
                .iter()
                .map(String::as_str)
                .zip(std::mem::take(&mut entry.values).into_vec())
                .collect();
            let mut added_values = added_values.into_iter();
            let mut values = Vec::with_capacity(self.indexes.len());
            for index in &mut self.indexes {
                let held = match by_name.remove(index.name.as_str()) {
                    Some(held) => held,
                    None => {
                        let fresh: Box<[Arc<str>]> = added_values
                            .next()
                            .unwrap_or_default()
                            .into_iter()
                            .map(Arc::from)
                            .collect();
                        for value in &fresh {
                            index
                                .slots
                                .entry(Arc::clone(value))
                                .or_default()
                                .insert(slot);
                        }
                        fresh
                    }
                };
                values.push(held);
            }
            entry.values = values.into_boxed_slice();
        }
    }

    fn named(&self, index_name: &str) -> Result<&Index<K>> {
        self.indexes
            .iter()
            .find(|index| index.name == index_name)
            .ok_or_else(|| Error::IndexNotFound {
                name: index_name.to_owned(),
            })
    }

    /// The index func named `index_name`.
    pub(super) fn func(&self, index_name: &str) -> Result<IndexFunc<K>> {
        self.named(index_name).map(|index| Arc::clone(&index.func))
    }

    /// The slots indexed under any of `values` of `index_name`, each once.
    pub(super) fn slots_under(&self, index_name: &str, values: &[String]) -> Result<Vec<Slot>> {
        let index = self.named(index_name)?;
        Ok(match values {
            [] => Vec::new(),
            [value] => index
                .slots
                .get(value.as_str())
                .map(|slots| slots.iter().copied().collect())
                .unwrap_or_default(),
            _ => {
                let mut seen: Set<Slot> = Set::default();
                for value in values {
                    if let Some(slots) = index.slots.get(value.as_str()) {
                        seen.extend(slots.iter().copied());
                    }
                }
                seen.into_iter().collect()
            }
        })
    }

    pub(super) fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.named(index_name)
            .map(|index| index.slots.keys().map(|value| value.to_string()).collect())
            .unwrap_or_default()
    }

    /// The slots matching every `(index, values)` term; no term means every slot.
    pub(super) fn slots_matching(&self, query: &[(&str, &[&str])]) -> Result<Vec<Slot>> {
        let mut terms: Vec<Vec<&Set<Slot>>> = Vec::with_capacity(query.len());
        for (index_name, values) in query {
            let index = self.named(index_name)?;
            terms.push(
                values
                    .iter()
                    .filter_map(|value| index.slots.get(*value))
                    .collect(),
            );
        }
        let size = |term: &Vec<&Set<Slot>>| term.iter().map(|set| set.len()).sum::<usize>();
        let Some((smallest, _)) = terms.iter().enumerate().min_by_key(|(_, term)| size(term))
        else {
            return Ok(self.slots().collect());
        };
        let candidates = terms.swap_remove(smallest);
        let mut seen: Set<Slot> = Set::default();
        Ok(candidates
            .iter()
            .flat_map(|set| set.iter().copied())
            .filter(|slot| {
                terms
                    .iter()
                    .all(|term| term.iter().any(|set| set.contains(slot)))
            })
            .filter(|slot| seen.insert(*slot))
            .collect())
    }

    /// Interns `indexed` against the values the indexes already hold, so an entry shares each
    /// value string with its index.
    fn intern(&self, indexed: Indexed) -> Box<[Box<[Arc<str>]>]> {
        self.indexes
            .iter()
            .zip(indexed.values)
            .map(|(index, values)| {
                values
                    .into_iter()
                    .map(|value| match index.slots.get_key_value(value.as_str()) {
                        Some((held, _)) => Arc::clone(held),
                        None => Arc::from(value),
                    })
                    .collect()
            })
            .collect()
    }
}

/// Moves `slot` from the index values in `old` to those in `new` (index by index, in the
/// indexes' order); an empty `old` adds, an empty `new` removes.
fn move_index_entries<K>(
    indexes: &mut [Index<K>],
    slot: Slot,
    old: &[Box<[Arc<str>]>],
    new: &[Box<[Arc<str>]>],
) {
    let none: &[Arc<str>] = &[];
    for (at, index) in indexes.iter_mut().enumerate() {
        let old = old.get(at).map_or(none, |values| values);
        let new = new.get(at).map_or(none, |values| values);
        // Most updates leave index values alone; skip the set churn then.
        if old == new {
            continue;
        }
        for value in old.iter().filter(|value| !new.contains(value)) {
            remove_from_index(&mut index.slots, value, slot);
        }
        for value in new.iter().filter(|value| !old.contains(value)) {
            index
                .slots
                .entry(Arc::clone(value))
                .or_default()
                .insert(slot);
        }
    }
}

/// `values` without duplicates, in first-seen order.
fn distinct(mut values: Vec<String>) -> Vec<String> {
    if values.len() > 1 {
        let mut seen: Set<String> = Set::default();
        values.retain(|value| seen.insert(value.clone()));
    }
    values
}

/// Drops `slot` from the set under `value`, and the set itself once empty.
fn remove_from_index(index: &mut Map<Arc<str>, Set<Slot>>, value: &str, slot: Slot) {
    if let Some(slots) = index.get_mut(value) {
        slots.remove(&slot);
        if slots.is_empty() {
            index.remove(value);
        }
    }
}
