//! Every task's command line, declared in one place: [`TASKS`] names each task, its words,
//! its flags and what follows `--`, with their help; [`parse`] turns the arguments into a
//! [`Task`] of typed values, and `--help` prints the declarations. The model is rust-analyzer's
//! xflags, written out by hand so that xtask needs no dependency beyond the workspace's.
//!
//! To add a flag: declare it in its task's `flags` below, then read it in that task's arm of
//! [`Task::from_parsed`]. Flags take `--name value` or `--name=value`; `-h`/`--help` after a
//! task prints that task's help.

mod help;

use std::{path::PathBuf, time::Duration};

pub(crate) use help::{help, overview};
use help::{usage, words};

use crate::controlplane::Options;

/// A task: `cargo xtask NAME ...`.
#[derive(Debug)]
pub(crate) struct TaskSpec {
    pub(crate) name: &'static str,
    /// One line for the overview.
    pub(crate) about: &'static str,
    /// The words the task takes as its one positional argument (a subcommand or a suite),
    /// with their help, and whether one must be given.
    pub(crate) words: &'static [(&'static str, &'static str)],
    pub(crate) word_required: bool,
    pub(crate) flags: &'static [Flag],
    /// What the task does with arguments it does not parse itself.
    pub(crate) rest: Rest,
}

/// A flag: `--name`, or `--name VALUE` when it has a `value`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flag {
    pub(crate) name: &'static str,
    pub(crate) value: Option<&'static str>,
    /// Other spellings that mean the same (`--watch-cache=false` for `--no-watch-cache`).
    pub(crate) aliases: &'static [&'static str],
    /// It may be given more than once, each adding a value.
    pub(crate) repeats: bool,
    pub(crate) help: &'static str,
}

/// Arguments a task passes on instead of parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rest {
    /// None: every argument must be declared.
    Nothing,
    /// What follows `--`, passed on as it is.
    AfterDashDash(&'static str, &'static str),
    /// Every argument, passed on as it is; `own_help`: a first `-h`/`--help` is the task's.
    All(&'static str, &'static str, bool),
}

const fn flag(name: &'static str, help: &'static str) -> Flag {
    Flag {
        name,
        value: None,
        aliases: &[],
        repeats: false,
        help,
    }
}

const fn valued(name: &'static str, value: &'static str, help: &'static str) -> Flag {
    Flag {
        name,
        value: Some(value),
        aliases: &[],
        repeats: false,
        help,
    }
}

const fn task(name: &'static str, about: &'static str) -> TaskSpec {
    TaskSpec {
        name,
        about,
        words: &[],
        word_required: false,
        flags: &[],
        rest: Rest::Nothing,
    }
}

/// kube-apiserver's knobs, for `control-plane` and `e2e --local`.
const KUBE_APISERVER_FLAGS: [Flag; 2] = [
    Flag {
        aliases: &["--watch-cache=false"],
        ..flag(
            "--no-watch-cache",
            "kube-apiserver with --watch-cache=false: etcd serves every list and watch",
        )
    },
    valued(
        "--etcd-compaction-interval",
        "D",
        "kube-apiserver's --etcd-compaction-interval, e.g. 10s (its default is 5m; 0 is off)",
    ),
];

/// How long `soak` runs unless `--minutes` says otherwise.
pub(crate) const SOAK_MINUTES: u64 = 3;
/// How often `soak` kills and restarts kube-apiserver unless `--restart-every` says otherwise.
pub(crate) const SOAK_RESTART_EVERY: Duration = Duration::from_secs(120);

/// Every task, in the overview's order.
pub(crate) const TASKS: &[TaskSpec] = &[
    task(
        "ci",
        "fmt check, clippy -D warnings, cargo test --workspace, the client-go tests, docs",
    ),
    TaskSpec {
        rest: Rest::All(
            "ARGS",
            "passed to `cargo test` after its --test flags (`-- --nocapture` reaches the tests)",
            true,
        ),
        ..task(
            "client-go",
            "the differential and conformance tests against client-go (needs Go)",
        )
    },
    TaskSpec {
        words: &[
            (
                "fifo",
                "kinformer-fifo vs client-go DeltaFIFO/RealFIFO benchmarks",
            ),
            ("store", "kinformer vs client-go indexer benchmarks"),
            ("workqueue", "kinformer vs client-go workqueue benchmarks"),
        ],
        flags: &[
            flag(
                "--quick",
                "every scenario once, small and in debug builds; checks, writes target/bench/quick.md",
            ),
            Flag {
                repeats: true,
                ..valued(
                    "--scenario",
                    "NAME",
                    "run only this scenario (or decode-floor)",
                )
            },
            Flag {
                repeats: true,
                ..valued(
                    "--case",
                    "LABEL",
                    "run only the case with this label (as the report names it)",
                )
            },
            valued("--runs", "K", "runs of every case (default 3, --quick 1)"),
            flag(
                "--warm-up",
                "run each case once, unmeasured, right before each measured run of it",
            ),
            valued(
                "--report",
                "FILE",
                "rewrite the report from saved results instead of running anything",
            ),
        ],
        ..task(
            "bench",
            "kinformer vs kube-runtime vs client-go informers, side by side; or a SUITE's micro-benchmarks",
        )
    },
    TaskSpec {
        rest: Rest::All(
            "FLAGS",
            "the server's own: `cargo xtask fake-apiserver --help` prints them",
            false,
        ),
        ..task(
            "fake-apiserver",
            "run kinformer-testing's fake API server standalone",
        )
    },
    TaskSpec {
        words: &[
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
        ],
        word_required: true,
        flags: &KUBE_APISERVER_FLAGS,
        ..task(
            "control-plane",
            "a local kube-apiserver + etcd (built from Go modules)",
        )
    },
    TaskSpec {
        flags: &[
            flag(
                "--local",
                "kube-apiserver and etcd on loopback (the default without Docker)",
            ),
            flag(
                "--kind",
                "a kind cluster (the default with Docker and kind)",
            ),
            valued(
                "--kubeconfig",
                "PATH",
                "any cluster this kubeconfig reaches",
            ),
            flag(
                "--fake",
                "kinformer-testing's in-process fake server, as plain `cargo test`",
            ),
            valued(
                "--kind-name",
                "N",
                "the kind cluster's name (default kinformer-e2e)",
            ),
            flag("--keep", "keep the kind cluster afterwards"),
            flag("--yes", "run against a context that looks like production"),
            KUBE_APISERVER_FLAGS[0],
            KUBE_APISERVER_FLAGS[1],
        ],
        rest: Rest::AfterDashDash(
            "TEST ARGS",
            "passed to the test binaries: a test name filter, --nocapture, ...",
        ),
        ..task("e2e", "the end-to-end suite against a backend")
    },
    TaskSpec {
        flags: &[flag(
            "--check",
            "only say whether the image is at hand (exit 1 and why if not)",
        )],
        ..task(
            "kind-image",
            "build kindest/node offline (Go module proxy, Debian packages)",
        )
    },
    TaskSpec {
        flags: &[
            valued("--minutes", "N", "how long (default 3)"),
            valued(
                "--restart-every",
                "SECONDS",
                "how often kube-apiserver is killed and restarted (default 120)",
            ),
            flag(
                "--fake",
                "against the fake server, which cuts watches and compacts instead",
            ),
        ],
        ..task(
            "soak",
            "churn under outages, checked against the server every minute",
        )
    },
    TaskSpec {
        flags: &[
            valued(
                "--runs",
                "N",
                "how many times the whole suite runs (default 20)",
            ),
            valued(
                "--busy",
                "N",
                "how many of the runs, the last ones, run with every core kept busy (default 5)",
            ),
        ],
        ..task(
            "flake",
            "cargo test --workspace N times from one build, some under load; per-test failures",
        )
    },
    TaskSpec {
        flags: &[
            flag(
                "--check",
                "fail if the committed tables differ instead of writing them",
            ),
            valued(
                "--from",
                "FILE",
                "split a saved run of the generator instead of running Go",
            ),
        ],
        ..task(
            "protobuf-schema",
            "regenerate the protobuf tables from the Go API types",
        )
    },
    task(
        "protobuf-fixtures",
        "re-encode the protobuf fixtures with client-go",
    ),
];

/// What `cargo xtask ...` asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Task {
    /// The overview (`None`) or one task's help.
    Help(Option<&'static str>),
    Ci,
    ClientGo(Vec<String>),
    Bench(Bench),
    FakeApiserver(Vec<String>),
    ControlPlane(ControlPlane),
    E2e(E2e),
    KindImage {
        check: bool,
    },
    Soak(Soak),
    Flake(Flake),
    ProtobufSchema {
        check: bool,
        from: Option<String>,
    },
    ProtobufFixtures,
}

/// `cargo xtask bench`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Bench {
    /// A micro-benchmark suite (`fifo`, `store`, `workqueue`); none: the informer scenarios.
    pub(crate) suite: Option<String>,
    pub(crate) quick: bool,
    pub(crate) scenarios: Vec<String>,
    /// Only the cases with these labels; none: every case.
    pub(crate) cases: Vec<String>,
    pub(crate) runs: Option<usize>,
    /// Run each case once, unmeasured, right before each measured run of it.
    pub(crate) warm_up: bool,
    /// Rewrite the report from saved results instead of running anything.
    pub(crate) report_from: Option<PathBuf>,
}

/// `cargo xtask control-plane`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ControlPlane {
    /// `up`, `down`, `env`, `build` or `restart-apiserver`.
    pub(crate) command: String,
    pub(crate) options: Options,
}

/// Where `cargo xtask e2e` runs the suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Backend {
    Local,
    Kind,
    Kubeconfig(PathBuf),
    Fake,
}

/// `cargo xtask e2e`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct E2e {
    /// None: kind where Docker and kind answer, else local.
    pub(crate) backend: Option<Backend>,
    pub(crate) keep: bool,
    pub(crate) yes: bool,
    pub(crate) kind_name: Option<String>,
    pub(crate) control_plane: Options,
    /// Passed to the test binaries after `--` (a test name filter, `--nocapture`, ...).
    pub(crate) test_args: Vec<String>,
}

/// `cargo xtask soak`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Soak {
    pub(crate) minutes: u64,
    pub(crate) fake: bool,
    pub(crate) restart_every: Duration,
}

/// `cargo xtask flake`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Flake {
    /// Runs of the whole suite.
    pub(crate) runs: usize,
    /// How many of them, the last ones, run with every core kept busy.
    pub(crate) busy: usize,
}

/// The arguments of one task, sorted by what the declarations say they are.
#[derive(Debug, Default)]
struct Parsed {
    word: Option<String>,
    /// Each flag given, by its declared name, with its value.
    flags: Vec<(&'static str, Option<String>)>,
    rest: Vec<String>,
    help: bool,
}

impl Parsed {
    fn has(&self, name: &str) -> bool {
        self.flags.iter().any(|(flag, _)| *flag == name)
    }

    /// The last value given for `name`.
    fn value(&self, name: &str) -> Option<String> {
        self.values(name).pop()
    }

    fn values(&self, name: &str) -> Vec<String> {
        self.flags
            .iter()
            .filter(|(flag, _)| *flag == name)
            .filter_map(|(_, value)| value.clone())
            .collect()
    }

    /// The last value of `name` as a positive number.
    fn positive(&self, name: &str) -> Result<Option<u64>, String> {
        self.value(name)
            .map(|value| {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|number| *number > 0)
                    .ok_or_else(|| format!("{name} needs a positive number, not {value:?}"))
            })
            .transpose()
    }
}

/// Parses `cargo xtask`'s arguments (without the program name).
pub(crate) fn parse(args: &[String]) -> Result<Task, String> {
    let Some(name) = args.first() else {
        return Ok(Task::Help(None));
    };
    if matches!(name.as_str(), "help" | "--help" | "-h") {
        return Ok(Task::Help(None));
    }
    let spec = TASKS
        .iter()
        .find(|spec| spec.name == name)
        .ok_or_else(|| format!("unknown task {name:?}; try `cargo xtask help`"))?;
    let parsed = parse_task(spec, &args[1..])?;
    if parsed.help {
        return Ok(Task::Help(Some(spec.name)));
    }
    Task::from_parsed(spec.name, parsed)
}

/// Sorts `args` into the word, the flags and the rest `spec` declares.
fn parse_task(spec: &TaskSpec, args: &[String]) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    if let Rest::All(_, _, own_help) = spec.rest {
        parsed.help = own_help && matches!(args.first().map(String::as_str), Some("-h" | "--help"));
        parsed.rest = args.to_vec();
        return Ok(parsed);
    }
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" && matches!(spec.rest, Rest::AfterDashDash(..)) {
            parsed.rest = iter.by_ref().cloned().collect();
        } else if arg == "-h" || arg == "--help" {
            parsed.help = true;
        } else if arg.starts_with('-') {
            let (flag, value) = flag_of(spec, arg)?;
            let value = match (flag.value, value) {
                (None, None) => None,
                (None, Some(_)) => return Err(format!("{} takes no value", flag.name)),
                (Some(_), Some(value)) => Some(value),
                (Some(what), None) => Some(iter.next().cloned().ok_or_else(|| {
                    format!("{} needs {what}; usage: {}", flag.name, usage(spec))
                })?),
            };
            parsed.flags.push((flag.name, value));
        } else if !spec.words.is_empty() && parsed.word.is_none() {
            if !spec.words.iter().any(|(word, _)| word == arg) {
                return Err(format!(
                    "unknown {} {arg:?}; expected {}",
                    spec.name,
                    words(spec, ", ")
                ));
            }
            parsed.word = Some(arg.clone());
        } else {
            return Err(format!(
                "unexpected argument {arg:?}; usage: {}",
                usage(spec)
            ));
        }
    }
    if spec.word_required && parsed.word.is_none() && !parsed.help {
        return Err(format!("usage: {}", usage(spec)));
    }
    Ok(parsed)
}

/// The declared flag `arg` names, and the value it carries after `=`.
fn flag_of(spec: &TaskSpec, arg: &str) -> Result<(&'static Flag, Option<String>), String> {
    let unknown = || format!("unknown {} flag {arg:?}; usage: {}", spec.name, usage(spec));
    if let Some(flag) = spec.flags.iter().find(|flag| flag.aliases.contains(&arg)) {
        return Ok((flag, None));
    }
    let (name, value) = match arg.split_once('=') {
        Some((name, value)) => (name, Some(value.to_owned())),
        None => (arg, None),
    };
    let flag = spec
        .flags
        .iter()
        .find(|flag| flag.name == name)
        .ok_or_else(unknown)?;
    Ok((flag, value))
}

impl Task {
    /// The typed task from what [`parse_task`] sorted out.
    fn from_parsed(name: &str, parsed: Parsed) -> Result<Self, String> {
        Ok(match name {
            "ci" => Task::Ci,
            "client-go" => Task::ClientGo(parsed.rest),
            "bench" => Task::Bench(Bench {
                suite: parsed.word.clone(),
                quick: parsed.has("--quick"),
                scenarios: parsed.values("--scenario"),
                cases: parsed.values("--case"),
                runs: parsed
                    .value("--runs")
                    .map(|runs| runs.parse().map_err(|err| format!("--runs: {err}")))
                    .transpose()?,
                warm_up: parsed.has("--warm-up"),
                report_from: parsed.value("--report").map(PathBuf::from),
            }),
            "fake-apiserver" => Task::FakeApiserver(parsed.rest),
            "control-plane" => Task::ControlPlane(ControlPlane {
                options: kube_apiserver_options(&parsed),
                command: parsed.word.unwrap_or_default(),
            }),
            "e2e" => Task::E2e(E2e {
                backend: backend(&parsed)?,
                keep: parsed.has("--keep"),
                yes: parsed.has("--yes"),
                kind_name: parsed.value("--kind-name"),
                control_plane: kube_apiserver_options(&parsed),
                test_args: parsed.rest,
            }),
            "kind-image" => Task::KindImage {
                check: parsed.has("--check"),
            },
            "soak" => Task::Soak(Soak {
                minutes: parsed.positive("--minutes")?.unwrap_or(SOAK_MINUTES),
                fake: parsed.has("--fake"),
                restart_every: parsed
                    .positive("--restart-every")?
                    .map_or(SOAK_RESTART_EVERY, Duration::from_secs),
            }),
            "flake" => {
                let runs = parsed.positive("--runs")?.unwrap_or(20);
                let busy = match parsed.value("--busy") {
                    None => 5.min(runs),
                    Some(busy) => busy
                        .parse::<u64>()
                        .map_err(|_| format!("--busy needs a number, not {busy:?}"))?,
                };
                if busy > runs {
                    return Err(format!("--busy {busy} is more than the {runs} runs"));
                }
                let count = |n: u64| usize::try_from(n).map_err(|_| format!("{n} is too many"));
                Task::Flake(Flake {
                    runs: count(runs)?,
                    busy: count(busy)?,
                })
            }
            "protobuf-schema" => Task::ProtobufSchema {
                check: parsed.has("--check"),
                from: parsed.value("--from"),
            },
            "protobuf-fixtures" => Task::ProtobufFixtures,
            other => return Err(format!("{other} is declared but not parsed")),
        })
    }
}

fn kube_apiserver_options(parsed: &Parsed) -> Options {
    Options {
        etcd_compaction_interval: parsed.value("--etcd-compaction-interval"),
        no_watch_cache: parsed.has("--no-watch-cache"),
    }
}

/// The one backend `e2e`'s flags name, if any.
fn backend(parsed: &Parsed) -> Result<Option<Backend>, String> {
    let mut chosen = None;
    for (flag, value) in &parsed.flags {
        let backend = match *flag {
            "--local" => Backend::Local,
            "--kind" => Backend::Kind,
            "--fake" => Backend::Fake,
            "--kubeconfig" => Backend::Kubeconfig(PathBuf::from(value.clone().unwrap_or_default())),
            _ => continue,
        };
        if chosen.replace(backend).is_some() {
            return Err(
                "choose one backend: --local, --kind, --kubeconfig PATH or --fake".to_owned(),
            );
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests;
