//! Selective reads on 10k- and 100k-Pod caches: label selectors answered from the label index
//! against a scan, and a compound index query (namespace and node) against filtering one
//! index's result.
//!
//! The Pods spread over 100 namespaces, 50 nodes and 20 `app` labels, three `tier`s each, so
//! `app=app-3,tier=db` selects about 1 in 60 Pods and a namespace and node about 1 in 5,000.
//!
//! Run with `cargo bench -p kinformer-store --bench queries -- --warm-up-time 1 --measurement-time 2`.

use std::{collections::BTreeMap, hint::black_box, sync::Arc};

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kinformer_store::{
    Cache, CacheReader, IndexFunc, Indexers, Lister, NAMESPACE_INDEX, Store, label_indexers,
    meta_namespace_key_func, namespace_indexers, parse_selector,
};
use kube_core::ObjectMeta;

const BY_NODE: &str = "by-node";

fn pod(i: usize) -> Arc<Pod> {
    let labels = BTreeMap::from([
        ("app".to_owned(), format!("app-{}", i % 20)),
        ("tier".to_owned(), ["web", "db", "cache"][i % 3].to_owned()),
    ]);
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{i}")),
            namespace: Some(format!("ns-{}", i % 100)),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(format!("node-{}", i % 50)),
            ..PodSpec::default()
        }),
        ..Pod::default()
    })
}

fn cache(pods: usize, with_label_index: bool) -> Arc<Cache<Pod>> {
    let mut indexers: Indexers<Pod> = namespace_indexers();
    let by_node: IndexFunc<Pod> = Arc::new(|pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .into_iter()
            .collect()
    });
    indexers.insert(BY_NODE.to_owned(), by_node);
    if with_label_index {
        indexers.extend(label_indexers());
    }
    let cache = Cache::new(Arc::new(meta_namespace_key_func::<Pod>), indexers);
    cache.replace((0..pods).map(pod).collect(), "1").unwrap();
    Arc::new(cache)
}

fn queries(c: &mut Criterion) {
    let selector = parse_selector("app=app-3,tier=db").unwrap();
    for pods in [10_000, 100_000] {
        let scanned = cache(pods, false);
        let indexed = cache(pods, true);
        let (scanned_pods, indexed_pods) = (
            Lister::<Pod>::new(scanned.clone()),
            Lister::<Pod>::new(indexed.clone()),
        );
        let (scanned_in_ns, indexed_in_ns) = (
            scanned_pods.namespaced("ns-3"),
            indexed_pods.namespaced("ns-3"),
        );
        let mut group = c.benchmark_group(format!("queries/{pods}"));
        group.bench_function("labels: scan", |b| {
            b.iter(|| black_box(scanned_pods.list(black_box(&selector))));
        });
        group.bench_function("labels: label index", |b| {
            b.iter(|| black_box(indexed_pods.list(black_box(&selector))));
        });
        group.bench_function("namespace+labels: namespace index, then filter", |b| {
            b.iter(|| black_box(scanned_in_ns.list(black_box(&selector))));
        });
        group.bench_function("namespace+labels: compound query", |b| {
            b.iter(|| black_box(indexed_in_ns.list(black_box(&selector))));
        });
        group.bench_function("namespace+node: namespace index, then filter", |b| {
            b.iter(|| {
                let on_node: Vec<Arc<Pod>> = scanned
                    .by_index(NAMESPACE_INDEX, "ns-3")
                    .unwrap()
                    .into_iter()
                    .filter(|pod| {
                        pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref())
                            == Some("node-3")
                    })
                    .collect();
                black_box(on_node)
            });
        });
        group.bench_function("namespace+node: compound query", |b| {
            b.iter(|| {
                black_box(
                    scanned
                        .by_indexes(&[(NAMESPACE_INDEX, &["ns-3"]), (BY_NODE, &["node-3"])])
                        .unwrap(),
                )
            });
        });
        group.finish();
    }
}

criterion_group!(benches, queries);
criterion_main!(benches);
