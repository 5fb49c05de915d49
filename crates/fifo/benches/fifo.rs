//! Queue throughput on realistic Pods.
//!
//! Stable bench IDs (the client-go side-by-side runs the same scenarios under the same names):
//!
//! | ID | queue | scenario (timed part) |
//! | --- | --- | --- |
//! | `fifo/add_pop/100k` | DeltaFIFO, no known objects | add 100,000 Pods with distinct keys, then pop all 100,000 |
//! | `fifo/pop/100k` | DeltaFIFO, no known objects | pop 100,000 keys queued beforehand (one Added delta each) |
//! | `fifo/replace/100k` | DeltaFIFO, 100,000 known objects, `Replaced` | replace with a list of 100,000 Pods whose keys are exactly the known keys (no deletions) |
//! | `real_fifo/add_pop/100k` | RealFIFO, 0 known objects | add 100,000 Pods, then pop all one at a time |
//! | `real_fifo/pop/100k` | RealFIFO, 0 known objects | pop 100,000 queued deltas one at a time |
//! | `real_fifo/pop_batch/100k` | RealFIFO, 0 known objects | pop 100,000 queued deltas (distinct keys) in batches of 1,000 |
//! | `real_fifo/replace/100k` | RealFIFO, 100,000 known objects | replace with 100,000 Pods, keys equal to the known keys |
//! | `real_fifo/replace_atomic/100k` | RealFIFO, atomic events | replace with 100,000 Pods (one `ReplacedAll` item) |
//!
//! Pods are built once, outside the timed loops, as `Arc<Pod>`: namespace `bench`, names
//! `pod-<i>`, five labels, two containers, a resourceVersion and a uid (about what a small
//! real Pod carries). The process function does nothing but count, so the figures are the
//! queue's own cost. Each pop goes through the async `Queue::pop` on a current-thread tokio
//! runtime, as the informer's loop does.

// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use std::{collections::BTreeMap, hint::black_box, sync::Arc};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kinformer_fifo::{
    AddKind, DeltaFifo, DeltaFifoOptions, Processed, Queue, RealFifo, RealFifoOptions,
};
use kinformer_store::{Cache, Store};
use kube_core::ObjectMeta;

const N: usize = 100_000;

fn pod(i: usize, resource_version: u64) -> Arc<Pod> {
    let labels: BTreeMap<String, String> = [
        ("app", format!("app-{}", i % 50)),
        ("tier", "backend".to_owned()),
        ("team", format!("team-{}", i % 7)),
        ("pod-template-hash", format!("{:x}", i * 7919)),
        ("version", "v1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let container = |name: &str| Container {
        name: name.to_owned(),
        image: Some(format!("registry.example.com/{name}:1.2.3")),
        ports: Some(vec![ContainerPort {
            container_port: 8080,
            ..ContainerPort::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_owned(), Quantity("100m".to_owned())),
                    ("memory".to_owned(), Quantity("128Mi".to_owned())),
                ]
                .into_iter()
                .collect(),
            ),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    };
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some("bench".to_owned()),
            name: Some(format!("pod-{i}")),
            uid: Some(format!("00000000-0000-0000-0000-{i:012}")),
            resource_version: Some(resource_version.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![container("app"), container("sidecar")],
            node_name: Some(format!("node-{}", i % 100)),
            ..PodSpec::default()
        }),
        ..Pod::default()
    })
}

fn pods(resource_version: u64) -> Vec<Arc<Pod>> {
    (0..N).map(|i| pod(i, resource_version)).collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
}

fn pop_all(runtime: &tokio::runtime::Runtime, queue: &dyn Queue<Pod>, batched: bool) -> usize {
    runtime.block_on(async {
        let mut popped = 0;
        let mut count = |p: &kinformer_fifo::Popped<Pod>, _: AddKind| {
            popped += p.deltas().len();
            Processed::Done
        };
        while !queue.is_empty() {
            let outcome = if batched {
                queue.pop_batch(&mut count).await
            } else {
                queue.pop(&mut count).await
            };
            black_box(outcome.expect("pop"));
        }
        popped
    })
}

fn known_cache(objects: &[Arc<Pod>]) -> Arc<Cache<Pod>> {
    let cache = Arc::new(Cache::<Pod>::with_namespace_index());
    cache
        .replace(objects.to_vec(), "1")
        .expect("pods have names");
    cache
}

fn delta_fifo(c: &mut Criterion) {
    let runtime = runtime();
    let objects = pods(1);
    let listed = pods(2);
    let mut group = c.benchmark_group("fifo");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));

    group.bench_function("add_pop/100k", |b| {
        b.iter_batched(
            || (DeltaFifo::<Pod>::default(), objects.clone()),
            |(fifo, objects)| {
                for obj in objects {
                    fifo.add(obj.into()).expect("add");
                }
                assert_eq!(pop_all(&runtime, &fifo, false), N);
                fifo
            },
            BatchSize::PerIteration,
        );
    });

    group.bench_function("pop/100k", |b| {
        b.iter_batched(
            || {
                let fifo = DeltaFifo::<Pod>::default();
                for obj in &objects {
                    fifo.add(Arc::clone(obj).into()).expect("add");
                }
                fifo
            },
            |fifo| {
                assert_eq!(pop_all(&runtime, &fifo, false), N);
                fifo
            },
            BatchSize::PerIteration,
        );
    });

    let cache = known_cache(&objects);
    group.bench_function("replace/100k", |b| {
        b.iter_batched(
            || {
                let fifo = DeltaFifo::new(
                    DeltaFifoOptions::new()
                        .known_objects(cache.clone())
                        .emit_delta_type_replaced(true),
                );
                (fifo, listed.clone())
            },
            |(fifo, listed)| {
                fifo.replace(listed, "2").expect("replace");
                assert_eq!(fifo.len(), N);
                fifo
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn real_fifo(c: &mut Criterion) {
    let runtime = runtime();
    let objects = pods(1);
    let listed = pods(2);
    let empty = Arc::new(Cache::<Pod>::default());
    let plain = || RealFifo::new(RealFifoOptions::new(empty.clone())).expect("valid options");
    let mut group = c.benchmark_group("real_fifo");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));

    group.bench_function("add_pop/100k", |b| {
        b.iter_batched(
            || (plain(), objects.clone()),
            |(fifo, objects)| {
                for obj in objects {
                    fifo.add(obj.into()).expect("add");
                }
                assert_eq!(pop_all(&runtime, &fifo, false), N);
                fifo
            },
            BatchSize::PerIteration,
        );
    });

    for (id, batched) in [("pop/100k", false), ("pop_batch/100k", true)] {
        group.bench_function(id, |b| {
            b.iter_batched(
                || {
                    let fifo = plain();
                    for obj in &objects {
                        fifo.add(Arc::clone(obj).into()).expect("add");
                    }
                    fifo
                },
                |fifo| {
                    assert_eq!(pop_all(&runtime, &fifo, batched), N);
                    fifo
                },
                BatchSize::PerIteration,
            );
        });
    }

    let cache = known_cache(&objects);
    group.bench_function("replace/100k", |b| {
        b.iter_batched(
            || {
                let fifo = RealFifo::new(RealFifoOptions::new(cache.clone())).expect("valid");
                (fifo, listed.clone())
            },
            |(fifo, listed)| {
                fifo.replace(listed, "2").expect("replace");
                assert_eq!(fifo.len(), N);
                fifo
            },
            BatchSize::PerIteration,
        );
    });

    group.bench_function("replace_atomic/100k", |b| {
        b.iter_batched(
            || {
                let fifo = RealFifo::<Pod>::new(RealFifoOptions::atomic()).expect("valid");
                (fifo, listed.clone())
            },
            |(fifo, listed)| {
                fifo.replace(listed, "2").expect("replace");
                assert_eq!(fifo.len(), 1);
                fifo
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, delta_fifo, real_fifo);
criterion_main!(benches);
