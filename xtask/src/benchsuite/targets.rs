//! The issues' performance targets, each with the measured ratio and whether it is met.

use std::fmt::Write as _;

use serde_json::Value;

use super::{
    metrics::{
        Better, CPU_MS, CPU_US_PER_EVENT, FAULTS_K, KIB_PER_OBJECT, Metric, P99_MS, READS_PER_S,
        RECEIVED_MIB, RELIST_PEAK_OVER_STEADY, STEADY_MIB, SYNC_MS, UPDATES_PER_S,
    },
    report::{ScenarioResults, protobuf_floor_ms},
    scenarios::Peer,
};

/// A target: kinformer's figure over another implementation's, in one scenario.
struct Target {
    what: &'static str,
    scenario: &'static str,
    metric: Metric,
    kinformer: &'static str,
    other: &'static str,
    /// kinformer / other must be at most (`Lower`) or at least (`Higher`) this.
    bound: f64,
}

impl Target {
    /// The measured ratio, when both cases ran.
    fn ratio(&self, results: &[ScenarioResults]) -> Option<f64> {
        let result = results.iter().find(|r| r.scenario.name == self.scenario)?;
        let find = |label: &str| result.scenario.cases.iter().position(|c| c.label == label);
        let (k, o) = find(self.kinformer).zip(find(self.other))?;
        Some(result.summary(k, &self.metric)?.median / result.summary(o, &self.metric)?.median)
    }

    fn met(&self, ratio: f64) -> bool {
        match self.metric.better {
            Better::Lower => ratio <= self.bound,
            Better::Higher => ratio >= self.bound,
        }
    }
}

/// The targets the issues set, between two cases of one scenario. kinformer's side is its
/// default (the factory's compact cache) unless the target names the decoded cache.
fn target_list() -> [Target; 21] {
    let target = |what, scenario, metric, kinformer, other, bound| Target {
        what,
        scenario,
        metric,
        kinformer,
        other,
        bound,
    };
    [
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
            "index reads >= 2x client-go (2 readers)",
            "lookups",
            READS_PER_S,
            "kinformer 2 readers",
            "client-go (JSON) 2 readers",
            2.0,
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
            "the same with the decoded cache (8 readers)",
            "lookups",
            READS_PER_S,
            "kinformer decoded cache 8 readers",
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
            "protobuf sync time <= 0.35x client-go on protobuf",
            "sync-pods",
            SYNC_MS,
            "kinformer (protobuf)",
            "client-go (protobuf first)",
            0.35,
        ),
        target(
            "page faults during a protobuf sync <= 1.0x client-go on protobuf",
            "sync-pods",
            FAULTS_K,
            "kinformer (protobuf)",
            "client-go (protobuf first)",
            1.0,
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
            "protobuf watch CPU per handler call <= 0.75x client-go on protobuf",
            "watch",
            CPU_US_PER_EVENT,
            "kinformer (protobuf)",
            "client-go (protobuf first)",
            0.75,
        ),
        target(
            "JSON watch throughput >= 1.5x kube-runtime",
            "watch",
            UPDATES_PER_S,
            "kinformer",
            "kube-runtime",
            1.5,
        ),
        target(
            "memory per Pod, full objects <= 0.5x client-go",
            "memory",
            KIB_PER_OBJECT,
            "kinformer (full)",
            "client-go (full)",
            0.5,
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
        target(
            "memory per Pod on a real kube-apiserver <= 0.5x client-go",
            "memory-real",
            KIB_PER_OBJECT,
            "kinformer (full)",
            "client-go (full)",
            0.5,
        ),
        target(
            "the same on the system allocator <= 0.5x client-go",
            "memory-real",
            KIB_PER_OBJECT,
            "kinformer (full) system allocator",
            "client-go (full)",
            0.5,
        ),
        target(
            "a replica of one shard of 3: steady RSS <= 0.4x one informing every Pod",
            "shards-real",
            STEADY_MIB,
            "kinformer (protobuf) shard 1 of 3",
            "kinformer (protobuf)",
            0.4,
        ),
        target(
            "a replica of one shard of 3: bytes received <= 0.4x one informing every Pod",
            "shards-real",
            RECEIVED_MIB,
            "kinformer (protobuf) shard 1 of 3",
            "kinformer (protobuf)",
            0.4,
        ),
        target(
            "a replica of one shard of 3: CPU <= 0.4x one informing every Pod",
            "shards-real",
            CPU_MS,
            "kinformer (protobuf) shard 1 of 3",
            "kinformer (protobuf)",
            0.4,
        ),
    ]
}

fn met_mark(met: bool) -> &'static str {
    if met { "yes" } else { "**no**" }
}

/// The issues' targets, each with the measured ratio and whether it is met: the list above,
/// then kinformer's protobuf sync against the decode floor and its relist memory peak.
pub(super) fn targets(results: &[ScenarioResults], floor: Option<&Value>) -> String {
    let mut out = String::from("| target | kinformer / other | met |\n| --- | ---: | --- |\n");
    for target in target_list() {
        let Some(ratio) = target.ratio(results) else {
            continue;
        };
        let _ = writeln!(
            out,
            "| {} | {ratio:.2}x | {} |",
            target.what,
            met_mark(target.met(ratio))
        );
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
            met_mark(s.median <= 1.3)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchsuite::scenarios::{FULL, scenarios};

    /// A target whose scenario or cases do not exist would silently drop out of the report.
    #[test]
    fn every_target_compares_two_cases_of_a_scenario_on_one_of_its_metrics() {
        let all = scenarios(FULL);
        for target in target_list() {
            let scenario = all
                .iter()
                .find(|s| s.name == target.scenario)
                .unwrap_or_else(|| panic!("{}: no scenario {}", target.what, target.scenario));
            for label in [target.kinformer, target.other] {
                assert!(
                    scenario.cases.iter().any(|c| c.label == label),
                    "{}: {} has no case {label:?}",
                    target.what,
                    target.scenario
                );
            }
            assert!(
                scenario
                    .metrics
                    .iter()
                    .any(|m| m.label == target.metric.label),
                "{}: {} does not measure {}",
                target.what,
                target.scenario,
                target.metric.label
            );
        }
    }
}
