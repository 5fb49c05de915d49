//! A listener's pending notifications: a ring that grows and shrinks, optionally bounded, or
//! coalesced per object key.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    num::NonZeroUsize,
    sync::Arc,
};

use kinformer_store::{AddKind, DeletedFinalStateUnknown, KeyFunc, ObjectOrTombstone};
use tokio::time::Instant;

use crate::Notification;

/// How many notifications a listener may hold while its handler is busy, and what happens
/// when it falls behind.
///
/// - [`Unbounded`](Self::Unbounded), the default, as in client-go: every notification is kept
///   and delivered. A stuck handler holds them all until memory runs out, but never loses one.
///   Pick it when the handler must see every intermediate state (an audit log, a diff).
/// - [`CoalesceByKey`](Self::CoalesceByKey): at most one pending notification per object (two
///   across a delete and re-create), each carrying the newest state. A slow handler receives
///   fewer, newer notifications and never a wrong one: its view of the objects still ends
///   equal to the cache's, and memory is bounded by the number of objects rather than by the
///   rate of change. Pick it for level-triggered controllers (the common case: they read the
///   object and reconcile) whose handler can fall behind under bursts.
/// - [`Bounded`](Self::Bounded) with [`Overflow::Block`]: backpressure. A full buffer makes
///   the informer wait (up to a deadline) for the handler to take notifications, so nothing is
///   lost while the handler keeps within the deadline; the informer's cache and every other
///   handler wait with it, and the watch backs up into the connection. Pick it for a handler
///   that must see every notification, is usually fast, and whose occasional stall should slow
///   the informer rather than grow memory. Past the deadline it drops, as `DropNewest`.
/// - [`Bounded`](Self::Bounded) with [`Overflow::Resync`]: a hard cap that loses nothing the
///   handler needs. When full, the listener stops queueing; once the handler has caught up
///   with what was queued, it receives in one pass what brings it level with the cache: adds,
///   updates from the state it last saw, deletions as tombstones. Memory is the cap plus the
///   last state handed to the handler per key. Pick it for a handler that must end right but
///   can skip intermediate states and whose bursts can outgrow any fixed buffer.
/// - [`Bounded`](Self::Bounded) with [`Overflow::DropNewest`] or [`Overflow::DropOldest`]: a
///   hard cap with counted drops ([`ListenerStats::dropped`](crate::ListenerStats::dropped)). A
///   dropped notification is lost: the handler's view can diverge from the cache until the
///   object changes again or a resync re-delivers it, so pick it only for consumers that
///   tolerate loss (metrics, sampling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BufferPolicy {
    /// Keep everything (client-go's behaviour). The ring doubles when full and gives memory
    /// back once the handler catches up.
    #[default]
    Unbounded,
    /// Keep at most `capacity` notifications waiting for the handler, the one it is handling
    /// aside; when full, apply `overflow`. (From an unbounded buffer a handler thread takes up
    /// to 64 notifications at a time, to lock once per batch; from a bounded one it takes one
    /// at a time, so none waits outside the count.)
    Bounded {
        /// The most notifications held at once.
        capacity: NonZeroUsize,
        /// Which notification to drop when the buffer is full.
        overflow: Overflow,
    },
    /// Merge a notification into the pending one for the same object key, so the handler
    /// sees the newest state: an add followed by updates becomes one add of the newest state,
    /// updates become one update from the state the handler last saw to the newest, an update
    /// followed by a delete becomes the delete, and an add followed by a delete cancels both
    /// (the handler never saw the object). A delete is never merged with what follows it, so a
    /// re-created object still arrives as a delete then an add. Notifications already handed
    /// to the handler thread (up to 64) are past merging. The order across keys follows the
    /// first pending notification of each key.
    ///
    /// Needs the object key: the processor's
    /// [`ProcessorOptions::key_func`](crate::ProcessorOptions::key_func), which an informer
    /// always sets. Objects the key function refuses are queued unmerged.
    CoalesceByKey,
}

impl BufferPolicy {
    /// A bounded buffer of `capacity` (at least one) that drops as `overflow` says.
    pub fn bounded(capacity: usize, overflow: Overflow) -> Self {
        Self::Bounded {
            capacity: NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            overflow,
        }
    }
}

/// What a full bounded buffer does with the next notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Make the distributor (the informer) wait until the consumer has taken a notification,
    /// for at most this long; then drop the incoming one as [`DropNewest`](Self::DropNewest)
    /// does. The time spent waiting is in
    /// [`ListenerStats::blocked`](crate::ListenerStats::blocked).
    ///
    /// The wait blocks the distributing thread: run the informer on a multi-thread runtime,
    /// and do not consume this listener's [`EventStream`](crate::EventStream) on the runtime
    /// thread that distributes (a handler thread, the default consumer, is always separate).
    /// Adding or removing a listener and stopping the processor wait for a distribution in
    /// progress, so for up to the deadline too.
    Block(std::time::Duration),
    /// Drop the incoming notification and every one after it until the consumer has taken
    /// what was queued; then hand it, before anything newer, the difference between what it
    /// was last given and the cache: an add for each object it lacks, an update (from the
    /// state it last saw) for each that changed, a tombstone deletion for each that is gone.
    /// Counted in [`ListenerStats::resyncs`](crate::ListenerStats::resyncs).
    ///
    /// Needs the object key and the cache: the processor's
    /// [`ProcessorOptions::key_func`](crate::ProcessorOptions::key_func) and
    /// [`ProcessorOptions::cache_snapshot`](crate::ProcessorOptions::cache_snapshot), both of
    /// which an informer sets. The catch-up compares the whole cache with what the consumer was
    /// given while the informer's distribution waits, so for a large cache it holds the
    /// informer for one pass over its keys.
    Resync,
    /// Drop the oldest pending notification to make room: the handler sees the newest state
    /// sooner, but misses what it was replaced by.
    DropOldest,
    /// Refuse the incoming notification: the handler sees an unbroken prefix of the stream.
    DropNewest,
}

/// Below this capacity the ring never shrinks; client-go starts its ring at the same size.
const NORMAL_CAPACITY: usize = 1024;
/// Room for a burst without reallocating, while an idle listener stays small.
const INITIAL_CAPACITY: usize = 16;

/// What [`RingBuffer::push`] did with a notification.
#[derive(Debug)]
pub(crate) enum Pushed<K> {
    Queued,
    /// The buffer was full; this notification (the new one or the oldest) was dropped.
    Dropped(Notification<K>),
    /// Merged into the pending notification of the same key. `vanished` is how many
    /// notifications the handler will not see because of it (1, or 2 when a deletion cancelled
    /// a pending add); `cancelled_initial` is set when that add was an initial-list one.
    Coalesced {
        vanished: u64,
        cancelled_initial: bool,
    },
}

/// One place in the ring: a pending notification (or, under coalescing, the hole a cancelled
/// one left) with the time it was queued.
#[derive(Debug)]
pub(crate) struct Slot<K> {
    notification: Option<Notification<K>>,
    queued_at: Instant,
    /// The object's key, kept under coalescing so a pop can forget the key's pending entry.
    key: Option<Box<str>>,
}

/// client-go's `buffer.RingGrowing`, plus shrinking, an optional bound and coalescing.
pub(crate) struct RingBuffer<K> {
    items: VecDeque<Slot<K>>,
    /// Pending notifications: `items` less the holes coalescing left.
    live: usize,
    policy: BufferPolicy,
    coalescer: Option<Coalescer<K>>,
    resync: Option<Resync<K>>,
}

/// Calls its argument with the cache's contents while no change is being distributed, so
/// that what it does with them is ordered with every notification: before all the ones that
/// follow, after all the ones before. An informer takes the lock that orders its cache
/// changes and their distribution.
pub type CacheSnapshot<K> = Arc<dyn Fn(&mut dyn FnMut(Vec<Arc<K>>)) + Send + Sync>;

/// [`Overflow::Resync`]'s state.
struct Resync<K> {
    snapshot: CacheSnapshot<K>,
    key_func: KeyFunc<K>,
    /// The last state handed to the consumer, by key.
    seen: HashMap<Box<str>, Arc<K>>,
    /// What brings the consumer level with the cache, handed out before the ring.
    catch_up: VecDeque<Notification<K>>,
    /// The buffer overflowed: every push is dropped until the consumer has caught up.
    behind: bool,
    resyncs: u64,
}

impl<K> Resync<K> {
    fn record(&mut self, notification: &Notification<K>) {
        let Ok(key) = (self.key_func)(notification.object()) else {
            return;
        };
        match notification {
            Notification::Add { obj, .. } | Notification::Update { new: obj, .. } => {
                self.seen.insert(key.into(), Arc::clone(obj));
            }
            Notification::Delete(_) => {
                self.seen.remove(key.as_str());
            }
        }
    }

    /// Queues the difference between what the consumer was handed and `cached`.
    fn level_with(&mut self, cached: Vec<Arc<K>>) {
        let mut present = HashSet::with_capacity(cached.len());
        for object in cached {
            let Ok(key) = (self.key_func)(&object) else {
                continue;
            };
            match self.seen.get(key.as_str()) {
                None => self.catch_up.push_back(Notification::add(object)),
                Some(last) if !Arc::ptr_eq(last, &object) => self
                    .catch_up
                    .push_back(Notification::update(Arc::clone(last), object)),
                Some(_) => {}
            }
            present.insert(key);
        }
        for (key, last) in &self.seen {
            if !present.contains(&**key) {
                self.catch_up
                    .push_back(Notification::Delete(ObjectOrTombstone::Tombstone(
                        DeletedFinalStateUnknown::new(key.to_string(), Arc::clone(last)),
                    )));
            }
        }
        self.behind = false;
        self.resyncs += 1;
    }
}

struct Coalescer<K> {
    key_func: KeyFunc<K>,
    /// The sequence number of each key's newest pending notification.
    newest: HashMap<Box<str>, u64>,
    /// The sequence number of `items.front()`.
    head: u64,
}

/// What merging an incoming notification into a pending one for the same key gives.
enum Merge<K> {
    /// One notification that stands for both.
    Into(Notification<K>),
    /// Nothing: an add followed by its delete. Whether the add was an initial-list one.
    Cancel { initial: bool },
    /// They cannot merge (whatever follows a delete): both stay.
    Apart(Notification<K>, Notification<K>),
}

fn merge<K>(pending: Notification<K>, incoming: Notification<K>) -> Merge<K> {
    match (pending, incoming) {
        (Notification::Add { kind, .. }, Notification::Update { new, .. }) => {
            Merge::Into(Notification::Add { obj: new, kind })
        }
        (Notification::Add { kind, .. }, Notification::Delete(_)) => Merge::Cancel {
            initial: kind == AddKind::InitialList,
        },
        (Notification::Update { old, .. }, Notification::Update { new, .. }) => {
            Merge::Into(Notification::Update { old, new })
        }
        (Notification::Update { .. }, Notification::Delete(last)) => {
            Merge::Into(Notification::Delete(last))
        }
        (pending, incoming) => Merge::Apart(pending, incoming),
    }
}

impl<K> RingBuffer<K> {
    /// A buffer under `policy`; `key_func` is used by [`BufferPolicy::CoalesceByKey`] and
    /// [`Overflow::Resync`], `snapshot` by the latter.
    pub(crate) fn new(
        policy: BufferPolicy,
        key_func: Option<KeyFunc<K>>,
        snapshot: Option<CacheSnapshot<K>>,
    ) -> Self {
        let initial = match policy {
            BufferPolicy::Bounded { capacity, .. } => capacity.get().min(INITIAL_CAPACITY),
            BufferPolicy::Unbounded | BufferPolicy::CoalesceByKey => INITIAL_CAPACITY,
        };
        let coalescer = match policy {
            BufferPolicy::CoalesceByKey => key_func.clone().map(|key_func| Coalescer {
                key_func,
                newest: HashMap::new(),
                head: 0,
            }),
            BufferPolicy::Unbounded | BufferPolicy::Bounded { .. } => None,
        };
        let resync = match (policy, key_func, snapshot) {
            (
                BufferPolicy::Bounded {
                    overflow: Overflow::Resync,
                    ..
                },
                Some(key_func),
                Some(snapshot),
            ) => Some(Resync {
                snapshot,
                key_func,
                seen: HashMap::new(),
                catch_up: VecDeque::new(),
                behind: false,
                resyncs: 0,
            }),
            _ => None,
        };
        Self {
            items: VecDeque::with_capacity(initial),
            live: 0,
            policy,
            coalescer,
            resync,
        }
    }

    pub(crate) fn push(&mut self, notification: Notification<K>, now: Instant) -> Pushed<K> {
        if self.resync.as_ref().is_some_and(|resync| resync.behind) {
            return Pushed::Dropped(notification);
        }
        if self.coalescer.is_some() {
            return self.push_coalescing(notification, now);
        }
        let mut outcome = Pushed::Queued;
        if let BufferPolicy::Bounded { capacity, overflow } = self.policy
            && self.live >= capacity.get()
        {
            match overflow {
                // The listener has waited for room already; the deadline passed.
                Overflow::DropNewest | Overflow::Block(_) => {
                    return Pushed::Dropped(notification);
                }
                Overflow::Resync => {
                    if let Some(resync) = &mut self.resync {
                        resync.behind = true;
                    }
                    return Pushed::Dropped(notification);
                }
                Overflow::DropOldest => {
                    if let Some((oldest, _)) = self.pop() {
                        outcome = Pushed::Dropped(oldest);
                    }
                }
            }
        }
        self.append(notification, now, None);
        outcome
    }

    fn append(&mut self, notification: Notification<K>, queued_at: Instant, key: Option<Box<str>>) {
        self.items.push_back(Slot {
            notification: Some(notification),
            queued_at,
            key,
        });
        self.live += 1;
    }

    fn push_coalescing(&mut self, notification: Notification<K>, now: Instant) -> Pushed<K> {
        let key = self.coalescer.as_ref().and_then(|coalescer| {
            (coalescer.key_func)(notification.object())
                .ok()
                .map(Box::<str>::from)
        });
        let Some(key) = key else {
            // Without a key there is nothing to merge with; queued as it is, it is still right.
            self.append(notification, now, None);
            return Pushed::Queued;
        };
        let Some((head, seq)) = self
            .coalescer
            .as_ref()
            .and_then(|coalescer| Some((coalescer.head, *coalescer.newest.get(&key)?)))
        else {
            self.remember(key.clone());
            self.append(notification, now, Some(key));
            return Pushed::Queued;
        };
        let index = usize::try_from(seq - head).unwrap_or(usize::MAX);
        let Some(pending) = self
            .items
            .get_mut(index)
            .and_then(|slot| slot.notification.take())
        else {
            // Unreachable while `newest` names only pending slots; queue rather than lose it.
            self.forget(&key);
            self.append(notification, now, None);
            return Pushed::Queued;
        };
        match merge(pending, notification) {
            Merge::Into(merged) => {
                self.items[index].notification = Some(merged);
                Pushed::Coalesced {
                    vanished: 1,
                    cancelled_initial: false,
                }
            }
            Merge::Cancel { initial } => {
                self.forget(&key);
                self.live -= 1;
                self.trim_front();
                Pushed::Coalesced {
                    vanished: 2,
                    cancelled_initial: initial,
                }
            }
            Merge::Apart(pending, incoming) => {
                self.items[index].notification = Some(pending);
                self.remember(key.clone());
                self.append(incoming, now, Some(key));
                Pushed::Queued
            }
        }
    }

    /// Records that the next slot appended holds `key`'s newest pending notification.
    fn remember(&mut self, key: Box<str>) {
        let len = self.items.len() as u64;
        if let Some(coalescer) = &mut self.coalescer {
            coalescer.newest.insert(key, coalescer.head + len);
        }
    }

    fn forget(&mut self, key: &str) {
        if let Some(coalescer) = &mut self.coalescer {
            coalescer.newest.remove(key);
        }
    }

    /// The oldest pending notification and when it was queued.
    pub(crate) fn pop(&mut self) -> Option<(Notification<K>, Instant)> {
        let Some(resync) = &mut self.resync else {
            return self.pop_ring();
        };
        if let Some(next) = resync.catch_up.pop_front() {
            resync.record(&next);
            return Some((next, Instant::now()));
        }
        let popped = self.pop_ring()?;
        if let Some(resync) = &mut self.resync {
            resync.record(&popped.0);
        }
        Some(popped)
    }

    /// The snapshot to catch the consumer up with, when the buffer overflowed under
    /// [`Overflow::Resync`] and the consumer has taken everything queued before.
    pub(crate) fn needs_catch_up(&self) -> Option<CacheSnapshot<K>> {
        let resync = self.resync.as_ref()?;
        (resync.behind && self.live == 0 && resync.catch_up.is_empty())
            .then(|| Arc::clone(&resync.snapshot))
    }

    /// Queues what brings the consumer level with `cached` and takes pushes again.
    pub(crate) fn catch_up(&mut self, cached: Vec<Arc<K>>) {
        if let Some(resync) = &mut self.resync
            && resync.behind
        {
            resync.level_with(cached);
        }
    }

    /// How many times the consumer was caught up after an overflow.
    pub(crate) fn resyncs(&self) -> u64 {
        self.resync.as_ref().map_or(0, |resync| resync.resyncs)
    }

    fn pop_ring(&mut self) -> Option<(Notification<K>, Instant)> {
        let popped = loop {
            let slot = self.pop_slot()?;
            if let Some(notification) = slot.notification {
                self.live -= 1;
                break (notification, slot.queued_at);
            }
        };
        self.trim_front();
        self.shrink_if_sparse();
        Some(popped)
    }

    fn pop_slot(&mut self) -> Option<Slot<K>> {
        let slot = self.items.pop_front()?;
        if let Some(coalescer) = &mut self.coalescer {
            let seq = coalescer.head;
            coalescer.head += 1;
            if let Some(key) = &slot.key
                && coalescer.newest.get(key) == Some(&seq)
            {
                coalescer.newest.remove(key);
            }
        }
        Some(slot)
    }

    /// Drops the holes at the front, so the front is always a pending notification.
    fn trim_front(&mut self) {
        while self
            .items
            .front()
            .is_some_and(|slot| slot.notification.is_none())
        {
            self.pop_slot();
        }
    }

    /// When the oldest pending notification was queued.
    pub(crate) fn oldest_queued_at(&self) -> Option<Instant> {
        self.items.front().map(|slot| slot.queued_at)
    }

    /// Gives memory back after a backlog drains. Shrinking only once the ring is a quarter
    /// full, and then to half, keeps the copying amortised O(1) per notification.
    fn shrink_if_sparse(&mut self) {
        let capacity = self.items.capacity();
        if capacity > NORMAL_CAPACITY && self.items.len() <= capacity / 4 {
            self.items
                .shrink_to((self.items.len() * 2).max(NORMAL_CAPACITY));
        }
        if let Some(coalescer) = &mut self.coalescer
            && coalescer.newest.capacity() > NORMAL_CAPACITY
            && coalescer.newest.len() <= coalescer.newest.capacity() / 4
        {
            coalescer
                .newest
                .shrink_to((coalescer.newest.len() * 2).max(NORMAL_CAPACITY));
        }
    }

    /// Empties the buffer, handing back what was pending.
    pub(crate) fn drain_all(&mut self) -> VecDeque<Slot<K>> {
        if let Some(coalescer) = &mut self.coalescer {
            coalescer.head += self.items.len() as u64;
            coalescer.newest.clear();
        }
        if let Some(resync) = &mut self.resync {
            resync.catch_up.clear();
        }
        self.live = 0;
        std::mem::take(&mut self.items)
    }

    /// Pending notifications.
    pub(crate) fn len(&self) -> usize {
        self.live
            + self
                .resync
                .as_ref()
                .map_or(0, |resync| resync.catch_up.len())
    }

    pub(crate) fn capacity(&self) -> usize {
        self.items.capacity()
    }

    /// Whether the buffer holds at most a set number of notifications.
    pub(crate) fn is_bounded(&self) -> bool {
        matches!(self.policy, BufferPolicy::Bounded { .. })
    }

    /// How long a push into a full buffer may wait for room: the deadline of
    /// [`Overflow::Block`], when the buffer is full.
    pub(crate) fn must_wait(&self) -> Option<std::time::Duration> {
        match self.policy {
            BufferPolicy::Bounded {
                capacity,
                overflow: Overflow::Block(deadline),
            } if self.live >= capacity.get() => Some(deadline),
            _ => None,
        }
    }
}

impl<K> std::fmt::Debug for RingBuffer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingBuffer")
            .field("pending", &self.live)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
