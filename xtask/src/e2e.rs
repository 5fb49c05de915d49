//! `cargo xtask e2e`: the end-to-end suite (`tests/tests/e2e_*.rs`) against a real API server,
//! or against kinformer-testing's fake one to prove the fake faithful.
//!
//! Backends, one per run:
//! - `--local` (the default when no Docker engine answers): kube-apiserver and etcd built from
//!   the Go module proxy and started on 127.0.0.1 (see `controlplane/`). A control plane left
//!   up by `cargo xtask control-plane up` is reused.
//! - `--kind`: a kind cluster (created, or reused when one of that name exists) on the node
//!   image `kindest/node:v1.37.2`, deleted afterwards unless `--keep`. kind pulls the published
//!   image unless Docker already has one of that name; where no registry is reachable,
//!   `cargo xtask kind-image` builds it (see `kind_image.rs`), and its cached tree is imported
//!   again when Docker lost the image. The kind CLI comes from PATH, else from that cache.
//! - `--kubeconfig PATH`: any cluster. The suite works in fresh namespaces and deletes what it
//!   created; a context that looks like production is refused unless `--yes`.
//! - `--fake`: the in-process fake server, which is also what a plain `cargo test` uses.
//!
//! The suite learns its backend from `KINFORMER_E2E_BACKEND` and `KINFORMER_E2E_KUBECONFIG`
//! (plus `KINFORMER_E2E_ETCD_URL` on the local backend, for forcing a compaction).
//!
//! On the local and kind backends xtask also serves a restart hook while the tests run: the
//! test that kills kube-apiserver under a watching informer writes `kill` or `start` into the
//! file named by `KINFORMER_E2E_RESTART_FILE`, and xtask, which owns the process (on kind, the
//! control-plane node's static pod), does it and answers in the same path plus `.done`
//! (`ok MILLIS` or `error MESSAGE`). A foreign cluster offers no such hook, so that test is
//! skipped there, and xtask says so.

#![allow(clippy::print_stderr, reason = "xtask reports its progress on stderr")]

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use crate::{
    controlplane::{self, ApiServerOutage, ControlPlane, Detached, Endpoint},
    flags::{Backend, E2e as Args},
    kind_image::{self, NODE_IMAGE},
};

/// The kind cluster's name unless `--kind-name` says otherwise.
const KIND_CLUSTER: &str = "kinformer-e2e";
/// Names the file through which the restart test asks xtask to kill or start kube-apiserver.
const RESTART_FILE_ENV: &str = "KINFORMER_E2E_RESTART_FILE";
/// The test (in `tests/tests/e2e_restart.rs`) that needs the restart hook.
const RESTART_TEST: &str = "an_informer_converges_with_nothing_lost_and_no_hot_loop_when_kube_apiserver_is_killed_and_restarted";
/// How often xtask looks for a restart request while the tests run.
const HOOK_POLL: Duration = Duration::from_millis(50);

/// Runs `cargo xtask e2e`.
pub(crate) fn e2e(args: &Args) -> Result<(), String> {
    let backend = match args.backend.clone() {
        Some(backend) => backend,
        None if kind_image::docker_answers() && kind_cli().is_some() => Backend::Kind,
        None => Backend::Local,
    };
    let started = Instant::now();
    let result = match &backend {
        Backend::Fake => run_suite("fake", None, None, Restart::InProcess, &args.test_args),
        Backend::Local => local(args),
        Backend::Kind => kind(args),
        Backend::Kubeconfig(path) => {
            refuse_production(path, args.yes)?;
            run_suite(
                "kubeconfig",
                Some(path),
                None,
                Restart::unavailable("kubeconfig"),
                &args.test_args,
            )
        }
    };
    eprintln!(
        "xtask: e2e ({backend:?}) finished in {:.1?}",
        started.elapsed()
    );
    result
}

fn local(args: &Args) -> Result<(), String> {
    if let Some(endpoint) = controlplane::running() {
        eprintln!("xtask: reusing the control plane from `cargo xtask control-plane up`");
        let kubeconfig = endpoint.kubeconfig.clone();
        let mut detached = Detached::load();
        let restart = match &mut detached {
            Ok(detached) => Restart::Hook(detached),
            Err(why) => Restart::Unavailable(why.clone()),
        };
        return run_suite(
            "local",
            Some(&kubeconfig),
            Some(&endpoint),
            restart,
            &args.test_args,
        );
    }
    let binaries = controlplane::ensure_binaries()?;
    let dir = env::temp_dir().join(format!("kinformer-e2e-{}", std::process::id()));
    let started = Instant::now();
    let mut plane = ControlPlane::start(&binaries, &args.control_plane, &dir, false)?;
    eprintln!(
        "xtask: control plane ready at {} in {:.1?} (logs in {})",
        plane.server,
        started.elapsed(),
        plane.dir.display()
    );
    let endpoint = plane.endpoint(&args.control_plane);
    let result = run_suite(
        "local",
        Some(&endpoint.kubeconfig),
        Some(&endpoint),
        Restart::Hook(&mut plane),
        &args.test_args,
    );
    plane.stop();
    result
}

/// The kind CLI: from PATH, else the one `cargo xtask kind-image` built.
fn kind_cli() -> Option<PathBuf> {
    if on_path("kind") {
        return Some(PathBuf::from("kind"));
    }
    kind_image::cached_binary("kind")
}

fn kind(args: &Args) -> Result<(), String> {
    // A dockerd that `cargo xtask kind-image` installed does not outlive the machine's session.
    if kind_image::ensure_docker()? {
        eprintln!("xtask: started dockerd");
    }
    let (Some(kind), true) = (kind_cli(), kind_image::docker_answers()) else {
        return Err(
            "--kind needs a Docker engine that answers `docker info` and the `kind` CLI (on PATH, \
             or built by `cargo xtask kind-image`)"
                .to_owned(),
        );
    };
    let name = args.kind_name.as_deref().unwrap_or(KIND_CLUSTER);
    let clusters = Command::new(&kind)
        .args(["get", "clusters"])
        .output()
        .map_err(|err| format!("running kind get clusters: {err}"))?;
    let mut exists = String::from_utf8_lossy(&clusters.stdout)
        .lines()
        .any(|line| line.trim() == name);
    let node = format!("{name}-control-plane");
    if exists && !container_running(&node) {
        // Its node stopped with the Docker engine (a machine's session ended): it cannot be
        // reused, and kind does not restart it.
        eprintln!("xtask: kind cluster {name} has stopped; deleting it to create it anew");
        let mut delete = Command::new(&kind);
        delete.args(["delete", "cluster", "--name", name]);
        crate::run(delete)?;
        exists = false;
    }
    if exists {
        eprintln!("xtask: reusing kind cluster {name}");
    } else {
        if !kind_image::image_exists(NODE_IMAGE) && kind_image::cached_node_tar().is_file() {
            eprintln!(
                "xtask: importing {NODE_IMAGE} from {}",
                kind_image::cached_node_tar().display()
            );
            kind_image::import_node_tar()?;
        }
        let mut create = Command::new(&kind);
        create.args([
            "create", "cluster", "--name", name, "--image", NODE_IMAGE, "--wait", "180s",
        ]);
        crate::run(create)?;
    }
    let kubeconfig = env::temp_dir().join(format!(
        "kinformer-e2e-kind-{}.kubeconfig",
        std::process::id()
    ));
    let output = Command::new(&kind)
        .args(["get", "kubeconfig", "--name", name])
        .output()
        .map_err(|err| format!("running kind get kubeconfig: {err}"))?;
    if !output.status.success() {
        return Err(format!("kind get kubeconfig --name {name} failed"));
    }
    fs::write(&kubeconfig, &output.stdout)
        .map_err(|err| format!("writing {}: {err}", kubeconfig.display()))?;
    let mut apiserver = KindApiServer { node };
    // Not ready is a failed run like any other: the cluster is still deleted below.
    let result = apiserver.wait_cluster_ready().and_then(|()| {
        run_suite(
            "kind",
            Some(&kubeconfig),
            None,
            Restart::Hook(&mut apiserver),
            &args.test_args,
        )
    });
    let _ = fs::remove_file(&kubeconfig);
    if !args.keep {
        let mut delete = Command::new(&kind);
        delete.args(["delete", "cluster", "--name", name]);
        crate::run(delete)?;
    }
    result
}

/// How the restart test gets its API server killed and started on a backend.
enum Restart<'a> {
    /// The fake runs inside the test process, which restarts it itself.
    InProcess,
    /// xtask serves the hook while the tests run.
    Hook(&'a mut dyn ApiServerOutage),
    /// Not on this backend, for this reason: the test is skipped, and xtask says so.
    Unavailable(String),
}

impl Restart<'_> {
    fn unavailable(backend: &str) -> Self {
        Self::Unavailable(format!(
            "it kills and restarts kube-apiserver, which only the local control plane (--local), \
             kind and the fake let the suite do, not {backend}"
        ))
    }
}

/// Whether the Docker container `name` exists and runs.
fn container_running(name: &str) -> bool {
    Command::new("docker")
        .args(["inspect", "--format", "{{.State.Running}}", name])
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "true")
}

/// Where kind's control-plane node keeps kube-apiserver's static-pod manifest while it is
/// killed, so that the kubelet does not start it again.
const KIND_PARKED_MANIFEST: &str = "/etc/kubernetes/kube-apiserver.yaml.stopped";
const KIND_MANIFEST: &str = "/etc/kubernetes/manifests/kube-apiserver.yaml";
/// kubectl inside kind's control-plane node, as its admin.
const KIND_KUBECTL: &str = "kubectl --kubeconfig=/etc/kubernetes/admin.conf";
/// How long kind's kubelet may take to start kube-apiserver again and have it ready.
const KIND_START_TIMEOUT: Duration = Duration::from_secs(90);

/// kube-apiserver of a kind cluster, a static pod on the control-plane node `node`: killed by
/// moving its manifest out of the kubelet's manifest folder and SIGKILLing the process (a crash,
/// which the kubelet then does not repair), started by moving the manifest back and waiting for
/// `/readyz` from inside the node. Its port, certificates and etcd stay the same, so the
/// kubeconfig stays valid.
struct KindApiServer {
    node: String,
}

impl KindApiServer {
    /// Runs `script` with `sh -c` in the node; its stdout, or an error with its stderr.
    fn sh(&self, script: &str) -> Result<String, String> {
        let output = Command::new("docker")
            .args(["exec", &self.node, "sh", "-c", script])
            .output()
            .map_err(|err| format!("running docker exec {}: {err}", self.node))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "`{script}` in {} failed with {}: {}",
                self.node,
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }

    /// Waits for kube-apiserver's `/readyz`, asked from inside the node.
    fn wait_apiserver_ready(&self, timeout: Duration) -> Result<(), String> {
        self.wait("waiting for kube-apiserver's /readyz", timeout, |node| {
            node.sh(&format!("{KIND_KUBECTL} get --raw=/readyz"))
                .is_ok_and(|body| body.trim() == "ok")
        })
    }

    /// Waits until the cluster can take the suite: kube-apiserver ready, the node Ready and
    /// every control-plane pod Ready. A reused cluster may have just been restarted with the
    /// Docker engine, or have its controller-manager and scheduler backing off after a restart
    /// test (they exit when they lose their lease).
    fn wait_cluster_ready(&self) -> Result<(), String> {
        let started = Instant::now();
        self.wait_apiserver_ready(KIND_START_TIMEOUT)?;
        let left = KIND_START_TIMEOUT
            .saturating_sub(started.elapsed())
            .as_secs()
            .max(1);
        self.sh(&format!(
            "{KIND_KUBECTL} wait --for=condition=Ready nodes --all --timeout={left}s && \
             {KIND_KUBECTL} wait --namespace=kube-system --for=condition=Ready pods \
             --selector=tier=control-plane --timeout={left}s"
        ))?;
        eprintln!(
            "xtask: kind cluster ready (node and control plane) after {:.1?}",
            started.elapsed()
        );
        Ok(())
    }

    /// Polls `done` every 100 ms until it holds, for at most `timeout`.
    fn wait(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            if Instant::now() > deadline {
                return Err(format!(
                    "{what} in {} within {timeout:?}: it did not",
                    self.node
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl ApiServerOutage for KindApiServer {
    fn kill_apiserver(&mut self) -> Result<(), String> {
        if self.apiserver_down() {
            return Err("kube-apiserver is already down".to_owned());
        }
        self.sh(&format!(
            "mv {KIND_MANIFEST} {KIND_PARKED_MANIFEST} && pkill -KILL -x kube-apiserver"
        ))?;
        self.wait(
            "waiting for kube-apiserver to exit",
            Duration::from_secs(30),
            |node| node.sh("pgrep -x kube-apiserver").is_err(),
        )
    }

    fn start_apiserver(&mut self) -> Result<(), String> {
        if !self.apiserver_down() {
            return Err("kube-apiserver is already running".to_owned());
        }
        self.sh(&format!("mv {KIND_PARKED_MANIFEST} {KIND_MANIFEST}"))?;
        self.wait_apiserver_ready(KIND_START_TIMEOUT)
    }

    fn apiserver_down(&mut self) -> bool {
        self.sh(&format!("test -f {KIND_PARKED_MANIFEST}")).is_ok()
    }
}

/// Runs the e2e test binaries against `backend`, serving the restart hook while they run
/// when `restart` has one.
fn run_suite(
    backend: &str,
    kubeconfig: Option<&Path>,
    local: Option<&Endpoint>,
    restart: Restart<'_>,
    test_args: &[String],
) -> Result<(), String> {
    let mut command = crate::cargo();
    command
        .args([
            "test",
            "--package",
            "kinformer-tests",
            "--test",
            "e2e_*",
            "--",
        ])
        .args(test_args)
        .env("KINFORMER_E2E_BACKEND", backend)
        .env_remove("KINFORMER_E2E_KUBECONFIG")
        .env_remove("KINFORMER_E2E_ETCD_URL")
        .env_remove("KINFORMER_E2E_WATCH_CACHE")
        .env_remove(RESTART_FILE_ENV);
    if let Some(path) = kubeconfig {
        let absolute =
            fs::canonicalize(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
        command.env("KINFORMER_E2E_KUBECONFIG", absolute);
    }
    if let Some(endpoint) = local {
        command
            .env("KINFORMER_E2E_ETCD_URL", &endpoint.etcd_url)
            .env(
                "KINFORMER_E2E_WATCH_CACHE",
                endpoint.watch_cache.to_string(),
            );
    }
    let outage = match restart {
        Restart::InProcess => return crate::run(command),
        Restart::Hook(outage) => outage,
        Restart::Unavailable(why) => {
            // The test would fail for want of the hook; skipping it with a line of its own keeps
            // it from looking run.
            eprintln!("xtask: skipping {RESTART_TEST}: {why}");
            command.args(["--skip", RESTART_TEST]);
            return crate::run(command);
        }
    };
    let dir = env::temp_dir().join(format!("kinformer-e2e-hook-{}", std::process::id()));
    let mut hook = RestartHook::new(dir, outage)?;
    command.env(RESTART_FILE_ENV, hook.request());
    let result = run_serving(command, &mut hook);
    hook.finish();
    result
}

/// Runs `command` (like `crate::run`), answering restart requests until it exits.
fn run_serving(mut command: Command, hook: &mut RestartHook<'_>) -> Result<(), String> {
    eprintln!("xtask: running {command:?}");
    let mut child = command
        .spawn()
        .map_err(|err| format!("could not start {command:?}: {err}"))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                hook.serve();
                thread::sleep(HOOK_POLL);
            }
            Err(err) => return Err(format!("waiting for {command:?}: {err}")),
        }
    };
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed with {status}"))
    }
}

/// The file-based hook through which a test asks xtask to kill or start kube-apiserver.
///
/// A file, not a socket or a signal: the test binaries are grandchildren of xtask (through
/// cargo), run one at a time, and need nothing but `std::fs` to use it. Both sides write a
/// file aside and rename it into place, so neither ever reads half a request or answer.
struct RestartHook<'a> {
    dir: PathBuf,
    outage: &'a mut dyn ApiServerOutage,
}

impl<'a> RestartHook<'a> {
    /// A hook whose files live in `dir` (created, and removed by [`finish`](Self::finish)).
    fn new(dir: PathBuf, outage: &'a mut dyn ApiServerOutage) -> Result<Self, String> {
        // A leftover of an earlier xtask with the same PID must not pass for a request.
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
        Ok(Self { dir, outage })
    }

    /// Where a test writes `kill` or `start`.
    fn request(&self) -> PathBuf {
        self.dir.join("request")
    }

    /// Where xtask answers a request: the request's path plus `.done`.
    fn answer(&self) -> PathBuf {
        self.dir.join("request.done")
    }

    /// Carries out the pending request, if there is one, and answers it.
    fn serve(&mut self) {
        let Ok(request) = fs::read_to_string(self.request()) else {
            return;
        };
        let _ = fs::remove_file(self.request());
        let started = Instant::now();
        let outcome = match request.trim() {
            "kill" => self.outage.kill_apiserver(),
            "start" => self.outage.start_apiserver(),
            other => Err(format!("unknown request {other:?}; expected kill or start")),
        };
        let answer = match outcome {
            Ok(()) => format!("ok {}", started.elapsed().as_millis()),
            Err(err) => format!("error {err}"),
        };
        eprintln!(
            "xtask: restart hook: {} -> {}",
            request.trim(),
            answer.lines().next().unwrap_or_default()
        );
        let partial = self.dir.join("request.done.partial");
        if let Err(err) =
            fs::write(&partial, &answer).and_then(|()| fs::rename(&partial, self.answer()))
        {
            eprintln!("xtask: restart hook: could not answer: {err}");
        }
    }

    /// Brings kube-apiserver back if a test left it down (it failed between `kill` and
    /// `start`): a control plane kept up by `control-plane up` must outlive the run intact.
    fn finish(self) {
        if self.outage.apiserver_down() {
            eprintln!("xtask: a test left kube-apiserver down; starting it again");
            if let Err(err) = self.outage.start_apiserver() {
                eprintln!("xtask: {err}");
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn on_path(program: &str) -> bool {
    env::var_os("PATH")
        .is_some_and(|path| env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Refuses a kubeconfig whose current context or server looks like production, unless `yes`.
fn refuse_production(path: &Path, yes: bool) -> Result<(), String> {
    let text =
        fs::read_to_string(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
    match production_hint(&text) {
        Some(hint) if !yes => Err(format!(
            "{} looks like production ({hint}); the suite creates and deletes namespaces and CRDs. \
             Pass --yes to run it anyway",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// What in a kubeconfig suggests production: the current context's name, or any server URL.
fn production_hint(kubeconfig: &str) -> Option<String> {
    let looks_like_production = |value: &str| {
        let lower = value.to_ascii_lowercase();
        lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| matches!(word, "prod" | "production" | "prd" | "live"))
    };
    kubeconfig.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("- ");
        let (key, value) = line.split_once(':')?;
        let value = value.trim().trim_matches('"');
        (matches!(key.trim(), "current-context" | "server") && looks_like_production(value))
            .then(|| format!("{}: {value}", key.trim()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    /// `cargo xtask e2e ARGS`, parsed.
    fn parse(args: &[String]) -> Result<Args, String> {
        let line: Vec<String> = ["e2e".to_owned()]
            .into_iter()
            .chain(args.to_vec())
            .collect();
        match crate::flags::parse(&line)? {
            crate::flags::Task::E2e(args) => Ok(args),
            other => Err(format!("parsed as {other:?}")),
        }
    }

    #[test]
    fn flags_choose_one_backend_and_pass_test_args_through() {
        let args = parse(&strings(&[
            "--kubeconfig",
            "/tmp/k",
            "--yes",
            "--",
            "paging",
        ]))
        .expect("valid");
        assert_eq!(
            args.backend,
            Some(Backend::Kubeconfig(PathBuf::from("/tmp/k")))
        );
        assert!(args.yes);
        assert_eq!(args.test_args, strings(&["paging"]));
    }

    #[test]
    fn the_skipped_restart_test_is_the_one_the_suite_defines() {
        let suite = include_str!("../../tests/tests/e2e_restart.rs");
        assert!(
            suite.contains(&format!("async fn {RESTART_TEST}()")),
            "tests/tests/e2e_restart.rs defines no test named {RESTART_TEST}"
        );
        assert!(suite.contains(RESTART_FILE_ENV));
    }

    /// Kills and starts nothing; records what it was asked.
    #[derive(Default)]
    struct Recorder {
        calls: Vec<&'static str>,
        down: bool,
    }

    impl ApiServerOutage for Recorder {
        fn kill_apiserver(&mut self) -> Result<(), String> {
            self.calls.push("kill");
            self.down = true;
            Ok(())
        }

        fn start_apiserver(&mut self) -> Result<(), String> {
            self.calls.push("start");
            if !self.down {
                return Err("kube-apiserver is already running".to_owned());
            }
            self.down = false;
            Ok(())
        }

        fn apiserver_down(&mut self) -> bool {
            self.down
        }
    }

    fn ask(hook: &mut RestartHook<'_>, request: &str) -> String {
        fs::write(hook.request(), request).expect("write the request");
        hook.serve();
        let answer = fs::read_to_string(hook.answer()).expect("an answer");
        fs::remove_file(hook.answer()).expect("remove the answer");
        assert!(!hook.request().exists(), "the request is consumed");
        answer
    }

    #[test]
    fn the_hook_kills_and_starts_on_request_and_answers_each() {
        let mut recorder = Recorder::default();
        let dir = env::temp_dir().join(format!("kinformer-hook-test-a-{}", std::process::id()));
        let mut hook = RestartHook::new(dir, &mut recorder).expect("hook");
        hook.serve();
        assert!(!hook.answer().exists(), "no request, no answer");
        assert!(ask(&mut hook, "kill\n").starts_with("ok "));
        assert!(ask(&mut hook, "start").starts_with("ok "));
        assert_eq!(
            ask(&mut hook, "start"),
            "error kube-apiserver is already running"
        );
        assert!(ask(&mut hook, "reboot").starts_with("error unknown request"));
        let dir = hook.dir.clone();
        hook.finish();
        assert!(!dir.exists());
        assert_eq!(recorder.calls, ["kill", "start", "start"]);
    }

    #[test]
    fn a_run_that_ends_with_kube_apiserver_down_brings_it_back() {
        let mut recorder = Recorder::default();
        let dir = env::temp_dir().join(format!("kinformer-hook-test-b-{}", std::process::id()));
        let mut hook = RestartHook::new(dir, &mut recorder).expect("hook");
        assert!(ask(&mut hook, "kill").starts_with("ok "));
        hook.finish();
        assert!(!recorder.down);
        assert_eq!(recorder.calls, ["kill", "start"]);
    }

    #[test]
    fn two_backends_are_refused() {
        assert!(parse(&strings(&["--local", "--fake"])).is_err());
    }

    #[test]
    fn a_production_context_is_recognised_but_a_kind_one_is_not() {
        let prod =
            "current-context: eu-prod-1\nclusters:\n- cluster:\n    server: https://10.0.0.1\n";
        assert_eq!(
            production_hint(prod).as_deref(),
            Some("current-context: eu-prod-1")
        );
        let prod_server = "current-context: admin\nclusters:\n- cluster:\n    server: https://api.production.example.com\n";
        assert!(production_hint(prod_server).is_some());
        let kind = "current-context: kind-kinformer-e2e\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n";
        assert_eq!(production_hint(kind), None);
        // "product" and "prodigy" contain "prod" but are other words.
        assert_eq!(production_hint("current-context: product-staging\n"), None);
    }
}
