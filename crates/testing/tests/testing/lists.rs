//! Lists through kube's own `Api<K>` and over raw HTTP: pages of one snapshot, continue tokens
//! that outlive a compaction, resourceVersion semantics, label and field selectors, and
//! metadata-only lists.

use crate::common;

use std::time::{Duration, Instant};

use common::{api_status, config_map, get, raw};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_testing::{FakeApiServer, ServerOptions, fixtures};
use kube::api::{Api, DeleteParams, ListParams, PostParams, VersionMatch};

#[tokio::test]
async fn paged_lists_read_one_consistent_snapshot_across_pages() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    for i in 0..25 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i:02}"), "x"),
        )
        .await
        .expect("create");
    }
    let first = api
        .list(&ListParams::default().limit(10))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 10);
    assert_eq!(first.metadata.remaining_item_count, Some(15));
    let snapshot_rv = first.metadata.resource_version.clone();
    // Writes between pages must not show up in later pages of the same list.
    api.delete("cm-20", &DeleteParams::default())
        .await
        .expect("delete");
    api.create(&PostParams::default(), &config_map("cm-99", "x"))
        .await
        .expect("create");
    let mut names: Vec<String> = first
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let mut token = first.metadata.continue_.clone();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&ListParams::default().limit(10).continue_token(&t))
            .await
            .expect("next page");
        assert_eq!(page.metadata.resource_version, snapshot_rv);
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        token = page.metadata.continue_;
    }
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected);
}

/// Ported in spirit from apiserver's TestListContinuation compaction case: a continue token
/// older than the compaction gets 410 Expired with an inconsistent continue token.
#[tokio::test]
async fn a_continue_token_older_than_compaction_expires_with_410() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    for i in 0..4 {
        api.create(&PostParams::default(), &config_map(&format!("cm-{i}"), "x"))
            .await
            .expect("create");
    }
    let first = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    api.create(&PostParams::default(), &config_map("cm-9", "x"))
        .await
        .expect("create");
    server.compact();
    let token = first.metadata.continue_.expect("a continue token");
    let status = api_status(
        api.list(&ListParams::default().limit(2).continue_token(&token))
            .await
            .expect_err("expired"),
    );
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(status.message.starts_with(
        "The provided continue parameter is too old to display a consistent list result."
    ));
    let inconsistent = status
        .metadata
        .and_then(|m| m.continue_)
        .expect("an inconsistent continue token");
    let rest = api
        .list(&ListParams::default().continue_token(&inconsistent))
        .await
        .expect("inconsistent remainder");
    let names: Vec<_> = rest
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(names, ["cm-2", "cm-3", "cm-9"]);
}

#[tokio::test]
async fn list_resource_version_semantics_follow_the_watch_cache() {
    let server = FakeApiServer::start_with(
        ServerOptions::default().too_large_rv_wait(Duration::from_millis(200)),
    )
    .await
    .expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect("create");
    let after_a = server.resource_version();
    api.create(&PostParams::default(), &config_map("b", "1"))
        .await
        .expect("create");
    api.create(&PostParams::default(), &config_map("c", "1"))
        .await
        .expect("create");

    // kube-client drops resourceVersion=0 when a limit is set, so ask over raw HTTP.
    let any = get(
        &server,
        "/api/v1/namespaces/default/configmaps?resourceVersion=0&limit=1",
    )
    .await
    .json();
    assert_eq!(
        any["items"].as_array().map(Vec::len),
        Some(3),
        "resourceVersion=0 is served from the cache and ignores limit"
    );
    assert!(any["metadata"].get("continue").is_none());

    let exact = api
        .list(
            &ListParams::default()
                .at(&after_a.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .expect("exact");
    assert_eq!(exact.items.len(), 1);
    assert_eq!(exact.metadata.resource_version, Some(after_a.to_string()));

    // kube-client retries 504s itself, so look at the raw answer.
    let future = server.resource_version() + 100;
    let started = Instant::now();
    let too_large = get(&server, &format!("/api/v1/namespaces/default/configmaps?resourceVersion={future}&resourceVersionMatch=NotOlderThan")).await;
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "the server waits for the version first"
    );
    assert_eq!(too_large.status, 504);
    assert_eq!(too_large.header("Retry-After").as_deref(), Some("1"));
    let status = too_large.json();
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(
        status["message"],
        format!(
            "Timeout: Too large resource version: {future}, current: {}",
            server.resource_version()
        )
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );

    server.compact();
    let status = api_status(
        api.list(
            &ListParams::default()
                .at(&after_a.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .expect_err("compacted"),
    );
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert_eq!(
        status.message,
        format!(
            "too old resource version: {after_a} ({})",
            server.resource_version()
        )
    );
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let server = FakeApiServer::start().await.expect("start");
    for i in 0..6 {
        server.create_object(fixtures::pod(i)).expect("seed");
    }
    let pods: Api<Pod> = Api::all(server.client().expect("client"));
    let count = |lp: ListParams| {
        let pods = pods.clone();
        async move { pods.list(&lp).await.expect("list").items.len() }
    };
    assert_eq!(count(ListParams::default()).await, 6);
    assert_eq!(
        count(ListParams::default().labels("tier=frontend")).await,
        2
    );
    assert_eq!(
        count(ListParams::default().labels("tier!=frontend")).await,
        4
    );
    assert_eq!(
        count(ListParams::default().labels("app.kubernetes.io/name in (app-1,app-2)")).await,
        2
    );
    assert_eq!(count(ListParams::default().labels("!tier")).await, 0);
    assert_eq!(
        count(ListParams::default().fields("spec.nodeName=node-3")).await,
        1
    );
    assert_eq!(
        count(ListParams::default().fields("metadata.namespace=ns-4,metadata.name=pod-4")).await,
        1
    );
    let in_ns: Api<Pod> = Api::namespaced(server.client().expect("client"), "ns-2");
    assert_eq!(
        in_ns
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn metadata_only_lists_return_partial_object_metadata() {
    let server = FakeApiServer::start().await.expect("start");
    server.create_object(fixtures::pod(1)).expect("seed");
    let pods: Api<Pod> = Api::all(server.client().expect("client"));
    let list = pods
        .list_metadata(&ListParams::default())
        .await
        .expect("list_metadata");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("pod-1"));
    let raw_list = raw(
        &server,
        "GET",
        "/api/v1/pods",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )],
        b"",
    )
    .await;
    let body = raw_list.json();
    assert_eq!(body["kind"], "PartialObjectMetadataList");
    assert_eq!(body["items"][0]["kind"], "PartialObjectMetadata");
    assert!(body["items"][0].get("spec").is_none());
}

/// `shardSelector`, as kube-apiserver with `ShardedListAndWatch` on: the list holds the objects
/// whose UID hashes into the shard and echoes the selector in `metadata.shardInfo`; a malformed
/// selector is a 500 with the parser's reason; a server told to ignore it lists everything
/// and echoes nothing, malformed or not.
#[tokio::test]
async fn a_shard_selector_lists_the_shard_and_is_echoed_or_ignored() {
    let shard = kinformer_store::Shard::of(0, 2).expect("a shard");
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("shardSelector", &shard.to_string())
        .finish();
    for honoured in [true, false] {
        let server =
            FakeApiServer::start_with(ServerOptions::default().sharded_list_and_watch(honoured))
                .await
                .expect("the fake server starts");
        for i in 0..40 {
            server.create_object(fixtures::pod(i)).expect("seeded");
        }
        let listed = get(&server, &format!("/api/v1/pods?{query}")).await;
        assert_eq!(listed.status, 200);
        let list = listed.json();
        let items = list["items"].as_array().expect("items");
        let in_shard = items
            .iter()
            .filter(|item| {
                let pod: Pod = serde_json::from_value((*item).clone()).expect("a Pod");
                shard.contains(&pod)
            })
            .count();
        if honoured {
            assert_eq!(in_shard, items.len(), "only the shard's Pods");
            assert!(
                items.len() < 40 && !items.is_empty(),
                "{} Pods",
                items.len()
            );
            assert_eq!(list["metadata"]["shardInfo"]["selector"], shard.to_string());
        } else {
            assert_eq!(items.len(), 40, "every Pod");
            assert!(list["metadata"].get("shardInfo").is_none(), "{list}");
        }

        let malformed = get(
            &server,
            "/api/v1/pods?shardSelector=shardRange(object.metadata.uid,%20%270x0%27,%20%270x8%27)",
        )
        .await;
        if honoured {
            assert_eq!(malformed.status, 500);
            let message = malformed.json()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                message.starts_with(
                    "invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value"
                ),
                "{message}"
            );
        } else {
            assert_eq!(malformed.status, 200, "ignored, as with the gate off");
        }
    }
}
