//! The [`SharedProcessor`]: one listener per registration, fan-out, resync bookkeeping.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kinformer_store::KeyFunc;
use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn};

use crate::{
    BufferPolicy, Error, EventStream, HandlerExecutor, ListenerOptions, Notification, Overflow,
    Registration, ResourceEventHandler, Result, UpstreamSynced,
    buffer::{CacheSnapshot, RingBuffer},
    listener::{Listener, ListenerStats, ResyncPeriods},
};

/// The shortest resync period a listener can ask for; shorter requests are raised to it.
#[doc(alias = "minimumResyncPeriod")]
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// The resync period a listener gets, given the period it asked for and the processor's resync
/// check period (client-go's `determineResyncPeriod`).
///
/// Zero stays zero (no resyncs); with a zero check period the processor does no resyncs at all,
/// so every listener gets zero; a period shorter than the check period is raised to it.
///
/// ```
/// use std::time::Duration;
///
/// use kinformer_processor::determine_resync_period;
///
/// let s = Duration::from_secs;
/// assert_eq!(determine_resync_period(s(0), s(10)), s(0));
/// assert_eq!(determine_resync_period(s(30), s(0)), s(0));
/// assert_eq!(determine_resync_period(s(5), s(10)), s(10));
/// assert_eq!(determine_resync_period(s(30), s(10)), s(30));
/// ```
#[doc(alias = "determineResyncPeriod")]
pub fn determine_resync_period(desired: Duration, check: Duration) -> Duration {
    if desired.is_zero() {
        return desired;
    }
    if check.is_zero() {
        warn!(
            ?desired,
            "resync period ignored: this processor does no resyncs (its check period is zero)"
        );
        return Duration::ZERO;
    }
    if desired < check {
        warn!(
            ?desired,
            ?check,
            "resync period raised to the resync check period"
        );
        return check;
    }
    desired
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Running,
    Stopped,
}

struct State<K> {
    listeners: Vec<Arc<Listener<K>>>,
    phase: Phase,
    resync_check_period: Duration,
    default_resync_period: Duration,
}

pub(crate) struct Shared<K> {
    state: RwLock<State<K>>,
    upstream: UpstreamSynced,
    default_buffer: BufferPolicy,
    key_func: Option<KeyFunc<K>>,
    snapshot: Option<CacheSnapshot<K>>,
    executor: HandlerExecutor,
    /// The runtime that runs the processor, where [`HandlerExecutor::Tasks`] spawns handlers.
    runtime: Mutex<Option<tokio::runtime::Handle>>,
    next_id: AtomicU64,
}

impl<K: Send + Sync + 'static> Shared<K> {
    pub(crate) fn remove(&self, id: u64) -> bool {
        let removed = {
            let mut state = self.state.write();
            state
                .listeners
                .iter()
                .position(|listener| listener.id == id)
                .map(|index| state.listeners.swap_remove(index))
        };
        match removed {
            Some(listener) => {
                debug!(listener = %listener.name, "listener removed");
                listener.close();
                true
            }
            None => false,
        }
    }

    /// Stops the processor without waiting; returns the listeners whose threads must exit.
    fn stop(&self) -> Vec<Arc<Listener<K>>> {
        let listeners = {
            let mut state = self.state.write();
            state.phase = Phase::Stopped;
            std::mem::take(&mut state.listeners)
        };
        for listener in &listeners {
            listener.close();
        }
        listeners
    }
}

/// Relays the informer's notifications to every registered listener (client-go's
/// `sharedProcessor`).
///
/// Each listener has its own buffer and its own consumer: a handler runs on a dedicated thread
/// named after the listener, a stream is polled by whoever holds it. [`distribute`] only pushes
/// into buffers, so it never waits for a slow or stuck handler, and a handler that blocks or
/// panics delays no other listener and no tokio worker.
///
/// The informer drives it: it calls [`distribute`] for every change, [`should_resync`] when its
/// resync timer (period [`resync_check_period`]) fires, marks [`upstream_synced`] once the
/// initial list is distributed, and runs [`run`] for the processor's lifetime. A handler added
/// after start is given the cache snapshot through [`add_handler_with_initial`].
///
/// Cloning gives another handle to the same processor.
///
/// [`distribute`]: Self::distribute
/// [`should_resync`]: Self::should_resync
/// [`resync_check_period`]: Self::resync_check_period
/// [`upstream_synced`]: Self::upstream_synced
/// [`run`]: Self::run
/// [`add_handler_with_initial`]: Self::add_handler_with_initial
#[doc(alias = "sharedProcessor")]
pub struct SharedProcessor<K> {
    shared: Arc<Shared<K>>,
}

/// Which listeners a distributed notification is for (client-go's `distribute(obj, sync)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recipients {
    /// Every listener: a change.
    All,
    /// Only the listeners the last [`SharedProcessor::should_resync`] found due: a resync,
    /// which a listener without a resync period never receives.
    DueForResync,
}

impl<K> Clone for SharedProcessor<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> fmt::Debug for SharedProcessor<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.read();
        f.debug_struct("SharedProcessor")
            .field("listeners", &state.listeners.len())
            .field("phase", &state.phase)
            .field("resync_check_period", &state.resync_check_period)
            .finish_non_exhaustive()
    }
}

/// How a [`SharedProcessor`] runs; every setting is optional, and [`Default`] is a processor
/// without resyncs, with unbounded listener buffers and a fresh upstream signal.
///
/// ```
/// use std::time::Duration;
///
/// use kinformer_processor::{BufferPolicy, Overflow, ProcessorOptions, SharedProcessor};
///
/// let options = ProcessorOptions::default()
///     .resync_period(Duration::from_secs(30))
///     .default_buffer(BufferPolicy::bounded(10_000, Overflow::DropOldest));
/// let processor = SharedProcessor::<String>::new(options);
/// assert_eq!(processor.default_resync_period(), Duration::from_secs(30));
/// ```
pub struct ProcessorOptions<K> {
    resync_period: Duration,
    upstream: Option<UpstreamSynced>,
    default_buffer: BufferPolicy,
    key_func: Option<KeyFunc<K>>,
    snapshot: Option<CacheSnapshot<K>>,
    executor: HandlerExecutor,
}

impl<K> Default for ProcessorOptions<K> {
    fn default() -> Self {
        Self {
            resync_period: Duration::ZERO,
            upstream: None,
            default_buffer: BufferPolicy::default(),
            key_func: None,
            snapshot: None,
            executor: HandlerExecutor::default(),
        }
    }
}

impl<K> Clone for ProcessorOptions<K> {
    fn clone(&self) -> Self {
        Self {
            resync_period: self.resync_period,
            upstream: self.upstream.clone(),
            default_buffer: self.default_buffer,
            key_func: self.key_func.clone(),
            snapshot: self.snapshot.clone(),
            executor: self.executor,
        }
    }
}

impl<K> fmt::Debug for ProcessorOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessorOptions")
            .field("resync_period", &self.resync_period)
            .field("upstream", &self.upstream)
            .field("default_buffer", &self.default_buffer)
            .field("key_func", &self.key_func.as_ref().map(|_| "Fn"))
            .field("cache_snapshot", &self.snapshot.as_ref().map(|_| "Fn"))
            .finish()
    }
}

impl<K> ProcessorOptions<K> {
    /// The default resync period of listeners and the initial resync check period (client-go's
    /// `SharedIndexInformerOptions.ResyncPeriod`); zero, the default, means no resyncs.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// The informer's "upstream has synced" signal; by default a fresh one, reachable through
    /// [`SharedProcessor::upstream_synced`].
    #[must_use]
    pub fn upstream_synced(mut self, signal: UpstreamSynced) -> Self {
        self.upstream = Some(signal);
        self
    }

    /// Where handlers run: an OS thread per listener (the default) or a tokio task.
    #[must_use]
    pub fn handler_executor(mut self, executor: HandlerExecutor) -> Self {
        self.executor = executor;
        self
    }

    /// The buffer policy of listeners whose options do not set one.
    #[must_use]
    pub fn default_buffer(mut self, policy: BufferPolicy) -> Self {
        self.default_buffer = policy;
        self
    }

    /// The object key, which [`BufferPolicy::CoalesceByKey`] merges by (an informer passes
    /// its cache's key function). Without it a listener asking to coalesce is refused.
    #[must_use]
    pub fn key_func(mut self, key_func: KeyFunc<K>) -> Self {
        self.key_func = Some(key_func);
        self
    }

    /// How to read the cache in step with distribution, which [`Overflow::Resync`] catches a
    /// listener up from (an informer passes one). Without it, with the key function, a
    /// listener asking for that policy is refused.
    ///
    /// [`Overflow::Resync`]: crate::Overflow::Resync
    #[must_use]
    pub fn cache_snapshot(mut self, snapshot: CacheSnapshot<K>) -> Self {
        self.snapshot = Some(snapshot);
        self
    }
}

impl<K: Send + Sync + 'static> Default for SharedProcessor<K> {
    fn default() -> Self {
        Self::new(ProcessorOptions::default())
    }
}

impl<K: Send + Sync + 'static> SharedProcessor<K> {
    /// A processor configured by `options`; it relays nothing to handlers until
    /// [`run`](Self::run).
    pub fn new(options: ProcessorOptions<K>) -> Self {
        SharedProcessor {
            shared: Arc::new(Shared {
                state: RwLock::new(State {
                    listeners: Vec::new(),
                    phase: Phase::Idle,
                    resync_check_period: options.resync_period,
                    default_resync_period: options.resync_period,
                }),
                upstream: options.upstream.unwrap_or_default(),
                default_buffer: options.default_buffer,
                key_func: options.key_func,
                snapshot: options.snapshot,
                executor: options.executor,
                runtime: Mutex::new(None),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// Registers a handler (client-go's `AddEventHandler`, or `AddEventHandlerWithResyncPeriod`
    /// when the options set a period). Its thread starts now if the processor runs, else when
    /// it starts.
    ///
    /// # Errors
    ///
    /// [`Error::Stopped`] after the processor has stopped; [`Error::SpawnHandlerThread`] if the
    /// handler thread cannot start; [`Error::CoalesceWithoutKey`] when the options ask for
    /// [`BufferPolicy::CoalesceByKey`] and the processor has no key function.
    #[doc(alias = "AddEventHandler")]
    #[doc(alias = "addListener")]
    pub fn add_handler<H>(&self, handler: H, options: ListenerOptions) -> Result<Registration<K>>
    where
        H: ResourceEventHandler<K>,
    {
        self.register(Some(Box::new(handler)), options, std::iter::empty())
    }

    /// Registers a handler that joins late: before any other notification it receives `initial`
    /// as adds of kind `AddKind::InitialList`, and its registration syncs once it has handled
    /// them. The informer passes its cache snapshot, taken while it holds back distribution so
    /// nothing falls between the snapshot and the stream.
    ///
    /// # Errors
    ///
    /// As [`add_handler`](Self::add_handler).
    pub fn add_handler_with_initial<H, I>(
        &self,
        handler: H,
        options: ListenerOptions,
        initial: I,
    ) -> Result<Registration<K>>
    where
        H: ResourceEventHandler<K>,
        I: IntoIterator<Item = Arc<K>>,
    {
        self.register(Some(Box::new(handler)), options, initial)
    }

    /// Registers a listener consumed as a [`Stream`](futures::Stream) of notifications.
    ///
    /// # Errors
    ///
    /// [`Error::Stopped`] after the processor has stopped; [`Error::CoalesceWithoutKey`] as
    /// for [`add_handler`](Self::add_handler).
    pub fn subscribe(&self, options: ListenerOptions) -> Result<EventStream<K>> {
        self.subscribe_with_initial(options, std::iter::empty())
    }

    /// [`subscribe`](Self::subscribe) for a late joiner, with the cache snapshot as
    /// [`add_handler_with_initial`](Self::add_handler_with_initial) takes it.
    ///
    /// # Errors
    ///
    /// As [`subscribe`](Self::subscribe).
    pub fn subscribe_with_initial<I>(
        &self,
        options: ListenerOptions,
        initial: I,
    ) -> Result<EventStream<K>>
    where
        I: IntoIterator<Item = Arc<K>>,
    {
        self.register(None, options, initial).map(EventStream::new)
    }

    fn register<I>(
        &self,
        handler: Option<Box<dyn ResourceEventHandler<K>>>,
        mut options: ListenerOptions,
        initial: I,
    ) -> Result<Registration<K>>
    where
        I: IntoIterator<Item = Arc<K>>,
    {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let name: Arc<str> = options
            .take_name()
            .unwrap_or_else(|| format!("listener-{id}"))
            .into();
        let now = Instant::now();
        // One write lock across the resync adjustment, the initial notifications and the
        // publication, so no distribute or resync check sees the listener half set up.
        let mut state = self.shared.state.write();
        if state.phase == Phase::Stopped {
            return Err(Error::Stopped {
                name: name.to_string(),
            });
        }
        let asked = options
            .requested_resync_period()
            .unwrap_or(state.default_resync_period);
        let requested = adjust_requested_period(&mut state, &name, asked);
        let periods = ResyncPeriods {
            requested,
            period: determine_resync_period(requested, state.resync_check_period),
        };
        let policy = options
            .buffer_policy()
            .unwrap_or(self.shared.default_buffer);
        if policy == BufferPolicy::CoalesceByKey && self.shared.key_func.is_none() {
            return Err(Error::CoalesceWithoutKey {
                name: name.to_string(),
            });
        }
        let resyncs = matches!(
            policy,
            BufferPolicy::Bounded {
                overflow: Overflow::Resync,
                ..
            }
        );
        if resyncs && (self.shared.key_func.is_none() || self.shared.snapshot.is_none()) {
            return Err(Error::ResyncWithoutCache {
                name: name.to_string(),
            });
        }
        let listener = Arc::new(Listener::new(
            id,
            Arc::clone(&name),
            RingBuffer::new(
                policy,
                self.shared.key_func.clone(),
                self.shared.snapshot.clone(),
            ),
            self.shared.upstream.clone(),
            periods,
            now,
            handler,
        ));
        for obj in initial {
            listener.add(Notification::initial_add(obj));
        }
        if state.phase == Phase::Running {
            listener.start(self.shared.executor, self.shared.runtime.lock().as_ref())?;
        }
        state.listeners.push(Arc::clone(&listener));
        drop(state);
        debug!(listener = %name, resync_period = ?periods.period, "listener added");
        Ok(Registration {
            listener,
            processor: Arc::downgrade(&self.shared),
        })
    }

    /// Unregisters a listener; returns whether it was registered here. A registration from
    /// another processor, or one already removed, is left alone. Returns at once: await
    /// [`Registration::stopped`] to know its handler has exited.
    #[doc(alias = "RemoveEventHandler")]
    #[doc(alias = "removeListener")]
    pub fn remove_listener(&self, registration: &Registration<K>) -> bool {
        let ours = std::ptr::eq(registration.processor.as_ptr(), Arc::as_ptr(&self.shared));
        ours && self.shared.remove(registration.listener.id)
    }

    /// Whether `registration` is currently registered with this processor.
    pub fn is_registered(&self, registration: &Registration<K>) -> bool {
        self.shared
            .state
            .read()
            .listeners
            .iter()
            .any(|listener| Arc::ptr_eq(listener, &registration.listener))
    }

    /// How many listeners are registered.
    pub fn listener_count(&self) -> usize {
        self.shared.state.read().listeners.len()
    }

    /// Every registered listener's name (as given in [`ListenerOptions::name`], else
    /// `listener-<n>`) and counters, in registration order: what a metrics scrape reads.
    pub fn listener_stats(&self) -> Vec<(String, ListenerStats)> {
        self.shared
            .state
            .read()
            .listeners
            .iter()
            .map(|listener| (listener.name.to_string(), listener.stats()))
            .collect()
    }

    /// Hands a notification to every listener, or, for [`Recipients::DueForResync`], only to
    /// the listeners the last [`should_resync`](Self::should_resync) found due. Never waits for
    /// a handler: each listener's buffer takes the notification.
    pub fn distribute(&self, notification: Notification<K>, recipients: Recipients) {
        self.distribute_with(notification, recipients, Listener::add);
    }

    /// Opens a batch of distributions, for a caller that hands over many notifications in a
    /// row (a batch of deltas, a relist): each reaches every buffer at once, as with
    /// [`distribute`](Self::distribute), but a sleeping handler thread or stream consumer is
    /// woken once a handoff's worth (64) waits for it, and when the batch is dropped, rather than
    /// once per notification.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use kinformer_processor::{Notification, Recipients, SharedProcessor};
    ///
    /// let processor = SharedProcessor::<String>::default();
    /// let batch = processor.batch();
    /// for name in ["a", "b", "c"] {
    ///     batch.distribute(Notification::add(Arc::new(name.to_owned())), Recipients::All);
    /// }
    /// drop(batch); // wakes the consumers that still sleep
    /// ```
    pub fn batch(&self) -> DistributionBatch<'_, K> {
        DistributionBatch { processor: self }
    }

    fn distribute_with(
        &self,
        notification: Notification<K>,
        recipients: Recipients,
        add: fn(&Listener<K>, Notification<K>),
    ) {
        let state = self.shared.state.read();
        let resync_only = recipients == Recipients::DueForResync;
        let mut targets = state
            .listeners
            .iter()
            .filter(|listener| !resync_only || listener.is_syncing());
        let Some(mut current) = targets.next() else {
            return;
        };
        for next in targets {
            add(current, notification.clone());
            current = next;
        }
        // The last listener takes the notification itself: one clone fewer per distribution.
        add(current, notification);
    }

    /// Marks which listeners are due for a resync at `now` (their period has elapsed since
    /// their last one) and returns whether any is. Only those receive the sync notifications
    /// that follow; each due listener's next resync is set to `now` plus its period.
    #[doc(alias = "shouldResync")]
    pub fn should_resync(&self, now: Instant) -> bool {
        let state = self.shared.state.read();
        let mut any_due = false;
        for listener in &state.listeners {
            // Every listener is checked, not just until the first due one, so that each one's
            // syncing flag is fresh.
            any_due |= listener.check_resync(now);
        }
        any_due
    }

    /// Whether a [`Recipients::DueForResync`] notification would reach any listener now (as
    /// the last [`should_resync`](Self::should_resync) found them): a caller whose sync
    /// notifications are costly to build skips them when none would.
    pub fn any_due_for_resync(&self) -> bool {
        self.shared
            .state
            .read()
            .listeners
            .iter()
            .any(|listener| listener.is_syncing())
    }

    /// How often the informer should call [`should_resync`](Self::should_resync): the
    /// shortest resync period requested before start, or the processor's resync period.
    pub fn resync_check_period(&self) -> Duration {
        self.shared.state.read().resync_check_period
    }

    /// The resync period of listeners whose options set none.
    pub fn default_resync_period(&self) -> Duration {
        self.shared.state.read().default_resync_period
    }

    /// The "upstream has synced" signal the registrations' `has_synced` depends on; the
    /// informer marks it once its initial list has been distributed.
    pub fn upstream_synced(&self) -> &UpstreamSynced {
        &self.shared.upstream
    }

    /// Whether [`run`](Self::run) has started and not yet stopped.
    pub fn is_running(&self) -> bool {
        self.shared.state.read().phase == Phase::Running
    }

    /// Whether the processor has stopped; it never starts again.
    pub fn is_stopped(&self) -> bool {
        self.shared.state.read().phase == Phase::Stopped
    }

    /// Starts every listener's handler thread and relays until `token` is cancelled; then
    /// closes every listener (pending notifications are discarded, as in client-go) and waits
    /// until every handler thread has exited. Stream consumers are not waited for: their streams
    /// end. A handler blocked forever keeps this from returning, as it does in client-go.
    ///
    /// Dropping the future stops the processor too, without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyStarted`] if the processor is running or has run. A handler thread that
    /// cannot start is logged and its listener stopped; the others run.
    pub async fn run(&self, token: CancellationToken) -> Result<()> {
        let to_start = {
            let mut state = self.shared.state.write();
            if state.phase != Phase::Idle {
                return Err(Error::AlreadyStarted);
            }
            state.phase = Phase::Running;
            state.listeners.clone()
        };
        let mut guard = StopOnDrop(Some(Arc::clone(&self.shared)));
        let runtime = tokio::runtime::Handle::current();
        *self.shared.runtime.lock() = Some(runtime.clone());
        for listener in &to_start {
            if let Err(err) = listener.start(self.shared.executor, Some(&runtime)) {
                error!(listener = %listener.name, error = %err, "listener could not start");
            }
        }
        drop(to_start);
        debug!("processor running");
        token.cancelled().await;
        guard.0 = None;
        let listeners = self.shared.stop();
        for listener in listeners.iter().filter(|listener| listener.has_thread) {
            listener.wait_stopped().await;
        }
        debug!("processor stopped");
        Ok(())
    }
}

/// Stops the processor if `run`'s future is dropped before its token is cancelled.
struct StopOnDrop<K: Send + Sync + 'static>(Option<Arc<Shared<K>>>);

impl<K: Send + Sync + 'static> Drop for StopOnDrop<K> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            shared.stop();
        }
    }
}

/// client-go's resync adjustments in `AddEventHandlerWithResyncPeriod`: a period under the
/// minimum is raised to it; a period under the check period lowers the check period before
/// start (re-deriving every listener's period) and is raised to it after start.
fn adjust_requested_period<K: Send + Sync + 'static>(
    state: &mut State<K>,
    name: &str,
    mut requested: Duration,
) -> Duration {
    if requested.is_zero() {
        return requested;
    }
    if requested < MINIMUM_RESYNC_PERIOD {
        warn!(listener = name, ?requested, minimum = ?MINIMUM_RESYNC_PERIOD, "resync period too small, raised to the minimum");
        requested = MINIMUM_RESYNC_PERIOD;
    }
    if requested < state.resync_check_period {
        if state.phase == Phase::Running {
            warn!(
                listener = name,
                ?requested,
                check = ?state.resync_check_period,
                "resync period below the check period of a running processor, raised to it"
            );
            requested = state.resync_check_period;
        } else {
            state.resync_check_period = requested;
            for listener in &state.listeners {
                listener.set_resync_period(determine_resync_period(
                    listener.requested_resync_period(),
                    requested,
                ));
            }
        }
    }
    requested
}

/// Distributions that wake consumers once per handoff rather than once per notification; made
/// by [`SharedProcessor::batch`]. Dropping it wakes every consumer that still sleeps with
/// notifications waiting.
#[must_use = "dropping the batch at once wakes nothing it did not already wake"]
pub struct DistributionBatch<'a, K: Send + Sync + 'static> {
    processor: &'a SharedProcessor<K>,
}

impl<K: Send + Sync + 'static> DistributionBatch<'_, K> {
    /// [`SharedProcessor::distribute`], with the wake deferred.
    pub fn distribute(&self, notification: Notification<K>, recipients: Recipients) {
        self.processor
            .distribute_with(notification, recipients, Listener::add_deferred);
    }
}

impl<K: Send + Sync + 'static> Drop for DistributionBatch<'_, K> {
    fn drop(&mut self) {
        for listener in &self.processor.shared.state.read().listeners {
            listener.wake_pending();
        }
    }
}

impl<K: Send + Sync + 'static> fmt::Debug for DistributionBatch<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributionBatch").finish_non_exhaustive()
    }
}
