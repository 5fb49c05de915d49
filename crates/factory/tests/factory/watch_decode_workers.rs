//! Watch events decoded on several tasks at once ([`FactoryOptions::watch_decode_workers`])
//! against kinformer-testing's API server over real HTTP, in both wire formats: handlers see
//! every update, in the order the server made them, with the previous version as the old
//! object.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_factory::{FactoryOptions, SharedInformerFactory};
use kinformer_processor::HandlerFuncs;
use kinformer_reflector::WireFormat;
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use kube_core::{ResourceExt, Selector};
use parking_lot::Mutex;

const PATIENCE: Duration = Duration::from_secs(20);
const PODS: usize = 30;
const ROUNDS: usize = 10;

type Updates = Arc<Mutex<Vec<(Arc<Pod>, Arc<Pod>)>>>;

/// The `round` label of `pod`, `None` before the first update.
fn round(pod: &Pod) -> Option<usize> {
    pod.labels()
        .get("round")
        .map(|round| round.parse().expect("a number"))
}

fn version(pod: &Pod) -> u64 {
    pod.resource_version()
        .expect("a version")
        .parse()
        .expect("the fake's versions are numbers")
}

async fn updates_arrive_in_order(format: WireFormat) {
    let server = FakeApiServer::start_with_pods(0..PODS)
        .await
        .expect("the fake server starts with the fixture Pods");
    let options = FactoryOptions::default()
        .wire_format(format)
        .watch_decode_workers(4);
    let factory = SharedInformerFactory::new(server.client().expect("a client"), options);
    let informer = factory.informer::<Pod>().expect("an informer");
    let updates: Updates = Arc::default();
    let on_update = Arc::clone(&updates);
    informer
        .add_event_handler(
            HandlerFuncs::new().update_func(move |old: Arc<Pod>, new: Arc<Pod>| {
                on_update.lock().push((old, new));
            }),
        )
        .expect("the handler is registered");
    factory.start().expect("the factory starts");
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");

    for round in 0..ROUNDS {
        for i in 0..PODS {
            let mut pod = fixtures::pod(i);
            pod["metadata"]["labels"]["round"] = round.to_string().into();
            server.update_object(pod).expect("the update is valid");
        }
    }
    eventually("every update reached the handler", PATIENCE, || {
        updates.lock().len() == PODS * ROUNDS
    })
    .await;

    let updates = std::mem::take(&mut *updates.lock());
    let versions: Vec<u64> = updates.iter().map(|(_, new)| version(new)).collect();
    assert!(
        versions.windows(2).all(|pair| pair[0] < pair[1]),
        "{format:?}: updates out of the server's order: {versions:?}"
    );
    for (at, (old, new)) in updates.iter().enumerate() {
        let want = at / PODS;
        assert_eq!(round(new), Some(want), "{format:?}: update {at}");
        assert_eq!(
            new.name_any(),
            format!("pod-{}", at % PODS),
            "{format:?}: update {at}"
        );
        assert_eq!(old.name_any(), new.name_any());
        assert_eq!(
            round(old),
            want.checked_sub(1),
            "{format:?}: update {at}'s old object"
        );
    }
    let lister = factory.lister::<Pod>().expect("a lister");
    for pod in lister.list(&Selector::default()) {
        assert_eq!(round(&pod), Some(ROUNDS - 1), "{}", pod.name_any());
    }
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_decoded_on_workers_arrive_in_order_on_protobuf() {
    updates_arrive_in_order(WireFormat::Protobuf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_decoded_on_workers_arrive_in_order_on_json() {
    updates_arrive_in_order(WireFormat::Json).await;
}
