//! docs/benchmarks.md: the method, each scenario's table (median and min–max of every case, and
//! kinformer's advantage on the headline figure), the decode floor and the targets.

use std::{fmt::Write as _, fs};

use serde_json::Value;

use super::{
    metrics::{Better, Metric, SYNC_MS, field},
    runner::Run,
    scenarios::{Case, Peer, Scenario, Sizes},
    targets::targets,
};
use crate::project_root;

/// Median, min and max of some figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Summary {
    pub(super) median: f64,
    pub(super) min: f64,
    pub(super) max: f64,
}

pub(super) fn summarize(values: &[f64]) -> Option<Summary> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if !sorted.len().is_multiple_of(2) {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    };
    Some(Summary {
        median,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
    })
}

/// kinformer's advantage over `other` on `metric`: above 1 means kinformer is better.
pub(super) fn advantage(metric: &Metric, kinformer: f64, other: f64) -> f64 {
    match metric.better {
        Better::Lower => other / kinformer,
        Better::Higher => kinformer / other,
    }
}

pub(super) fn format_figure(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    // Thousands separators for the big integers: 100000 reads worse than 100,000.
    if decimals == 0 && value.abs() >= 10_000.0 {
        let digits: Vec<char> = text.trim_start_matches('-').chars().collect();
        let mut out = String::new();
        for (i, c) in digits.iter().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(*c);
        }
        if value < 0.0 {
            out.insert(0, '-');
        }
        out
    } else {
        text
    }
}

pub(super) fn format_ratio(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.0}x")
    } else {
        format!("{ratio:.2}x")
    }
}

/// The results of one scenario, case by case, run by run.
#[derive(Debug, Clone)]
pub(super) struct ScenarioResults {
    pub(super) scenario: Scenario,
    pub(super) runs: Vec<Vec<Run>>,
    /// How the server was prepared (seeding time of the real one, which is not in any figure).
    pub(super) preparation: String,
}

impl ScenarioResults {
    pub(super) fn summary(&self, case: usize, metric: &Metric) -> Option<Summary> {
        let values: Vec<f64> = self.runs[case]
            .iter()
            .filter_map(|run| (metric.read)(&run.result))
            .collect();
        summarize(&values)
    }

    /// The kinformer case to compare `case` with: the one with the same extra arguments
    /// (readers) and environment (allocator) in the same mode, else (outside the scenarios
    /// whose modes are object shapes) the first with the same arguments and environment.
    pub(super) fn kinformer_counterpart(&self, case: usize) -> Option<usize> {
        let this = &self.scenario.cases[case];
        let cases = &self.scenario.cases;
        let comparable =
            |c: &Case| c.peer == Peer::Kinformer && c.extra == this.extra && c.env == this.env;
        cases
            .iter()
            .position(|c| comparable(c) && c.mode == this.mode)
            .or_else(|| {
                (!self.scenario.modes_are_shapes())
                    .then(|| cases.iter().position(comparable))
                    .flatten()
            })
    }

    /// kinformer's median advantage over `case` on the headline metric.
    pub(super) fn headline_advantage(&self, case: usize) -> Option<f64> {
        let metric = self.scenario.metrics.first()?;
        let kinformer = self.kinformer_counterpart(case)?;
        Some(advantage(
            metric,
            self.summary(kinformer, metric)?.median,
            self.summary(case, metric)?.median,
        ))
    }

    pub(super) fn table(&self) -> String {
        let scenario = &self.scenario;
        let mut out = String::new();
        let _ = write!(out, "| implementation |");
        for metric in &scenario.metrics {
            let _ = write!(out, " {} |", metric.label);
        }
        let _ = writeln!(out, " kinformer's advantage | served as |");
        let _ = write!(out, "| --- |");
        for _ in &scenario.metrics {
            let _ = write!(out, " ---: |");
        }
        let _ = writeln!(out, " ---: | --- |");
        for (index, case) in scenario.cases.iter().enumerate() {
            let _ = write!(out, "| {} |", case.label);
            if let Some(why) = self.runs[index].iter().find_map(Run::failure) {
                let _ = writeln!(out, " **did not finish**: {why} |");
                continue;
            }
            if let Some(why) = self.runs[index]
                .first()
                .and_then(|run| run.result.get("unsupported"))
            {
                let _ = writeln!(out, " unsupported: {} |", why.as_str().unwrap_or_default());
                continue;
            }
            for metric in &scenario.metrics {
                match self.summary(index, metric) {
                    Some(s) if self.runs[index].len() > 1 => {
                        let _ = write!(
                            out,
                            " {} ({}–{}) |",
                            format_figure(s.median, metric.decimals),
                            format_figure(s.min, metric.decimals),
                            format_figure(s.max, metric.decimals)
                        );
                    }
                    Some(s) => {
                        let _ = write!(out, " {} |", format_figure(s.median, metric.decimals));
                    }
                    None => {
                        let _ = write!(out, " – |");
                    }
                }
            }
            let advantage = match (case.peer, self.headline_advantage(index)) {
                (Peer::Kinformer, _) => "–".to_owned(),
                (_, Some(ratio)) if ratio.is_finite() && ratio > 0.0 => format_ratio(ratio),
                (_, _) => "–".to_owned(),
            };
            let served = self.runs[index]
                .first()
                .map(|run| run.content_types.clone())
                .unwrap_or_default();
            let _ = writeln!(out, " {advantage} | {served} |");
        }
        out
    }
}

/// The faster of the protobuf decode floor's one-thread and all-thread times.
pub(super) fn protobuf_floor_ms(floor: &Value) -> Option<f64> {
    let single = field(floor, "/protobuf_single_ms")?;
    let parallel = field(floor, "/protobuf_parallel_ms").unwrap_or(single);
    Some(single.min(parallel))
}

/// The commit of the checkout, `-dirty` when it has changes (`?` outside a git checkout).
fn commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(project_root())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|commit| !commit.is_empty())
        .unwrap_or_else(|| "?".to_owned())
}

fn versions() -> String {
    let lock = fs::read_to_string(project_root().join("Cargo.lock")).unwrap_or_default();
    let version_of = |name: &str| {
        let needle = format!("name = \"{name}\"\nversion = \"");
        lock.find(&needle)
            .map(|at| {
                let rest = &lock[at + needle.len()..];
                rest[..rest.find('"').unwrap_or(0)].to_owned()
            })
            .unwrap_or_else(|| "?".into())
    };
    let go_mod =
        fs::read_to_string(project_root().join("xtask/peers/client-go/go.mod")).unwrap_or_default();
    let client_go = go_mod
        .lines()
        .find_map(|line| line.trim().strip_prefix("k8s.io/client-go "))
        .unwrap_or("?")
        .to_owned();
    format!(
        "kinformer {}, kube-runtime {}, kube-client {}, k8s-openapi {}, client-go {client_go}, {}",
        version_of("kinformer"),
        version_of("kube-runtime"),
        version_of("kube-client"),
        version_of("k8s-openapi"),
        crate::bench::go_version(&project_root().join("xtask/peers/client-go"))
    )
}

/// When and where a run happened, kept with its results so a rewritten report keeps them.
#[derive(Debug, Clone)]
pub(super) struct Header {
    pub(super) date: String,
    /// The commit the run measured (`git describe --always --dirty`).
    pub(super) commit: String,
    pub(super) machine: String,
    pub(super) versions: String,
}

impl Header {
    pub(super) fn now() -> Self {
        Self {
            date: crate::bench::today(),
            commit: commit(),
            machine: crate::bench::machine(),
            versions: versions(),
        }
    }
}

/// The whole of docs/benchmarks.md (or, `quick`, of `target/bench/quick.md`).
pub(super) fn report(
    results: &[ScenarioResults],
    floor: Option<&Value>,
    header: &Header,
    sizes: Sizes,
    quick: bool,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Written by `cargo xtask bench{}` on {}, at commit `{}`{}. Do not edit by hand: the \
         prose comes from `xtask/src/benchsuite/` and `docs/bench-sections/micro.md`.\n",
        if quick { " --quick" } else { "" },
        header.date,
        header.commit,
        if quick {
            ""
        } else {
            ", from the results it saved in `docs/bench-results.json`, which \
             `cargo xtask bench --check-report` rebuilds this file from"
        }
    );
    let _ = writeln!(
        out,
        "**Machine:** {}. **Versions:** {}.\n",
        header.machine, header.versions
    );
    let _ = writeln!(out, "{}", method(sizes));
    let _ = writeln!(out, "![kinformer's advantage](bench-chart.svg)\n");
    let _ = writeln!(out, "{}", reading());
    for result in results {
        let scenario = &result.scenario;
        let _ = writeln!(out, "## {}\n", scenario.title);
        let _ = writeln!(
            out,
            "{} Server: {}. `--scenario {}`.\n",
            scenario.what, result.preparation, scenario.name
        );
        let _ = writeln!(out, "{}", result.table());
        if scenario.name == "sync-pods"
            && let Some(floor) = floor
        {
            let _ = writeln!(out, "{}", decode_floor_paragraph(result, floor));
        }
    }
    let _ = writeln!(out, "## Targets\n");
    let _ = writeln!(out, "{}", targets(results, floor));
    let micro =
        fs::read_to_string(project_root().join("docs/bench-sections/micro.md")).unwrap_or_default();
    if !micro.trim().is_empty() {
        let _ = writeln!(out, "{}", micro.trim());
    }
    out
}

/// What each peer is, how it lists, and the allocators: what a reader needs before the
/// tables. No figures: those are in the tables, and observations of a run in its issue note.
fn reading() -> String {
    "## Reading these tables\n\n\
     **What each peer is.** kinformer runs its `SharedInformerFactory` as a user would: \
     `kinformer` rows ask for JSON, `kinformer (protobuf)` rows use its default wire format \
     (protobuf for built-in kinds); both keep the factory's default cache, a compact one (each \
     object held as the bytes it arrived in, a bounded set kept decoded), and rows marked \
     \"decoded cache\" keep every object decoded instead (`FactoryOptions::decoded_cache`). A \
     projection has no codec, so its rows are decoded either way. client-go runs its \
     `SharedInformerFactory` with its defaults (the streaming list, the in-order `RealFIFO`); \
     `--mode json` forces JSON, `--mode protobuf` asks for protobuf first. kube-runtime runs \
     `watcher` and `reflector` with the default backoff; it has no second handler, no index \
     and no delete for an object that vanished during a relist, so its peer does what a kube-rs \
     user would write (one task per handler fed from the one stream, a scan of the store for \
     lookups, a diff of each handler's view at `InitDone`), and every result says so in its \
     `notes`. \"served as\" gives the content types each peer's responses carried.\n\n\
     **How each lists.** Each peer lists the way its library does by default: kinformer as \
     client-go's reflector does without streaming lists, one list at resourceVersion 0 (answered \
     whole from the watch cache); client-go by the streaming list (a watch with \
     `sendInitialEvents`); kube-runtime a consistent list in pages of 500. In the memory \
     scenarios kinformer lists in protobuf, its default, and the others in JSON, except \
     client-go's metadata client, which asks for protobuf first.\n\n\
     **Allocators.** The Rust peers run on mimalloc, called with plain `mi_malloc` at \
     alignments of 8 or less, and fault 4 KiB pages as the Go peer does \
     (`MIMALLOC_ALLOW_THP=0`); where a scenario's headline is what a process holds, they return \
     freed pages at once (`MIMALLOC_PURGE_DELAY=0`), as the Go peer forces a GC and returns \
     freed memory before its reading. Rows marked \"system allocator\" run the same peer on \
     glibc's malloc, what a program that picks no allocator gets. See \
     [the protocol](../xtask/peers/BENCH-PROTOCOL.md).\n"
        .to_owned()
}

/// How the figures were taken and how to read them.
fn method(sizes: Sizes) -> String {
    format!(
        "**Method.** Each implementation runs as its own process against the same server: \
         kinformer-testing's fake API server (JSON or protobuf over HTTP on loopback; one \
         seeded server per scenario, a fresh one per run for the relist), or a real \
         kube-apiserver where a scenario says so. Implementations alternate, in an order that changes \
         every run so that no case always follows the same one, {runs} run{s} each{warm_up}; cells are the median with min–max \
         over a case's runs. Every run's final \
         handler view was checked against the server's objects by checksum (a real server's \
         through its own list after seeding; a shard's by its count of the server's objects in \
         the shard; see \
         [the protocol](../xtask/peers/BENCH-PROTOCOL.md)); a run that disagreed would have \
         failed the command. \"kinformer's advantage\" is the other implementation's figure \
         over kinformer's on the first column (inverted where higher is better): above 1x \
         kinformer is better, below 1x it loses. The machine's other load skews every \
         process alike; distrust differences under about 20%.\n",
        runs = sizes.runs,
        s = if sizes.runs == 1 { "" } else { "s" },
        warm_up = if sizes.warm_up {
            ". Each measured run came right after an unmeasured run of the same case, so that \
             none pays for the state the case before it left the machine in"
        } else {
            ". No run was warmed up (`--no-warm-up`): a run may pay for the state the case \
             before it left the machine in"
        }
    )
}

/// The decode floor under the Pod sync table: the same list decoded with no informer, and
/// kinformer's sync as a multiple of it.
fn decode_floor_paragraph(result: &ScenarioResults, floor: &Value) -> String {
    let scenario = &result.scenario;
    let position = |label: &str| scenario.cases.iter().position(|c| c.label == label);
    let ratio_to = |label: &str, floor_ms: Option<f64>| {
        position(label)
            .and_then(|case| result.summary(case, &SYNC_MS))
            .zip(floor_ms)
            .map(|(sync, floor_ms)| format!("{:.2}x", sync.median / floor_ms))
            .unwrap_or_else(|| "–".into())
    };
    format!(
        "**Decode floor**: the same {} Pods' list pages, fetched once and \
         decoded into k8s-openapi `Pod`s with no informer. JSON ({} MiB, serde_json): \
         {} ms on one thread, {} ms on {} threads; kinformer's JSON sync above is {} of \
         the one-thread floor. Protobuf ({} MiB, kinformer_protobuf): {} ms on one \
         thread, {} ms on {} threads; kinformer's protobuf sync is {} of the faster.\n",
        format_figure(field(floor, "/objects").unwrap_or(0.0), 0),
        format_figure(field(floor, "/bytes").unwrap_or(0.0) / (1 << 20) as f64, 0),
        format_figure(field(floor, "/single_ms").unwrap_or(0.0), 0),
        format_figure(field(floor, "/parallel_ms").unwrap_or(0.0), 0),
        field(floor, "/threads").unwrap_or(0.0),
        ratio_to("kinformer", field(floor, "/single_ms")),
        format_figure(
            field(floor, "/protobuf_bytes").unwrap_or(0.0) / (1 << 20) as f64,
            0
        ),
        format_figure(field(floor, "/protobuf_single_ms").unwrap_or(0.0), 0),
        format_figure(field(floor, "/protobuf_parallel_ms").unwrap_or(0.0), 0),
        field(floor, "/threads").unwrap_or(0.0),
        ratio_to("kinformer (protobuf)", protobuf_floor_ms(floor)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchsuite::{
        metrics::READS_PER_S,
        scenarios::{QUICK, scenarios},
    };

    #[test]
    fn summaries_take_the_median_of_odd_and_even_counts() {
        let odd = summarize(&[3.0, 1.0, 2.0]).expect("values");
        assert_eq!(
            odd,
            Summary {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(
            summarize(&[4.0, 1.0, 3.0, 2.0]).expect("values").median,
            2.5
        );
        assert_eq!(summarize(&[f64::NAN]), None);
    }

    #[test]
    fn advantage_is_above_one_when_kinformer_is_better_either_way() {
        assert_eq!(advantage(&SYNC_MS, 100.0, 250.0), 2.5);
        assert_eq!(advantage(&READS_PER_S, 300.0, 100.0), 3.0);
        assert!(advantage(&SYNC_MS, 200.0, 100.0) < 1.0);
    }

    #[test]
    fn big_figures_get_thousands_separators() {
        assert_eq!(format_figure(123_456.4, 0), "123,456");
        assert_eq!(format_figure(1_234.5, 0), "1234");
        assert_eq!(format_figure(2.345, 2), "2.35");
    }

    #[test]
    fn lookups_compare_kinformer_with_the_same_reader_count() {
        let scenario = scenarios(QUICK)
            .into_iter()
            .find(|s| s.name == "lookups")
            .expect("lookups");
        let results = ScenarioResults {
            runs: vec![Vec::new(); scenario.cases.len()],
            scenario,
            preparation: String::new(),
        };
        for (index, case) in results.scenario.cases.iter().enumerate() {
            let kinformer = results.kinformer_counterpart(index).expect("counterpart");
            assert_eq!(results.scenario.cases[kinformer].extra, case.extra);
        }
    }
}
