use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::manager::{BackoffManager, JitteredBackoffManager};
use crate::panic::catch_panic;
use crate::sleep::{Slept, sleep_until_or_cancel};

/// Runs `f` every `period` until `token` is cancelled; the period is measured from the end of
/// each run (sliding).
///
/// `f` is not run at all if `token` is already cancelled, and the loop returns as soon as the
/// token fires during a wait (or right after the run during which it fired). A run in progress
/// is not interrupted: `f` should watch the token itself if it can take long (see
/// [`until_with_token`]). A panic in `f` is caught, logged, and the loop goes on.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_util::sync::CancellationToken;
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
pub async fn until<F, Fut>(token: &CancellationToken, period: Duration, f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    jitter_until(token, period, 0.0, true, f).await;
}

/// [`until`], handing `f` a clone of the token so a long run can notice cancellation
/// (apimachinery's `UntilWithContext`).
#[doc(alias = "UntilWithContext")]
pub async fn until_with_token<F, Fut>(token: &CancellationToken, period: Duration, mut f: F)
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    until(token, period, || f(token.clone())).await;
}

/// Runs `f` every `period` until `token` is cancelled; the period is measured from the start of
/// each run, so it includes `f`'s own run time (a run longer than the period is followed
/// immediately by the next).
#[doc(alias = "NonSlidingUntil")]
#[doc(alias = "NonSlidingUntilWithContext")]
pub async fn non_sliding_until<F, Fut>(token: &CancellationToken, period: Duration, f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    jitter_until(token, period, 0.0, false, f).await;
}

/// Runs `f` every `period` until `token` is cancelled, with each wait jittered by up to
/// `jitter_factor * period` when `jitter_factor > 0`.
///
/// With `sliding` the period is measured after `f` finishes; without it, the period includes
/// `f`'s run time. Otherwise as [`until`].
#[doc(alias = "JitterUntil")]
#[doc(alias = "JitterUntilWithContext")]
pub async fn jitter_until<F, Fut>(
    token: &CancellationToken,
    period: Duration,
    jitter_factor: f64,
    sliding: bool,
    f: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    backoff_until(
        token,
        JitteredBackoffManager::new(period, jitter_factor),
        sliding,
        f,
    )
    .await;
}

/// Runs `f` repeatedly until `token` is cancelled, waiting between runs for whatever delay
/// `manager` gives (apimachinery's `BackoffUntil`).
///
/// With `sliding` the delay is taken and started after `f` finishes; without it, the delay is
/// taken and started just before `f` runs, so it includes `f`'s run time.
#[doc(alias = "BackoffUntil")]
pub async fn backoff_until<M, F, Fut>(
    token: &CancellationToken,
    mut manager: M,
    sliding: bool,
    mut f: F,
) where
    M: BackoffManager,
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        if token.is_cancelled() {
            return;
        }
        let deadline_set_before_run = (!sliding).then(|| Instant::now() + manager.next_delay());

        // The panic is already logged by `catch_panic`; the loop outlives a failed run, like
        // Go's loop with `ReallyCrash = false`.
        let _ = catch_panic("until loop body", f()).await;

        let deadline =
            deadline_set_before_run.unwrap_or_else(|| Instant::now() + manager.next_delay());
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
    use crate::Backoff;

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
    /// WithContext twins (the already-closed half).
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
        until_with_token(&token, Duration::ZERO, |_| body()).await;
        non_sliding_until(&token, Duration::ZERO, body).await;
        jitter_until(&token, Duration::ZERO, 1.0, true, body).await;
        backoff_until(&token, Backoff::default(), false, body).await;
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
    async fn non_sliding_until_includes_the_run_time_in_the_period() {
        let starts = run_starts(3, 3 * SECOND, async |token, body| {
            non_sliding_until(token, 10 * SECOND, body).await;
        })
        .await;
        assert_eq!(starts, secs(&[0, 10, 20]));
    }

    #[tokio::test(start_paused = true)]
    async fn non_sliding_until_runs_again_at_once_after_a_run_longer_than_the_period() {
        let starts = run_starts(3, 15 * SECOND, async |token, body| {
            non_sliding_until(token, 10 * SECOND, body).await;
        })
        .await;
        assert_eq!(starts, secs(&[0, 15, 30]));
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_until_waits_between_the_period_and_the_jittered_maximum() {
        let starts = run_starts(20, Duration::ZERO, async |token, body| {
            jitter_until(token, 10 * SECOND, 0.5, true, body).await;
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
    async fn jitter_until_with_a_negative_factor_does_not_jitter() {
        let starts = run_starts(3, Duration::ZERO, async |token, body| {
            jitter_until(token, SECOND, -30.0, true, body).await;
        })
        .await;
        assert_eq!(starts, secs(&[0, 1, 2]));
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_until_waits_the_delays_the_manager_gives() {
        let backoff = Backoff {
            duration: SECOND,
            factor: 2.0,
            steps: 3,
            ..Backoff::default()
        };
        let starts = run_starts(5, Duration::ZERO, async |token, body| {
            backoff_until(token, backoff, true, body).await;
        })
        .await;
        // Delays 1, 2, 4, then the frozen duration 8 once the steps are used up.
        assert_eq!(starts, secs(&[0, 1, 3, 7, 15]));
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
            jitter_until(&token, 30 * SECOND, 1.0, sliding, || {
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
        jitter_until(&token, Duration::from_millis(1), 1.0, true, || {
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

    #[tokio::test(start_paused = true)]
    async fn until_with_token_hands_the_body_a_token_that_stops_the_loop() {
        let token = CancellationToken::new();
        let mut runs = 0;
        until_with_token(&token, SECOND, |given| {
            runs += 1;
            let stop = runs == 2;
            async move {
                assert!(!given.is_cancelled());
                if stop {
                    given.cancel();
                }
            }
        })
        .await;
        assert_eq!(runs, 2);
        assert!(token.is_cancelled());
    }
}
