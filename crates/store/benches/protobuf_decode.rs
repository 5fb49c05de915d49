//! One Pod (the fixture kube-apiserver-shaped Pod, ~6 KB of JSON) decoded from JSON and from
//! protobuf, in full, without managedFields, and as a slim projection.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_store::protobuf::{DecodeOptions, Envelope, encode_object};

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct SlimPod {
    metadata: SlimMeta,
    spec: Option<SlimSpec>,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct SlimMeta {
    name: String,
    namespace: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct SlimSpec {
    #[serde(rename = "nodeName")]
    node_name: Option<String>,
}

fn decode(c: &mut Criterion) {
    let json = include_bytes!("../tests/protobuf-fixtures/pod.json");
    let value: serde_json::Value = serde_json::from_slice(json).expect("fixture");
    let json = serde_json::to_vec(&value).expect("compact JSON");
    let protobuf = encode_object(&value).expect("encodes");
    let mut group = c.benchmark_group("decode_pod");
    group.throughput(Throughput::Elements(1));
    group.bench_function("json", |b| {
        b.iter(|| serde_json::from_slice::<Pod>(black_box(&json)).expect("decodes"));
    });
    group.bench_function("protobuf", |b| {
        b.iter(|| {
            Envelope::parse(black_box(&protobuf))
                .and_then(|envelope| envelope.decode::<Pod>(DecodeOptions::default()))
                .expect("decodes")
        });
    });
    group.bench_function("protobuf_without_managed_fields", |b| {
        b.iter(|| {
            Envelope::parse(black_box(&protobuf))
                .and_then(|envelope| {
                    envelope.decode::<Pod>(DecodeOptions::dropping_managed_fields())
                })
                .expect("decodes")
        });
    });
    group.bench_function("json_projection", |b| {
        b.iter(|| serde_json::from_slice::<SlimPod>(black_box(&json)).expect("decodes"));
    });
    group.bench_function("protobuf_projection", |b| {
        b.iter(|| {
            Envelope::parse(black_box(&protobuf))
                .and_then(|envelope| envelope.decode::<SlimPod>(DecodeOptions::default()))
                .expect("decodes")
        });
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
