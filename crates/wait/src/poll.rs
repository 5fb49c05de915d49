use std::future::{Future, pending};
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::panic::catch_panic;

/// Checks `condition` every `interval` until it reports done or fails, giving up after
/// `timeout`. The first check comes one interval after the start.
///
/// # Errors
///
/// [`Error::Timeout`] when `timeout` elapses first, [`Error::Condition`] with the condition's
/// own error, or [`Error::Panicked`] if the condition panicked.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kinformer_wait::Error;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let never = kinformer_wait::poll(Duration::from_secs(1), Duration::from_secs(5), || async {
///     Ok::<_, std::io::Error>(false)
/// })
/// .await;
/// assert!(matches!(never, Err(Error::Timeout { timeout }) if timeout == Duration::from_secs(5)));
/// # }
/// ```
#[doc(alias = "Poll")]
#[doc(alias = "PollWithContext")]
pub async fn poll<C, Fut, E>(
    interval: Duration,
    timeout: Duration,
    condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    poll_until_timeout(
        &CancellationToken::new(),
        interval,
        timeout,
        false,
        condition,
    )
    .await
}

/// [`poll`], but the first check runs right away, before any wait; it always runs at least
/// once.
///
/// # Errors
///
/// As [`poll`].
#[doc(alias = "PollImmediate")]
#[doc(alias = "PollImmediateWithContext")]
pub async fn poll_immediate<C, Fut, E>(
    interval: Duration,
    timeout: Duration,
    condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    poll_until_timeout(
        &CancellationToken::new(),
        interval,
        timeout,
        true,
        condition,
    )
    .await
}

/// Checks `condition` every `interval`, the first check one interval after the start, until it
/// reports done, fails, or `token` is cancelled.
///
/// # Errors
///
/// [`Error::Cancelled`] when the token fires first (Go's legacy `PollUntil` says
/// `ErrWaitTimeout` here), [`Error::Condition`], or [`Error::Panicked`].
#[doc(alias = "PollUntil")]
#[doc(alias = "PollUntilWithContext")]
#[doc(alias = "PollInfiniteWithContext")]
pub async fn poll_until<C, Fut, E>(
    token: &CancellationToken,
    interval: Duration,
    condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    poll_until_cancelled(token, interval, false, condition).await
}

/// [`poll_until`], but the first check runs right away, before any wait (and even if the token
/// is already cancelled).
///
/// # Errors
///
/// As [`poll_until`].
#[doc(alias = "PollImmediateUntil")]
#[doc(alias = "PollImmediateUntilWithContext")]
#[doc(alias = "PollImmediateInfiniteWithContext")]
pub async fn poll_immediate_until<C, Fut, E>(
    token: &CancellationToken,
    interval: Duration,
    condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    poll_until_cancelled(token, interval, true, condition).await
}

/// Checks `condition` every `interval` until it reports done, fails, or `token` is cancelled:
/// apimachinery's `PollUntilContextCancel`.
///
/// With `immediate` the first check runs before any wait, even if the token is already
/// cancelled, so the condition always runs at least once; otherwise the first check comes one
/// interval after the start. Checks follow a fixed ticker started with the loop, so a slow
/// check shortens the next wait instead of pushing the schedule back, and ticks missed while a
/// check ran collapse into one (Go's `time.Ticker`).
///
/// # Errors
///
/// [`Error::Cancelled`], [`Error::Condition`] with the condition's own error, or
/// [`Error::Panicked`].
#[doc(alias = "PollUntilContextCancel")]
pub async fn poll_until_cancelled<C, Fut, E>(
    token: &CancellationToken,
    interval: Duration,
    immediate: bool,
    condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    loop_condition(token, None, interval, immediate, condition).await
}

/// [`poll_until_cancelled`] that also gives up after `timeout`: apimachinery's
/// `PollUntilContextTimeout`.
///
/// When the token fires and the timeout elapses at the same instant, cancellation is reported.
///
/// # Errors
///
/// [`Error::Timeout`], [`Error::Cancelled`], [`Error::Condition`] with the condition's own
/// error, or [`Error::Panicked`].
#[doc(alias = "PollUntilContextTimeout")]
pub async fn poll_until_timeout<C, Fut, E>(
    token: &CancellationToken,
    interval: Duration,
    timeout: Duration,
    immediate: bool,
    condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    loop_condition(token, Some(timeout), interval, immediate, condition).await
}

/// The one polling loop, after apimachinery's `loopConditionUntilContext` with a fixed,
/// non-sliding ticker.
async fn loop_condition<C, Fut, E>(
    token: &CancellationToken,
    timeout: Option<Duration>,
    interval: Duration,
    immediate: bool,
    mut condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    let start = Instant::now();
    // A timeout too large to represent as an instant is as good as none.
    let deadline = timeout.and_then(|timeout| Some((start.checked_add(timeout)?, timeout)));
    let mut ticker = Ticker::starting_at(start, interval);

    if immediate && check(&mut condition).await? {
        return Ok(());
    }
    loop {
        tokio::select! {
            biased;
            () = token.cancelled() => return Err(Error::Cancelled),
            timeout = until_deadline(deadline) => return Err(Error::Timeout { timeout }),
            () = ticker.tick() => {}
        }
        // Both may have become due at the instant the tick fired; stopping wins, so the
        // condition never runs after the caller's limit.
        if token.is_cancelled() {
            return Err(Error::Cancelled);
        }
        if let Some((at, timeout)) = deadline
            && Instant::now() >= at
        {
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

/// Sleeps until the deadline, if any, and returns the timeout it stands for.
async fn until_deadline(deadline: Option<(Instant, Duration)>) -> Duration {
    match deadline {
        Some((at, timeout)) => {
            tokio::time::sleep_until(at).await;
            timeout
        }
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

    /// Ported from apimachinery's TestPoll, with the real ticker on a paused clock.
    #[tokio::test(start_paused = true)]
    async fn poll_waits_an_interval_before_each_check_and_succeeds_when_done() {
        let mut probe = Probe::new(Some(3));
        let result = poll(SECOND, 10 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs, secs(&[1, 2, 3]));
    }

    #[tokio::test(start_paused = true)]
    async fn poll_times_out_and_says_after_how_long() {
        let mut probe = Probe::new(None);
        let result = poll(SECOND, 5 * SECOND, || probe.check()).await;
        let Err(error) = result else {
            panic!("expected a timeout, got {result:?}");
        };
        assert!(matches!(error, Error::Timeout { timeout } if timeout == 5 * SECOND));
        assert_eq!(
            error.to_string(),
            "timed out after 5s waiting for the condition"
        );
        // The tick at 5s coincides with the deadline, and the deadline wins.
        assert_eq!(probe.runs, secs(&[1, 2, 3, 4]));
        assert_eq!(probe.start.elapsed(), 5 * SECOND);
    }

    /// Ported from apimachinery's TestPollError.
    #[tokio::test(start_paused = true)]
    async fn poll_hands_back_the_conditions_own_error() {
        let mut runs = 0;
        let result = poll(SECOND, 10 * SECOND, || {
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
    async fn poll_immediate_checks_before_waiting() {
        let mut probe = Probe::new(Some(1));
        let result = poll_immediate(SECOND, 10 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs, secs(&[0]));
        assert_eq!(probe.start.elapsed(), Duration::ZERO);
    }

    /// Ported from apimachinery's TestPollImmediateError.
    #[tokio::test(start_paused = true)]
    async fn poll_immediate_returns_an_immediate_error_without_waiting() {
        let start = Instant::now();
        let result = poll_immediate(SECOND, 10 * SECOND, || async {
            Err::<bool, _>(NotReady("broken"))
        })
        .await;
        assert!(matches!(result, Err(Error::Condition(NotReady("broken")))));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn poll_immediate_keeps_checking_on_the_interval_after_the_first_check() {
        let mut probe = Probe::new(Some(4));
        let result = poll_immediate(SECOND, 10 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs, secs(&[0, 1, 2, 3]));
    }

    /// Ported from apimachinery's TestPollImmediateUntilWithContext ("context is already
    /// cancelled, no retry is attempted"); Go's legacy answer there is ErrWaitTimeout, today's
    /// context-based loop answers the context's error, as we do.
    #[tokio::test(start_paused = true)]
    async fn an_immediate_check_runs_once_even_when_already_cancelled() {
        let token = CancellationToken::new();
        token.cancel();
        let mut probe = Probe::new(None);
        let result = poll_immediate_until(&token, SECOND, || probe.check()).await;
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(probe.runs, secs(&[0]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_poll_never_checks_when_already_cancelled() {
        let token = CancellationToken::new();
        token.cancel();
        let mut probe = Probe::new(None);
        let result = poll_until(&token, SECOND, || probe.check()).await;
        assert!(matches!(result, Err(Error::Cancelled)));
        assert!(probe.runs.is_empty());
    }

    /// Ported from apimachinery's TestPollUntil.
    #[tokio::test(start_paused = true)]
    async fn poll_until_returns_promptly_when_cancelled_between_checks() {
        let token = CancellationToken::new();
        let canceller = tokio::spawn({
            let token = token.clone();
            async move {
                sleep(Duration::from_millis(2_500)).await;
                token.cancel();
            }
        });
        let mut probe = Probe::new(None);
        let result = poll_until(&token, SECOND, || probe.check()).await;
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(probe.runs, secs(&[1, 2]));
        assert_eq!(probe.start.elapsed(), Duration::from_millis(2_500));
        canceller.await.expect("the canceller does not panic");
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_shorter_than_the_interval_never_checks_without_immediate() {
        let mut probe = Probe::new(Some(1));
        let result = poll_until_timeout(
            &CancellationToken::new(),
            10 * SECOND,
            SECOND,
            false,
            || probe.check(),
        )
        .await;
        assert!(matches!(result, Err(Error::Timeout { .. })));
        assert!(probe.runs.is_empty());
        assert_eq!(probe.start.elapsed(), SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_is_reported_over_the_timeout() {
        let token = CancellationToken::new();
        let mut probe = Probe::new(None);
        let result = poll_until_timeout(&token, SECOND, 3 * SECOND, false, || {
            if probe.runs.len() == 1 {
                token.cancel();
            }
            probe.check()
        })
        .await;
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(probe.runs, secs(&[1, 2]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_check_shortens_the_next_wait_instead_of_shifting_the_schedule() {
        let mut probe = Probe::new(Some(3)).slow(4 * SECOND);
        let result = poll(10 * SECOND, 60 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs, secs(&[10, 20, 30]));
    }

    #[tokio::test(start_paused = true)]
    async fn ticks_missed_during_a_long_check_collapse_into_one() {
        let mut probe = Probe::new(Some(4)).slow(15 * SECOND);
        let result = poll(10 * SECOND, 100 * SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        // The tick due at 20s fires as soon as the first check ends at 25s, then 30s's at 40s.
        assert_eq!(probe.runs, secs(&[10, 25, 40, 55]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_interval_polls_back_to_back_without_starving_the_runtime() {
        let mut probe = Probe::new(Some(50));
        let result = poll_immediate(Duration::ZERO, SECOND, || probe.check()).await;
        assert_eq!(result.ok(), Some(()));
        assert_eq!(probe.runs.len(), 50);
        assert_eq!(probe.start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_condition_ends_the_poll_with_an_error() {
        let result: Result<(), Error<NotReady>> =
            poll_immediate(SECOND, 10 * SECOND, || async { panic!("informer gone") }).await;
        assert!(matches!(
            result,
            Err(Error::Panicked { ref message, .. }) if message == "informer gone"
        ));
    }
}
