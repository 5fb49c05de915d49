//! [`DeltaFifo`]: per-key accumulated deltas, popped a key at a time.

use std::{
    collections::{HashSet, VecDeque},
    fmt,
    future::Future,
    hash::BuildHasher,
    pin::Pin,
    sync::Arc,
};

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use kinformer_store::{
    DeletedFinalStateUnknown, Incoming, KeyFunc, ListInParts, Object, ObjectOrTombstone, Store,
    meta_namespace_key_func,
};
use parking_lot::Mutex;

use crate::{
    BoxFuture, Delta, DeltaType, Deltas, Error, KnownObjects, Popped, ProcessFn, Queue, Result,
    Transformer,
    queue::{Waker, add_kind, keyed_part, room_for_part, transformed},
};

type StoreResult<T> = kinformer_store::Result<T>;

/// How to build a [`DeltaFifo`]; every setting is optional.
///
/// The defaults are client-go's `NewDeltaFIFOWithOptions` defaults: the `namespace/name` key
/// func, no known objects, `Sync` (not `Replaced`) for replaced objects, no transformer. An
/// informer sets known objects to its indexer and emits `Replaced`.
#[doc(alias = "DeltaFIFOOptions")]
pub struct DeltaFifoOptions<K> {
    key_func: KeyFunc<K>,
    known_objects: Option<KnownObjects<K>>,
    emit_delta_type_replaced: bool,
    transformer: Option<Transformer<K>>,
    list_backlog: Option<usize>,
}

impl<K: Object> Default for DeltaFifoOptions<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Object> DeltaFifoOptions<K> {
    /// The defaults (see the type's docs).
    pub fn new() -> Self {
        Self {
            key_func: Arc::new(meta_namespace_key_func::<K>),
            known_objects: None,
            emit_delta_type_replaced: false,
            transformer: None,
            list_backlog: None,
        }
    }
}

impl<K> DeltaFifoOptions<K> {
    /// Keys objects with `key_func` instead of `namespace/name`.
    #[must_use]
    pub fn key_func(mut self, key_func: KeyFunc<K>) -> Self {
        self.key_func = key_func;
        self
    }

    /// The consumer's cache: consulted by delete, replace and resync.
    #[must_use]
    pub fn known_objects(mut self, known_objects: KnownObjects<K>) -> Self {
        self.known_objects = Some(known_objects);
        self
    }

    /// Whether replace queues [`DeltaType::Replaced`] (true) or [`DeltaType::Sync`] (false, the
    /// default, as in client-go).
    #[must_use]
    pub fn emit_delta_type_replaced(mut self, emit: bool) -> Self {
        self.emit_delta_type_replaced = emit;
        self
    }

    /// Applies `transformer` to every object on its way in.
    #[must_use]
    pub fn transformer(mut self, transformer: Transformer<K>) -> Self {
        self.transformer = Some(transformer);
        self
    }

    /// Bounds a list taken in parts: before it takes the next part, it waits until at most
    /// `keys` keys are queued ([`ListInParts::ready`]). Unbounded by default: only a consumer
    /// that pops while the list arrives, as an informer does, may bound it; one that pops only
    /// after the list would wait forever.
    #[must_use]
    pub fn list_backlog(mut self, keys: usize) -> Self {
        self.list_backlog = Some(keys);
        self
    }
}

impl<K> fmt::Debug for DeltaFifoOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeltaFifoOptions")
            .field("known_objects", &self.known_objects.is_some())
            .field("emit_delta_type_replaced", &self.emit_delta_type_replaced)
            .field("transformer", &self.transformer.is_some())
            .field("list_backlog", &self.list_backlog)
            .finish_non_exhaustive()
    }
}

/// client-go's DeltaFIFO: a producer/consumer queue of keys, each with the deltas that happened
/// to its object since it was last popped.
///
/// - Every change appends to the key's [`Deltas`] (oldest first); the key keeps its place in
///   the queue until popped, so a consumer sees everything that happened to an object at once.
/// - Two consecutive deletions collapse into one, keeping the one with more information (a real
///   object beats a [`DeletedFinalStateUnknown`]).
/// - [`replace`](Store::replace) queues `Replaced` (or `Sync`) for every listed object and a
///   tombstoned deletion for every queued or known key the list no longer has.
/// - [`resync`](Store::resync) queues `Sync` for every known object whose key has nothing
///   queued, so a resync never overtakes a newer change.
/// - Deleting a key that is neither queued nor known does nothing.
///
/// Build one with [`DeltaFifo::new`] and [`DeltaFifoOptions`].
#[doc(alias = "DeltaFIFO")]
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    waker: Waker,
    key_func: KeyFunc<K>,
    known_objects: Option<KnownObjects<K>>,
    emit_delta_type_replaced: bool,
    transformer: Option<Transformer<K>>,
    list_backlog: Option<usize>,
    /// Wakes a list waiting for the consumer to pop ([`DeltaFifoOptions::list_backlog`]).
    room: Waker,
}

struct State<K> {
    /// Queued keys with their deltas, in the order each key was first queued since its last
    /// pop. Every slot holds at least one delta and no key appears twice.
    slots: VecDeque<Slot<K>>,
    /// Finds a key's slot: holds `(hash, seq)` for `slots[seq - head]`. Keeping the key only in
    /// its slot costs one allocation per queued key, instead of one for a map key and one for
    /// the queue; keeping the hash here lets the table grow without touching the slots.
    index: HashTable<(u64, u64)>,
    /// The sequence number of `slots[0]`; index entries below it are stale (popped keys).
    head: u64,
    /// Stale index entries, swept in one pass once they outnumber the live ones: cheaper than
    /// a random probe into the table on every pop.
    stale: usize,
    hasher: RandomState,
    /// Bumped by every replace, to mark the slots its list touched.
    generation: u64,
    /// Set by the first replace, add, update, delete or add_if_not_present.
    populated: bool,
    /// Items of the first replace still to be popped.
    initial_population_count: usize,
    closed: bool,
}

struct Slot<K> {
    key: String,
    deltas: Deltas<K>,
    /// The replace generation that last listed this key.
    listed_in: u64,
}

impl<K> State<K> {
    fn new() -> Self {
        Self {
            slots: VecDeque::new(),
            index: HashTable::new(),
            head: 0,
            stale: 0,
            hasher: RandomState::default(),
            generation: 0,
            populated: false,
            initial_population_count: 0,
            closed: false,
        }
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }

    fn find(&self, hash: u64, key: &str) -> Option<usize> {
        let (slots, head) = (&self.slots, self.head);
        self.index
            .find(hash, |&(h, seq)| {
                h == hash && seq >= head && slots[position(seq, head)].key == key
            })
            .map(|&(_, seq)| position(seq, head))
    }

    fn position_of(&self, key: &str) -> Option<usize> {
        self.find(self.hasher.hash_one(key), key)
    }

    fn get(&self, key: &str) -> Option<&Deltas<K>> {
        self.position_of(key).map(|at| &self.slots[at].deltas)
    }

    fn has_deltas(&self, key: &str) -> bool {
        self.get(key).is_some_and(|deltas| !deltas.is_empty())
    }

    /// Appends a delta to `key`, collapsing consecutive deletions; queues the key if it is new.
    /// Returns the key's slot and whether it was newly queued.
    fn push(&mut self, key: String, delta: Delta<K>) -> (usize, bool) {
        let hash = self.hasher.hash_one(key.as_str());
        if let Some(at) = self.find(hash, &key) {
            self.append_at(at, delta);
            return (at, false);
        }
        let seq = self.head + self.slots.len() as u64;
        self.slots.push_back(Slot {
            key,
            deltas: Deltas::one(delta),
            listed_in: 0,
        });
        self.index.insert_unique(hash, (hash, seq), |&(h, _)| h);
        (self.slots.len() - 1, true)
    }

    /// Makes room for `additional` more keys, so a large replace does not rehash as it goes.
    fn reserve(&mut self, additional: usize) {
        self.slots.reserve(additional);
        self.index.reserve(additional, |&(h, _)| h);
    }

    fn append_at(&mut self, at: usize, delta: Delta<K>) {
        let deltas = &mut self.slots[at].deltas;
        deltas.push(delta);
        dedup_deletions(deltas);
    }

    /// Appends a tombstone to every queued key the list of `generation` did not name: it was
    /// deleted while the watch was down, and its newest queued state is the best guess of its
    /// final state. Returns how many.
    fn tombstone_unlisted(&mut self, generation: u64) -> usize {
        let vanished: Vec<(usize, DeletedFinalStateUnknown<K>)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.listed_in != generation)
            .filter_map(|(at, slot)| {
                let newest = slot.deltas.newest()?;
                Some((
                    at,
                    DeletedFinalStateUnknown::new(slot.key.clone(), Arc::clone(newest.object())),
                ))
            })
            .collect();
        let count = vanished.len();
        for (at, tombstone) in vanished {
            self.append_at(at, tombstoned(tombstone));
        }
        count
    }

    fn pop_front(&mut self) -> Option<Slot<K>> {
        let slot = self.slots.pop_front()?;
        self.head += 1;
        self.stale += 1;
        if self.stale > self.slots.len().max(1024) {
            let head = self.head;
            self.index.retain(|&mut (_, seq)| seq >= head);
            self.stale = 0;
        }
        Some(slot)
    }
}

fn position(seq: u64, head: u64) -> usize {
    usize::try_from(seq - head).unwrap_or(usize::MAX)
}

/// When the two newest deltas are both deletions, keeps the one with more information: the
/// older one, unless it is a tombstone.
fn dedup_deletions<K>(deltas: &mut Deltas<K>) {
    let n = deltas.len();
    if n < 2 || deltas[n - 1].kind != DeltaType::Deleted || deltas[n - 2].kind != DeltaType::Deleted
    {
        return;
    }
    let Some(newer) = deltas.pop_newest() else {
        return;
    };
    if let Some(older) = deltas.newest_mut()
        && older.object.is_tombstone()
    {
        *older = newer;
    }
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("DeltaFifo")
            .field("queued_keys", &state.slots.len())
            .field("populated", &state.populated)
            .field("initial_population_count", &state.initial_population_count)
            .field("closed", &state.closed)
            .field("known_objects", &self.known_objects.is_some())
            .field("emit_delta_type_replaced", &self.emit_delta_type_replaced)
            .finish_non_exhaustive()
    }
}

impl<K: Object> Default for DeltaFifo<K> {
    fn default() -> Self {
        Self::new(DeltaFifoOptions::new())
    }
}

impl<K> DeltaFifo<K> {
    /// A DeltaFIFO built from `options`.
    #[doc(alias = "NewDeltaFIFOWithOptions")]
    #[doc(alias = "NewDeltaFIFO")]
    pub fn new(options: DeltaFifoOptions<K>) -> Self {
        Self {
            state: Mutex::new(State::new()),
            waker: Waker::default(),
            key_func: options.key_func,
            known_objects: options.known_objects,
            emit_delta_type_replaced: options.emit_delta_type_replaced,
            transformer: options.transformer,
            list_backlog: options.list_backlog,
            room: Waker::default(),
        }
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

    /// The transformer objects go through on their way in.
    pub fn transformer(&self) -> Option<&Transformer<K>> {
        self.transformer.as_ref()
    }

    fn transform(&self, obj: Arc<K>) -> Arc<K> {
        transformed(self.transformer.as_ref(), obj.into())
            .into_parts()
            .0
    }

    /// The delta type a listed object is queued with.
    fn replaced_kind(&self) -> DeltaType {
        if self.emit_delta_type_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        }
    }

    /// Wakes one waiting pop; called after the lock is released so the woken task does not
    /// run straight into it.
    fn wake_one(&self) {
        self.waker.wake_one();
    }

    /// Queues a change; the bytes `obj` arrived in go with it unless a transformer changes
    /// the object.
    fn queue_change(&self, kind: DeltaType, obj: Incoming<K>) -> StoreResult<()> {
        let key = self.key_of(obj.object())?;
        let obj = transformed(self.transformer.as_ref(), obj);
        {
            let mut state = self.state.lock();
            state.populated = true;
            state.push(key, Delta::arrived(kind, obj));
        }
        self.wake_one();
        Ok(())
    }

    fn key_of_deltas(&self, deltas: &Deltas<K>) -> StoreResult<Option<String>> {
        match deltas.newest().map(|delta| &delta.object) {
            None => Ok(None),
            Some(ObjectOrTombstone::Tombstone(tombstone)) => Ok(Some(tombstone.key.clone())),
            Some(ObjectOrTombstone::Object(obj)) => self.key_of(obj).map(Some),
        }
    }

    fn try_pop_locked(&self, process: &mut ProcessFn<'_, K>) -> Option<Result<Popped<K>>> {
        let mut state = self.state.lock();
        let Some(slot) = state.pop_front() else {
            return state.closed.then_some(Err(Error::Closed));
        };
        let kind = add_kind(state.has_synced());
        if state.initial_population_count > 0 {
            state.initial_population_count -= 1;
        }
        let Slot { key, deltas, .. } = slot;
        let popped = Popped::Deltas(deltas);
        let processed = process(&popped, kind);
        if processed.requeues() {
            state.populated = true;
            if let Popped::Deltas(deltas) = &popped
                && state.position_of(&key).is_none()
            {
                let mut deltas = deltas.clone().into_iter();
                if let Some(first) = deltas.next() {
                    let (at, _) = state.push(key, first);
                    for delta in deltas {
                        state.slots[at].deltas.push(delta);
                    }
                }
            }
        }
        let outcome = processed.into_result(popped);
        let more = !state.slots.is_empty();
        drop(state);
        if more {
            // Pass the wake-up on: a push wakes one waiter, and this pop took one item.
            self.wake_one();
        }
        self.room.wake_all();
        Some(outcome)
    }
}

impl<K: Send + Sync + 'static> Queue<K> for DeltaFifo<K> {
    fn list(&self) -> Vec<Deltas<K>> {
        let state = self.state.lock();
        state.slots.iter().map(|slot| slot.deltas.clone()).collect()
    }

    fn list_keys(&self) -> Vec<String> {
        let state = self.state.lock();
        state.slots.iter().map(|slot| slot.key.clone()).collect()
    }

    fn get(&self, obj: &K) -> StoreResult<Option<Deltas<K>>> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.state.lock().get(key).cloned()
    }

    fn pop<'a>(&'a self, process: &'a mut ProcessFn<'_, K>) -> BoxFuture<'a, Result<Popped<K>>> {
        Box::pin(self.waker.wait_until(move || self.try_pop_locked(process)))
    }

    fn try_pop(&self, process: &mut ProcessFn<'_, K>) -> Result<Option<Popped<K>>> {
        self.try_pop_locked(process).transpose()
    }

    fn add_if_not_present(&self, deltas: Deltas<K>) -> Result<()> {
        let Some(key) = self.key_of_deltas(&deltas)? else {
            return Ok(());
        };
        {
            let mut state = self.state.lock();
            state.populated = true;
            if state.position_of(&key).is_some() {
                return Ok(());
            }
            let mut deltas = deltas.into_iter();
            if let Some(first) = deltas.next() {
                let (at, _) = state.push(key, first);
                for delta in deltas {
                    state.slots[at].deltas.push(delta);
                }
            }
        }
        self.wake_one();
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
        self.state.lock().slots.len()
    }
}

impl<K: Send + Sync + 'static> Store<K> for DeltaFifo<K> {
    fn add(&self, obj: Incoming<K>) -> StoreResult<()> {
        self.queue_change(DeltaType::Added, obj)
    }

    fn update(&self, obj: Incoming<K>) -> StoreResult<()> {
        self.queue_change(DeltaType::Updated, obj)
    }

    fn delete(&self, obj: Arc<K>) -> StoreResult<()> {
        let key = self.key_of(&obj)?;
        {
            let mut state = self.state.lock();
            state.populated = true;
            let queued = state.position_of(&key).is_some();
            let known = || {
                self.known_objects
                    .as_ref()
                    .is_some_and(|known| known.get_by_key(&key).is_some())
            };
            if !queued && !known() {
                // Presumably a relist already reported this deletion; do not report it twice.
                return Ok(());
            }
            let obj = self.transform(obj);
            state.push(key, Delta::new(DeltaType::Deleted, obj));
        }
        self.wake_one();
        Ok(())
    }

    fn replace(&self, list: Vec<Arc<K>>, _resource_version: &str) -> StoreResult<()> {
        // Key and transform everything before taking the lock: a bad key leaves the queue
        // untouched, and the lock is held only for the queue work.
        let keyed = list
            .into_iter()
            .map(|obj| Ok((self.key_of(&obj)?, self.transform(obj))))
            .collect::<StoreResult<Vec<_>>>()?;
        let kind = self.replaced_kind();

        let mut state = self.state.lock();
        state.reserve(keyed.len());
        state.generation += 1;
        let generation = state.generation;
        let mut listed = 0;
        for (key, obj) in keyed {
            let (at, _) = state.push(key, Delta::new(kind, obj));
            let slot = &mut state.slots[at];
            if slot.listed_in != generation {
                slot.listed_in = generation;
                listed += 1;
            }
        }

        let mut queued_deletions = state.tombstone_unlisted(generation);

        if let Some(known) = &self.known_objects {
            // Every listed key is queued by now, so "queued" covers "listed" as well.
            for key in known.list_keys() {
                if state.has_deltas(&key) {
                    continue;
                }
                let Some(obj) = known.get_by_key(&key) else {
                    tracing::debug!(%key, "known key vanished during replace; no tombstone queued");
                    continue;
                };
                queued_deletions += 1;
                let tombstone = DeletedFinalStateUnknown::new(key.clone(), obj);
                state.push(key, tombstoned(tombstone));
            }
        }

        if !state.populated {
            state.populated = true;
            state.initial_population_count = listed + queued_deletions;
        }
        let queued = state.slots.len();
        drop(state);
        tracing::debug!(listed, queued_deletions, queued, "DeltaFIFO replace");
        if queued > 0 {
            self.waker.wake_all();
        }
        Ok(())
    }

    fn replace_in_parts(&self) -> Option<Box<dyn ListInParts<K> + '_>> {
        let generation = {
            let mut state = self.state.lock();
            state.generation += 1;
            state.generation
        };
        Some(Box::new(PartsIntoDeltaFifo {
            fifo: self,
            generation,
            listed: HashSet::default(),
        }))
    }

    fn resync(&self) -> StoreResult<()> {
        let Some(known) = &self.known_objects else {
            return Ok(());
        };
        let mut queued = false;
        {
            let mut state = self.state.lock();
            for key in known.list_keys() {
                // A queued change is newer than what the cache holds; a Sync carrying the
                // cached state would overtake it.
                if state.has_deltas(&key) {
                    continue;
                }
                let Some(obj) = known.get_by_key(&key) else {
                    tracing::debug!(%key, "known key vanished during resync; not queued");
                    continue;
                };
                queued |= state.push(key, Delta::new(DeltaType::Sync, obj)).1;
            }
        }
        if queued {
            self.waker.wake_all();
        }
        Ok(())
    }
}

/// A list queued part by part ([`Store::replace_in_parts`]): each part queues `Replaced` (or
/// `Sync`) deltas as [`replace`](Store::replace) does, and the end queues the tombstones.
struct PartsIntoDeltaFifo<'a, K> {
    fifo: &'a DeltaFifo<K>,
    /// The replace generation this list marks its queued slots with.
    generation: u64,
    /// Every key listed so far: a listed object may be popped into the known objects before
    /// the list ends, and must not be tombstoned then.
    listed: HashSet<String, RandomState>,
}

impl<K: Send + Sync + 'static> ListInParts<K> for PartsIntoDeltaFifo<'_, K> {
    fn part(&mut self, items: Vec<Incoming<K>>) -> StoreResult<()> {
        let fifo = self.fifo;
        let keyed = keyed_part(items, &fifo.key_func, fifo.transformer.as_ref())?;
        let kind = fifo.replaced_kind();
        {
            let mut state = fifo.state.lock();
            state.reserve(keyed.len());
            for (key, held, obj) in keyed {
                self.listed.insert(held);
                let (at, new) = state.push(key, Delta::arrived(kind, obj));
                state.slots[at].listed_in = self.generation;
                // Until the list ends, every queued key is one of the initial population.
                if new && !state.populated {
                    state.initial_population_count += 1;
                }
            }
        }
        fifo.waker.wake_all();
        Ok(())
    }

    fn ready(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let fifo = self.fifo;
        room_for_part(&fifo.room, fifo.list_backlog, move || {
            let state = fifo.state.lock();
            (state.slots.len(), state.closed)
        })
    }

    fn finish(self: Box<Self>, _resource_version: &str) -> StoreResult<()> {
        let fifo = self.fifo;
        let mut state = fifo.state.lock();
        let queued_deletions = state.tombstone_unlisted(self.generation);
        let mut new_slots = 0;
        if let Some(known) = &fifo.known_objects {
            for key in known.list_keys() {
                if self.listed.contains(&key) || state.has_deltas(&key) {
                    continue;
                }
                let Some(obj) = known.get_by_key(&key) else {
                    continue;
                };
                let tombstone = DeletedFinalStateUnknown::new(key.clone(), obj);
                state.push(key, tombstoned(tombstone));
                new_slots += 1;
            }
        }
        if !state.populated {
            state.populated = true;
            state.initial_population_count += new_slots;
        }
        let queued = state.slots.len();
        drop(state);
        tracing::debug!(
            listed = self.listed.len(),
            queued_deletions = queued_deletions + new_slots,
            queued,
            "DeltaFIFO replace in parts finished"
        );
        if queued > 0 {
            fifo.waker.wake_all();
        }
        Ok(())
    }
}

fn tombstoned<K>(tombstone: DeletedFinalStateUnknown<K>) -> Delta<K> {
    Delta {
        kind: DeltaType::Deleted,
        object: ObjectOrTombstone::Tombstone(tombstone),
        encoded: None,
    }
}
