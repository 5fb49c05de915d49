//! `cargo xtask flake`: the README's test command, run again and again from one build, with the
//! last runs on a machine whose every core another load keeps busy; then which tests failed in
//! which runs.
//!
//! Each run is `cargo test --workspace --no-fail-fast`, unit, integration and doc tests, its
//! output kept in `target/flake/run-N.log`. The report (printed, and written to
//! `target/flake/report.md`) has one row a run and one row a failing test, named by its test
//! binary as cargo names it (`tests/watching.rs (watching-1a2b3c)`, `doc-tests kinformer`), so
//! a failure points at the log line to read. A binary that fails without a test saying FAILED
//! (a crash, an abort) is reported as the binary. A run that outlives [`RUN_CEILING`] is
//! killed and reported as hung.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::Path,
    process::{Child, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use crate::{cargo, flags::Flake, project_root};

/// How long one run of the whole suite may take before it is killed as hung: a hang guard, a
/// multiple of what a run takes on a loaded two-core machine.
const RUN_CEILING: Duration = Duration::from_secs(45 * 60);

/// What one run of the suite came to.
struct Run {
    busy: bool,
    took: Duration,
    passed: bool,
    hung: bool,
    /// Tests run (as their binaries reported), and the tests or binaries that failed.
    tests: usize,
    failures: Vec<String>,
}

pub(crate) fn flake(flags: &Flake) -> Result<(), String> {
    let dir = project_root().join("target").join("flake");
    fs::create_dir_all(&dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;

    // One build for every run: the runs below only run what it built.
    let mut build = cargo();
    build.args(["test", "--workspace", "--locked", "--no-run"]);
    crate::run(build)?;

    let mut runs = Vec::with_capacity(flags.runs);
    for number in 1..=flags.runs {
        let busy = number > flags.runs - flags.busy;
        let log = dir.join(format!("run-{number}.log"));
        eprintln!(
            "xtask: flake run {number} of {}{}, output in {}",
            flags.runs,
            if busy { " with every core busy" } else { "" },
            log.display()
        );
        let run = run_once(&log, busy)?;
        eprintln!(
            "xtask: run {number}: {} in {:.0?}, {} tests{}",
            if run.passed { "passed" } else { "FAILED" },
            run.took,
            run.tests,
            failure_list(&run.failures)
        );
        runs.push(run);
    }

    let report = report(&runs);
    print!("{report}");
    let path = dir.join("report.md");
    fs::write(&path, &report).map_err(|err| format!("writing {}: {err}", path.display()))?;
    let failed = runs.iter().filter(|run| !run.passed).count();
    if failed == 0 {
        Ok(())
    } else {
        Err(format!(
            "{failed} of {} runs failed; see {}",
            runs.len(),
            path.display()
        ))
    }
}

fn failure_list(failures: &[String]) -> String {
    if failures.is_empty() {
        String::new()
    } else {
        format!("; failed: {}", failures.join(", "))
    }
}

/// One run of the suite, its stdout and stderr interleaved into `log`, with every core kept
/// busy throughout when `busy`.
fn run_once(log: &Path, busy: bool) -> Result<Run, String> {
    let file = fs::File::create(log).map_err(|err| format!("creating {}: {err}", log.display()))?;
    let stderr = file
        .try_clone()
        .map_err(|err| format!("opening {} twice: {err}", log.display()))?;
    let mut test = cargo();
    test.args(["test", "--workspace", "--locked", "--no-fail-fast"])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr);

    let load = busy.then(Load::start);
    let started = Instant::now();
    let mut child = test
        .spawn()
        .map_err(|err| format!("could not start {test:?}: {err}"))?;
    let (passed, hung) = wait_guarded(&mut child)?;
    let took = started.elapsed();
    drop(load);

    let output =
        fs::read_to_string(log).map_err(|err| format!("reading {}: {err}", log.display()))?;
    let (tests, mut failures) = failures_in(&output);
    if hung {
        failures.push(format!("the run, killed after {RUN_CEILING:.0?}"));
    } else if !passed && failures.is_empty() {
        failures.push("cargo test (no test or binary reported failing)".to_owned());
    }
    Ok(Run {
        busy,
        took,
        passed: passed && !hung,
        hung,
        tests,
        failures,
    })
}

/// Waits for `child`, killing it past [`RUN_CEILING`]: whether it succeeded, and whether it hung.
fn wait_guarded(child: &mut Child) -> Result<(bool, bool), String> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok((status.success(), false)),
            Ok(None) if started.elapsed() > RUN_CEILING => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok((false, true));
            }
            // Polling a child process: std offers no wait with a timeout.
            Ok(None) => thread::sleep(Duration::from_secs(1)),
            Err(err) => return Err(format!("waiting for cargo test: {err}")),
        }
    }
}

/// The tests a run's output reports, and what failed: each test that says FAILED, by its
/// binary, and each binary that failed without one.
fn failures_in(output: &str) -> (usize, Vec<String>) {
    let mut binary = String::from("(before the first test binary)");
    let mut tests = 0;
    let mut failures = Vec::new();
    let mut failed_here = false;
    for line in output.lines() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Running ") {
            binary = binary_label(rest);
            failed_here = false;
        } else if let Some(krate) = trimmed.strip_prefix("Doc-tests ") {
            binary = format!("doc-tests {krate}");
            failed_here = false;
        } else if let Some(test) = trimmed.strip_prefix("test ") {
            if let Some(name) = test.strip_suffix(" ... FAILED") {
                failures.push(format!("{binary}: {name}"));
                failed_here = true;
                tests += 1;
            } else if test.ends_with(" ... ok") {
                tests += 1;
            }
        } else if trimmed.starts_with("error: test failed") && !failed_here {
            failures.push(format!("{binary}: the binary failed"));
            failed_here = true;
        }
    }
    (tests, failures)
}

/// `tests/watching.rs (target/debug/deps/watching-1a2b3c4d)` as `tests/watching.rs
/// (watching-1a2b3c4d)`: the source and the binary, which tells apart two packages' targets
/// of one name.
fn binary_label(running: &str) -> String {
    let Some((source, path)) = running.split_once(" (") else {
        return running.to_owned();
    };
    let path = path.trim_end_matches(')');
    let file = path.rsplit('/').next().unwrap_or(path);
    format!("{source} ({file})")
}

fn report(runs: &[Run]) -> String {
    let mut out = String::new();
    let passed = runs.iter().filter(|run| run.passed).count();
    let busy = runs.iter().filter(|run| run.busy).count();
    let busy_passed = runs.iter().filter(|run| run.busy && run.passed).count();
    let cores = thread::available_parallelism().map_or(1, usize::from);
    let _ = writeln!(
        out,
        "# cargo test --workspace, {} runs from one build\n\n\
         {passed} of {} runs passed; {busy_passed} of the {busy} runs with all {cores} cores \
         kept busy by another load passed.\n",
        runs.len(),
        runs.len()
    );
    let _ = writeln!(out, "| run | load | result | tests | seconds |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (number, run) in runs.iter().enumerate() {
        let result = match (run.passed, run.hung) {
            (true, _) => "passed",
            (false, true) => "hung",
            (false, false) => "failed",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {result} | {} | {:.0} |",
            number + 1,
            if run.busy { "all cores busy" } else { "-" },
            run.tests,
            run.took.as_secs_f64()
        );
    }
    let mut failures: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (number, run) in runs.iter().enumerate() {
        for failure in &run.failures {
            failures.entry(failure).or_default().push(number + 1);
        }
    }
    if failures.is_empty() {
        let _ = writeln!(out, "\nNo test failed.");
    } else {
        let _ = writeln!(out, "\n| failed | runs |\n|---|---|");
        for (failure, numbers) in failures {
            let numbers: Vec<String> = numbers.iter().map(usize::to_string).collect();
            let _ = writeln!(out, "| {failure} | {} |", numbers.join(", "));
        }
    }
    out
}

/// A spinning thread on every core until dropped: the "another process keeps every core busy"
/// of a loaded machine, from inside this one.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Load {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = thread::available_parallelism().map_or(1, usize::from);
        let threads = (0..cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "\
   Compiling kinformer-store v0.1.0
     Running unittests src/lib.rs (target/debug/deps/kinformer_store-0a1b)

running 2 tests
test cache::tests::adds ... ok
test cache::tests::removes ... FAILED

failures:
error: test failed, to rerun pass `-p kinformer-store --lib`
     Running tests/watching.rs (target/debug/deps/watching-9f8e)

running 1 test
test closes_cleanly ... ok
error: test failed, to rerun pass `-p kinformer-reflector --test watching`
     Running tests/crashing.rs (target/debug/deps/crashing-77aa)
error: test failed, to rerun pass `-p kinformer --test crashing`
   Doc-tests kinformer

running 1 test
test crates/kinformer/src/lib.rs - (line 12) ... FAILED
";

    #[test]
    fn failures_name_the_test_and_its_binary_or_the_binary_alone() {
        let (tests, failures) = failures_in(OUTPUT);
        assert_eq!(tests, 4);
        assert_eq!(
            failures,
            [
                "unittests src/lib.rs (kinformer_store-0a1b): cache::tests::removes",
                "tests/watching.rs (watching-9f8e): the binary failed",
                "tests/crashing.rs (crashing-77aa): the binary failed",
                "doc-tests kinformer: crates/kinformer/src/lib.rs - (line 12)",
            ]
        );
    }

    #[test]
    fn the_report_counts_runs_and_groups_failures_by_test() {
        let run = |busy, passed, failures: &[&str]| Run {
            busy,
            took: Duration::from_secs(200),
            passed,
            hung: false,
            tests: 900,
            failures: failures.iter().map(|f| (*f).to_owned()).collect(),
        };
        let runs = [
            run(false, true, &[]),
            run(false, false, &["a: x"]),
            run(true, false, &["a: x", "b: y"]),
        ];
        let report = report(&runs);
        assert!(
            report.contains("1 of 3 runs passed; 0 of the 1 runs"),
            "{report}"
        );
        assert!(report.contains("| a: x | 2, 3 |"), "{report}");
        assert!(report.contains("| b: y | 3 |"), "{report}");
        assert!(
            report.contains("| 3 | all cores busy | failed | 900 | 200 |"),
            "{report}"
        );
    }
}
