//! Tracing of the reflector over HTTP. It lives in a test binary of its own because a
//! thread-scoped subscriber can miss events whose callsites other tests, running in parallel
//! without a subscriber, registered first.

use std::{io::Write, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::WireFormat;
use kinformer_reflector::{KubeListerWatcher, Reflector, ReflectorOptions};
use kinformer_store::{Cache, CacheReader};
use kinformer_testing::{FakeApiServer, Fault, Verb, eventually, fixtures};
use kinformer_wait::ExponentialBackoffManager;
use kube_client::{Api, Client, Config};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// How long a test waits for what the reflector does before it fails.
const PATIENCE: Duration = Duration::from_secs(20);

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
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for i in 0..4 {
        server.create_object(fixtures::pod(i)).expect("pod created");
    }
    let mut config = Config::new(server.url().parse().expect("the server URL parses"));
    config.default_retry = false;
    let client = Client::try_from(config).expect("client");
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        KubeListerWatcher::new(Api::<Pod>::all(client)).wire_format(WireFormat::from_env()),
        Arc::clone(&cache),
        ReflectorOptions::default().name("pods-under-test").backoff(
            ExponentialBackoffManager::new(
                Duration::from_millis(20),
                Duration::from_millis(200),
                Duration::from_secs(2),
                2.0,
                0.0,
            ),
        ),
    ));
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (reflector, token) = (Arc::clone(&reflector), token.clone());
        async move { reflector.run(token).await }
    });
    eventually("the list is stored", PATIENCE, || cache.list().len() == 4).await;
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    // Past one second a closed watch is resumed rather than counted as "very short".
    tokio::time::sleep(Duration::from_millis(1100)).await;
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
    token.cancel();
    tokio::time::timeout(Duration::from_secs(2), running)
        .await
        .expect("the reflector stops promptly")
        .expect("the reflector does not panic");
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
