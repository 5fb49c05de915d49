//! Waiting, retrying and backing off on tokio: the runtime helpers every kinformer loop uses.
//!
//! This is the bottom layer of kinformer, the Rust counterpart of apimachinery's
//! `k8s.io/apimachinery/pkg/util/wait` and `util/runtime`. It owns:
//!
//! - one periodic loop that stops on a [`CancellationToken`], [`until`], sliding or not and
//!   jittered or not by its [`Period`], and the [`jitter`] function;
//! - exponential backoff: [`Backoff`] (its [`step`](Backoff::step) is Go's `Backoff.Step`),
//!   and the [`BackoffManager`] trait with the reflector's resetting
//!   [`ExponentialBackoffManager`];
//! - polling a condition until it holds, a deadline passes or a token fires: [`poll`];
//! - panic capture that logs and returns instead of unwinding into the runtime:
//!   [`catch_panic`] and [`catch_panic_sync`];
//! - [`ErrorChain`], which displays an error with its sources for a log line.
//!
//! It depends on no other kinformer crate. Everything sleeps on tokio's clock, so tests run
//! with a paused clock (`#[tokio::test(start_paused = true)]`) are exact and instant.
//!
//! Start here: [`Backoff`] for retry schedules, [`until`] for a periodic loop, and
//! [`poll`] to wait for a condition.
//!
//! ```
//! use std::time::Duration;
//! use kinformer_wait::Backoff;
//!
//! // Doubling from 10ms, at most 5 growth steps, capped at 100ms.
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
//! assert_eq!(backoff.steps, 0);
//! ```
//!
//! Errors are one enum, [`Error`], generic over the error type of the caller's condition, which
//! comes back untouched in [`Error::Condition`].
//!
//! # Who uses what
//!
//! Every helper here exists once; the layers use these rather than copies of their own:
//!
//! - kinformer-reflector: [`ExponentialBackoffManager`] between list and watch rounds (any
//!   [`BackoffManager`] can replace it) and [`jitter`] for the random watch timeout;
//! - kinformer-processor: [`catch_panic_sync`] around every handler call;
//! - kinformer-testing: [`poll`] behind its `wait_until` and `eventually`.
//!
//! The rest ([`until`], [`catch_panic`]) are for controllers built on kinformer, as client-go's
//! `wait` and `runtime` packages are for controllers built on client-go: a worker loop is
//! `until(&token, period, work)`.

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
