//! [`ListenerOptions`]: how one registration is set up.

use std::time::Duration;

use crate::BufferPolicy;

/// How one registration is set up: its name, its resync period and its buffer.
///
/// ```
/// use std::time::Duration;
///
/// use kinformer_processor::{BufferPolicy, ListenerOptions, Overflow};
///
/// let options = ListenerOptions::new()
///     .name("pod-controller")
///     .resync_period(Duration::from_secs(30))
///     .buffer(BufferPolicy::bounded(10_000, Overflow::DropOldest));
/// assert_eq!(options.name_ref(), Some("pod-controller"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ListenerOptions {
    name: Option<String>,
    resync_period: Option<Duration>,
    buffer: Option<BufferPolicy>,
}

impl ListenerOptions {
    /// Unnamed, with the processor's default resync period and buffer policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the listener in logs, spans, thread names and errors. Without a name the listener
    /// is called `listener-<n>`.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Requests resyncs at this period; zero means no resyncs. Without it the processor's
    /// default period applies (client-go's `AddEventHandler` versus
    /// `AddEventHandlerWithResyncPeriod`).
    ///
    /// A non-zero period under [`MINIMUM_RESYNC_PERIOD`](crate::MINIMUM_RESYNC_PERIOD) (one
    /// second) is raised to it when the handler is added, as client-go does, with a warning;
    /// [`Registration::requested_resync_period`](crate::Registration::requested_resync_period)
    /// reports the period asked for after that, and
    /// [`resync_period`](crate::Registration::resync_period) the one in force.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Sets the buffer policy, overriding the processor's default (itself unbounded unless
    /// [`ProcessorOptions::default_buffer`](crate::ProcessorOptions::default_buffer)
    /// says otherwise).
    #[must_use]
    pub fn buffer(mut self, policy: BufferPolicy) -> Self {
        self.buffer = Some(policy);
        self
    }

    /// The name set with [`name`](Self::name), if any.
    pub fn name_ref(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub(crate) fn requested_resync_period(&self) -> Option<Duration> {
        self.resync_period
    }

    pub(crate) fn buffer_policy(&self) -> Option<BufferPolicy> {
        self.buffer
    }

    pub(crate) fn take_name(&mut self) -> Option<String> {
        self.name.take()
    }
}

/// Where the listeners' handlers run.
///
/// ```
/// use kinformer_processor::{HandlerExecutor, ProcessorOptions};
///
/// // Handlers as tokio tasks: for tests on tokio's paused clock, and for handlers that never
/// // block.
/// let options = ProcessorOptions::<()>::default().handler_executor(HandlerExecutor::Tasks);
/// # drop(options);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandlerExecutor {
    /// One OS thread per listener, as client-go has one goroutine per listener: a handler may
    /// block, take locks or do I/O without stalling the runtime or the other listeners.
    #[default]
    Threads,
    /// One tokio task per listener, on the runtime that runs the processor. A handler must
    /// not block (it would stall a runtime worker). Everything then runs on the runtime, so
    /// on tokio's paused clock (`start_paused`, test-util) time advances only when the
    /// handlers are idle too: informer and factory tests run in virtual time.
    Tasks,
}
