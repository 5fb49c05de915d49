use std::fmt;

/// Why a protobuf body could not be decoded or an object could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body does not start with Kubernetes' `k8s\0` magic.
    #[error("not a Kubernetes protobuf body (no `k8s\\0` prefix)")]
    NoMagic,
    /// The body ends in the middle of a value.
    #[error("truncated protobuf: the body ends inside a {0}")]
    Truncated(&'static str),
    /// The bytes are not valid protobuf.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A field has a wire type its schema does not allow.
    #[error("a {expected} field arrived as {found}")]
    WireType {
        /// What the schema expects.
        expected: &'static str,
        /// What the wire has.
        found: &'static str,
    },
    /// A string field is not UTF-8.
    #[error("a string field is not valid UTF-8")]
    Utf8,
    /// No generated table describes this kind.
    #[error("no protobuf schema for {api_version}/{kind}")]
    UnknownKind {
        /// The `apiVersion` of the body.
        api_version: String,
        /// The `kind` of the body.
        kind: String,
    },
    /// The body's content encoding is not the identity (Kubernetes defines no other).
    #[error("unsupported protobuf content encoding {0:?}")]
    ContentEncoding(String),
    /// The target type refused a value (a serde error), or an encoder input was not what the
    /// schema describes.
    #[error("{0}")]
    Custom(String),
}

impl Error {
    pub(crate) fn custom(message: impl fmt::Display) -> Self {
        Error::Custom(message.to_string())
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Error::Custom(message.to_string())
    }
}
