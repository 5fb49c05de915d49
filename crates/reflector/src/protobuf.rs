//! [`KubeDecoder`]: protobuf for built-in kinds, JSON for the rest and as the fallback.

use std::{
    fmt,
    sync::{Arc, OnceLock},
};

use bytes::Bytes;
use kinformer_protobuf::Decoder as ProtobufDecoder;
use kinformer_protobuf::{
    DecodeOptions, Envelope, ListSplitter, Message, WatchFrame, without_managed_fields,
};
use kinformer_store::{Encoded, Incoming, Object};
use kube_core::{PartialObjectMeta, Resource};
use serde::de::DeserializeOwned;

use crate::{
    Decoder, Error, ExpectedType, JsonDecoder, ListPage, Result, WatchEvent,
    arriving::Splitter,
    decoder::{BookmarkObject, Framing, PARALLEL_ITEMS, decode_items},
};

/// The media type of the [`Encoded`] bytes a protobuf watch keeps: an object's message alone,
/// the `raw` of the `runtime.Unknown` around it, without the `k8s\0` envelope.
pub(crate) const PROTOBUF_RAW: &str = "application/vnd.kubernetes.protobuf;raw";

const PROTOBUF_ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// What client-go's metadata client sends for lists: protobuf, then JSON, of the metadata
/// only, then whole objects in JSON from a server that cannot make `PartialObjectMetadata`.
const METADATA_LIST_PROTOBUF_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
     application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA_WATCH_PROTOBUF_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,\
     application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const METADATA_LIST_JSON_ACCEPT: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA_WATCH_JSON_ACCEPT: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

const METADATA_API_VERSION: &str = "meta.k8s.io/v1";
const METADATA_KIND: &str = "PartialObjectMetadata";

/// The environment variable [`WireFormat::from_env`] reads: `json` or `protobuf`. Like
/// client-go's `KUBE_FEATURE_*` gates for its content type, it is a switch for running a whole
/// test suite in either format and for emergencies, not a configuration API; nothing reads it
/// unless the program calls `from_env`.
pub const WIRE_FORMAT_ENV: &str = "KINFORMER_WIRE_FORMAT";

/// What a [`KubeListerWatcher`](crate::KubeListerWatcher) asks the server for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// Protobuf when the kind has a protobuf form (every built-in kind), with JSON as the
    /// fallback the server may answer with; JSON for the rest (custom resources).
    Protobuf,
    /// JSON only.
    Json,
}

impl Default for WireFormat {
    /// [`WireFormat::Protobuf`], as client-go's typed clients since 1.32.
    fn default() -> Self {
        WireFormat::Protobuf
    }
}

impl WireFormat {
    /// The format [`WIRE_FORMAT_ENV`] names (`json` or `protobuf`), else the default: for a
    /// program (or a test run) that wants the choice in its environment, as client-go's env
    /// gates do. Nothing in kinformer reads the variable unless this is called.
    pub fn from_env() -> Self {
        match std::env::var(WIRE_FORMAT_ENV).as_deref() {
            Ok("json") => WireFormat::Json,
            Ok("protobuf") | Err(_) => WireFormat::Protobuf,
            Ok(other) => {
                tracing::warn!(
                    value = other,
                    "{WIRE_FORMAT_ENV} is neither json nor protobuf; using protobuf"
                );
                WireFormat::Protobuf
            }
        }
    }
}

/// The decoder [`KubeListerWatcher::new`](crate::KubeListerWatcher::new) uses: it asks for
/// protobuf for built-in kinds (what client-go does since 1.32 for its typed clients), decodes
/// whichever format the response carries, and can drop `managedFields` while decoding.
///
/// Protobuf decodes straight into `K` (see `kinformer_protobuf`): a k8s-openapi kind through
/// its generated decoder, a slim projection of one (naming only the fields it needs, the rest
/// skipped on the wire) or any other type through serde.
pub(crate) struct KubeDecoder<K> {
    json: JsonDecoder<K>,
    expected: ExpectedType,
    protobuf: bool,
    /// Never asks for protobuf, whatever format is asked for: dynamic objects, whose protobuf
    /// form (where the kind has one) the serde path does not read as `DynamicObject`.
    json_only: bool,
    /// `K`'s protobuf decoder, looked up at the first decode.
    typed: OnceLock<ProtobufDecoder<K>>,
    /// The `Accept` headers of lists and watches when asking for protobuf.
    protobuf_accept: (&'static str, &'static str),
    /// The field number of a protobuf list's items and their message, when asking for
    /// protobuf.
    protobuf_items: Option<(u32, &'static Message)>,
    options: DecodeOptions,
}

impl<K> Clone for KubeDecoder<K> {
    fn clone(&self) -> Self {
        Self {
            json: self.json.clone(),
            expected: self.expected.clone(),
            protobuf: self.protobuf,
            json_only: self.json_only,
            typed: self.typed.clone(),
            protobuf_accept: self.protobuf_accept,
            protobuf_items: self.protobuf_items,
            options: self.options,
        }
    }
}

impl<K> fmt::Debug for KubeDecoder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeDecoder")
            .field("expected", &self.expected)
            .field("protobuf", &self.protobuf)
            .field("options", &self.options)
            .finish()
    }
}

impl<K> KubeDecoder<K> {
    /// A decoder for objects of `expected` kind, asking for `format`.
    pub(crate) fn new(expected: ExpectedType, format: WireFormat) -> Self {
        Self {
            json: JsonDecoder::new(Some(expected.clone())),
            expected,
            protobuf: false,
            json_only: false,
            typed: OnceLock::new(),
            protobuf_accept: (PROTOBUF_ACCEPT, PROTOBUF_ACCEPT),
            protobuf_items: None,
            options: DecodeOptions::default(),
        }
        .format(format)
    }

    /// Asks for `format` from now on (protobuf only where the kind has a protobuf form).
    #[must_use]
    pub(crate) fn format(mut self, format: WireFormat) -> Self {
        let has_protobuf =
            kinformer_protobuf::message_for(&self.expected.api_version, &self.expected.kind)
                .is_some();
        self.protobuf = !self.json_only && has_protobuf && format == WireFormat::Protobuf;
        self.protobuf_items = self
            .protobuf
            .then(|| {
                let list = kinformer_protobuf::message_for(
                    &self.expected.api_version,
                    &format!("{}List", self.expected.kind),
                )?;
                Some((list.field_number("items")?, list.field_message("items")?))
            })
            .flatten();
        self
    }

    /// A decoder for objects of `expected` kind that always asks for JSON.
    pub(crate) fn json_only(expected: ExpectedType) -> Self {
        let mut decoder = Self::new(expected, WireFormat::Json);
        decoder.json_only = true;
        decoder
    }

    /// A decoder for the typed resource `R` (whose kind `K` may be a projection of).
    pub(crate) fn for_resource<R: Resource<DynamicType = ()>>(format: WireFormat) -> Self {
        Self::new(ExpectedType::new(R::api_version(&()), R::kind(&())), format)
    }

    /// Whether this decoder asks for protobuf.
    #[cfg(test)]
    pub(crate) fn asks_for_protobuf(&self) -> bool {
        self.protobuf
    }

    fn check_kind(&self, envelope: &Envelope<'_>, list: bool) -> Result<()> {
        let kind_matches = if list {
            envelope.kind.strip_suffix("List") == Some(self.expected.kind.as_str())
        } else {
            envelope.kind == self.expected.kind
        };
        if kind_matches && envelope.api_version == self.expected.api_version {
            return Ok(());
        }
        Err(Error::WrongKind {
            expected: format!("{}/{}", self.expected.api_version, self.expected.kind),
            found: format!("{}/{}", envelope.api_version, envelope.kind),
        })
    }
}

impl<K> KubeDecoder<PartialObjectMeta<K>> {
    /// A decoder for the metadata of `K` only, as client-go's metadata client asks for it:
    /// `PartialObjectMetadata` lists and watches, in protobuf for any kind (the server builds
    /// the `PartialObjectMetadata` from custom resources too) unless `format` says JSON. Each
    /// object reads `meta.k8s.io/v1` `PartialObjectMetadata` as its type from either format.
    pub(crate) fn metadata(format: WireFormat) -> Self {
        let expected = ExpectedType::new(METADATA_API_VERSION, METADATA_KIND);
        let json = JsonDecoder::new(Some(expected.clone()))
            .with_accept(METADATA_LIST_JSON_ACCEPT)
            .with_watch_accept(METADATA_WATCH_JSON_ACCEPT);
        KubeDecoder {
            json,
            expected,
            protobuf: false,
            json_only: false,
            typed: OnceLock::new(),
            protobuf_accept: (
                METADATA_LIST_PROTOBUF_ACCEPT,
                METADATA_WATCH_PROTOBUF_ACCEPT,
            ),
            protobuf_items: None,
            options: DecodeOptions::default().with_type_meta(METADATA_API_VERSION, METADATA_KIND),
        }
        .format(format)
    }
}

/// A protobuf list body cut into its items as it arrives ([`ListSplitter`]).
#[derive(Debug)]
pub(crate) struct ProtobufSplitter(ListSplitter);

impl ProtobufSplitter {
    pub(crate) fn new(items_field: u32) -> Self {
        Self(ListSplitter::new(items_field))
    }
}

impl Splitter for ProtobufSplitter {
    type Item = Bytes;

    fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        self.0
            .feed(chunk)
            .map_err(|error| protobuf_error("list", &error, chunk))
    }

    fn head_before_items(&self) -> Option<Vec<u8>> {
        self.0.head_before_items()
    }

    fn take_items(&mut self) -> Vec<Bytes> {
        self.0.take_items()
    }

    fn finish(self) -> Result<Vec<u8>> {
        self.0
            .finish()
            .map_err(|error| protobuf_error("list", &error, &[]))
    }
}

fn protobuf_error(what: &'static str, error: &kinformer_protobuf::Error, bytes: &[u8]) -> Error {
    Error::decode(what, format!("protobuf: {error}"), bytes)
}

fn envelope<'a>(what: &'static str, body: &'a [u8]) -> Result<Envelope<'a>> {
    Envelope::parse(body).map_err(|error| protobuf_error(what, &error, body))
}

/// `metadata` of a protobuf list: `ListMeta` is field 1 of every `...List` message, with
/// `resourceVersion` = 2 and `continue` = 3.
#[derive(serde::Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
    #[serde(rename = "shardInfo", default)]
    shard_info: Option<crate::decoder::ShardInfo>,
}

#[derive(serde::Deserialize)]
struct ListOnlyMeta {
    #[serde(default)]
    metadata: ListMeta,
}

impl<K: Object> KubeDecoder<K> {
    /// Drops `metadata.managedFields`: skipped on the wire in protobuf (never decoded), cleared
    /// before the object is shared when the server answers JSON (a projection that does not
    /// name them has nothing to clear).
    #[must_use]
    pub(crate) fn drop_managed_fields(mut self) -> Self {
        self.options = self.options.drop_managed_fields();
        self.json = self.json.drop_managed_fields();
        self
    }
}

impl<K> KubeDecoder<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    fn typed(&self) -> &ProtobufDecoder<K> {
        self.typed.get_or_init(ProtobufDecoder::new)
    }

    fn decode_protobuf_list(&self, body: &[u8]) -> Result<(ListPage, Vec<Incoming<K>>)> {
        let list = envelope("list", body)?;
        self.check_kind(&list, true)?;
        let message = list
            .message()
            .map_err(|error| protobuf_error("list", &error, body))?;
        let items = kinformer_protobuf::list_items(list.raw, message)
            .map_err(|error| protobuf_error("list", &error, body))?;
        // The items are skipped, not decoded, by this pass.
        let ListOnlyMeta { metadata } = list
            .decode(DecodeOptions::default())
            .map_err(|error| protobuf_error("list metadata", &error, body))?;
        let decode_item = |item: &&[u8]| self.decode_item(item, items.message);
        let decoded = decode_items(&items.bytes, PARALLEL_ITEMS, decode_item)?;
        let page = ListPage {
            resource_version: metadata.resource_version.unwrap_or_default(),
            continue_token: metadata.continue_token.filter(|token| !token.is_empty()),
            shard_selector: metadata.shard_info.map(|info| info.selector),
        };
        Ok((page, decoded))
    }

    /// Decodes one item message of a list, with the bytes it decodes back from where this
    /// decoder can keep them.
    fn decode_item(&self, item: &[u8], message: &'static Message) -> Result<Incoming<K>> {
        let object = self
            .typed()
            .decode(item, message, self.options)
            .map(Arc::new)
            .map_err(|error| protobuf_error("list item", &error, item))?;
        Ok(Incoming::new(object, self.encoded(item, || Some(message))))
    }

    /// The message `object` holds, as bytes that decode back to exactly what this decoder
    /// made of it (see [`encoded`](Self::encoded)).
    fn wire_of(&self, object: &Envelope<'_>) -> Option<Encoded> {
        self.encoded(object.raw, || object.message().ok())
    }

    /// `raw`, a message of `message`'s type, as bytes that decode back to exactly what this
    /// decoder made of it: the message itself when the generated decoder kept everything, the
    /// message without managedFields when it dropped only those, none otherwise (a
    /// projection, type fields presented). Copied to a buffer of its own: a slice of the body
    /// would keep the read buffer it sits in alive for as long as a cache holds the object.
    fn encoded(
        &self,
        raw: &[u8],
        message: impl FnOnce() -> Option<&'static Message>,
    ) -> Option<Encoded> {
        if !self.typed().is_generated() {
            return None;
        }
        let bytes: Arc<[u8]> = if self.options == DecodeOptions::default() {
            Arc::from(raw)
        } else if self.options == DecodeOptions::default().drop_managed_fields() {
            without_managed_fields(raw, message()?).ok()??.into()
        } else {
            return None;
        };
        Some(Encoded::new(PROTOBUF_RAW, bytes))
    }

    /// Decodes one protobuf watch frame; an added or modified object comes with its message
    /// ([`wire_of`](Self::wire_of)).
    fn decode_protobuf_event(&self, frame: &[u8]) -> Result<WatchEvent<K>> {
        let event = WatchFrame::parse(frame)
            .map_err(|error| protobuf_error("watch event", &error, frame))?;
        let object = envelope("watch object", event.object)?;
        let decode = |what| -> Result<Arc<K>> {
            self.check_kind(&object, false)?;
            self.typed()
                .decode_envelope(&object, self.options)
                .map(Arc::new)
                .map_err(|error| protobuf_error(what, &error, event.object))
        };
        let incoming = |what| -> Result<Incoming<K>> {
            Ok(Incoming::new(decode(what)?, self.wire_of(&object)))
        };
        match event.event_type {
            "ADDED" => Ok(WatchEvent::Added(incoming("ADDED object")?)),
            "MODIFIED" => Ok(WatchEvent::Modified(incoming("MODIFIED object")?)),
            "DELETED" => Ok(WatchEvent::Deleted(decode("DELETED object")?)),
            "BOOKMARK" => {
                let bookmark: BookmarkObject = object
                    .decode(DecodeOptions::default().drop_managed_fields())
                    .map_err(|error| protobuf_error("bookmark", &error, event.object))?;
                Ok(bookmark.into_event())
            }
            "ERROR" => {
                if (object.api_version, object.kind) != ("v1", "Status") {
                    return Err(crate::decoder::not_a_status(event.object));
                }
                let status: kube_core::Status = kinformer_protobuf::from_message(
                    object.raw,
                    &kinformer_protobuf::messages::STATUS,
                    DecodeOptions::default(),
                )
                .map_err(|error| protobuf_error("ERROR status", &error, event.object))?;
                Err(Error::from_status(&status, None))
            }
            other => Err(Error::decode(
                "watch event",
                format!("unknown event type {other:?}"),
                frame,
            )),
        }
    }
}

impl<K> Decoder<K> for KubeDecoder<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    fn accept(&self) -> Option<&str> {
        if self.protobuf {
            Some(self.protobuf_accept.0)
        } else {
            self.json.accept()
        }
    }

    fn watch_accept(&self) -> Option<&str> {
        if self.protobuf {
            Some(self.protobuf_accept.1)
        } else {
            self.json.watch_accept()
        }
    }

    fn framing(&self, content_type: Option<&str>) -> Framing {
        if self.protobuf
            && content_type.is_some_and(|value| value.starts_with(kinformer_protobuf::CONTENT_TYPE))
        {
            Framing::LengthPrefixed
        } else {
            Framing::Lines
        }
    }

    fn continue_token(&self, body: &[u8]) -> Option<String> {
        if !body.starts_with(kinformer_protobuf::MAGIC) {
            return self.json.continue_token(body);
        }
        let list = Envelope::parse(body).ok()?;
        let ListOnlyMeta { metadata } = list.decode(DecodeOptions::default()).ok()?;
        metadata.continue_token.filter(|token| !token.is_empty())
    }

    fn decode_list(&self, body: &[u8]) -> Result<(ListPage, Vec<Incoming<K>>)> {
        if body.starts_with(kinformer_protobuf::MAGIC) {
            self.decode_protobuf_list(body)
        } else {
            self.json.decode_list(body)
        }
    }

    fn decodes_json_items(&self) -> bool {
        self.json.decodes_json_items()
    }

    fn decode_list_item(&self, item: &[u8]) -> Result<Arc<K>> {
        self.json.decode_list_item(item)
    }

    fn protobuf_items_field(&self) -> Option<u32> {
        self.protobuf_items.map(|(field, _)| field)
    }

    fn decode_protobuf_list_item(&self, item: &[u8]) -> Result<Incoming<K>> {
        let Some((_, message)) = self.protobuf_items else {
            return Err(Error::decode(
                "list item",
                "this decoder does not ask for protobuf",
                item,
            ));
        };
        self.decode_item(item, message)
    }

    fn decode_event(&self, frame: &[u8], framing: Framing) -> Result<WatchEvent<K>> {
        match framing {
            Framing::LengthPrefixed => self.decode_protobuf_event(frame),
            _ => self.json.decode_event(frame, framing),
        }
    }
}

#[cfg(test)]
mod tests;
