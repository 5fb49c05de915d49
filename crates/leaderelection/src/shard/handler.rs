//! [`ShardedHandler`]: an event handler that sees only this replica's objects.

use std::{fmt, sync::Arc};

use kinformer_processor::{AddKind, ResourceEventHandler};
use kinformer_store::{KeyFunc, Object, ObjectOrTombstone, OldObject, meta_namespace_key_func};
use tracing::warn;

use super::Shard;

/// An event handler behind a [`Shard`]: it passes on the notifications for objects this
/// replica may work on now, holding the key's guard during the call, and drops the rest.
///
/// A handler cannot be replayed, so notifications for an object in the middle of a hand-off
/// are lost to both replicas; a handler that must see every owned object should add keys to
/// a [`ShardedQueue`](super::ShardedQueue) and re-add them on [`Shard::changes`].
pub struct ShardedHandler<K, H> {
    shard: Shard,
    key_func: KeyFunc<K>,
    handler: H,
}

impl<K: Object, H> ShardedHandler<K, H> {
    /// `handler`, for the objects `shard` lets this replica work on, keyed `namespace/name`.
    pub fn new(shard: Shard, handler: H) -> Self {
        Self::with_key_func(shard, Arc::new(meta_namespace_key_func::<K>), handler)
    }
}

impl<K, H> ShardedHandler<K, H> {
    /// `handler`, keyed by `key_func` (the informer's).
    pub fn with_key_func(shard: Shard, key_func: KeyFunc<K>, handler: H) -> Self {
        Self {
            shard,
            key_func,
            handler,
        }
    }

    fn key(&self, obj: &K) -> Option<String> {
        match (self.key_func)(obj) {
            Ok(key) => Some(key),
            Err(error) => {
                warn!(%error, "cannot key an object for the shard; dropping its notification");
                None
            }
        }
    }
}

impl<K, H> ResourceEventHandler<K> for ShardedHandler<K, H>
where
    K: Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&mut self, obj: Arc<K>, kind: AddKind) {
        let Some(key) = self.key(&obj) else { return };
        if let Some(_guard) = self.shard.try_start(&key) {
            self.handler.on_add(obj, kind);
        }
    }

    fn on_update(&mut self, old: Arc<K>, new: Arc<K>) {
        let Some(key) = self.key(&new) else { return };
        if let Some(_guard) = self.shard.try_start(&key) {
            self.handler.on_update(old, new);
        }
    }

    /// Forwarded as it came, so a replaced object still encoded is decoded only for a key this
    /// replica owns, and only if the inner handler reads it.
    fn on_update_lazy(&mut self, old: OldObject<K>, new: Arc<K>) {
        let Some(key) = self.key(&new) else { return };
        if let Some(_guard) = self.shard.try_start(&key) {
            self.handler.on_update_lazy(old, new);
        }
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<K>) {
        let key = match &obj {
            ObjectOrTombstone::Object(object) => self.key(object),
            ObjectOrTombstone::Tombstone(tombstone) => Some(tombstone.key.clone()),
        };
        let Some(key) = key else { return };
        if let Some(_guard) = self.shard.try_start(&key) {
            self.handler.on_delete(obj);
        }
    }
}

impl<K, H> fmt::Debug for ShardedHandler<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedHandler")
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}
