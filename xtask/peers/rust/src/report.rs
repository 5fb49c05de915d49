//! The result line (the last line on stdout) and progress (stderr).

// Reporting on stdout and stderr is what a peer is for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Display;

use serde::Serialize;

use crate::latency::Percentiles;

/// A result as BENCH-PROTOCOL.md's "Result fields" lists them; the optional fields are
/// left out of the JSON when the scenario has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// `kinformer` or `kube-runtime`.
    pub peer: &'static str,
    /// `--mode`.
    pub mode: &'static str,
    /// `--scenario`.
    pub scenario: &'static str,
    /// The allocator the process ran on: `mimalloc` (the peers' tuned one) or `system`.
    pub allocator: &'static str,
    /// Objects in handler 0's view at the end.
    pub objects: usize,
    /// From starting the informer to synced.
    pub sync_ms: u64,
    /// CPU of the whole process, all threads.
    pub cpu_ms: u64,
    /// The part of `cpu_ms` spent in the kernel.
    pub sys_ms: u64,
    /// Minor page faults of the whole process.
    pub faults: u64,
    /// `VmHWM` (read before `relist` resets it).
    pub peak_rss_kib: u64,
    /// `VmRSS` with the client built, before any informer starts.
    pub baseline_rss_kib: u64,
    /// `VmRSS` after sync and a 2 s settle.
    pub steady_rss_kib: u64,
    /// Handler calls across all handlers.
    pub events: u64,
    /// The checksum of handler 0's view.
    pub checksum: String,
    /// Whether every handler's view equals handler 0's.
    pub views_agree: bool,
    /// Wall time from the admin call to the end of the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_ms: Option<u64>,
    /// CPU time from the admin call to the end of the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_cpu_ms: Option<u64>,
    /// The part of `phase_cpu_ms` spent in the kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_sys_ms: Option<u64>,
    /// Minor page faults from the admin call to the end of the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_faults: Option<u64>,
    /// Update latency (fanout: of the fast handlers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<Percentiles>,
    /// Update latency of the slow handler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_latency_us: Option<Percentiles>,
    /// `VmHWM` after the reset, at the end of the relist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relist_peak_rss_kib: Option<u64>,
    /// Update calls handler 0 received in the relist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relist_updates: Option<u64>,
    /// Delete calls handler 0 received in the relist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relist_deletes: Option<u64>,
    /// Lookups done by all readers in the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    /// `reads` per second of the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads_per_s: Option<u64>,
    /// Response body bytes the peer's client received from the server during the run, in
    /// KiB (counted by a layer under kube-client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_kib: Option<u64>,
    /// Responses the peer's client received during the run, by `Content-Type` (counted by the
    /// same layer), so a run against a real server shows which format it was served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_types: Option<std::collections::BTreeMap<String, u64>>,
    /// For a peer of one shard (`--shard`): who filters it, `server` or `client`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_mode: Option<String>,
    /// For a peer of one shard: how many objects of the shard the server holds, counted in a
    /// quorum list of every object after the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_objects_on_server: Option<usize>,
    /// What the peer emulates that its library does not do itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// The result of a peer that cannot run what was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unsupported {
    /// `kinformer` or `kube-runtime`.
    pub peer: &'static str,
    /// `--mode`.
    pub mode: &'static str,
    /// `--scenario`.
    pub scenario: &'static str,
    /// Why not.
    pub unsupported: String,
}

/// Prints `result` as the last line on stdout.
pub fn print_result(result: &impl Serialize) {
    match serde_json::to_string(result) {
        Ok(line) => println!("{line}"),
        // Plain data with string keys always serializes; say so loudly if that ever changes.
        Err(error) => eprintln!("the result does not serialize: {error}"),
    }
}

/// A progress line on stderr.
pub fn progress(message: impl Display) {
    eprintln!("{message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_scenario_fields_are_left_out_and_present_ones_are_named_as_the_protocol_says() {
        let mut report = Report {
            peer: "kinformer",
            mode: "json",
            scenario: "watch",
            allocator: "mimalloc",
            objects: 3,
            sync_ms: 10,
            cpu_ms: 20,
            peak_rss_kib: 30,
            baseline_rss_kib: 5,
            steady_rss_kib: 25,
            events: 9,
            checksum: "cbf29ce484222325".into(),
            views_agree: true,
            ..Report::default()
        };
        let json = serde_json::to_value(&report).expect("serializes");
        let keys: Vec<&str> = json
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = [
            "peer",
            "mode",
            "scenario",
            "allocator",
            "objects",
            "sync_ms",
            "cpu_ms",
            "sys_ms",
            "faults",
            "peak_rss_kib",
            "baseline_rss_kib",
            "steady_rss_kib",
            "events",
            "checksum",
            "views_agree",
        ];
        expected.sort_unstable();
        let mut keys_sorted = keys.clone();
        keys_sorted.sort_unstable();
        assert_eq!(keys_sorted, expected);

        report.latency_us = Some(Percentiles::of(&mut [5, 1]));
        let json = serde_json::to_value(&report).expect("serializes");
        assert_eq!(
            json["latency_us"],
            serde_json::json!({"p50": 1, "p99": 5, "p999": 5, "max": 5, "samples": 2})
        );
    }
}
