//! Where a work item sits on the ring: by its text, or by its object's hash.

use std::{fmt, sync::Arc};

use super::Ring;

/// A work item the ring can place: by its text (`namespace/name`, the default), or, for an
/// [`ObjectKey`], by its object's hash in the server's shard space, so that the replica that
/// owns the item is the one whose cache holds the object ([`Shard::hash_ranges`]).
///
/// [`Shard::hash_ranges`]: super::Shard::hash_ranges
pub trait Placed: AsRef<str> {
    /// The hash that places the item, if not its text: the FNV-1a hash of its object's UID or
    /// namespace (`kinformer_store::ShardKey::hash`).
    fn hash(&self) -> Option<u64> {
        None
    }
}

impl Placed for str {}
impl Placed for String {}
impl Placed for Arc<str> {}
impl Placed for Box<str> {}

impl<T: Placed + ?Sized> Placed for &T {
    fn hash(&self) -> Option<u64> {
        (**self).hash()
    }
}

/// A work key placed by its object's hash: the key (`namespace/name`) a worker reads the
/// object by, and the hash of the object's UID (or namespace) that says which replica owns it,
/// the one whose cache holds the object.
///
/// Two keys are the same item only with the same hash: an object deleted and created again
/// under its name has a new UID, and is another item that another replica may own.
///
/// ```
/// use kinformer_leaderelection::shard::{ObjectKey, Placed};
///
/// let key = ObjectKey::new("default/web-0", 0x9e37_79b9_7f4a_7c15);
/// assert_eq!(key.as_ref(), "default/web-0");
/// assert_eq!(Placed::hash(&key), Some(0x9e37_79b9_7f4a_7c15));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    key: Arc<str>,
    hash: u64,
}

impl ObjectKey {
    /// The item for the object under `key` whose UID (or namespace) hashes to `hash`.
    pub fn new(key: impl Into<Arc<str>>, hash: u64) -> Self {
        Self {
            key: key.into(),
            hash,
        }
    }

    /// The object's key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.key
    }
}

impl Placed for ObjectKey {
    fn hash(&self) -> Option<u64> {
        Some(self.hash)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{:#018x}", self.key, self.hash)
    }
}

/// An item as the gate keeps it while it is in flight.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Place {
    Text(Arc<str>),
    Hash(Arc<str>, u64),
}

impl Place {
    pub(crate) fn of(item: &(impl Placed + ?Sized)) -> Self {
        let key: Arc<str> = item.as_ref().into();
        match item.hash() {
            Some(hash) => Self::Hash(key, hash),
            None => Self::Text(key),
        }
    }

    /// Whether `ring` gives this item to `member`.
    pub(crate) fn owned_by(&self, ring: &Ring, member: &str) -> bool {
        ring_owner(ring, self.key(), self.hash()) == Some(member)
    }

    fn key(&self) -> &str {
        match self {
            Self::Text(key) | Self::Hash(key, _) => key,
        }
    }

    fn hash(&self) -> Option<u64> {
        match self {
            Self::Text(_) => None,
            Self::Hash(_, hash) => Some(*hash),
        }
    }
}

/// Who `ring` gives the item of `key` and `hash` to: by its text without a hash.
pub(crate) fn ring_owner<'r>(ring: &'r Ring, key: &str, hash: Option<u64>) -> Option<&'r str> {
    match hash {
        Some(hash) => ring.hash_owner(hash),
        None => ring.owner(key),
    }
}
