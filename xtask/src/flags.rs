//! Every task's command line, declared in one place with clap's derive API: [`Task`] names the
//! tasks (its variants' doc comments are their help), and each task's struct its words, flags
//! and what it passes on (its fields' doc comments are their help). [`parse`] turns the
//! arguments into a [`Task`]; `cargo xtask --help` and `cargo xtask <task> --help` print what
//! clap renders from the declarations.
//!
//! To add a flag: add a field to its task's struct with `#[arg(long)]` and a doc comment. Flags
//! take `--name value` or `--name=value`, and a flag given twice keeps its last value. What clap
//! cannot declare stays here: `--watch-cache=false`, kube-apiserver's own spelling of
//! `--no-watch-cache` (an alias cannot hold `=`, so [`parse`] rewrites it first), and the
//! checks that span flags (`flake`'s `--busy` against `--runs`).

use std::{iter, path::PathBuf, time::Duration};

use clap::{
    ArgGroup, Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand,
    builder::{PossibleValue, PossibleValuesParser},
    error::ErrorKind,
    parser::ValueSource,
};

use crate::controlplane::Options;

/// `cargo xtask bench`'s suites of micro-benchmarks, with their help.
pub(crate) const BENCH_SUITES: &[(&str, &str)] = &[
    (
        "fifo",
        "kinformer-fifo vs client-go DeltaFIFO/RealFIFO benchmarks",
    ),
    ("store", "kinformer vs client-go indexer benchmarks"),
    ("workqueue", "kinformer vs client-go workqueue benchmarks"),
];

/// `cargo xtask control-plane`'s commands, with their help.
const CONTROL_PLANE_COMMANDS: &[(&str, &str)] = &[
    (
        "up",
        "build if needed, start detached, print the environment",
    ),
    ("down", "stop the control plane that is up"),
    (
        "env",
        "print the environment of the control plane that is up",
    ),
    ("build", "only build (or check) the cached binaries"),
    (
        "restart-apiserver",
        "SIGKILL kube-apiserver, start it again, wait for /readyz",
    ),
];

/// `cargo xtask`: the task and its flags.
#[derive(Debug, Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "kinformer's developer tasks",
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// What `cargo xtask ...` asks for.
#[derive(Debug, PartialEq, Subcommand)]
pub(crate) enum Task {
    /// fmt check, clippy -D warnings, cargo test --workspace, the client-go tests, docs, public API
    Ci,
    /// the differential and conformance tests against client-go (needs Go)
    ClientGo(ClientGo),
    /// kinformer vs kube-runtime vs client-go informers, side by side; or a SUITE's micro-benchmarks
    Bench(Bench),
    /// run kinformer-testing's fake API server standalone
    #[command(disable_help_flag = true)]
    FakeApiserver {
        /// the server's own: `cargo xtask fake-apiserver --help` prints them
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "FLAGS"
        )]
        flags: Vec<String>,
    },
    /// a local kube-apiserver + etcd (built from Go modules)
    ControlPlane(ControlPlane),
    /// the end-to-end suite against a backend
    E2e(E2e),
    /// build kindest/node offline (Go module proxy, Debian packages)
    KindImage {
        /// only say whether the image is at hand (exit 1 and why if not)
        #[arg(long, conflicts_with = "prepare_host")]
        check: bool,
        /// make the host changes the build needs (Debian packages, Docker's default runtime
        /// where root lacks CAP_SYS_RESOURCE, a running dockerd); without it they are listed
        /// and nothing is changed
        #[arg(long)]
        prepare_host: bool,
    },
    /// churn under outages, checked against the server every minute
    Soak(Soak),
    /// run `cargo test --workspace` N times from one build and report per-test failures
    Flake(Flake),
    /// regenerate the protobuf tables from the Go API types
    ProtobufSchema {
        /// fail if the committed tables differ instead of writing them
        #[arg(long)]
        check: bool,
        /// split a saved run of the generator instead of running Go
        #[arg(long, value_name = "FILE")]
        from: Option<String>,
    },
    /// re-encode the protobuf fixtures with client-go
    ProtobufFixtures,
    /// document every library alone, as docs.rs builds it, with warnings denied
    DocsRs,
    /// write every library's public API to docs/public-api/
    PublicApi {
        /// fail if the committed listings differ instead of writing them
        #[arg(long)]
        check: bool,
    },
}

/// `cargo xtask client-go`: what it adds to its `cargo test`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ClientGo {
    /// passed to `cargo test` after its --test flags
    #[arg(allow_hyphen_values = true, value_name = "ARGS")]
    cargo_args: Vec<String>,
    /// passed to the test binaries (`-- --nocapture`)
    #[arg(last = true, value_name = "TEST ARGS")]
    test_args: Vec<String>,
}

impl ClientGo {
    /// The arguments for `cargo test`, as given (with the `--` before the test binaries' own).
    pub(crate) fn args(&self) -> Vec<String> {
        let mut args = self.cargo_args.clone();
        if !self.test_args.is_empty() {
            args.push("--".to_owned());
            args.extend(self.test_args.iter().cloned());
        }
        args
    }
}

/// `cargo xtask bench`.
#[derive(Debug, Default, PartialEq, Eq, Args)]
pub(crate) struct Bench {
    /// a suite of micro-benchmarks; none: the informer scenarios
    #[arg(value_parser = words(BENCH_SUITES))]
    pub(crate) suite: Option<String>,
    /// every scenario once, small and in debug builds; checks, writes target/bench/quick.md
    #[arg(long)]
    pub(crate) quick: bool,
    /// run only this scenario (or decode-floor); may be repeated
    #[arg(long = "scenario", value_name = "NAME")]
    pub(crate) scenarios: Vec<String>,
    /// run only the case with this label (as the report names it); may be repeated
    #[arg(long = "case", value_name = "LABEL")]
    pub(crate) cases: Vec<String>,
    /// runs of every case (default 3, --quick 1)
    #[arg(long, value_name = "K")]
    pub(crate) runs: Option<usize>,
    /// measure each case without first running it once, unmeasured, right before (warm-up
    /// runs are on unless --quick)
    #[arg(long)]
    pub(crate) no_warm_up: bool,
    /// rewrite the report from saved results instead of running anything
    #[arg(long = "report", value_name = "FILE")]
    pub(crate) report_from: Option<PathBuf>,
    /// check that docs/benchmarks.md and its chart are what docs/bench-results.json rebuilds
    #[arg(long, conflicts_with_all = ["quick", "scenarios", "cases", "runs", "no_warm_up", "report_from"])]
    pub(crate) check_report: bool,
}

/// `cargo xtask control-plane`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ControlPlane {
    /// what to do with the control plane
    #[arg(value_parser = words(CONTROL_PLANE_COMMANDS))]
    pub(crate) command: String,
    #[command(flatten)]
    pub(crate) options: ApiserverFlags,
}

/// kube-apiserver's knobs, for `control-plane` and `e2e --local`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Args)]
pub(crate) struct ApiserverFlags {
    /// kube-apiserver with --watch-cache=false: etcd serves every list and watch (also
    /// --watch-cache=false)
    #[arg(long)]
    pub(crate) no_watch_cache: bool,
    /// kube-apiserver's --etcd-compaction-interval, e.g. 10s (its default is 5m; 0 is off)
    #[arg(long, value_name = "D")]
    pub(crate) etcd_compaction_interval: Option<String>,
}

impl ApiserverFlags {
    /// The control plane's options these flags ask for.
    pub(crate) fn options(&self) -> Options {
        Options {
            etcd_compaction_interval: self.etcd_compaction_interval.clone(),
            no_watch_cache: self.no_watch_cache,
        }
    }
}

/// Where `cargo xtask e2e` runs the suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Backend {
    Local,
    Kind,
    Kubeconfig(PathBuf),
    Fake,
}

/// `cargo xtask e2e`: at most one backend; none: kind where Docker and kind answer, else local.
#[derive(Debug, Default, PartialEq, Eq, Args)]
#[command(group(ArgGroup::new("backend").multiple(false)))]
pub(crate) struct E2e {
    /// kube-apiserver and etcd on loopback (the default without Docker)
    #[arg(long, group = "backend")]
    pub(crate) local: bool,
    /// a kind cluster (the default with Docker and kind)
    #[arg(long, group = "backend")]
    pub(crate) kind: bool,
    /// any cluster this kubeconfig reaches
    #[arg(long, group = "backend", value_name = "PATH")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// kinformer-testing's in-process fake server, as plain `cargo test`
    #[arg(long, group = "backend")]
    pub(crate) fake: bool,
    /// the kind cluster's name (default kinformer-e2e)
    #[arg(long, value_name = "N")]
    pub(crate) kind_name: Option<String>,
    /// keep the kind cluster afterwards
    #[arg(long)]
    pub(crate) keep: bool,
    /// run against a context that looks like production
    #[arg(long)]
    pub(crate) yes: bool,
    #[command(flatten)]
    pub(crate) control_plane: ApiserverFlags,
    /// passed to the test binaries: a test name filter, --nocapture, ...
    #[arg(last = true, value_name = "TEST ARGS")]
    pub(crate) test_args: Vec<String>,
}

impl E2e {
    /// The backend the flags name, if any (clap refuses more than one).
    pub(crate) fn backend(&self) -> Option<Backend> {
        if let Some(path) = &self.kubeconfig {
            return Some(Backend::Kubeconfig(path.clone()));
        }
        [
            (self.local, Backend::Local),
            (self.kind, Backend::Kind),
            (self.fake, Backend::Fake),
        ]
        .into_iter()
        .find_map(|(given, backend)| given.then_some(backend))
    }
}

/// `cargo xtask soak`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(crate) struct Soak {
    /// how long, in minutes
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = positive)]
    pub(crate) minutes: u64,
    /// against the fake server, which cuts watches and compacts instead
    #[arg(long)]
    pub(crate) fake: bool,
    /// how often kube-apiserver is killed and restarted
    #[arg(long, value_name = "SECONDS", default_value = "120", value_parser = seconds)]
    pub(crate) restart_every: Duration,
}

/// `cargo xtask flake`: run `cargo test --workspace` N times from one build and report
/// per-test failures.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(crate) struct Flake {
    /// how many times the whole suite runs
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = positive_count)]
    pub(crate) runs: usize,
    /// how many of the runs (the last ones) run while every core is kept busy; the default is
    /// cut to --runs
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub(crate) busy: usize,
}

/// A positional argument that takes one of `words`, each with its help.
fn words(words: &'static [(&'static str, &'static str)]) -> PossibleValuesParser {
    PossibleValuesParser::new(
        words
            .iter()
            .map(|(word, help)| PossibleValue::new(*word).help(*help)),
    )
}

fn positive(value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .ok()
        .filter(|number| *number > 0)
        .ok_or_else(|| "needs a positive number".to_owned())
}

fn positive_count(value: &str) -> Result<usize, String> {
    usize::try_from(positive(value)?).map_err(|_| format!("{value} is too many"))
}

fn seconds(value: &str) -> Result<Duration, String> {
    positive(value).map(Duration::from_secs)
}

/// Parses `cargo xtask`'s arguments (without the program name); no arguments ask for the help.
/// The error is clap's: `exit()` prints it (the help to stdout, an error to stderr).
pub(crate) fn parse(args: &[String]) -> Result<Task, clap::Error> {
    let args = if args.is_empty() {
        vec!["--help".to_owned()]
    } else {
        spell_out_aliases(args)
    };
    let mut command = Cli::command();
    let matches =
        command.try_get_matches_from_mut(iter::once("cargo xtask".to_owned()).chain(args))?;
    let mut task = Cli::from_arg_matches(&matches)?.task;
    if let Task::Flake(flake) = &mut task {
        let busy = matches
            .subcommand_matches("flake")
            .and_then(|flake| flake.value_source("busy"));
        if busy == Some(ValueSource::DefaultValue) {
            flake.busy = flake.busy.min(flake.runs);
        }
        if flake.busy > flake.runs {
            let message = format!("--busy {} is more than the {} runs", flake.busy, flake.runs);
            let flake = command.find_subcommand_mut("flake").expect("declared");
            return Err(flake.error(ErrorKind::ArgumentConflict, message));
        }
    }
    Ok(task)
}

/// `--watch-cache=false` as `--no-watch-cache`, in the tasks that take kube-apiserver's knobs,
/// before any `--` (what follows is the test binaries').
fn spell_out_aliases(args: &[String]) -> Vec<String> {
    let knobs = matches!(args[0].as_str(), "control-plane" | "e2e");
    let end = args
        .iter()
        .position(|arg| arg == "--")
        .unwrap_or(args.len());
    args.iter()
        .enumerate()
        .map(|(i, arg)| match arg.as_str() {
            "--watch-cache=false" if knobs && i < end => "--no-watch-cache".to_owned(),
            _ => arg.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
