//! A replica set that splits one cache and the work on it: each replica caches only the Pods
//! that the ring over the live replicas gives it, and works only on those Pods' keys, so three
//! replicas hold a third of the Pods each, together all of them once, and no Pod is worked on
//! by two live replicas at once.
//!
//! ```text
//! cargo run -p kinformer --example replica_set                   # your cluster, or the fake one
//! cargo run -p kinformer --example replica_set -- --replicas 5 --seconds 20
//! cargo run -p kinformer --example replica_set -- --fake --pods 3000
//! cargo run -p kinformer --example replica_set -- --identity a   # one replica of several processes
//! ```
//!
//! Each replica keeps a Lease in the `pod-cache` shard group (a
//! [`ShardMember`](kinformer::leaderelection::shard::ShardMember)), and has a factory whose
//! shard is the ranges of the UID hash that its ring position gives it
//! ([`Shard::hash_ranges`](kinformer::leaderelection::shard::Shard::hash_ranges)). Its Pod
//! informer asks kube-apiserver for that shard on every list and watch (the
//! `ShardedListAndWatch` feature gate) and filters on the client when the server ignores the
//! selector, so the caches are the same either way. When a replica joins, leaves or crashes,
//! the others' rings change, their factories move to their new ranges
//! ([`SharedInformerFactory::set_shard`]), list them, and say once they hold them whole
//! ([`SharedInformerFactory::wait_for_shard`]); handlers see a Pod that moved in as an add and
//! one that moved out as a deletion marked `left_shard`.
//!
//! Each change a handler sees is queued as an [`ObjectKey`]: the Pod's key, placed on the ring
//! by the hash of its UID, so the replica that owns the key is the one whose cache holds the
//! Pod. A [`ShardedQueue`] hands a worker a key only once no other live replica may be working
//! on it; a replica keeps caching the ranges of a key it is still working on after the key
//! moved away, so a worker never finds its Pod gone from the cache because of a hand-off.
//!
//! Without a kubeconfig (or with `--fake`) it starts kinformer-testing's API server in this
//! process, with sharded list and watch on, and seeds it with Pods. It prints each replica's
//! share as it changes, and how many keys it worked on. `tests/kinformer/replica_set.rs` runs
//! this file's replicas through a join, a crash and a leave, and checks after each that the
//! caches split the Pods exactly and that each Pod was last worked on by its owner, with no
//! Pod ever worked on by two replicas at once.

#![allow(clippy::print_stdout, reason = "an example reports on the terminal")]

#[path = "support/mod.rs"]
mod support;

use std::{
    collections::BTreeMap,
    ops::Range,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kinformer::{
    factory::{FactoryOptions, SharedInformerFactory},
    informer::SharedIndexInformer,
    leaderelection::shard::{
        ObjectKey, Shard as Membership, ShardMember, ShardOptions, ShardedQueue,
    },
    prelude::{QueueOptions, RateLimitingQueue, default_controller_rate_limiter},
    store::{ObjectOrTombstone, Shard, ShardKey},
    testing::{FakeApiServer, ServerOptions, fixtures},
    wait::CancellationToken,
};
use kube_client::Client;
use tokio::{sync::watch, task::JoinSet};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a worker does with a key: given the replica's identity, the key, and what its cache
/// holds under the key (`None` once the Pod is deleted).
pub(crate) type Reconcile = Arc<
    dyn Fn(String, ObjectKey, Option<Arc<Pod>>) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// Workers per replica.
const WORKERS: usize = 2;

/// The shard group every replica joins.
pub(crate) const GROUP: &str = "pod-cache";
/// Where the Leases are when the replicas inform every namespace.
const LEASE_NAMESPACE: &str = "default";

/// One replica: its membership, a factory of the shard its ranges make with an informer of
/// the Pods there, and the workers of its queue.
pub(crate) struct CacheReplica {
    pub(crate) identity: String,
    pub(crate) informer: SharedIndexInformer<Pod>,
    factory: SharedInformerFactory,
    membership: Membership,
    queue: ShardedQueue<ObjectKey>,
    token: CancellationToken,
    member: tokio::task::JoinHandle<()>,
    tasks: JoinSet<()>,
    /// The shard the cache last took whole, as the ring gave it.
    held: watch::Receiver<Option<Arc<Shard>>>,
}

/// Queues the work item of `pod`: its key, placed by its UID.
fn enqueue(queue: &ShardedQueue<ObjectKey>, pod: &Pod) {
    if let Ok(key) = kinformer::store::meta_namespace_key_func(pod) {
        queue.add(ObjectKey::new(key, ShardKey::Uid.hash(pod)));
    }
}

impl CacheReplica {
    /// Joins the group as `identity`, waits for a ring, then informs the ranges it gives this
    /// replica of the Pods of `namespace` (every namespace without one, whose replicas keep
    /// their Leases in `default`) through a factory with `factory`'s options, and follows the
    /// ring from then on, with workers that `reconcile` the keys it owns.
    pub(crate) async fn start(
        client: &Client,
        namespace: Option<&str>,
        identity: &str,
        options: ShardOptions,
        factory: FactoryOptions,
        reconcile: Reconcile,
    ) -> Result<Self, BoxError> {
        let lease_namespace = namespace.unwrap_or(LEASE_NAMESPACE);
        let member = ShardMember::new(client.clone(), lease_namespace, GROUP, identity, options)?;
        let membership = member.shard();
        let mut changes = membership.changes();
        let token = CancellationToken::new();
        let member = tokio::spawn({
            let token = token.clone();
            async move { member.run(token).await }
        });
        // The first ring says which ranges to list first.
        let shard = loop {
            if let Some(shard) = shard_of(&membership) {
                break shard;
            }
            changes.changed().await?;
        };
        let factory = match namespace {
            Some(namespace) => factory.namespace(namespace),
            None => factory,
        };
        let factory = SharedInformerFactory::new(client.clone(), factory.shard(shard));
        let informer = factory.informer::<Pod>()?;
        let queue = ShardedQueue::new(
            RateLimitingQueue::new(
                default_controller_rate_limiter(),
                QueueOptions::named(identity),
            ),
            membership.clone(),
        );
        // Every change is queued but a Pod leaving this replica's ranges: its new owner's
        // informer sees it arrive.
        informer.add_event_handler(
            informer
                .handler_funcs()
                .add_func({
                    let queue = queue.clone();
                    move |pod, _| enqueue(&queue, &pod)
                })
                .update_func({
                    let queue = queue.clone();
                    move |_, pod| enqueue(&queue, &pod)
                })
                .delete_func({
                    let queue = queue.clone();
                    move |gone| match gone {
                        ObjectOrTombstone::Tombstone(tombstone) if tombstone.left_shard => {}
                        gone => enqueue(&queue, gone.object()),
                    }
                }),
        )?;
        let mut tasks = JoinSet::new();
        for _ in 0..WORKERS {
            tasks.spawn(work(
                queue.clone(),
                informer.clone(),
                identity.to_owned(),
                Arc::clone(&reconcile),
            ));
        }
        factory.start()?;
        let (took, held) = watch::channel(None);
        tasks.spawn(follow(
            membership.clone(),
            factory.clone(),
            informer.clone(),
            queue.clone(),
            (identity.to_owned(), took),
            token.clone(),
        ));
        Ok(Self {
            identity: identity.to_owned(),
            informer,
            factory,
            membership,
            queue,
            token,
            member,
            tasks,
            held,
        })
    }

    /// The ranges this replica's ring gives it now.
    pub(crate) fn hash_ranges(&self) -> Option<Vec<Range<u128>>> {
        self.membership.hash_ranges()
    }

    /// Changes whenever the ring may have given this replica other ranges.
    #[allow(dead_code, reason = "the e2e times a hand-off; the example does not")]
    pub(crate) fn ring_changes(&self) -> watch::Receiver<u64> {
        self.membership.changes()
    }

    /// The shard the cache last took whole, as the ring gave it; changes as it takes another.
    pub(crate) fn held(&self) -> watch::Receiver<Option<Arc<Shard>>> {
        self.held.clone()
    }

    /// A graceful exit: the workers finish the keys in hand, the Lease is deleted so the others
    /// take the ranges over at once, and the informer stops.
    pub(crate) async fn leave(mut self) {
        self.queue.shut_down_with_drain().await;
        self.token.cancel();
        let _ = (&mut self.member).await;
        while self.tasks.join_next().await.is_some() {}
        self.factory.shutdown().await;
    }

    #[allow(
        dead_code,
        reason = "the test crashes replicas; the example only leaves"
    )]
    /// SIGKILL in miniature: everything stops at once and the Lease stays until it expires.
    pub(crate) async fn crash(mut self) {
        self.member.abort();
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let _ = self.member.await;
        self.factory.shutdown().await;
    }
}

/// The shard of objects the membership's ranges hold; `None` before a ring, or with no range.
fn shard_of(membership: &Membership) -> Option<Shard> {
    let ranges = membership.hash_ranges()?;
    Shard::ranges(ShardKey::Uid, ranges).ok()
}

/// Takes keys this replica may work on, one at a time, until the queue shuts down.
async fn work(
    queue: ShardedQueue<ObjectKey>,
    informer: SharedIndexInformer<Pod>,
    identity: String,
    reconcile: Reconcile,
) {
    while let Some((item, guard)) = queue.get().await {
        let cached = informer.cache().get_by_key(item.key());
        reconcile(identity.clone(), item.clone(), cached).await;
        queue.forget(&item);
        queue.done(&item, guard);
    }
}

/// Moves `factory` to the ranges of every new ring, says in `took` when `informer` holds them
/// whole, and queues again the keys it may now work on.
async fn follow(
    membership: Membership,
    factory: SharedInformerFactory,
    informer: SharedIndexInformer<Pod>,
    queue: ShardedQueue<ObjectKey>,
    (identity, took): (String, watch::Sender<Option<Arc<Shard>>>),
    token: CancellationToken,
) {
    let mut changes = membership.changes();
    loop {
        // Marked seen before the ring is read, so a ring that changes after wakes the loop.
        changes.borrow_and_update();
        if let Some(shard) = shard_of(&membership) {
            // Setting the shard it is already set to changes nothing.
            if factory.set_shard(shard.clone()).is_err() {
                return;
            }
            match factory
                .wait_for_shard(&shard, Duration::from_secs(60), &token)
                .await
            {
                Ok(()) => {
                    let took_new = took.send_if_modified(|held| {
                        let now = informer.cached_shard();
                        let new = *held != now;
                        *held = now;
                        new
                    });
                    if took_new {
                        println!(
                            "{identity}: holds {} Pods in {} ranges",
                            informer.cache().len(),
                            shard.hash_ranges().len()
                        );
                    }
                }
                Err(error) => println!("{identity}: {error}"),
            }
        }
        // Keys whose previous owner has let go may start now.
        for pod in informer.cache().list() {
            enqueue(&queue, &pod);
        }
        tokio::select! {
            () = token.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}

/// `--replicas`, `--identity`, `--pods`, `--seconds` and `--fake`.
struct Args {
    replicas: usize,
    identity: Option<String>,
    pods: usize,
    seconds: Option<u64>,
    fake: bool,
}

fn args() -> Result<Args, BoxError> {
    let mut args = Args {
        replicas: 3,
        identity: None,
        pods: 3_000,
        seconds: None,
        fake: false,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = || given.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--replicas" => args.replicas = value()?.parse()?,
            "--identity" => args.identity = Some(value()?),
            "--pods" => args.pods = value()?.parse()?,
            "--seconds" => args.seconds = Some(value()?.parse()?),
            "--fake" => args.fake = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = args()?;
    let ctrl_c = support::ctrl_c().await?;
    let (_server, client) = if args.fake || support::kubeconfig().is_none() {
        let server =
            FakeApiServer::start_with(ServerOptions::default().sharded_list_and_watch(true))
                .await?;
        for i in 0..args.pods {
            server.create_object(fixtures::pod(i))?;
        }
        println!("the fake API server holds {} Pods", args.pods);
        let client = server.client()?;
        (Some(server), client)
    } else {
        (None, support::client().await?)
    };
    let identities = match args.identity {
        Some(identity) => vec![identity],
        None => (0..args.replicas).map(|i| format!("replica-{i}")).collect(),
    };
    // The work of this example: count the keys each replica worked on.
    let worked: Arc<BTreeMap<String, AtomicU64>> = Arc::new(
        identities
            .iter()
            .map(|identity| (identity.clone(), AtomicU64::new(0)))
            .collect(),
    );
    let reconcile: Reconcile = {
        let worked = Arc::clone(&worked);
        Arc::new(move |identity, _key, _pod| {
            if let Some(count) = worked.get(&identity) {
                count.fetch_add(1, Ordering::Relaxed);
            }
            Box::pin(std::future::ready(()))
        })
    };
    let mut replicas = Vec::new();
    for identity in &identities {
        let options = ShardOptions::default();
        replicas.push(
            CacheReplica::start(
                &client,
                None,
                identity,
                options,
                FactoryOptions::default(),
                Arc::clone(&reconcile),
            )
            .await?,
        );
    }
    let report = async {
        let mut interval = tokio::time::interval(Duration::from_secs(5));
        loop {
            interval.tick().await;
            let shares: BTreeMap<&str, String> = replicas
                .iter()
                .map(|replica| {
                    let slices = replica.hash_ranges().unwrap_or_default();
                    let held: u128 = slices.iter().map(|range| range.end - range.start).sum();
                    let percent = held * 100 / (1 << 64);
                    let pods = replica.informer.cache().len();
                    let whole = replica
                        .held()
                        .borrow()
                        .as_ref()
                        .map_or(0, |shard| shard.hash_ranges().len());
                    let keys = worked
                        .get(&replica.identity)
                        .map_or(0, |count| count.load(Ordering::Relaxed));
                    (
                        replica.identity.as_str(),
                        format!(
                            "{pods} Pods in {whole} ranges held whole, {percent}% of the \
                             hashes, {keys} keys worked on"
                        ),
                    )
                })
                .collect();
            println!("by replica: {shares:?}");
        }
    };
    let deadline = async {
        match args.seconds {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = report => {}
        () = deadline => {}
        () = ctrl_c => {}
    }
    for replica in replicas {
        replica.leave().await;
    }
    Ok(())
}
