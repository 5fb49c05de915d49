//! kinformer-store's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod label_index;
mod store_concurrency;
mod store_model;
mod store_send_sync;
mod store_snapshot;
