//! etcd: one member on free loopback ports, with a data dir under the run's folder and no fsync
//! (nothing here needs durability, and fsync on a loaded machine makes kube-apiserver slow), and
//! the compaction the e2e suite forces through its JSON gateway.

use std::{
    path::Path,
    process::{Child, Command},
};

use serde_json::json;

use crate::{PROBE_TIMEOUT, http::Http, processes::spawn_logged};

/// Starts etcd with its client URL `url` and its peer port `peer_port`, logging to
/// `dir/etcd.log`.
pub(crate) fn spawn(
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
pub(crate) fn healthy(url: &str) -> bool {
    Http::new(url, PROBE_TIMEOUT)
        .and_then(|etcd| etcd.get("/health"))
        .is_ok_and(|body| body.contains("true"))
}

/// Compacts the history of etcd at `url` (`http://127.0.0.1:PORT`) up to its current revision,
/// physically, through etcd's JSON gateway; returns that revision. Watches that resume from
/// before it then get 410 Expired, from etcd or (without a watch cache) from kube-apiserver.
///
/// It blocks, on an HTTP runtime of its own: from async code, call it in `spawn_blocking`.
///
/// # Errors
///
/// When etcd cannot be reached or refuses the compaction.
pub fn compact(url: &str) -> Result<u64, String> {
    let etcd = Http::new(url, PROBE_TIMEOUT)?;
    // Any key will do: the answer's header carries the store's revision.
    let range = etcd.post_json("/v3/kv/range", &json!({ "key": "AA==" }))?;
    let revision = &range["header"]["revision"];
    // The gateway writes 64-bit integers as strings.
    let revision = revision
        .as_str()
        .and_then(|text| text.parse().ok())
        .or_else(|| revision.as_u64())
        .ok_or_else(|| format!("etcd's range answer carries no revision: {range}"))?;
    let compacted = etcd.post_json(
        "/v3/kv/compaction",
        &json!({ "revision": revision.to_string(), "physical": true }),
    )?;
    if compacted.get("header").is_none() {
        return Err(format!("etcd did not compact to {revision}: {compacted}"));
    }
    Ok(revision)
}
