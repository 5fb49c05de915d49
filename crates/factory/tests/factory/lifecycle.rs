//! Informers that leave the factory, over kinformer-testing's API server: a leased informer
//! stops and frees its cache when its last lease goes, a pinned one outlives its leases,
//! `remove_informer` stops any, and a dynamic informer whose CRD is deleted stops with a clear
//! state instead of retrying for ever, while a fresh one works once the CRD is back.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_factory::{FactoryOptions, InformerRequest, SharedInformerFactory};
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use kube_core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(20);

fn config_map(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "namespace": "default", "name": name },
        "data": { "key": name },
    })
}

async fn server_with_config_maps(names: &[&str]) -> FakeApiServer {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for name in names {
        server
            .create_object(config_map(name))
            .expect("a config map");
    }
    server
}

fn factory(server: &FakeApiServer) -> SharedInformerFactory {
    SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    )
}

async fn synced(factory: &SharedInformerFactory) {
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_informer_stops_and_frees_its_cache_when_its_last_lease_is_released() {
    let server = server_with_config_maps(&["a", "b"]).await;
    let factory = factory(&server);
    let first = factory
        .lease(InformerRequest::<ConfigMap>::typed())
        .expect("a lease");
    let second = first.clone();
    factory.start().expect("started");
    synced(&factory).await;
    let cached = Arc::downgrade(&first.cache().get_by_key("default/a").expect("cached"));

    assert!(
        !first.release().await,
        "another lease still holds the informer"
    );
    assert!(!second.is_stopped());
    assert_eq!(factory.informers().len(), 1);

    let informer = (*second).clone();
    assert!(second.release().await, "the last lease stops the informer");
    assert!(informer.is_stopped());
    assert!(
        factory.informers().is_empty(),
        "the informer left the factory"
    );
    drop(informer);
    eventually("the informer's task has ended", PATIENCE, || {
        factory.running_tasks() == 0
    })
    .await;
    assert!(
        cached.upgrade().is_none(),
        "the cache was freed with the informer"
    );

    // Asking again builds a new informer, which (the factory having started) runs at once and
    // syncs from scratch.
    let again = factory
        .lease(InformerRequest::<ConfigMap>::typed())
        .expect("a new lease");
    assert!(!again.is_stopped());
    synced(&factory).await;
    assert!(again.has_started());
    assert_eq!(again.cache().list().len(), 2);
    factory.shutdown().await;
}

/// A lease taken from a started factory runs at once; released before its task got going, the
/// release still waits until the informer has stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_released_as_soon_as_taken_from_a_started_factory_stops_its_informer() {
    let server = server_with_config_maps(&["a"]).await;
    let factory = factory(&server);
    factory.start().expect("started");
    for _ in 0..20 {
        let lease = factory
            .lease(InformerRequest::<ConfigMap>::typed())
            .expect("a lease");
        let informer = (*lease).clone();
        assert!(lease.release().await, "the only lease stops the informer");
        assert!(informer.is_stopped());
    }
    assert!(factory.informers().is_empty());
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_also_handed_out_pinned_outlives_its_leases() {
    let server = server_with_config_maps(&["a"]).await;
    let factory = factory(&server);
    let lease = factory
        .lease(InformerRequest::<ConfigMap>::typed())
        .expect("a lease");
    let pinned = factory.informer::<ConfigMap>().expect("the same informer");
    factory.start().expect("started");
    synced(&factory).await;
    assert!(!lease.release().await);
    server.create_object(config_map("b")).expect("created");
    eventually("the pinned informer keeps following", PATIENCE, || {
        pinned.cache().list().len() == 2
    })
    .await;
    assert!(!pinned.is_stopped());
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_informer_stops_a_pinned_informer_and_the_next_request_builds_a_new_one() {
    let server = server_with_config_maps(&["a"]).await;
    let factory = factory(&server);
    let informer = factory.informer::<ConfigMap>().expect("an informer");
    factory.start().expect("started");
    synced(&factory).await;
    let (key, _) = factory.informers().pop().expect("one informer");
    assert!(factory.remove_informer(&key));
    assert!(
        !factory.remove_informer(&key),
        "removing twice finds nothing"
    );
    tokio::time::timeout(PATIENCE, informer.stopped())
        .await
        .expect("the removed informer stops");

    let fresh = factory.informer::<ConfigMap>().expect("a new informer");
    assert!(!fresh.is_stopped());
    synced(&factory).await;
    assert!(fresh.has_started());
    assert_eq!(fresh.cache().list().len(), 1);
    factory.shutdown().await;
}

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_informer_stops_when_its_crd_is_deleted_and_a_fresh_one_works_after() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    server
        .create_object(fixtures::widget_crd("example.com"))
        .expect("the CRD");
    server
        .create_object(fixtures::widget("example.com", "default", "first", 1))
        .expect("a widget");
    let factory = factory(&server);
    let informer = factory
        .informer_for(InformerRequest::dynamic(&widgets()))
        .expect("an informer");
    factory.start().expect("started");
    synced(&factory).await;
    assert_eq!(informer.cache().list().len(), 1);

    server
        .delete_object(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        )
        .expect("the CRD is deleted");
    // The watch ends, the next watch and list answer 404: one backoff later it stops.
    tokio::time::timeout(PATIENCE, informer.stopped())
        .await
        .expect("the informer stops instead of retrying");
    let status = informer.sync_status();
    assert!(status.resource_gone, "{status:?}");
    let error = status.last_error.clone().unwrap_or_default();
    assert!(error.contains("no longer served"), "{error}");
    assert!(
        status
            .to_string()
            .starts_with("stopped: the resource is no longer served")
    );
    assert_eq!(
        informer.health().reflector.failed_lists,
        1,
        "one failed list, not a retry loop"
    );
    eventually("the informer leaves the factory", PATIENCE, || {
        factory.informers().is_empty() && factory.running_tasks() == 0
    })
    .await;

    // The CRD comes back: a new request builds a new informer, which sees the new widgets.
    server
        .create_object(fixtures::widget_crd("example.com"))
        .expect("the CRD again");
    server
        .create_object(fixtures::widget("example.com", "default", "second", 1))
        .expect("a widget");
    let fresh = factory
        .informer_for(InformerRequest::dynamic(&widgets()))
        .expect("a new informer");
    assert!(!fresh.is_stopped());
    factory.start().expect("started");
    synced(&factory).await;
    let token = CancellationToken::new();
    assert_eq!(fresh.wait_for_cache_sync(PATIENCE, &token).await, Ok(()));
    let names: Vec<String> = fresh.cache().list_keys();
    assert_eq!(names, ["default/second"]);
    factory.shutdown().await;
}
