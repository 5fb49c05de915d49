//! Peak memory of list + Replace for 100,000 Pods, first list and relist.
//!
//! Not a criterion benchmark: what matters here is resident memory, read from
//! `/proc/self/status` (`VmRSS` now, `VmHWM` the peak, which writing `5` to
//! `/proc/self/clear_refs` resets between phases). The lister-watcher generates each page's Pods
//! on the fly as JSON and decodes them with serde_json, so the figures cover decoding, the
//! pager's accumulation and `Cache::replace`, without a server in the process.
//!
//! Run with `cargo bench -p kinformer-reflector --bench relist_memory` (Linux only; it prints a
//! Markdown table).

#![allow(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{
    Error, ListOptions, ListPage, ListSink, ListerWatcher, Reflector, ReflectorOptions, Result,
    WatchStream,
};
use kinformer_store::{Cache, CacheReader};
use tokio_util::sync::CancellationToken;

const PODS: usize = 100_000;
const PAGE: u32 = 500;

/// A Pod of about 2 KB of JSON: labels, an owner reference, one container with resources, a
/// status with conditions. Smaller than the 6 KB fixture so that two copies of 100k fit next to
/// everyone else's builds on a shared machine.
fn pod_json(i: usize) -> String {
    format!(
        r#"{{"metadata":{{"name":"pod-{i}","namespace":"ns-{ns}","uid":"6a1c1e2b-0000-4000-8000-{i:012x}","resourceVersion":"{rv}","creationTimestamp":"2026-01-01T00:00:00Z","labels":{{"app.kubernetes.io/name":"app-{app}","app.kubernetes.io/instance":"app-{app}-prod","pod-template-hash":"5d4f8c7b9{app}","tier":"backend"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-{app}-5d4f8c7b9","uid":"6a1c1e2b-0000-4000-8000-00000000{app:04x}","controller":true,"blockOwnerDeletion":true}}]}},"spec":{{"nodeName":"node-{node}","serviceAccountName":"default","containers":[{{"name":"app","image":"registry.example.com/app-{app}:1.2.3","ports":[{{"containerPort":8080,"protocol":"TCP"}}],"resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}},"limits":{{"cpu":"500m","memory":"256Mi"}}}},"env":[{{"name":"POD_NAME","valueFrom":{{"fieldRef":{{"fieldPath":"metadata.name"}}}}}}]}}]}},"status":{{"phase":"Running","podIP":"10.{a}.{b}.{c}","hostIP":"192.168.0.{node}","startTime":"2026-01-01T00:00:01Z","conditions":[{{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:05Z"}},{{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}}],"containerStatuses":[{{"name":"app","ready":true,"restartCount":0,"image":"registry.example.com/app-{app}:1.2.3","imageID":"sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5","containerID":"containerd://{i:064x}","started":true,"state":{{"running":{{"startedAt":"2026-01-01T00:00:03Z"}}}}}}]}}}}"#,
        ns = i % 10,
        rv = i + 1,
        app = i % 20,
        node = i % 50,
        a = (i >> 16) & 0xff,
        b = (i >> 8) & 0xff,
        c = i & 0xff,
    )
}

/// Serves `PODS` pods in list pages (all at once when no limit is asked), each decoded from its
/// JSON with serde_json; every watch fails at once with 410 so a round ends after its list.
struct GeneratedPods;

#[async_trait]
impl ListerWatcher<Pod> for GeneratedPods {
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        let start: usize = options
            .continue_token
            .as_deref()
            .map_or(Ok(0), str::parse)
            .map_err(|_| Error::Expired {
                message: "bad continue token".into(),
            })?;
        let end = options
            .limit
            .map_or(PODS, |limit| (start + limit as usize).min(PODS));
        let items = (start..end)
            .map(|i| {
                let pod: Pod = serde_json::from_str(&pod_json(i))
                    .map_err(|error| Error::decode("list item", error.to_string(), b""))?;
                Ok(Arc::new(pod).into())
            })
            .collect::<Result<Vec<_>>>()?;
        let page = ListPage {
            resource_version: "100001".into(),
            continue_token: (end < PODS).then(|| end.to_string()),
            shard_selector: None,
        };
        sink.part(items).await?;
        Ok(page)
    }

    async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
        Ok(futures::stream::iter([Err(Error::Expired {
            message: "end of the benchmark round".into(),
        })])
        .boxed())
    }
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(field))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn reset_peak() {
    // Linux resets VmHWM to the current RSS on "5"; without it the peaks below are lifetime peaks.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mib(kib: u64) -> String {
    format!("{:.0} MiB", kib as f64 / 1024.0)
}

struct Phase {
    name: &'static str,
    before_kib: u64,
    peak_kib: u64,
    after_kib: u64,
    took: Duration,
}

async fn round(
    name: &'static str,
    reflector: &Reflector<Pod, Cache<Pod>>,
    token: &CancellationToken,
) -> Phase {
    let before_kib = status_kib("VmRSS:");
    reset_peak();
    let started = Instant::now();
    let ended = reflector.list_and_watch(token).await;
    assert!(
        matches!(ended, Err(Error::Expired { .. })),
        "the round lists, then its watch ends with 410: {ended:?}"
    );
    Phase {
        name,
        before_kib,
        peak_kib: status_kib("VmHWM:"),
        after_kib: status_kib("VmRSS:"),
        took: started.elapsed(),
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let token = CancellationToken::new();
        let baseline_kib = status_kib("VmRSS:");
        let cache = Arc::new(Cache::<Pod>::with_namespace_index());
        let lister_watcher = || GeneratedPods;
        let paged = Reflector::new(lister_watcher(), Arc::clone(&cache), ReflectorOptions::default()
            .page_size(PAGE));
        let mut phases = vec![
            round("first list, pages of 500", &paged, &token).await,
            round("relist, pages of 500", &paged, &token).await,
        ];
        let steady_kib = phases[0].after_kib;
        // The same cache, refilled by a reflector that lists everything in one response, as an
        // API server's watch cache answers `resourceVersion=0`.
        let unpaged = Reflector::new(lister_watcher(), Arc::clone(&cache), ReflectorOptions::default());
        phases.push(round("relist, one 100k-item response", &unpaged, &token).await);
        assert_eq!(cache.len(), PODS);

        println!("baseline RSS before any list: {}", mib(baseline_kib));
        println!();
        println!("| Phase | RSS before | Peak RSS | RSS after | Peak / one-copy RSS | Time |");
        println!("|---|---|---|---|---|---|");
        let one_copy = steady_kib.saturating_sub(baseline_kib).max(1) as f64;
        for phase in &phases {
            println!(
                "| {} | {} | {} | {} | {:.2} | {:.2?} |",
                phase.name,
                mib(phase.before_kib),
                mib(phase.peak_kib),
                mib(phase.after_kib),
                phase.peak_kib.saturating_sub(baseline_kib) as f64 / one_copy,
                phase.took,
            );
        }
        println!();
        println!(
            "one copy of {PODS} Pods in the cache (RSS after the first list minus baseline): {}, {:.1} KiB per Pod",
            mib(steady_kib.saturating_sub(baseline_kib)),
            one_copy / PODS as f64,
        );
    });
}
