//! kinformer-reflector's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod common;
mod errors_and_backoff;
mod lister_watchers;
mod listing;
mod resource_gone;
mod stopping;
mod watch_list;
mod watching;
