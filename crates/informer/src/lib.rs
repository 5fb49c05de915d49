//! The informer layer: client-go's controller process loop and `SharedIndexInformer`, tying
//! the reflector, the queue, the cache and the processor together.
//!
//! It owns:
//!
//! - **the process loop**: pop from the queue ([`QueueKind::InOrder`], client-go v0.37's
//!   in-order FIFO with atomic relists, by default; the DeltaFIFO by option), apply each
//!   change to the cache, then distribute it (client-go's `HandleDeltas`); the requeue policy
//!   ([`InformerOptions::retry_on_error`]);
//! - **[`SharedIndexInformer`]**: handlers added before or after start (late ones get the cache
//!   as initial adds, with nothing lost or doubled around the moment they join), per handler
//!   resync periods, `has_synced` for the informer and per [`Registration`], the transform,
//!   extra indexers, the watch error handler, async [`EventStream`]s, and a clean stop;
//! - **the semantics in between**: an update whose resourceVersion did not change is a resync
//!   and reaches only the handlers due for one; a relist that no longer has an object deletes
//!   it with a [`DeletedFinalStateUnknown`](kinformer_store::DeletedFinalStateUnknown); an
//!   object whose name came back with a new UID is a deletion and an add, never an update;
//! - **waiting on the cache**: [`SharedIndexInformer::wait_for_version`] until the cache has
//!   seen the version a write returned (read-your-writes), and
//!   [`SharedIndexInformer::wait_for_key`] until a condition holds for one key, each with a
//!   deadline and cancellation ([`WaitError`] says how versions are compared);
//! - **the consistency check** (opt-in, [`InformerOptions::consistency_check`]): the server
//!   listed at the cache's exact version and compared with the cache, differences reported
//!   ([`ConsistencyStats`]), nothing written.
//!
//! Start with [`SharedIndexInformer::new`] and [`InformerOptions`].
//!
//! # Example
//!
//! An informer over an in-memory [`ListerWatcher`] (a real one is
//! `KubeListerWatcher::new(Api::<Pod>::all(client))`):
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! use async_trait::async_trait;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_informer::{AddKind, InformerOptions, SharedIndexInformer};
//! use kinformer_reflector::{ListOptions, ListPage, ListSink, ListerWatcher, Result, WatchStream};
//! use kube_core::ObjectMeta;
//! use tokio_util::sync::CancellationToken;
//!
//! struct TwoPods;
//!
//! #[async_trait]
//! impl ListerWatcher<Pod> for TwoPods {
//!     async fn list(&self, _options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
//!         let pod = |name: &str| {
//!             let metadata = ObjectMeta {
//!                 namespace: Some("default".into()),
//!                 name: Some(name.into()),
//!                 resource_version: Some("7".into()),
//!                 ..ObjectMeta::default()
//!             };
//!             Arc::new(Pod { metadata, ..Pod::default() }).into()
//!         };
//!         sink.part(vec![pod("a"), pod("b")]).await?;
//!         Ok(ListPage { resource_version: "7".into(), ..ListPage::default() })
//!     }
//!
//!     async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
//!         Ok(Box::pin(futures::stream::pending()))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
//! let informer = SharedIndexInformer::new(TwoPods, InformerOptions::new());
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let record = Arc::clone(&seen);
//! let registration = informer.add_event_handler(informer.handler_funcs().add_func(move |pod, kind| {
//!     record.lock().unwrap().push((pod.metadata.name.clone().unwrap_or_default(), kind));
//! }))?;
//!
//! let token = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (informer, token) = (informer.clone(), token.clone());
//!     async move { informer.run(token).await }
//! });
//! informer.wait_for_cache_sync(std::time::Duration::from_secs(60), &token).await?;
//! assert!(registration.synced().await);
//! assert_eq!(informer.cache().list_keys().len(), 2);
//! seen.lock().unwrap().sort();
//! let initial = AddKind::InitialList;
//! assert_eq!(*seen.lock().unwrap(), [("a".to_owned(), initial), ("b".to_owned(), initial)]);
//!
//! token.cancel();
//! running.await.expect("the informer task panicked")?;
//! assert!(informer.is_stopped());
//! # Ok(())
//! # }
//! ```
//!
//! # Deviations from client-go
//!
//! - The transform cannot fail (it maps `Arc<K>` to `Arc<K>`), and it runs as objects enter
//!   the queue, as in client-go since the transform moved into the FIFO.
//! - [`InformerOptions::retry_on_error`] keeps client-go's old `RetryOnError` as an option;
//!   today's client-go logs a failed item and moves on, which is our default.
//! - `run` returns an [`Error`] for a second start instead of logging and returning.
//! - A handler's panic is isolated by the processor and the handler keeps receiving; client-go
//!   crashes the process unless `HandleCrash` is turned off.
//! - Watch bookmarks are forwarded from the reflector to the queue, so the in-order queue
//!   delivers them in sequence as [`Popped::Bookmark`](kinformer_fifo::Popped); the process loop
//!   writes nothing for them, but their version counts as applied, so
//!   [`SharedIndexInformer::wait_for_version`] returns once a bookmark reaches it.

mod checker;
mod controller;
mod error;
mod health;
mod informer;
mod latency;
mod options;
mod progress;
mod shard_sync;

pub use crate::{
    checker::ConsistencyStats,
    error::{Error, Result},
    health::{InformerHealth, SyncStatus},
    informer::SharedIndexInformer,
    latency::{LatencyHistogram, PROCESSING_LATENCY_BUCKETS},
    options::{InformerCache, InformerOptions, QueueKind},
    progress::WaitError,
};
pub use kinformer_processor::{
    AddKind, BufferPolicy, EventStream, HandlerExecutor, HandlerFuncs, ListenerOptions,
    ListenerStats, Notification, OldObject, Overflow, Registration, ResourceEventHandler,
};
pub use kinformer_reflector::ListerWatcher;

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
