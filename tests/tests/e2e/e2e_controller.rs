//! kinformer's `controller` example (a workqueue controller labelling every Deployment with its
//! number of Ready Pods) reconciling against whichever backend the e2e suite is given: the local
//! kube-apiserver, kind, a kubeconfig, or kinformer-testing's fake (plain `cargo test`).
//!
//! The example's file is compiled here as a module, so this is the very controller `cargo run
//! --example controller` runs. What it should write is never taken from the controller: the
//! expected count is the server's own, from a label-selector list of each Deployment's Pods, so
//! the assertion also holds on kind, where a controller-manager adds ReplicaSets and Pods of its
//! own. docs/e2e.md says what the test proves.

use crate::e2e_support;

#[path = "../../../crates/kinformer/examples/controller.rs"]
#[allow(
    dead_code,
    reason = "the example's main, argument parsing and fake cluster are not exercised here"
)]
mod controller;

use std::time::Duration;

use controller::{READY_PODS_LABEL, ReadyPodsController};
use e2e_support::{BackendKind, Ctx, eventually, run};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Pod, ServiceAccount},
};
use kinformer::{
    factory::{FactoryOptions, SharedInformerFactory},
    store::Lister,
    wait::CancellationToken,
};
use kube_client::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use kube_core::{ResourceExt as _, Selector};
use serde_json::{Value, json};

/// The longest the test waits for the controller (or the caches) to catch up with the server.
const CONVERGE: Duration = Duration::from_secs(30);
const WORKERS: usize = 4;
/// Deployments `web-0` .. `web-2`, each selecting `app=web-{d}`.
const DEPLOYMENTS: usize = 3;
/// Pods `web-{d}-0` .. `web-{d}-3` created before the controller starts.
const SEEDED_SLOTS: usize = 4;
/// PATCHes of Deployments failed with a 500 during the churn (fake only).
const INJECTED_FAILURES: usize = 3;
/// The controller's resync period, far beyond [`CONVERGE`], so that convergence cannot come
/// from a resync. With a 60 s resync this test once caught the example leaving a label stale
/// (4 runs of 20 on kube-apiserver): a reconcile read the Deployment before its own previous
/// PATCH reached the cache, judged the old label right, and the PATCH's update was then
/// dropped as "only our label changed". The example now queues such an update when the label
/// it carries is already stale.
const RESYNC: Duration = Duration::from_secs(300);
/// A node that does not exist: binding the test's Pods to it keeps kind's scheduler and kubelets
/// away from them, so only the test writes their status.
const NO_SUCH_NODE: &str = "kinformer-e2e-no-such-node";
/// The pause image kubeadm v1.37 runs, which every kind node holds: the Pods kind's
/// controller-manager makes for the Deployments then really run, with nothing pulled
/// (`imagePullPolicy: Never`; the node image `cargo xtask kind-image` builds can pull nothing).
const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10.2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workqueue_controller_labels_every_deployment_with_the_ready_pods_the_server_counts() {
    run("controller", |ctx| async move {
        let client = ctx.client();
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ctx.namespace);
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ctx.namespace);
        ensure_default_service_account(&ctx).await;
        for d in 0..DEPLOYMENTS {
            let object: Deployment =
                serde_json::from_value(deployment(d)).expect("a valid Deployment");
            deployments
                .create(&PostParams::default(), &object)
                .await
                .expect("creating a Deployment");
            for slot in 0..SEEDED_SLOTS {
                create_pod(&pods, d, slot, (d + slot) % 3 != 0).await;
            }
        }

        let factory = SharedInformerFactory::new(
            client.clone(),
            FactoryOptions::from_env()
                .namespace(ctx.namespace.clone())
                .resync_for::<Deployment>(RESYNC),
        );
        let mut registry = prometheus_client::registry::Registry::default();
        let controller = ReadyPodsController::new(
            &factory,
            client.clone(),
            RESYNC,
            &mut registry,
            kinformer::leaderelection::shard::Shard::alone(),
        )
        .expect("the controller registers its handlers");
        factory.start().expect("the factory starts");
        let synced = factory.wait_for_cache_sync(CONVERGE).await;
        assert!(synced.all_synced(), "caches: {synced:?}");
        let stop = CancellationToken::new();
        let workers = tokio::spawn(controller.clone().run(WORKERS, stop.clone()));

        eventually("every Deployment labelled after start-up", CONVERGE, || {
            mislabelled(&deployments, &pods)
        })
        .await;
        assert_own_counts(&ctx, &pods, [2, 3, 3]).await;

        // Churn that leaves every Deployment with a count other than the one it is labelled
        // with, so each needs a new PATCH (and on the fake the first PATCHes fail).
        let failures_injected = ctx
            .backend
            .fail_next_patches("deployments", INJECTED_FAILURES);
        churn(&pods).await;

        let cached_pods = factory.lister::<Pod>().expect("the Pod lister");
        let cached_deployments = factory
            .lister::<Deployment>()
            .expect("the Deployment lister");
        eventually(
            "every Deployment relabelled after churn",
            CONVERGE,
            || async {
                mislabelled(&deployments, &pods).await.map_err(|wrong| {
                    let cache = cache_view(&cached_deployments, &cached_pods);
                    format!("{wrong}; {}; cache: {cache}", controller_state(&controller))
                })
            },
        )
        .await;
        assert_own_counts(&ctx, &pods, [4, 2, 2]).await;
        let counters = controller.counters().snapshot();
        if failures_injected {
            assert!(
                counters.retries >= INJECTED_FAILURES as u64,
                "every failed PATCH goes back through the rate limiter: {counters:?}"
            );
        }
        assert_eq!(
            counters.dropped, 0,
            "no key ran out of retries: {counters:?}"
        );

        // Shutdown: the workers finish the keys they hold and return; the informers stop.
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), workers)
            .await
            .expect("the workers return within 10 s of the stop")
            .expect("no worker panicked");
        assert!(controller.queue().shutting_down());
        factory.shutdown().await;
        assert_eq!(factory.running_tasks(), 0, "informer tasks left running");
    })
    .await;
}

/// Deployment `web-{d}` selecting `app=web-{d}`, a spec kube-apiserver accepts.
fn deployment(d: usize) -> Value {
    let app = format!("web-{d}");
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": app, "labels": { "app": app } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": app } },
            "template": {
                "metadata": { "labels": { "app": app } },
                "spec": {
                    "automountServiceAccountToken": false,
                    "containers": [{ "name": "web", "image": PAUSE_IMAGE, "imagePullPolicy": "Never" }],
                },
            },
        },
    })
}

/// Pod admission looks up the namespace's `default` ServiceAccount, which only a
/// controller-manager creates; the local control plane has none, so the test creates it.
pub(crate) async fn ensure_default_service_account(ctx: &Ctx) {
    let accounts: Api<ServiceAccount> = Api::namespaced(ctx.client(), &ctx.namespace);
    let account: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "default" } }))
            .expect("a valid ServiceAccount");
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        // kind's controller-manager got there first.
        Err(kube_client::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the default ServiceAccount: {error}"),
    }
}

/// Creates Pod `web-{d}-{slot}` (labelled `app=web-{d}`), then makes it Ready through the status
/// subresource if asked: kube-apiserver drops the status of a Pod being created.
async fn create_pod(pods: &Api<Pod>, d: usize, slot: usize, ready: bool) {
    let app = format!("web-{d}");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": format!("{app}-{slot}"), "labels": { "app": app } },
        "spec": {
            "nodeName": NO_SUCH_NODE,
            "automountServiceAccountToken": false,
            "containers": [{ "name": "web", "image": PAUSE_IMAGE, "imagePullPolicy": "Never" }],
        },
    }))
    .expect("a valid Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("creating a Pod");
    if ready {
        set_ready(pods, d, slot, true).await;
    }
}

/// Sets Pod `web-{d}-{slot}`'s `Ready` condition through its status subresource, as the kubelet
/// does when a readiness probe starts passing or failing.
async fn set_ready(pods: &Api<Pod>, d: usize, slot: usize, ready: bool) {
    let status = if ready { "True" } else { "False" };
    let patch = json!({ "status": { "conditions": [
        { "type": "PodScheduled", "status": "True" },
        { "type": "Ready", "status": status },
        { "type": "ContainersReady", "status": status },
    ] } });
    pods.patch_status(
        &format!("web-{d}-{slot}"),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .expect("patching a Pod's status");
}

/// Readiness flips (one there and back), a deletion, a creation and a Pod moving between
/// Deployments by its labels. Ready counts go from 2, 3, 3 to 4, 2, 2 (on the test's own Pods).
async fn churn(pods: &Api<Pod>) {
    for d in 0..DEPLOYMENTS {
        set_ready(pods, d, 0, (d % 3) == 0).await;
        set_ready(pods, d, 2, false).await;
        set_ready(pods, d, 2, (d + 2) % 3 != 0).await;
        pods.delete(
            &format!("web-{d}-1"),
            &DeleteParams::default().grace_period(0),
        )
        .await
        .expect("deleting a Pod");
        create_pod(pods, d, SEEDED_SLOTS, true).await;
    }
    let moved = json!({ "metadata": { "labels": { "app": "web-0" } } });
    pods.patch("web-2-3", &PatchParams::default(), &Patch::Merge(&moved))
        .await
        .expect("relabelling a Pod");
}

/// What the controller thinks and holds, for a failure message.
fn controller_state(controller: &ReadyPodsController) -> String {
    format!(
        "controller: {:?} Deployments in sync, queue {} ready and {} waiting, {:?}",
        controller.in_sync(),
        controller.queue().len(),
        controller.queue().waiting_len(),
        controller.counters().snapshot(),
    )
}

/// The controller's caches in one line: each Deployment's label, each Pod's `app` and readiness.
fn cache_view(deployments: &Lister<Deployment>, pods: &Lister<Pod>) -> String {
    let everything = Selector::default();
    let mut view: Vec<String> = deployments
        .list(&everything)
        .iter()
        .map(|deployment| {
            let label = deployment
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(READY_PODS_LABEL).cloned());
            format!(
                "{}@{} {label:?}",
                deployment.name_any(),
                deployment.resource_version().unwrap_or_default()
            )
        })
        .collect();
    view.extend(pods.list(&everything).iter().map(|pod| {
        let app = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get("app").cloned());
        format!(
            "{}@{} {app:?} ready={}",
            pod.name_any(),
            pod.resource_version().unwrap_or_default(),
            ready_on_server(pod)
        )
    }));
    view.sort();
    view.join(", ")
}

/// Where no controller-manager adds Pods of its own (the fake, the local control plane), the
/// server's Ready counts are exactly those of the test's Pods, so the labels checked above are
/// known to be these numbers and not, say, all zero.
async fn assert_own_counts(ctx: &Ctx, pods: &Api<Pod>, expected: [usize; DEPLOYMENTS]) {
    if !matches!(ctx.backend.kind(), BackendKind::Fake | BackendKind::Local) {
        return;
    }
    let mut counts = [0; DEPLOYMENTS];
    for (d, count) in counts.iter_mut().enumerate() {
        let selected = pods
            .list(&ListParams::default().labels(&format!("app=web-{d}")))
            .await
            .expect("listing Pods");
        *count = selected
            .items
            .iter()
            .filter(|pod| ready_on_server(pod))
            .count();
    }
    assert_eq!(counts, expected, "Ready Pods of web-0, web-1, web-2");
}

/// `Ok` when every Deployment's label is the number of Ready Pods the server lists for its
/// selector; otherwise which are wrong, with what they have and should have.
async fn mislabelled(deployments: &Api<Deployment>, pods: &Api<Pod>) -> Result<(), String> {
    let listed = deployments
        .list(&ListParams::default())
        .await
        .map_err(|error| format!("listing Deployments: {error}"))?;
    if listed.items.len() != DEPLOYMENTS {
        return Err(format!("{} Deployments listed", listed.items.len()));
    }
    let mut wrong = Vec::new();
    for deployment in &listed.items {
        let name = deployment.metadata.name.clone().unwrap_or_default();
        let selector = deployment
            .spec
            .selector
            .match_labels
            .as_ref()
            .map(|labels| {
                labels
                    .iter()
                    .map(|(key, value)| format!("{key}={value}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .ok_or_else(|| format!("{name} has no matchLabels"))?;
        let selected = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|error| format!("listing Pods {selector}: {error}"))?;
        let ready = selected
            .items
            .iter()
            .filter(|pod| ready_on_server(pod))
            .count();
        let label = deployment
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(READY_PODS_LABEL));
        if label.map(String::as_str) != Some(ready.to_string().as_str()) {
            wrong.push(format!("{name}: label {label:?}, {ready} Pods Ready"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// Whether the server reports the Pod's `Ready` condition `True` (written out here rather than
/// borrowed from the controller under test).
fn ready_on_server(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}
