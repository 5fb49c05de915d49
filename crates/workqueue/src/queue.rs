//! The basic work queue: deduplication, the processing set, shutdown and drain.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use foldhash::fast::RandomState;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use crate::metrics::{QueueMetrics, TracingMetrics};

/// How often a queue with metrics reports its unfinished work (client-go's
/// `defaultUnfinishedWorkUpdatePeriod`).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// A queue's name and where its metrics go.
///
/// `QueueOptions::default()` is an unnamed queue without metrics (like client-go, where an
/// unnamed queue registers none). [`QueueOptions::named`] gives the queue a name, which labels
/// its metrics, and reports them as `tracing` events at TRACE level (target
/// `kinformer_workqueue::metrics`); [`QueueOptions::metrics`] sends them to another
/// [`QueueMetrics`] sink instead, such as `PrometheusMetrics` (feature `prometheus`). A queue
/// with metrics reports its unfinished work every 500ms, as client-go's does.
///
/// ```
/// use kinformer_workqueue::{QueueOptions, RateLimitingQueue, default_controller_rate_limiter};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = RateLimitingQueue::new(default_controller_rate_limiter(), QueueOptions::named("pods"));
/// queue.add("default/web".to_string());
/// assert_eq!(queue.len(), 1);
/// # }
/// ```
#[doc(alias = "TypedQueueConfig")]
#[derive(Clone)]
pub struct QueueOptions {
    name: Arc<str>,
    metrics: Option<Arc<dyn QueueMetrics>>,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            name: Arc::from(""),
            metrics: None,
        }
    }
}

impl fmt::Debug for QueueOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueOptions")
            .field("name", &self.name)
            .field("metrics", &self.metrics)
            .finish()
    }
}

impl QueueOptions {
    /// A named queue that reports its metrics as `tracing` events at TRACE level (target
    /// `kinformer_workqueue::metrics`), which cost next to nothing unless a subscriber asks for
    /// them.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: Arc::from(name.into()),
            metrics: Some(Arc::new(TracingMetrics)),
        }
    }

    /// Sends the queue's measurements to `metrics` instead.
    #[must_use]
    pub fn metrics(mut self, metrics: impl QueueMetrics) -> Self {
        self.metrics = Some(Arc::new(metrics));
        self
    }
}

/// A work queue for controllers: an item added many times before a worker takes it is handed
/// out once, and an item is never handed to two workers at the same time.
///
/// An item added while a worker processes it is remembered and handed out again after the worker
/// calls [`done`](Queue::done). Cloning a `Queue` is cheap and every clone is the same queue, so
/// each worker task holds its own clone.
///
/// After [`shut_down`](Queue::shut_down) new adds are ignored, the items already queued are still
/// handed out, and [`get`](Queue::get) returns `None` once none are left.
pub(crate) struct Queue<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    state: Mutex<State<T>>,
    /// One permit per item pushed, so a single add wakes a single worker.
    item_ready: Notify,
    /// Wakes `shut_down_with_drain` callers when the processing set empties or the drain is
    /// called off.
    drain_progress: Notify,
    name: Arc<str>,
    metrics: Option<Arc<dyn QueueMetrics>>,
}

/// The invariant (client-go's): every element of `queue` is in `dirty` and not in `processing`;
/// an item in both `dirty` and `processing` goes back to `queue` on `done`.
struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T, RandomState>,
    processing: HashSet<T, RandomState>,
    shutting_down: bool,
    drain: bool,
    /// Present only when metrics are on, so a queue without metrics never reads the clock.
    timing: Option<Timing<T>>,
}

struct Timing<T> {
    added_at: HashMap<T, Instant, RandomState>,
    processing_since: HashMap<T, Instant, RandomState>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("Queue")
            .field("name", &self.inner.name)
            .field("len", &state.queue.len())
            .field("dirty", &state.dirty.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

impl<T> Queue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// A queue configured by `options`: a name and a metrics sink, or neither.
    ///
    /// # Panics
    ///
    /// With metrics on, the queue starts a tokio task that reports unfinished work, so this
    /// panics when called outside a tokio runtime.
    pub(crate) fn new(config: QueueOptions) -> Self {
        let timing = config.metrics.as_ref().map(|_| Timing {
            added_at: HashMap::default(),
            processing_since: HashMap::default(),
        });
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::default(),
                processing: HashSet::default(),
                shutting_down: false,
                drain: false,
                timing,
            }),
            item_ready: Notify::new(),
            drain_progress: Notify::new(),
            name: config.name,
            metrics: config.metrics,
        });
        if inner.metrics.is_some() {
            let period = UNFINISHED_WORK_UPDATE_PERIOD;
            // The schedule starts now, not when the task is first polled.
            let first_report = Instant::now() + period;
            tokio::spawn(report_unfinished_work(
                Arc::downgrade(&inner),
                first_report,
                period,
            ));
        }
        Self { inner }
    }

    /// Marks `item` as needing processing. Does nothing if it is already waiting, or if the
    /// queue is shutting down; if a worker holds it right now, it is handed out again after that
    /// worker's [`done`](Queue::done).
    pub(crate) fn add(&self, item: T) {
        let mut guard = self.inner.state.lock();
        let state = &mut *guard;
        if state.shutting_down || state.dirty.contains(&item) {
            return;
        }
        state.dirty.insert(item.clone());
        if let (Some(metrics), Some(timing)) = (&self.inner.metrics, &mut state.timing) {
            timing
                .added_at
                .entry(item.clone())
                .or_insert_with(Instant::now);
            metrics.on_add(&self.inner.name, state.dirty.len());
        }
        if state.processing.contains(&item) {
            return;
        }
        state.queue.push_back(item);
        drop(guard);
        self.inner.item_ready.notify_one();
    }

    /// The number of items ready to be handed out (items waiting for a worker's `done` are not
    /// counted). For information only: never gate an `add` or `get` on it.
    pub(crate) fn len(&self) -> usize {
        self.inner.state.lock().queue.len()
    }

    /// Whether no item is ready to be handed out.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.state.lock().queue.is_empty()
    }

    /// Waits for an item to process and marks it as being processed. Returns `None` once the
    /// queue is shut down and no queued item is left: the worker should then stop.
    ///
    /// Call [`done`](Queue::done) with the item when finished with it, whatever the outcome.
    /// Dropping the future before it completes takes nothing from the queue.
    pub(crate) async fn get(&self) -> Option<T> {
        loop {
            if let Some(outcome) = self.try_take() {
                return outcome;
            }
            let mut item_ready = pin!(self.inner.item_ready.notified());
            // Registering before looking again is what makes an add between the two looks wake
            // this worker instead of being lost.
            item_ready.as_mut().enable();
            if let Some(outcome) = self.try_take() {
                return outcome;
            }
            item_ready.await;
        }
    }

    /// `Some(Some(item))` when an item was taken, `Some(None)` when shut down and empty, `None`
    /// when the caller has to wait.
    fn try_take(&self) -> Option<Option<T>> {
        let mut guard = self.inner.state.lock();
        let state = &mut *guard;
        let Some(item) = state.queue.pop_front() else {
            return state.shutting_down.then_some(None);
        };
        state.dirty.remove(&item);
        state.processing.insert(item.clone());
        if let (Some(metrics), Some(timing)) = (&self.inner.metrics, &mut state.timing) {
            let now = Instant::now();
            let queued_for = timing
                .added_at
                .remove(&item)
                .map_or(Duration::ZERO, |added| now.saturating_duration_since(added));
            timing.processing_since.insert(item.clone(), now);
            metrics.on_get(&self.inner.name, state.dirty.len(), queued_for);
        }
        Some(Some(item))
    }

    /// Marks `item` as processed. If it was added again while being processed, it goes back on
    /// the queue. An item that is not being processed is ignored.
    pub(crate) fn done(&self, item: &T) {
        let mut guard = self.inner.state.lock();
        let state = &mut *guard;
        if !state.processing.remove(item) {
            return;
        }
        if let (Some(metrics), Some(timing)) = (&self.inner.metrics, &mut state.timing)
            && let Some(since) = timing.processing_since.remove(item)
        {
            metrics.on_done(
                &self.inner.name,
                Instant::now().saturating_duration_since(since),
            );
        }
        let requeued = state.dirty.contains(item);
        if requeued {
            state.queue.push_back(item.clone());
        }
        let drained = state.drain && state.processing.is_empty();
        drop(guard);
        if requeued {
            self.inner.item_ready.notify_one();
        }
        if drained {
            self.inner.drain_progress.notify_waiters();
        }
    }

    /// Stops accepting new items and tells idle workers to stop. Items already queued are still
    /// handed out; [`get`](Queue::get) returns `None` once they are gone. Also ends a pending
    /// drain without waiting further.
    pub(crate) fn shut_down(&self) {
        {
            let mut state = self.inner.state.lock();
            state.drain = false;
            state.shutting_down = true;
        }
        self.inner.item_ready.notify_waiters();
        self.inner.drain_progress.notify_waiters();
    }

    /// Shuts down like [`shut_down`](Queue::shut_down), and makes
    /// [`wait_until_drained`](Queue::wait_until_drained) wait for the items handed out.
    pub(crate) fn begin_drain(&self) {
        {
            let mut state = self.inner.state.lock();
            state.drain = true;
            state.shutting_down = true;
        }
        self.inner.item_ready.notify_waiters();
    }

    /// Waits until every item handed out has been marked [`done`](Queue::done), or until a
    /// later [`shut_down`](Queue::shut_down) calls the drain off. As in client-go, items still
    /// queued but not yet handed out are not waited for.
    pub(crate) async fn wait_until_drained(&self) {
        loop {
            let mut progress = pin!(self.inner.drain_progress.notified());
            progress.as_mut().enable();
            {
                let state = self.inner.state.lock();
                if state.processing.is_empty() || !state.drain {
                    return;
                }
            }
            progress.await;
        }
    }

    /// Whether [`shut_down`](Queue::shut_down) or
    /// [`begin_drain`](Queue::begin_drain) has been called.
    pub(crate) fn shutting_down(&self) -> bool {
        self.inner.state.lock().shutting_down
    }

    /// The queue's name from its [`QueueOptions`] (empty when unnamed).
    pub(crate) fn name(&self) -> &str {
        &self.inner.name
    }

    /// The metrics sink, for the layers built on this queue.
    pub(crate) fn metrics(&self) -> Option<&Arc<dyn QueueMetrics>> {
        self.inner.metrics.as_ref()
    }
}

/// Reports in-flight work every `period` until the queue shuts down or is dropped. It holds only
/// a weak reference so that it never keeps a forgotten queue alive.
async fn report_unfinished_work<T>(queue: Weak<Inner<T>>, first_report: Instant, period: Duration)
where
    T: Eq + Hash,
{
    let mut ticker = tokio::time::interval_at(first_report, period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(inner) = queue.upgrade() else {
            return;
        };
        let state = inner.state.lock();
        if state.shutting_down {
            return;
        }
        if let (Some(metrics), Some(timing)) = (&inner.metrics, &state.timing) {
            let now = Instant::now();
            let mut unfinished = Duration::ZERO;
            let mut longest_running = Duration::ZERO;
            for since in timing.processing_since.values() {
                let age = now.saturating_duration_since(*since);
                unfinished = unfinished.saturating_add(age);
                longest_running = longest_running.max(age);
            }
            metrics.on_unfinished_work(&inner.name, unfinished, longest_running);
        }
    }
}
