//! Metrics hooks: what a queue reports, and the tracing-based default.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// Receives a queue's measurements as they happen.
///
/// One value of this trait can serve every queue in a process: each hook is told the queue's
/// name. Every hook has an empty default body, so an implementation overrides only what it
/// records. Hooks run while the queue's lock is held (as in client-go), so they must be quick and
/// must never call back into the queue.
///
/// The hooks correspond to client-go's workqueue metrics:
///
/// | hook                   | client-go metric                                                    |
/// |------------------------|---------------------------------------------------------------------|
/// | [`on_add`]             | `workqueue_adds_total`, `workqueue_depth`                           |
/// | [`on_get`]             | `workqueue_depth`, `workqueue_queue_duration_seconds`               |
/// | [`on_done`]            | `workqueue_work_duration_seconds`                                   |
/// | [`on_unfinished_work`] | `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds` |
/// | [`on_retry`]           | `workqueue_retries_total`                                           |
/// | [`on_waiting_depth`]   | the delaying queue's waiting-for-queue depth                        |
///
/// [`on_add`]: QueueMetrics::on_add
/// [`on_get`]: QueueMetrics::on_get
/// [`on_done`]: QueueMetrics::on_done
/// [`on_unfinished_work`]: QueueMetrics::on_unfinished_work
/// [`on_retry`]: QueueMetrics::on_retry
/// [`on_waiting_depth`]: QueueMetrics::on_waiting_depth
#[doc(alias = "MetricsProvider")]
pub trait QueueMetrics: Send + Sync + Debug + 'static {
    /// An item became dirty (a deduplicated add is not counted); `depth` is the number of items
    /// now waiting to be handed out, including those that wait for a worker's `done`.
    fn on_add(&self, queue: &str, depth: usize) {
        let _ = (queue, depth);
    }

    /// An item was handed to a worker after waiting `queued_for` since it was added.
    fn on_get(&self, queue: &str, depth: usize, queued_for: Duration) {
        let _ = (queue, depth, queued_for);
    }

    /// A worker finished an item it had held for `worked_for`.
    fn on_done(&self, queue: &str, worked_for: Duration) {
        let _ = (queue, worked_for);
    }

    /// Periodic report of in-flight work: the summed age of every item being processed, and the
    /// age of the oldest.
    fn on_unfinished_work(&self, queue: &str, unfinished: Duration, longest_running: Duration) {
        let _ = (queue, unfinished, longest_running);
    }

    /// An item was scheduled for a delayed (usually rate-limited) add.
    fn on_retry(&self, queue: &str) {
        let _ = queue;
    }

    /// The number of items the delaying queue holds until their time comes.
    fn on_waiting_depth(&self, queue: &str, depth: usize) {
        let _ = (queue, depth);
    }
}

impl<M: QueueMetrics + ?Sized> QueueMetrics for Arc<M> {
    fn on_add(&self, queue: &str, depth: usize) {
        (**self).on_add(queue, depth);
    }
    fn on_get(&self, queue: &str, depth: usize, queued_for: Duration) {
        (**self).on_get(queue, depth, queued_for);
    }
    fn on_done(&self, queue: &str, worked_for: Duration) {
        (**self).on_done(queue, worked_for);
    }
    fn on_unfinished_work(&self, queue: &str, unfinished: Duration, longest_running: Duration) {
        (**self).on_unfinished_work(queue, unfinished, longest_running);
    }
    fn on_retry(&self, queue: &str) {
        (**self).on_retry(queue);
    }
    fn on_waiting_depth(&self, queue: &str, depth: usize) {
        (**self).on_waiting_depth(queue, depth);
    }
}

/// The default metrics sink of a named queue: every measurement becomes a `tracing` event at
/// TRACE level (target `kinformer_workqueue::metrics`), so it costs next to nothing unless a
/// subscriber asks for it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TracingMetrics;

impl QueueMetrics for TracingMetrics {
    fn on_add(&self, queue: &str, depth: usize) {
        tracing::trace!(target: "kinformer_workqueue::metrics", queue, depth, "add");
    }

    fn on_get(&self, queue: &str, depth: usize, queued_for: Duration) {
        tracing::trace!(
            target: "kinformer_workqueue::metrics",
            queue,
            depth,
            queued_for_seconds = queued_for.as_secs_f64(),
            "get"
        );
    }

    fn on_done(&self, queue: &str, worked_for: Duration) {
        tracing::trace!(
            target: "kinformer_workqueue::metrics",
            queue,
            worked_for_seconds = worked_for.as_secs_f64(),
            "done"
        );
    }

    fn on_unfinished_work(&self, queue: &str, unfinished: Duration, longest_running: Duration) {
        tracing::trace!(
            target: "kinformer_workqueue::metrics",
            queue,
            unfinished_work_seconds = unfinished.as_secs_f64(),
            longest_running_processor_seconds = longest_running.as_secs_f64(),
            "unfinished work"
        );
    }

    fn on_retry(&self, queue: &str) {
        tracing::trace!(target: "kinformer_workqueue::metrics", queue, "retry");
    }

    fn on_waiting_depth(&self, queue: &str, depth: usize) {
        tracing::trace!(target: "kinformer_workqueue::metrics", queue, depth, "waiting depth");
    }
}
