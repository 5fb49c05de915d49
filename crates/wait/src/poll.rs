use std::future::{Future, pending};
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::panic::catch_panic;

/// Checks `condition` right away, then every `interval`, until it reports done, fails, or
/// gives up: when `timeout` has elapsed or `token` is cancelled. This is apimachinery's
/// `PollUntilContextTimeout` with `immediate = true`, the one way to wait for a condition.
///
/// The first check runs before any wait, even if the token is already cancelled, so the
/// condition always runs at least once. Checks follow a fixed ticker started with the poll, so
/// a slow check shortens the next wait instead of pushing the schedule back, and ticks missed
/// while a check ran collapse into one (Go's `time.Ticker`). When the token fires and the
/// timeout elapses at the same instant, cancellation is reported. For a poll without a
/// deadline, pass [`Duration::MAX`]; for one nobody cancels, a fresh
/// [`CancellationToken::new`].
///
/// A panic inside the condition is caught, logged and returned as [`Error::Panicked`].
///
/// # Errors
///
/// [`Error::Timeout`] when `timeout` elapses first, [`Error::Cancelled`] when the token fires
/// first, [`Error::Condition`] with the condition's own error, or [`Error::Panicked`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kinformer_wait::{CancellationToken, Error};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let token = CancellationToken::new();
/// let never = kinformer_wait::poll(&token, Duration::from_secs(1), Duration::from_secs(5), || {
///     async { Ok::<_, std::io::Error>(false) }
/// })
/// .await;
/// assert!(matches!(never, Err(Error::Timeout { timeout }) if timeout == Duration::from_secs(5)));
/// # }
/// ```
#[doc(alias = "PollUntilContextTimeout")]
#[doc(alias = "PollUntilContextCancel")]
#[doc(alias = "PollImmediate")]
#[doc(alias = "PollImmediateUntil")]
pub async fn poll<C, Fut, E>(
    token: &CancellationToken,
    interval: Duration,
    timeout: Duration,
    mut condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    // The loop is apimachinery's `loopConditionUntilContext`, with a fixed, non-sliding ticker.
    let start = Instant::now();
    // A timeout too large to represent as an instant is as good as none.
    let deadline = start.checked_add(timeout);
    let mut ticker = Ticker::starting_at(start, interval);

    if check(&mut condition).await? {
        return Ok(());
    }
    loop {
        tokio::select! {
            biased;
            () = token.cancelled() => return Err(Error::Cancelled),
            () = until_deadline(deadline) => return Err(Error::Timeout { timeout }),
            () = ticker.tick() => {}
        }
        // Both may have become due at the instant the tick fired; stopping wins, so the
        // condition never runs after the caller's limit.
        if token.is_cancelled() {
            return Err(Error::Cancelled);
        }
        if deadline.is_some_and(|at| Instant::now() >= at) {
            return Err(Error::Timeout { timeout });
        }
        if check(&mut condition).await? {
            return Ok(());
        }
    }
}

async fn check<C, Fut, E>(condition: &mut C) -> Result<bool, Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    match catch_panic("poll condition", condition()).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(error)) => Err(Error::Condition(error)),
        Err(panicked) => Err(panicked.widen()),
    }
}

/// Sleeps until the deadline, if any.
async fn until_deadline(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => pending().await,
    }
}

/// A fixed-rate ticker that tolerates the periods tokio's `Interval` rejects.
enum Ticker {
    /// Period zero: every tick is due at once, but yields so the loop cannot starve the runtime.
    Immediate,
    Every(Interval),
    /// The first tick lies beyond what an `Instant` can represent.
    Never,
}

impl Ticker {
    fn starting_at(start: Instant, period: Duration) -> Self {
        if period.is_zero() {
            return Self::Immediate;
        }
        match start.checked_add(period) {
            Some(first) => {
                let mut interval = tokio::time::interval_at(first, period);
                interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
                Self::Every(interval)
            }
            None => Self::Never,
        }
    }

    async fn tick(&mut self) {
        match self {
            Self::Immediate => tokio::task::yield_now().await,
            Self::Every(interval) => {
                interval.tick().await;
            }
            Self::Never => pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::sleep;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn secs(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|&s| Duration::from_secs(s)).collect()
    }

    #[derive(Debug, PartialEq, thiserror::Error)]
    #[error("not ready: {0}")]
    struct NotReady(&'static str);

    /// A condition that records when it ran and reports done on its `done_at`-th run.
    struct Probe {
        start: Instant,
        runs: Vec<Duration>,
        done_at: Option<usize>,
        work: Duration,
    }

    impl Probe {
        fn new(done_at: Option<usize>) -> Self {
            Self {
                start: Instant::now(),
                runs: Vec::new(),
                done_at,
                work: Duration::ZERO,
            }
        }

        fn slow(mut self, work: Duration) -> Self {
            self.work = work;
            self
        }

        fn check(&mut self) -> impl Future<Output = Result<bool, NotReady>> + use<> {
            self.runs.push(self.start.elapsed());
            let done = self.done_at == Some(self.runs.len());
            let work = self.work;
            async move {
                sleep(work).await;
                Ok(done)
            }
        }
    }

    /// A token nobody cancels, for the polls that only a timeout ends.
    fn uncancelled() -> CancellationToken {
        CancellationToken::new()
    }

    /// Ported from apimachinery's TestPoll, with the real ticker on a paused clock.
    #[tokio::test(start_paused = true)]
    async fn poll_times_out_and_says_after_how_long() {
        let mut probe = Probe::new(None);
        let result = poll(&uncancelled(), SECOND, 5 * SECOND, || probe.check()).await;
        let Err(error) = result else {
            panic!("expected a timeout, got {result:?}");
        };
        assert!(matches!(error, Error::Timeout { timeout } if timeout == 5 * SECOND));
        assert_eq!(
            error.to_string(),
            "timed out after 5s waiting for the condition"
        );
        // The tick at 5s coincides with the deadline, and the deadline wins.
        assert_eq!(probe.runs, secs(&[0, 1, 2, 3, 4]));
        assert_eq!(probe.start.elapsed(), 5 * SECOND);
    }

    /// Ported from apimachinery's TestPollError.
    #[tokio::test(start_paused = true)]
    async fn poll_hands_back_the_conditions_own_error() {
        let mut runs = 0;
        let result = poll(&uncancelled(), SECOND, 10 * SECOND, || {
            runs += 1;
            async { Err::<bool, _>(NotReady("cache not warm")) }
        })
        .await;
        assert!(matches!(
            result,
            Err(Error::Condition(NotReady("cache not warm")))
        ));
        assert_eq!(runs, 1);
        // The condition's error is passed through, message included, not wrapped.
        assert_eq!(
            Error::Condition(NotReady("cache not warm")).to_string(),
            "not ready: cache not warm"
        );
    }

    /// Ported from apimachinery's TestPollImmediate.
    #[tokio::test(start_paused = true)]
    async fn poll_checks_before_waiting() {
        let mut probe = Probe::new(Some(1));
        let result = poll(&uncancelled(), SECOND, 10 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs, secs(&[0]));
        assert_eq!(probe.start.elapsed(), Duration::ZERO);
    }

    /// Ported from apimachinery's TestPollImmediateError.
    #[tokio::test(start_paused = true)]
    async fn poll_returns_an_immediate_error_without_waiting() {
        let start = Instant::now();
        let result = poll(&uncancelled(), SECOND, 10 * SECOND, || async {
            Err::<bool, _>(NotReady("broken"))
        })
        .await;
        assert!(matches!(result, Err(Error::Condition(NotReady("broken")))));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn poll_keeps_checking_on_the_interval_after_the_first_check() {
        let mut probe = Probe::new(Some(4));
        let result = poll(&uncancelled(), SECOND, 10 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs, secs(&[0, 1, 2, 3]));
    }

    /// Ported from apimachinery's TestPollImmediateUntilWithContext ("context is already
    /// cancelled, no retry is attempted"); Go's legacy answer there is ErrWaitTimeout, today's
    /// context-based loop answers the context's error, as we do.
    #[tokio::test(start_paused = true)]
    async fn the_first_check_runs_once_even_when_already_cancelled() {
        let token = CancellationToken::new();
        token.cancel();
        let mut probe = Probe::new(None);
        let result = poll(&token, SECOND, 10 * SECOND, || probe.check()).await;
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(probe.runs, secs(&[0]));
    }

    /// Ported from apimachinery's TestPollUntil; `Duration::MAX` is no deadline at all.
    #[tokio::test(start_paused = true)]
    async fn poll_returns_promptly_when_cancelled_between_checks() {
        let token = CancellationToken::new();
        let canceller = tokio::spawn({
            let token = token.clone();
            async move {
                sleep(Duration::from_millis(2_500)).await;
                token.cancel();
            }
        });
        let mut probe = Probe::new(None);
        let result = poll(&token, SECOND, Duration::MAX, || probe.check()).await;
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(probe.runs, secs(&[0, 1, 2]));
        assert_eq!(probe.start.elapsed(), Duration::from_millis(2_500));
        canceller.await.expect("the canceller does not panic");
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_shorter_than_the_interval_ends_the_poll_after_the_first_check() {
        let mut probe = Probe::new(None);
        let result = poll(&uncancelled(), 10 * SECOND, SECOND, || probe.check()).await;
        assert!(matches!(result, Err(Error::Timeout { .. })));
        assert_eq!(probe.runs, secs(&[0]));
        assert_eq!(probe.start.elapsed(), SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_is_reported_over_the_timeout() {
        let token = CancellationToken::new();
        let mut probe = Probe::new(None);
        let result = poll(&token, SECOND, 3 * SECOND, || {
            if probe.runs.len() == 1 {
                token.cancel();
            }
            probe.check()
        })
        .await;
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(probe.runs, secs(&[0, 1]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_check_shortens_the_next_wait_instead_of_shifting_the_schedule() {
        let mut probe = Probe::new(Some(3)).slow(4 * SECOND);
        let result = poll(&uncancelled(), 10 * SECOND, 60 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs, secs(&[0, 10, 20]));
    }

    #[tokio::test(start_paused = true)]
    async fn ticks_missed_during_a_long_check_collapse_into_one() {
        let mut probe = Probe::new(Some(4)).slow(15 * SECOND);
        let result = poll(&uncancelled(), 10 * SECOND, 100 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        // The tick due at 10s fires as soon as the first check ends at 15s, then 20s's at 30s.
        assert_eq!(probe.runs, secs(&[0, 15, 30, 45]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_interval_polls_back_to_back_without_starving_the_runtime() {
        let mut probe = Probe::new(Some(50));
        let result = poll(&uncancelled(), Duration::ZERO, SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs.len(), 50);
        assert_eq!(probe.start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_condition_ends_the_poll_with_an_error() {
        let result: Result<(), Error<NotReady>> =
            poll(&uncancelled(), SECOND, 10 * SECOND, || async {
                panic!("informer gone")
            })
            .await;
        assert!(matches!(
            result,
            Err(Error::Panicked { ref message, .. }) if message == "informer gone"
        ));
    }
}
