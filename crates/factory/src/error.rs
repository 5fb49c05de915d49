//! The factory's error type.

/// What can go wrong asking a [`SharedInformerFactory`](crate::SharedInformerFactory) for an
/// informer or starting it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The factory has been shut down: it hands out no more informers and starts nothing.
    #[error("cannot {action}: the informer factory has been shut down")]
    ShutDown {
        /// What was attempted.
        action: &'static str,
    },
    /// `start` was called outside a tokio runtime, or an informer was requested outside one
    /// from a factory that has started (and so starts it at once): there is nowhere to run
    /// the informers.
    #[error("cannot start informers outside a tokio runtime")]
    NoRuntime,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
