//! kinformer-testing's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod api;
#[cfg(feature = "bench")]
mod bench_endpoints;
mod common;
mod faults;
mod lists;
mod protobuf;
mod watch;
