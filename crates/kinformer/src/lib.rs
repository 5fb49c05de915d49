//! kinformer: client-go's informer machinery for Rust. A local, indexed, always-converging
//! cache of Kubernetes objects, ordered add/update/delete notifications to any number of
//! handlers, one list+watch per resource type shared by the whole process, and the work queues
//! controllers drain.
//!
//! This crate is an index: every layer is its own crate, re-exported here under a module of
//! its own, and the [`prelude`] holds what a controller uses every day.
//!
//! **Start here:** [`SharedInformerFactory`](factory::SharedInformerFactory), then
//! [`SharedIndexInformer::add_event_handler`](informer::SharedIndexInformer::add_event_handler)
//! and a [`Lister`](store::Lister). Run `cargo run -p kinformer --example quickstart` to see
//! all of it against an embedded API server (or your cluster, when a kubeconfig exists).
//!
//! # The layers, bottom up
//!
//! | Module | Crate | client-go | What it owns |
//! |---|---|---|---|
//! | [`wait`] | `kinformer-wait` | `util/wait` | loops, backoff, polling, panic capture |
//! | [`protobuf`] | `kinformer-protobuf` | `runtime/serializer/protobuf` | the Kubernetes protobuf wire format |
//! | [`store`] | `kinformer-store` | `tools/cache` store, indexer, listers | the cache and its indexes |
//! | [`fifo`] | `kinformer-fifo` | `DeltaFIFO`, `RealFIFO` | the queue between reflector and cache |
//! | [`reflector`] | `kinformer-reflector` | `Reflector`, `ListWatch` | list+watch over kube-client |
//! | [`processor`] | `kinformer-processor` | `sharedProcessor`, handlers | fan-out to handlers and streams |
//! | [`informer`] | `kinformer-informer` | `SharedIndexInformer` | ties the layers above together |
//! | [`factory`] | `kinformer-factory` | `informers`, `dynamicinformer`, `metadatainformer` | one informer per type |
//! | [`workqueue`] | `kinformer-workqueue` | `util/workqueue` | dedup, rate limits, retries |
//! | [`leaderelection`] | `kinformer-leaderelection` | `tools/leaderelection` | one leader among replicas, on a Lease |
//!
//! With the `testing` feature, `kinformer::testing` is `kinformer-testing`, the in-process
//! fake API server these docs run against. Two features are on by default: `prometheus`
//! (metrics under client-go's names) and `simd-json` (JSON objects decoded with simd-json
//! wherever it reads them exactly as serde_json does; turn it off and serde_json reads all).
//!
//! # 1. Cache Pods and react to changes
//!
//! A factory hands out one informer per type. Register a handler, start, wait for the first
//! list, and every change on the server reaches the handler, in order:
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer::prelude::*;
//! use kinformer::{processor::HandlerFuncs, store::ObjectOrTombstone};
//! use std::sync::Arc;
//! use kinformer::testing::{FakeApiServer, fixtures};
//! use tokio::sync::mpsc;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // An API server in this process, with two Pods. For a real cluster, build the client with
//! // `kinformer::reflector::informer_client(None)`: kube-client's retry layer off, since the
//! // reflector owns retries.
//! let server = FakeApiServer::start().await?;
//! server.create_object(fixtures::pod(0))?;
//! server.create_object(fixtures::pod(1))?;
//!
//! let factory = SharedInformerFactory::new(server.client()?, FactoryOptions::default());
//! let pods = factory.informer::<Pod>()?;
//!
//! let (events, mut received) = mpsc::unbounded_channel();
//! let (added, deleted) = (events.clone(), events);
//! pods.add_event_handler(
//!     HandlerFuncs::new()
//!         .add_func(move |pod: Arc<Pod>, _initial| {
//!             let _ = added.send(format!("added {}", pod.name_any()));
//!         })
//!         .delete_func(move |pod: ObjectOrTombstone<Pod>| {
//!             let _ = deleted.send(format!("deleted {}", pod.object().name_any()));
//!         }),
//! )?;
//!
//! factory.start()?;
//! let report = factory.wait_for_cache_sync(std::time::Duration::from_secs(60)).await;
//! assert!(report.all_synced(), "{report}");
//! assert_eq!(factory.lister::<Pod>()?.list(&Default::default()).len(), 2);
//!
//! server.delete_object("v1", "Pod", Some("ns-1"), "pod-1")?;
//! let mut seen = Vec::new();
//! while seen.len() < 3 {
//!     seen.push(received.recv().await.expect("the handler is registered"));
//! }
//! seen[..2].sort();
//! assert_eq!(seen, ["added pod-0", "added pod-1", "deleted pod-1"]);
//!
//! factory.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # 2. Index by node and look up
//!
//! Index funcs map an object to the values it is filed under. Add them before start; the cache
//! keeps every index in step with the objects, so a lookup is a map read:
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer::prelude::*;
//! use kinformer::store::NAMESPACE_INDEX;
//! use std::sync::Arc;
//! use kinformer::testing::{FakeApiServer, fixtures};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = FakeApiServer::start().await?;
//! for i in 0..100 {
//!     server.create_object(fixtures::pod(i))?; // pod i runs on node-{i % 50}
//! }
//!
//! let factory = SharedInformerFactory::new(server.client()?, FactoryOptions::default());
//! let pods = factory.informer::<Pod>()?;
//! let by_node: IndexFunc<Pod> = Arc::new(|pod: &Pod| {
//!     pod.spec.as_ref().and_then(|spec| spec.node_name.clone()).into_iter().collect()
//! });
//! pods.add_indexers(Indexers::from([("by-node".to_owned(), by_node)]))?;
//!
//! factory.start()?;
//! let report = factory.wait_for_cache_sync(std::time::Duration::from_secs(60)).await;
//! assert!(report.all_synced(), "{report}");
//!
//! let indexer = pods.cache();
//! let mut on_node_7: Vec<String> = indexer
//!     .by_index("by-node", "node-7")?
//!     .iter()
//!     .map(|pod| pod.name_any())
//!     .collect();
//! on_node_7.sort();
//! assert_eq!(on_node_7, ["pod-57", "pod-7"]);
//! // The namespace index is always there.
//! assert_eq!(indexer.by_index(NAMESPACE_INDEX, "ns-3")?.len(), 10);
//!
//! factory.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # 3. Hand keys to workers
//!
//! A controller turns notifications into keys on a
//! [`RateLimitingQueue`](workqueue::RateLimitingQueue) ([`KeyHandler`](processor::KeyHandler)
//! does it for every add, update, resync and deletion) and workers reconcile each key from the
//! cache. Shut down in this order: the factory (no more notifications), then the queue with
//! a drain (what is queued is worked off), then the workers (whose `get` then returns `None`).
//!
//! ```
//! use std::time::Duration;
//!
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer::prelude::*;
//! use kinformer::testing::{FakeApiServer, fixtures};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = FakeApiServer::start().await?;
//! for i in 0..10 {
//!     server.create_object(fixtures::pod(i))?;
//! }
//! let factory = SharedInformerFactory::new(server.client()?, FactoryOptions::default());
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter(), QueueOptions::named("pods"));
//! let pods = factory.informer::<Pod>()?;
//! let enqueue = queue.clone();
//! let registration = pods.add_event_handler(KeyHandler::new(move |key| enqueue.add(key)))?;
//! factory.start()?;
//! let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
//! assert!(report.all_synced(), "{report}");
//!
//! let workers: Vec<_> = (0..2)
//!     .map(|_| {
//!         let (queue, cache) = (queue.clone(), pods.cache());
//!         tokio::spawn(async move {
//!             let mut reconciled = 0;
//!             while let Some(key) = queue.get().await {
//!                 // The cache's state, not the event's: absent means deleted.
//!                 if let Some(pod) = cache.get_by_key(&key) {
//!                     reconciled += usize::from(pod.spec.is_some());
//!                 }
//!                 queue.forget(&key); // reconciled: no backoff left for the key
//!                 queue.done(&key);
//!             }
//!             reconciled
//!         })
//!     })
//!     .collect();
//!
//! assert!(registration.synced().await); // every initial add is on the queue
//! factory.shutdown().await;
//! queue.shut_down_with_drain().await;
//! let mut reconciled = 0;
//! for worker in workers {
//!     reconciled += worker.await?;
//! }
//! assert_eq!(reconciled, 10);
//! # Ok(())
//! # }
//! ```
//!
//! # 4. Cache less: protobuf, no managedFields, projections
//!
//! The factory's informers cache compactly by default: each object is held as the bytes it
//! arrived in, a bounded set of recently written or fetched objects kept decoded, and a read of
//! any other object decodes it ([`CompactCache`](store::CompactCache)). A type whose readers
//! fetch thousands of objects at a time does better with a decoded cache
//! ([`FactoryOptions::decoded_cache_for`](factory::FactoryOptions::decoded_cache_for)).
//! Built-in kinds travel in protobuf by default ([`WireFormat`](reflector::WireFormat)).
//! [`FactoryOptions::drop_managed_fields`](factory::FactoryOptions::drop_managed_fields) skips
//! `managedFields` on the wire. To cache far less, declare the fields a controller reads as a
//! projection: any `Deserialize` type shaped like the object's JSON, whose `metadata` is a
//! [`ProjectedMeta`](store::ProjectedMeta), and one [`impl_object!`](store::impl_object) line.
//! It decodes straight from protobuf (or JSON); every field it does not name is skipped
//! without being decoded. [`Interned`](store::Interned) strings
//! share one copy of each repeated value.
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer::prelude::*;
//! use kinformer::informer::InformerOptions;
//! use kinformer::reflector::KubeListerWatcher;
//! use kinformer::wait::CancellationToken;
//! use kinformer::store::{Interned, ProjectedMeta};
//! use kinformer::testing::{FakeApiServer, fixtures};
//! use serde::Deserialize;
//!
//! #[derive(Debug, Deserialize)]
//! struct SlimPod {
//!     metadata: ProjectedMeta, // name, namespace, resourceVersion, uid, labels
//!     #[serde(default)]
//!     spec: SlimSpec,
//! }
//!
//! #[derive(Debug, Default, Deserialize)]
//! struct SlimSpec {
//!     #[serde(rename = "nodeName")]
//!     node_name: Option<Interned>,
//! }
//!
//! kinformer::store::impl_object!(SlimPod, metadata);
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = FakeApiServer::start().await?;
//! for i in 0..20 {
//!     server.create_object(fixtures::pod(i))?;
//! }
//! // Pods on the wire (what to ask the server for), SlimPods in the cache.
//! let api = kube_client::Api::<Pod>::all(server.client()?);
//! let informer = SharedIndexInformer::new(
//!     KubeListerWatcher::<SlimPod>::projected(api),
//!     InformerOptions::new(),
//! );
//! let token = CancellationToken::new();
//! tokio::spawn({
//!     let (informer, token) = (informer.clone(), token.clone());
//!     async move { informer.run(token).await }
//! });
//! informer.wait_for_cache_sync(std::time::Duration::from_secs(60), &token).await?;
//! let pod = informer.cache().get_by_key("ns-7/pod-7").expect("cached");
//! assert_eq!(pod.spec.node_name.as_deref(), Some("node-7"));
//! token.cancel();
//! # Ok(())
//! # }
//! ```

#[doc(inline)]
pub use kinformer_factory as factory;
#[doc(inline)]
pub use kinformer_fifo as fifo;
#[doc(inline)]
pub use kinformer_informer as informer;
#[doc(inline)]
pub use kinformer_leaderelection as leaderelection;
#[doc(inline)]
pub use kinformer_processor as processor;
#[doc(inline)]
pub use kinformer_protobuf as protobuf;
#[doc(inline)]
pub use kinformer_reflector as reflector;
#[doc(inline)]
pub use kinformer_store as store;
#[cfg(feature = "testing")]
#[doc(inline)]
pub use kinformer_testing as testing;
#[doc(inline)]
pub use kinformer_wait as wait;
#[doc(inline)]
pub use kinformer_workqueue as workqueue;

pub mod kube {
    //! The kube types kinformer's API takes and hands back, so a program names them through
    //! kinformer: a custom resource's [`ApiResource`] (from its [`GroupVersionKind`]) for a
    //! dynamic informer of [`DynamicObject`]s, and [`PartialObjectMeta`] for a metadata-only
    //! informer.

    pub use kube_core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
}

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// What a controller uses every day, in one import: `use kinformer::prelude::*;`. Fifteen
/// names: the client and the factory with its options and requests, the informer, the handler
/// forms (a [`KeyHandler`](kinformer_processor::KeyHandler) for a work queue, a
/// [`ResourceEventHandler`](kinformer_processor::ResourceEventHandler) of your own, the
/// [`ListenerOptions`](kinformer_processor::ListenerOptions) of a registration or stream),
/// the cache's read trait, index functions and listers, the work queue, and kube's accessors.
/// Everything else is one path away, under the layer that owns it (`kinformer::store::...`).
///
/// kube's accessors come with it (`ResourceExt`), and nothing in it shadows them:
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer::prelude::*;
///
/// let pod = Pod::default();
/// assert!(pod.labels().is_empty());
/// assert_eq!(pod.name_any(), "");
/// assert_eq!(pod.namespace(), None);
/// ```
///
/// kinformer-store's own accessor trait, `Object`, is left out for that reason; bring it in by
/// name (`use kinformer::store::Object;`) where a generic bound needs it.
pub mod prelude {
    pub use kinformer_factory::{FactoryOptions, InformerRequest, SharedInformerFactory};
    pub use kinformer_informer::SharedIndexInformer;
    pub use kinformer_processor::{KeyHandler, ListenerOptions, ResourceEventHandler};
    pub use kinformer_reflector::informer_client;
    // `Object` stays out: its accessors share names with `ResourceExt`'s (`labels()`,
    // `namespace()`), and with both in scope every such call would be ambiguous.
    pub use kinformer_store::{CacheReader, IndexFunc, Indexers, Lister};
    pub use kinformer_workqueue::{
        QueueOptions, RateLimitingQueue, default_controller_rate_limiter,
    };
    /// kube's accessor trait: `name_any()`, `namespace()`, `meta()`.
    pub use kube_core::ResourceExt;
}

// The crate README's code blocks, compiled as doc tests too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadmeDoctests;
