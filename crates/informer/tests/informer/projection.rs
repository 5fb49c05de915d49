//! A projection (a slim Pod with only what a controller reads) cached by an informer: decoded
//! straight from the wire in protobuf and in JSON, kept in step through updates and deletes.
use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{InformerOptions, SharedIndexInformer};
use kinformer_reflector::{KubeListerWatcher, WireFormat};
use kinformer_store::{Object, ProjectedMeta, impl_object};
use kinformer_testing::{FakeApiServer, fixtures, wait_until};
use kube_client::Api;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// What a scheduler-side controller keeps of a Pod.
#[derive(Debug, Deserialize)]
struct SlimPod {
    metadata: ProjectedMeta,
    #[serde(default)]
    spec: SlimSpec,
    #[serde(default)]
    status: SlimStatus,
}

#[derive(Debug, Default, Deserialize)]
struct SlimSpec {
    #[serde(rename = "nodeName")]
    node_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct SlimStatus {
    phase: Option<String>,
}

impl_object!(SlimPod, metadata);

/// `{key: (nodeName, phase, resourceVersion)}` as the informer's cache holds them.
fn cached(informer: &SharedIndexInformer<SlimPod>) -> BTreeMap<String, (String, String, String)> {
    informer
        .cache()
        .list()
        .into_iter()
        .map(|pod| {
            let key = format!(
                "{}/{}",
                pod.namespace().unwrap_or_default(),
                pod.name().unwrap_or_default()
            );
            let row = (
                pod.spec.node_name.clone().unwrap_or_default(),
                pod.status.phase.clone().unwrap_or_default(),
                pod.resource_version().unwrap_or_default().to_owned(),
            );
            (key, row)
        })
        .collect()
}

/// The same rows, read from the server's JSON.
fn on_server(
    server: &FakeApiServer,
    names: &[(String, String)],
) -> BTreeMap<String, (String, String, String)> {
    names
        .iter()
        .filter_map(|(namespace, name)| {
            let pod = server.object("v1", "Pod", Some(namespace), name)?;
            let text = |pointer: &str| {
                pod.pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            Some((
                format!("{namespace}/{name}"),
                (
                    text("/spec/nodeName"),
                    text("/status/phase"),
                    text("/metadata/resourceVersion"),
                ),
            ))
        })
        .collect()
}

async fn a_projection_follows_the_server(format: WireFormat) {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let mut names = Vec::new();
    for i in 0..40 {
        let pod = server.create_object(fixtures::pod(i)).expect("seeded");
        let text = |pointer: &str| {
            pod.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        names.push((text("/metadata/namespace"), text("/metadata/name")));
    }
    let client = server.client().expect("a client");
    let lister_watcher =
        KubeListerWatcher::<SlimPod>::projected(Api::<Pod>::all(client)).wire_format(format);
    let informer = SharedIndexInformer::new(lister_watcher, InformerOptions::new().page_size(7));
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    assert!(
        wait_until(WAIT, || informer.has_synced()).await,
        "the informer synced"
    );
    assert_eq!(cached(&informer), on_server(&server, &names));
    let protobuf_served = server
        .content_types()
        .keys()
        .any(|kind| kind.contains("protobuf"));
    assert_eq!(
        protobuf_served,
        format == WireFormat::Protobuf,
        "{format:?}"
    );

    // A change to a projected field, one to a field the projection skips, and a delete.
    let (namespace, name) = names[3].clone();
    let mut pod = server
        .object("v1", "Pod", Some(&namespace), &name)
        .expect("exists");
    pod["spec"]["nodeName"] = json!("node-moved");
    pod["metadata"]["annotations"] = json!({ "skipped": "by the projection" });
    server.update_object(pod).expect("updated");
    let (namespace, name) = names[5].clone();
    server
        .delete_object("v1", "Pod", Some(&namespace), &name)
        .expect("deleted");
    assert!(
        wait_until(WAIT, || cached(&informer) == on_server(&server, &names)).await,
        "the cache follows the server: {:?}",
        cached(&informer)
    );
    assert_eq!(
        cached(&informer)[&format!("{}/{}", names[3].0, names[3].1)].0,
        "node-moved"
    );
    assert_eq!(cached(&informer).len(), names.len() - 1);

    let served = server.content_types();
    let protobuf = served
        .get(kinformer_protobuf::CONTENT_TYPE)
        .copied()
        .unwrap_or(0);
    let protobuf_watches = served
        .get(kinformer_protobuf::WATCH_CONTENT_TYPE)
        .copied()
        .unwrap_or(0);
    if format == WireFormat::Protobuf {
        assert!(protobuf >= 1, "the list in protobuf: {served:?}");
        assert!(protobuf_watches >= 1, "the watch in protobuf: {served:?}");
    } else {
        assert_eq!(
            protobuf + protobuf_watches,
            0,
            "nothing in protobuf: {served:?}"
        );
    }

    token.cancel();
    task.await.expect("no panic").expect("the informer ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projection_follows_the_server_in_protobuf() {
    a_projection_follows_the_server(WireFormat::Protobuf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projection_follows_the_server_in_json() {
    a_projection_follows_the_server(WireFormat::Json).await;
}
