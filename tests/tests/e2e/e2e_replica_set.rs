//! kinformer's `replica_set` example on the backend's server: three replicas, each caching the
//! Pods of the test's namespace that its ring position gives it, hold every Pod once, at the
//! version a quorum list of the server has it. One of them is a process of its own, killed with
//! SIGKILL in the middle of its work while Pods are created, updated and deleted: the other two
//! own its ranges once its Lease expires, list them, and hold every Pod again with each change,
//! which their informers' consistency checks confirm against the server; then one of them
//! leaves. On the local control plane kube-apiserver filters the shards (`ShardedListAndWatch`
//! on); on kind the informers filter what it sends. The times from the kill until the others
//! own and hold the ranges, and each step's time to settle, are printed for docs/e2e.md.
//!
//! The example's file is compiled here as a module, as `e2e_controller.rs` compiles the
//! controller example. The process is this test binary run again with
//! `KINFORMER_E2E_CACHE_REPLICA` set: the same test function then runs one replica, and reports
//! in a ConfigMap each shard its cache takes whole.

use crate::e2e_support;
use crate::processes;

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
    collections::BTreeMap,
    ops::Range,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use e2e_support::{BackendKind, eventually, run};
use futures::{StreamExt as _, future::join_all, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer::{
    factory::FactoryOptions,
    leaderelection::shard::{Ring, ShardOptions},
    reflector::ShardMode,
    store::{Shard, ShardKey},
};
use kube_client::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use kube_core::ResourceExt as _;
use processes::Children;
use replica_set::{CacheReplica, Reconcile};
use serde_json::json;

const REPLICA: &str = "KINFORMER_E2E_CACHE_REPLICA";
const TEST: &str =
    "e2e_replica_set::a_replica_set_splits_the_pods_of_a_namespace_through_a_sigkill_and_a_leave";
/// The replica that runs as a process of its own, and is killed.
const PROCESS: &str = "replica-c";
/// Long enough for a killed replica's Lease to expire and its ranges to be listed by the
/// others; a passing step takes a few seconds.
const PATIENCE: Duration = Duration::from_secs(120);
const LEASE_DURATION: Duration = Duration::from_secs(2);
const RETRY_PERIOD: Duration = Duration::from_millis(200);
/// How often the in-process replicas' informers check their caches against the server.
const CHECK_PERIOD: Duration = Duration::from_millis(500);
/// A node that does not exist, so that no scheduler or kubelet touches the Pods.
const NO_SUCH_NODE: &str = "kinformer-e2e-no-such-node";
/// Pods created, updated and deleted while the killed replica's Lease runs out.
const CHANGES: usize = 30;

fn options() -> ShardOptions {
    ShardOptions::default()
        .lease_duration(LEASE_DURATION)
        .renew_deadline(Duration::from_millis(1_400))
        .retry_period(RETRY_PERIOD)
}

fn report_name(identity: &str) -> String {
    format!("shard-of-{identity}")
}

/// The replica process: runs one replica, and reports each shard its cache takes whole, with
/// how many Pods it holds then, until it is killed.
async fn replica_process(identity: String) {
    let (namespace, client) = processes::child_context().await;
    let reconcile: Reconcile = Arc::new(|_, _, _| Box::pin(std::future::ready(())));
    let replica = CacheReplica::start(
        &client,
        Some(&namespace),
        &identity,
        options(),
        FactoryOptions::from_env(),
        reconcile,
    )
    .await
    .expect("a replica starts");
    let reports: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let name = report_name(&identity);
    let mut held = replica.held();
    loop {
        let shard = held.borrow_and_update().clone();
        if let Some(shard) = shard {
            let report = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": name },
                "data": {
                    "shard": shard.to_string(),
                    "pods": replica.informer.cache().len().to_string(),
                },
            });
            let created = reports
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(report.clone()).expect("a ConfigMap"),
                )
                .await;
            if created.is_err() {
                reports
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&report))
                    .await
                    .expect("the report is written");
            }
        }
        if held.changed().await.is_err() {
            return;
        }
    }
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

/// Whether the replicas hold the ranges the ring over them gives each, whole, and together
/// hold what a quorum list of the server holds, once, each Pod at the server's version: the
/// in-process `live` by their caches, and the process (with `reports`) by the shard and the
/// count it reported.
async fn split(
    api: &Api<Pod>,
    live: &[CacheReplica],
    reports: Option<&Api<ConfigMap>>,
) -> Result<(), String> {
    let mut members: Vec<String> = live
        .iter()
        .map(|replica| replica.identity.clone())
        .collect();
    members.extend(reports.map(|_| PROCESS.to_owned()));
    let ring = Ring::new(members);
    let shard_of = |identity: &str| {
        Shard::ranges(ShardKey::Uid, ring.hash_ranges(identity)).map_err(|error| error.to_string())
    };
    let on_server = api
        .list(&ListParams::default())
        .await
        .map_err(|error| error.to_string())?
        .items;
    let version = |pod: &Pod| pod.resource_version().unwrap_or_default();
    let mut held = BTreeMap::new();
    for replica in live {
        let expected = shard_of(&replica.identity)?;
        if replica.informer.cached_shard().as_deref() != Some(&expected) {
            return Err(format!("{} holds another shard", replica.identity));
        }
        for pod in replica.informer.cache().list() {
            if held.insert(pod.name_any(), version(&pod)).is_some() {
                return Err(format!("{} is cached twice", pod.name_any()));
            }
        }
    }
    if let Some(reports) = reports {
        let expected = shard_of(PROCESS)?;
        let report = reports
            .get_opt(&report_name(PROCESS))
            .await
            .map_err(|error| error.to_string())?
            .and_then(|report| report.data)
            .ok_or("no report from the process yet")?;
        if report.get("shard") != Some(&expected.to_string()) {
            return Err(format!("{PROCESS} holds another shard"));
        }
        let mine: Vec<&Pod> = on_server
            .iter()
            .filter(|pod| expected.contains(*pod))
            .collect();
        if report.get("pods") != Some(&mine.len().to_string()) {
            return Err(format!(
                "{PROCESS} holds {:?} Pods of {}",
                report.get("pods"),
                mine.len()
            ));
        }
        // Its cache holds only its shard: as many Pods as the server has there are those Pods.
        for pod in mine {
            if held.insert(pod.name_any(), version(pod)).is_some() {
                return Err(format!("{} is cached twice", pod.name_any()));
            }
        }
    }
    let on_server: BTreeMap<String, String> = on_server
        .iter()
        .map(|pod| (pod.name_any(), version(pod)))
        .collect();
    if held == on_server {
        return Ok(());
    }
    let stale = held
        .iter()
        .filter(|(name, version)| on_server.get(*name).is_some_and(|on| on != *version))
        .count();
    Err(format!(
        "{} Pods missing, {} extra, {stale} at another version",
        on_server
            .keys()
            .filter(|name| !held.contains_key(*name))
            .count(),
        held.keys()
            .filter(|name| !on_server.contains_key(*name))
            .count(),
    ))
}

#[allow(
    clippy::print_stderr,
    reason = "the hand-off figures docs/e2e.md quotes"
)]
async fn settle(
    api: &Api<Pod>,
    live: &[CacheReplica],
    reports: Option<&Api<ConfigMap>>,
    step: &str,
) {
    let began = Instant::now();
    eventually(step, PATIENCE, || split(api, live, reports)).await;
    eprintln!("replica set: {step} settled in {:?}", began.elapsed());
}

/// `replica`'s informer says who filters its shard: `expected`, where the backend says.
fn assert_mode(expected: Option<ShardMode>, replica: &CacheReplica) {
    let stats = replica
        .informer
        .health()
        .shard
        .expect("an informer of a shard");
    match expected {
        Some(mode) => assert_eq!(stats.mode, Some(mode), "{}", replica.identity),
        None => assert!(stats.mode.is_some(), "{}", replica.identity),
    }
}

/// How long after `since` `replica` came to own `ranges` (its ring gave them), and to hold
/// them (its cache took them whole).
async fn take_over(
    replica: &CacheReplica,
    ranges: Vec<Range<u128>>,
    since: Instant,
) -> (Duration, Duration) {
    let mut ring = replica.ring_changes();
    let owned = loop {
        ring.borrow_and_update();
        if replica.hash_ranges().as_ref() == Some(&ranges) {
            break since.elapsed();
        }
        ring.changed().await.expect("the replica runs");
    };
    let shard = Shard::ranges(ShardKey::Uid, ranges).expect("the ring's ranges");
    replica
        .held()
        .wait_for(|held| held.as_deref() == Some(&shard))
        .await
        .expect("the replica runs");
    (owned, since.elapsed())
}

/// Creates, updates and deletes `CHANGES` Pods each, after the first `count`.
async fn change_pods(api: &Api<Pod>, count: usize) {
    create_pods(api, (count..count + CHANGES).map(|i| format!("pod-{i:05}"))).await;
    for i in 0..CHANGES {
        api.patch(
            &format!("pod-{:05}", CHANGES + i),
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "changed": "while-killed" } } })),
        )
        .await
        .expect("a Pod is updated");
        api.delete(
            &format!("pod-{i:05}"),
            &DeleteParams::default().grace_period(0),
        )
        .await
        .expect("a Pod is deleted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::print_stderr,
    reason = "the hand-off figures docs/e2e.md quotes"
)]
async fn a_replica_set_splits_the_pods_of_a_namespace_through_a_sigkill_and_a_leave() {
    if let Ok(identity) = std::env::var(REPLICA) {
        return replica_process(identity).await;
    }
    run("replica-set", |ctx| async move {
        crate::e2e_controller::ensure_default_service_account(&ctx).await;
        let count = if ctx.backend.kind() == BackendKind::Fake {
            300
        } else {
            3_000
        };
        let api: Api<Pod> = Api::namespaced(ctx.client(), &ctx.namespace);
        let reports: Api<ConfigMap> = Api::namespaced(ctx.client(), &ctx.namespace);
        create_pods(&api, (0..count).map(|i| format!("pod-{i:05}"))).await;

        let kubeconfig = ctx.backend.kubeconfig_file();
        let mut process =
            Children::new(TEST, REPLICA, &ctx.namespace, kubeconfig.path(), Vec::new());
        process.spawn(PROCESS);
        let worked = Arc::new(AtomicU64::new(0));
        let reconcile: Reconcile = {
            let worked = Arc::clone(&worked);
            Arc::new(move |_, _, _| {
                worked.fetch_add(1, Ordering::Relaxed);
                Box::pin(std::future::ready(()))
            })
        };
        let mut replicas = Vec::new();
        for identity in ["replica-a", "replica-b"] {
            let replica = CacheReplica::start(
                &ctx.client(),
                Some(&ctx.namespace),
                identity,
                options(),
                FactoryOptions::from_env().consistency_check(CHECK_PERIOD),
                Arc::clone(&reconcile),
            )
            .await;
            replicas.push(replica.expect("a replica starts"));
        }
        settle(&api, &replicas, Some(&reports), "three replicas start").await;
        let mut held = 0;
        for replica in &replicas {
            assert_mode(ctx.backend.shard_mode(), replica);
            let pods = replica.informer.cache().len();
            assert!(
                pods < count / 2,
                "{} holds {pods} of {count}",
                replica.identity
            );
            held += pods;
        }
        eventually("every Pod held is worked on", PATIENCE, || {
            let worked = worked.load(Ordering::Relaxed);
            async move {
                (worked >= held as u64)
                    .then_some(())
                    .ok_or(format!("{worked} of {held} worked on"))
            }
        })
        .await;

        // The process is killed mid-work, its Lease left to run out; Pods come, change and go
        // meanwhile. The others own its ranges once the Lease expires, and then list them.
        process.kill(PROCESS);
        let killed = Instant::now();
        let ring = Ring::new(replicas.iter().map(|replica| replica.identity.clone()));
        let (taken, ()) = tokio::join!(
            join_all(replicas.iter().map(|replica| {
                take_over(replica, ring.hash_ranges(&replica.identity), killed)
            })),
            change_pods(&api, count),
        );
        let owned = taken
            .iter()
            .map(|(owned, _)| *owned)
            .max()
            .unwrap_or_default();
        let synced = taken
            .iter()
            .map(|(_, synced)| *synced)
            .max()
            .unwrap_or_default();
        eprintln!(
            "replica set: a SIGKILLed replica's ranges owned by the others after {owned:?}, \
             held whole after {synced:?} (lease {LEASE_DURATION:?}, retry {RETRY_PERIOD:?})"
        );
        settle(
            &api,
            &replicas,
            None,
            "a killed replica's ranges are taken over",
        )
        .await;
        // No change made meanwhile was missed: each informer's own check, listing the server
        // at exactly the version its cache reached, finds nothing, twice more.
        for replica in &replicas {
            let since = replica.informer.consistency_stats().checks;
            eventually("consistency checks after the kill", PATIENCE, || {
                let stats = replica.informer.consistency_stats();
                async move {
                    (stats.checks >= since + 2)
                        .then_some(())
                        .ok_or(format!("{stats:?}"))
                }
            })
            .await;
            let stats = replica.informer.consistency_stats();
            assert_eq!(stats.drifts, 0, "{}: {stats:?}", replica.identity);
            // The checks' reads of the past, which carry the shard too, leave the mode be.
            assert_mode(ctx.backend.shard_mode(), replica);
        }

        replicas.remove(0).leave().await;
        settle(
            &api,
            &replicas,
            None,
            "a leaving replica's ranges are taken over",
        )
        .await;
        for replica in replicas {
            replica.leave().await;
        }
    })
    .await;
}
