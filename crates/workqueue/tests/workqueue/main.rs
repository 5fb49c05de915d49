//! kinformer-workqueue's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod delaying_queue;
mod metrics;
mod model;
mod parallelizer;
mod prometheus;
mod queue;
mod rate_limiters;
mod send_sync;
