//! A small but real controller: it labels every Deployment with the number of its Pods that are
//! Ready (`kinformer.dev/ready-pods=3`), the way client-go's DeploymentController is built.
//!
//! ```text
//! cargo run -p kinformer --example controller                    # your cluster, or the fake one
//! cargo run -p kinformer --example controller -- --seconds 10    # stop after ten seconds
//! cargo run -p kinformer --example controller -- --fake          # the fake one even with a kubeconfig
//! cargo run -p kinformer --example controller -- --workers 8 --namespace team-a
//! cargo run -p kinformer --example controller -- --operations 127.0.0.1:9090  # fixed port
//! cargo run -p kinformer --example controller -- --replicas 3    # three sharded replicas
//! cargo run -p kinformer --example controller -- --identity a    # one replica of several processes
//! ```
//!
//! It serves `/metrics` (the factory's informers and the work queue, under client-go's
//! `workqueue_*` names) and `/healthz` over hyper, on a free local port unless told one.
//!
//! The shape is client-go's: one [`SharedInformerFactory`] informs Deployments and Pods; event
//! handlers turn every relevant change into the key (`namespace/name`) of the Deployment it
//! concerns and add it to a [`RateLimitingQueue`] (behind a [`ShardedQueue`]); N workers take keys out, read the Deployment
//! and its Pods from the listers (never from the API server), and merge-patch the label through
//! kube-client only when it is wrong. A failed write goes back into the queue after the rate
//! limiter's delay; shutdown lets the workers finish the keys in hand, then stops the informers.
//!
//! With a kubeconfig (`KUBECONFIG`, or `~/.kube/config`) it **writes** that label on the
//! Deployments of one namespace (`--namespace`, default `default`). Without one it starts
//! kinformer-testing's API server in this process, seeds Deployments and Pods, and keeps
//! flipping readiness, replacing Pods and failing the odd PATCH with a 500 so there is something
//! to reconcile and retry.
//!
//! Several replicas split the Deployments between them with kinformer's sharding: each
//! replica keeps a Lease in the `ready-pods` shard group, and its queue is a [`ShardedQueue`]
//! that hands out only the Deployments the ring over the live replicas gives it, never one
//! another live replica is working on. `--replicas 3` runs three such replicas in this process
//! (each with its own informers, as separate processes would have); `--identity NAME` makes
//! this process one replica, for running several processes. When a replica joins or leaves,
//! the others' queues take its Deployments over.
//!
//! `tests/kinformer/controller.rs` runs this very file's controller against churn and checks that it
//! converges, alone and as three sharded replicas.

#![allow(clippy::print_stdout, reason = "an example reports on the terminal")]

#[path = "support/fake_cluster.rs"]
pub(crate) mod fake_cluster;
#[path = "support/operations.rs"]
pub(crate) mod operations;
#[path = "support/replica.rs"]
mod replica;
#[path = "support/mod.rs"]
mod support;

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kinformer::testing::FakeApiServer;
use kinformer::{
    leaderelection::shard::{Shard, ShardedQueue},
    prelude::*,
    store::{meta_namespace_key_func, split_key},
    workqueue::PrometheusMetrics,
};
use kinformer::{processor::HandlerFuncs, store::ObjectOrTombstone, wait::CancellationToken};
use kube_client::{
    Api, Client,
    api::{Patch, PatchParams},
};
use kube_core::{Selector, SelectorExt};
use prometheus_client::registry::Registry;
use serde_json::json;
use std::sync::Arc;
use tokio::task::JoinSet;

use self::replica::Replica;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The label the controller owns on every Deployment it reconciles.
pub(crate) const READY_PODS_LABEL: &str = "kinformer.dev/ready-pods";

/// How often every Deployment is handed to the workers even when nothing changed, so a label
/// someone else edited is put back.
const DEFAULT_RESYNC: Duration = Duration::from_secs(30);

/// After this many failed attempts in a row a key is dropped until its next change, as
/// client-go's DeploymentController does (`maxRetries`), so one broken object cannot keep a
/// worker busy forever.
const MAX_RETRIES: usize = 15;

/// The shard group the replicas of this controller split the Deployments in.
const SHARD_GROUP: &str = "ready-pods";

/// The field manager the API server records for the controller's writes.
const FIELD_MANAGER: &str = "kinformer-ready-pods";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // kube-client logs every failed request as an error; the workers already print each
    // failure next to the retry it causes, so its request log stays quiet unless asked for.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client::client::builder=off".into()),
        )
        .init();
    let args = Args::parse()?;
    let deadline = args
        .seconds
        .map(|seconds| Instant::now() + Duration::from_secs(seconds));

    // Where to connect: a real cluster if there is a kubeconfig, else a fake one right here.
    let stop_churn = CancellationToken::new();
    let (client, namespace, fake) = match support::kubeconfig().filter(|_| !args.fake) {
        Some(path) => {
            let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
            println!(
                "kubeconfig {} found: labelling the Deployments of namespace {namespace:?} in that cluster",
                path.display()
            );
            (support::client().await?, Some(namespace), None)
        }
        None => {
            println!("no kubeconfig: starting the embedded fake API server");
            let server = FakeApiServer::start().await?;
            let seeded = fake_cluster::seed(&server)?;
            println!(
                "seeded {} Deployments with {seeded} Pods at {}",
                fake_cluster::DEPLOYMENTS,
                server.url()
            );
            let client = server.client()?;
            let server = Arc::new(server);
            tokio::spawn(fake_cluster::churn(Arc::clone(&server), stop_churn.clone()));
            (client, args.namespace.clone(), Some(server))
        }
    };

    // The Deployment informer resyncs so that the handler's resync period takes effect.
    let factory_options = || {
        let options = FactoryOptions::default()
            .drop_managed_fields()
            .resync_for::<Deployment>(DEFAULT_RESYNC);
        match &namespace {
            Some(namespace) => options.namespace(namespace.clone()),
            None => options,
        }
    };
    // Sharding: `--replicas N` runs N replicas here, `--identity NAME` makes this process one
    // replica among others; their Leases live in the namespace they label.
    let lease_namespace = namespace.clone().unwrap_or_else(|| "default".to_owned());
    let identities: Vec<Option<String>> = match (&args.identity, args.replicas) {
        (Some(identity), _) => vec![Some(identity.clone())],
        (None, 1) => vec![None],
        (None, replicas) => (0..replicas)
            .map(|i| Some(format!("replica-{i}")))
            .collect(),
    };
    let mut replicas = Vec::new();
    for identity in identities {
        replicas.push(Replica::start(
            &client,
            factory_options(),
            &lease_namespace,
            identity,
        )?);
    }

    // /metrics and /healthz for operators (of the first replica, when there are several).
    let listener = tokio::net::TcpListener::bind(&args.operations).await?;
    println!(
        "serving /metrics and /healthz at http://{}",
        listener.local_addr()?
    );
    let stop_operations = CancellationToken::new();
    tokio::spawn(operations::serve(
        listener,
        Arc::clone(&replicas[0].registry),
        replicas[0].factory.clone(),
        stop_operations.clone(),
    ));

    let started = Instant::now();
    for replica in &replicas {
        replica.factory.start()?;
        let synced = replica
            .factory
            .wait_for_cache_sync(Duration::from_secs(60))
            .await;
        if !synced.all_synced() {
            stop_churn.cancel();
            for replica in replicas {
                replica.stop().await;
            }
            return Err(synced.to_string().into());
        }
    }
    println!(
        "caches synced after {:.0?}; starting {} workers in each of {} replicas",
        started.elapsed(),
        args.workers,
        replicas.len()
    );

    let stop = CancellationToken::new();
    let mut workers = JoinSet::new();
    for replica in &replicas {
        workers.spawn(replica.controller.clone().run(args.workers, stop.clone()));
    }

    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut previous = Replica::total(&replicas);
    // One Ctrl-C listener for the whole loop, so a press between two ticks is not lost.
    let mut ctrl_c = support::ctrl_c().await?;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = &mut ctrl_c => { println!("Ctrl-C"); break; }
        }
        let now = Replica::total(&replicas);
        let (in_sync, total) = replicas[0].controller.in_sync();
        let queued: usize = replicas
            .iter()
            .map(|replica| {
                replica.controller.queue().len() + replica.controller.queue().waiting_len()
            })
            .sum();
        println!(
            "{:>4.0}s | reconciled {:>5} (+{:>3}) | patched {:>4} (+{:>3}) | retried {:>3} | dropped {} | queued {:>3} | {in_sync}/{total} Deployments labelled right",
            started.elapsed().as_secs_f64(),
            now.reconciles,
            now.reconciles - previous.reconciles,
            now.patches,
            now.patches - previous.patches,
            now.retries,
            now.dropped,
            queued,
        );
        if replicas.len() > 1 {
            let shares: Vec<String> = replicas
                .iter()
                .map(|replica| {
                    format!(
                        "{} reconciled {}",
                        replica.identity,
                        replica.controller.counters().snapshot().reconciles
                    )
                })
                .collect();
            println!("      | {}", shares.join(" | "));
        }
        previous = now;
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
    }

    // Stop changing the fake cluster, let the workers finish the keys they hold, leave the
    // shard group, then stop the informers.
    stop_churn.cancel();
    let stopping = Instant::now();
    stop.cancel();
    while let Some(finished) = workers.join_next().await {
        finished?;
    }
    stop_operations.cancel();
    let total = Replica::total(&replicas);
    let mut running_tasks = 0;
    for replica in replicas {
        running_tasks += replica.stop().await;
    }
    println!(
        "shut down in {:.0?}: {} reconciles, {} patches, {} retries, {running_tasks} informer tasks running",
        stopping.elapsed(),
        total.reconciles,
        total.patches,
        total.retries,
    );
    drop(fake);
    Ok(())
}

/// Keeps `kinformer.dev/ready-pods` on every Deployment equal to the number of its Pods (those
/// its selector matches, in its namespace) whose `Ready` condition is `True`.
#[derive(Clone)]
pub(crate) struct ReadyPodsController {
    /// Hands out only the keys this replica's shard owns (all of them when it runs alone).
    queue: ShardedQueue<String>,
    /// The shard the queue is gated by.
    shard: Shard,
    deployments: Lister<Deployment>,
    pods: Lister<Pod>,
    client: Client,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for ReadyPodsController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // kube's Client is not Debug; the queue and the counters say what matters.
        f.debug_struct("ReadyPodsController")
            .field("queue", &self.queue)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl ReadyPodsController {
    /// Registers the Deployment and Pod handlers on `factory`'s informers (before
    /// `factory.start()`); every Deployment is also re-queued each `resync` period, when the
    /// factory resyncs Deployments at least that often (`resync_for::<Deployment>`).
    ///
    /// The work queue's metrics (client-go's `workqueue_*`, queue `ready-pods`) go to
    /// `registry`. The controller works only on the Deployments `shard` lets it:
    /// [`Shard::alone`] for all of them, or a [`ShardMember`]'s shard to split them with
    /// other replicas.
    ///
    /// [`ShardMember`]: kinformer::leaderelection::shard::ShardMember
    pub(crate) fn new(
        factory: &SharedInformerFactory,
        client: Client,
        resync: Duration,
        registry: &mut Registry,
        shard: Shard,
    ) -> Result<Self, BoxError> {
        let controller = Self {
            queue: ShardedQueue::new(
                RateLimitingQueue::new(
                    default_controller_rate_limiter(),
                    QueueOptions::named("ready-pods")
                        .metrics(PrometheusMetrics::register(registry)),
                ),
                shard.clone(),
            ),
            shard,
            deployments: factory.lister::<Deployment>()?,
            pods: factory.lister::<Pod>()?,
            client,
            counters: Arc::default(),
        };

        let (on_add, on_update, on_delete) =
            (controller.clone(), controller.clone(), controller.clone());
        factory
            .informer::<Deployment>()?
            .add_event_handler_with_options(
                HandlerFuncs::new()
                    .add_func(move |deployment: Arc<Deployment>, _initial| {
                        on_add.enqueue(&deployment);
                    })
                    .update_func(move |old, new| {
                        // Our own PATCH comes back as an update, and acting on it would usually
                        // only read the same Pods again. But the Pods may have moved on while
                        // the PATCH was in flight, and the reconcile their events queued may
                        // have read the Deployment before the PATCH reached the cache and found
                        // nothing to do; so a label that is already stale is work. A resync
                        // (same resourceVersion) always goes through.
                        if !only_our_label_changed(&old, &new) || !on_update.label_is_current(&new)
                        {
                            on_update.enqueue(&new);
                        }
                    })
                    .delete_func(move |deployment: ObjectOrTombstone<Deployment>| {
                        on_delete.enqueue(deployment.object());
                    }),
                ListenerOptions::new().resync_period(resync),
            )?;

        let (on_add, on_update, on_delete) =
            (controller.clone(), controller.clone(), controller.clone());
        factory.informer::<Pod>()?.add_event_handler(
            HandlerFuncs::new()
                .add_func(move |pod: Arc<Pod>, _initial| on_add.enqueue_deployments_of(&pod))
                .update_func(move |old: Arc<Pod>, new: Arc<Pod>| {
                    // Pods change all the time (status, annotations); only a change of labels
                    // (which Deployments select it) or readiness changes a count.
                    if old.metadata.labels != new.metadata.labels {
                        on_update.enqueue_deployments_of(&old);
                        on_update.enqueue_deployments_of(&new);
                    } else if is_ready(&old) != is_ready(&new) {
                        on_update.enqueue_deployments_of(&new);
                    }
                })
                .delete_func(move |pod: ObjectOrTombstone<Pod>| {
                    on_delete.enqueue_deployments_of(pod.object());
                }),
        )?;
        Ok(controller)
    }

    /// Starts `workers` workers and returns once `stop` is cancelled and they have finished
    /// the keys they hold. Call it after the caches have synced. Whenever Deployments may
    /// have moved to this replica's shard, every cached one is queued again (the queue keeps
    /// those this replica owns).
    #[doc(alias = "Run")]
    pub(crate) async fn run(self, workers: usize, stop: CancellationToken) {
        let mut running = JoinSet::new();
        let requeue = self.clone();
        let mut changes = self.shard().changes();
        let requeueing = tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                for deployment in requeue.deployments.list(&Selector::default()) {
                    requeue.enqueue(&deployment);
                }
            }
        });
        for _ in 0..workers.max(1) {
            let worker = self.clone();
            running.spawn(async move { while worker.process_next_work_item().await {} });
        }
        stop.cancelled().await;
        requeueing.abort();
        self.queue.shut_down_with_drain().await;
        while running.join_next().await.is_some() {}
    }

    /// The queue the handlers fill and the workers drain.
    pub(crate) fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The shard this replica works on.
    pub(crate) fn shard(&self) -> &Shard {
        &self.shard
    }

    /// What the workers have done so far.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// How many cached Deployments carry the label their cached Pods call for, out of how many.
    pub(crate) fn in_sync(&self) -> (usize, usize) {
        let deployments = self.deployments.list(&Selector::default());
        let in_sync = deployments
            .iter()
            .filter(|deployment| self.label_is_current(deployment))
            .count();
        (in_sync, deployments.len())
    }

    /// Whether the Deployment's label equals the Ready Pods the cache holds for it.
    fn label_is_current(&self, deployment: &Deployment) -> bool {
        let want = self.ready_pods(deployment).to_string();
        label_of(deployment) == Some(want.as_str())
    }

    #[doc(alias = "enqueueDeployment")]
    fn enqueue(&self, deployment: &Deployment) {
        match meta_namespace_key(deployment) {
            Some(key) => self.queue.add(key),
            None => println!("ignoring a Deployment without a name"),
        }
    }

    /// Queues every cached Deployment in the Pod's namespace whose selector matches it.
    #[doc(alias = "getDeploymentsForPod")]
    fn enqueue_deployments_of(&self, pod: &Pod) {
        let Some(namespace) = pod.metadata.namespace.as_deref() else {
            return;
        };
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        for deployment in self
            .deployments
            .namespaced(namespace)
            .list(&Selector::default())
        {
            if selector_of(&deployment).is_some_and(|selector| selector.matches(&labels)) {
                self.enqueue(&deployment);
            }
        }
    }

    /// Takes one key, reconciles it, and tells the queue how it went; `false` once the queue
    /// has shut down.
    #[doc(alias = "processNextWorkItem")]
    async fn process_next_work_item(&self) -> bool {
        let Some((key, guard)) = self.queue.get().await else {
            return false;
        };
        self.counters.reconciles.fetch_add(1, Ordering::Relaxed);
        match self.sync_deployment(&key).await {
            Ok(()) => self.queue.forget(&key),
            Err(error) if self.queue.num_requeues(&key) < MAX_RETRIES => {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
                println!(
                    "retrying {key} (failure {}): {error}",
                    self.queue.num_requeues(&key) + 1
                );
                self.queue.add_rate_limited(key.clone());
            }
            Err(error) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                println!("dropping {key} after {MAX_RETRIES} failures: {error}");
                self.queue.forget(&key);
            }
        }
        self.queue.done(&key, guard);
        true
    }

    /// Brings one Deployment's label in line with its Pods, as the caches see them.
    #[doc(alias = "syncDeployment")]
    async fn sync_deployment(&self, key: &str) -> Result<(), BoxError> {
        let (Some(namespace), name) = split_key(key)? else {
            return Err(format!("{key:?} is not a namespace/name key").into());
        };
        let deployment = match self.deployments.namespaced(namespace).get(name) {
            Ok(deployment) => deployment,
            // Deleted since it was queued: there is nothing left to label.
            Err(kinformer::store::Error::NotFound { .. }) => return Ok(()),
            Err(error) => return Err(error.into()),
        };
        let want = self.ready_pods(&deployment).to_string();
        if label_of(&deployment) == Some(want.as_str()) {
            return Ok(());
        }

        let patch = json!({ "metadata": { "labels": { READY_PODS_LABEL: want } } });
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        match api
            .patch(
                name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                self.counters.patches.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            // Deleted on the server before the cache heard of it.
            Err(kube_client::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(kube_client::Error::Api(status)) => Err(format!(
                "PATCH answered {} {}: {}",
                status.code, status.reason, status.message
            )
            .into()),
            Err(error) => Err(error.into()),
        }
    }

    /// The cached Pods that `deployment` selects and that are Ready.
    fn ready_pods(&self, deployment: &Deployment) -> usize {
        let (Some(namespace), Some(selector)) = (
            deployment.metadata.namespace.as_deref(),
            selector_of(deployment),
        ) else {
            return 0;
        };
        self.pods
            .namespaced(namespace)
            .list(&selector)
            .iter()
            .filter(|pod| is_ready(pod))
            .count()
    }
}

/// The workers' running totals.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    reconciles: AtomicU64,
    patches: AtomicU64,
    retries: AtomicU64,
    dropped: AtomicU64,
}

impl Counters {
    /// The totals now.
    pub(crate) fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            reconciles: self.reconciles.load(Ordering::Relaxed),
            patches: self.patches.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// [`Counters`] at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CountersSnapshot {
    /// Keys taken from the queue.
    pub(crate) reconciles: u64,
    /// Successful label writes.
    pub(crate) patches: u64,
    /// Failed reconciles sent back to the queue through the rate limiter.
    pub(crate) retries: u64,
    /// Keys given up on after [`MAX_RETRIES`] failures.
    pub(crate) dropped: u64,
}

/// `namespace/name`, client-go's `MetaNamespaceKeyFunc`; `None` for a Deployment without a name.
fn meta_namespace_key(deployment: &Deployment) -> Option<String> {
    meta_namespace_key_func(deployment).ok()
}

/// The Deployment's current value of [`READY_PODS_LABEL`].
pub(crate) fn label_of(deployment: &Deployment) -> Option<&str> {
    deployment
        .metadata
        .labels
        .as_ref()?
        .get(READY_PODS_LABEL)
        .map(String::as_str)
}

/// The Deployment's Pod selector. A missing or empty one selects nothing rather than
/// everything, as in client-go's DeploymentController ("a deployment with a nil or empty
/// selector ... should match nothing, not everything").
pub(crate) fn selector_of(deployment: &Deployment) -> Option<Selector> {
    let selector = deployment.spec.selector.clone();
    let empty = selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty);
    if empty {
        return None;
    }
    Selector::try_from(selector).ok()
}

/// Whether the Pod's `Ready` condition is `True`, client-go's `podutil.IsPodReady`.
#[doc(alias = "IsPodReady")]
pub(crate) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

/// Whether `new` differs from `old` in nothing but [`READY_PODS_LABEL`] (and the bookkeeping
/// every write changes: resourceVersion, managedFields).
pub(crate) fn only_our_label_changed(old: &Deployment, new: &Deployment) -> bool {
    if old.metadata.resource_version == new.metadata.resource_version
        || label_of(old) == label_of(new)
        || old.spec != new.spec
        || old.status != new.status
    {
        return false;
    }
    let without_bookkeeping = |deployment: &Deployment| {
        let mut metadata = deployment.metadata.clone();
        metadata.resource_version = None;
        metadata.managed_fields = None;
        if let Some(labels) = metadata.labels.as_mut() {
            labels.remove(READY_PODS_LABEL);
        }
        metadata
    };
    without_bookkeeping(old) == without_bookkeeping(new)
}

struct Args {
    seconds: Option<u64>,
    fake: bool,
    workers: usize,
    namespace: Option<String>,
    /// Where /metrics and /healthz are served.
    operations: String,
    /// Replicas to run in this process, sharding the Deployments when more than one.
    replicas: usize,
    /// This process's identity as one sharded replica among several processes.
    identity: Option<String>,
}

impl Args {
    fn parse() -> Result<Self, BoxError> {
        let mut args = Args {
            seconds: None,
            fake: false,
            workers: 4,
            namespace: None,
            operations: "127.0.0.1:0".to_owned(),
            replicas: 1,
            identity: None,
        };
        let mut raw = std::env::args().skip(1);
        while let Some(arg) = raw.next() {
            match arg.as_str() {
                "--seconds" => {
                    let value = raw.next().ok_or("--seconds needs a number")?;
                    args.seconds = Some(value.parse().map_err(|_| "--seconds needs a number")?);
                }
                "--workers" => {
                    let value = raw.next().ok_or("--workers needs a number")?;
                    args.workers = value.parse().map_err(|_| "--workers needs a number")?;
                }
                "--namespace" => {
                    args.namespace = Some(raw.next().ok_or("--namespace needs a name")?);
                }
                "--fake" => args.fake = true,
                "--replicas" => {
                    let value = raw.next().ok_or("--replicas needs a number")?;
                    args.replicas = value
                        .parse()
                        .ok()
                        .filter(|&replicas| replicas > 0)
                        .ok_or("--replicas needs a number above zero")?;
                }
                "--identity" => {
                    args.identity = Some(raw.next().ok_or("--identity needs a name")?);
                }
                "--operations" => {
                    args.operations = raw.next().ok_or("--operations needs an address")?;
                }
                other => {
                    return Err(format!(
                        "unknown argument {other:?}; try --seconds N, --workers N, --namespace NS, --operations ADDR, --replicas N, --identity NAME or --fake"
                    )
                    .into());
                }
            }
        }
        Ok(args)
    }
}
