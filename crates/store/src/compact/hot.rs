//! The objects a [`CompactCache`](super::CompactCache) keeps decoded: a bounded set, evicted
//! by the clock (second-chance) policy.

use std::{collections::VecDeque, sync::Arc};

use super::table::{Map, Slot};

/// One decoded object, valid while its slot still holds the version stamped `stamp`.
struct Held<K> {
    stamp: u64,
    obj: Arc<K>,
    /// Read since it was last passed over by the clock hand.
    referenced: bool,
}

/// A cache keeps at most one object in this many decoded ([`Hot::fit`]).
const SHARE: usize = 64;

/// ... but never fewer than this many, capacity allowing.
const FLOOR: usize = 64;

/// At most `limit` decoded objects by slot, with the clock's queue of slots.
pub(super) struct Hot<K> {
    capacity: usize,
    /// The capacity, or less in a small cache ([`fit`](Self::fit)).
    limit: usize,
    held: Map<Slot, Held<K>>,
    /// Every slot in `held`, once, oldest first; the clock hand is its front.
    clock: VecDeque<Slot>,
}

impl<K> Hot<K> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            limit: capacity,
            held: Map::default(),
            clock: VecDeque::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// Sizes the set for a cache of `cached` objects: one in [`SHARE`], at least [`FLOOR`], at
    /// most the capacity. A decoded object weighs about ten times its bytes, so a fixed count
    /// would cost a small cache of large objects more than the rest of it. Returns the objects
    /// this evicts, for the caller to drop once it has released its locks.
    #[must_use = "the evicted objects are dropped by the caller, outside its locks"]
    pub(super) fn fit(&mut self, cached: usize) -> Vec<Arc<K>> {
        self.limit = self.capacity.min((cached / SHARE).max(FLOOR));
        let mut evicted = Vec::new();
        while self.held.len() > self.limit {
            match self.evict_one() {
                Some(obj) => evicted.push(obj),
                None => break,
            }
        }
        evicted
    }

    /// The object held for `slot`, if it is the version stamped `stamp`.
    pub(super) fn get(&mut self, slot: Slot, stamp: u64) -> Option<Arc<K>> {
        let held = self.held.get_mut(&slot)?;
        if held.stamp != stamp {
            return None;
        }
        held.referenced = true;
        Some(Arc::clone(&held.obj))
    }

    /// The object held for `slot` without marking it read (for scans, which must not keep
    /// everything they touch).
    pub(super) fn peek(&self, slot: Slot, stamp: u64) -> Option<Arc<K>> {
        self.held
            .get(&slot)
            .filter(|held| held.stamp == stamp)
            .map(|held| Arc::clone(&held.obj))
    }

    /// Holds `obj` as the version of `slot` stamped `stamp`, evicting another object when full.
    /// Returns the object this leaves unheld (the version replaced, the object evicted, or `obj`
    /// itself when it is not kept), for the caller to drop once it has released its locks.
    #[must_use = "the displaced object is dropped by the caller, outside its locks"]
    pub(super) fn insert(&mut self, slot: Slot, stamp: u64, obj: Arc<K>) -> Option<Arc<K>> {
        if self.capacity == 0 {
            return Some(obj);
        }
        if let Some(held) = self.held.get_mut(&slot) {
            // A newer version replaces an older one; an older one never replaces a newer.
            if held.stamp > stamp {
                return Some(obj);
            }
            let replaced = std::mem::replace(
                held,
                Held {
                    stamp,
                    obj,
                    referenced: false,
                },
            );
            return Some(replaced.obj);
        }
        let mut evicted = None;
        while self.held.len() >= self.limit.max(1) {
            evicted = self.evict_one().or(evicted);
        }
        self.held.insert(
            slot,
            Held {
                stamp,
                obj,
                referenced: false,
            },
        );
        self.clock.push_back(slot);
        evicted
    }

    /// Forgets `slot` (its object was deleted); returns what it held, for the caller to drop.
    #[must_use = "the forgotten object is dropped by the caller, outside its locks"]
    pub(super) fn remove(&mut self, slot: Slot) -> Option<Arc<K>> {
        let held = self.held.remove(&slot)?;
        self.clock.retain(|queued| *queued != slot);
        Some(held.obj)
    }

    /// Forgets every object; returns them, for the caller to drop.
    #[must_use = "the forgotten objects are dropped by the caller, outside its locks"]
    pub(super) fn clear(&mut self) -> Vec<Arc<K>> {
        self.clock.clear();
        self.held.drain().map(|(_, held)| held.obj).collect()
    }

    /// Moves the clock hand until it finds an object not read since its last pass, and
    /// returns it, no longer held.
    fn evict_one(&mut self) -> Option<Arc<K>> {
        while let Some(slot) = self.clock.pop_front() {
            let Some(held) = self.held.get_mut(&slot) else {
                continue;
            };
            if held.referenced {
                held.referenced = false;
                self.clock.push_back(slot);
            } else {
                return self.held.remove(&slot).map(|held| held.obj);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_object_survives_one_pass_of_the_clock() {
        let mut hot = Hot::new(2);
        let _ = hot.insert(1, 1, Arc::new("one"));
        let _ = hot.insert(2, 1, Arc::new("two"));
        assert!(hot.get(1, 1).is_some());
        let evicted = hot.insert(3, 1, Arc::new("three"));
        assert_eq!(
            evicted.as_deref(),
            Some(&"two"),
            "returned for the caller to drop"
        );
        assert_eq!(hot.len(), 2);
        assert!(hot.get(1, 1).is_some(), "read since inserted: kept");
        assert!(hot.get(2, 1).is_none(), "never read: evicted");
        assert!(hot.get(3, 1).is_some());
    }

    #[test]
    fn a_stale_stamp_is_a_miss_and_never_replaces_a_newer_version() {
        let mut hot = Hot::new(4);
        let _ = hot.insert(1, 5, Arc::new("v5"));
        assert!(hot.get(1, 4).is_none());
        let refused = hot.insert(1, 4, Arc::new("v4"));
        assert_eq!(refused.as_deref(), Some(&"v4"));
        assert_eq!(hot.get(1, 5).as_deref(), Some(&"v5"));
        let replaced = hot.insert(1, 6, Arc::new("v6"));
        assert_eq!(replaced.as_deref(), Some(&"v5"));
        assert_eq!(hot.get(1, 6).as_deref(), Some(&"v6"));
        assert_eq!(hot.len(), 1);
    }

    #[test]
    fn the_set_holds_one_in_sixty_four_of_the_cache_and_at_least_sixty_four() {
        let mut hot = Hot::new(1024);
        assert!(hot.fit(6_400).is_empty());
        for slot in 0..200 {
            let _ = hot.insert(slot, 1, Arc::new(slot));
        }
        assert_eq!(hot.len(), 100, "a cache of 6,400 keeps 100 decoded");
        assert_eq!(
            hot.fit(1_000).len(),
            36,
            "shrunk to the floor of 64, evictions returned"
        );
        assert_eq!(hot.len(), 64);
        assert!(hot.fit(1_000_000).is_empty());
        for slot in 1_000..3_000 {
            let _ = hot.insert(slot, 1, Arc::new(slot));
        }
        assert_eq!(hot.len(), 1024, "never more than the capacity");
    }

    #[test]
    fn removing_and_a_zero_capacity_hold_nothing() {
        let mut hot = Hot::new(4);
        let _ = hot.insert(1, 1, Arc::new("one"));
        assert_eq!(hot.remove(1).as_deref(), Some(&"one"));
        assert!(hot.get(1, 1).is_none());
        assert_eq!(hot.len(), 0);
        let mut none = Hot::new(0);
        assert_eq!(none.insert(1, 1, Arc::new("one")).as_deref(), Some(&"one"));
        assert_eq!(none.len(), 0);
    }
}
