use std::time::Duration;

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

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
