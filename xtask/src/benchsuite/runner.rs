//! Running the peers: building them, running one case against a server (with a time limit)
//! and checking what it reports against the server, and a scenario's cases alternately.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use super::{
    fake::{FakeServer, fake_server_checksum},
    report::{ScenarioResults, format_figure},
    scenarios::{ALLOCATOR_ENV, Case, Peer, Scenario, Server, Sizes},
};
use crate::{controlplane, project_root};

/// The peer programs, built.
#[derive(Debug)]
pub(super) struct Programs {
    pub(super) kinformer: PathBuf,
    pub(super) kube_runtime: PathBuf,
    pub(super) client_go: PathBuf,
    pub(super) fake: PathBuf,
    pub(super) decode_floor: PathBuf,
    pub(super) seed: PathBuf,
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

pub(super) fn build(quick: bool) -> Result<Programs, String> {
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

/// One peer run's outcome, checked against the server.
#[derive(Debug, Clone)]
pub(super) struct Run {
    pub(super) result: Value,
    /// `Content-Type`s the server (fake) or the peer's transport (client-go) counted.
    pub(super) content_types: String,
}

/// The e2e control plane seeded with a scenario's Pods, and the bench checksum of the Pods it
/// holds, which nothing changes afterwards.
struct Seeded {
    plane: controlplane::ControlPlane,
    checksum: String,
}

/// The server one case runs against.
#[derive(Clone, Copy)]
enum Target<'a> {
    Fake(&'a FakeServer),
    Real(&'a Seeded),
}

impl<'a> Target<'a> {
    /// The real control plane when there is one, else the shared fake, else a fresh one.
    fn of(
        seeded: Option<&'a Seeded>,
        shared: Option<&'a FakeServer>,
        fresh: Option<&'a FakeServer>,
    ) -> Self {
        match (seeded, shared.or(fresh)) {
            (Some(seeded), _) => Target::Real(seeded),
            (None, Some(fake)) => Target::Fake(fake),
            (None, None) => unreachable!("every fake scenario has a server"),
        }
    }
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
        Target::Real(seeded) => seeded.plane.kubeconfig().to_path_buf(),
    };
    // A shared server counts for every run; this run's share is the difference.
    let content_types_before = match target {
        Target::Fake(fake) => fake.get("/admin/content-types")?,
        Target::Real(_) => Value::Null,
    };
    let command = peer_command(programs, scenario, case, &kubeconfig);
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
    let (mut result, last) = last_json_line(&case.label, &output.stdout)?;
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
    ran_on_its_allocator(case, &result, &last)?;
    if result.get("views_agree") != Some(&Value::Bool(true)) {
        return Err(format!(
            "{}: its handlers' views disagree: {last}",
            case.label
        ));
    }
    let content_types = match target {
        Target::Fake(fake) => {
            agrees_with_the_fake(fake, scenario, case, &result, &last)?;
            describe_content_types(&count_difference(
                &fake.get("/admin/content-types")?,
                &content_types_before,
            ))
        }
        Target::Real(seeded) => agrees_with_the_real_server(scenario, case, &result, seeded)?,
    };
    Ok(Run {
        result,
        content_types,
    })
}

/// The peer of `case` on `scenario`, against the server of `kubeconfig`.
fn peer_command(
    programs: &Programs,
    scenario: &Scenario,
    case: &Case,
    kubeconfig: &Path,
) -> Command {
    let mut command = Command::new(programs.peer(case.peer));
    command
        .args(["--scenario", scenario.peer_scenario, "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--n", &scenario.seeded.to_string(), "--mode", case.mode])
        .args(&scenario.peer_args)
        .args(&case.extra)
        // The allocator is the case's choice alone, never one exported in the harness's shell.
        .env_remove(ALLOCATOR_ENV)
        .envs(case.env.iter().copied())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    if case.peer != Peer::ClientGo {
        on_4k_pages(&mut command);
        if scenario.headline_is_memory() {
            // mimalloc keeps freed pages until the freeing thread allocates again; an idle
            // informer never does. Returning them at once makes steady RSS what is live, as
            // glibc and Go's scavenger leave it: the scenarios whose headline is what a
            // process holds.
            command.env("MIMALLOC_PURGE_DELAY", "0");
        }
    }
    command
}

/// Sets up a Rust program the harness runs (a peer or the decode floor) to fault 4 KiB pages.
///
/// They run on mimalloc, which marks the memory it maps `MADV_HUGEPAGE`. On kernels whose
/// huge-page `defrag` setting is `madvise` (a common default), a first touch of such memory can
/// stall on compaction and zeroes 2 MiB at a time. Go's runtime stopped marking its heap for
/// exactly that reason (golang/go#61718), so the Go peer faults 4 KiB pages there; with this
/// switch every program the harness compares does.
pub(super) fn on_4k_pages(command: &mut Command) -> &mut Command {
    command.env("MIMALLOC_ALLOW_THP", "0")
}

/// The last non-empty line `program` printed, parsed as JSON, and that line as printed: every
/// program of the suite ends its output with its result on one line.
fn last_json_line(program: &str, stdout: &[u8]) -> Result<(Value, String), String> {
    let stdout = String::from_utf8_lossy(stdout);
    let last = stdout
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .ok_or_else(|| format!("{program} printed no result line"))?;
    let result = serde_json::from_str(last)
        .map_err(|err| format!("{program}: result line is not JSON ({err}): {last}"))?;
    Ok((result, last.to_owned()))
}

/// Whether the peer's checksum of its handlers' view is the fake server's own.
fn agrees_with_the_fake(
    fake: &FakeServer,
    scenario: &Scenario,
    case: &Case,
    result: &Value,
    last: &str,
) -> Result<(), String> {
    let server = fake_server_checksum(fake, scenario.resource)?;
    let peer = result.get("checksum").and_then(Value::as_str);
    if peer != Some(server.as_str()) {
        return Err(format!(
            "{} {}: checksum {peer:?} but the server has {server}: {last}",
            case.label, scenario.name
        ));
    }
    Ok(())
}

/// Whether the peer's view is what the real server holds: for a shard, as many objects as the
/// server has in it, filtered by the server; otherwise every seeded object, with the checksum
/// of the server's own list. Answers the content types the peer counted, if it did.
fn agrees_with_the_real_server(
    scenario: &Scenario,
    case: &Case,
    result: &Value,
    seeded: &Seeded,
) -> Result<String, String> {
    let objects = result.get("objects").and_then(Value::as_u64);
    if case.extra.iter().any(|arg| arg == "--shard") {
        // A shard holds what the server has of it, and the server filtered it.
        let on_server = result
            .get("shard_objects_on_server")
            .and_then(Value::as_u64);
        let mode = result.get("shard_mode").and_then(Value::as_str);
        if objects.is_none() || objects != on_server || mode != Some("server") {
            return Err(format!(
                "{}: {objects:?} objects, the server has {on_server:?} in the shard, \
                 filtered by {mode:?}",
                case.label
            ));
        }
    } else if objects != Some(scenario.seeded as u64) {
        return Err(format!(
            "{}: {objects:?} objects but {} were seeded",
            case.label, scenario.seeded
        ));
    } else if result.get("checksum").and_then(Value::as_str) != Some(seeded.checksum.as_str()) {
        return Err(format!(
            "{}: checksum {:?} but the server's list has {}",
            case.label,
            result.get("checksum"),
            seeded.checksum
        ));
    }
    // A peer that counts what it was served must have been served the format it asked for.
    let asked_for_protobuf = asks_for_protobuf(scenario, case);
    if let Some(counts) = result.get("content_types").and_then(Value::as_object) {
        let protobuf = counts.keys().any(|kind| kind.contains("protobuf"));
        if protobuf != asked_for_protobuf {
            return Err(format!(
                "{}: asked for {} but was served {}",
                case.label,
                if asked_for_protobuf {
                    "protobuf"
                } else {
                    "JSON"
                },
                describe_content_types(&Value::Object(counts.clone()))
            ));
        }
    }
    Ok(result
        .get("content_types")
        .map(describe_content_types)
        .unwrap_or_else(|| {
            let asked = if asked_for_protobuf {
                "protobuf first"
            } else {
                "JSON"
            };
            format!("not counted on a real server; asked for {asked}")
        }))
}

/// Whether the peer of `case` asks for protobuf: in a wire-format mode when the mode says so;
/// where modes are object shapes, kinformer asks for it (its default), and so does client-go's
/// metadata client, while the other cases ask for JSON (BENCH-PROTOCOL.md).
fn asks_for_protobuf(scenario: &Scenario, case: &Case) -> bool {
    if scenario.modes_are_shapes() {
        case.peer == Peer::Kinformer || (case.peer == Peer::ClientGo && case.mode == "metadata")
    } else {
        case.mode == "protobuf"
    }
}

/// Whether a Rust peer ran on the allocator its case asked for, as its result says.
fn ran_on_its_allocator(case: &Case, result: &Value, last: &str) -> Result<(), String> {
    if case.peer == Peer::ClientGo {
        return Ok(());
    }
    let asked = case
        .env
        .iter()
        .find(|(name, _)| *name == ALLOCATOR_ENV)
        .map_or("mimalloc", |(_, value)| *value);
    match result.get("allocator").and_then(Value::as_str) {
        Some(ran) if ran == asked => Ok(()),
        ran => Err(format!(
            "{}: asked for the {asked} allocator but ran on {ran:?}: {last}",
            case.label
        )),
    }
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
                // What the peer last said is where it stopped: shown in full, named in the row.
                let stderr = err.join().unwrap_or_default();
                let stderr = String::from_utf8_lossy(&stderr);
                eprintln!("{}", tail(&stderr, 30));
                return Err(format!(
                    "still running after {} s, stopped; it last said: {}",
                    limit.as_secs(),
                    tail(&stderr, 1)
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
    pub(super) fn did_not_finish(why: &str) -> Self {
        Self {
            result: serde_json::json!({ "did_not_finish": why }),
            content_types: String::new(),
        }
    }

    pub(super) fn failure(&self) -> Option<&str> {
        self.result.get("did_not_finish").and_then(Value::as_str)
    }
}

/// The order of a scenario's `cases` in run `run` (0-based): every case once, each after a
/// different case in each run for as many runs as there are other cases to follow (2 with 3
/// cases, 4 with 5, 6 with 9), then again from the first order.
///
/// A fixed order would put one case after the same neighbour every time, and on a VM the
/// process after a large one can pay seconds of kernel time to get memory back (after
/// client-go's peer, a 100k-Pod sync measured 5–9 s of system time against 1 s after a Rust
/// peer): the median would carry that cost into one row.
///
/// An odd number of cases steps through them by each stride coprime to their number in turn,
/// starting one case later each run (A B C D E, then B D A C E, then C A D B E): with stride `s`
/// a case follows the case `s` before it, and no case is always the first. An even number takes the rows of a balanced Latin square (Williams' design:
/// 0 1 n-1 2 n-2 ..., plus the run), in which each case follows every other case once.
pub(super) fn run_order(cases: usize, run: usize) -> Vec<usize> {
    if cases.is_multiple_of(2) {
        let shift = run % cases.max(1);
        return (0..cases)
            .map(|j| {
                let first = match j {
                    0 => 0,
                    j if !j.is_multiple_of(2) => j.div_ceil(2),
                    j => cases - j / 2,
                };
                (first + shift) % cases
            })
            .collect();
    }
    let strides: Vec<usize> = (1..cases.max(2))
        .filter(|&stride| gcd(stride, cases) == 1)
        .collect();
    let stride = strides[run % strides.len()];
    (0..cases).map(|i| (run + i * stride) % cases).collect()
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Runs every case `sizes.runs` times, alternating peers in an order that changes every run
/// (see [`run_order`]); with `sizes.warm_up`, each measured run right after an unmeasured run
/// of the same case.
pub(super) fn run_scenario(
    programs: &Programs,
    scenario: &Scenario,
    sizes: Sizes,
    work: &Path,
    strict: bool,
) -> Result<ScenarioResults, String> {
    let (seeded, preparation) = if scenario.server == Server::Real {
        let (seeded, preparation) = seeded_control_plane(programs, scenario, work)?;
        (Some(seeded), preparation)
    } else {
        (None, fake_preparation(scenario))
    };
    // Seeding 100k Pods costs the fake longer than most runs, so runs share one server unless
    // a run leaves it in a state the next run would not start from fairly (relist deletes 5%).
    let shared = (scenario.server == Server::Fake && !scenario.fresh_server_per_run)
        .then(|| FakeServer::start(&programs.fake, work, scenario.resource, scenario.seeded))
        .transpose()?;
    let mut results = vec![Vec::new(); scenario.cases.len()];
    for run in 0..sizes.runs {
        for index in run_order(scenario.cases.len(), run) {
            let case = &scenario.cases[index];
            // A case that failed once is not run again: it would only fail slowly again.
            if results[index]
                .iter()
                .any(|run: &Run| run.failure().is_some())
            {
                continue;
            }
            eprintln!(
                "bench: {} run {}/{}: {}",
                scenario.name,
                run + 1,
                sizes.runs,
                case.label
            );
            let fresh = || {
                (scenario.server == Server::Fake && shared.is_none())
                    .then(|| {
                        FakeServer::start(&programs.fake, work, scenario.resource, scenario.seeded)
                    })
                    .transpose()
            };
            if sizes.warm_up {
                // What the machine holds after a run (its page cache, the memory its host took
                // back) then comes from this case alone. A scenario that changes its server
                // warms up on a server of its own.
                let warm_server = fresh()?;
                let target = Target::of(seeded.as_ref(), shared.as_ref(), warm_server.as_ref());
                let warm = run_case(programs, scenario, case, target)?;
                if let Some(why) = warm.failure() {
                    eprintln!("bench: {} warm-up did not finish: {why}", case.label);
                }
            }
            let fresh = fresh()?;
            let target = Target::of(seeded.as_ref(), shared.as_ref(), fresh.as_ref());
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

/// How a scenario's fake server is prepared, for the report.
fn fake_preparation(scenario: &Scenario) -> String {
    format!(
        "the fake API server seeded with {} {}{}",
        format_figure(scenario.seeded as f64, 0),
        scenario.resource,
        if scenario.fresh_server_per_run {
            ", afresh for every run"
        } else {
            ", one server for all runs"
        }
    )
}

/// The e2e control plane, started and seeded with the scenario's Pods, and how it was
/// prepared (the seeding time is in no figure, so the report says it).
fn seeded_control_plane(
    programs: &Programs,
    scenario: &Scenario,
    work: &Path,
) -> Result<(Seeded, String), String> {
    let binaries = controlplane::ensure_binaries()?;
    let dir = work.join("control-plane");
    let plane = controlplane::ControlPlane::start(
        &binaries,
        &controlplane::Options::default(),
        &dir,
        false,
    )?;
    let seeding = Instant::now();
    let mut seed = Command::new(&programs.seed);
    seed.arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .args(["--n", &scenario.seeded.to_string()]);
    let output = seed
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|err| format!("running seed-pods: {err}"))?;
    if !output.status.success() {
        return Err(format!("seed-pods exited with {}", output.status));
    }
    let (held, last) = last_json_line("seed-pods", &output.stdout)?;
    if held.get("pods").and_then(Value::as_u64) != Some(scenario.seeded as u64) {
        return Err(format!(
            "the server holds {:?} Pods after seeding {}",
            held.get("pods"),
            scenario.seeded
        ));
    }
    let checksum = held
        .get("checksum")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("seed-pods printed no checksum: {last}"))?
        .to_owned();
    let preparation = format!(
        "kube-apiserver {} + etcd on loopback, seeded once with {} Pods in {:.1} s (not \
         in any figure)",
        controlplane::KUBERNETES_VERSION,
        format_figure(scenario.seeded as f64, 0),
        seeding.elapsed().as_secs_f64()
    );
    Ok((Seeded { plane, checksum }, preparation))
}

/// The decode floor: the Pod list bytes decoded with no informer at all.
pub(super) fn decode_floor(
    programs: &Programs,
    objects: usize,
    work: &Path,
) -> Result<Value, String> {
    let fake = FakeServer::start(&programs.fake, work, "pods", objects)?;
    let output = decode_floor_command(programs, &fake.kubeconfig)
        .output()
        .map_err(|err| format!("running decode-floor: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "decode-floor failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    last_json_line("decode-floor", &output.stdout).map(|(result, _)| result)
}

/// The decode floor against the server of `kubeconfig`.
fn decode_floor_command(programs: &Programs, kubeconfig: &Path) -> Command {
    let mut command = Command::new(&programs.decode_floor);
    on_4k_pages(&mut command)
        .env_remove(ALLOCATOR_ENV)
        .arg("--kubeconfig")
        .arg(kubeconfig);
    command
}

#[cfg(test)]
mod tests;
