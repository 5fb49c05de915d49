//! A list body decoded as its bytes arrive, in either wire format: what is common to cutting a
//! JSON body (`json_list`) and a protobuf body (`kinformer_protobuf::ListSplitter`) into items.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use kube_client::client::Body;
use tokio::sync::{mpsc, oneshot};

use kinformer_store::Incoming;

use crate::{Decoder, Error, ListPage, ListSink, Result, decoder::decode_items};

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

/// Decodes a list response as its bytes arrive: a blocking thread cuts the body into items with
/// `splitter` and decodes each with `decode_item`, in parts of [`PART_ITEMS`] (decoded on every
/// core), while this task reads the connection and hands each part to `sink` once it is ready,
/// so only a part or two of the objects and a batch of item bytes are ever in memory.
/// `prefetch` is handed the page's `continue` token as soon as the head before the items has
/// it (kube-apiserver writes `metadata` first), so the next page travels meanwhile.
pub(crate) async fn decode_arriving<K, D, S>(
    decoder: Arc<D>,
    splitter: S,
    decode_item: impl Fn(&D, &[u8]) -> Result<Incoming<K>> + Send + Sync + 'static,
    mut body: Body,
    prefetch: impl FnOnce(String) -> Result<bool>,
    sink: &mut dyn ListSink<K>,
) -> Result<ListPage>
where
    K: Send + Sync + 'static,
    D: Decoder<K>,
    S: Splitter,
{
    let (chunks, arriving) = mpsc::channel::<Bytes>(CHUNKS_IN_FLIGHT);
    let (token_sender, mut token) = oneshot::channel::<String>();
    let (parts, mut decoded) = mpsc::channel(PARTS_IN_FLIGHT);
    let worker = tokio::task::spawn_blocking(move || {
        split_and_decode(
            &*decoder,
            splitter,
            decode_item,
            arriving,
            token_sender,
            &parts,
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
            Some(part) = decoded.recv() => {
                // Nothing more is read while the store makes room for this part.
                if let Err(error) = sink.part(part).await {
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
    if handed.is_ok() {
        while let Some(part) = decoded.recv().await {
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

/// The blocking half of [`decode_arriving`]: the page; its items go to `parts`.
fn split_and_decode<K, D, S>(
    decoder: &D,
    mut splitter: S,
    decode_item: impl Fn(&D, &[u8]) -> Result<Incoming<K>> + Sync,
    mut arriving: mpsc::Receiver<Bytes>,
    token: oneshot::Sender<String>,
    parts: &mpsc::Sender<Vec<Incoming<K>>>,
) -> Result<ListPage>
where
    K: Send + Sync,
    D: Decoder<K>,
    S: Splitter,
{
    let decode = |raw: &S::Item| decode_item(decoder, raw.as_ref());
    // Refused only once the other half has stopped, with an error of its own.
    let deliver = |decoded: Vec<Incoming<K>>| {
        parts
            .blocking_send(decoded)
            .map_err(|_| Error::decode("list", "the rest of the list was not taken", &[]))
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
            let (early, _) = decoder.decode_list(&head)?;
            if let (Some(sender), Some(next)) = (sender, early.continue_token) {
                let _ = sender.send(next);
            }
        }
        batch.append(&mut splitter.take_items());
        if batch.len() >= PART_ITEMS {
            deliver(decode_items(&batch, PART_ITEMS, decode)?)?;
            batch.clear();
        }
    }
    batch.append(&mut splitter.take_items());
    deliver(decode_items(&batch, PART_ITEMS, decode)?)?;
    let (page, _) = decoder.decode_list(&splitter.finish()?)?;
    Ok(page)
}
