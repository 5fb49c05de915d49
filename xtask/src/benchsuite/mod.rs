//! `cargo xtask bench [--quick] [--scenario NAME]... [--case LABEL]... [--runs K]`: kinformer,
//! kube-runtime and client-go run the same informer scenarios against the same server,
//! alternately, and the results become docs/benchmarks.md and docs/bench-chart.svg.
//!
//! `--scenario` and `--case` (a case's label, as the report names it) narrow the run to a
//! comparison, for instance kinformer's default cache against its compact cache on the steady
//! watch; such a run writes `target/bench/quick.md`, not docs/.
//!
//! The contract between this harness, the fake API server's bench endpoints and the peers is
//! xtask/peers/BENCH-PROTOCOL.md. Every peer run gets a freshly seeded server, and every result
//! is checked against the server before it counts: a peer whose handlers' view does not match
//! the server's objects fails the run, so no row is fast because it dropped events.
//!
//! `--quick` runs every scenario once with small sizes and debug builds (which `cargo test
//! --workspace` has already compiled), asserts that every peer ran and agreed with the server,
//! and writes its tables to `target/bench/quick.md` instead of docs/: timings there mean
//! nothing.
//!
//! The pieces: `scenarios` says what runs (sizes, peers, cases) and `metrics` what is read from
//! a result line; `runner` builds the peers and runs every case against a `fake` API server or
//! the real control plane, checking it against the server; `report`, `targets` and `chart`
//! turn the results into docs/benchmarks.md and its chart; `saved` keeps them in
//! `target/bench/results.json` so `--report` can rewrite the report without running anything.

mod chart;
mod fake;
mod metrics;
mod report;
mod runner;
mod saved;
mod scenarios;
mod targets;

use std::{fs, path::Path, time::Instant};

use chart::{chart_bars, chart_svg};
use report::{Header, report};
use runner::{build, decode_floor, run_scenario};
use saved::{Saved, load_results};
use scenarios::{FULL, QUICK, Scenario, Sizes, scenarios};

use crate::{flags::Bench, project_root};

/// Runs `cargo xtask bench` with the informer scenarios.
pub(crate) fn run(options: &Bench) -> Result<(), String> {
    let mut sizes = if options.quick { QUICK } else { FULL };
    if let Some(runs) = options.runs {
        sizes.runs = runs.max(1);
    }
    sizes.warm_up = options.warm_up;
    let all = scenarios(sizes);
    for name in &options.scenarios {
        if name != "decode-floor" && !all.iter().any(|s| s.name == name) {
            return Err(format!(
                "unknown scenario {name:?}; known: {}, decode-floor",
                all.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let all = only_cases(all, &options.cases)?;
    let out_dir = crate::bench::target_dir(&project_root()).join("bench");
    fs::create_dir_all(&out_dir).map_err(|err| format!("creating {}: {err}", out_dir.display()))?;
    let to_docs = !options.quick && options.scenarios.is_empty() && options.cases.is_empty();
    let saved = match &options.report_from {
        Some(path) => load_results(path)?,
        None => {
            let saved = run_all(options, sizes, &all, &out_dir)?;
            let path = out_dir.join(if to_docs {
                "results.json"
            } else {
                "quick-results.json"
            });
            fs::write(&path, saved.to_json().to_string())
                .map_err(|err| format!("writing {}: {err}", path.display()))?;
            saved
        }
    };
    let markdown = report(
        &saved.results,
        saved.floor.as_ref(),
        &saved.header,
        saved.sizes,
        saved.quick,
    );
    let svg = chart_svg(&chart_bars(&saved.results));
    let (md_path, svg_path) = if to_docs && !saved.quick {
        let docs = project_root().join("docs");
        (docs.join("benchmarks.md"), docs.join("bench-chart.svg"))
    } else {
        (out_dir.join("quick.md"), out_dir.join("bench-chart.svg"))
    };
    fs::write(&md_path, markdown).map_err(|err| format!("writing {}: {err}", md_path.display()))?;
    fs::write(&svg_path, svg).map_err(|err| format!("writing {}: {err}", svg_path.display()))?;
    eprintln!("bench: wrote {}", md_path.display());
    Ok(())
}

/// `all` with only the cases labelled one of `labels` (every case when there are none), and
/// without the scenarios left with none; an error for a label no case has.
fn only_cases(all: Vec<Scenario>, labels: &[String]) -> Result<Vec<Scenario>, String> {
    if labels.is_empty() {
        return Ok(all);
    }
    if let Some(unknown) = labels.iter().find(|label| {
        !all.iter()
            .flat_map(|s| &s.cases)
            .any(|c| &c.label == *label)
    }) {
        let mut known: Vec<&str> = all
            .iter()
            .flat_map(|s| &s.cases)
            .map(|c| c.label.as_str())
            .collect();
        known.sort_unstable();
        known.dedup();
        return Err(format!(
            "no case is labelled {unknown:?}; the labels: {}",
            known.join(", ")
        ));
    }
    Ok(all
        .into_iter()
        .filter_map(|mut scenario| {
            scenario.cases.retain(|case| labels.contains(&case.label));
            (!scenario.cases.is_empty()).then_some(scenario)
        })
        .collect())
}

fn run_all(
    options: &Bench,
    sizes: Sizes,
    all: &[Scenario],
    out_dir: &Path,
) -> Result<Saved, String> {
    let chosen =
        |name: &str| options.scenarios.is_empty() || options.scenarios.iter().any(|s| s == name);
    let header = Header::now();
    let programs = build(options.quick)?;
    let work = out_dir.join("work");
    fs::create_dir_all(&work).map_err(|err| format!("creating {}: {err}", work.display()))?;
    let started = Instant::now();
    let mut results = Vec::new();
    for scenario in all.iter().filter(|s| chosen(s.name)) {
        results.push(run_scenario(
            &programs,
            scenario,
            sizes,
            &work,
            options.quick,
        )?);
        // Saved after every scenario, so a run cut short keeps what it measured.
        let partial = Saved {
            header: header.clone(),
            quick: options.quick,
            sizes,
            results: results.clone(),
            floor: None,
        };
        let path = out_dir.join("partial-results.json");
        fs::write(&path, partial.to_json().to_string())
            .map_err(|err| format!("writing {}: {err}", path.display()))?;
    }
    let floor = if chosen("decode-floor") {
        Some(decode_floor(&programs, sizes.objects, &work)?)
    } else {
        None
    };
    eprintln!(
        "bench: {} scenario(s) in {:.0} s; every peer ran and agreed with the server",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(Saved {
        header,
        quick: options.quick,
        sizes,
        results,
        floor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_cases_run_and_an_unknown_label_is_refused() {
        let all = scenarios(QUICK);
        let label = "kinformer (protobuf) compact cache";
        let chosen = only_cases(all.clone(), &[label.to_owned()]).expect("a known label");
        assert!(!chosen.is_empty());
        assert!(
            chosen.len() < all.len(),
            "scenarios without the case are left out"
        );
        for scenario in &chosen {
            let labels: Vec<&str> = scenario.cases.iter().map(|c| c.label.as_str()).collect();
            assert_eq!(labels, [label], "{}", scenario.name);
        }
        assert_eq!(
            only_cases(all.clone(), &[]).expect("no filter").len(),
            all.len()
        );
        let error = only_cases(all, &["kinformer (yaml)".to_owned()]).expect_err("unknown");
        assert!(
            error.contains("\"kinformer (yaml)\"") && error.contains(label),
            "{error}"
        );
    }
}
