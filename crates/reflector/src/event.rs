//! What a [`ListerWatcher`](crate::ListerWatcher) hands the reflector: list pages and watch events.

use std::sync::Arc;

use futures::stream::BoxStream;
use kinformer_store::Incoming;

use crate::Result;

/// The annotation a server puts on the bookmark that ends a streaming list's initial events.
#[doc(alias = "InitialEventsAnnotationKey")]
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// What a list response says besides its objects, which a
/// [`ListerWatcher`](crate::ListerWatcher) hands to a [`ListSink`](crate::ListSink).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`: the token of the next page, `None` on the last one.
    pub continue_token: Option<String>,
    /// `metadata.shardInfo.selector`: the shard selector the server applied, echoed; `None`
    /// for a whole collection, or from a server that ignored the selector.
    pub shard_selector: Option<String>,
}

impl ListPage {
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
    /// An object was created (or is part of a streaming list's initial state), with the bytes
    /// it was decoded from when the decoder kept them.
    Added(Incoming<K>),
    /// An object changed, with the bytes it was decoded from when the decoder kept them.
    Modified(Incoming<K>),
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

/// The stream a [`ListerWatcher::watch`](crate::ListerWatcher::watch) returns. It ends when the
/// server closes the watch; an `Err` item ends the watch with that error (an `ERROR` event, a
/// broken connection, an undecodable line).
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>>>;
