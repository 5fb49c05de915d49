//! etcd: one member on free loopback ports, with a data dir under the run's folder and no fsync
//! (nothing here needs durability, and fsync on a loaded machine makes kube-apiserver slow).

use std::{
    path::Path,
    process::{Child, Command},
};

use super::{PROBE_TIMEOUT, processes::spawn_logged};
use crate::http::Http;

/// Starts etcd with its client URL `url` and its peer port `peer_port`, logging to
/// `dir/etcd.log`.
pub(super) fn spawn(
    binary: &Path,
    dir: &Path,
    url: &str,
    peer_port: u16,
    detached: bool,
) -> Result<Child, String> {
    let mut etcd = Command::new(binary);
    etcd.arg("--name=kinformer")
        .arg(format!("--data-dir={}", dir.join("etcd-data").display()))
        .arg(format!("--listen-client-urls={url}"))
        .arg(format!("--advertise-client-urls={url}"))
        .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
        .arg(format!(
            "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
        ))
        .arg(format!(
            "--initial-cluster=kinformer=http://127.0.0.1:{peer_port}"
        ))
        .arg("--unsafe-no-fsync")
        .arg("--log-level=warn");
    spawn_logged(etcd, &dir.join("etcd.log"), detached, false)
}

/// Whether etcd at `url` reports itself healthy.
pub(super) fn healthy(url: &str) -> bool {
    Http::new(url, PROBE_TIMEOUT)
        .and_then(|etcd| etcd.get("/health"))
        .is_ok_and(|body| body.contains("true"))
}
