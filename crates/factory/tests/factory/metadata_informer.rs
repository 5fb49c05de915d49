//! Metadata-only informers through the factory, ported from client-go's
//! `metadata/metadatainformer/informer_test.go`, against kinformer-testing's API server.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::apps::v1::Deployment;
use kinformer_factory::{FactoryOptions, InformerRequest, SharedInformerFactory};
use kinformer_processor::HandlerFuncs;
use kinformer_testing::{FakeApiServer, Verb};
use kube_core::{PartialObjectMeta, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;

const PATIENCE: Duration = Duration::from_secs(10);

type DeploymentMeta = PartialObjectMeta<Deployment>;

async fn next(received: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, received.recv())
        .await
        .expect("a notification arrives in time")
        .expect("the handler is registered")
}

/// Ported from client-go's TestMetadataSharedInformerFactory (its three scenarios in a row:
/// adding, updating an annotation and deleting an object each reach the handler, as metadata).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_updating_and_deleting_an_object_reach_the_metadata_informer_handler() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    let informer = factory
        .informer_for(InformerRequest::<PartialObjectMeta<Deployment>>::metadata())
        .expect("an informer");

    let (sender, mut received) = mpsc::unbounded_channel();
    let (added, updated, deleted) = (sender.clone(), sender.clone(), sender);
    informer
        .add_event_handler(
            HandlerFuncs::new()
                .add_func(move |meta: Arc<DeploymentMeta>, _| {
                    let _ = added.send(format!("add {}", meta.name_any()));
                })
                .update_func(move |_, meta: Arc<DeploymentMeta>| {
                    let test = meta.annotations().get("test").cloned().unwrap_or_default();
                    let _ = updated.send(format!("update {} test={test}", meta.name_any()));
                })
                .delete_func(move |meta| {
                    let _ = deleted.send(format!("delete {}", meta.object().name_any()));
                }),
        )
        .expect("the handler is registered");
    factory.start().expect("the factory starts");
    assert!(factory.wait_for_cache_sync(PATIENCE).await.all_synced());

    let created = server
        .create_object(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "namespace": "ns-foo", "name": "name-foo" },
            "spec": {
                "selector": { "matchLabels": { "app": "foo" } },
                "template": {
                    "metadata": { "labels": { "app": "foo" } },
                    "spec": { "containers": [{ "name": "app", "image": "app:v1" }] },
                },
            },
        }))
        .expect("the deployment is valid");
    assert_eq!(next(&mut received).await, "add name-foo");

    let mut changed = created;
    changed["metadata"]["annotations"] = json!({ "test": "updatedName" });
    server.update_object(changed).expect("the update applies");
    assert_eq!(
        next(&mut received).await,
        "update name-foo test=updatedName"
    );

    server
        .delete_object("apps/v1", "Deployment", Some("ns-foo"), "name-foo")
        .expect("the deployment exists");
    assert_eq!(next(&mut received).await, "delete name-foo");
    assert!(informer.cache().list_keys().is_empty());
    // Metadata informers list and watch the ordinary resource, asking for metadata only.
    assert_eq!(server.faults().request_count(Verb::List, "deployments"), 1);
    factory.shutdown().await;
}
