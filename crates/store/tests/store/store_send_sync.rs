//! The public types cross threads: informers share the cache with handler tasks and listers.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kinformer_store::{
    Cache, CacheReader, DeletedFinalStateUnknown, Error, IndexFunc, Indexer, Indexers, KeyFunc,
    Lister, ObjectOrTombstone, Store,
};

fn send_sync<T: Send + Sync>() {}
fn send_sync_static<T: Send + Sync + 'static>() {}

#[test]
fn caches_stores_and_listers_are_send_and_sync() {
    send_sync_static::<Cache<Pod>>();
    send_sync_static::<Lister<Pod>>();
    send_sync_static::<Arc<dyn Indexer<Pod>>>();
    send_sync_static::<Arc<dyn Store<Pod>>>();
    send_sync_static::<Arc<dyn CacheReader<Pod>>>();
}

#[test]
fn funcs_tombstones_and_errors_are_send_and_sync() {
    send_sync::<KeyFunc<Pod>>();
    send_sync::<IndexFunc<Pod>>();
    send_sync::<Indexers<Pod>>();
    send_sync_static::<DeletedFinalStateUnknown<Pod>>();
    send_sync_static::<ObjectOrTombstone<Pod>>();
    fn error<E: std::error::Error + Send + Sync + 'static>() {}
    error::<Error>();
}

#[test]
fn a_cache_is_usable_as_every_seam_it_implements() {
    let cache = Arc::new(Cache::<Pod>::with_namespace_index());
    let as_indexer: Arc<dyn Indexer<Pod>> = cache.clone();
    // The owner's handle narrows to either half without a wrapper.
    let as_writer: Arc<dyn Store<Pod>> = as_indexer.clone();
    let as_reader: Arc<dyn CacheReader<Pod>> = as_indexer.clone();
    let mut pod = Pod::default();
    pod.metadata.name = Some("web-0".to_owned());
    as_writer.add(Arc::new(pod).into()).expect("keyed");
    let moved = std::thread::spawn(move || as_indexer.list().len()).join();
    assert_eq!(moved.ok(), Some(1));
    assert_eq!(as_reader.list_keys(), ["web-0"]);
    assert_eq!(cache.len(), 1);
}
