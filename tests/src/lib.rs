//! Shared helpers for the workspace-level tests (the test files live beside this crate as
//! `tests/<crate>_<topic>.rs`).
//!
//! The main job here is the differential harness: [`GoPeer`] builds one of the Go programs in
//! `xtask/peers/client-go` (once per source hash, cached under `target/`), keeps it running, and
//! exchanges operation scripts with it. [`fifo_script`] is the script format the `fifo-peer`
//! program speaks (client-go's DeltaFIFO and RealFIFO), [`store_script`] the one `store-peer`
//! speaks (client-go's Indexer); both are documented for people in
//! `xtask/peers/client-go/README.md`.
//!
//! Start with [`GoPeer::start`].
//!
//! # Example
//!
//! ```
//! use kinformer_tests::fifo_script::{Op, ObjectSpec, QueueKind, Script};
//!
//! let script = Script {
//!     id: "example".into(),
//!     queue: QueueKind::Delta,
//!     known_objects: true,
//!     emit_replaced: true,
//!     atomic_events: false,
//!     ops: vec![Op::Add { object: ObjectSpec::new("ns", "a", "1") }, Op::Pop { requeue: false }],
//! };
//! let lines = script.to_lines();
//! assert_eq!(lines.len(), 4, "begin, two ops, end");
//! assert!(lines[1].contains(r#""op":"add""#));
//! ```

pub mod fifo_script;
mod go_peer;
pub mod store_script;

pub use crate::go_peer::{Error, GoPeer, build_peer, peer_module_dir};
