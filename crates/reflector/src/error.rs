//! The reflector's error type, and how each error steers the list/watch loop.

use std::time::Duration;

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
    /// A list body, watch event or object that does not decode. It says what arrived (its
    /// kind and name when they can be read, its size, where decoding stopped) and never the
    /// data itself: Secrets pass through here, so no byte of the payload and no quoted value
    /// from the decoder's complaint reaches an error or a log line.
    #[error("cannot decode {what} ({}{size} bytes): {reason}", match object {
        Some(object) => format!("{object}, "),
        None => String::new(),
    })]
    Decode {
        /// What was being decoded (`"watch event"`, `"list page"`, ...).
        what: &'static str,
        /// The decoder's complaint, with the position it stopped at when it knows one, and
        /// every quoted value replaced by `"…"`.
        reason: String,
        /// The size of the offending bytes.
        size: usize,
        /// What the bytes say they are, when that much could be read: `v1/Secret ns/name`.
        object: Option<String>,
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
    /// The resource is no longer served: a list answered 404 after earlier lists had succeeded
    /// (a CustomResourceDefinition was deleted, an aggregated API removed). A reflector built
    /// with [`ReflectorOptions::stop_when_resource_gone`](crate::ReflectorOptions::stop_when_resource_gone)
    /// reports it once and stops; others keep retrying, as client-go's do.
    #[error("the resource {resource} is no longer served (404 on list): {message}")]
    ResourceGone {
        /// The resource, as the lister-watcher describes it.
        resource: String,
        /// The server's message.
        message: String,
    },
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
    /// The shard a [`ShardedListerWatcher`](crate::ShardedListerWatcher) lists and watches
    /// changed: what was listed is of the old shard, so the reflector lists again, at once.
    #[error("the shard changed: listing the new one")]
    ShardChanged,
    /// A consistency check found the cache different from the server at the same resource
    /// version: some change never reached the cache. The informer goes on; the cache heals at
    /// the next relist. Reported by an informer's opt-in consistency check, never by a list or
    /// watch.
    #[error(
        "the cache differs from the server at resource version {resource_version}: {missing} \
         missing, {unexpected} unexpected, {changed} changed (for example {examples:?})"
    )]
    CacheDrift {
        /// The version both were compared at.
        resource_version: String,
        /// Keys the server has and the cache lacks.
        missing: usize,
        /// Keys the cache has and the server does not.
        unexpected: usize,
        /// Keys both have with another UID or resourceVersion.
        changed: usize,
        /// Up to five of the keys concerned, sorted.
        examples: Vec<String>,
    },
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

    /// Whether the server answered 404 Not Found: for a list or watch of a whole collection,
    /// the resource itself is not served.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            Error::Api { code: 404, .. } | Error::ResourceGone { .. }
        )
    }

    /// The server's `Retry-After`, when the error carries one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::TooManyRequests { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Builds an [`Error::Decode`] about `bytes`: their size and, when the bytes still say it,
    /// the kind and name of the object they hold; `reason` loses its quoted values.
    pub fn decode(what: &'static str, reason: impl AsRef<str>, bytes: &[u8]) -> Self {
        Error::Decode {
            what,
            reason: redact(reason.as_ref()),
            size: bytes.len(),
            object: crate::peek::describe(bytes),
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

/// `reason` with the contents of every double-quoted value replaced by `…`: serde and the
/// protobuf decoder quote the value they refused (`invalid type: string "hunter2"`), and the
/// value may be a Secret's.
fn redact(reason: &str) -> String {
    let mut redacted = String::with_capacity(reason.len());
    let mut quoted = false;
    let mut escaped = false;
    for c in reason.chars() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    redacted.push_str("…\"");
                    quoted = false;
                }
                _ => {}
            }
        } else {
            redacted.push(c);
            quoted = c == '"';
        }
    }
    if quoted {
        redacted.push('…');
    }
    redacted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_redacted_and_the_rest_is_kept() {
        assert_eq!(
            redact(r#"invalid type: string "hunter2", expected i32 at line 1 column 9"#),
            r#"invalid type: string "…", expected i32 at line 1 column 9"#
        );
        assert_eq!(
            redact(r#"a "quoted \" value" and "another""#),
            r#"a "…" and "…""#
        );
        assert_eq!(redact(r#"cut "in the middle"#), r#"cut "…"#);
        assert_eq!(redact("nothing quoted"), "nothing quoted");
    }

    #[test]
    fn a_decode_error_names_the_object_and_its_size_but_not_its_data() {
        let secret = br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"prod"},"data":{"password":5}}"#;
        let error = Error::decode(
            "ADDED object",
            r#"invalid type: integer `5`, expected a base64 string "c2VjcmV0" at line 1 column 99"#,
            secret,
        );
        let message = error.to_string();
        assert_eq!(
            message,
            format!(
                "cannot decode ADDED object (v1/Secret prod/db, {} bytes): invalid type: \
                 integer `5`, expected a base64 string \"…\" at line 1 column 99",
                secret.len()
            )
        );
        assert!(!message.contains("c2VjcmV0") && !message.contains("password"));
    }
}
