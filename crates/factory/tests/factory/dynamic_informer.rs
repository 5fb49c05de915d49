//! Dynamic informers through the factory, ported from client-go's
//! `dynamic/dynamicinformer/informer_test.go`, against kinformer-testing's API server.

use std::{sync::Arc, time::Duration};

use kinformer_factory::{FactoryOptions, InformerRequest, Selection, SharedInformerFactory};
use kinformer_processor::HandlerFuncs;
use kinformer_testing::FakeApiServer;
use kube_core::{ApiResource, DynamicObject, GroupVersionKind, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const PATIENCE: Duration = Duration::from_secs(10);

fn deployments() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps", "v1", "Deployment"),
        "deployments",
    )
}

fn deployment(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "namespace": namespace, "name": name },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": "app:v1" }] },
            },
        },
    })
}

/// Every notification as `"verb namespace/name"`.
fn recording_handler() -> (HandlerFuncs<DynamicObject>, mpsc::UnboundedReceiver<String>) {
    let (sender, received) = mpsc::unbounded_channel();
    let describe = |verb: &str, object: &DynamicObject| {
        format!(
            "{verb} {}/{}",
            object.namespace().unwrap_or_default(),
            object.name_any()
        )
    };
    let (added, updated, deleted) = (sender.clone(), sender.clone(), sender);
    let handler = HandlerFuncs::new()
        .add_func(move |object: Arc<DynamicObject>, _| {
            let _ = added.send(describe("add", &object));
        })
        .update_func(move |_, object: Arc<DynamicObject>| {
            let _ = updated.send(describe("update", &object));
        })
        .delete_func(move |object| {
            let _ = deleted.send(describe("delete", object.object()));
        });
    (handler, received)
}

async fn next(received: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, received.recv())
        .await
        .expect("a notification arrives in time")
        .expect("the handler is registered")
}

/// Ported from client-go's TestDynamicSharedInformerFactory (its three scenarios in a row:
/// adding, updating and deleting an object each reach the handler).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_updating_and_deleting_an_object_reach_the_dynamic_informer_handler() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    let informer = factory
        .informer_for(InformerRequest::dynamic(&deployments()))
        .expect("an informer");
    let (handler, mut received) = recording_handler();
    informer
        .add_event_handler(handler)
        .expect("the handler is registered");
    factory.start().expect("the factory starts");
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced}");
    assert!(
        synced
            .synced()
            .iter()
            .all(|key| key.resource() == Some("apps/v1/deployments"))
    );

    let created = server
        .create_object(deployment("ns-foo", "name-foo"))
        .expect("the deployment is valid");
    assert_eq!(next(&mut received).await, "add ns-foo/name-foo");

    let mut changed = created;
    changed["spec"]["replicas"] = json!(3);
    server.update_object(changed).expect("the update applies");
    assert_eq!(next(&mut received).await, "update ns-foo/name-foo");
    let cached = informer
        .cache()
        .get_by_key("ns-foo/name-foo")
        .expect("the deployment is cached");
    assert_eq!(cached.data["spec"]["replicas"], json!(3));

    server
        .delete_object("apps/v1", "Deployment", Some("ns-foo"), "name-foo")
        .expect("the deployment exists");
    assert_eq!(next(&mut received).await, "delete ns-foo/name-foo");
    assert!(informer.cache().list_keys().is_empty());
    factory.shutdown().await;
}

/// Ported from client-go's TestFilteredDynamicSharedInformerFactory: an object added in
/// another namespace does not reach an informer of one namespace; one added in its namespace
/// does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_dynamic_informer_sees_only_its_namespace() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env().namespace("ns-foo"),
    );
    let informer = factory
        .informer_for(InformerRequest::dynamic(&deployments()))
        .expect("an informer");
    assert_eq!(
        factory.informers()[0].0.selection(),
        &Selection::all().namespace("ns-foo")
    );
    let (handler, mut received) = recording_handler();
    informer
        .add_event_handler(handler)
        .expect("the handler is registered");
    factory.start().expect("the factory starts");
    assert!(factory.wait_for_cache_sync(PATIENCE).await.all_synced());

    server
        .create_object(deployment("ns-bar", "name-bar"))
        .expect("the deployment is valid");
    server
        .create_object(deployment("ns-foo", "name-foo"))
        .expect("the deployment is valid");
    // Events arrive in order, so the first one proves ns-bar's never came.
    assert_eq!(next(&mut received).await, "add ns-foo/name-foo");
    assert_eq!(informer.cache().list_keys(), ["ns-foo/name-foo"]);
    factory.shutdown().await;
}
