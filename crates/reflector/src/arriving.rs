//! A list body decoded as its bytes arrive, in either wire format: what is common to cutting a
//! JSON body (`json_list`) and a protobuf body (`kinformer_protobuf::ListSplitter`) into items.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
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
pub(crate) async fn decode_arriving<K, D, S, B>(
    decoder: Arc<D>,
    splitter: S,
    decode_item: impl Fn(&D, &[u8]) -> Result<Incoming<K>> + Send + Sync + 'static,
    mut body: B,
    prefetch: impl FnOnce(String) -> Result<bool>,
    sink: &mut dyn ListSink<K>,
) -> Result<ListPage>
where
    K: Send + Sync + 'static,
    D: Decoder<K>,
    S: Splitter,
    B: BodyExt<Data = Bytes, Error = kube_client::Error> + Unpin,
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
    // A chunk read from the connection that the decoding thread has no room for yet. The loop
    // never waits on that room alone: the thread may itself be waiting for this task to take a
    // decoded part, and each would wait for the other for ever.
    let mut unsent: Option<Bytes> = None;
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
            room = chunks.reserve(), if unsent.is_some() => match room {
                Ok(room) => {
                    if let Some(data) = unsent.take() {
                        room.send(data);
                    }
                }
                // The decoding thread stopped early: its result says why.
                Err(_) => break Ok(()),
            },
            frame = body.frame(), if unsent.is_none() => match frame {
                None => break Ok(()),
                Some(Err(error)) => break Err(Error::from_transport(error)),
                Some(Ok(frame)) => unsent = frame.into_data().ok(),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::stream;
    use http_body::Frame;
    use http_body_util::StreamBody;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::{KubeDecoder, WireFormat, json_list::ListSplitter};

    /// Far above what the list needs on a loaded machine; reached only if it never finishes.
    const PATIENCE: Duration = Duration::from_secs(60);

    /// A JSON ConfigMap list of `parts` frames of [`PART_ITEMS`] items each, every frame ready
    /// as soon as it is asked for.
    fn list_in_frames(parts: usize) -> Vec<Bytes> {
        let mut frames = vec![Bytes::from_static(
            br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":["#,
        )];
        for part in 0..parts {
            let items: Vec<String> = (0..PART_ITEMS)
                .map(|i| {
                    let n = part * PART_ITEMS + i;
                    let comma = if n == 0 { "" } else { "," };
                    format!(r#"{comma}{{"metadata":{{"name":"c{n}","namespace":"default"}}}}"#)
                })
                .collect();
            frames.push(Bytes::from(items.concat()));
        }
        frames.push(Bytes::from_static(b"]}"));
        frames
    }

    /// Every frame holds a whole part, so the decoding thread finishes a part for each chunk
    /// it takes, and the reader, with a frame always ready, is often holding one the thread has
    /// no room for just as the thread waits to hand over a part. The reader must keep taking
    /// parts then: waiting on that room alone, it and the thread waited on each other for ever
    /// (the list of 100,000 small ConfigMaps never synced).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_whose_every_chunk_is_a_part_arrives_whole() {
        const PARTS: usize = 200;
        for _ in 0..3 {
            let frames = list_in_frames(PARTS);
            let body = StreamBody::new(stream::iter(
                frames
                    .into_iter()
                    .map(|frame| Ok::<_, kube_client::Error>(Frame::data(frame))),
            ));
            let decoder = Arc::new(KubeDecoder::for_resource::<ConfigMap>(WireFormat::Json));
            let decode_item = |decoder: &KubeDecoder<ConfigMap>, item: &[u8]| {
                decoder.decode_list_item(item).map(Into::into)
            };
            let mut items: Vec<Incoming<ConfigMap>> = Vec::new();
            let page = tokio::time::timeout(
                PATIENCE,
                decode_arriving(
                    decoder,
                    ListSplitter::new(),
                    decode_item,
                    body,
                    |_| Ok(true),
                    &mut items,
                ),
            )
            .await
            .expect("the list finishes")
            .expect("the list decodes");
            assert_eq!(page.resource_version, "7");
            assert_eq!(items.len(), PARTS * PART_ITEMS);
            let last = PARTS * PART_ITEMS - 1;
            assert_eq!(
                items[last].object().metadata.name.as_deref(),
                Some(format!("c{last}").as_str()),
                "the items arrive in order"
            );
        }
    }
}
