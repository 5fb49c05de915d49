//! The API behaviours kinformer's reflector and informers depend on, checked against a real
//! kube-apiserver (`cargo xtask e2e --local | --kind | --kubeconfig PATH`) and against
//! kinformer-testing's fake server (`cargo xtask e2e --fake`, and plain `cargo test`).
//!
//! Every test runs in its own namespace and compares the shape of what comes back (status
//! codes, reasons, event types, annotations), so one suite proves both that kube-client drives a
//! real server as expected and that the fake answers the way the real server does. Where the
//! two differ by design the test says so next to the branch; docs/e2e.md keeps the list.

use crate::config_maps;
use crate::e2e_support;

use std::{collections::BTreeMap, time::Duration};

use config_maps::config_map;
use e2e_support::{BackendKind, Ctx, create_widget_crd, next_change, next_within, run, shape};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_client::{
    Api,
    api::{DeleteParams, DynamicObject, ListParams, PostParams, WatchParams},
    core::{ObjectMeta, WatchEvent},
};

/// How long a test waits for an event that should come promptly.
const PROMPT: Duration = Duration::from_secs(10);

fn config_maps(ctx: &Ctx) -> Api<ConfigMap> {
    Api::namespaced(ctx.client(), &ctx.namespace)
}

fn rv_number(rv: Option<&String>) -> u64 {
    rv.and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("resourceVersion {rv:?} is not a number"))
}

#[tokio::test]
async fn paged_list_returns_every_object_once_in_name_order_from_one_snapshot() {
    run("paging", |ctx| async move {
        let api = config_maps(&ctx);
        for index in 0..7 {
            api.create(
                &PostParams::default(),
                &config_map(&format!("cm-{index}"), "value", &[]),
            )
            .await
            .expect("create");
        }

        let first = api
            .list(&ListParams::default().limit(3))
            .await
            .expect("first page");
        assert_eq!(first.items.len(), 3);
        let snapshot = first.metadata.resource_version.clone();
        let mut token = first
            .metadata
            .continue_
            .clone()
            .expect("a continue token after a full page");
        // Every ConfigMap in the namespace, in name order: the test's own seven and, on a full
        // cluster, what kube-controller-manager published there before the test began.
        let mut expected: Vec<String> = (0..7).map(|index| format!("cm-{index}")).collect();
        expected.extend(ctx.published_config_maps.iter().cloned());
        expected.sort();
        // apiserver counts what is left when it can (no selector); it may also omit the count.
        if let Some(remaining) = first.metadata.remaining_item_count {
            assert_eq!(usize::try_from(remaining).ok(), Some(expected.len() - 3));
        }
        // Written after the first page: a continued list reads the first page's snapshot.
        api.create(&PostParams::default(), &config_map("cm-9", "value", &[]))
            .await
            .expect("create during paging");

        let mut names: Vec<String> = first
            .items
            .iter()
            .map(|cm| cm.metadata.name.clone().unwrap_or_default())
            .collect();
        let mut pages = 1;
        loop {
            let page = api
                .list(&ListParams::default().limit(3).continue_token(&token))
                .await
                .expect("next page");
            pages += 1;
            assert_eq!(
                page.metadata.resource_version, snapshot,
                "every page reads one snapshot"
            );
            names.extend(
                page.items
                    .iter()
                    .map(|cm| cm.metadata.name.clone().unwrap_or_default()),
            );
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(next) => token = next,
                None => break,
            }
        }
        assert_eq!(pages, expected.len().div_ceil(3));
        assert_eq!(names, expected);

        let fresh = api.list(&ListParams::default()).await.expect("fresh list");
        assert_eq!(
            fresh.items.len(),
            expected.len() + 1,
            "a new list sees the object written during paging"
        );
    })
    .await;
}

#[tokio::test]
async fn watch_from_a_lists_resource_version_sees_later_writes_in_order() {
    run("watch-order", |ctx| async move {
        let api = config_maps(&ctx);
        api.create(&PostParams::default(), &config_map("before", "value", &[]))
            .await
            .expect("create before the list");
        let list = api.list(&ListParams::default()).await.expect("list");
        let rv = list
            .metadata
            .resource_version
            .clone()
            .expect("a list has a resourceVersion");
        let mut watch = api
            .watch(&WatchParams::default().timeout(60), &rv)
            .await
            .expect("watch")
            .boxed();

        let created = api
            .create(&PostParams::default(), &config_map("web", "value", &[]))
            .await
            .expect("create");
        let mut changed = created.clone();
        changed.data = Some(BTreeMap::from([("key".to_owned(), "changed".to_owned())]));
        let updated = api
            .replace("web", &PostParams::default(), &changed)
            .await
            .expect("update");
        api.delete("web", &DeleteParams::default())
            .await
            .expect("delete");

        let mut seen = Vec::new();
        let mut versions = Vec::new();
        for _ in 0..3 {
            let event = next_change(&mut watch, PROMPT)
                .await
                .expect("an event within the wait");
            if let WatchEvent::Added(cm) | WatchEvent::Modified(cm) | WatchEvent::Deleted(cm) =
                &event
            {
                versions.push(rv_number(cm.metadata.resource_version.as_ref()));
            }
            seen.push(shape(&event));
        }
        assert_eq!(
            seen,
            vec![
                ("ADDED", "web".to_owned()),
                ("MODIFIED", "web".to_owned()),
                ("DELETED", "web".to_owned())
            ]
        );
        assert_eq!(
            versions[0],
            rv_number(created.metadata.resource_version.as_ref())
        );
        assert_eq!(
            versions[1],
            rv_number(updated.metadata.resource_version.as_ref())
        );
        assert!(
            versions[2] > versions[1],
            "a deletion has a newer resourceVersion: {versions:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn bookmarks_arrive_on_watches_that_allow_them() {
    run("bookmarks", |ctx| async move {
        let api = config_maps(&ctx);
        let created = api
            .create(&PostParams::default(), &config_map("one", "value", &[]))
            .await
            .expect("create");
        let rv = created
            .metadata
            .resource_version
            .clone()
            .expect("created rv");
        // kube-apiserver sends a bookmark about 2 s before a watch's deadline (and then about
        // once a minute), so a short timeout bounds the wait; the fake sends one each second.
        let mut watch = api
            .watch(&WatchParams::default().timeout(6), &rv)
            .await
            .expect("watch")
            .boxed();
        let bookmark = match next_within(&mut watch, PROMPT).await {
            Some(Ok(WatchEvent::Bookmark(found))) => Some(found),
            None => None,
            Some(other) => panic!(
                "only a bookmark is due on a quiet watch, got {:?}",
                other.map(|event| shape(&event))
            ),
        };
        if !ctx.backend.watch_cache() {
            // Bookmarks come from the watch cache; a watch served by etcd directly ends at its
            // deadline without one (kube-apiserver --watch-cache=false).
            assert!(bookmark.is_none(), "no bookmark without the watch cache");
            return;
        }
        let bookmark = bookmark.expect("a bookmark before the watch's deadline");
        assert_eq!(bookmark.types.api_version, "v1");
        assert_eq!(bookmark.types.kind, "ConfigMap");
        let bookmarked: u64 = bookmark
            .metadata
            .resource_version
            .parse()
            .expect("numeric bookmark rv");
        assert!(
            bookmarked >= rv_number(Some(&rv)),
            "a bookmark never goes back in time"
        );
    })
    .await;
}

#[tokio::test]
async fn a_watch_from_a_compacted_resource_version_gets_410_expired() {
    run("expired", |ctx| async move {
        // Secrets, because the local control plane turns the watch cache off for them alone
        // (--watch-cache-sizes=secrets#0): their watches reach etcd, where a compaction shows.
        // Every other resource goes through the watch cache, which keeps its own window.
        let api: Api<Secret> = Api::namespaced(ctx.client(), &ctx.namespace);
        let mut secret = Secret {
            metadata: ObjectMeta {
                name: Some("one".to_owned()),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        let created = api
            .create(&PostParams::default(), &secret)
            .await
            .expect("create");
        // Two updates: the watch then starts (one past `created`) strictly below the compacted
        // revision. Starting exactly at it makes kube-apiserver answer 500 "etcd event received
        // with PrevKv=nil" instead, as the event's previous value is gone (docs/e2e.md).
        let mut current = created.clone();
        for step in ["two", "three"] {
            secret.metadata.resource_version = current.metadata.resource_version.clone();
            secret.metadata.labels = Some(BTreeMap::from([("step".to_owned(), step.to_owned())]));
            current = api
                .replace("one", &PostParams::default(), &secret)
                .await
                .expect("update");
        }
        let compacted = ctx.backend.force_compaction().await;
        let from = if compacted {
            created
                .metadata
                .resource_version
                .expect("a created object has a resourceVersion")
        } else {
            // kind or a foreign cluster: their etcd is out of reach, but revision 1 predates
            // the window of any watch cache that did not start on an empty etcd.
            assert!(
                matches!(
                    ctx.backend.kind(),
                    BackendKind::Kind | BackendKind::Kubeconfig
                ),
                "the fake and the local control plane can always be compacted"
            );
            "1".to_owned()
        };

        let outcome = api.watch(&WatchParams::default().timeout(30), &from).await;
        let status = match outcome {
            // kube-apiserver answers 200 and then one ERROR event carrying the Status.
            Ok(stream) => {
                let mut stream = stream.boxed();
                match next_within(&mut stream, PROMPT).await {
                    Some(Ok(WatchEvent::Error(status))) => status,
                    // Without a compaction of our own, revision 1 can still be inside the
                    // window of a cluster whose etcd was empty when its watch cache started:
                    // then the watch replays our writes from the start, which is also correct.
                    Some(Ok(WatchEvent::Added(replayed))) if !compacted => {
                        assert_eq!(replayed.metadata.name.as_deref(), Some("one"));
                        return;
                    }
                    other => panic!(
                        "expected an ERROR event, got {:?}",
                        other.map(|e| e.map(|e| shape(&e)))
                    ),
                }
            }
            Err(kube_client::Error::Api(status)) => {
                panic!(
                    "expected a 200 with an ERROR event, got HTTP {} {}",
                    status.code, status.reason
                )
            }
            Err(err) => panic!("watch failed: {err}"),
        };
        assert_eq!(status.code, 410, "{status:?}");
        assert_eq!(status.reason, "Expired");
        assert!(status.is_failure());
    })
    .await;
}

#[tokio::test]
async fn a_streaming_list_sends_added_events_then_the_initial_events_end_bookmark() {
    run("streaming-list", |ctx| async move {
        let api = config_maps(&ctx);
        let mut last_rv = 0;
        for name in ["a", "b", "c"] {
            let created = api
                .create(&PostParams::default(), &config_map(name, "value", &[]))
                .await
                .expect("create");
            last_rv = rv_number(created.metadata.resource_version.as_ref());
        }
        // sendInitialEvents=true&resourceVersionMatch=NotOlderThan with no resourceVersion: a
        // consistent read, then the stream goes on as an ordinary watch.
        let mut watch = api
            .watch(&WatchParams::streaming_lists().timeout(60), "")
            .await
            .expect("streaming list")
            .boxed();
        let mut added = Vec::new();
        let end = loop {
            match next_within(&mut watch, PROMPT)
                .await
                .map(|event| event.expect("watch event"))
            {
                Some(WatchEvent::Added(cm)) => added.push(cm.metadata.name.unwrap_or_default()),
                Some(WatchEvent::Bookmark(bookmark)) => {
                    let annotated = bookmark
                        .metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str);
                    if annotated == Some("true") {
                        break bookmark;
                    }
                    // A bookmark before the end of the initial events would be a bug.
                    panic!(
                        "a bookmark without k8s.io/initial-events-end arrived first: {:?}",
                        bookmark.metadata.annotations
                    );
                }
                other => panic!(
                    "expected ADDED or the end bookmark, got {:?}",
                    other.map(|e| shape(&e))
                ),
            }
        };
        added.sort();
        let mut expected = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        expected.extend(ctx.published_config_maps.iter().cloned());
        expected.sort();
        assert_eq!(added, expected);
        let end_rv: u64 = end.metadata.resource_version.parse().expect("numeric rv");
        assert!(
            end_rv >= last_rv,
            "the end bookmark is at least as new as the last write"
        );

        api.create(&PostParams::default(), &config_map("d", "value", &[]))
            .await
            .expect("create after");
        let event = next_change(&mut watch, PROMPT)
            .await
            .expect("the watch continues");
        assert_eq!(shape(&event), ("ADDED", "d".to_owned()));
    })
    .await;
}

#[tokio::test]
async fn a_label_selector_watch_sees_objects_enter_and_leave_the_selection() {
    run("label-watch", |ctx| async move {
        let api = config_maps(&ctx);
        let list = api.list(&ListParams::default()).await.expect("list");
        let rv = list.metadata.resource_version.expect("list rv");
        let mut watch = api
            .watch(&WatchParams::default().labels("app=web").timeout(60), &rv)
            .await
            .expect("watch")
            .boxed();

        let mut web = api
            .create(
                &PostParams::default(),
                &config_map("web", "value", &[("app", "web")]),
            )
            .await
            .expect("create web");
        let mut db = api
            .create(
                &PostParams::default(),
                &config_map("db", "value", &[("app", "db")]),
            )
            .await
            .expect("create db");
        // web leaves the selection, db enters it.
        web.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "db".to_owned())]));
        api.replace("web", &PostParams::default(), &web)
            .await
            .expect("relabel web");
        db.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "web".to_owned())]));
        api.replace("db", &PostParams::default(), &db)
            .await
            .expect("relabel db");

        let mut seen = Vec::new();
        for _ in 0..3 {
            let event = next_change(&mut watch, PROMPT)
                .await
                .expect("an event within the wait");
            seen.push(shape(&event));
        }
        assert_eq!(
            seen,
            vec![
                ("ADDED", "web".to_owned()),
                ("DELETED", "web".to_owned()),
                ("ADDED", "db".to_owned())
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn a_custom_resource_definition_is_established_and_serves_dynamic_objects() {
    run("crd", |ctx| async move {
        let group = format!("e2e-{}.kinformer.dev", ctx.unique());
        let resource = create_widget_crd(&ctx, &group).await;
        let widgets: Api<DynamicObject> =
            Api::namespaced_with(ctx.client(), &ctx.namespace, &resource);
        let widget = |name: &str, size: u64| {
            DynamicObject::new(name, &resource)
                .data(serde_json::json!({ "spec": { "size": size } }))
        };
        // Established means the names are accepted; the storage for them can lag a moment.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            match widgets
                .create(&PostParams::default(), &widget("first", 1))
                .await
            {
                Ok(_) => break,
                Err(kube_client::Error::Api(status))
                    if status.code == 404 && tokio::time::Instant::now() < deadline =>
                {
                    // Retrying: the new resource is served a moment after it is Established.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(err) => panic!("creating a Widget: {err}"),
            }
        }
        let list = widgets
            .list(&ListParams::default())
            .await
            .expect("list widgets");
        assert_eq!(list.items.len(), 1);
        assert_eq!(list.items[0].data["spec"]["size"], 1);
        assert_eq!(
            list.items[0].types.as_ref().map(|t| t.kind.as_str()),
            Some("Widget")
        );

        let rv = list.metadata.resource_version.expect("list rv");
        let mut watch = widgets
            .watch(&WatchParams::default().timeout(60), &rv)
            .await
            .expect("watch")
            .boxed();
        widgets
            .create(&PostParams::default(), &widget("second", 2))
            .await
            .expect("create second");
        match next_change(&mut watch, PROMPT).await {
            Some(WatchEvent::Added(object)) => {
                assert_eq!(object.metadata.name.as_deref(), Some("second"));
                assert_eq!(object.data["spec"]["size"], 2);
            }
            other => panic!("expected ADDED second, got {:?}", other.map(|e| shape(&e))),
        }
    })
    .await;
}

#[tokio::test]
async fn an_update_with_a_stale_resource_version_is_refused_with_409_conflict() {
    run("conflict", |ctx| async move {
        let api = config_maps(&ctx);
        let stale = api
            .create(&PostParams::default(), &config_map("one", "value", &[]))
            .await
            .expect("create");
        let mut fresh = stale.clone();
        fresh.data = Some(BTreeMap::from([("key".to_owned(), "fresh".to_owned())]));
        api.replace("one", &PostParams::default(), &fresh)
            .await
            .expect("first update");

        let mut late = stale.clone();
        late.data = Some(BTreeMap::from([("key".to_owned(), "late".to_owned())]));
        match api.replace("one", &PostParams::default(), &late).await {
            Err(kube_client::Error::Api(status)) => {
                assert_eq!(status.code, 409);
                assert_eq!(status.reason, "Conflict");
                assert!(status.is_failure());
                let details = status.details.expect("a Conflict names the object");
                assert_eq!(details.name, "one");
                assert_eq!(details.kind, "configmaps");
            }
            other => panic!("expected 409 Conflict, got {other:?}"),
        }
        let current = api.get("one").await.expect("get");
        assert_eq!(
            current
                .data
                .and_then(|data| data.get("key").cloned())
                .as_deref(),
            Some("fresh")
        );
    })
    .await;
}

#[tokio::test]
async fn a_token_without_rbac_grants_is_forbidden_with_a_403_status() {
    run("forbidden", |ctx| async move {
        let outcome = match ctx.backend.unprivileged_client(&ctx.namespace).await {
            Some(client) => {
                let api: Api<ConfigMap> = Api::namespaced(client, &ctx.namespace);
                api.list(&ListParams::default()).await
            }
            // The fake has no authentication or RBAC (a documented limitation): its injected
            // 403 must at least be shaped like kube-apiserver's.
            None => {
                assert!(
                    ctx.backend.inject_forbidden_list("configmaps"),
                    "only the fake lacks RBAC"
                );
                config_maps(&ctx).list(&ListParams::default()).await
            }
        };
        match outcome {
            Err(kube_client::Error::Api(status)) => {
                assert_eq!(status.code, 403);
                assert_eq!(status.reason, "Forbidden");
                assert!(status.is_failure());
                let details = status.details.expect("a Forbidden names the resource");
                assert_eq!(details.kind, "configmaps");
                assert!(
                    status.message.contains("forbidden"),
                    "message: {}",
                    status.message
                );
            }
            other => panic!("expected 403 Forbidden, got {other:?}"),
        }
    })
    .await;
}
