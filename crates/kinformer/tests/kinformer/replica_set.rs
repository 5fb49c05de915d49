//! The `replica_set` example splits the cache and the work exactly: three replicas, each caching
//! the Pods its ring position gives it, hold every Pod of the fake API server once, and each
//! Pod was last worked on by the replica that holds it; so after a replica crashes (its Lease
//! left to expire) while Pods are created and deleted, and after another leaves. Throughout, a
//! ledger of who works on which Pod finds no Pod worked on by two replicas at once, and no
//! worker whose cache lacked the Pod of its key. With the server filtering the shards (the
//! `ShardedListAndWatch` gate on) and with the informers filtering them (the gate off).
//!
//! The example's file is compiled here as a module (see `controller.rs` for why `#[path]`).

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kinformer::{
    factory::FactoryOptions,
    leaderelection::shard::{ObjectKey, Ring, ShardOptions},
    reflector::ShardMode,
    store::{Shard, ShardKey},
};
use kinformer_testing::{FakeApiServer, ServerOptions, fixtures, wait_until};
use parking_lot::Mutex;
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

use example::{CacheReplica, Reconcile};

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

/// Who works on which Pod now, what went wrong, and who last worked on each Pod.
#[derive(Default)]
struct Ledger {
    holders: Mutex<HashMap<String, String>>,
    faults: Mutex<Vec<String>>,
    /// Pod key -> the replica that last finished working on it.
    last: Mutex<HashMap<String, String>>,
    /// Pods deleted from the server: a worker may find them gone.
    deleted: Mutex<BTreeSet<String>>,
}

impl Ledger {
    fn reconcile(self: &Arc<Self>) -> Reconcile {
        let ledger = Arc::clone(self);
        Arc::new(
            move |replica: String, key: ObjectKey, cached: Option<Arc<Pod>>| {
                let ledger = Arc::clone(&ledger);
                Box::pin(async move {
                    let key = key.key().to_owned();
                    if cached.is_none() && !ledger.deleted.lock().contains(&key) {
                        let fault = format!("{replica} worked on {key} without its Pod cached");
                        ledger.faults.lock().push(fault);
                    }
                    let other = ledger.holders.lock().insert(key.clone(), replica.clone());
                    if let Some(other) = other {
                        let fault = format!("{replica} started {key} while {other} held it");
                        ledger.faults.lock().push(fault);
                    }
                    // Let go when the work ends, or when a crash drops it half done.
                    let _hold = Hold {
                        ledger: &ledger,
                        key: &key,
                    };
                    // Work that takes a while: other workers run meanwhile.
                    for _ in 0..8 {
                        tokio::task::yield_now().await;
                    }
                    ledger.last.lock().insert(key.clone(), replica);
                })
            },
        )
    }
}

/// A Pod a replica works on; dropping it frees the Pod in the ledger.
struct Hold<'a> {
    ledger: &'a Ledger,
    key: &'a str,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.ledger.holders.lock().remove(self.key);
    }
}

fn key(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Creates fixture Pod `i`: its key, and the hash of the UID the server gave it.
fn create(server: &FakeApiServer, i: usize) -> (String, u64) {
    let created = server.create_object(fixtures::pod(i)).expect("created");
    let typed: Pod = serde_json::from_value(created.clone()).expect("a Pod");
    (key(&created), ShardKey::Uid.hash(&typed))
}

/// Whether the live replicas hold the ranges the ring over them gives each, whole, their
/// caches together hold `pods` once, and each of `pods` was last worked on by the replica that
/// holds it; `Err` says how they do not.
fn split(
    live: &[&CacheReplica],
    pods: &HashMap<String, u64>,
    ledger: &Ledger,
) -> Result<(), String> {
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
    let keys: BTreeSet<String> = pods.keys().cloned().collect();
    if held != keys {
        return Err(format!(
            "missing {:?}, extra {:?}",
            keys.difference(&held).collect::<Vec<_>>(),
            held.difference(&keys).collect::<Vec<_>>()
        ));
    }
    let last = ledger.last.lock();
    for (key, &hash) in pods {
        let owner = ring.hash_owner(hash);
        if last.get(key).map(String::as_str) != owner {
            return Err(format!(
                "{key} was last worked on by {:?}, not {owner:?}",
                last.get(key)
            ));
        }
    }
    Ok(())
}

fn live(replicas: &[CacheReplica]) -> Vec<&CacheReplica> {
    replicas.iter().collect()
}

async fn settle(what: &str, live: &[&CacheReplica], pods: &HashMap<String, u64>, ledger: &Ledger) {
    let settled = wait_until(PATIENCE, || split(live, pods, ledger).is_ok()).await;
    assert!(settled, "{what}: {:?}", split(live, pods, ledger));
    let faults = ledger.faults.lock();
    assert!(faults.is_empty(), "{what}: {faults:#?}");
}

async fn a_replica_set_splits_the_cache(server_filters: bool) {
    let options = ServerOptions::default().sharded_list_and_watch(server_filters);
    let server = FakeApiServer::start_with(options)
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let mut pods: HashMap<String, u64> = (0..PODS).map(|i| create(&server, i)).collect();
    let ledger = Arc::new(Ledger::default());

    let mut replicas = Vec::new();
    for identity in ["replica-a", "replica-b", "replica-c"] {
        let replica = CacheReplica::start(
            &client,
            None,
            identity,
            quick(),
            FactoryOptions::default(),
            ledger.reconcile(),
        )
        .await;
        replicas.push(replica.expect("a replica starts"));
    }
    settle("three replicas", &live(&replicas), &pods, &ledger).await;
    let mode = if server_filters {
        ShardMode::Server
    } else {
        ShardMode::Client
    };
    for replica in &replicas {
        let health = replica.informer.health();
        let shard = health.shard.expect("an informer of a shard");
        assert_eq!(shard.mode, Some(mode), "{}", replica.identity);
        let held = replica.informer.cache().len();
        assert!(
            held < PODS / 2,
            "{} holds {held} of {PODS} Pods",
            replica.identity
        );
    }

    // A replica crashes; Pods come and go before its Lease expires.
    let crashed = replicas.remove(1);
    crashed.crash().await;
    pods.extend((PODS..PODS + 12).map(|i| create(&server, i)));
    for i in 0..12 {
        let pod = fixtures::pod(i);
        ledger.deleted.lock().insert(key(&pod));
        let (namespace, name) = (
            pod["metadata"]["namespace"].as_str(),
            &pod["metadata"]["name"],
        );
        let name = name.as_str().unwrap_or_default();
        server
            .delete_object("v1", "Pod", namespace, name)
            .expect("deleted");
        pods.remove(&key(&pod));
    }
    settle(
        "two replicas after a crash",
        &live(&replicas),
        &pods,
        &ledger,
    )
    .await;

    // Another leaves gracefully: the last one holds everything.
    let left = replicas.remove(0);
    left.leave().await;
    settle(
        "one replica after a leave",
        &live(&replicas),
        &pods,
        &ledger,
    )
    .await;
    let everything: Vec<_> = std::iter::once(0..1 << 64).collect();
    assert_eq!(replicas[0].hash_ranges(), Some(everything));
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
