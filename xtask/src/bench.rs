//! `cargo xtask bench fifo`: kinformer's criterion benches and client-go's `go test -bench` on
//! the same scenarios, back to back, with the ratios written to `docs/bench-sections/fifo.md`.
//!
//! Both sides name a scenario by the same ID (`delta_fifo/add_pop/100000`): criterion's full
//! benchmark ID in `crates/fifo/benches/fifo.rs`, and the sub-benchmark name after
//! `BenchmarkFifo/` in `xtask/peers/client-go/fifo_bench_test.go`. Criterion's figures are read
//! from the `estimates.json` files it writes (its mean), Go's from its `ns/op` lines (also a
//! mean).

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::SystemTime,
};

/// Criterion's settings: short, because the machine is two cores shared by everyone.
const CRITERION_ARGS: &[&str] = &["--warm-up-time", "1", "--measurement-time", "3"];
/// Go's: a fixed time per sub-benchmark, comparable to criterion's measurement time.
const GO_BENCHTIME: &str = "3s";

/// One scenario's figure from one side.
#[derive(Debug, Clone, PartialEq)]
struct Measurement {
    /// Mean nanoseconds per iteration.
    ns_per_iter: f64,
    /// Iterations measured.
    iterations: u64,
}

/// Runs `cargo xtask bench <suite>`; `args` are what follows `bench`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("fifo") => fifo(),
        Some(other) => Err(format!("unknown bench suite {other:?}; known: fifo")),
        None => Err("usage: cargo xtask bench fifo".to_owned()),
    }
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

#[allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "progress goes to stderr and the comparison table to stdout: this is a CLI task"
)]
fn fifo() -> Result<(), String> {
    let root = crate::project_root();
    let started = SystemTime::now();
    let machine = machine();

    eprintln!("bench fifo: criterion (crates/fifo/benches/fifo.rs)");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args(["bench", "-p", "kinformer-fifo", "--bench", "fifo", "--"])
        .args(CRITERION_ARGS)
        .current_dir(&root)
        .status()
        .map_err(|err| format!("running cargo bench: {err}"))?;
    if !status.success() {
        return Err(format!("cargo bench failed: {status}"));
    }
    let criterion_dir = target_dir(&root).join("criterion");
    let rust = read_criterion(&criterion_dir, started)?;

    eprintln!("bench fifo: go test -bench (xtask/peers/client-go)");
    let module = root.join("xtask").join("peers").join("client-go");
    let output = Command::new("go")
        .args([
            "test",
            "-run",
            "^$",
            "-bench",
            "^BenchmarkFifo$",
            "-count",
            "1",
        ])
        .arg(format!("-benchtime={GO_BENCHTIME}"))
        .arg(".")
        .current_dir(&module)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .output()
        .map_err(|err| format!("running go test (is Go installed?): {err}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "go test -bench failed: {}\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let go = parse_go_bench(&stdout, "BenchmarkFifo/");

    if rust.is_empty() || go.is_empty() {
        return Err(format!(
            "no figures to compare: {} from criterion, {} from go",
            rust.len(),
            go.len()
        ));
    }
    let table = table(&rust, &go);
    println!("{table}");
    let section = section(&table, &machine, &go_version(&module));
    let path = root.join("docs").join("bench-sections").join("fifo.md");
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
    }
    fs::write(&path, section).map_err(|err| format!("writing {}: {err}", path.display()))?;
    eprintln!("bench fifo: wrote {}", path.display());
    Ok(())
}

/// Every criterion result written since `since`, by full ID.
fn read_criterion(dir: &Path, since: SystemTime) -> Result<BTreeMap<String, Measurement>, String> {
    let mut found = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|name| name == "new") {
                if let Some((id, measurement)) = read_criterion_result(&path, since)? {
                    found.insert(id, measurement);
                }
            } else {
                pending.push(path);
            }
        }
    }
    Ok(found)
}

fn read_criterion_result(
    new_dir: &Path,
    since: SystemTime,
) -> Result<Option<(String, Measurement)>, String> {
    let estimates = new_dir.join("estimates.json");
    let fresh = fs::metadata(&estimates)
        .and_then(|meta| meta.modified())
        .is_ok_and(|modified| modified >= since);
    if !fresh {
        return Ok(None);
    }
    let read = |name: &str| -> Result<serde_json::Value, String> {
        let path = new_dir.join(name);
        let text = fs::read_to_string(&path)
            .map_err(|err| format!("reading {}: {err}", path.display()))?;
        serde_json::from_str(&text).map_err(|err| format!("parsing {}: {err}", path.display()))
    };
    let id = read("benchmark.json")?["full_id"]
        .as_str()
        .ok_or("criterion's benchmark.json has no full_id")?
        .to_owned();
    let ns_per_iter = read("estimates.json")?["mean"]["point_estimate"]
        .as_f64()
        .ok_or("criterion's estimates.json has no mean")?;
    let iterations = read("sample.json")?["iters"]
        .as_array()
        .map_or(0.0, |iters| {
            iters
                .iter()
                .filter_map(serde_json::Value::as_f64)
                .sum::<f64>()
        });
    Ok(Some((
        id,
        Measurement {
            ns_per_iter,
            // Criterion records iteration counts as floats; they are whole numbers.
            iterations: iterations as u64,
        },
    )))
}

/// Parses `go test -bench` lines such as
/// `BenchmarkFifo/delta_fifo/add_pop/100000-2   30   51559492 ns/op`, keyed by the name after
/// `prefix` with the `-GOMAXPROCS` suffix removed.
fn parse_go_bench(output: &str, prefix: &str) -> BTreeMap<String, Measurement> {
    let mut found = BTreeMap::new();
    for line in output.lines() {
        let mut fields = line.split_whitespace();
        let (Some(name), Some(iterations), Some(ns), Some("ns/op")) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some(id) = name.strip_prefix(prefix) else {
            continue;
        };
        let id = match id.rsplit_once('-') {
            Some((id, procs)) if procs.bytes().all(|b| b.is_ascii_digit()) => id,
            _ => id,
        };
        if let (Ok(iterations), Ok(ns_per_iter)) = (iterations.parse(), ns.parse()) {
            found.insert(
                id.to_owned(),
                Measurement {
                    ns_per_iter,
                    iterations,
                },
            );
        }
    }
    found
}

fn format_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Two significant digits at least, so a tiny ratio does not print as `0.00x`.
fn format_ratio(ratio: f64) -> String {
    if ratio >= 0.1 || ratio <= 0.0 {
        format!("{ratio:.2}x")
    } else {
        // Truncation is what is wanted: the count of leading zeros after the point, plus two.
        let decimals = (-ratio.log10()).floor() as usize + 2;
        format!("{ratio:.decimals$}x")
    }
}

/// A markdown table of every ID either side measured; the ratio is client-go's time over
/// kinformer's, so above 1 means kinformer is faster.
fn table(rust: &BTreeMap<String, Measurement>, go: &BTreeMap<String, Measurement>) -> String {
    let mut ids: Vec<&String> = rust.keys().chain(go.keys()).collect();
    ids.sort();
    ids.dedup();
    let mut out = String::from(
        "| scenario | kinformer | client-go | client-go / kinformer |\n| --- | ---: | ---: | ---: |\n",
    );
    for id in ids {
        let cell = |side: Option<&Measurement>| {
            side.map_or_else(
                || "—".to_owned(),
                |m| format!("{} ({} iters)", format_ns(m.ns_per_iter), m.iterations),
            )
        };
        let ratio = match (rust.get(id), go.get(id)) {
            (Some(r), Some(g)) if r.ns_per_iter > 0.0 => {
                format_ratio(g.ns_per_iter / r.ns_per_iter)
            }
            _ => "—".to_owned(),
        };
        let _ = writeln!(
            out,
            "| `{id}` | {} | {} | {ratio} |",
            cell(rust.get(id)),
            cell(go.get(id))
        );
    }
    out
}

/// `nproc` and the CPU model from /proc/cpuinfo.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .and_then(|rest| rest.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    // Other work on a shared machine skews both sides; the load says how much there was.
    let load = fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|loadavg| loadavg.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{cores} cores ({model}), 1-minute load average {load} when the run started")
}

fn go_version(module: &Path) -> String {
    Command::new("go")
        .arg("version")
        .current_dir(module)
        .env("GOTOOLCHAIN", "local")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn section(table: &str, machine: &str, go_version: &str) -> String {
    format!(
        "## FIFO queues: kinformer-fifo vs client-go v0.37.2\n\n\
         Written by `cargo xtask bench fifo` on {date}. Machine: {machine}; {go_version}.\n\n\
         One run of each side, back to back: criterion with `{criterion}` (10 samples, the \
         mean per iteration), then `go test -bench ^BenchmarkFifo$ -benchtime={GO_BENCHTIME} \
         -count 1` (ns/op, also a mean). The machine is shared and the runs are short: read \
         the ratios, not the absolute times, and distrust differences under about 20%.\n\n\
         The scenarios are those of `crates/fifo/benches/fifo.rs` (its table says exactly what \
         is timed) and `xtask/peers/client-go/fifo_bench_test.go`, under the same IDs, on \
         the same 100,000 Pods built before timing; building each queue and its list is not \
         timed on either side. `fifo/*` is the DeltaFIFO; `real_fifo/*` the in-order FIFO, \
         per-object, and `replace_atomic` in atomic mode. A ratio above 1 means kinformer is \
         faster.\n\n\
         client-go's times include Go's garbage collector, which scans every live Pod: both \
         sides keep 200,000 to 300,000 Pods alive (the lists and the known cache), as an \
         informer keeps its cache. On 2026-11-22 a run with `GOGC=400` roughly halved \
         client-go's pop and add_pop figures. In atomic mode client-go's Replace only \
         appends the list it was given, while kinformer keys every object up front (so a \
         nameless object is refused at once).\n\n{table}",
        date = today(),
        criterion = CRITERION_ARGS.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_bench_lines_are_keyed_by_the_id_after_the_prefix() {
        let output = "goos: linux\n\
            BenchmarkFifo/delta_fifo/add_pop/100000-2         \t       2\t 109052433 ns/op\n\
            BenchmarkFifo/real_fifo/pop_batch/100000          \t      31\t  19046654 ns/op\t  12 B/op\n\
            BenchmarkOther/x-2 \t 1 \t 5 ns/op\n\
            PASS\n";
        let parsed = parse_go_bench(output, "BenchmarkFifo/");
        assert_eq!(parsed.len(), 2);
        assert_eq!(
            parsed["delta_fifo/add_pop/100000"],
            Measurement {
                ns_per_iter: 109_052_433.0,
                iterations: 2
            }
        );
        assert_eq!(parsed["real_fifo/pop_batch/100000"].iterations, 31);
    }

    #[test]
    fn the_table_gives_client_go_over_kinformer_and_dashes_for_one_sided_ids() {
        let measured = |ns| Measurement {
            ns_per_iter: ns,
            iterations: 10,
        };
        let rust = BTreeMap::from([
            ("a".to_owned(), measured(1e6)),
            ("b".to_owned(), measured(5.0)),
        ]);
        let go = BTreeMap::from([("a".to_owned(), measured(3e6))]);
        let table = table(&rust, &go);
        assert!(
            table.contains("| `a` | 1.00 ms (10 iters) | 3.00 ms (10 iters) | 3.00x |"),
            "{table}"
        );
        assert!(
            table.contains("| `b` | 5 ns (10 iters) | — | — |"),
            "{table}"
        );
    }

    #[test]
    fn small_ratios_keep_two_significant_digits() {
        assert_eq!(format_ratio(5.789), "5.79x");
        assert_eq!(format_ratio(0.5), "0.50x");
        assert_eq!(format_ratio(0.0013), "0.0013x");
        assert_eq!(format_ratio(0.042), "0.042x");
    }

    #[test]
    fn criterion_results_older_than_the_run_are_ignored() {
        let dir = std::env::temp_dir().join(format!("xtask-bench-{}", std::process::id()));
        let new_dir = dir.join("group").join("id").join("new");
        fs::create_dir_all(&new_dir).unwrap();
        fs::write(new_dir.join("benchmark.json"), r#"{"full_id":"group/id"}"#).unwrap();
        fs::write(
            new_dir.join("estimates.json"),
            r#"{"mean":{"point_estimate":42.5}}"#,
        )
        .unwrap();
        fs::write(new_dir.join("sample.json"), r#"{"iters":[1.0,2.0,3.0]}"#).unwrap();
        let before = SystemTime::UNIX_EPOCH;
        let found = read_criterion(&dir, before).unwrap();
        assert_eq!(
            found["group/id"],
            Measurement {
                ns_per_iter: 42.5,
                iterations: 6
            }
        );
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert!(read_criterion(&dir, later).unwrap().is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }
}
