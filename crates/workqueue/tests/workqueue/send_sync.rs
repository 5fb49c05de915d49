//! The public types can be shared across tasks and threads, and their futures can be spawned.

use kinformer_workqueue::{
    BucketRateLimiter, Error, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, QueueOptions, RateLimiter, RateLimitingQueue, WithMaxWaitRateLimiter,
};

fn is_send_sync<T: Send + Sync>() {}

fn is_send<T: Send>(_: &T) {}

#[test]
fn public_types_are_send_and_sync() {
    is_send_sync::<RateLimitingQueue<String>>();
    is_send_sync::<QueueOptions>();
    is_send_sync::<BucketRateLimiter>();
    is_send_sync::<ItemExponentialFailureRateLimiter<String>>();
    is_send_sync::<ItemFastSlowRateLimiter<String>>();
    is_send_sync::<MaxOfRateLimiter<String>>();
    is_send_sync::<WithMaxWaitRateLimiter<BucketRateLimiter>>();
    is_send_sync::<Box<dyn RateLimiter<String>>>();
    is_send_sync::<Error>();
}

#[tokio::test]
async fn queue_futures_are_send() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(
        kinformer_workqueue::default_controller_rate_limiter(),
        QueueOptions::default(),
    );
    is_send(&queue.get());
    is_send(&queue.shut_down_with_drain());
}
