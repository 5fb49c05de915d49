//! What the peer's client receives: a tower layer under kube-client that counts the bytes of
//! each response body's data frames as they arrive (bodies only; headers and TLS framing are a
//! small, fixed share) and each response by its `Content-Type`, so a run can report what it
//! received from the server, a real one included, and in which format.

use std::{
    collections::BTreeMap,
    pin::Pin,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use kube_client::client::DynBody;
use tower::util::MapResponseLayer;

/// Body bytes received since the process started.
static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Responses received since the process started, by `Content-Type` (empty when absent).
static CONTENT_TYPES: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// Body bytes every client built with [`layer`] has received so far.
pub(crate) fn received_bytes() -> u64 {
    RECEIVED.load(Ordering::Relaxed)
}

/// Responses every client built with [`layer`] has received so far, by `Content-Type`.
pub(crate) fn content_types() -> BTreeMap<String, u64> {
    CONTENT_TYPES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

type Response = http::Response<Box<DynBody>>;

/// The layer that counts every response by its `Content-Type` and makes its body count its
/// bytes.
pub(crate) fn layer() -> MapResponseLayer<fn(Response) -> http::Response<Counted>> {
    MapResponseLayer::new(|response: Response| {
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        *CONTENT_TYPES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(content_type)
            .or_default() += 1;
        response.map(Counted)
    })
}

/// A body that adds the length of each data frame to [`RECEIVED`].
pub(crate) struct Counted(Box<DynBody>);

impl Body for Counted {
    type Data = Bytes;
    type Error = tower::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut *self.0).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            RECEIVED.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}
