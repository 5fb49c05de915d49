//! The decoding seam: bytes from the API server in, objects out.
//!
//! The reflector owns decoding instead of leaving it to kube-client so that it can choose the
//! wire format (protobuf for built-in kinds, see [`KubeDecoder`](crate::KubeDecoder); JSON), decode
//! a large page off the I/O task, check kinds and turn a malformed frame into an
//! [`Error::Decode`] instead of a panic or a silent skip.

use std::{borrow::Cow, collections::BTreeMap, fmt, marker::PhantomData, sync::Arc};

use kinformer_store::{Incoming, Object};
use rayon::iter::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::value::RawValue;

use crate::{Error, INITIAL_EVENTS_END_ANNOTATION, ListPage, Result, WatchEvent};

#[cfg(feature = "simd-json")]
pub(crate) mod fast_json;
/// Without the `simd-json` feature, serde_json reads every object.
#[cfg(not(feature = "simd-json"))]
pub(crate) mod fast_json {
    pub(crate) use serde_json::from_slice;
}
mod json_event;
#[cfg(test)]
mod json_fuzz;

/// A list page with at least this many items decodes on every core; smaller pages are decoded
/// one after another while the next is fetched.
pub(crate) const PARALLEL_ITEMS: usize = 2048;

/// Decodes a page's `items` in order: on rayon's pool when there are at least `parallel_from`
/// ([`PARALLEL_ITEMS`] for a page; a `resourceVersion=0` list is served whole), otherwise on
/// this thread.
///
/// The pool's threads live as long as the process, so their allocator heaps are warm: a thread
/// spawned per page would start each page with an empty heap and pay for it in page faults.
pub(crate) fn decode_items<T: Sync, O: Send>(
    items: &[T],
    parallel_from: usize,
    decode: impl Fn(&T) -> Result<O> + Sync,
) -> Result<Vec<O>> {
    if items.len() < parallel_from || rayon::current_num_threads() < 2 {
        return items.iter().map(decode).collect();
    }
    // Contiguous runs of at least a few hundred items keep the split cheap; `collect` keeps the
    // order. A decoder that panics is a bug, but the page still fails as an error rather than
    // unwinding through the reflector.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        items
            .par_iter()
            .with_min_len((parallel_from / 8).max(64))
            .map(&decode)
            .collect::<Result<Vec<_>>>()
    }))
    .map_err(|_| Error::decode("list", "a decoding thread panicked", &[]))?
}

/// Turns response bytes into list pages and watch events.
///
/// Implement it to decode another wire format or to decode straight into a slim projection
/// type. It must be cheap to share: one decoder serves every request of a
/// [`KubeListerWatcher`](crate::KubeListerWatcher), sometimes from a blocking thread.
pub(crate) trait Decoder<K>: Send + Sync + 'static {
    /// The `Accept` header value for list and watch requests, `None` to keep the request
    /// builder's.
    fn accept(&self) -> Option<&str> {
        None
    }

    /// The `Accept` header value for watch requests, when it differs from the list's (a
    /// metadata-only watch asks for `PartialObjectMetadata`, its list for
    /// `PartialObjectMetadataList`). Defaults to [`accept`](Decoder::accept).
    fn watch_accept(&self) -> Option<&str> {
        self.accept()
    }

    /// Decodes one list response body: what the list says besides its objects, and the
    /// objects, each with the bytes it decodes back from where the decoder keeps them.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] when the body is not a list of `K`; [`Error::WrongKind`] when it is a
    /// list of another kind.
    fn decode_list(&self, body: &[u8]) -> Result<(ListPage, Vec<Incoming<K>>)>;

    /// Whether a JSON list body may be decoded as it arrives: cut into its items, each read by
    /// [`decode_list_item`](Decoder::decode_list_item) and dropped, and the rest (the list with
    /// an empty `items`) read by [`decode_list`](Decoder::decode_list), so that the whole body
    /// is never in memory. `false` (the default) reads every list body whole.
    fn decodes_json_items(&self) -> bool {
        false
    }

    /// Decodes one element of a JSON list's `items` (see
    /// [`decodes_json_items`](Decoder::decodes_json_items)).
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] when the item is not a `K`; the default refuses every item.
    fn decode_list_item(&self, item: &[u8]) -> Result<Arc<K>> {
        Err(Error::decode(
            "list item",
            "this decoder reads list bodies whole",
            item,
        ))
    }

    /// The field number of `items` in the protobuf lists this decoder reads, when a protobuf
    /// list body may be decoded as it arrives: cut into its items
    /// (`kinformer_protobuf::ListSplitter`), each read by
    /// [`decode_protobuf_list_item`](Decoder::decode_protobuf_list_item) and dropped, and the
    /// rest (the list with no items) read by [`decode_list`](Decoder::decode_list). `None` (the
    /// default) reads every protobuf list body whole.
    fn protobuf_items_field(&self) -> Option<u32> {
        None
    }

    /// Decodes one item message of a protobuf list (see
    /// [`protobuf_items_field`](Decoder::protobuf_items_field)), with the bytes it decodes
    /// back from where the decoder keeps them.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] when the item is not a `K`; the default refuses every item.
    fn decode_protobuf_list_item(&self, item: &[u8]) -> Result<Incoming<K>> {
        Err(Error::decode(
            "list item",
            "this decoder reads protobuf list bodies whole",
            item,
        ))
    }

    /// Reads only the `continue` token of a list body, so that the next page can be requested
    /// while this one is decoded. `None` (the default) turns that prefetching off.
    fn continue_token(&self, body: &[u8]) -> Option<String> {
        let _ = body;
        None
    }

    /// How a watch body whose `Content-Type` is `content_type` is cut into the frames
    /// [`decode_event`](Decoder::decode_event) reads: lines (JSON, the default) or
    /// length-prefixed frames (protobuf). Each frame is handed on with the framing chosen here,
    /// so the format of a frame is what the response declared, never a guess from its bytes.
    fn framing(&self, content_type: Option<&str>) -> Framing {
        let _ = content_type;
        Framing::Lines
    }

    /// Decodes one frame of a watch stream, cut by `framing` (what
    /// [`framing`](Decoder::framing) chose for the response): a line of JSON, or a protobuf
    /// `WatchEvent`.
    ///
    /// # Errors
    ///
    /// The mapped status of an `ERROR` event (see [`Error::from_status`]), [`Error::WrongKind`]
    /// for an object of another kind, [`Error::Decode`] for anything unreadable.
    fn decode_event(&self, frame: &[u8], framing: Framing) -> Result<WatchEvent<K>>;
}

/// How a watch body is cut into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Framing {
    /// One event a line (JSON).
    Lines,
    /// A big-endian `u32` length before every event (Kubernetes protobuf).
    LengthPrefixed,
}

/// The `apiVersion` and `kind` a decoder expects, for client-go's expected-type check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpectedType {
    /// `apiVersion`, such as `v1` or `apps/v1`.
    pub(crate) api_version: String,
    /// `kind`, such as `Pod`.
    pub(crate) kind: String,
}

impl ExpectedType {
    /// The expectation for `api_version` and `kind`.
    pub(crate) fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.api_version, self.kind)
    }
}

/// Decodes JSON (`application/json`, one event a line for watches).
///
/// With the `simd-json` feature (on by default), objects are decoded with simd-json where it
/// reads the bytes exactly as serde_json does (valid UTF-8, nested less than 128 deep, no `-0`
/// integer), which is about twice as fast, and with serde_json otherwise; errors are
/// serde_json's. On the fast path decimals are rounded to the nearest `f64`, as Go's `strconv`
/// does (serde_json without its `float_roundtrip` feature can be one unit in the last place off).
/// Without the feature, serde_json reads every object.
///
/// With an [`ExpectedType`], watch objects and lists of another kind are refused with
/// [`Error::WrongKind`] before any attempt to decode them as `K`.
pub(crate) struct JsonDecoder<K> {
    expected: Option<ExpectedType>,
    accept: Option<String>,
    watch_accept: Option<String>,
    prepare: Option<fn(&mut K)>,
    _objects: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for JsonDecoder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonDecoder")
            .field("expected", &self.expected)
            .field("accept", &self.accept)
            .field("watch_accept", &self.watch_accept)
            .finish()
    }
}

impl<K> Clone for JsonDecoder<K> {
    fn clone(&self) -> Self {
        Self {
            expected: self.expected.clone(),
            accept: self.accept.clone(),
            watch_accept: self.watch_accept.clone(),
            prepare: self.prepare,
            _objects: PhantomData,
        }
    }
}

impl<K> Default for JsonDecoder<K> {
    fn default() -> Self {
        Self::new(None)
    }
}

impl<K> JsonDecoder<K> {
    /// A decoder that checks kinds against `expected` when given.
    pub(crate) fn new(expected: Option<ExpectedType>) -> Self {
        Self {
            expected,
            accept: None,
            watch_accept: None,
            prepare: None,
            _objects: PhantomData,
        }
    }

    /// Drops `metadata.managedFields` from every object after it is decoded, before it is
    /// shared (so no copy is made, and a relist can still reuse cached objects).
    #[must_use]
    pub(crate) fn drop_managed_fields(self) -> Self
    where
        K: Object,
    {
        self.prepare_with(Some(|object: &mut K| object.drop_managed_fields()))
    }

    /// Runs `prepare` on every object after it is decoded, before it is shared.
    pub(crate) fn prepare_with(mut self, prepare: Option<fn(&mut K)>) -> Self {
        self.prepare = prepare;
        self
    }

    /// Sends `accept` as the `Accept` header of lists, and of watches unless
    /// [`with_watch_accept`](Self::with_watch_accept) says otherwise.
    #[must_use]
    pub(crate) fn with_accept(mut self, accept: impl Into<String>) -> Self {
        self.accept = Some(accept.into());
        self
    }

    /// Sends `accept` as the `Accept` header of watches.
    #[must_use]
    pub(crate) fn with_watch_accept(mut self, accept: impl Into<String>) -> Self {
        self.watch_accept = Some(accept.into());
        self
    }

    fn check_kind(&self, found: &TypeFields<'_>, list: bool) -> Result<()> {
        let (Some(expected), Some(kind)) = (&self.expected, found.kind.as_deref()) else {
            return Ok(());
        };
        let kind_matches = if list {
            kind.strip_suffix("List") == Some(expected.kind.as_str())
        } else {
            kind == expected.kind
        };
        let version_matches = found
            .api_version
            .as_deref()
            .is_none_or(|version| version == expected.api_version);
        if kind_matches && version_matches {
            return Ok(());
        }
        Err(Error::WrongKind {
            expected: expected.describe(),
            found: format!(
                "{}/{kind}",
                found.api_version.as_deref().unwrap_or("<no apiVersion>")
            ),
        })
    }
}

#[derive(Deserialize)]
struct TypeFields<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(flatten, borrow)]
    types: TypeFields<'a>,
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize, Default)]
struct RawListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
    #[serde(rename = "shardInfo", default)]
    shard_info: Option<ShardInfo>,
}

/// `metadata.shardInfo` of a list: the shard selector the server applied.
#[derive(Deserialize, Default)]
pub(crate) struct ShardInfo {
    #[serde(default)]
    pub(crate) selector: String,
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type", borrow)]
    event_type: Cow<'a, str>,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
pub(crate) struct BookmarkObject {
    #[serde(default)]
    pub(crate) metadata: BookmarkMeta,
}

impl BookmarkObject {
    /// The bookmark event: its resourceVersion, and whether it ends a streaming list's initial
    /// events.
    pub(crate) fn into_event<K>(self) -> WatchEvent<K> {
        let initial_events_end = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(INITIAL_EVENTS_END_ANNOTATION))
            .is_some_and(|value| value == "true");
        WatchEvent::Bookmark {
            resource_version: self.metadata.resource_version.unwrap_or_default(),
            initial_events_end,
        }
    }
}

#[derive(Deserialize, Default)]
pub(crate) struct BookmarkMeta {
    #[serde(rename = "resourceVersion", default)]
    pub(crate) resource_version: Option<String>,
    #[serde(default)]
    pub(crate) annotations: Option<BTreeMap<String, String>>,
}

impl<K> JsonDecoder<K>
where
    K: DeserializeOwned,
{
    fn decode_object(&self, raw: &RawValue, what: &'static str) -> Result<Arc<K>> {
        self.decode_object_bytes(raw.get().as_bytes(), what)
    }

    /// `raw` parsed as a `K` and passed through the `prepare` hook.
    fn parse_object(&self, raw: &[u8]) -> serde_json::Result<Arc<K>> {
        let mut object = fast_json::from_slice::<K>(raw)?;
        if let Some(prepare) = self.prepare {
            prepare(&mut object);
        }
        Ok(Arc::new(object))
    }

    fn decode_object_bytes(&self, raw: &[u8], what: &'static str) -> Result<Arc<K>> {
        self.parse_object(raw).or_else(|error| {
            // A typed struct refuses a foreign kind inside serde; say so in kind terms.
            if let Ok(types) = serde_json::from_slice::<TypeFields<'_>>(raw) {
                self.check_kind(&types, false)?;
            }
            Err(Error::decode(what, error.to_string(), raw))
        })
    }
}

impl<K> JsonDecoder<K>
where
    K: DeserializeOwned,
{
    /// An added, modified or deleted object's event decoded in one pass over its object, when
    /// `line` has the API server's shape (see [`json_event`]); `None` for anything else, and for
    /// anything that fails, which the generic path then reads and reports.
    fn decode_object_event(&self, line: &[u8]) -> Option<Result<WatchEvent<K>>> {
        let (event_type, object) = json_event::split(line)?;
        let event: fn(Arc<K>) -> WatchEvent<K> = match event_type {
            "ADDED" => |object| WatchEvent::Added(object.into()),
            "MODIFIED" => |object| WatchEvent::Modified(object.into()),
            "DELETED" => WatchEvent::Deleted,
            _ => return None,
        };
        if self.expected.is_some()
            && let Err(wrong) = self.check_kind(&json_event::leading_type_fields(object)?, false)
        {
            return Some(Err(wrong));
        }
        Some(Ok(event(self.parse_object(object).ok()?)))
    }
}

impl<K> Decoder<K> for JsonDecoder<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    fn accept(&self) -> Option<&str> {
        self.accept.as_deref()
    }

    fn watch_accept(&self) -> Option<&str> {
        self.watch_accept.as_deref().or(self.accept.as_deref())
    }

    fn continue_token(&self, body: &[u8]) -> Option<String> {
        #[derive(Deserialize)]
        struct MetadataOnly {
            #[serde(default)]
            metadata: RawListMeta,
        }
        let list: MetadataOnly = serde_json::from_slice(body).ok()?;
        list.metadata
            .continue_token
            .filter(|token| !token.is_empty())
    }

    fn decodes_json_items(&self) -> bool {
        true
    }

    fn decode_list_item(&self, item: &[u8]) -> Result<Arc<K>> {
        self.decode_object_bytes(item, "list item")
    }

    fn decode_list(&self, body: &[u8]) -> Result<(ListPage, Vec<Incoming<K>>)> {
        let list: RawList<'_> = serde_json::from_slice(body)
            .map_err(|error| Error::decode("list", error.to_string(), body))?;
        self.check_kind(&list.types, true)?;
        let items = decode_items(&list.items.unwrap_or_default(), PARALLEL_ITEMS, |raw| {
            self.decode_object(raw, "list item").map(Incoming::from)
        })?;
        let page = ListPage {
            resource_version: list.metadata.resource_version.unwrap_or_default(),
            continue_token: list
                .metadata
                .continue_token
                .filter(|token| !token.is_empty()),
            shard_selector: list.metadata.shard_info.map(|info| info.selector),
        };
        Ok((page, items))
    }

    fn decode_event(&self, line: &[u8], _framing: Framing) -> Result<WatchEvent<K>> {
        if let Some(event) = self.decode_object_event(line) {
            return event;
        }
        let event: RawEvent<'_> = serde_json::from_slice(line)
            .map_err(|error| Error::decode("watch event", error.to_string(), line))?;
        let object = event.object;
        let decode = |what| -> Result<Arc<K>> {
            if self.expected.is_some() {
                let types: TypeFields<'_> =
                    serde_json::from_str(object.get()).map_err(|error| {
                        Error::decode(what, error.to_string(), object.get().as_bytes())
                    })?;
                self.check_kind(&types, false)?;
            }
            self.decode_object(object, what)
        };
        match event.event_type.as_ref() {
            "ADDED" => Ok(WatchEvent::Added(decode("ADDED object")?.into())),
            "MODIFIED" => Ok(WatchEvent::Modified(decode("MODIFIED object")?.into())),
            "DELETED" => Ok(WatchEvent::Deleted(decode("DELETED object")?)),
            "BOOKMARK" => {
                let bookmark: BookmarkObject =
                    serde_json::from_str(object.get()).map_err(|error| {
                        Error::decode("bookmark", error.to_string(), object.get().as_bytes())
                    })?;
                Ok(bookmark.into_event())
            }
            "ERROR" => {
                let types: TypeFields<'_> =
                    serde_json::from_str(object.get()).map_err(|error| {
                        Error::decode("ERROR event", error.to_string(), object.get().as_bytes())
                    })?;
                if types.kind.as_deref().is_some_and(|kind| kind != "Status") {
                    return Err(not_a_status(object.get().as_bytes()));
                }
                let status: kube_core::Status =
                    serde_json::from_str(object.get()).map_err(|error| {
                        Error::decode("ERROR status", error.to_string(), object.get().as_bytes())
                    })?;
                Err(Error::from_status(&status, None))
            }
            other => Err(Error::decode(
                "watch event",
                format!("unknown event type {other:?}"),
                line,
            )),
        }
    }
}

/// The error for an `ERROR` watch event whose object is not a `Status`.
pub(crate) fn not_a_status(object: &[u8]) -> Error {
    Error::decode(
        "ERROR event",
        "its object is not a Status, as an ERROR event's must be",
        object,
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    fn pod_decoder() -> JsonDecoder<Pod> {
        JsonDecoder::new(Some(ExpectedType::new("v1", "Pod")))
    }

    #[test]
    fn a_list_page_decodes_with_its_resource_version_and_continue_token() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12","continue":"abc"},
            "items":[{"metadata":{"name":"a","namespace":"ns","resourceVersion":"7"}},{"metadata":{"name":"b"}}]}"#;
        let (page, items) = pod_decoder().decode_list(body).expect("valid list");
        assert_eq!(page.resource_version, "12");
        assert_eq!(page.continue_token.as_deref(), Some("abc"));
        let names: Vec<_> = items
            .iter()
            .map(|pod| pod.object().metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn an_empty_continue_token_means_the_last_page() {
        let body = br#"{"metadata":{"resourceVersion":"3","continue":""},"items":null}"#;
        let (page, items) = pod_decoder().decode_list(body).expect("valid list");
        assert!(items.is_empty());
        assert_eq!(page.continue_token, None);
    }

    #[test]
    fn a_list_of_another_kind_is_a_wrong_kind_error() {
        let body = br#"{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[]}"#;
        let error = pod_decoder().decode_list(body).expect_err("wrong kind");
        assert!(matches!(error, Error::WrongKind { ref found, .. } if found == "v1/ServiceList"));
    }

    #[test]
    fn a_watch_object_of_another_kind_is_a_wrong_kind_error() {
        let line = br#"{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"x"}}}"#;
        let error = pod_decoder()
            .decode_event(line, Framing::Lines)
            .expect_err("wrong kind");
        assert!(matches!(error, Error::WrongKind { .. }), "{error}");
    }

    #[test]
    fn a_line_in_the_api_servers_shape_decodes_as_any_other_shape_does() {
        let pod = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","resourceVersion":"7"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#;
        let fast = format!(r#"{{"type":"MODIFIED","object":{pod}}}"#);
        assert!(
            json_event::split(fast.as_bytes()).is_some(),
            "the fast shape"
        );
        let generic = format!(r#"{{ "object": {pod}, "type": "MODIFIED" }}"#);
        let decoded = |line: &str| match pod_decoder().decode_event(line.as_bytes(), Framing::Lines)
        {
            Ok(WatchEvent::Modified(pod)) => pod.into_parts().0,
            other => panic!("{other:?}"),
        };
        assert_eq!(decoded(&fast), decoded(&generic));
        assert_eq!(decoded(&fast).metadata.name.as_deref(), Some("web"));

        // A foreign kind is refused either way, leading or not.
        let secret = r#"{"metadata":{"name":"x"},"kind":"Secret","apiVersion":"v1"}"#;
        for object in [
            secret,
            r#"{"kind":"Secret","apiVersion":"v1","metadata":{}}"#,
        ] {
            let line = format!(r#"{{"type":"ADDED","object":{object}}}"#);
            let error = pod_decoder()
                .decode_event(line.as_bytes(), Framing::Lines)
                .expect_err("wrong kind");
            assert!(matches!(error, Error::WrongKind { .. }), "{error}");
        }
        // A field after the object fails the fast reading and is read the generic way.
        let trailing = format!(r#"{{"type":"ADDED","object":{pod},"extra":1}}"#);
        assert!(matches!(
            pod_decoder().decode_event(trailing.as_bytes(), Framing::Lines),
            Ok(WatchEvent::Added(_))
        ));
    }

    #[test]
    fn a_garbage_line_is_a_decode_error_that_gives_its_size_not_its_bytes() {
        let line = vec![b'x'; 10_000];
        let error = pod_decoder()
            .decode_event(&line, Framing::Lines)
            .expect_err("garbage");
        match &error {
            Error::Decode {
                what, size, object, ..
            } => {
                assert_eq!(*what, "watch event");
                assert_eq!(*size, 10_000);
                assert_eq!(*object, None);
            }
            other => panic!("expected a decode error, got {other}"),
        }
        assert!(!error.to_string().contains("xxx"), "{error}");
    }

    /// An ERROR event must carry a Status; anything else is reported by what it is, not as
    /// an empty API error, and without its contents.
    #[test]
    fn an_error_event_carrying_something_else_than_a_status_says_what_it_carried() {
        let line = br#"{"type":"ERROR","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db","namespace":"prod"},"data":{"password":"aHVudGVyMg=="}}}"#;
        let error = pod_decoder()
            .decode_event(line, Framing::Lines)
            .expect_err("not a status");
        let message = error.to_string();
        assert!(matches!(error, Error::Decode { .. }), "{message}");
        assert!(message.contains("v1/Secret prod/db"), "{message}");
        assert!(message.contains("not a Status"), "{message}");
        assert!(!message.contains("aHVudGVyMg"), "{message}");
    }

    #[test]
    fn an_error_event_with_410_maps_to_expired() {
        let line = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        let error = pod_decoder()
            .decode_event(line, Framing::Lines)
            .expect_err("expired");
        assert!(error.is_resource_version_unavailable(), "{error}");
    }

    #[test]
    fn the_initial_events_end_bookmark_is_recognised() {
        let line = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        match pod_decoder()
            .decode_event(line, Framing::Lines)
            .expect("bookmark")
        {
            WatchEvent::Bookmark {
                resource_version,
                initial_events_end,
            } => {
                assert_eq!(resource_version, "9");
                assert!(initial_events_end);
            }
            other => panic!("expected a bookmark, got {other:?}"),
        }
    }
}
