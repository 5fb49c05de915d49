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
    /// The lock needs a name, a namespace and an identity.
    #[error("the leader election lock needs a non-empty {what}")]
    EmptyName {
        /// `"lease name"`, `"namespace"` or `"identity"`.
        what: &'static str,
    },
    /// A shard group or identity that cannot name a Lease or a label: lowercase letters,
    /// digits, `-` and `.`, starting and ending with a letter or digit.
    #[error("the {what} {name:?} cannot name a Lease (lowercase letters, digits, '-' and '.')")]
    InvalidName {
        /// `"shard group"` or `"identity"`.
        what: &'static str,
        /// The name given.
        name: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
