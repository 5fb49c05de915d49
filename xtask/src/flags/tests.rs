//! What `cargo xtask` must keep accepting: every invocation the docs show, and the help.

use super::*;

fn parse_line(line: &str) -> Result<Task, clap::Error> {
    let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    parse(&args)
}

fn task(line: &str) -> Task {
    parse_line(line).unwrap_or_else(|err| panic!("{line}: {err}"))
}

/// The error `line` is refused with.
fn refused(line: &str) -> clap::Error {
    match parse_line(line) {
        Ok(task) => panic!("{line} parsed as {task:?}"),
        Err(err) => err,
    }
}

/// What `cargo xtask help LINE` prints.
fn help(line: &str) -> String {
    let err = refused(&format!("help {line}"));
    assert_eq!(err.kind(), ErrorKind::DisplayHelp, "{line}");
    err.to_string()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|arg| (*arg).to_owned()).collect()
}

fn e2e(line: &str) -> E2e {
    match task(line) {
        Task::E2e(e2e) => e2e,
        other => panic!("{line}: {other:?}"),
    }
}

fn bench(line: &str) -> Bench {
    match task(line) {
        Task::Bench(bench) => bench,
        other => panic!("{line}: {other:?}"),
    }
}

fn client_go(line: &str) -> Vec<String> {
    match task(line) {
        Task::ClientGo(client_go) => client_go.args(),
        other => panic!("{line}: {other:?}"),
    }
}

fn fake_apiserver(line: &str) -> Vec<String> {
    match task(line) {
        Task::FakeApiserver { flags } => flags,
        other => panic!("{line}: {other:?}"),
    }
}

fn control_plane(command: &str, options: ApiserverFlags) -> Task {
    Task::ControlPlane(ControlPlane {
        command: command.to_owned(),
        options,
    })
}

#[test]
fn the_declarations_are_consistent() {
    Cli::command().debug_assert();
}

/// Every invocation README.md, docs/e2e.md, docs/benchmarks.md, .ci/run and the xtask docs
/// show, and what it must parse to.
#[test]
fn every_documented_invocation_parses_as_documented() {
    assert_eq!(task("ci"), Task::Ci);
    assert_eq!(client_go("client-go"), Vec::<String>::new());
    assert_eq!(
        client_go("client-go -- --nocapture"),
        strings(&["--", "--nocapture"])
    );
    assert_eq!(
        client_go("client-go --release -- --nocapture"),
        strings(&["--release", "--", "--nocapture"])
    );
    assert_eq!(
        client_go("client-go some_filter --exact"),
        strings(&["some_filter", "--exact"])
    );

    assert_eq!(bench("bench"), Bench::default());
    assert_eq!(
        bench("bench --quick"),
        Bench {
            quick: true,
            ..Bench::default()
        }
    );
    for scenario in ["lookups", "memory"] {
        assert_eq!(
            bench(&format!("bench --scenario {scenario} --runs 1")),
            Bench {
                scenarios: strings(&[scenario]),
                runs: Some(1),
                ..Bench::default()
            }
        );
    }
    assert_eq!(
        bench("bench --scenario watch --scenario decode-floor --report target/r.json"),
        Bench {
            scenarios: strings(&["watch", "decode-floor"]),
            report_from: Some(PathBuf::from("target/r.json")),
            ..Bench::default()
        }
    );
    assert_eq!(
        bench("bench --scenario watch --case kinformer --case client-go --runs 2 --no-warm-up"),
        Bench {
            scenarios: strings(&["watch"]),
            cases: strings(&["kinformer", "client-go"]),
            runs: Some(2),
            no_warm_up: true,
            ..Bench::default()
        }
    );
    assert_eq!(
        bench("bench --runs 1 --runs 2").runs,
        Some(2),
        "the last wins"
    );
    assert_eq!(
        bench("bench --check-report"),
        Bench {
            check_report: true,
            ..Bench::default()
        }
    );
    // The check rebuilds the whole report from the committed results: nothing narrows it.
    for narrowing in ["--quick", "--scenario watch", "--runs 2", "--report r.json"] {
        let error = refused(&format!("bench --check-report {narrowing}"));
        assert_eq!(error.kind(), ErrorKind::ArgumentConflict, "{narrowing}");
    }
    for (suite, _) in BENCH_SUITES {
        assert_eq!(
            bench(&format!("bench {suite}")).suite.as_deref(),
            Some(*suite)
        );
    }

    assert_eq!(fake_apiserver("fake-apiserver"), Vec::<String>::new());
    assert_eq!(
        fake_apiserver("fake-apiserver --seed pods=2000"),
        strings(&["--seed", "pods=2000"])
    );
    assert_eq!(
        fake_apiserver("fake-apiserver --help"),
        strings(&["--help"]),
        "the server prints its own flags"
    );

    for (command, _) in CONTROL_PLANE_COMMANDS {
        assert_eq!(
            task(&format!("control-plane {command}")),
            control_plane(command, ApiserverFlags::default())
        );
    }
    let knobs = ApiserverFlags {
        etcd_compaction_interval: Some("10s".to_owned()),
        no_watch_cache: true,
    };
    for line in [
        "control-plane up --no-watch-cache --etcd-compaction-interval 10s",
        "control-plane --watch-cache=false --etcd-compaction-interval=10s up",
    ] {
        assert_eq!(task(line), control_plane("up", knobs.clone()), "{line}");
    }
    assert_eq!(
        knobs.options(),
        Options {
            etcd_compaction_interval: Some("10s".to_owned()),
            no_watch_cache: true,
        }
    );

    assert_eq!(e2e("e2e"), E2e::default());
    assert_eq!(e2e("e2e").backend(), None);
    for (flag, backend) in [
        ("--local", Backend::Local),
        ("--kind", Backend::Kind),
        ("--fake", Backend::Fake),
        ("--kubeconfig /k", Backend::Kubeconfig(PathBuf::from("/k"))),
        ("--kubeconfig=/k", Backend::Kubeconfig(PathBuf::from("/k"))),
    ] {
        assert_eq!(
            e2e(&format!("e2e {flag}")).backend(),
            Some(backend),
            "{flag}"
        );
    }
    assert_eq!(
        e2e("e2e --kind --keep --kind-name other"),
        E2e {
            kind: true,
            keep: true,
            kind_name: Some("other".to_owned()),
            ..E2e::default()
        }
    );
    assert!(e2e("e2e --kubeconfig /k --yes").yes);
    for line in [
        "e2e --local --no-watch-cache",
        "e2e --local --watch-cache=false",
    ] {
        assert_eq!(
            e2e(line).control_plane,
            ApiserverFlags {
                no_watch_cache: true,
                ..ApiserverFlags::default()
            },
            "{line}"
        );
    }
    assert_eq!(
        e2e("e2e --local -- an_informer_converges").test_args,
        strings(&["an_informer_converges"])
    );
    assert_eq!(
        e2e("e2e --local -- paged_list --nocapture --watch-cache=false").test_args,
        strings(&["paged_list", "--nocapture", "--watch-cache=false"]),
        "what follows -- is the test binaries', as it is"
    );

    assert_eq!(
        task("kind-image"),
        Task::KindImage {
            check: false,
            prepare_host: false
        }
    );
    assert_eq!(
        task("kind-image --check"),
        Task::KindImage {
            check: true,
            prepare_host: false
        }
    );
    assert_eq!(
        task("kind-image --prepare-host"),
        Task::KindImage {
            check: false,
            prepare_host: true
        }
    );

    let soak = |minutes, fake, every| {
        Task::Soak(Soak {
            minutes,
            fake,
            restart_every: Duration::from_secs(every),
        })
    };
    assert_eq!(task("soak"), soak(3, false, 120));
    assert_eq!(task("soak --minutes 30"), soak(30, false, 120));
    assert_eq!(
        task("soak --minutes 3 --restart-every 60"),
        soak(3, false, 60)
    );
    assert_eq!(task("soak --fake --minutes 5"), soak(5, true, 120));

    let flake = |runs, busy| Task::Flake(Flake { runs, busy });
    assert_eq!(task("flake"), flake(20, 5));
    assert_eq!(
        task("flake --runs 3"),
        flake(3, 3),
        "at most every run is busy"
    );
    assert_eq!(task("flake --runs 3 --busy 0"), flake(3, 0));
    assert_eq!(task("flake --runs=10 --busy=2"), flake(10, 2));
    assert_eq!(task("flake --runs 5 --busy 5"), flake(5, 5));

    assert_eq!(
        task("protobuf-schema"),
        Task::ProtobufSchema {
            check: false,
            from: None
        }
    );
    assert_eq!(
        task("protobuf-schema --check --from saved.txt"),
        Task::ProtobufSchema {
            check: true,
            from: Some("saved.txt".to_owned())
        }
    );
    assert_eq!(task("protobuf-fixtures"), Task::ProtobufFixtures);
}

#[test]
fn help_is_asked_for_without_a_task_and_after_one() {
    for line in ["", "help", "--help", "-h"] {
        let err = refused(line);
        assert_eq!(err.kind(), ErrorKind::DisplayHelp, "{line:?}");
    }
    for command in Cli::command().get_subcommands() {
        let name = command.get_name();
        help(name);
        if name != "fake-apiserver" && name != "help" {
            let line = format!("{name} --help");
            assert_eq!(refused(&line).kind(), ErrorKind::DisplayHelp, "{line}");
        }
    }
    // After flags, and before a required word.
    for line in [
        "e2e --local -h",
        "bench --quick --help",
        "soak --minutes 1 --help",
        "control-plane --no-watch-cache --help",
    ] {
        assert_eq!(refused(line).kind(), ErrorKind::DisplayHelp, "{line}");
    }
}

#[test]
fn the_help_lists_every_task_and_every_flag_with_its_help() {
    let overview = help("");
    let mut command = Cli::command();
    command.build();
    for task in command.get_subcommands() {
        let name = task.get_name();
        assert!(overview.contains(name), "{name}");
        let about = task.get_about().expect("every task says what it does");
        assert!(overview.contains(&about.to_string()), "{name}");
        if name == "help" {
            continue;
        }
        let help = help(name);
        for arg in task.get_arguments().filter(|arg| arg.get_id() != "help") {
            if let Some(long) = arg.get_long() {
                assert!(help.contains(&format!("--{long}")), "{name} --{long}");
            }
            let values = arg
                .get_action()
                .takes_values()
                .then(|| arg.get_value_names());
            for value in values.flatten().into_iter().flatten() {
                assert!(help.contains(value.as_str()), "{name} {value}");
            }
            let about = arg.get_help().expect("every flag says what it does");
            assert!(help.contains(&about.to_string()), "{name} {}", arg.get_id());
            for word in arg.get_possible_values() {
                let about = word.get_help().expect("every word says what it does");
                assert!(help.contains(word.get_name()), "{name} {}", word.get_name());
                assert!(
                    help.contains(&about.to_string()),
                    "{name} {}",
                    word.get_name()
                );
            }
        }
    }
    assert!(help("e2e").contains("-- <TEST ARGS>..."));
    assert!(help("client-go").contains("-- <TEST ARGS>..."));
    assert!(help("bench").contains("[SUITE]"));
    assert!(help("control-plane").contains("--watch-cache=false"));
}

#[test]
fn every_declared_task_parses() {
    for task in Cli::command().get_subcommands() {
        let name = task.get_name();
        if name == "help" {
            continue;
        }
        let word = task
            .get_positionals()
            .find(|arg| arg.is_required_set())
            .and_then(|arg| arg.get_possible_values().into_iter().next());
        let line = match word {
            Some(word) => format!("{name} {}", word.get_name()),
            None => name.to_owned(),
        };
        parse_line(&line).unwrap_or_else(|err| panic!("{line}: {err}"));
    }
}

#[test]
fn nonsense_is_refused() {
    for (line, kind) in [
        ("deploy", ErrorKind::InvalidSubcommand),
        ("bench --bogus", ErrorKind::UnknownArgument),
        ("bench walrus", ErrorKind::InvalidValue),
        ("bench --runs", ErrorKind::InvalidValue),
        ("bench --runs many", ErrorKind::ValueValidation),
        ("control-plane", ErrorKind::MissingRequiredArgument),
        ("control-plane sideways", ErrorKind::InvalidValue),
        (
            "control-plane up --watch-cache=true",
            ErrorKind::UnknownArgument,
        ),
        ("e2e --local --fake", ErrorKind::ArgumentConflict),
        ("e2e --kubeconfig /k --kind", ErrorKind::ArgumentConflict),
        ("e2e --kubeconfig", ErrorKind::InvalidValue),
        ("e2e stray", ErrorKind::UnknownArgument),
        ("kind-image --check=yes", ErrorKind::TooManyValues),
        (
            "kind-image --check --prepare-host",
            ErrorKind::ArgumentConflict,
        ),
        ("soak --minutes 0", ErrorKind::ValueValidation),
        ("soak --minutes", ErrorKind::InvalidValue),
        ("soak --restart-every 0", ErrorKind::ValueValidation),
        ("soak --restart-every 1m", ErrorKind::ValueValidation),
        ("soak --bogus", ErrorKind::UnknownArgument),
        ("flake --runs 0", ErrorKind::ValueValidation),
        ("flake --busy some", ErrorKind::ValueValidation),
        ("flake --runs 2 --busy 3", ErrorKind::ArgumentConflict),
        ("protobuf-schema --from", ErrorKind::InvalidValue),
    ] {
        assert_eq!(refused(line).kind(), kind, "{line}");
    }
    // What was wrong, and what is right.
    for (line, says) in [
        ("deploy", "Usage: cargo xtask <COMMAND>"),
        ("soak --bogus", "Usage: cargo xtask soak"),
        ("e2e stray", "Usage: cargo xtask e2e"),
        ("bench walrus", "[possible values: fifo, store, workqueue]"),
        ("soak --minutes 0", "needs a positive number"),
        ("soak --restart-every 1m", "needs a positive number"),
        ("flake --runs 0", "needs a positive number"),
        (
            "flake --runs 2 --busy 3",
            "--busy 3 is more than the 2 runs",
        ),
    ] {
        let err = refused(line).to_string();
        assert!(err.contains(says), "{line}: {err}");
    }
}
