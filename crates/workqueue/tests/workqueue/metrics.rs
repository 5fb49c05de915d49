//! Metrics hooks: client-go's metrics_test.go, ported to tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use kinformer_workqueue::{
    ItemExponentialFailureRateLimiter, QueueMetrics, QueueOptions, RateLimitingQueue,
    default_controller_rate_limiter,
};
use parking_lot::Mutex;
use tokio::time::advance;

#[derive(Debug, Default)]
struct Recorded {
    adds: usize,
    depth: usize,
    latencies: Vec<Duration>,
    work_durations: Vec<Duration>,
    unfinished: Vec<(Duration, Duration)>,
    retries: usize,
    waiting_depth: usize,
    queue_names: Vec<String>,
}

#[derive(Debug, Default, Clone)]
struct Recorder(Arc<Mutex<Recorded>>);

impl QueueMetrics for Recorder {
    fn on_add(&self, queue: &str, depth: usize) {
        let mut recorded = self.0.lock();
        recorded.adds += 1;
        recorded.depth = depth;
        recorded.queue_names.push(queue.to_string());
    }

    fn on_get(&self, _queue: &str, depth: usize, queued_for: Duration) {
        let mut recorded = self.0.lock();
        recorded.depth = depth;
        recorded.latencies.push(queued_for);
    }

    fn on_done(&self, _queue: &str, worked_for: Duration) {
        self.0.lock().work_durations.push(worked_for);
    }

    fn on_unfinished_work(&self, _queue: &str, unfinished: Duration, longest_running: Duration) {
        self.0.lock().unfinished.push((unfinished, longest_running));
    }

    fn on_retry(&self, _queue: &str) {
        self.0.lock().retries += 1;
    }

    fn on_waiting_depth(&self, _queue: &str, depth: usize) {
        self.0.lock().waiting_depth = depth;
    }
}

async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// Ported from client-go's TestMetrics.
#[tokio::test(start_paused = true)]
async fn queue_reports_adds_depth_latency_work_duration_and_unfinished_work() {
    let recorder = Recorder::default();
    let queue = RateLimitingQueue::new(
        default_controller_rate_limiter(),
        QueueOptions::named("test").metrics(recorder.clone()),
    );

    queue.add("foo");
    assert_eq!(recorder.0.lock().adds, 1);
    assert_eq!(recorder.0.lock().depth, 1);

    advance(Duration::from_micros(50)).await;
    let item = queue.get().await.expect("foo is queued");
    assert_eq!(recorder.0.lock().latencies, vec![Duration::from_micros(50)]);

    // Added back while processing; the repeated adds are deduplicated.
    for _ in 0..5 {
        queue.add(item);
    }
    assert_eq!(recorder.0.lock().adds, 2);
    assert_eq!(recorder.0.lock().depth, 1, "one item waits");

    advance(Duration::from_micros(25)).await;
    queue.done(&item);
    assert_eq!(
        recorder.0.lock().work_durations,
        vec![Duration::from_micros(25)]
    );
    assert_eq!(recorder.0.lock().depth, 1, "one item still waits");

    let item = queue.get().await.expect("foo is back");
    assert_eq!(
        recorder.0.lock().latencies,
        vec![Duration::from_micros(50), Duration::from_micros(25)]
    );

    // The first report comes 500ms after the queue was built; foo has been held since 75µs.
    let held = Duration::from_millis(500) - Duration::from_micros(75);
    advance(held).await;
    settle().await;
    assert_eq!(recorder.0.lock().unfinished.last(), Some(&(held, held)));

    queue.done(&item);
    assert_eq!(
        recorder.0.lock().work_durations,
        vec![Duration::from_micros(25), held]
    );
    assert!(
        recorder
            .0
            .lock()
            .queue_names
            .iter()
            .all(|name| name == "test")
    );
    queue.shut_down();
}

/// Ported from client-go's TestMetricShutdown.
#[tokio::test(start_paused = true)]
async fn unfinished_work_reports_stop_after_shut_down() {
    let recorder = Recorder::default();
    let queue: RateLimitingQueue<&str> = RateLimitingQueue::new(
        default_controller_rate_limiter(),
        QueueOptions::named("test").metrics(recorder.clone()),
    );
    advance(Duration::from_millis(500)).await;
    settle().await;
    assert_eq!(recorder.0.lock().unfinished.len(), 1);

    queue.shut_down();
    advance(Duration::from_secs(3600)).await;
    settle().await;
    assert_eq!(
        recorder.0.lock().unfinished.len(),
        1,
        "reported after shutdown"
    );
}

#[tokio::test(start_paused = true)]
async fn a_queue_without_metrics_starts_no_reporting_task() {
    let queue: RateLimitingQueue<&str> = RateLimitingQueue::default();
    assert_eq!(queue.name(), "");
    queue.add("foo");
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert_eq!(tasks, 1, "only the timer task");
    let named: RateLimitingQueue<&str> = RateLimitingQueue::new(
        default_controller_rate_limiter(),
        QueueOptions::named("foo"),
    );
    named.add("foo");
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert_eq!(tasks, 3, "a second timer task, and a reporting task");
}

#[tokio::test(start_paused = true)]
async fn delayed_adds_report_retries_and_waiting_depth() {
    let recorder = Recorder::default();
    let queue = RateLimitingQueue::new(
        default_controller_rate_limiter(),
        QueueOptions::named("delayed").metrics(recorder.clone()),
    );
    queue.add_after("foo", Duration::from_millis(10));
    queue.add_after("bar", Duration::from_millis(20));
    assert_eq!(recorder.0.lock().retries, 2);
    assert_eq!(recorder.0.lock().waiting_depth, 2);
    advance(Duration::from_millis(15)).await;
    settle().await;
    assert_eq!(recorder.0.lock().waiting_depth, 1);
    queue.shut_down();
    assert_eq!(recorder.0.lock().waiting_depth, 0);
}

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_count_as_retries() {
    let recorder = Recorder::default();
    let queue = RateLimitingQueue::new(
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1)),
        QueueOptions::named("limited").metrics(recorder.clone()),
    );
    queue.add_rate_limited("foo");
    queue.add_rate_limited("foo");
    assert_eq!(recorder.0.lock().retries, 2);
    assert_eq!(queue.name(), "limited");
}

#[test]
fn named_queues_default_to_tracing_metrics() {
    let config = QueueOptions::named("deployments");
    assert!(format!("{config:?}").contains("deployments"));
    assert!(format!("{config:?}").contains("TracingMetrics"));
    assert!(!format!("{:?}", QueueOptions::default()).contains("TracingMetrics"));
}
