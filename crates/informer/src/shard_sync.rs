//! Which shard the cache holds. An informer set to a new shard goes on holding the old one
//! until the list of the new one is applied whole; a replica that takes over a range must not
//! work on it before then. The shard of each list is recorded as its end enters the queue
//! (the sharded lister-watcher knows which shard the list was asked for), and taken off, in
//! the same order, as the applier applies that end.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use kinformer_reflector::ShardedListerWatcher;
use kinformer_store::{Incoming, ListInParts, Result as StoreResult, Shard, Store};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{WaitError, progress::finish};

/// The shards of the lists between the queue and the cache, and the shard the cache holds.
#[derive(Debug)]
pub(crate) struct ShardSync {
    /// The shard of every list whose end is queued and not yet applied, oldest first.
    queued: Mutex<VecDeque<Arc<Shard>>>,
    /// The shard of the last list applied whole; `None` before it, and after a list the cache
    /// refused. Also sent (unchanged) when the informer is moved, to wake the waits.
    cached: watch::Sender<Option<Arc<Shard>>>,
}

impl Default for ShardSync {
    fn default() -> Self {
        Self {
            queued: Mutex::default(),
            cached: watch::Sender::new(None),
        }
    }
}

impl ShardSync {
    /// The shard the cache holds whole.
    pub(crate) fn cached(&self) -> Option<Arc<Shard>> {
        self.cached.borrow().clone()
    }

    /// A list's end has been applied (`applied`) or refused for good: the cache holds its
    /// shard, or no whole shard. A no-op for an informer of no shard, which queues none.
    pub(crate) fn list_applied(&self, applied: bool) {
        let Some(shard) = self.queued.lock().pop_front() else {
            return;
        };
        self.cached.send_replace(applied.then_some(shard));
    }

    /// The informer was moved: a wait for the shard it left fails at once.
    pub(crate) fn moved(&self) {
        self.cached.send_modify(|_| {});
    }

    /// Waits until the cache holds `shard`, while `target` (the shard the informer is set to)
    /// is that shard.
    pub(crate) async fn wait_for(
        &self,
        shard: &Shard,
        target: impl Fn() -> Option<Arc<Shard>>,
        within: Duration,
        token: &CancellationToken,
        stopped: &CancellationToken,
    ) -> Result<(), WaitError> {
        let what = || format!("shard {shard}");
        let mut cached = self.cached.subscribe();
        // The outer error is the informer gone; the inner one the informer moved on.
        let held = async {
            loop {
                // Marked seen before the reads, so a change after them wakes us.
                let holds = cached.borrow_and_update().as_deref() == Some(shard);
                if target().as_deref() != Some(shard) {
                    return Ok(Err(WaitError::ShardChanged { what: what() }));
                }
                if holds {
                    return Ok(Ok(()));
                }
                cached.changed().await?;
            }
        };
        finish(held, within, token, stopped, what).await?
    }
}

/// The informer's queue as its reflector writes to it when the informer informs a shard: each
/// list's end is recorded with the shard it was listed for, just before it is queued.
pub(crate) struct MarkingStore<K> {
    pub(crate) queue: Arc<dyn Store<K>>,
    pub(crate) sharded: ShardedListerWatcher<K>,
    pub(crate) sync: Arc<ShardSync>,
}

impl<K> MarkingStore<K> {
    /// Records the end about to be queued; `queue_it` queues it, and a refusal takes the
    /// record back (no end reached the queue, and ends are queued one at a time).
    fn end(&self, queue_it: impl FnOnce() -> StoreResult<()>) -> StoreResult<()> {
        self.sync
            .queued
            .lock()
            .push_back(self.sharded.listed_shard());
        let queued = queue_it();
        if queued.is_err() {
            self.sync.queued.lock().pop_back();
        }
        queued
    }
}

impl<K: Send + Sync> Store<K> for MarkingStore<K> {
    fn add(&self, obj: Incoming<K>) -> StoreResult<()> {
        self.queue.add(obj)
    }

    fn update(&self, obj: Incoming<K>) -> StoreResult<()> {
        self.queue.update(obj)
    }

    fn delete(&self, obj: Arc<K>) -> StoreResult<()> {
        self.queue.delete(obj)
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> StoreResult<()> {
        self.end(|| self.queue.replace(list, resource_version))
    }

    fn replace_in_parts(&self) -> Option<Box<dyn ListInParts<K> + '_>> {
        let parts = self.queue.replace_in_parts()?;
        Some(Box::new(MarkedParts { parts, store: self }))
    }

    fn resync(&self) -> StoreResult<()> {
        self.queue.resync()
    }
}

/// A list taken in parts, whose end is recorded as [`MarkingStore::replace`]'s is.
struct MarkedParts<'a, K> {
    parts: Box<dyn ListInParts<K> + 'a>,
    store: &'a MarkingStore<K>,
}

impl<K: Send + Sync> ListInParts<K> for MarkedParts<'_, K> {
    fn part(&mut self, items: Vec<Incoming<K>>) -> StoreResult<()> {
        self.parts.part(items)
    }

    fn ready(&mut self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.parts.ready()
    }

    fn finish(self: Box<Self>, resource_version: &str) -> StoreResult<()> {
        let Self { parts, store } = *self;
        store.end(|| parts.finish(resource_version))
    }
}
