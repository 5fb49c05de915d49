//! Objects whose deletion was inferred rather than observed.

use std::sync::Arc;

/// An object that was deleted while the watch was down: the informer learned of the deletion
/// from a relist, so the object's final state is unknown and `obj` is the last state it saw.
///
/// The Rust name of client-go's `cache.DeletedFinalStateUnknown`, with one addition: an
/// informer of a shard whose shard changed also lets go of the objects outside the new shard
/// this way, and marks their tombstones [`left_shard`](Self::left_shard), since those objects
/// were not deleted from the cluster as far as the informer knows.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The key the object was stored under.
    pub key: String,
    /// The newest state known before the deletion; possibly stale.
    pub obj: Arc<K>,
    /// The object left the informer's shard (its shard changed and no longer holds the
    /// object) rather than vanishing from the server: it may well still exist, informed by
    /// whichever replica's shard now holds it. A controller that cleans up after deleted
    /// objects skips these.
    pub left_shard: bool,
}

impl<K> DeletedFinalStateUnknown<K> {
    /// The tombstone of `obj`, stored under `key`, whose deletion was inferred.
    pub fn new(key: impl Into<String>, obj: Arc<K>) -> Self {
        Self {
            key: key.into(),
            obj,
            left_shard: false,
        }
    }
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: Arc::clone(&self.obj),
            left_shard: self.left_shard,
        }
    }
}

impl<K> PartialEq for DeletedFinalStateUnknown<K> {
    /// Tombstones are equal when they name the same key, share the same object allocation and
    /// agree on whether the object left the shard.
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
            && Arc::ptr_eq(&self.obj, &other.obj)
            && self.left_shard == other.left_shard
    }
}

/// What a deletion carries: the object as last observed, or a tombstone when the deletion was
/// inferred from a relist.
///
/// client-go passes either as `interface{}` to `OnDelete` and to the deletion-handling key func;
/// here the two cases are a type.
#[derive(Debug)]
pub enum ObjectOrTombstone<K> {
    /// The object as the watch last reported it.
    Object(Arc<K>),
    /// The deletion was inferred; the final state is unknown.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> ObjectOrTombstone<K> {
    /// The object itself, or the tombstone's last known state.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Object(obj) => obj,
            Self::Tombstone(tombstone) => &tombstone.obj,
        }
    }

    /// Consumes `self`, returning the object or the tombstone's last known state.
    pub fn into_object(self) -> Arc<K> {
        match self {
            Self::Object(obj) => obj,
            Self::Tombstone(tombstone) => tombstone.obj,
        }
    }

    /// The tombstone, when the deletion was inferred.
    pub fn as_tombstone(&self) -> Option<&DeletedFinalStateUnknown<K>> {
        match self {
            Self::Object(_) => None,
            Self::Tombstone(tombstone) => Some(tombstone),
        }
    }

    /// Whether the final state is unknown.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }
}

impl<K> Clone for ObjectOrTombstone<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(obj) => Self::Object(Arc::clone(obj)),
            Self::Tombstone(tombstone) => Self::Tombstone(tombstone.clone()),
        }
    }
}

impl<K> PartialEq for ObjectOrTombstone<K> {
    /// Equal when both are the same variant over the same allocation (and key, for tombstones).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Object(a), Self::Object(b)) => Arc::ptr_eq(a, b),
            (Self::Tombstone(a), Self::Tombstone(b)) => a == b,
            _ => false,
        }
    }
}

impl<K> From<Arc<K>> for ObjectOrTombstone<K> {
    fn from(obj: Arc<K>) -> Self {
        Self::Object(obj)
    }
}

impl<K> From<DeletedFinalStateUnknown<K>> for ObjectOrTombstone<K> {
    fn from(tombstone: DeletedFinalStateUnknown<K>) -> Self {
        Self::Tombstone(tombstone)
    }
}
