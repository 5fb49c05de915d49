//! kinformer in one screen: one factory informs Pods, Deployments and ConfigMaps, handlers count
//! every change, an index answers "which Pods run on this node", and a summary prints every
//! second until Ctrl-C (or for `--seconds N` once synced), then everything shuts down cleanly.
//!
//! ```text
//! cargo run -p kinformer --example quickstart                  # your cluster, or the fake one
//! cargo run -p kinformer --example quickstart -- --seconds 10  # ten seconds after the sync
//! cargo run -p kinformer --example quickstart -- --fake        # the fake one even with a kubeconfig
//! cargo run -p kinformer --example quickstart -- --sync-timeout 5  # give up the sync after 5 s (default 60)
//! ```
//!
//! With a kubeconfig (`KUBECONFIG`, or `~/.kube/config`) it reads that cluster; it only lists
//! and watches, never writes. Without one it starts kinformer-testing's API server in this
//! process, seeds it with 2,000 Pods over 20 namespaces and 20 nodes, 200 Deployments and 500
//! ConfigMaps, and keeps changing them so there is something to watch.

#![allow(clippy::print_stdout, reason = "an example reports on the terminal")]

#[path = "support/mod.rs"]
mod support;

use std::{
    collections::HashMap,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Pod},
};
use kinformer::testing::{FakeApiServer, fixtures};
use kinformer::{factory::FactoryResource, prelude::*, wait::ErrorChain};
use kinformer::{processor::HandlerFuncs, store::IndexFunc, wait::CancellationToken};
use serde_json::{Value, json};
use std::sync::Arc;

const NAMESPACES: usize = 20;
const NODES: usize = 20;
const PODS: usize = 2_000;
const DEPLOYMENTS: usize = 200;
const CONFIG_MAPS: usize = 500;
/// The index the summary looks Pods up by.
const BY_NODE: &str = "by-node";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse()?;
    // One Ctrl-C listener for the whole run, installed before anything starts, so a press is
    // never lost between two waits nor ends the process before it has said why it stops.
    let mut ctrl_c = support::ctrl_c().await?;

    // Where to connect: a real cluster if there is a kubeconfig, else a fake one right here.
    let stop_churn = CancellationToken::new();
    let (client, fake) = match support::kubeconfig().filter(|_| !args.fake) {
        Some(path) => {
            println!(
                "kubeconfig {} found: informing that cluster (read only)",
                path.display()
            );
            (support::client().await?, None)
        }
        None => {
            println!("no kubeconfig: starting the embedded fake API server");
            let server = FakeApiServer::start().await?;
            let seeded = Instant::now();
            seed(&server)?;
            println!(
                "seeded {PODS} Pods, {DEPLOYMENTS} Deployments, {CONFIG_MAPS} ConfigMaps in {:.0?} at {}",
                seeded.elapsed(),
                server.url()
            );
            let client = server.client()?;
            let server = Arc::new(server);
            tokio::spawn(churn(Arc::clone(&server), stop_churn.clone()));
            (client, Some(server))
        }
    };

    // One factory for the whole program. managedFields are dropped before anything is cached:
    // no controller reads them, and they are a good part of every object's size. Every list or
    // watch error is printed as it happens, once per informer and cause: a refused connection,
    // a 403, a server error show at once rather than as a silent wait.
    let started = Instant::now();
    let reported: Mutex<HashMap<String, String>> = Mutex::default();
    let options = FactoryOptions::default()
        .drop_managed_fields()
        .watch_error_handler(move |informer, error| {
            let error = ErrorChain(error).to_string();
            let mut reported = reported.lock().unwrap_or_else(PoisonError::into_inner);
            if reported.get(informer.description()) != Some(&error) {
                println!(
                    "{:>5.1}s {:<12} failing: {error}",
                    started.elapsed().as_secs_f64(),
                    informer.description()
                );
                reported.insert(informer.description().to_owned(), error);
            }
        });
    let factory = SharedInformerFactory::new(client, options);

    // Pods get an extra index: node name -> Pods on that node.
    let pods = factory.informer::<Pod>()?;
    let by_node: IndexFunc<Pod> = Arc::new(|pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .into_iter()
            .collect()
    });
    pods.add_indexers(Indexers::from([(BY_NODE.to_owned(), by_node)]))?;

    // One counting handler per type. Asking the factory again returns the same informers:
    // still one list and one watch per type, however many handlers there are.
    let counters = [
        ("Pods", count_events::<Pod>(&factory)?),
        ("Deployments", count_events::<Deployment>(&factory)?),
        ("ConfigMaps", count_events::<ConfigMap>(&factory)?),
    ];
    let sizes = [
        cache_size::<Pod>(&factory)?,
        cache_size::<Deployment>(&factory)?,
        cache_size::<ConfigMap>(&factory)?,
    ];

    factory.start()?;
    // Wait for the first lists, at most `--sync-timeout` (a minute unless told) or until
    // Ctrl-C; the handler above says meanwhile why an informer is not getting there.
    // `--seconds` counts from here: it bounds the summary, not the sync, so a slow start (a
    // debug build, a busy machine) is not reported as a failure.
    let sync_timeout = args.sync_timeout;
    let (all_synced, gave_up) = tokio::select! {
        synced = factory.wait_for_cache_sync(sync_timeout) => (
            synced.all_synced(),
            format!("not every informer synced within {sync_timeout:.0?}"),
        ),
        _ = &mut ctrl_c => (false, "interrupted before every informer synced".to_owned()),
    };
    let mut statuses: Vec<_> = factory.sync_status().into_iter().collect();
    statuses.sort_by(|(a, _), (b, _)| a.description().cmp(b.description()));
    for (informer, status) in &statuses {
        println!(
            "{:<12} after {:.0?}: {status}",
            informer.description(),
            started.elapsed()
        );
    }
    if !all_synced {
        factory.shutdown().await;
        stop_churn.cancel();
        return Err(gave_up.into());
    }
    let deadline = args
        .seconds
        .map(|seconds| Instant::now() + Duration::from_secs(seconds));

    // The live summary.
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut previous: Vec<u64> = counters.iter().map(|(_, c)| c.total()).collect();
    let mut last = Instant::now();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = &mut ctrl_c => { println!("Ctrl-C"); break; }
        }
        let elapsed = last.elapsed().as_secs_f64();
        last = Instant::now();
        let mut line = format!("{:>4.0}s ", started.elapsed().as_secs_f64());
        for (((name, counter), size), before) in counters.iter().zip(&sizes).zip(&mut previous) {
            let total = counter.total();
            let rate = (total - *before) as f64 / elapsed;
            *before = total;
            line += &format!("| {name} {:>5} ({rate:>4.0} ev/s) ", size());
        }
        let (node, on_node) = busiest_node(&pods.cache());
        line += &format!("| busiest node {node}: {on_node} Pods");
        println!("{line}");
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
    }

    // Shut down: stop changing the fake server, then stop every informer and wait for them.
    stop_churn.cancel();
    let stopping = Instant::now();
    factory.shutdown().await;
    println!(
        "shut down in {:.0?}: {} informer tasks running, {} events seen in total",
        stopping.elapsed(),
        factory.running_tasks(),
        counters.iter().map(|(_, c)| c.total()).sum::<u64>()
    );
    drop(fake);
    Ok(())
}

/// Adds, updates and deletes seen by one handler.
#[derive(Default)]
struct EventCounter {
    adds: AtomicU64,
    updates: AtomicU64,
    deletes: AtomicU64,
}

impl EventCounter {
    fn total(&self) -> u64 {
        self.adds.load(Ordering::Relaxed)
            + self.updates.load(Ordering::Relaxed)
            + self.deletes.load(Ordering::Relaxed)
    }
}

/// Registers a handler on the factory's informer for `K` that counts what it is told.
fn count_events<K>(factory: &SharedInformerFactory) -> Result<Arc<EventCounter>, BoxError>
where
    K: FactoryResource,
{
    let counter = Arc::new(EventCounter::default());
    let (adds, updates, deletes) = (counter.clone(), counter.clone(), counter.clone());
    factory.informer::<K>()?.add_event_handler(
        HandlerFuncs::new()
            .add_func(move |_: Arc<K>, _initial| {
                adds.adds.fetch_add(1, Ordering::Relaxed);
            })
            .update_func(move |_old, _new| {
                updates.updates.fetch_add(1, Ordering::Relaxed);
            })
            .delete_func(move |_| {
                deletes.deletes.fetch_add(1, Ordering::Relaxed);
            }),
    )?;
    Ok(counter)
}

/// How many objects the factory's informer for `K` holds right now.
fn cache_size<K: FactoryResource>(
    factory: &SharedInformerFactory,
) -> Result<Box<dyn Fn() -> usize>, BoxError> {
    let cache = factory.informer::<K>()?.cache();
    Ok(Box::new(move || cache.len()))
}

/// The node with the most Pods, by the `by-node` index: one lookup per node.
fn busiest_node(pods: &Arc<dyn CacheReader<Pod>>) -> (String, usize) {
    let nodes = pods.list_index_func_values(BY_NODE);
    nodes
        .into_iter()
        .map(|node| {
            let count = pods.index_keys(BY_NODE, &node).map_or(0, |keys| keys.len());
            (node, count)
        })
        .max_by_key(|(_, count)| *count)
        .unwrap_or_else(|| ("no node".to_owned(), 0))
}

struct Args {
    seconds: Option<u64>,
    sync_timeout: Duration,
    fake: bool,
}

impl Args {
    fn parse() -> Result<Self, BoxError> {
        let mut args = Args {
            seconds: None,
            sync_timeout: Duration::from_secs(60),
            fake: false,
        };
        let mut raw = std::env::args().skip(1);
        while let Some(arg) = raw.next() {
            match arg.as_str() {
                "--seconds" => {
                    let value = raw.next().ok_or("--seconds needs a number")?;
                    args.seconds = Some(value.parse().map_err(|_| "--seconds needs a number")?);
                }
                "--sync-timeout" => {
                    let value = raw
                        .next()
                        .ok_or("--sync-timeout needs a number of seconds")?;
                    let seconds = value
                        .parse()
                        .map_err(|_| "--sync-timeout needs a number of seconds")?;
                    args.sync_timeout = Duration::from_secs(seconds);
                }
                "--fake" => args.fake = true,
                other => {
                    return Err(format!(
                        "unknown argument {other:?}; try --seconds N, --sync-timeout N or --fake"
                    )
                    .into());
                }
            }
        }
        Ok(args)
    }
}

/// Pods, Deployments and ConfigMaps spread over 20 namespaces (and the Pods over 20 nodes).
fn seed(server: &FakeApiServer) -> Result<(), BoxError> {
    for i in 0..PODS {
        server.create_object(pod(i))?;
    }
    for i in 0..DEPLOYMENTS {
        server.create_object(deployment(i))?;
    }
    for i in 0..CONFIG_MAPS {
        server.create_object(config_map(i))?;
    }
    Ok(())
}

fn namespace(i: usize) -> String {
    format!("ns-{}", i % NAMESPACES)
}

fn pod(i: usize) -> Value {
    let mut pod = fixtures::pod(i);
    pod["metadata"]["namespace"] = json!(namespace(i));
    pod["spec"]["nodeName"] = json!(format!("node-{}", i % NODES));
    pod
}

fn config_map(i: usize) -> Value {
    let mut config_map = fixtures::config_map(i);
    config_map["metadata"]["namespace"] = json!(namespace(i));
    config_map
}

fn deployment(i: usize) -> Value {
    let app = format!("app-{i}");
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": app, "namespace": namespace(i), "labels": { "app": app } },
        "spec": {
            "replicas": 3,
            "selector": { "matchLabels": { "app": app } },
            "template": {
                "metadata": { "labels": { "app": app } },
                "spec": { "containers": [{ "name": "app", "image": "registry.example.com/app:v1" }] },
            },
        },
    })
}

/// Keeps the fake cluster busy: about 200 changes a second, mostly Pod updates, with
/// ConfigMaps deleted and recreated and Deployments scaled.
async fn churn(server: Arc<FakeApiServer>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut round = 0_usize;
    while !stop.is_cancelled() {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        round += 1;
        let i = fastrand_index(round, PODS);
        if let Some(mut pod) = server.object("v1", "Pod", Some(&namespace(i)), &format!("pod-{i}"))
        {
            pod["metadata"]["annotations"]["kinformer.dev/round"] = json!(round.to_string());
            let _ = server.update_object(pod);
        }
        if round.is_multiple_of(4) {
            let i = fastrand_index(round, CONFIG_MAPS);
            let name = format!("config-{i}");
            let _ = server.delete_object("v1", "ConfigMap", Some(&namespace(i)), &name);
            let _ = server.create_object(config_map(i));
        }
        if round.is_multiple_of(10) {
            let i = fastrand_index(round, DEPLOYMENTS);
            if let Some(mut deployment) = server.object(
                "apps/v1",
                "Deployment",
                Some(&namespace(i)),
                &format!("app-{i}"),
            ) {
                deployment["spec"]["replicas"] = json!(round % 5 + 1);
                let _ = server.update_object(deployment);
            }
        }
    }
}

/// A cheap, well spread index for `round` (Knuth's multiplicative hash).
fn fastrand_index(round: usize, len: usize) -> usize {
    (round.wrapping_mul(2_654_435_761) >> 7) % len
}
