//! Events per second from a watch event to 1, 3 and 10 handlers, through the informer as a
//! user runs it: the reflector takes each event from the watch stream, the queue hands it to
//! the process loop, which applies it to the cache and distributes it. The clock stops when
//! every handler has handled every event.

#![allow(missing_docs)] // criterion's macros generate undocumented items

use std::{
    hint::black_box,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::{StreamExt, channel::mpsc};
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use kinformer_reflector::{
    ListOptions, ListPage, ListSink, ListerWatcher, Result, WatchEvent, WatchStream,
};
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const BATCH: usize = 1_000;

/// Lists `BATCH` Pods at version 1, then watches the events the bench sends. There is one
/// watch: the bench fails if the reflector ever watches again.
struct ChannelSource {
    events: Mutex<Option<mpsc::UnboundedReceiver<WatchEvent<Pod>>>>,
}

#[async_trait::async_trait]
impl ListerWatcher<Pod> for ChannelSource {
    async fn list(&self, _options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        sink.part((0..BATCH).map(|i| pod(i, 1).into()).collect())
            .await?;
        Ok(ListPage {
            resource_version: "1".into(),
            continue_token: None,
            shard_selector: None,
        })
    }

    async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
        let events = self.events.lock().take().expect("one watch per run");
        Ok(events.map(Ok).boxed())
    }
}

fn pod(i: usize, version: u64) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some(format!("ns-{}", i % 10)),
            name: Some(format!("pod-{i}")),
            resource_version: Some(version.to_string()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

fn fan_out(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("informer/watch-event-to-handlers");
    group.throughput(Throughput::Elements(BATCH as u64));
    for handlers in [1_usize, 3, 10] {
        bench_case(&runtime, &mut group, handlers);
    }
    group.finish();
}

fn bench_case(
    runtime: &tokio::runtime::Runtime,
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    handlers: usize,
) {
    let (sender, events) = mpsc::unbounded();
    let source = ChannelSource {
        events: Mutex::new(Some(events)),
    };
    let informer = SharedIndexInformer::new(source, InformerOptions::new());
    let counters: Vec<Arc<AtomicU64>> = (0..handlers).map(|_| Arc::default()).collect();
    for counter in &counters {
        let counter = Arc::clone(counter);
        informer
            .add_event_handler(HandlerFuncs::new().update_func(move |_old, new: Arc<Pod>| {
                black_box(new);
                counter.fetch_add(1, Ordering::Relaxed);
            }))
            .expect("a handler");
    }
    let token = CancellationToken::new();
    let running = runtime.spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    runtime.block_on(async {
        informer
            .wait_for_cache_sync(Duration::from_secs(60), &CancellationToken::new())
            .await
            .expect("the informer synced");
    });
    // Every update carries a newer resourceVersion, as a watch's do.
    let mut version = 1_u64;
    let mut expected = 0_u64;
    group.bench_function(format!("{handlers}-handlers"), |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let events: Vec<WatchEvent<Pod>> = (0..BATCH)
                    .map(|i| {
                        version += 1;
                        WatchEvent::Modified(pod(i, version).into())
                    })
                    .collect();
                expected += BATCH as u64;
                let started = Instant::now();
                for event in events {
                    sender.unbounded_send(event).expect("the watch is open");
                }
                while counters
                    .iter()
                    .any(|counter| counter.load(Ordering::Relaxed) < expected)
                {
                    std::thread::yield_now();
                }
                total += started.elapsed();
            }
            total
        });
    });
    token.cancel();
    runtime
        .block_on(running)
        .expect("the informer task")
        .expect("the informer ran");
}

criterion_group!(benches, fan_out);
criterion_main!(benches);
