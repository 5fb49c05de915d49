//! JSON and protobuf of the same objects decode to equal values.
//!
//! `tests/fixtures/*.json` are objects as kube-apiserver serves them; the `.pb` beside each is
//! what client-go's own protobuf serializer makes of it (written by
//! `go run ./cmd/proto-fixtures` in xtask/peers/client-go), and `*.watch.pb` is the byte stream
//! kube-apiserver's watch encoder sends for the events of `*.watch.jsonl`. So these tests hold
//! the decoder to Go's encoder, not to our own, and the encoder the fake API server serves
//! with to Go's bytes.

use std::{fmt::Debug, fs, path::PathBuf};

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, StatefulSet},
        batch::v1::CronJob,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Event, Node, Pod, Secret, Service},
        rbac::v1::Role,
    },
    apimachinery::pkg::apis::meta::v1::{ListMeta, Status},
};
use kinformer_protobuf::{
    DecodeOptions, Envelope, FrameReader, LIST_TAIL, WatchFrame, encode_list_head, encode_message,
    encode_object, from_message, list_item_prefix, message_for, messages,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// k8s-openapi has no `PodList`; a list is its metadata and its items.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct PodList {
    metadata: ListMeta,
    items: Vec<Pod>,
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(name: &str) -> Vec<u8> {
    let path = fixtures().join(name);
    fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Decodes `name.json` and `name.pb` (Go's encoding) and our own encoding of the JSON as `T`,
/// and asserts all three are equal, and our bytes Go's: the fake API server serves what
/// kube-apiserver would, zero-valued fields included.
fn assert_same<T: DeserializeOwned + PartialEq + Debug>(name: &str) -> T {
    let json = read(&format!("{name}.json"));
    let from_json: T = serde_json::from_slice(&json).expect("the JSON fixture decodes");
    let go_bytes = read(&format!("{name}.pb"));
    let envelope = Envelope::parse(&go_bytes).expect("Go's body has the k8s envelope");
    let from_go: T = envelope
        .decode(DecodeOptions::default())
        .unwrap_or_else(|error| panic!("{name}.pb: {error}"));
    assert_eq!(from_go, from_json, "{name}: Go's protobuf vs JSON");

    let value: Value = serde_json::from_slice(&json).expect("JSON");
    let ours = encode_object(&value).unwrap_or_else(|error| panic!("{name}: encode: {error}"));
    let from_ours: T = Envelope::parse(&ours)
        .and_then(|envelope| envelope.decode(DecodeOptions::default()))
        .unwrap_or_else(|error| panic!("{name}: our protobuf: {error}"));
    assert_eq!(from_ours, from_json, "{name}: our protobuf vs JSON");
    assert!(
        ours == go_bytes,
        "{name}: our protobuf is not Go's, byte for byte ({} bytes, Go's {})",
        ours.len(),
        go_bytes.len()
    );
    from_json
}

#[test]
fn every_fixture_decodes_from_protobuf_equal_to_json() {
    let pod: Pod = assert_same("pod");
    assert!(
        pod.metadata
            .managed_fields
            .as_ref()
            .is_some_and(|fields| !fields.is_empty()),
        "the Pod fixture exercises managedFields"
    );
    assert_same::<Pod>("pod-minimal");
    assert_same::<Deployment>("deployment");
    assert_same::<Service>("service");
    assert_same::<ConfigMap>("configmap");
    assert_same::<Secret>("secret");
    assert_same::<Node>("node");
    assert_same::<Event>("event");
    assert_same::<Lease>("lease");
    assert_same::<CronJob>("cronjob");
    assert_same::<StatefulSet>("statefulset");
    assert_same::<Role>("role");
    let list: PodList = assert_same("pod-list");
    assert_eq!(list.items.len(), 3);
    let status: Status = assert_same("status-gone");
    assert_eq!(status.code, Some(410));
}

/// The fake API server streams a list as a head, each item after its prefix, and a tail: for
/// the same Pods that is Go's list, byte for byte.
#[test]
fn a_list_written_in_pieces_as_the_fake_serves_it_is_gos() {
    let value: Value = serde_json::from_slice(&read("pod-list.json")).expect("JSON");
    let list_meta = encode_message(&value["metadata"], &messages::LIST_META).expect("ListMeta");
    let pod = message_for("v1", "Pod").expect("a Pod table");
    let items: Vec<Vec<u8>> = value["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| encode_message(item, pod).expect("a Pod"))
        .collect();
    let mut body = encode_list_head("v1", "PodList", &list_meta, items.iter().map(Vec::len));
    for item in &items {
        body.extend_from_slice(&list_item_prefix(item.len()));
        body.extend_from_slice(item);
    }
    body.extend_from_slice(LIST_TAIL);
    assert!(
        body == read("pod-list.pb"),
        "the list in pieces is not Go's"
    );
}

#[test]
fn every_fixture_file_is_covered() {
    let mut names: Vec<String> = fs::read_dir(fixtures())
        .expect("fixtures")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".json").map(str::to_owned))
        .collect();
    names.sort();
    let source = include_str!("differential.rs");
    for name in names {
        assert!(
            source.contains(&format!("(\"{name}\")")),
            "fixture {name}.json is not checked by every_fixture_decodes_from_protobuf_equal_to_json"
        );
    }
}

#[test]
fn a_watch_stream_from_go_decodes_to_the_json_events() {
    let stream = read("pods.watch.pb");
    let lines = String::from_utf8(read("pods.watch.jsonl")).expect("UTF-8");
    let expected: Vec<Value> = lines
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("a JSON event"))
        .collect();

    // Feed the stream in awkward chunks: frames must not depend on chunk boundaries.
    let mut reader = FrameReader::default();
    let mut frames = Vec::new();
    for chunk in stream.chunks(7) {
        reader.push(chunk);
        while let Some(frame) = reader.next_frame().expect("valid frames") {
            frames.push(frame);
        }
    }
    assert_eq!(reader.pending(), 0);
    assert_eq!(frames.len(), expected.len());

    for (frame, event) in frames.iter().zip(&expected) {
        let frame = WatchFrame::parse(frame).expect("a WatchEvent");
        assert_eq!(frame.event_type, event["type"].as_str().unwrap_or_default());
        let envelope = Envelope::parse(frame.object).expect("an enveloped object");
        assert_eq!(envelope.kind, "Pod");
        let from_protobuf: Pod = envelope.decode(DecodeOptions::default()).expect("a Pod");
        let from_json: Pod = serde_json::from_value(event["object"].clone()).expect("a Pod");
        assert_eq!(from_protobuf, from_json);
    }
}

#[test]
fn managed_fields_can_be_skipped_on_the_wire() {
    let bytes = read("pod.pb");
    let envelope = Envelope::parse(&bytes).expect("envelope");
    let full: Pod = envelope.decode(DecodeOptions::default()).expect("full");
    let lean: Pod = envelope
        .decode(DecodeOptions::default().drop_managed_fields())
        .expect("lean");
    assert_eq!(lean.metadata.managed_fields, None);
    let mut expected = full;
    expected.metadata.managed_fields = None;
    assert_eq!(lean, expected);
}

/// What a controller that only routes Pods by node and phase would keep.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct SlimPod {
    metadata: SlimMeta,
    #[serde(default)]
    spec: Option<SlimSpec>,
    #[serde(default)]
    status: Option<SlimStatus>,
}

#[derive(Debug, PartialEq, serde::Deserialize)]
struct SlimMeta {
    name: String,
    namespace: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, PartialEq, serde::Deserialize)]
struct SlimSpec {
    #[serde(rename = "nodeName")]
    node_name: Option<String>,
    containers: Vec<SlimContainer>,
}

#[derive(Debug, PartialEq, serde::Deserialize)]
struct SlimContainer {
    name: String,
    image: Option<String>,
}

#[derive(Debug, PartialEq, serde::Deserialize)]
struct SlimStatus {
    phase: Option<String>,
}

#[test]
fn a_projection_decodes_from_protobuf_as_from_json() {
    let from_json: SlimPod = serde_json::from_slice(&read("pod.json")).expect("JSON");
    let bytes = read("pod.pb");
    let envelope = Envelope::parse(&bytes).expect("envelope");
    let from_protobuf: SlimPod = from_message(
        envelope.raw,
        envelope.message().expect("Pod table"),
        DecodeOptions::default(),
    )
    .expect("protobuf");
    assert_eq!(from_protobuf, from_json);
    assert!(!from_json.metadata.labels.is_empty());
    assert!(
        from_json
            .spec
            .is_some_and(|spec| spec.containers.len() == 2)
    );
}

/// `DecodeOptions::type_meta` shows `apiVersion` and `kind` to the outermost message only:
/// a nested message that refuses unknown fields still decodes.
#[test]
fn a_type_is_presented_to_the_outermost_message_only() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Outer {
        #[serde(rename = "apiVersion")]
        api_version: String,
        kind: String,
        metadata: Inner,
    }
    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        name: String,
        /// Go writes the zero `metav1.Time` it holds (an empty message), which reads as the
        /// `null` its JSON has.
        #[serde(rename = "creationTimestamp")]
        creation_timestamp: Option<String>,
    }
    let body = encode_object(&serde_json::json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": { "name": "a" },
    }))
    .expect("encodes");
    let envelope = Envelope::parse(&body).expect("an envelope");
    let options =
        DecodeOptions::default().with_type_meta("meta.k8s.io/v1", "PartialObjectMetadata");
    let decoded: Outer = envelope.decode(options).expect("decodes");
    assert_eq!(
        decoded,
        Outer {
            api_version: "meta.k8s.io/v1".into(),
            kind: "PartialObjectMetadata".into(),
            metadata: Inner {
                name: "a".into(),
                creation_timestamp: None,
            },
        }
    );
    // Without the option the message has no type of its own.
    let untyped = envelope.decode::<Outer>(DecodeOptions::default());
    assert!(untyped.is_err(), "{untyped:?}");
}

/// Repeated fields become `Vec`s allocated once at their length: a cached object keeps no
/// empty slots (growth by doubling would leave up to half of them, and a `Container` slot is
/// over 2 KB).
#[test]
fn repeated_fields_decode_into_vecs_without_spare_capacity() {
    fn tight<T>(what: &str, vec: Option<&Vec<T>>) {
        let vec = vec.unwrap_or_else(|| panic!("the fixture has {what}"));
        assert!(!vec.is_empty(), "{what}");
        assert_eq!(vec.capacity(), vec.len(), "{what}");
    }
    let body = read("pod.pb");
    let pod: Pod = Envelope::parse(&body)
        .and_then(|envelope| envelope.decode(DecodeOptions::default()))
        .expect("decodes");
    let spec = pod.spec.as_ref().expect("a spec");
    let status = pod.status.as_ref().expect("a status");
    tight("containers", Some(&spec.containers));
    tight("volumes", spec.volumes.as_ref());
    let app = &spec.containers[0];
    tight("ports", app.ports.as_ref());
    tight("volume mounts", app.volume_mounts.as_ref());
    tight("env", app.env.as_ref());
    tight("command", app.command.as_ref());
    tight("args", app.args.as_ref());
    tight("tolerations", spec.tolerations.as_ref());
    tight("conditions", status.conditions.as_ref());
    tight("container statuses", status.container_statuses.as_ref());
    tight("managedFields", pod.metadata.managed_fields.as_ref());
    tight("ownerReferences", pod.metadata.owner_references.as_ref());
}
