use std::error::Error as StdError;
use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;

/// Something that wants to hear about errors nobody could return: metrics, an error tracker.
///
/// Implemented for every `Fn(&dyn Error, u64) + Send + Sync` closure. The `u64` is how many
/// reports were suppressed by the rate limit since the previous one that got through.
#[doc(alias = "ErrorHandlers")]
pub trait ErrorHandler: Send + Sync {
    /// Called for each report that passes the rate limit.
    fn handle(&self, error: &(dyn StdError + '_), suppressed_before: u64);
}

impl<F> ErrorHandler for F
where
    F: Fn(&(dyn StdError + '_), u64) + Send + Sync,
{
    fn handle(&self, error: &(dyn StdError + '_), suppressed_before: u64) {
        self(error, suppressed_before);
    }
}

/// What [`ErrorReporter::report`] did with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOutcome {
    /// The error was logged and given to every handler.
    Reported {
        /// How many errors were suppressed since the previous report (included in the log).
        suppressed_before: u64,
    },
    /// The error came less than the minimum interval after the previous report; it was only
    /// counted, and the count goes out with the next report.
    Suppressed,
}

/// Rate-limited reporting of errors that cannot be returned to anyone: client-go's
/// `HandleError`, as an instance you can own (the process-wide one is behind [`handle_error`]).
///
/// Reports closer together than `min_interval` are counted instead of logged, and the next
/// report that gets through says how many were dropped. client-go instead sleeps in the
/// reporting goroutine (`rudimentaryErrorBackoff`, 1ms), which slows down a hot error loop as
/// a side effect. Sleeping is not an option here: a synchronous sleep would stall a tokio worker
/// thread and everything scheduled on it, and an `async` reporter could not be called from the
/// synchronous places errors turn up in. Our own retry loops ([`ExponentialBackoffManager`])
/// already back off, so the reporter only has to protect the log.
///
/// Time comes from tokio's clock, so a paused test clock makes the rate limit exact.
///
/// [`ExponentialBackoffManager`]: crate::ExponentialBackoffManager
#[doc(alias = "HandleError")]
#[doc(alias = "rudimentaryErrorBackoff")]
pub struct ErrorReporter {
    min_interval: Duration,
    state: Mutex<RateState>,
    handlers: RwLock<Vec<Arc<dyn ErrorHandler>>>,
}

#[derive(Debug, Default)]
struct RateState {
    last_report: Option<Instant>,
    suppressed: u64,
}

impl ErrorReporter {
    /// client-go's global rate: at most one report per millisecond.
    pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_millis(1);

    /// A reporter letting through at most one report per `min_interval`, with no extra
    /// handlers (reports go to `tracing` only).
    #[must_use]
    pub fn new(min_interval: Duration) -> Self {
        Self {
            min_interval,
            state: Mutex::new(RateState::default()),
            handlers: RwLock::new(Vec::new()),
        }
    }

    /// The smallest gap between two reports that get through.
    #[must_use]
    pub fn min_interval(&self) -> Duration {
        self.min_interval
    }

    /// Adds a handler that receives every report that gets through, after it is logged.
    pub fn add_handler(&self, handler: impl ErrorHandler + 'static) {
        self.handlers.write().push(Arc::new(handler));
    }

    /// How many errors have been suppressed since the last report that got through.
    #[must_use]
    pub fn suppressed(&self) -> u64 {
        self.state.lock().suppressed
    }

    /// Logs `error` (with its chain of sources) at error level and passes it to every handler,
    /// unless the previous report was less than the minimum interval ago; then it is counted.
    pub fn report(&self, error: &(dyn StdError + '_)) -> ReportOutcome {
        let now = Instant::now();
        let suppressed_before = {
            let mut state = self.state.lock();
            let too_soon = state
                .last_report
                .is_some_and(|last| now.saturating_duration_since(last) < self.min_interval);
            if too_soon {
                state.suppressed += 1;
                return ReportOutcome::Suppressed;
            }
            state.last_report = Some(now);
            std::mem::take(&mut state.suppressed)
        };

        tracing::error!(
            error = %ErrorChain(error),
            suppressed_before,
            "unhandled error"
        );
        // Handlers run outside the rate lock, on a snapshot, so a slow or re-entrant handler
        // cannot block other reporters or deadlock by adding a handler.
        let handlers = self.handlers.read().clone();
        for handler in &handlers {
            handler.handle(error, suppressed_before);
        }
        ReportOutcome::Reported { suppressed_before }
    }
}

impl Default for ErrorReporter {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MIN_INTERVAL)
    }
}

impl fmt::Debug for ErrorReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ErrorReporter")
            .field("min_interval", &self.min_interval)
            .field("suppressed", &self.suppressed())
            .field("handlers", &self.handlers.read().len())
            .finish()
    }
}

/// Displays an error followed by its sources, `outer: inner: root`.
///
/// kinformer's errors keep their cause as a source rather than in their own message, so a log
/// line that should say why prints the chain: `warn!(error = %ErrorChain(&error), "...")`.
///
/// ```
/// use kinformer_wait::ErrorChain;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("the watch failed")]
/// struct WatchFailed(#[source] std::io::Error);
///
/// let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let error = WatchFailed(refused);
/// assert_eq!(error.to_string(), "the watch failed");
/// assert_eq!(ErrorChain(&error).to_string(), "the watch failed: connection refused");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn StdError + 'a));

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Some errors print their source in their own message too (kube-client's do); a cause
        // the previous message already shows is not printed again.
        let mut shown = self.0.to_string();
        f.write_str(&shown)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !shown.contains(&text) {
                write!(f, ": {text}")?;
            }
            shown = text;
            source = cause.source();
        }
        Ok(())
    }
}

static GLOBAL: LazyLock<ErrorReporter> = LazyLock::new(ErrorReporter::default);

/// The process-wide reporter behind [`handle_error`], limited to one report per millisecond.
#[must_use]
pub fn global_error_reporter() -> &'static ErrorReporter {
    &GLOBAL
}

/// Reports an error that cannot be returned to anyone, through the process-wide
/// [`ErrorReporter`] (client-go's `utilruntime.HandleError`).
///
/// # Examples
///
/// ```
/// let outcome = kinformer_wait::handle_error(&std::io::Error::other("watch closed"));
/// assert!(matches!(outcome, kinformer_wait::ReportOutcome::Reported { .. }));
/// ```
#[doc(alias = "HandleError")]
pub fn handle_error(error: &(dyn StdError + '_)) -> ReportOutcome {
    GLOBAL.report(error)
}

/// Adds a handler to the process-wide reporter; see [`ErrorReporter::add_handler`].
///
/// # Examples
///
/// ```
/// use std::error::Error;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// static UNHANDLED: AtomicU64 = AtomicU64::new(0);
///
/// // Closures need their argument types spelled out to accept any error lifetime.
/// kinformer_wait::add_error_handler(|_: &(dyn Error + '_), suppressed_before: u64| {
///     UNHANDLED.fetch_add(1 + suppressed_before, Ordering::Relaxed);
/// });
/// kinformer_wait::handle_error(&std::io::Error::other("relist failed"));
/// assert_eq!(UNHANDLED.load(Ordering::Relaxed), 1);
/// ```
#[doc(alias = "ErrorHandlers")]
pub fn add_error_handler(handler: impl ErrorHandler + 'static) {
    GLOBAL.add_handler(handler);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::time::advance;
    use tracing::Level;

    use super::*;
    use crate::test_support::CaptureGuard;

    #[derive(Debug, thiserror::Error)]
    #[error("list failed")]
    struct ListFailed(#[source] std::io::Error);

    type Seen = Arc<Mutex<Vec<(String, u64)>>>;

    fn recording(reporter: &ErrorReporter) -> Seen {
        let seen = Seen::default();
        let sink = Arc::clone(&seen);
        reporter.add_handler(move |error: &(dyn StdError + '_), suppressed: u64| {
            sink.lock().push((error.to_string(), suppressed));
        });
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn reports_closer_than_the_interval_are_counted_then_summarized() {
        let reporter = ErrorReporter::new(Duration::from_millis(10));
        let seen = recording(&reporter);
        let error = std::io::Error::other("boom");

        assert_eq!(
            reporter.report(&error),
            ReportOutcome::Reported {
                suppressed_before: 0
            }
        );
        for _ in 0..4 {
            assert_eq!(reporter.report(&error), ReportOutcome::Suppressed);
        }
        advance(Duration::from_millis(9)).await;
        assert_eq!(reporter.report(&error), ReportOutcome::Suppressed);
        assert_eq!(reporter.suppressed(), 5);

        advance(Duration::from_millis(1)).await;
        assert_eq!(
            reporter.report(&error),
            ReportOutcome::Reported {
                suppressed_before: 5
            }
        );
        assert_eq!(reporter.suppressed(), 0);

        let seen = seen.lock().clone();
        assert_eq!(seen, [("boom".to_owned(), 0), ("boom".to_owned(), 5)]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_interval_is_measured_from_the_last_report_that_got_through() {
        let reporter = ErrorReporter::new(Duration::from_millis(10));
        let error = std::io::Error::other("boom");
        reporter.report(&error);
        advance(Duration::from_millis(6)).await;
        assert_eq!(reporter.report(&error), ReportOutcome::Suppressed);
        // 12ms after the first report, though only 6ms after the suppressed one.
        advance(Duration::from_millis(6)).await;
        assert_eq!(
            reporter.report(&error),
            ReportOutcome::Reported {
                suppressed_before: 1
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_reporter_allows_one_report_per_millisecond() {
        let reporter = ErrorReporter::default();
        assert_eq!(reporter.min_interval(), Duration::from_millis(1));
        let error = std::io::Error::other("boom");
        let mut reported = 0;
        for _ in 0..100 {
            for _ in 0..10 {
                if matches!(reporter.report(&error), ReportOutcome::Reported { .. }) {
                    reported += 1;
                }
            }
            advance(Duration::from_millis(1)).await;
        }
        assert_eq!(reported, 100);
    }

    #[tokio::test(start_paused = true)]
    async fn a_report_logs_the_whole_error_chain_at_error_level() {
        let capture = CaptureGuard::start();
        let reporter = ErrorReporter::default();
        reporter.report(&ListFailed(std::io::Error::other("connection refused")));

        let events = capture.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].level, Level::ERROR);
        assert_eq!(
            events[0].field("error"),
            Some("list failed: connection refused")
        );
        assert_eq!(events[0].field("suppressed_before"), Some("0"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_may_add_another_handler_without_deadlocking() {
        let reporter = Arc::new(ErrorReporter::new(Duration::ZERO));
        let added = Arc::new(AtomicU64::new(0));
        let weak = Arc::downgrade(&reporter);
        let counter = Arc::clone(&added);
        reporter.add_handler(move |_: &(dyn StdError + '_), _: u64| {
            if let Some(reporter) = weak.upgrade() {
                let counter = Arc::clone(&counter);
                reporter.add_handler(move |_: &(dyn StdError + '_), _: u64| {
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
        reporter.report(&std::io::Error::other("first"));
        reporter.report(&std::io::Error::other("second"));
        assert_eq!(added.load(Ordering::Relaxed), 1);
    }

    /// The only test that touches the process-wide reporter, so nothing else can use up its
    /// rate limit first.
    #[test]
    fn handle_error_reaches_handlers_added_to_the_global_reporter() {
        let seen = recording(global_error_reporter());
        let outcome = handle_error(&std::io::Error::other("global marker"));
        assert_eq!(
            outcome,
            ReportOutcome::Reported {
                suppressed_before: 0
            }
        );
        assert_eq!(seen.lock().clone(), [("global marker".to_owned(), 0)]);
    }
}
