//! Watch semantics through kube's `Api::watch`, kube-runtime's `watcher` and raw HTTP lines.

use crate::common;

use std::time::Duration;

use common::{PATIENCE, RawWatch, config_map, pod};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_testing::{FakeApiServer, ServerOptions, eventually, fixtures};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;

async fn next_event<K>(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
) -> WatchEvent<K> {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("an event in time")
        .expect("the stream is open")
        .expect("a decodable event")
}

fn name_of<K: kube::Resource>(event: &WatchEvent<K>) -> String {
    match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
            o.meta().name.clone().unwrap_or_default()
        }
        other => panic!("expected an object event, got {}", kind_of(other)),
    }
}

fn kind_of<K>(event: &WatchEvent<K>) -> &'static str {
    match event {
        WatchEvent::Added(_) => "ADDED",
        WatchEvent::Modified(_) => "MODIFIED",
        WatchEvent::Deleted(_) => "DELETED",
        WatchEvent::Bookmark(_) => "BOOKMARK",
        WatchEvent::Error(_) => "ERROR",
    }
}

#[tokio::test]
async fn a_watch_from_a_version_replays_every_later_change_in_order() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("before", "1"))
        .await
        .expect("create");
    let from = server.resource_version().to_string();
    api.create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect("create");
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "value": "2" } })),
    )
    .await
    .expect("patch");
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .expect("watch")
        .boxed();
    let mut seen = Vec::new();
    let mut versions = Vec::new();
    for _ in 0..3 {
        let event = next_event(&mut stream).await;
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &event {
            versions.push(
                o.metadata
                    .resource_version
                    .clone()
                    .and_then(|r| r.parse::<u64>().ok())
                    .expect("rv"),
            );
        }
        seen.push((kind_of(&event), name_of(&event)));
    }
    assert_eq!(
        seen,
        [
            ("ADDED", "a".into()),
            ("MODIFIED", "a".into()),
            ("DELETED", "a".into())
        ]
    );
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "the DELETED event carries a new revision: {versions:?}"
    );
    assert_eq!(versions[2], server.resource_version());
}

#[tokio::test]
async fn a_watch_without_a_version_starts_with_synthetic_added_events() {
    let server = FakeApiServer::start().await.expect("start");
    for i in 0..3 {
        server
            .create_object(fixtures::config_map(i * 10))
            .expect("seed");
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "ns-0");
    let mut stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let mut names = Vec::new();
    for _ in 0..3 {
        let event = next_event(&mut stream).await;
        assert_eq!(kind_of(&event), "ADDED");
        names.push(name_of(&event));
    }
    assert_eq!(names, ["config-0", "config-10", "config-20"]);
}

#[tokio::test]
async fn bookmarks_arrive_periodically_with_the_current_resource_version() {
    let server = FakeApiServer::start_with(
        ServerOptions::default().bookmark_interval(Duration::from_millis(100)),
    )
    .await
    .expect("start");
    let api: Api<Pod> = Api::namespaced(server.client().expect("client"), "default");
    server.create_object(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "other", "namespace": "default" } })).expect("seed");
    let rv = server.resource_version().to_string();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(bookmark.metadata.resource_version, rv);
            assert_eq!(bookmark.types.kind, "Pod");
        }
        other => panic!("expected a bookmark, got {}", kind_of(&other)),
    }
    let mut raw = RawWatch::open(
        &server,
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=1",
    )
    .await;
    let none = raw.next_within(Duration::from_millis(300)).await;
    assert!(
        none.is_err(),
        "no bookmarks unless allowWatchBookmarks=true"
    );
}

#[tokio::test]
async fn a_watch_from_a_compacted_version_gets_a_200_stream_with_one_410_error_event() {
    let server = FakeApiServer::start_with(ServerOptions::default().history(3))
        .await
        .expect("start");
    for i in 0..6 {
        server.create_object(fixtures::config_map(i)).expect("seed");
    }
    let mut raw = RawWatch::open(&server, "/api/v1/configmaps?watch=true&resourceVersion=2").await;
    assert_eq!(raw.status, 200);
    let event = raw.next().await.expect("an ERROR event");
    assert_eq!(
        event,
        json!({ "type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version: 2 (4)", "reason": "Expired", "code": 410 } })
    );
    assert_eq!(raw.next().await, None, "the stream ends after the error");

    let api: Api<ConfigMap> = Api::all(server.client().expect("client"));
    let mut stream = api
        .watch(&WatchParams::default(), "2")
        .await
        .expect("watch")
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected an error, got {}", kind_of(&other)),
    }
}

#[tokio::test]
async fn a_streaming_list_sends_the_state_then_a_bookmark_marking_the_end() {
    let server = FakeApiServer::start().await.expect("start");
    for i in 0..4 {
        server.create_object(fixtures::pod(i * 10)).expect("seed");
    }
    let rv = server.resource_version();
    let api: Api<Pod> = Api::namespaced(server.client().expect("client"), "ns-0");
    let mut stream = api
        .watch(&WatchParams::streaming_lists(), "")
        .await
        .expect("watch")
        .boxed();
    for _ in 0..4 {
        assert_eq!(kind_of(&next_event(&mut stream).await), "ADDED");
    }
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(bookmark.metadata.resource_version, rv.to_string());
            assert_eq!(
                bookmark
                    .metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!("expected the end bookmark, got {}", kind_of(&other)),
    }
    let invalid = common::get(&server, "/api/v1/pods?watch=true&sendInitialEvents=true").await;
    assert_eq!(
        (invalid.status, invalid.json()["reason"].clone()),
        (422, json!("Invalid"))
    );
}

/// Ported in spirit from apiserver's cacheWatcher filtering: an object leaving the selector is
/// a DELETED event, one entering it is ADDED.
#[tokio::test]
async fn an_object_that_stops_matching_a_selector_is_sent_as_deleted() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<Pod> = Api::namespaced(server.client().expect("client"), "default");
    api.create(&PostParams::default(), &pod("p", &json!({ "app": "web" })))
        .await
        .expect("create");
    api.create(&PostParams::default(), &pod("q", &json!({ "app": "db" })))
        .await
        .expect("create");
    let rv = server.resource_version().to_string();
    let mut stream = api
        .watch(
            &WatchParams::default().labels("app=web").disable_bookmarks(),
            &rv,
        )
        .await
        .expect("watch")
        .boxed();
    let relabel = |name: &'static str, app: &'static str| {
        let api = api.clone();
        async move {
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { "app": app } } })),
            )
            .await
            .expect("relabel")
        }
    };
    relabel("q", "cache").await; // never matched: no event
    relabel("p", "api").await;
    relabel("p", "web").await;
    let left = next_event(&mut stream).await;
    assert_eq!(
        (kind_of(&left), name_of(&left)),
        ("DELETED", "p".to_owned())
    );
    if let WatchEvent::Deleted(p) = &left {
        assert_eq!(
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str),
            Some("web"),
            "the last matching state"
        );
    }
    let back = next_event(&mut stream).await;
    assert_eq!((kind_of(&back), name_of(&back)), ("ADDED", "p".to_owned()));
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream_from_the_server_side() {
    let server = FakeApiServer::start().await.expect("start");
    let mut raw = RawWatch::open(
        &server,
        "/api/v1/pods?watch=true&resourceVersion=1&timeoutSeconds=1",
    )
    .await;
    assert_eq!(raw.next().await, None);
}

#[tokio::test]
async fn a_slow_watcher_is_closed_without_holding_back_the_others() {
    let server = FakeApiServer::start_with(ServerOptions::default().watcher_buffer(4))
        .await
        .expect("start");
    let rv = server.resource_version();
    // Opened and never read: its socket, body channel and store buffer fill up in turn.
    let _slow = RawWatch::open(
        &server,
        &format!("/api/v1/pods?watch=true&resourceVersion={rv}"),
    )
    .await;
    let api: Api<Pod> = Api::all(server.client().expect("client"));
    let mut fast = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv.to_string())
        .await
        .expect("watch")
        .boxed();
    eventually("both watches registered", PATIENCE, || {
        server.open_watches() >= 2
    })
    .await;
    let total = 1500;
    let mut received = 0;
    for i in 0..total {
        server.create_object(fixtures::pod(i)).expect("create");
        // Read as we go so the fast watcher never falls behind its small buffer.
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(0), fast.next()).await
        {
            event.expect("a decodable event");
            received += 1;
        }
    }
    while received < total {
        next_event(&mut fast).await;
        received += 1;
    }
    assert_eq!(
        server.open_watches(),
        1,
        "the slow watcher was closed, the fast one is open"
    );
}

#[tokio::test]
async fn kube_runtime_watcher_lists_watches_and_relists_after_410() {
    let server = FakeApiServer::start_with(
        ServerOptions::default().bookmark_interval(Duration::from_millis(100)),
    )
    .await
    .expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect("create");
    let mut events = watcher(api.clone(), watcher::Config::default().page_size(1)).boxed();
    async fn next_of(
        events: &mut (
                 impl futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin
             ),
    ) -> watcher::Event<ConfigMap> {
        tokio::time::timeout(PATIENCE, events.try_next())
            .await
            .expect("an event in time")
            .expect("no watcher error")
            .expect("the stream is open")
    }
    assert!(matches!(next_of(&mut events).await, watcher::Event::Init));
    assert!(
        matches!(next_of(&mut events).await, watcher::Event::InitApply(cm) if cm.metadata.name.as_deref() == Some("a"))
    );
    assert!(matches!(
        next_of(&mut events).await,
        watcher::Event::InitDone
    ));
    api.create(&PostParams::default(), &config_map("b", "1"))
        .await
        .expect("create");
    assert!(
        matches!(next_of(&mut events).await, watcher::Event::Apply(cm) if cm.metadata.name.as_deref() == Some("b"))
    );

    // Take the server down, write and compact meanwhile: resuming gets 410, so it lists again.
    server.stop_listener().await;
    server
        .create_object(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "c", "namespace": "default" } }))
        .expect("create");
    server.compact();
    server.restart_listener().await.expect("restart");
    let relisted = tokio::time::timeout(PATIENCE, async {
        let mut names = Vec::new();
        loop {
            // Connection errors while the server was down surface as items; the watcher goes on.
            match events.next().await {
                Some(Ok(watcher::Event::InitApply(cm))) => names.extend(cm.metadata.name),
                Some(Ok(watcher::Event::InitDone)) => return names,
                Some(_) => continue,
                None => panic!("the watcher stream ended"),
            }
        }
    })
    .await
    .expect("the watcher relisted in time");
    assert_eq!(relisted, ["a", "b", "c"]);
    assert!(
        server
            .faults()
            .request_count(kinformer_testing::Verb::List, "configmaps")
            >= 2
    );
}

#[tokio::test]
async fn metadata_watches_stream_partial_object_metadata() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<Pod> = Api::all(server.client().expect("client"));
    let rv = server.resource_version().to_string();
    let mut stream = api
        .watch_metadata(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .expect("watch")
        .boxed();
    server.create_object(fixtures::pod(7)).expect("create");
    match next_event(&mut stream).await {
        WatchEvent::Added(meta) => assert_eq!(meta.metadata.name.as_deref(), Some("pod-7")),
        other => panic!("expected ADDED, got {}", kind_of(&other)),
    }
    let mut raw = RawWatch::open(
        &server,
        &format!("/api/v1/pods?watch=true&resourceVersion={rv}"),
    )
    .await;
    let line = raw.next().await.expect("an event");
    assert!(
        line["object"].get("spec").is_some(),
        "a plain watch carries the whole object"
    );
}
