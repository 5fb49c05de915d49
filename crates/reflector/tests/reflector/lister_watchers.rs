//! The kube-client lister-watchers over real HTTP against the fake API server: namespaces and
//! selectors, metadata-only and dynamic objects, protobuf and JSON. Pages fetched ahead of
//! their decoding and large pages decoded as they arrive are the crate's unit tests
//! (`src/kube/tests.rs`), which decode through decoders of their own.

use crate::common;

use common::fake_server::{PATIENCE, churn, client, converges, quick, reflect, server_with_pods};
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{KubeListerWatcher, WireFormat};
use kinformer_store::CacheReader;
use kinformer_testing::{eventually, fixtures};
use kube_client::Api;
use kube_core::ApiResource;

/// A namespaced, label-selected typed lister-watcher caches only what it selects.
#[tokio::test]
async fn namespace_and_label_selectors_narrow_the_cache() {
    let server = server_with_pods(40).await;
    let client = client(&server);
    let lister_watcher = KubeListerWatcher::new(Api::<Pod>::namespaced(client, "ns-3"))
        .wire_format(WireFormat::from_env())
        .labels("tier=backend")
        .tweak_list_options(|options| {
            options.field_selector = Some("metadata.namespace=ns-3".into());
        });
    let (cache, running) = reflect(lister_watcher, quick());
    // pod-3, 13, 23, 33 live in ns-3; those with i % 3 == 0 are frontends (3, 33).
    let want: Vec<String> = vec!["ns-3/pod-13".into(), "ns-3/pod-23".into()];
    eventually("the selection is cached", PATIENCE, || {
        let mut keys = cache.list_keys();
        keys.sort();
        keys == want
    })
    .await;
    server
        .create_object(fixtures::pod(43))
        .expect("pod created");
    eventually("the new match arrives", PATIENCE, || {
        cache.list_keys().len() == 3
    })
    .await;
    running.stop().await;
}

/// Metadata-only and dynamic lister-watchers fill their caches like the typed one.
#[tokio::test]
async fn metadata_and_dynamic_lister_watchers_converge() {
    let server = server_with_pods(12).await;
    let client = client(&server);

    let (metadata_cache, metadata) = reflect(
        KubeListerWatcher::metadata(Api::<Pod>::all(client.clone())),
        quick(),
    );
    let resource = ApiResource::erase::<Pod>(&());
    let (dynamic_cache, dynamic) = reflect(
        KubeListerWatcher::dynamic(Api::all_with(client, &resource), &resource),
        quick(),
    );
    converges(&server, &metadata_cache).await;
    converges(&server, &dynamic_cache).await;
    churn(&server, 60);
    converges(&server, &metadata_cache).await;
    converges(&server, &dynamic_cache).await;
    assert!(metadata.errors().is_empty(), "{:?}", metadata.errors());
    assert!(dynamic.errors().is_empty(), "{:?}", dynamic.errors());
    metadata.stop().await;
    dynamic.stop().await;
}

/// A metadata-only lister-watcher asks for protobuf by default, as client-go's metadata client
/// does, and fills the same cache in either format.
#[tokio::test]
async fn metadata_lister_watchers_fill_the_cache_in_protobuf_and_in_json() {
    for format in [WireFormat::Protobuf, WireFormat::Json] {
        let server = server_with_pods(12).await;
        let (cache, running) = reflect(
            KubeListerWatcher::metadata(Api::<Pod>::all(client(&server))).wire_format(format),
            quick(),
        );
        converges(&server, &cache).await;
        churn(&server, 60);
        converges(&server, &cache).await;
        assert!(
            running.errors().is_empty(),
            "{format:?}: {:?}",
            running.errors()
        );
        for object in cache.list() {
            let types = object.types.as_ref().expect("every object has its type");
            assert_eq!(
                (types.api_version.as_str(), types.kind.as_str()),
                ("meta.k8s.io/v1", "PartialObjectMetadata"),
                "{format:?}"
            );
        }
        let served = server.content_types();
        let protobuf_served = served
            .keys()
            .filter(|kind| kind.contains("protobuf"))
            .count();
        match format {
            WireFormat::Protobuf => assert!(
                protobuf_served > 0 && !served.contains_key("application/json"),
                "{served:?}"
            ),
            WireFormat::Json => assert_eq!(protobuf_served, 0, "{served:?}"),
        }
        running.stop().await;
    }
}
