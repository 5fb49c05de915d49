//! [`KubeListerWatcher`]: list and watch over kube-client, decoding through a `Decoder`.

use std::{fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use kube_client::{Api, Client, client::Body};
use kube_core::{
    ApiResource, DynamicObject, PartialObjectMeta, Resource,
    params::{ListParams, WatchParams},
};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;

use kinformer_store::Object;

use crate::{
    Decoder, Error, ExpectedType, KubeDecoder, ListOptions, ListPage, ListSink, ListerWatcher,
    Result, VersionMatch, WatchStream, WireFormat, arriving::decode_arriving, json_list,
    protobuf::ProtobufSplitter,
};

/// A list body at least this large is decoded on a blocking thread, so decoding a big page does
/// not stall the runtime thread that drives the other connections.
const DECODE_OFF_TASK_THRESHOLD: usize = 256 * 1024;

/// The most of an error body kept for the message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

type TweakListOptions = Arc<dyn Fn(&mut ListOptions) + Send + Sync>;

/// A [`ListerWatcher`] over kube-client: typed resources ([`KubeListerWatcher::new`]), a
/// projection of one ([`KubeListerWatcher::projected`]), any resource as [`DynamicObject`]
/// ([`KubeListerWatcher::dynamic`]) or metadata only ([`KubeListerWatcher::metadata`]).
///
/// Requests are built with kube's request builders and sent with [`Client::send`]. Built-in
/// kinds and metadata are asked for in Kubernetes protobuf, custom resources and dynamic
/// objects in JSON ([`WireFormat`]), and whichever format arrives is decoded straight into `K`.
/// As soon as a list page has arrived, the next page (named by its `continue` token) is
/// requested in the background while this one decodes on a blocking thread, so network and
/// decoding overlap; a large page is decoded item by item as its bytes arrive. The namespace
/// comes from the [`Api`]; selectors and a tweak hook narrow every list and watch.
///
/// Build the [`Client`] with [`informer_client`](crate::informer_client), which turns off
/// kube-client's own retry layer (on by default in kube 5): it retries 429, 503 and 504 before
/// the reflector sees them, so a list answered "too large resource version" (a 504 the
/// reflector answers by relisting at the latest version) is retried underneath for minutes,
/// and a second backoff stacks under the reflector's.
///
/// The Rust shape of client-go's `cache.NewFilteredListWatchFromClient`.
#[doc(alias = "NewListWatchFromClient")]
#[doc(alias = "NewFilteredListWatchFromClient")]
pub struct KubeListerWatcher<K>(Decoding<K, KubeDecoder<K>>);

impl<K> fmt::Debug for KubeListerWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<K> KubeListerWatcher<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
{
    /// Lists and watches the typed resource `K` in `api`'s scope (one namespace or all), in
    /// protobuf when `K` is a built-in kind (JSON when the server answers JSON, and for custom
    /// resources): see [`WireFormat::default`].
    pub fn new(api: Api<K>) -> Self {
        Self::projected(api)
    }
}

impl<K> KubeListerWatcher<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    /// Lists and watches the typed resource `R` in `api`'s scope, decoding each object straight
    /// into `K`: a projection of `R` that names only the fields a controller reads (see
    /// kinformer-store's `ProjectedMeta` and `impl_object!`). Every field `K` does not name is
    /// skipped on the wire, in protobuf and in JSON, without being decoded.
    pub fn projected<R: Resource<DynamicType = ()>>(api: Api<R>) -> Self {
        let description = format!("{}/{}", R::api_version(&()), R::kind(&()));
        let decoder = KubeDecoder::for_resource::<R>(WireFormat::default());
        Self(Decoding::from_parts(api, decoder, description))
    }

    /// Asks for `format`: [`WireFormat::Json`] turns protobuf off. Kinds without a protobuf
    /// form (custom resources, dynamic objects) are asked for in JSON whatever `format` says.
    #[must_use]
    pub fn wire_format(mut self, format: WireFormat) -> Self {
        self.0.decoder = Arc::new((*self.0.decoder).clone().format(format));
        self
    }

    /// Drops `metadata.managedFields` as objects are decoded (never decoded at all in
    /// protobuf), instead of caching them: often a third of an object, read by no controller.
    #[must_use]
    pub fn drop_managed_fields(mut self) -> Self
    where
        K: Object,
    {
        self.0.decoder = Arc::new((*self.0.decoder).clone().drop_managed_fields());
        self
    }

    /// Decodes watch events on up to `workers` tasks at once, beside the task that reads the
    /// watch; `0` decodes them on that task.
    ///
    /// Events are still handed on in the order the server sent them; only their decoding
    /// overlaps the reading and whatever consumes the events. The default is 4 where the
    /// process may use two cores or more, and `0` on one core, where a worker could only take
    /// turns with the reader. More frames in flight let the reader run further ahead and hand
    /// the informer events in bursts, which costs less CPU per event even on two cores.
    #[must_use]
    pub fn watch_decode_workers(self, workers: usize) -> Self {
        Self(self.0.watch_decode_workers(workers))
    }

    /// Only objects whose labels match `selector` (`app=web,tier!=cache`).
    #[must_use]
    pub fn labels(self, selector: impl Into<String>) -> Self {
        Self(self.0.labels(selector))
    }

    /// Only objects whose fields match `selector` (`spec.nodeName=node-1`).
    #[must_use]
    pub fn fields(self, selector: impl Into<String>) -> Self {
        Self(self.0.fields(selector))
    }

    /// Runs `tweak` on the options of every list and watch, after the selectors are set: client-go's
    /// `TweakListOptionsFunc`.
    #[doc(alias = "TweakListOptionsFunc")]
    #[must_use]
    pub fn tweak_list_options(
        self,
        tweak: impl Fn(&mut ListOptions) + Send + Sync + 'static,
    ) -> Self {
        Self(self.0.tweak_list_options(tweak))
    }
}

impl KubeListerWatcher<DynamicObject> {
    /// Lists and watches any resource, described by `resource`, as [`DynamicObject`]s, in JSON.
    pub fn dynamic(api: Api<DynamicObject>, resource: &ApiResource) -> Self {
        let expected = ExpectedType::new(resource.api_version.clone(), resource.kind.clone());
        let description = format!("{}/{}", resource.api_version, resource.kind);
        Self(Decoding::from_parts(
            api,
            KubeDecoder::json_only(expected),
            description,
        ))
    }
}

impl<K> KubeListerWatcher<PartialObjectMeta<K>>
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    /// Lists and watches only the metadata of `K` (`PartialObjectMetadata`), which keeps a cache
    /// several times smaller when a controller reads nothing else. In protobuf, as client-go's
    /// metadata client asks, for built-in kinds and custom resources alike (the server makes
    /// the `PartialObjectMetadata`); each object reads `meta.k8s.io/v1`
    /// `PartialObjectMetadata` as its type from either format.
    pub fn metadata(api: Api<K>) -> Self {
        let description = format!("{}/{} (metadata)", K::api_version(&()), K::kind(&()));
        Self(Decoding::from_parts(
            api,
            KubeDecoder::metadata(WireFormat::default()),
            description,
        ))
    }
}

#[async_trait]
impl<K> ListerWatcher<K> for KubeListerWatcher<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<K>) -> Result<ListPage> {
        self.0.list(options, sink).await
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<K>> {
        self.0.watch(options).await
    }

    fn type_description(&self) -> String {
        self.0.type_description()
    }

    fn namespace(&self) -> Option<String> {
        self.0.namespace()
    }
}

/// The lister-watcher over kube-client, with the decoder as a parameter so the crate's tests
/// can decode through one of their own.
pub(crate) struct Decoding<K, D> {
    client: Client,
    request: kube_core::Request,
    namespace: Option<String>,
    description: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
    tweak: Option<TweakListOptions>,
    decoder: Arc<D>,
    prefetch: Mutex<Option<Prefetch>>,
    decode_workers: usize,
    _objects: std::marker::PhantomData<fn() -> K>,
}

impl<K, D> Drop for Decoding<K, D> {
    fn drop(&mut self) {
        if let Some(prefetch) = self.prefetch.get_mut().take() {
            prefetch.response.abort();
        }
    }
}

impl<K, D> fmt::Debug for Decoding<K, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeListerWatcher")
            .field("url", &self.request.url_path)
            .field("namespace", &self.namespace)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .finish_non_exhaustive()
    }
}

impl<K, D> Decoding<K, D>
where
    D: Decoder<K>,
{
    /// Lists and watches in `api`'s scope, decoding with `decoder`.
    #[cfg(test)]
    pub(crate) fn with_decoder<A>(api: Api<A>, decoder: D) -> Self
    where
        A: Resource<DynamicType = ()>,
    {
        let description = format!("{}/{}", A::api_version(&()), A::kind(&()));
        Self::from_parts(api, decoder, description)
    }

    pub(crate) fn from_parts<A: Resource>(api: Api<A>, decoder: D, description: String) -> Self {
        let namespace = api.namespace().map(str::to_owned);
        let request = kube_core::Request::new(api.resource_url());
        Self {
            client: api.into_client(),
            request,
            namespace,
            description,
            label_selector: None,
            field_selector: None,
            tweak: None,
            decoder: Arc::new(decoder),
            prefetch: Mutex::new(None),
            decode_workers: watch::default_decode_workers(),
            _objects: std::marker::PhantomData,
        }
    }

    pub(crate) fn watch_decode_workers(mut self, workers: usize) -> Self {
        self.decode_workers = workers;
        self
    }

    pub(crate) fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    pub(crate) fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    pub(crate) fn tweak_list_options(
        mut self,
        tweak: impl Fn(&mut ListOptions) + Send + Sync + 'static,
    ) -> Self {
        self.tweak = Some(Arc::new(tweak));
        self
    }

    fn scoped(&self, mut options: ListOptions) -> ListOptions {
        if options.label_selector.is_none() {
            options.label_selector.clone_from(&self.label_selector);
        }
        if options.field_selector.is_none() {
            options.field_selector.clone_from(&self.field_selector);
        }
        if let Some(tweak) = &self.tweak {
            tweak(&mut options);
        }
        options
    }

    fn list_request(&self, options: &ListOptions) -> Result<http::Request<Vec<u8>>> {
        let resource_version = options
            .resource_version
            .clone()
            .filter(|version| !version.is_empty());
        // kube's builder drops resourceVersion=0 when a limit is set, which would turn client-go's
        // cheap "any version" first list into a consistent read; it is added back below.
        let any_version_with_limit =
            resource_version.as_deref() == Some("0") && options.limit.is_some();
        let params = ListParams {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            limit: options.limit,
            continue_token: options.continue_token.clone(),
            version_match: resource_version
                .as_ref()
                .and(options.resource_version_match)
                .map(|version_match| match version_match {
                    VersionMatch::NotOlderThan => kube_core::params::VersionMatch::NotOlderThan,
                    VersionMatch::Exact => kube_core::params::VersionMatch::Exact,
                }),
            resource_version,
            ..ListParams::default()
        };
        let request = self
            .request
            .list(&params)
            .map_err(|error| Error::request("list", error))?;
        let (mut parts, body) = request.into_parts();
        if any_version_with_limit && options.continue_token.is_none() {
            let uri = format!("{}&resourceVersion=0", parts.uri);
            parts.uri = uri
                .parse()
                .map_err(|error: http::uri::InvalidUri| Error::request("list", error))?;
        }
        with_shard_selector(&mut parts.uri, options, "list")?;
        if let Some(accept) = self.decoder.accept() {
            let value = http::HeaderValue::from_str(accept)
                .map_err(|error| Error::request("list", error))?;
            parts.headers.insert(http::header::ACCEPT, value);
        }
        Ok(http::Request::from_parts(parts, body))
    }

    fn watch_request(&self, options: &ListOptions) -> Result<http::Request<Vec<u8>>> {
        let params = WatchParams {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            timeout: options.timeout_seconds,
            bookmarks: options.allow_watch_bookmarks || options.send_initial_events,
            send_initial_events: options.send_initial_events,
        };
        let mut request = self
            .request
            .watch(&params, options.resource_version())
            .map_err(|error| Error::request("watch", error))?;
        with_shard_selector(request.uri_mut(), options, "watch")?;
        if let Some(accept) = self.decoder.watch_accept() {
            let value = http::HeaderValue::from_str(accept)
                .map_err(|error| Error::request("watch", error))?;
            request.headers_mut().insert(http::header::ACCEPT, value);
        }
        // Watch streams are newline-delimited; a compressed stream would hide line boundaries.
        request.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        Ok(request)
    }

    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<http::Response<Body>> {
        send(&self.client, request).await
    }

    /// The body of the list page `options` asks for: the one prefetched for exactly these
    /// options when there is one, else a fresh request. A prefetch for other options is
    /// abandoned. A large body the decoder can read item by item (JSON, or protobuf) is handed
    /// over as it arrives instead of collected.
    async fn list_body(&self, options: &ListOptions) -> Result<ListBody> {
        let prefetched = {
            let mut prefetch = self.prefetch.lock();
            match prefetch.take() {
                Some(next) if next.options == *options => Some(next.response),
                Some(stale) => {
                    stale.response.abort();
                    None
                }
                None => None,
            }
        };
        if let Some(response) = prefetched {
            return response
                .await
                .map_err(|source| Error::Task {
                    what: "the prefetch of the next list page",
                    source,
                })?
                .map(ListBody::Whole);
        }
        let response = self.send(self.list_request(options)?).await?;
        let arriving = if is_large(&response, "application/json") {
            self.decoder.decodes_json_items().then_some(Arriving::Json)
        } else if is_large(&response, kinformer_protobuf::CONTENT_TYPE) {
            self.decoder.protobuf_items_field().map(Arriving::Protobuf)
        } else {
            None
        };
        match arriving {
            Some(format) => Ok(ListBody::Arriving(response.into_body(), format)),
            None => collect_body(response).await.map(ListBody::Whole),
        }
    }

    /// Requests the page after `body` in the background, so that it travels while this one is
    /// decoded; `false` on the last page.
    fn prefetch_next_page(&self, options: &ListOptions, body: &[u8]) -> Result<bool> {
        match self.decoder.continue_token(body) {
            Some(token) => self.prefetch_page(options, token),
            None => Ok(false),
        }
    }

    /// Requests the page `token` names in the background.
    fn prefetch_page(&self, options: &ListOptions, token: String) -> Result<bool> {
        let next = ListOptions {
            continue_token: Some(token),
            resource_version: None,
            resource_version_match: None,
            ..options.clone()
        };
        let request = self.list_request(&next)?;
        let response = tokio::spawn(fetch_body(self.client.clone(), request));
        if let Some(stale) = self.prefetch.lock().replace(Prefetch {
            options: next,
            response,
        }) {
            stale.response.abort();
        }
        Ok(true)
    }
}

impl<K, D> Decoding<K, D>
where
    K: Send + Sync + 'static,
    D: Decoder<K>,
{
    async fn list_page(
        &self,
        options: ListOptions,
        sink: &mut dyn ListSink<K>,
    ) -> Result<ListPage> {
        let options = self.scoped(options);
        let body = match self.list_body(&options).await? {
            ListBody::Whole(body) => body,
            ListBody::Arriving(body, format) => {
                let decoder = Arc::clone(&self.decoder);
                let prefetch = |token| self.prefetch_page(&options, token);
                return match format {
                    Arriving::Json => {
                        let splitter = json_list::ListSplitter::new();
                        let decode_item = |decoder: &D, item: &[u8]| {
                            decoder.decode_list_item(item).map(Into::into)
                        };
                        decode_arriving(decoder, splitter, decode_item, body, prefetch, sink).await
                    }
                    Arriving::Protobuf(items_field) => {
                        let splitter = ProtobufSplitter::new(items_field);
                        let decode_item =
                            |decoder: &D, item: &[u8]| decoder.decode_protobuf_list_item(item);
                        decode_arriving(decoder, splitter, decode_item, body, prefetch, sink).await
                    }
                };
            }
        };
        let prefetching = self.prefetch_next_page(&options, &body)?;
        let decode = |decoder: &D, body: &[u8]| decoder.decode_list(body);
        // While the next page is in flight, decode on a blocking thread even a small page: inline,
        // the spawned request would wait for this task to yield.
        let (page, items) = if body.len() < DECODE_OFF_TASK_THRESHOLD && !prefetching {
            decode(&self.decoder, &body)?
        } else {
            let decoder = Arc::clone(&self.decoder);
            tokio::task::spawn_blocking(move || decode(&decoder, &body))
                .await
                .map_err(|source| Error::Task {
                    what: "the list page's decode",
                    source,
                })??
        };
        sink.part(items).await?;
        Ok(page)
    }
}

/// A list response: collected, or still arriving.
enum ListBody {
    Whole(Bytes),
    Arriving(Body, Arriving),
}

/// The format of a list body decoded as it arrives.
#[derive(Debug, Clone, Copy)]
enum Arriving {
    Json,
    /// Protobuf, with the list message's field number of its items.
    Protobuf(u32),
}

/// Whether a list response is of `media_type`, and of unknown length or at least
/// [`DECODE_OFF_TASK_THRESHOLD`]: worth decoding as it arrives.
fn is_large(response: &http::Response<Body>, media_type: &str) -> bool {
    let headers = response.headers();
    let of_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with(media_type));
    let small = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok())
        .is_some_and(|len| len < DECODE_OFF_TASK_THRESHOLD);
    of_type && !small
}

/// A list page requested ahead of the reflector asking for it.
struct Prefetch {
    options: ListOptions,
    response: tokio::task::JoinHandle<Result<Bytes>>,
}

async fn send(client: &Client, request: http::Request<Vec<u8>>) -> Result<http::Response<Body>> {
    let response = client
        .send(request.map(Body::from))
        .await
        .map_err(Error::from_transport)?;
    if response.status().is_success() {
        return Ok(response);
    }
    Err(status_error(response).await)
}

async fn fetch_body(client: Client, request: http::Request<Vec<u8>>) -> Result<Bytes> {
    collect_body(send(&client, request).await?).await
}

async fn collect_body(response: http::Response<Body>) -> Result<Bytes> {
    Ok(response
        .into_body()
        .collect()
        .await
        .map_err(Error::from_transport)?
        .to_bytes())
}

/// A `Status` body in JSON, or in protobuf (what kube-apiserver sends a client that accepts
/// protobuf).
fn decode_status(body: &[u8]) -> Option<kube_core::Status> {
    if body.starts_with(kinformer_protobuf::MAGIC) {
        let envelope = kinformer_protobuf::Envelope::parse(body).ok()?;
        return kinformer_protobuf::from_message(
            envelope.raw,
            &kinformer_protobuf::messages::STATUS,
            kinformer_protobuf::DecodeOptions::default(),
        )
        .ok();
    }
    serde_json::from_slice(body).ok()
}

/// Turns a failure response into an error, keeping `Retry-After` for 429s.
async fn status_error(response: http::Response<Body>) -> Error {
    let code = response.status();
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = match response.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => return Error::from_transport(error),
    };
    let body = &body[..body.len().min(ERROR_BODY_LIMIT)];
    let status = decode_status(body)
        .filter(|status| status.code != 0)
        .unwrap_or_else(|| {
            let mut status = kube_core::Status::failure(
                &String::from_utf8_lossy(body),
                code.canonical_reason().unwrap_or_default(),
            );
            status.code = code.as_u16();
            status
        });
    Error::from_status(&status, retry_after)
}

#[async_trait]
impl<K, D> ListerWatcher<K> for Decoding<K, D>
where
    K: Send + Sync + 'static,
    D: Decoder<K>,
{
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<K>) -> Result<ListPage> {
        self.list_page(options, sink).await
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<K>> {
        self.open_watch(options).await
    }

    fn type_description(&self) -> String {
        self.description.clone()
    }

    fn namespace(&self) -> Option<String> {
        self.namespace.clone()
    }
}

impl<K, D> Decoding<K, D>
where
    K: Send + Sync + 'static,
    D: Decoder<K>,
{
    /// Opens a watch and decodes its frames on the decode workers.
    async fn open_watch(&self, options: ListOptions) -> Result<WatchStream<K>> {
        let request = self.watch_request(&self.scoped(options))?;
        let response = self.send(request).await?;
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok());
        let framing = self.decoder.framing(content_type);
        let chunks = response
            .into_body()
            .into_data_stream()
            .map_err(Error::from_transport)
            .boxed();
        Ok(watch_events(
            chunks,
            Arc::clone(&self.decoder),
            D::decode_event,
            framing,
            MAX_WATCH_LINE,
            self.decode_workers,
        ))
    }
}

#[cfg(test)]
mod tests;
mod watch;

pub use watch::MAX_WATCH_LINE;
use watch::watch_events;

/// Adds `shardSelector` to a list or watch URI when the options carry one: kube-client's
/// parameters predate it.
fn with_shard_selector(
    uri: &mut http::Uri,
    options: &ListOptions,
    what: &'static str,
) -> Result<()> {
    let Some(selector) = &options.shard_selector else {
        return Ok(());
    };
    let separator = if uri.query().is_some() { '&' } else { '?' };
    let encoded: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("shardSelector", selector)
        .finish();
    *uri = format!("{uri}{separator}{encoded}")
        .parse()
        .map_err(|error: http::uri::InvalidUri| Error::request(what, error))?;
    Ok(())
}
