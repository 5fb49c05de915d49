//! The reflector's error type, and how each error steers the list/watch loop.

use std::time::Duration;

/// How many bytes of an undecodable line or body an [`Error::Decode`] keeps, so a log line stays
/// readable when the server sends megabytes of garbage.
pub const DECODE_EXCERPT_LIMIT: usize = 256;

/// Everything that can go wrong while listing and watching.
///
/// The variants are chosen by what the reflector must do next: [`Error::Expired`] and
/// [`Error::TooLargeResourceVersion`] make it relist from a consistent read,
/// [`Error::TooManyRequests`] and [`Error::ConnectionRefused`] make it back off and try the same
/// request again, the rest make it back off and relist.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The resource version asked for is gone from the server's history (HTTP 410, reason
    /// `Expired` or `Gone`): the reflector must relist.
    #[doc(alias = "IsResourceExpired")]
    #[doc(alias = "IsGone")]
    #[error("resource version expired (410): {message}")]
    Expired {
        /// The server's message.
        message: String,
    },
    /// The resource version asked for is newer than the server has seen yet (a lagging watch
    /// cache): the reflector relists from a consistent read.
    #[error("resource version too large: {message}")]
    TooLargeResourceVersion {
        /// The server's message.
        message: String,
    },
    /// The credentials in use may not list or watch this resource (HTTP 403).
    #[error("forbidden (403): {message}")]
    Forbidden {
        /// The server's message.
        message: String,
    },
    /// The server is shedding load (HTTP 429); retry no sooner than `retry_after`.
    #[error("too many requests (429){}: {message}", match retry_after {
        Some(after) => format!(", retry after {after:?}"),
        None => String::new(),
    })]
    TooManyRequests {
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
        /// The server's message.
        message: String,
    },
    /// Any other failure status from the API server.
    #[error("API error {code} {reason}: {message}")]
    Api {
        /// The HTTP status code.
        code: u16,
        /// The status reason (`InternalError`, `NotFound`, ...), empty when the server sent none.
        reason: String,
        /// The server's message.
        message: String,
    },
    /// A list body or a watch line that does not decode; `excerpt` holds its first
    /// [`DECODE_EXCERPT_LIMIT`] bytes.
    #[error("cannot decode {what}: {reason}; got {excerpt:?}")]
    Decode {
        /// What was being decoded (`"watch event"`, `"list page"`, ...).
        what: &'static str,
        /// The decoder's complaint.
        reason: String,
        /// The start of the offending bytes, lossily converted to UTF-8.
        excerpt: String,
    },
    /// An object of another kind than the reflector expects (client-go's expected-type check).
    #[error("expected objects of kind {expected}, got {found}")]
    WrongKind {
        /// The kind this reflector stores (`v1/Pod`).
        expected: String,
        /// The kind that arrived.
        found: String,
    },
    /// The store refused an object (most often because it has no `metadata.name`).
    #[error("the store refused an object")]
    Store(#[from] kinformer_store::Error),
    /// The connection to the API server was refused: the reflector backs off and retries the same
    /// watch without relisting. kube-client's error is the source.
    #[error("the API server refused the connection")]
    ConnectionRefused {
        /// What kube-client reported; its own sources hold the I/O error.
        #[source]
        source: kube_client::Error,
    },
    /// A transport failure: connection reset, TLS, a broken body. kube-client's error is the
    /// source.
    #[error("the request to the API server failed")]
    Transport {
        /// What kube-client reported.
        #[source]
        source: kube_client::Error,
    },
    /// The request could not be built (an invalid selector or header value, a URL that does
    /// not parse); retrying cannot help until the options change.
    #[error("cannot build the {what} request")]
    Request {
        /// Which request (`list`, `watch`).
        what: &'static str,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A background task of the lister-watcher (a prefetched page, an off-task decode) ended
    /// without a result: it panicked or was cancelled.
    #[error("{what} did not finish")]
    Task {
        /// Which task.
        what: &'static str,
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A watch closed within a second without delivering any event, which usually means the
    /// server refuses it in a way that is not an error status.
    #[doc(alias = "VeryShortWatchError")]
    #[error("very short watch: the watch closed within {lasted:?} and delivered no event")]
    VeryShortWatch {
        /// How long the watch lasted.
        lasted: Duration,
    },
    /// Nothing arrived on a watch for longer than its own timeout: the connection is taken to be
    /// dead and the watch is resumed.
    #[error("watch idle for {idle:?}, longer than its timeout: assuming a dead connection")]
    WatchIdle {
        /// How long the watch stayed silent.
        idle: Duration,
    },
    /// A streaming list (`sendInitialEvents`) ended before its `k8s.io/initial-events-end`
    /// bookmark, so the server may not support streaming lists.
    #[error("the streaming list ended before its initial-events-end bookmark")]
    WatchListIncomplete,
}

impl Error {
    /// Whether the resource version used is unusable (expired or too large), so the next list
    /// must be a consistent read (`resourceVersion=""`).
    pub fn is_resource_version_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Expired { .. } | Error::TooLargeResourceVersion { .. }
        )
    }

    /// Whether the reflector should back off and retry the same watch without relisting
    /// (client-go's `isWatchErrorRetriable`).
    pub fn is_retriable_without_relist(&self) -> bool {
        matches!(
            self,
            Error::TooManyRequests { .. } | Error::ConnectionRefused { .. }
        )
    }

    /// The server's `Retry-After`, when the error carries one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::TooManyRequests { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Builds a [`Error::Decode`] keeping only the start of `bytes`.
    pub fn decode(what: &'static str, reason: impl Into<String>, bytes: &[u8]) -> Self {
        let cut = bytes.len().min(DECODE_EXCERPT_LIMIT);
        let mut excerpt = String::from_utf8_lossy(&bytes[..cut]).into_owned();
        if bytes.len() > cut {
            excerpt.push_str("...");
        }
        Error::Decode {
            what,
            reason: reason.into(),
            excerpt,
        }
    }

    /// Maps an API `Status` (an error response body or a watch `ERROR` event) to an error.
    pub fn from_status(status: &kube_core::Status, retry_after: Option<Duration>) -> Self {
        let message = status.message.clone();
        let too_large = status.details.as_ref().is_some_and(|details| {
            details.causes.iter().any(|cause| {
                cause.reason == "ResourceVersionTooLarge"
                    || cause.message == "Too large resource version"
            })
        }) || (status.code == 504
            && message.contains("Too large resource version"));
        if too_large {
            return Error::TooLargeResourceVersion { message };
        }
        match (status.code, status.reason.as_str()) {
            (410, _) | (_, "Expired" | "Gone") => Error::Expired { message },
            (403, _) => Error::Forbidden { message },
            (429, _) => Error::TooManyRequests {
                retry_after,
                message,
            },
            (code, reason) => Error::Api {
                code,
                reason: reason.to_owned(),
                message,
            },
        }
    }

    /// Classifies a kube-client transport error, telling a refused connection apart by the
    /// `io::ErrorKind` somewhere in its chain of sources.
    pub fn from_transport(error: kube_client::Error) -> Self {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(current) = cause {
            if let Some(io) = current.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::ConnectionRefused
            {
                return Error::ConnectionRefused { source: error };
            }
            cause = current.source();
        }
        Error::Transport { source: error }
    }

    /// A request that could not be built.
    pub(crate) fn request(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Request {
            what,
            source: source.into(),
        }
    }
}

/// The reflector's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
