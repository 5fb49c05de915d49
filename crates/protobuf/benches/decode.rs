//! One Pod (the fixture kube-apiserver-shaped Pod, ~6 KB of JSON) decoded from JSON and from
//! protobuf, in full, without managedFields, and as a slim projection; protobuf through the
//! generated decoder (what [`Decoder`] picks for a k8s-openapi kind) and through serde; and the
//! same Pod encoded back to protobuf from its k8s-openapi struct, as a compact cache stores it.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_protobuf::{
    DecodeOptions, Decoder, Envelope, encode_object, message_for, to_message,
};

/// The allocator the side-by-side bench peers (xtask/peers/rust) run on: with glibc's, a
/// decode that allocates a few hundred blocks and frees them spends a third of its time there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// One enveloped body decoded as `T` by `decoder`.
fn from_protobuf<T: serde::de::DeserializeOwned + 'static>(
    decoder: &Decoder<T>,
    body: &[u8],
    options: DecodeOptions,
) -> T {
    Envelope::parse(body)
        .and_then(|envelope| decoder.decode_envelope(&envelope, options))
        .expect("decodes")
}

fn decode(c: &mut Criterion) {
    let json = include_bytes!("../tests/fixtures/pod.json");
    let value: serde_json::Value = serde_json::from_slice(json).expect("fixture");
    let json = serde_json::to_vec(&value).expect("compact JSON");
    let protobuf = encode_object(&value).expect("encodes");
    let mut group = c.benchmark_group("decode_pod");
    group.throughput(Throughput::Elements(1));
    group.bench_function("json", |b| {
        b.iter(|| serde_json::from_slice::<Pod>(black_box(&json)).expect("decodes"));
    });
    let generated = Decoder::<Pod>::new();
    assert!(
        generated.is_generated(),
        "k8s-openapi v1_37 has generated decoders"
    );
    let serde = Decoder::<Pod>::serde();
    group.bench_function("protobuf", |b| {
        b.iter(|| from_protobuf(&generated, black_box(&protobuf), DecodeOptions::default()));
    });
    group.bench_function("protobuf_serde", |b| {
        b.iter(|| from_protobuf(&serde, black_box(&protobuf), DecodeOptions::default()));
    });
    group.bench_function("protobuf_without_managed_fields", |b| {
        b.iter(|| {
            from_protobuf(
                &generated,
                black_box(&protobuf),
                DecodeOptions::default().drop_managed_fields(),
            )
        });
    });
    group.bench_function("protobuf_serde_without_managed_fields", |b| {
        b.iter(|| {
            from_protobuf(
                &serde,
                black_box(&protobuf),
                DecodeOptions::default().drop_managed_fields(),
            )
        });
    });
    group.bench_function("json_projection", |b| {
        b.iter(|| serde_json::from_slice::<SlimPod>(black_box(&json)).expect("decodes"));
    });
    group.bench_function("protobuf_projection", |b| {
        let projection = Decoder::<SlimPod>::new();
        b.iter(|| from_protobuf(&projection, black_box(&protobuf), DecodeOptions::default()));
    });
    group.finish();
}

/// What a full k8s-openapi Pod costs apart from parsing: building the same tree of `String`s,
/// `Vec`s and `BTreeMap`s (a clone allocates and copies exactly what a decode does), and
/// freeing it. The decode cases above include freeing their output; `decode_only` does not.
fn tree(c: &mut Criterion) {
    let json = include_bytes!("../tests/fixtures/pod.json");
    let value: serde_json::Value = serde_json::from_slice(json).expect("fixture");
    let protobuf = encode_object(&value).expect("encodes");
    let pod: Pod = serde_json::from_value(value).expect("a Pod");
    let mut group = c.benchmark_group("pod_tree");
    group.throughput(Throughput::Elements(1));
    let generated = Decoder::<Pod>::new();
    group.bench_function("protobuf_decode_only", |b| {
        b.iter_with_large_drop(|| {
            from_protobuf(&generated, black_box(&protobuf), DecodeOptions::default())
        });
    });
    group.bench_function("clone", |b| {
        b.iter_with_large_drop(|| black_box(&pod).clone());
    });
    group.bench_function("drop", |b| {
        b.iter_batched(|| pod.clone(), drop, criterion::BatchSize::SmallInput);
    });
    group.finish();
}

/// A k8s-openapi Pod written as its protobuf message, and the JSON tree path it replaced.
fn encode(c: &mut Criterion) {
    let json = include_bytes!("../tests/fixtures/pod.json");
    let pod: Pod = serde_json::from_slice(json).expect("a Pod");
    let message = message_for("v1", "Pod").expect("the tables describe Pods");
    let mut group = c.benchmark_group("encode_pod");
    group.throughput(Throughput::Elements(1));
    group.bench_function("to_message", |b| {
        b.iter(|| to_message(black_box(&pod), message).expect("encodes"));
    });
    group.finish();
}

criterion_group!(benches, decode, tree, encode);
criterion_main!(benches);
