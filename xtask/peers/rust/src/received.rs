//! The bytes of every response body the peer's client receives: a tower layer under
//! kube-client that counts each data frame as it arrives, so a run can report what it received
//! from the server (bodies only; headers and TLS framing are a small, fixed share).

use std::{
    pin::Pin,
    sync::atomic::{AtomicU64, Ordering},
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use kube_client::client::DynBody;
use tower::util::MapResponseLayer;

/// Body bytes received since the process started.
static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Body bytes every client built with [`layer`] has received so far.
pub(crate) fn received_bytes() -> u64 {
    RECEIVED.load(Ordering::Relaxed)
}

type Response = http::Response<Box<DynBody>>;

/// The layer that makes every response body count its bytes.
pub(crate) fn layer() -> MapResponseLayer<fn(Response) -> http::Response<Counted>> {
    MapResponseLayer::new(|response: Response| response.map(Counted))
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
