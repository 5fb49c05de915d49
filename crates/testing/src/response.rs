//! Responses: whole bodies, statuses, the shapes an object takes on the wire (full, metadata
//! only, a table row) and the bytes of one item of a list.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::server::ResponseBody;
use crate::status::ApiError;
use crate::store::Obj;
use crate::wire::{self, Encoding};

pub(crate) const JSON: &str = "application/json";

pub(crate) type Reply = Result<Response<ResponseBody>, ApiError>;

/// A whole response: `body`, sent as `content_type`.
pub(crate) fn body_response(code: u16, content_type: &str, body: Bytes) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::Full(Some(body)));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

pub(crate) fn value_response(code: u16, value: &Value) -> Response<ResponseBody> {
    body_response(code, JSON, to_bytes(value))
}

pub(crate) fn to_bytes(value: &Value) -> Bytes {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .unwrap_or_default()
}

/// A failure as its `Status`, in `encoding`.
pub(crate) fn status_response(error: &ApiError, encoding: Encoding) -> Response<ResponseBody> {
    let (content_type, body) = encoding.status(&error.to_status());
    let mut response = body_response(error.code, content_type, body);
    if let Some(seconds) = error.retry_after_seconds {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
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

/// The bytes of one object as this resource version and shape present it.
pub(crate) fn wire_json(obj: &Obj, resource: &ResourceType, shape: Shape) -> Bytes {
    match shape {
        Shape::Metadata => obj.metadata_json(),
        Shape::Full => {
            if obj.api_version == resource.api_version() || resource.group.is_empty() {
                obj.json.clone()
            } else {
                // A CRD served at several versions without conversion: only apiVersion differs.
                let mut value = obj.value();
                value["apiVersion"] = json!(resource.api_version());
                to_bytes(&value)
            }
        }
    }
}

/// One object as the request negotiated it: [`wire_json`] or its enveloped protobuf.
pub(crate) fn object_response(
    code: u16,
    obj: &Obj,
    resource: &ResourceType,
    shape: Shape,
    encoding: Encoding,
) -> Reply {
    let body = match encoding {
        Encoding::Json => wire_json(obj, resource, shape),
        Encoding::Protobuf(message) => wire::envelope(resource, shape, &obj.protobuf(message)?),
    };
    Ok(body_response(code, encoding.content_type(), body))
}

/// One list item, in two pieces written one after the other: kube-apiserver leaves
/// `apiVersion` and `kind` out of the items of a typed list (the list's own kind names them),
/// while unstructured lists (custom resources) and metadata-only lists keep them per item.
pub(crate) fn list_item(
    obj: &Obj,
    resource: &ResourceType,
    shape: Shape,
) -> (&'static [u8], Bytes) {
    if shape == Shape::Full && !resource.unstructured {
        obj.untyped_json()
    } else {
        (b"", wire_json(obj, resource, shape))
    }
}
