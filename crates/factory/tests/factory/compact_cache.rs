//! The factory's caches against kinformer-testing's API server over real HTTP: compact by
//! default, where what the cache gives back is equal to what the handlers were given but
//! decoded from the compact form and an update's old object comes from that form too; decoded
//! when asked ([`FactoryOptions::decoded_cache_for`]), sharing the handlers' objects. The rest
//! of the factory's suite runs with decoded caches when `KINFORMER_CACHE=decoded` (see
//! `.ci/run`).

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_factory::{FactoryOptions, InformerRequest, SharedInformerFactory};
use kinformer_processor::HandlerFuncs;
use kinformer_store::Lister;
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use kube_core::{PartialObjectMeta, ResourceExt};
use parking_lot::Mutex;

const PATIENCE: Duration = Duration::from_secs(20);

type Updates = Arc<Mutex<Vec<(Arc<Pod>, Arc<Pod>)>>>;

/// A factory over `pods` fixture Pods with `options`, its Pod informer's added objects and
/// updates recorded; started and synced.
async fn informing(
    pods: usize,
    options: FactoryOptions,
) -> (
    FakeApiServer,
    SharedInformerFactory,
    Arc<Mutex<Vec<Arc<Pod>>>>,
    Updates,
) {
    let server = FakeApiServer::start_with_pods(0..pods)
        .await
        .expect("the fake server starts with the fixture Pods");
    let factory = SharedInformerFactory::new(server.client().expect("a client"), options);
    let informer = factory.informer::<Pod>().expect("an informer");
    let (added, updates): (Arc<Mutex<Vec<Arc<Pod>>>>, Updates) = Default::default();
    let (on_add, on_update) = (Arc::clone(&added), Arc::clone(&updates));
    informer
        .add_event_handler(
            HandlerFuncs::new()
                .add_func(move |pod: Arc<Pod>, _| on_add.lock().push(pod))
                .update_func(move |old: Arc<Pod>, new: Arc<Pod>| {
                    on_update.lock().push((old, new));
                }),
        )
        .expect("the handler is registered");
    factory.start().expect("the factory starts");
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");
    eventually("every pod was handed to the handler", PATIENCE, || {
        added.lock().len() == pods
    })
    .await;
    (server, factory, added, updates)
}

/// What `lister` holds under `pod`'s namespace and name.
fn cached(lister: &Lister<Pod>, pod: &Pod) -> Arc<Pod> {
    lister
        .namespaced(pod.namespace().expect("namespaced"))
        .get(&pod.name_any())
        .expect("cached")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_cache_reads_back_equal_objects_decoded_from_its_compact_form() {
    let options = FactoryOptions::default().compact_hot_capacity(0);
    let (server, factory, added, updates) = informing(20, options).await;
    let lister = factory.lister::<Pod>().expect("a lister");
    for pod in added.lock().iter() {
        let cached = cached(&lister, pod);
        assert_eq!(*cached, **pod, "equal to what the handler got");
        assert!(!Arc::ptr_eq(&cached, pod), "decoded from the compact form");
        assert!(
            cached.metadata.managed_fields.is_some(),
            "a full object, managedFields and all"
        );
    }

    // An update: the handler's old object is the cached one, decoded.
    let before = added
        .lock()
        .iter()
        .find(|pod| pod.name_any() == "pod-3")
        .cloned()
        .expect("pod-3 was added");
    let mut changed = fixtures::pod(3);
    changed["metadata"]["labels"]["tier"] = "changed".into();
    changed["metadata"]["resourceVersion"] = before.resource_version().expect("a version").into();
    server.update_object(changed).expect("the update is valid");
    eventually("the update reached the handler", PATIENCE, || {
        !updates.lock().is_empty()
    })
    .await;
    let (old, new) = updates.lock()[0].clone();
    assert_eq!(*old, *before);
    assert_eq!(new.labels()["tier"], "changed");
    let cached = cached(&lister, &new);
    assert_eq!(*cached, *new);
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decoded_cache_hands_out_the_objects_the_handlers_got() {
    // The contrast that makes the test above mean something: a decoded cache shares.
    let options = FactoryOptions::default()
        .compact_hot_capacity(0)
        .decoded_cache_for::<Pod>();
    let (_server, factory, added, _) = informing(5, options).await;
    let lister = factory.lister::<Pod>().expect("a lister");
    for pod in added.lock().iter() {
        let cached = cached(&lister, pod);
        assert!(Arc::ptr_eq(&cached, pod));
    }
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_decoded_objects_are_the_written_ones_and_metadata_informers_compact_too() {
    let options = FactoryOptions::default().compact_hot_capacity(100);
    let (_server, factory, added, _) = informing(10, options).await;
    let lister = factory.lister::<Pod>().expect("a lister");
    for pod in added.lock().iter() {
        let cached = cached(&lister, pod);
        assert_eq!(*cached, **pod);
    }
    let metadata = factory
        .informer_for(InformerRequest::<PartialObjectMeta<Pod>>::metadata())
        .expect("an informer");
    factory.start().expect("the new informer starts");
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");
    let mut names: Vec<String> = metadata
        .cache()
        .list()
        .iter()
        .map(|meta| meta.name_any())
        .collect();
    names.sort();
    let mut want: Vec<String> = added.lock().iter().map(|pod| pod.name_any()).collect();
    want.sort();
    assert_eq!(names, want);
    factory.shutdown().await;
}
