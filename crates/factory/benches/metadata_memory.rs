//! Memory of a metadata-only informer against a full one, over the same Pods.
//!
//! Not a criterion benchmark: what matters is resident memory, read from `/proc/self/status`.
//! The parent process starts kinformer-testing's API server and seeds it with `PODS` fixture
//! Pods (about 6 KB of JSON each); then, for each kind of informer, it runs this binary again
//! as a child that builds a factory against that server, syncs the one informer and reports
//! its resident memory growth (`VmRSS` after sync minus before start) and peak (`VmHWM`). A
//! child process per measurement keeps the server's own memory and the other informer's out
//! of the figure. Resident memory includes what the allocator keeps after the list's
//! transient buffers are freed, so the figures are upper bounds on the cache itself.
//!
//! Run with `cargo bench -p kinformer-factory --bench metadata_memory` (Linux only; it prints
//! a Markdown table).

#![allow(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

use std::{process::Command, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_factory::{FactoryOptions, InformerRequest, Selection, SharedInformerFactory};
use kinformer_testing::{FakeApiServer, fixtures};
use kube_core::PartialObjectMeta;

const PODS: usize = 5_000;
/// How long a measured informer may take to sync; its cache size says whether it did.
const SYNC_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);
const CHILD: &str = "KINFORMER_MEMORY_CHILD";
const URL: &str = "KINFORMER_MEMORY_URL";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match (std::env::var(CHILD), std::env::var(URL)) {
        (Ok(kind), Ok(url)) => runtime.block_on(child(&kind, &url)),
        _ => runtime.block_on(parent()),
    }
}

async fn parent() -> Result<(), BoxError> {
    let server = FakeApiServer::start().await?;
    for i in 0..PODS {
        server.create_object(fixtures::pod(i))?;
    }
    let exe = std::env::current_exe()?;
    println!(
        "| informer ({PODS} Pods) | first informer's growth | second's growth | second's per Pod | peak | first sync |"
    );
    println!("|---|---|---|---|---|---|");
    for kind in [
        "full",
        "full, managedFields stripped",
        "metadata",
        "metadata, managedFields stripped",
    ] {
        let output = Command::new(&exe)
            .env(CHILD, kind)
            .env(URL, server.url())
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "the {kind} child failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
    Ok(())
}

async fn child(kind: &str, url: &str) -> Result<(), BoxError> {
    let config = kube_client::Config::new(url.parse()?);
    let client = kube_client::Client::try_from(config)?;
    let factory = if kind.ends_with("stripped") {
        SharedInformerFactory::new(client, FactoryOptions::default().drop_managed_fields())
    } else {
        SharedInformerFactory::new(client, FactoryOptions::default())
    };

    // The first informer's growth includes the allocator keeping the list's transient
    // buffers; the second, over a selection that matches the same Pods, reuses them, so its
    // growth is close to what one more cache costs.
    let before = status_kib("VmRSS:")?;
    let started = Instant::now();
    sync_one(&factory, kind, Selection::all()).await?;
    let synced_in = started.elapsed();
    let after_first = status_kib("VmRSS:")?;
    sync_one(
        &factory,
        kind,
        Selection::all().labels("app.kubernetes.io/part-of=kinformer-bench"),
    )
    .await?;
    let after_second = status_kib("VmRSS:")?;
    let peak = status_kib("VmHWM:")?;
    let first = after_first.saturating_sub(before);
    let second = after_second.saturating_sub(after_first);
    println!(
        "| {kind} | {:.1} MiB | {:.1} MiB | {:.1} KiB | {:.1} MiB | {synced_in:.2?} |",
        first as f64 / 1024.0,
        second as f64 / 1024.0,
        second as f64 / PODS as f64,
        peak as f64 / 1024.0,
    );
    factory.shutdown().await;
    Ok(())
}

async fn sync_one(
    factory: &SharedInformerFactory,
    kind: &str,
    selection: Selection,
) -> Result<(), BoxError> {
    let cached = if kind.starts_with("metadata") {
        let informer = factory.informer_for(
            InformerRequest::<PartialObjectMeta<Pod>>::metadata().selection(selection),
        )?;
        factory.start()?;
        let _ = factory.wait_for_cache_sync(SYNC_DEADLINE).await;
        informer.cache().list_keys().len()
    } else {
        let informer =
            factory.informer_for(InformerRequest::<Pod>::typed().selection(selection))?;
        factory.start()?;
        let _ = factory.wait_for_cache_sync(SYNC_DEADLINE).await;
        informer.cache().list_keys().len()
    };
    if cached != PODS {
        return Err(format!("{kind}: {cached} Pods cached, {PODS} expected").into());
    }
    Ok(())
}

/// A `kB` line of `/proc/self/status`.
fn status_kib(field: &str) -> Result<u64, BoxError> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .ok_or_else(|| format!("{field} not in /proc/self/status"))?;
    let kib = line
        .trim_start_matches(field)
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib)
}
