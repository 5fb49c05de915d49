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
//!   the serde path, which gives the same value.
//! - [`Envelope`], [`WatchFrame`] and [`FrameReader`]: the `k8s\0` + `runtime.Unknown`
//!   envelope and the length-prefixed watch frames; [`CONTENT_TYPE`] and
//!   [`WATCH_CONTENT_TYPE`] for the `Accept` header.
//! - [`list_items`] and [`ListSplitter`]: a `...List` body's items, from the whole body or cut
//!   off it as its bytes arrive, each to be decoded on its own.
//! - [`encode_object`], [`encode_message`], [`encode_list`] and [`encode_watch_frame`]: JSON
//!   to protobuf, for servers (kinformer-testing's fake API server) and tests;
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
pub use error::Error;
pub use list_splitter::ListSplitter;
pub use schema::Message;
pub use ser::{encode_message, encode_object};
pub use strip::without_managed_fields;
pub use to_message::to_message;
pub use typed::Decoder;
