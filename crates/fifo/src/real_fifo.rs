//! [`RealFifo`]: every notification, in the order it arrived.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    fmt,
    sync::Arc,
};

use foldhash::fast::RandomState;
use kinformer_store::{
    DeletedFinalStateUnknown, Incoming, KeyFunc, ListInParts, Object, ObjectOrTombstone, Store,
    meta_namespace_key_func,
};
use parking_lot::{Mutex, MutexGuard};
use parts::{PartsIntoRealFifo, RelistIntoRealFifo};

use crate::{
    BoxFuture, Delta, DeltaType, Deltas, Error, KnownObjects, ListEnd, Popped, ProcessFn, Queue,
    RelistEnd, RelistPart, ReplacedAll, Result, Transformer,
    queue::{Waker, add_kind, transformed},
};

mod parts;

type StoreResult<T> = kinformer_store::Result<T>;

/// client-go's batch limit: at most this many deltas per batched pop.
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// How to build a [`RealFifo`].
///
/// [`RealFifoOptions::new`] gives client-go's `NewRealFIFOWithOptions` shape without atomic
/// events: known objects are then required. [`RealFifoOptions::atomic`] gives the shape today's
/// client-go informers use by default (`AtomicFIFO` and `UnlockWhileProcessingFIFO`, both on
/// since 1.36): a replace is one [`Popped::ReplacedAll`], a resync one [`Popped::SyncAll`], a
/// bookmark one [`Popped::Bookmark`], no known objects, and the lock is released while a pop is
/// processed.
#[doc(alias = "RealFIFOOptions")]
pub struct RealFifoOptions<K> {
    key_func: KeyFunc<K>,
    known_objects: Option<KnownObjects<K>>,
    transformer: Option<Transformer<K>>,
    atomic_events: bool,
    unlock_while_processing: bool,
    emit_bookmarks: bool,
    batch_size: usize,
    list_backlog: Option<usize>,
    relist_in_parts: bool,
}

impl<K: Object> RealFifoOptions<K> {
    /// Per-object events, consulting `known_objects` (the consumer's cache) on replace and
    /// resync.
    pub fn new(known_objects: KnownObjects<K>) -> Self {
        Self {
            key_func: Arc::new(meta_namespace_key_func::<K>),
            known_objects: Some(known_objects),
            transformer: None,
            atomic_events: false,
            unlock_while_processing: false,
            emit_bookmarks: false,
            batch_size: DEFAULT_BATCH_SIZE,
            list_backlog: None,
            relist_in_parts: false,
        }
    }

    /// Atomic events and unlocking while processing: today's client-go informer default.
    pub fn atomic() -> Self {
        Self {
            key_func: Arc::new(meta_namespace_key_func::<K>),
            known_objects: None,
            transformer: None,
            atomic_events: true,
            unlock_while_processing: true,
            emit_bookmarks: true,
            batch_size: DEFAULT_BATCH_SIZE,
            list_backlog: None,
            relist_in_parts: false,
        }
    }
}

impl<K> RealFifoOptions<K> {
    /// Keys objects with `key_func` instead of `namespace/name`.
    #[must_use]
    pub fn key_func(mut self, key_func: KeyFunc<K>) -> Self {
        self.key_func = key_func;
        self
    }

    /// Applies `transformer` to every object on its way in.
    #[must_use]
    pub fn transformer(mut self, transformer: Transformer<K>) -> Self {
        self.transformer = Some(transformer);
        self
    }

    /// Whether to release the queue's lock while a pop's process function runs (atomic events
    /// only). Pops must then come from a single consumer.
    #[must_use]
    pub fn unlock_while_processing(mut self, unlock: bool) -> Self {
        self.unlock_while_processing = unlock;
        self
    }

    /// Whether [`Queue::bookmark`] queues a [`Popped::Bookmark`] (atomic events only; on by
    /// default with them).
    #[must_use]
    pub fn emit_bookmarks(mut self, emit: bool) -> Self {
        self.emit_bookmarks = emit;
        self
    }

    /// The most deltas one batched pop hands over ([`DEFAULT_BATCH_SIZE`] by default).
    #[must_use]
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Bounds an initial list taken in parts: before it takes the next part, it waits until at
    /// most `items` items are queued ([`ListInParts::ready`]). Unbounded by default: only a
    /// consumer that pops while the list arrives, as an informer does, may bound it; one that
    /// pops only after the list would wait forever.
    #[must_use]
    pub fn list_backlog(mut self, items: usize) -> Self {
        self.list_backlog = Some(items);
        self
    }

    /// Takes a relist in parts too (atomic events only): each part is popped as a
    /// [`Popped::RelistPart`] and the end as a [`Popped::RelistEnd`], instead of the whole
    /// list as one [`Popped::ReplacedAll`]. The consumer stages the parts and applies them
    /// whole at the end ([`Indexer::stage_replace`](kinformer_store::Indexer::stage_replace)).
    /// With a [`list_backlog`](Self::list_backlog), which counts the objects the queued parts
    /// hold, the queue never holds the whole list.
    #[must_use]
    pub fn relist_in_parts(mut self, in_parts: bool) -> Self {
        self.relist_in_parts = in_parts;
        self
    }
}

impl<K> fmt::Debug for RealFifoOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealFifoOptions")
            .field("known_objects", &self.known_objects.is_some())
            .field("transformer", &self.transformer.is_some())
            .field("atomic_events", &self.atomic_events)
            .field("unlock_while_processing", &self.unlock_while_processing)
            .field("relist_in_parts", &self.relist_in_parts)
            .field("emit_bookmarks", &self.emit_bookmarks)
            .field("batch_size", &self.batch_size)
            .field("list_backlog", &self.list_backlog)
            .finish_non_exhaustive()
    }
}

/// client-go's RealFIFO: every notification from the reflector is popped in the order it
/// arrived, one delta per pop (or a batch of deltas for distinct keys), with no per-key
/// accumulation. Deleted objects are delivered too.
///
/// Without atomic events, [`replace`](Store::replace) queues a tombstoned deletion for every
/// queued or known key the list no longer has, then `Replaced` for every listed object;
/// [`resync`](Store::resync) queues `Sync` for every known object whose key has nothing queued.
/// With atomic events they queue a single [`Popped::ReplacedAll`] or [`Popped::SyncAll`].
///
/// client-go ignores a requeue request from a RealFIFO process function; here the popped
/// deltas go back to the head of the queue, so in-order delivery is kept.
#[doc(alias = "RealFIFO")]
pub struct RealFifo<K> {
    state: Mutex<State<K>>,
    waker: Waker,
    key_func: KeyFunc<K>,
    known_objects: Option<KnownObjects<K>>,
    transformer: Option<Transformer<K>>,
    atomic_events: bool,
    unlock_while_processing: bool,
    emit_bookmarks: bool,
    batch_size: usize,
    list_backlog: Option<usize>,
    relist_in_parts: bool,
    /// Wakes a list waiting for the consumer to pop ([`RealFifoOptions::list_backlog`]).
    room: Waker,
}

enum Entry<K> {
    Delta { key: String, delta: Delta<K> },
    ReplacedAll(ReplacedAll<K>),
    ListEnd(ListEnd),
    RelistPart(RelistPart<K>),
    RelistEnd(RelistEnd),
    SyncAll,
    Bookmark(String),
}

impl<K> Entry<K> {
    fn key(&self) -> Option<&str> {
        match self {
            Self::Delta { key, .. } => Some(key),
            Self::ReplacedAll(_)
            | Self::ListEnd(_)
            | Self::RelistPart(_)
            | Self::RelistEnd(_)
            | Self::SyncAll
            | Self::Bookmark(_) => None,
        }
    }
}

struct State<K> {
    items: VecDeque<Entry<K>>,
    populated: bool,
    initial_population_count: usize,
    closed: bool,
    /// How many objects the queued relist parts hold, for the list backlog.
    relisted: usize,
    /// The number of the last relist taken in parts.
    relists: u64,
}

impl<K> State<K> {
    fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }

    fn push(&mut self, key: String, kind: DeltaType, object: ObjectOrTombstone<K>) {
        self.items.push_back(Entry::Delta {
            key,
            delta: Delta {
                kind,
                object,
                encoded: None,
            },
        });
    }

    /// The deltas queued for `key`, oldest first.
    fn deltas_for(&self, key: &str) -> Option<Deltas<K>> {
        let deltas: Deltas<K> = self
            .items
            .iter()
            .filter_map(|entry| match entry {
                Entry::Delta { key: queued, delta } if queued == key => Some(delta.clone()),
                _ => None,
            })
            .collect();
        (!deltas.is_empty()).then_some(deltas)
    }
}

impl<K> fmt::Debug for RealFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("RealFifo")
            .field("queued", &state.items.len())
            .field("populated", &state.populated)
            .field("initial_population_count", &state.initial_population_count)
            .field("closed", &state.closed)
            .field("atomic_events", &self.atomic_events)
            .field("unlock_while_processing", &self.unlock_while_processing)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl<K> RealFifo<K> {
    /// A RealFIFO built from `options`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] where client-go's constructor panics: known objects given with
    /// atomic events or missing without them, unlocking while processing without atomic
    /// events; and for a zero batch size.
    #[doc(alias = "NewRealFIFOWithOptions")]
    #[doc(alias = "NewRealFIFO")]
    pub fn new(options: RealFifoOptions<K>) -> Result<Self> {
        let invalid = |reason| Err(Error::InvalidOptions { reason });
        match (options.atomic_events, options.known_objects.is_some()) {
            (true, true) => return invalid("known objects must not be given with atomic events"),
            (false, false) => return invalid("known objects are required without atomic events"),
            _ => {}
        }
        if options.unlock_while_processing && !options.atomic_events {
            return invalid("unlocking while processing requires atomic events");
        }
        if options.batch_size == 0 {
            return invalid("the batch size must be at least 1");
        }
        Ok(Self {
            state: Mutex::new(State {
                items: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                closed: false,
                relisted: 0,
                relists: 0,
            }),
            waker: Waker::default(),
            key_func: options.key_func,
            known_objects: options.known_objects,
            transformer: options.transformer,
            atomic_events: options.atomic_events,
            unlock_while_processing: options.unlock_while_processing,
            emit_bookmarks: options.emit_bookmarks && options.atomic_events,
            batch_size: options.batch_size,
            list_backlog: options.list_backlog,
            relist_in_parts: options.relist_in_parts && options.atomic_events,
            room: Waker::default(),
        })
    }

    /// The key `obj` is queued under.
    ///
    /// # Errors
    ///
    /// When the key func refuses the object.
    #[doc(alias = "KeyOf")]
    pub fn key_of(&self, obj: &K) -> StoreResult<String> {
        (self.key_func)(obj)
    }

    /// Whether replace and resync queue one atomic item each.
    pub fn emits_atomic_events(&self) -> bool {
        self.atomic_events
    }

    /// The transformer objects go through on their way in.
    pub fn transformer(&self) -> Option<&Transformer<K>> {
        self.transformer.as_ref()
    }

    fn transform(&self, obj: Arc<K>) -> Arc<K> {
        transformed(self.transformer.as_ref(), obj.into())
            .into_parts()
            .0
    }

    fn key_of_delta(&self, delta: &Delta<K>) -> StoreResult<String> {
        match &delta.object {
            ObjectOrTombstone::Tombstone(tombstone) => Ok(tombstone.key.clone()),
            ObjectOrTombstone::Object(obj) => self.key_of(obj),
        }
    }

    /// Queues a change; the bytes `obj` arrived in go with it unless a transformer changes
    /// the object.
    fn queue_change(&self, kind: DeltaType, obj: Incoming<K>) -> StoreResult<()> {
        let key = self.key_of(obj.object())?;
        let obj = transformed(self.transformer.as_ref(), obj);
        {
            let mut state = self.state.lock();
            state.populated = true;
            state.items.push_back(Entry::Delta {
                key,
                delta: Delta::arrived(kind, obj),
            });
        }
        self.waker.wake_one();
        Ok(())
    }

    /// Takes the next item (or batch) off the head of the queue.
    fn take(&self, state: &mut State<K>, batched: bool) -> Popped<K> {
        let take = if batched { self.batch_len(state) } else { 1 };
        if take == 1 {
            return match state.items.pop_front() {
                Some(Entry::Delta { delta, .. }) => Popped::Deltas(Deltas::one(delta)),
                Some(Entry::ReplacedAll(all)) => Popped::ReplacedAll(all),
                Some(Entry::ListEnd(end)) => Popped::ListEnd(end),
                Some(Entry::RelistPart(part)) => {
                    state.relisted -= part.objects.len();
                    Popped::RelistPart(part)
                }
                Some(Entry::RelistEnd(end)) => Popped::RelistEnd(end),
                Some(Entry::Bookmark(resource_version)) => Popped::Bookmark { resource_version },
                Some(Entry::SyncAll) | None => Popped::SyncAll,
            };
        }
        Popped::Batch(
            state
                .items
                .drain(..take)
                .filter_map(|entry| match entry {
                    Entry::Delta { delta, .. } => Some(delta),
                    Entry::ReplacedAll(_)
                    | Entry::ListEnd(_)
                    | Entry::RelistPart(_)
                    | Entry::RelistEnd(_)
                    | Entry::SyncAll
                    | Entry::Bookmark(_) => None,
                })
                .collect(),
        )
    }

    /// How many head items one batch takes: consecutive deltas for distinct keys, never past
    /// the initial population, never an atomic item unless it comes first (alone).
    fn batch_len(&self, state: &State<K>) -> usize {
        let mut limit = self.batch_size.min(state.items.len());
        if state.initial_population_count > 0 {
            limit = limit.min(state.initial_population_count);
        }
        let mut seen: HashSet<&str, RandomState> =
            HashSet::with_capacity_and_hasher(limit, RandomState::default());
        let mut take = 0;
        for entry in state.items.iter().take(limit) {
            match entry.key() {
                Some(key) if seen.insert(key) => take += 1,
                Some(_) => break,
                None => {
                    take = take.max(1);
                    break;
                }
            }
        }
        take.max(1)
    }

    fn try_pop_locked(
        &self,
        process: &mut ProcessFn<'_, K>,
        batched: bool,
    ) -> Option<Result<Popped<K>>> {
        let mut state = self.state.lock();
        if state.items.is_empty() {
            return state.closed.then_some(Err(Error::Closed));
        }
        let kind = add_kind(state.has_synced());
        let popped = self.take(&mut state, batched);
        let consumed = popped.queue_items();
        let unlock = self.unlock_while_processing && state.items.len() < self.batch_size * 2;
        let outcome = if unlock {
            MutexGuard::unlocked(&mut state, || process(&popped, kind))
        } else {
            process(&popped, kind)
        };
        if outcome.requeues() {
            self.requeue_front(&mut state, &popped);
            return Some(outcome.into_result(popped));
        }
        let outcome = outcome.into_result(popped);
        // Counted only once processing is over, so has_synced never reports true while the
        // last initial item is still being processed.
        state.initial_population_count = state.initial_population_count.saturating_sub(consumed);
        let more = !state.items.is_empty();
        drop(state);
        if more {
            self.waker.wake_one();
        }
        self.room.wake_all();
        Some(outcome)
    }

    /// Puts a popped item back at the head, keeping delivery order.
    fn requeue_front(&self, state: &mut State<K>, popped: &Popped<K>) {
        match popped {
            Popped::Deltas(deltas) => {
                for delta in deltas.iter().rev() {
                    self.requeue_delta(state, delta);
                }
            }
            Popped::Batch(batch) => {
                for delta in batch.iter().rev() {
                    self.requeue_delta(state, delta);
                }
            }
            Popped::ReplacedAll(all) => state.items.push_front(Entry::ReplacedAll(all.clone())),
            Popped::ListEnd(end) => state.items.push_front(Entry::ListEnd(end.clone())),
            Popped::RelistPart(part) => {
                state.relisted += part.objects.len();
                state.items.push_front(Entry::RelistPart(part.clone()));
            }
            Popped::RelistEnd(end) => state.items.push_front(Entry::RelistEnd(end.clone())),
            Popped::SyncAll => state.items.push_front(Entry::SyncAll),
            Popped::Bookmark { resource_version } => {
                state
                    .items
                    .push_front(Entry::Bookmark(resource_version.clone()));
            }
        }
    }

    fn requeue_delta(&self, state: &mut State<K>, delta: &Delta<K>) {
        match self.key_of_delta(delta) {
            Ok(key) => state.items.push_front(Entry::Delta {
                key,
                delta: delta.clone(),
            }),
            Err(error) => tracing::error!(%error, "cannot requeue a delta whose object has no key"),
        }
    }

    fn reconcile_replacement(
        &self,
        state: &mut State<K>,
        keyed: Vec<(String, Arc<K>)>,
    ) -> StoreResult<()> {
        let listed: HashSet<&str, RandomState> =
            keyed.iter().map(|(key, _)| key.as_str()).collect();

        // The newest queued delta of every queued key, keys in first-queued order.
        let mut newest: HashMap<&str, &Delta<K>, RandomState> = HashMap::default();
        let mut queued_keys = Vec::new();
        for entry in &state.items {
            if let Entry::Delta { key, delta } = entry
                && newest.insert(key.as_str(), delta).is_none()
            {
                queued_keys.push(key.as_str());
            }
        }

        let mut deletions: Vec<DeletedFinalStateUnknown<K>> = Vec::new();
        for key in queued_keys {
            if listed.contains(key) {
                continue;
            }
            let Some(delta) = newest.get(key) else {
                continue;
            };
            // A queued deletion already says everything a synthetic one would.
            if delta.kind == DeltaType::Deleted {
                continue;
            }
            deletions.push(DeletedFinalStateUnknown::new(
                key.to_owned(),
                Arc::clone(delta.object()),
            ));
        }
        if let Some(known) = &self.known_objects {
            for key in known.list_keys() {
                if listed.contains(key.as_str()) || newest.contains_key(key.as_str()) {
                    continue;
                }
                let Some(obj) = known.get_by_key(&key) else {
                    tracing::debug!(%key, "known key vanished during replace; no tombstone queued");
                    continue;
                };
                deletions.push(DeletedFinalStateUnknown::new(key, obj));
            }
        }
        drop(newest);
        drop(listed);

        for tombstone in deletions {
            let key = tombstone.key.clone();
            state.push(
                key,
                DeltaType::Deleted,
                ObjectOrTombstone::Tombstone(tombstone),
            );
        }
        for (key, obj) in keyed {
            state.push(key, DeltaType::Replaced, ObjectOrTombstone::Object(obj));
        }
        Ok(())
    }
}

impl<K: Send + Sync + 'static> Queue<K> for RealFifo<K> {
    fn list(&self) -> Vec<Deltas<K>> {
        let state = self.state.lock();
        let mut order: Vec<&str> = Vec::new();
        let mut grouped: HashMap<&str, Deltas<K>, RandomState> = HashMap::default();
        for entry in &state.items {
            if let Entry::Delta { key, delta } = entry {
                grouped
                    .entry(key.as_str())
                    .or_insert_with(|| {
                        order.push(key.as_str());
                        Deltas::new()
                    })
                    .push(delta.clone());
            }
        }
        order
            .into_iter()
            .filter_map(|key| grouped.remove(key))
            .collect()
    }

    fn list_keys(&self) -> Vec<String> {
        let state = self.state.lock();
        let mut seen: HashSet<&str, RandomState> = HashSet::default();
        state
            .items
            .iter()
            .filter_map(Entry::key)
            .filter(|key| seen.insert(key))
            .map(str::to_owned)
            .collect()
    }

    fn get(&self, obj: &K) -> StoreResult<Option<Deltas<K>>> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.state.lock().deltas_for(key)
    }

    fn pop<'a>(&'a self, process: &'a mut ProcessFn<'_, K>) -> BoxFuture<'a, Result<Popped<K>>> {
        Box::pin(
            self.waker
                .wait_until(move || self.try_pop_locked(process, false)),
        )
    }

    fn pop_batch<'a>(
        &'a self,
        process: &'a mut ProcessFn<'_, K>,
    ) -> BoxFuture<'a, Result<Popped<K>>> {
        Box::pin(
            self.waker
                .wait_until(move || self.try_pop_locked(process, true)),
        )
    }

    fn try_pop(&self, process: &mut ProcessFn<'_, K>) -> Result<Option<Popped<K>>> {
        self.try_pop_locked(process, false).transpose()
    }

    fn add_if_not_present(&self, deltas: Deltas<K>) -> Result<()> {
        let Some(newest) = deltas.newest() else {
            return Ok(());
        };
        let key = self.key_of_delta(newest)?;
        {
            let mut state = self.state.lock();
            state.populated = true;
            if state
                .items
                .iter()
                .any(|entry| entry.key() == Some(key.as_str()))
            {
                return Ok(());
            }
            for delta in deltas {
                state.items.push_back(Entry::Delta {
                    key: key.clone(),
                    delta,
                });
            }
        }
        self.waker.wake_one();
        Ok(())
    }

    fn bookmark(&self, resource_version: &str) -> Result<()> {
        if !self.emit_bookmarks {
            return Ok(());
        }
        self.state
            .lock()
            .items
            .push_back(Entry::Bookmark(resource_version.to_owned()));
        self.waker.wake_one();
        Ok(())
    }

    fn has_synced(&self) -> bool {
        self.state.lock().has_synced()
    }

    fn close(&self) {
        self.state.lock().closed = true;
        self.waker.wake_all();
        self.room.wake_all();
    }

    fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    fn len(&self) -> usize {
        self.state.lock().items.len()
    }
}

impl<K: Send + Sync + 'static> Store<K> for RealFifo<K> {
    fn add(&self, obj: Incoming<K>) -> StoreResult<()> {
        self.queue_change(DeltaType::Added, obj)
    }

    fn update(&self, obj: Incoming<K>) -> StoreResult<()> {
        self.queue_change(DeltaType::Updated, obj)
    }

    fn delete(&self, obj: Arc<K>) -> StoreResult<()> {
        self.queue_change(DeltaType::Deleted, obj.into())
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> StoreResult<()> {
        // Key and transform outside the lock: a bad key leaves the queue untouched.
        let keyed = list
            .into_iter()
            .map(|obj| Ok((self.key_of(&obj)?, self.transform(obj))))
            .collect::<StoreResult<Vec<_>>>()?;
        {
            let mut state = self.state.lock();
            if self.atomic_events {
                state.items.push_back(Entry::ReplacedAll(ReplacedAll {
                    resource_version: resource_version.to_owned(),
                    objects: keyed.into_iter().map(|(_, obj)| obj).collect(),
                }));
            } else {
                self.reconcile_replacement(&mut state, keyed)?;
            }
            if !state.populated {
                state.populated = true;
                state.initial_population_count = state.items.len();
            }
        }
        self.waker.wake_all();
        Ok(())
    }

    /// With atomic events, the initial list is taken in parts: nothing reads the consumer's
    /// store as whole before it has synced. A relist stays one atomic item, unless the queue
    /// takes relists in parts ([`RealFifoOptions::relist_in_parts`]).
    fn replace_in_parts(&self) -> Option<Box<dyn ListInParts<K> + '_>> {
        if !self.atomic_events {
            return None;
        }
        {
            let mut state = self.state.lock();
            if state.populated {
                if !self.relist_in_parts {
                    return None;
                }
                state.relists += 1;
                return Some(Box::new(RelistIntoRealFifo {
                    fifo: self,
                    relist: state.relists,
                    finished: false,
                }));
            }
        }
        Some(Box::new(PartsIntoRealFifo {
            fifo: self,
            listed: HashSet::default(),
        }))
    }

    fn resync(&self) -> StoreResult<()> {
        {
            let mut state = self.state.lock();
            if self.atomic_events {
                state.items.push_back(Entry::SyncAll);
            } else {
                let Some(known) = &self.known_objects else {
                    return Ok(());
                };
                let queued: HashSet<String, RandomState> = state
                    .items
                    .iter()
                    .filter_map(Entry::key)
                    .map(str::to_owned)
                    .collect();
                for key in known.list_keys() {
                    // A queued change is newer than the cache; a Sync of the cached state
                    // would overtake it.
                    if queued.contains(&key) {
                        continue;
                    }
                    let Some(obj) = known.get_by_key(&key) else {
                        tracing::debug!(%key, "known key vanished during resync; not queued");
                        continue;
                    };
                    state.push(key, DeltaType::Sync, ObjectOrTombstone::Object(obj));
                }
            }
        }
        self.waker.wake_all();
        Ok(())
    }
}
