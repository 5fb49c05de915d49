//! The Prometheus sink, scraped as text: client-go's metric names and `name` label, and
//! values that follow what the queue did (adds, depth, wait and work durations, retries, and
//! unfinished work while an item is held), on the paused clock.

#![cfg(feature = "prometheus")]

use std::time::Duration;

use kinformer_workqueue::{
    ItemExponentialFailureRateLimiter, PrometheusMetrics, QueueOptions, RateLimitingQueue,
};
use prometheus_client::{encoding::text::encode, registry::Registry};

fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).expect("the registry encodes");
    text
}

/// The value of the series `series` (name and labels exactly as exposed).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.parse().ok())
}

#[tokio::test(start_paused = true)]
async fn a_queue_reports_under_client_gos_names() {
    let mut registry = Registry::default();
    let metrics = PrometheusMetrics::register(&mut registry);
    let queue = RateLimitingQueue::new(
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1)),
        QueueOptions::named("pods").metrics(metrics.clone()),
    );
    queue.add("a".to_owned());
    queue.add("b".to_owned());
    queue.add("a".to_owned()); // deduplicated: not an add
    tokio::time::sleep(Duration::from_secs(2)).await; // virtual time: "a" waits two seconds

    let text = scrape(&registry);
    assert_eq!(
        value(&text, r#"workqueue_adds_total{name="pods"}"#),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value(&text, r#"workqueue_depth{name="pods"}"#),
        Some(2.0),
        "{text}"
    );

    let item = queue.get().await.expect("an item");
    assert_eq!(item, "a");
    tokio::time::sleep(Duration::from_secs(3)).await; // virtual time: held three seconds
    let text = scrape(&registry);
    assert_eq!(
        value(&text, r#"workqueue_depth{name="pods"}"#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            r#"workqueue_queue_duration_seconds_count{name="pods"}"#
        ),
        Some(1.0),
        "{text}"
    );
    // Two seconds in the queue lands between the 1s and 10s buckets.
    assert_eq!(
        value(
            &text,
            r#"workqueue_queue_duration_seconds_bucket{le="1.0",name="pods"}"#
        ),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            r#"workqueue_queue_duration_seconds_bucket{le="10.0",name="pods"}"#
        ),
        Some(1.0),
        "{text}"
    );
    let unfinished = value(&text, r#"workqueue_unfinished_work_seconds{name="pods"}"#);
    assert!(unfinished.is_some_and(|seconds| seconds >= 2.0), "{text}");
    let longest = value(
        &text,
        r#"workqueue_longest_running_processor_seconds{name="pods"}"#,
    );
    assert!(longest.is_some_and(|seconds| seconds >= 2.0), "{text}");

    queue.done(&item);
    queue.add_rate_limited(item);
    let text = scrape(&registry);
    assert_eq!(
        value(
            &text,
            r#"workqueue_work_duration_seconds_count{name="pods"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(&text, r#"workqueue_retries_total{name="pods"}"#),
        Some(1.0),
        "{text}"
    );
    // Every family has client-go's help text and type.
    for (family, kind) in [
        ("workqueue_depth", "gauge"),
        ("workqueue_adds", "counter"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
        ("workqueue_unfinished_work_seconds", "gauge"),
        ("workqueue_longest_running_processor_seconds", "gauge"),
        ("workqueue_retries", "counter"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} {kind}")),
            "{family}: {text}"
        );
    }
    queue.shut_down();
}
