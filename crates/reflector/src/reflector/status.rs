//! What a reflector reports about itself: why it stopped, and the failures since it last made
//! progress.

/// Why [`Reflector::run`](super::Reflector::run) returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReflectorExit {
    /// The token was cancelled.
    Cancelled,
    /// The resource is no longer served
    /// ([`Error::ResourceGone`](crate::Error::ResourceGone), under
    /// [`stop_when_resource_gone`](super::ReflectorOptions::stop_when_resource_gone)); running
    /// again would only fail again.
    ResourceGone,
}

/// The reflector's errors since it last made progress (a list applied, a watch event
/// received): what a caller waiting for sync needs to tell "slow" from "failing".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failures {
    /// How many errors in a row, with no list applied or watch event received between them.
    pub consecutive: u32,
    /// The latest of them, with its chain of causes (`the API server refused the connection:
    /// ...: Connection refused (os error 111)`); `None` once the reflector makes progress.
    pub last_error: Option<String>,
}
