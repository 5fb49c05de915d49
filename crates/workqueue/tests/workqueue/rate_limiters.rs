//! Rate limiters and the rate-limited queue: client-go's default_rate_limiters_test.go and
//! rate_limiting_queue_test.go, ported, plus the token bucket's exact delays.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kinformer_workqueue::{
    BucketRateLimiter, Error, INFINITE_DELAY, ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter, MaxOfRateLimiter, QueueOptions, RateLimiter, RateLimitingQueue,
    WithMaxWaitRateLimiter, default_controller_rate_limiter,
};
use tokio::time::advance;

const MS: Duration = Duration::from_millis(1);

async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// Ported from client-go's TestItemExponentialFailureRateLimiter.
#[test]
fn exponential_limiter_doubles_per_item_and_forgets() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
    for expected in [1, 2, 4, 8, 16] {
        assert_eq!(limiter.when(&"one"), expected * MS);
    }
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(limiter.when(&"two"), MS);
    assert_eq!(limiter.when(&"two"), 2 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), MS);
}

/// Ported from client-go's TestItemExponentialFailureRateLimiterOverFlow.
#[test]
fn exponential_limiter_saturates_at_the_cap_instead_of_overflowing() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
    for _ in 0..5 {
        limiter.when(&"one");
    }
    assert_eq!(limiter.when(&"one"), 32 * MS);
    for _ in 0..1000 {
        limiter.when(&"overflow1");
    }
    assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));

    let minute = Duration::from_secs(60);
    let limiter = ItemExponentialFailureRateLimiter::new(minute, 1000 * 60 * minute);
    for _ in 0..2 {
        limiter.when(&"two");
    }
    assert_eq!(limiter.when(&"two"), 4 * minute);
    for _ in 0..1000 {
        limiter.when(&"overflow2");
    }
    assert_eq!(limiter.when(&"overflow2"), 1000 * 60 * minute);
}

/// Ported from client-go's TestItemFastSlowRateLimiter.
#[test]
fn fast_slow_limiter_switches_after_the_fast_attempts() {
    let limiter = ItemFastSlowRateLimiter::new(5 * MS, Duration::from_secs(10), 3);
    for expected in [
        5 * MS,
        5 * MS,
        5 * MS,
        Duration::from_secs(10),
        Duration::from_secs(10),
    ] {
        assert_eq!(limiter.when(&"one"), expected);
    }
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

/// Ported from client-go's TestMaxOfRateLimiter.
#[test]
fn max_of_limiter_takes_the_worst_delay() {
    let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(
            5 * MS,
            Duration::from_secs(3),
            3,
        )),
        Box::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        )),
    ]);
    for expected in [
        5 * MS,
        5 * MS,
        5 * MS,
        Duration::from_secs(3),
        Duration::from_secs(3),
    ] {
        assert_eq!(limiter.when(&"one"), expected);
    }
    assert_eq!(limiter.num_requeues(&"one"), 5);

    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

/// client-go's StepRateLimiter test helper: `threshold` short delays, then long ones.
#[derive(Debug)]
struct StepRateLimiter {
    count: AtomicUsize,
    threshold: usize,
    base_delay: Duration,
    max_delay: Duration,
}

impl<T> RateLimiter<T> for StepRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        let count = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if count <= self.threshold {
            self.base_delay
        } else {
            self.max_delay
        }
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

/// Ported from client-go's TestWithMaxWaitRateLimiter.
#[test]
fn with_max_wait_limiter_caps_the_delay() {
    let limiter = WithMaxWaitRateLimiter::new(
        StepRateLimiter {
            count: AtomicUsize::new(0),
            threshold: 100,
            base_delay: 5 * MS,
            max_delay: Duration::from_secs(1000),
        },
        Duration::from_secs(500),
    );
    for item in 0..100 {
        assert_eq!(limiter.when(&item), 5 * MS);
    }
    for item in 100..200 {
        assert_eq!(limiter.when(&item), Duration::from_secs(500));
    }
}

/// Ported from client-go's TestRateLimitingQueue. client-go reads each scheduled deadline off
/// the delaying queue's channel; here the paused clock shows when the item arrives.
#[tokio::test(start_paused = true)]
async fn rate_limited_adds_wait_for_the_limiter_and_forget_resets() {
    let queue = RateLimitingQueue::new(
        ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1)),
        QueueOptions::default(),
    );

    async fn arrives_after(
        queue: &RateLimitingQueue<&'static str>,
        item: &'static str,
        delay: Duration,
    ) {
        advance(delay - Duration::from_micros(1)).await;
        settle().await;
        assert_eq!(queue.len(), 0, "{item} arrived before {delay:?}");
        advance(Duration::from_micros(1)).await;
        settle().await;
        assert_eq!(queue.len(), 1, "{item} did not arrive at {delay:?}");
        assert_eq!(queue.get().await, Some(item));
        queue.done(&item);
    }

    queue.add_rate_limited("one");
    arrives_after(&queue, "one", MS).await;
    queue.add_rate_limited("one");
    arrives_after(&queue, "one", 2 * MS).await;
    assert_eq!(queue.num_requeues(&"one"), 2);

    queue.add_rate_limited("two");
    arrives_after(&queue, "two", MS).await;
    queue.add_rate_limited("two");
    arrives_after(&queue, "two", 2 * MS).await;

    queue.forget(&"one");
    assert_eq!(queue.num_requeues(&"one"), 0);
    queue.add_rate_limited("one");
    arrives_after(&queue, "one", MS).await;
}

/// Ported in spirit from client-go's TestNewNamedRateLimitingWithCustomQueue (without the
/// priority queue): a rate-limited item under the default limiter reaches a waiting worker.
#[tokio::test(start_paused = true)]
async fn default_controller_limiter_delivers_a_rate_limited_item() {
    let queue = RateLimitingQueue::new(default_controller_rate_limiter(), QueueOptions::default());
    let start = tokio::time::Instant::now();
    queue.add_rate_limited("one");
    assert_eq!(queue.get().await, Some("one"));
    assert_eq!(
        start.elapsed(),
        5 * MS,
        "the per-item 5ms base delay wins over a full bucket"
    );
}

#[tokio::test(start_paused = true)]
async fn token_bucket_lends_from_the_future_like_go_rate_reserve() {
    let bucket = BucketRateLimiter::new(10.0, 100).expect("a valid rate");
    for _ in 0..100 {
        assert_eq!(RateLimiter::<()>::when(&bucket, &()), Duration::ZERO);
    }
    // The bucket is empty: each further token is 100ms further away.
    assert_eq!(RateLimiter::<()>::when(&bucket, &()), 100 * MS);
    assert_eq!(RateLimiter::<()>::when(&bucket, &()), 200 * MS);
    // One second refills ten tokens; two were borrowed, so eight are left.
    advance(Duration::from_secs(1)).await;
    for _ in 0..8 {
        assert_eq!(RateLimiter::<()>::when(&bucket, &()), Duration::ZERO);
    }
    assert_eq!(RateLimiter::<()>::when(&bucket, &()), 100 * MS);
    // The refill never exceeds the burst.
    advance(Duration::from_secs(3600)).await;
    for _ in 0..100 {
        assert_eq!(RateLimiter::<()>::when(&bucket, &()), Duration::ZERO);
    }
    assert_eq!(RateLimiter::<()>::when(&bucket, &()), 100 * MS);
    assert_eq!(RateLimiter::<()>::num_requeues(&bucket, &()), 0);
}

#[tokio::test(start_paused = true)]
async fn token_bucket_delays_are_exact_fractions_of_a_second() {
    let bucket = BucketRateLimiter::new(3.0, 1).expect("a valid rate");
    assert_eq!(RateLimiter::<()>::when(&bucket, &()), Duration::ZERO);
    // Go truncates (1 / 3) * 1e9 nanoseconds.
    assert_eq!(
        RateLimiter::<()>::when(&bucket, &()),
        Duration::from_nanos(333_333_333)
    );
    advance(Duration::from_millis(100)).await;
    // 0.3 tokens came back out of the 1 borrowed: 1.7 tokens to wait for.
    assert_eq!(
        RateLimiter::<()>::when(&bucket, &()),
        Duration::from_nanos(566_666_666)
    );
}

#[test]
fn token_bucket_edge_rates_follow_go() {
    let never_refilled = BucketRateLimiter::new(0.0, 2).expect("zero is a valid rate");
    assert_eq!(
        RateLimiter::<()>::when(&never_refilled, &()),
        Duration::ZERO
    );
    assert_eq!(
        RateLimiter::<()>::when(&never_refilled, &()),
        Duration::ZERO
    );
    assert_eq!(
        RateLimiter::<()>::when(&never_refilled, &()),
        INFINITE_DELAY
    );

    let unlimited = BucketRateLimiter::new(f64::INFINITY, 0).expect("infinity is a valid rate");
    for _ in 0..1000 {
        assert_eq!(RateLimiter::<()>::when(&unlimited, &()), Duration::ZERO);
    }

    let no_burst = BucketRateLimiter::new(10.0, 0).expect("a valid rate");
    assert_eq!(RateLimiter::<()>::when(&no_burst, &()), INFINITE_DELAY);

    assert_eq!(
        BucketRateLimiter::new(-1.0, 10).err(),
        Some(Error::InvalidRate { qps: -1.0 })
    );
    assert!(matches!(
        BucketRateLimiter::new(f64::NAN, 10),
        Err(Error::InvalidRate { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn default_controller_limiter_is_bounded_by_the_bucket_after_a_burst() {
    let limiter = default_controller_rate_limiter();
    // A hundred distinct items each fail once: per-item 5ms, bucket free.
    for item in 0..100u32 {
        assert_eq!(limiter.when(&item), 5 * MS);
    }
    // The bucket is now empty, so the overall limit dominates the per-item delay.
    assert_eq!(limiter.when(&100), 100 * MS);
    assert_eq!(limiter.num_requeues(&0), 1);
    limiter.forget(&0);
    assert_eq!(limiter.num_requeues(&0), 0);
}

#[tokio::test(start_paused = true)]
async fn an_infinite_delay_never_fires_and_does_not_overflow_the_clock() {
    let queue = RateLimitingQueue::new(
        BucketRateLimiter::new(0.0, 0).expect("a valid rate"),
        QueueOptions::default(),
    );
    queue.add_rate_limited("never");
    assert_eq!(queue.waiting_len(), 1);
    advance(Duration::from_secs(86_400 * 365)).await;
    settle().await;
    assert_eq!(queue.len(), 0);
}
