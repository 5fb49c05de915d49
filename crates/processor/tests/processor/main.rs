//! kinformer-processor's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod client_go_ports;
mod common;
mod executor;
mod isolation;
mod resync;
mod send_sync;
mod stream;
