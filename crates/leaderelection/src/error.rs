//! The leader election's error type.

/// What can go wrong setting up a [`LeaderElector`](crate::LeaderElector). Once running, the
/// elector retries every API error itself (a conflict on update is normal flow: another
/// replica wrote first), so `run` returns nothing to handle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The durations cannot keep one leader at a time (client-go's `NewLeaderElector` checks).
    #[error("the leader election options do not hold together: {reason}")]
    Options {
        /// Which, and why.
        reason: &'static str,
    },
    /// A name that cannot be used: an empty lease name, namespace, shard group or identity,
    /// or a shard group or identity that cannot name a Lease or a label (lowercase letters,
    /// digits, `-` and `.`, starting and ending with a letter or digit).
    #[error(
        "the {what} {name:?} cannot name a Lease (non-empty; for a shard, lowercase letters, digits, '-' and '.')"
    )]
    InvalidName {
        /// `"lease name"`, `"namespace"`, `"shard group"` or `"identity"`.
        what: &'static str,
        /// The name given (empty when none was).
        name: String,
    },
}

/// `Result` with this crate's [`Error`].
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
