//! The scenarios, driven the same way for every peer: a peer only builds its informer and
//! says how it looks objects up; sync, settle, the admin calls, the phases and the
//! measurements are here.

use std::{
    future::Future,
    path::Path,
    process::ExitCode,
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use kube_client::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{
    admin::Admin,
    cli::{Args, Scenario},
    latency::Percentiles,
    procfs, received,
    report::{Report, Unsupported, print_result, progress},
    view::{View, Views},
};

/// How long a peer may take to sync before it gives up.
const SYNC_LIMIT: Duration = Duration::from_secs(600);
/// The protocol's settle after sync, before the steady reading.
const SETTLE: Duration = Duration::from_secs(2);
/// The protocol's relist polling period and limit.
const RELIST_POLL: Duration = Duration::from_millis(100);
const RELIST_LIMIT: Duration = Duration::from_secs(120);
/// Slack beyond `count / rate` for an update phase to end.
const PHASE_SLACK: Duration = Duration::from_secs(300);

/// One index lookup of the `lookups` scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query<'a> {
    /// The objects of a namespace.
    Namespace(&'a str),
    /// The objects labelled `app.kubernetes.io/name=<value>`.
    App(&'a str),
}

/// A peer's way of answering a [`Query`]: how many objects it returned.
pub type Lookup = Arc<dyn Fn(Query<'_>) -> usize + Send + Sync>;

/// The label the `lookups` scenario indexes by.
pub const APP_LABEL: &str = "app.kubernetes.io/name";

/// Where a peer's sync time starts: once its informer and handlers are built, as the client-go
/// peer times `factory.Start` to synced.
#[derive(Debug, Default)]
pub struct SyncClock(std::sync::OnceLock<Instant>);

impl SyncClock {
    /// Starts the clock; later calls change nothing.
    pub fn begin(&self) {
        let _ = self.0.set(Instant::now());
    }

    /// The time since [`begin`](Self::begin), or since `fallback` if the peer never called it.
    fn elapsed(&self, fallback: Instant) -> Duration {
        self.0.get().copied().unwrap_or(fallback).elapsed()
    }
}

/// What a peer binary implements; [`main`] does the rest.
pub trait Peer {
    /// `kinformer` or `kube-runtime`, as in the result.
    const NAME: &'static str;

    /// Why the peer cannot run `args`, if it cannot.
    fn unsupported(&self, args: &Args) -> Option<String>;

    /// What the peer emulates for `args` that its library does not do, for the result.
    fn notes(&self, args: &Args) -> Option<String>;

    /// Builds the informer for `args` over `client`, with one handler per view of `views`,
    /// starts it, and resolves once it is synced (the informer says so and every handler has
    /// every initial object). Resolves to the peer's lookup for the `lookups` scenario.
    ///
    /// The peer calls [`SyncClock::begin`] when everything is built and its first request is
    /// about to go out, where the client-go peer starts its factory: the sync time counts from
    /// there, as it does in Go.
    fn start(
        &mut self,
        client: Client,
        args: &Args,
        views: &Arc<Views>,
        clock: &SyncClock,
    ) -> impl Future<Output = Result<Lookup, String>>;

    /// For a peer informing one shard (`--shard`): who filters it (`server` or `client`) and
    /// how many objects of the shard the server holds, counted in a quorum list over `client`.
    /// `None` for a peer that informs everything.
    fn shard_check(
        &self,
        client: &Client,
        args: &Args,
    ) -> impl Future<Output = Result<Option<(String, usize)>, String>> {
        let _ = (client, args);
        async { Ok(None) }
    }
}

/// Parses the command line, runs the scenario and prints the result line; exits non-zero
/// with a message on stderr when that fails. `--help` prints the help and exits 0; a command
/// line clap refuses exits 2 with clap's error.
pub fn main<P: Peer>(mut peer: P) -> ExitCode {
    let args = Args::parse(std::env::args_os()).unwrap_or_else(|error| error.exit());
    let name = P::NAME;
    // The libraries' own warnings (watch errors, retries) go to stderr beside the progress.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    if let Some(why) = peer.unsupported(&args) {
        print_result(&Unsupported {
            peer: name,
            mode: args.mode.name(),
            scenario: args.scenario.name(),
            unsupported: why,
        });
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            progress(format!("cannot start tokio: {error}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&mut peer, &args)) {
        Ok(report) => {
            print_result(&report);
            // The informer's threads and tasks are not shut down: the process ends here.
            runtime.shutdown_background();
            ExitCode::SUCCESS
        }
        Err(message) => {
            progress(format!("{name} {}: {message}", args.scenario));
            runtime.shutdown_background();
            ExitCode::FAILURE
        }
    }
}

/// A client for the kubeconfig at `path` (its current context).
///
/// # Errors
///
/// When the file cannot be read or describes no usable cluster.
pub async fn client(path: &Path) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|error| format!("kubeconfig {}: {error}", path.display()))?;
    let config =
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|error| format!("kubeconfig {}: {error}", path.display()))?;
    let builder = kube_client::client::ClientBuilder::try_from(config)
        .map_err(|error| format!("building the client: {error}"))?;
    Ok(builder.with_layer(&received::layer()).build())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn memory() -> Result<procfs::Memory, String> {
    procfs::memory().map_err(|error| format!("reading /proc/self/status: {error}"))
}

fn usage() -> Result<procfs::Usage, String> {
    procfs::usage().map_err(|error| format!("reading /proc/self/stat: {error}"))
}

/// Wall time, CPU and page faults of a phase, from the admin call on.
struct PhaseClock {
    wall: Instant,
    usage: procfs::Usage,
}

impl PhaseClock {
    fn start() -> Result<Self, String> {
        Ok(Self {
            usage: usage()?,
            wall: Instant::now(),
        })
    }

    /// Fills in `phase_ms`, `phase_cpu_ms`, `phase_sys_ms` and `phase_faults`; returns the
    /// wall time.
    fn stop(&self, report: &mut Report) -> Result<Duration, String> {
        let elapsed = self.wall.elapsed();
        let used = usage()?.since(self.usage);
        report.phase_ms = Some(millis(elapsed));
        report.phase_cpu_ms = Some(used.cpu_ms);
        report.phase_sys_ms = Some(used.sys_ms);
        report.phase_faults = Some(used.minor_faults);
        Ok(elapsed)
    }
}

async fn run<P: Peer>(peer: &mut P, args: &Args) -> Result<Report, String> {
    let client = client(&args.kubeconfig).await?;
    let admin = Admin::new(client.clone());
    let baseline_rss_kib = memory()?.rss_kib;
    let received_before = received::received_bytes();
    let content_types_before = received::content_types();
    let views = Views::new(args.handlers, args.scenario.slow_handler());

    progress(format!(
        "{}: informing {}",
        P::NAME,
        args.scenario.resource().plural()
    ));
    let started = Instant::now();
    let clock = SyncClock::default();
    let lookup = tokio::time::timeout(SYNC_LIMIT, peer.start(client.clone(), args, &views, &clock))
        .await
        .map_err(|_| format!("not synced after {SYNC_LIMIT:?}"))??;
    let sync_ms = millis(clock.elapsed(started));
    let synced_objects = views.with(0, View::len);
    progress(format!("synced {synced_objects} objects in {sync_ms} ms"));
    // A shard holds part of what was seeded: its check is against the server, after the run.
    let expected = args.expected_objects.filter(|_| args.shard.is_none());
    if let Some(expected) = expected.filter(|&n| n != synced_objects) {
        progress(format!(
            "warning: the harness seeded {expected} objects, handler 0 has {synced_objects}"
        ));
    }
    tokio::time::sleep(SETTLE).await;
    let steady_rss_kib = memory()?.rss_kib;

    let mut report = Report {
        peer: P::NAME,
        mode: args.mode.name(),
        scenario: args.scenario.name(),
        allocator: crate::alloc::allocator_name(),
        objects: 0,
        sync_ms,
        cpu_ms: 0,
        peak_rss_kib: 0,
        baseline_rss_kib,
        steady_rss_kib,
        notes: peer.notes(args),
        ..Report::default()
    };
    let mut peak_rss_kib = None;
    match args.scenario {
        Scenario::SyncPods | Scenario::SyncConfigMaps | Scenario::Memory | Scenario::SyncReal => {}
        Scenario::Watch | Scenario::Fanout => {
            // Samples of the sync (none carry the annotation) are not the phase's.
            views.take_latencies(0..views.count());
            views.begin_slow_calls();
            let clock = PhaseClock::start()?;
            let sentinel = admin
                .update(args.scenario.resource(), args.count, args.rate)
                .await?;
            wait_for_sentinel(&views, &sentinel, args).await?;
            clock.stop(&mut report)?;
            let slow = args.scenario.slow_handler();
            let fast = (0..views.count()).filter(|&index| Some(index) != slow);
            report.latency_us = Some(Percentiles::of(&mut views.take_latencies(fast)));
            report.slow_latency_us =
                slow.map(|slow| Percentiles::of(&mut views.take_latencies([slow])));
        }
        Scenario::Lookups => {
            views.take_latencies(0..views.count());
            lookups(&admin, &views, args, &lookup, &mut report).await?;
        }
        Scenario::Relist => {
            peak_rss_kib = Some(memory()?.peak_kib);
            procfs::reset_peak().map_err(|error| format!("resetting VmHWM: {error}"))?;
            relist(&admin, &views, args, &mut report).await?;
            report.relist_peak_rss_kib = Some(memory()?.peak_kib);
        }
    }

    report.objects = views.with(0, View::len);
    report.received_kib = Some((received::received_bytes() - received_before) / 1024);
    let mut content_types = received::content_types();
    for (content_type, count) in &mut content_types {
        *count -= content_types_before.get(content_type).copied().unwrap_or(0);
    }
    content_types.retain(|_, count| *count > 0);
    report.content_types = Some(content_types);
    let used = usage()?;
    report.cpu_ms = used.cpu_ms;
    report.sys_ms = used.sys_ms;
    report.faults = used.minor_faults;
    report.peak_rss_kib = match peak_rss_kib {
        Some(before_reset) => before_reset,
        None => memory()?.peak_kib,
    };
    report.events = views.events();
    report.checksum = views.with(0, View::checksum);
    report.views_agree = views.agree();
    // After every figure: the quorum list of the check is no part of them.
    if let Some((mode, on_server)) = peer.shard_check(&client, args).await? {
        report.shard_mode = Some(mode);
        report.shard_objects_on_server = Some(on_server);
    }
    Ok(report)
}

async fn wait_for_sentinel(views: &Views, sentinel: &str, args: &Args) -> Result<(), String> {
    let paced = match args.rate {
        0 => Duration::ZERO,
        rate => Duration::from_secs(args.count / rate + 1),
    };
    let limit = paced + PHASE_SLACK;
    tokio::time::timeout(limit, views.wait_until(|views| views.all_saw(sentinel)))
        .await
        .map_err(|_| format!("the handlers did not all see {sentinel} within {limit:?}"))
}

async fn lookups(
    admin: &Admin,
    views: &Views,
    args: &Args,
    lookup: &Lookup,
    report: &mut Report,
) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let go = Arc::new(Barrier::new(args.readers + 1));
    let readers: Vec<_> = (0..args.readers)
        .map(|reader| {
            let (lookup, stop, go) = (Arc::clone(lookup), Arc::clone(&stop), Arc::clone(&go));
            thread::Builder::new()
                .name(format!("reader-{reader}"))
                .spawn(move || read_until(&lookup, reader, &stop, &go))
                .map_err(|error| format!("starting reader {reader}: {error}"))
        })
        .collect::<Result<_, _>>()?;
    // Every reader is already waiting, so this returns at once.
    tokio::task::block_in_place(|| go.wait());
    let clock = PhaseClock::start()?;
    let sentinel = admin
        .update(args.scenario.resource(), args.count, args.rate)
        .await;
    let waited = match &sentinel {
        Ok(sentinel) => wait_for_sentinel(views, sentinel, args).await,
        Err(error) => Err(error.clone()),
    };
    let elapsed = clock.stop(report);
    stop.store(true, Ordering::Relaxed);
    let mut reads = 0;
    for reader in readers {
        reads += reader.join().map_err(|_| "a reader panicked".to_owned())?;
    }
    waited?;
    let elapsed = elapsed?;
    report.reads = Some(reads);
    // Reads are counted in the billions at most: exact enough in an f64.
    let per_second = (reads as f64 / elapsed.as_secs_f64().max(1e-3)).round() as u64;
    report.reads_per_s = Some(per_second);
    report.latency_us = Some(Percentiles::of(&mut views.take_latencies(0..views.count())));
    Ok(())
}

/// One reader: alternately a namespace and a label lookup (`namespace_of(i)`, `app-(i mod
/// 20)`), readers starting at different `i`, until `stop`. Returns the lookups done.
fn read_until(lookup: &Lookup, reader: usize, stop: &AtomicBool, go: &Barrier) -> u64 {
    let namespaces: Vec<String> = (0..kinformer_testing::fixtures::NAMESPACES)
        .map(kinformer_testing::fixtures::namespace_of)
        .collect();
    let apps: Vec<String> = (0..20).map(|app| format!("app-{app}")).collect();
    go.wait();
    let mut reads = 0;
    let mut found = 0;
    let mut i = reader * 7;
    while !stop.load(Ordering::Relaxed) {
        found += lookup(Query::Namespace(&namespaces[i % namespaces.len()]));
        found += lookup(Query::App(&apps[i % apps.len()]));
        reads += 2;
        i += 1;
    }
    std::hint::black_box(found);
    reads
}

async fn relist(
    admin: &Admin,
    views: &Views,
    args: &Args,
    report: &mut Report,
) -> Result<(), String> {
    let resource = args.scenario.resource();
    let (updates_before, deletes_before) = views.updates_and_deletes(0);
    let clock = PhaseClock::start()?;
    let relisted = admin.relist(resource, args.fraction).await?;
    progress(format!(
        "relist: the server updated {} and deleted {} objects",
        relisted.updated, relisted.deleted
    ));
    let server = admin.checksum(resource).await?;
    let mut poll = tokio::time::interval(RELIST_POLL);
    loop {
        poll.tick().await;
        // The checksum is only worth computing once the relist has reached the handler.
        let converged = views.with(0, |view| {
            view.saw(&relisted.sentinel) && view.checksum() == server.checksum
        });
        if converged {
            break;
        }
        if clock.wall.elapsed() > RELIST_LIMIT {
            let (objects, checksum) = views.with(0, |view| (view.len(), view.checksum()));
            return Err(format!(
                "handler 0 did not converge within {RELIST_LIMIT:?}: {objects} objects, \
                 checksum {checksum}; the server has {} objects, checksum {}",
                server.count, server.checksum
            ));
        }
    }
    clock.stop(report)?;
    let (updates, deletes) = views.updates_and_deletes(0);
    report.relist_updates = Some(updates - updates_before);
    report.relist_deletes = Some(deletes - deletes_before);
    Ok(())
}
