use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::panic::catch_panic;
use crate::sleep::{Slept, sleep_or_cancel};

/// Returns a duration between `duration` and `duration + max_factor * duration`, chosen
/// uniformly at random, so that many clients retrying on the same schedule spread out.
///
/// A `max_factor` of zero or less means 1.0 (up to twice `duration`), as in Go.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let base = Duration::from_secs(10);
/// let jittered = kinformer_wait::jitter(base, 0.5);
/// assert!(jittered >= base && jittered <= Duration::from_secs(15));
/// ```
#[doc(alias = "Jitter")]
#[must_use]
pub fn jitter(duration: Duration, max_factor: f64) -> Duration {
    let max_factor = if max_factor <= 0.0 { 1.0 } else { max_factor };
    duration.saturating_add(scale(duration, fastrand::f64() * max_factor))
}

/// `duration * factor`, truncated to whole nanoseconds like Go's `time.Duration(float64(d) * f)`,
/// saturating instead of overflowing (and at zero for negative or NaN factors).
fn scale(duration: Duration, factor: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "float-to-int `as` saturates, which is the overflow behaviour we want"
    )]
    let nanos = (duration.as_nanos() as f64 * factor) as u64;
    Duration::from_nanos(nanos)
}

/// Parameters of an exponential backoff; [`step`](Backoff::step) yields the successive delays.
///
/// The fields mean what they mean in apimachinery's `wait.Backoff`. The zero value
/// ([`Backoff::default`]) always steps zero.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kinformer_wait::Backoff;
///
/// let mut backoff = Backoff {
///     duration: Duration::from_secs(1),
///     factor: 2.0,
///     steps: 3,
///     cap: Some(Duration::from_secs(3)),
///     ..Backoff::default()
/// };
/// let delays: Vec<_> = (0..4).map(|_| backoff.step().as_secs()).collect();
/// assert_eq!(delays, [1, 2, 3, 3]);
/// assert_eq!(backoff.steps, 0);
/// ```
#[doc(alias = "wait.Backoff")]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Backoff {
    /// The next base delay (the initial delay before the first step).
    pub duration: Duration,
    /// Multiplies `duration` at each step, while steps remain and the cap is not reached.
    /// Zero leaves `duration` unchanged. Should not be negative.
    pub factor: f64,
    /// Each returned delay adds a uniformly random extra between zero and `jitter * duration`.
    /// Jitter never feeds back into `duration`. Zero or less means no jitter.
    pub jitter: f64,
    /// How many more steps may change `duration`; at zero the delay stays where it is.
    /// (Go's `int` allows negatives, which behave exactly like zero.)
    pub steps: u32,
    /// Upper bound on `duration`: a step that would exceed it sets `duration` to the cap and
    /// `steps` to zero. `None` means no cap (Go's zero `Cap`).
    pub cap: Option<Duration>,
}

impl Backoff {
    /// Returns the delay to sleep now and advances the backoff: `steps` counts down and
    /// `duration` grows by `factor`, up to `cap`.
    ///
    /// The returned delay is the current `duration` (jittered if `jitter > 0`); the growth
    /// applies to the next call. Once `steps` is zero every call returns the same (jittered)
    /// `duration`.
    #[doc(alias = "Step")]
    pub fn step(&mut self) -> Duration {
        if self.steps == 0 {
            return self.jittered(self.duration);
        }
        self.steps -= 1;

        let current = self.duration;
        if self.factor != 0.0 {
            let next = scale(current, self.factor);
            match self.cap {
                Some(cap) if next > cap => {
                    self.duration = cap;
                    self.steps = 0;
                }
                _ => self.duration = next,
            }
        }
        self.jittered(current)
    }

    fn jittered(&self, duration: Duration) -> Duration {
        if self.jitter > 0.0 {
            jitter(duration, self.jitter)
        } else {
            duration
        }
    }
}

/// Checks `condition` with exponential backoff between attempts, until it reports done, fails,
/// or the backoff runs out.
///
/// Semantics are apimachinery's `ExponentialBackoff`: the condition runs at most
/// `backoff.steps` times, with `backoff.step()` sleeps in between; a sleep cut short by the
/// cap ends the loop without another check. `steps == 0` never runs the condition.
///
/// A panic inside the condition is caught and returned as [`Error::Panicked`] (Go re-panics).
///
/// # Errors
///
/// [`Error::Condition`] with the condition's own error, [`Error::BackoffExhausted`] when the
/// steps ran out, or [`Error::Panicked`].
#[doc(alias = "ExponentialBackoff")]
pub async fn exponential_backoff<C, Fut, E>(backoff: Backoff, condition: C) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    // A token nobody can cancel makes the two flavours share one loop.
    exponential_backoff_with_token(&CancellationToken::new(), backoff, condition).await
}

/// [`exponential_backoff`] that also stops when `token` is cancelled: before each attempt and
/// during each sleep (apimachinery's `ExponentialBackoffWithContext`).
///
/// # Errors
///
/// As [`exponential_backoff`], plus [`Error::Cancelled`].
#[doc(alias = "ExponentialBackoffWithContext")]
pub async fn exponential_backoff_with_token<C, Fut, E>(
    token: &CancellationToken,
    mut backoff: Backoff,
    mut condition: C,
) -> Result<(), Error<E>>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    let mut attempts = 0;
    while backoff.steps > 0 {
        if token.is_cancelled() {
            return Err(Error::Cancelled);
        }
        attempts += 1;
        match catch_panic("exponential backoff condition", condition()).await {
            Ok(Ok(true)) => return Ok(()),
            Ok(Ok(false)) => {}
            Ok(Err(error)) => return Err(Error::Condition(error)),
            Err(panicked) => return Err(panicked.widen()),
        }
        if backoff.steps == 1 {
            break;
        }
        if sleep_or_cancel(token, backoff.step()).await == Slept::Cancelled {
            return Err(Error::Cancelled);
        }
    }
    Err(Error::BackoffExhausted { attempts })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use proptest::prelude::*;
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn secs(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|&s| Duration::from_secs(s)).collect()
    }

    /// Ported from apimachinery's TestBackoff_Step (the cases without jitter). Go's `nil`
    /// backoff has no Rust counterpart; the zero value plays its part, and Go's `Steps: -1`
    /// is our `steps: 0`.
    #[test]
    fn step_follows_go_sequences_without_jitter() {
        let cases = [
            (Backoff::default(), vec![Duration::ZERO; 4]),
            (
                Backoff {
                    duration: SECOND,
                    steps: 0,
                    ..Backoff::default()
                },
                secs(&[1, 1, 1]),
            ),
            (
                Backoff {
                    duration: SECOND,
                    steps: 1,
                    ..Backoff::default()
                },
                secs(&[1, 1, 1]),
            ),
            (
                Backoff {
                    duration: SECOND,
                    factor: 1.0,
                    steps: 1,
                    ..Backoff::default()
                },
                secs(&[1, 1, 1]),
            ),
            (
                Backoff {
                    duration: SECOND,
                    factor: 2.0,
                    steps: 3,
                    ..Backoff::default()
                },
                secs(&[1, 2, 4]),
            ),
            (
                Backoff {
                    duration: SECOND,
                    factor: 2.0,
                    steps: 3,
                    cap: Some(3 * SECOND),
                    ..Backoff::default()
                },
                secs(&[1, 2, 3]),
            ),
        ];
        for (initial, want) in cases {
            let mut backoff = initial;
            let got: Vec<_> = want.iter().map(|_| backoff.step()).collect();
            assert_eq!(got, want, "stepping {initial:?}");
        }
    }

    /// Ported from apimachinery's TestBackoff_Step (the cases with jitter). Go only checks that
    /// a jittered delay is not below its expectation by more than the jitter; here the base
    /// sequence is exact and every delay lies within `[base, base * (1 + jitter)]`.
    #[test]
    fn step_jitters_each_delay_without_feeding_jitter_back() {
        let cases = [
            (
                Backoff {
                    duration: SECOND,
                    factor: 2.0,
                    steps: 2,
                    cap: Some(3 * SECOND),
                    jitter: 0.5,
                },
                secs(&[1, 2, 3]),
            ),
            (
                Backoff {
                    duration: SECOND,
                    factor: 2.0,
                    steps: 6,
                    jitter: 4.0,
                    cap: None,
                },
                secs(&[1, 2, 4, 8, 16, 32]),
            ),
        ];
        for _ in 0..5 {
            for (initial, bases) in &cases {
                let mut backoff = *initial;
                let mut unjittered = Backoff {
                    jitter: 0.0,
                    ..*initial
                };
                for base in bases {
                    let got = backoff.step();
                    assert_eq!(unjittered.step(), *base);
                    assert_eq!(
                        (backoff.duration, backoff.steps),
                        (unjittered.duration, unjittered.steps),
                        "jitter leaked into the state of {initial:?}"
                    );
                    let most = base.mul_f64(1.0 + initial.jitter);
                    assert!(
                        got >= *base && got <= most,
                        "{got:?} outside [{base:?}, {most:?}] for {initial:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn reaching_the_cap_ends_the_steps_and_holds_the_duration_at_the_cap() {
        let mut backoff = Backoff {
            duration: SECOND,
            factor: 3.0,
            steps: 100,
            cap: Some(5 * SECOND),
            ..Backoff::default()
        };
        assert_eq!(backoff.step(), SECOND);
        assert_eq!((backoff.duration, backoff.steps), (3 * SECOND, 99));
        assert_eq!(backoff.step(), 3 * SECOND);
        assert_eq!((backoff.duration, backoff.steps), (5 * SECOND, 0));
        for _ in 0..3 {
            assert_eq!(backoff.step(), 5 * SECOND);
            assert_eq!((backoff.duration, backoff.steps), (5 * SECOND, 0));
        }
    }

    #[test]
    fn steps_running_out_freezes_the_last_grown_duration() {
        let mut backoff = Backoff {
            duration: SECOND,
            factor: 2.0,
            steps: 2,
            ..Backoff::default()
        };
        let got: Vec<_> = (0..4).map(|_| backoff.step()).collect();
        assert_eq!(got, secs(&[1, 2, 4, 4]));
    }

    #[test]
    fn huge_factors_saturate_instead_of_overflowing() {
        let mut backoff = Backoff {
            duration: Duration::MAX,
            factor: 1e30,
            steps: 2,
            ..Backoff::default()
        };
        assert_eq!(backoff.step(), Duration::MAX);
        assert!(backoff.step() >= Duration::from_nanos(u64::MAX));
    }

    #[derive(Debug, PartialEq)]
    struct ConditionFailed;

    /// Ported from apimachinery's TestExponentialBackoff.
    #[tokio::test(start_paused = true)]
    async fn exponential_backoff_checks_at_most_steps_times() {
        let calls = Cell::new(0);
        let count_and = |done: bool| {
            calls.set(calls.get() + 1);
            async move { Ok::<_, ConditionFailed>(done) }
        };

        // Zero steps: the condition never runs.
        let result = exponential_backoff(
            Backoff {
                factor: 1.0,
                ..Backoff::default()
            },
            || count_and(false),
        )
        .await;
        assert!(matches!(
            result,
            Err(Error::BackoffExhausted { attempts: 0 })
        ));
        assert_eq!(calls.get(), 0);

        let opts = Backoff {
            factor: 1.0,
            steps: 3,
            ..Backoff::default()
        };

        calls.set(0);
        let result = exponential_backoff(opts, || count_and(false)).await;
        assert!(matches!(
            result,
            Err(Error::BackoffExhausted { attempts: 3 })
        ));
        assert_eq!(calls.get(), 3);

        calls.set(0);
        let result = exponential_backoff(opts, || count_and(true)).await;
        assert!(result.is_ok());
        assert_eq!(calls.get(), 1);

        let result = exponential_backoff(opts, || async { Err::<bool, _>(ConditionFailed) }).await;
        assert!(matches!(result, Err(Error::Condition(ConditionFailed))));

        calls.set(1);
        let result = exponential_backoff(opts, || {
            let done = calls.get() >= 3;
            if !done {
                calls.set(calls.get() + 1);
            }
            async move { Ok::<_, ConditionFailed>(done) }
        })
        .await;
        assert!(result.is_ok());
        assert_eq!(calls.get(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn exponential_backoff_sleeps_the_grown_delays_between_checks() {
        let start = Instant::now();
        let mut checked_at = Vec::new();
        let backoff = Backoff {
            duration: SECOND,
            factor: 2.0,
            steps: 4,
            ..Backoff::default()
        };
        let result = exponential_backoff(backoff, || {
            checked_at.push(start.elapsed());
            async { Ok::<_, ConditionFailed>(false) }
        })
        .await;
        assert!(matches!(
            result,
            Err(Error::BackoffExhausted { attempts: 4 })
        ));
        // Sleeps of 1s, 2s, 4s between four checks, and none after the last.
        assert_eq!(checked_at, secs(&[0, 1, 3, 7]));
        assert_eq!(start.elapsed(), 7 * SECOND);
    }

    /// Go's `ExponentialBackoff` documents that "a sleep truncated by the cap on duration"
    /// ends the loop: the capped step zeroes `steps`, so no check follows that sleep.
    #[tokio::test(start_paused = true)]
    async fn exponential_backoff_stops_after_the_sleep_that_reached_the_cap() {
        let start = Instant::now();
        let mut checks = 0;
        let backoff = Backoff {
            duration: SECOND,
            factor: 2.0,
            steps: 10,
            cap: Some(3 * SECOND),
            ..Backoff::default()
        };
        let result = exponential_backoff(backoff, || {
            checks += 1;
            async { Ok::<_, ConditionFailed>(false) }
        })
        .await;
        assert!(matches!(
            result,
            Err(Error::BackoffExhausted { attempts: 2 })
        ));
        assert_eq!(checks, 2);
        assert_eq!(start.elapsed(), 3 * SECOND);
    }

    /// Ported from apimachinery's TestExponentialBackoffWithContext (the deadline cases are
    /// the cancelled ones here: a token has no deadline of its own).
    #[tokio::test(start_paused = true)]
    async fn exponential_backoff_with_token_table() {
        struct Case {
            name: &'static str,
            steps: u32,
            zero_duration: bool,
            cancelled_up_front: bool,
            done_at_attempt: Option<u32>,
            fail: bool,
            cancel_after: Option<u32>,
            attempts_expected: u32,
            expected: fn(&Result<(), Error<ConditionFailed>>) -> bool,
        }
        let base = Case {
            name: "",
            steps: 5,
            zero_duration: false,
            cancelled_up_front: false,
            done_at_attempt: None,
            fail: false,
            cancel_after: None,
            attempts_expected: 0,
            expected: |_| false,
        };
        let exhausted: fn(&Result<(), Error<ConditionFailed>>) -> bool =
            |r| matches!(r, Err(Error::BackoffExhausted { .. }));
        let ok: fn(&Result<(), Error<ConditionFailed>>) -> bool = Result::is_ok;
        let cancelled: fn(&Result<(), Error<ConditionFailed>>) -> bool =
            |r| matches!(r, Err(Error::Cancelled));
        let cases = [
            Case {
                name: "no attempts expected with zero backoff steps",
                steps: 0,
                expected: exhausted,
                ..base
            },
            Case {
                name: "condition returns false with single backoff step",
                steps: 1,
                attempts_expected: 1,
                expected: exhausted,
                ..base
            },
            Case {
                name: "condition returns true with single backoff step",
                steps: 1,
                done_at_attempt: Some(1),
                attempts_expected: 1,
                expected: ok,
                ..base
            },
            Case {
                name: "condition always returns false with multiple backoff steps",
                attempts_expected: 5,
                expected: exhausted,
                ..base
            },
            Case {
                name: "condition returns true after certain attempts with multiple backoff steps",
                done_at_attempt: Some(3),
                attempts_expected: 3,
                expected: ok,
                ..base
            },
            Case {
                name: "condition returns error no further attempts expected",
                fail: true,
                attempts_expected: 1,
                expected: |r| matches!(r, Err(Error::Condition(ConditionFailed))),
                ..base
            },
            Case {
                name: "context already canceled no attempts expected",
                cancelled_up_front: true,
                expected: cancelled,
                ..base
            },
            Case {
                name: "condition always returns false with multiple backoff steps but is cancelled at step 4",
                cancel_after: Some(4),
                attempts_expected: 4,
                expected: cancelled,
                ..base
            },
            Case {
                name: "condition returns true after certain attempts with multiple backoff steps and zero duration",
                zero_duration: true,
                done_at_attempt: Some(3),
                attempts_expected: 3,
                expected: ok,
                ..base
            },
        ];
        for case in cases {
            let token = CancellationToken::new();
            if case.cancelled_up_front {
                token.cancel();
            }
            let backoff = Backoff {
                duration: if case.zero_duration {
                    Duration::ZERO
                } else {
                    Duration::from_micros(1)
                },
                factor: 1.0,
                steps: case.steps,
                ..Backoff::default()
            };
            let mut attempts = 0;
            let result = exponential_backoff_with_token(&token, backoff, || {
                attempts += 1;
                if case.cancel_after == Some(attempts) {
                    token.cancel();
                }
                let outcome = if case.fail {
                    Err(ConditionFailed)
                } else {
                    Ok(case.done_at_attempt == Some(attempts))
                };
                async move { outcome }
            })
            .await;
            assert!((case.expected)(&result), "{}: got {result:?}", case.name);
            assert_eq!(attempts, case.attempts_expected, "{}", case.name);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn exponential_backoff_returns_a_panicking_condition_as_an_error() {
        let backoff = Backoff {
            steps: 3,
            ..Backoff::default()
        };
        let result: Result<(), Error<ConditionFailed>> =
            exponential_backoff(backoff, || async { panic!("condition exploded") }).await;
        assert!(matches!(
            result,
            Err(Error::Panicked { ref message, .. }) if message == "condition exploded"
        ));
    }

    #[test]
    fn backoff_exhausted_says_how_many_attempts_were_made() {
        let error: Error = Error::BackoffExhausted { attempts: 7 };
        assert_eq!(
            error.to_string(),
            "backoff gave up after 7 attempts without the condition being met"
        );
    }

    proptest! {
        #[test]
        fn jitter_stays_within_duration_and_factor_times_duration(
            nanos in 0u64..=1_000_000_000_000,
            factor in -10.0f64..10.0,
        ) {
            let duration = Duration::from_nanos(nanos);
            let effective = if factor <= 0.0 { 1.0 } else { factor };
            let jittered = jitter(duration, factor);
            prop_assert!(jittered >= duration);
            #[allow(clippy::cast_precision_loss, reason = "values stay below 2^53")]
            let most_extra = (nanos as f64 * effective).ceil();
            #[allow(clippy::cast_precision_loss, reason = "values stay below 2^53")]
            let extra = (jittered - duration).as_nanos() as f64;
            prop_assert!(extra <= most_extra, "extra {} > {}", extra, most_extra);
        }

        #[test]
        fn stepping_never_passes_the_cap_and_never_adds_steps(
            initial_ms in 1u64..10_000,
            factor in 1.0f64..4.0,
            steps in 0u32..40,
            cap_ms in 1u64..100_000,
        ) {
            let cap = Duration::from_millis(cap_ms);
            let mut backoff = Backoff {
                duration: Duration::from_millis(initial_ms).min(cap),
                factor,
                steps,
                cap: Some(cap),
                jitter: 0.0,
            };
            let mut previous = Duration::ZERO;
            for _ in 0..50 {
                let steps_before = backoff.steps;
                let delay = backoff.step();
                prop_assert!(delay <= cap);
                prop_assert!(delay >= previous, "delays shrank: {:?} after {:?}", delay, previous);
                prop_assert!(backoff.steps <= steps_before);
                previous = delay;
            }
        }
    }
}
