//! The informer's local cache: object keys, the [`Store`] and [`Indexer`] traits, and
//! [`Cache`], a thread-safe indexed store of `Arc` objects.
//!
//! This is the lowest data layer of kinformer. It owns:
//!
//! - **keys**: `namespace/name` or `name` ([`meta_namespace_key_func`], [`split_key`]), and
//!   [`DeletedFinalStateUnknown`] tombstones with a key func that unwraps them;
//! - **the [`Object`] trait**: the few metadata fields every layer above reads, implemented for
//!   every kube `Resource` and implementable for your own slim types;
//! - **the seams**: [`Store`] (what a reflector writes into), [`Indexer`] (a store with
//!   secondary indexes) and [`KeyListerGetter`] (what a queue asks of the cache behind it);
//! - **[`ThreadSafeStore`] and [`Cache`]**: objects and indexes under one lock, so an object and
//!   its index entries always change together.
//!
//! It knows nothing of HTTP, watches or tokio. Start with [`Cache`].
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_store::{Cache, Indexer, NAMESPACE_INDEX, Store};
//! use kube_core::ObjectMeta;
//!
//! fn pod(namespace: &str, name: &str) -> Arc<Pod> {
//!     Arc::new(Pod {
//!         metadata: ObjectMeta {
//!             namespace: Some(namespace.into()),
//!             name: Some(name.into()),
//!             ..ObjectMeta::default()
//!         },
//!         ..Pod::default()
//!     })
//! }
//!
//! let cache = Cache::<Pod>::with_namespace_index();
//! cache.add(pod("default", "web-0"))?;
//! cache.add(pod("default", "web-1"))?;
//! cache.add(pod("kube-system", "dns"))?;
//!
//! assert!(cache.get_by_key("default/web-0").is_some());
//! assert_eq!(cache.by_index(NAMESPACE_INDEX, "default")?.len(), 2);
//! # Ok::<(), kinformer_store::Error>(())
//! ```
//!
//! # Why one lock
//!
//! An object and its index entries must change together: a reader must never find an object
//! under an index value it no longer has. A sharded map (dashmap) gives per-key atomicity only,
//! so the index sets would lag the items and need their own coordination. [`ThreadSafeStore`]
//! therefore keeps items and indexes under one `parking_lot::RwLock`; reads share it, and
//! [`Store::replace`] builds the new contents outside the lock and swaps them in. The figures
//! behind this choice are in `docs/benchmarks.md`.

mod cache;
mod error;
mod key;
mod object;
mod thread_safe;
mod tombstone;
mod traits;

pub use crate::{
    cache::Cache,
    error::{Error, Result},
    key::{
        KeyFunc, default_key_func, deletion_handling_meta_namespace_key_func,
        meta_namespace_key_func, object_key, split_key,
    },
    object::Object,
    thread_safe::ThreadSafeStore,
    tombstone::{DeletedFinalStateUnknown, ObjectOrTombstone},
    traits::{
        IndexFunc, Indexer, Indexers, KeyListerGetter, NAMESPACE_INDEX, Store,
        meta_namespace_index_func, namespace_indexers,
    },
};
