use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a cancellable sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slept {
    /// The full delay elapsed.
    Elapsed,
    /// The token fired first (or had already fired).
    Cancelled,
}

/// Sleeps until `deadline` unless `token` fires first. Cancellation wins a tie, so a loop
/// never runs its body again once it has been asked to stop.
pub(crate) async fn sleep_until_or_cancel(token: &CancellationToken, deadline: Instant) -> Slept {
    if deadline <= Instant::now() {
        // A zero or overdue delay must still yield: a loop with period zero (allowed, as in
        // Go) would otherwise never give the runtime, or the canceller, a chance to run.
        tokio::task::yield_now().await;
        return if token.is_cancelled() {
            Slept::Cancelled
        } else {
            Slept::Elapsed
        };
    }
    tokio::select! {
        biased;
        () = token.cancelled() => Slept::Cancelled,
        () = tokio::time::sleep_until(deadline) => Slept::Elapsed,
    }
}
