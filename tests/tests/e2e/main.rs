//! The end-to-end suite: every test runs the same checks against the backend
//! `KINFORMER_E2E_BACKEND` names (kinformer-testing's fake by default, or the real API server
//! `cargo xtask e2e` starts or finds), one module per concern, built as one test binary so that
//! it links once and the tests run side by side.

#[path = "e2e_support/config_maps.rs"]
mod config_maps;
mod e2e_support;
#[path = "e2e_support/informers.rs"]
mod informers;
#[path = "e2e_support/processes.rs"]
mod processes;

mod e2e_cache;
mod e2e_conformance;
mod e2e_controller;
mod e2e_informer;
mod e2e_informer_handlers;
mod e2e_informer_recovery;
mod e2e_leader;
mod e2e_lifecycle;
mod e2e_protobuf;
mod e2e_replica_set;
mod e2e_restart;
mod e2e_shard;
mod e2e_sharded_informer;
