//! A registration consumed as an async [`Stream`] instead of a handler.

use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

use futures::Stream;

use crate::{Notification, Registration};

/// The notifications of one registration as a [`Stream`], in order.
///
/// It has its own buffer like any listener, so a slow consumer delays no one else. The stream
/// ends when the registration is removed or the processor stops (pending notifications are then
/// discarded, as for a handler). Dropping the stream removes the registration.
///
/// For [`Registration::has_synced`], an initial-list notification counts as processed when the
/// consumer comes back for the next one (or drops the stream): the moment a handler would have
/// returned.
///
/// It is a `futures` [`Stream`]: read it with `futures::StreamExt::next` (or
/// `tokio_stream::StreamExt`), which your crate brings in as a dependency of its own:
///
/// ```no_run
/// use futures::StreamExt as _;
/// use kinformer_processor::{EventStream, Notification};
///
/// # async fn doc(mut events: EventStream<String>) {
/// while let Some(notification) = events.next().await {
///     if let Notification::Delete(gone) = notification {
///         println!("deleted {}", gone.object());
///     }
/// }
/// # }
/// ```
///
/// Handlers ([`ResourceEventHandler`](crate::ResourceEventHandler)) or a stream? A handler is
/// synchronous and runs on a thread of its own listener (by default,
/// [`HandlerExecutor::Threads`](crate::HandlerExecutor::Threads)): it suits work that needs no
/// `.await`, such as enqueueing a key ([`KeyHandler`](crate::KeyHandler)) or updating a map. A
/// stream is consumed from a task of yours: it suits async work per notification, in order.
#[must_use = "a stream does nothing unless polled, and its buffer grows until it is"]
pub struct EventStream<K: Send + Sync + 'static> {
    registration: Registration<K>,
    /// The last notification yielded was an initial-list add not yet counted as finished.
    holding_initial: bool,
}

impl<K: Send + Sync + 'static> EventStream<K> {
    pub(crate) fn new(registration: Registration<K>) -> Self {
        Self {
            registration,
            holding_initial: false,
        }
    }

    /// The registration behind this stream: for `has_synced`, stats, or removing it from
    /// elsewhere (which ends the stream).
    pub fn registration(&self) -> &Registration<K> {
        &self.registration
    }

    fn release_held_initial(&mut self) {
        if std::mem::take(&mut self.holding_initial) {
            self.registration.listener.finish_initial();
        }
    }
}

impl<K: Send + Sync + 'static> Stream for EventStream<K> {
    type Item = Notification<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.release_held_initial();
        match this.registration.listener.poll_next(cx) {
            Poll::Ready(Some(next)) => {
                this.holding_initial = next.is_in_initial_list();
                Poll::Ready(Some(next))
            }
            Poll::Ready(None) => {
                this.registration.listener.mark_stopped();
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<K: Send + Sync + 'static> Drop for EventStream<K> {
    fn drop(&mut self) {
        self.release_held_initial();
        self.registration.remove();
        self.registration.listener.mark_stopped();
    }
}

impl<K: Send + Sync + 'static> fmt::Debug for EventStream<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("registration", &self.registration)
            .finish_non_exhaustive()
    }
}
