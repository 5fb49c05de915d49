//! kinformer's developer tasks, run as `cargo xtask <task>`; `cargo xtask --help` lists them
//! and `cargo xtask <task> --help` a task's flags, all declared in `flags.rs` with clap's derive
//! API and dispatched below to the module that runs the task.
//!
//! - `ci`: what CI checks: formatting, clippy with warnings denied, every test (doc tests
//!   included, and the client-go tests), the docs with warnings denied and the public-API
//!   listings.
//! - `client-go [ARGS] [-- TEST ARGS]`: the differential and conformance tests that drive
//!   client-go itself (needs Go); `cargo test --workspace` leaves them out.
//! - `bench [--quick] [--scenario NAME]... [--case LABEL]... [--runs K]`: kinformer,
//!   kube-runtime and client-go informers on the same scenarios against the same server,
//!   alternately, written to `docs/benchmarks.md` from the results it saves in
//!   `docs/bench-results.json` (see `xtask/peers/BENCH-PROTOCOL.md`); `bench --check-report`
//!   checks that the committed report is what those results rebuild.
//! - `bench fifo|store|workqueue`: a crate's criterion benchmarks and client-go's `go test
//!   -bench`, back to back, with ratios written to `docs/bench-sections/`.
//! - `fake-apiserver [FLAGS]`: the fake API server from kinformer-testing, standalone.
//! - `control-plane up|down|env|build|restart-apiserver`: a real kube-apiserver and etcd, built
//!   from the Go module proxy and cached by version, on loopback.
//! - `e2e [--local|--kind|--kubeconfig PATH|--fake] [-- TEST ARGS]`: the end-to-end suite
//!   against a backend.
//! - `kind-image [--check]`: the kind node image for `e2e --kind`, built from the Go module
//!   proxy and Debian's packages where no image registry is reachable (`--check`: is it at hand).
//! - `soak [--minutes N] [--restart-every SECONDS] [--fake]`: informers, handlers and a
//!   controller under churn, checked against the server every minute, while kube-apiserver is
//!   killed and restarted (or, with `--fake`, watches are cut and history compacted).
//! - `flake [--runs N] [--busy N]`: `cargo test --workspace` N times from one build, the last
//!   ones with every core kept busy, and which tests failed in which runs.
//! - `protobuf-schema [--check] [--from FILE]`: kinformer-protobuf's message tables, from the
//!   Go API types (needs Go, or a saved run of the generator), and its decoders generated per
//!   k8s-openapi type, from those tables and k8s-openapi's source; `protobuf-fixtures`: its
//!   differential fixtures, encoded by client-go, and k8s.io/api's own fixtures of every kind.
//! - `public-api [--check]`: every library's public API, one item a line, in
//!   `docs/public-api/` (`--check`: fail if it changed without the listings); `docs-rs`: every
//!   library documented alone, as docs.rs builds it, with warnings denied.
//!
//! The tidy checks (crate docs, no ignored tests, layering) live in `tidy.rs` and run as
//! ordinary tests, so `cargo test --workspace` enforces them.

// A command-line tool's output is its interface.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::{
    env,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use flags::Task;

mod bench;
mod benchsuite;
mod controlplane;
mod e2e;
mod flags;
mod flake;
mod kind_image;
mod protobuf;
mod public_api;
mod soak;
#[cfg(test)]
mod tidy;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let task = flags::parse(&args).unwrap_or_else(|err| err.exit());
    match run_task(task) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run_task(task: Task) -> Result<(), String> {
    match task {
        Task::Ci => ci(),
        Task::ClientGo(flags) => client_go(&flags.args()),
        Task::Bench(flags) => bench::run(&flags),
        Task::FakeApiserver { flags } => fake_apiserver(&flags),
        Task::ControlPlane(flags) => controlplane::control_plane(&flags),
        Task::E2e(flags) => e2e::e2e(&flags),
        Task::KindImage {
            check,
            prepare_host,
        } => kind_image::kind_image(check, prepare_host),
        Task::Soak(flags) => soak::soak(&flags),
        Task::Flake(flags) => flake::flake(&flags),
        Task::ProtobufSchema { check, from } => protobuf::schema(check, from),
        Task::ProtobufFixtures => protobuf::fixtures(),
        Task::DocsRs => public_api::docs_rs(),
        Task::PublicApi { check } => public_api::public_api(check),
    }
}

/// The workspace root (the parent of this crate's manifest directory).
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

pub(crate) fn cargo() -> Command {
    let mut command = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(project_root());
    // `cargo run` gave this process xtask's own package variables. Build scripts that track
    // them (ring's reruns when CARGO_PKG_NAME or CARGO_MANIFEST_DIR changes) would rebuild, with
    // everything above them, each time a build alternates between the shell and this task.
    for (name, _) in env::vars_os() {
        if name.to_str().is_some_and(is_package_variable) {
            command.env_remove(name);
        }
    }
    command
}

/// A variable cargo sets for the package it runs, not one a user set for the build.
fn is_package_variable(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_MANIFEST_")
        || matches!(
            name,
            "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE" | "OUT_DIR"
        )
}

pub(crate) use kinformer_controlplane::run;

fn ci() -> Result<(), String> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    run(fmt)?;

    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        "kinformer-tests/client-go",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy)?;

    // The README's test command; it runs unit, integration, tidy and doc tests.
    let mut test = cargo();
    test.args(["test", "--workspace"]);
    run(test)?;
    client_go(&[])?;

    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run(doc)?;
    public_api::public_api(true)
}

/// The tests that drive client-go itself (differential and conformance): they build Go programs
/// from `xtask/peers/client-go`, so `cargo test --workspace` leaves them out.
fn client_go(args: &[String]) -> Result<(), String> {
    let go = Command::new("go").arg("version").output();
    if !go.is_ok_and(|output| output.status.success()) {
        return Err("the client-go tests need Go (>= 1.21) on PATH".to_owned());
    }
    // `--workspace`, as `cargo test --workspace` selects: the same feature unification, so
    // these reuse its build rather than building every dependency again for one package.
    let mut test = cargo();
    test.args([
        "test",
        "--locked",
        "--workspace",
        "--features",
        "kinformer-tests/client-go",
        "--test",
        "fifo_differential",
        "--test",
        "store_differential",
        "--test",
        "testing_client_go_conformance",
        "--test",
        "decode_differential",
        "--test",
        "shard_differential",
    ]);
    test.args(args);
    run(test)
}

fn fake_apiserver(args: &[String]) -> Result<(), String> {
    let mut command = cargo();
    command.args([
        "run",
        "--quiet",
        "--release",
        "--package",
        "kinformer-bench-peers",
        "--bin",
        "kinformer-fake-apiserver",
        "--",
    ]);
    command.args(args);
    run(command)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    /// `cargo test` gives this test the same package variables `cargo run` gives xtask.
    #[test]
    fn cargo_runs_without_the_package_variables_of_the_task_that_started_it() {
        let command = super::cargo();
        let removed: Vec<&OsStr> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name)
            .collect();
        for name in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
        ] {
            assert!(removed.contains(&OsStr::new(name)), "{name} is passed on");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "PATH",
        ] {
            assert!(!removed.contains(&OsStr::new(name)), "{name} is removed");
        }
    }
}
