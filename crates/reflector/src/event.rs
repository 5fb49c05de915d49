//! What a [`ListerWatcher`](crate::ListerWatcher) hands the reflector: list pages and watch events.

use std::sync::Arc;

use futures::{StreamExt, stream::BoxStream};
use kinformer_store::Encoded;

use crate::Result;

/// The annotation a server puts on the bookmark that ends a streaming list's initial events.
#[doc(alias = "InitialEventsAnnotationKey")]
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// One page of a list response.
#[derive(Debug, Clone)]
pub struct ListPage<K> {
    /// The objects of this page, already shared so the store takes them without copying.
    pub items: Vec<Arc<K>>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`: the token of the next page, `None` on the last one.
    pub continue_token: Option<String>,
}

impl<K> ListPage<K> {
    /// The token to ask for the next page with; `None` on the last page, which the API server
    /// (and client-go's pager) marks with an absent or an empty `continue`. Asking again with
    /// `""` would start the list over, forever.
    pub fn next_page_token(&self) -> Option<&str> {
        self.continue_token
            .as_deref()
            .filter(|token| !token.is_empty())
    }
}

/// One event of a watch stream.
#[derive(Debug, Clone)]
#[doc(alias = "Event")]
pub enum WatchEvent<K> {
    /// An object was created (or is part of a streaming list's initial state).
    Added(Arc<K>),
    /// An object changed.
    Modified(Arc<K>),
    /// An object was deleted; this is its last state.
    Deleted(Arc<K>),
    /// The server's progress marker: nothing changed up to `resource_version`.
    Bookmark {
        /// The resource version the watch has reached.
        resource_version: String,
        /// Whether it carries `k8s.io/initial-events-end: "true"`, ending a streaming list.
        initial_events_end: bool,
    },
}

/// A watch event, with the bytes its object was decoded from when the decoder kept them
/// ([`Encoded`]; only for added and modified objects).
pub type WatchEventWithWire<K> = (WatchEvent<K>, Option<Encoded>);

/// The stream [`ListerWatcher::watch_with_wire`](crate::ListerWatcher::watch_with_wire)
/// returns: [`WatchStream`]'s events, each with its object's bytes when kept.
pub type WatchStreamWithWire<K> = BoxStream<'static, Result<WatchEventWithWire<K>>>;

/// `events` as a stream of events with no bytes kept.
pub(crate) fn without_wire<K: 'static>(events: WatchStream<K>) -> WatchStreamWithWire<K> {
    events.map(|event| event.map(|event| (event, None))).boxed()
}

/// The stream a [`ListerWatcher::watch`](crate::ListerWatcher::watch) returns. It ends when the
/// server closes the watch; an `Err` item ends the watch with that error (an `ERROR` event, a
/// broken connection, an undecodable line).
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>>>;
