//! Kubernetes protobuf over real HTTP: a client that prefers it gets built-ins (objects, lists,
//! watch frames, errors) in protobuf that decode to exactly what the JSON answer says; custom
//! resources and metadata-only requests stay JSON.

use crate::common;

use common::{PATIENCE, Raw, RawWatch, raw};
use k8s_openapi::List;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Status};
use kinformer_protobuf::{CONTENT_TYPE, DecodeOptions, Envelope, WATCH_CONTENT_TYPE, WatchFrame};
use kinformer_testing::{FakeApiServer, ResourceType, ServerOptions, eventually, fixtures};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::Duration;

/// What client-go (and kinformer) send by default.
const PROTOBUF_FIRST: &str = "application/vnd.kubernetes.protobuf, application/json";

async fn get_as(server: &FakeApiServer, path: &str, accept: &str) -> Raw {
    raw(server, "GET", path, &[("Accept", accept)], b"").await
}

/// A protobuf body, checked to be one, opened and decoded into `T`.
fn decode<T: DeserializeOwned>(response: &Raw, api_version: &str, kind: &str) -> T {
    assert_eq!(
        response.header("Content-Type").as_deref(),
        Some(CONTENT_TYPE),
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    let envelope = Envelope::parse(&response.body).expect("an enveloped protobuf body");
    assert_eq!((envelope.api_version, envelope.kind), (api_version, kind));
    envelope
        .decode(DecodeOptions::default())
        .expect("a body its table decodes")
}

/// A JSON body, checked to be one, decoded into `T`.
fn from_json<T: DeserializeOwned>(response: &Raw) -> T {
    assert_eq!(
        response.header("Content-Type").as_deref(),
        Some("application/json")
    );
    serde_json::from_slice(&response.body).expect("a JSON body")
}

fn seed_pods(server: &FakeApiServer, count: usize) {
    for i in 0..count {
        let mut pod = fixtures::pod(i);
        pod["metadata"]["namespace"] = json!("ns-0");
        server.create_object(pod).expect("create a fixture pod");
    }
}

#[tokio::test]
async fn a_get_in_protobuf_decodes_to_the_json_answer() {
    let server = FakeApiServer::start().await.expect("start");
    seed_pods(&server, 1);
    server
        .create_object(fixtures::config_map(3))
        .expect("create a config map");
    let path = "/api/v1/namespaces/ns-0/pods/pod-0";
    let json: Pod = from_json(&get_as(&server, path, "application/json").await);
    let protobuf = get_as(&server, path, PROTOBUF_FIRST).await;
    assert_eq!(protobuf.status, 200);
    assert_eq!(decode::<Pod>(&protobuf, "v1", "Pod"), json);
    // The cached message answers again, byte for byte.
    assert_eq!(
        get_as(&server, path, PROTOBUF_FIRST).await.body,
        protobuf.body
    );

    let path = format!(
        "/api/v1/namespaces/{}/configmaps/config-3",
        fixtures::namespace_of(3)
    );
    let json: ConfigMap = from_json(&get_as(&server, &path, "application/json").await);
    let protobuf = get_as(&server, &path, PROTOBUF_FIRST).await;
    assert_eq!(decode::<ConfigMap>(&protobuf, "v1", "ConfigMap"), json);
}

#[tokio::test]
async fn a_paged_list_in_protobuf_decodes_to_the_json_pages() {
    let server = FakeApiServer::start().await.expect("start");
    seed_pods(&server, 5);
    let first = "/api/v1/namespaces/ns-0/pods?limit=2";
    let mut paths = (first.to_owned(), first.to_owned());
    let mut pages = 0;
    loop {
        let json: List<Pod> = from_json(&get_as(&server, &paths.0, "application/json").await);
        let protobuf: List<Pod> = decode(
            &get_as(&server, &paths.1, PROTOBUF_FIRST).await,
            "v1",
            "PodList",
        );
        assert_eq!(protobuf, json);
        pages += 1;
        match &json.metadata.continue_ {
            Some(token) => {
                assert!(json.metadata.remaining_item_count.is_some());
                let next = format!("/api/v1/namespaces/ns-0/pods?limit=2&continue={token}");
                let protobuf_token = protobuf.metadata.continue_.expect("a continue token");
                paths = (
                    next,
                    format!("/api/v1/namespaces/ns-0/pods?limit=2&continue={protobuf_token}"),
                );
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
}

#[tokio::test]
async fn a_watch_in_protobuf_frames_the_same_events_as_json() {
    let server = FakeApiServer::start_with(
        ServerOptions::default().bookmark_interval(Duration::from_secs(3600)),
    )
    .await
    .expect("start");
    seed_pods(&server, 1);
    let path = "/api/v1/namespaces/ns-0/pods?watch=true&sendInitialEvents=true\
                &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5";
    let (mut json_watch, _) = RawWatch::open_with(&server, path, &[]).await;
    let (mut protobuf_watch, headers) =
        RawWatch::open_with(&server, path, &[("Accept", PROTOBUF_FIRST)]).await;
    assert_eq!(protobuf_watch.status, 200);
    assert!(
        headers.contains(&format!("content-type: {WATCH_CONTENT_TYPE}")),
        "{headers}"
    );

    let mut second = fixtures::pod(1);
    second["metadata"]["namespace"] = json!("ns-0");
    server.create_object(second).expect("create");
    let mut changed = server
        .object("v1", "Pod", Some("ns-0"), "pod-0")
        .expect("pod-0");
    changed["metadata"]["labels"]["changed"] = json!("yes");
    server.update_object(changed).expect("update");
    server
        .delete_object("v1", "Pod", Some("ns-0"), "pod-1")
        .expect("delete");

    let expected = ["ADDED", "BOOKMARK", "ADDED", "MODIFIED", "DELETED"];
    for event_type in expected {
        let line = json_watch.next().await.expect("a JSON event");
        let frame = protobuf_watch.next_frame().await.expect("a protobuf frame");
        let frame = WatchFrame::parse(&frame).expect("a WatchEvent");
        assert_eq!(line["type"], event_type);
        assert_eq!(frame.event_type, event_type);
        let envelope = Envelope::parse(frame.object).expect("an enveloped object");
        assert_eq!((envelope.api_version, envelope.kind), ("v1", "Pod"));
        let pod: Pod = envelope
            .decode(DecodeOptions::default())
            .expect("a decodable Pod");
        let json: Pod = serde_json::from_value(line["object"].clone()).expect("a JSON Pod");
        assert_eq!(pod, json, "{event_type}");
        if event_type == "BOOKMARK" {
            // The resourceVersion and the end-of-initial-events annotation; spec and status
            // are the empty structs Go's encoders write for a Pod that holds nothing else.
            assert_eq!(pod.spec.unwrap_or_default().containers, []);
            assert_eq!(pod.status, Some(Default::default()));
            assert!(pod.metadata.resource_version.is_some());
            assert_eq!(
                pod.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("k8s.io/initial-events-end"))
                    .map(String::as_str),
                Some("true")
            );
        }
    }
}

#[tokio::test]
async fn errors_in_protobuf_are_status_envelopes_equal_to_the_json_status() {
    let server = FakeApiServer::start_with(ServerOptions::default().history(2))
        .await
        .expect("start");
    seed_pods(&server, 4);

    // 404 on a missing object.
    let path = "/api/v1/namespaces/ns-0/pods/absent";
    let json = get_as(&server, path, "application/json").await;
    let protobuf = get_as(&server, path, PROTOBUF_FIRST).await;
    assert_eq!((json.status, protobuf.status), (404, 404));
    let status: Status = decode(&protobuf, "v1", "Status");
    assert_eq!(status, from_json::<Status>(&json));
    assert_eq!(status.reason.as_deref(), Some("NotFound"));

    // 410 on a list at a compacted revision.
    let path = "/api/v1/pods?resourceVersion=2&resourceVersionMatch=Exact";
    let json = get_as(&server, path, "application/json").await;
    let protobuf = get_as(&server, path, PROTOBUF_FIRST).await;
    assert_eq!((json.status, protobuf.status), (410, 410));
    let status: Status = decode(&protobuf, "v1", "Status");
    assert_eq!(status, from_json::<Status>(&json));
    assert_eq!(status.reason.as_deref(), Some("Expired"));

    // 410 as the ERROR event of a watch from a compacted revision.
    let path = "/api/v1/pods?watch=true&resourceVersion=2";
    let (mut json_watch, _) = RawWatch::open_with(&server, path, &[]).await;
    let (mut protobuf_watch, _) =
        RawWatch::open_with(&server, path, &[("Accept", PROTOBUF_FIRST)]).await;
    let line = json_watch.next().await.expect("an ERROR event");
    let frame = protobuf_watch.next_frame().await.expect("an ERROR frame");
    let frame = WatchFrame::parse(&frame).expect("a WatchEvent");
    assert_eq!(
        (line["type"].as_str(), frame.event_type),
        (Some("ERROR"), "ERROR")
    );
    let envelope = Envelope::parse(frame.object).expect("an enveloped Status");
    assert_eq!((envelope.api_version, envelope.kind), ("v1", "Status"));
    let status: Status = envelope.decode(DecodeOptions::default()).expect("a Status");
    assert_eq!(
        status,
        serde_json::from_value(line["object"].clone()).expect("a Status")
    );
    assert_eq!(status.code, Some(410));

    // A path nothing serves: a Status in protobuf as well.
    let unknown = get_as(&server, "/api/v1/widgets", PROTOBUF_FIRST).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(decode::<Status>(&unknown, "v1", "Status").code, Some(404));
}

#[tokio::test]
async fn writes_answer_in_protobuf_too() {
    let server = FakeApiServer::start().await.expect("start");
    let headers = [
        ("Accept", PROTOBUF_FIRST),
        ("Content-Type", "application/json"),
    ];
    let body = serde_json::to_vec(&fixtures::pod(0)).expect("JSON");
    let created = raw(
        &server,
        "POST",
        "/api/v1/namespaces/ns-0/pods",
        &headers,
        &body,
    )
    .await;
    assert_eq!(created.status, 201);
    let pod: Pod = decode(&created, "v1", "Pod");
    assert!(pod.metadata.uid.is_some());

    let patch = br#"{"metadata":{"labels":{"patched":"yes"}}}"#;
    let patch_headers = [
        ("Accept", PROTOBUF_FIRST),
        ("Content-Type", "application/merge-patch+json"),
    ];
    let patched = raw(
        &server,
        "PATCH",
        "/api/v1/namespaces/ns-0/pods/pod-0",
        &patch_headers,
        patch,
    )
    .await;
    let pod: Pod = decode(&patched, "v1", "Pod");
    assert_eq!(
        pod.metadata.labels.and_then(|l| l.get("patched").cloned()),
        Some("yes".to_owned())
    );

    let deleted = raw(
        &server,
        "DELETE",
        "/api/v1/namespaces/ns-0/pods/pod-0",
        &headers,
        b"",
    )
    .await;
    assert_eq!(
        decode::<Pod>(&deleted, "v1", "Pod")
            .metadata
            .name
            .as_deref(),
        Some("pod-0")
    );

    server
        .create_object(fixtures::config_map(0))
        .expect("create a config map");
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/config-0",
        fixtures::namespace_of(0)
    );
    let deleted = raw(&server, "DELETE", &path, &headers, b"").await;
    let status: Status = decode(&deleted, "v1", "Status");
    assert_eq!(status.status.as_deref(), Some("Success"));
}

/// Serves the custom resource `example.com/v1` `Widget` and creates one, `w` (label
/// `size=3`), in `namespace`.
fn serve_widget(server: &FakeApiServer, namespace: &str) {
    server.register(ResourceType::custom(
        "example.com",
        "v1",
        "Widget",
        "widgets",
        true,
    ));
    server
        .create_object(json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": { "name": "w", "namespace": namespace, "labels": { "size": "3" } },
            "spec": { "size": 3 },
        }))
        .expect("create a widget");
}

#[tokio::test]
async fn custom_resources_asked_for_protobuf_answer_json() {
    let server = FakeApiServer::start().await.expect("start");
    serve_widget(&server, "default");
    for path in [
        "/apis/example.com/v1/namespaces/default/widgets/w",
        "/apis/example.com/v1/namespaces/default/widgets",
        "/apis/example.com/v1/namespaces/default/widgets/absent",
    ] {
        let response = get_as(&server, path, PROTOBUF_FIRST).await;
        let body: Value = from_json(&response);
        assert!(body["kind"].is_string(), "{path}: {body}");
    }
    let path = "/apis/example.com/v1/namespaces/default/widgets?watch=true&timeoutSeconds=1";
    let (mut watch, headers) =
        RawWatch::open_with(&server, path, &[("Accept", PROTOBUF_FIRST)]).await;
    assert!(
        headers.contains("content-type: application/json"),
        "{headers}"
    );
    let event = watch.next().await.expect("a JSON event");
    assert_eq!(event["object"]["spec"]["size"], 3);
}

/// What client-go's metadata client sends for a list and for a watch.
const METADATA_LIST_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, \
     application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";
const METADATA_LIST_JSON: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, \
     application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";
const METADATA_JSON: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// The metadata of an object as both formats give it; protobuf carries no `apiVersion` and
/// `kind` per item, so they are compared through the envelope and the list's JSON instead.
fn metadata_of(json: &Value) -> ObjectMeta {
    serde_json::from_value(json["metadata"].clone()).expect("JSON metadata")
}

#[derive(serde::Deserialize)]
struct MetadataOnly {
    metadata: ObjectMeta,
}

#[tokio::test]
async fn metadata_only_answers_come_in_protobuf_for_built_ins_and_custom_resources() {
    let server = FakeApiServer::start().await.expect("start");
    seed_pods(&server, 2);
    serve_widget(&server, "ns-0");

    for (path, count) in [
        ("/api/v1/namespaces/ns-0/pods", 2),
        ("/apis/example.com/v1/namespaces/ns-0/widgets", 1),
    ] {
        let json: Value = from_json(&get_as(&server, path, METADATA_LIST_JSON).await);
        assert_eq!(json["kind"], "PartialObjectMetadataList");
        let protobuf = get_as(&server, path, METADATA_LIST_PROTOBUF).await;
        let list: MetadataList = decode(&protobuf, "meta.k8s.io/v1", "PartialObjectMetadataList");
        assert_eq!(list.items.len(), count, "{path}");
        for (item, json_item) in list
            .items
            .iter()
            .zip(json["items"].as_array().into_iter().flatten())
        {
            assert_eq!(item.metadata, metadata_of(json_item), "{path}");
            assert!(item.metadata.managed_fields.is_some() || path.contains("widgets"));
        }
        assert_eq!(
            list.metadata.resource_version.as_deref(),
            json["metadata"]["resourceVersion"].as_str()
        );
    }

    let path = "/apis/example.com/v1/namespaces/ns-0/widgets/w";
    let json: Value = from_json(&get_as(&server, path, METADATA_JSON).await);
    let one: MetadataOnly = decode(
        &get_as(&server, path, METADATA_PROTOBUF).await,
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
    );
    assert_eq!(one.metadata, metadata_of(&json));
    assert_eq!(
        one.metadata
            .labels
            .and_then(|l| l.get("size").cloned())
            .as_deref(),
        Some("3")
    );

    // A watch frames each event's object as a PartialObjectMetadata.
    let watch = "/api/v1/namespaces/ns-0/pods?watch=true&resourceVersion=0&timeoutSeconds=5";
    let (mut frames, headers) =
        RawWatch::open_with(&server, watch, &[("Accept", METADATA_PROTOBUF)]).await;
    assert!(
        headers.contains(&format!("content-type: {WATCH_CONTENT_TYPE}")),
        "{headers}"
    );
    let frame = frames.next_frame().await.expect("a protobuf frame");
    let frame = WatchFrame::parse(&frame).expect("a WatchEvent");
    assert_eq!(frame.event_type, "ADDED");
    let envelope = Envelope::parse(frame.object).expect("an enveloped object");
    assert_eq!(
        (envelope.api_version, envelope.kind),
        ("meta.k8s.io/v1", "PartialObjectMetadata")
    );
    let object: MetadataOnly = envelope
        .decode(DecodeOptions::default())
        .expect("a decodable PartialObjectMetadata");
    assert!(
        object
            .metadata
            .name
            .is_some_and(|name| name.starts_with("pod-"))
    );
}

#[derive(serde::Deserialize)]
struct MetadataList {
    metadata: ListMeta,
    items: Vec<MetadataOnly>,
}

#[tokio::test]
async fn content_types_count_protobuf_responses_under_their_own_type() {
    let server = FakeApiServer::start().await.expect("start");
    seed_pods(&server, 2);
    assert_eq!(
        get_as(&server, "/api/v1/pods", PROTOBUF_FIRST).await.status,
        200
    );
    assert_eq!(
        get_as(
            &server,
            "/api/v1/namespaces/ns-0/pods/absent",
            PROTOBUF_FIRST
        )
        .await
        .status,
        404
    );
    assert_eq!(
        get_as(&server, "/api/v1/pods", "application/json")
            .await
            .status,
        200
    );
    let path = "/api/v1/pods?watch=true&timeoutSeconds=1";
    let (mut watch, _) = RawWatch::open_with(&server, path, &[("Accept", PROTOBUF_FIRST)]).await;
    while watch.next_frame().await.is_some() {}
    let counts = serde_json::to_value(server.content_types()).expect("counts");
    assert_eq!(
        counts,
        json!({ CONTENT_TYPE: 2, WATCH_CONTENT_TYPE: 1, "application/json": 1 })
    );
}

#[cfg(feature = "bench")]
#[tokio::test]
async fn bench_updates_reach_protobuf_watchers_restamped() {
    let server = FakeApiServer::start_with(ServerOptions::default().admin_endpoints(true))
        .await
        .expect("start");
    seed_pods(&server, 3);
    // A protobuf list first, so the updates restamp cached messages.
    assert_eq!(
        get_as(&server, "/api/v1/pods", PROTOBUF_FIRST).await.status,
        200
    );
    let rv = server.resource_version();
    let path = format!("/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=5");
    let (mut json_watch, _) = RawWatch::open_with(&server, &path, &[]).await;
    let (mut protobuf_watch, _) =
        RawWatch::open_with(&server, &path, &[("Accept", PROTOBUF_FIRST)]).await;
    let update = raw(
        &server,
        "POST",
        "/admin/bench/update?resource=pods&count=4",
        &[],
        b"",
    )
    .await;
    assert_eq!(update.status, 200);
    // Four updates (one object twice), then the sentinel.
    for event_type in ["MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "ADDED"] {
        let line = json_watch.next().await.expect("a JSON event");
        let frame = protobuf_watch.next_frame().await.expect("a protobuf frame");
        let frame = WatchFrame::parse(&frame).expect("a WatchEvent");
        assert_eq!(
            (line["type"].as_str(), frame.event_type),
            (Some(event_type), event_type)
        );
        let pod: Pod = Envelope::parse(frame.object)
            .and_then(|envelope| envelope.decode(DecodeOptions::default()))
            .expect("a Pod");
        let json: Pod = serde_json::from_value(line["object"].clone()).expect("a JSON Pod");
        assert_eq!(pod, json);
    }
}

#[tokio::test]
async fn an_injected_event_reaches_a_protobuf_watch_as_a_frame() {
    let server = FakeApiServer::start().await.expect("start");
    let path = "/api/v1/pods?watch=true&timeoutSeconds=5";
    let (mut watch, _) = RawWatch::open_with(&server, path, &[("Accept", PROTOBUF_FIRST)]).await;
    // Let the watch register before the faults are broadcast.
    eventually("the watch registers", PATIENCE, || {
        server.open_watches() > 0
    })
    .await;
    server.faults().inject_watch_line(
        r#"{"type":"SURPRISE","object":{"kind":"Status","apiVersion":"v1","metadata":{}}}"#,
    );
    server.faults().inject_watch_line("{not json");
    let frame = watch.next_frame().await.expect("the unknown event");
    let frame = WatchFrame::parse(&frame).expect("a WatchEvent");
    assert_eq!(frame.event_type, "SURPRISE");
    let garbage = watch.next_frame().await.expect("the garbage, framed");
    assert_eq!(garbage, b"{not json");
}

#[tokio::test]
async fn warming_encodes_every_built_in_object_ahead_of_the_first_request() {
    let server = FakeApiServer::start().await.expect("start");
    seed_pods(&server, 3);
    server
        .create_object(fixtures::config_map(0))
        .expect("create a config map");
    server.register(ResourceType::custom(
        "example.com",
        "v1",
        "Widget",
        "widgets",
        false,
    ));
    server
        .create_object(json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "w" } }))
        .expect("create a widget");
    // Three Pods and one ConfigMap; no Widget.
    assert_eq!(server.warm_protobuf(), 4);
    let list: List<Pod> = decode(
        &get_as(&server, "/api/v1/pods", PROTOBUF_FIRST).await,
        "v1",
        "PodList",
    );
    assert_eq!(list.items.len(), 3);
}
