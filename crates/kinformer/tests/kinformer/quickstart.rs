//! The `quickstart` example, run as a user runs it, against clusters it cannot read: one that
//! refuses the connection and one that answers every request with 403. Both times it must say
//! why while it waits for the sync, for every informer, and exit non-zero when the user gives
//! up (Ctrl-C, sent once the test has read every cause) or its sync deadline passes
//! (`--sync-timeout`). No bound on how fast: on a loaded machine the cause comes late, never not
//! at all, and the test waits for it.
//!
//! The example's own binary runs (built by `cargo test` with the other examples, or here when a
//! test filter skipped them), pointed at the cluster through `KUBECONFIG`.

use std::{
    io::{BufRead, BufReader},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
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

/// A kubeconfig for `server` without credentials, in a fresh directory removed on drop.
struct Kubeconfig {
    dir: PathBuf,
}

impl Kubeconfig {
    fn path(&self) -> PathBuf {
        self.dir.join("config")
    }
}

impl Drop for Kubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn kubeconfig(name: &str, server: &str) -> Kubeconfig {
    let dir = std::env::temp_dir().join(format!(
        "kinformer-quickstart-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = Kubeconfig { dir };
    let path = kubeconfig.path();
    let config = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters:\n- name: test\n  cluster:\n    server: {server}\n\
         contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n\
         users:\n- name: test\n  user: {{}}\n"
    );
    std::fs::write(&path, config).expect("kubeconfig written");
    kubeconfig
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
            .filter(|line| is_failure(line))
            .collect()
    }

    /// Where the status lines printed when the sync wait ended start (`Pods after 3s: ...`).
    fn sync_wait_ended_at(&self) -> usize {
        self.stdout
            .iter()
            .position(|line| line.contains(" after "))
            .unwrap_or_else(|| panic!("no status after the sync wait: {:#?}", self.stdout))
    }
}

impl Run {
    /// The run exited non-zero and, while it waited for the sync, named `cause` for every
    /// informer; then it said which informers had not synced.
    fn assert_failed_saying(&self, cause: &str) {
        self.assert_gave_up();
        assert!(
            !self.status.success(),
            "exit {}: {:#?}",
            self.status,
            self.stdout
        );
        let first_failure = self
            .stdout
            .iter()
            .position(|line| is_failure(line))
            .unwrap_or_else(|| panic!("no failure reported: {:#?}", self.stdout));
        assert!(
            first_failure < self.sync_wait_ended_at(),
            "the cause was not told while the quickstart waited: {:#?}",
            self.stdout
        );
        let failures = self.failures();
        for kind in KINDS {
            assert!(
                failures
                    .iter()
                    .any(|line| line.contains(kind) && line.contains(cause)),
                "no {cause:?} reported for {kind}: {failures:#?}"
            );
        }
    }
}

/// How a run of the quickstart is brought to an end.
#[derive(Clone, Copy)]
enum Ending {
    /// Ctrl-C once it has said, for every informer, that it fails with this cause; the sync
    /// deadline is only a hang guard then.
    InterruptAfter(&'static str),
    /// Its sync deadline, in seconds.
    Deadline(u64),
}

/// The informers the quickstart runs, by the kind its failure lines name.
const KINDS: [&str; 3] = ["Pod", "Deployment", "ConfigMap"];

/// Runs the quickstart against the cluster in `kubeconfig` until `ending`.
async fn run_quickstart(kubeconfig: &Kubeconfig, ending: Ending) -> Run {
    let kubeconfig = kubeconfig.path();
    let sync_timeout = match ending {
        Ending::InterruptAfter(_) => 3_600,
        Ending::Deadline(seconds) => seconds,
    };
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(quickstart_binary())
            .args([
                "--seconds",
                "1",
                "--sync-timeout",
                &sync_timeout.to_string(),
            ])
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the quickstart starts");
        let mut stdout = Vec::new();
        let mut interrupted = false;
        for line in BufReader::new(child.stdout.take().expect("piped stdout")).lines() {
            stdout.push(line.expect("utf-8 output"));
            if let Ending::InterruptAfter(cause) = ending
                && !interrupted
                && KINDS.iter().all(|kind| {
                    stdout
                        .iter()
                        .any(|line| is_failure(line) && line.contains(kind) && line.contains(cause))
                })
            {
                interrupt(&child);
                interrupted = true;
            }
        }
        let status = child.wait().expect("the quickstart ends");
        Run { status, stdout }
    })
    .await
    .expect("the run completes")
}

/// Presses Ctrl-C for `child`: sends it SIGINT.
fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -INT failed: {status}");
}

fn is_failure(line: &str) -> bool {
    line.contains(" failing: ")
}

impl Run {
    /// The run exited non-zero, after saying which informers had not synced.
    fn assert_gave_up(&self) {
        assert!(
            !self.status.success(),
            "exit {}: {:#?}",
            self.status,
            self.stdout
        );
        let statuses = &self.stdout[self.sync_wait_ended_at()..];
        assert!(
            statuses.iter().any(|line| line.contains("not synced")),
            "{:#?}",
            self.stdout
        );
    }
}

/// A port that was free a moment ago and has no listener now.
fn closed_port_kubeconfig(name: &str) -> Kubeconfig {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    kubeconfig(name, &format!("http://127.0.0.1:{port}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn against_a_closed_port_the_quickstart_says_why_and_exits_non_zero() {
    let config = closed_port_kubeconfig("refused");

    let run = run_quickstart(&config, Ending::InterruptAfter("refused")).await;

    run.assert_failed_saying("refused");
}

#[tokio::test(flavor = "multi_thread")]
async fn against_a_forbidding_server_the_quickstart_says_why_and_exits_non_zero() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    server.faults().inject(Fault::status(403).times(usize::MAX));
    let config = kubeconfig("forbidden", &server.url());

    let run = run_quickstart(&config, Ending::InterruptAfter("403")).await;

    run.assert_failed_saying("403");
}

#[tokio::test(flavor = "multi_thread")]
async fn at_its_sync_deadline_the_quickstart_gives_up_and_exits_non_zero() {
    let config = closed_port_kubeconfig("deadline");

    let run = run_quickstart(&config, Ending::Deadline(1)).await;

    run.assert_gave_up();
}
