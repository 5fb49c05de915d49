//! Throughput of the queue: add, get and done of distinct items. The queue is the crate's one
//! queue type, `RateLimitingQueue`; add, get and done take the same path through it as through
//! client-go's plain queue (its limiter is consulted only by `add_rate_limited`).
//!
//! Bench IDs are stable, because the side-by-side comparison with client-go keys on them:
//! - `workqueue/add_get_done/inline`: one task adds every item, then gets and dones each.
//! - `workqueue/add_get_done/workers=1` and `workers=8`: one producer adds every item while that
//!   many worker tasks get and done them on a two-thread runtime, until the queue is shut down
//!   and drained.
//! - `workqueue/delaying/add_after_then_get`: client-go's `BenchmarkDelayingQueue_AddAfter`
//!   shape: every item is scheduled at a pseudo-random delay under ten minutes, the (paused) clock
//!   jumps eleven minutes, and every item is taken out.
//! - `workqueue/metrics/{none,tracing,prometheus}`: the `inline` shape on a queue whose
//!   measurements go nowhere (unnamed), to `tracing` events (no subscriber), or (feature `prometheus`) to
//!   client-go's `workqueue_*` families in a prometheus-client registry: what metrics cost per
//!   item.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::time::Duration;

use kinformer_workqueue::{QueueOptions, RateLimitingQueue, default_controller_rate_limiter};

const ITEMS: u64 = 10_000;

fn add_get_done(c: &mut Criterion) {
    let mut group = c.benchmark_group("workqueue/add_get_done");
    group.throughput(Throughput::Elements(ITEMS));

    let single = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime builds");
    group.bench_function("inline", |b| {
        b.iter(|| {
            single.block_on(async {
                let queue = RateLimitingQueue::default();
                for item in 0..ITEMS {
                    queue.add(item);
                }
                while let Some(item) = queue.get().await {
                    queue.done(black_box(&item));
                    if queue.is_empty() {
                        queue.shut_down();
                    }
                }
            });
        });
    });

    let pool = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a multi-thread runtime builds");
    for workers in [1usize, 8] {
        group.bench_function(format!("workers={workers}"), |b| {
            b.iter(|| {
                pool.block_on(async {
                    let queue = RateLimitingQueue::default();
                    let handles: Vec<_> = (0..workers)
                        .map(|_| {
                            let queue = queue.clone();
                            tokio::spawn(async move {
                                while let Some(item) = queue.get().await {
                                    queue.done(black_box(&item));
                                }
                            })
                        })
                        .collect();
                    for item in 0..ITEMS {
                        queue.add(item);
                    }
                    queue.shut_down();
                    for handle in handles {
                        handle.await.expect("worker does not panic");
                    }
                });
            });
        });
    }
    group.finish();
}

fn delaying_add_after(c: &mut Criterion) {
    let mut group = c.benchmark_group("workqueue/delaying");
    group.throughput(Throughput::Elements(ITEMS));
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a paused runtime builds");
    group.bench_function("add_after_then_get", |b| {
        b.iter(|| {
            paused.block_on(async {
                let queue = RateLimitingQueue::default();
                let mut seed = fastrand::Rng::with_seed(7);
                for item in 0..ITEMS {
                    let delay = Duration::from_millis(seed.u64(0..600_000));
                    queue.add_after(item, delay);
                }
                tokio::time::advance(Duration::from_secs(660)).await;
                for _ in 0..ITEMS {
                    let item = queue.get().await.expect("every item fires");
                    queue.done(black_box(&item));
                }
                queue.shut_down();
            });
        });
    });
    group.finish();
}

/// Adds, gets and dones `ITEMS` distinct items on `queue`, on the current thread.
async fn cycle(queue: RateLimitingQueue<u64>) {
    for item in 0..ITEMS {
        queue.add(item);
    }
    while let Some(item) = queue.get().await {
        queue.done(black_box(&item));
        if queue.is_empty() {
            queue.shut_down();
        }
    }
}

/// Builds a fresh queue's options for one iteration.
type MakeOptions = Box<dyn Fn() -> QueueOptions>;

fn metrics(c: &mut Criterion) {
    let mut group = c.benchmark_group("workqueue/metrics");
    group.throughput(Throughput::Elements(ITEMS));
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime builds");
    #[cfg_attr(not(feature = "prometheus"), allow(unused_mut))]
    let mut cases: Vec<(&str, MakeOptions)> = vec![
        ("none", Box::new(QueueOptions::default)),
        ("tracing", Box::new(|| QueueOptions::named("bench"))),
    ];
    #[cfg(feature = "prometheus")]
    {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = kinformer_workqueue::PrometheusMetrics::register(&mut registry);
        cases.push((
            "prometheus",
            Box::new(move || QueueOptions::named("bench").metrics(metrics.clone())),
        ));
    }
    for (name, options) in &cases {
        group.bench_function(*name, |b| {
            // Built inside the runtime: the queue starts its timer (and reporting) task.
            b.iter(|| {
                single.block_on(async {
                    let limiter = default_controller_rate_limiter();
                    cycle(RateLimitingQueue::new(limiter, options())).await;
                });
            });
        });
    }
    group.finish();
}

criterion_group!(benches, add_get_done, delaying_add_after, metrics);
criterion_main!(benches);
