//! Shards through the factory, against kinformer-testing's API server over real HTTP: a
//! factory-wide shard scopes every informer it hands out, a request's shard gets an informer of
//! its own, and two factories of shards 0 and 1 of 2 hold every Pod once between them.

use std::{collections::BTreeSet, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_factory::{FactoryOptions, InformerRequest, SharedInformerFactory};
use kinformer_reflector::ShardMode;
use kinformer_store::{Shard, ShardKey};
use kinformer_testing::FakeApiServer;
use kube_core::PartialObjectMeta;

const PATIENCE: Duration = Duration::from_secs(20);

fn keys(pods: &[std::sync::Arc<Pod>]) -> BTreeSet<String> {
    pods.iter()
        .map(|pod| {
            let meta = &pod.metadata;
            format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factories_of_two_shards_hold_every_pod_once() {
    let server = FakeApiServer::start_with_pods(0..60)
        .await
        .expect("the fake server starts with the fixture Pods");
    let mut held = Vec::new();
    let mut factories = Vec::new();
    for index in 0..2 {
        let shard = Shard::of(index, 2).expect("a shard");
        let factory = SharedInformerFactory::new(
            server.client().expect("a client"),
            FactoryOptions::default().shard(shard.clone()),
        );
        let pods = factory.informer::<Pod>().expect("an informer");
        // The factory's shard is part of the informer's identity and description.
        let status = factory.sync_status();
        let key = status.keys().next().expect("one informer");
        assert_eq!(key.selection().shard_selector(), Some(&shard));
        assert!(key.to_string().contains("shard=shardRange("), "{key}");
        factory.start().expect("the factory starts");
        let synced = factory.wait_for_cache_sync(PATIENCE).await;
        assert!(synced.all_synced(), "{synced:?}");
        let cached = pods.cache().list();
        assert!(cached.iter().all(|pod| shard.contains(&**pod)));
        assert_eq!(
            pods.health().shard.and_then(|stats| stats.mode),
            Some(ShardMode::Server)
        );
        #[cfg(feature = "prometheus")]
        assert_metrics_say_the_server_filters(&factory);
        held.push(keys(&cached));
        factories.push(factory);
    }
    assert!(held[0].is_disjoint(&held[1]), "no Pod in both shards");
    assert_eq!(held[0].len() + held[1].len(), 60, "every Pod in one shard");
    for factory in factories {
        factory.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_a_shard_is_an_informer_of_its_own() {
    let server = FakeApiServer::start_with_pods(0..40)
        .await
        .expect("the fake server starts with the fixture Pods");
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::default(),
    );
    let whole = factory.informer::<Pod>().expect("an informer");
    let by_namespace = Shard::of(0, 2)
        .expect("a shard")
        .keyed_by(ShardKey::Namespace);
    let part = factory
        .informer_for(
            InformerRequest::<PartialObjectMeta<Pod>>::metadata().shard(by_namespace.clone()),
        )
        .expect("an informer of a shard");
    let again = factory
        .informer_for(
            InformerRequest::<PartialObjectMeta<Pod>>::metadata().shard(by_namespace.clone()),
        )
        .expect("the same informer");
    assert_eq!(
        factory.sync_status().len(),
        2,
        "the same request, one informer"
    );
    factory.start().expect("the factory starts");
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");
    let namespaces_in_shard: BTreeSet<String> = whole
        .cache()
        .list()
        .iter()
        .filter(|pod| by_namespace.contains(&***pod))
        .filter_map(|pod| pod.metadata.namespace.clone())
        .collect();
    let namespaces_held: BTreeSet<String> = part
        .cache()
        .list()
        .iter()
        .filter_map(|pod| pod.metadata.namespace.clone())
        .collect();
    assert_eq!(namespaces_held, namespaces_in_shard);
    assert_eq!(again.cache().list().len(), part.cache().list().len());
    factory.shutdown().await;
}

/// The shard's gauge reads 1: the server filters.
#[cfg(feature = "prometheus")]
fn assert_metrics_say_the_server_filters(factory: &SharedInformerFactory) {
    let mut registry = prometheus_client::registry::Registry::default();
    factory.register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    assert!(
        text.lines().any(|line| {
            line.starts_with("kinformer_informer_shard_filtered_by_server{") && line.ends_with(" 1")
        }),
        "{text}"
    );
    assert!(
        text.lines().any(|line| {
            line.starts_with("kinformer_informer_out_of_shard_total{") && line.ends_with(" 0")
        }),
        "{text}"
    );
}
