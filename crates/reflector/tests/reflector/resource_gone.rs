//! A resource that stops being served (its CRD deleted), over kube-client against
//! kinformer-testing's API server: a reflector asked to stops once with `ResourceGone`; one
//! not asked retries for ever, as client-go's does; and a 404 before the resource was ever
//! served is retried either way, since a CRD may not be established yet.

use crate::common;

use std::sync::Arc;

use common::{
    Running,
    fake_server::{PATIENCE, client, quick_backoff},
};
use kinformer_reflector::{KubeListerWatcher, ReflectorExit, ReflectorOptions};
use kinformer_store::{Cache, CacheReader};
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use kube_client::Api;
use kube_core::{ApiResource, DynamicObject, GroupVersionKind};

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

type WidgetCache = Cache<DynamicObject>;

/// A reflector of WidgetCache into a new cache, retrying within milliseconds; once its token fires
/// it has [`PATIENCE`] to stop.
fn start(
    server: &FakeApiServer,
    options: ReflectorOptions<DynamicObject>,
) -> (Arc<WidgetCache>, Running<DynamicObject, WidgetCache>) {
    let resource = widgets();
    let lister_watcher =
        KubeListerWatcher::dynamic(Api::all_with(client(server), &resource), &resource);
    let cache = Arc::new(Cache::default());
    let running = Running::start(
        lister_watcher,
        &cache,
        options.backoff(quick_backoff()),
        PATIENCE,
    );
    (cache, running)
}

/// The 404s `running` has reported.
fn not_found_errors(running: &Running<DynamicObject, WidgetCache>) -> usize {
    running
        .errors()
        .iter()
        .filter(|error| error.contains("code: 404"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_asked_to_stops_once_its_resource_is_gone_and_another_keeps_retrying() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let (stopping_cache, mut stopping) = start(
        &server,
        ReflectorOptions::default().stop_when_resource_gone(),
    );
    let (retrying_cache, retrying) = start(&server, ReflectorOptions::default());

    // Not served yet: both retry, the stopping one included.
    eventually(
        "both retry the 404 of a resource never served",
        PATIENCE,
        || not_found_errors(&stopping) >= 2 && not_found_errors(&retrying) >= 2,
    )
    .await;
    assert!(!stopping.is_finished());

    server
        .create_object(fixtures::widget_crd("example.com"))
        .expect("the CRD");
    server
        .create_object(fixtures::widget("example.com", "default", "w", 1))
        .expect("a widget");
    eventually("both list the widget", PATIENCE, || {
        stopping_cache.list().len() == 1 && retrying_cache.list().len() == 1
    })
    .await;

    server
        .delete_object(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        )
        .expect("the CRD is deleted");
    assert_eq!(
        stopping.exits_within(PATIENCE).await,
        ReflectorExit::ResourceGone
    );
    assert!(stopping.reflector.is_resource_gone());
    let gone: Vec<String> = stopping
        .errors()
        .iter()
        .filter(|error| error.starts_with("ResourceGone"))
        .cloned()
        .collect();
    assert_eq!(gone.len(), 1, "reported once: {gone:?}");
    assert!(gone[0].contains("example.com/v1/Widget"), "{gone:?}");

    let before = not_found_errors(&retrying);
    eventually("the other keeps retrying", PATIENCE, || {
        not_found_errors(&retrying) >= before + 2
    })
    .await;
    assert!(!retrying.reflector.is_resource_gone());
    assert_eq!(retrying.stop().await, ReflectorExit::Cancelled);
}
