//! The controller's half of the informer: what happens to each popped item (client-go's
//! `HandleDeltas`, `processDeltas`, `processDeltasInBatch` and `processReplacedAllInfo`).

mod relist;

use std::{collections::HashSet, sync::Arc};

use kinformer_fifo::{AddKind, Delta, DeltaType, ListEnd, Popped, ReplacedAll};
use kinformer_processor::{DistributionBatch, Notification, Recipients, SharedProcessor};
use kinformer_reflector::ShardedListerWatcher;
use kinformer_store::{
    DeletedFinalStateUnknown, Indexer, KeyFunc, Object, ObjectOrTombstone, OldObject, Shard,
};
use parking_lot::Mutex;
use tracing::{debug, trace};

use crate::progress::Progress;
use relist::Relisting;

/// Applies popped items to the cache, then hands the matching notifications to the processor.
pub(crate) struct Applier<K> {
    pub(crate) indexer: Arc<dyn Indexer<K>>,
    pub(crate) processor: SharedProcessor<K>,
    pub(crate) key_func: KeyFunc<K>,
    /// What has been applied so far, for waits on the cache.
    pub(crate) progress: Progress,
    /// The informer's lister-watcher when it informs a shard, whose shard tells a deletion
    /// from an object leaving the shard.
    pub(crate) sharded: Option<ShardedListerWatcher<K>>,
    /// The relist whose parts are being staged, if any.
    pub(crate) relisting: Mutex<Option<Relisting<K>>>,
}

impl<K: Object> Applier<K> {
    /// Processes one popped item; the caller holds the informer's delta lock, so no late
    /// handler can join between the cache change and its notification.
    pub(crate) fn apply(&self, popped: &Popped<K>, kind: AddKind) -> kinformer_store::Result<()> {
        let applied = self.apply_to_cache(popped, kind);
        // A failed item is not retried from here, so it counts as applied too: the cache has
        // moved past it.
        self.progress.applied(popped);
        applied
    }

    fn apply_to_cache(&self, popped: &Popped<K>, kind: AddKind) -> kinformer_store::Result<()> {
        // One popped item can carry a thousand deltas; handler threads are woken once per
        // handoff of them, and for the rest when the item is done.
        let out = self.processor.batch();
        match popped {
            Popped::Deltas(deltas) => {
                for delta in deltas {
                    self.apply_delta(delta, kind, &out)?;
                }
                Ok(())
            }
            Popped::Batch(batch) => {
                // As client-go does for a store without transactions: every delta is tried,
                // and the first failure is reported after the rest went through.
                let mut first_error = None;
                for delta in batch {
                    if let Err(error) = self.apply_delta(delta, kind, &out) {
                        first_error.get_or_insert(error);
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
            Popped::ReplacedAll(replaced) => self.apply_replaced_all(replaced, kind, &out),
            Popped::ListEnd(end) => {
                self.apply_list_end(end, &out);
                Ok(())
            }
            Popped::RelistPart(part) => self.stage_relist_part(part),
            Popped::RelistEnd(end) => self.apply_relist_end(end, kind, &out),
            Popped::SyncAll => {
                for obj in self.indexer.list() {
                    out.distribute(
                        Notification::update(Arc::clone(&obj), obj),
                        Recipients::DueForResync,
                    );
                }
                Ok(())
            }
            Popped::Bookmark { resource_version } => {
                trace!(%resource_version, "bookmark popped");
                Ok(())
            }
            _ => {
                debug!("popped item of an unknown kind ignored");
                Ok(())
            }
        }
    }

    fn apply_delta(
        &self,
        delta: &Delta<K>,
        kind: AddKind,
        out: &DistributionBatch<'_, K>,
    ) -> kinformer_store::Result<()> {
        match delta.kind {
            DeltaType::Deleted => {
                self.indexer.delete(Arc::clone(delta.object()))?;
                // A tombstone is a relist's inference (the queue's replace made it); an object
                // is a deletion the watch reported, which no shard change explains.
                let deleted = match &delta.object {
                    ObjectOrTombstone::Tombstone(tombstone) => {
                        ObjectOrTombstone::Tombstone(vanished(
                            self.shard().as_deref(),
                            tombstone.key.clone(),
                            Arc::clone(&tombstone.obj),
                        ))
                    }
                    object => object.clone(),
                };
                out.distribute(Notification::delete(deleted), Recipients::All);
            }
            DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync => {
                let obj = Arc::clone(delta.object());
                // One key computation and one lock: the cache hands back what it replaced. A
                // compact cache keeps the bytes the watch decoded the object from, if any, and
                // hands back the replaced object still encoded: only a handler that reads it
                // decodes it, on its own thread.
                match self.indexer.upsert(delta.incoming())? {
                    Some(old) if is_recreated(old.uid(), obj.uid()) => {
                        // A re-creation is rare; its tombstone needs the object itself. When
                        // the old state does not decode (the cache reports that), only the add
                        // is left to tell.
                        if let Some(old) = old.get() {
                            let tombstone = self.tombstone(old)?;
                            out.distribute(Notification::delete(tombstone), Recipients::All);
                        }
                        out.distribute(add_notification(obj, kind), Recipients::All);
                    }
                    Some(old) => distribute_update(out, old, obj),
                    None => {
                        out.distribute(add_notification(obj, kind), Recipients::All);
                    }
                }
            }
        }
        Ok(())
    }

    /// A whole relist: tombstones for every cached key the list no longer has, the cache
    /// replaced in one step, then deletions first and adds or updates in list order, as
    /// client-go's `processReplacedAllInfo` does.
    fn apply_replaced_all(
        &self,
        replaced: &ReplacedAll<K>,
        kind: AddKind,
        out: &DistributionBatch<'_, K>,
    ) -> kinformer_store::Result<()> {
        let mut listed_keys = HashSet::with_capacity(replaced.objects.len());
        let mut replacements = Vec::with_capacity(replaced.objects.len());
        let mut deletions = Vec::new();
        for obj in &replaced.objects {
            let key = (self.key_func)(obj)?;
            // A compact cache hands the cached object over undecoded: telling an update from
            // a resync or a re-creation needs only its UID and resourceVersion.
            let mut old = self.indexer.get_lazy(&key);
            // The name was deleted and created again while no watch saw it: the old object
            // goes with the other deletions (unless it does not decode, which the cache reports),
            // the new one arrives as an add.
            if let Some(recreated) = old.take_if(|old| is_recreated(old.uid(), obj.uid()))
                && let Some(recreated) = recreated.get()
            {
                deletions.push(DeletedFinalStateUnknown::new(key.clone(), recreated));
            }
            listed_keys.insert(key);
            replacements.push((old, Arc::clone(obj)));
        }
        let shard = self.shard();
        for key in self.indexer.list_keys() {
            if listed_keys.contains(&key) {
                continue;
            }
            if let Some(obj) = self.indexer.get_by_key(&key) {
                deletions.push(vanished(shard.as_deref(), key, obj));
            }
        }
        self.indexer
            .replace(replaced.objects.clone(), &replaced.resource_version)?;
        for tombstone in deletions {
            out.distribute(Notification::delete(tombstone), Recipients::All);
        }
        for (old, new) in replacements {
            match old {
                Some(old) => distribute_update(out, old, new),
                None => out.distribute(add_notification(new, kind), Recipients::All),
            }
        }
        Ok(())
    }
}

impl<K: Object> Applier<K> {
    /// The end of a list taken in parts, whose objects were applied as they came: every
    /// cached key it did not name goes, with a tombstone, as in a whole relist.
    fn apply_list_end(&self, end: &ListEnd, out: &DistributionBatch<'_, K>) {
        let shard = self.shard();
        for key in self.indexer.list_keys() {
            if end.listed.contains(&key) {
                continue;
            }
            let Some(obj) = self.indexer.get_by_key(&key) else {
                continue;
            };
            if let Err(error) = self.indexer.delete(Arc::clone(&obj)) {
                debug!(%key, error = %error, "a key the list did not name could not be deleted");
                continue;
            }
            out.distribute(
                Notification::delete(vanished(shard.as_deref(), key, obj)),
                Recipients::All,
            );
        }
    }

    /// The informer's shard now, when it informs one: read once for all the tombstones of a
    /// relist.
    fn shard(&self) -> Option<Arc<Shard>> {
        self.sharded.as_ref().map(ShardedListerWatcher::shard)
    }

    /// The tombstone of `old`, a cached object whose deletion no watch event reported: the
    /// name was created again, so it was deleted whatever the shard.
    fn tombstone(&self, old: Arc<K>) -> kinformer_store::Result<DeletedFinalStateUnknown<K>> {
        Ok(DeletedFinalStateUnknown::new((self.key_func)(&old)?, old))
    }
}

/// The tombstone of `obj`, cached under `key`, which a relist no longer has: marked as having
/// left the shard when the informer's `shard` no longer holds it (its shard changed), else a
/// deletion no watch event reported.
fn vanished<K: Object>(
    shard: Option<&Shard>,
    key: String,
    obj: Arc<K>,
) -> DeletedFinalStateUnknown<K> {
    let left_shard = shard.is_some_and(|shard| !shard.contains(&*obj));
    DeletedFinalStateUnknown {
        left_shard,
        ..DeletedFinalStateUnknown::new(key, obj)
    }
}

/// Whether the cached object and the new one under the same key, given their UIDs, are two
/// objects: the name was deleted and created again (a new UID) while no watch saw the
/// deletion. Such a pair is a deletion and an add, never an update, so a controller keyed on
/// UID does not act on a stale identity. Objects without a UID (projections that drop it) are never told apart.
fn is_recreated(old: Option<&str>, new: Option<&str>) -> bool {
    match (old, new) {
        (Some(old), Some(new)) => !old.is_empty() && !new.is_empty() && old != new,
        _ => false,
    }
}

/// An update whose resourceVersion did not change is a resync: only listeners due for one
/// receive it (client-go's `sharedIndexInformer.OnUpdate`).
fn distribute_update<K: Object>(out: &DistributionBatch<'_, K>, old: OldObject<K>, new: Arc<K>) {
    let recipients = if old.resource_version() == new.resource_version() {
        Recipients::DueForResync
    } else {
        Recipients::All
    };
    out.distribute(Notification::update(old, new), recipients);
}

fn add_notification<K>(obj: Arc<K>, kind: AddKind) -> Notification<K> {
    match kind {
        AddKind::InitialList => Notification::initial_add(obj),
        AddKind::Live => Notification::add(obj),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::{FutureExt, StreamExt};
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_fifo::{AddKind, Delta, DeltaType, Deltas, Popped, ReplacedAll};
    use kinformer_processor::{EventStream, ListenerOptions, Notification, SharedProcessor};
    use kinformer_store::{Cache, meta_namespace_key_func};
    use kube_core::ObjectMeta;

    use super::Applier;
    use crate::progress::Progress;

    pub(super) fn pod(name: &str, version: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some(name.into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    /// A Pod with a UID: `pod_with_uid("a", "5", "u2")` is incarnation `u2` of `a`.
    pub(super) fn pod_with_uid(name: &str, version: &str, uid: &str) -> Arc<Pod> {
        let mut pod = Arc::unwrap_or_clone(pod(name, version));
        pod.metadata.uid = Some(uid.into());
        Arc::new(pod)
    }

    pub(super) fn applier() -> (Applier<Pod>, EventStream<Pod>) {
        let processor = SharedProcessor::default();
        let stream = processor
            .subscribe(ListenerOptions::new().name("test"))
            .expect("a stream");
        let applier = Applier {
            indexer: Arc::new(Cache::with_namespace_index()),
            processor,
            key_func: Arc::new(meta_namespace_key_func::<Pod>),
            progress: Progress::new(true),
            sharded: None,
            relisting: parking_lot::Mutex::new(None),
        };
        (applier, stream)
    }

    /// Everything the stream holds now, described as `kind:name@version`.
    pub(super) fn drain(stream: &mut EventStream<Pod>) -> Vec<String> {
        let mut seen = Vec::new();
        while let Some(Some(notification)) = stream.next().now_or_never() {
            let describe = |kind: &str, pod: &Pod| {
                format!(
                    "{kind}:{}@{}",
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    pod.metadata.resource_version.as_deref().unwrap_or_default()
                )
            };
            seen.push(match &notification {
                Notification::Add {
                    obj,
                    kind: AddKind::InitialList,
                } => describe("initial", obj),
                Notification::Add { obj, .. } => describe("add", obj),
                Notification::Update { new, .. } => describe("update", new),
                Notification::Delete(obj) if obj.is_tombstone() => {
                    describe("tombstone", obj.object())
                }
                Notification::Delete(obj) => describe("delete", obj.object()),
            });
        }
        seen
    }

    pub(super) fn deltas(kind: DeltaType, obj: Arc<Pod>) -> Popped<Pod> {
        Popped::Deltas(Deltas::one(Delta::new(kind, obj)))
    }

    #[test]
    fn deltas_change_the_cache_and_notify_in_order() {
        let (applier, mut stream) = applier();
        applier
            .apply(
                &deltas(DeltaType::Added, pod("a", "1")),
                AddKind::InitialList,
            )
            .unwrap();
        applier
            .apply(&deltas(DeltaType::Updated, pod("a", "2")), AddKind::Live)
            .unwrap();
        applier
            .apply(&deltas(DeltaType::Deleted, pod("a", "3")), AddKind::Live)
            .unwrap();
        assert_eq!(
            drain(&mut stream),
            ["initial:a@1", "update:a@2", "delete:a@3"]
        );
        assert!(applier.indexer.list().is_empty());
    }

    #[test]
    fn an_added_delta_for_a_cached_key_is_an_update() {
        let (applier, mut stream) = applier();
        let batch = Popped::Batch(vec![
            Delta::new(DeltaType::Added, pod("a", "1")),
            Delta::new(DeltaType::Added, pod("b", "1")),
        ]);
        applier.apply(&batch, AddKind::Live).unwrap();
        applier
            .apply(&deltas(DeltaType::Added, pod("a", "2")), AddKind::Live)
            .unwrap();
        assert_eq!(drain(&mut stream), ["add:a@1", "add:b@1", "update:a@2"]);
    }

    /// client-go's processReplacedAllInfo: the cache is replaced in one step, the vanished
    /// keys are deleted with tombstones first, then the list is delivered in order.
    #[test]
    fn a_replaced_all_tombstones_vanished_keys_then_delivers_the_list_in_order() {
        let (applier, mut stream) = applier();
        for name in ["a", "b", "c"] {
            applier
                .apply(&deltas(DeltaType::Added, pod(name, "1")), AddKind::Live)
                .unwrap();
        }
        drain(&mut stream);
        let relist = Popped::ReplacedAll(ReplacedAll {
            resource_version: "9".into(),
            objects: vec![pod("c", "5"), pod("d", "6"), pod("a", "1")],
        });
        applier.apply(&relist, AddKind::Live).unwrap();
        // a is unchanged: a resync, which this listener (asking for none) does not get.
        assert_eq!(
            drain(&mut stream),
            ["tombstone:b@1", "update:c@5", "add:d@6"]
        );
        let mut keys = applier.indexer.list_keys();
        keys.sort();
        assert_eq!(keys, ["default/a", "default/c", "default/d"]);
    }

    /// client-go's OnUpdate: an unchanged resourceVersion is a resync, so a listener that is
    /// not due for one does not receive it.
    #[test]
    fn an_unchanged_resource_version_reaches_only_listeners_due_for_a_resync() {
        let (applier, mut stream) = applier();
        applier
            .apply(&deltas(DeltaType::Added, pod("a", "1")), AddKind::Live)
            .unwrap();
        // A resync check with no listener due (the stream asked for no resyncs) clears every
        // syncing flag.
        assert!(!applier.processor.should_resync(tokio::time::Instant::now()));
        applier
            .apply(&deltas(DeltaType::Replaced, pod("a", "1")), AddKind::Live)
            .unwrap();
        applier.apply(&Popped::SyncAll, AddKind::Live).unwrap();
        applier
            .apply(&deltas(DeltaType::Replaced, pod("a", "2")), AddKind::Live)
            .unwrap();
        assert_eq!(drain(&mut stream), ["add:a@1", "update:a@2"]);
    }

    /// A watch event for a cached name with another UID means the name was deleted and
    /// created again unseen: a tombstone of the old incarnation, then an add of the new one.
    #[test]
    fn an_object_with_a_new_uid_under_a_cached_key_is_a_delete_then_an_add() {
        let (applier, mut stream) = applier();
        applier
            .apply(
                &deltas(DeltaType::Added, pod_with_uid("a", "1", "u1")),
                AddKind::Live,
            )
            .unwrap();
        for kind in [DeltaType::Added, DeltaType::Updated, DeltaType::Replaced] {
            let version = stream_version(&applier) + 1;
            let uid = format!("u{version}");
            applier
                .apply(
                    &deltas(kind, pod_with_uid("a", &version.to_string(), &uid)),
                    AddKind::Live,
                )
                .unwrap();
        }
        assert_eq!(
            drain(&mut stream),
            [
                "add:a@1",
                "tombstone:a@1",
                "add:a@2",
                "tombstone:a@2",
                "add:a@3",
                "tombstone:a@3",
                "add:a@4"
            ]
        );
        let cached = applier.indexer.get_by_key("default/a").expect("cached");
        assert_eq!(cached.metadata.uid.as_deref(), Some("u4"));
        // The same UID is an update, and an object without one is never told apart.
        applier
            .apply(
                &deltas(DeltaType::Updated, pod_with_uid("a", "5", "u4")),
                AddKind::Live,
            )
            .unwrap();
        applier
            .apply(&deltas(DeltaType::Updated, pod("a", "6")), AddKind::Live)
            .unwrap();
        assert_eq!(drain(&mut stream), ["update:a@5", "update:a@6"]);
    }

    /// On a relist the old incarnation is deleted with the vanished keys, before the list is
    /// delivered, and the new one is an add.
    #[test]
    fn a_replaced_all_with_a_recreated_name_tombstones_the_old_and_adds_the_new() {
        let (applier, mut stream) = applier();
        for name in ["a", "b"] {
            applier
                .apply(
                    &deltas(DeltaType::Added, pod_with_uid(name, "1", name)),
                    AddKind::Live,
                )
                .unwrap();
        }
        drain(&mut stream);
        let relist = Popped::ReplacedAll(ReplacedAll {
            resource_version: "9".into(),
            objects: vec![
                pod_with_uid("a", "7", "a-again"),
                pod_with_uid("b", "8", "b"),
            ],
        });
        applier.apply(&relist, AddKind::Live).unwrap();
        assert_eq!(
            drain(&mut stream),
            ["tombstone:a@1", "add:a@7", "update:b@8"]
        );
        let cached = applier.indexer.get_by_key("default/a").expect("cached");
        assert_eq!(cached.metadata.uid.as_deref(), Some("a-again"));
    }

    /// The resourceVersion of the cached `a`.
    fn stream_version(applier: &Applier<Pod>) -> u64 {
        applier
            .indexer
            .get_by_key("default/a")
            .and_then(|pod| pod.metadata.resource_version.clone())
            .and_then(|version| version.parse().ok())
            .expect("a is cached with a numeric version")
    }
}
