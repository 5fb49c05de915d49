//! What the queues carry: [`Delta`], [`Deltas`], and what a pop hands over, [`Popped`].

use std::{collections::HashSet, fmt, ops::Deref, sync::Arc};

use kinformer_store::{Encoded, Incoming, ObjectOrTombstone};
use smallvec::SmallVec;

/// The kind of change a [`Delta`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The watch reported a new object.
    Added,
    /// The watch reported a changed object.
    Updated,
    /// The object is gone; its delta may carry a tombstone when the deletion was inferred.
    Deleted,
    /// A relist delivered the object; it may or may not have changed. Emitted instead of
    /// [`Sync`](Self::Sync) for a replace when the queue was built to emit it.
    Replaced,
    /// A periodic resync re-delivered a known object (or a relist did, on a DeltaFIFO that does
    /// not emit [`Replaced`](Self::Replaced)).
    Sync,
}

impl DeltaType {
    /// client-go's name for the type, as `Delta.Type` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "Added",
            Self::Updated => "Updated",
            Self::Deleted => "Deleted",
            Self::Replaced => "Replaced",
            Self::Sync => "Sync",
        }
    }
}

impl fmt::Display for DeltaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change to one object: what happened and the object's state after it (for a deletion,
/// its last known state, possibly a tombstone).
#[derive(Debug)]
pub struct Delta<K> {
    /// What happened.
    pub kind: DeltaType,
    /// The object after the change.
    pub object: ObjectOrTombstone<K>,
    /// The bytes the object was decoded from, when the watch kept them and no transformer
    /// changed the object since ([`Encoded`]): the cache may store them rather than encode
    /// the object again.
    pub encoded: Option<Encoded>,
}

impl<K> Delta<K> {
    /// A delta carrying a live object.
    pub fn new(kind: DeltaType, object: Arc<K>) -> Self {
        Self {
            kind,
            object: ObjectOrTombstone::Object(object),
            encoded: None,
        }
    }

    /// A delta carrying an object as it arrived, with the bytes it was decoded from.
    pub(crate) fn arrived(kind: DeltaType, incoming: Incoming<K>) -> Self {
        let (object, encoded) = incoming.into_parts();
        Self {
            kind,
            object: ObjectOrTombstone::Object(object),
            encoded,
        }
    }

    /// The object as a store's write takes it: with the bytes it arrived in.
    pub fn incoming(&self) -> Incoming<K> {
        Incoming::new(Arc::clone(self.object()), self.encoded.clone())
    }

    /// The object, or the tombstone's last known state.
    pub fn object(&self) -> &Arc<K> {
        self.object.object()
    }
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind,
            object: self.object.clone(),
            encoded: self.encoded.clone(),
        }
    }
}

impl<K> PartialEq for Delta<K> {
    /// Equal when the kinds match and both carry the same allocation (whose bytes, if any, are
    /// the same too).
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.object == other.object
    }
}

/// The deltas queued for one key, oldest first; never empty when handed out by a queue.
///
/// Most keys carry a single delta between pops, so the first one is stored inline.
pub struct Deltas<K>(SmallVec<[Delta<K>; 1]>);

impl<K> Deltas<K> {
    /// An empty list, for building one by hand (tests, `add_if_not_present`).
    pub fn new() -> Self {
        Self(SmallVec::new())
    }

    /// A list holding one delta.
    pub fn one(delta: Delta<K>) -> Self {
        let mut deltas = SmallVec::new();
        deltas.push(delta);
        Self(deltas)
    }

    /// Appends a delta as the newest.
    pub fn push(&mut self, delta: Delta<K>) {
        self.0.push(delta);
    }

    /// The oldest delta.
    #[doc(alias = "Oldest")]
    pub fn oldest(&self) -> Option<&Delta<K>> {
        self.0.first()
    }

    /// The newest delta.
    #[doc(alias = "Newest")]
    pub fn newest(&self) -> Option<&Delta<K>> {
        self.0.last()
    }

    pub(crate) fn newest_mut(&mut self) -> Option<&mut Delta<K>> {
        self.0.last_mut()
    }

    pub(crate) fn pop_newest(&mut self) -> Option<Delta<K>> {
        self.0.pop()
    }

    /// The deltas, oldest first.
    pub fn into_vec(self) -> Vec<Delta<K>> {
        self.0.into_vec()
    }
}

impl<K> Default for Deltas<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> Deref for Deltas<K> {
    type Target = [Delta<K>];

    fn deref(&self) -> &[Delta<K>] {
        &self.0
    }
}

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        Self(self.0.iter().cloned().collect())
    }
}

impl<K> PartialEq for Deltas<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0[..] == other.0[..]
    }
}

impl<K: fmt::Debug> fmt::Debug for Deltas<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<K> FromIterator<Delta<K>> for Deltas<K> {
    fn from_iter<I: IntoIterator<Item = Delta<K>>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl<K> IntoIterator for Deltas<K> {
    type Item = Delta<K>;
    type IntoIter = smallvec::IntoIter<[Delta<K>; 1]>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, K> IntoIterator for &'a Deltas<K> {
    type Item = &'a Delta<K>;
    type IntoIter = std::slice::Iter<'a, Delta<K>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A whole relist, queued as one item by a [`RealFifo`](crate::RealFifo) built with atomic
/// events: the consumer replaces its store with `objects` in one step.
#[doc(alias = "ReplacedAllInfo")]
#[derive(Debug)]
pub struct ReplacedAll<K> {
    /// The resource version the list was taken at.
    pub resource_version: String,
    /// Every listed object, transformed.
    pub objects: Vec<Arc<K>>,
}

impl<K> Clone for ReplacedAll<K> {
    fn clone(&self) -> Self {
        Self {
            resource_version: self.resource_version.clone(),
            objects: self.objects.clone(),
        }
    }
}

/// The end of a list a [`RealFifo`](crate::RealFifo) built with atomic events took in parts
/// ([`Store::replace_in_parts`](kinformer_store::Store::replace_in_parts)): its objects were
/// popped before it as `Replaced` deltas; the consumer deletes every object it holds under a
/// key the list did not name.
#[derive(Debug, Clone)]
pub struct ListEnd {
    /// The resource version the list was taken at.
    pub resource_version: String,
    /// The key of every listed object.
    pub listed: Arc<HashSet<String>>,
}

/// Part of a relist a [`RealFifo`](crate::RealFifo) built with
/// [`relist_in_parts`](crate::RealFifoOptions::relist_in_parts) took as it arrived: the
/// consumer stages it, and shows its readers nothing of it before the [`RelistEnd`] with the
/// same `relist` number.
#[derive(Debug)]
pub struct RelistPart<K> {
    /// Which relist the part belongs to; each relist has a new number.
    pub relist: u64,
    /// The listed objects, transformed, with the bytes they arrived in when nothing changed
    /// them.
    pub objects: Vec<Incoming<K>>,
}

impl<K> Clone for RelistPart<K> {
    fn clone(&self) -> Self {
        Self {
            relist: self.relist,
            objects: self.objects.clone(),
        }
    }
}

/// The end of a relist taken in parts ([`RelistPart`]): the consumer replaces its store with
/// what the relist's parts staged, in one step, or drops them when the list was abandoned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelistEnd {
    /// Which relist ends.
    pub relist: u64,
    /// The resource version the list was taken at; `None` when the list failed on the way:
    /// its parts are dropped and the store stays as it was.
    pub resource_version: Option<String>,
}

/// What one pop hands to the process function and then returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum Popped<K> {
    /// Every delta queued for one key (DeltaFIFO), or one in-order delta (RealFIFO).
    Deltas(Deltas<K>),
    /// Consecutive in-order deltas for distinct keys, oldest first (RealFIFO batched pop).
    Batch(Vec<Delta<K>>),
    /// A whole relist (RealFIFO with atomic events): replace the store with it.
    ReplacedAll(ReplacedAll<K>),
    /// The end of a list taken in parts (RealFIFO with atomic events): delete what it did
    /// not name.
    ListEnd(ListEnd),
    /// Part of a relist, to stage until its [`RelistEnd`](Self::RelistEnd) (RealFIFO with
    /// relists in parts).
    RelistPart(RelistPart<K>),
    /// The end of a relist taken in parts: replace the store with what its parts staged.
    RelistEnd(RelistEnd),
    /// A resync of everything the consumer knows (RealFIFO with atomic events).
    #[doc(alias = "SyncAllInfo")]
    SyncAll,
    /// The watch reached `resource_version` without a change to report (RealFIFO with atomic
    /// events and bookmarks): the consumer's store is now as of that version.
    #[doc(alias = "BookmarkInfo")]
    Bookmark {
        /// The resource version of the bookmark.
        resource_version: String,
    },
}

impl<K> Popped<K> {
    /// The deltas carried, oldest first: one key's deltas, or a batch; empty for
    /// [`ReplacedAll`](Self::ReplacedAll), [`SyncAll`](Self::SyncAll) and
    /// [`Bookmark`](Self::Bookmark).
    pub fn deltas(&self) -> &[Delta<K>] {
        match self {
            Self::Deltas(deltas) => deltas,
            Self::Batch(batch) => batch,
            Self::ReplacedAll(_)
            | Self::ListEnd(_)
            | Self::RelistPart(_)
            | Self::RelistEnd(_)
            | Self::SyncAll
            | Self::Bookmark { .. } => &[],
        }
    }

    /// How many items of the queue this pop consumed.
    pub(crate) fn queue_items(&self) -> usize {
        match self {
            Self::Batch(batch) => batch.len(),
            Self::Deltas(_)
            | Self::ReplacedAll(_)
            | Self::ListEnd(_)
            | Self::RelistPart(_)
            | Self::RelistEnd(_)
            | Self::SyncAll
            | Self::Bookmark { .. } => 1,
        }
    }
}

impl<K> Clone for Popped<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Deltas(deltas) => Self::Deltas(deltas.clone()),
            Self::Batch(batch) => Self::Batch(batch.clone()),
            Self::ReplacedAll(all) => Self::ReplacedAll(all.clone()),
            Self::ListEnd(end) => Self::ListEnd(end.clone()),
            Self::RelistPart(part) => Self::RelistPart(part.clone()),
            Self::RelistEnd(end) => Self::RelistEnd(end.clone()),
            Self::SyncAll => Self::SyncAll,
            Self::Bookmark { resource_version } => Self::Bookmark {
                resource_version: resource_version.clone(),
            },
        }
    }
}
