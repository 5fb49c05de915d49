//! A relist taken in parts ([`Popped::RelistPart`](kinformer_fifo::Popped::RelistPart)),
//! staged in the cache ([`Indexer::stage_replace`](kinformer_store::Indexer::stage_replace))
//! and applied whole at its end.

use std::{collections::HashSet, sync::Arc};

use kinformer_fifo::{AddKind, RelistEnd, RelistPart};
use kinformer_processor::{DistributionBatch, Notification, Recipients};
use kinformer_store::{DeletedFinalStateUnknown, Object, OldObject, StagedReplace};
use tracing::debug;

use super::{Applier, add_notification, distribute_update, is_recreated, vanished};

#[cfg(test)]
mod tests;

/// How many changed objects of a relist taken in parts are held decoded until its end, so a
/// relist of few changes decodes nothing twice: as many as the queue holds of a list.
const HELD_DECODED: usize = 1024;

/// An object a relist changes: its key, the cached object it replaces, and the listed object
/// while few are held.
struct Changed<K> {
    key: String,
    old: Option<OldObject<K>>,
    new: Option<Arc<K>>,
}

/// A relist taken in parts, staged in the cache until its end: what its parts changed, in
/// list order, to notify once it is applied whole.
pub(crate) struct Relisting<K> {
    relist: u64,
    staged: Box<dyn StagedReplace<K>>,
    /// Every listed key.
    listed: HashSet<String>,
    /// Each staged key in list order, with the object it replaces (none for an add), as the
    /// cache hands it over (still encoded, from a compact cache), and the listed object for
    /// the first [`HELD_DECODED`] of them: the rest are read back from the cache when they
    /// are notified, so a relist that changes everything is never held decoded.
    changed: Vec<Changed<K>>,
    /// Listed keys whose cached object is the listed one (same UID and resourceVersion): the
    /// cache keeps them, and only listeners due for a resync hear of them.
    unchanged: Vec<String>,
    /// Cached objects the list has under a new UID: deleted and created again.
    recreated: Vec<DeletedFinalStateUnknown<K>>,
}

impl<K: Object> Applier<K> {
    /// Stages one part of a relist: nothing reaches readers or handlers before its end. A
    /// part of a new relist drops what an abandoned one staged. An object the cache refuses
    /// (one its codec cannot encode) leaves the cached object under its key as it was, as a
    /// refused watch event does; the first refusal is reported once the rest of the part is
    /// staged.
    pub(super) fn stage_relist_part(&self, part: &RelistPart<K>) -> kinformer_store::Result<()> {
        let mut relisting = self.relisting.lock();
        let relisting = match &mut *relisting {
            Some(current) if current.relist == part.relist => current,
            slot => slot.insert(self.new_relisting(part.relist)),
        };
        let mut first_error = None;
        for incoming in &part.objects {
            let obj = incoming.object();
            let key = match (self.key_func)(obj) {
                Ok(key) => key,
                Err(error) => {
                    first_error.get_or_insert(error);
                    continue;
                }
            };
            if !relisting.listed.insert(key.clone()) {
                // Listed twice (a key func or transform made two objects one key): the later
                // one wins, as in a whole replace, and is notified once, as a change.
                match relisting.staged.stage(incoming.clone()) {
                    Ok(()) => {
                        let old = self.indexer.get_lazy(&key);
                        relisting.listed_again(key, obj, old);
                    }
                    Err(error) => {
                        first_error.get_or_insert(error);
                    }
                }
                continue;
            }
            let mut old = self.indexer.get_lazy(&key);
            let recreated = old.take_if(|old| is_recreated(old.uid(), obj.uid()));
            let same = old.as_ref().is_some_and(|old| {
                old.resource_version()
                    .is_some_and(|version| !version.is_empty())
                    && old.resource_version() == obj.resource_version()
            });
            if same {
                relisting.staged.keep(&key);
                relisting.unchanged.push(key);
            } else if let Err(error) = relisting.staged.stage(incoming.clone()) {
                relisting.staged.keep(&key);
                first_error.get_or_insert(error);
            } else {
                // The name was deleted and created again while no watch saw it: the old
                // object goes with the other deletions (unless it does not decode, which the
                // cache reports), the new one arrives as an add.
                if let Some(recreated) = recreated.and_then(|recreated| recreated.get()) {
                    relisting
                        .recreated
                        .push(DeletedFinalStateUnknown::new(key.clone(), recreated));
                }
                let new = (relisting.changed.len() < HELD_DECODED).then(|| Arc::clone(obj));
                relisting.changed.push(Changed { key, old, new });
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The end of a relist taken in parts: the cache takes the staged list in one step, then
    /// deletions are notified first and adds or updates in list order, as for a whole relist.
    /// An abandoned relist leaves the cache as it was.
    pub(super) fn apply_relist_end(
        &self,
        end: &RelistEnd,
        kind: AddKind,
        out: &DistributionBatch<'_, K>,
    ) -> kinformer_store::Result<()> {
        // A relist's parts all come before its end, so what is staged is this relist's, or
        // nothing (a list with no object, or a part refused whole) and then the relist is
        // empty: it still empties the cache.
        let staged = self.relisting.lock().take();
        let Some(resource_version) = &end.resource_version else {
            debug!(
                relist = end.relist,
                "an abandoned relist dropped what it staged"
            );
            return Ok(());
        };
        let relisting = match staged {
            Some(relisting) if relisting.relist == end.relist => relisting,
            _ => self.new_relisting(end.relist),
        };
        let Relisting {
            staged,
            listed,
            changed,
            unchanged,
            recreated,
            ..
        } = relisting;
        // Held encoded until notified: a vanished object is decoded only to be handed over.
        let gone: Vec<(String, OldObject<K>)> = self
            .indexer
            .list_keys()
            .into_iter()
            .filter(|key| !listed.contains(key))
            .filter_map(|key| {
                let old = self.indexer.get_lazy(&key)?;
                Some((key, old))
            })
            .collect();
        drop(listed);
        staged.commit(resource_version)?;
        for tombstone in recreated {
            out.distribute(Notification::delete(tombstone), Recipients::All);
        }
        let shard = self.shard();
        for (key, old) in gone {
            if let Some(obj) = old.get() {
                out.distribute(
                    Notification::delete(vanished(shard.as_deref(), key, obj)),
                    Recipients::All,
                );
            }
        }
        for Changed { key, old, new } in changed {
            // Read back without counting as a read, so a large relist does not push what
            // readers use out of a compact cache's decoded set.
            let Some(new) = new.or_else(|| self.read_back(&key)) else {
                continue;
            };
            match old {
                Some(old) => distribute_update(out, old, new),
                None => out.distribute(add_notification(new, kind), Recipients::All),
            }
        }
        // Unlike a whole relist, which notified in list order, the resyncs of unchanged objects
        // follow every change; only listeners due for a resync receive them.
        if self.processor.any_due_for_resync() {
            for key in unchanged {
                if let Some(obj) = self.read_back(&key) {
                    out.distribute(
                        Notification::update(OldObject::decoded(Arc::clone(&obj)), obj),
                        Recipients::DueForResync,
                    );
                }
            }
        }
        Ok(())
    }

    fn new_relisting(&self, relist: u64) -> Relisting<K> {
        Relisting {
            relist,
            staged: Arc::clone(&self.indexer).stage_replace(),
            listed: HashSet::new(),
            changed: Vec::new(),
            unchanged: Vec::new(),
            recreated: Vec::new(),
        }
    }

    /// The object the cache holds under `key`, decoded without marking it read.
    fn read_back(&self, key: &str) -> Option<Arc<K>> {
        self.indexer.get_lazy(key).and_then(|old| old.get())
    }
}

impl<K> Relisting<K> {
    /// `key`, listed before, is listed again as `obj`, which the commit stores over `old`,
    /// the cached object: a change, notified with `obj`. Rare, so found by a scan.
    fn listed_again(&mut self, key: String, obj: &Arc<K>, old: Option<OldObject<K>>) {
        if let Some(at) = self.changed.iter().position(|changed| changed.key == key) {
            self.changed[at].new = Some(Arc::clone(obj));
            return;
        }
        if let Some(at) = self.unchanged.iter().position(|kept| *kept == key) {
            self.unchanged.swap_remove(at);
            self.changed.push(Changed {
                key,
                old,
                new: Some(Arc::clone(obj)),
            });
        }
    }
}
