//! The `replica_set` example splits the cache exactly: three replicas, each caching the Pods its
//! ring position gives it, hold every Pod of the fake API server once, and still do after a
//! replica crashes (its Lease left to expire), while Pods are created and deleted meanwhile, and
//! after another leaves; with the server filtering the shards (the `ShardedListAndWatch` gate
//! on) and with the informers filtering them (the gate off), for the same caches.
//!
//! The example's file is compiled here as a module (see `controller.rs` for why `#[path]`).

use std::{collections::BTreeSet, time::Duration};

use kinformer::{
    leaderelection::shard::{Ring, ShardOptions},
    reflector::ShardMode,
    store::{Shard, ShardKey},
};
use kinformer_testing::{FakeApiServer, ServerOptions, fixtures, wait_until};
use serde_json::Value;

#[path = "../../examples/replica_set.rs"]
#[allow(
    dead_code,
    reason = "the example's main and argument parsing are not exercised here"
)]
#[allow(
    clippy::duplicate_mod,
    reason = "each example brings the support module they share, as its own module"
)]
mod example;

use example::CacheReplica;

/// Long enough for a crashed replica's Lease to expire and its ranges to be listed by the
/// others; a passing run never waits this long.
const PATIENCE: Duration = Duration::from_secs(60);
const PODS: usize = 240;

fn quick() -> ShardOptions {
    ShardOptions::default()
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(100))
}

fn key(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Whether the live replicas hold the ranges the ring over them gives each, whole, and their
/// caches together hold `pods` once; `Err` says how they do not.
fn split(live: &[&CacheReplica], pods: &BTreeSet<String>) -> Result<(), String> {
    let ring = Ring::new(live.iter().map(|replica| replica.identity.clone()));
    let mut held = BTreeSet::new();
    for replica in live {
        let expected = Shard::ranges(ShardKey::Uid, ring.hash_ranges(&replica.identity))
            .map_err(|error| error.to_string())?;
        let cached = replica.informer.cached_shard();
        if cached.as_deref() != Some(&expected) {
            return Err(format!(
                "{} holds {cached:?}, its ring gives it {expected}",
                replica.identity
            ));
        }
        for key in replica.informer.cache().list_keys() {
            if !held.insert(key.clone()) {
                return Err(format!("{key} is cached twice"));
            }
        }
    }
    if held == *pods {
        Ok(())
    } else {
        Err(format!(
            "missing {:?}, extra {:?}",
            pods.difference(&held).collect::<Vec<_>>(),
            held.difference(pods).collect::<Vec<_>>()
        ))
    }
}

async fn settle(what: &str, live: &[&CacheReplica], pods: &BTreeSet<String>) {
    let settled = wait_until(PATIENCE, || split(live, pods).is_ok()).await;
    assert!(settled, "{what}: {:?}", split(live, pods));
}

async fn a_replica_set_splits_the_cache(server_filters: bool) {
    let server =
        FakeApiServer::start_with(ServerOptions::default().sharded_list_and_watch(server_filters))
            .await
            .expect("the fake server starts");
    let client = server.client().expect("a client");
    let mut pods: BTreeSet<String> = (0..PODS)
        .map(|i| key(&server.create_object(fixtures::pod(i)).expect("seeded")))
        .collect();

    let mut replicas = Vec::new();
    for identity in ["replica-a", "replica-b", "replica-c"] {
        replicas.push(
            CacheReplica::start(&client, identity, quick())
                .await
                .expect("a replica starts"),
        );
    }
    settle(
        "three replicas",
        &replicas.iter().collect::<Vec<_>>(),
        &pods,
    )
    .await;
    let mode = if server_filters {
        ShardMode::Server
    } else {
        ShardMode::Client
    };
    for replica in &replicas {
        let shard = replica
            .informer
            .health()
            .shard
            .expect("an informer of a shard");
        assert_eq!(shard.mode, Some(mode), "{}", replica.identity);
        assert!(
            replica.informer.cache().len() < PODS / 2,
            "{} holds {} of {PODS} Pods",
            replica.identity,
            replica.informer.cache().len()
        );
    }

    // A replica crashes; Pods come and go before its Lease expires.
    let crashed = replicas.remove(1);
    crashed.crash().await;
    for i in PODS..PODS + 12 {
        pods.insert(key(&server
            .create_object(fixtures::pod(i))
            .expect("created")));
    }
    for i in 0..12 {
        let pod = fixtures::pod(i);
        server
            .delete_object(
                "v1",
                "Pod",
                pod["metadata"]["namespace"].as_str(),
                pod["metadata"]["name"].as_str().unwrap_or_default(),
            )
            .expect("deleted");
        pods.remove(&key(&pod));
    }
    settle(
        "two replicas after a crash",
        &replicas.iter().collect::<Vec<_>>(),
        &pods,
    )
    .await;

    // Another leaves gracefully: the last one holds everything.
    let left = replicas.remove(0);
    left.leave().await;
    settle("one replica after a leave", &[&replicas[0]], &pods).await;
    assert_eq!(
        replicas[0].hash_ranges(),
        Some(std::iter::once(0..1 << 64).collect())
    );
    for replica in replicas {
        replica.leave().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_splits_the_cache_on_a_server_that_filters_shards() {
    a_replica_set_splits_the_cache(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_splits_the_cache_on_a_server_that_ignores_the_selector() {
    a_replica_set_splits_the_cache(false).await;
}
