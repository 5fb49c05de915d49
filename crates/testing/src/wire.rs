//! Content negotiation: the shape of an answer (whole objects, or metadata only) and its
//! encoding, JSON or Kubernetes protobuf for a client that prefers it, negotiated from `Accept`
//! the way kube-apiserver negotiates.
//!
//! kube-apiserver answers protobuf when the client ranks `application/vnd.kubernetes.protobuf`
//! first (client-go sends `application/vnd.kubernetes.protobuf, application/json` by default)
//! and the kind has a protobuf form: every built-in does, custom resources never do. A
//! metadata-only answer (`as=PartialObjectMetadata[List]`) is a `meta.k8s.io/v1` kind, so it
//! goes out in protobuf for any resource, custom ones included, as client-go's metadata client
//! asks. Errors follow the request: a client that gets its objects in protobuf gets its
//! `Status` in protobuf too.

use bytes::Bytes;
use kinformer_protobuf::{Message, encode_envelope, encode_object, message_for, messages};
use serde_json::Value;

use crate::resources::ResourceType;

const JSON: &str = "application/json";

/// A JSON value's bytes.
pub(crate) fn to_bytes(value: &Value) -> Bytes {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .unwrap_or_default()
}

/// The representation a client asked for in `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Full,
    /// `as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`: metadata only.
    Metadata,
}

impl Shape {
    /// `(kind, apiVersion)` of one object of `resource` in this shape.
    pub(crate) fn object_type(self, resource: &ResourceType) -> (String, String) {
        match self {
            Shape::Metadata => (
                "PartialObjectMetadata".to_owned(),
                "meta.k8s.io/v1".to_owned(),
            ),
            Shape::Full => (resource.kind.clone(), resource.api_version()),
        }
    }

    /// `(kind, apiVersion)` of a list of `resource` in this shape.
    pub(crate) fn list_type(self, resource: &ResourceType) -> (String, String) {
        match self {
            Shape::Metadata => (
                "PartialObjectMetadataList".to_owned(),
                "meta.k8s.io/v1".to_owned(),
            ),
            Shape::Full => (resource.list_kind(), resource.api_version()),
        }
    }
}

pub(crate) fn shape_of(accept: &str) -> Shape {
    if accept.contains("as=PartialObjectMetadata") {
        Shape::Metadata
    } else {
        Shape::Full
    }
}

/// How a response body is encoded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Encoding {
    /// JSON, what every client understands.
    Json,
    /// Kubernetes protobuf: `message` is the table of the kind the request serves (`v1` `Status`
    /// for a request that names no resource).
    Protobuf(&'static Message),
}

impl Encoding {
    /// The encoding of everything a request on `resource` answers, objects and errors alike.
    pub(crate) fn negotiate(accept: &str, resource: &ResourceType, shape: Shape) -> Self {
        if !prefers_protobuf(accept) {
            return Self::Json;
        }
        match shape {
            Shape::Metadata => Self::Protobuf(&messages::PARTIAL_OBJECT_METADATA),
            Shape::Full if resource.unstructured => Self::Json,
            Shape::Full => message_for(&resource.api_version(), &resource.kind)
                .map_or(Self::Json, Self::Protobuf),
        }
    }

    /// The encoding of a `Status` for a request that names no served resource (an unknown
    /// path): protobuf whenever the client prefers it, since `Status` has a protobuf form.
    pub(crate) fn for_status(accept: &str) -> Self {
        if prefers_protobuf(accept) && !accept.contains("as=") {
            Self::Protobuf(&messages::STATUS)
        } else {
            Self::Json
        }
    }

    /// The `Content-Type` of a whole response.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Self::Json => JSON,
            Self::Protobuf(_) => kinformer_protobuf::CONTENT_TYPE,
        }
    }

    /// The `Content-Type` of a watch stream.
    pub(crate) fn watch_content_type(self) -> &'static str {
        match self {
            Self::Json => JSON,
            Self::Protobuf(_) => kinformer_protobuf::WATCH_CONTENT_TYPE,
        }
    }

    /// A `Status` (or any object carrying its own `apiVersion` and `kind`) in this encoding.
    ///
    /// A `Status` always has a protobuf form; should an object not fit its table, it goes out
    /// in JSON, which beats an empty body.
    pub(crate) fn status(self, status: &Value) -> (&'static str, Bytes) {
        if let Self::Protobuf(_) = self {
            match encode_object(status) {
                Ok(body) => return (self.content_type(), Bytes::from(body)),
                Err(error) => {
                    tracing::error!(%error, %status, "cannot encode a Status in protobuf");
                }
            }
        }
        (JSON, to_bytes(status))
    }
}

/// Wraps one object's message bytes in the `k8s\0` envelope of `resource`'s kind, or of
/// `PartialObjectMetadata` for the metadata shape.
pub(crate) fn envelope(resource: &ResourceType, shape: Shape, message: &[u8]) -> Bytes {
    let (kind, api_version) = shape.object_type(resource);
    Bytes::from(encode_envelope(&api_version, &kind, message))
}

/// Whether the client ranks Kubernetes protobuf above JSON in `accept`: the media range with
/// the highest `q` wins, the earliest among equals, as kube-apiserver's negotiation picks.
/// Ranges the server cannot produce are passed over; `*/*` and `application/*` mean JSON.
pub(crate) fn prefers_protobuf(accept: &str) -> bool {
    let mut best: Option<(f32, bool)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media_type = parts.next().unwrap_or_default().to_ascii_lowercase();
        let protobuf = match media_type.as_str() {
            kinformer_protobuf::CONTENT_TYPE => true,
            JSON | "application/*" | "*/*" => false,
            _ => continue,
        };
        let quality = parts
            .filter_map(|parameter| parameter.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, value)| value.trim().parse().unwrap_or(0.0));
        if quality > 0.0 && best.is_none_or(|(top, _)| quality > top) {
            best = Some((quality, protobuf));
        }
    }
    best.is_some_and(|(_, protobuf)| protobuf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_wins_only_when_ranked_first() {
        for (accept, expected) in [
            (
                "application/vnd.kubernetes.protobuf, application/json",
                true,
            ),
            ("application/vnd.kubernetes.protobuf", true),
            ("application/vnd.kubernetes.protobuf;stream=watch", true),
            (
                "application/json, application/vnd.kubernetes.protobuf",
                false,
            ),
            (
                "application/json;q=0.5, application/vnd.kubernetes.protobuf",
                true,
            ),
            ("application/vnd.kubernetes.protobuf;q=0.1, */*", false),
            (
                "application/vnd.kubernetes.protobuf;q=0, application/json",
                false,
            ),
            ("text/html, application/vnd.kubernetes.protobuf", true),
            ("application/json", false),
            ("*/*", false),
            ("", false),
        ] {
            assert_eq!(prefers_protobuf(accept), expected, "{accept}");
        }
    }

    #[test]
    fn built_ins_and_any_metadata_only_answer_negotiate_protobuf() {
        let both = "application/vnd.kubernetes.protobuf, application/json";
        let pods = ResourceType::of::<k8s_openapi::api::core::v1::Pod>();
        let custom = ResourceType::custom("example.com", "v1", "Widget", "widgets", true);
        assert!(matches!(
            Encoding::negotiate(both, &pods, Shape::Full),
            Encoding::Protobuf(message) if message.name() == "k8s.io.api.core.v1.Pod"
        ));
        for resource in [&pods, &custom] {
            assert!(matches!(
                Encoding::negotiate(both, resource, Shape::Metadata),
                Encoding::Protobuf(message)
                    if message.name() == "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata"
            ));
            assert!(matches!(
                Encoding::negotiate("application/json", resource, Shape::Metadata),
                Encoding::Json
            ));
        }
        assert!(matches!(
            Encoding::negotiate(both, &custom, Shape::Full),
            Encoding::Json
        ));
        assert!(matches!(
            Encoding::negotiate("application/json", &pods, Shape::Full),
            Encoding::Json
        ));
    }
}
