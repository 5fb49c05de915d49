//! `kinformer-fake-apiserver`: the fake API server as a standalone process.
//!
//! ```text
//! kinformer-fake-apiserver [--listen 127.0.0.1:PORT] [--kubeconfig PATH] [--seed RESOURCE=N]...
//!                          [--churn EVENTS_PER_SEC] [--history EVENTS] [--bookmark-interval-ms MS]
//!                          [--lazy-protobuf]
//! ```
//!
//! The bound address is the first line of stdout; `serving ...` on stderr says the seeded
//! objects are in place. Seeded built-ins are encoded in protobuf before that (see
//! `FakeApiServer::warm_protobuf`), so the first protobuf client does not pay for the
//! server's cache; `--lazy-protobuf` leaves it to the first protobuf request instead.
//!
//! Faults are steered over HTTP under `/admin/`:
//! `POST /admin/faults/status?code=429&verb=list&resource=pods&times=2&retryAfter=1`,
//! `POST /admin/faults/close-watches`, `POST /admin/faults/watch-line` (body = the line),
//! `POST /admin/faults/unknown-event`, `POST /admin/faults/delay?ms=100`,
//! `POST /admin/faults/outage?ms=2000`, `POST /admin/faults/clear`, `POST /admin/compact`,
//! `GET /admin/requests`.
//!
//! The benchmark endpoints of `xtask/peers/BENCH-PROTOCOL.md` (`R` is `pods` or `configmaps`;
//! see `kinformer_testing::bench`):
//! `POST /admin/bench/update?resource=R&count=C&rate=S` (C updates in the background, S a
//! second or 0 for as fast as possible, then a sentinel object),
//! `POST /admin/bench/relist?resource=R&fraction=F` (close every watch, update and delete every
//! round(1/F)-th object, create a sentinel, compact: every resume gets 410),
//! `GET /admin/bench/checksum?resource=R` and `GET /admin/content-types` (responses to get,
//! list and watch by Content-Type).

// A command-line tool reports on stdout and stderr by design.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use kinformer_testing::{FakeApiServer, ResourceType, ServerOptions, builtin_resources, fixtures};
use serde_json::{Value, json};

/// The peers' allocator: the server shares the peers' two cores, so the CPU it spends an
/// update is taken from them; on glibc's malloc, allocating and freeing were a large share of
/// what it spent writing a watch (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: kinformer_bench_peers::PeerAllocator = kinformer_bench_peers::PeerAllocator;

/// The server's command line; the fields' doc comments are the help.
#[derive(Debug, Parser)]
#[command(
    name = "kinformer-fake-apiserver",
    about = "kinformer-testing's fake API server, standalone, with its /admin/ endpoints",
    args_override_self = true
)]
struct Options {
    /// the address to listen on (port 0: any free port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// write a kubeconfig for the server to this file
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<String>,
    /// create N objects of RESOURCE (a plural or short name) before serving; may be repeated
    #[arg(long = "seed", value_name = "RESOURCE=N", value_parser = seed_flag)]
    seeds: Vec<(String, usize)>,
    /// updates per second to the seeded objects while serving (0: none)
    #[arg(long, value_name = "EVENTS_PER_SEC", default_value_t = 0)]
    churn: u64,
    /// watch events kept for resuming watches (the compaction window)
    #[arg(long, value_name = "EVENTS", default_value_t = 10_000)]
    history: usize,
    /// the period of BOOKMARK events on watches that allow them, in milliseconds
    #[arg(
        long = "bookmark-interval-ms",
        value_name = "MS",
        default_value = "60000",
        value_parser = millis
    )]
    bookmark_interval: Duration,
    /// encode the seeded objects in protobuf on the first protobuf request, not before serving
    #[arg(long)]
    lazy_protobuf: bool,
}

/// `--seed RESOURCE=N`.
fn seed_flag(value: &str) -> Result<(String, usize), String> {
    let (resource, count) = value
        .split_once('=')
        .ok_or_else(|| "expects RESOURCE=N".to_owned())?;
    let count = count.parse().map_err(|e| format!("{count:?}: {e}"))?;
    Ok((resource.to_owned(), count))
}

/// `--bookmark-interval-ms MS`.
fn millis(value: &str) -> Result<Duration, String> {
    value
        .parse()
        .map(Duration::from_millis)
        .map_err(|e| format!("{e}"))
}

/// Object number `i` of a served resource: the realistic fixtures where there are some.
fn seed_object(resource: &ResourceType, i: usize) -> Value {
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "pods") => fixtures::pod(i),
        ("", "configmaps") => fixtures::config_map(i),
        ("", "namespaces") => fixtures::namespace(&format!("seeded-{i}")),
        _ => {
            let mut object = json!({
                "apiVersion": resource.api_version(),
                "kind": resource.kind,
                "metadata": { "name": format!("{}-{i}", resource.singular), "labels": { "seed": "true" } },
            });
            if resource.namespaced {
                object["metadata"]["namespace"] = json!(fixtures::namespace_of(i));
            }
            object
        }
    }
}

/// Who a seeded object is, so churn can find it again without keeping the object.
#[derive(Debug)]
struct Seeded {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    name: String,
}

fn seed(server: &FakeApiServer, options: &Options) -> Result<Vec<Seeded>, String> {
    let served = builtin_resources();
    let mut seeded = Vec::new();
    if options
        .seeds
        .iter()
        .any(|(plural, _)| served.iter().any(|r| r.plural == *plural && r.namespaced))
    {
        for n in 0..fixtures::NAMESPACES {
            server
                .create_object(fixtures::namespace(&fixtures::namespace_of(n)))
                .map_err(|e| e.to_string())?;
        }
    }
    for (plural, count) in &options.seeds {
        let resource = served
            .iter()
            .find(|r| r.plural == *plural || r.short_names.iter().any(|s| s == plural))
            .ok_or_else(|| format!("--seed: no served resource is called {plural}"))?;
        for i in 0..*count {
            let created = server
                .create_object(seed_object(resource, i))
                .map_err(|e| e.to_string())?;
            seeded.push(Seeded {
                api_version: resource.api_version(),
                kind: resource.kind.clone(),
                namespace: created
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                name: created
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
    }
    Ok(seeded)
}

/// Rewrites one annotation on the seeded objects in turn, `per_second` times a second.
async fn churn(server: &FakeApiServer, seeded: Vec<Seeded>, per_second: u64) {
    if per_second == 0 || seeded.is_empty() {
        return std::future::pending().await;
    }
    const TICK: Duration = Duration::from_millis(10);
    let mut ticks = tokio::time::interval(TICK);
    let per_tick = (per_second as f64 / 100.0).max(0.0);
    let mut owed = 0.0;
    let mut next = 0usize;
    let mut counter = 0u64;
    loop {
        ticks.tick().await;
        owed += per_tick;
        while owed >= 1.0 {
            owed -= 1.0;
            let target = &seeded[next % seeded.len()];
            next += 1;
            let Some(mut current) = server.object(
                &target.api_version,
                &target.kind,
                target.namespace.as_deref(),
                &target.name,
            ) else {
                continue;
            };
            counter += 1;
            current["metadata"]["annotations"]["kinformer.dev/churn"] = json!(counter.to_string());
            if let Err(error) = server.update_object(current) {
                eprintln!("churn update failed: {error}");
            }
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = Options::parse();
    let server = match FakeApiServer::start_with(
        ServerOptions::default()
            .listen(options.listen)
            .history(options.history)
            .bookmark_interval(options.bookmark_interval)
            .admin_endpoints(true),
    )
    .await
    {
        Ok(server) => server,
        Err(error) => {
            eprintln!("cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", server.addr());
    if let Some(path) = &options.kubeconfig
        && let Err(error) = std::fs::write(path, server.kubeconfig())
    {
        eprintln!("cannot write the kubeconfig to {path}: {error}");
        return ExitCode::FAILURE;
    }
    let seeded = match seed(&server, &options) {
        Ok(seeded) => seeded,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    if !options.lazy_protobuf && !seeded.is_empty() {
        let started = std::time::Instant::now();
        let encoded = server.warm_protobuf();
        eprintln!(
            "encoded {encoded} objects in protobuf in {:?}",
            started.elapsed()
        );
    }
    eprintln!(
        "serving {} at {} (resourceVersion {})",
        seeded.len(),
        server.url(),
        server.resource_version()
    );
    tokio::select! {
        () = churn(&server, seeded, options.churn) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, error::ErrorKind};

    use super::*;

    fn parse(line: &str) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("fake").chain(line.split_whitespace()))
    }

    #[test]
    fn the_declarations_are_consistent() {
        Options::command().debug_assert();
    }

    #[test]
    fn the_harness_command_line_parses() {
        // As xtask/src/benchsuite/fake.rs builds it.
        let options =
            parse("--listen 127.0.0.1:0 --kubeconfig /tmp/kc --seed pods=100000").expect("valid");
        assert_eq!(options.listen, SocketAddr::from(([127, 0, 0, 1], 0)));
        assert_eq!(options.kubeconfig.as_deref(), Some("/tmp/kc"));
        assert_eq!(options.seeds, [("pods".to_owned(), 100_000)]);
    }

    #[test]
    fn defaults_and_every_flag() {
        let defaults = parse("").expect("valid");
        assert_eq!(defaults.listen, SocketAddr::from(([127, 0, 0, 1], 0)));
        assert_eq!(defaults.kubeconfig, None);
        assert!(defaults.seeds.is_empty());
        assert_eq!((defaults.churn, defaults.history), (0, 10_000));
        assert_eq!(defaults.bookmark_interval, Duration::from_secs(60));
        assert!(!defaults.lazy_protobuf);

        let every = parse(
            "--listen 0.0.0.0:8080 --seed pods=2 --seed cm=3 --churn 50 --history 7 \
             --bookmark-interval-ms 250 --lazy-protobuf",
        )
        .expect("valid");
        assert_eq!(every.listen, SocketAddr::from(([0, 0, 0, 0], 8080)));
        assert_eq!(every.seeds, [("pods".to_owned(), 2), ("cm".to_owned(), 3)]);
        assert_eq!((every.churn, every.history), (50, 7));
        assert_eq!(every.bookmark_interval, Duration::from_millis(250));
        assert!(every.lazy_protobuf);
    }

    #[test]
    fn bad_command_lines_are_refused() {
        for (line, kind) in [
            ("--seed pods", ErrorKind::ValueValidation),
            ("--seed pods=many", ErrorKind::ValueValidation),
            ("--listen localhost", ErrorKind::ValueValidation),
            ("--churn", ErrorKind::InvalidValue),
            ("--bookmark-interval-ms soon", ErrorKind::ValueValidation),
            ("--bogus", ErrorKind::UnknownArgument),
        ] {
            match parse(line) {
                Ok(options) => panic!("{line} parsed as {options:?}"),
                Err(error) => assert_eq!(error.kind(), kind, "{line}: {error}"),
            }
        }
    }
}
