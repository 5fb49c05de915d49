//! kinformer's `replica_set` example on the backend's server: three replicas, each caching the
//! Pods of the test's namespace that its ring position gives it, hold every Pod once, as a
//! quorum list of the server has them; so after one replica is killed in the middle of its work
//! (its Lease left to expire, as after a SIGKILL) while Pods are created and deleted, and after
//! another leaves. On the local control plane kube-apiserver filters the shards
//! (`ShardedListAndWatch` on); on kind the informers filter what it sends. Each step's time to
//! settle is printed for docs/e2e.md.
//!
//! The example's file is compiled here as a module, as `e2e_controller.rs` compiles the
//! controller example.

use crate::e2e_support;

#[path = "../../../crates/kinformer/examples/replica_set.rs"]
#[allow(
    dead_code,
    reason = "the example's main and argument parsing are not exercised here"
)]
#[allow(
    clippy::duplicate_mod,
    reason = "each example brings the support module they share, as its own module"
)]
mod replica_set;

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use e2e_support::{BackendKind, eventually, run};
use futures::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Pod;
use kinformer::{
    leaderelection::shard::{Ring, ShardOptions},
    store::{Shard, ShardKey},
};
use kube_client::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use kube_core::ResourceExt as _;
use replica_set::{CacheReplica, Reconcile};
use serde_json::json;

/// Long enough for a killed replica's Lease to expire and its ranges to be listed by the
/// others; a passing step takes a few seconds.
const PATIENCE: Duration = Duration::from_secs(120);
/// A node that does not exist, so that no scheduler or kubelet touches the Pods.
const NO_SUCH_NODE: &str = "kinformer-e2e-no-such-node";

fn options() -> ShardOptions {
    ShardOptions::default()
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_millis(1_400))
        .retry_period(Duration::from_millis(200))
}

async fn create_pods(api: &Api<Pod>, names: impl Iterator<Item = String>) {
    stream::iter(names)
        .for_each_concurrent(16, |name| {
            let api = api.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": { "name": name },
                    "spec": {
                        "nodeName": NO_SUCH_NODE,
                        "automountServiceAccountToken": false,
                        "containers": [{ "name": "c", "image": "pause", "imagePullPolicy": "Never" }],
                    },
                }))
                .expect("a valid Pod");
                api.create(&PostParams::default(), &pod)
                    .await
                    .expect("a Pod is created");
            }
        })
        .await;
}

/// Whether `live` hold the ranges the ring over them gives each, whole, and their caches
/// together hold what a quorum list of the server holds, once.
async fn split(api: &Api<Pod>, live: &[CacheReplica]) -> Result<(), String> {
    let ring = Ring::new(live.iter().map(|replica| replica.identity.clone()));
    let mut held = BTreeSet::new();
    for replica in live {
        let expected = Shard::ranges(ShardKey::Uid, ring.hash_ranges(&replica.identity))
            .map_err(|error| error.to_string())?;
        let cached = replica.informer.cached_shard();
        if cached.as_deref() != Some(&expected) {
            return Err(format!("{} holds another shard", replica.identity));
        }
        for key in replica.informer.cache().list_keys() {
            if !held.insert(key.clone()) {
                return Err(format!("{key} is cached twice"));
            }
        }
    }
    let on_server: BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .map_err(|error| error.to_string())?
        .items
        .iter()
        .map(|pod| format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()))
        .collect();
    if held == on_server {
        Ok(())
    } else {
        Err(format!(
            "{} Pods missing, {} extra",
            on_server.difference(&held).count(),
            held.difference(&on_server).count()
        ))
    }
}

#[allow(
    clippy::print_stderr,
    reason = "the hand-off figures docs/e2e.md quotes"
)]
async fn settle(api: &Api<Pod>, live: &[CacheReplica], step: &str) {
    let began = Instant::now();
    eventually(step, PATIENCE, || split(api, live)).await;
    eprintln!("replica set: {step} settled in {:?}", began.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_splits_the_pods_of_a_namespace_through_a_kill_and_a_leave() {
    run("replica-set", |ctx| async move {
        crate::e2e_controller::ensure_default_service_account(&ctx).await;
        let count = if ctx.backend.kind() == BackendKind::Fake {
            300
        } else {
            3_000
        };
        let api: Api<Pod> = Api::namespaced(ctx.client(), &ctx.namespace);
        create_pods(&api, (0..count).map(|i| format!("pod-{i:05}"))).await;

        let worked = Arc::new(AtomicU64::new(0));
        let reconcile: Reconcile = {
            let worked = Arc::clone(&worked);
            Arc::new(move |_, _, _| {
                worked.fetch_add(1, Ordering::Relaxed);
                Box::pin(std::future::ready(()))
            })
        };
        let mut replicas = Vec::new();
        for identity in ["replica-a", "replica-b", "replica-c"] {
            let replica = CacheReplica::start(
                &ctx.client(),
                Some(&ctx.namespace),
                identity,
                options(),
                Arc::clone(&reconcile),
            )
            .await;
            replicas.push(replica.expect("a replica starts"));
        }
        settle(&api, &replicas, "three replicas start").await;
        for replica in &replicas {
            let stats = replica
                .informer
                .health()
                .shard
                .expect("an informer of a shard");
            match ctx.backend.shard_mode() {
                Some(mode) => assert_eq!(stats.mode, Some(mode), "{}", replica.identity),
                None => assert!(stats.mode.is_some(), "{}", replica.identity),
            }
            let held = replica.informer.cache().len();
            assert!(
                held < count / 2,
                "{} holds {held} of {count}",
                replica.identity
            );
        }
        assert!(
            worked.load(Ordering::Relaxed) >= count as u64,
            "every Pod worked on"
        );

        // One is killed mid-work; Pods come and go before its Lease expires.
        replicas.remove(1).crash().await;
        create_pods(&api, (count..count + 30).map(|i| format!("pod-{i:05}"))).await;
        for i in 0..30 {
            api.delete(
                &format!("pod-{i:05}"),
                &DeleteParams::default().grace_period(0),
            )
            .await
            .expect("a Pod is deleted");
        }
        settle(&api, &replicas, "a killed replica's ranges are taken over").await;

        replicas.remove(0).leave().await;
        settle(&api, &replicas, "a leaving replica's ranges are taken over").await;
        for replica in replicas {
            replica.leave().await;
        }
    })
    .await;
}
