//! Work queues for controllers, after client-go's `util/workqueue`.
//!
//! Informer event handlers put object keys into a queue; worker tasks take keys out, reconcile,
//! and report back. This layer owns what makes that safe and calm: a key added many times before
//! a worker gets to it is processed once; a key is never processed by two workers at once, and a
//! key that changes while being processed is processed again afterwards; failed keys come back
//! after a per-key exponential backoff bounded by an overall token bucket; shutdown wakes every
//! worker, and can wait until the in-flight keys are done. Nothing here knows about informers,
//! HTTP or Kubernetes: items are any `Clone + Eq + Hash + Send + Sync + 'static` type, so typed
//! keys work as well as strings.
//!
//! What a controller uses: one queue type, [`RateLimitingQueue`] (client-go's plain, delaying and
//! rate-limiting queues in one), retried by [`default_controller_rate_limiter`] or any other
//! [`RateLimiter`]: [`ItemExponentialFailureRateLimiter`] per item, [`BucketRateLimiter`]
//! overall, [`MaxOfRateLimiter`] for the worse of several. [`QueueOptions`] names a queue and
//! picks where its metrics go: [`QueueMetrics`] is the one way to plug metrics in; a named queue
//! reports as `tracing` events by default, and with the `prometheus` feature,
//! `PrometheusMetrics` exports them under client-go's names (`workqueue_depth`,
//! `workqueue_adds_total`, ...) through the prometheus-client crate. All time is tokio's, so
//! tests with a paused clock are exact. [`Parallelizer`] (client-go's `ParallelizeUntil`)
//! spreads CPU-bound pieces of work over threads.
//!
//! Locking: each queue has one `parking_lot` mutex that is never held across an `.await`;
//! waiting workers park on a `tokio::sync::Notify` they register with before they look at the
//! queue, so an add cannot slip between the look and the wait. Each add wakes one worker (like
//! client-go's `cond.Signal`), a shutdown wakes all of them.
//!
//! ```
//! use std::time::Duration;
//! use kinformer_workqueue::{QueueOptions, RateLimitingQueue, default_controller_rate_limiter};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter(), QueueOptions::default());
//! queue.add("default/web".to_string());
//! queue.add("default/web".to_string()); // already queued: processed once
//! assert_eq!(queue.len(), 1);
//!
//! let start = tokio::time::Instant::now();
//! let key = queue.get().await.expect("queue is running");
//! // The first attempt fails: retry after the limiter's delay (5ms for a first failure).
//! queue.add_rate_limited(key.clone());
//! queue.done(&key);
//!
//! let key = queue.get().await.expect("queue is running");
//! assert_eq!(start.elapsed(), Duration::from_millis(5));
//! assert_eq!(queue.num_requeues(&key), 1);
//! // This attempt succeeds: the limiter forgets the key's failures.
//! queue.forget(&key);
//! queue.done(&key);
//!
//! queue.shut_down();
//! assert_eq!(queue.get().await, None);
//! # }
//! ```

mod delaying;
mod error;
mod metrics;
mod parallelizer;
#[cfg(feature = "prometheus")]
mod prometheus;
mod queue;
mod rate_limiter;
mod rate_limiting;

pub use error::{Error, Result};
pub use metrics::QueueMetrics;
pub use parallelizer::Parallelizer;
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetrics;
pub use queue::QueueOptions;
pub use rate_limiter::{
    BucketRateLimiter, INFINITE_DELAY, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
    default_item_based_rate_limiter,
};
pub use rate_limiting::RateLimitingQueue;

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
