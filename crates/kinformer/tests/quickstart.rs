//! The `quickstart` example, run as a user runs it, against clusters it cannot read: one that
//! refuses the connection and one that answers every request with 403. Both times it must say
//! why within 2 s of starting, name the cause, and exit non-zero once its sync deadline passes.
//!
//! The example's own binary runs (built by `cargo test` with the other examples, or here when a
//! test filter skipped them), pointed at the cluster through `KUBECONFIG`.

use std::{
    io::{BufRead, BufReader},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
};

use kinformer_testing::{FakeApiServer, Fault};

/// Where cargo puts the example: `target/<profile>/examples/`, beside this test's `deps/`.
fn quickstart_binary() -> PathBuf {
    let test = std::env::current_exe().expect("the test binary has a path");
    let profile_dir = test
        .parent()
        .and_then(Path::parent)
        .expect("tests run from target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("quickstart{}", std::env::consts::EXE_SUFFIX));
    if !binary.is_file() {
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "-p",
                "kinformer",
                "--example",
                "quickstart",
            ])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the quickstart failed: {status}");
    }
    binary
}

/// A kubeconfig for `server` without credentials, in a fresh directory.
fn kubeconfig(name: &str, server: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kinformer-quickstart-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("config");
    let config = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters:\n- name: test\n  cluster:\n    server: {server}\n\
         contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n\
         users:\n- name: test\n  user: {{}}\n"
    );
    std::fs::write(&path, config).expect("kubeconfig written");
    path
}

/// What one run of the quickstart printed, and how it ended.
struct Run {
    status: ExitStatus,
    stdout: Vec<String>,
}

impl Run {
    /// The lines reporting a failing informer.
    fn failures(&self) -> Vec<&str> {
        self.stdout
            .iter()
            .map(String::as_str)
            .filter(|line| line.contains(" failing: "))
            .collect()
    }

    /// When the first failure was printed, in seconds since the quickstart started, as it
    /// prints it (`  0.1s Pods         failing: ...`).
    fn first_failure_at(&self) -> f64 {
        let line = self.failures().first().copied().unwrap_or_else(|| {
            panic!(
                "no failure reported; the quickstart printed {:#?}",
                self.stdout
            )
        });
        line.split_whitespace()
            .next()
            .and_then(|at| at.strip_suffix('s'))
            .and_then(|at| at.parse().ok())
            .unwrap_or_else(|| panic!("no time at the start of {line:?}"))
    }
}

impl Run {
    /// The run exited non-zero, said why within 2 s, and named `cause` for every informer.
    fn assert_failed_saying(&self, cause: &str) {
        assert!(
            !self.status.success(),
            "exit {}: {:#?}",
            self.status,
            self.stdout
        );
        assert!(
            self.first_failure_at() < 2.0,
            "the cause came late: {:#?}",
            self.stdout
        );
        let failures = self.failures();
        for kind in ["Pod", "Deployment", "ConfigMap"] {
            assert!(
                failures
                    .iter()
                    .any(|line| line.contains(kind) && line.contains(cause)),
                "no {cause:?} reported for {kind}: {failures:#?}"
            );
        }
    }
}

/// Runs the quickstart for at most `seconds` against the cluster in `kubeconfig`.
async fn run_quickstart(kubeconfig: PathBuf, seconds: u64) -> Run {
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(quickstart_binary())
            .args(["--seconds", &seconds.to_string()])
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the quickstart starts");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"))
            .lines()
            .map(|line| line.expect("utf-8 output"))
            .collect();
        let status = child.wait().expect("the quickstart ends");
        Run { status, stdout }
    })
    .await
    .expect("the run completes")
}

#[tokio::test(flavor = "multi_thread")]
async fn against_a_closed_port_the_quickstart_says_why_and_exits_non_zero() {
    // A port that was free a moment ago and has no listener now.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let config = kubeconfig("refused", &format!("http://127.0.0.1:{port}"));

    let run = run_quickstart(config, 3).await;

    run.assert_failed_saying("refused");
}

#[tokio::test(flavor = "multi_thread")]
async fn against_a_forbidding_server_the_quickstart_says_why_and_exits_non_zero() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    server.faults().inject(Fault::status(403).times(usize::MAX));
    let config = kubeconfig("forbidden", &server.url());

    let run = run_quickstart(config, 3).await;

    run.assert_failed_saying("403");
    // And the summary at the deadline says which informers did not sync.
    assert!(
        run.stdout.iter().any(|line| line.contains("not synced")),
        "{:#?}",
        run.stdout
    );
}
