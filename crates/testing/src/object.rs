//! One stored object state: its JSON as kube-apiserver sends it, encoded once, the metadata
//! fields every request reads, and its protobuf form once a client asked for one.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kinformer_protobuf::{DecodeOptions, Message};
use serde_json::Value;

use crate::restamp::{restamp, restamp_protobuf};
use crate::status::ApiError;

/// One stored object state: its JSON, encoded once so lists and watches copy bytes, plus the
/// few metadata fields every request reads. The full tree is parsed again only for writes and
/// non-metadata field selectors, which keeps a cached 6 KB Pod near 6 KB of memory.
///
/// The protobuf form is encoded on the first protobuf request for this state and kept, so a
/// protobuf list or watch copies bytes as well; a server nobody asks for protobuf never pays
/// for it.
#[derive(Debug)]
pub(crate) struct Obj {
    /// The object as kube-apiserver sends it alone: `apiVersion` and `kind` first.
    pub(crate) json: Bytes,
    /// Where the object's JSON resumes after `apiVersion` and `kind`, so a typed list item
    /// (which kube-apiserver sends without them) is `{` plus `json[untyped_from..]`, no re-encoding.
    untyped_from: Option<usize>,
    /// The protobuf form, once a protobuf request asked for it; see [`Obj::protobuf`].
    protobuf: OnceLock<Encoded>,
    pub(crate) api_version: String,
    pub(crate) name: String,
    pub(crate) namespace: Option<String>,
    pub(crate) uid: Option<String>,
    pub(crate) rv: u64,
    pub(crate) labels: Option<serde_json::Map<String, Value>>,
}

impl Obj {
    /// Stores `value` as kube-apiserver would hold it (see [`as_go_holds_it`]).
    pub(crate) fn new(value: &Value) -> Arc<Self> {
        match as_go_holds_it(value) {
            Some(as_go) => Self::held(&as_go),
            None => Self::held(value),
        }
    }

    /// Stores `value` as it is: a state already in the form [`Obj::new`] gives it (an earlier
    /// state with its resourceVersion or an annotation changed).
    fn held(value: &Value) -> Arc<Self> {
        let (json, untyped_from) = encode_type_meta_first(value);
        let meta = |field: &str| value.get("metadata").and_then(|m| m.get(field));
        Arc::new(Self {
            json: Bytes::from(json),
            untyped_from,
            protobuf: OnceLock::new(),
            api_version: value["apiVersion"].as_str().unwrap_or_default().to_owned(),
            name: meta("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            namespace: meta("namespace").and_then(Value::as_str).map(str::to_owned),
            uid: meta("uid").and_then(Value::as_str).map(str::to_owned),
            rv: meta("resourceVersion")
                .and_then(Value::as_str)
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(0),
            labels: meta("labels").and_then(Value::as_object).cloned(),
        })
    }

    /// The same object at revision `rv`, with the annotation `(key, value)` set when given.
    ///
    /// Deletions and the bench updates change nothing else, so the stored JSON is edited in
    /// place (see `restamp`) instead of being parsed and encoded again, and so is the protobuf
    /// form when this state has one.
    pub(crate) fn restamped(&self, rv: u64, annotation: Option<(&str, &str)>) -> Arc<Self> {
        let keep_before = self.untyped_from.unwrap_or(0);
        if let Some(json) = restamp(&self.json, keep_before, rv, annotation) {
            let protobuf = self
                .protobuf
                .get()
                .and_then(|encoded| {
                    let bytes = encoded.bytes.as_ref().ok()?;
                    let restamped = restamp_protobuf(bytes, rv, annotation)?;
                    Some(OnceLock::from(Encoded {
                        message: encoded.message,
                        bytes: Ok(Bytes::from(restamped)),
                    }))
                })
                .unwrap_or_default();
            return Arc::new(Self {
                json: Bytes::from(json),
                untyped_from: self.untyped_from,
                protobuf,
                api_version: self.api_version.clone(),
                name: self.name.clone(),
                namespace: self.namespace.clone(),
                uid: self.uid.clone(),
                rv,
                labels: self.labels.clone(),
            });
        }
        let mut value = self.value();
        set_resource_version(&mut value, rv);
        if let Some((key, text)) = annotation
            && let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut)
        {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if !annotations.is_object() {
                *annotations = Value::Object(serde_json::Map::new());
            }
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert(key.to_owned(), Value::String(text.to_owned()));
            }
        }
        Obj::held(&value)
    }

    /// The whole object, parsed from its stored JSON.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// The object's `metadata` as it is stored, found without building the rest of the tree
    /// (a metadata-only list of 100k Pods would otherwise parse every spec and status).
    fn raw_metadata(&self) -> Option<&serde_json::value::RawValue> {
        #[derive(serde::Deserialize)]
        struct MetadataOnly<'a> {
            #[serde(borrow)]
            metadata: Option<&'a serde_json::value::RawValue>,
        }
        serde_json::from_slice::<MetadataOnly<'_>>(&self.json)
            .ok()
            .and_then(|object| object.metadata)
    }

    /// `{"metadata": ...}` alone, parsed: what a `PartialObjectMetadata` message holds.
    fn metadata_value(&self) -> Value {
        let metadata = self
            .raw_metadata()
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        Value::Object([("metadata".to_owned(), metadata)].into_iter().collect())
    }

    /// The object as a `meta.k8s.io/v1` `PartialObjectMetadata`, in JSON: its stored metadata
    /// bytes, copied.
    pub(crate) fn metadata_json(&self) -> Bytes {
        const HEAD: &[u8] =
            br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;
        let metadata = self.raw_metadata().map_or("{}", |raw| raw.get());
        let mut json = Vec::with_capacity(HEAD.len() + metadata.len() + 1);
        json.extend_from_slice(HEAD);
        json.extend_from_slice(metadata.as_bytes());
        json.push(b'}');
        Bytes::from(json)
    }

    /// The object as the protobuf `message` (no envelope), encoded from its JSON on the first
    /// call and kept.
    ///
    /// `message` is the table of the kind the object is served as. Every built-in is served
    /// at one version, so that is always the same table; should a test serve one resource at
    /// two protobuf versions, the other version is encoded on every call rather than cached.
    /// A metadata-only answer (`PartialObjectMetadata`) is encoded afresh too, from the
    /// metadata alone, as its JSON is, so it never takes the slot of the whole object's
    /// encoding.
    ///
    /// # Errors
    ///
    /// A 500 `InternalError` when the stored JSON does not fit the message (a test stored a
    /// value of the wrong type, which kube-apiserver's validation would have refused).
    pub(crate) fn protobuf(&self, message: &'static Message) -> Result<Bytes, ApiError> {
        let uncached;
        let encoded = if std::ptr::eq(
            message,
            &kinformer_protobuf::messages::PARTIAL_OBJECT_METADATA,
        ) {
            uncached = Encoded::new(&self.metadata_value(), message);
            &uncached
        } else {
            let cached = self
                .protobuf
                .get_or_init(|| Encoded::new(&self.value(), message));
            if std::ptr::eq(cached.message, message) {
                cached
            } else {
                uncached = Encoded::new(&self.value(), message);
                &uncached
            }
        };
        encoded.bytes.clone().map_err(|error| {
            ApiError::new(
                500,
                "InternalError",
                format!(
                    "Internal error occurred: unable to encode {} as {}: {error}",
                    object_key(self.namespace.as_deref(), &self.name),
                    message.name()
                ),
            )
        })
    }

    /// The object's JSON without `apiVersion` and `kind`, as two pieces to write one after the
    /// other: what a typed list of a built-in carries per item.
    pub(crate) fn untyped_json(&self) -> (&'static [u8], Bytes) {
        match self.untyped_from {
            Some(from) => (b"{", self.json.slice(from..)),
            None => (b"", self.json.clone()),
        }
    }
}

/// A built-in object as kube-apiserver holds it once decoded into its Go struct, so its JSON and
/// its protobuf say the same: keys the struct lacks dropped, and the value fields JSON left out
/// present as Go's JSON encoder writes them (`{}` for a struct, `null` for a zero time, the
/// zero of a field without `omitempty`). `None` for a kind with no protobuf table, or an
/// object that does not fit its table (its protobuf form then reports why).
///
/// Go's protobuf encoder writes every value field, and reading those bytes gives Go's JSON, so
/// the round trip through kinformer-protobuf (held to Go's bytes by its differential tests)
/// is the normalization.
pub(crate) fn as_go_holds_it(value: &Value) -> Option<Value> {
    let text = |key: &str| value.get(key).and_then(Value::as_str);
    let (api_version, kind) = (text("apiVersion")?, text("kind")?);
    let message = kinformer_protobuf::message_for(api_version, kind)?;
    let bytes = kinformer_protobuf::encode_message(value, message).ok()?;
    let mut go: Value =
        kinformer_protobuf::from_message(&bytes, message, DecodeOptions::default()).ok()?;
    let fields = go.as_object_mut()?;
    fields.insert("apiVersion".to_owned(), Value::from(api_version));
    fields.insert("kind".to_owned(), Value::from(kind));
    Some(go)
}

/// An object's protobuf form: the message it was encoded as and the bytes (no envelope), or
/// why the JSON does not fit that message.
#[derive(Debug, Clone)]
struct Encoded {
    message: &'static Message,
    bytes: Result<Bytes, Box<str>>,
}

impl Encoded {
    fn new(value: &Value, message: &'static Message) -> Self {
        let bytes = kinformer_protobuf::encode_message(value, message)
            .map(Bytes::from)
            .map_err(|error| error.to_string().into_boxed_str());
        Self { message, bytes }
    }
}

/// Encodes an object with `apiVersion` and `kind` leading, as kube-apiserver's encoder writes
/// them, and returns where the rest begins (`None` when the object lacks either of them).
fn encode_type_meta_first(value: &Value) -> (Vec<u8>, Option<usize>) {
    // A serde_json::Value always serializes; an empty body would only hide a bug in tests.
    let encode = |v: &Value| serde_json::to_vec(v).unwrap_or_default();
    let Some(map) = value.as_object() else {
        return (encode(value), None);
    };
    let (Some(api_version), Some(kind)) = (map.get("apiVersion"), map.get("kind")) else {
        return (encode(value), None);
    };
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(br#"{"apiVersion":"#);
    out.extend_from_slice(&encode(api_version));
    out.extend_from_slice(br#","kind":"#);
    out.extend_from_slice(&encode(kind));
    let type_meta_end = out.len();
    let mut rest = map
        .iter()
        .filter(|(key, _)| key.as_str() != "apiVersion" && key.as_str() != "kind")
        .peekable();
    let untyped_from = if rest.peek().is_some() {
        type_meta_end + 1
    } else {
        type_meta_end
    };
    for (key, field) in rest {
        out.push(b',');
        out.extend_from_slice(&serde_json::to_vec(key).unwrap_or_default());
        out.push(b':');
        out.extend_from_slice(&encode(field));
    }
    out.push(b'}');
    (out, Some(untyped_from))
}

/// `namespace/name`, or `name` for cluster-scoped objects: sorts like apiserver's etcd keys.
pub(crate) fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// Sets `metadata.resourceVersion` of an object that has metadata.
pub(crate) fn set_resource_version(value: &mut Value, rv: u64) {
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_untyped_item_is_the_stored_json_without_api_version_and_kind() {
        // Both as kube-apiserver holds them: a zero creationTimestamp is `null`.
        for value in [
            json!({ "kind": "ConfigMap", "data": { "kind": "x" }, "apiVersion": "v1", "metadata": { "name": "a", "creationTimestamp": null } }),
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "creationTimestamp": null } }),
        ] {
            let obj = Obj::new(&value);
            assert!(
                obj.json
                    .starts_with(br#"{"apiVersion":"v1","kind":"ConfigMap""#)
            );
            assert_eq!(obj.value(), value);
            let (head, rest) = obj.untyped_json();
            let item: Value =
                serde_json::from_slice(&[head, &rest[..]].concat()).expect("valid JSON");
            let mut expected = value.clone();
            let map = expected.as_object_mut().expect("an object");
            map.remove("apiVersion");
            map.remove("kind");
            assert_eq!(item, expected);
        }
    }

    #[test]
    fn a_metadata_answer_is_the_stored_metadata_alone_in_either_format() {
        let message = &kinformer_protobuf::messages::PARTIAL_OBJECT_METADATA;
        for value in [
            crate::fixtures::pod(3),
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "data": { "metadata": "x" } }),
        ] {
            let obj = Obj::new(&value);
            let answer: Value = serde_json::from_slice(&obj.metadata_json()).expect("valid JSON");
            let metadata = obj.value()["metadata"].clone();
            assert!(metadata.is_object(), "Go holds every object's metadata");
            assert_eq!(
                answer,
                json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                })
            );
            let encoded = obj.protobuf(message).expect("encodes");
            let expected =
                kinformer_protobuf::encode_message(&json!({ "metadata": metadata }), message)
                    .expect("encodes");
            assert_eq!(&encoded[..], &expected[..]);
        }
    }

    #[test]
    fn a_built_in_object_is_stored_as_go_holds_it() {
        let obj = Obj::new(&json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": "web-0", "namespace": "ns", "resourceVersion": "4" },
            "spec": { "containers": [{ "name": "web", "image": "nginx" }] },
            "notAField": true,
        }));
        // What kube-apiserver's JSON encoder writes for the same Go struct: the key it does not
        // know is gone, a struct JSON left out is `{}`, a zero time `null`.
        assert_eq!(
            obj.value(),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "web-0",
                    "namespace": "ns",
                    "resourceVersion": "4",
                    "creationTimestamp": null,
                },
                "spec": { "containers": [{ "name": "web", "image": "nginx", "resources": {} }] },
                "status": {},
            })
        );
        // Stored so, its JSON and its protobuf decode to the same Pod.
        let message = kinformer_protobuf::message_for("v1", "Pod").expect("a Pod table");
        let from_protobuf: Value = kinformer_protobuf::from_message(
            &obj.protobuf(message).expect("encodes"),
            message,
            DecodeOptions::default(),
        )
        .expect("decodes");
        let mut from_json = obj.value();
        let fields = from_json.as_object_mut().expect("an object");
        fields.remove("apiVersion");
        fields.remove("kind");
        assert_eq!(from_protobuf, from_json);
        // A kind with no protobuf table is stored as given.
        let custom = json!({ "apiVersion": "example.com/v1", "kind": "Widget", "anything": 1 });
        assert_eq!(Obj::new(&custom).value(), custom);
    }

    #[test]
    fn a_restamped_object_carries_its_protobuf_form_along() {
        let message =
            kinformer_protobuf::message_for("v1", "Pod").expect("Pods have a protobuf form");
        let mut value = crate::fixtures::pod(3);
        value["metadata"]["resourceVersion"] = json!("5");
        let obj = Obj::new(&value);
        let unencoded = obj.restamped(6, None);
        assert!(unencoded.protobuf.get().is_none(), "encoded only on demand");
        obj.protobuf(message).expect("a fixture pod encodes");
        let restamped = obj.restamped(7, Some(("k", "v")));
        let carried = restamped
            .protobuf
            .get()
            .cloned()
            .expect("restamped along with the JSON")
            .bytes
            .expect("encoded");
        let encoded = kinformer_protobuf::encode_message(&restamped.value(), message)
            .expect("the restamped JSON encodes");
        assert_eq!(carried, encoded);
    }

    #[test]
    fn an_object_that_does_not_fit_its_message_is_an_internal_error() {
        let obj = Obj::new(&json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": "odd", "namespace": "ns" },
            "spec": { "containers": "not a list" },
        }));
        let error = obj
            .protobuf(
                kinformer_protobuf::message_for("v1", "Pod").expect("Pods have a protobuf form"),
            )
            .expect_err("containers must be a list");
        assert_eq!(error.code, 500);
        assert!(error.message.contains("ns/odd"), "{}", error.message);
    }
}
