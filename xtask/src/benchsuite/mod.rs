//! `cargo xtask bench [--quick] [--scenario NAME]... [--case LABEL]... [--runs K]`: kinformer,
//! kube-runtime and client-go run the same informer scenarios against the same server,
//! alternately, and the results become docs/benchmarks.md and docs/bench-chart.svg.
//!
//! `--scenario` and `--case` (a case's label, as the report names it) narrow the run to a
//! comparison, for instance kinformer's default cache against its decoded cache on the steady
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
//!
//! A full run also saves its results as docs/bench-results.json, beside the report it writes
//! from them (with the commit, the machine and its load, and every peer's result line).
//! `--check-report` rebuilds the report and its chart from that file and fails unless they are
//! the committed ones byte for byte, so a figure edited by hand, or a change to the harness's
//! prose without rewriting the report, cannot stand.

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
    let sizes = sizes(options);
    let all = scenarios(sizes);
    for name in &options.scenarios {
        if name != "decode-floor" && !all.iter().any(|s| s.name == name) {
            return Err(format!(
                "unknown scenario {name:?}; known: {}, decode-floor",
                all.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let docs = project_root().join("docs");
    if options.check_report {
        return check_report(
            &docs.join(SAVED_RESULTS),
            &docs.join("benchmarks.md"),
            &docs.join("bench-chart.svg"),
        );
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
    let (markdown, svg) = rendered(&saved);
    let (md_path, svg_path) = if to_docs && !saved.quick {
        // The results go beside the report, so that CI can rebuild the report from them.
        let path = docs.join(SAVED_RESULTS);
        let json = serde_json::to_string_pretty(&saved.to_json())
            .map_err(|err| format!("encoding the results: {err}"))?;
        fs::write(&path, json + "\n")
            .map_err(|err| format!("writing {}: {err}", path.display()))?;
        (docs.join("benchmarks.md"), docs.join("bench-chart.svg"))
    } else {
        (out_dir.join("quick.md"), out_dir.join("bench-chart.svg"))
    };
    fs::write(&md_path, markdown).map_err(|err| format!("writing {}: {err}", md_path.display()))?;
    fs::write(&svg_path, svg).map_err(|err| format!("writing {}: {err}", svg_path.display()))?;
    eprintln!("bench: wrote {}", md_path.display());
    Ok(())
}

/// The results docs/benchmarks.md is written from, under docs/.
const SAVED_RESULTS: &str = "bench-results.json";

/// The report and its chart, as `saved` makes them.
fn rendered(saved: &Saved) -> (String, String) {
    let markdown = report(
        &saved.results,
        saved.floor.as_ref(),
        &saved.header,
        saved.sizes,
        saved.quick,
    );
    (markdown, chart_svg(&chart_bars(&saved.results)))
}

/// Whether `markdown` and `svg` are exactly what the saved `results` rebuild: a figure edited
/// by hand, or prose changed in the harness without rewriting the report, fails.
fn check_report(results: &Path, markdown: &Path, svg: &Path) -> Result<(), String> {
    let saved = load_results(results)?;
    let (want_markdown, want_svg) = rendered(&saved);
    for (path, want) in [(markdown, want_markdown), (svg, want_svg)] {
        let have =
            fs::read_to_string(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
        if have != want {
            let (line, have_line, want_line) = first_difference(&have, &want);
            return Err(format!(
                "{} is not what {} rebuilds; line {line} is\n  {have_line:?}\nwhere the results \
                 give\n  {want_line:?}\nThe report is only written by `cargo xtask bench`: \
                 rewrite it from the results with `cargo xtask bench --report {}`",
                path.display(),
                results.display(),
                results.display()
            ));
        }
    }
    eprintln!(
        "bench: {} and its chart are what {} rebuilds",
        markdown.display(),
        results.display()
    );
    Ok(())
}

/// The first line (from 1) where `have` and `want` differ, and that line of each.
fn first_difference<'a>(have: &'a str, want: &'a str) -> (usize, &'a str, &'a str) {
    let mut have_lines = have.lines();
    let mut want_lines = want.lines();
    for line in 1.. {
        match (have_lines.next(), want_lines.next()) {
            (Some(h), Some(w)) if h == w => {}
            (None, None) => return (line, "", ""),
            (h, w) => return (line, h.unwrap_or_default(), w.unwrap_or_default()),
        }
    }
    unreachable!("an unbounded range ends only by returning")
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

/// The sizes `options` ask for: every measured run follows a warm-up run of its case, but in
/// the quick check (which measures nothing it publishes) or with `--no-warm-up`.
fn sizes(options: &Bench) -> Sizes {
    let mut sizes = if options.quick { QUICK } else { FULL };
    if let Some(runs) = options.runs {
        sizes.runs = runs.max(1);
    }
    sizes.warm_up = !options.quick && !options.no_warm_up;
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report rebuilt from its saved results passes; a figure edited by hand in it, or
    /// in its chart, fails and names the line.
    #[test]
    fn measured_runs_are_warmed_up_unless_quick_or_told_not_to() {
        assert!(sizes(&Bench::default()).warm_up);
        let narrowed = Bench {
            runs: Some(1),
            ..Bench::default()
        };
        assert!(sizes(&narrowed).warm_up, "a narrowed run warms up too");
        let quick = Bench {
            quick: true,
            ..Bench::default()
        };
        assert!(!sizes(&quick).warm_up);
        let told = Bench {
            no_warm_up: true,
            ..Bench::default()
        };
        assert!(!sizes(&told).warm_up);
        assert_eq!(sizes(&told).runs, FULL.runs);
    }

    #[test]
    fn a_report_edited_by_hand_fails_the_check() {
        let saved = saved::example();
        let dir = std::env::temp_dir().join(format!("kinformer-check-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        let (results, markdown, svg) = (
            dir.join("results.json"),
            dir.join("benchmarks.md"),
            dir.join("chart.svg"),
        );
        fs::write(&results, saved.to_json().to_string()).expect("written");
        let (report, chart) = rendered(&saved);
        fs::write(&markdown, &report).expect("written");
        fs::write(&svg, &chart).expect("written");
        let passed = check_report(&results, &markdown, &svg);

        let planted = report.replacen("| kube-runtime | 20 |", "| kube-runtime | 19 |", 1);
        assert_ne!(
            planted, report,
            "the example has the row the edit plants into"
        );
        fs::write(&markdown, &planted).expect("written");
        let edited = check_report(&results, &markdown, &svg);
        fs::write(&markdown, &report).expect("written");
        fs::write(&svg, chart.replacen("</svg>", "<!-- --></svg>", 1)).expect("written");
        let edited_chart = check_report(&results, &markdown, &svg);
        let _ = fs::remove_dir_all(&dir);

        assert_eq!(passed, Ok(()));
        let error = edited.expect_err("a planted edit fails");
        let line = report
            .lines()
            .position(|line| line.contains("| kube-runtime | 20 |"))
            .expect("the row")
            + 1;
        assert!(error.contains(&format!("line {line} is")), "{error}");
        assert!(error.contains("| kube-runtime | 19 |"), "{error}");
        assert!(edited_chart.is_err());
    }

    #[test]
    fn the_first_difference_is_found_at_any_line_and_at_either_end() {
        assert_eq!(first_difference("a\nb\nc", "a\nB\nc"), (2, "b", "B"));
        assert_eq!(first_difference("a", "a\nb"), (2, "", "b"));
        assert_eq!(first_difference("x", "y"), (1, "x", "y"));
    }

    #[test]
    fn only_the_named_cases_run_and_an_unknown_label_is_refused() {
        let all = scenarios(QUICK);
        let label = "kinformer (protobuf) decoded cache";
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
