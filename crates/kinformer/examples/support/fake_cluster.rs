//! The embedded cluster: Deployments `web-{d}` over a few namespaces, each selecting Pods
//! `web-{d}-{slot}` labelled `app=web-{d}`, and the churn that keeps changing them.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::testing::{FakeApiServer, Fault, Verb};
use kinformer::wait::CancellationToken;
use kube_client::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};
use std::sync::Arc;

/// How many Deployments [`seed`] creates.
pub(crate) const DEPLOYMENTS: usize = 30;
/// Pod slots per Deployment; [`seed`] fills all but the last, churn fills and empties them.
pub(crate) const SLOTS: usize = 5;
const NAMESPACES: usize = 3;

/// The namespace of Deployment `d`.
pub(crate) fn namespace_of(d: usize) -> String {
    format!("team-{}", d % NAMESPACES)
}

/// Deployment `web-{d}` selecting `app=web-{d}`.
pub(crate) fn deployment(d: usize) -> Value {
    let app = format!("web-{d}");
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": app, "namespace": namespace_of(d), "labels": { "app": app } },
        "spec": {
            "replicas": SLOTS - 1,
            "selector": { "matchLabels": { "app": app } },
            "template": {
                "metadata": { "labels": { "app": app } },
                "spec": { "containers": [{ "name": "web", "image": "registry.example.com/web:v1" }] },
            },
        },
    })
}

/// Pod `web-{d}-{slot}`, selected by Deployment `d`, Ready or not.
pub(crate) fn pod(d: usize, slot: usize, ready: bool) -> Value {
    let app = format!("web-{d}");
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{app}-{slot}"),
            "namespace": namespace_of(d),
            "labels": { "app": app, "pod-template-hash": "5d8f7c9b6" },
        },
        "spec": {
            "containers": [{ "name": "web", "image": "registry.example.com/web:v1" }],
            "nodeName": format!("node-{}", (d + slot) % 7),
        },
        "status": { "phase": "Running" },
    });
    set_ready(&mut pod, ready);
    pod
}

/// Sets the Pod's `Ready` condition in a Pod to be created.
pub(crate) fn set_ready(pod: &mut Value, ready: bool) {
    pod["status"]["conditions"] = conditions(ready);
}

/// The conditions the kubelet reports for a Pod that is Ready or not.
fn conditions(ready: bool) -> Value {
    let status = if ready { "True" } else { "False" };
    json!([
        { "type": "PodScheduled", "status": "True" },
        { "type": "Ready", "status": status },
        { "type": "ContainersReady", "status": status },
    ])
}

/// Whether the Pod (as JSON) has `Ready=True`.
pub(crate) fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition["type"] == "Ready" && condition["status"] == "True")
        })
}

/// Flips the Pod's readiness through its `status` subresource, as the kubelet does when a
/// probe starts failing or passing (a write to the Pod itself would leave status alone).
///
/// # Errors
///
/// What the API server answers, NotFound included.
pub(crate) async fn flip_ready(
    client: &Client,
    server: &FakeApiServer,
    namespace: &str,
    name: &str,
) -> Result<(), kube_client::Error> {
    let ready = server
        .object("v1", "Pod", Some(namespace), name)
        .is_some_and(|pod| is_ready(&pod));
    let patch = json!({ "status": { "conditions": conditions(!ready) } });
    Api::<Pod>::namespaced(client.clone(), namespace)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Creates every Deployment with its first `SLOTS - 1` Pods, one in three not Ready;
/// returns how many Pods it created.
pub(crate) fn seed(server: &FakeApiServer) -> Result<usize, kinformer::testing::Error> {
    let mut pods = 0;
    for d in 0..DEPLOYMENTS {
        server.create_object(deployment(d))?;
        for slot in 0..SLOTS - 1 {
            server.create_object(pod(d, slot, (d + slot) % 3 != 0))?;
            pods += 1;
        }
    }
    Ok(pods)
}

/// One change to the cluster, picked by `round`: mostly readiness flips, some Pods deleted
/// or created, and now and then a 500 waiting for the next PATCH of a Deployment.
pub(crate) async fn churn_once(client: &Client, server: &FakeApiServer, round: usize) {
    let d = spread(round, DEPLOYMENTS);
    let slot = spread(round / 3 + 1, SLOTS);
    let (namespace, name) = (namespace_of(d), format!("web-{d}-{slot}"));
    match server.object("v1", "Pod", Some(&namespace), &name) {
        None => {
            let _ = server.create_object(pod(d, slot, round.is_multiple_of(2)));
        }
        Some(_) if round.is_multiple_of(5) => {
            let _ = server.delete_object("v1", "Pod", Some(&namespace), &name);
        }
        Some(_) => {
            let _ = flip_ready(client, server, &namespace, &name).await;
        }
    }
    if round.is_multiple_of(40) {
        server
            .faults()
            .inject(Fault::status(500).verb(Verb::Patch).resource("deployments"));
    }
}

/// Calls [`churn_once`] every 25 ms until `stop`.
pub(crate) async fn churn(server: Arc<FakeApiServer>, stop: CancellationToken) {
    let Ok(client) = server.client() else {
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_millis(25));
    let mut round = 0_usize;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        round += 1;
        churn_once(&client, &server, round).await;
    }
}

/// A cheap, well spread index for `round` (Knuth's multiplicative hash).
fn spread(round: usize, len: usize) -> usize {
    (round.wrapping_mul(2_654_435_761) >> 7) % len
}
