//! Shards through the factory, against kinformer-testing's API server over real HTTP: a
//! factory-wide shard scopes every informer it hands out, a request's shard gets an informer of
//! its own, two factories of shards 0 and 1 of 2 hold every Pod once between them, and the
//! factory's shard moves with every informer that takes it.

use std::{collections::BTreeSet, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_factory::{Error, FactoryOptions, InformerRequest, SharedInformerFactory};
use kinformer_informer::{SharedIndexInformer, WaitError};
use kinformer_reflector::ShardMode;
use kinformer_store::{Object, Shard, ShardKey, meta_namespace_key_func};
use kinformer_testing::{FakeApiServer, fixtures};
use kube_client::Api;
use kube_core::PartialObjectMeta;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(20);

/// A Pod's cache key, as the informers key it.
fn key(pod: &Pod) -> String {
    meta_namespace_key_func(pod).expect("a fixture Pod has a name")
}

fn keys(pods: &[std::sync::Arc<Pod>]) -> BTreeSet<String> {
    pods.iter().map(|pod| key(pod)).collect()
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

fn held<K: Object>(informer: &SharedIndexInformer<K>) -> BTreeSet<String> {
    informer.cache().list_keys().into_iter().collect()
}

/// The keys of `pods` in `shard`, and in `namespace` when one is given.
fn model(pods: &[Pod], shard: &Shard, namespace: Option<&str>) -> BTreeSet<String> {
    pods.iter()
        .filter(|pod| shard.contains(*pod))
        .filter(|pod| {
            namespace.is_none_or(|namespace| pod.metadata.namespace.as_deref() == Some(namespace))
        })
        .map(key)
        .collect()
}

/// The factory's own shard moves: every informer that takes it (typed, metadata-only, one
/// narrowed to a namespace, one held by a lease, one asked for after the move) holds the new
/// shard whole, and keeps its place in the factory, found by the same request and by a lease
/// taken before the move; an informer asked for with a shard of its own stays where it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factorys_shard_moves_every_informer_that_takes_it() {
    let server = FakeApiServer::start_with_pods(0..60)
        .await
        .expect("the fake server starts with the fixture Pods");
    let client = server.client().expect("a client");
    let pods = Api::<Pod>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("the Pods list")
        .items;
    let (first, second) = (Shard::of(0, 2).unwrap(), Shard::of(1, 2).unwrap());
    let (ns0, ns1) = (fixtures::namespace_of(0), fixtures::namespace_of(1));
    assert_ne!(ns0, ns1);
    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions::default().shard(first.clone()),
    );
    let typed = factory.informer::<Pod>().expect("an informer");
    let metadata = factory
        .informer_for(InformerRequest::<PartialObjectMeta<Pod>>::metadata())
        .expect("a metadata informer");
    let narrowed = factory
        .informer_for(InformerRequest::<Pod>::typed().namespace(ns0.clone()))
        .expect("an informer of one namespace");
    let fixed = factory
        .informer_for(InformerRequest::<Pod>::typed().shard(first.clone()))
        .expect("an informer of a shard of its own");
    let leased = factory
        .lease(InformerRequest::<Pod>::typed().namespace(ns1.clone()))
        .expect("a leased informer");
    assert_eq!(
        factory.sync_status().len(),
        5,
        "a shard of its own is not the factory's"
    );
    factory.start().expect("the factory starts");
    let token = CancellationToken::new();
    factory
        .wait_for_shard(&first, PATIENCE, &token)
        .await
        .expect("the first shard is held");
    assert_eq!(held(&typed), model(&pods, &first, None));
    assert_eq!(held(&metadata), model(&pods, &first, None));
    assert_eq!(held(&narrowed), model(&pods, &first, Some(&ns0)));
    assert_eq!(held(&leased), model(&pods, &first, Some(&ns1)));

    factory
        .set_shard(second.clone())
        .expect("the factory has a shard");
    let moved_on = factory
        .wait_for_shard(&first, PATIENCE, &token)
        .await
        .expect_err("the factory left the first shard");
    assert!(
        matches!(moved_on, WaitError::ShardChanged { .. }),
        "{moved_on}"
    );
    let later = factory
        .informer_for(InformerRequest::<Pod>::typed().namespace(fixtures::namespace_of(2)))
        .expect("an informer asked for after the move");
    factory
        .wait_for_shard(&second, PATIENCE, &token)
        .await
        .expect("the second shard is held");
    assert_eq!(held(&typed), model(&pods, &second, None));
    assert_eq!(held(&metadata), model(&pods, &second, None));
    assert_eq!(held(&narrowed), model(&pods, &second, Some(&ns0)));
    assert_eq!(held(&leased), model(&pods, &second, Some(&ns1)));
    let ns2 = fixtures::namespace_of(2);
    assert_eq!(held(&later), model(&pods, &second, Some(&ns2)));
    assert_eq!(fixed.cached_shard().as_deref(), Some(&first));
    assert_eq!(held(&fixed), model(&pods, &first, None));

    // The same requests find the same informers, whose keys name where the shard is now.
    factory.informer::<Pod>().expect("the same informer");
    factory
        .informer_for(InformerRequest::<Pod>::typed().namespace(ns0.clone()))
        .expect("the same informer");
    let shards: Vec<Option<Shard>> = factory
        .sync_status()
        .keys()
        .map(|key| key.selection().shard_selector().cloned())
        .collect();
    assert_eq!(shards.len(), 6, "{shards:?}");
    assert_eq!(
        shards
            .iter()
            .filter(|shard| shard.as_ref() == Some(&second))
            .count(),
        5
    );
    assert_eq!(factory.default_selection().shard_selector(), Some(&second));
    // A lease taken before the move lets its informer go after it.
    drop(leased);
    assert_eq!(factory.sync_status().len(), 5, "the leased informer left");

    assert!(
        factory.set_shard(second.clone()).is_ok(),
        "the same shard again"
    );
    let unsharded = SharedInformerFactory::new(client, FactoryOptions::default());
    assert!(matches!(unsharded.set_shard(first), Err(Error::NoShard)));
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
