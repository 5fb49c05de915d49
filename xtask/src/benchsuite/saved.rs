//! `target/bench/results.json`: every result of one `cargo xtask bench`, saved so that
//! `--report FILE` can rewrite the report from it.

use std::{fs, path::Path};

use serde_json::Value;

use super::{
    report::{Header, ScenarioResults},
    runner::Run,
    scenarios::{FULL, QUICK, Sizes, scenarios},
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
                serde_json::json!({
                    "name": result.scenario.name,
                    "preparation": result.preparation,
                    "runs": runs,
                })
            })
            .collect();
        serde_json::json!({
            "date": self.header.date,
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
        if runs.len() != scenario.cases.len() {
            return Err(format!(
                "{}: {name} has {} cases saved but {} now",
                path.display(),
                runs.len(),
                scenario.cases.len()
            ));
        }
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
            machine: string("machine"),
            versions: string("versions"),
        },
        quick,
        sizes,
        results,
        floor: saved.get("floor").cloned().filter(|floor| !floor.is_null()),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::benchsuite::report::report;

    #[test]
    fn saved_results_load_back_into_the_same_report() {
        let scenario = scenarios(QUICK)
            .into_iter()
            .find(|s| s.name == "sync-configmaps")
            .expect("scenario");
        let run = |sync_ms: u64| Run {
            result: json!({ "sync_ms": sync_ms, "objects": 10, "views_agree": true }),
            content_types: "application/json ×1".into(),
        };
        let saved = Saved {
            header: Header {
                date: "2026-11-23 01:00 UTC".into(),
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
        };
        let dir = std::env::temp_dir().join(format!("kinformer-bench-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("results.json");
        fs::write(&path, saved.to_json().to_string()).expect("written");
        let loaded = load_results(&path).expect("loads");
        let _ = fs::remove_dir_all(&dir);
        let render = |s: &Saved| report(&s.results, s.floor.as_ref(), &s.header, s.sizes, s.quick);
        assert_eq!(render(&loaded), render(&saved));
        assert!(render(&loaded).contains("| kube-runtime | 20 |"));
    }
}
