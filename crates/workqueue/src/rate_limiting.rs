//! The rate-limited queue: a delaying queue whose delays come from a [`RateLimiter`].

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::delaying::DelayingQueue;
use crate::queue::QueueOptions;
use crate::rate_limiter::RateLimiter;

/// The queue a controller uses: deduplicating, delaying, and retrying failed items after the
/// delay its [`RateLimiter`] picks.
///
/// A worker that fails on an item calls [`add_rate_limited`](RateLimitingQueue::add_rate_limited);
/// one that succeeds (or gives up) calls [`forget`](RateLimitingQueue::forget) so the limiter
/// stops counting that item's failures. Either way it then calls [`done`](RateLimitingQueue::done).
#[doc(alias = "TypedRateLimitingInterface")]
#[doc(alias = "RateLimitingInterface")]
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
    pub fn new(limiter: impl RateLimiter<T> + 'static, config: QueueOptions) -> Self {
        Self {
            queue: DelayingQueue::new(config),
            limiter: Arc::new(limiter),
        }
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

    /// See [`DelayingQueue::add_after`].
    #[doc(alias = "AddAfter")]
    pub fn add_after(&self, item: T, delay: Duration) {
        self.queue.add_after(item, delay);
    }

    /// See [`DelayingQueue::waiting_len`].
    pub fn waiting_len(&self) -> usize {
        self.queue.waiting_len()
    }

    /// See [`Queue::add`](crate::Queue::add).
    #[doc(alias = "Add")]
    pub fn add(&self, item: T) {
        self.queue.add(item);
    }

    /// See [`Queue::get`](crate::Queue::get).
    #[doc(alias = "Get")]
    pub async fn get(&self) -> Option<T> {
        self.queue.get().await
    }

    /// See [`Queue::done`](crate::Queue::done).
    #[doc(alias = "Done")]
    pub fn done(&self, item: &T) {
        self.queue.done(item);
    }

    /// See [`Queue::len`](crate::Queue::len).
    #[doc(alias = "Len")]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// See [`Queue::is_empty`](crate::Queue::is_empty).
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// See [`DelayingQueue::shut_down`].
    #[doc(alias = "ShutDown")]
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// See [`DelayingQueue::shut_down_with_drain`].
    #[doc(alias = "ShutDownWithDrain")]
    pub async fn shut_down_with_drain(&self) {
        self.queue.shut_down_with_drain().await;
    }

    /// See [`Queue::shutting_down`](crate::Queue::shutting_down).
    #[doc(alias = "ShuttingDown")]
    pub fn shutting_down(&self) -> bool {
        self.queue.shutting_down()
    }

    /// See [`Queue::name`](crate::Queue::name).
    pub fn name(&self) -> &str {
        self.queue.name()
    }
}
