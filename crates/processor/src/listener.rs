//! One registration's end of the processor: its buffer, its consumer (a handler thread or
//! task, or a stream), its counters, its sync tracking and its resync bookkeeping. Its
//! handle, [`Registration`](crate::Registration), is in `registration.rs`.

use std::{
    collections::VecDeque,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll, Waker},
    thread,
    time::Duration,
};

use kinformer_wait::catch_panic_sync;
use parking_lot::{Condvar, Mutex, MutexGuard};
use tokio::{sync::Notify, time::Instant};
use tracing::{Instrument as _, debug, warn};

use crate::{
    Error, HandlerExecutor, Notification, ResourceEventHandler, Result, UpstreamSynced,
    buffer::{CacheSnapshot, Pushed, RingBuffer},
    signal::Latch,
};

/// A snapshot of one listener's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ListenerStats {
    /// Notifications handed to the handler (or yielded by the stream), panicked ones included.
    pub delivered: u64,
    /// Handler calls that panicked; each was logged and its notification skipped.
    pub panicked: u64,
    /// Notifications waiting in the buffer now.
    pub buffered: usize,
    /// The most notifications the buffer has held at once.
    pub peak_buffered: usize,
    /// Notifications a bounded buffer dropped because it was full (always 0 when unbounded).
    /// Under [`Overflow::Resync`](crate::Overflow::Resync) a catch-up makes up for them.
    pub dropped: u64,
    /// Times an [`Overflow::Resync`](crate::Overflow::Resync) listener was brought level with
    /// the cache after its buffer overflowed.
    pub resyncs: u64,
    /// Slots the buffer has allocated now; it shrinks again once a backlog drains.
    pub buffer_capacity: usize,
    /// Notifications a [`BufferPolicy::CoalesceByKey`](crate::BufferPolicy::CoalesceByKey) buffer merged into a newer one for the
    /// same object (or cancelled, an add with its delete): never delivered, never needed. With
    /// `delivered`, `dropped` and `buffered` it accounts for every notification distributed.
    pub coalesced: u64,
    /// How long the oldest notification not yet handed to the consumer has waited: how far
    /// behind the handler is, in time. `None` when nothing waits.
    pub oldest_pending: Option<Duration>,
    /// How long the handler's current call has been running; `None` between calls and for
    /// streams. A value that only grows is a stuck handler.
    pub in_handler: Option<Duration>,
    /// How long distributors have waited, in all, for this listener's full buffer to make
    /// room ([`Overflow::Block`](crate::Overflow::Block)), the wait going on now included:
    /// time the informer stood still for it.
    pub blocked: Duration,
}

/// The most notifications a handler thread takes from the ring per lock acquisition.
const HANDOFF_BATCH: usize = 64;

/// When a push wakes a sleeping consumer.
#[derive(Clone, Copy)]
enum Wake {
    /// At once: the notification may be the last for a while.
    Now,
    /// Once a handoff batch waits: more notifications follow, and the distributor wakes the
    /// consumer when its batch ends. Under a backlog this turns a futex wake (and a context
    /// switch on each side) per notification into one per [`HANDOFF_BATCH`].
    WhenBatchFull,
}

/// The state guarded by the buffer's lock.
struct Queue<K> {
    ring: RingBuffer<K>,
    closed: bool,
    /// Whether the handler thread sleeps on the condvar, so pushes notify only when needed.
    thread_waiting: bool,
    /// Whether a distributor waits for room ([`Overflow::Block`](crate::Overflow::Block)), so
    /// the consumer's takes notify `room` only when needed.
    distributor_waiting: bool,
    /// The task of a stream consumer waiting for the next notification.
    waker: Option<Waker>,
    /// The most notifications pending at once, the handler thread's batch included.
    peak: usize,
}

/// An optional instant in an atomic: nanoseconds since an epoch, plus one (zero is none).
struct Stamp(AtomicU64);

impl Stamp {
    const NONE: u64 = 0;

    fn new() -> Self {
        Self(AtomicU64::new(Self::NONE))
    }

    fn set(&self, since_epoch: Option<Duration>) {
        let value = since_epoch.map_or(Self::NONE, |elapsed| {
            u64::try_from(elapsed.as_nanos())
                .unwrap_or(u64::MAX - 1)
                .saturating_add(1)
        });
        self.0.store(value, Ordering::Relaxed);
    }

    fn get(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            Self::NONE => None,
            value => Some(Duration::from_nanos(value - 1)),
        }
    }
}

struct ResyncState {
    requested: Duration,
    period: Duration,
    next: Instant,
}

pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    queue: Mutex<Queue<K>>,
    ready: Condvar,
    /// Signalled when the consumer takes notifications while a distributor waits for room.
    room: Condvar,
    /// Nanoseconds distributors have spent waiting for room.
    blocked_nanos: AtomicU64,
    /// When the wait for room going on now began, on `thread_epoch`'s clock.
    waiting_since: Stamp,
    /// Mirrors `Queue::closed` for the handler thread, which checks it between the
    /// notifications of a batch without taking the lock.
    closed: AtomicBool,
    /// Notifications the handler thread has taken from the ring but not yet delivered.
    in_hand: AtomicUsize,
    /// A deferred push left the consumer asleep; the batch's end must wake it.
    wake_owed: AtomicBool,
    delivered: AtomicU64,
    panicked: AtomicU64,
    dropped: AtomicU64,
    coalesced: AtomicU64,
    /// The instant `queued_at` stamps count from (the distributor's clock: tokio's, so paused
    /// in tests).
    epoch: Instant,
    /// When the oldest notification in the handler thread's batch was queued.
    oldest_in_hand: Stamp,
    /// The handler thread's own clock, for `call_started`.
    thread_epoch: std::time::Instant,
    /// When the handler's current call began, on `thread_epoch`'s clock.
    call_started: Stamp,
    /// Initial-list adds given to this listener and not yet finished by its consumer
    /// (client-go's `SingleFileTracker` count).
    initial_pending: AtomicU64,
    /// Latched once synced: later initial-list adds (none are expected) cannot unsync it.
    synced: AtomicBool,
    /// Woken when `initial_pending` reaches zero and when the listener stops.
    pub(crate) progress: Notify,
    pub(crate) upstream: UpstreamSynced,
    pub(crate) stopped: Latch,
    resync: Mutex<ResyncState>,
    /// Whether the last `should_resync` found this listener due; sync notifications (a
    /// resync, or an unchanged object in a relist) go only to listeners for which this is set.
    /// New listeners start not syncing: in client-go they start syncing, and since only a
    /// resync check clears the mark, a handler without a resync period received every
    /// unchanged object after every relist.
    syncing: AtomicBool,
    /// The handler, until the processor starts the listener's thread.
    handler: Mutex<Option<Box<dyn ResourceEventHandler<K>>>>,
    /// Whether the consumer is a handler thread this crate owns (rather than a stream).
    pub(crate) has_thread: bool,
}

/// A listener's resync periods: as requested, and as in force.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResyncPeriods {
    pub(crate) requested: Duration,
    pub(crate) period: Duration,
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        id: u64,
        name: Arc<str>,
        ring: RingBuffer<K>,
        upstream: UpstreamSynced,
        resync: ResyncPeriods,
        now: Instant,
        handler: Option<Box<dyn ResourceEventHandler<K>>>,
    ) -> Self {
        let has_thread = handler.is_some();
        Self {
            id,
            name,
            queue: Mutex::new(Queue {
                ring,
                closed: false,
                thread_waiting: false,
                distributor_waiting: false,
                waker: None,
                peak: 0,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            blocked_nanos: AtomicU64::new(0),
            waiting_since: Stamp::new(),
            closed: AtomicBool::new(false),
            in_hand: AtomicUsize::new(0),
            wake_owed: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
            epoch: now,
            oldest_in_hand: Stamp::new(),
            thread_epoch: std::time::Instant::now(),
            call_started: Stamp::new(),
            initial_pending: AtomicU64::new(0),
            synced: AtomicBool::new(false),
            progress: Notify::new(),
            upstream,
            stopped: Latch::default(),
            resync: Mutex::new(ResyncState {
                requested: resync.requested,
                period: resync.period,
                next: now + resync.period,
            }),
            syncing: AtomicBool::new(false),
            handler: Mutex::new(handler),
            has_thread,
        }
    }

    /// Queues a notification without ever waiting for the consumer, and wakes the consumer if
    /// it sleeps.
    pub(crate) fn add(&self, notification: Notification<K>) {
        self.push(notification, Wake::Now);
    }

    /// Queues a notification like [`add`](Self::add), but wakes a sleeping consumer only once
    /// [`HANDOFF_BATCH`] notifications wait for it; the caller owes a
    /// [`wake_pending`](Self::wake_pending) when its batch ends.
    pub(crate) fn add_deferred(&self, notification: Notification<K>) {
        self.push(notification, Wake::WhenBatchFull);
    }

    /// Wakes the consumer if a deferred push left it sleeping with notifications waiting. A
    /// listener whose consumer was busy at every deferred push owes no wake, and costs no lock.
    pub(crate) fn wake_pending(&self) {
        if !self.wake_owed.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut queue = self.queue.lock();
        if queue.ring.len() == 0 {
            return;
        }
        let wake_thread = queue.thread_waiting;
        let waker = queue.waker.take();
        drop(queue);
        self.wake_consumer(wake_thread, waker);
    }

    fn wake_consumer(&self, wake_thread: bool, waker: Option<Waker>) {
        if wake_thread {
            self.ready.notify_one();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn push(&self, notification: Notification<K>, wake: Wake) {
        if notification.is_in_initial_list() {
            // Counted before it is queued, so the count can never read zero while an initial
            // notification is on its way (client-go's `syncTracker.Start`).
            self.initial_pending.fetch_add(1, Ordering::AcqRel);
        }
        let mut queue = self.queue.lock();
        if let Some(deadline) = queue.ring.must_wait() {
            self.wait_for_room(&mut queue, deadline);
        }
        if queue.closed {
            drop(queue);
            if notification.is_in_initial_list() {
                self.finish_initial();
            }
            return;
        }
        let pushed = queue.ring.push(notification, Instant::now());
        let pending = queue.ring.len() + self.in_hand.load(Ordering::Relaxed);
        queue.peak = queue.peak.max(pending);
        let wake_now = match wake {
            Wake::Now => true,
            Wake::WhenBatchFull => queue.ring.len() >= HANDOFF_BATCH,
        };
        let consumer_waits = queue.thread_waiting || queue.waker.is_some();
        if !wake_now && consumer_waits {
            self.wake_owed.store(true, Ordering::Release);
        }
        let wake_thread = wake_now && queue.thread_waiting;
        let waker = if wake_now { queue.waker.take() } else { None };
        drop(queue);
        self.wake_consumer(wake_thread, waker);
        if let Pushed::Coalesced {
            vanished,
            cancelled_initial,
        } = pushed
        {
            self.coalesced.fetch_add(vanished, Ordering::Relaxed);
            if cancelled_initial {
                // The handler will never see that add; it counts as handled.
                self.finish_initial();
            }
        }
        if let Pushed::Dropped(lost) = pushed {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                // Logging at 1, 2, 4, 8... keeps a persistently full buffer visible without
                // flooding the log.
                warn!(listener = %self.name, dropped, "listener buffer full, dropping notifications");
            }
            if lost.is_in_initial_list() {
                // A dropped initial add will never be processed; counting it as finished keeps
                // has_synced reachable.
                self.finish_initial();
            }
        }
    }

    /// Waits, for at most `deadline`, until the consumer has made room or the listener closes.
    /// The consumer is woken first: a batch may have deferred its wake.
    fn wait_for_room(&self, queue: &mut MutexGuard<'_, Queue<K>>, deadline: Duration) {
        let started = std::time::Instant::now();
        let until = started + deadline;
        self.waiting_since
            .set(Some(started.saturating_duration_since(self.thread_epoch)));
        while queue.ring.must_wait().is_some() && !queue.closed {
            let wake_thread = queue.thread_waiting;
            let waker = queue.waker.take();
            if wake_thread {
                self.ready.notify_one();
            }
            if let Some(waker) = waker {
                waker.wake();
            }
            queue.distributor_waiting = true;
            let timed_out = self.room.wait_until(queue, until).timed_out();
            queue.distributor_waiting = false;
            if timed_out {
                break;
            }
        }
        let waited = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.blocked_nanos.fetch_add(waited, Ordering::Relaxed);
        self.waiting_since.set(None);
    }

    /// Tells a distributor waiting for room that there is some; called under the lock after
    /// the consumer took notifications.
    fn made_room(&self, queue: &Queue<K>) {
        if queue.distributor_waiting {
            self.room.notify_all();
        }
    }

    /// Closes the buffer: pending notifications are discarded, as client-go's listener does when
    /// its `addCh` closes, and the consumer exits after its current notification.
    pub(crate) fn close(&self) {
        let mut queue = self.queue.lock();
        if queue.closed {
            return;
        }
        queue.closed = true;
        self.closed.store(true, Ordering::Release);
        self.in_hand.store(0, Ordering::Relaxed);
        self.oldest_in_hand.set(None);
        let discarded = queue.ring.drain_all();
        let waker = queue.waker.take();
        drop(queue);
        self.ready.notify_all();
        self.room.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
        debug!(listener = %self.name, discarded = discarded.len(), "listener closed");
        // Dropping outside the lock: the last reference to an object may be among them.
        drop(discarded);
        if self.handler.lock().take().is_some() {
            // Never started: there is no thread to report the exit.
            self.mark_stopped();
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Starts the handler's thread or task, if this listener has a handler that is not
    /// running yet. A task goes on `runtime`, else on the current one.
    pub(crate) fn start(
        self: &Arc<Self>,
        executor: HandlerExecutor,
        runtime: Option<&tokio::runtime::Handle>,
    ) -> Result<()> {
        let Some(handler) = self.handler.lock().take() else {
            return Ok(());
        };
        let listener = Arc::clone(self);
        if executor == HandlerExecutor::Tasks {
            let runtime = runtime
                .cloned()
                .or_else(|| tokio::runtime::Handle::try_current().ok());
            let Some(runtime) = runtime else {
                self.close();
                self.mark_stopped();
                return Err(Error::NoRuntimeForHandlers {
                    name: self.name.to_string(),
                });
            };
            runtime.spawn(listener.run_handler_task(handler));
            return Ok(());
        }
        let spawned = thread::Builder::new()
            .name(format!("kinformer-listener:{}", self.name))
            .spawn(move || listener.run_handler(handler));
        match spawned {
            Ok(_detached) => Ok(()),
            Err(source) => {
                self.close();
                self.mark_stopped();
                Err(Error::SpawnHandlerThread {
                    name: self.name.to_string(),
                    source,
                })
            }
        }
    }

    /// [`HandlerExecutor::Tasks`]: the handler on a tokio task, fed as a stream consumer is,
    /// one notification at a time, in order, each call isolated from panics.
    async fn run_handler_task(self: Arc<Self>, mut handler: Box<dyn ResourceEventHandler<K>>) {
        let span = tracing::error_span!("listener", name = %self.name);
        async {
            debug!("handler task started");
            while let Some(notification) = std::future::poll_fn(|cx| self.poll_next(cx)).await {
                self.dispatch(&mut handler, notification);
                // A long backlog must not keep the runtime worker from other tasks.
                tokio::task::consume_budget().await;
            }
            drop(handler);
            debug!("handler task exited");
            self.mark_stopped();
        }
        .instrument(span)
        .await;
    }

    /// One call of the handler, isolated from panics; an initial-list add counts as handled
    /// afterwards, also after a panic (client-go skips `Finished` then and the registration
    /// never syncs; the notification was handled, if badly).
    fn dispatch(
        &self,
        handler: &mut Box<dyn ResourceEventHandler<K>>,
        notification: Notification<K>,
    ) {
        let initial = notification.is_in_initial_list();
        self.call_started.set(Some(self.thread_epoch.elapsed()));
        // kinformer-wait logs the panic (with its message, in this listener's span).
        let outcome = catch_panic_sync(&self.name, || notification.dispatch_to(handler));
        self.call_started.set(None);
        if outcome.is_err() {
            let panicked = self.panicked.fetch_add(1, Ordering::Relaxed) + 1;
            debug!(panicked, "notification skipped; the listener continues");
        }
        if initial {
            self.finish_initial();
        }
    }

    /// The handler thread: one notification at a time, in order, each call isolated from
    /// panics.
    fn run_handler(self: Arc<Self>, mut handler: Box<dyn ResourceEventHandler<K>>) {
        // An error-level span, so a handler's panic is logged with its listener's name under any
        // filter.
        let span = tracing::error_span!("listener", name = %self.name);
        let _entered = span.enter();
        debug!("handler thread started");
        let mut batch = VecDeque::with_capacity(HANDOFF_BATCH);
        while let Some(notification) = self.next_blocking(&mut batch) {
            self.delivered.fetch_add(1, Ordering::Relaxed);
            self.dispatch(&mut handler, notification);
        }
        drop(handler);
        debug!("handler thread exited");
        self.mark_stopped();
    }

    /// The next notification for the handler thread. Notifications move from the shared ring
    /// to the thread's private `batch` up to [`HANDOFF_BATCH`] at a time, so a busy listener
    /// takes the lock once per batch rather than once per notification; from a bounded buffer,
    /// one at a time, so that what waits never exceeds its capacity.
    fn next_blocking(
        &self,
        batch: &mut VecDeque<(Notification<K>, Instant)>,
    ) -> Option<Notification<K>> {
        if self.closed.load(Ordering::Acquire) {
            // Removal discards what the thread already holds, as it does the ring.
            batch.clear();
            return None;
        }
        if let Some((next, _)) = batch.pop_front() {
            self.in_hand.store(batch.len(), Ordering::Relaxed);
            self.note_oldest_in_hand(batch);
            return Some(next);
        }
        let mut queue = self.queue.lock();
        loop {
            if queue.closed {
                return None;
            }
            // A bounded buffer's capacity is what it holds in all: notifications taken into
            // the thread's batch would no longer count against it, and make room for as many
            // more. So its handler thread takes one at a time.
            let batch_limit = if queue.ring.is_bounded() {
                1
            } else {
                HANDOFF_BATCH
            };
            let available = queue.ring.len().min(batch_limit);
            if available > 0 {
                batch.extend(std::iter::from_fn(|| queue.ring.pop()).take(available));
                self.made_room(&queue);
                let (next, _) = batch.pop_front()?;
                self.in_hand.store(batch.len(), Ordering::Relaxed);
                self.note_oldest_in_hand(batch);
                return Some(next);
            }
            if let Some(snapshot) = queue.ring.needs_catch_up() {
                MutexGuard::unlocked(&mut queue, || self.catch_up(&snapshot));
                continue;
            }
            queue.thread_waiting = true;
            self.ready.wait(&mut queue);
            queue.thread_waiting = false;
        }
    }

    /// Brings the consumer level with the cache after an [`Overflow::Resync`] overflow. Called
    /// without the queue's lock: the snapshot takes the lock that orders distribution, and a
    /// distributor holds that lock while it takes the queue's.
    ///
    /// [`Overflow::Resync`]: crate::Overflow::Resync
    fn catch_up(&self, snapshot: &CacheSnapshot<K>) {
        snapshot(&mut |cached| self.queue.lock().ring.catch_up(cached));
        debug!(listener = %self.name, "caught up with the cache after an overflow");
    }

    fn note_oldest_in_hand(&self, batch: &VecDeque<(Notification<K>, Instant)>) {
        self.oldest_in_hand.set(
            batch
                .front()
                .map(|(_, queued_at)| queued_at.saturating_duration_since(self.epoch)),
        );
    }

    /// The stream consumer's pop.
    pub(crate) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Notification<K>>> {
        let mut queue = self.queue.lock();
        if queue.closed {
            return Poll::Ready(None);
        }
        if let Some(snapshot) = queue.ring.needs_catch_up() {
            drop(queue);
            self.catch_up(&snapshot);
            queue = self.queue.lock();
        }
        match queue.ring.pop() {
            Some((next, _)) => {
                self.made_room(&queue);
                drop(queue);
                self.delivered.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(Some(next))
            }
            None => {
                queue.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    pub(crate) fn finish_initial(&self) {
        if self.initial_pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.progress.notify_waiters();
        }
    }

    pub(crate) async fn wait_stopped(&self) {
        self.stopped.wait().await;
    }

    pub(crate) fn mark_stopped(&self) {
        self.stopped.set();
        self.progress.notify_waiters();
    }

    pub(crate) fn has_synced(&self) -> bool {
        if self.synced.load(Ordering::Acquire) {
            return true;
        }
        // Upstream first: its flag is set only after every initial notification was added,
        // so a zero count read afterwards is final.
        if self.upstream.has_synced() && self.initial_pending.load(Ordering::Acquire) == 0 {
            self.synced.store(true, Ordering::Release);
            return true;
        }
        false
    }

    pub(crate) fn stats(&self) -> ListenerStats {
        let (buffered, peak_buffered, buffer_capacity, oldest_in_ring, resyncs) = {
            let queue = self.queue.lock();
            (
                queue.ring.len() + self.in_hand.load(Ordering::Relaxed),
                queue.peak,
                queue.ring.capacity(),
                queue.ring.oldest_queued_at(),
                queue.ring.resyncs(),
            )
        };
        // What the handler thread holds was queued before anything still in the ring.
        let oldest_queued_at = self
            .oldest_in_hand
            .get()
            .map(|since_epoch| self.epoch + since_epoch)
            .or(oldest_in_ring);
        let in_handler = self
            .call_started
            .get()
            .map(|started| self.thread_epoch.elapsed().saturating_sub(started));
        ListenerStats {
            delivered: self.delivered.load(Ordering::Relaxed),
            panicked: self.panicked.load(Ordering::Relaxed),
            buffered,
            peak_buffered,
            dropped: self.dropped.load(Ordering::Relaxed),
            buffer_capacity,
            coalesced: self.coalesced.load(Ordering::Relaxed),
            resyncs,
            blocked: Duration::from_nanos(self.blocked_nanos.load(Ordering::Relaxed))
                + self.waiting_since.get().map_or(Duration::ZERO, |since| {
                    self.thread_epoch.elapsed().saturating_sub(since)
                }),
            oldest_pending: oldest_queued_at.map(|at| Instant::now().saturating_duration_since(at)),
            in_handler,
        }
    }

    pub(crate) fn is_syncing(&self) -> bool {
        self.syncing.load(Ordering::Acquire)
    }

    /// client-go's `processorListener.shouldResync`, then `determineNextResync` when due.
    pub(crate) fn check_resync(&self, now: Instant) -> bool {
        let mut resync = self.resync.lock();
        let due = !resync.period.is_zero() && now >= resync.next;
        if due {
            resync.next = now + resync.period;
        }
        self.syncing.store(due, Ordering::Release);
        due
    }

    pub(crate) fn requested_resync_period(&self) -> Duration {
        self.resync.lock().requested
    }

    pub(crate) fn resync_period(&self) -> Duration {
        self.resync.lock().period
    }

    pub(crate) fn set_resync_period(&self, period: Duration) {
        self.resync.lock().period = period;
    }
}
