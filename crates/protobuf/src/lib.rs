//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), decoded straight into the types
//! users already have: the wire form of the objects this crate caches.
//!
//! kube-apiserver serves every built-in kind in protobuf as well as JSON, and protobuf is
//! cheaper to decode: no number or escape parsing, and every value arrives with
//! its length, so a field nobody reads is skipped without being looked at. This crate owns that
//! wire format for kinformer, and nothing else: it depends on no other kinformer crate, knows
//! nothing of HTTP or kube-client, and picks no k8s-openapi version.
//!
//! - [`from_message`] and [`Envelope::decode`]: a serde `Deserializer` over the bytes that
//!   presents each message in its JSON shape. Any `Deserialize` type that reads the JSON form
//!   reads protobuf through it: k8s-openapi's structs (of any minor: fields an older minor lacks
//!   are skipped like any unknown field), or a slim projection of them whose unnamed fields are
//!   skipped on the wire. [`DecodeOptions`] can drop `managedFields` without decoding them.
//! - [`Decoder`]: the fastest decode there is for a type. For the k8s-openapi kinds of the
//!   minor the tables were made from, decoders generated per type (by `cargo xtask
//!   protobuf-schema`, from the tables and k8s-openapi's own field names) write each field
//!   straight into the struct, with no serde in between; for any other type or minor it takes
//!   the serde path, which gives the same value. Both read a `Quantity` as apimachinery's
//!   `ParseQuantity` does, refusing what it refuses, and hold the text Go's `Quantity.String`
//!   writes for it (`"0.1"` is held as `"100m"`, `"1.5Gi"` as `"1536Mi"`): the text Go's JSON
//!   has, and the one kube-apiserver sends.
//! - [`Envelope`], [`WatchFrame`] and [`FrameReader`]: the `k8s\0` + `runtime.Unknown`
//!   envelope and the length-prefixed watch frames; [`CONTENT_TYPE`] and
//!   [`WATCH_CONTENT_TYPE`] for the `Accept` header.
//! - [`list_items`] and [`ListSplitter`]: a `...List` body's items, from the whole body or cut
//!   off it as its bytes arrive, each to be decoded on its own.
//! - [`encode_object`], [`encode_message`], [`encode_list`] and [`encode_watch_frame`]: JSON
//!   to protobuf, byte for byte as kube-apiserver's Go encoder writes the same object, for
//!   servers (kinformer-testing's fake API server) and tests;
//!   [`encode_list_head`], [`list_item_prefix`] and [`LIST_TAIL`] write a list in
//!   pieces, for a server that streams it.
//! - [`to_message`]: any `Serialize` value in its JSON shape (a k8s-openapi struct) straight to
//!   protobuf, with no JSON tree in between: what a compact cache encodes with.
//! - [`Message`]: the table of one message, found by kind with [`message_for`] or among the
//!   well-known [`messages`]. The tables themselves are private, written by
//!   `cargo xtask protobuf-schema` from the Go API types through reflection, so they match what
//!   kube-apiserver sends with no hand-written per-type code.
//!
//! The reflector (kinformer-reflector) asks for protobuf and hands the bytes here; the fake API
//! server (kinformer-testing) encodes with it. Custom resources have no protobuf form; they stay
//! JSON.
//!
//! # Errors
//!
//! A body that is not protobuf at all, or an envelope or watch frame that is malformed, is its
//! own [`Error`] variant. A value inside an object that cannot be read is an
//! [`Error::InField`]: the cause, with the [`FieldError::path`] of the field from the object's
//! root as JSON names it, the byte [`FieldError::offset`] of its tag in the object's message,
//! and the [`FieldError::message`] type that holds it. No message quotes the object's data: a
//! map entry is named by its position, never by its key. Both decoding paths refuse the same
//! bytes, and name a single fault alike; of several faults in one message, the serde path,
//! which reads a message whole first when its fields do not each come in one run, may name
//! another than the generated decoder. What a Pod's message gets for each kind of damage (a
//! test decodes every row through both paths and checks the message):
//!
//! | what is wrong | a Pod's message (hex) | the error's message |
//! | --- | --- | --- |
//! | a field whose wire type is not its type's | `120c12030a016112050a01622001` | `wire type varint for a field of type string (at spec.containers[1].args[0], byte 12, in a k8s.io.api.core.v1.Container)` |
//! | a known field sent as a group | `0a040b08010c` | `wire type group for a field of type string (at metadata.name, byte 2, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | a tag whose field number is zero or negative | `0a0780808080800101` | `malformed protobuf: a field number that is zero or negative (at metadata, byte 2, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | a wire type protobuf does not define | `0a020e00` | `malformed protobuf: an unknown wire type (at metadata, byte 2, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | the end of a group that never started | `0a020c00` | `malformed protobuf: the end of a group that never started (at metadata, byte 2, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | a group that never ends | `0a070a0161a3060801` | `truncated protobuf: the body ends inside a group (at metadata, byte 5, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | a value longer than what holds it | `0a030a0561` | `truncated protobuf: the body ends inside a length-delimited value (at metadata, byte 2, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | a map entry cut short | `0a045a020a05` | `truncated protobuf: the body ends inside a length-delimited value (at metadata.labels[0], byte 2, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | a body cut short | `0a05` | `truncated protobuf: the body ends inside a length-delimited value (at the message's own fields, byte 0, in a k8s.io.api.core.v1.Pod)` |
//! | a time out of Go's range | `0a0942070880a094a58d1d` | `malformed protobuf: a time outside 0000-01-01T00:00:00Z to 9999-12-30T22:00:00Z (at metadata.creationTimestamp, byte 2, in a k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta)` |
//! | a quantity Go's `ParseQuantity` refuses | `1211120f420d0a0b0a0363707512040a023178` | `malformed protobuf: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (at spec.containers[0].resources.limits[0], byte 6, in a k8s.io.api.core.v1.ResourceRequirements)` |
//! | embedded JSON with bytes after the document | `0a1f8a011c3a1a0a187b22663a6d65746164617461223a7b7d7d67617262616765` | `embedded JSON: trailing characters at line 1 column 18 (at metadata.managedFields[0].fieldsV1, byte 5, in a k8s.io.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry)` |
//!
//! # Example
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_protobuf::{DecodeOptions, Envelope, encode_object};
//! use serde_json::json;
//!
//! let body = encode_object(&json!({
//!     "apiVersion": "v1",
//!     "kind": "Pod",
//!     "metadata": { "name": "web-0", "namespace": "prod", "labels": { "app": "web" } },
//!     "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] },
//! }))?;
//! let envelope = Envelope::parse(&body)?;
//! assert_eq!((envelope.api_version, envelope.kind), ("v1", "Pod"));
//! let pod: Pod = envelope.decode(DecodeOptions::default())?;
//! assert_eq!(pod.metadata.name.as_deref(), Some("web-0"));
//! assert_eq!(pod.spec.unwrap().containers[0].image.as_deref(), Some("nginx:1.27"));
//! # Ok::<(), kinformer_protobuf::Error>(())
//! ```

mod de;
mod envelope;
mod error;
// The tables are `pub` so that the well-known ones can be re-exported from `messages`.
#[allow(unreachable_pub)]
mod generated;
mod list_splitter;
mod quantity;
mod schema;
mod ser;
mod strip;
mod time;
mod to_message;
mod typed;
mod wire;

pub mod messages {
    //! The messages a server or a client names directly rather than by kind: a watch's `ERROR`
    //! event carries a [`STATUS`], a list's `metadata` is a [`LIST_META`], a metadata-only
    //! answer is made of [`PARTIAL_OBJECT_METADATA`].

    pub use crate::generated::{
        META_V1_LIST_META as LIST_META, META_V1_OBJECT_META as OBJECT_META,
        META_V1_PARTIAL_OBJECT_METADATA as PARTIAL_OBJECT_METADATA, META_V1_STATUS as STATUS,
    };
}

pub use de::{DecodeOptions, from_message};
pub use envelope::{
    CONTENT_TYPE, Envelope, FrameReader, LIST_TAIL, ListItemPrefix, ListItems, MAGIC,
    MAX_FRAME_LEN, WATCH_CONTENT_TYPE, WatchFrame, encode_envelope, encode_list, encode_list_head,
    encode_watch_frame, list_item_prefix, list_items, message_for,
};
pub use error::{Error, FieldError};
pub use list_splitter::ListSplitter;
pub use schema::Message;
pub use ser::{encode_message, encode_object};
pub use strip::without_managed_fields;
pub use to_message::to_message;
pub use typed::Decoder;

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
