//! kinformer-factory's integration tests: one module per concern, built as one test binary so that
//! they link once and run side by side.

mod compact_cache;
mod dynamic_informer;
mod factory_fake_apiserver;
mod factory_send_sync;
mod lifecycle;
mod metadata_informer;
mod metrics;
mod read_your_writes;
mod shard;
mod sync_failures;
mod watch_decode_workers;
