//! A list body decoded as its bytes arrive, in either wire format: what is common to cutting a
//! JSON body (`json_list`) and a protobuf body (`kinformer_protobuf::ListSplitter`) into items.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use kube_client::client::Body;
use tokio::sync::{mpsc, oneshot};

use kinformer_store::Incoming;

use crate::{
    Decoder, Error, ListPage, ListSink, Result, ReuseObject,
    decoder::{PARALLEL_ITEMS, decode_items},
};

/// Cuts a list body, fed in chunks of any size, into its items and its *head*: the same list
/// with no items, which the decoder's `decode_list` reads for the kind, the resourceVersion and
/// the continue token.
pub(crate) trait Splitter: Send + 'static {
    /// One item's bytes.
    type Item: AsRef<[u8]> + Send + Sync;

    /// Reads the next bytes of the body.
    fn feed(&mut self, chunk: &[u8]) -> Result<()>;

    /// Once the items have begun, the head read so far: a list as kube-apiserver writes it
    /// (metadata first) can be checked and its `continue` token read before any item is
    /// decoded.
    fn head_before_items(&self) -> Option<Vec<u8>>;

    /// The items completed since the last call, in order.
    fn take_items(&mut self) -> Vec<Self::Item>;

    /// The head, once the body is complete.
    fn finish(self) -> Result<Vec<u8>>;
}

/// How many body chunks may wait for the decoding thread before the connection is read no
/// further (a chunk is what hyper read at once, up to a few hundred KiB).
const CHUNKS_IN_FLIGHT: usize = 32;

/// How many decoded parts may wait for the store before decoding pauses.
const PARTS_IN_FLIGHT: usize = 1;

/// The objects of one part handed to a store that takes parts: enough for two cores to decode
/// side by side, few enough that a part in flight is a small share of the cache.
const PART_ITEMS: usize = 512;

/// Where the objects of a list go: into the page, or to a store part by part.
pub(crate) enum Items<'a, K> {
    /// Collected into the returned page.
    Collect,
    /// Handed over in parts as they are decoded; the returned page has no items.
    Parts(&'a mut dyn ListSink<K>),
}

/// Decodes a list response as its bytes arrive: a blocking thread cuts the body into items with
/// `splitter` and decodes each with `decode_item`, in batches (a batch of [`PARALLEL_ITEMS`] on
/// every core), while this task reads the connection, so only the objects and a batch of item
/// bytes are ever in memory; with [`Items::Parts`], only a batch or two of the objects.
/// `prefetch` is handed the page's `continue` token as soon as the head before the items has
/// it (kube-apiserver writes `metadata` first), so the next page travels meanwhile.
pub(crate) async fn decode_arriving<K, D, S>(
    decoder: Arc<D>,
    splitter: S,
    decode_item: impl Fn(&D, &[u8]) -> Result<Incoming<K>> + Send + Sync + 'static,
    mut body: Body,
    reuse: Option<Arc<ReuseObject<K>>>,
    prefetch: impl FnOnce(String) -> Result<bool>,
    mut items: Items<'_, K>,
) -> Result<ListPage<K>>
where
    K: Send + Sync + 'static,
    D: Decoder<K>,
    S: Splitter,
{
    let (chunks, arriving) = mpsc::channel::<Bytes>(CHUNKS_IN_FLIGHT);
    let (token_sender, mut token) = oneshot::channel::<String>();
    let (parts, mut decoded) = match items {
        Items::Parts(_) => {
            let (sender, receiver) = mpsc::channel(PARTS_IN_FLIGHT);
            (Some(sender), Some(receiver))
        }
        Items::Collect => (None, None),
    };
    let worker = tokio::task::spawn_blocking(move || {
        split_and_decode(
            &*decoder,
            splitter,
            decode_item,
            arriving,
            token_sender,
            reuse.as_deref(),
            parts.as_ref(),
        )
    });
    let mut prefetch = Some(prefetch);
    let mut token_pending = true;
    let forwarded = loop {
        tokio::select! {
            received = &mut token, if token_pending => {
                token_pending = false;
                if let (Ok(next), Some(prefetch)) = (received, prefetch.take()) {
                    prefetch(next)?;
                }
            }
            Some(part) = next_part(&mut decoded) => {
                // Nothing more is read while the store makes room for this part.
                if let Items::Parts(sink) = &mut items
                    && let Err(error) = sink.part(part).await
                {
                    break Err(error);
                }
            }
            frame = body.frame() => match frame {
                None => break Ok(()),
                Some(Err(error)) => break Err(Error::from_transport(error)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && chunks.send(data).await.is_err()
                    {
                        // The decoding thread stopped early: its result says why.
                        break Ok(());
                    }
                }
            },
        }
    };
    drop(chunks);
    let mut handed = forwarded;
    if let (Ok(()), Some(receiver), Items::Parts(sink)) = (&handed, &mut decoded, &mut items) {
        while let Some(part) = receiver.recv().await {
            if let Err(error) = sink.part(part).await {
                handed = Err(error);
                break;
            }
        }
    }
    // A store that refused a part stops the decoding thread: its sends fail from now on.
    drop(decoded);
    let page = worker.await.map_err(|source| Error::Task {
        what: "the decode of an arriving list",
        source,
    })?;
    // A connection that broke (or a store that refused a part) explains an incomplete body
    // better than the decode does.
    handed?;
    let page = page?;
    // The body may have ended before the head's token was read (a fast server, or metadata
    // after the items): the next page is still asked for before this one is returned.
    if let (Some(prefetch), Some(next)) = (prefetch.take(), page.continue_token.clone()) {
        prefetch(next)?;
    }
    Ok(page)
}

/// The next decoded part, or never when parts are not handed over.
async fn next_part<K>(
    decoded: &mut Option<mpsc::Receiver<Vec<Incoming<K>>>>,
) -> Option<Vec<Incoming<K>>> {
    match decoded {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// The blocking half of [`decode_arriving`]: the page, with its items unless `parts` takes
/// them.
fn split_and_decode<K, D, S>(
    decoder: &D,
    mut splitter: S,
    decode_item: impl Fn(&D, &[u8]) -> Result<Incoming<K>> + Sync,
    mut arriving: mpsc::Receiver<Bytes>,
    token: oneshot::Sender<String>,
    reuse: Option<&ReuseObject<K>>,
    parts: Option<&mpsc::Sender<Vec<Incoming<K>>>>,
) -> Result<ListPage<K>>
where
    K: Send + Sync,
    D: Decoder<K>,
    S: Splitter,
{
    let decode = |raw: &S::Item| -> Result<Incoming<K>> {
        let incoming = decode_item(decoder, raw.as_ref())?;
        Ok(match reuse {
            Some(reuse) => reused(incoming, reuse),
            None => incoming,
        })
    };
    let mut items = Vec::new();
    let mut deliver = |decoded: Vec<Incoming<K>>| -> Result<()> {
        match parts {
            // Refused only once the other half has stopped, with an error of its own.
            Some(parts) => parts
                .blocking_send(decoded)
                .map_err(|_| Error::decode("list", "the rest of the list was not taken", &[])),
            None => {
                items.extend(decoded.into_iter().map(|item| item.into_parts().0));
                Ok(())
            }
        }
    };
    // A part is a smaller batch: it bounds how much of the list is decoded and not yet taken.
    let batch_items = if parts.is_some() {
        PART_ITEMS
    } else {
        PARALLEL_ITEMS
    };
    let mut token = Some(token);
    let mut batch: Vec<S::Item> = Vec::new();
    while let Some(chunk) = arriving.blocking_recv() {
        splitter.feed(&chunk)?;
        if token.is_some()
            && let Some(head) = splitter.head_before_items()
        {
            // The kind is checked before any item is decoded, once: the sender goes whether or
            // not the head names a next page, so no later chunk reads the head again.
            let sender = token.take();
            let early = decoder.decode_list(&head)?;
            if let (Some(sender), Some(next)) = (sender, early.continue_token) {
                let _ = sender.send(next);
            }
        }
        batch.append(&mut splitter.take_items());
        if batch.len() >= batch_items {
            deliver(decode_items(&batch, batch_items, decode)?)?;
            batch.clear();
        }
    }
    batch.append(&mut splitter.take_items());
    deliver(decode_items(&batch, batch_items, decode)?)?;
    let mut page = decoder.decode_list(&splitter.finish()?)?;
    page.items = items;
    Ok(page)
}

/// `incoming` with its object mapped by `reuse`; the bytes go with a replaced object.
pub(crate) fn reused<K>(incoming: Incoming<K>, reuse: &ReuseObject<K>) -> Incoming<K> {
    let (object, encoded) = incoming.into_parts();
    let kept = reuse(Arc::clone(&object));
    if Arc::ptr_eq(&kept, &object) {
        Incoming::new(kept, encoded)
    } else {
        kept.into()
    }
}
