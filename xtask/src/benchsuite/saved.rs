//! `target/bench/results.json` (and, for a full run, docs/bench-results.json): every result of
//! one `cargo xtask bench`, saved so that `--report FILE` can rewrite the report from it and
//! `--check-report` can check the committed one.

use std::{fs, path::Path};

use serde_json::Value;

use super::{
    report::{Header, ScenarioResults},
    runner::Run,
    scenarios::{FULL, QUICK, Scenario, Sizes, scenarios},
};

/// Every result of one `cargo xtask bench`, as saved to `target/bench/results.json`.
#[derive(Debug)]
pub(super) struct Saved {
    pub(super) header: Header,
    pub(super) quick: bool,
    pub(super) sizes: Sizes,
    pub(super) results: Vec<ScenarioResults>,
    pub(super) floor: Option<Value>,
}

impl Saved {
    pub(super) fn to_json(&self) -> Value {
        let scenarios: Vec<Value> = self
            .results
            .iter()
            .map(|result| {
                let runs: Vec<Vec<Value>> = result
                    .runs
                    .iter()
                    .map(|case| {
                        case.iter()
                            .map(|run| {
                                serde_json::json!({
                                    "result": run.result,
                                    "content_types": run.content_types,
                                })
                            })
                            .collect()
                    })
                    .collect();
                let cases: Vec<&str> = result
                    .scenario
                    .cases
                    .iter()
                    .map(|case| case.label.as_str())
                    .collect();
                serde_json::json!({
                    "name": result.scenario.name,
                    "preparation": result.preparation,
                    "cases": cases,
                    "runs": runs,
                })
            })
            .collect();
        serde_json::json!({
            "date": self.header.date,
            "commit": self.header.commit,
            "machine": self.header.machine,
            "versions": self.header.versions,
            "quick": self.quick,
            "runs": self.sizes.runs,
            "warm_up": self.sizes.warm_up,
            "floor": self.floor,
            "scenarios": scenarios,
        })
    }
}

pub(super) fn load_results(path: &Path) -> Result<Saved, String> {
    let text =
        fs::read_to_string(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
    let saved: Value =
        serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))?;
    let string = |key: &str| {
        saved
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let quick = saved.get("quick").and_then(Value::as_bool).unwrap_or(false);
    let mut sizes = if quick { QUICK } else { FULL };
    sizes.runs = saved
        .get("runs")
        .and_then(Value::as_u64)
        .map_or(sizes.runs, |runs| runs as usize);
    sizes.warm_up = saved
        .get("warm_up")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let all = scenarios(sizes);
    let mut results = Vec::new();
    for entry in saved
        .get("scenarios")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let scenario = all
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| format!("{}: unknown scenario {name:?}", path.display()))?
            .clone();
        let runs: Vec<Vec<Run>> = entry
            .get("runs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|case| {
                case.as_array()
                    .into_iter()
                    .flatten()
                    .map(|run| Run {
                        result: run.get("result").cloned().unwrap_or(Value::Null),
                        content_types: run
                            .get("content_types")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    })
                    .collect()
            })
            .collect();
        let runs = by_case(&scenario, entry.get("cases"), runs)
            .map_err(|why| format!("{}: {name}: {why}", path.display()))?;
        results.push(ScenarioResults {
            scenario,
            runs,
            preparation: entry
                .get("preparation")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        });
    }
    Ok(Saved {
        header: Header {
            date: string("date"),
            commit: Some(string("commit"))
                .filter(|commit| !commit.is_empty())
                .unwrap_or_else(|| "?".to_owned()),
            machine: string("machine"),
            versions: string("versions"),
        },
        quick,
        sizes,
        results,
        floor: saved.get("floor").cloned().filter(|floor| !floor.is_null()),
    })
}

/// The saved `runs` in the order of the scenario's cases, matched by the labels saved beside
/// them (by position for results saved without labels); an error for a case saved that the
/// scenario no longer has, or one it has that was not saved, so no row is mislabelled.
fn by_case(
    scenario: &Scenario,
    labels: Option<&Value>,
    runs: Vec<Vec<Run>>,
) -> Result<Vec<Vec<Run>>, String> {
    let Some(labels) = labels else {
        if runs.len() != scenario.cases.len() {
            return Err(format!(
                "{} cases saved but {} now",
                runs.len(),
                scenario.cases.len()
            ));
        }
        return Ok(runs);
    };
    let labels: Vec<&str> = labels
        .as_array()
        .into_iter()
        .flatten()
        .map(|label| label.as_str().unwrap_or_default())
        .collect();
    if labels.len() != runs.len() {
        return Err(format!(
            "{} case labels saved for {} cases",
            labels.len(),
            runs.len()
        ));
    }
    let mut saved: Vec<(&str, Vec<Run>)> = labels.into_iter().zip(runs).collect();
    let mut ordered = Vec::with_capacity(scenario.cases.len());
    for case in &scenario.cases {
        let at = saved
            .iter()
            .position(|(label, _)| *label == case.label)
            .ok_or_else(|| format!("no results saved for the case {:?}", case.label))?;
        ordered.push(saved.swap_remove(at).1);
    }
    if let Some((label, _)) = saved.first() {
        return Err(format!("results saved for {label:?}, which is no case now"));
    }
    Ok(ordered)
}

/// Results of one scenario, three cases of one run each, for the tests.
#[cfg(test)]
pub(super) fn example() -> Saved {
    use serde_json::json;

    let scenario = scenarios(QUICK)
        .into_iter()
        .find(|s| s.name == "sync-configmaps")
        .expect("scenario");
    let run = |sync_ms: u64| Run {
        result: json!({ "sync_ms": sync_ms, "objects": 10, "views_agree": true }),
        content_types: "application/json ×1".into(),
    };
    Saved {
        header: Header {
            date: "2026-11-23 01:00 UTC".into(),
            commit: "0123456789ab".into(),
            machine: "2 cores".into(),
            versions: "kinformer 0.1.0".into(),
        },
        quick: true,
        sizes: QUICK,
        results: vec![ScenarioResults {
            runs: vec![vec![run(10)], vec![run(20)], vec![run(40)]],
            scenario,
            preparation: "seeded".into(),
        }],
        floor: Some(json!({ "objects": 10, "single_ms": 5.0 })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchsuite::report::report;

    #[test]
    fn saved_results_load_back_into_the_same_report() {
        let saved = example();
        let dir = std::env::temp_dir().join(format!("kinformer-bench-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("results.json");
        fs::write(&path, saved.to_json().to_string()).expect("written");
        let loaded = load_results(&path).expect("loads");
        let _ = fs::remove_dir_all(&dir);
        let render = |s: &Saved| report(&s.results, s.floor.as_ref(), &s.header, s.sizes, s.quick);
        assert_eq!(render(&loaded), render(&saved));
        assert!(render(&loaded).contains("| kube-runtime | 20 |"));
        assert!(render(&loaded).contains("at commit `0123456789ab`"));
    }

    /// Saved runs follow their labels into the scenario's order; a label the scenario lacks,
    /// or a case with no saved runs, is refused rather than mislabelled.
    #[test]
    fn saved_runs_are_matched_to_cases_by_label() {
        let saved = example();
        let scenario = &saved.results[0].scenario;
        let labels: Vec<String> = scenario.cases.iter().map(|c| c.label.clone()).collect();
        let run = |ms: u64| {
            vec![Run {
                result: serde_json::json!({ "sync_ms": ms }),
                content_types: String::new(),
            }]
        };
        let sync = |runs: &[Vec<Run>]| -> Vec<Value> {
            runs.iter()
                .map(|r| r[0].result["sync_ms"].clone())
                .collect()
        };
        let n = labels.len();
        let reversed: Vec<&str> = labels.iter().rev().map(String::as_str).collect();
        let ordered = by_case(
            scenario,
            Some(&serde_json::json!(reversed)),
            (0..n as u64).map(run).collect(),
        )
        .expect("every case saved");
        let expected: Vec<Value> = (0..n as u64).rev().map(Value::from).collect();
        assert_eq!(sync(&ordered), expected);

        let mut renamed = reversed.clone();
        renamed[0] = "kinformer (yaml)";
        let error = by_case(
            scenario,
            Some(&serde_json::json!(renamed)),
            (0..n as u64).map(run).collect(),
        )
        .expect_err("a case the scenario lacks");
        assert!(error.contains(reversed[0]), "{error}");
        let unlabelled = by_case(scenario, None, (0..n as u64).map(run).collect());
        assert_eq!(
            sync(&unlabelled.expect("by position")),
            (0..n as u64).map(Value::from).collect::<Vec<_>>()
        );
        assert!(by_case(scenario, None, vec![run(1)]).is_err());
    }
}
