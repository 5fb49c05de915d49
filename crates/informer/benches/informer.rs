//! Events per second from a popped delta to 1, 3 and 10 handlers: `handle_deltas` applies
//! each update to the cache and distributes it.
//!
//! - `popped-delta-to-handlers`: the clock stops when every handler has handled every event;
//! - `process-loop-side`: only the `handle_deltas` calls are timed (the process loop's cost per
//!   event); the handlers drain their buffers outside the timed region.

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
use k8s_openapi::api::core::v1::Pod;
use kinformer_fifo::{Delta, DeltaType, Deltas, Popped};
use kinformer_informer::{AddKind, HandlerFuncs, InformerOptions, SharedIndexInformer};
use kinformer_reflector::{ListOptions, ListPage, ListSink, ListerWatcher, Result, WatchStream};
use kube_core::ObjectMeta;
use tokio_util::sync::CancellationToken;

const BATCH: usize = 1_000;

/// Never asked: the bench feeds `handle_deltas` directly.
struct NoSource;

#[async_trait::async_trait]
impl ListerWatcher<Pod> for NoSource {
    async fn list(&self, _options: ListOptions, _sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        Ok(ListPage {
            resource_version: "0".into(),
            continue_token: None,
            shard_selector: None,
        })
    }

    async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
        Ok(Box::pin(futures::stream::pending()))
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

fn popped(i: usize, version: u64) -> Popped<Pod> {
    Popped::Deltas(Deltas::one(Delta::new(DeltaType::Updated, pod(i, version))))
}

fn fan_out(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    for (group_name, time_handlers) in [
        ("informer/popped-delta-to-handlers", true),
        ("informer/process-loop-side", false),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements(BATCH as u64));
        for handlers in [1_usize, 3, 10] {
            bench_case(&runtime, &mut group, handlers, time_handlers);
        }
        group.finish();
    }
}

fn bench_case(
    runtime: &tokio::runtime::Runtime,
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    handlers: usize,
    time_handlers: bool,
) {
    {
        let informer = SharedIndexInformer::new(NoSource, InformerOptions::new());
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
        let processor = informer.processor().clone();
        let running = runtime.spawn({
            let token = token.clone();
            async move { processor.run(token).await }
        });
        for i in 0..BATCH {
            let add = Popped::Deltas(Deltas::one(Delta::new(DeltaType::Added, pod(i, 0))));
            informer
                .handle_deltas(&add, AddKind::InitialList)
                .expect("applied");
        }
        // Two prepared rounds, alternated, so every update changes the resourceVersion.
        let rounds: [Vec<Popped<Pod>>; 2] =
            [1, 2].map(|version| (0..BATCH).map(|i| popped(i, version)).collect::<Vec<_>>());
        let mut round = 0_usize;
        let mut expected = 0_u64;
        group.bench_function(format!("{handlers}-handlers"), |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let items = &rounds[round % 2];
                    round += 1;
                    expected += BATCH as u64;
                    let started = Instant::now();
                    for item in items {
                        informer
                            .handle_deltas(item, AddKind::Live)
                            .expect("applied");
                    }
                    if !time_handlers {
                        total += started.elapsed();
                    }
                    while counters
                        .iter()
                        .any(|counter| counter.load(Ordering::Relaxed) < expected)
                    {
                        std::thread::yield_now();
                    }
                    if time_handlers {
                        total += started.elapsed();
                    }
                }
                total
            });
        });
        token.cancel();
        runtime
            .block_on(running)
            .expect("the processor task")
            .expect("the processor ran");
    }
}

criterion_group!(benches, fan_out);
criterion_main!(benches);
