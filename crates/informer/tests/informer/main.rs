//! kinformer-informer's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod client_go_ports;
mod common;
mod compact_wire;
mod consistency_check;
mod fake_apiserver;
mod handler_ports;
mod ordering;
mod ports;
mod projection;
mod send_sync;
mod shard;
mod user_store;
