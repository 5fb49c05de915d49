//! The crate's error type.

/// What can go wrong when building a work queue's parts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A token bucket was asked to refill at a negative or NaN rate; use zero for "never
    /// refill" and `f64::INFINITY` for "no limit".
    #[error("invalid token bucket rate {qps}: expected zero, a positive number or infinity")]
    InvalidRate {
        /// The rejected rate, in tokens per second.
        qps: f64,
    },
}

/// `Result` with this crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
