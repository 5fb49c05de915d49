//! Waiting, retrying and backing off on tokio: the runtime helpers every kinformer loop uses.
//!
//! This is the bottom layer of kinformer, the Rust counterpart of apimachinery's
//! `k8s.io/apimachinery/pkg/util/wait` and `util/runtime`, cut to one form of each concept.
//! It owns:
//!
//! - one periodic loop, [`until`], which stops on a [`CancellationToken`]; its [`Period`]
//!   says whether the wait is measured from the end of a run or its start and how much it is
//!   jittered (client-go's `Until`, `NonSlidingUntil` and `JitterUntil`);
//! - one wait for a condition, [`poll`]: checked at once, then on a fixed ticker, until it
//!   holds, a deadline passes or the token fires (`PollUntilContextTimeout`);
//! - retry schedules: [`Backoff`], whose [`step`](Backoff::step) is Go's `Backoff.Step`, and
//!   the [`BackoffManager`] trait with the reflector's resetting [`ExponentialBackoffManager`];
//!   [`jitter`] spreads a single delay;
//! - panic capture that logs and returns instead of unwinding into the runtime:
//!   [`catch_panic`] for a future, [`catch_panic_sync`] for a closure (`HandleCrash`);
//! - [`ErrorChain`], which displays an error with its sources for a log line;
//! - one error enum, [`Error`], generic over the error type of the caller's condition, which
//!   comes back untouched in [`Error::Condition`].
//!
//! It depends on no other kinformer crate. Everything sleeps on tokio's clock, so tests run
//! with a paused clock (`#[tokio::test(start_paused = true)]`) are exact and instant.
//!
//! # Example
//!
//! A worker that retries with a growing delay, a periodic loop, and a wait with a deadline:
//!
//! ```
//! use std::time::Duration;
//! use kinformer_wait::{Backoff, CancellationToken, Error, Period, poll, until};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // Retry: doubling from 10ms, at most 5 growth steps, capped at 100ms.
//! let mut backoff = Backoff {
//!     duration: Duration::from_millis(10),
//!     factor: 2.0,
//!     steps: 5,
//!     cap: Some(Duration::from_millis(100)),
//!     ..Backoff::default()
//! };
//! let delays: Vec<u128> = (0..6).map(|_| backoff.step().as_millis()).collect();
//! // 80 * 2 would pass the cap, so the duration settles at the cap and the steps end.
//! assert_eq!(delays, [10, 20, 40, 80, 100, 100]);
//!
//! // A loop every second (each wait up to 10% longer), until the token fires.
//! let token = CancellationToken::new();
//! let mut runs = 0;
//! until(&token, Period::new(Duration::from_secs(1)).jitter(0.1), || {
//!     runs += 1;
//!     if runs == 3 {
//!         token.cancel();
//!     }
//!     async {}
//! })
//! .await;
//! assert_eq!(runs, 3);
//!
//! // A condition checked every 100ms for at most 1s; here the token has already fired.
//! let waited = poll(&token, Duration::from_millis(100), Duration::from_secs(1), || async {
//!     Ok::<_, std::io::Error>(false)
//! })
//! .await;
//! assert!(matches!(waited, Err(Error::Cancelled)));
//! # }
//! ```
//!
//! # Who uses what
//!
//! Every helper here exists once; the layers use these rather than copies of their own:
//!
//! - kinformer-reflector: [`ExponentialBackoffManager`] between list and watch rounds (any
//!   [`BackoffManager`] can replace it, through `ReflectorOptions::backoff`), [`jitter`] for
//!   the random watch timeout, and [`ErrorChain`] in its logs;
//! - kinformer-processor: [`catch_panic_sync`] around every handler call;
//! - kinformer-informer and kinformer-factory: [`ErrorChain`] in their logs;
//! - kinformer-testing: [`poll`] behind its `wait_until` and `eventually`;
//! - the umbrella `kinformer`: this crate as `kinformer::wait`, and [`CancellationToken`] in
//!   its prelude.
//!
//! The rest ([`until`] and [`Period`], [`catch_panic`]) is for controllers built on
//! kinformer, as client-go's `wait` and `runtime` packages are for controllers built on
//! client-go: a worker loop is `until(&token, period, work)`.

mod backoff;
mod chain;
mod error;
mod manager;
mod panic;
mod poll;
mod sleep;
#[cfg(test)]
mod test_support;
mod until;

pub use backoff::{Backoff, jitter};
pub use chain::ErrorChain;
pub use error::Error;
pub use manager::{BackoffManager, ExponentialBackoffManager};
pub use panic::{catch_panic, catch_panic_sync};
pub use poll::poll;
pub use until::{Period, until};

/// Re-exported because every loop here stops on one.
pub use tokio_util::sync::CancellationToken;

#[cfg(test)]
mod send_sync {
    use std::time::Duration;

    use super::*;

    fn assert_send<T: Send>(_: &T) {}
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn shared_types_are_send_and_sync() {
        assert_send_sync::<Error<std::io::Error>>();
        assert_send_sync::<Backoff>();
        assert_send_sync::<ExponentialBackoffManager>();
        assert_send_sync::<Period>();
    }

    /// The loops must be spawnable on a multi-threaded runtime when their closures are `Send`.
    #[test]
    fn loop_futures_are_send() {
        let token = CancellationToken::new();
        let period = Duration::from_secs(1);
        let condition = || async { Ok::<_, std::io::Error>(true) };
        assert_send(&until(&token, period, || async {}));
        assert_send(&until(&token, Period::new(period).jitter(1.0), || async {}));
        assert_send(&poll(&token, period, period, condition));
        assert_send(&catch_panic("send", async {}));
    }
}

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
