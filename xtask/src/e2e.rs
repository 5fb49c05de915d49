//! `cargo xtask e2e`: the end-to-end suite (`tests/tests/e2e/`) against a real API server,
//! or against kinformer-testing's fake one to prove the fake faithful.
//!
//! Backends, one per run:
//! - `--local` (the default when no Docker engine answers): kube-apiserver and etcd built from
//!   the Go module proxy and started on 127.0.0.1 by the kinformer-controlplane crate
//!   (`xtask/controlplane`). A control plane left up by `cargo xtask control-plane up` is
//!   reused.
//! - `--kind`: a kind cluster (created, or reused when one of that name exists) on the node
//!   image `kindest/node:v1.37.2`, deleted afterwards unless `--keep`. kind pulls the published
//!   image unless Docker already has one of that name; where no registry is reachable,
//!   `cargo xtask kind-image` builds it (see `kind_image.rs`), and its cached tree is imported
//!   again when Docker lost the image. The kind CLI comes from PATH, else from that cache.
//! - `--kubeconfig PATH`: any cluster. The suite works in fresh namespaces and deletes what it
//!   created; a context that looks like production is refused unless `--yes`.
//! - `--fake`: the in-process fake server, which is also what a plain `cargo test` uses.
//!
//! The suite learns its backend from `KINFORMER_E2E_BACKEND` and `KINFORMER_E2E_KUBECONFIG`,
//! and reaches the control plane through the kinformer-controlplane crate: on the local backend
//! `KINFORMER_E2E_CONTROL_PLANE` names the control plane's folder (its state file lists the
//! processes and etcd's URL, for forcing a compaction), and on kind `KINFORMER_E2E_KIND_NODE`
//! names the control-plane node's container. The test that kills kube-apiserver under a
//! watching informer kills and starts it itself, from there. A foreign cluster offers neither,
//! so that test is skipped there, and xtask says so; after the tests xtask starts
//! kube-apiserver again if a test left it down.

#![allow(clippy::print_stderr, reason = "xtask reports its progress on stderr")]

use std::{
    env,
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use kinformer_controlplane::{CONTROL_PLANE_ENV, KIND_NODE_ENV, KindNode, running};

use crate::{
    controlplane::{self, ApiServerOutage, ControlPlane},
    flags::{Backend, E2e as Args},
    kind_image::{self, NODE_IMAGE},
};

/// The kind cluster's name unless `--kind-name` says otherwise.
const KIND_CLUSTER: &str = "kinformer-e2e";
/// The test (in `tests/tests/e2e/e2e_restart.rs`) that kills and starts kube-apiserver.
const RESTART_TEST: &str = "an_informer_converges_with_nothing_lost_and_no_hot_loop_when_kube_apiserver_is_killed_and_restarted";

/// Runs `cargo xtask e2e`.
pub(crate) fn e2e(args: &Args) -> Result<(), String> {
    let backend = match args.backend() {
        Some(backend) => backend,
        None if kind_image::docker_answers() && kind_cli().is_some() => Backend::Kind,
        None => Backend::Local,
    };
    let started = Instant::now();
    let result = match &backend {
        Backend::Fake => run_suite("fake", None, &[], Restart::InProcess, &args.test_args),
        Backend::Local => local(args),
        Backend::Kind => kind(args),
        Backend::Kubeconfig(path) => {
            refuse_production(path, args.yes)?;
            run_suite(
                "kubeconfig",
                Some(path),
                &[],
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
    if let Some(mut plane) = running() {
        eprintln!("xtask: reusing the control plane from `cargo xtask control-plane up`");
        let (kubeconfig, env) = (plane.kubeconfig().to_path_buf(), local_env(&plane));
        let restart = match plane.restartable() {
            Ok(()) => Restart::Library(&mut plane),
            Err(why) => Restart::Unavailable(why),
        };
        return run_suite("local", Some(&kubeconfig), &env, restart, &args.test_args);
    }
    let binaries = controlplane::ensure_binaries()?;
    let dir = env::temp_dir().join(format!("kinformer-e2e-{}", std::process::id()));
    let started = Instant::now();
    let mut plane = ControlPlane::start(&binaries, &args.control_plane.options(), &dir, false)?;
    eprintln!(
        "xtask: control plane ready at {} in {:.1?} (logs in {})",
        plane.server(),
        started.elapsed(),
        plane.dir().display()
    );
    let (kubeconfig, env) = (plane.kubeconfig().to_path_buf(), local_env(&plane));
    let result = run_suite(
        "local",
        Some(&kubeconfig),
        &env,
        Restart::Library(&mut plane),
        &args.test_args,
    );
    plane.stop();
    result
}

/// What the suite needs to find the local control plane: its folder, whether kube-apiserver
/// runs with a watch cache, and that it honours shard selectors.
fn local_env(plane: &ControlPlane) -> [(&'static str, OsString); 3] {
    [
        (CONTROL_PLANE_ENV, plane.dir().into()),
        (
            "KINFORMER_E2E_WATCH_CACHE",
            plane.watch_cache().to_string().into(),
        ),
        (SHARDED_LIST_AND_WATCH_ENV, "true".into()),
    ]
}

/// Whether the backend's kube-apiserver has the `ShardedListAndWatch` feature gate on: true on
/// the local control plane, false on kind's default cluster, unset for a given kubeconfig.
const SHARDED_LIST_AND_WATCH_ENV: &str = "KINFORMER_E2E_SHARDED_LIST_AND_WATCH";

/// The kind CLI: from PATH, else the one `cargo xtask kind-image` built.
fn kind_cli() -> Option<PathBuf> {
    if on_path("kind") {
        return Some(PathBuf::from("kind"));
    }
    kind_image::cached_binary("kind")
}

fn kind(args: &Args) -> Result<(), String> {
    // Starting dockerd changes the host: only `kind-image --prepare-host` does that.
    let (Some(kind), true) = (kind_cli(), kind_image::docker_answers()) else {
        return Err(
            "--kind needs a Docker engine that answers `docker info` and the `kind` CLI (on PATH, \
             or built by `cargo xtask kind-image`); `cargo xtask kind-image --prepare-host` \
             installs and starts Docker"
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
    let mut apiserver = KindNode::new(node);
    // Not ready is a failed run like any other: the cluster is still deleted below.
    let result = apiserver.wait_cluster_ready().and_then(|()| {
        let env = [
            (KIND_NODE_ENV, apiserver.node().into()),
            (SHARDED_LIST_AND_WATCH_ENV, "false".into()),
        ];
        let restart = Restart::Library(&mut apiserver);
        run_suite("kind", Some(&kubeconfig), &env, restart, &args.test_args)
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
    /// The tests kill and start kube-apiserver through kinformer-controlplane, which finds it
    /// through the environment; this is xtask's handle on the same kube-apiserver, to bring it
    /// back if a test left it down.
    Library(&'a mut dyn ApiServerOutage),
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

/// Runs the e2e test binaries against `backend`, with `env` telling them where its control
/// plane is, and starting it again afterwards if a test left it down (a
/// control plane kept up by `control-plane up`, or a kept kind cluster, must outlive the run
/// intact).
fn run_suite(
    backend: &str,
    kubeconfig: Option<&Path>,
    env: &[(&str, OsString)],
    restart: Restart<'_>,
    test_args: &[String],
) -> Result<(), String> {
    let mut command = crate::cargo();
    command
        // kinformer-tests' e2e binary, selected through `--workspace` so that they share
        // `cargo test --workspace`'s build (`-p` would unify features differently).
        .args(["test", "--workspace", "--test", "e2e", "--"])
        .args(test_args)
        .env("KINFORMER_E2E_BACKEND", backend)
        .env_remove("KINFORMER_E2E_KUBECONFIG")
        .env_remove("KINFORMER_E2E_WATCH_CACHE")
        .env_remove(SHARDED_LIST_AND_WATCH_ENV)
        .env_remove(CONTROL_PLANE_ENV)
        .env_remove(KIND_NODE_ENV);
    command.envs(env.iter().map(|(name, value)| (name, value)));
    // A real server is shared by every test at once: as many at a time as there are cores, not
    // the eight `.cargo/config.toml` runs on the fake (where each test has its own server),
    // unless RUST_TEST_THREADS says otherwise.
    if backend != "fake" && env::var_os("RUST_TEST_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        command.env("RUST_TEST_THREADS", cores.to_string());
    }
    if let Some(path) = kubeconfig {
        let absolute =
            fs::canonicalize(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
        command.env("KINFORMER_E2E_KUBECONFIG", absolute);
    }
    let outage = match restart {
        Restart::InProcess => return crate::run(command),
        Restart::Library(outage) => outage,
        Restart::Unavailable(why) => {
            // The test would fail for want of a control plane; skipping it with a line of its
            // own keeps it from looking run.
            eprintln!("xtask: skipping {RESTART_TEST}: {why}");
            command.args(["--skip", RESTART_TEST]);
            return crate::run(command);
        }
    };
    let result = crate::run(command);
    if outage.apiserver_down() {
        eprintln!("xtask: a test left kube-apiserver down; starting it again");
        if let Err(err) = outage.start_apiserver() {
            eprintln!("xtask: {err}");
        }
    }
    result
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
        match crate::flags::parse(&line).map_err(|err| err.to_string())? {
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
            args.backend(),
            Some(Backend::Kubeconfig(PathBuf::from("/tmp/k")))
        );
        assert!(args.yes);
        assert_eq!(args.test_args, strings(&["paging"]));
    }

    #[test]
    fn the_skipped_restart_test_is_the_one_the_suite_defines() {
        let suite = include_str!("../../tests/tests/e2e/e2e_restart.rs");
        assert!(
            suite.contains(&format!("async fn {RESTART_TEST}()")),
            "tests/tests/e2e/e2e_restart.rs defines no test named {RESTART_TEST}"
        );
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
