//! The secondary indexes: for every index func, index value to the slots of the objects
//! indexed under it. [`Indexes`] is kept in step by the slot table's writes; the queries
//! below read it together with the table.

use std::sync::Arc;

use super::table::{Inner, Map, Set, Slot};
use crate::{Error, IndexFunc, Indexers, Result};

/// Index value to the slots of the objects indexed under it.
pub(super) type Index = Map<Arc<str>, Set<Slot>>;

/// The index funcs and the index each one fills.
pub(super) struct Indexes<K> {
    pub(super) indexers: Indexers<K>,
    /// Index name to index; an index exists for every indexer.
    pub(super) indices: Map<String, Index>,
}

impl<K> Indexes<K> {
    pub(super) fn new(indexers: Indexers<K>) -> Self {
        Self {
            indices: indexers
                .keys()
                .map(|name| (name.clone(), Index::default()))
                .collect(),
            indexers,
        }
    }

    /// Indexes the new object in `slot` under every value its index funcs give.
    pub(super) fn add(&mut self, obj: &K, slot: Slot) {
        for (name, func) in &self.indexers {
            let index = index_mut(&mut self.indices, name);
            for value in func(obj) {
                add_to_index(index, value, slot);
            }
        }
    }

    /// Moves `slot` from the index values of `old` to those of `new`.
    pub(super) fn update(&mut self, old: &K, new: &K, slot: Slot) {
        for (name, func) in &self.indexers {
            let old_values = func(old);
            let new_values = func(new);
            // Most updates leave index values alone; skip the set churn then.
            if new_values == old_values {
                continue;
            }
            let index = index_mut(&mut self.indices, name);
            for value in &old_values {
                if !new_values.contains(value) {
                    remove_from_index(index, value, slot);
                }
            }
            for value in new_values {
                if !old_values.contains(&value) {
                    add_to_index(index, value, slot);
                }
            }
        }
    }

    /// Drops `slot`, which held `obj`, from every index.
    pub(super) fn remove(&mut self, obj: &K, slot: Slot) {
        for (name, func) in &self.indexers {
            let index = index_mut(&mut self.indices, name);
            for value in func(obj) {
                remove_from_index(index, &value, slot);
            }
        }
    }

    fn named(&self, index_name: &str) -> Result<(&IndexFunc<K>, &Index)> {
        match (self.indexers.get(index_name), self.indices.get(index_name)) {
            (Some(func), Some(index)) => Ok((func, index)),
            _ => Err(Error::IndexNotFound {
                name: index_name.to_owned(),
            }),
        }
    }
}

/// The index queries, which map the slots they find to objects through the table.
impl<K> Inner<K> {
    pub(super) fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        let (func, index) = self.indexes.named(index_name)?;
        let values = func(obj);
        let out = match values.as_slice() {
            [] => Vec::new(),
            // The common case needs no dedup.
            [value] => index
                .get(value.as_str())
                .map(|slots| self.objects(slots.iter().copied()))
                .unwrap_or_default(),
            _ => {
                let mut slots: Set<Slot> = Set::default();
                for value in &values {
                    if let Some(set) = index.get(value.as_str()) {
                        slots.extend(set.iter().copied());
                    }
                }
                self.objects(slots.into_iter())
            }
        };
        Ok(out)
    }

    pub(super) fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        let (_, index) = self.indexes.named(index_name)?;
        Ok(index
            .get(indexed_value)
            .map(|slots| {
                slots
                    .iter()
                    .map(|slot| self.entry(*slot).key.to_string())
                    .collect()
            })
            .unwrap_or_default())
    }

    pub(super) fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.indexes
            .indices
            .get(index_name)
            .map(|index| index.keys().map(|value| value.to_string()).collect())
            .unwrap_or_default()
    }

    pub(super) fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<K>>> {
        let (_, index) = self.indexes.named(index_name)?;
        Ok(index
            .get(indexed_value)
            .map(|slots| self.objects(slots.iter().copied()))
            .unwrap_or_default())
    }

    pub(super) fn by_indexes(&self, query: &[(&str, &[&str])]) -> Result<Vec<Arc<K>>> {
        // Each term as the index sets of its values; a term with no value matches nothing.
        let mut terms: Vec<Vec<&Set<Slot>>> = Vec::with_capacity(query.len());
        for (index_name, values) in query {
            let (_, index) = self.indexes.named(index_name)?;
            terms.push(
                values
                    .iter()
                    .filter_map(|value| index.get(*value))
                    .collect(),
            );
        }
        let size = |term: &Vec<&Set<Slot>>| term.iter().map(|set| set.len()).sum::<usize>();
        let Some((smallest, _)) = terms.iter().enumerate().min_by_key(|(_, term)| size(term))
        else {
            // No term at all: everything.
            return Ok(self.list());
        };
        let candidates = terms.swap_remove(smallest);
        let mut seen: Set<Slot> = Set::default();
        let mut out = Vec::new();
        for slot in candidates.iter().flat_map(|set| set.iter().copied()) {
            let in_every_term = terms
                .iter()
                .all(|term| term.iter().any(|set| set.contains(&slot)));
            // A slot under two values of the candidate term is taken once.
            if in_every_term && (candidates.len() == 1 || seen.insert(slot)) {
                out.push(Arc::clone(&self.entry(slot).obj));
            }
        }
        Ok(out)
    }

    /// Registers `indexers` and indexes every stored object with them.
    pub(super) fn add_indexers(&mut self, indexers: Indexers<K>) {
        for (name, func) in indexers {
            let mut index = Index::default();
            for (slot, entry) in self.entries.iter().enumerate() {
                let Some(entry) = entry else { continue };
                let slot = Slot::try_from(slot).expect("slots fit in u32 by construction");
                for value in func(&entry.obj) {
                    add_to_index(&mut index, value, slot);
                }
            }
            self.indexes.indices.insert(name.clone(), index);
            self.indexes.indexers.insert(name, func);
        }
    }
}

/// The index named `name`, which exists for every registered indexer.
fn index_mut<'a>(indices: &'a mut Map<String, Index>, name: &str) -> &'a mut Index {
    // Looked up by `&str` first so the common path does not allocate the name.
    if !indices.contains_key(name) {
        indices.insert(name.to_owned(), Index::default());
    }
    indices.get_mut(name).expect("inserted above")
}

/// Adds `slot` under `value`, allocating the value only when it is new to the index.
fn add_to_index(index: &mut Index, value: String, slot: Slot) {
    match index.get_mut(value.as_str()) {
        Some(slots) => {
            slots.insert(slot);
        }
        None => {
            let mut slots = Set::default();
            slots.insert(slot);
            index.insert(Arc::from(value), slots);
        }
    }
}

/// Drops `slot` from the set under `value`, and the set itself once empty, so that
/// `list_index_func_values` never reports a value nothing is indexed under (client-go fixed the
/// same leak in kubernetes/kubernetes#84959).
fn remove_from_index(index: &mut Index, value: &str, slot: Slot) {
    if let Some(slots) = index.get_mut(value) {
        slots.remove(&slot);
        if slots.is_empty() {
            index.remove(value);
        }
    }
}
