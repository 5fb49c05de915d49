//! Rate limiters: how long an item waits before it is retried.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::RandomState;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::error::{Error, Result};

/// The delay that means "never" (Go's `rate.InfDuration`, the largest `time.Duration`).
pub const INFINITE_DELAY: Duration = Duration::from_nanos(i64::MAX as u64);

/// Decides how long an item waits before it is added back to the queue.
///
/// Implementations are shared by every worker, so they take `&self` and guard their own state.
#[doc(alias = "TypedRateLimiter")]
pub trait RateLimiter<T>: Send + Sync + fmt::Debug {
    /// How long `item` should wait now; calling it counts one more retry of `item`.
    #[doc(alias = "When")]
    fn when(&self, item: &T) -> Duration;

    /// Stops tracking `item`, whether it finally succeeded or was given up on.
    #[doc(alias = "Forget")]
    fn forget(&self, item: &T);

    /// How many times `item` has been retried since it was last forgotten.
    #[doc(alias = "NumRequeues")]
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

/// The limiter client-go's controllers use: the worse of a per-item exponential backoff (5ms
/// doubling up to 1000s) and an overall token bucket (10 per second, bursts of 100).
#[doc(alias = "DefaultTypedControllerRateLimiter")]
#[doc(alias = "DefaultControllerRateLimiter")]
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::default_overall()),
    ])
}

/// A per-item exponential backoff from 1ms up to 1000s.
#[doc(alias = "DefaultTypedItemBasedRateLimiter")]
#[doc(alias = "DefaultItemBasedRateLimiter")]
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

/// Waits `base_delay * 2^failures` for an item, capped at `max_delay`; how many failures are
/// too many is the caller's decision.
#[doc(alias = "TypedItemExponentialFailureRateLimiter")]
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Mutex<HashMap<T, u32, RandomState>>,
    base_delay: Duration,
    max_delay: Duration,
}

impl<T> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base_delay", &self.base_delay)
            .field("max_delay", &self.max_delay)
            .field("tracked_items", &self.failures.lock().len())
            .finish()
    }
}

impl<T> ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash,
{
    /// A backoff starting at `base_delay` and never exceeding `max_delay`.
    #[doc(alias = "NewTypedItemExponentialFailureRateLimiter")]
    pub fn new(base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::default()),
            base_delay,
            max_delay,
        }
    }
}

impl<T> RateLimiter<T> for ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let exponent = {
            let mut failures = self.failures.lock();
            let count = failures.entry(item.clone()).or_insert(0);
            let exponent = *count;
            *count = count.saturating_add(1);
            exponent
        };
        // Computed in floating point like client-go, so that huge exponents saturate to the cap
        // instead of overflowing.
        let exponent = i32::try_from(exponent).unwrap_or(i32::MAX);
        let backoff = self.base_delay.as_nanos() as f64 * 2f64.powi(exponent);
        if backoff > i64::MAX as f64 {
            return self.max_delay;
        }
        let calculated = Duration::from_nanos(backoff as u64);
        calculated.min(self.max_delay)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.lock().get(item).map_or(0, |n| *n as usize)
    }
}

/// Retries quickly (`fast_delay`) for the first `max_fast_attempts` failures of an item, then
/// slowly (`slow_delay`).
#[doc(alias = "TypedItemFastSlowRateLimiter")]
pub struct ItemFastSlowRateLimiter<T> {
    failures: Mutex<HashMap<T, usize, RandomState>>,
    max_fast_attempts: usize,
    fast_delay: Duration,
    slow_delay: Duration,
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("max_fast_attempts", &self.max_fast_attempts)
            .field("fast_delay", &self.fast_delay)
            .field("slow_delay", &self.slow_delay)
            .field("tracked_items", &self.failures.lock().len())
            .finish()
    }
}

impl<T> ItemFastSlowRateLimiter<T>
where
    T: Clone + Eq + Hash,
{
    /// `max_fast_attempts` retries after `fast_delay`, every later one after `slow_delay`.
    #[doc(alias = "NewTypedItemFastSlowRateLimiter")]
    pub fn new(fast_delay: Duration, slow_delay: Duration, max_fast_attempts: usize) -> Self {
        Self {
            failures: Mutex::new(HashMap::default()),
            max_fast_attempts,
            fast_delay,
            slow_delay,
        }
    }
}

impl<T> RateLimiter<T> for ItemFastSlowRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock();
        let count = failures.entry(item.clone()).or_insert(0);
        *count = count.saturating_add(1);
        if *count <= self.max_fast_attempts {
            self.fast_delay
        } else {
            self.slow_delay
        }
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// Asks every inner limiter and keeps the longest delay (and the highest requeue count).
///
/// With a token bucket inside, bursts can appear to exceed the bucket when some items were
/// separately delayed for longer, as in client-go.
#[doc(alias = "TypedMaxOfRateLimiter")]
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters)
            .finish()
    }
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`; with none, every delay is zero.
    #[doc(alias = "NewTypedMaxOfRateLimiter")]
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Every limiter is asked, not just until the first long delay, because asking counts.
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Caps another limiter's delays at `max_delay`.
#[doc(alias = "TypedWithMaxWaitRateLimiter")]
#[derive(Debug)]
pub struct WithMaxWaitRateLimiter<R> {
    limiter: R,
    max_delay: Duration,
}

impl<R> WithMaxWaitRateLimiter<R> {
    /// Wraps `limiter` so that no delay exceeds `max_delay`.
    #[doc(alias = "NewTypedWithMaxWaitRateLimiter")]
    pub fn new(limiter: R, max_delay: Duration) -> Self {
        Self { limiter, max_delay }
    }
}

impl<T, R: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<R> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_delay)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

/// An overall token bucket: `qps` tokens per second, at most `burst` saved up, one token per
/// retry whatever the item. It never tracks items, so `forget` does nothing and `num_requeues`
/// is always zero.
///
/// The delay is exactly what client-go gets from `rate.Limiter.Reserve().Delay()`: the bucket
/// starts full, a retry may borrow tokens from the future (the bucket goes negative), and the
/// delay is the time until the borrowed token will have been refilled. A rate of zero hands out
/// only the burst, then [`INFINITE_DELAY`]; an infinite rate never delays.
#[doc(alias = "Limiter")]
#[derive(Debug)]
pub struct BucketRateLimiter {
    qps: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    burst: usize,
    tokens: f64,
    /// When `tokens` was last brought up to date; `None` until the first reservation, which
    /// finds the bucket full (Go's zero `last` is "infinitely long ago").
    last: Option<Instant>,
}

impl BucketRateLimiter {
    /// A bucket refilled at `qps` tokens per second holding at most `burst`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRate`] if `qps` is negative or NaN.
    #[doc(alias = "NewLimiter")]
    pub fn new(qps: f64, burst: usize) -> Result<Self> {
        if qps.is_nan() || qps < 0.0 {
            return Err(Error::InvalidRate { qps });
        }
        Ok(Self {
            qps,
            bucket: Mutex::new(Bucket {
                burst,
                tokens: 0.0,
                last: None,
            }),
        })
    }

    /// client-go's overall retry budget: 10 per second, bursts of 100.
    pub fn default_overall() -> Self {
        Self {
            qps: 10.0,
            bucket: Mutex::new(Bucket {
                burst: 100,
                tokens: 0.0,
                last: None,
            }),
        }
    }

    /// Takes one token at `now` and returns how long the caller must wait for it.
    fn reserve(&self, now: Instant) -> Duration {
        let mut bucket = self.bucket.lock();
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        if self.qps == 0.0 {
            // Go's special case: the burst is a one-time allowance that is never refilled.
            return if bucket.burst >= 1 {
                bucket.burst -= 1;
                Duration::ZERO
            } else {
                INFINITE_DELAY
            };
        }
        let burst = bucket.burst as f64;
        let refilled = match bucket.last {
            None => burst,
            Some(last) => {
                // A clock that went backwards adds nothing (Go clamps `last` to `now`).
                let elapsed = now.saturating_duration_since(last);
                (bucket.tokens + elapsed.as_secs_f64() * self.qps).min(burst)
            }
        };
        let remaining = refilled - 1.0;
        let wait = if remaining < 0.0 {
            duration_from_tokens(-remaining, self.qps)
        } else {
            Duration::ZERO
        };
        if bucket.burst < 1 {
            // A reservation larger than the burst is refused and leaves the bucket untouched.
            return INFINITE_DELAY;
        }
        bucket.last = Some(now);
        bucket.tokens = remaining;
        wait
    }
}

/// Go's `Limit.durationFromTokens`: nanoseconds in floating point, truncated, saturating.
fn duration_from_tokens(tokens: f64, qps: f64) -> Duration {
    let nanos = tokens / qps * 1e9;
    if nanos > i64::MAX as f64 {
        return INFINITE_DELAY;
    }
    Duration::from_nanos(nanos as u64)
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve(Instant::now())
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}
