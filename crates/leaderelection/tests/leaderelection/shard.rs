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
            RateLimitingQueue::new(default_controller_rate_limiter(), QueueOptions::default()),
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
    let ring = Ring::new(live.iter().map(|replica| replica.identity.clone()));
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
