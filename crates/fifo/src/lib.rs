//! The informer's queues: what sits between a reflector, which writes every list and watch
//! event into a queue, and the informer's process loop, which pops them.
//!
//! This layer owns:
//!
//! - **the [`Queue`] trait**: a [`Store`](kinformer_store::Store) (so a reflector writes into
//!   any queue) plus an async [`pop`](Queue::pop) that hands what it popped to a synchronous
//!   process function while the queue's lock is held, [`has_synced`](Queue::has_synced) and
//!   [`close`](Queue::close). It is object safe: an informer holds an `Arc<dyn Queue<K>>`;
//! - **[`DeltaFifo`]**: client-go's DeltaFIFO, deltas accumulated per key ([`Deltas`]),
//!   deletions collapsed, tombstones ([`DeletedFinalStateUnknown`]) for keys a relist no
//!   longer has, resyncs that never overtake a queued change;
//! - **[`RealFifo`]**: client-go's in-order FIFO, every notification in arrival order, with
//!   batched pops ([`Queue::pop_batch`]) and, optionally, atomic replace/resync items
//!   ([`Popped::ReplacedAll`], [`Popped::SyncAll`]) as today's client-go informers use.
//!
//! It knows nothing of HTTP, watches or kube-client. Start with [`DeltaFifo`] and the
//! [`Queue`] trait; `API.md` beside this crate sums up the calls.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_fifo::{AddKind, DeltaFifo, DeltaFifoOptions, DeltaType, Processed, Queue};
//! use kinformer_store::Store;
//! use kube_core::ObjectMeta;
//!
//! fn pod(name: &str) -> Arc<Pod> {
//!     Arc::new(Pod {
//!         metadata: ObjectMeta {
//!             namespace: Some("default".into()),
//!             name: Some(name.into()),
//!             ..ObjectMeta::default()
//!         },
//!         ..Pod::default()
//!     })
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let fifo = DeltaFifo::new(DeltaFifoOptions::new().emit_delta_type_replaced(true));
//! fifo.replace(vec![pod("web-0"), pod("web-1")], "10")?;
//! fifo.update(pod("web-0").into())?;
//!
//! let mut seen = Vec::new();
//! let popped = fifo
//!     .pop(&mut |popped, kind| {
//!         assert_eq!(kind, AddKind::InitialList);
//!         seen.extend(popped.deltas().iter().map(|delta| delta.kind));
//!         Processed::Done
//!     })
//!     .await?;
//! assert_eq!(seen, [DeltaType::Replaced, DeltaType::Updated]);
//! assert_eq!(popped.deltas().len(), 2);
//! assert!(!fifo.has_synced(), "web-1 from the initial list is still queued");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Which queue
//!
//! Today's client-go (v0.36 and later, so v0.37 too) builds informers on a [`RealFifo`] with
//! atomic events and the lock released while processing (its `InOrderInformers`, `AtomicFIFO`
//! and `UnlockWhileProcessingFIFO` feature gates, all on by default):
//! [`RealFifoOptions::atomic`]. With the `InOrderInformers` gate off it falls back to a
//! [`DeltaFifo`] with the informer's indexer as known objects and `Replaced` emitted. A
//! DeltaFIFO built with [`DeltaFifoOptions::new`] has client-go's `NewDeltaFIFOWithOptions`
//! defaults: no known objects, and `Sync` (not `Replaced`) for a replace.
//!
//! # Differences from client-go
//!
//! - Objects without a name are refused with [`kinformer_store::Error::MissingName`] before
//!   anything is queued, by every write including `replace`; client-go keys them as `""`.
//! - A process function can requeue on both queues ([`Processed::Requeue`]); client-go's RealFIFO
//!   ignores requeue requests, ours puts the popped deltas back at the head.
//! - Transformers cannot fail (they map `Arc<K>` to `Arc<K>`).
//! - A known key that vanishes between `list_keys` and `get_by_key` gets no tombstone (a
//!   tombstone here always carries an object); client-go queues one with a nil object.
//! - DeltaFIFO `replace` queues tombstones for queued keys in queue order; client-go uses Go
//!   map order (random).
//!
//! # Concurrency
//!
//! Each queue is one `parking_lot::Mutex` around its state plus a `tokio::sync::Notify`. A
//! pop registers as a waiter before it looks at the queue, so an add or a close that lands in
//! between still wakes it. The process function runs under the lock, which is how processing a
//! key can never race a resync or replace of that key; it must therefore be quick and must not
//! call back into the queue.
//!
//! A [`DeltaFifo`] keeps each key's string once, in its queue slot, and finds slots through a
//! table of `(hash, sequence number)`; popped keys are swept from that table in one pass once
//! they outnumber the live ones, rather than probed for on every pop. A key costs one
//! allocation while queued, and its first delta is stored inline. A [`RealFifo`] is a
//! `VecDeque` of deltas. The figures behind these choices are in
//! `docs/bench-sections/fifo-rust.md`.

mod delta;
mod delta_fifo;
mod error;
mod queue;
mod real_fifo;

pub use kinformer_store::{AddKind, DeletedFinalStateUnknown, ObjectOrTombstone};

pub use crate::{
    delta::{Delta, DeltaType, Deltas, ListEnd, Popped, RelistEnd, RelistPart, ReplacedAll},
    delta_fifo::{DeltaFifo, DeltaFifoOptions},
    error::{BoxError, Error, Result},
    queue::{BoxFuture, KnownObjects, ProcessFn, Processed, Queue, Transformer},
    real_fifo::{DEFAULT_BATCH_SIZE, RealFifo, RealFifoOptions},
};

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
