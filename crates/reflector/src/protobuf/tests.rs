//! `KubeDecoder`: what it asks for, and the protobuf lists and watch frames it decodes.

use k8s_openapi::api::core::v1::Pod;
use kinformer_protobuf::{encode_object, encode_watch_frame};
use serde_json::json;

use super::*;
use crate::{INITIAL_EVENTS_END_ANNOTATION, decoder::PARALLEL_ITEMS};

fn decoder() -> KubeDecoder<Pod> {
    KubeDecoder::for_resource::<Pod>(WireFormat::Protobuf)
}

fn pod_json(name: &str, rv: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "ns", "resourceVersion": rv,
            "managedFields": [{ "manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": { "f:spec": {} } }],
        },
        "spec": { "containers": [{ "name": "app", "image": "app:1" }] },
    })
}

/// A watch frame as kube-apiserver sends it, without the length prefix.
fn frame(event_type: &str, object: &serde_json::Value) -> Vec<u8> {
    let framed = encode_watch_frame(event_type, &encode_object(object).expect("encodes"));
    framed[4..].to_vec()
}

#[test]
fn it_asks_for_protobuf_only_for_kinds_that_have_it() {
    assert_eq!(decoder().accept(), Some(PROTOBUF_ACCEPT));
    let json_only = KubeDecoder::<Pod>::for_resource::<Pod>(WireFormat::Json);
    assert_eq!(json_only.accept(), None);
    let custom = KubeDecoder::<Pod>::new(
        ExpectedType::new("example.com/v1", "Widget"),
        WireFormat::Protobuf,
    );
    assert!(
        !custom.asks_for_protobuf(),
        "custom resources have no protobuf form"
    );
}

/// An added or modified event's object and the bytes kept with it.
fn kept(event: WatchEvent<Pod>) -> (Arc<Pod>, Option<Encoded>) {
    match event {
        WatchEvent::Added(incoming) | WatchEvent::Modified(incoming) => incoming.into_parts(),
        other => panic!("decoded as {other:?}"),
    }
}

#[test]
fn added_and_modified_objects_keep_the_message_they_were_decoded_from() {
    let decoder = decoder();
    let codec = crate::ProtobufCodec::<Pod>::new().expect("Pod has a generated decoder");
    for event_type in ["ADDED", "MODIFIED"] {
        let event = decoder
            .decode_event(
                &frame(event_type, &pod_json("web", "7")),
                Framing::LengthPrefixed,
            )
            .expect("decodes");
        let (object, wire) = kept(event);
        let wire = wire.expect("the message is kept");
        // The kept bytes are the object's message: the cache's codec takes them as they
        // are, and they decode back to the very object the watch handed on.
        let adopted = kinformer_store::Codec::adopt(&codec, &wire).expect("adopted");
        assert_eq!(
            kinformer_store::Codec::decode(&codec, &adopted).expect("decodes"),
            *object
        );
        assert!(object.metadata.managed_fields.is_some());
    }
    // A deleted object is not stored: its event carries the object alone.
    let event = decoder
        .decode_event(
            &frame("DELETED", &pod_json("web", "8")),
            Framing::LengthPrefixed,
        )
        .expect("decodes");
    assert!(matches!(event, WatchEvent::Deleted(_)), "{event:?}");
}

#[test]
fn objects_decoded_without_managed_fields_keep_their_message_without_them() {
    let stripped = decoder().drop_managed_fields();
    let codec = crate::ProtobufCodec::<Pod>::new().expect("Pod has a generated decoder");
    let event = stripped
        .decode_event(
            &frame("MODIFIED", &pod_json("web", "7")),
            Framing::LengthPrefixed,
        )
        .expect("decodes");
    let (object, wire) = kept(event);
    assert!(object.metadata.managed_fields.is_none());
    let wire = wire.expect("the message is kept, cut");
    let adopted = kinformer_store::Codec::adopt(&codec, &wire).expect("adopted");
    assert_eq!(
        kinformer_store::Codec::decode(&codec, &adopted).expect("decodes"),
        *object
    );
}

#[test]
fn objects_that_hold_less_than_their_message_keep_no_bytes() {
    let metadata = KubeDecoder::<PartialObjectMeta<Pod>>::metadata(WireFormat::Protobuf);
    let event = metadata
        .decode_event(
            &frame("MODIFIED", &metadata_json("web", "7")),
            Framing::LengthPrefixed,
        )
        .expect("decodes");
    let WatchEvent::Modified(incoming) = event else {
        panic!("decoded as {event:?}");
    };
    assert!(
        incoming.encoded().is_none(),
        "a projection is not its message"
    );

    let line = serde_json::to_vec(&json!({ "type": "MODIFIED", "object": pod_json("web", "7") }))
        .expect("JSON");
    let event = decoder()
        .decode_event(&line, Framing::Lines)
        .expect("decodes");
    let (_, wire) = kept(event);
    assert!(wire.is_none(), "a JSON line has no protobuf message");
}

fn metadata_json(name: &str, rv: &str) -> serde_json::Value {
    let mut pod = pod_json(name, rv);
    json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": pod["metadata"].take(),
    })
}

#[test]
fn a_metadata_decoder_asks_for_partial_object_metadata_in_the_chosen_format() {
    let protobuf = KubeDecoder::<PartialObjectMeta<Pod>>::metadata(WireFormat::Protobuf);
    assert!(protobuf.asks_for_protobuf());
    assert_eq!(protobuf.accept(), Some(METADATA_LIST_PROTOBUF_ACCEPT));
    assert_eq!(
        protobuf.watch_accept(),
        Some(METADATA_WATCH_PROTOBUF_ACCEPT)
    );
    let json = KubeDecoder::<PartialObjectMeta<Pod>>::metadata(WireFormat::Json);
    assert!(!json.asks_for_protobuf());
    assert_eq!(json.accept(), Some(METADATA_LIST_JSON_ACCEPT));
    assert_eq!(json.watch_accept(), Some(METADATA_WATCH_JSON_ACCEPT));
    // Ranked first, and for metadata only: never whole objects in protobuf.
    let first = |accept: &str| accept.split(',').next().map(str::to_owned);
    assert_eq!(
        first(METADATA_LIST_PROTOBUF_ACCEPT).as_deref(),
        Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    );
    assert_eq!(
        first(METADATA_WATCH_PROTOBUF_ACCEPT).as_deref(),
        Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    );
}

#[test]
fn metadata_decodes_the_same_from_protobuf_and_json() {
    let decoder = KubeDecoder::<PartialObjectMeta<Pod>>::metadata(WireFormat::Protobuf);
    let list = json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
        "metadata": { "resourceVersion": "12" },
        "items": [metadata_json("a", "7"), metadata_json("b", "9")],
    });
    let (_, from_json) = decoder
        .decode_list(&serde_json::to_vec(&list).expect("JSON"))
        .expect("the JSON list decodes");
    let (page, from_protobuf) = decoder
        .decode_list(&encode_object(&list).expect("encodes"))
        .expect("the protobuf list decodes");
    assert_eq!(page.resource_version, "12");
    assert_eq!(from_protobuf.len(), 2);
    for (protobuf, json) in from_protobuf.iter().zip(&from_json) {
        assert_eq!(protobuf.metadata, json.metadata);
        assert!(protobuf.metadata.managed_fields.is_some());
        // The items of a protobuf list carry no type; the decoder presents the JSON's.
        assert_eq!(protobuf.types, json.types);
        assert_eq!(
            protobuf
                .types
                .as_ref()
                .map(|t| (t.api_version.as_str(), t.kind.as_str())),
            Some(("meta.k8s.io/v1", "PartialObjectMetadata"))
        );
    }

    let object = metadata_json("c", "11");
    let event = decoder
        .decode_event(&frame("MODIFIED", &object), Framing::LengthPrefixed)
        .expect("a protobuf frame decodes");
    let json_line =
        serde_json::to_vec(&json!({ "type": "MODIFIED", "object": object })).expect("JSON");
    let json_event = decoder
        .decode_event(&json_line, Framing::Lines)
        .expect("a JSON line decodes");
    match (event, json_event) {
        (WatchEvent::Modified(protobuf), WatchEvent::Modified(json)) => {
            assert_eq!(protobuf.metadata, json.metadata);
            assert_eq!(protobuf.types, json.types);
        }
        other => panic!("expected two MODIFIED events, got {other:?}"),
    }

    let dropping = decoder.drop_managed_fields();
    let event = dropping
        .decode_event(
            &frame("ADDED", &metadata_json("d", "12")),
            Framing::LengthPrefixed,
        )
        .expect("decodes");
    let WatchEvent::Added(object) = event else {
        panic!("expected ADDED, got {event:?}");
    };
    assert_eq!(object.metadata.managed_fields, None);
    assert_eq!(object.metadata.name.as_deref(), Some("d"));
}

#[test]
fn framing_follows_the_response_content_type() {
    let decoder = decoder();
    assert_eq!(
        decoder.framing(Some("application/vnd.kubernetes.protobuf;stream=watch")),
        Framing::LengthPrefixed
    );
    assert_eq!(decoder.framing(Some("application/json")), Framing::Lines);
    assert_eq!(decoder.framing(None), Framing::Lines);
}

#[test]
fn a_protobuf_list_decodes_with_its_metadata_and_keeps_each_message() {
    let list = json!({
        "apiVersion": "v1", "kind": "PodList",
        "metadata": { "resourceVersion": "12", "continue": "next" },
        "items": [pod_json("a", "7"), pod_json("b", "9")],
    });
    let body = encode_object(&list).expect("encodes");
    assert_eq!(decoder().continue_token(&body).as_deref(), Some("next"));
    let (page, items) = decoder().decode_list(&body).expect("decodes");
    assert_eq!(page.resource_version, "12");
    assert_eq!(page.continue_token.as_deref(), Some("next"));
    let codec = crate::ProtobufCodec::<Pod>::new().expect("Pod has a generated decoder");
    for (item, (name, version)) in items.iter().zip([("a", "7"), ("b", "9")]) {
        assert_eq!(item.object().metadata.name.as_deref(), Some(name));
        assert_eq!(
            item.object().metadata.resource_version.as_deref(),
            Some(version)
        );
        // Each item keeps its message, which decodes back to the very object.
        let wire = item.encoded().expect("the message is kept");
        let adopted = kinformer_store::Codec::adopt(&codec, wire).expect("adopted");
        assert_eq!(
            &kinformer_store::Codec::decode(&codec, &adopted).expect("decodes"),
            &**item.object()
        );
    }
}

#[test]
fn a_page_large_enough_to_decode_on_every_core_keeps_its_order() {
    let count = PARALLEL_ITEMS * 2 + 7;
    let items: Vec<_> = (0..count)
        .map(|i| pod_json(&format!("pod-{i}"), &i.to_string()))
        .collect();
    let list = json!({
        "apiVersion": "v1", "kind": "PodList", "metadata": { "resourceVersion": "99" },
        "items": items,
    });
    let protobuf = encode_object(&list).expect("encodes");
    let json = serde_json::to_vec(&list).expect("encodes");
    for (format, body) in [("protobuf", protobuf), ("JSON", json)] {
        let (page, items) = decoder().decode_list(&body).expect("decodes");
        assert_eq!(items.len(), count, "{format}");
        assert_eq!(page.resource_version, "99", "{format}");
        for (i, pod) in items.iter().enumerate() {
            assert_eq!(
                pod.object().metadata.name.as_deref(),
                Some(format!("pod-{i}").as_str()),
                "{format}"
            );
        }
    }
    let mut broken = encode_object(&list).expect("encodes");
    let at = broken.len() * 3 / 4;
    broken[at..at + 8].fill(0xff);
    assert!(
        decoder().decode_list(&broken).is_err(),
        "a broken protobuf item fails the page"
    );
    let mut wrong = list;
    wrong["items"][count - 3]["metadata"]["name"] = json!(7);
    assert!(
        decoder()
            .decode_list(&serde_json::to_vec(&wrong).expect("encodes"))
            .is_err(),
        "a JSON item of the wrong shape in the last run fails the page"
    );
}

#[test]
fn a_json_answer_to_a_protobuf_request_still_decodes() {
    let body = serde_json::to_vec(&json!({
        "kind": "PodList", "apiVersion": "v1", "metadata": { "resourceVersion": "3" },
        "items": [pod_json("a", "2")],
    }))
    .expect("JSON");
    let (_, items) = decoder().decode_list(&body).expect("decodes");
    assert_eq!(items.len(), 1);
    let line = serde_json::to_vec(&json!({ "type": "ADDED", "object": pod_json("b", "4") }))
        .expect("JSON");
    assert!(matches!(
        decoder().decode_event(&line, Framing::Lines),
        Ok(WatchEvent::Added(pod)) if pod.metadata.name.as_deref() == Some("b")
    ));
}

#[test]
fn managed_fields_are_dropped_in_both_formats_when_asked() {
    let decoder = decoder().drop_managed_fields();
    let protobuf = decoder
        .decode_event(
            &frame("ADDED", &pod_json("a", "1")),
            Framing::LengthPrefixed,
        )
        .expect("decodes");
    let line = serde_json::to_vec(&json!({ "type": "ADDED", "object": pod_json("a", "1") }))
        .expect("JSON");
    let json = decoder
        .decode_event(&line, Framing::Lines)
        .expect("decodes");
    for event in [protobuf, json] {
        let WatchEvent::Added(pod) = event else {
            panic!("expected an add, got {event:?}");
        };
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.name.as_deref(), Some("a"));
    }
}

#[test]
fn watch_frames_decode_to_events() {
    let decoder = decoder();
    assert!(matches!(
        decoder.decode_event(&frame("MODIFIED", &pod_json("a", "5")), Framing::LengthPrefixed),
        Ok(WatchEvent::Modified(pod)) if pod.metadata.resource_version.as_deref() == Some("5")
    ));
    let bookmark = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "resourceVersion": "8",
            "annotations": { (INITIAL_EVENTS_END_ANNOTATION): "true" },
        },
    });
    assert!(matches!(
        decoder.decode_event(&frame("BOOKMARK", &bookmark), Framing::LengthPrefixed),
        Ok(WatchEvent::Bookmark { resource_version, initial_events_end: true }) if resource_version == "8"
    ));
    let gone = json!({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410,
    });
    let error = decoder
        .decode_event(&frame("ERROR", &gone), Framing::LengthPrefixed)
        .expect_err("an error event");
    assert!(error.is_resource_version_unavailable(), "{error}");
}

#[test]
fn bad_frames_are_decode_or_kind_errors() {
    let decoder = decoder();
    let service = json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "s" } });
    assert!(matches!(
        decoder.decode_event(&frame("ADDED", &service), Framing::LengthPrefixed),
        Err(Error::WrongKind { .. })
    ));
    let mut truncated = frame("ADDED", &pod_json("a", "1"));
    truncated.truncate(truncated.len() / 2);
    assert!(matches!(
        decoder.decode_event(&truncated, Framing::LengthPrefixed),
        Err(Error::Decode { .. })
    ));
    assert!(matches!(
        decoder.decode_event(&[0xff, 0xff, 0xff], Framing::LengthPrefixed),
        Err(Error::Decode { .. })
    ));
    assert!(matches!(
        decoder.decode_event(
            &frame("SURPRISE", &pod_json("a", "1")),
            Framing::LengthPrefixed
        ),
        Err(Error::Decode { .. })
    ));
}

/// A JSON line that is not JSON is reported as a JSON watch event that does not decode,
/// not as a malformed protobuf frame; an ERROR frame carrying another kind than Status
/// names what it carried.
#[test]
fn undecodable_events_are_reported_as_what_they_are() {
    let decoder = decoder();
    let error = decoder
        .decode_event(b"<html>bad gateway</html>", Framing::Lines)
        .expect_err("not json");
    let message = error.to_string();
    assert!(
        message.starts_with("cannot decode watch event"),
        "{message}"
    );
    assert!(!message.contains("protobuf"), "{message}");
    assert!(message.contains("line 1 column 1"), "{message}");
    assert!(!message.contains("gateway"), "{message}");

    let error = decoder
        .decode_event(
            &frame("ERROR", &pod_json("a", "1")),
            Framing::LengthPrefixed,
        )
        .expect_err("not a status");
    let message = error.to_string();
    assert!(message.contains("v1/Pod ns/a"), "{message}");
    assert!(message.contains("not a Status"), "{message}");
}

/// A frame's format is what the response declared, not a guess from its first byte: a
/// protobuf `WatchEvent` whose fields come in another order decodes, and an empty frame is a
/// protobuf error, not a JSON parser's.
#[test]
fn a_frame_is_read_in_the_format_its_response_declared() {
    let decoder = decoder();
    let in_order = frame("ADDED", &pod_json("a", "1"));
    let type_field = 2 + "ADDED".len();
    assert_eq!(in_order[0], 0x0a, "the type is field 1, first");
    let mut object_first = in_order[type_field..].to_vec();
    object_first.extend_from_slice(&in_order[..type_field]);
    assert!(matches!(
        decoder.decode_event(&object_first, Framing::LengthPrefixed),
        Ok(WatchEvent::Added(pod)) if pod.metadata.name.as_deref() == Some("a")
    ));

    let message = decoder
        .decode_event(&[], Framing::LengthPrefixed)
        .expect_err("an empty frame")
        .to_string();
    assert!(message.contains("protobuf"), "{message}");
    assert!(!message.contains("line 1 column"), "{message}");
}
