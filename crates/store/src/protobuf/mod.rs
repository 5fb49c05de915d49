//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), decoded straight into the types
//! users already have: the wire form of the objects this crate caches.
//!
//! kube-apiserver serves every built-in kind in protobuf as well as JSON, and protobuf is
//! several times cheaper to decode: no number or escape parsing, and every value arrives with
//! its length, so a field nobody reads is skipped without being looked at. This crate owns that
//! wire format for kinformer:
//!
//! - [`schema`] and [`generated`]: a table per message (field numbers, JSON names, types),
//!   written by `cargo xtask protobuf-schema` from the Go API types through reflection, so it
//!   matches what kube-apiserver sends, with no hand-written per-type code.
//! - [`from_message`] and [`Envelope::decode`]: a serde `Deserializer` over the bytes that
//!   presents each message in its JSON shape. Any `Deserialize` type that reads the JSON form
//!   reads protobuf through it: k8s-openapi's structs, or a slim projection of them whose
//!   unnamed fields are skipped on the wire. [`DecodeOptions`] can drop `managedFields` without
//!   decoding them.
//! - [`Envelope`], [`WatchFrame`] and [`FrameReader`]: the `k8s\0` + `runtime.Unknown`
//!   envelope and the length-prefixed watch frames.
//! - [`encode_object`]: JSON to protobuf, for servers (kinformer-testing's fake) and tests.
//!
//! It lives in kinformer-store, beside [`Object`](crate::Object), [`ProjectedMeta`](crate::ProjectedMeta)
//! and [`Interned`](crate::Interned), because it is about objects, not transport: the reflector
//! decodes with it and the fake API server encodes with it, and both sit above this layer.
//!
//! Custom resources have no protobuf form; they stay JSON. The layer knows nothing of HTTP or
//! kube-client: the reflector asks for protobuf and hands the bytes here.
//!
//! # Example
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_store::protobuf::{DecodeOptions, Envelope, encode_object};
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
//! # Ok::<(), kinformer_store::protobuf::Error>(())
//! ```

mod de;
mod envelope;
mod error;
pub mod generated;
pub mod schema;
mod ser;
mod time;
mod wire;

pub use de::{DecodeOptions, from_message};
pub use envelope::{
    CONTENT_TYPE, Envelope, FrameReader, ListItems, MAGIC, MAX_FRAME_LEN, WATCH_CONTENT_TYPE,
    WatchFrame, encode_envelope, encode_list, encode_watch_frame, list_items, message_for,
};
pub use error::Error;
pub use ser::{encode_message, encode_object};
