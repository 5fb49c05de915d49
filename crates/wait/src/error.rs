use std::convert::Infallible;
use std::time::Duration;

/// Why a poll or a guarded task ended without success.
///
/// The type parameter is the error type of the caller's condition: [`poll`](crate::poll) runs a
/// fallible condition and hands its error back untouched in [`Error::Condition`], the way
/// apimachinery returns the condition's own `error`. Helpers that never run a fallible
/// condition ([`catch_panic`](crate::catch_panic)) use the default, [`Infallible`], so the
/// variant cannot occur there.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error<E = Infallible> {
    /// The timeout elapsed before the condition reported done (`context.DeadlineExceeded` from
    /// Go's `PollUntilContextTimeout`, `ErrWaitTimeout` from its older polls).
    #[error("timed out after {timeout:?} waiting for the condition")]
    Timeout {
        /// The timeout the caller gave.
        timeout: Duration,
    },

    /// The cancellation token fired before the condition reported done (Go's
    /// `context.Canceled`).
    #[error("cancelled before the condition was met")]
    Cancelled,

    /// The guarded closure or future panicked; the panic was caught and logged instead of
    /// unwinding into the runtime.
    #[error("{name} panicked: {message}")]
    Panicked {
        /// The name the caller gave the guarded work, so logs say what panicked.
        name: String,
        /// The panic message when the payload was a string, or a placeholder otherwise.
        message: String,
    },

    /// The condition itself failed; this is its error, unchanged.
    #[error(transparent)]
    Condition(E),
}

impl Error<Infallible> {
    /// Widens an error that cannot carry a condition error into one that can, so a panic
    /// caught while running a condition can be returned from a loop that is generic over `E`.
    pub(crate) fn widen<E>(self) -> Error<E> {
        match self {
            Self::Timeout { timeout } => Error::Timeout { timeout },
            Self::Cancelled => Error::Cancelled,
            Self::Panicked { name, message } => Error::Panicked { name, message },
            Self::Condition(never) => match never {},
        }
    }
}
