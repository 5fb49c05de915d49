//! JSON parsers for the typed-object path (the JSON decoder's `decode_object_bytes`, a list item or a
//! watch event's object into a k8s-openapi Pod): serde_json against sonic-rs and simd-json.
//!
//! | ID | timed part |
//! | --- | --- |
//! | `json_parsers_pod/{serde_json,sonic_rs,simd_json}` | one fixture Pod (~6 KB with managedFields) into a `Pod` |
//! | `json_parsers_list_items/{serde_json,sonic_rs,simd_json}` | the 1,000 item slices of a PodList body, each into a `Pod` |
//!
//! simd-json parses in place, so its timing includes copying the bytes into a scratch buffer
//! (reused across items and iterations: the cheapest copy the real path could make). All three
//! are checked to produce equal Pods before timing.

#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_testing::fixtures;
use serde_json::value::RawValue;

/// The allocator the side-by-side bench peers (xtask/peers/rust) run on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PODS: usize = 1000;

fn with_serde_json(bytes: &[u8]) -> Pod {
    serde_json::from_slice(bytes).expect("serde_json decodes")
}

fn with_sonic_rs(bytes: &[u8]) -> Pod {
    sonic_rs::from_slice(bytes).expect("sonic-rs decodes")
}

fn with_simd_json(bytes: &[u8], scratch: &mut Vec<u8>) -> Pod {
    scratch.clear();
    scratch.extend_from_slice(bytes);
    simd_json::serde::from_slice(scratch).expect("simd-json decodes")
}

fn check_all_agree(bytes: &[u8], scratch: &mut Vec<u8>) {
    let reference = with_serde_json(bytes);
    assert!(
        reference
            .metadata
            .managed_fields
            .as_ref()
            .is_some_and(|fields| !fields.is_empty()),
        "the fixture carries managedFields"
    );
    assert_eq!(with_sonic_rs(bytes), reference, "sonic-rs differs");
    assert_eq!(
        with_simd_json(bytes, scratch),
        reference,
        "simd-json differs"
    );
}

fn one_pod(c: &mut Criterion) {
    let bytes = serde_json::to_vec(&fixtures::pod(7)).expect("encodes");
    let mut scratch = Vec::new();
    check_all_agree(&bytes, &mut scratch);

    let mut group = c.benchmark_group("json_parsers_pod");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("serde_json", |b| {
        b.iter(|| with_serde_json(black_box(&bytes)));
    });
    group.bench_function("sonic_rs", |b| {
        b.iter(|| with_sonic_rs(black_box(&bytes)));
    });
    group.bench_function("simd_json", |b| {
        b.iter(|| with_simd_json(black_box(&bytes), &mut scratch));
    });
    group.finish();
}

#[derive(serde::Deserialize)]
struct RawList<'a> {
    #[serde(borrow)]
    items: Vec<&'a RawValue>,
}

fn list_items(c: &mut Criterion) {
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
    let body = serde_json::to_vec(&list).expect("encodes");
    let raw: RawList<'_> = serde_json::from_slice(&body).expect("splits");
    let slices: Vec<&[u8]> = raw.items.iter().map(|item| item.get().as_bytes()).collect();
    assert_eq!(slices.len(), PODS);
    let mut scratch = Vec::new();
    for item in &slices {
        check_all_agree(item, &mut scratch);
    }

    let mut group = c.benchmark_group("json_parsers_list_items");
    group.throughput(Throughput::Elements(PODS as u64));
    group.sample_size(20);
    group.bench_function("serde_json", |b| {
        b.iter(|| {
            for item in black_box(&slices) {
                black_box(with_serde_json(item));
            }
        });
    });
    group.bench_function("sonic_rs", |b| {
        b.iter(|| {
            for item in black_box(&slices) {
                black_box(with_sonic_rs(item));
            }
        });
    });
    group.bench_function("simd_json", |b| {
        b.iter(|| {
            for item in black_box(&slices) {
                black_box(with_simd_json(item, &mut scratch));
            }
        });
    });
    group.finish();
}

criterion_group!(benches, one_pod, list_items);
criterion_main!(benches);
