//! JSON against protobuf on the same server: every built-in kind below is listed and watched in
//! both formats, decoded into the same k8s-openapi types, and the two must be equal. Protobuf
//! lists decode both through the decoders generated per type and through serde.
//!
//! Against a real kube-apiserver (`cargo xtask e2e --local | --kind | --kubeconfig PATH`) this
//! holds kinformer_protobuf to Go's own encoder on objects the server defaulted and stamped
//! (managedFields, timestamps, IntOrString ports, quantities); against the fake (plain
//! `cargo test`) it holds the fake's encoder to the same standard.

use crate::e2e_support;

use std::{collections::BTreeMap, fmt::Debug, time::Duration};

use e2e_support::{Ctx, run};
use http_body_util::BodyExt as _;
use k8s_openapi::{
    ByteString,
    api::{
        apps::v1::Deployment,
        batch::v1::CronJob,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount},
        rbac::v1::Role,
    },
    apimachinery::pkg::apis::meta::v1::ListMeta,
};
use kinformer::protobuf::{
    CONTENT_TYPE, DecodeOptions, Decoder, Envelope, FrameReader, MAGIC, WatchFrame, from_message,
    list_items,
};
use kube_client::{Api, Client, api::PostParams, client::Body};
use serde::de::DeserializeOwned;
use serde_json::json;

/// A list in JSON: what k8s-openapi has no type for.
#[derive(Debug, serde::Deserialize)]
struct JsonList<K> {
    metadata: ListMeta,
    items: Vec<K>,
}

async fn get(client: &Client, path: &str, accept: &str) -> (String, Vec<u8>) {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(Body::from(Vec::new()))
        .expect("a request");
    let response = client.send(request).await.expect("the server answers");
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes()
        .to_vec();
    (content_type, body)
}

/// Lists `path` in JSON and in protobuf, asserts the server really answered protobuf, and that
/// both decode to the same objects; returns the list's resourceVersion. The protobuf list reads
/// the JSON list's snapshot (`resourceVersionMatch=Exact`), so a write in between (a kubelet
/// updating a Pod's status on kind) cannot make the two differ.
async fn same_list<K>(client: &Client, path: &str, expected_items: usize) -> String
where
    K: DeserializeOwned + PartialEq + Debug + 'static,
{
    let (json_type, json) = get(client, path, "application/json").await;
    assert!(
        json_type.starts_with("application/json"),
        "{path}: {json_type}"
    );
    let from_json: JsonList<K> = serde_json::from_slice(&json).expect("a JSON list");
    let snapshot = from_json
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let separator = if path.contains('?') { '&' } else { '?' };
    let (protobuf_type, protobuf) = get(
        client,
        &format!("{path}{separator}resourceVersion={snapshot}&resourceVersionMatch=Exact"),
        "application/vnd.kubernetes.protobuf, application/json",
    )
    .await;
    assert_eq!(protobuf_type, CONTENT_TYPE, "{path} is served in protobuf");
    assert!(protobuf.starts_with(MAGIC));
    let envelope = Envelope::parse(&protobuf).expect("an envelope");
    let message = envelope.message().expect("a known list kind");
    let items = list_items(envelope.raw, message).expect("list items");
    let from_protobuf: Vec<K> = items
        .bytes
        .iter()
        .map(|item| {
            from_message(item, items.message, DecodeOptions::default())
                .unwrap_or_else(|error| panic!("{path}: {error}"))
        })
        .collect();
    let generated = Decoder::<K>::new();
    assert!(generated.is_generated(), "{path}: a generated decoder");
    let from_generated: Vec<K> = items
        .bytes
        .iter()
        .map(|item| {
            generated
                .decode(item, items.message, DecodeOptions::default())
                .unwrap_or_else(|error| panic!("{path}, generated: {error}"))
        })
        .collect();
    assert_eq!(from_json.items.len(), expected_items, "{path}");
    assert_eq!(from_protobuf, from_json.items, "{path}: protobuf vs JSON");
    assert_eq!(from_generated, from_json.items, "{path}: generated vs JSON");
    from_json.metadata.resource_version.unwrap_or_default()
}

async fn create<K>(ctx: &Ctx, object: serde_json::Value) -> K
where
    K: kube_core::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client(), &ctx.namespace);
    let object: K = serde_json::from_value(object).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_kinds_list_the_same_in_protobuf_as_in_json() {
    run("protobuf-lists", |ctx| async move {
        let client = ctx.client();
        let ns = ctx.namespace.clone();
        // The service account admission needs `default` before a Pod can be created; a control
        // plane without kube-controller-manager does not make it.
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        let account = ServiceAccount {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("default".into()),
                ..Default::default()
            },
            ..ServiceAccount::default()
        };
        let _ = accounts.create(&PostParams::default(), &account).await;

        let _: ConfigMap = create(&ctx, json!({
            "metadata": { "name": "settings", "labels": { "app": "web" },
                          "annotations": { "note": "ünïcödé \"quoted\" \\ \n 😀" } },
            "data": { "mode": "fast", "empty": "" },
            "binaryData": { "blob": ByteString(vec![0, 1, 2, 255]) },
        }))
        .await;
        let _: Secret = create(&ctx, json!({
            "metadata": { "name": "token" }, "type": "Opaque",
            "data": { "password": ByteString(b"hunter2".to_vec()) },
        }))
        .await;
        let _: Service = create(&ctx, json!({
            "metadata": { "name": "web" },
            "spec": { "selector": { "app": "web" }, "ports": [
                { "name": "http", "port": 80, "targetPort": "http" },
                { "name": "metrics", "port": 9090, "targetPort": 9090 },
            ] },
        }))
        .await;
        let _: Pod = create(&ctx, json!({
            "metadata": { "name": "web-0", "labels": { "app": "web" } },
            "spec": {
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 0,
                "priority": 0,
                "containers": [{
                    // Never: a kind node then leaves the Pod waiting instead of pulling.
                    "name": "web", "image": "nginx:1.27", "imagePullPolicy": "Never",
                    "ports": [{ "name": "http", "containerPort": 8080 }],
                    "resources": { "limits": { "cpu": "500m", "memory": "1Gi" },
                                   // In the canonical form kube-apiserver writes back.
                                   "requests": { "cpu": "100m", "memory": "128974848" } },
                    "readinessProbe": { "httpGet": { "path": "/", "port": "http" } },
                    "livenessProbe": { "tcpSocket": { "port": 8080 }, "periodSeconds": 7 },
                    "env": [{ "name": "NODE", "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } }],
                }],
                "volumes": [
                    { "name": "config", "configMap": { "name": "settings", "defaultMode": 420 } },
                    { "name": "scratch", "emptyDir": { "sizeLimit": "1Gi" } },
                ],
                "tolerations": [{ "key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30 }],
            },
        }))
        .await;
        let _: Deployment = create(&ctx, json!({
            "metadata": { "name": "web" },
            "spec": {
                "replicas": 0,
                "selector": { "matchLabels": { "app": "web" } },
                "strategy": { "rollingUpdate": { "maxSurge": "25%", "maxUnavailable": 0 } },
                "template": { "metadata": { "labels": { "app": "web" } },
                              "spec": { "containers": [{ "name": "web", "image": "nginx:1.27",
                                                        "imagePullPolicy": "Never" }] } },
            },
        }))
        .await;
        let _: CronJob = create(&ctx, json!({
            "metadata": { "name": "nightly" },
            "spec": { "schedule": "0 3 * * *", "jobTemplate": { "spec": { "template": {
                "spec": { "restartPolicy": "Never",
                          "containers": [{ "name": "job", "image": "busybox",
                                          "imagePullPolicy": "Never" }] } } } } },
        }))
        .await;
        let _: Lease = create(&ctx, json!({
            "metadata": { "name": "leader" },
            "spec": { "holderIdentity": "me", "leaseDurationSeconds": 15,
                      "renewTime": "2026-11-23T04:05:06.123456Z", "acquireTime": "2026-11-23T04:00:00.000001Z" },
        }))
        .await;
        let _: Role = create(&ctx, json!({
            "metadata": { "name": "reader" },
            "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"] }],
        }))
        .await;

        same_list::<ConfigMap>(&client, &format!("/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dweb"), 1).await;
        same_list::<Secret>(&client, &format!("/api/v1/namespaces/{ns}/secrets?fieldSelector=metadata.name%3Dtoken"), 1).await;
        same_list::<Service>(&client, &format!("/api/v1/namespaces/{ns}/services"), 1).await;
        same_list::<Pod>(&client, &format!("/api/v1/namespaces/{ns}/pods"), 1).await;
        same_list::<Deployment>(&client, &format!("/apis/apps/v1/namespaces/{ns}/deployments"), 1).await;
        same_list::<CronJob>(&client, &format!("/apis/batch/v1/namespaces/{ns}/cronjobs"), 1).await;
        same_list::<Lease>(&client, &format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"), 1).await;
        same_list::<Role>(&client, &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"), 1).await;
    })
    .await;
}

/// Reads protobuf watch frames until `count` events have arrived.
async fn watch_frames(
    client: &Client,
    path: &str,
    count: usize,
    wait: Duration,
) -> Vec<(String, ConfigMap)> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, CONTENT_TYPE)
        .body(Body::from(Vec::new()))
        .expect("a request");
    let response = client.send(request).await.expect("the watch opens");
    assert_eq!(
        response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok()),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    let mut body = response.into_body();
    let mut frames = FrameReader::default();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    while events.len() < count {
        let chunk = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("the events arrive in time")
            .expect("the stream stays open")
            .expect("a readable chunk");
        let Ok(data) = chunk.into_data() else {
            continue;
        };
        frames.push(&data);
        while let Some(frame) = frames.next_frame().expect("well-formed frames") {
            let event = WatchFrame::parse(&frame).expect("a WatchEvent");
            let object: ConfigMap = Envelope::parse(event.object)
                .and_then(|envelope| envelope.decode(DecodeOptions::default()))
                .expect("a ConfigMap");
            events.push((event.event_type.to_owned(), object));
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_watch_carries_what_a_json_get_returns() {
    run("protobuf-watch", |ctx| async move {
        let client = ctx.client();
        let ns = ctx.namespace.clone();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let list = format!("/api/v1/namespaces/{ns}/configmaps");
        let rv = same_list::<ConfigMap>(&client, &list, ctx.published_config_maps.len()).await;
        let watch = format!("{list}?watch=true&resourceVersion={rv}");
        let reader = tokio::spawn({
            let client = client.clone();
            async move { watch_frames(&client, &watch, 3, Duration::from_secs(30)).await }
        });
        let created: ConfigMap = create(
            &ctx,
            json!({
                "metadata": { "name": "watched" }, "data": { "step": "1" },
            }),
        )
        .await;
        let mut changed = created.clone();
        changed.data = Some(BTreeMap::from([("step".to_owned(), "2".to_owned())]));
        let updated = api
            .replace("watched", &PostParams::default(), &changed)
            .await
            .expect("updated");
        let deleted = api
            .delete("watched", &Default::default())
            .await
            .expect("deleted");
        let events = reader.await.expect("the reader did not panic");
        let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
        assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
        assert_eq!(events[0].1, created);
        assert_eq!(events[1].1, updated);
        if let Some(deleted) = deleted.left() {
            // The DELETED event carries the object as of its deletion.
            assert_eq!(events[2].1.metadata.uid, deleted.metadata.uid);
            assert_eq!(events[2].1.data, deleted.data);
        }
    })
    .await;
}

/// A metadata-only list as kinformer's metadata lister-watcher asks for it: the server must answer
/// `PartialObjectMetadataList` in protobuf (client-go's metadata client asks the same way),
/// and the objects must equal those of the JSON answer, their type included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_lists_decode_the_same_in_protobuf_as_in_json() {
    use kinformer::reflector::{KubeListerWatcher, ListOptions, ListerWatcher as _, WireFormat};
    use kube_core::PartialObjectMeta;

    /// What client-go's metadata client sends for a list, and what kinformer sends for one.
    const METADATA_LIST_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
         application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

    run("protobuf-metadata", |ctx| async move {
        let client = ctx.client();
        for name in ["meta-a", "meta-b"] {
            let _: ConfigMap = create(
                &ctx,
                json!({
                    "metadata": { "name": name, "labels": { "role": "meta" } },
                    "data": { "big": "x".repeat(512) },
                }),
            )
            .await;
        }
        let path = format!(
            "/api/v1/namespaces/{}/configmaps?labelSelector=role%3Dmeta",
            ctx.namespace
        );
        let (content_type, _) = get(&client, &path, METADATA_LIST_ACCEPT).await;
        assert_eq!(content_type, CONTENT_TYPE, "the server answers in protobuf");
        let mut pages = Vec::new();
        for format in [WireFormat::Protobuf, WireFormat::Json] {
            let api = Api::<ConfigMap>::namespaced(client.clone(), &ctx.namespace);
            let lister_watcher = KubeListerWatcher::<PartialObjectMeta<ConfigMap>>::metadata(api)
                .labels("role=meta")
                .wire_format(format);
            let mut page = Vec::new();
            lister_watcher
                .list(ListOptions::default(), &mut page)
                .await
                .unwrap_or_else(|error| panic!("{format:?}: {error}"));
            let mut items: Vec<_> = page
                .iter()
                .map(|item| {
                    let item = item.object();
                    (item.types.clone(), item.metadata.clone())
                })
                .collect();
            items.sort_by(|a, b| a.1.name.cmp(&b.1.name));
            pages.push(items);
        }
        assert_eq!(pages[0].len(), 2);
        assert_eq!(pages[0], pages[1], "protobuf vs JSON");
        let (types, metadata) = &pages[0][0];
        assert_eq!(
            types
                .as_ref()
                .map(|t| (t.api_version.as_str(), t.kind.as_str())),
            Some(("meta.k8s.io/v1", "PartialObjectMetadata"))
        );
        assert_eq!(metadata.name.as_deref(), Some("meta-a"));
    })
    .await;
}
