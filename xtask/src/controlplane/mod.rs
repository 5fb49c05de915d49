//! A real kube-apiserver and etcd on 127.0.0.1: `cargo xtask control-plane up|down|env|build`,
//! and the control plane `cargo xtask e2e --local` runs the suite against.
//!
//! Both binaries are built from the Go module in `xtask/controlplane` (kube-apiserver from
//! k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3 at the version k8s.io/apiserver
//! requires) and cached under `~/.cache/kinformer/controlplane/<kubernetes version>`, so only
//! the first run pays for the Go build. Starting them takes a few seconds: etcd on free loopback
//! ports with a temporary data dir and no fsync, then kube-apiserver bound to and advertising
//! 127.0.0.1 with a self-signed serving certificate, a bearer token in `system:masters`, RBAC,
//! and a service-account key pair made with the `openssl` CLI (so TokenRequest works).
//!
//! Teardown is by PID: [`ControlPlane`]'s `Drop` stops both processes, and a small `sh` watchdog
//! in its own process group stops them too if xtask itself dies (Ctrl-C, SIGTERM, SIGKILL),
//! so a run leaves no process behind. `control-plane up` instead detaches them and records their
//! PIDs in a state file for `control-plane down`.
//!
//! kube-apiserver can be killed and started again mid-run ([`ApiServerOutage`], for the e2e test
//! that restarts it under a watching informer, and `control-plane restart-apiserver`): it comes
//! back with the very flags it was first given, so the port, serving certificate, token file,
//! service-account keys and etcd are the same and every kubeconfig written for it stays valid.
//!
//! The pieces: `build` builds and caches the binaries; `etcd` and `apiserver` start one process
//! each (kube-apiserver with its credentials, and the [`ApiServerOutage`] that restarts it);
//! `plane` is the [`ControlPlane`] that owns both for one run; `detached` is what `control-plane
//! up` leaves behind and the commands that use it (`down`, `env`, `restart-apiserver`, and
//! `e2e --local` reusing it); `processes` has the process and PID helpers they share.

#![allow(clippy::print_stderr, reason = "xtask reports its progress on stderr")]

mod apiserver;
mod build;
mod detached;
mod etcd;
mod plane;
mod processes;

use std::time::Duration;

pub(crate) use apiserver::ApiServerOutage;
pub(crate) use build::{binary_dir, cache_root, ensure_binaries, kube_version_ldflags};
pub(crate) use detached::{Detached, running};
pub(crate) use plane::{ControlPlane, Endpoint};

/// The Kubernetes release the binaries are built from; `xtask/controlplane/go.mod` pins it.
pub(crate) const KUBERNETES_VERSION: &str = "v1.37.2";

/// The etcd server release k8s.io/apiserver v0.37.2 requires (its go.mod), pinned the same way.
pub(crate) const ETCD_VERSION: &str = "v3.7.0";

/// How long one probe of etcd or kube-apiserver may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a started control plane may take to answer `/readyz` and create `default`.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Knobs for kube-apiserver that the suite's tests care about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Options {
    /// `--etcd-compaction-interval` (kube-apiserver's default is 5m; `0` turns it off).
    pub(crate) etcd_compaction_interval: Option<String>,
    /// `--watch-cache=false`: every watch and list is served by etcd directly.
    pub(crate) no_watch_cache: bool,
}

/// Runs `cargo xtask control-plane <up|down|env|build|restart-apiserver>`.
pub(crate) fn control_plane(flags: &crate::flags::ControlPlane) -> Result<(), String> {
    match flags.command.as_str() {
        "up" => detached::up(&flags.options),
        "down" => detached::down(),
        "env" => detached::print_env(),
        "build" => ensure_binaries().map(|_| ()),
        "restart-apiserver" => detached::restart_detached(),
        other => Err(format!(
            "unknown control-plane command {other:?}; expected up, down, env, build or restart-apiserver"
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::flags::{self, Task};

    fn parse(args: &[&str]) -> Result<Task, String> {
        let args: Vec<String> = ["control-plane"]
            .iter()
            .chain(args)
            .map(|arg| (*arg).to_owned())
            .collect();
        flags::parse(&args)
    }

    #[test]
    fn control_plane_flags_are_taken_and_the_rest_returned() {
        let Ok(Task::ControlPlane(flags)) = parse(&[
            "--no-watch-cache",
            "--etcd-compaction-interval",
            "10s",
            "up",
        ]) else {
            panic!("valid flags");
        };
        assert!(flags.options.no_watch_cache);
        assert_eq!(
            flags.options.etcd_compaction_interval.as_deref(),
            Some("10s")
        );
        assert_eq!(flags.command, "up");
    }

    #[test]
    fn a_compaction_interval_without_a_value_is_an_error() {
        assert!(parse(&["up", "--etcd-compaction-interval"]).is_err());
    }
}
