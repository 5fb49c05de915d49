//! [`ShardedQueue`]: a rate-limited work queue that hands out only this replica's keys.

use std::{fmt, hash::Hash, ops::Deref, time::Duration};

use kinformer_workqueue::RateLimitingQueue;

use super::{Placed, Shard, ShardGuard};

/// A [`RateLimitingQueue`] behind a [`Shard`]: keys this replica does not own are not
/// queued, and [`get`](Self::get) hands out a key only with the [`ShardGuard`] that proves no
/// other live replica works on it. Keys are placed by their text (`String`), or by their
/// object's hash ([`ObjectKey`](super::ObjectKey)) for replicas that each cache their share. A key this replica owns but may not start yet (its
/// previous owner still has it) is queued again after the hand-off delay. Clones share the
/// queue and the gate, as the queue's own clones do. It derefs to the [`RateLimitingQueue`]
/// for the rest (`forget`, `num_requeues`, `len`, `shut_down_with_drain`...).
///
/// ```no_run
/// use kinformer_leaderelection::shard::{Shard, ShardedQueue};
/// use kinformer_workqueue::{QueueOptions, RateLimitingQueue, default_controller_rate_limiter};
///
/// # async fn doc(shard: Shard) {
/// let queue = ShardedQueue::new(
///     RateLimitingQueue::new(default_controller_rate_limiter(), QueueOptions::named("web")),
///     shard,
/// );
/// queue.add("default/web".to_owned());
/// while let Some((key, guard)) = queue.get().await {
///     // Reconcile `key`: no other live replica works on it until `guard` is dropped.
///     queue.forget(&key);
///     queue.done(&key, guard);
/// }
/// # }
/// ```
pub struct ShardedQueue<T> {
    queue: RateLimitingQueue<T>,
    shard: Shard,
    hand_off_delay: Duration,
}

impl<T> ShardedQueue<T>
where
    T: Placed + Clone + Eq + Hash + Send + Sync + 'static,
{
    /// `queue`, gated by `shard`.
    pub fn new(queue: RateLimitingQueue<T>, shard: Shard) -> Self {
        let hand_off_delay = shard.gate().retry_period();
        Self {
            queue,
            shard,
            hand_off_delay,
        }
    }

    /// Queues `item` if this replica owns it.
    pub fn add(&self, item: T) {
        if self.shard.owns(&item) {
            self.queue.add(item);
        }
    }

    /// Queues `item` after the rate limiter's delay, if this replica owns it.
    pub fn add_rate_limited(&self, item: T) {
        if self.shard.owns(&item) {
            self.queue.add_rate_limited(item);
        }
    }

    /// Queues `item` after `delay`, if this replica owns it.
    pub fn add_after(&self, item: T, delay: Duration) {
        if self.shard.owns(&item) {
            self.queue.add_after(item, delay);
        }
    }

    /// The next key this replica may work on, with its guard; `None` once the queue is shut
    /// down and drained. Keys that moved to another replica since they were queued are
    /// dropped; keys still being handed over are queued again after the hand-off delay.
    pub async fn get(&self) -> Option<(T, ShardGuard)> {
        loop {
            let item = self.queue.get().await?;
            if let Some(guard) = self.shard.try_start(&item) {
                return Some((item, guard));
            }
            let owned = self.shard.owns(&item);
            self.queue.done(&item);
            if owned {
                self.queue.add_after(item, self.hand_off_delay);
            } else {
                self.queue.forget(&item);
            }
        }
    }

    /// Marks `item` done and ends its guard, so another replica may take it.
    pub fn done(&self, item: &T, guard: ShardGuard) {
        self.queue.done(item);
        drop(guard);
    }
}

/// The queue behind the gate, for what the gate does not change: retry counts
/// (`forget`, `num_requeues`), length and shutdown. Keys go in and out through the
/// [`ShardedQueue`]'s own `add`, `add_rate_limited`, `add_after`, `get` and `done`, which
/// the queue's own methods of those names would bypass.
impl<T> Deref for ShardedQueue<T> {
    type Target = RateLimitingQueue<T>;

    fn deref(&self) -> &RateLimitingQueue<T> {
        &self.queue
    }
}

impl<T> Clone for ShardedQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            shard: self.shard.clone(),
            hand_off_delay: self.hand_off_delay,
        }
    }
}

impl<T> fmt::Debug for ShardedQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedQueue")
            .field("name", &self.queue.name())
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}
