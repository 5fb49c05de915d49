//! A relist in parts, into the default cache and into a compact one: what the cache shows
//! before and after its end, and what handlers are told.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_fifo::{AddKind, DeltaType, Popped, RelistEnd, RelistPart};
use kinformer_processor::{ListenerOptions, ProcessorOptions, SharedProcessor};
use kinformer_store::{Cache, CompactCache, Indexer};

use crate::controller::{
    Applier,
    tests::{applier, deltas, drain, pod, pod_with_uid},
};

/// Pods as JSON, for a compact cache in these tests.
struct Json;

impl kinformer_store::Codec<Pod> for Json {
    fn encode(&self, obj: &Pod) -> Result<Vec<u8>, kinformer_store::CodecError> {
        if obj.metadata.resource_version.as_deref() == Some("13") {
            return Err("version 13 cannot be encoded".into());
        }
        Ok(serde_json::to_vec(obj)?)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Pod, kinformer_store::CodecError> {
        Ok(serde_json::from_slice(bytes)?)
    }
}

fn part(relist: u64, objects: Vec<Arc<Pod>>) -> Popped<Pod> {
    Popped::RelistPart(RelistPart {
        relist,
        objects: objects.into_iter().map(Into::into).collect(),
    })
}

fn end(relist: u64, resource_version: Option<&str>) -> Popped<Pod> {
    Popped::RelistEnd(RelistEnd {
        relist,
        resource_version: resource_version.map(str::to_owned),
    })
}

fn sorted_keys(applier: &Applier<Pod>) -> Vec<String> {
    let mut keys = applier.indexer.list_keys();
    keys.sort();
    keys
}

/// A relist in parts, into the default cache and into a compact one: nothing of it shows
/// (cache or handlers) before its end; at the end the cache is the list, a re-created
/// name and the vanished keys are tombstoned first, then changes go out in list order. An
/// abandoned relist changes nothing.
#[test]
fn a_relist_in_parts_shows_nothing_before_its_end() {
    let caches: [Arc<dyn kinformer_store::Indexer<Pod>>; 2] = [
        Arc::new(Cache::with_namespace_index()),
        Arc::new(kinformer_store::CompactCache::with_namespace_index(
            Arc::new(Json),
        )),
    ];
    for cache in caches {
        let (mut applier, mut stream) = applier();
        applier.indexer = cache;
        for obj in [
            pod("a", "1"),
            pod("b", "1"),
            pod("c", "1"),
            pod_with_uid("e", "1", "u1"),
        ] {
            applier
                .apply(&deltas(DeltaType::Added, obj), AddKind::Live)
                .unwrap();
        }
        drain(&mut stream);
        let before = sorted_keys(&applier);

        applier
            .apply(&part(1, vec![pod("c", "5"), pod("d", "6")]), AddKind::Live)
            .unwrap();
        applier
            .apply(
                &part(1, vec![pod("a", "1"), pod_with_uid("e", "2", "u2")]),
                AddKind::Live,
            )
            .unwrap();
        assert_eq!(
            sorted_keys(&applier),
            before,
            "nothing shows before the end"
        );
        assert_eq!(applier.indexer.get_by_key("default/c"), Some(pod("c", "1")));
        assert!(drain(&mut stream).is_empty());
        applier.apply(&end(1, Some("9")), AddKind::Live).unwrap();
        assert_eq!(
            drain(&mut stream),
            [
                "tombstone:e@1",
                "tombstone:b@1",
                "update:c@5",
                "add:d@6",
                "add:e@2"
            ]
        );
        assert_eq!(
            sorted_keys(&applier),
            ["default/a", "default/c", "default/d", "default/e"]
        );
        assert_eq!(applier.indexer.get_by_key("default/c"), Some(pod("c", "5")));
        assert_eq!(
            applier
                .indexer
                .by_index("namespace", "default")
                .unwrap()
                .len(),
            4
        );

        applier
            .apply(&part(2, vec![pod("x", "1")]), AddKind::Live)
            .unwrap();
        applier.apply(&end(2, None), AddKind::Live).unwrap();
        assert!(drain(&mut stream).is_empty(), "an abandoned relist");
        assert_eq!(sorted_keys(&applier).len(), 4);

        applier
            .apply(&part(4, vec![pod("a", "1")]), AddKind::Live)
            .unwrap();
        applier.apply(&end(4, Some("11")), AddKind::Live).unwrap();
        // Vanished keys go in the cache's order.
        let mut tombstones = drain(&mut stream);
        tombstones.sort();
        assert_eq!(
            tombstones,
            ["tombstone:c@5", "tombstone:d@6", "tombstone:e@2"]
        );
        assert_eq!(sorted_keys(&applier), ["default/a"]);
    }
}

/// An object the cache refuses to stage leaves the cached one as it was and is not
/// notified; the part reports the refusal, and the rest of the relist goes through.
#[test]
fn a_relisted_object_the_cache_refuses_keeps_the_cached_one() {
    let (mut applier, mut stream) = applier();
    applier.indexer = Arc::new(kinformer_store::CompactCache::with_namespace_index(
        Arc::new(Json),
    ));
    for name in ["a", "b"] {
        applier
            .apply(&deltas(DeltaType::Added, pod(name, "1")), AddKind::Live)
            .unwrap();
    }
    drain(&mut stream);
    let refused = applier.apply(
        &part(1, vec![pod("a", "13"), pod("b", "2"), pod("c", "3")]),
        AddKind::Live,
    );
    assert!(
        matches!(refused, Err(kinformer_store::Error::Encode { ref key, .. }) if key == "default/a"),
        "{refused:?}"
    );
    applier.apply(&end(1, Some("9")), AddKind::Live).unwrap();
    assert_eq!(drain(&mut stream), ["update:b@2", "add:c@3"]);
    assert_eq!(applier.indexer.get_by_key("default/a"), Some(pod("a", "1")));
    assert_eq!(
        sorted_keys(&applier),
        ["default/a", "default/b", "default/c"]
    );
}

/// Both caches an informer may hold, empty.
fn caches() -> [Arc<dyn Indexer<Pod>>; 2] {
    [
        Arc::new(Cache::with_namespace_index()),
        Arc::new(CompactCache::with_namespace_index(Arc::new(Json))),
    ]
}

/// `applier()` over `cache`, holding `names` at version 1, its stream drained.
fn holding(
    cache: Arc<dyn Indexer<Pod>>,
    names: &[&str],
) -> (Applier<Pod>, kinformer_processor::EventStream<Pod>) {
    let (mut applier, mut stream) = applier();
    applier.indexer = cache;
    for name in names {
        applier
            .apply(&deltas(DeltaType::Added, pod(name, "1")), AddKind::Live)
            .unwrap();
    }
    drain(&mut stream);
    (applier, stream)
}

/// A relist that lists nothing (every part empty, so none queued) still empties the cache.
#[test]
fn a_relist_of_nothing_empties_the_cache() {
    for cache in caches() {
        let (applier, mut stream) = holding(cache, &["a", "b"]);
        applier.apply(&end(1, Some("5")), AddKind::Live).unwrap();
        let mut told = drain(&mut stream);
        told.sort();
        assert_eq!(told, ["tombstone:a@1", "tombstone:b@1"]);
        assert!(applier.indexer.list_keys().is_empty());
    }
}

/// A key listed twice is one change, to the later object, whether the first was unchanged
/// or changed.
#[test]
fn a_key_listed_twice_is_one_change_to_the_later_object() {
    for cache in caches() {
        let (applier, mut stream) = holding(cache, &["a", "b"]);
        applier
            .apply(&part(1, vec![pod("a", "1"), pod("b", "2")]), AddKind::Live)
            .unwrap();
        applier
            .apply(&part(1, vec![pod("a", "3"), pod("b", "4")]), AddKind::Live)
            .unwrap();
        applier.apply(&end(1, Some("5")), AddKind::Live).unwrap();
        assert_eq!(drain(&mut stream), ["update:b@4", "update:a@3"]);
        assert_eq!(applier.indexer.get_by_key("default/a"), Some(pod("a", "3")));
        assert_eq!(applier.indexer.get_by_key("default/b"), Some(pod("b", "4")));
    }
}

/// Past the first 1,024 changed objects, a relist no longer holds the listed objects decoded:
/// it reads each back from the cache to notify it, in list order all the same.
#[test]
fn a_relist_of_many_changes_notifies_each_in_list_order() {
    for cache in caches() {
        let (applier, mut stream) = holding(cache, &[]);
        let names: Vec<String> = (0..1100).map(|i| format!("p{i}")).collect();
        for chunk in names.chunks(300) {
            let pods = chunk.iter().map(|name| pod(name, "2")).collect();
            applier.apply(&part(1, pods), AddKind::Live).unwrap();
        }
        applier.apply(&end(1, Some("3")), AddKind::Live).unwrap();
        let want: Vec<String> = names.iter().map(|name| format!("add:{name}@2")).collect();
        assert_eq!(drain(&mut stream), want);
        assert_eq!(applier.indexer.len(), 1100);
    }
}

/// An object a relist lists unchanged is kept in the cache, and only a listener due for a
/// resync hears of it, after the changes.
#[test]
fn a_relist_resyncs_unchanged_objects_only_for_listeners_due() {
    for cache in caches() {
        let (mut applier, _) = holding(cache, &["a", "b"]);
        // A processor that checks for resyncs (the informer's resync period); a fresh one,
        // so its listeners are the stream below and one that asks for none.
        applier.processor =
            SharedProcessor::new(ProcessorOptions::default().resync_period(Duration::from_secs(1)));
        let mut stream = applier
            .processor
            .subscribe(
                ListenerOptions::new()
                    .name("never")
                    .resync_period(Duration::ZERO),
            )
            .expect("a stream");
        let mut due = applier
            .processor
            .subscribe(
                ListenerOptions::new()
                    .name("due")
                    .resync_period(Duration::from_secs(1)),
            )
            .expect("a stream");
        drain(&mut due);
        let later = tokio::time::Instant::now() + Duration::from_secs(2);
        assert!(applier.processor.should_resync(later));
        applier
            .apply(&part(1, vec![pod("a", "1"), pod("b", "2")]), AddKind::Live)
            .unwrap();
        applier.apply(&end(1, Some("3")), AddKind::Live).unwrap();
        assert_eq!(drain(&mut stream), ["update:b@2"]);
        assert_eq!(drain(&mut due), ["update:b@2", "update:a@1"]);
    }
}
