//! The fake-server world: kube-client over real HTTP against kinformer-testing's fake API
//! server, on the real clock. After each fault a test throws, the cache must hold exactly what
//! the server holds ([`converges`]).

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{
    KubeListerWatcher, ListerWatcher, Reflector, ReflectorOptions, WireFormat,
};
use kinformer_store::{Cache, CacheReader, Object, Store};
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use kinformer_wait::ExponentialBackoffManager;
use kube_client::{Api, Client, Config};

use super::Running;

/// How long a test waits for what the reflector does before it fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// How soon after its token fires a reflector must have stopped: a hang guard, far above what
/// stopping takes on a loaded machine and far below the timers (a watch's minutes) a reflector
/// that missed the token would wait out.
const STOP_WITHIN: Duration = Duration::from_secs(15);

/// Runs a reflector of `lister_watcher` into a new cache, noting the errors it reports.
pub(crate) fn reflect<K: Object>(
    lister_watcher: impl ListerWatcher<K> + 'static,
    options: ReflectorOptions<K>,
) -> (Arc<Cache<K>>, Running<K, Cache<K>>) {
    let cache = Arc::new(Cache::default());
    let running = start(lister_watcher, &cache, options);
    (cache, running)
}

/// Runs `reflector` in a task; its options keep their own error handler.
#[allow(
    dead_code,
    reason = "the reflector_tracing binary spawns a reflector this way; the reflector binary does not"
)]
pub(crate) fn spawn<K: Object, S: Store<K> + ?Sized + 'static>(
    reflector: &Arc<Reflector<K, S>>,
) -> Running<K, S> {
    Running::spawn(reflector, STOP_WITHIN)
}

/// Runs a reflector of `lister_watcher` into `store`, noting the errors it reports.
pub(crate) fn start<K, S>(
    lister_watcher: impl ListerWatcher<K> + 'static,
    store: &Arc<S>,
    options: ReflectorOptions<K>,
) -> Running<K, S>
where
    K: Object,
    S: Store<K> + ?Sized + 'static,
{
    Running::start(lister_watcher, store, options, STOP_WITHIN)
}

/// A backoff that retries within tens of milliseconds, without jitter.
pub(crate) fn quick_backoff() -> ExponentialBackoffManager {
    ExponentialBackoffManager::new(
        Duration::from_millis(20),
        Duration::from_millis(200),
        Duration::from_secs(2),
        2.0,
        0.0,
    )
}

/// A fake API server holding the fixture pods `0..count`.
pub(crate) async fn server_with_pods(count: usize) -> FakeApiServer {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for i in 0..count {
        server.create_object(fixtures::pod(i)).expect("pod created");
    }
    server
}

/// A client for `server` without kube-client's own retries of 429/503/504, so that every injected
/// fault reaches the reflector.
pub(crate) fn client(server: &FakeApiServer) -> Client {
    let url = server.url().parse().expect("the server URL parses");
    let mut config = Config::new(url);
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// The Pods of `server`, in the wire format the environment asks for.
pub(crate) fn pods(server: &FakeApiServer) -> KubeListerWatcher<Pod> {
    KubeListerWatcher::new(Api::<Pod>::all(client(server))).wire_format(WireFormat::from_env())
}

/// Options that retry quickly.
pub(crate) fn quick<K>() -> ReflectorOptions<K> {
    ReflectorOptions::default().backoff(quick_backoff())
}

/// Every fixture pod number a test may create.
const FIXTURE_NUMBERS: std::ops::Range<usize> = 0..600;

/// The server's pods as key -> resourceVersion, read from its store directly so that injected
/// faults are left for the reflector.
fn server_pods(server: &FakeApiServer) -> BTreeMap<String, String> {
    FIXTURE_NUMBERS
        .filter_map(|i| {
            let namespace = fixtures::namespace_of(i);
            let pod = server.object("v1", "Pod", Some(&namespace), &format!("pod-{i}"))?;
            let version = pod["metadata"]["resourceVersion"].as_str()?.to_owned();
            Some((format!("{namespace}/pod-{i}"), version))
        })
        .collect()
}

fn key_and_version<K: Object>(object: &K) -> (String, String) {
    (
        format!(
            "{}/{}",
            object.namespace().unwrap_or_default(),
            object.name().unwrap_or_default()
        ),
        object.resource_version().unwrap_or_default().to_owned(),
    )
}

fn cached<K: Object>(cache: &Cache<K>) -> BTreeMap<String, String> {
    cache
        .list()
        .iter()
        .map(|object| key_and_version(&**object))
        .collect()
}

/// Waits until the cache holds exactly what the server holds.
pub(crate) async fn converges<K: Object>(server: &FakeApiServer, cache: &Cache<K>) {
    let started = Instant::now();
    loop {
        let want = server_pods(server);
        let got = cached(cache);
        if want == got {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the cache never converged: {} cached, {} on the server; missing {:?}, extra {:?}",
            got.len(),
            want.len(),
            want.keys()
                .filter(|key| !got.contains_key(*key))
                .take(5)
                .collect::<Vec<_>>(),
            got.keys()
                .filter(|key| !want.contains_key(*key))
                .take(5)
                .collect::<Vec<_>>(),
        );
        // Polling: the cache offers no change signal to wait on.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Changes the server: adds pods `first_new..first_new + 3`, deletes the first of them again
/// and updates the second.
pub(crate) fn churn(server: &FakeApiServer, first_new: usize) {
    for i in first_new..first_new + 3 {
        server.create_object(fixtures::pod(i)).expect("pod created");
    }
    server
        .delete_object(
            "v1",
            "Pod",
            Some(&fixtures::namespace_of(first_new)),
            &format!("pod-{first_new}"),
        )
        .expect("pod deleted");
    let second = first_new + 1;
    let mut updated = server
        .object(
            "v1",
            "Pod",
            Some(&fixtures::namespace_of(second)),
            &format!("pod-{second}"),
        )
        .expect("the pod exists");
    updated["metadata"]["labels"]["touched"] = serde_json::json!("yes");
    server.update_object(updated).expect("pod updated");
}

/// Waits until a watch has been open for over a second, so closing it is not a "very short
/// watch" (which client-go, and so the reflector, answers with a relist).
pub(crate) async fn watch_settles(server: &FakeApiServer) {
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    // The reflector's own real-time rule: a watch closed within a second is "very short".
    tokio::time::sleep(Duration::from_millis(1100)).await;
}
