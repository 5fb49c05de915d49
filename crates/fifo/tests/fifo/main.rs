//! kinformer-fifo's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod common;
mod concurrency;
mod delta_fifo;
mod in_parts;
mod model;
mod real_fifo;
