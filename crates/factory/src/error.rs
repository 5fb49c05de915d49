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
    /// The factory was built without a shard of its own
    /// ([`FactoryOptions::shard`](crate::FactoryOptions::shard)), so it has none to move.
    #[error("cannot move the factory's shard: it was built without one")]
    NoShard,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
