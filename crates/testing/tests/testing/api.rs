//! The REST surface through kube's own `Api<K>`: discovery, CRUD, CRDs, subresources, and the
//! errors and object shapes apiserver would send. Lists have their own file, `lists.rs`.

use crate::common;

use common::{RawWatch, api_status, config_map, get, pod, raw};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kinformer_testing::FakeApiServer;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{Discovery, verbs};
use serde_json::json;

#[tokio::test]
async fn discovery_serves_core_and_apps_resources_with_list_and_watch_verbs() {
    let server = FakeApiServer::start().await.expect("start");
    let client = server.client().expect("client");
    for discovery in [
        Discovery::new(client.clone())
            .run()
            .await
            .expect("legacy discovery"),
        Discovery::new(client.clone())
            .run_aggregated()
            .await
            .expect("aggregated discovery"),
    ] {
        for (group, version, kind, namespaced) in [
            ("", "v1", "Pod", true),
            ("", "v1", "Namespace", false),
            ("", "v1", "Node", false),
            ("apps", "v1", "Deployment", true),
            ("apps", "v1", "DaemonSet", true),
        ] {
            let (resource, caps) = discovery
                .resolve_gvk(&GroupVersionKind::gvk(group, version, kind))
                .unwrap_or_else(|| panic!("{kind} is discoverable"));
            assert_eq!(resource.kind, kind);
            assert_eq!(
                caps.scope == kube::discovery::Scope::Namespaced,
                namespaced,
                "{kind}"
            );
            assert!(caps.supports_operation(verbs::WATCH) && caps.supports_operation(verbs::LIST));
        }
    }
    let resources = get(&server, "/api/v1").await.json();
    let pods = resources["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "pods"))
        .expect("pods listed")
        .clone();
    assert_eq!(pods["singularName"], "pod");
    assert_eq!(pods["shortNames"], json!(["po"]));
}

#[tokio::test]
async fn create_get_replace_patch_delete_round_trip_with_resource_versions() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    let created = api
        .create(&PostParams::default(), &config_map("settings", "a"))
        .await
        .expect("create");
    let rv1: u64 = created
        .metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .expect("rv");
    assert_eq!(rv1, server.resource_version());
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(
        created.metadata.generation, None,
        "ConfigMaps have no generation"
    );

    let mut changed = api.get("settings").await.expect("get");
    changed.data = Some([("value".to_owned(), "b".to_owned())].into());
    let replaced = api
        .replace("settings", &PostParams::default(), &changed)
        .await
        .expect("replace");
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .expect("rv");
    assert!(rv2 > rv1);
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    let stale = api
        .replace("settings", &PostParams::default(), &changed)
        .await
        .expect_err("stale rv");
    let status = api_status(stale);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Operation cannot be fulfilled on configmaps \"settings\": the object has been modified; \
         please apply your changes to the latest version and try again"
    );

    let patched = api
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "metadata": { "labels": { "x": "y" } }, "data": { "extra": "1" } }),
            ),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.data.as_ref().map(|d| d.len()), Some(2));
    assert_eq!(
        patched
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("x"))
            .map(String::as_str),
        Some("y")
    );

    let unchanged = api
        .replace("settings", &PostParams::default(), &patched)
        .await
        .expect("no-op replace");
    assert_eq!(
        unchanged.metadata.resource_version, patched.metadata.resource_version,
        "a no-op write makes no revision"
    );

    api.delete("settings", &DeleteParams::default())
        .await
        .expect("delete");
    let status = api_status(api.get("settings").await.expect_err("gone"));
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(status.message, "configmaps \"settings\" not found");
}

#[tokio::test]
async fn failures_carry_status_objects_shaped_as_kube_apiserver_writes_them() {
    let server = FakeApiServer::start().await.expect("start");
    let client = server.client().expect("client");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let missing = get(&server, "/apis/apps/v1/namespaces/default/deployments/web").await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "deployments.apps \"web\" not found", "reason": "NotFound",
            "details": { "name": "web", "group": "apps", "kind": "deployments" }, "code": 404,
        })
    );
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("p", &json!({})))
        .await
        .expect("create");
    let status = api_status(
        pods.create(&PostParams::default(), &pod("p", &json!({})))
            .await
            .expect_err("duplicate"),
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(status.message, "pods \"p\" already exists");
    let status = api_status(
        pods.create(&PostParams::default(), &pod("Not_Valid", &json!({})))
            .await
            .expect_err("bad name"),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.starts_with(
            "Pod \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\""
        )
    );
    assert!(deployments.get_opt("web").await.expect("get_opt").is_none());
}

#[tokio::test]
async fn bad_requests_get_the_status_apiserver_sends_never_a_hang() {
    let server = FakeApiServer::start().await.expect("start");
    /// Method, path, content type, body, expected code and reason.
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        &'static [u8],
        u16,
        &'static str,
    );
    let cases: [Case; 9] = [
        (
            "GET",
            "/api/v1/widgets",
            "application/json",
            b"",
            404,
            "NotFound",
        ),
        (
            "GET",
            "/apis/nope.example.com/v1",
            "application/json",
            b"",
            404,
            "NotFound",
        ),
        (
            "GET",
            "/api/v1/pods?labelSelector=app%20in%20web",
            "application/json",
            b"",
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/pods?fieldSelector=spec.bogus%3Dx",
            "application/json",
            b"",
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/pods?resourceVersion=abc",
            "application/json",
            b"",
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/pods?resourceVersionMatch=Exact",
            "application/json",
            b"",
            422,
            "Invalid",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            b"{not json",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "application/apply-patch+yaml",
            b"{}",
            404,
            "NotFound",
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/pods",
            "application/json",
            b"{}",
            405,
            "MethodNotAllowed",
        ),
    ];
    for (method, path, content_type, body, code, reason) in cases {
        let response = raw(
            &server,
            method,
            path,
            &[("Content-Type", content_type)],
            body,
        )
        .await;
        assert_eq!(response.status, code, "{method} {path}");
        let status = response.json();
        assert_eq!(status["kind"], "Status", "{method} {path}");
        assert_eq!(status["reason"], reason, "{method} {path}");
        assert_eq!(status["code"], code, "{method} {path}");
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("x", "1"))
        .await
        .expect("create");
    let apply = raw(
        &server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        &[("Content-Type", "application/apply-patch+yaml")],
        b"{}",
    )
    .await;
    assert_eq!(
        (apply.status, apply.json()["reason"].clone()),
        (415, json!("UnsupportedMediaType"))
    );
}

#[tokio::test]
async fn a_crd_created_through_the_api_is_served_to_dynamic_clients() {
    let server = FakeApiServer::start().await.expect("start");
    let client = server.client().expect("client");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let crd = serde_json::from_value(json!({
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "scope": "Namespaced",
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } },
                "subresources": { "status": {} } }],
        },
    }))
    .expect("a CRD");
    let created = crds
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let established = created
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(
        established
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let (resource, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
        .expect("the CRD is discoverable");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let widget = DynamicObject::new("w1", &resource).data(json!({ "spec": { "size": 3 } }));
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .expect("create widget");
    let listed = widgets
        .list(&ListParams::default())
        .await
        .expect("list widgets");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["size"], 3);
    let raw_list = get(&server, "/apis/example.com/v1/namespaces/default/widgets")
        .await
        .json();
    assert_eq!(raw_list["kind"], "WidgetList");
    assert_eq!(
        (
            &raw_list["items"][0]["apiVersion"],
            &raw_list["items"][0]["kind"]
        ),
        (&json!("example.com/v1"), &json!("Widget")),
        "unstructured list items keep their type, as apiextensions-apiserver's do"
    );
    assert_eq!(
        listed.items[0].metadata.generation,
        Some(1),
        "custom resources count generations"
    );

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    assert_eq!(
        get(&server, "/apis/example.com/v1/namespaces/default/widgets")
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn cluster_scoped_objects_and_finalizers_behave_as_on_a_cluster() {
    let server = FakeApiServer::start().await.expect("start");
    let namespaces: Api<Namespace> = Api::all(server.client().expect("client"));
    let ns = serde_json::from_value(
        json!({ "metadata": { "name": "team-a", "finalizers": ["example.com/hold"] } }),
    )
    .expect("a namespace");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create");
    namespaces
        .delete("team-a", &DeleteParams::default())
        .await
        .expect("delete");
    let held = namespaces
        .get("team-a")
        .await
        .expect("still there while a finalizer remains");
    assert!(held.metadata.deletion_timestamp.is_some());
    namespaces
        .patch(
            "team-a",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
        .expect("drop the finalizer");
    assert!(
        namespaces
            .get_opt("team-a")
            .await
            .expect("get_opt")
            .is_none()
    );
}

#[tokio::test]
async fn the_status_subresource_and_the_main_resource_change_separate_parts() {
    let server = FakeApiServer::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(server.client().expect("client"), "default");
    let created = pods
        .create(&PostParams::default(), &pod("p", &json!({})))
        .await
        .expect("create");
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let running = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(json!({ "status": { "phase": "Running" }, "metadata": { "labels": { "ignored": "yes" } } })))
        .await
        .expect("patch status");
    assert_eq!(
        running.status.and_then(|s| s.phase).as_deref(),
        Some("Running")
    );
    assert!(
        !running
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("ignored"),
        "status writes ignore metadata"
    );
    let relabelled = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "status": { "phase": "Failed" }, "metadata": { "labels": { "a": "b" } } }),
            ),
        )
        .await
        .expect("patch");
    assert_eq!(
        relabelled.status.and_then(|s| s.phase).as_deref(),
        Some("Running"),
        "main writes ignore status"
    );
    assert_eq!(
        relabelled.metadata.generation,
        Some(1),
        "label changes keep the generation"
    );
}

#[tokio::test]
async fn typed_list_items_leave_out_api_version_and_kind_but_single_objects_and_events_keep_them() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &config_map(name, "1"))
            .await
            .expect("create");
    }
    for path in [
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/configmaps?limit=1",
        "/api/v1/configmaps?resourceVersion=0",
    ] {
        let list = get(&server, path).await.json();
        assert_eq!(
            (&list["apiVersion"], &list["kind"]),
            (&json!("v1"), &json!("ConfigMapList")),
            "{path}"
        );
        let items = list["items"].as_array().expect("items");
        assert!(!items.is_empty(), "{path}");
        for item in items {
            assert_eq!(item.get("kind"), None, "{path}: {item}");
            assert_eq!(item.get("apiVersion"), None, "{path}: {item}");
            assert_eq!(item["data"]["value"], "1", "{path}: the rest is intact");
        }
    }
    let deleted = raw(
        &server,
        "DELETE",
        "/api/v1/namespaces/default/configmaps",
        &[],
        b"",
    )
    .await
    .json();
    assert_eq!(deleted["kind"], "ConfigMapList");
    assert_eq!(deleted["items"][0].get("kind"), None, "{deleted}");

    api.create(&PostParams::default(), &config_map("c", "2"))
        .await
        .expect("create");
    let single = get(&server, "/api/v1/namespaces/default/configmaps/c")
        .await
        .json();
    assert_eq!(
        (&single["apiVersion"], &single["kind"]),
        (&json!("v1"), &json!("ConfigMap"))
    );
    let mut watch = RawWatch::open(
        &server,
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0",
    )
    .await;
    let event = watch.next().await.expect("an ADDED event");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(
        (&event["object"]["apiVersion"], &event["object"]["kind"]),
        (&json!("v1"), &json!("ConfigMap")),
        "watch events carry the type"
    );
    // kube's typed lists still decode: the list's kind names the items.
    let listed = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("c"));
}

#[tokio::test]
async fn generation_is_kept_only_for_kinds_whose_strategy_keeps_it() {
    let server = FakeApiServer::start().await.expect("start");
    let client = server.client().expect("client");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = config_maps
        .create(&PostParams::default(), &config_map("settings", "a"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, None);
    let patched = config_maps
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "value": "b" }, "metadata": { "generation": 9 } })),
        )
        .await
        .expect("patch");
    assert_eq!(
        patched.metadata.generation, None,
        "a request cannot set generation"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("p", &json!({})))
        .await
        .expect("create pod");
    assert_eq!(
        created.metadata.generation,
        Some(1),
        "pods count since 1.33"
    );

    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "nginx" }] },
            },
        },
    }))
    .expect("a Deployment");
    let created = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    assert_eq!(created.metadata.generation, Some(1));
    let scaled = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 3 } })),
        )
        .await
        .expect("scale");
    assert_eq!(scaled.metadata.generation, Some(2), "a spec change bumps");
    let status_written = deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "observedGeneration": 2, "replicas": 3 } })),
        )
        .await
        .expect("status");
    assert_eq!(
        status_written.metadata.generation,
        Some(2),
        "status keeps it"
    );
    let relabelled = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "tier": "front" } } })),
        )
        .await
        .expect("relabel");
    assert_eq!(relabelled.metadata.generation, Some(2), "labels keep it");
}

#[tokio::test]
async fn an_unparseable_label_selector_gets_labels_parse_message_in_a_400() {
    let server = FakeApiServer::start().await.expect("start");
    let answer = get(
        &server,
        "/api/v1/namespaces/default/pods?labelSelector=a%20in%20(",
    )
    .await;
    assert_eq!(answer.status, 400);
    let status = answer.json();
    assert_eq!(
        (&status["kind"], &status["reason"], &status["code"]),
        (&json!("Status"), &json!("BadRequest"), &json!(400))
    );
    assert_eq!(
        status["message"],
        "unable to parse requirement: found '', expected: ',', ')' or identifier"
    );
}
