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

/// A response body: a whole buffer, a list written as it is sent, or a stream of chunks (a
/// watch).
#[derive(Debug)]
pub(crate) enum ResponseBody {
    Full(Option<Bytes>),
    List(ListBody),
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
            Self::List(list) => Poll::Ready(list.next_chunk().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(bytes) => bytes.is_none(),
            Self::List(list) => list.remaining == 0,
            Self::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::List(list) => SizeHint::with_exact(list.remaining),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}

/// How much of a list body is written into one chunk before it is sent.
const LIST_CHUNK: usize = 64 * 1024;

/// A list body written as it is sent, a chunk of about [`LIST_CHUNK`] bytes at a time, from the
/// objects' cached bytes. kube-apiserver streams list responses this way (KEP-5116, on by
/// default since 1.33), so a client reads the first items of a large list while the rest are
/// still being written; writing the whole body first would hold a 100k-Pod list's hundreds of
/// megabytes and delay its first byte by their copy. The length is known up front, so the
/// response still carries a `Content-Length`.
#[derive(Debug)]
pub(crate) struct ListBody {
    head: Option<Bytes>,
    items: ListItems,
    next: usize,
    tail: Option<&'static [u8]>,
    remaining: u64,
}

/// The items of a [`ListBody`], each as it goes on the wire.
#[derive(Debug)]
pub(crate) enum ListItems {
    /// JSON items, each in its two pieces (see [`list_item`]), written with commas between.
    Json(Vec<(&'static [u8], Bytes)>),
    /// Protobuf item messages, each written after its field tag and length.
    Protobuf(Vec<Bytes>),
}

impl ListItems {
    fn len(&self) -> usize {
        match self {
            Self::Json(items) => items.len(),
            Self::Protobuf(items) => items.len(),
        }
    }

    /// How many bytes item `index` takes in the body, with what goes before it.
    fn wire_len(&self, index: usize) -> usize {
        match self {
            Self::Json(items) => {
                usize::from(index > 0) + items[index].0.len() + items[index].1.len()
            }
            Self::Protobuf(items) => {
                kinformer_protobuf::list_item_prefix(items[index].len()).len() + items[index].len()
            }
        }
    }

    fn write(&self, index: usize, out: &mut Vec<u8>) {
        match self {
            Self::Json(items) => {
                if index > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(items[index].0);
                out.extend_from_slice(&items[index].1);
            }
            Self::Protobuf(items) => {
                out.extend_from_slice(&kinformer_protobuf::list_item_prefix(items[index].len()));
                out.extend_from_slice(&items[index]);
            }
        }
    }
}

impl ListBody {
    /// `head`, then `items`, then `tail`.
    pub(crate) fn new(head: Bytes, items: ListItems, tail: &'static [u8]) -> Self {
        let items_len: usize = (0..items.len()).map(|index| items.wire_len(index)).sum();
        Self {
            remaining: (head.len() + items_len + tail.len()) as u64,
            head: Some(head),
            items,
            next: 0,
            tail: Some(tail),
        }
    }

    /// The next piece of the body, `None` once all of it was sent.
    fn next_chunk(&mut self) -> Option<Bytes> {
        let chunk = match self.head.take() {
            Some(head) if self.items.len() > 0 => head,
            head => {
                let mut chunk = Vec::with_capacity(LIST_CHUNK + 1024);
                chunk.extend_from_slice(head.as_deref().unwrap_or_default());
                while self.next < self.items.len() && chunk.len() < LIST_CHUNK {
                    self.items.write(self.next, &mut chunk);
                    self.next += 1;
                }
                if self.next == self.items.len() {
                    chunk.extend_from_slice(self.tail.take().unwrap_or_default());
                }
                if chunk.is_empty() {
                    return None;
                }
                Bytes::from(chunk)
            }
        };
        self.remaining -= chunk.len() as u64;
        Some(chunk)
    }
}

/// A list response: `body`, sent as `content_type` as it is written.
pub(crate) fn list_response(content_type: &str, body: ListBody) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::List(body));
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every chunk a list body sends, with the size it announced before each.
    fn drain(mut body: ListBody) -> (Vec<Bytes>, Vec<u64>) {
        let (mut chunks, mut announced) = (Vec::new(), vec![body.remaining]);
        while let Some(chunk) = body.next_chunk() {
            chunks.push(chunk);
            announced.push(body.remaining);
        }
        (chunks, announced)
    }

    #[test]
    fn a_json_list_body_is_sent_head_first_in_chunks_that_add_up_to_the_list() {
        let items: Vec<(&'static [u8], Bytes)> = (0..100)
            .map(|index| {
                let rest = format!("\"n\":\"{index:01000}\"}}");
                (&b"{\"kind\":\"Pod\","[..], Bytes::from(rest))
            })
            .collect();
        let whole: Vec<String> = items
            .iter()
            .map(|(head, rest)| {
                format!(
                    "{}{}",
                    std::str::from_utf8(head).unwrap(),
                    std::str::from_utf8(rest).unwrap()
                )
            })
            .collect();
        let whole = format!(r#"{{"items":[{}]}}"#, whole.join(","));
        let body = ListBody::new(
            Bytes::from_static(br#"{"items":["#),
            ListItems::Json(items),
            b"]}",
        );
        let (chunks, announced) = drain(body);
        assert_eq!(
            &chunks[0][..],
            br#"{"items":["#,
            "the head goes out before any item is written"
        );
        assert!(chunks.len() > 2, "a list past one chunk is sent in several");
        assert!(chunks.iter().all(|chunk| chunk.len() <= LIST_CHUNK + 2048));
        assert_eq!(chunks.concat(), whole.as_bytes());
        assert_eq!(announced[0], whole.len() as u64);
        assert_eq!(announced.last(), Some(&0));
        let mut left = whole.len() as u64;
        for (chunk, announced) in chunks.iter().zip(&announced[1..]) {
            left -= chunk.len() as u64;
            assert_eq!(*announced, left, "the size hint is what is left to send");
        }
    }

    #[test]
    fn a_protobuf_list_body_is_the_list_encoded_whole() {
        let items: Vec<Bytes> = [0usize, 1, 127, 128, 70_000, 3]
            .iter()
            .map(|&len| Bytes::from(vec![7; len]))
            .collect();
        let whole = kinformer_protobuf::encode_list(
            "v1",
            "PodList",
            b"\x12\x012",
            items.iter().map(|item| &item[..]),
        );
        let head = kinformer_protobuf::encode_list_head(
            "v1",
            "PodList",
            b"\x12\x012",
            items.iter().map(Bytes::len),
        );
        let body = ListBody::new(
            Bytes::from(head),
            ListItems::Protobuf(items),
            kinformer_protobuf::LIST_TAIL,
        );
        let (chunks, announced) = drain(body);
        assert_eq!(chunks.concat(), whole);
        assert_eq!(announced[0], whole.len() as u64);
        assert_eq!(announced.last(), Some(&0));
    }

    #[test]
    fn an_empty_list_body_is_one_chunk() {
        let body = ListBody::new(
            Bytes::from_static(br#"{"items":["#),
            ListItems::Json(Vec::new()),
            b"]}",
        );
        let (chunks, announced) = drain(body);
        assert_eq!(chunks, [Bytes::from_static(br#"{"items":[]}"#)]);
        assert_eq!(announced, [12, 0]);
    }
}
