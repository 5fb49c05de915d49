//! [`PrometheusMetrics`]: the queue metrics client-go exports, under client-go's names, through
//! the prometheus-client crate.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, atomic::AtomicU64},
    time::Duration,
};

use parking_lot::RwLock;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use crate::QueueMetrics;

/// The one label of every queue metric: the queue's name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    name: String,
}

type Seconds = Gauge<f64, AtomicU64>;

fn latency_histogram() -> Histogram {
    // client-go's buckets: 10ns to 10s, a decade apart.
    Histogram::new(exponential_buckets(10e-9, 10.0, 10))
}

/// The families, registered once.
#[derive(Clone)]
struct Families {
    depth: Family<QueueLabel, Gauge>,
    adds: Family<QueueLabel, Counter>,
    latency: Family<QueueLabel, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabel, Histogram, fn() -> Histogram>,
    unfinished: Family<QueueLabel, Seconds>,
    longest_running: Family<QueueLabel, Seconds>,
    retries: Family<QueueLabel, Counter>,
}

/// One queue's metrics, taken from the families once so that recording needs no label lookup.
struct Handles {
    depth: Gauge,
    adds: Counter,
    latency: Histogram,
    work_duration: Histogram,
    unfinished: Seconds,
    longest_running: Seconds,
    retries: Counter,
}

/// Work queue metrics for Prometheus, named and labelled as client-go's
/// (`k8s.io/component-base/metrics/prometheus/workqueue`), so existing dashboards and alerts
/// work unchanged. Every series carries the queue's name as its `name` label.
///
/// | metric | type |
/// | --- | --- |
/// | `workqueue_depth` | gauge |
/// | `workqueue_adds_total` | counter |
/// | `workqueue_queue_duration_seconds` | histogram, 10ns to 10s |
/// | `workqueue_work_duration_seconds` | histogram, 10ns to 10s |
/// | `workqueue_unfinished_work_seconds` | gauge |
/// | `workqueue_longest_running_processor_seconds` | gauge |
/// | `workqueue_retries_total` | counter |
///
/// Register once per registry, then give every named queue a clone:
///
/// ```
/// use kinformer_workqueue::{
///     PrometheusMetrics, QueueOptions, RateLimitingQueue, default_controller_rate_limiter,
/// };
/// use prometheus_client::{encoding::text::encode, registry::Registry};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut registry = Registry::default();
/// let metrics = PrometheusMetrics::register(&mut registry);
/// let options = QueueOptions::named("pods").metrics(metrics.clone());
/// let queue = RateLimitingQueue::new(default_controller_rate_limiter(), options);
/// queue.add("default/web".to_string());
///
/// let mut text = String::new();
/// encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_adds_total{name="pods"} 1"#));
/// assert!(text.contains(r#"workqueue_depth{name="pods"} 1"#));
/// # }
/// ```
#[derive(Clone)]
pub struct PrometheusMetrics {
    families: Families,
    handles: Arc<RwLock<HashMap<String, Arc<Handles>>>>,
}

impl fmt::Debug for PrometheusMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusMetrics")
            .field("queues", &self.handles.read().len())
            .finish_non_exhaustive()
    }
}

impl PrometheusMetrics {
    /// Registers the work queue metrics in `registry`; clones of the result record into them.
    pub fn register(registry: &mut Registry) -> Self {
        let families = Families {
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            work_duration: Family::new_with_constructor(latency_histogram),
            unfinished: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            families.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            families.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            families.latency.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            families.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of \
             stuck threads by observing the rate at which this increases.",
            families.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            families.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            families.retries.clone(),
        );
        Self {
            families,
            handles: Arc::default(),
        }
    }

    /// Runs `record` on the metrics of queue `name`, created on its first record. The common
    /// case is a read lock and a lookup, with no reference counting on the handles.
    fn with<R>(&self, name: &str, record: impl FnOnce(&Handles) -> R) -> R {
        if let Some(handles) = self.handles.read().get(name) {
            return record(handles);
        }
        let label = QueueLabel {
            name: name.to_owned(),
        };
        let families = &self.families;
        let handles = Arc::new(Handles {
            depth: families.depth.get_or_create(&label).clone(),
            adds: families.adds.get_or_create(&label).clone(),
            latency: families.latency.get_or_create(&label).clone(),
            work_duration: families.work_duration.get_or_create(&label).clone(),
            unfinished: families.unfinished.get_or_create(&label).clone(),
            longest_running: families.longest_running.get_or_create(&label).clone(),
            retries: families.retries.get_or_create(&label).clone(),
        });
        let handles = Arc::clone(
            self.handles
                .write()
                .entry(name.to_owned())
                .or_insert(handles),
        );
        record(&handles)
    }
}

impl QueueMetrics for PrometheusMetrics {
    fn on_add(&self, queue: &str, depth: usize) {
        self.with(queue, |handles| {
            handles.adds.inc();
            handles.depth.set(gauge_value(depth));
        });
    }

    fn on_get(&self, queue: &str, depth: usize, queued_for: Duration) {
        self.with(queue, |handles| {
            handles.depth.set(gauge_value(depth));
            handles.latency.observe(queued_for.as_secs_f64());
        });
    }

    fn on_done(&self, queue: &str, worked_for: Duration) {
        self.with(queue, |handles| {
            handles.work_duration.observe(worked_for.as_secs_f64());
        });
    }

    fn on_unfinished_work(&self, queue: &str, unfinished: Duration, longest_running: Duration) {
        self.with(queue, |handles| {
            handles.unfinished.set(unfinished.as_secs_f64());
            handles.longest_running.set(longest_running.as_secs_f64());
        });
    }

    fn on_retry(&self, queue: &str) {
        self.with(queue, |handles| handles.retries.inc());
    }
}

fn gauge_value(depth: usize) -> i64 {
    i64::try_from(depth).unwrap_or(i64::MAX)
}
