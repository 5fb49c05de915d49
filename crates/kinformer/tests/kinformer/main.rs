//! kinformer's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod controller;
mod quickstart;
mod replica_set;
mod subcrates;
