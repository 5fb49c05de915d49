//! The delaying queue: client-go's delaying_queue_test.go, ported to tokio's paused clock.

use std::time::Duration;

use kinformer_workqueue::RateLimitingQueue;
use tokio::time::{Instant, advance};

/// Lets the timer task run after the clock moved (it needs a few polls on the test's thread).
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// Ported from client-go's TestSimpleQueue.
#[tokio::test(start_paused = true)]
async fn item_is_added_once_its_delay_has_passed() {
    let queue = RateLimitingQueue::default();
    queue.add_after("foo", Duration::from_millis(50));
    settle().await;
    assert_eq!(queue.len(), 0, "should not have been added yet");
    assert_eq!(queue.waiting_len(), 1);

    advance(Duration::from_millis(60)).await;
    settle().await;
    assert_eq!(queue.len(), 1, "should have been added");
    let item = queue.get().await.expect("foo is queued");
    queue.done(&item);

    // Well past client-go's 10s heartbeat: nothing fires twice.
    advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!(queue.len(), 0, "should not have been added again");
    assert_eq!(queue.waiting_len(), 0);
}

/// Ported from client-go's TestDeduping.
#[tokio::test(start_paused = true)]
async fn an_item_scheduled_twice_keeps_the_earlier_deadline() {
    let queue = RateLimitingQueue::default();
    queue.add_after("foo", Duration::from_millis(50));
    queue.add_after("foo", Duration::from_millis(70));
    settle().await;
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.waiting_len(), 1);

    // Past the first deadline: the item arrives.
    advance(Duration::from_millis(60)).await;
    settle().await;
    assert_eq!(queue.len(), 1);
    let item = queue.get().await.expect("foo is queued");
    queue.done(&item);

    // Past the second (later) deadline: it was merged into the first, nothing arrives.
    advance(Duration::from_millis(20)).await;
    settle().await;
    assert_eq!(queue.len(), 0);

    // Again, but this time the later call has the earlier deadline and wins.
    queue.add_after("foo", Duration::from_millis(50));
    queue.add_after("foo", Duration::from_millis(30));
    settle().await;
    assert_eq!(queue.len(), 0);

    advance(Duration::from_millis(40)).await;
    settle().await;
    assert_eq!(queue.len(), 1);
    let item = queue.get().await.expect("foo is queued");
    queue.done(&item);

    advance(Duration::from_millis(20)).await;
    settle().await;
    assert_eq!(queue.len(), 0, "the superseded 50ms deadline must not fire");
}

/// Ported from client-go's TestAddTwoFireEarly.
#[tokio::test(start_paused = true)]
async fn an_earlier_deadline_fires_first_and_later_ones_follow() {
    let queue = RateLimitingQueue::default();
    queue.add_after("foo", Duration::from_secs(1));
    queue.add_after("bar", Duration::from_millis(50));
    settle().await;
    assert_eq!(queue.len(), 0);

    advance(Duration::from_millis(60)).await;
    settle().await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await, Some("bar"));

    queue.add_after("baz", Duration::from_secs(2));

    advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await, Some("foo"));

    advance(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await, Some("baz"));
}

/// Ported from client-go's TestCopyShifting.
#[tokio::test(start_paused = true)]
async fn items_due_together_arrive_in_deadline_order() {
    let queue = RateLimitingQueue::default();
    queue.add_after("foo", Duration::from_secs(1));
    queue.add_after("bar", Duration::from_millis(500));
    queue.add_after("baz", Duration::from_millis(250));
    settle().await;
    assert_eq!(queue.len(), 0);

    advance(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!(queue.len(), 3);
    assert_eq!(queue.get().await, Some("baz"));
    assert_eq!(queue.get().await, Some("bar"));
    assert_eq!(queue.get().await, Some("foo"));
}

#[tokio::test(start_paused = true)]
async fn a_worker_waiting_on_get_receives_the_item_exactly_at_its_deadline() {
    let queue = RateLimitingQueue::default();
    let start = Instant::now();
    queue.add_after("foo", Duration::from_millis(1500));
    // Nothing else is runnable, so the paused clock jumps straight to the timer.
    assert_eq!(queue.get().await, Some("foo"));
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn a_zero_delay_adds_immediately() {
    let queue = RateLimitingQueue::default();
    queue.add_after("foo", Duration::ZERO);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.waiting_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_delayed_item_already_queued_is_not_queued_twice() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    queue.add_after("foo", Duration::from_millis(5));
    advance(Duration::from_millis(10)).await;
    settle().await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await, Some("foo"));
    queue.done(&"foo");
    assert_eq!(queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn shut_down_drops_waiting_items_and_stops_the_timer() {
    let queue = RateLimitingQueue::default();
    queue.add_after("foo", Duration::from_secs(1));
    queue.shut_down();
    assert_eq!(queue.waiting_len(), 0);
    queue.add_after("bar", Duration::from_millis(1));
    assert_eq!(queue.waiting_len(), 0, "ignored while shutting down");
    advance(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_in_flight_items() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    let item = queue.get().await.expect("foo is queued");
    queue.add_after("bar", Duration::from_secs(1));
    let draining = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    settle().await;
    assert!(!draining.is_finished());
    assert_eq!(queue.waiting_len(), 0);
    queue.done(&item);
    draining.await.expect("drain does not panic");
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn many_deadlines_fire_in_order_without_loss() {
    let queue = RateLimitingQueue::default();
    // Scheduled in a scrambled order; each item's delay is its value in milliseconds.
    let delays: Vec<u64> = (1..=200).map(|n| (n * 37) % 200 + 1).collect();
    for &delay in &delays {
        queue.add_after(delay, Duration::from_millis(delay));
    }
    let start = Instant::now();
    for expected in 1..=200u64 {
        let item = queue.get().await.expect("the queue is running");
        assert_eq!(item, expected);
        assert_eq!(start.elapsed(), Duration::from_millis(expected));
        queue.done(&item);
    }
}
