//! Waiting in tests for what another task or thread does, on kinformer-wait's polling loop.

use std::{convert::Infallible, time::Duration};

use kinformer_wait::CancellationToken;

/// How often the condition is checked.
const INTERVAL: Duration = Duration::from_millis(10);

/// Whether `condition` holds within `within`: checked right away, then every 10 ms of tokio
/// time (so on a paused clock the wait costs no real time).
///
/// A test that needs a diagnostic when it times out checks the result itself; one that only
/// needs to fail calls [`eventually`].
pub async fn wait_until(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let never_cancelled = CancellationToken::new();
    kinformer_wait::poll(&never_cancelled, INTERVAL, within, || {
        let done = condition();
        async move { Ok::<_, Infallible>(done) }
    })
    .await
    .is_ok()
}

/// Waits until `condition` holds, as [`wait_until`] does.
///
/// # Panics
///
/// When it does not hold within `within`, naming `what` was waited for.
pub async fn eventually(what: &str, within: Duration, condition: impl FnMut() -> bool) {
    assert!(
        wait_until(within, condition).await,
        "timed out after {within:?} waiting until {what}"
    );
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_condition_that_comes_true_is_seen_and_one_that_never_does_times_out() {
        let checks = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&checks);
        let third = wait_until(Duration::from_secs(1), move || {
            counted.fetch_add(1, Ordering::SeqCst) == 2
        });
        assert!(third.await);
        assert_eq!(checks.load(Ordering::SeqCst), 3);

        let started = tokio::time::Instant::now();
        assert!(!wait_until(Duration::from_secs(1), || false).await);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "waiting until the impossible")]
    async fn eventually_names_what_it_waited_for() {
        eventually("the impossible", Duration::from_secs(1), || false).await;
    }
}
