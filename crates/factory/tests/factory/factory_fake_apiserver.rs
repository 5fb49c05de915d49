//! The factory against kinformer-testing's API server over real HTTP: sharing (counted on the
//! server), selections, start, sync, shutdown, dynamic and metadata informers, transforms.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_factory::{Error, FactoryOptions, InformerRequest, Selection, SharedInformerFactory};
use kinformer_informer::{HandlerExecutor, InformerOptions, SharedIndexInformer};
use kinformer_processor::HandlerFuncs;
use kinformer_reflector::KubeListerWatcher;
use kinformer_reflector::WireFormat;
use kinformer_testing::{FakeApiServer, Fault, ResourceType, Verb, eventually, fixtures};
use kube_client::Api;
use kube_core::{ApiResource, GroupVersionKind, PartialObjectMeta, ResourceExt};
use serde_json::json;

/// How long any wait in these tests may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

async fn server_with_pods(pods: usize) -> FakeApiServer {
    FakeApiServer::start_with_pods(0..pods)
        .await
        .expect("the fake server starts with the fixture Pods")
}

fn same<K: kinformer_store::Object>(
    a: &SharedIndexInformer<K>,
    b: &SharedIndexInformer<K>,
) -> bool {
    Arc::ptr_eq(&a.cache(), &b.cache())
}

async fn all_synced(factory: &SharedInformerFactory) {
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(!synced.is_empty(), "nothing was started");
    assert!(synced.all_synced(), "not every informer synced: {synced:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_list_and_one_watch_per_type_however_many_handlers_and_listers() {
    let server = server_with_pods(5).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );

    let first = factory.informer::<Pod>().expect("an informer");
    let adds = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let informer = factory.informer::<Pod>().expect("an informer");
        assert!(same(&first, &informer));
        let adds = Arc::clone(&adds);
        informer
            .add_event_handler(HandlerFuncs::new().add_func(move |_: Arc<Pod>, _| {
                adds.fetch_add(1, Ordering::Relaxed);
            }))
            .expect("the handler is registered");
    }
    let listers: Vec<_> = (0..3)
        .map(|_| factory.lister::<Pod>().expect("a lister"))
        .collect();
    assert_eq!(factory.informers().len(), 1);

    factory.start().expect("the factory starts");
    all_synced(&factory).await;
    for lister in &listers {
        assert_eq!(lister.list(&Default::default()).len(), 5);
    }
    eventually("every handler saw every pod", PATIENCE, || {
        adds.load(Ordering::Relaxed) == 15
    })
    .await;
    eventually("the watch is open", PATIENCE, || {
        server.faults().request_count(Verb::Watch, "pods") >= 1
    })
    .await;

    let faults = server.faults();
    assert_eq!(faults.request_count(Verb::List, "pods"), 1);
    assert_eq!(faults.request_count(Verb::Watch, "pods"), 1);
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_namespaces_and_selectors_get_separate_informers() {
    let server = server_with_pods(40).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );

    let everything = factory.informer::<Pod>().expect("an informer");
    let in_ns_1 = factory
        .informer_for(InformerRequest::<Pod>::typed().selection(Selection::all().namespace("ns-1")))
        .expect("an informer");
    let in_ns_2 = factory
        .informer_for(InformerRequest::<Pod>::typed().selection(Selection::all().namespace("ns-2")))
        .expect("an informer");
    let app_3 = factory
        .informer_for(
            InformerRequest::<Pod>::typed()
                .selection(Selection::all().labels("app.kubernetes.io/name=app-3")),
        )
        .expect("an informer");
    let in_ns_1_again = factory
        .informer_for(InformerRequest::<Pod>::typed().selection(Selection::all().namespace("ns-1")))
        .expect("an informer");

    assert!(same(&in_ns_1, &in_ns_1_again));
    assert!(!same(&everything, &in_ns_1));
    assert!(!same(&in_ns_1, &in_ns_2));
    assert!(!same(&everything, &app_3));
    assert_eq!(factory.informers().len(), 4);

    factory.start().expect("the factory starts");
    all_synced(&factory).await;
    assert_eq!(everything.cache().list_keys().len(), 40);
    assert_eq!(in_ns_1.cache().list_keys().len(), 4);
    assert!(
        in_ns_2
            .cache()
            .list()
            .iter()
            .all(|pod| pod.namespace().as_deref() == Some("ns-2"))
    );
    assert!(app_3.cache().list().iter().all(|pod| {
        pod.labels()
            .get("app.kubernetes.io/name")
            .map(String::as_str)
            == Some("app-3")
    }));
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 4);
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_namespace_selectors_tweak_and_page_size_reach_every_informer() {
    let server = server_with_pods(20).await;
    for i in 0..20 {
        server
            .create_object(fixtures::config_map(i))
            .expect("the fixture config map is valid");
    }
    let limits = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env()
            .namespace("ns-4")
            .labels("tier=backend")
            .page_size(1)
            .tweak_list_options({
                let limits = Arc::clone(&limits);
                move |options| limits.lock().push(options.limit)
            }),
    );
    let pods = factory.informer::<Pod>().expect("an informer");
    let config_maps = factory.informer::<ConfigMap>().expect("an informer");
    factory.start().expect("the factory starts");
    all_synced(&factory).await;

    // pod-4 and pod-14 live in ns-4 and are backends; no ConfigMap has a tier label.
    let mut keys = pods.cache().list_keys();
    keys.sort();
    assert_eq!(keys, ["ns-4/pod-14", "ns-4/pod-4"]);
    assert!(config_maps.cache().list_keys().is_empty());
    let limits = limits.lock().clone();
    assert!(limits.len() >= 2, "the tweak ran on every list: {limits:?}");
    assert!(
        limits.contains(&Some(1)),
        "lists asked for pages of one: {limits:?}"
    );
    factory.shutdown().await;
}

/// An informer requested after `start` runs at once: client-go leaves it idle until `Start`
/// is called again, so that a wait for sync returns without it and its cache stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factorys_consistency_check_reaches_every_informer() {
    let server = server_with_pods(12).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::default().consistency_check(Duration::from_millis(50)),
    );
    let pods = factory.informer::<Pod>().expect("an informer");
    let metadata = factory
        .informer_for(InformerRequest::<PartialObjectMeta<Pod>>::metadata())
        .expect("a metadata informer");
    factory.start().expect("the factory starts");
    all_synced(&factory).await;
    eventually("both informers check their caches", PATIENCE, || {
        pods.consistency_stats().checks >= 2 && metadata.consistency_stats().checks >= 2
    })
    .await;
    assert_eq!(pods.consistency_stats().drifts, 0);
    assert_eq!(metadata.consistency_stats().drifts, 0);
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_twice_starts_each_informer_once_and_later_informers_at_once() {
    let server = server_with_pods(3).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    let pods = factory.informer::<Pod>().expect("an informer");
    assert!(!pods.has_started(), "nothing runs before start");

    factory.start().expect("the factory starts");
    factory.start().expect("a second start is harmless");
    all_synced(&factory).await;
    assert!(pods.has_started());
    assert_eq!(factory.running_tasks(), 1);

    let config_maps = factory.informer::<ConfigMap>().expect("an informer");
    assert!(
        factory.informers().iter().all(|(_, started)| *started),
        "an informer requested after start runs at once"
    );
    all_synced(&factory).await;
    assert!(config_maps.has_started() && config_maps.has_synced());
    factory.start().expect("a third start is harmless");
    assert_eq!(factory.running_tasks(), 2);
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 1);
    assert_eq!(server.faults().request_count(Verb::List, "configmaps"), 1);
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_cache_sync_reports_each_informer_on_its_own() {
    let server = server_with_pods(3).await;
    // ConfigMaps cannot be listed at all, so that informer never syncs.
    server.faults().inject(
        Fault::status(500)
            .verb(Verb::List)
            .resource("configmaps")
            .times(usize::MAX),
    );
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    factory.informer::<Pod>().expect("an informer");
    factory.informer::<ConfigMap>().expect("an informer");

    // Before start nothing can sync: the report says so at once, naming both.
    let unstarted = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(unstarted.synced().is_empty(), "{unstarted}");
    assert_eq!(unstarted.not_synced().len(), 2, "{unstarted}");
    assert!(
        unstarted
            .not_synced()
            .iter()
            .all(|(_, status)| !status.started),
        "{unstarted}"
    );
    factory.start().expect("the factory starts");
    // The Pod informer syncs whenever the machine gets to it; the wait below then reports it
    // beside the ConfigMap informer that never will.
    let pods = factory.informer::<Pod>().expect("an informer");
    eventually("the Pod informer syncs", PATIENCE, || pods.has_synced()).await;
    let synced = factory
        .wait_for_cache_sync(Duration::from_millis(100))
        .await;

    assert!(!synced.all_synced(), "{synced}");
    assert!(
        matches!(synced.synced(), [key] if key.is::<Pod>()),
        "{synced}"
    );
    assert!(
        matches!(synced.not_synced(), [(key, status)] if key.is::<ConfigMap>() && status.last_error.is_some()),
        "{synced}"
    );
    let report = synced.to_string();
    assert!(
        report.starts_with("1 of 2 informers not synced"),
        "{report}"
    );
    assert!(report.contains("ConfigMap"), "{report}");
    factory.shutdown().await;
}

/// A wait with nothing to wait for says so: it is not "all synced".
#[tokio::test]
async fn a_wait_with_no_informer_says_there_was_nothing_to_wait_for() {
    let server = server_with_pods(1).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    factory.start().expect("the factory starts");
    let report = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(report.is_empty() && !report.all_synced(), "{report}");
    assert!(
        report.to_string().starts_with("nothing to wait for"),
        "{report}"
    );
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_every_informer_and_leaves_no_task_running() {
    let server = server_with_pods(3).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    let pods = factory.informer::<Pod>().expect("an informer");
    let config_maps = factory.informer::<ConfigMap>().expect("an informer");
    factory.start().expect("the factory starts");
    all_synced(&factory).await;
    eventually("both watches are open", PATIENCE, || {
        server.open_watches() == 2
    })
    .await;

    // Two callers at once: both return only when everything has stopped.
    let other = factory.clone();
    let (_, ()) = tokio::join!(other.shutdown(), factory.shutdown());

    assert_eq!(factory.running_tasks(), 0);
    assert!(factory.all_stopped());
    assert!(pods.is_stopped() && config_maps.is_stopped());
    eventually("the server sees the watches close", PATIENCE, || {
        server.open_watches() == 0
    })
    .await;
    assert!(matches!(
        factory.informer::<Pod>(),
        Err(Error::ShutDown { .. })
    ));
    assert!(matches!(factory.start(), Err(Error::ShutDown { .. })));
    let message = factory
        .lister::<ConfigMap>()
        .expect_err("no listers after shutdown")
        .to_string();
    assert!(message.contains("shut down"), "{message}");
}

#[test]
fn start_outside_a_tokio_runtime_is_a_clear_error() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let server = runtime.block_on(server_with_pods(0));
    let factory = SharedInformerFactory::new(
        runtime
            .block_on(async { server.client() })
            .expect("a client"),
        FactoryOptions::from_env(),
    );
    factory.informer::<Pod>().expect("an informer");
    assert!(matches!(factory.start(), Err(Error::NoRuntime)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_share_one_informer() {
    let server = server_with_pods(0).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let factory = factory.clone();
            std::thread::spawn(move || factory.informer::<Pod>().expect("an informer"))
        })
        .collect();
    let informers: Vec<_> = handles
        .into_iter()
        .map(|handle| handle.join().expect("the thread finished"))
        .collect();
    assert!(informers.windows(2).all(|pair| same(&pair[0], &pair[1])));
    assert_eq!(factory.informers().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_for_builds_once_and_shares_with_informer() {
    let server = server_with_pods(2).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env()
            .default_resync(Duration::from_secs(60))
            .resync_for::<ConfigMap>(Duration::from_secs(5)),
    );
    let built = Arc::new(AtomicUsize::new(0));
    let resyncs = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (count, noted) = (Arc::clone(&built), Arc::clone(&resyncs));
    let build = move |client: &kube_client::Client, options: InformerOptions<ConfigMap>| {
        count.fetch_add(1, Ordering::Relaxed);
        noted.lock().push(options.configured_resync_period());
        let lister_watcher = KubeListerWatcher::new(Api::<ConfigMap>::all(client.clone()))
            .wire_format(WireFormat::from_env());
        SharedIndexInformer::new(lister_watcher, options)
    };

    let first = factory
        .informer_for(InformerRequest::built_by(build.clone()))
        .expect("an informer");
    let second = factory
        .informer_for(InformerRequest::built_by(build))
        .expect("an informer");
    let typed = factory.informer::<ConfigMap>().expect("an informer");
    assert!(same(&first, &second) && same(&first, &typed));
    assert_eq!(built.load(Ordering::Relaxed), 1);
    assert_eq!(*resyncs.lock(), [Duration::from_secs(5)]);

    let pods = factory.informer::<Pod>().expect("an informer");
    let not_called = factory
        .informer_for(InformerRequest::<Pod>::built_by(|_, _| {
            unreachable!("the Pod informer exists already")
        }))
        .expect("an informer");
    assert!(same(&pods, &not_called));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transforms_run_before_objects_are_cached() {
    let server = server_with_pods(4).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env()
            .drop_managed_fields()
            .transform_for::<Pod>(|pod: Arc<Pod>| {
                let mut pod = Arc::unwrap_or_clone(pod);
                pod.spec = None;
                Arc::new(pod)
            }),
    );
    let pods = factory.informer::<Pod>().expect("an informer");
    let metadata = factory
        .informer_for(InformerRequest::<PartialObjectMeta<Pod>>::metadata())
        .expect("an informer");
    factory.start().expect("the factory starts");
    all_synced(&factory).await;

    let cached = pods.cache().list();
    assert_eq!(cached.len(), 4);
    assert!(
        cached
            .iter()
            .all(|pod| pod.metadata.managed_fields.is_none())
    );
    assert!(
        cached
            .iter()
            .all(|pod| pod.spec.is_none() && pod.status.is_some())
    );
    // The metadata transform reaches every type the factory builds.
    assert!(
        metadata
            .cache()
            .list()
            .iter()
            .all(|meta| meta.metadata.managed_fields.is_none())
    );
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_is_informed_through_the_dynamic_informer() {
    let server = server_with_pods(0).await;
    server.register(ResourceType::custom(
        "example.com",
        "v1",
        "Widget",
        "widgets",
        true,
    ));
    let widget = |i: usize| {
        json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": { "name": format!("widget-{i}"), "namespace": "default" },
            "spec": { "size": i },
        })
    };
    for i in 0..3 {
        server
            .create_object(widget(i))
            .expect("the widget is valid");
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    let widgets = factory
        .informer_for(InformerRequest::dynamic(&resource))
        .expect("an informer");
    assert!(same(
        &widgets,
        &factory
            .informer_for(InformerRequest::dynamic(&resource))
            .expect("an informer")
    ));
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    widgets
        .add_event_handler(HandlerFuncs::new().add_func(
            move |widget: Arc<kube_core::DynamicObject>, _| {
                let _ = events.send(widget.name_any());
            },
        ))
        .expect("the handler is registered");

    factory.start().expect("the factory starts");
    all_synced(&factory).await;
    assert_eq!(widgets.cache().list_keys().len(), 3);
    let cached = widgets
        .cache()
        .get_by_key("default/widget-2")
        .expect("widget-2 is cached");
    assert_eq!(cached.data["spec"]["size"], json!(2));

    server
        .create_object(widget(3))
        .expect("the widget is valid");
    let mut names = Vec::new();
    while names.len() < 4 {
        let name = tokio::time::timeout(PATIENCE, received.recv())
            .await
            .expect("the add arrives in time")
            .expect("the handler is registered");
        names.push(name);
    }
    assert_eq!(names[3], "widget-3");
    assert_eq!(server.faults().request_count(Verb::List, "widgets"), 1);
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_informer_is_separate_from_the_full_one_and_holds_only_metadata() {
    let server = server_with_pods(6).await;
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    let full = factory.informer::<Pod>().expect("an informer");
    let metadata = factory
        .informer_for(InformerRequest::<PartialObjectMeta<Pod>>::metadata())
        .expect("an informer");
    assert!(same(
        &metadata,
        &factory
            .informer_for(InformerRequest::<PartialObjectMeta<Pod>>::metadata())
            .expect("an informer")
    ));
    assert_eq!(factory.informers().len(), 2);

    factory.start().expect("the factory starts");
    all_synced(&factory).await;
    assert_eq!(full.cache().list_keys().len(), 6);
    let mut full_keys = full.cache().list_keys();
    let mut metadata_keys = metadata.cache().list_keys();
    full_keys.sort();
    metadata_keys.sort();
    assert_eq!(full_keys, metadata_keys);
    let meta = metadata
        .cache()
        .get_by_key("ns-1/pod-1")
        .expect("pod-1's metadata is cached");
    assert_eq!(
        meta.labels()
            .get("app.kubernetes.io/name")
            .map(String::as_str),
        Some("app-1")
    );
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 2);
    factory.shutdown().await;
}

/// On tokio's paused clock, with handlers as tasks, so the periods can be client-go's own
/// (minutes would be too long for real time) and the count exact: virtual time moves only
/// when the informers, the fake server and the handlers are all idle.
#[tokio::test(start_paused = true)]
async fn a_custom_resync_period_applies_to_its_type_only() {
    let server = server_with_pods(2).await;
    for i in 0..2 {
        server
            .create_object(fixtures::config_map(i))
            .expect("the fixture config map is valid");
    }
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env()
            .handler_executor(HandlerExecutor::Tasks)
            .resync_for::<ConfigMap>(Duration::from_secs(30)),
    );
    let config_map_resyncs = Arc::new(AtomicUsize::new(0));
    let pod_updates = Arc::new(AtomicUsize::new(0));
    factory
        .informer::<ConfigMap>()
        .expect("an informer")
        .add_event_handler(HandlerFuncs::new().update_func({
            let resyncs = Arc::clone(&config_map_resyncs);
            move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                // A resync hands the same object twice.
                if old.resource_version() == new.resource_version() {
                    resyncs.fetch_add(1, Ordering::Relaxed);
                }
            }
        }))
        .expect("the handler is registered");
    factory
        .informer::<Pod>()
        .expect("an informer")
        .add_event_handler(HandlerFuncs::new().update_func({
            let updates = Arc::clone(&pod_updates);
            move |_: Arc<Pod>, _: Arc<Pod>| {
                updates.fetch_add(1, Ordering::Relaxed);
            }
        }))
        .expect("the handler is registered");
    let origin = tokio::time::Instant::now();
    factory.start().expect("the factory starts");
    all_synced(&factory).await;
    assert!(
        origin.elapsed() < Duration::from_secs(5),
        "syncing took virtual time"
    );

    // Virtual time: resyncs fall due at 30, 60 and 90 s, two ConfigMaps each.
    tokio::time::sleep_until(origin + Duration::from_secs(95)).await;
    assert_eq!(config_map_resyncs.load(Ordering::Relaxed), 6);
    assert_eq!(
        pod_updates.load(Ordering::Relaxed),
        0,
        "Pods never resync by default"
    );
    factory.shutdown().await;
}
