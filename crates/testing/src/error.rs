//! The crate's error type.

/// What can go wrong when starting, steering or calling the fake server from a test.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding or re-binding the listening socket failed.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why the bind failed.
        #[source]
        source: std::io::Error,
    },
    /// A programmatic write was refused the way the HTTP API would refuse it.
    #[error("the server refused the request with {code} {reason}: {message}")]
    Api {
        /// The HTTP status code of the refusal.
        code: u16,
        /// The Status reason, e.g. `AlreadyExists`.
        reason: String,
        /// The Status message.
        message: String,
    },
    /// An object handed to the server has no `apiVersion`/`kind` the server serves.
    #[error("no served resource has apiVersion {api_version:?} and kind {kind:?}")]
    UnknownKind {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
    },
    /// Building a kube-client `Client` for the server failed.
    #[cfg(feature = "kube")]
    #[error("cannot build a kube client for the fake server")]
    Client(#[source] kube_client::Error),
}

impl From<crate::status::ApiError> for Error {
    fn from(error: crate::status::ApiError) -> Self {
        Self::Api {
            code: error.code,
            reason: error.reason.to_owned(),
            message: error.message,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
