//! A soak: informers, handlers and a work-queue controller under steady churn for N minutes,
//! checked against the server every minute.
//!
//! ```text
//! cargo xtask soak --minutes 30            # a local kube-apiserver + etcd, restarted every 2 min
//! cargo xtask soak --fake --minutes 3      # the fake API server, watches cut and history compacted
//! cargo run -p kinformer --example soak -- --minutes 5   # the cluster in KUBECONFIG, as is
//! ```
//!
//! One task creates, updates and deletes ConfigMaps, Secrets and Leases in a namespace of its
//! own, about 40 writes a second, shrugging off the errors of a server that restarts under it.
//! A factory informs all three kinds. ConfigMaps have three handlers (one keeping up, one slow,
//! one slow behind a coalescing buffer); Secrets and Leases one each; Secrets also feed a
//! rate-limited work queue whose two workers record what the lister says for each key.
//!
//! Every minute, and at the end, the churn pauses and the check runs: the cache of each kind
//! equals a quorum list from the server (keys, UIDs, resourceVersions), every handler's view
//! equals the cache, the controller's record equals the Secrets cache once its queue is empty,
//! and the process's threads, file descriptors, tokio tasks and resident memory are sampled.
//! Each check prints one line of JSON; the run fails if any check diverges or if threads,
//! descriptors, tasks or memory grew after the first minute.
//!
//! With `--fake` it starts kinformer-testing's API server in this process and, every
//! `--disrupt-every` seconds (default 30), cuts every watch, every other time just after
//! compacting the history (so the watches resume from versions that are gone and relist).
//! Against a real server the disruptions come from outside (`cargo xtask soak` kills and
//! restarts kube-apiserver, which compacts etcd every minute).

#![allow(clippy::print_stdout, reason = "an example reports on the terminal")]

#[path = "support/mod.rs"]
mod support;

use std::{
    collections::BTreeMap,
    fmt::Debug,
    marker::PhantomData,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Namespace, Secret},
};
use kinformer::testing::FakeApiServer;
use kinformer::{factory::FactoryResource, prelude::*, processor::BufferPolicy, wait::ErrorChain};
use kinformer::{
    processor::{AddKind, HandlerFuncs},
    store::ObjectOrTombstone,
    wait::CancellationToken,
};
use kube_client::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use kube_core::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::sync::Arc;
use tokio::sync::RwLock;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Objects per kind the churn picks from.
const POOL: u64 = 150;
/// The pause between two writes of the churn.
const WRITE_EVERY: Duration = Duration::from_millis(25);
/// How long a check waits for a cache or a view to match before calling it a divergence.
const CONVERGE: Duration = Duration::from_secs(60);

/// What a handler or the controller believes: key to (UID, resourceVersion).
type View = Arc<Mutex<BTreeMap<String, (String, String)>>>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            // Errors only: under outages the reflectors warn of every cut watch and relist, and
            // kube-client logs every refused connection as an error; the checks say what
            // matters. RUST_LOG=warn shows the rest.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error,kube_client=off".into()),
        )
        .init();
    let args = Args::parse()?;
    let (client, fake) = if args.fake {
        let server = Arc::new(FakeApiServer::start().await?);
        (server.client()?, Some(server))
    } else {
        let Some(path) = support::kubeconfig() else {
            return Err(
                "no kubeconfig (KUBECONFIG or ~/.kube/config); use --fake for the fake server"
                    .into(),
            );
        };
        println!("soak: writing to the cluster in {}", path.display());
        (support::client().await?, None)
    };
    let namespace = format!("kinformer-soak-{:08x}", fastrand_u32());
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": namespace } }))?,
        )
        .await?;
    println!("soak: {} minutes in namespace {namespace}", args.minutes);

    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions::default().namespace(namespace.clone()),
    );
    let config_maps = factory.informer::<ConfigMap>()?;
    let secrets = factory.informer::<Secret>()?;
    let leases = factory.informer::<Lease>()?;
    let config_map_views = [
        (
            "config-maps/steady",
            view_of(&config_maps, Duration::ZERO, BufferPolicy::Unbounded)?,
        ),
        (
            "config-maps/slow",
            view_of(
                &config_maps,
                Duration::from_millis(5),
                BufferPolicy::Unbounded,
            )?,
        ),
        (
            "config-maps/coalescing",
            view_of(
                &config_maps,
                Duration::from_millis(20),
                BufferPolicy::CoalesceByKey,
            )?,
        ),
    ];
    let secret_views = [(
        "secrets/steady",
        view_of(&secrets, Duration::ZERO, BufferPolicy::Unbounded)?,
    )];
    let lease_views = [(
        "leases/steady",
        view_of(&leases, Duration::ZERO, BufferPolicy::Unbounded)?,
    )];
    let controller = Controller::start(&secrets)?;

    let token = CancellationToken::new();
    factory.start()?;
    let synced = factory.wait_for_cache_sync(CONVERGE).await;
    if !synced.all_synced() {
        return Err(synced.to_string().into());
    }

    let pause = Arc::new(RwLock::new(()));
    let churn = Churn::default();
    let churning = tokio::spawn(churn.clone().run(
        client.clone(),
        namespace.clone(),
        Arc::clone(&pause),
        token.clone(),
    ));
    let disrupting = fake.as_ref().map(|server| {
        tokio::spawn(disrupt(
            Arc::clone(server),
            Duration::from_secs(args.disrupt_every),
            token.clone(),
        ))
    });

    let started = Instant::now();
    let end = started + Duration::from_secs(args.minutes * 60);
    let mut samples: Vec<Sample> = Vec::new();
    let mut divergences = Vec::new();
    let mut next = started + Duration::from_secs(60);
    loop {
        let now = Instant::now();
        let at = next.min(end);
        if at > now {
            tokio::time::sleep(at - now).await; // the soak's own pacing: one check a minute
        }
        let paused = pause.write().await;
        let mut found = Vec::new();
        let objects = [
            check(
                &client,
                &namespace,
                &config_maps,
                &config_map_views,
                &mut found,
            )
            .await,
            check(&client, &namespace, &secrets, &secret_views, &mut found).await,
            check(&client, &namespace, &leases, &lease_views, &mut found).await,
        ];
        if let Err(mismatch) = controller.converged(&secrets).await {
            found.push(format!("controller: {mismatch}"));
        }
        drop(paused);
        let sample = Sample::take(started.elapsed(), objects.iter().sum(), &churn, &factory);
        println!("{}", sample.json(&found));
        divergences.extend(found);
        samples.push(sample);
        if Instant::now() >= end {
            break;
        }
        next += Duration::from_secs(60);
    }

    token.cancel();
    let _ = churning.await;
    if let Some(disrupting) = disrupting {
        let _ = disrupting.await;
    }
    controller.queue.shut_down();
    factory.shutdown().await;
    let _ = Api::<Namespace>::all(client)
        .delete(&namespace, &DeleteParams::default())
        .await;

    let growth = growth(&samples);
    let verdict = if divergences.is_empty() && growth.is_empty() {
        "PASSED"
    } else {
        "FAILED"
    };
    println!(
        "soak: {verdict} after {:.1} minutes: {} checks, {} writes ({} failed), {} divergences{}",
        started.elapsed().as_secs_f64() / 60.0,
        samples.len(),
        churn.writes.load(Ordering::Relaxed),
        churn.failed.load(Ordering::Relaxed),
        divergences.len(),
        growth
            .iter()
            .map(|grew| format!("; {grew}"))
            .collect::<String>()
    );
    if verdict == "PASSED" {
        Ok(())
    } else {
        Err("the soak found divergences or growth".into())
    }
}

fn key_of<K: Resource>(object: &K) -> String {
    format!(
        "{}/{}",
        object.meta().namespace.as_deref().unwrap_or_default(),
        object.meta().name.as_deref().unwrap_or_default()
    )
}

fn state_of<K: Resource>(object: &K) -> (String, String) {
    let meta = object.meta();
    (
        meta.uid.clone().unwrap_or_default(),
        meta.resource_version.clone().unwrap_or_default(),
    )
}

/// A handler that keeps a [`View`], sleeping `delay` per call to fall behind.
struct ViewHandler<K> {
    view: View,
    delay: Duration,
    kind: PhantomData<fn(K)>,
}

impl<K: Resource + Send + Sync + 'static> ResourceEventHandler<K> for ViewHandler<K> {
    fn on_add(&mut self, object: Arc<K>, _kind: AddKind) {
        self.record(&object, true);
    }

    fn on_update(&mut self, _old: Arc<K>, new: Arc<K>) {
        self.record(&new, true);
    }

    fn on_delete(&mut self, object: ObjectOrTombstone<K>) {
        self.record(object.object(), false);
    }
}

impl<K: Resource> ViewHandler<K> {
    fn record(&self, object: &K, present: bool) {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay); // the point: a handler slower than the churn
        }
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        if present {
            view.insert(key_of(object), state_of(object));
        } else {
            view.remove(&key_of(object));
        }
    }
}

fn view_of<K: FactoryResource + Debug>(
    informer: &SharedIndexInformer<K>,
    delay: Duration,
    buffer: BufferPolicy,
) -> Result<View, BoxError> {
    let view = View::default();
    informer.add_event_handler_with_options(
        ViewHandler {
            view: Arc::clone(&view),
            delay,
            kind: PhantomData,
        },
        ListenerOptions::new().buffer(buffer),
    )?;
    Ok(view)
}

/// Secrets' keys through a rate-limited work queue to two workers that record what the lister
/// holds for each: a controller's view of the world.
struct Controller {
    queue: RateLimitingQueue<String>,
    reconciled: View,
    in_flight: Arc<AtomicUsize>,
}

impl Controller {
    fn start(secrets: &SharedIndexInformer<Secret>) -> Result<Self, BoxError> {
        let queue = RateLimitingQueue::new(
            default_controller_rate_limiter(),
            QueueOptions::named("soak-secrets"),
        );
        let enqueue = |queue: &RateLimitingQueue<String>| {
            let queue = queue.clone();
            move |secret: &Secret| queue.add(key_of(secret))
        };
        let (on_add, on_update, on_delete) = (enqueue(&queue), enqueue(&queue), enqueue(&queue));
        secrets.add_event_handler(
            HandlerFuncs::new()
                .add_func(move |secret: Arc<Secret>, _| on_add(&secret))
                .update_func(move |_, secret: Arc<Secret>| on_update(&secret))
                .delete_func(move |secret| on_delete(secret.object())),
        )?;
        let controller = Self {
            queue,
            reconciled: View::default(),
            in_flight: Arc::default(),
        };
        for _ in 0..2 {
            let (queue, reconciled, in_flight) = (
                controller.queue.clone(),
                Arc::clone(&controller.reconciled),
                Arc::clone(&controller.in_flight),
            );
            let cache = secrets.cache();
            tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    in_flight.fetch_add(1, Ordering::AcqRel);
                    let mut view = reconciled.lock().unwrap_or_else(PoisonError::into_inner);
                    match cache.get_by_key(&key) {
                        Some(secret) => view.insert(key.clone(), state_of(&*secret)),
                        None => view.remove(&key),
                    };
                    drop(view);
                    queue.forget(&key);
                    queue.done(&key);
                    in_flight.fetch_sub(1, Ordering::AcqRel);
                }
            });
        }
        Ok(controller)
    }

    /// Waits until the queue is empty and the record equals the Secrets cache.
    async fn converged(&self, secrets: &SharedIndexInformer<Secret>) -> Result<(), String> {
        converge(|| {
            if !self.queue.is_empty() || self.in_flight.load(Ordering::Acquire) > 0 {
                return Err("the queue is not empty".to_owned());
            }
            compare(
                "the controller's record",
                &self
                    .reconciled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
                &cached(secrets),
            )
        })
        .await
    }
}

/// Polls `matches` until it holds or [`CONVERGE`] passes; the last mismatch is the error.
async fn converge(mut matches: impl FnMut() -> Result<(), String>) -> Result<(), String> {
    let deadline = Instant::now() + CONVERGE;
    loop {
        match matches() {
            Ok(()) => return Ok(()),
            Err(mismatch) if Instant::now() >= deadline => return Err(mismatch),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await, // polling a condition
        }
    }
}

fn cached<K>(informer: &SharedIndexInformer<K>) -> BTreeMap<String, (String, String)>
where
    K: Resource + kinformer::store::Object,
{
    informer
        .cache()
        .list()
        .iter()
        .map(|object| (key_of(&**object), state_of(&**object)))
        .collect()
}

fn compare(
    what: &str,
    seen: &BTreeMap<String, (String, String)>,
    truth: &BTreeMap<String, (String, String)>,
) -> Result<(), String> {
    if seen == truth {
        return Ok(());
    }
    let missing = truth.keys().filter(|key| !seen.contains_key(*key)).count();
    let extra = seen.keys().filter(|key| !truth.contains_key(*key)).count();
    let stale = truth
        .iter()
        .filter(|(key, state)| seen.get(*key).is_some_and(|seen| seen != *state))
        .count();
    Err(format!(
        "{what} differs: {missing} missing, {extra} extra, {stale} stale of {}",
        truth.len()
    ))
}

/// One kind's check: the cache against a quorum list, then every view against the cache.
/// Returns the number of objects; pushes what diverged to `found`.
async fn check<K>(
    client: &Client,
    namespace: &str,
    informer: &SharedIndexInformer<K>,
    views: &[(&str, View)],
    found: &mut Vec<String>,
) -> usize
where
    K: FactoryResource<Scope = kube_core::NamespaceResourceScope>
        + kinformer::store::Object
        + DeserializeOwned
        + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let kind = K::kind(&());
    let deadline = Instant::now() + CONVERGE;
    // A consistent read (no resourceVersion); the server may be restarting, so retry.
    let listed = loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => break list,
            Err(error) if Instant::now() < deadline => {
                tracing::debug!(error = %ErrorChain(&error), "quorum list failed, retrying");
                tokio::time::sleep(Duration::from_millis(500)).await; // the server restarts
            }
            Err(error) => {
                found.push(format!("{kind}: no quorum list: {}", ErrorChain(&error)));
                return 0;
            }
        }
    };
    let truth: BTreeMap<_, _> = listed
        .items
        .iter()
        .map(|object| (key_of(object), state_of(object)))
        .collect();
    if let Err(mismatch) = converge(|| compare("the cache", &cached(informer), &truth)).await {
        found.push(format!("{kind}: {mismatch}"));
        return truth.len();
    }
    for (name, view) in views {
        let converged = converge(|| {
            compare(
                name,
                &view.lock().unwrap_or_else(PoisonError::into_inner),
                &truth,
            )
        })
        .await;
        if let Err(mismatch) = converged {
            found.push(format!("{kind}: {mismatch}"));
        }
    }
    truth.len()
}

/// The writer: creates, updates and deletes objects of the three kinds in a steady stream.
#[derive(Clone, Default)]
struct Churn {
    writes: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl Churn {
    async fn run(
        self,
        client: Client,
        namespace: String,
        pause: Arc<RwLock<()>>,
        token: CancellationToken,
    ) {
        let kinds = [
            (
                ApiResource::erase::<ConfigMap>(&()),
                json!({ "data": { "v": "0" } }),
            ),
            (
                ApiResource::erase::<Secret>(&()),
                json!({ "stringData": { "v": "0" } }),
            ),
            (
                ApiResource::erase::<Lease>(&()),
                json!({ "spec": { "holderIdentity": "soak" } }),
            ),
        ];
        let apis: Vec<(Api<DynamicObject>, &ApiResource, &serde_json::Value)> = kinds
            .iter()
            .map(|(resource, body)| {
                (
                    Api::namespaced_with(client.clone(), &namespace, resource),
                    resource,
                    body,
                )
            })
            .collect();
        let mut ticker = tokio::time::interval(WRITE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut rng = fastrand_u32();
        let mut counter = 0u64;
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let _running = pause.read().await;
            rng = xorshift(rng);
            let (api, resource, body) = &apis[rng as usize % apis.len()];
            let name = format!("obj-{}", u64::from(rng >> 8) % POOL);
            counter += 1;
            let written = match (rng >> 4) % 4 {
                0 => {
                    let mut object = DynamicObject::new(&name, resource).data((*body).clone());
                    object.metadata.namespace = Some(namespace.clone());
                    api.create(&PostParams::default(), &object).await.map(drop)
                }
                1 => api.delete(&name, &DeleteParams::default()).await.map(drop),
                _ => {
                    let patch =
                        json!({ "metadata": { "annotations": { "soak/n": counter.to_string() } } });
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(drop)
                }
            };
            self.writes.fetch_add(1, Ordering::Relaxed);
            match written {
                Ok(()) => {}
                // Creating what exists and changing what does not are the churn's normal flow.
                Err(kube_client::Error::Api(status)) if matches!(status.code, 404 | 409) => {}
                Err(error) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(error = %ErrorChain(&error), "a write failed");
                }
            }
        }
    }
}

/// Cuts every watch of the fake server; every other time, compacts its history first.
async fn disrupt(server: Arc<FakeApiServer>, every: Duration, token: CancellationToken) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut compact = false;
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            _ = ticker.tick() => {}
        }
        // A compaction alone changes nothing for a watch that keeps going; cut right after
        // it, the watches resume from versions now gone and must relist.
        if compact {
            server.compact();
        }
        server.faults().close_watches();
        compact = !compact;
    }
}

/// The process at one check.
struct Sample {
    elapsed: Duration,
    objects: usize,
    writes: u64,
    events: u64,
    relists: u64,
    rss_kib: u64,
    threads: u64,
    fds: usize,
    tasks: usize,
}

impl Sample {
    fn take(
        elapsed: Duration,
        objects: usize,
        churn: &Churn,
        factory: &SharedInformerFactory,
    ) -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|value| value.parse().ok())
                .unwrap_or(0)
        };
        let health = factory.health();
        Self {
            elapsed,
            objects,
            writes: churn.writes.load(Ordering::Relaxed),
            events: health
                .values()
                .map(|h| h.reflector.added + h.reflector.modified + h.reflector.deleted)
                .sum(),
            relists: health
                .values()
                .map(|h| {
                    h.reflector
                        .relists
                        .iter()
                        .map(|(_, count)| count)
                        .sum::<u64>()
                })
                .sum(),
            rss_kib: field("VmRSS:"),
            threads: field("Threads:"),
            fds: std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count),
            tasks: tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
        }
    }

    fn json(&self, divergences: &[String]) -> String {
        json!({
            "minute": (self.elapsed.as_secs_f64() / 60.0 * 10.0).round() / 10.0,
            "objects": self.objects,
            "writes": self.writes,
            "events": self.events,
            "relists": self.relists,
            "rss_mib": self.rss_kib / 1024,
            "threads": self.threads,
            "fds": self.fds,
            "tasks": self.tasks,
            "divergences": divergences,
        })
        .to_string()
    }
}

/// What grew between the first check (after a minute of warm-up) and the last.
fn growth(samples: &[Sample]) -> Vec<String> {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return Vec::new();
    };
    let mut grew = Vec::new();
    // Slack for what legitimately varies: tokio's blocking threads come and go, and a restarted
    // server can leave a connection closing.
    if last.threads > first.threads + 4 {
        grew.push(format!("threads {} -> {}", first.threads, last.threads));
    }
    if last.fds > first.fds + 8 {
        grew.push(format!("file descriptors {} -> {}", first.fds, last.fds));
    }
    if last.tasks > first.tasks + 8 {
        grew.push(format!("tokio tasks {} -> {}", first.tasks, last.tasks));
    }
    if last.rss_kib > first.rss_kib * 5 / 4 + 16 * 1024 {
        grew.push(format!(
            "resident memory {} -> {} MiB",
            first.rss_kib / 1024,
            last.rss_kib / 1024
        ));
    }
    grew
}

fn fastrand_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    (nanos ^ std::process::id().rotate_left(16)) | 1
}

fn xorshift(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

struct Args {
    minutes: u64,
    fake: bool,
    disrupt_every: u64,
}

impl Args {
    fn parse() -> Result<Self, BoxError> {
        let mut args = Args {
            minutes: 3,
            fake: false,
            disrupt_every: 30,
        };
        let mut raw = std::env::args().skip(1);
        let number = |value: Option<String>, flag: &str| -> Result<u64, BoxError> {
            value
                .and_then(|value| value.parse().ok())
                .filter(|value| *value > 0)
                .ok_or_else(|| format!("{flag} needs a positive number").into())
        };
        while let Some(arg) = raw.next() {
            match arg.as_str() {
                "--minutes" => args.minutes = number(raw.next(), "--minutes")?,
                "--disrupt-every" => args.disrupt_every = number(raw.next(), "--disrupt-every")?,
                "--fake" => args.fake = true,
                other => {
                    return Err(format!(
                        "unknown argument {other:?}; try --minutes N, --fake, --disrupt-every SECONDS"
                    )
                    .into());
                }
            }
        }
        Ok(args)
    }
}
