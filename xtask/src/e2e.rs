//! `cargo xtask e2e`: the end-to-end suite (`tests/tests/e2e_*.rs`) against a real API server,
//! or against kinformer-testing's fake one to prove the fake faithful.
//!
//! Backends, one per run:
//! - `--local` (the default when no Docker engine answers): kube-apiserver and etcd built from
//!   the Go module proxy and started on 127.0.0.1 (see `controlplane.rs`). A control plane left
//!   up by `cargo xtask control-plane up` is reused.
//! - `--kind`: a kind cluster (created, or reused when one of that name exists), deleted
//!   afterwards unless `--keep`.
//! - `--kubeconfig PATH`: any cluster. The suite works in fresh namespaces and deletes what it
//!   created; a context that looks like production is refused unless `--yes`.
//! - `--fake`: the in-process fake server, which is also what a plain `cargo test` uses.
//!
//! The suite learns its backend from `KINFORMER_E2E_BACKEND` and `KINFORMER_E2E_KUBECONFIG`
//! (plus `KINFORMER_E2E_ETCD_URL` on the local backend, for forcing a compaction).

#![allow(clippy::print_stderr, reason = "xtask reports its progress on stderr")]

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use crate::controlplane::{self, ControlPlane, Endpoint, Options};

/// The kind cluster's name unless `--kind-name` says otherwise.
const KIND_CLUSTER: &str = "kinformer-e2e";
/// The node image matching the one Kubernetes minor the project targets.
const KIND_NODE_IMAGE: &str = "kindest/node:v1.37.2";

#[derive(Debug, Clone, PartialEq)]
enum Backend {
    Local,
    Kind,
    Kubeconfig(PathBuf),
    Fake,
}

#[derive(Debug)]
struct Args {
    backend: Option<Backend>,
    keep: bool,
    yes: bool,
    kind_name: String,
    control_plane: Options,
    /// Passed to the test binaries after `--` (a test name filter, `--nocapture`, ...).
    test_args: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let (control_plane, rest) = Options::parse(args)?;
    let mut parsed = Args {
        backend: None,
        keep: false,
        yes: false,
        kind_name: KIND_CLUSTER.to_owned(),
        control_plane,
        test_args: Vec::new(),
    };
    let mut iter = rest.into_iter();
    let choose = |parsed: &mut Args, backend: Backend| {
        if parsed.backend.is_some() {
            return Err(
                "choose one backend: --local, --kind, --kubeconfig PATH or --fake".to_owned(),
            );
        }
        parsed.backend = Some(backend);
        Ok(())
    };
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--local" => choose(&mut parsed, Backend::Local)?,
            "--kind" => choose(&mut parsed, Backend::Kind)?,
            "--fake" => choose(&mut parsed, Backend::Fake)?,
            "--kubeconfig" => {
                let path = iter.next().ok_or("--kubeconfig needs a path")?;
                choose(&mut parsed, Backend::Kubeconfig(PathBuf::from(path)))?;
            }
            "--kind-name" => parsed.kind_name = iter.next().ok_or("--kind-name needs a name")?,
            "--keep" => parsed.keep = true,
            "--yes" => parsed.yes = true,
            "--" => {
                parsed.test_args = iter.by_ref().collect();
            }
            other => {
                if let Some(path) = other.strip_prefix("--kubeconfig=") {
                    choose(&mut parsed, Backend::Kubeconfig(PathBuf::from(path)))?;
                } else {
                    return Err(format!(
                        "unknown e2e flag {other:?}; usage: cargo xtask e2e [--local|--kind|--kubeconfig PATH|--fake] \
                         [--keep] [--yes] [--no-watch-cache] [--etcd-compaction-interval D] [-- TEST ARGS]"
                    ));
                }
            }
        }
    }
    Ok(parsed)
}

/// Runs `cargo xtask e2e`; `args` are what follows `e2e`.
pub(crate) fn e2e(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let backend = match args.backend.clone() {
        Some(backend) => backend,
        None if docker_answers() && on_path("kind") => Backend::Kind,
        None => Backend::Local,
    };
    let started = Instant::now();
    let result = match &backend {
        Backend::Fake => run_suite("fake", None, None, &args.test_args),
        Backend::Local => local(&args),
        Backend::Kind => kind(&args),
        Backend::Kubeconfig(path) => {
            refuse_production(path, args.yes)?;
            run_suite("kubeconfig", Some(path), None, &args.test_args)
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
        return run_suite("local", Some(&kubeconfig), Some(&endpoint), &args.test_args);
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
        &args.test_args,
    );
    plane.stop();
    result
}

fn kind(args: &Args) -> Result<(), String> {
    if !on_path("kind") || !docker_answers() {
        return Err(
            "--kind needs the `kind` CLI and a Docker engine that answers `docker info`".to_owned(),
        );
    }
    let name = &args.kind_name;
    let clusters = Command::new("kind")
        .args(["get", "clusters"])
        .output()
        .map_err(|err| format!("running kind get clusters: {err}"))?;
    let exists = String::from_utf8_lossy(&clusters.stdout)
        .lines()
        .any(|line| line.trim() == name);
    if exists {
        eprintln!("xtask: reusing kind cluster {name}");
    } else {
        let mut create = Command::new("kind");
        create.args([
            "create",
            "cluster",
            "--name",
            name,
            "--image",
            KIND_NODE_IMAGE,
            "--wait",
            "180s",
        ]);
        crate::run(create)?;
    }
    let kubeconfig = env::temp_dir().join(format!(
        "kinformer-e2e-kind-{}.kubeconfig",
        std::process::id()
    ));
    let output = Command::new("kind")
        .args(["get", "kubeconfig", "--name", name])
        .output()
        .map_err(|err| format!("running kind get kubeconfig: {err}"))?;
    if !output.status.success() {
        return Err(format!("kind get kubeconfig --name {name} failed"));
    }
    fs::write(&kubeconfig, &output.stdout)
        .map_err(|err| format!("writing {}: {err}", kubeconfig.display()))?;
    let result = run_suite("kind", Some(&kubeconfig), None, &args.test_args);
    let _ = fs::remove_file(&kubeconfig);
    if !args.keep {
        let mut delete = Command::new("kind");
        delete.args(["delete", "cluster", "--name", name]);
        crate::run(delete)?;
    }
    result
}

fn run_suite(
    backend: &str,
    kubeconfig: Option<&Path>,
    local: Option<&Endpoint>,
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
        .env_remove("KINFORMER_E2E_WATCH_CACHE");
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
    crate::run(command)
}

fn docker_answers() -> bool {
    Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
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
