//! Tracing of the reflector over HTTP. It lives in a test binary of its own because a
//! thread-scoped subscriber can miss events whose callsites other tests, running in parallel
//! without a subscriber, registered first.

#[allow(
    dead_code,
    reason = "the harness serves the reflector's other test binary too; this one uses part of it"
)]
#[path = "reflector/common/mod.rs"]
mod common;

use std::{io::Write, sync::Arc};

use common::fake_server::{PATIENCE, pods, quick, server_with_pods, spawn, watch_settles};
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::Reflector;
use kinformer_store::{Cache, CacheReader};
use kinformer_testing::{Fault, Verb, eventually};
use parking_lot::Mutex;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The reflector's span names the resource; list, watch and relist events are traced with their
/// counts and reasons.
#[tokio::test]
async fn list_watch_and_relist_are_traced_inside_the_reflector_span() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer({
            let captured = captured.clone();
            move || captured.clone()
        })
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let server = server_with_pods(4).await;
    let cache = Arc::new(Cache::<Pod>::default());
    // Spawned with the reflector's own error handler, which traces as well.
    let running = spawn(&Arc::new(Reflector::new(
        pods(&server),
        Arc::clone(&cache),
        quick().name("pods-under-test"),
    )));
    eventually("the list is stored", PATIENCE, || cache.list().len() == 4).await;
    // Past one second a closed watch is resumed rather than counted as "very short".
    watch_settles(&server).await;
    server
        .faults()
        .inject(Fault::status(410).verb(Verb::Watch).resource("pods"));
    server.faults().close_watches();
    eventually("the relist ran", PATIENCE, || {
        server.faults().request_count(Verb::List, "pods") == 2
    })
    .await;
    eventually("a watch is open again", PATIENCE, || {
        server.open_watches() == 1
    })
    .await;
    running.stop().await;
    let logs = String::from_utf8_lossy(&captured.0.lock()).into_owned();
    for needle in [
        "reflector{name=pods-under-test resource=v1/Pod",
        "list started",
        "list finished items=4",
        "watch started",
        "watch ended, resuming",
        "reason=\"closed by the server\"",
        "relisting",
        "reason=\"resource version expired\"",
        "backing off",
        "reflector stopped",
    ] {
        assert!(logs.contains(needle), "no {needle:?} in the logs:\n{logs}");
    }
}
