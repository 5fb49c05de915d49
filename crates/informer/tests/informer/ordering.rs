//! Per key, every handler sees the changes in the order the server made them, on both queues.

use crate::common;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::FakeSource;
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{HandlerFuncs, InformerOptions, QueueKind, SharedIndexInformer};
use kinformer_store::ObjectOrTombstone;
use kinformer_testing::wait_until;
use tokio_util::sync::CancellationToken;

type Seen = Arc<Mutex<BTreeMap<String, Vec<u64>>>>;

fn version_of(pod: &Pod) -> u64 {
    pod.metadata
        .resource_version
        .as_deref()
        .and_then(|version| version.parse().ok())
        .unwrap_or(0)
}

fn recording(seen: &Seen) -> HandlerFuncs<Pod> {
    let record = |seen: Seen| {
        move |pod: &Pod| {
            let name = common::name_of(pod);
            seen.lock()
                .unwrap()
                .entry(name)
                .or_default()
                .push(version_of(pod));
        }
    };
    let (on_add, on_update, on_delete) = (
        record(Arc::clone(seen)),
        record(Arc::clone(seen)),
        record(Arc::clone(seen)),
    );
    HandlerFuncs::new()
        .add_func(move |pod: Arc<Pod>, _| on_add(&pod))
        .update_func(move |_, pod: Arc<Pod>| on_update(&pod))
        .delete_func(move |obj: ObjectOrTombstone<Pod>| on_delete(obj.object()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_handler_sees_each_keys_changes_in_server_order() {
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let source = FakeSource::new();
        let informer = SharedIndexInformer::new(
            Arc::clone(&source),
            InformerOptions::<Pod>::new().queue(queue),
        );
        let handlers: Vec<Seen> = (0..3).map(|_| Seen::default()).collect();
        for seen in &handlers {
            informer.add_event_handler(recording(seen)).unwrap();
        }
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, token) = (informer.clone(), token.clone());
            async move { informer.run(token).await }
        });
        assert_eq!(
            informer
                .wait_for_cache_sync(Duration::from_secs(20), &token)
                .await,
            Ok(())
        );

        // The server's own record: each key's resourceVersions, in the order it produced them.
        let mut expected: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut revision = 0;
        for step in 0..900_u64 {
            let name = format!("pod{}", step % 30);
            revision += 1;
            match (step / 30) % 3 {
                0 => source.add(&name),
                1 => source.modify(&name),
                _ => source.delete(&name),
            }
            expected.entry(name).or_default().push(revision);
        }
        for (index, seen) in handlers.iter().enumerate() {
            assert!(
                wait_until(Duration::from_secs(20), || *seen.lock().unwrap()
                    == expected)
                .await,
                "{queue:?}: handler {index} saw a different per-key order"
            );
        }
        token.cancel();
        task.await.unwrap().unwrap();
    }
}
