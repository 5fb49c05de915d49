//! The read and write costs of kinformer-store's `CompactCache` holding full fixture Pods
//! (with managedFields) through `compact_codec` (protobuf), beside the default `Cache`.
//!
//! | ID | timed part |
//! | --- | --- |
//! | `compact_get/{default,cold,hot}` | `get_by_key` of one of 1,000 Pods: the default cache; a compact cache keeping nothing decoded; a compact cache that has the Pod decoded |
//! | `compact_by_index/{default,cold}` | `by_index` of a namespace holding 100 of the Pods |
//! | `compact_upsert/{default,compact}` | storing a Pod over its previous version and getting that version back (what an informer does per update) |
//!
//! Criterion reports means. The read targets are medians, so each read case is also timed read
//! by read before criterion runs it, whatever the filter (about a second in all): after a tenth
//! as many untimed reads to warm it, 10,000 times for a key and 1,000 for an index, and its
//! 50th, 90th and 99th percentiles (nearest rank) printed.

#![allow(missing_docs)]

use std::{
    hint::black_box,
    sync::Arc,
    time::{Duration, Instant},
};

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::compact_codec;
use kinformer_store::{
    Cache, CacheReader, CompactCache, Indexer, NAMESPACE_INDEX, meta_namespace_key_func,
};
use kinformer_testing::fixtures;

/// The allocator the side-by-side bench peers (xtask/peers/rust) run on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PODS: usize = 1000;

fn pods() -> Vec<Arc<Pod>> {
    (0..PODS)
        .map(|i| Arc::new(serde_json::from_value(fixtures::pod(i)).expect("a fixture Pod")))
        .collect()
}

fn filled(cache: &dyn Indexer<Pod>, pods: &[Arc<Pod>]) {
    cache
        .replace(pods.to_vec(), "1")
        .expect("the fixture Pods are keyed and encoded");
}

fn compact(hot: usize) -> CompactCache<Pod> {
    CompactCache::with_namespace_index(compact_codec::<Pod>()).hot_capacity(hot)
}

fn benches(c: &mut Criterion) {
    let pods = pods();
    let keys: Vec<String> = pods
        .iter()
        .map(|pod| meta_namespace_key_func(pod.as_ref()).expect("keyed"))
        .collect();
    let default = Cache::<Pod>::with_namespace_index();
    let cold = compact(0);
    let hot = compact(PODS);
    for cache in [&default as &dyn Indexer<Pod>, &cold, &hot] {
        filled(cache, &pods);
    }
    for key in &keys {
        hot.get_by_key(key);
    }

    let mut get = c.benchmark_group("compact_get");
    for (name, cache) in [
        ("default", &default as &dyn Indexer<Pod>),
        ("cold", &cold),
        ("hot", &hot),
    ] {
        let mut next = keys.iter().cycle();
        percentiles(&format!("compact_get/{name}"), 10_000, || {
            cache.get_by_key(next.next().expect("cycles"))
        });
        get.bench_function(name, |b| {
            b.iter(|| black_box(cache.get_by_key(next.next().expect("cycles"))));
        });
    }
    get.finish();

    let mut by_index = c.benchmark_group("compact_by_index");
    for (name, cache) in [("default", &default as &dyn Indexer<Pod>), ("cold", &cold)] {
        assert_eq!(
            cache.by_index(NAMESPACE_INDEX, "ns-3").map(|p| p.len()),
            Ok(100)
        );
        percentiles(&format!("compact_by_index/{name}"), 1_000, || {
            cache.by_index(NAMESPACE_INDEX, "ns-3")
        });
        by_index.bench_function(name, |b| {
            b.iter(|| black_box(cache.by_index(NAMESPACE_INDEX, "ns-3")));
        });
    }
    by_index.finish();

    let mut upsert = c.benchmark_group("compact_upsert");
    let compact_cache = compact(CompactCache::<Pod>::DEFAULT_HOT_CAPACITY);
    filled(&compact_cache, &pods);
    for (name, cache) in [
        ("default", &default as &dyn Indexer<Pod>),
        ("compact", &compact_cache),
    ] {
        // Each Pod in turn, cycling: like a watch over more keys than the set keeps decoded.
        let mut next = pods.iter().cycle();
        upsert.bench_function(name, |b| {
            b.iter(|| {
                let pod = Arc::clone(next.next().expect("cycles"));
                black_box(cache.upsert(pod.into()).expect("stored"))
            });
        });
    }
    upsert.finish();
}

/// Times `reads` calls of `read` one by one (each result dropped inside its timing, as in the
/// criterion groups), after `reads / 10` untimed calls to warm caches and branch predictors as
/// criterion's warm-up does, and prints the nearest-rank percentiles less the clock's own cost.
#[allow(
    clippy::print_stdout,
    reason = "the percentiles are a report beside criterion's means"
)]
fn percentiles<T>(id: &str, reads: usize, mut read: impl FnMut() -> T) {
    assert!(reads > 0, "percentiles of no reads");
    for _ in 0..reads / 10 {
        black_box(read());
    }
    let clock = {
        let start = Instant::now();
        for _ in 0..reads {
            black_box(Instant::now());
        }
        start.elapsed() / u32::try_from(reads).expect("a count of reads")
    };
    let mut times: Vec<Duration> = (0..reads)
        .map(|_| {
            let start = Instant::now();
            black_box(read());
            start.elapsed().saturating_sub(clock)
        })
        .collect();
    times.sort_unstable();
    let at = |percent: usize| times[(reads * percent).div_ceil(100) - 1];
    println!(
        "{id}: per read p50 {:?}, p90 {:?}, p99 {:?} ({reads} reads)",
        at(50),
        at(90),
        at(99)
    );
}

criterion_group! {
    name = compact_cache;
    config = Criterion::default()
        .sample_size(30)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(compact_cache);
