//! The queue controllers use: a delaying queue whose retry delays come from a [`RateLimiter`].

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::delaying::DelayingQueue;
use crate::queue::QueueOptions;
use crate::rate_limiter::RateLimiter;

/// The work queue for controllers: deduplicating, delaying, and retrying failed items after the
/// delay its [`RateLimiter`] picks. It is client-go's three queues in one: every method of the
/// plain and the delaying queue is here.
///
/// An item added many times before a worker takes it is handed out once, and an item is never
/// handed to two workers at the same time; an item added while a worker processes it is handed
/// out again after that worker's [`done`](RateLimitingQueue::done). Cloning is cheap and every
/// clone is the same queue, so each worker task holds its own clone.
///
/// A worker that fails on an item calls [`add_rate_limited`](RateLimitingQueue::add_rate_limited);
/// one that succeeds (or gives up) calls [`forget`](RateLimitingQueue::forget) so the limiter
/// stops counting that item's failures. Either way it then calls [`done`](RateLimitingQueue::done).
///
/// Delayed adds are kept by one tokio task, which sleeps until the earliest deadline and stops
/// when the queue shuts down or the last handle is dropped; an item scheduled twice keeps the
/// earlier deadline. After [`shut_down`](RateLimitingQueue::shut_down) new adds are ignored, the
/// items already queued are still handed out, and [`get`](RateLimitingQueue::get) returns `None`
/// once none are left.
#[doc(alias = "TypedRateLimitingInterface")]
#[doc(alias = "RateLimitingInterface")]
#[doc(alias = "TypedDelayingInterface")]
#[doc(alias = "TypedInterface")]
pub struct RateLimitingQueue<T> {
    queue: DelayingQueue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: Arc::clone(&self.limiter),
        }
    }
}

impl<T> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.queue)
            .field("limiter", &self.limiter)
            .finish()
    }
}

impl<T> Default for RateLimitingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue without metrics, retried by
    /// [`default_controller_rate_limiter`](crate::default_controller_rate_limiter). Like
    /// [`RateLimitingQueue::new`], it panics outside a tokio runtime.
    fn default() -> Self {
        Self::new(
            crate::default_controller_rate_limiter(),
            QueueOptions::default(),
        )
    }
}

impl<T> RateLimitingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// A queue configured by `options` (a name and a metrics sink, or neither), delayed by
    /// `limiter` (usually [`default_controller_rate_limiter`](crate::default_controller_rate_limiter)).
    ///
    /// # Panics
    ///
    /// Panics when called outside a tokio runtime, because it starts the timer task.
    #[doc(alias = "NewTypedRateLimitingQueue")]
    #[doc(alias = "NewTypedRateLimitingQueueWithConfig")]
    #[doc(alias = "NewTypedDelayingQueue")]
    #[doc(alias = "NewTyped")]
    pub fn new(limiter: impl RateLimiter<T> + 'static, config: QueueOptions) -> Self {
        Self {
            queue: DelayingQueue::new(config),
            limiter: Arc::new(limiter),
        }
    }

    /// Marks `item` as needing processing. Does nothing if it is already waiting, or if the
    /// queue is shutting down; if a worker holds it right now, it is handed out again after that
    /// worker's [`done`](RateLimitingQueue::done).
    #[doc(alias = "Add")]
    pub fn add(&self, item: T) {
        self.queue.add(item);
    }

    /// Adds `item` once `delay` has passed; a zero delay adds it now. If the item is already
    /// waiting, the earlier of the two deadlines is kept. Ignored while shutting down.
    #[doc(alias = "AddAfter")]
    pub fn add_after(&self, item: T, delay: Duration) {
        self.queue.add_after(item, delay);
    }

    /// Adds `item` after the delay the rate limiter picks for it now (which counts as one more
    /// retry of `item`).
    #[doc(alias = "AddRateLimited")]
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Tells the rate limiter to stop tracking `item`. This does not mark it done: call
    /// [`done`](RateLimitingQueue::done) as well.
    #[doc(alias = "Forget")]
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` has been retried since it was last forgotten.
    #[doc(alias = "NumRequeues")]
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }

    /// Waits for an item to process and marks it as being processed. Returns `None` once the
    /// queue is shut down and no queued item is left: the worker should then stop.
    ///
    /// Call [`done`](RateLimitingQueue::done) with the item when finished with it, whatever the
    /// outcome. Dropping the future before it completes takes nothing from the queue.
    #[doc(alias = "Get")]
    pub async fn get(&self) -> Option<T> {
        self.queue.get().await
    }

    /// Marks `item` as processed. If it was added again while being processed, it goes back on
    /// the queue. An item that is not being processed is ignored.
    #[doc(alias = "Done")]
    pub fn done(&self, item: &T) {
        self.queue.done(item);
    }

    /// The number of items ready to be handed out (items waiting for a worker's `done` or for
    /// their delay are not counted). For information only: never gate an `add` or `get` on it.
    #[doc(alias = "Len")]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The number of items waiting for their delay to pass (not yet ready).
    pub fn waiting_len(&self) -> usize {
        self.queue.waiting_len()
    }

    /// Stops accepting new items, drops the items waiting for their delay, and tells idle
    /// workers to stop. Items already queued are still handed out; [`get`](RateLimitingQueue::get)
    /// returns `None` once they are gone. Also ends a pending
    /// [`shut_down_with_drain`](RateLimitingQueue::shut_down_with_drain) without waiting further.
    #[doc(alias = "ShutDown")]
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// Like [`shut_down`](RateLimitingQueue::shut_down), then waits until every item handed out
    /// has been marked [`done`](RateLimitingQueue::done). Workers must keep calling `done` after
    /// the shutdown starts, or this waits forever; a later
    /// [`shut_down`](RateLimitingQueue::shut_down) ends the wait early.
    ///
    /// As in client-go, items still queued but not yet handed out are not waited for.
    #[doc(alias = "ShutDownWithDrain")]
    pub async fn shut_down_with_drain(&self) {
        self.queue.shut_down_with_drain().await;
    }

    /// Whether [`shut_down`](RateLimitingQueue::shut_down) or
    /// [`shut_down_with_drain`](RateLimitingQueue::shut_down_with_drain) has been called.
    #[doc(alias = "ShuttingDown")]
    pub fn shutting_down(&self) -> bool {
        self.queue.shutting_down()
    }

    /// The queue's name from its [`QueueOptions`] (empty when unnamed).
    pub fn name(&self) -> &str {
        self.queue.name()
    }
}
