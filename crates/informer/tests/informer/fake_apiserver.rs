//! The informer over kube-client against kinformer-testing's HTTP fake API server: Pods sync,
//! then adds, updates and deletes arrive; three very different handlers under churn; a relist
//! after missed deletions.

use crate::common;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use common::Recorder;
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{
    AddKind, BufferPolicy, InformerOptions, ListenerOptions, Overflow, QueueKind,
    ResourceEventHandler, SharedIndexInformer,
};
use kinformer_reflector::KubeListerWatcher;
use kinformer_reflector::WireFormat;
use kinformer_store::ObjectOrTombstone;
use kinformer_testing::{FakeApiServer, fixtures, wait_until};
use kube_client::Api;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
/// How long an informer may take to come back after its server's listener was down: the
/// reflector backs off 0.8 s doubling to 30 s, with jitter that can double a delay, between
/// the attempts that failed meanwhile, so a correct informer can wait most of a minute on a
/// loaded machine. A passing run comes back after the first delay that ends once the listener
/// is up; the bound ends a hung test, it does not time the informer.
const RECONNECT: Duration = Duration::from_secs(90);
const SENT_AT: &str = "kinformer.test/sent-at-micros";

fn informer(server: &FakeApiServer, options: InformerOptions<Pod>) -> SharedIndexInformer<Pod> {
    let client = server.client().expect("a client for the fake server");
    SharedIndexInformer::new(
        KubeListerWatcher::new(Api::<Pod>::all(client)).wire_format(WireFormat::from_env()),
        common::cache_from_env(options),
    )
}

fn start(
    informer: &SharedIndexInformer<Pod>,
) -> (
    CancellationToken,
    JoinHandle<kinformer_informer::Result<()>>,
) {
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    (token, task)
}

async fn stop(token: CancellationToken, task: JoinHandle<kinformer_informer::Result<()>>) {
    token.cancel();
    task.await
        .expect("the informer task panicked")
        .expect("the informer ran");
}

fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros()
}

fn pod_name(i: usize) -> String {
    fixtures::pod(i)["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn touch(server: &FakeApiServer, i: usize) {
    let namespace = fixtures::namespace_of(i);
    let Some(mut current) = server.object("v1", "Pod", Some(&namespace), &pod_name(i)) else {
        return;
    };
    current["metadata"]["annotations"][SENT_AT] = json!(now_micros().to_string());
    server
        .update_object(current)
        .expect("the update is accepted");
}

/// The server's view: name to resourceVersion.
fn server_view(server: &FakeApiServer, count: usize) -> BTreeMap<String, String> {
    (0..count)
        .filter_map(|i| {
            let obj: Value =
                server.object("v1", "Pod", Some(&fixtures::namespace_of(i)), &pod_name(i))?;
            let version = obj["metadata"]["resourceVersion"].as_str()?.to_owned();
            Some((pod_name(i), version))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_sync_from_the_fake_server_then_adds_updates_and_deletes_arrive() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for i in 0..3 {
        server.create_object(fixtures::pod(i)).expect("created");
    }
    let informer = informer(&server, InformerOptions::new().name("pods"));
    let recorder = Recorder::new();
    let registration = informer.add_event_handler(recorder.handler()).unwrap();
    let (token, task) = start(&informer);
    assert_eq!(informer.wait_for_cache_sync(WAIT, &token).await, Ok(()));
    assert!(
        tokio::time::timeout(WAIT, registration.synced())
            .await
            .unwrap()
    );
    assert_eq!(recorder.of_kind("initial"), ["pod-0", "pod-1", "pod-2"]);
    assert_eq!(informer.cache().list_keys().len(), 3);
    assert!(!informer.last_sync_resource_version().is_empty());

    server.create_object(fixtures::pod(3)).unwrap();
    touch(&server, 1);
    server
        .delete_object("v1", "Pod", Some(&fixtures::namespace_of(2)), "pod-2")
        .unwrap();
    assert!(
        wait_until(WAIT, || recorder.count() == 6).await,
        "got {:?}",
        recorder.events()
    );
    assert_eq!(
        recorder.events()[3..],
        ["add:pod-3", "update:pod-1", "delete:pod-2"]
    );
    let cached = informer
        .lister()
        .namespaced(fixtures::namespace_of(1))
        .get("pod-1")
        .expect("pod-1 is cached");
    assert!(
        cached
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(SENT_AT))
    );
    assert_eq!(
        informer.last_sync_resource_version(),
        server.resource_version().to_string()
    );
    stop(token, task).await;
}

/// A handler that keeps a name-to-resourceVersion view, optionally sleeping or panicking on
/// every tenth call (after updating its view, so its view stays complete).
struct ViewHandler {
    view: Arc<Mutex<BTreeMap<String, String>>>,
    latencies: Arc<Mutex<Vec<Duration>>>,
    delay: Duration,
    panic_every: Option<u64>,
    calls: u64,
}

impl ViewHandler {
    fn new(delay: Duration, panic_every: Option<u64>) -> Self {
        Self {
            view: Arc::default(),
            latencies: Arc::default(),
            delay,
            panic_every,
            calls: 0,
        }
    }

    fn record(&mut self, pod: &Pod, present: bool) {
        std::thread::sleep(self.delay); // the point: a handler that is slow
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut view = self.view.lock().unwrap();
        if present {
            view.insert(
                name,
                pod.metadata.resource_version.clone().unwrap_or_default(),
            );
        } else {
            view.remove(&name);
        }
        drop(view);
        let sent = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(SENT_AT))
            .and_then(|sent| sent.parse::<u128>().ok());
        if let Some(sent) = sent {
            let micros = now_micros().saturating_sub(sent);
            self.latencies.lock().unwrap().push(Duration::from_micros(
                u64::try_from(micros).unwrap_or(u64::MAX),
            ));
        }
        self.calls += 1;
        if let Some(every) = self.panic_every
            && self.calls.is_multiple_of(every)
        {
            panic!("handler panics on call {} by design", self.calls);
        }
    }
}

impl ResourceEventHandler<Pod> for ViewHandler {
    fn on_add(&mut self, obj: Arc<Pod>, _kind: AddKind) {
        self.record(&obj, true);
    }

    fn on_update(&mut self, _old: Arc<Pod>, new: Arc<Pod>) {
        self.record(&new, true);
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<Pod>) {
        self.record(obj.object(), false);
    }
}

fn percentile(latencies: &[Duration], fraction: f64) -> Duration {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// Five handlers under churn: a slow one (10 ms a call), the same behind a coalescing buffer
/// and behind a small buffer that resyncs on overflow, one that panics on every tenth call,
/// and a normal one. The normal one keeps up, the panicking one keeps receiving, the coalescing
/// one handles fewer notifications than the slow one, the resyncing one overflows and is caught
/// up, and once the churn is over every handler's view equals the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_and_a_panicking_handler_do_not_disturb_a_normal_one_under_churn() {
    const PODS: usize = 40;
    const CHANGES: usize = 400;
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for i in 0..PODS {
        server.create_object(fixtures::pod(i)).unwrap();
    }
    let informer = informer(&server, InformerOptions::new());
    let slow = ViewHandler::new(Duration::from_millis(10), None);
    let coalescing = ViewHandler::new(Duration::from_millis(10), None);
    let resyncing = ViewHandler::new(Duration::from_millis(10), None);
    let panicking = ViewHandler::new(Duration::ZERO, Some(10));
    let normal = ViewHandler::new(Duration::ZERO, None);
    let views = [
        ("slow", Arc::clone(&slow.view)),
        ("coalescing", Arc::clone(&coalescing.view)),
        ("resyncing", Arc::clone(&resyncing.view)),
        ("panicking", Arc::clone(&panicking.view)),
        ("normal", Arc::clone(&normal.view)),
    ];
    let normal_latencies = Arc::clone(&normal.latencies);
    let slow_latencies = Arc::clone(&slow.latencies);
    let slow_registration = informer
        .add_event_handler_with_options(slow, ListenerOptions::new().name("slow"))
        .unwrap();
    let resyncing_registration = informer
        .add_event_handler_with_options(
            resyncing,
            ListenerOptions::new()
                .name("resyncing")
                .buffer(BufferPolicy::bounded(5, Overflow::Resync)),
        )
        .unwrap();
    let coalescing_registration = informer
        .add_event_handler_with_options(
            coalescing,
            ListenerOptions::new()
                .name("coalescing")
                .buffer(BufferPolicy::CoalesceByKey),
        )
        .unwrap();
    let panicking_registration = informer
        .add_event_handler_with_options(panicking, ListenerOptions::new().name("panicking"))
        .unwrap();
    informer
        .add_event_handler_with_options(normal, ListenerOptions::new().name("normal"))
        .unwrap();
    let (token, task) = start(&informer);
    assert_eq!(informer.wait_for_cache_sync(WAIT, &token).await, Ok(()));

    let churn = tokio::task::spawn_blocking({
        let server = Arc::new(server);
        let churn_server = Arc::clone(&server);
        move || {
            let mut created = PODS;
            for step in 0..CHANGES {
                match step % 20 {
                    // Now and then a pod goes away and a new one arrives.
                    0 => {
                        let victim = step % PODS;
                        let _ = churn_server.delete_object(
                            "v1",
                            "Pod",
                            Some(&fixtures::namespace_of(victim)),
                            &pod_name(victim),
                        );
                        let mut fresh = fixtures::pod(created);
                        fresh["metadata"]["annotations"][SENT_AT] = json!(now_micros().to_string());
                        let _ = churn_server.create_object(fresh);
                        created += 1;
                    }
                    _ => touch(&churn_server, step % PODS),
                }
                std::thread::sleep(Duration::from_millis(2)); // pacing: a steady churn rate
            }
            (server, created)
        }
    });
    let (server, created) = churn.await.expect("the churn ran");
    let expected = server_view(&server, created);
    for (name, view) in &views {
        assert!(
            wait_until(Duration::from_secs(30), || *view.lock().unwrap()
                == expected)
            .await,
            "{name} handler's view differs from the server's"
        );
    }

    let normal_p99 = percentile(&normal_latencies.lock().unwrap(), 0.99);
    let slow_p99 = percentile(&slow_latencies.lock().unwrap(), 0.99);
    // Relative, not absolute: on a loaded machine every latency grows, but the slow handler's
    // backlog grows faster than the normal handler's.
    assert!(
        slow_p99 > normal_p99 * 2,
        "the slow handler fell behind ({slow_p99:?}) while the normal one did not ({normal_p99:?})"
    );
    let (slow, coalesced) = (slow_registration.stats(), coalescing_registration.stats());
    assert!(
        coalesced.coalesced > 0 && coalesced.delivered < slow.delivered,
        "the coalescing handler skipped superseded states: {coalesced:?}, slow: {slow:?}"
    );
    assert_eq!(
        coalesced.delivered + coalesced.coalesced,
        slow.delivered,
        "every notification is delivered or merged"
    );
    let resynced = resyncing_registration.stats();
    assert!(
        resynced.dropped > 0 && resynced.resyncs > 0,
        "the small buffer overflowed and was caught up: {resynced:?}"
    );
    let stats = panicking_registration.stats();
    assert!(
        stats.panicked >= (CHANGES as u64) / 10,
        "panics counted: {stats:?}"
    );
    stop(token, task).await;
}

/// Deletions missed while the server was unreachable and its history compacted come back as
/// tombstones for exactly the vanished Pods, on both queues. The Pods that did not change come
/// back to no handler: not to one without a resync period, nor to one whose period is not due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_compaction_deletes_exactly_the_vanished_pods_with_tombstones() {
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let server = FakeApiServer::start()
            .await
            .expect("the fake server starts");
        for i in 0..6 {
            server.create_object(fixtures::pod(i)).unwrap();
        }
        let informer = informer(&server, InformerOptions::new().queue(queue));
        let recorder = Recorder::new();
        informer.add_event_handler(recorder.handler()).unwrap();
        let hourly = Recorder::new();
        informer
            .add_event_handler_with_options(
                hourly.handler(),
                ListenerOptions::new().resync_period(Duration::from_secs(3600)),
            )
            .unwrap();
        let (token, task) = start(&informer);
        assert_eq!(informer.wait_for_cache_sync(WAIT, &token).await, Ok(()));

        server.stop_listener().await;
        for i in [1, 4] {
            server
                .delete_object("v1", "Pod", Some(&fixtures::namespace_of(i)), &pod_name(i))
                .unwrap();
        }
        server.compact();
        server
            .restart_listener()
            .await
            .expect("the listener comes back");
        assert!(
            wait_until(RECONNECT, || recorder.of_kind("tombstone")
                == ["pod-1", "pod-4"])
            .await,
            "{queue:?}: got {:?}",
            recorder.events()
        );
        assert!(recorder.of_kind("delete").is_empty(), "{queue:?}");
        assert_eq!(informer.cache().list_keys().len(), 4, "{queue:?}");
        // Both handlers have had the relist (its tombstones); neither got an unchanged Pod.
        assert!(
            wait_until(WAIT, || hourly.of_kind("tombstone") == ["pod-1", "pod-4"]).await,
            "{queue:?}: got {:?}",
            hourly.events()
        );
        assert!(
            recorder.of_kind("update").is_empty(),
            "{queue:?}: {:?}",
            recorder.events()
        );
        assert!(
            hourly.of_kind("update").is_empty(),
            "{queue:?}: {:?}",
            hourly.events()
        );
        stop(token, task).await;
    }
}

/// A Pod deleted and created again under the same name (a new UID) while the watch was down
/// and the history compacted comes back, after the relist, as a tombstone of the old Pod and
/// an add of the new one, never as one update, on both queues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_recreated_while_the_watch_was_down_is_a_delete_then_an_add() {
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let server = FakeApiServer::start()
            .await
            .expect("the fake server starts");
        for i in 0..3 {
            server.create_object(fixtures::pod(i)).unwrap();
        }
        let informer = informer(&server, InformerOptions::new().queue(queue));
        let recorder = Recorder::new();
        informer.add_event_handler(recorder.handler()).unwrap();
        let (token, task) = start(&informer);
        assert_eq!(informer.wait_for_cache_sync(WAIT, &token).await, Ok(()));
        let uid_of = |pod: &Pod| pod.metadata.uid.clone().unwrap_or_default();
        let key = format!("{}/{}", fixtures::namespace_of(1), pod_name(1));
        let old_uid = uid_of(&informer.cache().get_by_key(&key).expect("cached"));

        server.stop_listener().await;
        server
            .delete_object("v1", "Pod", Some(&fixtures::namespace_of(1)), &pod_name(1))
            .unwrap();
        let recreated = server.create_object(fixtures::pod(1)).unwrap();
        let new_uid = recreated["metadata"]["uid"].as_str().unwrap().to_owned();
        assert_ne!(old_uid, new_uid);
        server.compact();
        recorder.clear();
        server
            .restart_listener()
            .await
            .expect("the listener comes back");

        assert!(
            wait_until(RECONNECT, || recorder.of_kind("add") == ["pod-1"]).await,
            "{queue:?}: got {:?}",
            recorder.events()
        );
        assert_eq!(recorder.of_kind("tombstone"), ["pod-1"], "{queue:?}");
        assert!(
            !recorder
                .events()
                .iter()
                .any(|event| event == "update:pod-1"),
            "{queue:?}: {:?}",
            recorder.events()
        );
        let position = |wanted: &str| recorder.events().iter().position(|event| event == wanted);
        assert!(
            position("tombstone:pod-1") < position("add:pod-1"),
            "{queue:?}: {:?}",
            recorder.events()
        );
        let cached = informer.cache().get_by_key(&key).expect("cached");
        assert_eq!(uid_of(&cached), new_uid, "{queue:?}");
        stop(token, task).await;
    }
}

/// The reflector options pass through: a streaming list (`sendInitialEvents`) and small pages
/// both fill the cache from the fake server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_and_small_pages_both_sync() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for i in 0..7 {
        server.create_object(fixtures::pod(i)).unwrap();
    }
    for options in [
        InformerOptions::new().use_watch_list(true),
        InformerOptions::new().page_size(2),
    ] {
        let informer = informer(&server, options);
        let recorder = Recorder::new();
        let registration = informer.add_event_handler(recorder.handler()).unwrap();
        let (token, task) = start(&informer);
        assert_eq!(informer.wait_for_cache_sync(WAIT, &token).await, Ok(()));
        assert!(
            tokio::time::timeout(WAIT, registration.synced())
                .await
                .unwrap()
        );
        assert_eq!(recorder.of_kind("initial").len(), 7);
        assert_eq!(informer.cache().list_keys().len(), 7);
        stop(token, task).await;
    }
}
