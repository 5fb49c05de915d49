//! The shared informer factory: one list+watch per resource type and selection, shared by
//! every handler, lister and controller in the process (client-go's `informers` package, with
//! `dynamicinformer` and `metadatainformer`).
//!
//! It owns:
//!
//! - **the registry**: one way to ask for an informer, an [`InformerRequest`] (typed,
//!   metadata-only, dynamic, or built by a constructor of your own; in the factory's scope or
//!   the request's) handed to [`informer_for`](SharedInformerFactory::informer_for), or to
//!   [`lease`](SharedInformerFactory::lease) for one that leaves when its users do;
//!   [`informer`](SharedInformerFactory::informer) and
//!   [`lister`](SharedInformerFactory::lister) are the short forms for a typed one. The same
//!   request gets the same informer however often it is made, keyed by [`InformerKey`] (the
//!   Rust type, the API resource for dynamic informers, and the [`Selection`]);
//! - **the options** ([`FactoryOptions`]): default resync, namespace, label and field
//!   selectors, a list-options tweak, page size, per-type resync, and transforms (on every
//!   type's metadata, or per type) that run before an object is cached;
//! - **dynamic and metadata informers**: any resource by `ApiResource` as `DynamicObject`s
//!   (a CRD without Rust types), or metadata only (`PartialObjectMeta<K>`) for memory;
//! - **the caches**: every informer's cache is a compact one
//!   ([`CompactCache`](kinformer_store::CompactCache)): each object held as the bytes it
//!   arrived in (protobuf for built-in kinds, JSON otherwise), keys and index entries held
//!   directly, and a bounded set of recently written or fetched objects kept decoded, for a
//!   fraction of a decoded object's memory. A read of an object not kept decoded costs a
//!   decode; a type whose readers fetch thousands of objects at a time is better served by a
//!   decoded cache ([`FactoryOptions::decoded_cache_for`]). Handlers and listers get `Arc<K>`
//!   either way;
//! - **the lifecycle**: [`start`](SharedInformerFactory::start) (idempotent; informers asked
//!   for later start as they are asked for),
//!   [`wait_for_cache_sync`](SharedInformerFactory::wait_for_cache_sync) with a deadline and a
//!   [`SyncReport`] of which informers synced and why the others did not, and
//!   [`shutdown`](SharedInformerFactory::shutdown), which stops and awaits every task it
//!   started; asking for an informer afterwards is an [`Error::ShutDown`].
//!
//! Start with [`SharedInformerFactory::new`], a client and [`FactoryOptions`].
//!
//! # Example
//!
//! Two consumers ask for the Pod informer; there is one, and one list on the server:
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_factory::{FactoryOptions, SharedInformerFactory};
//! use kinformer_testing::{FakeApiServer, Verb, fixtures};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = FakeApiServer::start().await?;
//! for i in 0..3 {
//!     server.create_object(fixtures::pod(i))?;
//! }
//!
//! let factory = SharedInformerFactory::new(server.client()?, FactoryOptions::default());
//! let pods = factory.informer::<Pod>()?;
//! let lister = factory.lister::<Pod>()?; // the same informer's cache
//! factory.start()?;
//! let report = factory.wait_for_cache_sync(std::time::Duration::from_secs(60)).await;
//! assert!(report.all_synced(), "{report}");
//!
//! assert_eq!(lister.list(&Default::default()).len(), 3);
//! assert_eq!(pods.cache().list_keys().len(), 3);
//! assert_eq!(server.faults().request_count(Verb::List, "pods"), 1);
//!
//! factory.shutdown().await;
//! assert_eq!(factory.running_tasks(), 0);
//! assert!(factory.informer::<Pod>().is_err());
//! # Ok(())
//! # }
//! ```
//!
//! # Deviations from client-go
//!
//! - The key includes the [`Selection`], so one factory can serve several namespaces or
//!   selectors side by side; client-go needs one factory per namespace.
//! - There are no generated per-group accessors (`Core().V1().Pods()`): `informer::<Pod>()`
//!   covers every type, and the transform for all types acts on the metadata every type
//!   shares ([`FactoryOptions::transform_metadata`]), since Rust has no `interface{}`.
//! - `start` reports [`Error::ShutDown`] after a shutdown instead of returning silently.
//! - Dropping the last handle cancels the informers (without waiting); client-go leaks them.
//! - Informers can leave the factory: [`SharedInformerFactory::lease`] hands out an informer
//!   that stops when its last [`InformerLease`] is released,
//!   [`SharedInformerFactory::remove_informer`] stops one however it is held
//!   (controller-runtime's `RemoveInformer`), and a dynamic informer whose resource stops being
//!   served (its CRD deleted) stops with [`SyncStatus::resource_gone`] instead of retrying for
//!   ever (client-go's never stop, kubernetes issue 79610); a later request builds a fresh one.

mod error;
mod factory;
mod lease;
#[cfg(feature = "prometheus")]
mod metrics;
mod options;
mod request;
mod scope;
mod selection;
mod sync_report;

pub use crate::{
    error::{Error, Result},
    factory::{FactoryResource, SharedInformerFactory},
    lease::InformerLease,
    options::{CACHE_ENV, FactoryOptions},
    request::InformerRequest,
    scope::ApiScope,
    selection::{InformerKey, Selection},
    sync_report::SyncReport,
};
pub use kinformer_informer::SyncStatus;

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
