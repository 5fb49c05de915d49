//! Properties over generated objects: what we encode decodes to what JSON decodes to, and no
//! byte sequence makes the decoder panic.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_protobuf::{DecodeOptions, Envelope, FrameReader, WatchFrame, encode_object};
use proptest::prelude::*;
use serde_json::{Value, json};

fn text() -> impl Strategy<Value = String> {
    // Non-empty: apiserver JSON leaves empty optional strings out.
    "[a-zA-Z0-9 ./:_\u{e9}\u{4e16}\u{1f600}\"\\\\-]{1,24}"
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,20}"
}

fn string_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(name(), text(), 0..6)
}

/// Seconds between 1900 and 2200: times are whole seconds in JSON.
fn time() -> impl Strategy<Value = String> {
    (-2_208_988_800i64..7_258_118_400).prop_map(|seconds| {
        jiff::Timestamp::from_second(seconds)
            .map(|timestamp| timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    })
}

fn container() -> impl Strategy<Value = Value> {
    (
        name(),
        text(),
        prop::collection::vec((name(), 1i64..65_536), 0..3),
        prop::option::of(prop_oneof![
            (1i64..65_536).prop_map(|port| json!(port)),
            name().prop_map(|port| json!(port)),
        ]),
        prop::collection::vec(text(), 0..4),
    )
        .prop_map(|(name, image, ports, probe_port, args)| {
            let mut container = json!({
                "name": name,
                "image": image,
                "args": args,
                "ports": ports.iter().map(|(name, port)| json!({ "name": name, "containerPort": port, "protocol": "TCP" })).collect::<Vec<_>>(),
                "resources": { "limits": { "cpu": "500m", "memory": "1Gi" } },
            });
            if let Some(port) = probe_port {
                container["readinessProbe"] =
                    json!({ "httpGet": { "path": "/healthz", "port": port }, "periodSeconds": 10 });
            }
            container
        })
}

fn pod() -> impl Strategy<Value = Value> {
    (
        name(),
        name(),
        string_map(),
        string_map(),
        prop::collection::vec(container(), 1..4),
        prop::option::of(any::<bool>()),
        prop::option::of(0i64..1_000_000),
        time(),
        prop::option::of(-10i64..10),
    )
        .prop_map(
            |(
                name,
                namespace,
                labels,
                annotations,
                containers,
                automount,
                grace,
                created,
                priority,
            )| {
                let mut pod = json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": labels,
                        "annotations": annotations,
                        "resourceVersion": "12345",
                        "creationTimestamp": created,
                    },
                    "spec": { "containers": containers },
                    "status": { "phase": "Running", "conditions": [
                        { "type": "Ready", "status": "True", "lastTransitionTime": created },
                    ] },
                });
                // Pointer fields: an explicit false or 0 must survive.
                if let Some(automount) = automount {
                    pod["spec"]["automountServiceAccountToken"] = json!(automount);
                }
                if let Some(grace) = grace {
                    pod["spec"]["terminationGracePeriodSeconds"] = json!(grace);
                }
                if let Some(priority) = priority {
                    pod["spec"]["priority"] = json!(priority);
                }
                pod
            },
        )
}

fn config_map() -> impl Strategy<Value = Value> {
    (
        name(),
        string_map(),
        prop::collection::btree_map(name(), prop::collection::vec(any::<u8>(), 0..64), 0..4),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, data, binary, immutable)| {
            let binary: BTreeMap<String, String> = binary
                .into_iter()
                .map(|(key, bytes)| {
                    let encoded =
                        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
                    (key, encoded)
                })
                .collect();
            let mut object = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": name, "namespace": "default" },
                "data": data,
                "binaryData": binary,
            });
            if let Some(immutable) = immutable {
                object["immutable"] = json!(immutable);
            }
            object
        })
}

/// Removes empty lists and maps, as kube-apiserver's JSON (`omitempty`) leaves them out and
/// protobuf cannot tell them from absent ones.
fn canonical(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.retain(|_, item| match item {
                    Value::Array(items) => !items.is_empty(),
                    Value::Object(fields) => !fields.is_empty(),
                    _ => true,
                });
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, kinformer_protobuf::Error> {
    Envelope::parse(body)?.decode(DecodeOptions::default())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pods_survive_protobuf(value in pod().prop_map(canonical)) {
        let body = encode_object(&value).expect("encodes");
        let from_protobuf: Pod = decode(&body).expect("decodes");
        let from_json: Pod = serde_json::from_value(value).expect("JSON");
        prop_assert_eq!(from_protobuf, from_json);
    }

    #[test]
    fn config_maps_survive_protobuf(value in config_map().prop_map(canonical)) {
        let body = encode_object(&value).expect("encodes");
        let from_protobuf: ConfigMap = decode(&body).expect("decodes");
        let from_json: ConfigMap = serde_json::from_value(value).expect("JSON");
        prop_assert_eq!(from_protobuf, from_json);
    }

    #[test]
    fn corrupt_bodies_are_errors_not_panics(
        value in pod(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut body = encode_object(&value).expect("encodes");
        for (at, byte) in flips {
            let at = at.index(body.len());
            body[at] = byte;
        }
        let _ = decode::<Pod>(&body);
        let _ = decode::<Pod>(&body[..cut.index(body.len())]);
        let _ = WatchFrame::parse(&body);
        let mut frames = FrameReader::default();
        frames.push(&body);
        while let Ok(Some(frame)) = frames.next_frame() {
            let _ = WatchFrame::parse(&frame);
        }
    }

    /// Frames come out whole and in order however the stream is chunked, and a frame handed
    /// out stays intact while later chunks arrive (frames are views of the reader's buffer).
    #[test]
    fn frames_do_not_depend_on_chunk_boundaries(
        objects in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..12),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let stream: Vec<u8> = objects
            .iter()
            .flat_map(|object| kinformer_protobuf::encode_watch_frame("MODIFIED", object))
            .collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(stream.len() + 1)).collect();
        cuts.extend([0, stream.len()]);
        cuts.sort_unstable();
        let mut reader = FrameReader::default();
        let mut frames = Vec::new();
        for bounds in cuts.windows(2) {
            reader.push(&stream[bounds[0]..bounds[1]]);
            while let Some(frame) = reader.next_frame().expect("valid frames") {
                frames.push(frame);
            }
        }
        prop_assert_eq!(reader.pending(), 0);
        prop_assert_eq!(frames.len(), objects.len());
        for (frame, object) in frames.iter().zip(&objects) {
            let frame = WatchFrame::parse(frame).expect("a WatchEvent");
            prop_assert_eq!(frame.event_type, "MODIFIED");
            prop_assert_eq!(frame.object, object.as_slice());
        }
    }
}

#[test]
fn a_truncated_body_names_what_was_cut() {
    let body = encode_object(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web", "namespace": "default", "labels": { "app": "web" } },
    }))
    .expect("encodes");
    let error = decode::<Pod>(&body[..body.len() - 3]).expect_err("truncated");
    assert!(error.to_string().contains("truncated"), "{error}");
}

#[test]
fn a_json_body_is_not_mistaken_for_protobuf() {
    let error = Envelope::parse(br#"{"kind":"Pod"}"#).expect_err("JSON");
    assert_eq!(error, kinformer_protobuf::Error::NoMagic);
}

#[test]
fn an_oversized_frame_length_is_refused() {
    let mut frames = FrameReader::default();
    frames.push(&u32::MAX.to_be_bytes());
    assert!(frames.next_frame().is_err());
}

#[test]
fn a_status_decodes_into_kube_core_with_its_enum() {
    let body = encode_object(&json!({
        "apiVersion": "v1", "kind": "Status", "metadata": {},
        "status": "Failure", "message": "too old resource version: 1 (5)",
        "reason": "Expired", "code": 410,
    }))
    .expect("encodes");
    let status: kube_core::Status = decode(&body).expect("decodes");
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
    assert!(status.is_failure());
}
