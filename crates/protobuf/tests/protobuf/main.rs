//! kinformer-protobuf's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod differential;
mod errors;
mod fuzz;
mod go_semantics;
mod list_splitter;
mod mutation;
mod roundtrip;
