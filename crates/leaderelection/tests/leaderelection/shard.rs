//! Sharding over kube-client against kinformer-testing's API server: replicas join, crash and
//! leave while their workers reconcile a thousand keys through `ShardedQueue`s. A shared
//! ledger records who holds each key: no key is ever held by two replicas at once, every key
//! is reconciled by its owner after each membership change, and a replica that cannot renew
//! its Lease stops starting keys.
//!
//! Durations are short and real: each step awaits the state it expects (bounded by
//! `PATIENCE`, which a passing test never reaches) and asserts no timings.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kinformer_leaderelection::shard::{Ring, ShardMember, ShardOptions, ShardedQueue};
use kinformer_testing::{FakeApiServer, Fault, Verb};
use kinformer_workqueue::{QueueOptions, RateLimitingQueue, default_controller_rate_limiter};
use kube_client::Client;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "default";
const GROUP: &str = "web";
const KEYS: usize = 1_000;
const WORKERS: usize = 4;

fn quick() -> ShardOptions {
    ShardOptions::default()
        // A leader loses its lease only after 2 s without a renewal: short enough for a quick
        // test, long enough that a loaded machine's stalls do not cost it the lease.
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(100))
}

fn keys() -> Arc<Vec<String>> {
    Arc::new(
        (0..KEYS)
            .map(|i| format!("team-{}/object-{i}", i % 5))
            .collect(),
    )
}

/// Who holds each key now, every overlap seen, and each key's latest reconcile.
#[derive(Default)]
struct Ledger {
    holders: Mutex<HashMap<String, String>>,
    overlaps: Mutex<Vec<String>>,
    sequence: AtomicU64,
    /// key -> (replica, sequence number at which its reconcile finished)
    finished: Mutex<HashMap<String, (String, u64)>>,
}

/// A key held by a replica; dropping it (the work finished, or the replica died) frees it.
struct Hold<'a> {
    ledger: &'a Ledger,
    key: String,
}

impl Ledger {
    fn hold(&self, key: &str, replica: &str) -> Hold<'_> {
        let mut holders = self.holders.lock();
        if let Some(other) = holders.insert(key.to_owned(), replica.to_owned()) {
            self.overlaps
                .lock()
                .push(format!("{key}: {replica} started while {other} held it"));
        }
        Hold {
            ledger: self,
            key: key.to_owned(),
        }
    }

    fn now(&self) -> u64 {
        self.sequence.fetch_add(1, Ordering::SeqCst)
    }

    /// Whether every key's latest reconcile after `since` was by its owner on `ring`.
    fn settled(&self, keys: &[String], ring: &Ring, since: u64) -> Result<(), String> {
        let finished = self.finished.lock();
        let behind = keys
            .iter()
            .filter(|key| match finished.get(*key) {
                Some((replica, at)) => *at < since || ring.owner(key) != Some(replica.as_str()),
                None => true,
            })
            .count();
        if behind == 0 {
            Ok(())
        } else {
            Err(format!(
                "{behind} keys not yet reconciled by their owner on {ring}"
            ))
        }
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.ledger.holders.lock().remove(&self.key);
    }
}

/// One replica: its membership, a feeder that queues every owned key on each ownership
/// change, and workers.
struct Replica {
    identity: String,
    token: CancellationToken,
    member: tokio::task::JoinHandle<()>,
    tasks: JoinSet<()>,
}

impl Replica {
    fn start(
        client: &Client,
        identity: &str,
        keys: &Arc<Vec<String>>,
        ledger: &Arc<Ledger>,
    ) -> Self {
        let member = ShardMember::new(client.clone(), NAMESPACE, GROUP, identity, quick())
            .expect("valid member");
        let shard = member.shard();
        let token = CancellationToken::new();
        let member = tokio::spawn({
            let token = token.clone();
            async move { member.run(token).await }
        });
        let queue = Arc::new(ShardedQueue::new(
            RateLimitingQueue::new(
                default_controller_rate_limiter(),
                QueueOptions::named(identity).without_metrics(),
            ),
            shard.clone(),
        ));
        let mut tasks = JoinSet::new();
        tasks.spawn({
            let (queue, keys) = (Arc::clone(&queue), Arc::clone(keys));
            let mut changes = shard.changes();
            async move {
                loop {
                    for key in keys.iter() {
                        queue.add(key.clone());
                    }
                    if changes.changed().await.is_err() {
                        return;
                    }
                }
            }
        });
        for _ in 0..WORKERS {
            let (queue, ledger, identity) =
                (Arc::clone(&queue), Arc::clone(ledger), identity.to_owned());
            tasks.spawn(async move {
                while let Some((key, guard)) = queue.get().await {
                    let hold = ledger.hold(&key, &identity);
                    // A reconcile that takes a moment, so that a second holder would overlap.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let at = ledger.now();
                    ledger
                        .finished
                        .lock()
                        .insert(key.clone(), (identity.clone(), at));
                    drop(hold);
                    queue.forget(&key);
                    queue.done(&key, guard);
                }
            });
        }
        Self {
            identity: identity.to_owned(),
            token,
            member,
            tasks,
        }
    }

    /// SIGKILL in miniature: everything stops mid-work; the Lease stays until it expires.
    async fn crash(mut self) {
        self.member.abort();
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let _ = self.member.await;
    }

    /// A graceful exit: no new work, the keys in flight finish, the Lease is deleted.
    async fn leave(mut self) {
        self.token.cancel();
        tokio::time::timeout(PATIENCE, &mut self.member)
            .await
            .expect("the member leaves")
            .expect("the member task ends cleanly");
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

async fn settle(ledger: &Ledger, keys: &[String], live: &[&Replica]) {
    let ring = Ring::new(live.iter().map(|replica| replica.identity.clone()), 512);
    let since = ledger.now();
    tokio::time::timeout(PATIENCE, async {
        loop {
            if ledger.settled(keys, &ring, since).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await; // polls the ledger
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{}", ledger.settled(keys, &ring, since).unwrap_err()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_join_crash_and_leave_and_no_key_is_held_twice() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let (keys, ledger) = (keys(), Arc::new(Ledger::default()));

    let a = Replica::start(&client, "replica-a", &keys, &ledger);
    let b = Replica::start(&client, "replica-b", &keys, &ledger);
    settle(&ledger, &keys, &[&a, &b]).await;

    let c = Replica::start(&client, "replica-c", &keys, &ledger);
    settle(&ledger, &keys, &[&a, &b, &c]).await;

    // b crashes: its keys wait out its Lease, then move to a and c.
    b.crash().await;
    settle(&ledger, &keys, &[&a, &c]).await;

    // A new replica joins, then c leaves cleanly: its keys move without waiting for expiry.
    let d = Replica::start(&client, "replica-d", &keys, &ledger);
    settle(&ledger, &keys, &[&a, &c, &d]).await;
    c.leave().await;
    settle(&ledger, &keys, &[&a, &d]).await;

    let overlaps = ledger.overlaps.lock().clone();
    assert!(overlaps.is_empty(), "keys held twice: {overlaps:#?}");
    a.leave().await;
    d.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_renew_stops_starting_keys_and_resumes_after() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let member =
        ShardMember::new(client, NAMESPACE, GROUP, "replica-a", quick()).expect("valid member");
    let shard = member.shard();
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let token = token.clone();
        async move { member.run(token).await }
    });
    let startable = |shard: &kinformer_leaderelection::shard::Shard| {
        keys()
            .iter()
            .filter(|key| shard.try_start(key).is_some())
            .count()
    };
    let wait_for = |want_all: bool| {
        let shard = shard.clone();
        async move {
            tokio::time::timeout(PATIENCE, async {
                loop {
                    let count = startable(&shard);
                    if (count == KEYS) == want_all && (count == 0) != want_all {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await; // polls the gate
                }
            })
            .await
            .expect("the gate reaches the expected state");
        }
    };
    // Alone, it owns every key.
    wait_for(true).await;
    // A renewal writes the Lease as last written, without reading it first.
    let faults = server.faults();
    let (gets, updates) = (
        faults.request_count(Verb::Get, "leases"),
        faults.request_count(Verb::Update, "leases"),
    );
    tokio::time::timeout(PATIENCE, async {
        while faults.request_count(Verb::Update, "leases") < updates + 5 {
            tokio::time::sleep(Duration::from_millis(20)).await; // polls the server's counts
        }
    })
    .await
    .expect("the member keeps renewing");
    assert_eq!(
        faults.request_count(Verb::Get, "leases"),
        gets,
        "a read per renewal"
    );
    // Renewals fail (every Lease update answers 500): within the renew deadline it starts
    // nothing, though nobody else has taken over.
    server.faults().inject(
        Fault::status(500)
            .verb(Verb::Update)
            .resource("leases")
            .times(usize::MAX),
    );
    wait_for(false).await;
    server.faults().clear();
    wait_for(true).await;
    token.cancel();
    running.await.expect("the member leaves");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_handler_sees_only_the_objects_its_replica_owns() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kinformer_leaderelection::shard::{Shard, ShardedHandler};
    use kinformer_processor::{AddKind, HandlerFuncs, ResourceEventHandler as _};
    use kinformer_store::{DeletedFinalStateUnknown, ObjectOrTombstone, OldObject};

    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let token = CancellationToken::new();
    let mut shards = Vec::new();
    for identity in ["replica-a", "replica-b"] {
        let member = ShardMember::new(client.clone(), NAMESPACE, GROUP, identity, quick())
            .expect("valid member");
        shards.push(member.shard());
        let token = token.clone();
        tokio::spawn(async move { member.run(token).await });
    }
    let config_maps: Vec<Arc<ConfigMap>> = (0..200)
        .map(|i| {
            let mut config_map = ConfigMap::default();
            config_map.metadata.namespace = Some("team".to_owned());
            config_map.metadata.name = Some(format!("object-{i}"));
            Arc::new(config_map)
        })
        .collect();
    // Both see the two-member ring, and every key can start somewhere.
    tokio::time::timeout(PATIENCE, async {
        loop {
            let settled = shards
                .iter()
                .all(|shard: &Shard| shard.ring().is_some_and(|ring| ring.members().len() == 2))
                && (0..200).all(|i| {
                    let key = format!("team/object-{i}");
                    shards.iter().any(|shard| shard.try_start(&key).is_some())
                });
            if settled {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await; // polls the gates
        }
    })
    .await
    .expect("the two members settle");

    let mut seen_by = Vec::new();
    for shard in &shards {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (on_add, on_update, on_delete) =
            (Arc::clone(&seen), Arc::clone(&seen), Arc::clone(&seen));
        let mut handler = ShardedHandler::new(
            shard.clone(),
            HandlerFuncs::new()
                .add_func(move |config_map: Arc<ConfigMap>, _| {
                    on_add
                        .lock()
                        .push(config_map.metadata.name.clone().unwrap_or_default());
                })
                .update_new_func(move |config_map: Arc<ConfigMap>| {
                    on_update.lock().push(format!(
                        "updated {}",
                        config_map.metadata.name.clone().unwrap_or_default()
                    ));
                })
                .delete_func(move |gone: ObjectOrTombstone<ConfigMap>| {
                    on_delete.lock().push(format!(
                        "deleted {}",
                        gone.object().metadata.name.clone().unwrap_or_default()
                    ));
                }),
        );
        for config_map in &config_maps {
            handler.on_add(Arc::clone(config_map), AddKind::Live);
            let old = OldObject::decoded(Arc::clone(config_map));
            handler.on_update_lazy(old, Arc::clone(config_map));
        }
        // A tombstone is routed by the key it carries.
        handler.on_delete(ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "team/object-7".to_owned(),
            obj: Arc::clone(&config_maps[7]),
        }));
        seen_by.push((shard.clone(), seen));
    }
    let mut total = 0;
    for (shard, seen) in &seen_by {
        let seen = seen.lock();
        for name in seen.iter().filter(|name| !name.starts_with("deleted ")) {
            let name = name.strip_prefix("updated ").unwrap_or(name);
            assert!(
                shard.owns(&format!("team/{name}")),
                "{} saw {name}",
                shard.identity()
            );
            total += 1;
        }
        let deleted = seen.contains(&"deleted object-7".to_owned());
        assert_eq!(deleted, shard.owns("team/object-7"), "{}", shard.identity());
    }
    assert_eq!(
        total,
        2 * config_maps.len(),
        "each object's add and update reached exactly one replica"
    );
    token.cancel();
}
