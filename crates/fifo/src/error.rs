//! The queue layer's error type.

/// A boxed error from a process function.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a queue can report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The queue was closed and holds nothing more to pop.
    #[doc(alias = "ErrFIFOClosed")]
    #[error("the queue is closed")]
    Closed,
    /// The process function reported a failure ([`Processed::Failed`](crate::Processed) or
    /// [`Processed::Retry`](crate::Processed)); `pop` hands it back.
    #[error("processing the popped item failed")]
    Process {
        /// What the process function reported.
        #[source]
        source: BoxError,
    },
    /// An object could not be keyed (it has no name, or the key func refused it); the queue is
    /// unchanged.
    #[doc(alias = "KeyError")]
    #[error("object cannot be keyed")]
    Key(#[from] kinformer_store::Error),
    /// The options given to a constructor contradict each other, as client-go's constructors
    /// would panic on.
    #[error("invalid queue options: {reason}")]
    InvalidOptions {
        /// Which combination was refused.
        reason: &'static str,
    },
}

/// The queue layer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
