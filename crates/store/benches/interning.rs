//! What interning the repeated strings of a projection saves and costs.
//!
//! | ID | timed part |
//! | --- | --- |
//! | `interning/decode/plain` | decode one Pod from protobuf into a slim projection whose strings are `String`s |
//! | `interning/decode/interned` | the same projection with its repeated values (namespace, node, phase, container names and images) [`Interned`] |
//!
//! Before the timings, the memory each keeps is printed once on stderr: 20,000 Pods spread like a
//! cluster's (10 namespaces, 50 nodes, 20 apps) decoded and held by each projection, as resident
//! growth per Pod. Both sets stay alive, so neither reuses memory the other freed; the interned
//! set is decoded first, so its figure includes the intern table itself.

#![allow(missing_docs)]
#![allow(
    clippy::print_stderr,
    reason = "the memory figure is printed once, before the timings"
)]

use std::{collections::BTreeMap, hint::black_box, sync::Arc};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kinformer_protobuf::{DecodeOptions, Envelope, encode_object};
use kinformer_store::{Interned, ProjectedMeta};
use serde::Deserialize;

const PODS: usize = 20_000;

#[derive(Deserialize)]
#[allow(dead_code)]
struct InternedPod {
    metadata: ProjectedMeta,
    #[serde(default)]
    spec: InternedSpec,
    #[serde(default)]
    status: InternedStatus,
}

#[derive(Default, Deserialize)]
#[allow(dead_code)]
struct InternedSpec {
    #[serde(rename = "nodeName")]
    node_name: Option<Interned>,
    #[serde(default)]
    containers: Vec<InternedContainer>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct InternedContainer {
    name: Interned,
    image: Option<Interned>,
}

#[derive(Default, Deserialize)]
#[allow(dead_code)]
struct InternedStatus {
    phase: Option<Interned>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PlainPod {
    metadata: PlainMeta,
    #[serde(default)]
    spec: PlainSpec,
    #[serde(default)]
    status: PlainStatus,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PlainMeta {
    name: Option<String>,
    namespace: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
    uid: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Default, Deserialize)]
#[allow(dead_code)]
struct PlainSpec {
    #[serde(rename = "nodeName")]
    node_name: Option<String>,
    #[serde(default)]
    containers: Vec<PlainContainer>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PlainContainer {
    name: String,
    image: Option<String>,
}

#[derive(Default, Deserialize)]
#[allow(dead_code)]
struct PlainStatus {
    phase: Option<String>,
}

/// The fixture Pod made the `i`th of a cluster: its own name, uid and resourceVersion, one of
/// 10 namespaces, 50 nodes and 20 apps (the app names the image).
fn pod(template: &serde_json::Value, i: usize) -> Vec<u8> {
    let mut pod = template.clone();
    let metadata = &mut pod["metadata"];
    metadata["name"] = format!("pod-{i}").into();
    metadata["namespace"] = format!("ns-{}", i % 10).into();
    metadata["uid"] = format!("00000000-0000-4000-8000-{i:012x}").into();
    metadata["resourceVersion"] = (1000 + i).to_string().into();
    pod["spec"]["nodeName"] = format!("node-{}", i % 50).into();
    if let Some(containers) = pod["spec"]["containers"].as_array_mut() {
        for container in containers {
            container["image"] = format!("registry.example.com/app-{}:v1", i % 20).into();
        }
    }
    encode_object(&pod).expect("encodes")
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> T {
    Envelope::parse(bytes)
        .and_then(|envelope| envelope.decode(DecodeOptions::default()))
        .expect("decodes")
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn held_per_pod<T: for<'de> Deserialize<'de>>(pods: &[Vec<u8>]) -> (Vec<Arc<T>>, Option<u64>) {
    let before = resident_bytes();
    let held: Vec<Arc<T>> = pods.iter().map(|bytes| Arc::new(decode(bytes))).collect();
    let per_pod = before
        .zip(resident_bytes())
        .map(|(before, after)| after.saturating_sub(before) / pods.len() as u64);
    (held, per_pod)
}

fn interning(c: &mut Criterion) {
    let json = include_bytes!("../../protobuf/tests/fixtures/pod.json");
    let template: serde_json::Value = serde_json::from_slice(json).expect("fixture");
    let pods: Vec<Vec<u8>> = (0..PODS).map(|i| pod(&template, i)).collect();

    let (interned, interned_bytes) = held_per_pod::<InternedPod>(&pods);
    let (plain, plain_bytes) = held_per_pod::<PlainPod>(&pods);
    let show = |bytes: Option<u64>| bytes.map_or("unknown".to_owned(), |b| format!("{b} B"));
    eprintln!(
        "interning: {PODS} Pods held, resident growth per Pod: plain {}, interned {} \
         (intern table included)",
        show(plain_bytes),
        show(interned_bytes),
    );
    drop((interned, plain));

    let mut group = c.benchmark_group("interning/decode");
    group.throughput(Throughput::Elements(1));
    let sample = &pods[PODS / 2];
    group.bench_function("plain", |b| {
        b.iter(|| decode::<PlainPod>(black_box(sample)));
    });
    group.bench_function("interned", |b| {
        b.iter(|| decode::<InternedPod>(black_box(sample)));
    });
    group.finish();
}

criterion_group!(benches, interning);
criterion_main!(benches);
