//! What `cargo xtask bench` runs: the sizes (full or `--quick`), the peers, and the scenarios,
//! each a set of cases (a peer in one mode) run against one server and judged on its metrics.

use std::time::Duration;

use super::metrics::{
    CPU_MS, CPU_US_PER_EVENT, FAULTS_K, FAULTS_PER_UPDATE, KIB_PER_OBJECT, Metric, P50_MS, P99_MS,
    P999_MS, PEAK_MIB, PHASE_MS, PHASE_SYS_PERCENT, READS_PER_S, RECEIVED_MIB, RELIST_DELETES,
    RELIST_PEAK_OVER_STEADY, RELIST_UPDATES, SLOW_P99_MS, STEADY_MIB, SYNC_MS, SYS_MS,
    UPDATES_PER_S,
};

/// How big each scenario is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sizes {
    /// Seeded objects for the sync, watch, relist and memory scenarios.
    pub(super) objects: usize,
    /// Updates in `watch`.
    pub(super) watch_updates: usize,
    /// Seeded objects and updates (at `fanout_rate`) in `fanout`.
    pub(super) fanout_objects: usize,
    pub(super) fanout_updates: usize,
    pub(super) fanout_rate: usize,
    /// Seeded objects, and updates at 5k/s, in `lookups`.
    pub(super) lookup_objects: usize,
    pub(super) lookup_updates: usize,
    /// Pods seeded into the real kube-apiserver for `memory-real` and `sync-real`.
    pub(super) real_objects: usize,
    /// Pods seeded into the real kube-apiserver for `shards-real`.
    pub(super) shard_objects: usize,
    /// Runs of every case.
    pub(super) runs: usize,
    /// Whether each measured run follows an unmeasured run of the same case.
    pub(super) warm_up: bool,
}

pub(super) const FULL: Sizes = Sizes {
    objects: 100_000,
    watch_updates: 100_000,
    fanout_objects: 10_000,
    fanout_updates: 10_000,
    fanout_rate: 2_000,
    lookup_objects: 100_000,
    lookup_updates: 25_000,
    real_objects: 20_000,
    shard_objects: 30_000,
    runs: 3,
    warm_up: false,
};

pub(super) const QUICK: Sizes = Sizes {
    objects: 2_000,
    watch_updates: 2_000,
    fanout_objects: 500,
    fanout_updates: 500,
    fanout_rate: 1_000,
    lookup_objects: 2_000,
    lookup_updates: 2_500,
    real_objects: 300,
    shard_objects: 300,
    runs: 1,
    warm_up: false,
};

/// How long one peer run may take before it is stopped and reported as not finishing.
const CASE_TIME_LIMIT: Duration = Duration::from_secs(300);

/// Writes to the rate at which `lookups` updates objects.
const LOOKUP_WRITE_RATE: usize = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Peer {
    Kinformer,
    KubeRuntime,
    ClientGo,
}

impl Peer {
    const ALL: [Peer; 3] = [Peer::Kinformer, Peer::KubeRuntime, Peer::ClientGo];

    pub(super) fn name(self) -> &'static str {
        match self {
            Peer::Kinformer => "kinformer",
            Peer::KubeRuntime => "kube-runtime",
            Peer::ClientGo => "client-go",
        }
    }
}

/// One column of a scenario's runs: a peer in one mode with its extra arguments.
#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) peer: Peer,
    pub(super) mode: &'static str,
    pub(super) extra: Vec<String>,
    /// Environment variables the peer runs with, beside the harness's own.
    pub(super) env: Vec<(&'static str, &'static str)>,
    pub(super) label: String,
}

impl Case {
    pub(super) fn new(peer: Peer, mode: &'static str) -> Self {
        let label = match (peer, mode) {
            (Peer::ClientGo, "json") => "client-go (JSON)".to_owned(),
            (Peer::ClientGo, "protobuf") => "client-go (protobuf first)".to_owned(),
            (_, "json") => peer.name().to_owned(),
            (_, mode) => format!("{} ({mode})", peer.name()),
        };
        Self {
            peer,
            mode,
            extra: Vec::new(),
            env: Vec::new(),
            label,
        }
    }

    pub(super) fn with(mut self, extra: &[String], label_suffix: &str) -> Self {
        self.extra.extend(extra.iter().cloned());
        self.label = format!("{} {label_suffix}", self.label);
        self
    }

    /// The Rust peer of this case on the system allocator (glibc's malloc here), what a program
    /// that picks no allocator gets, in place of the peers' tuned mimalloc.
    fn on_the_system_allocator(mut self) -> Self {
        debug_assert!(self.peer != Peer::ClientGo, "Go has one allocator");
        self.env.push((ALLOCATOR_ENV, "system"));
        self.label = format!("{} system allocator", self.label);
        self
    }
}

/// The environment variable that puts a Rust peer on the system allocator (see
/// `kinformer_bench_peers::PeerAllocator`).
pub(super) const ALLOCATOR_ENV: &str = "KINFORMER_PEER_ALLOCATOR";

/// Where a scenario's server comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Server {
    /// The fake API server seeded with this many objects of the scenario's resource.
    Fake,
    /// The e2e control plane (kube-apiserver + etcd).
    Real,
}

#[derive(Debug, Clone)]
pub(super) struct Scenario {
    pub(super) name: &'static str,
    /// The scenario the peers run (`--scenario`): the name itself on the fake, one of the
    /// peers' scenarios on the real server (which has no bench endpoints).
    pub(super) peer_scenario: &'static str,
    pub(super) title: &'static str,
    pub(super) what: &'static str,
    pub(super) resource: &'static str,
    pub(super) server: Server,
    pub(super) seeded: usize,
    /// Whether each run needs a server of its own (runs change what the next would see).
    pub(super) fresh_server_per_run: bool,
    /// A peer still running after this long is stopped and reported as not finishing.
    pub(super) time_limit: Duration,
    pub(super) peer_args: Vec<String>,
    pub(super) cases: Vec<Case>,
    /// The first is the headline: it gets the ratio columns and the chart bar.
    pub(super) metrics: Vec<Metric>,
}

impl Scenario {
    /// A scenario of `seeded` objects of `resource` on the fake API server, one server for all
    /// runs, with the usual time limit and no arguments for the peers beyond the case's own.
    fn fake(
        name: &'static str,
        title: &'static str,
        what: &'static str,
        seeded: usize,
        cases: Vec<Case>,
        metrics: Vec<Metric>,
    ) -> Self {
        Self {
            name,
            peer_scenario: name,
            title,
            what,
            resource: "pods",
            server: Server::Fake,
            seeded,
            fresh_server_per_run: false,
            time_limit: CASE_TIME_LIMIT,
            peer_args: Vec::new(),
            cases,
            metrics,
        }
    }

    fn of(mut self, resource: &'static str) -> Self {
        self.resource = resource;
        self
    }

    /// `--flag value` arguments every peer gets.
    fn peer_args(mut self, pairs: &[(&str, String)]) -> Self {
        self.peer_args = args(pairs);
        self
    }

    /// Each run gets a server of its own (a run changes what the next would see).
    fn fresh_server_per_run(mut self) -> Self {
        self.fresh_server_per_run = true;
        self
    }

    fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = limit;
        self
    }

    /// Against the e2e control plane instead of the fake, the peers running `peers_run`: one
    /// of their scenarios that needs nothing of the server but its API (no bench endpoints).
    fn on_a_real_server(mut self, peers_run: &'static str) -> Self {
        debug_assert!(matches!(peers_run, "sync-real" | "memory"), "{peers_run}");
        self.server = Server::Real;
        self.peer_scenario = peers_run;
        self
    }

    /// Whether the cases' modes are object shapes (full, stripped, metadata, projection)
    /// rather than wire formats.
    pub(super) fn modes_are_shapes(&self) -> bool {
        self.peer_scenario == "memory"
    }

    /// Whether the headline is what a process holds, so the Rust peers return freed pages at
    /// once (see `runner::peer_command`).
    pub(super) fn headline_is_memory(&self) -> bool {
        self.metrics
            .first()
            .is_some_and(|metric| [KIB_PER_OBJECT.label, STEADY_MIB.label].contains(&metric.label))
    }
}

fn args(pairs: &[(&str, String)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(flag, value)| [format!("--{flag}"), value.clone()])
        .collect()
}

/// Every peer on JSON; with `protobuf_too`, kinformer and client-go on protobuf as well.
fn json_cases(protobuf_too: bool) -> Vec<Case> {
    let mut cases = vec![Case::new(Peer::Kinformer, "json")];
    if protobuf_too {
        cases.push(Case::new(Peer::Kinformer, "protobuf"));
    }
    cases.push(Case::new(Peer::KubeRuntime, "json"));
    cases.push(Case::new(Peer::ClientGo, "json"));
    if protobuf_too {
        cases.push(Case::new(Peer::ClientGo, "protobuf"));
    }
    cases
}

/// kinformer in `mode` with its decoded cache (`FactoryOptions::decoded_cache`) in place of
/// the factory's default, a compact one: the opt-in for readers that fetch many objects at once.
fn decoded(mode: &'static str) -> Case {
    Case::new(Peer::Kinformer, mode).with(&args(&[("cache", "decoded".into())]), "decoded cache")
}

/// Every peer's object shapes for `memory`; kinformer has a projection type and its decoded
/// cache as well. kinformer's full objects in both caches, and kube-runtime's, also run on the
/// system allocator.
fn memory_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for peer in Peer::ALL {
        let modes: &[&'static str] = if peer == Peer::Kinformer {
            &["full", "stripped", "metadata", "projection"]
        } else {
            &["full", "stripped", "metadata"]
        };
        cases.extend(modes.iter().map(|&mode| Case::new(peer, mode)));
        match peer {
            Peer::Kinformer => {
                cases.extend(["full", "stripped", "metadata"].map(decoded));
                cases.push(Case::new(peer, "full").on_the_system_allocator());
                cases.push(decoded("full").on_the_system_allocator());
            }
            Peer::KubeRuntime => cases.push(Case::new(peer, "full").on_the_system_allocator()),
            Peer::ClientGo => {}
        }
    }
    cases
}

/// Every peer with 0, 2 and 8 reader threads for `lookups`, and kinformer's decoded cache with
/// 2 and 8.
fn lookup_cases() -> Vec<Case> {
    let readers = |readers: usize| args(&[("readers", readers.to_string())]);
    let mut cases: Vec<Case> = Peer::ALL
        .iter()
        .flat_map(|&peer| {
            [0usize, 2, 8]
                .into_iter()
                .map(move |n| Case::new(peer, "json").with(&readers(n), &format!("{n} readers")))
        })
        .collect();
    let decoded_readers =
        [2usize, 8].map(|n| decoded("json").with(&readers(n), &format!("{n} readers")));
    cases.splice(3..3, decoded_readers);
    cases
}

/// Every peer on JSON, kinformer and client-go on protobuf as well, kinformer's decoded cache
/// on protobuf, and kinformer on protobuf decoding its watch on the reading task and on 1 and 2
/// worker tasks (its default where it has two cores or more is 4).
fn watch_cases() -> Vec<Case> {
    let mut cases = json_cases(true);
    let workers = [0usize, 1, 2].map(|n| {
        let label = match n {
            0 => "decoding on the reading task".to_owned(),
            1 => "1 decode worker".to_owned(),
            n => format!("{n} decode workers"),
        };
        Case::new(Peer::Kinformer, "protobuf")
            .with(&args(&[("decode-workers", n.to_string())]), &label)
    });
    cases.splice(2..2, workers.into_iter().chain([decoded("protobuf")]));
    cases
}

/// One replica informing every Pod, beside three replicas each informing one shard of three,
/// all kinformer on protobuf with its default (compact) cache; kube-runtime and client-go
/// informing every Pod for reference.
fn shard_cases() -> Vec<Case> {
    let mut cases = vec![Case::new(Peer::Kinformer, "protobuf")];
    for index in 0..3 {
        cases.push(Case::new(Peer::Kinformer, "protobuf").with(
            &args(&[("shard", format!("{index}/3"))]),
            &format!("shard {} of 3", index + 1),
        ));
    }
    cases.push(Case::new(Peer::KubeRuntime, "json"));
    cases.push(Case::new(Peer::ClientGo, "protobuf"));
    cases
}

/// Every scenario, in the report's order.
pub(super) fn scenarios(sizes: Sizes) -> Vec<Scenario> {
    let sync_metrics = vec![
        SYNC_MS,
        CPU_MS,
        SYS_MS,
        FAULTS_K,
        PEAK_MIB,
        STEADY_MIB,
        KIB_PER_OBJECT,
    ];
    let n = sizes.objects;
    vec![
        Scenario::fake(
            "sync-pods",
            "1a. Initial sync of Pods",
            "One informer, one handler, from start to synced (the handler has every Pod).",
            n,
            {
                let mut cases = json_cases(true);
                cases.insert(2, decoded("protobuf"));
                cases
            },
            sync_metrics.clone(),
        ),
        Scenario::fake(
            "sync-configmaps",
            "1b. Initial sync of ConfigMaps",
            "The same with small objects, where per-object overheads dominate.",
            n,
            json_cases(false),
            sync_metrics.clone(),
        )
        .of("configmaps"),
        Scenario::fake(
            "watch",
            "2. Steady watch",
            "Three handlers; after sync the server updates Pods as fast as it can. \
             Latency is from the server storing the update to a handler seeing it.",
            n,
            watch_cases(),
            vec![
                UPDATES_PER_S,
                CPU_US_PER_EVENT,
                PHASE_SYS_PERCENT,
                FAULTS_PER_UPDATE,
                P50_MS,
                P99_MS,
                P999_MS,
            ],
        )
        .peer_args(&[
            ("count", sizes.watch_updates.to_string()),
            ("rate", "0".into()),
        ]),
        Scenario::fake(
            "fanout",
            "3. Fan-out to ten handlers, one of them slow",
            "Ten handlers, the first sleeping 1 ms per call, while the server updates \
             Pods at a fixed rate: the latency of the nine fast ones.",
            sizes.fanout_objects,
            json_cases(false),
            vec![P99_MS, P50_MS, P999_MS, SLOW_P99_MS],
        )
        .peer_args(&[
            ("count", sizes.fanout_updates.to_string()),
            ("rate", sizes.fanout_rate.to_string()),
        ]),
        Scenario::fake(
            "relist",
            "4. Relist after 410 Gone",
            "After sync the server closes the watch, changes 10% of the Pods (half \
             updated, half deleted) and compacts, so the informer must relist and \
             deliver the differences.",
            n,
            json_cases(false),
            vec![
                RELIST_PEAK_OVER_STEADY,
                PHASE_MS,
                STEADY_MIB,
                RELIST_UPDATES,
                RELIST_DELETES,
            ],
        )
        .fresh_server_per_run()
        .peer_args(&[("fraction", "0.1".into())]),
        Scenario::fake(
            "lookups",
            "5. Index lookups under writes",
            "Reader threads look Pods up by namespace and by the app label (kube-runtime \
             has no index: a scan of its store) while the server updates 5,000 Pods a \
             second; the write p99 is the update latency.",
            sizes.lookup_objects,
            lookup_cases(),
            vec![READS_PER_S, P99_MS],
        )
        .time_limit(Duration::from_secs(120))
        .peer_args(&[
            ("count", sizes.lookup_updates.to_string()),
            ("rate", LOOKUP_WRITE_RATE.to_string()),
        ]),
        Scenario::fake(
            "memory",
            "6. Memory per Pod",
            "Full objects, managedFields stripped before caching (each peer's own way; \
             kinformer skips them on the wire), metadata only, and kinformer with a slim \
             projection type (identity, labels, node, phase, container images). kinformer \
             lists in protobuf, its default; the others in JSON.",
            n,
            memory_cases(),
            vec![KIB_PER_OBJECT, STEADY_MIB, PEAK_MIB, SYNC_MS],
        ),
        Scenario::fake(
            "memory-real",
            "6b. Memory per Pod on a real kube-apiserver",
            "Scenario 6 with Pods seeded into the e2e control plane, so every object carries \
             what a real server gives it: its defaults and a managedFields entry for the \
             fields its creator set.",
            sizes.real_objects,
            memory_cases(),
            vec![KIB_PER_OBJECT, STEADY_MIB, PEAK_MIB, SYNC_MS],
        )
        .on_a_real_server("memory"),
        Scenario::fake(
            "sync-real",
            "7. Initial sync from a real kube-apiserver",
            "Pods seeded into the e2e control plane (kube-apiserver v1.37 + etcd); the \
             row where client-go can get protobuf, and where objects carry what a real server \
             gives them (its defaults, managedFields).",
            sizes.real_objects,
            {
                let mut cases = json_cases(true);
                cases.insert(2, decoded("protobuf"));
                cases
            },
            sync_metrics,
        )
        .on_a_real_server("sync-real"),
        Scenario::fake(
            "shards-real",
            "8. Replicas of three shards on a real kube-apiserver",
            "Pods seeded into the e2e control plane, whose kube-apiserver runs with \
             ShardedListAndWatch on; one replica informs every Pod, and each of three informs \
             one shard of three by UID (FactoryOptions::shard(Shard::of(i, 3))), which the \
             server filters. Each row is one replica's process: what it holds, what it \
             received (response bodies) and the CPU it spent to sync.",
            sizes.shard_objects,
            shard_cases(),
            vec![STEADY_MIB, RECEIVED_MIB, CPU_MS, SYNC_MS, PEAK_MIB],
        )
        .on_a_real_server("sync-real"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_has_kinformer_and_a_headline_and_unique_labels() {
        for scenario in scenarios(QUICK) {
            assert!(!scenario.metrics.is_empty(), "{}", scenario.name);
            assert!(
                scenario.cases.iter().any(|c| c.peer == Peer::Kinformer),
                "{}",
                scenario.name
            );
            for peer in Peer::ALL {
                assert!(
                    scenario.cases.iter().any(|c| c.peer == peer),
                    "{} lacks {}",
                    scenario.name,
                    peer.name()
                );
            }
            let mut labels: Vec<_> = scenario.cases.iter().map(|c| c.label.clone()).collect();
            labels.sort();
            labels.dedup();
            assert_eq!(labels.len(), scenario.cases.len(), "{}", scenario.name);
        }
    }
}
