//! The [`ListerWatcher`] seam: where a reflector's objects come from.

use std::sync::Arc;

use async_trait::async_trait;

use kinformer_store::Incoming;

use crate::{ListOptions, ListPage, Result, WatchStream};

/// Maps a freshly decoded object to the one to keep: itself, or an equal copy the consumer
/// already holds (see [`ReflectorOptions::reuse_known_objects`](crate::ReflectorOptions::reuse_known_objects)).
pub(crate) type ReuseObject<K> = dyn Fn(Arc<K>) -> Arc<K> + Send + Sync;

/// Where [`ListerWatcher::list`] hands a list's objects, part by part.
#[async_trait]
pub trait ListSink<K>: Send {
    /// Takes the next part, once the store wants it: a lister waits for this before it reads
    /// on, so a store that takes parts slower than they are decoded slows the list down.
    ///
    /// # Errors
    ///
    /// An error stops the list with it.
    async fn part(&mut self, items: Vec<Incoming<K>>) -> Result<()>;
}

/// A `Vec` collects every part, in order: the sink for a caller that wants a page whole.
///
/// ```
/// # async fn page(lister_watcher: &impl kinformer_reflector::ListerWatcher<k8s_openapi::api::core::v1::Pod>) -> kinformer_reflector::Result<()> {
/// let mut pods = Vec::new();
/// let page = lister_watcher.list(Default::default(), &mut pods).await?;
/// println!("{} Pods at version {}", pods.len(), page.resource_version);
/// # Ok(())
/// # }
/// ```
#[async_trait]
impl<K: Send + Sync> ListSink<K> for Vec<Incoming<K>> {
    async fn part(&mut self, mut items: Vec<Incoming<K>>) -> Result<()> {
        self.append(&mut items);
        Ok(())
    }
}

/// Lists and watches one kind of object.
///
/// The reflector calls [`list`](ListerWatcher::list) page by page (it sets `limit` and
/// `continue`), then [`watch`](ListerWatcher::watch) from the list's resource version. An
/// implementation adds its own scope (namespace, label and field selectors) to the options it is
/// given. [`KubeListerWatcher`](crate::KubeListerWatcher) is the one over kube-client; a test or
/// another data source can bring its own, the trait is object safe.
///
/// Objects arrive as [`Incoming`]: the decoded object, with the bytes it was decoded from when
/// the decoder kept them. What to keep of those bytes is the store's business; an
/// implementation that has no bytes hands the object alone (`Incoming::from(object)`).
///
/// The Rust shape of client-go's `cache.ListerWatcher`.
#[doc(alias = "ListWatch")]
#[async_trait]
pub trait ListerWatcher<K>: Send + Sync {
    /// Lists one page, handing its objects to `sink` as they are decoded, in one part or
    /// several, and returns what the page says besides its objects. A part is handed over only
    /// once `sink` is ready for it, so a page need never be held decoded whole:
    /// [`KubeListerWatcher`](crate::KubeListerWatcher) hands over each decoded batch as the
    /// body arrives.
    ///
    /// # Errors
    ///
    /// The server's refusal mapped to an [`Error`](crate::Error) variant, a transport failure,
    /// an undecodable body, or the first error `sink` returns.
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<K>) -> Result<ListPage>;

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
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<K>) -> Result<ListPage> {
        (**self).list(options, sink).await
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
