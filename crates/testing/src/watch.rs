//! Watch streams: newline-delimited JSON events over a chunked response.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Response, header};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::faults::WatchFault;
use crate::handler::{ListParams, Shape, to_bytes, wait_for_revision, wire_json};
use crate::resources::ResourceType;
use crate::server::{ResponseBody, Shared};
use crate::status::ApiError;
use crate::store::{EventType, Obj, StoredEvent, WatchItem, WatchStart};

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

pub(crate) async fn serve(
    shared: Arc<Shared>,
    resource: Arc<ResourceType>,
    namespace: Option<String>,
    params: ListParams,
    shape: Shape,
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
    let (body_tx, body_rx) = mpsc::channel(BODY_BUFFER);
    let mut response = Response::new(ResponseBody::Stream(body_rx));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    match registered {
        Err(expired) => {
            // An expired version is not an HTTP error: the stream opens and carries one ERROR event.
            let event = line("ERROR", &to_bytes(&expired.to_status()));
            let _ = body_tx.try_send(event);
        }
        Ok((id, backlog, events, registered_at)) => {
            let watcher = Watcher {
                faults: shared.faults.subscribe_watch_faults(),
                shared,
                resource,
                group_resource,
                id,
                params,
                shape,
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
    out: mpsc::Sender<Bytes>,
    faults: broadcast::Receiver<WatchFault>,
}

impl Watcher {
    async fn run(
        mut self,
        backlog: Vec<WatchItem>,
        mut events: mpsc::Receiver<WatchItem>,
        initial_events_end: Option<u64>,
    ) {
        let timeout = tokio::time::sleep(self.params.timeout.unwrap_or(DEFAULT_WATCH_TIMEOUT));
        tokio::pin!(timeout);
        for item in backlog {
            if !self.send_item(item).await {
                return;
            }
        }
        if let Some(rv) = initial_events_end
            && !self
                .send(line("BOOKMARK", &self.bookmark_object(rv, true)))
                .await
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
                        let mut raw = raw.into_bytes();
                        raw.push(b'\n');
                        if !self.send(Bytes::from(raw)).await {
                            break;
                        }
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
                self.send(line("BOOKMARK", &self.bookmark_object(rv, false)))
                    .await
            }
            WatchItem::Event(event) => match self.render(&event) {
                Some(chunk) => self.send(chunk).await,
                None => true,
            },
        }
    }

    /// Applies the selectors the way the cacher does: an object that stops matching is sent
    /// as DELETED (its previous state with the new revision), one that starts matching as ADDED.
    fn render(&self, event: &StoredEvent) -> Option<Bytes> {
        let selectors = &self.params.selectors;
        if selectors.is_empty() {
            return Some(line(
                event.kind.as_str(),
                &wire_json(&event.object, &self.resource, self.shape),
            ));
        }
        let now = selectors.matches(&event.object);
        let before = event.prev.as_ref().is_some_and(|p| selectors.matches(p));
        match event.kind {
            EventType::Added if now => Some(self.full_line("ADDED", &event.object)),
            EventType::Deleted if now => Some(self.full_line("DELETED", &event.object)),
            EventType::Modified => match (before, now) {
                (true, true) => Some(self.full_line("MODIFIED", &event.object)),
                (false, true) => Some(self.full_line("ADDED", &event.object)),
                (true, false) => {
                    let prev = event.prev.as_ref()?;
                    let mut value = prev.value();
                    value["metadata"]["resourceVersion"] = json!(event.rv.to_string());
                    Some(self.full_line("DELETED", &Obj::new(&value)))
                }
                (false, false) => None,
            },
            _ => None,
        }
    }

    fn full_line(&self, event_type: &str, obj: &Obj) -> Bytes {
        line(event_type, &wire_json(obj, &self.resource, self.shape))
    }

    fn bookmark_object(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let (kind, api_version) = match self.shape {
            Shape::Metadata => (
                "PartialObjectMetadata".to_owned(),
                "meta.k8s.io/v1".to_owned(),
            ),
            Shape::Full => (self.resource.kind.clone(), self.resource.api_version()),
        };
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        to_bytes(&Value::Object(
            [
                ("kind".to_owned(), json!(kind)),
                ("apiVersion".to_owned(), json!(api_version)),
                ("metadata".to_owned(), metadata),
            ]
            .into_iter()
            .collect(),
        ))
    }
}
