//! The [`ListerWatcher`] seam: where a reflector's objects come from.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{ListOptions, ListPage, Result, WatchStream};

/// Lists and watches one kind of object.
///
/// The reflector calls [`list`](ListerWatcher::list) page by page (it sets `limit` and
/// `continue`), then [`watch`](ListerWatcher::watch) from the list's resource version. An
/// implementation adds its own scope (namespace, label and field selectors) to the options it is
/// given. [`KubeListerWatcher`](crate::KubeListerWatcher) is the one over kube-client; a test or
/// another data source can bring its own, the trait is object safe.
///
/// The Rust shape of client-go's `cache.ListerWatcher`.
#[doc(alias = "ListWatch")]
#[async_trait]
pub trait ListerWatcher<K>: Send + Sync {
    /// Lists one page.
    ///
    /// # Errors
    ///
    /// The server's refusal mapped to an [`Error`](crate::Error) variant, a transport failure or
    /// an undecodable body.
    async fn list(&self, options: ListOptions) -> Result<ListPage<K>>;

    /// Opens a watch.
    ///
    /// # Errors
    ///
    /// As for [`list`](ListerWatcher::list), for the request that opens the stream; errors
    /// during the stream are items of the stream.
    async fn watch(&self, options: ListOptions) -> Result<WatchStream<K>>;

    /// What is listed, for logs and spans (`v1/Pod`).
    fn type_description(&self) -> String {
        "<unspecified>".to_owned()
    }

    /// The namespace listed, `None` for all namespaces or cluster-scoped resources.
    fn namespace(&self) -> Option<String> {
        None
    }
}

#[async_trait]
impl<K, L> ListerWatcher<K> for Arc<L>
where
    L: ListerWatcher<K> + ?Sized,
    K: 'static,
{
    async fn list(&self, options: ListOptions) -> Result<ListPage<K>> {
        (**self).list(options).await
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<K>> {
        (**self).watch(options).await
    }

    fn type_description(&self) -> String {
        (**self).type_description()
    }

    fn namespace(&self) -> Option<String> {
        (**self).namespace()
    }
}
