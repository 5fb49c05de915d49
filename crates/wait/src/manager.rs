use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Backoff;

/// A source of successive delays for a retry loop, injectable so a caller can bring its own
/// scheme (or a fixed one in tests): the reflector takes one in `ReflectorOptions::backoff`.
///
/// apimachinery's `BackoffManager` hands out a shared timer; here the manager only computes the
/// delay and the caller sleeps it (`tokio::time::sleep(manager.next_delay())`, or in a
/// `select!` with its token), which keeps the trait object safe and the sleeping on tokio's
/// clock.
pub trait BackoffManager: Send {
    /// The delay to wait before the next attempt; advances the manager's state.
    fn next_delay(&mut self) -> Duration;
}

impl<M: BackoffManager + ?Sized> BackoffManager for &mut M {
    fn next_delay(&mut self) -> Duration {
        (**self).next_delay()
    }
}

impl<M: BackoffManager + ?Sized> BackoffManager for Box<M> {
    fn next_delay(&mut self) -> Duration {
        (**self).next_delay()
    }
}

/// A plain [`Backoff`] is a manager that never resets: it steps until its steps run out, then
/// repeats its last delay.
impl BackoffManager for Backoff {
    fn next_delay(&mut self) -> Duration {
        self.step()
    }
}

/// Exponential backoff that starts over after a quiet spell: client-go's
/// `NewExponentialBackoffManager`, used by the reflector between failed list/watch attempts.
///
/// Each delay doubles (by `factor`) up to `max`, with jitter; if no delay was asked for during
/// more than `reset_after`, the next one starts again from `initial`. Time is read from tokio's
/// clock ([`tokio::time::Instant`]), so tests with a paused clock are exact.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kinformer_wait::{BackoffManager, ExponentialBackoffManager};
///
/// let mut manager = ExponentialBackoffManager::new(
///     Duration::from_millis(100),
///     Duration::from_millis(350),
///     Duration::from_secs(60),
///     2.0,
///     0.0,
/// );
/// let delays: Vec<_> = (0..4).map(|_| manager.next_delay().as_millis()).collect();
/// assert_eq!(delays, [100, 200, 350, 350]);
/// ```
#[doc(alias = "NewExponentialBackoffManager")]
#[doc(alias = "exponentialBackoffManagerImpl")]
#[doc(alias = "DelayWithReset")]
#[derive(Debug, Clone)]
pub struct ExponentialBackoffManager {
    backoff: Backoff,
    initial: Duration,
    reset_after: Duration,
    last_backoff: Instant,
}

impl ExponentialBackoffManager {
    /// The reflector's initial delay (client-go's `defaultBackoffInit`, 800ms).
    const REFLECTOR_INITIAL: Duration = Duration::from_millis(800);
    /// The reflector's maximum delay (30s).
    const REFLECTOR_MAX: Duration = Duration::from_secs(30);
    /// The reflector's quiet spell after which the backoff resets (2 minutes).
    const REFLECTOR_RESET_AFTER: Duration = Duration::from_secs(120);
    /// The reflector's growth factor (2.0).
    const REFLECTOR_FACTOR: f64 = 2.0;
    /// The reflector's jitter (1.0: each delay up to twice its base).
    const REFLECTOR_JITTER: f64 = 1.0;

    /// A manager starting at `initial`, growing by `factor` up to `max`, jittered by `jitter`,
    /// and starting over when more than `reset_after` passes between two delays.
    #[must_use]
    pub fn new(
        initial: Duration,
        max: Duration,
        reset_after: Duration,
        factor: f64,
        jitter: f64,
    ) -> Self {
        Self {
            backoff: Self::fresh(initial, max, factor, jitter),
            initial,
            reset_after,
            last_backoff: Instant::now(),
        }
    }

    fn fresh(initial: Duration, max: Duration, factor: f64, jitter: f64) -> Backoff {
        Backoff {
            duration: initial,
            factor,
            jitter,
            // Go sets MaxInt32 steps and assumes they never run out, so only the cap stops
            // growth; u32::MAX plays the same role.
            steps: u32::MAX,
            cap: Some(max),
        }
    }
}

impl Default for ExponentialBackoffManager {
    /// The manager client-go's reflector uses, and kinformer's: 800ms initial, 30s max, reset
    /// after 2 quiet minutes, factor 2.0, jitter 1.0 (each delay up to twice its base).
    fn default() -> Self {
        Self::new(
            Self::REFLECTOR_INITIAL,
            Self::REFLECTOR_MAX,
            Self::REFLECTOR_RESET_AFTER,
            Self::REFLECTOR_FACTOR,
            Self::REFLECTOR_JITTER,
        )
    }
}

impl BackoffManager for ExponentialBackoffManager {
    fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if now.saturating_duration_since(self.last_backoff) > self.reset_after {
            self.backoff.steps = u32::MAX;
            self.backoff.duration = self.initial;
        }
        self.last_backoff = now;
        self.backoff.step()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::advance;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn delays(manager: &mut impl BackoffManager, count: usize) -> Vec<Duration> {
        (0..count).map(|_| manager.next_delay()).collect()
    }

    fn ms(values: &[u32]) -> Vec<Duration> {
        values.iter().map(|&v| MS * v).collect()
    }

    /// Ported from client-go's TestExponentialBackoffManagerGetNextBackoff (milliseconds
    /// instead of nanoseconds, since tokio's timer counts in milliseconds).
    #[tokio::test(start_paused = true)]
    async fn exponential_manager_grows_to_the_max_and_resets_after_a_quiet_spell() {
        let mut manager = ExponentialBackoffManager::new(MS, 10 * MS, 10 * MS, 2.0, 0.0);
        assert_eq!(delays(&mut manager, 7), ms(&[1, 2, 4, 8, 10, 10, 10]));

        advance(11 * MS).await;
        assert_eq!(
            manager.next_delay(),
            MS,
            "a gap over the reset period starts over"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn exponential_manager_keeps_growing_when_the_gap_equals_the_reset_period() {
        let mut manager =
            ExponentialBackoffManager::new(MS, Duration::from_secs(1), 10 * MS, 2.0, 0.0);
        assert_eq!(delays(&mut manager, 3), ms(&[1, 2, 4]));
        // Go resets only when strictly more than the reset period has passed.
        advance(10 * MS).await;
        assert_eq!(manager.next_delay(), 8 * MS);
        advance(10 * MS + Duration::from_micros(1)).await;
        assert_eq!(manager.next_delay(), MS);
    }

    #[tokio::test(start_paused = true)]
    async fn every_call_restarts_the_quiet_spell() {
        let mut manager =
            ExponentialBackoffManager::new(MS, Duration::from_secs(1), 10 * MS, 2.0, 0.0);
        manager.next_delay();
        for expected in [2, 4, 8, 16] {
            advance(9 * MS).await;
            assert_eq!(manager.next_delay(), MS * expected);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn reflector_defaults_match_client_go() {
        let manager = ExponentialBackoffManager::default();
        assert_eq!(manager.initial, Duration::from_millis(800));
        assert_eq!(manager.reset_after, Duration::from_secs(120));
        assert_eq!(manager.backoff.cap, Some(Duration::from_secs(30)));
        assert!((manager.backoff.factor - 2.0).abs() < f64::EPSILON);
        assert!((manager.backoff.jitter - 1.0).abs() < f64::EPSILON);

        let mut manager = manager;
        let mut base = Duration::from_millis(800);
        for _ in 0..10 {
            let delay = manager.next_delay();
            assert!(
                delay >= base && delay <= base * 2,
                "{delay:?} outside [{base:?}, 2x]"
            );
            base = (base * 2).min(Duration::from_secs(30));
        }
    }

    #[test]
    fn a_boxed_manager_is_a_manager() {
        let mut injected: Box<dyn BackoffManager> = Box::new(Backoff {
            duration: MS,
            factor: 3.0,
            steps: 5,
            ..Backoff::default()
        });
        assert_eq!(delays(&mut injected, 3), ms(&[1, 3, 9]));
    }
}
