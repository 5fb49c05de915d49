//! One large list page decoded into Pods, in JSON and in protobuf.
//!
//! | ID | timed part |
//! | --- | --- |
//! | `list_decode/json` | `JsonDecoder::decode_list` of a 4,096-Pod JSON page (the fixture Pods, ~6 KB each) |
//! | `list_decode/protobuf` | `KubeDecoder::decode_list` of the same page in protobuf |
//!
//! A page of at least 2,048 items decodes on every core, so the figures depend on how many the
//! process may use: run it once as is and once under `taskset -c 0` for the one-core figure.

#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{Decoder, ExpectedType, JsonDecoder, KubeDecoder, WireFormat};
use kinformer_testing::fixtures;

const PODS: usize = 4096;

fn list_decode(c: &mut Criterion) {
    let items: Vec<_> = (0..PODS)
        .map(|i| {
            let mut pod = fixtures::pod(i);
            pod["metadata"]["resourceVersion"] = (i + 1).to_string().into();
            pod
        })
        .collect();
    let list = serde_json::json!({
        "apiVersion": "v1", "kind": "PodList", "metadata": { "resourceVersion": "5000" },
        "items": items,
    });
    let json = serde_json::to_vec(&list).expect("encodes");
    let protobuf = kinformer_protobuf::encode_object(&list).expect("encodes");
    let json_decoder = JsonDecoder::<Pod>::new(Some(ExpectedType::new("v1", "Pod")));
    let kube_decoder =
        KubeDecoder::<Pod>::new(ExpectedType::new("v1", "Pod"), WireFormat::Protobuf);

    let mut group = c.benchmark_group("list_decode");
    group.throughput(Throughput::Elements(PODS as u64));
    group.sample_size(10);
    group.bench_function("json", |b| {
        b.iter(|| json_decoder.decode_list(&json).expect("decodes"));
    });
    group.bench_function("protobuf", |b| {
        b.iter(|| kube_decoder.decode_list(&protobuf).expect("decodes"));
    });
    group.finish();
}

criterion_group!(benches, list_decode);
criterion_main!(benches);
