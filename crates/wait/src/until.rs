use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::jitter;
use crate::panic::catch_panic;
use crate::sleep::{Slept, sleep_until_or_cancel};

/// How often [`until`] runs its body: a period, jittered or not, measured from the end of each
/// run (sliding, the default) or from its start.
///
/// A plain [`Duration`] converts into a sliding period without jitter, so the common loop is
/// `until(&token, Duration::from_secs(1), work)`; the setters give client-go's other loops:
///
/// | client-go | `Period` |
/// |-----------|----------|
/// | `Until(f, period, stop)` | `period` (a `Duration`) |
/// | `NonSlidingUntil(f, period, stop)` | `Period::new(period).sliding(false)` |
/// | `JitterUntil(f, period, factor, sliding, stop)` | `Period::new(period).jitter(factor).sliding(sliding)` |
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kinformer_wait::Period;
///
/// // Every 30s measured from the start of each run, each wait up to 50% longer.
/// let resync = Period::new(Duration::from_secs(30)).jitter(0.5).sliding(false);
/// assert_eq!(Period::from(Duration::from_secs(1)), Period::new(Duration::from_secs(1)));
/// # let _ = resync;
/// ```
#[doc(alias = "JitterUntil")]
#[doc(alias = "NonSlidingUntil")]
#[doc(alias = "JitteredBackoffManager")]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    period: Duration,
    jitter_factor: f64,
    sliding: bool,
}

impl Period {
    /// Every `period`, measured from the end of each run, without jitter.
    #[must_use]
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            jitter_factor: 0.0,
            sliding: true,
        }
    }

    /// Lengthens each wait by a uniformly random extra of up to `factor * period` (client-go's
    /// `jitterFactor`). Zero or less means no jitter, the default (unlike the [`jitter`]
    /// function, which reads zero as 1.0).
    #[must_use]
    pub fn jitter(mut self, factor: f64) -> Self {
        self.jitter_factor = factor;
        self
    }

    /// Whether the period is measured from the end of each run (`true`, the default) or from
    /// its start (`false`, client-go's `NonSlidingUntil`): then it includes the run's own time,
    /// and a run longer than the period is followed at once by the next.
    #[must_use]
    pub fn sliding(mut self, sliding: bool) -> Self {
        self.sliding = sliding;
        self
    }

    fn next_delay(&self) -> Duration {
        if self.jitter_factor > 0.0 {
            jitter(self.period, self.jitter_factor)
        } else {
            self.period
        }
    }
}

impl From<Duration> for Period {
    /// [`Period::new`]: sliding, without jitter.
    fn from(period: Duration) -> Self {
        Self::new(period)
    }
}

/// Runs `f` every `period` until `token` is cancelled: client-go's `Until`, `NonSlidingUntil`
/// and `JitterUntil` in one loop, told apart by the [`Period`] (a plain [`Duration`] is a
/// sliding period without jitter).
///
/// `f` is not run at all if `token` is already cancelled, and the loop returns as soon as the
/// token fires during a wait (or right after the run during which it fired). A run in progress
/// is not interrupted: a body that can take long should watch the token itself (capture a
/// clone). A panic in `f` is caught, logged, and the loop goes on.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kinformer_wait::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let token = CancellationToken::new();
/// let mut runs = 0;
/// kinformer_wait::until(&token, Duration::from_secs(1), || {
///     runs += 1;
///     if runs == 3 {
///         token.cancel();
///     }
///     async {}
/// })
/// .await;
/// assert_eq!(runs, 3);
/// # }
/// ```
#[doc(alias = "Until")]
#[doc(alias = "UntilWithContext")]
#[doc(alias = "NonSlidingUntilWithContext")]
#[doc(alias = "JitterUntilWithContext")]
pub async fn until<F, Fut>(token: &CancellationToken, period: impl Into<Period>, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let period = period.into();
    loop {
        if token.is_cancelled() {
            return;
        }
        let deadline_set_before_run =
            (!period.sliding).then(|| Instant::now() + period.next_delay());

        // The panic is already logged by `catch_panic`; the loop outlives a failed run, like
        // Go's loop with `ReallyCrash = false`.
        let _ = catch_panic("until loop body", f()).await;

        let deadline =
            deadline_set_before_run.unwrap_or_else(|| Instant::now() + period.next_delay());
        if sleep_until_or_cancel(token, deadline).await == Slept::Cancelled {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use parking_lot::Mutex;
    use tokio::time::{Instant, sleep};

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn secs(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|&s| Duration::from_secs(s)).collect()
    }

    /// Runs a loop whose body takes `work` and records when each run started; the body
    /// cancels the token on its `runs`-th run.
    async fn run_starts(
        runs: usize,
        work: Duration,
        looper: impl AsyncFnOnce(
            &CancellationToken,
            Box<dyn FnMut() -> futures::future::BoxFuture<'static, ()> + Send>,
        ),
    ) -> Vec<Duration> {
        let token = CancellationToken::new();
        let start = Instant::now();
        let starts = Arc::new(Mutex::new(Vec::new()));
        let body = {
            let starts = Arc::clone(&starts);
            let token = token.clone();
            move || -> futures::future::BoxFuture<'static, ()> {
                let mut starts_now = starts.lock();
                starts_now.push(start.elapsed());
                let last = starts_now.len() == runs;
                let token = token.clone();
                Box::pin(async move {
                    sleep(work).await;
                    if last {
                        token.cancel();
                    }
                })
            }
        };
        looper(&token, Box::new(body)).await;
        starts.lock().clone()
    }

    /// Ported from apimachinery's TestUntil, TestNonSlidingUntil, TestJitterUntil and their
    /// WithContext twins (the already-closed half): every kind of period.
    #[tokio::test(start_paused = true)]
    async fn loops_never_run_the_body_when_the_token_is_already_cancelled() {
        let token = CancellationToken::new();
        token.cancel();
        let runs = AtomicU32::new(0);
        let body = || {
            runs.fetch_add(1, Ordering::Relaxed);
            async {}
        };
        until(&token, Duration::ZERO, body).await;
        until(&token, Period::new(Duration::ZERO).sliding(false), body).await;
        until(&token, Period::new(Duration::ZERO).jitter(1.0), body).await;
        assert_eq!(runs.load(Ordering::Relaxed), 0);
    }

    /// Ported from apimachinery's TestUntil (the running half): a zero period still lets
    /// another task run and cancel the loop.
    #[tokio::test(start_paused = true)]
    async fn a_zero_period_loop_yields_and_stops_when_cancelled_elsewhere() {
        let token = CancellationToken::new();
        let runs = Arc::new(AtomicU32::new(0));
        let looping = tokio::spawn({
            let token = token.clone();
            let runs = Arc::clone(&runs);
            async move {
                until(&token, Duration::ZERO, || {
                    runs.fetch_add(1, Ordering::Relaxed);
                    async {}
                })
                .await;
            }
        });
        while runs.load(Ordering::Relaxed) < 3 {
            tokio::task::yield_now().await;
        }
        token.cancel();
        looping.await.expect("the loop task does not panic");
    }

    #[tokio::test(start_paused = true)]
    async fn sliding_until_measures_the_period_after_each_run() {
        let starts = run_starts(3, 3 * SECOND, async |token, body| {
            until(token, 10 * SECOND, body).await;
        })
        .await;
        assert_eq!(starts, secs(&[0, 13, 26]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_non_sliding_period_includes_the_run_time_in_the_period() {
        let starts = run_starts(3, 3 * SECOND, async |token, body| {
            until(token, Period::new(10 * SECOND).sliding(false), body).await;
        })
        .await;
        assert_eq!(starts, secs(&[0, 10, 20]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_non_sliding_loop_runs_again_at_once_after_a_run_longer_than_the_period() {
        let starts = run_starts(3, 15 * SECOND, async |token, body| {
            until(token, Period::new(10 * SECOND).sliding(false), body).await;
        })
        .await;
        assert_eq!(starts, secs(&[0, 15, 30]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_jittered_loop_waits_between_the_period_and_the_jittered_maximum() {
        let starts = run_starts(20, Duration::ZERO, async |token, body| {
            until(token, Period::new(10 * SECOND).jitter(0.5), body).await;
        })
        .await;
        assert_eq!(starts.len(), 20);
        // tokio's timer fires on whole milliseconds, so a jittered deadline can be reached up
        // to a millisecond late even on a paused clock.
        let latest = 15 * SECOND + Duration::from_millis(1);
        for gap in starts.windows(2).map(|pair| pair[1] - pair[0]) {
            assert!(gap >= 10 * SECOND && gap <= latest, "gap {gap:?}");
        }
        assert!(
            starts
                .windows(2)
                .any(|pair| pair[1] - pair[0] != 10 * SECOND),
            "twenty waits without any jitter"
        );
    }

    /// Ported from apimachinery's TestJitterUntilNegativeFactor.
    #[tokio::test(start_paused = true)]
    async fn a_negative_jitter_factor_does_not_jitter() {
        let starts = run_starts(3, Duration::ZERO, async |token, body| {
            until(token, Period::new(SECOND).jitter(-30.0), body).await;
        })
        .await;
        assert_eq!(starts, secs(&[0, 1, 2]));
    }

    #[tokio::test(start_paused = true)]
    async fn until_stops_promptly_when_cancelled_during_the_wait() {
        let token = CancellationToken::new();
        let runs = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let looping = tokio::spawn({
            let token = token.clone();
            let runs = Arc::clone(&runs);
            async move {
                until(&token, 60 * SECOND, || {
                    runs.fetch_add(1, Ordering::Relaxed);
                    async {}
                })
                .await;
                Instant::now()
            }
        });
        sleep(5 * SECOND).await;
        token.cancel();
        let stopped_at = looping.await.expect("the loop task does not panic");
        assert_eq!(stopped_at - start, 5 * SECOND);
        assert_eq!(runs.load(Ordering::Relaxed), 1);
    }

    /// Ported from apimachinery's TestUntilReturnsImmediately and
    /// TestJitterUntilReturnsImmediately.
    #[tokio::test(start_paused = true)]
    async fn cancelling_inside_the_body_returns_without_waiting_the_period() {
        for sliding in [true, false] {
            let token = CancellationToken::new();
            let start = Instant::now();
            let mut runs = 0;
            let period = Period::new(30 * SECOND).jitter(1.0).sliding(sliding);
            until(&token, period, || {
                runs += 1;
                token.cancel();
                async {}
            })
            .await;
            assert_eq!(runs, 1);
            assert_eq!(start.elapsed(), Duration::ZERO);
        }
    }

    /// Ported from apimachinery's TestJitterUntilRecoversPanic.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_run_is_caught_and_the_loop_goes_on() {
        let token = CancellationToken::new();
        let mut runs = 0;
        let period = Period::new(Duration::from_millis(1)).jitter(1.0);
        until(&token, period, || {
            runs += 1;
            let this_run = runs;
            let token = token.clone();
            async move {
                if this_run > 2 {
                    token.cancel();
                    return;
                }
                panic!("TestJitterUntilRecoversPanic");
            }
        })
        .await;
        assert_eq!(runs, 3);
    }

    /// Ported from client-go's TestJitteredBackoffManagerGetNextBackoff: the schedule behind
    /// `JitterUntil`, now a `Period`'s.
    #[test]
    fn a_period_jitters_only_with_a_positive_factor() {
        let ms = Duration::from_millis(1);
        let positive = Period::new(ms).jitter(1.0);
        for _ in 0..50 {
            let delay = positive.next_delay();
            assert!((ms..=2 * ms).contains(&delay), "{delay:?} out of range");
        }
        let negative = Period::new(ms).jitter(-1.0);
        assert_eq!([(); 3].map(|()| negative.next_delay()), [ms; 3]);
    }

    #[test]
    fn a_duration_is_a_sliding_period_without_jitter() {
        let period = Period::from(SECOND);
        assert_eq!(period, Period::new(SECOND));
        assert_eq!(period, Period::new(SECOND).jitter(0.0).sliding(true));
        assert_eq!(period.next_delay(), SECOND);
    }
}
