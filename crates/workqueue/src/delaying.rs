//! The delaying queue: items added after a delay, kept in a timer heap by one task.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::RandomState;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::queue::{Queue, QueueOptions};

/// A deadline so far away that it never fires; used when `now + delay` does not fit in an
/// `Instant` (tokio uses the same horizon for its own far-future timers).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// A [`Queue`] that can also add an item after a delay, so that failed items are retried
/// without a hot loop.
///
/// One tokio task owns the timers: it sleeps until the earliest deadline, is woken early only when
/// an earlier one arrives, and stops when the queue shuts down or the last handle is dropped. An
/// item scheduled twice keeps the earlier deadline.
pub(crate) struct DelayingQueue<T> {
    queue: Queue<T>,
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    timers: Arc<Timers<T>>,
    timer_task: AbortHandle,
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        self.timer_task.abort();
    }
}

struct Timers<T> {
    state: Mutex<Waiting<T>>,
    /// Wakes the timer task when a new deadline is earlier than the one it sleeps towards.
    earlier_deadline: Notify,
}

/// Entries superseded by an earlier deadline stay in `heap` until they surface and are skipped
/// there: `deadlines` says which entry is current for each item.
struct Waiting<T> {
    heap: BinaryHeap<Entry<T>>,
    deadlines: HashMap<T, (Instant, u64), RandomState>,
    next_seq: u64,
}

struct Entry<T> {
    ready_at: Instant,
    /// Ties on `ready_at` fire in the order they were scheduled.
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.ready_at, self.seq) == (other.ready_at, other.seq)
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    // Reversed, so that the max-heap's top is the earliest deadline.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

impl<T> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("queue", &self.queue)
            .field("waiting", &self.shared.timers.state.lock().deadlines.len())
            .finish()
    }
}

impl<T> DelayingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// A delaying queue configured by `options` (a name and a metrics sink, or neither).
    ///
    /// # Panics
    ///
    /// Panics when called outside a tokio runtime, because it starts the timer task.
    pub(crate) fn new(config: QueueOptions) -> Self {
        let queue = Queue::new(config);
        let timers = Arc::new(Timers {
            state: Mutex::new(Waiting {
                heap: BinaryHeap::new(),
                deadlines: HashMap::default(),
                next_seq: 0,
            }),
            earlier_deadline: Notify::new(),
        });
        let timer_task =
            tokio::spawn(fire_when_ready(Arc::clone(&timers), queue.clone())).abort_handle();
        Self {
            queue,
            shared: Arc::new(Shared { timers, timer_task }),
        }
    }

    /// Adds `item` once `delay` has passed; a zero delay adds it now. If the item is already
    /// waiting, the earlier of the two deadlines is kept. Ignored while shutting down.
    pub(crate) fn add_after(&self, item: T, delay: Duration) {
        if self.queue.shutting_down() {
            return;
        }
        if let Some(metrics) = self.queue.metrics() {
            metrics.on_retry(self.queue.name());
        }
        if delay.is_zero() {
            self.queue.add(item);
            return;
        }
        let now = Instant::now();
        let ready_at = now.checked_add(delay).unwrap_or_else(|| now + FAR_FUTURE);
        let wake_timer = {
            let mut waiting = self.shared.timers.state.lock();
            let wake_timer = waiting.schedule(item, ready_at);
            if let Some(metrics) = self.queue.metrics() {
                metrics.on_waiting_depth(self.queue.name(), waiting.deadlines.len());
            }
            wake_timer
        };
        if wake_timer {
            self.shared.timers.earlier_deadline.notify_one();
        }
    }

    /// The number of items waiting for their deadline (not yet in the queue).
    pub(crate) fn waiting_len(&self) -> usize {
        self.shared.timers.state.lock().deadlines.len()
    }

    /// See [`Queue::add`].
    pub(crate) fn add(&self, item: T) {
        self.queue.add(item);
    }

    /// See [`Queue::get`].
    pub(crate) async fn get(&self) -> Option<T> {
        self.queue.get().await
    }

    /// See [`Queue::done`].
    pub(crate) fn done(&self, item: &T) {
        self.queue.done(item);
    }

    /// See [`Queue::len`]; items still waiting for their deadline are not counted.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// See [`Queue::is_empty`].
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// See [`Queue::shut_down`]. Also stops the timer task and drops every waiting item.
    pub(crate) fn shut_down(&self) {
        self.queue.shut_down();
        self.stop_timers();
    }

    /// Shuts down, then waits until every item handed out is done (see
    /// [`Queue::wait_until_drained`]). Waiting items are dropped, not drained.
    pub(crate) async fn shut_down_with_drain(&self) {
        self.queue.begin_drain();
        self.stop_timers();
        self.queue.wait_until_drained().await;
    }

    /// See [`Queue::shutting_down`].
    pub(crate) fn shutting_down(&self) -> bool {
        self.queue.shutting_down()
    }

    /// See [`Queue::name`].
    pub(crate) fn name(&self) -> &str {
        self.queue.name()
    }

    fn stop_timers(&self) {
        self.shared.timer_task.abort();
        let mut waiting = self.shared.timers.state.lock();
        waiting.heap.clear();
        waiting.deadlines.clear();
        if let Some(metrics) = self.queue.metrics() {
            metrics.on_waiting_depth(self.queue.name(), 0);
        }
    }
}

impl<T> Waiting<T>
where
    T: Clone + Eq + Hash,
{
    /// Records the deadline unless an earlier one is already set; returns whether the timer
    /// task must wake up because this deadline precedes everything it knows.
    fn schedule(&mut self, item: T, ready_at: Instant) -> bool {
        if let Some((current, _)) = self.deadlines.get(&item)
            && *current <= ready_at
        {
            return false;
        }
        let wake_timer = self.heap.peek().is_none_or(|top| ready_at < top.ready_at);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.deadlines.insert(item.clone(), (ready_at, seq));
        self.heap.push(Entry {
            ready_at,
            seq,
            item,
        });
        wake_timer
    }

    /// Removes every item due at `now`, in deadline order, and returns them with the next
    /// deadline to sleep towards.
    fn take_ready(&mut self, now: Instant) -> (Vec<T>, Option<Instant>) {
        let mut ready = Vec::new();
        while let Some(top) = self.heap.peek() {
            if top.ready_at > now {
                break;
            }
            let Some(entry) = self.heap.pop() else {
                break;
            };
            if self.deadlines.get(&entry.item) == Some(&(entry.ready_at, entry.seq)) {
                self.deadlines.remove(&entry.item);
                ready.push(entry.item);
            }
        }
        (ready, self.heap.peek().map(|top| top.ready_at))
    }
}

/// The timer task: moves items into the queue as their deadlines pass. It is aborted on shutdown
/// and when the last queue handle is dropped.
async fn fire_when_ready<T>(timers: Arc<Timers<T>>, queue: Queue<T>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    loop {
        let mut earlier_deadline = pin!(timers.earlier_deadline.notified());
        // Registered before reading the heap, so a deadline scheduled after the read wakes us.
        earlier_deadline.as_mut().enable();
        let (ready, next_deadline) = {
            let mut waiting = timers.state.lock();
            let taken = waiting.take_ready(Instant::now());
            if !taken.0.is_empty()
                && let Some(metrics) = queue.metrics()
            {
                metrics.on_waiting_depth(queue.name(), waiting.deadlines.len());
            }
            taken
        };
        for item in ready {
            queue.add(item);
        }
        match next_deadline {
            // Either outcome means "look at the heap again".
            Some(deadline) => {
                let _ = tokio::time::timeout_at(deadline, earlier_deadline).await;
            }
            None => earlier_deadline.await,
        }
    }
}
