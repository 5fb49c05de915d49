//! The `controller` example converges: after churn and failed writes on the fake API server,
//! every Deployment carries the number of its Ready Pods, as the server itself counts them.
//!
//! The example's file is compiled here as a module, so this tests the very controller
//! `cargo run --example controller` runs, not a copy. `#[path]` is the one way Cargo offers:
//! an example is a binary crate that no test can depend on, the e2e suite (another package)
//! includes it the same way, and a library crate of its own would take the controller out of
//! the example its readers open and make kinformer dev-depend on a crate built on kinformer.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kinformer::wait::CancellationToken;
use kinformer::{
    leaderelection::shard::{Ring, ShardMember, ShardOptions},
    prelude::*,
};
use kinformer_testing::{FakeApiServer, Fault, Verb};
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use std::sync::Arc;

#[path = "../../examples/controller.rs"]
#[allow(
    dead_code,
    reason = "the example's main, argument parsing and terminal output are not exercised here"
)]
mod example;

use example::{ReadyPodsController, fake_cluster};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const WORKERS: usize = 4;
/// Deployment `web-{NEW_DEPLOYMENT}` is created during the churn.
const NEW_DEPLOYMENT: usize = fake_cluster::DEPLOYMENTS;
/// Deployment `web-{DELETED_DEPLOYMENT}` is deleted during the churn (its Pods stay).
const DELETED_DEPLOYMENT: usize = 0;
const CHURN_ROUNDS: usize = 120;
/// Failed PATCHes injected up front (the churn adds one more every 40 rounds).
const INJECTED_FAILURES: u64 = 3;
/// Deployment `web-{SENTINEL}` selects one Pod, `web-{SENTINEL}-0`; the test changes either
/// only to build a [`Watched::barrier`], and nothing else selects that Pod.
const SENTINEL: usize = NEW_DEPLOYMENT + 1;
/// The PATCHes, and the reconciles, one [`Watched::barrier`] costs a correct controller: one
/// for each of its two steps.
const BARRIER_WRITES: u64 = 2;
/// How long a wait for the controller may take before the test gives up (a guard against
/// hanging, not a bound the test asserts).
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_labels_every_deployment_with_its_ready_pods_after_churn_and_failed_patches()
-> Result<(), BoxError> {
    let server = FakeApiServer::start().await?;
    fake_cluster::seed(&server)?;
    seed_sentinel(&server)?;
    let client = server.client()?;
    // The resync period is far beyond the test's few seconds: a resync would queue every
    // Deployment and upset the exact counts below.
    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions::from_env().resync_for::<Deployment>(Duration::from_secs(60)),
    );
    let mut registry = Registry::default();
    factory.register_metrics(&mut registry);
    let controller = ReadyPodsController::new(
        &factory,
        client.clone(),
        Duration::from_secs(60),
        &mut registry,
        kinformer::leaderelection::shard::Shard::alone(),
    )?;
    let registry = Arc::new(registry);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let operations = listener.local_addr()?;
    let stop_operations = CancellationToken::new();
    tokio::spawn(example::operations::serve(
        listener,
        Arc::clone(&registry),
        factory.clone(),
        stop_operations.clone(),
    ));
    factory.start()?;
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "caches: {synced:?}");

    let stop = CancellationToken::new();
    let workers = tokio::spawn(controller.clone().run(WORKERS, stop.clone()));
    let watched = Watched {
        server: &server,
        client: &client,
        controller: &controller,
        registry: &registry,
    };
    let all_seeded: Vec<usize> = (0..fake_cluster::DEPLOYMENTS).collect();
    watched.wait_until_converged(&all_seeded).await?;

    // What an operator scrapes: the work queue under client-go's names, the informers, health.
    let (status, metrics) = get(operations, "/metrics").await?;
    assert_eq!(status, 200, "{metrics}");
    for series in [
        r#"workqueue_adds_total{name="ready-pods"}"#,
        r#"workqueue_depth{name="ready-pods"}"#,
        r#"workqueue_work_duration_seconds_count{name="ready-pods"}"#,
        r#"kinformer_informer_synced{informer="Deployment""#,
        r#"kinformer_informer_synced{informer="Pod""#,
        r#"kinformer_reflector_events_total{informer="Pod""#,
    ] {
        assert!(
            metrics.contains(series),
            "{series} missing from:\n{metrics}"
        );
    }
    let (status, health) = get(operations, "/healthz").await?;
    assert_eq!((status, health.as_str()), (200, "ok\n"));
    assert_eq!(get(operations, "/nothing").await?.0, 404);

    let seeded_patches = watched.patch_requests();
    assert!(
        seeded_patches >= all_seeded.len() as u64,
        "a first label on every Deployment takes one PATCH each, saw {seeded_patches}"
    );

    // Churn: the next PATCHes fail, readiness flips, Pods come and go, a Deployment is added
    // and another deleted, and a Pod moves from one Deployment to another by its labels.
    server.faults().inject(
        Fault::status(500)
            .verb(Verb::Patch)
            .resource("deployments")
            .times(INJECTED_FAILURES as usize),
    );
    let mut changes = 0;
    for round in 1..=CHURN_ROUNDS {
        fake_cluster::churn_once(&client, &server, round).await;
        changes += 1;
        if round.is_multiple_of(4) {
            // Pacing: the informers see some rounds apart rather than all at once.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    server.create_object(fake_cluster::deployment(NEW_DEPLOYMENT))?;
    for slot in 0..3 {
        server.create_object(fake_cluster::pod(NEW_DEPLOYMENT, slot, slot != 1))?;
    }
    server.delete_object(
        "apps/v1",
        "Deployment",
        Some(&fake_cluster::namespace_of(DELETED_DEPLOYMENT)),
        &format!("web-{DELETED_DEPLOYMENT}"),
    )?;
    move_pod(&server, 1, 0, 4)?;
    changes += 3 + 1 + 1;

    let remaining: Vec<usize> = (0..=NEW_DEPLOYMENT)
        .filter(|&d| d != DELETED_DEPLOYMENT)
        .collect();
    let barriers = watched.wait_until_converged(&remaining).await?;

    let counters = controller.counters().snapshot();
    assert!(
        counters.retries >= INJECTED_FAILURES,
        "every failed PATCH goes back through the rate limiter: {counters:?}"
    );
    assert_eq!(
        counters.dropped, 0,
        "no key ran out of retries: {counters:?}"
    );
    // The barriers' own writes are not the churn's (a failed one is among the retries).
    let churn_patches = watched.patch_requests() - seeded_patches - BARRIER_WRITES * barriers;
    assert!(
        churn_patches <= 2 * changes + counters.retries,
        "{churn_patches} PATCHes for {changes} changes: the controller writes in a loop"
    );
    // Whatever faults the churn left unused would fail a write below and make it count twice.
    server.faults().clear();

    // Quiet: nothing changes, so nothing is written but the barrier's own labels, and the
    // queue is left empty. A write loop (a PATCH whose update is reconciled into another
    // PATCH) would write again before the barrier is through (see `Watched::barrier`).
    let settled = (watched.patch_requests(), controller.counters().snapshot());
    watched.barrier().await?;
    assert_eq!(
        (
            watched.patch_requests(),
            controller.counters().snapshot().patches
        ),
        (
            settled.0 + BARRIER_WRITES,
            settled.1.patches + BARRIER_WRITES
        ),
        "a converged controller keeps writing"
    );
    assert!(controller.queue().is_empty() && controller.queue().waiting_len() == 0);

    // Every Deployment changes in a way that leaves its count alone: each is reconciled, none
    // is written, because a label that is already right is not written again. The annotations
    // reach the Deployment informer before the barrier's change of the sentinel does, so their
    // reconciles, and any write they make, are done once the barrier is through.
    let settled = (watched.patch_requests(), controller.counters().snapshot());
    for &d in &remaining {
        annotate_deployment(&server, d)?;
    }
    watched.barrier().await?;
    assert_eq!(
        controller.counters().snapshot().reconciles,
        settled.1.reconciles + remaining.len() as u64 + BARRIER_WRITES,
        "every annotated Deployment is reconciled once"
    );
    assert_eq!(
        watched.patch_requests(),
        settled.0 + BARRIER_WRITES,
        "labels that were right were written again"
    );

    // One Pod turns unready: one reconcile, one PATCH, and the update that PATCH causes is
    // not reconciled again (convergence ends with a barrier that its update reaches first).
    let before = (watched.patch_requests(), controller.counters().snapshot());
    fake_cluster::flip_ready(
        &client,
        &server,
        &fake_cluster::namespace_of(NEW_DEPLOYMENT),
        &format!("web-{NEW_DEPLOYMENT}-0"),
    )
    .await?;
    let barriers = watched.wait_until_converged(&remaining).await?;
    assert_eq!(
        watched.patch_requests(),
        before.0 + 1 + BARRIER_WRITES * barriers
    );
    assert_eq!(
        controller.counters().snapshot().reconciles,
        before.1.reconciles + 1 + BARRIER_WRITES * barriers,
        "the controller's own write came back as work"
    );
    assert_eq!(mislabelled(&server, &remaining), Vec::<String>::new());

    // The scripted run is over and the queue idle: every work-queue family under client-go's
    // name, with the values that run implies.
    let (_, metrics) = get(operations, "/metrics").await?;
    let series = |name: &str| {
        let prefix = format!("{name}{{name=\"ready-pods\"}} ");
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|value| value.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} missing from:\n{metrics}"))
    };
    assert_eq!(series("workqueue_depth"), 0.0);
    let adds = series("workqueue_adds_total");
    assert!(adds >= all_seeded.len() as f64, "{adds} adds");
    assert_eq!(
        series("workqueue_queue_duration_seconds_count"),
        adds,
        "every add was taken once"
    );
    assert_eq!(
        series("workqueue_work_duration_seconds_count"),
        adds,
        "every item taken was done"
    );
    assert!(series("workqueue_retries_total") >= INJECTED_FAILURES as f64);
    for gauge in [
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
    ] {
        assert!(series(gauge) >= 0.0);
    }

    // Shutdown: the workers finish and return; later events are not queued.
    stop.cancel();
    tokio::time::timeout(PATIENCE, workers).await??;
    assert!(controller.queue().shutting_down());
    factory.shutdown().await;
    assert_eq!(factory.running_tasks(), 0);
    Ok(())
}

/// One replica of the controller as a separate process would run it: its own informers,
/// queue and workers, and its membership of the shard group.
struct ShardedReplica {
    identity: String,
    factory: SharedInformerFactory,
    controller: ReadyPodsController,
    membership: tokio::task::JoinHandle<()>,
    workers: tokio::task::JoinHandle<()>,
}

impl ShardedReplica {
    async fn start(client: &kube_client::Client, identity: &str) -> Result<Self, BoxError> {
        let member = ShardMember::new(
            client.clone(),
            "default",
            "ready-pods",
            identity,
            // A Lease lost only after 2 s without a renewal: a loaded machine's stalls do not
            // cost a live replica its share.
            ShardOptions::default()
                .lease_duration(Duration::from_secs(3))
                .renew_deadline(Duration::from_secs(2))
                .retry_period(Duration::from_millis(100)),
        )?;
        let shard = member.shard();
        let membership = tokio::spawn(async move { member.run(CancellationToken::new()).await });
        let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::from_env());
        let controller = ReadyPodsController::new(
            &factory,
            client.clone(),
            Duration::from_secs(60),
            &mut Registry::default(),
            shard,
        )?;
        factory.start()?;
        let synced = factory.wait_for_cache_sync(PATIENCE).await;
        assert!(synced.all_synced(), "caches: {synced:?}");
        let workers = tokio::spawn(controller.clone().run(WORKERS, CancellationToken::new()));
        Ok(Self {
            identity: identity.to_owned(),
            factory,
            controller,
            membership,
            workers,
        })
    }

    /// Everything stops mid-work, as on SIGKILL: the Lease stays until it expires.
    async fn crash(self) {
        self.membership.abort();
        self.workers.abort();
        let _ = self.membership.await;
        let _ = self.workers.await;
        self.factory.shutdown().await;
    }
}

/// Waits (at most 20 s: a crashed replica's share waits out its 3 s Lease) until the server
/// holds the right label on each of `deployments`.
async fn wait_for_labels(server: &FakeApiServer, deployments: &[usize]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let wrong = mislabelled(server, deployments);
        if wrong.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still mislabelled after 20s: {wrong:?}"
        );
        // Polling: the server's objects have no signal to wait on.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Flips the readiness of Pod `web-{d}-0` of each Deployment `d`, so every count changes.
async fn flip_one_pod_of_each(
    client: &kube_client::Client,
    server: &FakeApiServer,
    deployments: &[usize],
) -> Result<(), BoxError> {
    for &d in deployments {
        let (namespace, pod) = (fake_cluster::namespace_of(d), format!("web-{d}-0"));
        fake_cluster::flip_ready(client, server, &namespace, &pod).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sharded_replicas_split_the_deployments_and_take_over_a_crashed_ones()
-> Result<(), BoxError> {
    let server = FakeApiServer::start().await?;
    fake_cluster::seed(&server)?;
    let client = server.client()?;
    let mut replicas = Vec::new();
    let identities = ["replica-0", "replica-1", "replica-2"];
    for identity in identities {
        replicas.push(ShardedReplica::start(&client, identity).await?);
    }
    let all: Vec<usize> = (0..fake_cluster::DEPLOYMENTS).collect();
    wait_for_labels(&server, &all).await;
    // Once every replica sees all three on its ring, every Deployment's count changes (one Pod
    // of each flips its readiness): each replica writes the labels of its share.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !replicas.iter().all(|replica| {
        replica
            .controller
            .shard()
            .ring()
            .is_some_and(|ring| ring == Ring::new(identities))
    }) {
        assert!(
            Instant::now() < deadline,
            "the replicas never saw each other"
        );
        // Polling: membership has no signal across replicas.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before: Vec<u64> = replicas
        .iter()
        .map(|replica| replica.controller.counters().snapshot().reconciles)
        .collect();
    flip_one_pod_of_each(&client, &server, &all).await?;
    wait_for_labels(&server, &all).await;
    for (replica, before) in replicas.iter().zip(before) {
        let identity = &replica.identity;
        let reconciles = replica.controller.counters().snapshot().reconciles - before;
        let owned = all
            .iter()
            .filter(|&&d| {
                let key = format!("{}/web-{d}", fake_cluster::namespace_of(d));
                replica.controller.shard().owns(&key)
            })
            .count();
        assert!(
            (1..all.len()).contains(&owned),
            "{identity} owns {owned} of {}",
            all.len()
        );
        assert!(
            reconciles >= owned as u64,
            "{identity} reconciled {reconciles} of its {owned}"
        );
    }

    // replica-0 crashes; then every Deployment's count changes (one Pod of each flips its
    // readiness), so every label, replica-0's share included, needs a write by the others.
    replicas.remove(0).crash().await;
    flip_one_pod_of_each(&client, &server, &all).await?;
    wait_for_labels(&server, &all).await;
    for replica in replicas {
        replica.crash().await;
    }
    Ok(())
}

#[test]
fn an_update_that_only_changes_the_controllers_label_is_not_queued_again() {
    let old = typed_deployment(
        json!({ "app": "web-1", example::READY_PODS_LABEL: "2" }),
        "7",
    );
    let relabelled = typed_deployment(
        json!({ "app": "web-1", example::READY_PODS_LABEL: "3" }),
        "8",
    );
    assert!(example::only_our_label_changed(&old, &relabelled));

    // A resync delivers the same resourceVersion: that is the point of resyncing, so it counts.
    assert!(!example::only_our_label_changed(&old, &old));
    // Someone else's label changed along with ours.
    let other = typed_deployment(
        json!({ "app": "web-2", example::READY_PODS_LABEL: "3" }),
        "8",
    );
    assert!(!example::only_our_label_changed(&old, &other));
    // A new selector changes which Pods count.
    let mut reselected = relabelled;
    reselected.spec.selector.match_labels = Some([("app".to_owned(), "web-9".to_owned())].into());
    assert!(!example::only_our_label_changed(&old, &reselected));
}

#[test]
fn a_deployment_with_an_empty_selector_selects_no_pods() {
    let mut deployment = typed_deployment(json!({ "app": "web-1" }), "1");
    assert!(example::selector_of(&deployment).is_some());
    deployment.spec.selector = Default::default();
    assert!(example::selector_of(&deployment).is_none());
}

#[test]
fn readiness_is_the_ready_condition() {
    let ready: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(fake_cluster::pod(1, 0, true)).expect("a valid Pod");
    let not_ready: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(fake_cluster::pod(1, 0, false)).expect("a valid Pod");
    assert!(example::is_ready(&ready));
    assert!(!example::is_ready(&not_ready));
}

/// Deployment `web-1` with these labels and resourceVersion.
fn typed_deployment(labels: Value, resource_version: &str) -> Deployment {
    let mut deployment = fake_cluster::deployment(1);
    deployment["metadata"]["labels"] = labels;
    deployment["metadata"]["resourceVersion"] = json!(resource_version);
    serde_json::from_value(deployment).expect("a valid Deployment")
}

/// Adds an annotation to Deployment `web-{d}`, as `kubectl annotate` would.
fn annotate_deployment(server: &FakeApiServer, d: usize) -> Result<(), BoxError> {
    let namespace = fake_cluster::namespace_of(d);
    let mut deployment = server
        .object(
            "apps/v1",
            "Deployment",
            Some(&namespace),
            &format!("web-{d}"),
        )
        .ok_or("the Deployment exists")?;
    deployment["metadata"]["annotations"]["example.com/owner"] = json!("team-web");
    server.update_object(deployment)?;
    Ok(())
}

/// Relabels Pod `web-{from}-{slot}` so that Deployment `web-{to}` (same namespace) selects it
/// instead; creates it first if the churn deleted it.
fn move_pod(server: &FakeApiServer, from: usize, slot: usize, to: usize) -> Result<(), BoxError> {
    assert_eq!(
        fake_cluster::namespace_of(from),
        fake_cluster::namespace_of(to)
    );
    let namespace = fake_cluster::namespace_of(from);
    let name = format!("web-{from}-{slot}");
    let pod = match server.object("v1", "Pod", Some(&namespace), &name) {
        Some(pod) => pod,
        None => server.create_object(fake_cluster::pod(from, slot, true))?,
    };
    let mut moved = pod;
    moved["metadata"]["labels"]["app"] = json!(format!("web-{to}"));
    server.update_object(moved)?;
    Ok(())
}

/// The Deployments among `web-{d}` for `d` in `deployments` whose label on the server is not
/// the number of Ready Pods the server holds for them, each with what it has and should have.
///
/// Counted from the server's JSON, not through the controller's caches or typed helpers.
fn mislabelled(server: &FakeApiServer, deployments: &[usize]) -> Vec<String> {
    let mut wrong = Vec::new();
    for &d in deployments {
        let namespace = fake_cluster::namespace_of(d);
        let app = format!("web-{d}");
        let Some(deployment) = server.object("apps/v1", "Deployment", Some(&namespace), &app)
        else {
            wrong.push(format!("{namespace}/{app}: missing on the server"));
            continue;
        };
        let ready = (0..=SENTINEL)
            .filter(|&other| fake_cluster::namespace_of(other) == namespace)
            .flat_map(|other| (0..fake_cluster::SLOTS).map(move |slot| (other, slot)))
            .filter_map(|(other, slot)| {
                server.object(
                    "v1",
                    "Pod",
                    Some(&namespace),
                    &format!("web-{other}-{slot}"),
                )
            })
            .filter(|pod| pod["metadata"]["labels"]["app"] == app.as_str())
            .filter(fake_cluster::is_ready)
            .count();
        let label = &deployment["metadata"]["labels"][example::READY_PODS_LABEL];
        if label.as_str() != Some(ready.to_string().as_str()) {
            wrong.push(format!(
                "{namespace}/{app}: label {label}, {ready} Pods Ready"
            ));
        }
    }
    wrong
}

/// Creates Deployment `web-{SENTINEL}` and its one Pod, Ready.
fn seed_sentinel(server: &FakeApiServer) -> Result<(), BoxError> {
    server.create_object(fake_cluster::deployment(SENTINEL))?;
    server.create_object(fake_cluster::pod(SENTINEL, 0, true))?;
    Ok(())
}

/// What the barriers and the convergence checks look at: the server, the controller and the
/// registry its work queue records into.
struct Watched<'a> {
    server: &'a FakeApiServer,
    client: &'a kube_client::Client,
    controller: &'a ReadyPodsController,
    registry: &'a Registry,
}

impl Watched<'_> {
    /// PATCH requests for Deployments the server has received, failed ones included.
    fn patch_requests(&self) -> u64 {
        self.server
            .faults()
            .request_count(Verb::Patch, "deployments")
    }

    /// Returns once every event the controller's informers delivered before this call, and
    /// every event of a write the controller finished before it, has been handled, and the
    /// reconciles they queued are done, so any PATCH they caused has been counted, by the
    /// server and by the controller. It costs a correct controller [`BARRIER_WRITES`] PATCHes
    /// and as many reconciles, all of the sentinel.
    ///
    /// Why that holds, for this controller (four workers, a rate-limited queue):
    ///
    /// - The controller writes only Deployments, so any work its own writes cause reaches it
    ///   as a Deployment event; the churn reaches it through Pods as well. The informers of
    ///   the two kinds are not ordered with each other, so the barrier has one step through
    ///   each: step 1 flips the sentinel Pod's readiness, step 2 overwrites the sentinel's
    ///   label on the server, as someone else's edit would.
    /// - One informer delivers its events to the controller's handler one at a time, in the
    ///   order of its watch (which is the order of the writes on the server), having updated
    ///   its cache first; the handler queues keys as it goes. So every key an earlier event
    ///   of that kind queues is queued before the sentinel's key.
    /// - The step is through when the server holds the sentinel's right label again: only the
    ///   step's own event queues the sentinel (nothing else selects its Pod, nothing else
    ///   edits it, and the resync period is far off), so the sentinel's event has been handed
    ///   to the handler, and with it every earlier event.
    /// - Then the step waits for an instant at which the queue is idle: no key queued or
    ///   queued again while being worked on, no worker holding one, none waiting out a rate
    ///   limiter's delay (see [`queue_was_idle`](Self::queue_was_idle)). With four workers a
    ///   key taken before the sentinel's may still be in the works when the sentinel's PATCH
    ///   lands; a key queued again while a worker held it goes back behind the sentinel; a
    ///   failed PATCH waits out the limiter's delay. At an idle instant none of these is left:
    ///   every key queued before the sentinel's has been taken and finished since, and its
    ///   PATCH, if it made one, is counted.
    /// - A write the controller finished before the barrier started was applied on the server
    ///   before the sentinel's label was overwritten, so its event comes before step 2's. A
    ///   PATCH still on its way when the caller read the counts is counted by the controller
    ///   when it finishes, before the idle instant; the server counts a request when it
    ///   arrives.
    ///
    /// What the barrier does not cover: the sentinel's own PATCH of step 2, whose update may
    /// arrive after the barrier is through (a correct controller does not queue it), and
    /// events of changes made after the barrier started. It also takes the watches to stay
    /// open: a relist hands its changes over in list order rather than in the order of the
    /// writes (and queues every Deployment), and nothing in this test closes a watch.
    async fn barrier(&self) -> Result<(), BoxError> {
        let namespace = fake_cluster::namespace_of(SENTINEL);
        let name = format!("web-{SENTINEL}");
        // Step 1, through the Pod informer: the sentinel's count changes.
        fake_cluster::flip_ready(self.client, self.server, &namespace, &format!("{name}-0"))
            .await?;
        self.wait_until_sentinel_labelled().await;
        self.wait_until_queue_idle().await;
        // Step 2, through the Deployment informer: someone else writes the sentinel's label.
        let mut sentinel = self
            .server
            .object("apps/v1", "Deployment", Some(&namespace), &name)
            .ok_or("the sentinel exists")?;
        sentinel["metadata"]["labels"][example::READY_PODS_LABEL] = json!("99");
        self.server.update_object(sentinel)?;
        self.wait_until_sentinel_labelled().await;
        self.wait_until_queue_idle().await;
        Ok(())
    }

    async fn wait_until_sentinel_labelled(&self) {
        let deadline = Instant::now() + PATIENCE;
        while !mislabelled(self.server, &[SENTINEL]).is_empty() {
            assert!(
                Instant::now() < deadline,
                "the sentinel was not relabelled: {:?}",
                self.controller.counters().snapshot()
            );
            // Polling: the server's objects have no signal to wait on.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn wait_until_queue_idle(&self) {
        let deadline = Instant::now() + PATIENCE;
        while !self.queue_was_idle() {
            assert!(
                Instant::now() < deadline,
                "the work queue never fell idle: {:?}",
                self.controller.counters().snapshot()
            );
            // Polling: the queue has no signal for falling idle.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Whether, at one instant during this call, no key was queued (or queued again while a
    /// worker held it), none was held by a worker and none was waiting out a delay.
    ///
    /// Read from the queue's metrics, which it records under its lock: `workqueue_depth` is
    /// the number of keys queued or queued again, the count of
    /// `workqueue_queue_duration_seconds` that of keys taken, the count of
    /// `workqueue_work_duration_seconds` that of keys finished. Five reads in turn: taken,
    /// finished, waiting, depth, taken again. If both reads of taken agree, nothing was taken in
    /// between; if finished equals taken, every key taken had been finished by then; so at the
    /// read of depth no worker held a key, and a depth of 0 means none was queued. A key that
    /// waited out a delay was put there by a worker before it finished the key, so it was
    /// still waiting at the read of waiting, or has since been queued and counted in depth.
    fn queue_was_idle(&self) -> bool {
        let taken = self.queue_metric("workqueue_queue_duration_seconds_count");
        let finished = self.queue_metric("workqueue_work_duration_seconds_count");
        let waiting = self.controller.queue().waiting_len();
        let depth = self.queue_metric("workqueue_depth");
        let taken_after = self.queue_metric("workqueue_queue_duration_seconds_count");
        taken == finished && taken == taken_after && waiting == 0 && depth == 0.0
    }

    /// The value of the work queue's series `name`, read from a fresh encoding of the registry.
    fn queue_metric(&self, name: &str) -> f64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, self.registry)
            .expect("the registry encodes");
        let prefix = format!("{name}{{name=\"ready-pods\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
    }

    /// Waits until the server agrees with the Pods it holds on every label of `deployments`
    /// and the sentinel, the controller's caches agree too, and then a [`barrier`](Self::barrier)
    /// passes in which the controller wrote nothing but the barrier's own labels and retried
    /// nothing. After such a barrier no event is left for a correct controller to act on (but
    /// the sentinel's last update, which it does not queue). Returns how many barriers it took.
    async fn wait_until_converged(&self, deployments: &[usize]) -> Result<u64, BoxError> {
        let with_sentinel: Vec<usize> = deployments.iter().copied().chain([SENTINEL]).collect();
        let deadline = Instant::now() + PATIENCE;
        let mut barriers = 0;
        loop {
            let wrong = mislabelled(self.server, &with_sentinel);
            let (in_sync, cached) = self.controller.in_sync();
            assert!(
                Instant::now() < deadline,
                "no convergence after {barriers} barriers: {wrong:?}; caches {in_sync}/{cached} \
                 in sync; {:?}",
                self.controller.counters().snapshot(),
            );
            if !(wrong.is_empty() && in_sync == cached && cached == with_sentinel.len()) {
                // Polling: convergence is read from the server and the caches, with no signal.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            let before = (self.patch_requests(), self.controller.counters().snapshot());
            self.barrier().await?;
            barriers += 1;
            let after = (self.patch_requests(), self.controller.counters().snapshot());
            if after.0 == before.0 + BARRIER_WRITES
                && after.1.patches == before.1.patches + BARRIER_WRITES
                && after.1.retries == before.1.retries
            {
                return Ok(barriers);
            }
        }
    }
}

/// A GET over plain HTTP/1.1: the status and the body.
async fn get(addr: std::net::SocketAddr, path: &str) -> Result<(u16, String), BoxError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or("no status line")?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}
