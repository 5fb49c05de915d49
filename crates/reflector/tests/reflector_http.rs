//! The reflector against kinformer-testing's fake API server, over real HTTP through kube-client:
//! client-go's reflector behaviours and the faults a real cluster throws at a client. After each
//! fault the cache must hold exactly what the server holds.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{
    Error, KubeListerWatcher, ListerWatcher, Reflector, ReflectorExit, ReflectorOptions, WireFormat,
};
use kinformer_store::{Cache, CacheReader, Object, Store};
use kinformer_testing::{FakeApiServer, Fault, Verb, eventually, fixtures};
use kinformer_wait::ExponentialBackoffManager;
use kube_client::{Api, Client, Config};
use kube_core::{ApiResource, DynamicObject, PartialObjectMeta};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// How long a test waits for what the reflector does before it fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// Everything a test needs: the server, the errors the reflector reported, and a way to stop.
struct Running<K: Object, S: Store<K> + ?Sized> {
    reflector: Arc<Reflector<K, S>>,
    errors: Arc<Mutex<Vec<String>>>,
    token: CancellationToken,
    task: tokio::task::JoinHandle<ReflectorExit>,
}

impl<K: Object, S: Store<K> + ?Sized + 'static> Running<K, S> {
    fn errors(&self) -> Vec<String> {
        self.errors.lock().clone()
    }

    fn saw(&self, variant: &str) -> bool {
        self.errors().iter().any(|error| error.starts_with(variant))
    }

    async fn stop(self) {
        self.token.cancel();
        tokio::time::timeout(Duration::from_secs(2), self.task)
            .await
            .expect("the reflector stops promptly")
            .expect("the reflector does not panic");
    }
}

fn quick_backoff() -> ExponentialBackoffManager {
    ExponentialBackoffManager::new(
        Duration::from_millis(20),
        Duration::from_millis(200),
        Duration::from_secs(2),
        2.0,
        0.0,
    )
}

fn start<K, S>(
    lister_watcher: impl ListerWatcher<K> + 'static,
    store: &Arc<S>,
    options: ReflectorOptions<K>,
) -> Running<K, S>
where
    K: Object,
    S: Store<K> + ?Sized + 'static,
{
    let errors = Arc::new(Mutex::new(Vec::new()));
    let options = options.watch_error_handler({
        let errors = Arc::clone(&errors);
        move |error: &Error| errors.lock().push(format!("{error:?}"))
    });
    let reflector = Arc::new(Reflector::new(lister_watcher, Arc::clone(store), options));
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (reflector, token) = (Arc::clone(&reflector), token.clone());
        async move { reflector.run(token).await }
    });
    Running {
        reflector,
        errors,
        token,
        task,
    }
}

async fn server_with_pods(count: usize) -> FakeApiServer {
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
fn client(server: &FakeApiServer) -> Client {
    let url = server.url().parse().expect("the server URL parses");
    let mut config = Config::new(url);
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// The Pods of `server`, in the wire format the environment asks for.
fn pods(server: &FakeApiServer) -> KubeListerWatcher<Pod> {
    KubeListerWatcher::new(Api::<Pod>::all(client(server))).wire_format(WireFormat::from_env())
}

/// Options that retry quickly.
fn quick() -> ReflectorOptions<Pod> {
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
async fn converges<K: Object>(server: &FakeApiServer, cache: &Cache<K>) {
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
fn churn(server: &FakeApiServer, first_new: usize) {
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
async fn watch_settles(server: &FakeApiServer) {
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    // The reflector's own real-time rule: a watch closed within a second is "very short".
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

/// Ported from client-go's TestReflectorListAndWatch, over HTTP: list, replace, then every
/// change arrives through the watch.
#[tokio::test]
async fn lists_then_watches_and_the_cache_follows_every_change() {
    let server = server_with_pods(25).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    churn(&server, 100);
    converges(&server, &cache).await;
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 1);
    assert_eq!(
        running.reflector.last_sync_resource_version(),
        server.resource_version().to_string()
    );
    assert!(running.errors().is_empty(), "{:?}", running.errors());
    running.stop().await;
}

/// Ported from client-go's TestReflectorResyncWithResourceVersion family: a watch the server
/// closes is resumed from the last version, with no relist and nothing lost.
#[tokio::test]
async fn a_dropped_watch_resumes_from_the_last_version_without_relisting() {
    let server = server_with_pods(10).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    for round in 0..3 {
        watch_settles(&server).await;
        server.faults().close_watches();
        churn(&server, 100 + 10 * round);
        converges(&server, &cache).await;
    }
    assert_eq!(
        server.faults().request_count(Verb::List, "pods"),
        1,
        "no relist"
    );
    assert!(server.faults().request_count(Verb::Watch, "pods") >= 4);
    running.stop().await;
}

/// Ported from client-go's TestReflectorExpiredExactResourceVersion, over HTTP: after a
/// compaction the resumed watch gets 410 and the reflector relists; deletions that happened
/// meanwhile are not missed.
#[tokio::test]
async fn compaction_while_disconnected_makes_the_reflector_relist() {
    let server = server_with_pods(10).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    watch_settles(&server).await;
    server.stop_listener().await;
    churn(&server, 200);
    server.compact();
    server
        .restart_listener()
        .await
        .expect("the port is free again");
    converges(&server, &cache).await;
    eventually("the relist ran", PATIENCE, || {
        server.faults().request_count(Verb::List, "pods") == 2
    })
    .await;
    assert!(running.saw("Expired"), "{:?}", running.errors());
    running.stop().await;
}

/// A relist over HTTP with `reuse_known_objects` keeps the cached `Arc` of every Pod that did
/// not change while the watch was down (the decoded copy is dropped as it is decoded), and the
/// listed copy of the one that did.
#[tokio::test]
async fn a_relist_over_http_keeps_the_cached_copy_of_unchanged_objects() {
    // Pods 0 and NAMESPACES share a namespace.
    let server = server_with_pods(2 * fixtures::NAMESPACES).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let known = Arc::clone(&cache);
    let running = start(
        pods(&server),
        &cache,
        quick().reuse_known_objects(move |pod: &Pod| known.get(pod).ok().flatten()),
    );
    converges(&server, &cache).await;
    watch_settles(&server).await;
    let before = |name: &str| {
        cache
            .get_by_key(&format!("{}/{name}", fixtures::namespace_of(0)))
            .expect("cached")
    };
    let changed = before("pod-0");
    server.stop_listener().await;
    let mut updated = server
        .object("v1", "Pod", Some(&fixtures::namespace_of(0)), "pod-0")
        .expect("the pod exists");
    updated["metadata"]["labels"]["touched"] = serde_json::json!("yes");
    let other_name = format!("pod-{}", fixtures::NAMESPACES);
    let other = before(&other_name);
    server.update_object(updated).expect("pod updated");
    server.compact();
    server
        .restart_listener()
        .await
        .expect("the port is free again");
    converges(&server, &cache).await;
    eventually("the relist ran", PATIENCE, || {
        server.faults().request_count(Verb::List, "pods") == 2
    })
    .await;
    assert!(
        Arc::ptr_eq(&before(&other_name), &other),
        "an unchanged Pod keeps its cached Arc"
    );
    assert!(
        !Arc::ptr_eq(&before("pod-0"), &changed),
        "a changed Pod is the listed copy"
    );
    assert_ne!(
        before("pod-0").metadata.resource_version,
        changed.metadata.resource_version
    );
    running.stop().await;
}

/// A 410 answered to the watch request itself (not inside the stream) also leads to a relist.
#[tokio::test]
async fn a_410_status_on_the_watch_request_relists() {
    let server = server_with_pods(5).await;
    server
        .faults()
        .inject(Fault::status(410).verb(Verb::Watch).resource("pods"));
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    eventually("the relist ran", PATIENCE, || {
        server.faults().request_count(Verb::List, "pods") == 2
    })
    .await;
    churn(&server, 50);
    converges(&server, &cache).await;
    assert!(running.saw("Expired"), "{:?}", running.errors());
    running.stop().await;
}

/// Ported from client-go's TestReflectorFullListIfExpired and TestReflectorWatchListPageSize,
/// over HTTP: a 410 on the first list turns it into a paginated consistent read; when a
/// continuation page then expires (a compaction between pages), the reflector lists everything
/// at once and still ends up with exactly the server's contents.
#[tokio::test]
async fn pagination_and_its_fallback_when_a_continue_token_expires() {
    let server = server_with_pods(30).await;
    let faults = server.faults().clone();
    faults.inject(Fault::status(410).verb(Verb::List).resource("pods"));
    // The compaction below must land while the continuation request waits out this delay; a
    // second leaves room for a loaded machine.
    faults.set_delay(Some(Duration::from_secs(1)));
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick().page_size(7));
    // Request 1 is the faulted list at "0", request 2 the first page of the consistent read.
    eventually("the first page is requested", PATIENCE, || {
        faults.request_count(Verb::List, "pods") == 2
    })
    .await;
    server
        .create_object(fixtures::pod(500))
        .expect("pod created");
    server.compact();
    converges(&server, &cache).await;
    faults.set_delay(None);
    // 1 faulted + 1 first page + 1 expired continuation + 1 full list.
    assert_eq!(faults.request_count(Verb::List, "pods"), 4);
    running.stop().await;
}

/// Without a fault, a page size splits a consistent relist into pages.
#[tokio::test]
async fn a_consistent_relist_is_paginated_by_the_page_size() {
    let server = server_with_pods(30).await;
    server
        .faults()
        .inject(Fault::status(410).verb(Verb::List).resource("pods"));
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick().page_size(7));
    converges(&server, &cache).await;
    // 1 faulted list at "0", then ceil(30 / 7) = 5 pages.
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 6);
    running.stop().await;
}

/// Ported from client-go's TestReflectorListAndWatch ("UseWatchList enabled"), over HTTP: the
/// initial state comes from a streaming list ended by the initial-events-end bookmark, and no
/// list request is made.
#[tokio::test]
async fn a_streaming_list_fills_the_cache_without_any_list_request() {
    let server = server_with_pods(20).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick().use_watch_list(true));
    converges(&server, &cache).await;
    churn(&server, 100);
    converges(&server, &cache).await;
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 0);
    assert_eq!(server.faults().request_count(Verb::Watch, "pods"), 1);
    running.stop().await;
}

/// A failed streaming list falls back to list and watch.
#[tokio::test]
async fn a_failing_streaming_list_falls_back_to_list_and_watch() {
    let server = server_with_pods(8).await;
    server
        .faults()
        .inject(Fault::status(400).verb(Verb::Watch).resource("pods"));
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick().use_watch_list(true));
    converges(&server, &cache).await;
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 1);
    assert!(running.saw("Api { code: 400"), "{:?}", running.errors());
    running.stop().await;
}

/// 403 on list is reported, retried with backoff, and the reflector recovers once allowed.
#[tokio::test]
async fn forbidden_lists_are_reported_and_retried() {
    let server = server_with_pods(5).await;
    server.faults().inject(
        Fault::status(403)
            .verb(Verb::List)
            .resource("pods")
            .times(3),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    let forbidden = running
        .errors()
        .iter()
        .filter(|e| e.starts_with("Forbidden"))
        .count();
    assert_eq!(forbidden, 3, "{:?}", running.errors());
    running.stop().await;
}

/// 500s on list and watch are reported and retried until the server recovers.
#[tokio::test]
async fn internal_errors_are_reported_and_retried() {
    let server = server_with_pods(5).await;
    let faults = server.faults();
    faults.inject(
        Fault::status(500)
            .verb(Verb::List)
            .resource("pods")
            .times(2),
    );
    faults.inject(
        Fault::status(500)
            .verb(Verb::Watch)
            .resource("pods")
            .times(2),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    churn(&server, 30);
    converges(&server, &cache).await;
    let internal = running
        .errors()
        .iter()
        .filter(|e| e.contains("code: 500"))
        .count();
    assert_eq!(internal, 4, "{:?}", running.errors());
    running.stop().await;
}

/// A 429's Retry-After delays the next attempt by at least that long.
#[tokio::test]
async fn too_many_requests_waits_for_retry_after() {
    let server = server_with_pods(5).await;
    server.faults().inject(
        Fault::status(429)
            .verb(Verb::List)
            .resource("pods")
            .retry_after(2),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let started = Instant::now();
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        running.saw("TooManyRequests { retry_after: Some(2s)"),
        "{:?}",
        running.errors()
    );
    running.stop().await;
}

/// Garbage in a watch stream is a decode error, reported; the reflector relists and loses
/// nothing.
#[tokio::test]
async fn garbage_watch_lines_are_reported_and_the_cache_recovers() {
    let server = server_with_pods(6).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    server.faults().inject_watch_line("{not json at all");
    churn(&server, 40);
    converges(&server, &cache).await;
    eventually("the decode error is reported", PATIENCE, || {
        running.saw("Decode")
    })
    .await;
    let decode = running
        .errors()
        .into_iter()
        .find(|e| e.starts_with("Decode"))
        .unwrap_or_default();
    // What arrived is described by its size and where decoding stopped, never quoted.
    assert!(
        decode.contains("size: 16") && decode.contains("line 1 column 2"),
        "{decode}"
    );
    assert!(!decode.contains("not json"), "{decode}");
    running.stop().await;
}

/// An ERROR event whose object is not a Status (here a Secret) is reported by what it
/// carried, kind and name, not as an empty "API error 0", and none of its data reaches the
/// error; the reflector relists and loses nothing.
#[tokio::test]
async fn an_error_event_without_a_status_is_reported_by_kind_and_name_without_its_data() {
    let server = server_with_pods(6).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    server.faults().inject_watch_line(
        r#"{"type":"ERROR","object":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"prod"},"data":{"password":"aHVudGVyMg=="}}}"#,
    );
    eventually("the event is reported", PATIENCE, || {
        running
            .errors()
            .iter()
            .any(|error| error.contains("ERROR event"))
    })
    .await;
    let reported = running
        .errors()
        .into_iter()
        .find(|error| error.contains("ERROR event"))
        .unwrap_or_default();
    assert!(reported.contains("v1/Secret prod/db"), "{reported}");
    assert!(reported.contains("not a Status"), "{reported}");
    assert!(!reported.contains("aHVudGVyMg"), "{reported}");
    assert!(!reported.contains("API error 0"), "{reported}");
    churn(&server, 10);
    converges(&server, &cache).await;
    running.stop().await;
}

/// Ported from client-go's TestReflectorWatchHandler: an object of another kind in the stream is
/// reported and skipped; the watch goes on.
#[tokio::test]
async fn an_object_of_the_wrong_kind_is_reported_and_skipped() {
    let server = server_with_pods(3).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    server.faults().inject_watch_line(
        r#"{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"intruder","namespace":"ns-0","resourceVersion":"1"}}}"#,
    );
    eventually("the wrong kind is reported", PATIENCE, || {
        running.saw("WrongKind")
    })
    .await;
    churn(&server, 20);
    converges(&server, &cache).await;
    assert_eq!(
        server.faults().request_count(Verb::Watch, "pods"),
        1,
        "the watch went on"
    );
    running.stop().await;
}

/// The API server going away mid-watch (connection refused for a while) is reported, and the
/// reflector catches up with everything that changed meanwhile.
#[tokio::test]
async fn a_server_restart_mid_watch_loses_nothing() {
    let server = server_with_pods(10).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    server.stop_listener().await;
    churn(&server, 300);
    // The outage lasts a while, so the reflector meets refused connections, not just one.
    tokio::time::sleep(Duration::from_millis(500)).await;
    server
        .restart_listener()
        .await
        .expect("the port is free again");
    converges(&server, &cache).await;
    assert!(!running.errors().is_empty(), "the outage is reported");
    running.stop().await;
}

/// No hot loop: while the server refuses every list, the reflector's default backoff (800ms
/// doubling, jittered up to 2x) spaces the attempts, over real HTTP: the third comes no sooner
/// than 2.4 s after the first (a lower bound, which a loaded machine can only stretch).
/// Afterwards it recovers. The schedule itself is checked on the paused clock in
/// reflector_in_memory.rs.
#[tokio::test]
async fn a_refusing_server_sees_requests_only_at_the_backoff_schedule() {
    let server = server_with_pods(4).await;
    server.faults().inject(
        Fault::status(500)
            .verb(Verb::List)
            .resource("pods")
            .times(10_000),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let client = client(&server);
    let running = start(
        KubeListerWatcher::new(Api::<Pod>::all(client)).wire_format(WireFormat::from_env()),
        &cache,
        ReflectorOptions::default(),
    );
    eventually("a first attempt", PATIENCE, || {
        server.faults().request_count(Verb::List, "pods") >= 1
    })
    .await;
    let first = Instant::now();
    eventually("a third attempt", PATIENCE, || {
        server.faults().request_count(Verb::List, "pods") >= 3
    })
    .await;
    // Attempts come after at least 0.8s, then 1.6s more.
    assert!(
        first.elapsed() >= Duration::from_millis(2_400),
        "three list requests within {:?}",
        first.elapsed()
    );
    server.faults().clear();
    converges(&server, &cache).await;
    running.stop().await;
}

/// Stopping while watching closes the watch connection at once.
#[tokio::test]
async fn stopping_while_watching_closes_the_watch() {
    let server = server_with_pods(3).await;
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    converges(&server, &cache).await;
    eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
    running.stop().await;
    eventually("the server sees the watch gone", PATIENCE, || {
        server.open_watches() == 0
    })
    .await;
}

/// Stopping while a (slow) list is in flight returns promptly.
#[tokio::test]
async fn stopping_while_listing_returns_promptly() {
    let server = server_with_pods(3).await;
    server.faults().set_delay(Some(Duration::from_secs(30)));
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(pods(&server), &cache, quick());
    // The fake server counts a request only once its delay is over; give the list time to leave.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = Instant::now();
    running.stop().await;
    assert!(stopping.elapsed() < Duration::from_secs(1));
    assert!(cache.list().is_empty());
}

/// A namespaced, label-selected typed lister-watcher caches only what it selects.
#[tokio::test]
async fn namespace_and_label_selectors_narrow_the_cache() {
    let server = server_with_pods(40).await;
    let client = client(&server);
    let lister_watcher = KubeListerWatcher::new(Api::<Pod>::namespaced(client, "ns-3"))
        .wire_format(WireFormat::from_env())
        .labels("tier=backend")
        .tweak_list_options(|options| {
            options.field_selector = Some("metadata.namespace=ns-3".into());
        });
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(
        lister_watcher,
        &cache,
        ReflectorOptions::default().backoff(quick_backoff()),
    );
    // pod-3, 13, 23, 33 live in ns-3; those with i % 3 == 0 are frontends (3, 33).
    let want: Vec<String> = vec!["ns-3/pod-13".into(), "ns-3/pod-23".into()];
    eventually("the selection is cached", PATIENCE, || {
        let mut keys = cache.list_keys();
        keys.sort();
        keys == want
    })
    .await;
    server
        .create_object(fixtures::pod(43))
        .expect("pod created");
    eventually("the new match arrives", PATIENCE, || {
        cache.list_keys().len() == 3
    })
    .await;
    running.stop().await;
}

/// Metadata-only and dynamic lister-watchers fill their caches like the typed one.
#[tokio::test]
async fn metadata_and_dynamic_lister_watchers_converge() {
    let server = server_with_pods(12).await;
    let client = client(&server);

    let metadata_cache = Arc::new(Cache::<PartialObjectMeta<Pod>>::default());
    let metadata = start(
        KubeListerWatcher::metadata(Api::<Pod>::all(client.clone())),
        &metadata_cache,
        ReflectorOptions::default().backoff(quick_backoff()),
    );
    let resource = ApiResource::erase::<Pod>(&());
    let dynamic_cache = Arc::new(Cache::<DynamicObject>::default());
    let dynamic = start(
        KubeListerWatcher::dynamic(Api::all_with(client, &resource), &resource),
        &dynamic_cache,
        ReflectorOptions::default().backoff(quick_backoff()),
    );
    converges(&server, &metadata_cache).await;
    converges(&server, &dynamic_cache).await;
    churn(&server, 60);
    converges(&server, &metadata_cache).await;
    converges(&server, &dynamic_cache).await;
    assert!(metadata.errors().is_empty(), "{:?}", metadata.errors());
    assert!(dynamic.errors().is_empty(), "{:?}", dynamic.errors());
    metadata.stop().await;
    dynamic.stop().await;
}

/// A metadata-only lister-watcher asks for protobuf by default, as client-go's metadata client
/// does, and fills the same cache in either format.
#[tokio::test]
async fn metadata_lister_watchers_fill_the_cache_in_protobuf_and_in_json() {
    for format in [WireFormat::Protobuf, WireFormat::Json] {
        let server = server_with_pods(12).await;
        let cache = Arc::new(Cache::<PartialObjectMeta<Pod>>::default());
        let running = start(
            KubeListerWatcher::metadata(Api::<Pod>::all(client(&server))).wire_format(format),
            &cache,
            ReflectorOptions::default().backoff(quick_backoff()),
        );
        converges(&server, &cache).await;
        churn(&server, 60);
        converges(&server, &cache).await;
        assert!(
            running.errors().is_empty(),
            "{format:?}: {:?}",
            running.errors()
        );
        for object in cache.list() {
            let types = object.types.as_ref().expect("every object has its type");
            assert_eq!(
                (types.api_version.as_str(), types.kind.as_str()),
                ("meta.k8s.io/v1", "PartialObjectMetadata"),
                "{format:?}"
            );
        }
        let served = server.content_types();
        let protobuf_served = served
            .keys()
            .filter(|kind| kind.contains("protobuf"))
            .count();
        match format {
            WireFormat::Protobuf => assert!(
                protobuf_served > 0 && !served.contains_key("application/json"),
                "{served:?}"
            ),
            WireFormat::Json => assert_eq!(protobuf_served, 0, "{served:?}"),
        }
        running.stop().await;
    }
}

/// Decodes like `JsonDecoder`, but holds each page that has a next one until the server has
/// seen the next request, noting how many list requests the server had seen when each page
/// finished decoding.
struct SlowDecoder {
    inner: kinformer_reflector::JsonDecoder<Pod>,
    faults: kinformer_testing::Faults,
    lists_seen: Arc<Mutex<Vec<u64>>>,
}

impl kinformer_reflector::Decoder<Pod> for SlowDecoder {
    fn continue_token(&self, body: &[u8]) -> Option<String> {
        self.inner.continue_token(body)
    }

    fn decode_list(
        &self,
        body: &[u8],
    ) -> kinformer_reflector::Result<kinformer_reflector::ListPage<Pod>> {
        let page = self.inner.decode_list(body);
        // A page with a next one keeps decoding until that next request reaches the server (or
        // 10 s pass): the request can only arrive meanwhile if it was sent ahead of this decode.
        // Waiting on the count, not on a fixed sleep, keeps a loaded machine from failing it.
        if self.inner.continue_token(body).is_some() {
            let next_request = self.lists_seen.lock().len() as u64 + 3;
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while self.faults.request_count(Verb::List, "pods") < next_request
                && std::time::Instant::now() < deadline
            {
                // Polling the server's count from a decoding thread, which cannot await.
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.lists_seen
            .lock()
            .push(self.faults.request_count(Verb::List, "pods"));
        page
    }

    fn decode_event(
        &self,
        line: &[u8],
    ) -> kinformer_reflector::Result<kinformer_reflector::WatchEvent<Pod>> {
        self.inner.decode_event(line)
    }
}

/// While a page decodes, the next one is already requested: by the time page n has decoded, the
/// server has seen the request for page n + 1.
#[tokio::test]
async fn the_next_page_is_requested_while_the_current_one_decodes() {
    let server = server_with_pods(200).await;
    server
        .faults()
        .inject(Fault::status(410).verb(Verb::List).resource("pods"));
    let lists_seen = Arc::new(Mutex::new(Vec::new()));
    let decoder = SlowDecoder {
        inner: kinformer_reflector::JsonDecoder::new(None),
        faults: server.faults().clone(),
        lists_seen: Arc::clone(&lists_seen),
    };
    let lister_watcher = KubeListerWatcher::with_decoder(Api::<Pod>::all(client(&server)), decoder);
    let cache = Arc::new(Cache::<Pod>::default());
    let running = start(
        lister_watcher,
        &cache,
        ReflectorOptions::default()
            .backoff(quick_backoff())
            .page_size(50),
    );
    converges(&server, &cache).await;
    // Request 1 was the faulted list; pages 1..=4 are requests 2..=5. When page n (of 4) has
    // decoded, request n + 2 (the next page) has reached the server too, except after the last.
    assert_eq!(*lists_seen.lock(), [3, 4, 5, 5]);
    assert_eq!(
        server.faults().request_count(Verb::List, "pods"),
        5,
        "no page fetched twice"
    );
    running.stop().await;
}
