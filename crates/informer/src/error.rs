//! The informer's error type.

/// What can go wrong configuring or running a [`SharedIndexInformer`](crate::SharedIndexInformer).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `run` was called on an informer that is already running.
    #[error("cannot {action}: the informer has already started")]
    AlreadyStarted {
        /// What was attempted.
        action: &'static str,
    },
    /// The informer has stopped: it takes no more handlers and never runs again.
    #[error("cannot {action}: the informer has stopped")]
    Stopped {
        /// What was attempted.
        action: &'static str,
    },
    /// The processor refused a registration (its handler thread could not start).
    #[error("the event handler could not be registered")]
    Processor(#[source] kinformer_processor::Error),
    /// The cache refused a change (an index name already taken, an object without a name).
    #[error("the informer's cache refused the change")]
    Store(#[source] kinformer_store::Error),
    /// Two options that do not go together.
    #[error("the informer's options conflict: {reason}")]
    Options {
        /// Which, and why.
        reason: &'static str,
    },
    /// The queue could not be built from the options given.
    #[error("the informer's queue could not be built")]
    Queue(#[source] kinformer_fifo::Error),
}

impl From<kinformer_processor::Error> for Error {
    fn from(error: kinformer_processor::Error) -> Self {
        Self::Processor(error)
    }
}

impl From<kinformer_store::Error> for Error {
    fn from(error: kinformer_store::Error) -> Self {
        Self::Store(error)
    }
}

impl From<kinformer_fifo::Error> for Error {
    fn from(error: kinformer_fifo::Error) -> Self {
        Self::Queue(error)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
