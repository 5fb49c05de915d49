//! The public types cross threads: informers share the cache with handler tasks and listers.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kinformer_store::{
    Cache, DeletedFinalStateUnknown, Error, IndexFunc, Indexer, Indexers, KeyFunc, KeyListerGetter,
    Lister, NamespaceLister, ObjectOrTombstone, Store, ThreadSafeStore,
};

fn send_sync<T: Send + Sync>() {}
fn send_sync_static<T: Send + Sync + 'static>() {}

#[test]
fn caches_stores_and_listers_are_send_and_sync() {
    send_sync_static::<Cache<Pod>>();
    send_sync_static::<ThreadSafeStore<Pod>>();
    send_sync_static::<Lister<Pod>>();
    send_sync_static::<NamespaceLister<Pod>>();
    send_sync_static::<Arc<dyn Indexer<Pod>>>();
    send_sync_static::<Arc<dyn Store<Pod, Item = Arc<Pod>>>>();
    send_sync_static::<Arc<dyn KeyListerGetter<Pod>>>();
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
    let as_known: Arc<dyn KeyListerGetter<Pod>> = cache;
    let moved = std::thread::spawn(move || as_indexer.list().len()).join();
    assert_eq!(moved.ok(), Some(0));
    assert!(as_known.list_keys().is_empty());
}
