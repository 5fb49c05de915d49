//! A replica set that splits one cache: each replica caches only the Pods that the ring over the
//! live replicas gives it, so three replicas hold a third of the Pods each, and together all of
//! them once.
//!
//! ```text
//! cargo run -p kinformer --example replica_set                   # your cluster, or the fake one
//! cargo run -p kinformer --example replica_set -- --replicas 5 --seconds 20
//! cargo run -p kinformer --example replica_set -- --fake --pods 3000
//! cargo run -p kinformer --example replica_set -- --identity a   # one replica of several processes
//! ```
//!
//! Each replica keeps a Lease in the `pod-cache` shard group (a
//! [`ShardMember`](kinformer::leaderelection::shard::ShardMember)), and informs the Pods whose
//! UID hashes into the ranges its ring position gives it
//! ([`Shard::hash_ranges`](kinformer::leaderelection::shard::Shard::hash_ranges)). The informer
//! asks kube-apiserver for that shard on every list and watch (the `ShardedListAndWatch` feature
//! gate) and filters on the client when the server ignores the selector, so the caches are the
//! same either way. When a replica joins, leaves or crashes, the others' rings change, their
//! informers move to their new ranges ([`SharedIndexInformer::set_shard`]), list them, and say
//! once they hold them whole ([`SharedIndexInformer::wait_for_shard`]); handlers see a Pod that
//! moved in as an add and one that moved out as a deletion marked `left_shard`.
//!
//! Without a kubeconfig (or with `--fake`) it starts kinformer-testing's API server in this
//! process, with sharded list and watch on, and seeds it with Pods. It prints each replica's
//! share as it changes. `tests/kinformer/replica_set.rs` runs this file's replicas through a
//! join, a crash and a leave, and checks after each that the caches split the Pods exactly.
//!
//! Work keys are another matter: a [`ShardedQueue`](kinformer::leaderelection::shard::ShardedQueue)
//! places a key on the ring by its text (`namespace/name`), not by its object's UID, so a
//! controller whose cache is split this way cannot yet rely on owning the keys of the objects
//! it caches. This example is a cache that is read and exported, as kube-state-metrics does.

#![allow(clippy::print_stdout, reason = "an example reports on the terminal")]

#[path = "support/mod.rs"]
mod support;

use std::{collections::BTreeMap, ops::Range, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer::{
    informer::{InformerOptions, SharedIndexInformer},
    leaderelection::shard::{Shard as Membership, ShardMember, ShardOptions},
    reflector::KubeListerWatcher,
    store::{Shard, ShardKey},
    testing::{FakeApiServer, ServerOptions, fixtures},
    wait::CancellationToken,
};
use kube_client::{Api, Client};
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The shard group every replica joins, and the namespace of its Leases.
pub(crate) const GROUP: &str = "pod-cache";
pub(crate) const LEASE_NAMESPACE: &str = "default";

/// One replica: its membership and an informer of the Pods its ranges hold.
pub(crate) struct CacheReplica {
    pub(crate) identity: String,
    pub(crate) informer: SharedIndexInformer<Pod>,
    membership: Membership,
    token: CancellationToken,
    member: tokio::task::JoinHandle<()>,
    tasks: JoinSet<()>,
}

impl CacheReplica {
    /// Joins the group as `identity`, waits for a ring, then informs the ranges it gives this
    /// replica, and follows the ring from then on.
    pub(crate) async fn start(
        client: &Client,
        identity: &str,
        options: ShardOptions,
    ) -> Result<Self, BoxError> {
        let member = ShardMember::new(client.clone(), LEASE_NAMESPACE, GROUP, identity, options)?;
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
        let informer = SharedIndexInformer::new(
            KubeListerWatcher::new(Api::<Pod>::all(client.clone())),
            InformerOptions::new().shard(shard),
        );
        let mut tasks = JoinSet::new();
        tasks.spawn({
            let (informer, token) = (informer.clone(), token.clone());
            async move {
                if let Err(error) = informer.run(token).await {
                    println!("the informer did not run: {error}");
                }
            }
        });
        tasks.spawn(follow(
            membership.clone(),
            informer.clone(),
            identity.to_owned(),
            token.clone(),
        ));
        Ok(Self {
            identity: identity.to_owned(),
            informer,
            membership,
            token,
            member,
            tasks,
        })
    }

    /// The ranges this replica's ring gives it now.
    pub(crate) fn hash_ranges(&self) -> Option<Vec<Range<u128>>> {
        self.membership.hash_ranges()
    }

    /// A graceful exit: the informer stops and the Lease is deleted, so the others take the
    /// ranges over at once.
    pub(crate) async fn leave(mut self) {
        self.token.cancel();
        let _ = (&mut self.member).await;
        while self.tasks.join_next().await.is_some() {}
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
    }
}

/// The shard of objects the membership's ranges hold; `None` before a ring, or with no range.
fn shard_of(membership: &Membership) -> Option<Shard> {
    let ranges = membership.hash_ranges()?;
    Shard::ranges(ShardKey::Uid, ranges).ok()
}

/// Moves `informer` to the ranges of every new ring, and says when it holds them whole.
async fn follow(
    membership: Membership,
    informer: SharedIndexInformer<Pod>,
    identity: String,
    token: CancellationToken,
) {
    let mut changes = membership.changes();
    loop {
        // Marked seen before the ring is read, so a ring that changes after wakes the loop.
        changes.borrow_and_update();
        if let Some(shard) = shard_of(&membership)
            && informer.cached_shard().as_deref() != Some(&shard)
        {
            if informer.set_shard(shard.clone()).is_err() {
                return;
            }
            match informer
                .wait_for_shard(&shard, Duration::from_secs(60), &token)
                .await
            {
                Ok(()) => println!(
                    "{identity}: holds {} Pods in {} ranges",
                    informer.cache().len(),
                    shard.hash_ranges().len()
                ),
                Err(error) => println!("{identity}: {error}"),
            }
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
    let mut replicas = Vec::new();
    for identity in &identities {
        replicas.push(CacheReplica::start(&client, identity, ShardOptions::default()).await?);
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
                    (
                        replica.identity.as_str(),
                        format!("{pods} Pods, {percent}% of the hashes"),
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
