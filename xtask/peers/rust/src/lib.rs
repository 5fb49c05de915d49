//! The Rust benchmark peers of `cargo xtask bench`: `kinformer-peer` (kinformer's
//! `SharedInformerFactory`, as a user would use it) and `kube-runtime-peer` (kube-runtime 5's
//! `watcher` and `reflector`), run on the scenarios of `xtask/peers/BENCH-PROTOCOL.md` against
//! the same server as client-go's peer. This is a developer tool, not a layer: it is never
//! published and may depend on anything.
//!
//! What the two binaries share lives here, so the only difference between them is the
//! informer library: the command line ([`Args`]), the readings of `/proc/self`
//! ([`procfs`]), latency percentiles ([`Percentiles`]), every handler's view of the objects and
//! its checksum ([`Views`], [`Handler`]), the fake API server's bench endpoints ([`Admin`]),
//! the scenarios themselves ([`main`], given a [`Peer`]) and the result line ([`Report`]).
//!
//! **Start here:** the [`Peer`] trait, then `src/bin/kinformer-peer.rs`.
//!
//! Two helpers of the harness live beside the peers: `seed-pods` fills a real cluster with the
//! benchmark's Pods (for `sync-real`), and `decode-floor` times serde_json decoding a Pod list
//! with no informer at all.
//!
//! ```
//! use kinformer_bench_peers::{Args, Percentiles, Scenario, Views};
//!
//! let args = Args::parse([
//!     "kinformer-peer", "--scenario", "fanout", "--kubeconfig", "/tmp/kc", "--count", "100",
//! ])?;
//! assert_eq!((args.scenario, args.handlers, args.count), (Scenario::Fanout, 10, 100));
//!
//! // Ten handlers, the first one slow once the phase begins; none has seen anything yet.
//! let views = Views::new(args.handlers, args.scenario.slow_handler());
//! let handlers = views.handlers();
//! assert!(!handlers[0].is_slow());
//! views.begin_slow_calls();
//! assert!(handlers[0].is_slow() && !handlers[1].is_slow());
//! assert_eq!(views.with(0, |view| view.checksum()), "cbf29ce484222325");
//!
//! let latency = Percentiles::of(&mut [40, 10, 30, 20]);
//! assert_eq!((latency.p50, latency.max), (20, 40));
//! # Ok::<(), clap::Error>(())
//! ```

mod admin;
mod alloc;
mod cli;
mod latency;
pub mod procfs;
mod received;
mod report;
mod run;
mod view;

pub use admin::{Admin, Relisted, ServerChecksum};
pub use alloc::{ALLOCATOR_ENV, PeerAllocator, allocator_name};
pub use cli::{Args, Mode, Resource, Scenario};
pub use latency::{EMIT_NS_ANNOTATION, Percentiles, latency_us, now_unix_ns};
pub use report::{Report, Unsupported, print_result, progress};
pub use run::{APP_LABEL, Lookup, Peer, Query, SyncClock, client, main};
pub use view::{Handler, SENTINEL_PREFIX, View, Viewed, Views, key_of};
