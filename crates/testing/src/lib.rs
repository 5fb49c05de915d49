//! An in-process fake Kubernetes API server over real HTTP, for testing informers and
//! controllers built on kube-client.
//!
//! [`FakeApiServer`] listens on 127.0.0.1 and speaks the dialect of kube-apiserver 1.37:
//! discovery (`/api`, `/apis`, aggregated discovery too), get/list/create/update/patch/delete
//! for the core and apps built-ins and for CRDs created at run time, paging with continue
//! tokens, list and watch at a resourceVersion, label and field selectors, bookmarks, streaming
//! lists (`sendInitialEvents`), a bounded event history whose compaction gives 410 Expired, and
//! metadata-only (`PartialObjectMetadata`) responses. It answers JSON, and Kubernetes protobuf
//! (`application/vnd.kubernetes.protobuf`: objects, lists, watch frames and error `Status`es of
//! the built-in kinds, and metadata-only answers of any kind) to a client that prefers it in
//! `Accept`, as client-go does by default. Like kube-apiserver, it writes a list body as it
//! sends it, so a client reads the first items of a large list before the last are written.
//! A built-in object is stored as kube-apiserver holds it once decoded into its Go struct (keys
//! the struct lacks dropped, the zero values Go's encoders write filled in), so its JSON and its
//! protobuf, byte for byte what kube-apiserver sends, decode to the same object.
//! One global revision counter plays etcd's revision. [`Faults`] breaks it on purpose: close watches, fail requests with a status, write
//! garbage into watch streams, delay responses, compact, drop the listener, count requests.
//!
//! # What it owns
//!
//! - [`FakeApiServer`] and [`ServerOptions`]: start a server, point a client at it, seed,
//!   create, update, delete and read objects as JSON values, compact its history, take its
//!   listener down and up.
//! - [`Faults`], [`Fault`] and [`Verb`]: fail requests with a status, close, stall or corrupt
//!   watch streams, delay responses, count requests by verb and resource.
//! - [`ResourceType`] and [`builtin_resources`]: what the server serves, and serving more.
//! - [`fixtures`]: Namespaces, numbered Pods and ConfigMaps, and a Widget CRD with its objects.
//! - [`eventually`] and [`wait_until`]: waiting for a condition on tokio's clock.
//! - [`Error`] and [`Result`].
//!
//! **Start here:** [`FakeApiServer::start`], then [`FakeApiServer::client`] (or point any client
//! at [`FakeApiServer::url`]), then [`FakeApiServer::faults`].
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_testing::FakeApiServer;
//! use kube_client::{Api, api::{ListParams, PostParams}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = FakeApiServer::start().await?;
//! let pods: Api<Pod> = Api::namespaced(server.client()?, "default");
//! let pod: Pod = serde_json::from_value(serde_json::json!({
//!     "metadata": { "name": "web-0", "labels": { "app": "web" } },
//!     "spec": { "containers": [{ "name": "web", "image": "nginx" }] },
//! }))?;
//! let created = pods.create(&PostParams::default(), &pod).await?;
//! assert!(created.metadata.uid.is_some());
//!
//! let listed = pods.list(&ListParams::default().labels("app=web")).await?;
//! assert_eq!(listed.items.len(), 1);
//! assert_eq!(listed.items[0].metadata.name.as_deref(), Some("web-0"));
//! assert_eq!(listed.metadata.resource_version, created.metadata.resource_version);
//! # Ok(())
//! # }
//! ```
//!
//! # Fault injection
//!
//! ```
//! use kinformer_testing::{FakeApiServer, Fault, Verb};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = FakeApiServer::start().await?;
//! let faults = server.faults();
//! faults.inject(Fault::status(500).verb(Verb::List).resource("pods").times(1));
//! faults.close_watches(); // every open watch ends now
//! faults.inject_watch_line("{not json"); // garbage into every open watch
//! server.compact(); // resuming any earlier resourceVersion now gets 410 Expired
//! assert_eq!(faults.request_count(Verb::List, "pods"), 0);
//! # Ok(())
//! # }
//! ```
//!
//! [`FakeApiServer::stop_listener`] and [`FakeApiServer::restart_listener`] take the port down
//! and up again (connection refused in between), keeping every object.
//!
//! # Benchmarks
//!
//! With the `bench` cargo feature (off by default; the benchmark harness turns it on) and
//! [`ServerOptions::admin_endpoints`] on, the server also answers the endpoints that
//! `cargo xtask bench` drives (timed updates, a forced relist, a checksum of its objects,
//! response counts by Content-Type); the `bench` module describes them and holds the
//! `checksum` the benchmark peers compare with the server's.
//!
//! # What it does not emulate
//!
//! Admission (no namespace lifecycle, no defaulting, no quota), validation beyond object names
//! and the list/watch options, authentication and RBAC, CBOR, protobuf request bodies (writes
//! take JSON), protobuf for discovery (JSON only), Table output, server-side apply (`application/apply-patch+yaml` answers 415),
//! strategic merge patch semantics (applied as a JSON merge patch, so list fields are
//! replaced, not merged), graceful pod deletion (a delete removes at once unless finalizers
//! remain), garbage collection of dependents, CRD conversion webhooks and schema validation,
//! per-resource watch caches (one history window is shared by every resource, as etcd's
//! is), and the canonical form of quantities: kube-apiserver writes `"0.1"` back as `"100m"`,
//! and kinformer's protobuf decoders hold that form, where this server keeps the text it was
//! given, so a fixture whose JSON and protobuf must agree writes quantities canonically.

mod admin;
#[cfg(feature = "bench")]
pub mod bench;
mod crd;
mod discovery;
mod error;
mod faults;
pub mod fixtures;
mod handler;
mod list;
mod listener;
mod object;
mod options;
mod patch;
mod resources;
mod response;
mod restamp;
mod selector;
mod server;
mod shared;
mod status;
mod store;
mod wait;
mod watch;
mod wire;
mod write;

pub use error::{Error, Result};
pub use faults::{Fault, Faults, Verb};
pub use options::ServerOptions;
pub use resources::{ResourceType, builtin_resources};
pub use server::FakeApiServer;
pub use wait::{eventually, wait_until};

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
