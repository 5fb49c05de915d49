//! A real kube-apiserver and etcd on 127.0.0.1, and kube-apiserver's off switch: the control
//! plane behind `cargo xtask control-plane up|down|env|build|restart-apiserver` and
//! `cargo xtask e2e --local`, and what the e2e suite calls to kill, start and compact it.
//!
//! Start here: [`ControlPlane`] owns one etcd + kube-apiserver pair, described by a state file
//! in its folder; [`ControlPlane::attach`] reads that file from any process (the e2e tests find
//! the folder in [`CONTROL_PLANE_ENV`]); [`ApiServerOutage`] kills and starts kube-apiserver,
//! on that plane or, through [`KindNode`], on a kind cluster's control-plane node
//! ([`KIND_NODE_ENV`]); [`compact_etcd`] compacts etcd's history up to now.
//!
//! Both binaries are built from the Go module beside this crate's manifest (`go.mod`, `cmd/`:
//! kube-apiserver from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3 at the version
//! k8s.io/apiserver requires) and cached under `~/.cache/kinformer/controlplane/<kubernetes
//! version>`, so only the first run pays for the Go build. Starting them takes a few seconds:
//! etcd on free loopback ports with a temporary data dir and no fsync, then kube-apiserver bound
//! to and advertising 127.0.0.1 with a self-signed serving certificate, a bearer token in
//! `system:masters`, RBAC, and a service-account key pair made with the `openssl` CLI (so
//! TokenRequest works).
//!
//! The state file lists the PIDs of the plane's processes and how kube-apiserver was started.
//! Whoever kills or starts kube-apiserver, in whichever process, rewrites it, so every handle
//! sees the processes that run now. Teardown is by PID: the [`ControlPlane`] that started a
//! plane stops what the state file lists when it is stopped or dropped, and a small `sh`
//! watchdog in its own process group does the same if the owning process dies (Ctrl-C, SIGTERM,
//! SIGKILL), so a run leaves no process behind. `control-plane up` instead detaches the plane
//! and keeps its state file in the cache for `down`, `env` and later runs.
//!
//! kube-apiserver comes back with the very flags it was first given, so the port, serving
//! certificate, token file, service-account keys and etcd are the same and every kubeconfig
//! written for it stays valid.
//!
//! The pieces: `build` builds and caches the binaries; `etcd` and `apiserver` start one process
//! each; `state` is the state file; `plane` is the [`ControlPlane`]; `commands` are xtask's
//! `control-plane` commands; `kind` restarts kind's kube-apiserver; `processes` has the process
//! and PID helpers; `http` is the client every probe goes through.
//!
//! ```no_run
//! use kinformer_controlplane::{ApiServerOutage as _, ControlPlane, Options, ensure_binaries};
//!
//! # fn main() -> Result<(), String> {
//! let dir = std::env::temp_dir().join("my-control-plane");
//! let binaries = ensure_binaries()?;
//! let mut plane = ControlPlane::start(&binaries, &Options::default(), &dir, false)?;
//! assert!(plane.kubeconfig().is_file());
//!
//! // Elsewhere (another process, given `dir`): crash kube-apiserver and bring it back.
//! let mut attached = ControlPlane::attach(&dir)?;
//! attached.kill_apiserver()?;
//! assert!(attached.apiserver_down());
//! attached.start_apiserver()?;
//! kinformer_controlplane::compact_etcd(attached.etcd_url())?;
//!
//! plane.stop();
//! # Ok(())
//! # }
//! ```

#![allow(
    clippy::print_stderr,
    reason = "starting a control plane takes seconds to minutes; its progress goes to stderr"
)]

mod apiserver;
mod build;
mod commands;
mod etcd;
mod http;
mod kind;
mod plane;
mod processes;
mod state;

use std::time::Duration;

pub use build::{Binaries, binary_dir, cache_root, ensure_binaries, kube_version_ldflags};
pub use commands::{down, print_env, restart_apiserver, running, up};
pub use etcd::compact as compact_etcd;
pub use http::Http;
pub use kind::KindNode;
pub use plane::ControlPlane;
pub use processes::run;

/// The Kubernetes release the binaries are built from; `xtask/controlplane/go.mod` pins it.
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// The etcd server release k8s.io/apiserver v0.37.2 requires (its go.mod), pinned the same way.
pub const ETCD_VERSION: &str = "v3.7.0";

/// Names the folder of the local control plane an e2e run uses (for [`ControlPlane::attach`]).
pub const CONTROL_PLANE_ENV: &str = "KINFORMER_E2E_CONTROL_PLANE";

/// Names the Docker container of a kind cluster's control-plane node (for [`KindNode::new`]).
pub const KIND_NODE_ENV: &str = "KINFORMER_E2E_KIND_NODE";

/// How long one probe of etcd or kube-apiserver may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a started control plane may take to answer `/readyz` and create `default`.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Knobs for kube-apiserver that the suite's tests care about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--etcd-compaction-interval` (kube-apiserver's default is 5m; `0` turns it off).
    pub etcd_compaction_interval: Option<String>,
    /// `--watch-cache=false`: every watch and list is served by etcd directly.
    pub no_watch_cache: bool,
}

/// Takes kube-apiserver down and brings it back, leaving etcd running: what the e2e test that
/// restarts kube-apiserver under a watching informer, `control-plane restart-apiserver` and the
/// soak do.
pub trait ApiServerOutage {
    /// SIGKILLs kube-apiserver (no graceful shutdown: every client sees its connections cut, as
    /// in a crash) and waits until it is gone.
    ///
    /// # Errors
    ///
    /// When kube-apiserver is not running, or does not go.
    fn kill_apiserver(&mut self) -> Result<(), String>;

    /// Starts kube-apiserver again with the flags it was first started with, and waits for
    /// `/readyz`.
    ///
    /// # Errors
    ///
    /// When kube-apiserver already runs, cannot be started, or is not ready in time (the
    /// message carries the end of its log where there is one).
    fn start_apiserver(&mut self) -> Result<(), String>;

    /// Whether kube-apiserver is down (after [`kill_apiserver`](Self::kill_apiserver)).
    fn apiserver_down(&mut self) -> bool;
}
