//! Watch streams: newline-delimited JSON events, or length-prefixed protobuf `WatchEvent`
//! frames for a client that negotiated protobuf, over a chunked response.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Response, header};
use kinformer_protobuf::{encode_message, encode_object, encode_watch_frame};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::faults::WatchFault;
use crate::list::{ListParams, wait_for_revision};
use crate::object::{Obj, as_go_holds_it};
use crate::resources::ResourceType;
use crate::response::{ResponseBody, wire_json};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::store::{EventType, StoredEvent, WatchItem, WatchStart};
use crate::wire::{self, Encoding, Shape, to_bytes};

/// apiserver's default `--min-request-timeout` (1800 s) bounds a watch without timeoutSeconds.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Chunks buffered toward the connection before the watch task waits for the client.
const BODY_BUFFER: usize = 256;

fn line(event_type: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + 32);
    out.put_slice(br#"{"type":""#);
    out.put_slice(event_type.as_bytes());
    out.put_slice(br#"","object":"#);
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

/// One event in the stream's framing: a JSON line, or a length-prefixed protobuf frame whose
/// object is an enveloped body. `object` is already in the stream's encoding.
fn event(encoding: Encoding, event_type: &str, object: &[u8]) -> Bytes {
    match encoding {
        Encoding::Json => line(event_type, object),
        Encoding::Protobuf(_) => Bytes::from(encode_watch_frame(event_type, object)),
    }
}

/// An ERROR event carrying `error`'s Status.
fn error_event(encoding: Encoding, error: &ApiError) -> Bytes {
    event(encoding, "ERROR", &encoding.status(&error.to_status()).1)
}

/// What an injected raw line becomes in a stream of `encoding`: the line itself in JSON; in
/// protobuf, the event it spells (`{"type":...,"object":...}`) as a frame, or else its bytes
/// as one frame of garbage, so the stream stays framed and the client sees one bad event.
fn raw_chunk(encoding: Encoding, raw: String) -> Bytes {
    match encoding {
        Encoding::Json => {
            let mut raw = raw.into_bytes();
            raw.push(b'\n');
            Bytes::from(raw)
        }
        Encoding::Protobuf(_) => {
            let spelled = serde_json::from_str::<Value>(&raw).ok().and_then(|line| {
                let event_type = line.get("type")?.as_str()?.to_owned();
                let object = encode_object(line.get("object")?).ok()?;
                Some((event_type, object))
            });
            match spelled {
                Some((event_type, object)) => Bytes::from(encode_watch_frame(&event_type, &object)),
                None => {
                    let mut frame = BytesMut::with_capacity(raw.len() + 4);
                    frame.put_u32(u32::try_from(raw.len()).unwrap_or(u32::MAX));
                    frame.put_slice(raw.as_bytes());
                    frame.freeze()
                }
            }
        }
    }
}

pub(crate) async fn serve(
    shared: Arc<Shared>,
    resource: Arc<ResourceType>,
    namespace: Option<String>,
    params: ListParams,
    shape: Shape,
    encoding: Encoding,
) -> Result<Response<ResponseBody>, ApiError> {
    let requested = params.numeric_resource_version();
    let current = shared.store.lock().resource_version();
    if requested > current {
        wait_for_revision(&shared, requested).await?;
    }
    let initial_events = params.send_initial_events == Some(true);
    let start = match (params.send_initial_events, params.resource_version.as_str()) {
        (Some(true), _) | (None, "" | "0") => WatchStart::CurrentState,
        (Some(false), "" | "0") => WatchStart::After(shared.store.lock().resource_version()),
        _ => WatchStart::After(requested),
    };
    let group_resource = resource.group_resource();
    let registered = {
        let mut store = shared.store.lock();
        store
            .watch(&group_resource, namespace.as_deref(), start)
            .map(|(id, backlog, rx)| (id, backlog, rx, store.resource_version()))
    };
    // A CRD deleted while this request was on its way drops its resource's watchers before or
    // after this one registered. Registered first, it was dropped; registered after, its
    // resource is no longer served (CRDs are unregistered before their watchers are dropped)
    // and the stream ends at once, as kube-apiserver ends the watches of a deleted CRD.
    let still_served = shared
        .registry
        .read()
        .find(&resource.group, &resource.version, &resource.plural)
        .is_some();
    let (body_tx, body_rx) = mpsc::channel(BODY_BUFFER);
    let mut response = Response::new(ResponseBody::Stream(body_rx));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.watch_content_type()),
    );
    match registered {
        Err(expired) => {
            // An expired version is not an HTTP error: the stream opens and carries one ERROR event.
            let _ = body_tx.try_send(error_event(encoding, &expired));
        }
        Ok(_) if !still_served => drop(body_tx),
        Ok((id, backlog, events, registered_at)) => {
            let watcher = Watcher {
                faults: shared.faults.subscribe_watch_faults(),
                shared,
                resource,
                group_resource,
                id,
                params,
                shape,
                encoding,
                out: body_tx,
            };
            tokio::spawn(watcher.run(backlog, events, initial_events.then_some(registered_at)));
        }
    }
    Ok(response)
}

struct Watcher {
    shared: Arc<Shared>,
    resource: Arc<ResourceType>,
    group_resource: String,
    id: u64,
    params: ListParams,
    shape: Shape,
    encoding: Encoding,
    out: mpsc::Sender<Bytes>,
    faults: broadcast::Receiver<WatchFault>,
}

impl Watcher {
    /// Holds the connection open and silent until the watch times out, the client leaves, or
    /// a close fault arrives.
    async fn stall(&mut self, timeout: &mut std::pin::Pin<&mut tokio::time::Sleep>) {
        loop {
            tokio::select! {
                biased;
                () = timeout.as_mut() => return,
                () = self.out.closed() => return,
                fault = self.faults.recv() => match fault {
                    Ok(WatchFault::Close) | Err(broadcast::error::RecvError::Closed) => return,
                    _ => {}
                },
            }
        }
    }

    async fn run(
        mut self,
        backlog: Vec<WatchItem>,
        mut events: mpsc::Receiver<WatchItem>,
        initial_events_end: Option<u64>,
    ) {
        let mut lasts = self.params.timeout.unwrap_or(DEFAULT_WATCH_TIMEOUT);
        if let Some(cap) = self.shared.config.max_watch_timeout {
            lasts = lasts.min(cap);
        }
        let timeout = tokio::time::sleep(lasts);
        tokio::pin!(timeout);
        for item in backlog {
            if !self.send_item(item).await {
                return;
            }
        }
        if let Some(rv) = initial_events_end
            && !self.send_bookmark(rv, true).await
        {
            return;
        }
        let period = self
            .shared
            .config
            .bookmark_interval
            .max(Duration::from_millis(1));
        let mut bookmarks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        bookmarks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Biased so that a fault injected before a write reaches the client before that
            // write's event, which keeps fault tests deterministic.
            tokio::select! {
                biased;
                () = &mut timeout => break,
                () = self.out.closed() => break,
                fault = self.faults.recv() => match fault {
                    Ok(WatchFault::Close) | Err(broadcast::error::RecvError::Closed) => break,
                    Ok(WatchFault::RawLine(raw)) => {
                        if !self.send(raw_chunk(self.encoding, raw)).await {
                            break;
                        }
                    }
                    Ok(WatchFault::Stall) => {
                        self.stall(&mut timeout).await;
                        break;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                },
                item = events.recv() => match item {
                    Some(item) => {
                        if !self.send_item(item).await {
                            break;
                        }
                    }
                    // The store dropped us: closed by a fault, or fell behind its buffer.
                    None => break,
                },
                _ = bookmarks.tick(), if self.params.allow_bookmarks => {
                    self.shared.store.lock().bookmark(&self.group_resource, self.id);
                }
            }
        }
    }

    async fn send(&self, chunk: Bytes) -> bool {
        self.out.send(chunk).await.is_ok()
    }

    async fn send_item(&self, item: WatchItem) -> bool {
        match item {
            WatchItem::Bookmark(rv) => {
                if !self.params.allow_bookmarks {
                    return true;
                }
                self.send_bookmark(rv, false).await
            }
            WatchItem::Event(event) => match self.render(&event) {
                Ok(Some(chunk)) => self.send(chunk).await,
                Ok(None) => true,
                Err(error) => {
                    // An object the stream cannot encode ends it, as apiserver ends a watch
                    // whose encoder fails: the client relists.
                    tracing::error!(message = %error.message, "ending a watch on an unencodable object");
                    let _ = self.send(error_event(self.encoding, &error)).await;
                    false
                }
            },
        }
    }

    /// Applies the selectors the way the cacher does: an object that stops matching is sent
    /// as DELETED (its previous state with the new revision), one that starts matching as ADDED.
    fn render(&self, event: &StoredEvent) -> Result<Option<Bytes>, ApiError> {
        let selectors = &self.params.selectors;
        if selectors.is_empty() {
            return self
                .object_event(event.kind.as_str(), &event.object)
                .map(Some);
        }
        let now = selectors.matches(&event.object);
        let before = event.prev.as_ref().is_some_and(|p| selectors.matches(p));
        let (event_type, object) = match event.kind {
            EventType::Added if now => ("ADDED", event.object.clone()),
            EventType::Deleted if now => ("DELETED", event.object.clone()),
            EventType::Modified => match (before, now, &event.prev) {
                (true, true, _) => ("MODIFIED", event.object.clone()),
                (false, true, _) => ("ADDED", event.object.clone()),
                (true, false, Some(prev)) => ("DELETED", prev.restamped(event.rv, None)),
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        self.object_event(event_type, &object).map(Some)
    }

    /// An event carrying `obj` as this stream presents objects.
    fn object_event(&self, event_type: &str, obj: &Obj) -> Result<Bytes, ApiError> {
        let object = match self.encoding {
            Encoding::Json => wire_json(obj, &self.resource, self.shape),
            Encoding::Protobuf(message) => {
                wire::envelope(&self.resource, self.shape, &obj.protobuf(message)?)
            }
        };
        Ok(event(self.encoding, event_type, &object))
    }

    /// Sends a BOOKMARK at `rv`: an object of the watched kind carrying only its
    /// resourceVersion (and the end-of-initial-events annotation when `initial_events_end`).
    async fn send_bookmark(&self, rv: u64, initial_events_end: bool) -> bool {
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let object = match self.encoding {
            Encoding::Json => self.bookmark_json(metadata),
            Encoding::Protobuf(message) => {
                match encode_message(&json!({ "metadata": metadata }), message) {
                    Ok(bookmark) => wire::envelope(&self.resource, self.shape, &bookmark),
                    Err(error) => {
                        tracing::error!(%error, "cannot encode a bookmark in protobuf");
                        return false;
                    }
                }
            }
        };
        self.send(event(self.encoding, "BOOKMARK", &object)).await
    }

    /// The bookmark as kube-apiserver holds it: an object of the kind, so a Pod's carries an
    /// empty `spec` and `status`, as its protobuf form does.
    fn bookmark_json(&self, metadata: Value) -> Bytes {
        let (kind, api_version) = self.shape.object_type(&self.resource);
        let mut bookmark = json!({ "kind": kind, "apiVersion": api_version });
        bookmark["metadata"] = metadata;
        to_bytes(&as_go_holds_it(&bookmark).unwrap_or(bookmark))
    }
}
