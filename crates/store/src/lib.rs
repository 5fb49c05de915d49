//! The informer's local cache: object keys, the [`Store`], [`CacheReader`] and [`Indexer`]
//! seams, and [`Cache`], the thread-safe indexed store of `Arc` objects.
//!
//! This is the lowest data layer of kinformer. It owns:
//!
//! - **keys**: `namespace/name` or `name`, made by [`meta_namespace_key_func`] (the default
//!   [`KeyFunc`]) and taken apart by [`split_key`]; a deletion the informer missed arrives as a
//!   [`DeletedFinalStateUnknown`] tombstone carrying its key (and whether the object only left
//!   the informer's shard), inside an [`ObjectOrTombstone`];
//! - **the [`Object`] trait**: the few metadata fields every layer above reads, implemented for
//!   every kube `Resource` and, for your own slim types (projections), one [`impl_object!`]
//!   line over a [`ProjectedMeta`]; their repeated strings can be [`Interned`];
//! - **the seams**: [`Store`] (the writer: what a reflector writes into, a cache or a queue),
//!   [`CacheReader`] (the read-only view listers, handlers and a queue's known objects read) and
//!   [`Indexer`] (a whole cache: both, plus the index registry, held only by its owner); what
//!   a write carries ([`Incoming`], [`Encoded`]) and what an update replaced ([`OldObject`]);
//! - **[`Cache`]**: the in-memory indexed store, objects and indexes under one lock, so an
//!   object and its index entries always change together; [`namespace_indexers`] and
//!   [`label_indexers`] are the built-in indexes, and [`read_consistently`] reads a cache
//!   held still;
//! - **[`CompactCache`]**: the same seams over objects held as the bytes a [`Codec`] made, with
//!   keys and index entries held directly and a bounded set kept decoded: full objects in a
//!   fraction of the memory, for a decode on reads (codecs for Kubernetes kinds are in
//!   kinformer-reflector);
//! - **[`Lister`]**: a read-only view by label selector, name and namespace, with label
//!   selectors parsed from strings by [`parse_selector`] ([`LabelSelector`] keeps what
//!   kube-core's `Selector` cannot hold, for code that answers selectors as kube-apiserver
//!   does).
//!
//! It knows nothing of HTTP, watches, wire formats or tokio, and picks no k8s-openapi version.
//! Start with [`Cache`]; hand readers a [`Lister`] or an `Arc<dyn CacheReader<K>>`. Most users
//! reach it through an informer (kinformer-informer), which owns the cache and writes it.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_store::{
//!     Cache, CacheReader, NAMESPACE_INDEX, Store, meta_namespace_key_func, split_key,
//! };
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
//! cache.add(pod("default", "web-0").into())?;
//! cache.add(pod("default", "web-1").into())?;
//! cache.add(pod("kube-system", "dns").into())?;
//!
//! let web = pod("default", "web-0");
//! let key = meta_namespace_key_func(web.as_ref())?;
//! assert_eq!(key, "default/web-0");
//! assert_eq!(split_key(&key)?, (Some("default"), "web-0"));
//! assert_eq!(cache.get_by_key(&key), Some(web));
//! assert_eq!(cache.by_index(NAMESPACE_INDEX, "default")?.len(), 2);
//!
//! cache.delete(pod("kube-system", "dns"))?;
//! assert_eq!(cache.list_keys().len(), 2);
//! # Ok::<(), kinformer_store::Error>(())
//! ```
//!
//! # Listers and label selectors
//!
//! A [`Lister`] wraps any `Arc<dyn CacheReader<K>>` (an `Arc<Cache<K>>` coerces) and answers what
//! controllers ask of an informer's cache, with client-go's `ListAll` / `ListAllByNamespace`
//! semantics:
//!
//! - [`Lister::list`] takes a kube-core [`Selector`](kube_core::Selector); the empty selector
//!   (`Selector::default()`, client-go's `labels.Everything()`) returns every object;
//! - [`Lister::get`] finds an object by name: a cluster-scoped one, until the lister is
//!   narrowed;
//! - [`Lister::namespaced`] narrows it to one namespace (`""` means all), using the
//!   [`NAMESPACE_INDEX`] when registered and a scan otherwise;
//! - a missing object is [`Error::NotFound`], naming the namespace and name searched.
//!
//! kube-core's `Selector` matches labels and renders itself as a string but cannot parse one;
//! [`parse_selector`] reads apimachinery's syntax (`=`, `==`, `!=`, `in`, `notin`, `key`,
//! `!key`) and reports [`Error::InvalidSelector`] with the byte offset and what was expected.
//!
//! ```
//! use std::sync::Arc;
//!
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_store::{Cache, Error, Lister, Store, parse_selector};
//! use kube_core::ObjectMeta;
//!
//! let cache = Arc::new(Cache::<Pod>::with_namespace_index());
//! cache.add(Pod {
//!     metadata: ObjectMeta {
//!         namespace: Some("shop".into()),
//!         name: Some("cart-0".into()),
//!         labels: Some([("app".to_owned(), "cart".to_owned())].into()),
//!         ..ObjectMeta::default()
//!     },
//!     ..Pod::default()
//! }.into())?;
//!
//! let pods = Lister::<Pod>::new(cache);
//! let carts = pods.namespaced("shop").list(&parse_selector("app in (cart,checkout)")?);
//! assert_eq!(carts.len(), 1);
//! assert!(matches!(pods.namespaced("shop").get("cart-9"), Err(Error::NotFound { .. })));
//! # Ok::<(), kinformer_store::Error>(())
//! ```
//!
//! # Why one lock
//!
//! An object and its index entries must change together: a reader must never find an object
//! under an index value it no longer has. A sharded map (dashmap) gives per-key atomicity only,
//! so the index sets would lag the items and need their own coordination. [`Cache`]
//! therefore keeps items and indexes under one `parking_lot::RwLock`; reads share it, and
//! [`Store::replace`] builds the new contents outside the lock and swaps them in.
//!
//! Objects sit in a slot table and every index set holds 4-byte slot numbers, so an index query
//! walks its set and reads the table without hashing a single key; client-go's index sets hold
//! key strings, which every hit hashes again.
//!
//! `benches/store.rs` measures this against index sets of keys and against dashmap items (with
//! the indexes under their own lock) on a 100k-Pod cache; the figures are in
//! `docs/bench-sections/store.md`. The slot table wins every index query and `list`, which is
//! what listers and controllers do most, and writes cost about the same. DashMap items win only
//! `get_by_key` while a writer runs non-stop, because that read skips the index lock; an
//! informer has a single writer that is rarely saturated. The maps hash with foldhash, which
//! the same benchmark compares with SipHash.

mod add_kind;
mod cache;
mod compact;
mod error;
#[cfg(test)]
mod free_probe;
mod incoming;
mod intern;
mod key;
mod lister;
mod object;
mod old;
mod projection;
mod selector;
mod shard;
mod thread_safe;
mod tombstone;
mod traits;

pub use crate::{
    add_kind::AddKind,
    cache::Cache,
    compact::{Codec, CodecError, CompactCache},
    error::{Error, Result},
    incoming::{Encoded, Incoming},
    intern::Interned,
    key::{KeyFunc, meta_namespace_key_func, split_key},
    lister::Lister,
    object::Object,
    old::OldObject,
    projection::ProjectedMeta,
    selector::{LabelSelector, parse_selector},
    shard::{Shard, ShardKey},
    tombstone::{DeletedFinalStateUnknown, ObjectOrTombstone},
    traits::{
        CacheReader, IndexFunc, Indexer, Indexers, ListInParts, NAMESPACE_INDEX, StagedReplace,
        Store, label_indexers, namespace_indexers, read_consistently,
    },
};
pub(crate) use crate::{
    key::{default_key_func, object_key},
    selector::selector_matches,
    traits::LABEL_INDEX,
};

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
