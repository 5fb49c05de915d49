//! The informer over a user-written store (the `Indexer` seam), the index funcs it is given,
//! and the requeue policy: a change the store refuses is retried with `retry_on_error`,
//! dropped without it.

use crate::common;

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{FakeSource, Recorder};
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{InformerCache, InformerOptions, QueueKind, SharedIndexInformer};
use kinformer_store::{
    Cache, CacheReader, Error, Incoming, IndexFunc, Indexer, Indexers, OldObject, Result, Store,
    meta_namespace_key_func,
};
use kinformer_testing::wait_until;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

/// A cache that refuses the first write of each name it was told to, as a store backed by a
/// flaky resource would.
#[derive(Default)]
struct FlakyCache {
    inner: Cache<Pod>,
    fail_once: Mutex<HashSet<String>>,
}

impl FlakyCache {
    fn check(&self, obj: &Pod) -> Result<()> {
        let name = common::name_of(obj);
        if self.fail_once.lock().unwrap().remove(&name) {
            return Err(Error::KeyFunc {
                reason: format!("{name} refused once"),
            });
        }
        Ok(())
    }
}

impl Store<Pod> for FlakyCache {
    fn add(&self, obj: Incoming<Pod>) -> Result<()> {
        self.check(obj.object())?;
        self.inner.add(obj)
    }

    fn update(&self, obj: Incoming<Pod>) -> Result<()> {
        self.check(obj.object())?;
        self.inner.update(obj)
    }

    fn delete(&self, obj: Arc<Pod>) -> Result<()> {
        self.inner.delete(obj)
    }

    fn replace(&self, list: Vec<Arc<Pod>>, resource_version: &str) -> Result<()> {
        self.inner.replace(list, resource_version)
    }

    fn resync(&self) -> Result<()> {
        self.inner.resync()
    }
}

impl CacheReader<Pod> for FlakyCache {
    fn get_by_key(&self, key: &str) -> Option<Arc<Pod>> {
        self.inner.get_by_key(key)
    }

    fn get(&self, obj: &Pod) -> Result<Option<Arc<Pod>>> {
        self.inner.get(obj)
    }

    fn list(&self) -> Vec<Arc<Pod>> {
        self.inner.list()
    }

    fn list_keys(&self) -> Vec<String> {
        self.inner.list_keys()
    }

    fn by_index(&self, index_name: &str, indexed_value: &str) -> Result<Vec<Arc<Pod>>> {
        self.inner.by_index(index_name, indexed_value)
    }

    fn index(&self, index_name: &str, obj: &Pod) -> Result<Vec<Arc<Pod>>> {
        self.inner.index(index_name, obj)
    }

    fn index_keys(&self, index_name: &str, indexed_value: &str) -> Result<Vec<String>> {
        self.inner.index_keys(index_name, indexed_value)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner.list_index_func_values(index_name)
    }

    fn index_names(&self) -> Vec<String> {
        self.inner.index_names()
    }
}

impl Indexer<Pod> for FlakyCache {
    fn upsert(&self, obj: Incoming<Pod>) -> Result<Option<OldObject<Pod>>> {
        self.check(obj.object())?;
        self.inner.upsert(obj)
    }

    fn indexers(&self) -> Indexers<Pod> {
        self.inner.indexers()
    }

    fn add_indexers(&self, indexers: Indexers<Pod>) -> Result<()> {
        self.inner.add_indexers(indexers)
    }
}

async fn run_with_flaky_store(queue: QueueKind, retry: bool) -> (Vec<String>, Vec<String>) {
    let source = FakeSource::new();
    source.add("pod0");
    let store = Arc::new(FlakyCache::default());
    let informer = SharedIndexInformer::new(
        Arc::clone(&source),
        InformerOptions::<Pod>::new()
            .cache(InformerCache::Own(
                Arc::clone(&store) as Arc<dyn Indexer<Pod>>
            ))
            .queue(queue)
            .retry_on_error(retry),
    );
    let recorder = Recorder::new();
    informer.add_event_handler(recorder.handler()).unwrap();
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    assert_eq!(informer.wait_for_cache_sync(WAIT, &token).await, Ok(()));

    store.fail_once.lock().unwrap().insert("pod1".to_owned());
    source.add("pod1");
    source.add("pod2");
    let expected = if retry { 3 } else { 2 };
    assert!(wait_until(WAIT, || recorder.count() >= expected).await);
    // A change after the others: once it arrives, a retry (or a wrongly repeated delivery)
    // of what came before would have too. It is taken off the results again.
    source.add("barrier");
    assert!(wait_until(WAIT, || recorder.names().contains(&"barrier".to_owned())).await);
    let mut keys: Vec<String> = CacheReader::list_keys(store.as_ref())
        .into_iter()
        .filter(|key| !key.ends_with("/barrier"))
        .collect();
    keys.sort();
    token.cancel();
    task.await.unwrap().unwrap();
    let events = recorder
        .events()
        .into_iter()
        .filter(|event| !event.ends_with(":barrier"))
        .collect();
    (keys, events)
}

/// The in-order queue puts a refused item back at its head, so order is kept. The DeltaFIFO puts
/// it back at its tail, as client-go's `AddIfNotPresent` does, so whether the retried key comes
/// before or after pod2 depends on whether pod2 was queued before pod1 was refused; either way
/// each change arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_change_is_retried_with_retry_on_error() {
    let expected = ["initial:pod0", "add:pod1", "add:pod2"];
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let (keys, mut events) = run_with_flaky_store(queue, true).await;
        assert_eq!(
            keys,
            ["default/pod0", "default/pod1", "default/pod2"],
            "{queue:?}"
        );
        if queue == QueueKind::DeltaFifo {
            // The initial list comes first regardless; only the two later adds may swap.
            events[1..].sort();
        }
        assert_eq!(events, expected, "{queue:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_change_is_dropped_without_retry_on_error() {
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let (keys, events) = run_with_flaky_store(queue, false).await;
        assert_eq!(keys, ["default/pod0", "default/pod2"], "{queue:?}");
        assert_eq!(events, ["initial:pod0", "add:pod2"], "{queue:?}");
    }
}

/// The informer's index funcs go into a store of the user's own; a store that refuses them
/// (it has an index of the same name) stops `run` with its error before anything starts.
#[tokio::test]
async fn index_funcs_go_into_a_store_of_your_own_or_stop_the_informer() {
    let by_node: IndexFunc<Pod> = Arc::new(|pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .into_iter()
            .collect()
    });
    let indexers = || Indexers::from([("by-node".to_owned(), Arc::clone(&by_node))]);
    let options = |store: &Arc<Cache<Pod>>| {
        InformerOptions::<Pod>::new()
            .indexers(indexers())
            .cache(InformerCache::Own(
                Arc::clone(store) as Arc<dyn Indexer<Pod>>
            ))
    };

    let own = Arc::new(Cache::<Pod>::default());
    assert!(own.by_index("by-node", "node-1").is_err(), "no index yet");
    let _informer = SharedIndexInformer::new(FakeSource::new(), options(&own));
    assert_eq!(
        own.by_index("by-node", "node-1").map(|pods| pods.len()),
        Ok(0)
    );

    let taken = Arc::new(Cache::new(
        Arc::new(meta_namespace_key_func::<Pod>),
        indexers(),
    ));
    let informer = SharedIndexInformer::new(FakeSource::new(), options(&taken));
    let refused = informer.run(CancellationToken::new()).await;
    assert!(
        matches!(
            &refused,
            Err(kinformer_informer::Error::Store(Error::IndexerConflict { name })) if name == "by-node"
        ),
        "{refused:?}"
    );
    assert!(!informer.has_started());
}
