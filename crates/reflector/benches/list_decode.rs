//! One large list page, listed and decoded into Pods, in JSON and in protobuf.
//!
//! | ID | timed part |
//! | --- | --- |
//! | `list_decode/json` | `KubeListerWatcher::list` of one 4,096-Pod page (the fixture Pods, ~6 KB each) in JSON, from the fake API server in this process |
//! | `list_decode/protobuf` | the same page in protobuf |
//!
//! The timed part is what an informer's list pays: the request, the server writing the page
//! (the fake API server keeps each object's encodings, so it mostly copies), the transfer over
//! loopback, and the decoding, item by item as the page arrives. A page of at least 2,048 items
//! decodes on every core, so the figures depend on how many the process may use: run it once as
//! is and once under `taskset -c 0` for the one-core figure.

#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{KubeListerWatcher, ListOptions, ListerWatcher, WireFormat};
use kinformer_testing::FakeApiServer;

const PODS: usize = 4096;

fn list_decode(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let server = runtime
        .block_on(FakeApiServer::start_with_pods(0..PODS))
        .expect("the fake API server starts");
    server.warm_protobuf();
    let client = runtime
        .block_on(kinformer_reflector::informer_client(Some(
            kube_client::Config::new(server.url().parse().expect("the server's URL")),
        )))
        .expect("a client");

    let mut group = c.benchmark_group("list_decode");
    group.throughput(Throughput::Elements(PODS as u64));
    group.sample_size(10);
    for (name, format) in [
        ("json", WireFormat::Json),
        ("protobuf", WireFormat::Protobuf),
    ] {
        let lister_watcher = KubeListerWatcher::new(kube_client::Api::<Pod>::all(client.clone()))
            .wire_format(format);
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let mut items = Vec::with_capacity(PODS);
                    lister_watcher
                        .list(ListOptions::default(), &mut items)
                        .await
                        .expect("a page");
                    assert_eq!(items.len(), PODS);
                    items
                })
            });
        });
    }
    group.finish();
}

criterion_group!(benches, list_decode);
criterion_main!(benches);
