use serde_json::json;

use super::*;
use crate::benchsuite::scenarios::{QUICK, scenarios};

#[test]
fn every_run_runs_each_case_once_after_a_different_neighbour() {
    for cases in 1..=12 {
        let runs: Vec<Vec<usize>> = (0..6).map(|run| run_order(cases, run)).collect();
        for order in &runs {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..cases).collect::<Vec<_>>(), "{cases} cases");
        }
        // No case opens every run: the first case follows the previous run's last.
        if cases > 1 {
            assert_ne!(runs[0][0], runs[1][0], "{cases} cases");
        }
        // Within a run, no case follows the same case twice in the first three runs (two
        // with three cases: a case has only two others to follow).
        let before = |order: &[usize], case: usize| {
            let at = order.iter().position(|&c| c == case).expect("every case");
            at.checked_sub(1).map(|at| order[at])
        };
        for case in 0..cases {
            let neighbours: Vec<_> = runs[..3.min(cases.saturating_sub(1)).max(1)]
                .iter()
                .filter_map(|order| before(order, case))
                .collect();
            let mut distinct = neighbours.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                neighbours.len(),
                "{cases} cases: case {case} follows {neighbours:?}"
            );
        }
    }
}

#[test]
fn content_types_of_a_shared_server_count_only_what_the_run_added() {
    let before = json!({ "application/json": 10 });
    let after = json!({ "application/json": 14, "application/vnd.kubernetes.protobuf": 2 });
    assert_eq!(
        count_difference(&after, &before),
        json!({ "application/json": 4, "application/vnd.kubernetes.protobuf": 2 })
    );
}

/// On the real server the peers run one of their own scenarios: the real server has no
/// bench endpoints, so `memory-real` is the peers' `memory` and the rest their `sync-real`.
#[test]
fn peers_on_the_real_server_run_a_scenario_that_needs_no_bench_endpoints() {
    let programs = test_programs();
    for scenario in scenarios(QUICK) {
        let expected = match (scenario.server, scenario.name) {
            (Server::Fake, name) => name,
            (Server::Real, "memory-real") => "memory",
            (Server::Real, _) => "sync-real",
        };
        for case in &scenario.cases {
            let command = peer_command(&programs, &scenario, case, Path::new("kc"));
            let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy()).collect();
            let at = args
                .iter()
                .position(|a| a == "--scenario")
                .expect("--scenario");
            assert_eq!(args[at + 1], expected, "{} {}", scenario.name, case.label);
        }
    }
}

/// kinformer asks for protobuf in every memory shape, and client-go's metadata client does;
/// on the other scenarios a case asks for what its mode names.
#[test]
fn the_format_a_case_asks_for_follows_its_scenarios_modes() {
    let all = scenarios(QUICK);
    let find = |name: &str| all.iter().find(|s| s.name == name).expect(name);
    let label = |scenario: &Scenario, label: &str| -> bool {
        let case = scenario.cases.iter().find(|c| c.label == label);
        asks_for_protobuf(scenario, case.expect(label))
    };
    for memory in [find("memory"), find("memory-real")] {
        assert!(label(memory, "kinformer (full)"));
        assert!(label(memory, "kinformer (metadata) decoded cache"));
        assert!(!label(memory, "kube-runtime (full)"));
        assert!(!label(memory, "client-go (stripped)"));
        assert!(label(memory, "client-go (metadata)"));
        assert!(!label(memory, "kube-runtime (metadata)"));
    }
    let sync = find("sync-real");
    assert!(label(sync, "kinformer (protobuf)"));
    assert!(!label(sync, "kinformer"));
    assert!(label(sync, "client-go (protobuf first)"));
    assert!(!label(sync, "client-go (JSON)"));
}

/// A Rust peer's result must name the allocator its case asked for; client-go has one.
#[test]
fn a_rust_peer_on_another_allocator_than_asked_fails_the_run() {
    let all = scenarios(QUICK);
    let memory = all.iter().find(|s| s.name == "memory").expect("memory");
    let case = |label: &str| memory.cases.iter().find(|c| c.label == label).expect(label);
    let result = |allocator: &str| serde_json::json!({ "allocator": allocator });
    let system = case("kinformer (full) system allocator");
    let tuned = case("kinformer (full)");
    assert!(ran_on_its_allocator(system, &result("system"), "").is_ok());
    assert!(ran_on_its_allocator(system, &result("mimalloc"), "").is_err());
    assert!(ran_on_its_allocator(tuned, &result("mimalloc"), "").is_ok());
    assert!(ran_on_its_allocator(tuned, &result("system"), "").is_err());
    assert!(ran_on_its_allocator(tuned, &serde_json::json!({}), "").is_err());
    let go = case("client-go (full)");
    assert!(ran_on_its_allocator(go, &serde_json::json!({}), "").is_ok());
}

fn test_programs() -> Programs {
    Programs {
        kinformer: "kinformer-peer".into(),
        kube_runtime: "kube-runtime-peer".into(),
        client_go: "client-go-peer".into(),
        fake: "fake".into(),
        decode_floor: "decode-floor".into(),
        seed: "seed".into(),
    }
}

#[test]
fn rust_programs_fault_4k_pages_and_purge_at_once_only_where_memory_is_the_headline() {
    let programs = test_programs();
    let env_of = |command: &Command, name: &str| {
        command
            .get_envs()
            .find(|(key, _)| *key == name)
            .and_then(|(_, value)| value)
            .map(|value| value.to_string_lossy().into_owned())
    };
    let scenarios = scenarios(QUICK);
    let memory_headlines = ["memory", "memory-real", "shards-real"];
    for name in memory_headlines {
        assert!(
            scenarios.iter().any(|scenario| scenario.name == name),
            "{name}"
        );
    }
    let mut rust_cases = 0;
    for scenario in &scenarios {
        for case in &scenario.cases {
            let command = peer_command(&programs, scenario, case, Path::new("kubeconfig"));
            let rust = case.peer != Peer::ClientGo;
            rust_cases += usize::from(rust);
            let (thp, purge) = (
                env_of(&command, "MIMALLOC_ALLOW_THP"),
                env_of(&command, "MIMALLOC_PURGE_DELAY"),
            );
            assert_eq!(
                thp.as_deref(),
                rust.then_some("0"),
                "{} {}",
                scenario.name,
                case.label
            );
            let purges = rust && memory_headlines.contains(&scenario.name);
            assert_eq!(
                purge.as_deref(),
                purges.then_some("0"),
                "{} {}",
                scenario.name,
                case.label
            );
            let system = case.label.ends_with("system allocator");
            assert_eq!(
                env_of(&command, ALLOCATOR_ENV).as_deref(),
                system.then_some("system"),
                "{} {}",
                scenario.name,
                case.label
            );
            assert!(!system || rust, "{}", case.label);
        }
    }
    assert!(rust_cases > 0);
    let floor = decode_floor_command(&programs, Path::new("kubeconfig"));
    assert_eq!(env_of(&floor, "MIMALLOC_ALLOW_THP").as_deref(), Some("0"));
    assert_eq!(env_of(&floor, "MIMALLOC_PURGE_DELAY"), None);
    let fake = super::super::fake::command(&programs.fake, Path::new("kc"), "pods", 10);
    assert_eq!(env_of(&fake, "MIMALLOC_ALLOW_THP").as_deref(), Some("0"));
    assert_eq!(env_of(&fake, "MIMALLOC_PURGE_DELAY"), None);
}
