//! The [`ListerWatcher`] seam: where a reflector's objects come from.

use std::sync::Arc;

use async_trait::async_trait;

use kinformer_store::Incoming;

use crate::{ListOptions, ListPage, Result, WatchStream, WatchStreamWithWire, event::without_wire};

/// Maps a freshly decoded object to the one to keep: itself, or an equal copy the consumer
/// already holds (see [`ListerWatcher::list_reusing`]).
pub type ReuseObject<K> = dyn Fn(Arc<K>) -> Arc<K> + Send + Sync;

/// Where [`ListerWatcher::list_in_parts`] hands a list's objects, part by part.
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

    /// Lists one page, passing every object through `reuse` as it is decoded, so that a copy
    /// `reuse` replaces is freed before the next object is decoded. A relist uses it to keep
    /// the cached copy of every unchanged object: without it, one unpaginated relist holds the
    /// whole new list beside the whole cache.
    ///
    /// The default lists the page, then maps it: correct, but without the memory saving.
    /// Implementations that decode should apply `reuse` per object, as
    /// [`KubeListerWatcher`](crate::KubeListerWatcher) does.
    ///
    /// # Errors
    ///
    /// As for [`list`](ListerWatcher::list).
    async fn list_reusing(
        &self,
        options: ListOptions,
        reuse: Arc<ReuseObject<K>>,
    ) -> Result<ListPage<K>>
    where
        K: 'static,
    {
        let mut page = self.list(options).await?;
        page.items = page.items.into_iter().map(|item| reuse(item)).collect();
        Ok(page)
    }

    /// Lists one page, handing its objects to `sink` as they are decoded, so that the page is
    /// never held decoded whole: what a reflector whose store takes lists in parts
    /// ([`Store::replace_in_parts`](kinformer_store::Store::replace_in_parts)) lists with.
    /// With `keep_encoded`, each object comes with the bytes it was decoded from where the
    /// decoder keeps them, as [`watch_with_wire`](ListerWatcher::watch_with_wire) does. The
    /// returned page has no items.
    ///
    /// The default lists the page, then hands it over as one part: correct, but without the
    /// memory saving. [`KubeListerWatcher`](crate::KubeListerWatcher) hands over each decoded
    /// batch as the body arrives.
    ///
    /// # Errors
    ///
    /// As for [`list`](ListerWatcher::list), and the first error `sink` returns.
    async fn list_in_parts(
        &self,
        options: ListOptions,
        keep_encoded: bool,
        sink: &mut dyn ListSink<K>,
    ) -> Result<ListPage<K>>
    where
        K: Send + Sync + 'static,
    {
        let _ = keep_encoded;
        let mut page = self.list(options).await?;
        sink.part(page.items.drain(..).map(Incoming::from).collect())
            .await?;
        Ok(page)
    }

    /// Opens a watch.
    ///
    /// # Errors
    ///
    /// As for [`list`](ListerWatcher::list), for the request that opens the stream; errors
    /// during the stream are items of the stream.
    async fn watch(&self, options: ListOptions) -> Result<WatchStream<K>>;

    /// Opens a watch whose added and modified objects come with the bytes they were decoded
    /// from, where the decoder kept them ([`Encoded`](kinformer_store::Encoded)): what a
    /// reflector asked for them ([`ReflectorOptions::wire_bytes`](crate::ReflectorOptions::wire_bytes))
    /// watches with, so that a compact cache downstream stores those bytes rather than
    /// encoding each object again.
    ///
    /// The default is [`watch`](ListerWatcher::watch) with no bytes: correct, but every object
    /// is encoded again. Implementations that decode bytes should keep them, as
    /// [`KubeListerWatcher`](crate::KubeListerWatcher) does for protobuf.
    ///
    /// # Errors
    ///
    /// As for [`watch`](ListerWatcher::watch).
    async fn watch_with_wire(&self, options: ListOptions) -> Result<WatchStreamWithWire<K>>
    where
        K: 'static,
    {
        Ok(without_wire(self.watch(options).await?))
    }

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

    async fn list_reusing(
        &self,
        options: ListOptions,
        reuse: Arc<ReuseObject<K>>,
    ) -> Result<ListPage<K>> {
        (**self).list_reusing(options, reuse).await
    }

    async fn list_in_parts(
        &self,
        options: ListOptions,
        keep_encoded: bool,
        sink: &mut dyn ListSink<K>,
    ) -> Result<ListPage<K>>
    where
        K: Send + Sync + 'static,
    {
        (**self).list_in_parts(options, keep_encoded, sink).await
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<K>> {
        (**self).watch(options).await
    }

    async fn watch_with_wire(&self, options: ListOptions) -> Result<WatchStreamWithWire<K>> {
        (**self).watch_with_wire(options).await
    }

    fn type_description(&self) -> String {
        (**self).type_description()
    }

    fn namespace(&self) -> Option<String> {
        (**self).namespace()
    }
}
