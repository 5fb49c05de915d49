//! Responses: the body type, whole bodies, statuses, one object in the shape and encoding a
//! request negotiated, and the bytes of one item of a list.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use hyper::body::{Body, Frame, SizeHint};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::object::Obj;
use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::wire::{self, Encoding, Shape, to_bytes};

pub(crate) const JSON: &str = "application/json";

pub(crate) type Reply = Result<Response<ResponseBody>, ApiError>;

/// A response body: a whole buffer, or a stream of chunks (a watch).
#[derive(Debug)]
pub(crate) enum ResponseBody {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}

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
