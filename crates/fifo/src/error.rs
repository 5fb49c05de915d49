//! The queue layer's error type.

/// A boxed error from a process function.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a queue can report, and what a process function can ask of it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The queue was closed and holds nothing more to pop.
    #[doc(alias = "ErrFIFOClosed")]
    #[error("the queue is closed")]
    Closed,
    /// Returned by a process function: put the popped item back in the queue (unless the key
    /// has been queued again meanwhile), then report `source`, if any, from `pop`.
    #[doc(alias = "ErrRequeue")]
    #[error("the popped item was requeued")]
    Requeue {
        /// The failure to hand back from `pop` after requeueing; `None` makes `pop` succeed.
        #[source]
        source: Option<BoxError>,
    },
    /// Returned by a process function that failed; `pop` hands it back and drops the item.
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

impl Error {
    /// Asks `pop` to requeue the item and then succeed.
    pub fn requeue() -> Self {
        Self::Requeue { source: None }
    }

    /// Asks `pop` to requeue the item and then report `source`.
    pub fn requeue_with(source: impl Into<BoxError>) -> Self {
        Self::Requeue {
            source: Some(source.into()),
        }
    }

    /// A process function's failure.
    pub fn process(source: impl Into<BoxError>) -> Self {
        Self::Process {
            source: source.into(),
        }
    }
}

/// The queue layer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
