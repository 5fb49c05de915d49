//! The informer's fan-out: [`ResourceEventHandler`]s, and the [`SharedProcessor`] that relays
//! every change of the cache to each of them, isolated from one another.
//!
//! This layer owns:
//!
//! - **the handler seam**: [`ResourceEventHandler`] (`on_add`, `on_update`, `on_delete`), with
//!   [`HandlerFuncs`] built from closures and [`FilteringHandler`], which turns an object that
//!   starts or stops matching into an add or a delete;
//! - **[`Notification`]s** of `Arc` objects, so fan-out copies pointers, never objects;
//! - **[`SharedProcessor`]**: one listener per [`Registration`], each with its own buffer
//!   ([`BufferPolicy`]: an unbounded ring by default, coalesced per object, or bounded with
//!   counted drops) and its own
//!   consumer; per-listener resync periods and [`SharedProcessor::should_resync`]; per
//!   registration `has_synced` against the caller's [`UpstreamSynced`] signal; removal that
//!   returns at once and a [`Registration::stopped`] future that waits for the handler to exit;
//! - **[`EventStream`]**: a registration consumed as an async `Stream` instead of a handler.
//!
//! It knows nothing of HTTP, watches, queues or caches: the informer feeds it. Start with
//! [`SharedProcessor`].
//!
//! # Example
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! use kinformer_processor::{HandlerFuncs, ListenerOptions, Notification, Recipients, SharedProcessor};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kinformer_processor::Error> {
//! let processor = SharedProcessor::<String>::default();
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let record = Arc::clone(&seen);
//! let registration = processor.add_handler(
//!     HandlerFuncs::new().add_func(move |obj: Arc<String>, _initial| {
//!         record.lock().unwrap().push(obj.to_string());
//!     }),
//!     ListenerOptions::new().name("recorder"),
//! )?;
//!
//! let token = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (processor, token) = (processor.clone(), token.clone());
//!     async move { processor.run(token).await }
//! });
//!
//! processor.distribute(Notification::initial_add(Arc::new("web-0".into())), Recipients::All);
//! processor.upstream_synced().mark_synced(); // the informer does this after its first list
//! assert!(registration.synced().await);
//! assert_eq!(*seen.lock().unwrap(), ["web-0"]);
//!
//! token.cancel();
//! running.await.expect("the processor task panicked")?;
//! assert!(registration.is_stopped());
//! # Ok(())
//! # }
//! ```
//!
//! # Why a thread per handler
//!
//! Handlers are synchronous, as in client-go, and real ones block: a lock, a synchronous
//! client call, a slow disk. Run on a tokio task, one blocked handler would hold a runtime
//! worker, stalling every other listener and the reflector with it. `spawn_blocking` per
//! notification costs a pool hand-off per event; one long-lived `spawn_blocking` per listener
//! would work, but it holds a slot of tokio's shared blocking pool (which file I/O and DNS also
//! use) for the listener's lifetime, and its thread has no useful name. So each handler gets one
//! dedicated OS thread, named `kinformer-listener:<name>`, for the listener's lifetime, fed
//! through a mutex-guarded ring and a condvar that is signalled only when the thread sleeps. A
//! registration is made once per controller, so the thread's start and exit and its lazily
//! committed stack are paid once per registration, not per event. The per-event path is one
//! short lock on the distributing side and one per batch of up to 64 on the handler's side. The
//! figures are in `docs/benchmarks.md` and `docs/bench-sections/processor.md`. Streams need no
//! thread: their consumer polls.
//!
//! A caller with many notifications in hand (the informer, for each popped batch of deltas or a
//! relist) distributes them through [`SharedProcessor::batch`]: a sleeping consumer is woken once
//! 64 notifications wait for it and when the batch ends, instead of once per notification.
//! `benches/processor.rs` times both ways.
//!
//! # Deviations from client-go
//!
//! - A panicking handler call is caught, logged and counted, and the next notification is
//!   delivered at once; client-go waits a second first. An initial-list add whose handler panics
//!   still counts as handled, so the registration can sync (in client-go it never does).
//! - Distributing before [`SharedProcessor::run`] buffers instead of blocking.
//! - Removal and stop discard pending notifications, as client-go does, and say how many in a
//!   debug event.
//! - Buffers can be bounded. Besides client-go's unbounded ring, a listener can have a cap
//!   with counted drops ([`Overflow::DropNewest`], [`Overflow::DropOldest`]), a cap with
//!   backpressure up to a deadline ([`Overflow::Block`]), a cap past which the handler is
//!   brought level with the cache once it catches up ([`Overflow::Resync`]), or one pending
//!   notification per object ([`BufferPolicy::CoalesceByKey`]). The last two keep the
//!   handler's view right under any backlog; [`BufferPolicy`] says when to pick which.
//!   [`ListenerStats`] says how far behind a handler is, in time.
//! - `has_synced` latches: once true it stays true, as in the newest client-go's
//!   `SingleFileTracker`, and [`Registration::synced`] waits for it without polling.

mod buffer;
mod error;
mod handler;
mod key_handler;
mod listener;
mod options;
mod processor;
mod registration;
mod signal;
mod stream;

pub use crate::{
    buffer::{BufferPolicy, CacheSnapshot, Overflow},
    error::{Error, Result},
    handler::{FilteringHandler, HandlerFuncs, Notification, ResourceEventHandler},
    key_handler::KeyHandler,
    listener::ListenerStats,
    options::{HandlerExecutor, ListenerOptions},
    processor::{
        DistributionBatch, MINIMUM_RESYNC_PERIOD, ProcessorOptions, Recipients, SharedProcessor,
        determine_resync_period,
    },
    registration::Registration,
    signal::UpstreamSynced,
    stream::EventStream,
};
/// Re-exported from `kinformer-store`: what a deletion carries, and the key function
/// coalescing buffers merge by.
pub use kinformer_store::{
    AddKind, DeletedFinalStateUnknown, KeyFunc, ObjectOrTombstone, OldObject,
};

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
