//! `cargo xtask bench [--quick] [--scenario NAME]... [--runs K]`: kinformer, kube-runtime and
//! client-go run the same informer scenarios against the same server, alternately, and the
//! results become docs/benchmarks.md and docs/bench-chart.svg.
//!
//! The contract between this harness, the fake API server's bench endpoints and the peers is
//! xtask/peers/BENCH-PROTOCOL.md. Every peer run gets a freshly seeded server, and every result
//! is checked against the server before it counts: a peer whose handlers' view does not match
//! the server's objects fails the run, so no row is fast because it dropped events.
//!
//! `--quick` runs every scenario once with small sizes and debug builds (which `cargo test
//! --workspace` has already compiled), asserts that every peer ran and agreed with the server,
//! and writes its tables to `target/bench/quick.md` instead of docs/: timings there mean
//! nothing.

use std::{
    fmt::Write as _,
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{controlplane, project_root};

/// How big each scenario is.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Seeded objects for the sync, watch, relist and memory scenarios.
    objects: usize,
    /// Updates in `watch`.
    watch_updates: usize,
    /// Seeded objects and updates (at `fanout_rate`) in `fanout`.
    fanout_objects: usize,
    fanout_updates: usize,
    fanout_rate: usize,
    /// Seeded objects, and updates at 5k/s, in `lookups`.
    lookup_objects: usize,
    lookup_updates: usize,
    /// Pods seeded into the real kube-apiserver for `sync-real`.
    real_objects: usize,
    /// Runs of every case.
    runs: usize,
}

const FULL: Sizes = Sizes {
    objects: 100_000,
    watch_updates: 100_000,
    fanout_objects: 10_000,
    fanout_updates: 10_000,
    fanout_rate: 2_000,
    lookup_objects: 100_000,
    lookup_updates: 25_000,
    real_objects: 20_000,
    runs: 3,
};

const QUICK: Sizes = Sizes {
    objects: 2_000,
    watch_updates: 2_000,
    fanout_objects: 500,
    fanout_updates: 500,
    fanout_rate: 1_000,
    lookup_objects: 2_000,
    lookup_updates: 2_500,
    real_objects: 300,
    runs: 1,
};

/// How long one peer run may take before it is stopped and reported as not finishing.
const CASE_TIME_LIMIT: Duration = Duration::from_secs(300);

/// Writes to the rate at which `lookups` updates objects.
const LOOKUP_WRITE_RATE: usize = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    Kinformer,
    KubeRuntime,
    ClientGo,
}

impl Peer {
    const ALL: [Peer; 3] = [Peer::Kinformer, Peer::KubeRuntime, Peer::ClientGo];

    fn name(self) -> &'static str {
        match self {
            Peer::Kinformer => "kinformer",
            Peer::KubeRuntime => "kube-runtime",
            Peer::ClientGo => "client-go",
        }
    }
}

/// One column of a scenario's runs: a peer in one mode with its extra arguments.
#[derive(Debug, Clone)]
struct Case {
    peer: Peer,
    mode: &'static str,
    extra: Vec<String>,
    label: String,
}

impl Case {
    fn new(peer: Peer, mode: &'static str) -> Self {
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
            label,
        }
    }

    fn with(mut self, extra: &[String], label_suffix: &str) -> Self {
        self.extra.extend(extra.iter().cloned());
        self.label = format!("{} {label_suffix}", self.label);
        self
    }
}

/// Whether a smaller or a larger figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Better {
    Lower,
    Higher,
}

/// A figure read (or derived) from a peer's result line.
#[derive(Debug, Clone, Copy)]
struct Metric {
    label: &'static str,
    better: Better,
    read: fn(&Value) -> Option<f64>,
    /// Digits after the decimal point in the tables.
    decimals: usize,
}

fn field(result: &Value, pointer: &str) -> Option<f64> {
    result.pointer(pointer).and_then(Value::as_f64)
}

const SYNC_MS: Metric = Metric {
    label: "time to synced (ms)",
    better: Better::Lower,
    read: |r| field(r, "/sync_ms"),
    decimals: 0,
};
const CPU_MS: Metric = Metric {
    label: "CPU user+sys (ms)",
    better: Better::Lower,
    read: |r| field(r, "/cpu_ms"),
    decimals: 0,
};
const PEAK_MIB: Metric = Metric {
    label: "peak RSS (MiB)",
    better: Better::Lower,
    read: |r| field(r, "/peak_rss_kib").map(|kib| kib / 1024.0),
    decimals: 0,
};
const STEADY_MIB: Metric = Metric {
    label: "steady RSS (MiB)",
    better: Better::Lower,
    read: |r| field(r, "/steady_rss_kib").map(|kib| kib / 1024.0),
    decimals: 0,
};
const KIB_PER_OBJECT: Metric = Metric {
    label: "steady RSS per object (KiB)",
    better: Better::Lower,
    read: |r| {
        let objects = field(r, "/objects")?;
        (objects > 0.0).then_some(())?;
        Some((field(r, "/steady_rss_kib")? - field(r, "/baseline_rss_kib")?) / objects)
    },
    decimals: 1,
};
const PHASE_MS: Metric = Metric {
    label: "phase (ms)",
    better: Better::Lower,
    read: |r| field(r, "/phase_ms"),
    decimals: 0,
};
const UPDATES_PER_S: Metric = Metric {
    label: "updates/s to every handler",
    better: Better::Higher,
    read: |r| {
        let ms = field(r, "/phase_ms")?;
        Some(field(r, "/updates")? / (ms / 1e3))
    },
    decimals: 0,
};
const CPU_US_PER_EVENT: Metric = Metric {
    label: "CPU per handler call (µs)",
    better: Better::Lower,
    read: |r| Some(field(r, "/phase_cpu_ms")? * 1e3 / field(r, "/latency_us/samples")?.max(1.0)),
    decimals: 2,
};
const P50_MS: Metric = Metric {
    label: "p50 latency (ms)",
    better: Better::Lower,
    read: |r| field(r, "/latency_us/p50").map(|us| us / 1e3),
    decimals: 1,
};
const P99_MS: Metric = Metric {
    label: "p99 latency (ms)",
    better: Better::Lower,
    read: |r| field(r, "/latency_us/p99").map(|us| us / 1e3),
    decimals: 1,
};
const P999_MS: Metric = Metric {
    label: "p99.9 latency (ms)",
    better: Better::Lower,
    read: |r| field(r, "/latency_us/p999").map(|us| us / 1e3),
    decimals: 1,
};
const SLOW_P99_MS: Metric = Metric {
    label: "slow handler p99 (ms)",
    better: Better::Lower,
    read: |r| field(r, "/slow_latency_us/p99").map(|us| us / 1e3),
    decimals: 0,
};
const RELIST_PEAK_OVER_STEADY: Metric = Metric {
    label: "relist peak / steady RSS",
    better: Better::Lower,
    read: |r| Some(field(r, "/relist_peak_rss_kib")? / field(r, "/steady_rss_kib")?),
    decimals: 2,
};
const RELIST_UPDATES: Metric = Metric {
    label: "updates seen",
    better: Better::Higher,
    read: |r| field(r, "/relist_updates"),
    decimals: 0,
};
const RELIST_DELETES: Metric = Metric {
    label: "deletes seen",
    better: Better::Higher,
    read: |r| field(r, "/relist_deletes"),
    decimals: 0,
};
const READS_PER_S: Metric = Metric {
    label: "index reads/s",
    better: Better::Higher,
    read: |r| field(r, "/reads_per_s"),
    decimals: 0,
};

/// Where a scenario's server comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// The fake API server seeded with this many objects of the scenario's resource.
    Fake,
    /// The e2e control plane (kube-apiserver + etcd).
    Real,
}

#[derive(Debug, Clone)]
struct Scenario {
    name: &'static str,
    title: &'static str,
    what: &'static str,
    resource: &'static str,
    server: Server,
    seeded: usize,
    /// Whether each run needs a server of its own (runs change what the next would see).
    fresh_server_per_run: bool,
    /// A peer still running after this long is stopped and reported as not finishing.
    time_limit: Duration,
    peer_args: Vec<String>,
    cases: Vec<Case>,
    /// The first is the headline: it gets the ratio columns and the chart bar.
    metrics: Vec<Metric>,
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

fn scenarios(sizes: Sizes) -> Vec<Scenario> {
    let sync_metrics = vec![SYNC_MS, CPU_MS, PEAK_MIB, STEADY_MIB, KIB_PER_OBJECT];
    let n = sizes.objects;
    let memory_cases = Peer::ALL
        .iter()
        .flat_map(|&peer| {
            let modes: &[&'static str] = if peer == Peer::Kinformer {
                &["full", "stripped", "metadata", "projection"]
            } else {
                &["full", "stripped", "metadata"]
            };
            modes.iter().map(move |&mode| Case::new(peer, mode))
        })
        .collect();
    let lookup_cases = Peer::ALL
        .iter()
        .flat_map(|&peer| {
            [0usize, 2, 8].into_iter().map(move |readers| {
                Case::new(peer, "json").with(
                    &args(&[("readers", readers.to_string())]),
                    &format!("{readers} readers"),
                )
            })
        })
        .collect();
    vec![
        Scenario {
            name: "sync-pods",
            title: "1a. Initial sync of Pods",
            what: "One informer, one handler, from start to synced (the handler has every Pod).",
            resource: "pods",
            server: Server::Fake,
            seeded: n,
            fresh_server_per_run: false,
            time_limit: CASE_TIME_LIMIT,
            peer_args: Vec::new(),
            cases: json_cases(true),
            metrics: sync_metrics.clone(),
        },
        Scenario {
            name: "sync-configmaps",
            title: "1b. Initial sync of ConfigMaps",
            what: "The same with small objects, where per-object overheads dominate.",
            resource: "configmaps",
            server: Server::Fake,
            seeded: n,
            fresh_server_per_run: false,
            time_limit: CASE_TIME_LIMIT,
            peer_args: Vec::new(),
            cases: json_cases(false),
            metrics: sync_metrics.clone(),
        },
        Scenario {
            name: "watch",
            title: "2. Steady watch",
            what: "Three handlers; after sync the server updates Pods as fast as it can. \
                   Latency is from the server storing the update to a handler seeing it.",
            resource: "pods",
            server: Server::Fake,
            seeded: n,
            fresh_server_per_run: false,
            time_limit: CASE_TIME_LIMIT,
            peer_args: args(&[
                ("count", sizes.watch_updates.to_string()),
                ("rate", "0".into()),
            ]),
            cases: json_cases(true),
            metrics: vec![UPDATES_PER_S, CPU_US_PER_EVENT, P50_MS, P99_MS, P999_MS],
        },
        Scenario {
            name: "fanout",
            title: "3. Fan-out to ten handlers, one of them slow",
            what: "Ten handlers, the first sleeping 1 ms per call, while the server updates \
                   Pods at a fixed rate: the latency of the nine fast ones.",
            resource: "pods",
            server: Server::Fake,
            seeded: sizes.fanout_objects,
            fresh_server_per_run: false,
            time_limit: CASE_TIME_LIMIT,
            peer_args: args(&[
                ("count", sizes.fanout_updates.to_string()),
                ("rate", sizes.fanout_rate.to_string()),
            ]),
            cases: json_cases(false),
            metrics: vec![P99_MS, P50_MS, P999_MS, SLOW_P99_MS],
        },
        Scenario {
            name: "relist",
            title: "4. Relist after 410 Gone",
            what: "After sync the server closes the watch, changes 10% of the Pods (half \
                   updated, half deleted) and compacts, so the informer must relist and \
                   deliver the differences.",
            resource: "pods",
            server: Server::Fake,
            seeded: n,
            fresh_server_per_run: true,
            time_limit: CASE_TIME_LIMIT,
            peer_args: args(&[("fraction", "0.1".into())]),
            cases: json_cases(false),
            metrics: vec![
                RELIST_PEAK_OVER_STEADY,
                PHASE_MS,
                STEADY_MIB,
                RELIST_UPDATES,
                RELIST_DELETES,
            ],
        },
        Scenario {
            name: "lookups",
            title: "5. Index lookups under writes",
            what: "Reader threads look Pods up by namespace and by the app label (kube-runtime \
                   has no index: a scan of its store) while the server updates 5,000 Pods a \
                   second; the write p99 is the update latency.",
            resource: "pods",
            server: Server::Fake,
            seeded: sizes.lookup_objects,
            fresh_server_per_run: false,
            time_limit: Duration::from_secs(120),
            peer_args: args(&[
                ("count", sizes.lookup_updates.to_string()),
                ("rate", LOOKUP_WRITE_RATE.to_string()),
            ]),
            cases: lookup_cases,
            metrics: vec![READS_PER_S, P99_MS],
        },
        Scenario {
            name: "memory",
            title: "6. Memory per Pod",
            what: "Full objects, managedFields stripped before caching (each peer's own way; \
                   kinformer skips them on the wire), metadata only, and kinformer with a slim \
                   projection type (identity, labels, node, phase, container images). kinformer \
                   lists in protobuf, its default; the others in JSON.",
            resource: "pods",
            server: Server::Fake,
            seeded: n,
            fresh_server_per_run: false,
            time_limit: CASE_TIME_LIMIT,
            peer_args: Vec::new(),
            cases: memory_cases,
            metrics: vec![KIB_PER_OBJECT, STEADY_MIB, PEAK_MIB, SYNC_MS],
        },
        Scenario {
            name: "sync-real",
            title: "7. Initial sync from a real kube-apiserver",
            what: "Pods seeded into the e2e control plane (kube-apiserver v1.37 + etcd); the \
                   row where client-go can get protobuf.",
            resource: "pods",
            server: Server::Real,
            seeded: sizes.real_objects,
            fresh_server_per_run: false,
            time_limit: CASE_TIME_LIMIT,
            peer_args: Vec::new(),
            cases: json_cases(true),
            metrics: sync_metrics,
        },
    ]
}

#[derive(Debug)]
struct Options {
    quick: bool,
    scenarios: Vec<String>,
    runs: Option<usize>,
    /// Rewrite the report from saved results instead of running anything.
    report_from: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        quick: false,
        scenarios: Vec::new(),
        runs: None,
        report_from: None,
    };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--quick" => options.quick = true,
            "--scenario" => options
                .scenarios
                .push(iter.next().ok_or("--scenario needs a name")?.to_owned()),
            "--runs" => {
                options.runs = Some(
                    iter.next()
                        .ok_or("--runs needs a number")?
                        .parse()
                        .map_err(|err| format!("--runs: {err}"))?,
                );
            }
            "--report" => {
                options.report_from = Some(PathBuf::from(
                    iter.next().ok_or("--report needs a results file")?,
                ));
            }
            other => return Err(format!("unknown bench flag {other:?}")),
        }
    }
    Ok(options)
}

/// The peer programs, built.
#[derive(Debug)]
struct Programs {
    kinformer: PathBuf,
    kube_runtime: PathBuf,
    client_go: PathBuf,
    fake: PathBuf,
    decode_floor: PathBuf,
    seed: PathBuf,
}

impl Programs {
    fn peer(&self, peer: Peer) -> &Path {
        match peer {
            Peer::Kinformer => &self.kinformer,
            Peer::KubeRuntime => &self.kube_runtime,
            Peer::ClientGo => &self.client_go,
        }
    }
}

fn build(quick: bool) -> Result<Programs, String> {
    let root = project_root();
    let target = crate::bench::target_dir(&root);
    let mut cargo = crate::cargo();
    cargo.args(["build", "--locked", "-p", "kinformer-bench-peers"]);
    if !quick {
        cargo.arg("--release");
    }
    crate::run(cargo)?;
    let bin = target.join(if quick { "debug" } else { "release" });

    let go_out = target.join("bench-peers").join("client-go-bench-peer");
    let mut go = Command::new("go");
    go.current_dir(root.join("xtask/peers/client-go"))
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .args(["build", "-mod=readonly", "-trimpath", "-o"])
        .arg(&go_out)
        .arg("./cmd/bench-peer");
    crate::run(go)?;
    Ok(Programs {
        kinformer: bin.join("kinformer-peer"),
        kube_runtime: bin.join("kube-runtime-peer"),
        client_go: go_out,
        fake: bin.join("kinformer-fake-apiserver"),
        decode_floor: bin.join("decode-floor"),
        seed: bin.join("seed-pods"),
    })
}

/// A running fake API server, killed on drop.
struct FakeServer {
    child: Child,
    addr: String,
    kubeconfig: PathBuf,
}

impl FakeServer {
    fn start(program: &Path, dir: &Path, resource: &str, objects: usize) -> Result<Self, String> {
        let kubeconfig = dir.join("fake-kubeconfig");
        let mut child = Command::new(program)
            .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--seed", &format!("{resource}={objects}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| format!("starting {}: {err}", program.display()))?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut addr = String::new();
        stdout
            .read_line(&mut addr)
            .map_err(|err| format!("reading the fake's address: {err}"))?;
        let addr = addr.trim().to_owned();
        // The fake listens before it has seeded; it says "serving" on stderr once it has.
        let mut stderr = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut line = String::new();
        loop {
            line.clear();
            let read = stderr
                .read_line(&mut line)
                .map_err(|err| format!("reading the fake's stderr: {err}"))?;
            if read == 0 {
                let _ = child.kill();
                return Err(format!("the fake API server exited while seeding ({addr})"));
            }
            if line.starts_with("serving") {
                break;
            }
        }
        // Keep draining both pipes so the server never blocks on a full one.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Ok(Self {
            child,
            addr,
            kubeconfig,
        })
    }

    fn get(&self, path: &str) -> Result<Value, String> {
        http_get_json(&self.addr, path)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET on loopback, answering the JSON body.
fn http_get_json(addr: &str, path: &str) -> Result<Value, String> {
    let mut stream =
        TcpStream::connect(addr).map_err(|err| format!("connecting to {addr}: {err}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|err| err.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n\r\n"
    )
    .map_err(|err| format!("GET {path}: {err}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|err| format!("GET {path}: {err}"))?;
    let (head, body) = split_http_response(&raw).ok_or_else(|| format!("GET {path}: no header"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "GET {path}: {}",
            head.lines().next().unwrap_or_default()
        ));
    }
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body).ok_or_else(|| format!("GET {path}: malformed chunked body"))?
    } else {
        body.to_vec()
    };
    serde_json::from_slice(&body).map_err(|err| format!("GET {path}: {err}"))
}

fn split_http_response(raw: &[u8]) -> Option<(String, &[u8])> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some((
        String::from_utf8_lossy(&raw[..end]).into_owned(),
        &raw[end + 4..],
    ))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

/// One peer run's outcome, checked against the server.
#[derive(Debug, Clone)]
struct Run {
    result: Value,
    /// `Content-Type`s the server (fake) or the peer's transport (client-go) counted.
    content_types: String,
}

/// The server one case runs against.
#[derive(Clone, Copy)]
enum Target<'a> {
    Fake(&'a FakeServer),
    Real(&'a Path),
}

/// Runs one case and checks its handlers' view against the server's objects.
fn run_case(
    programs: &Programs,
    scenario: &Scenario,
    case: &Case,
    target: Target<'_>,
) -> Result<Run, String> {
    let kubeconfig = match target {
        Target::Fake(fake) => fake.kubeconfig.clone(),
        Target::Real(kubeconfig) => kubeconfig.to_path_buf(),
    };
    // A shared server counts for every run; this run's share is the difference.
    let content_types_before = match target {
        Target::Fake(fake) => fake.get("/admin/content-types")?,
        Target::Real(_) => Value::Null,
    };
    let scenario_arg = if scenario.server == Server::Real {
        "sync-real"
    } else {
        scenario.name
    };
    let mut command = Command::new(programs.peer(case.peer));
    command
        .args(["--scenario", scenario_arg, "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--n", &scenario.seeded.to_string(), "--mode", case.mode])
        .args(&scenario.peer_args)
        .args(&case.extra)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    if scenario.name == "memory" && case.peer != Peer::ClientGo {
        // The Rust peers run on mimalloc, which keeps freed pages until the freeing thread
        // allocates again; an idle informer never does. Returning them at once makes steady
        // RSS what is live, as glibc and Go's scavenger leave it.
        command.env("MIMALLOC_PURGE_DELAY", "0");
    }
    let started = Instant::now();
    let output = match run_with_limit(command, scenario.time_limit) {
        Ok(output) => output,
        Err(why) => return Ok(Run::did_not_finish(&why)),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        eprintln!("{}", tail(&stderr, 30));
        return Ok(Run::did_not_finish(&format!(
            "exited with {} after {:.0} s: {}",
            output.status,
            started.elapsed().as_secs_f64(),
            tail(&stderr, 1)
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .ok_or_else(|| format!("{} printed no result line", case.label))?;
    let mut result: Value = serde_json::from_str(last)
        .map_err(|err| format!("{}: result line is not JSON ({err}): {last}", case.label))?;
    // Throughput is over the updates the harness asked for, not what the peer says it saw.
    if let Some(count) = flag_value(&scenario.peer_args, "--count") {
        result["updates"] = Value::from(count);
    }
    if let Some(why) = result.get("unsupported") {
        return Ok(Run {
            result: serde_json::json!({ "unsupported": why }),
            content_types: String::new(),
        });
    }
    if result.get("views_agree") != Some(&Value::Bool(true)) {
        return Err(format!(
            "{}: its handlers' views disagree: {last}",
            case.label
        ));
    }
    let content_types = match target {
        Target::Fake(fake) => {
            let server = fake_server_checksum(fake, scenario.resource)?;
            let peer = result.get("checksum").and_then(Value::as_str);
            if peer != Some(server.as_str()) {
                return Err(format!(
                    "{} {}: checksum {peer:?} but the server has {server}: {last}",
                    case.label, scenario.name
                ));
            }
            describe_content_types(&count_difference(
                &fake.get("/admin/content-types")?,
                &content_types_before,
            ))
        }
        Target::Real(_) => {
            let objects = result.get("objects").and_then(Value::as_u64);
            if objects != Some(scenario.seeded as u64) {
                return Err(format!(
                    "{}: {objects:?} objects but {} were seeded",
                    case.label, scenario.seeded
                ));
            }
            result
                .get("content_types")
                .map(describe_content_types)
                .unwrap_or_else(|| {
                    let asked = if case.mode == "protobuf" {
                        "protobuf first"
                    } else {
                        "JSON"
                    };
                    format!("not counted on a real server; asked for {asked}")
                })
        }
    };
    Ok(Run {
        result,
        content_types,
    })
}

/// Runs `command` to completion, or kills it once `limit` has passed.
fn run_with_limit(mut command: Command, limit: Duration) -> Result<std::process::Output, String> {
    let mut child = command
        .spawn()
        .map_err(|err| format!("could not start: {err}"))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(pipe) = stdout.as_mut() {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(pipe) = stderr.as_mut() {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "still running after {} s, stopped",
                    limit.as_secs()
                ));
            }
            Err(err) => return Err(format!("waiting for it: {err}")),
        }
    };
    Ok(std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

fn flag_value(args: &[String], flag: &str) -> Option<u64> {
    let at = args.iter().position(|arg| arg == flag)?;
    args.get(at + 1)?.parse().ok()
}

fn fake_server_checksum(fake: &FakeServer, resource: &str) -> Result<String, String> {
    let answer = fake.get(&format!("/admin/bench/checksum?resource={resource}"))?;
    answer
        .get("checksum")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("the checksum endpoint answered {answer}"))
}

/// `after - before` for every key of `after` that grew.
fn count_difference(after: &Value, before: &Value) -> Value {
    let mut grown = serde_json::Map::new();
    if let Some(after) = after.as_object() {
        for (key, count) in after {
            let old = before.get(key).and_then(Value::as_u64).unwrap_or(0);
            let new = count.as_u64().unwrap_or(0);
            if new > old {
                grown.insert(key.clone(), Value::from(new - old));
            }
        }
    }
    Value::Object(grown)
}

fn describe_content_types(counts: &Value) -> String {
    counts
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(kind, count)| format!("{kind} ×{count}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Run {
    /// A run that produced no result: it failed or ran out of time.
    fn did_not_finish(why: &str) -> Self {
        Self {
            result: serde_json::json!({ "did_not_finish": why }),
            content_types: String::new(),
        }
    }

    fn failure(&self) -> Option<&str> {
        self.result.get("did_not_finish").and_then(Value::as_str)
    }
}

/// Median, min and max of some figures.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Summary {
    median: f64,
    min: f64,
    max: f64,
}

fn summarize(values: &[f64]) -> Option<Summary> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if !sorted.len().is_multiple_of(2) {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    };
    Some(Summary {
        median,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
    })
}

/// kinformer's advantage over `other` on `metric`: above 1 means kinformer is better.
fn advantage(metric: &Metric, kinformer: f64, other: f64) -> f64 {
    match metric.better {
        Better::Lower => other / kinformer,
        Better::Higher => kinformer / other,
    }
}

fn format_figure(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    // Thousands separators for the big integers: 100000 reads worse than 100,000.
    if decimals == 0 && value.abs() >= 10_000.0 {
        let digits: Vec<char> = text.trim_start_matches('-').chars().collect();
        let mut out = String::new();
        for (i, c) in digits.iter().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(*c);
        }
        if value < 0.0 {
            out.insert(0, '-');
        }
        out
    } else {
        text
    }
}

fn format_ratio(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.0}x")
    } else {
        format!("{ratio:.2}x")
    }
}

/// The results of one scenario, case by case, run by run.
#[derive(Debug, Clone)]
struct ScenarioResults {
    scenario: Scenario,
    runs: Vec<Vec<Run>>,
    /// How the server was prepared (seeding time of the real one, which is not in any figure).
    preparation: String,
}

impl ScenarioResults {
    fn summary(&self, case: usize, metric: &Metric) -> Option<Summary> {
        let values: Vec<f64> = self.runs[case]
            .iter()
            .filter_map(|run| (metric.read)(&run.result))
            .collect();
        summarize(&values)
    }

    /// The kinformer case that `case` is compared with: the same extra arguments (readers).
    /// The kinformer case to compare `case` with: the one in the same mode, else (outside
    /// `memory`, where modes are object shapes) the first with the same extra arguments.
    fn kinformer_counterpart(&self, case: usize) -> Option<usize> {
        let this = &self.scenario.cases[case];
        let cases = &self.scenario.cases;
        let comparable = |c: &Case| c.peer == Peer::Kinformer && c.extra == this.extra;
        cases
            .iter()
            .position(|c| comparable(c) && c.mode == this.mode)
            .or_else(|| {
                (self.scenario.name != "memory")
                    .then(|| cases.iter().position(comparable))
                    .flatten()
            })
    }

    /// kinformer's median advantage over `case` on the headline metric.
    fn headline_advantage(&self, case: usize) -> Option<f64> {
        let metric = self.scenario.metrics.first()?;
        let kinformer = self.kinformer_counterpart(case)?;
        Some(advantage(
            metric,
            self.summary(kinformer, metric)?.median,
            self.summary(case, metric)?.median,
        ))
    }

    fn table(&self) -> String {
        let scenario = &self.scenario;
        let mut out = String::new();
        let _ = write!(out, "| implementation |");
        for metric in &scenario.metrics {
            let _ = write!(out, " {} |", metric.label);
        }
        let _ = writeln!(out, " kinformer's advantage | served as |");
        let _ = write!(out, "| --- |");
        for _ in &scenario.metrics {
            let _ = write!(out, " ---: |");
        }
        let _ = writeln!(out, " ---: | --- |");
        for (index, case) in scenario.cases.iter().enumerate() {
            let _ = write!(out, "| {} |", case.label);
            if let Some(why) = self.runs[index].iter().find_map(Run::failure) {
                let _ = writeln!(out, " **did not finish**: {why} |");
                continue;
            }
            if let Some(why) = self.runs[index]
                .first()
                .and_then(|run| run.result.get("unsupported"))
            {
                let _ = writeln!(out, " unsupported: {} |", why.as_str().unwrap_or_default());
                continue;
            }
            for metric in &scenario.metrics {
                match self.summary(index, metric) {
                    Some(s) if self.runs[index].len() > 1 => {
                        let _ = write!(
                            out,
                            " {} ({}–{}) |",
                            format_figure(s.median, metric.decimals),
                            format_figure(s.min, metric.decimals),
                            format_figure(s.max, metric.decimals)
                        );
                    }
                    Some(s) => {
                        let _ = write!(out, " {} |", format_figure(s.median, metric.decimals));
                    }
                    None => {
                        let _ = write!(out, " – |");
                    }
                }
            }
            let advantage = match (case.peer, self.headline_advantage(index)) {
                (Peer::Kinformer, _) => "–".to_owned(),
                (_, Some(ratio)) if ratio.is_finite() && ratio > 0.0 => format_ratio(ratio),
                (_, _) => "–".to_owned(),
            };
            let served = self.runs[index]
                .first()
                .map(|run| run.content_types.clone())
                .unwrap_or_default();
            let _ = writeln!(out, " {advantage} | {served} |");
        }
        out
    }
}

/// Runs every case `runs` times, alternating peers (A B C A B C ...).
fn run_scenario(
    programs: &Programs,
    scenario: &Scenario,
    runs: usize,
    work: &Path,
    strict: bool,
) -> Result<ScenarioResults, String> {
    let mut plane = None;
    let mut preparation = format!(
        "the fake API server seeded with {} {}{}",
        format_figure(scenario.seeded as f64, 0),
        scenario.resource,
        if scenario.fresh_server_per_run {
            ", afresh for every run"
        } else {
            ", one server for all runs"
        }
    );
    if scenario.server == Server::Real {
        let binaries = controlplane::ensure_binaries()?;
        let dir = work.join("control-plane");
        let started = controlplane::ControlPlane::start(
            &binaries,
            &controlplane::Options::default(),
            &dir,
            false,
        )?;
        let seeding = Instant::now();
        let mut seed = Command::new(&programs.seed);
        seed.arg("--kubeconfig")
            .arg(&started.kubeconfig)
            .args(["--n", &scenario.seeded.to_string()]);
        crate::run(seed)?;
        preparation = format!(
            "kube-apiserver {} + etcd on loopback, seeded once with {} Pods in {:.1} s (not \
             in any figure)",
            controlplane::KUBERNETES_VERSION,
            format_figure(scenario.seeded as f64, 0),
            seeding.elapsed().as_secs_f64()
        );
        plane = Some(started);
    }
    // Seeding 100k Pods costs the fake longer than most runs, so runs share one server unless
    // a run leaves it in a state the next run would not start from fairly (relist deletes 5%).
    let shared = (scenario.server == Server::Fake && !scenario.fresh_server_per_run)
        .then(|| FakeServer::start(&programs.fake, work, scenario.resource, scenario.seeded))
        .transpose()?;
    let mut results = vec![Vec::new(); scenario.cases.len()];
    for run in 0..runs {
        for (index, case) in scenario.cases.iter().enumerate() {
            // A case that failed once is not run again: it would only fail slowly again.
            if results[index]
                .iter()
                .any(|run: &Run| run.failure().is_some())
            {
                continue;
            }
            eprintln!(
                "bench: {} run {}/{runs}: {}",
                scenario.name,
                run + 1,
                case.label
            );
            let fresh = (scenario.server == Server::Fake && shared.is_none())
                .then(|| {
                    FakeServer::start(&programs.fake, work, scenario.resource, scenario.seeded)
                })
                .transpose()?;
            let target = match (&plane, &shared, &fresh) {
                (Some(plane), _, _) => Target::Real(&plane.kubeconfig),
                (None, Some(fake), _) | (None, None, Some(fake)) => Target::Fake(fake),
                (None, None, None) => unreachable!("every fake scenario has a server"),
            };
            let outcome = run_case(programs, scenario, case, target)?;
            if let Some(why) = outcome.failure() {
                if strict {
                    return Err(format!("{} {}: {why}", case.label, scenario.name));
                }
                eprintln!(
                    "bench: {} {} did not finish: {why}",
                    case.label, scenario.name
                );
            }
            results[index].push(outcome);
        }
    }
    Ok(ScenarioResults {
        scenario: scenario.clone(),
        runs: results,
        preparation,
    })
}

/// The faster of the protobuf decode floor's one-thread and all-thread times.
fn protobuf_floor_ms(floor: &Value) -> Option<f64> {
    let single = field(floor, "/protobuf_single_ms")?;
    let parallel = field(floor, "/protobuf_parallel_ms").unwrap_or(single);
    Some(single.min(parallel))
}

/// The decode floor: the Pod list bytes decoded with no informer at all.
fn decode_floor(programs: &Programs, objects: usize, work: &Path) -> Result<Value, String> {
    let fake = FakeServer::start(&programs.fake, work, "pods", objects)?;
    let output = Command::new(&programs.decode_floor)
        .arg("--kubeconfig")
        .arg(&fake.kubeconfig)
        .output()
        .map_err(|err| format!("running decode-floor: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "decode-floor failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).map_err(|err| format!("decode-floor printed {last:?}: {err}"))
}

/// The headline bars of the chart: (scenario, other implementation, kinformer's advantage).
fn chart_bars(results: &[ScenarioResults]) -> Vec<(String, String, f64)> {
    let mut bars = Vec::new();
    for scenario in results {
        for (index, case) in scenario.scenario.cases.iter().enumerate() {
            if case.peer == Peer::Kinformer {
                continue;
            }
            if let Some(ratio) = scenario
                .headline_advantage(index)
                .filter(|ratio| ratio.is_finite() && *ratio > 0.0)
            {
                bars.push((scenario.scenario.name.to_owned(), case.label.clone(), ratio));
            }
        }
    }
    bars
}

/// A horizontal bar chart of kinformer's advantage, log scale, 1x marked.
fn chart_svg(bars: &[(String, String, f64)]) -> String {
    const ROW: f64 = 22.0;
    const LEFT: f64 = 330.0;
    const WIDTH: f64 = 420.0;
    // Log scale from 1/16x to 64x: losses are as visible as wins.
    let (low, high) = (-4.0f64, 6.0f64);
    let x = |ratio: f64| LEFT + (ratio.log2().clamp(low, high) - low) / (high - low) * WIDTH;
    let height = 60.0 + ROW * bars.len() as f64;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="12">"#,
        w = LEFT + WIDTH + 80.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="10" y="18" font-size="14">kinformer's advantage on each scenario's headline figure (log scale; right of 1x = kinformer better)</text>"#
    );
    for tick in [-4i32, -2, 0, 2, 4, 6] {
        let tx = x(2f64.powi(tick));
        let label = if tick >= 0 {
            format!("{}x", 1u32 << tick)
        } else {
            format!("1/{}x", 1u32 << -tick)
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{tx}" y1="30" x2="{tx}" y2="{y2}" stroke="{color}"/><text x="{tx}" y="{ty}" text-anchor="middle" fill="#555">{label}</text>"##,
            y2 = height - 20.0,
            color = if tick == 0 { "#000" } else { "#ddd" },
            ty = height - 6.0
        );
    }
    for (row, (scenario, other, ratio)) in bars.iter().enumerate() {
        let y = 34.0 + ROW * row as f64;
        let (from, to) = (x(1.0), x(*ratio));
        let (start, width) = if to >= from {
            (from, to - from)
        } else {
            (to, from - to)
        };
        let color = if *ratio >= 1.0 { "#2b8a3e" } else { "#c92a2a" };
        let _ = writeln!(
            svg,
            r##"<text x="{lx}" y="{ty}" text-anchor="end">{scenario} vs {other}</text><rect x="{start}" y="{y}" width="{width}" height="{h}" fill="{color}"/><text x="{vx}" y="{ty}">{value}</text>"##,
            lx = LEFT - 8.0,
            ty = y + 13.0,
            h = ROW - 6.0,
            vx = x(*ratio).max(from) + 6.0,
            value = format_ratio(*ratio),
            other = other.replace('&', "&amp;")
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn versions() -> String {
    let lock = fs::read_to_string(project_root().join("Cargo.lock")).unwrap_or_default();
    let version_of = |name: &str| {
        let needle = format!("name = \"{name}\"\nversion = \"");
        lock.find(&needle)
            .map(|at| {
                let rest = &lock[at + needle.len()..];
                rest[..rest.find('"').unwrap_or(0)].to_owned()
            })
            .unwrap_or_else(|| "?".into())
    };
    let go_mod =
        fs::read_to_string(project_root().join("xtask/peers/client-go/go.mod")).unwrap_or_default();
    let client_go = go_mod
        .lines()
        .find_map(|line| line.trim().strip_prefix("k8s.io/client-go "))
        .unwrap_or("?")
        .to_owned();
    format!(
        "kinformer {}, kube-runtime {}, kube-client {}, k8s-openapi {}, client-go {client_go}, {}",
        version_of("kinformer"),
        version_of("kube-runtime"),
        version_of("kube-client"),
        version_of("k8s-openapi"),
        crate::bench::go_version(&project_root().join("xtask/peers/client-go"))
    )
}

/// When and where a run happened, kept with its results so a rewritten report keeps them.
#[derive(Debug, Clone)]
struct Header {
    date: String,
    machine: String,
    versions: String,
}

impl Header {
    fn now() -> Self {
        Self {
            date: crate::bench::today(),
            machine: crate::bench::machine(),
            versions: versions(),
        }
    }
}

fn report(
    results: &[ScenarioResults],
    floor: Option<&Value>,
    header: &Header,
    sizes: Sizes,
    quick: bool,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Written by `cargo xtask bench{}` on {}. Do not edit by hand: the prose comes from \
         `xtask/src/benchsuite.rs` and `docs/bench-sections/*.md`.\n",
        if quick { " --quick" } else { "" },
        header.date
    );
    let _ = writeln!(
        out,
        "**Machine:** {}. **Versions:** {}.\n",
        header.machine, header.versions
    );
    let _ = writeln!(
        out,
        "**Method.** Each implementation runs as its own process against the same server: \
         kinformer-testing's fake API server (JSON or protobuf over HTTP on loopback; one \
         seeded server per scenario, a fresh one per run for the relist), or a real \
         kube-apiserver for scenario 7. Implementations alternate (A B C A B C ...), {runs} \
         run{s} each unless the notes below say otherwise; cells are the median with min–max \
         over a case's runs. Every run's final \
         handler view was checked against the server's objects by checksum (see \
         [the protocol](../xtask/peers/BENCH-PROTOCOL.md)); a run that disagreed would have \
         failed the command. \"kinformer's advantage\" is the other implementation's figure \
         over kinformer's on the first column (inverted where higher is better): above 1x \
         kinformer is better, below 1x it loses. The machine's other load skews every \
         process alike; distrust differences under about 20%.\n",
        runs = sizes.runs,
        s = if sizes.runs == 1 { "" } else { "s" }
    );
    let _ = writeln!(out, "![kinformer's advantage](bench-chart.svg)\n");
    let notes = fs::read_to_string(project_root().join("docs/bench-sections/informer-notes.md"))
        .unwrap_or_default();
    if !notes.trim().is_empty() && !quick {
        let _ = writeln!(out, "{}\n", notes.trim());
    }
    for result in results {
        let scenario = &result.scenario;
        let _ = writeln!(out, "## {}\n", scenario.title);
        let _ = writeln!(
            out,
            "{} Server: {}. `--scenario {}`.\n",
            scenario.what, result.preparation, scenario.name
        );
        let _ = writeln!(out, "{}", result.table());
        if scenario.name == "sync-pods"
            && let Some(floor) = floor
        {
            let position = |label: &str| scenario.cases.iter().position(|c| c.label == label);
            let ratio_to = |label: &str, floor_ms: Option<f64>| {
                position(label)
                    .and_then(|case| result.summary(case, &SYNC_MS))
                    .zip(floor_ms)
                    .map(|(sync, floor_ms)| format!("{:.2}x", sync.median / floor_ms))
                    .unwrap_or_else(|| "–".into())
            };
            let _ = writeln!(
                out,
                "**Decode floor** (scenario 8): the same {} Pods' list pages, fetched once and \
                 decoded into k8s-openapi `Pod`s with no informer. JSON ({} MiB, serde_json): \
                 {} ms on one thread, {} ms on {} threads; kinformer's JSON sync above is {} of \
                 the one-thread floor. Protobuf ({} MiB, kinformer_protobuf): {} ms on one \
                 thread, {} ms on {} threads; kinformer's protobuf sync is {} of the faster.\n",
                format_figure(field(floor, "/objects").unwrap_or(0.0), 0),
                format_figure(field(floor, "/bytes").unwrap_or(0.0) / (1 << 20) as f64, 0),
                format_figure(field(floor, "/single_ms").unwrap_or(0.0), 0),
                format_figure(field(floor, "/parallel_ms").unwrap_or(0.0), 0),
                field(floor, "/threads").unwrap_or(0.0),
                ratio_to("kinformer", field(floor, "/single_ms")),
                format_figure(
                    field(floor, "/protobuf_bytes").unwrap_or(0.0) / (1 << 20) as f64,
                    0
                ),
                format_figure(field(floor, "/protobuf_single_ms").unwrap_or(0.0), 0),
                format_figure(field(floor, "/protobuf_parallel_ms").unwrap_or(0.0), 0),
                field(floor, "/threads").unwrap_or(0.0),
                ratio_to("kinformer (protobuf)", protobuf_floor_ms(floor)),
            );
        }
    }
    let _ = writeln!(out, "## Targets\n");
    let _ = writeln!(out, "{}", targets(results, floor));
    let micro =
        fs::read_to_string(project_root().join("docs/bench-sections/micro.md")).unwrap_or_default();
    if !micro.trim().is_empty() {
        let _ = writeln!(out, "{}", micro.trim());
    }
    out
}

/// The issues' targets, each with the measured ratio and whether it is met.
fn targets(results: &[ScenarioResults], floor: Option<&Value>) -> String {
    struct Target {
        what: &'static str,
        scenario: &'static str,
        metric: Metric,
        kinformer: &'static str,
        other: &'static str,
        /// kinformer / other must be at most (`Lower`) or at least (`Higher`) this.
        bound: f64,
    }
    let target = |what, scenario, metric, kinformer, other, bound| Target {
        what,
        scenario,
        metric,
        kinformer,
        other,
        bound,
    };
    let list = [
        target(
            "sync time <= 0.5x client-go (JSON)",
            "sync-pods",
            SYNC_MS,
            "kinformer",
            "client-go (JSON)",
            0.5,
        ),
        target(
            "sync time <= 0.8x kube-runtime",
            "sync-pods",
            SYNC_MS,
            "kinformer",
            "kube-runtime",
            0.8,
        ),
        target(
            "watch throughput >= 2x client-go (JSON)",
            "watch",
            UPDATES_PER_S,
            "kinformer",
            "client-go (JSON)",
            2.0,
        ),
        target(
            "fan-out p99 <= 0.5x client-go",
            "fanout",
            P99_MS,
            "kinformer",
            "client-go (JSON)",
            0.5,
        ),
        target(
            "index reads >= 2x client-go (8 readers)",
            "lookups",
            READS_PER_S,
            "kinformer 8 readers",
            "client-go (JSON) 8 readers",
            2.0,
        ),
        target(
            "protobuf sync time <= 0.5x client-go on protobuf",
            "sync-pods",
            SYNC_MS,
            "kinformer (protobuf)",
            "client-go (protobuf first)",
            0.5,
        ),
        target(
            "protobuf watch throughput >= 1.3x client-go on protobuf",
            "watch",
            UPDATES_PER_S,
            "kinformer (protobuf)",
            "client-go (protobuf first)",
            1.3,
        ),
        target(
            "memory per Pod, full objects <= 1.0x client-go",
            "memory",
            KIB_PER_OBJECT,
            "kinformer (full)",
            "client-go (full)",
            1.0,
        ),
        target(
            "memory per Pod, managedFields dropped <= 0.5x client-go stripped",
            "memory",
            KIB_PER_OBJECT,
            "kinformer (stripped)",
            "client-go (stripped)",
            0.5,
        ),
        target(
            "memory per Pod, projection <= 0.2x client-go full",
            "memory",
            KIB_PER_OBJECT,
            "kinformer (projection)",
            "client-go (full)",
            0.2,
        ),
    ];
    let mut out = String::from("| target | kinformer / other | met |\n| --- | ---: | --- |\n");
    let met_mark = |met: bool| if met { "yes" } else { "**no**" };
    for target in list {
        let Some(result) = results.iter().find(|r| r.scenario.name == target.scenario) else {
            continue;
        };
        let find = |label: &str| result.scenario.cases.iter().position(|c| c.label == label);
        let ratio = find(target.kinformer)
            .zip(find(target.other))
            .and_then(|(k, o)| {
                Some(
                    result.summary(k, &target.metric)?.median
                        / result.summary(o, &target.metric)?.median,
                )
            });
        let Some(ratio) = ratio else { continue };
        let met = match target.metric.better {
            Better::Lower => ratio <= target.bound,
            Better::Higher => ratio >= target.bound,
        };
        let _ = writeln!(out, "| {} | {ratio:.2}x | {} |", target.what, met_mark(met));
    }
    if let (Some(floor), Some(sync)) = (
        floor,
        results.iter().find(|r| r.scenario.name == "sync-pods"),
    ) && let Some(k) = sync
        .scenario
        .cases
        .iter()
        .position(|c| c.label == "kinformer (protobuf)")
        && let Some(s) = sync.summary(k, &SYNC_MS)
        && let Some(best) = protobuf_floor_ms(floor)
    {
        let ratio = s.median / best;
        let _ = writeln!(
            out,
            "| protobuf sync within 1.3x of the protobuf decode floor (best of 1 and all threads) | {ratio:.2}x | {} |",
            met_mark(ratio <= 1.3)
        );
    }
    if let Some(relist) = results.iter().find(|r| r.scenario.name == "relist")
        && let Some(k) = relist
            .scenario
            .cases
            .iter()
            .position(|c| c.peer == Peer::Kinformer)
        && let Some(s) = relist.summary(k, &RELIST_PEAK_OVER_STEADY)
    {
        let _ = writeln!(
            out,
            "| relist peak over steady <= 1.3x | {:.2}x | {} |",
            s.median,
            if s.median <= 1.3 { "yes" } else { "**no**" }
        );
    }
    out
}

/// Runs `cargo xtask bench` with the informer scenarios.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    let mut sizes = if options.quick { QUICK } else { FULL };
    if let Some(runs) = options.runs {
        sizes.runs = runs.max(1);
    }
    let all = scenarios(sizes);
    for name in &options.scenarios {
        if name != "decode-floor" && !all.iter().any(|s| s.name == name) {
            return Err(format!(
                "unknown scenario {name:?}; known: {}, decode-floor",
                all.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let out_dir = crate::bench::target_dir(&project_root()).join("bench");
    fs::create_dir_all(&out_dir).map_err(|err| format!("creating {}: {err}", out_dir.display()))?;
    let to_docs = !options.quick && options.scenarios.is_empty();
    let saved = match &options.report_from {
        Some(path) => load_results(path)?,
        None => {
            let saved = run_all(&options, sizes, &all, &out_dir)?;
            let path = out_dir.join(if to_docs {
                "results.json"
            } else {
                "quick-results.json"
            });
            fs::write(&path, saved.to_json().to_string())
                .map_err(|err| format!("writing {}: {err}", path.display()))?;
            saved
        }
    };
    let markdown = report(
        &saved.results,
        saved.floor.as_ref(),
        &saved.header,
        saved.sizes,
        saved.quick,
    );
    let svg = chart_svg(&chart_bars(&saved.results));
    let (md_path, svg_path) = if to_docs && !saved.quick {
        let docs = project_root().join("docs");
        (docs.join("benchmarks.md"), docs.join("bench-chart.svg"))
    } else {
        (out_dir.join("quick.md"), out_dir.join("bench-chart.svg"))
    };
    fs::write(&md_path, markdown).map_err(|err| format!("writing {}: {err}", md_path.display()))?;
    fs::write(&svg_path, svg).map_err(|err| format!("writing {}: {err}", svg_path.display()))?;
    eprintln!("bench: wrote {}", md_path.display());
    Ok(())
}

/// Every result of one `cargo xtask bench`, as saved to `target/bench/results.json`.
#[derive(Debug)]
struct Saved {
    header: Header,
    quick: bool,
    sizes: Sizes,
    results: Vec<ScenarioResults>,
    floor: Option<Value>,
}

impl Saved {
    fn to_json(&self) -> Value {
        let scenarios: Vec<Value> = self
            .results
            .iter()
            .map(|result| {
                let runs: Vec<Vec<Value>> = result
                    .runs
                    .iter()
                    .map(|case| {
                        case.iter()
                            .map(|run| {
                                serde_json::json!({
                                    "result": run.result,
                                    "content_types": run.content_types,
                                })
                            })
                            .collect()
                    })
                    .collect();
                serde_json::json!({
                    "name": result.scenario.name,
                    "preparation": result.preparation,
                    "runs": runs,
                })
            })
            .collect();
        serde_json::json!({
            "date": self.header.date,
            "machine": self.header.machine,
            "versions": self.header.versions,
            "quick": self.quick,
            "runs": self.sizes.runs,
            "floor": self.floor,
            "scenarios": scenarios,
        })
    }
}

fn load_results(path: &Path) -> Result<Saved, String> {
    let text =
        fs::read_to_string(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
    let saved: Value =
        serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))?;
    let string = |key: &str| {
        saved
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let quick = saved.get("quick").and_then(Value::as_bool).unwrap_or(false);
    let mut sizes = if quick { QUICK } else { FULL };
    sizes.runs = saved
        .get("runs")
        .and_then(Value::as_u64)
        .map_or(sizes.runs, |runs| runs as usize);
    let all = scenarios(sizes);
    let mut results = Vec::new();
    for entry in saved
        .get("scenarios")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let scenario = all
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| format!("{}: unknown scenario {name:?}", path.display()))?
            .clone();
        let runs: Vec<Vec<Run>> = entry
            .get("runs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|case| {
                case.as_array()
                    .into_iter()
                    .flatten()
                    .map(|run| Run {
                        result: run.get("result").cloned().unwrap_or(Value::Null),
                        content_types: run
                            .get("content_types")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    })
                    .collect()
            })
            .collect();
        if runs.len() != scenario.cases.len() {
            return Err(format!(
                "{}: {name} has {} cases saved but {} now",
                path.display(),
                runs.len(),
                scenario.cases.len()
            ));
        }
        results.push(ScenarioResults {
            scenario,
            runs,
            preparation: entry
                .get("preparation")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        });
    }
    Ok(Saved {
        header: Header {
            date: string("date"),
            machine: string("machine"),
            versions: string("versions"),
        },
        quick,
        sizes,
        results,
        floor: saved.get("floor").cloned().filter(|floor| !floor.is_null()),
    })
}

fn run_all(
    options: &Options,
    sizes: Sizes,
    all: &[Scenario],
    out_dir: &Path,
) -> Result<Saved, String> {
    let chosen =
        |name: &str| options.scenarios.is_empty() || options.scenarios.iter().any(|s| s == name);
    let header = Header::now();
    let programs = build(options.quick)?;
    let work = out_dir.join("work");
    fs::create_dir_all(&work).map_err(|err| format!("creating {}: {err}", work.display()))?;
    let started = Instant::now();
    let mut results = Vec::new();
    for scenario in all.iter().filter(|s| chosen(s.name)) {
        results.push(run_scenario(
            &programs,
            scenario,
            sizes.runs,
            &work,
            options.quick,
        )?);
        // Saved after every scenario, so a run cut short keeps what it measured.
        let partial = Saved {
            header: header.clone(),
            quick: options.quick,
            sizes,
            results: results.clone(),
            floor: None,
        };
        let path = out_dir.join("partial-results.json");
        fs::write(&path, partial.to_json().to_string())
            .map_err(|err| format!("writing {}: {err}", path.display()))?;
    }
    let floor = if chosen("decode-floor") {
        Some(decode_floor(&programs, sizes.objects, &work)?)
    } else {
        None
    };
    eprintln!(
        "bench: {} scenario(s) in {:.0} s; every peer ran and agreed with the server",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(Saved {
        header,
        quick: options.quick,
        sizes,
        results,
        floor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_take_the_median_of_odd_and_even_counts() {
        let odd = summarize(&[3.0, 1.0, 2.0]).expect("values");
        assert_eq!(
            odd,
            Summary {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(
            summarize(&[4.0, 1.0, 3.0, 2.0]).expect("values").median,
            2.5
        );
        assert_eq!(summarize(&[f64::NAN]), None);
    }

    #[test]
    fn advantage_is_above_one_when_kinformer_is_better_either_way() {
        assert_eq!(advantage(&SYNC_MS, 100.0, 250.0), 2.5);
        assert_eq!(advantage(&READS_PER_S, 300.0, 100.0), 3.0);
        assert!(advantage(&SYNC_MS, 200.0, 100.0) < 1.0);
    }

    #[test]
    fn derived_metrics_read_the_protocol_fields() {
        let result = json!({
            "objects": 1000, "steady_rss_kib": 30000.0, "baseline_rss_kib": 10000.0,
            "phase_ms": 2000.0, "phase_cpu_ms": 500.0, "updates": 1000,
            "latency_us": { "p50": 1500.0, "p99": 9000.0, "p999": 20000.0, "samples": 3000 },
        });
        assert_eq!((KIB_PER_OBJECT.read)(&result), Some(20.0));
        assert_eq!((UPDATES_PER_S.read)(&result), Some(500.0));
        assert_eq!((P99_MS.read)(&result), Some(9.0));
        assert!((CPU_US_PER_EVENT.read)(&result).is_some_and(|us| (us - 166.67).abs() < 0.01));
        assert_eq!((READS_PER_S.read)(&result), None);
    }

    #[test]
    fn chunked_bodies_are_reassembled() {
        assert_eq!(
            dechunk(b"4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n").as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        assert_eq!(dechunk(b"zz\r\n"), None);
    }

    #[test]
    fn content_types_of_a_shared_server_count_only_what_the_run_added() {
        let before = json!({ "application/json": 10 });
        let after = json!({ "application/json": 14, "application/vnd.kubernetes.protobuf": 2 });
        assert_eq!(
            count_difference(&after, &before),
            json!({ "application/json": 4, "application/vnd.kubernetes.protobuf": 2 })
        );
    }

    #[test]
    fn saved_results_load_back_into_the_same_report() {
        let scenario = scenarios(QUICK)
            .into_iter()
            .find(|s| s.name == "sync-configmaps")
            .expect("scenario");
        let run = |sync_ms: u64| Run {
            result: json!({ "sync_ms": sync_ms, "objects": 10, "views_agree": true }),
            content_types: "application/json ×1".into(),
        };
        let saved = Saved {
            header: Header {
                date: "2026-11-23 01:00 UTC".into(),
                machine: "2 cores".into(),
                versions: "kinformer 0.1.0".into(),
            },
            quick: true,
            sizes: QUICK,
            results: vec![ScenarioResults {
                runs: vec![vec![run(10)], vec![run(20)], vec![run(40)]],
                scenario,
                preparation: "seeded".into(),
            }],
            floor: Some(json!({ "objects": 10, "single_ms": 5.0 })),
        };
        let dir = std::env::temp_dir().join(format!("kinformer-bench-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("results.json");
        fs::write(&path, saved.to_json().to_string()).expect("written");
        let loaded = load_results(&path).expect("loads");
        let _ = fs::remove_dir_all(&dir);
        let render = |s: &Saved| report(&s.results, s.floor.as_ref(), &s.header, s.sizes, s.quick);
        assert_eq!(render(&loaded), render(&saved));
        assert!(render(&loaded).contains("| kube-runtime | 20 |"));
    }

    #[test]
    fn big_figures_get_thousands_separators() {
        assert_eq!(format_figure(123_456.4, 0), "123,456");
        assert_eq!(format_figure(1_234.5, 0), "1234");
        assert_eq!(format_figure(2.345, 2), "2.35");
    }

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

    #[test]
    fn lookups_compare_kinformer_with_the_same_reader_count() {
        let scenario = scenarios(QUICK)
            .into_iter()
            .find(|s| s.name == "lookups")
            .expect("lookups");
        let results = ScenarioResults {
            runs: vec![Vec::new(); scenario.cases.len()],
            scenario,
            preparation: String::new(),
        };
        for (index, case) in results.scenario.cases.iter().enumerate() {
            let kinformer = results.kinformer_counterpart(index).expect("counterpart");
            assert_eq!(results.scenario.cases[kinformer].extra, case.extra);
        }
    }

    #[test]
    fn the_chart_draws_one_bar_per_comparison_and_marks_losses() {
        let svg = chart_svg(&[
            ("sync-pods".into(), "client-go (JSON)".into(), 2.5),
            ("watch".into(), "kube-runtime".into(), 0.5),
        ]);
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(svg.contains("#c92a2a"), "a loss is drawn red");
        assert!(svg.contains("2.50x") && svg.contains("0.50x"));
    }
}
