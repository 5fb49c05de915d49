//! What `cargo xtask` must keep accepting: every invocation the docs show, and the help.

use super::{help::flag_usage, *};

fn parse_line(line: &str) -> Result<Task, String> {
    let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    parse(&args)
}

fn task(line: &str) -> Task {
    parse_line(line).unwrap_or_else(|err| panic!("{line}: {err}"))
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

fn control_plane(command: &str, options: Options) -> Task {
    Task::ControlPlane(ControlPlane {
        command: command.to_owned(),
        options,
    })
}

/// Every invocation README.md, docs/e2e.md, docs/benchmarks.md, .ci/run and the xtask docs
/// show, and what it must parse to.
#[test]
fn every_documented_invocation_parses_as_documented() {
    assert_eq!(task(""), Task::Help(None));
    assert_eq!(task("help"), Task::Help(None));
    assert_eq!(task("ci"), Task::Ci);
    assert_eq!(task("client-go"), Task::ClientGo(Vec::new()));
    assert_eq!(
        task("client-go -- --nocapture"),
        Task::ClientGo(strings(&["--", "--nocapture"]))
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
        bench("bench --scenario watch --case kinformer --case client-go --runs 2"),
        Bench {
            scenarios: strings(&["watch"]),
            cases: strings(&["kinformer", "client-go"]),
            runs: Some(2),
            ..Bench::default()
        }
    );
    for suite in ["fifo", "store", "workqueue"] {
        assert_eq!(
            bench(&format!("bench {suite}")).suite.as_deref(),
            Some(suite)
        );
    }

    assert_eq!(task("fake-apiserver"), Task::FakeApiserver(Vec::new()));
    assert_eq!(
        task("fake-apiserver --seed pods=2000"),
        Task::FakeApiserver(strings(&["--seed", "pods=2000"]))
    );
    assert_eq!(
        task("fake-apiserver --help"),
        Task::FakeApiserver(strings(&["--help"])),
        "the server prints its own flags"
    );

    for command in ["up", "down", "env", "build", "restart-apiserver"] {
        assert_eq!(
            task(&format!("control-plane {command}")),
            control_plane(command, Options::default())
        );
    }
    let knobs = Options {
        etcd_compaction_interval: Some("10s".to_owned()),
        no_watch_cache: true,
    };
    for line in [
        "control-plane up --no-watch-cache --etcd-compaction-interval 10s",
        "control-plane --watch-cache=false --etcd-compaction-interval=10s up",
    ] {
        assert_eq!(task(line), control_plane("up", knobs.clone()), "{line}");
    }

    assert_eq!(e2e("e2e"), E2e::default());
    for (flag, backend) in [
        ("--local", Backend::Local),
        ("--kind", Backend::Kind),
        ("--fake", Backend::Fake),
        ("--kubeconfig /k", Backend::Kubeconfig(PathBuf::from("/k"))),
        ("--kubeconfig=/k", Backend::Kubeconfig(PathBuf::from("/k"))),
    ] {
        assert_eq!(e2e(&format!("e2e {flag}")).backend, Some(backend), "{flag}");
    }
    assert_eq!(
        e2e("e2e --kind --keep --kind-name other"),
        E2e {
            backend: Some(Backend::Kind),
            keep: true,
            kind_name: Some("other".to_owned()),
            ..E2e::default()
        }
    );
    assert!(e2e("e2e --kubeconfig /k --yes").yes);
    assert_eq!(
        e2e("e2e --local --no-watch-cache").control_plane,
        Options {
            no_watch_cache: true,
            ..Options::default()
        }
    );
    assert_eq!(
        e2e("e2e --local -- an_informer_converges").test_args,
        strings(&["an_informer_converges"])
    );
    assert_eq!(
        e2e("e2e --local -- paged_list --nocapture").test_args,
        strings(&["paged_list", "--nocapture"])
    );

    assert_eq!(task("kind-image"), Task::KindImage { check: false });
    assert_eq!(task("kind-image --check"), Task::KindImage { check: true });

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
    assert_eq!(task("flake --runs 3"), flake(3, 3));
    assert_eq!(task("flake --runs 3 --busy 0"), flake(3, 0));
    assert_eq!(task("flake --runs=10 --busy=2"), flake(10, 2));
    assert!(parse(&strings(&["flake", "--runs", "2", "--busy", "3"])).is_err());
    assert!(parse(&strings(&["flake", "--runs", "0"])).is_err());

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
fn help_after_a_task_is_that_tasks_help() {
    assert_eq!(task("--help"), Task::Help(None));
    for spec in TASKS.iter().filter(|spec| spec.name != "fake-apiserver") {
        assert_eq!(
            task(&format!("{} --help", spec.name)),
            Task::Help(Some(spec.name))
        );
    }
    assert_eq!(task("e2e --local -h"), Task::Help(Some("e2e")));
    assert_eq!(
        task("control-plane --help"),
        Task::Help(Some("control-plane"))
    );
}

#[test]
fn the_help_lists_every_task_and_every_flag_with_its_help() {
    let overview = overview();
    for spec in TASKS {
        assert!(overview.contains(spec.name), "{}", spec.name);
        assert!(overview.contains(spec.about), "{}", spec.name);
        let help = help(spec.name);
        for flag in spec.flags {
            assert!(help.contains(&flag_usage(flag)), "{}", flag.name);
            assert!(help.contains(flag.help), "{}", flag.name);
        }
        for (word, about) in spec.words {
            assert!(help.contains(word) && help.contains(about), "{word}");
        }
    }
    assert!(help("bench").starts_with(
        "cargo xtask bench [fifo|store|workqueue] [--quick] [--scenario NAME]... \
         [--case LABEL]... [--runs K] [--warm-up] [--report FILE]\n"
    ));
    assert!(help("e2e").contains("-- TEST ARGS"));
}

#[test]
fn every_declared_task_parses() {
    for spec in TASKS {
        let line = match spec.words.first() {
            Some((word, _)) => format!("{} {word}", spec.name),
            None => spec.name.to_owned(),
        };
        parse_line(&line).unwrap_or_else(|err| panic!("{line}: {err}"));
    }
}

#[test]
fn nonsense_is_refused_with_the_usage() {
    for line in [
        "deploy",
        "bench --bogus",
        "bench walrus",
        "bench --runs",
        "bench --runs many",
        "control-plane",
        "control-plane sideways",
        "e2e --local --fake",
        "e2e --kubeconfig",
        "e2e stray",
        "kind-image --check=yes",
        "soak --minutes 0",
        "soak --minutes",
        "soak --bogus",
        "protobuf-schema --from",
    ] {
        assert!(parse_line(line).is_err(), "{line} parsed");
    }
    assert!(parse_line("soak --bogus").unwrap_err().contains("usage"));
    assert!(
        parse_line("e2e --local --fake")
            .unwrap_err()
            .contains("choose one backend")
    );
}
