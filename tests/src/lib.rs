//! Shared helpers for the workspace-level tests (test files live beside this crate as `tests/*.rs`).
