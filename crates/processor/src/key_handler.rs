//! [`KeyHandler`]: every notification as the key of its object, for a controller's work queue.

use std::{fmt, sync::Arc};

use kinformer_store::{AddKind, Object, ObjectOrTombstone, OldObject, meta_namespace_key_func};
use tracing::warn;

use crate::ResourceEventHandler;

/// A handler that hands `f` the key (`namespace/name`, or `name` for a cluster-scoped object)
/// of the object of every add, update (resyncs included) and deletion (a tombstone's key
/// included): what a client-go controller's handlers do with `MetaNamespaceKeyFunc` and
/// `DeletionHandlingMetaNamespaceKeyFunc` before `queue.Add(key)`. It never reads an update's
/// old state, so a compact cache never decodes it. An object without a name has no key: it is
/// logged and skipped. A tombstone of an object that left the informer's shard
/// ([`left_shard`](kinformer_store::DeletedFinalStateUnknown::left_shard)) is not handed on
/// either: the object was not deleted, it is another replica's to work on now, and a worker
/// that found its key missing from the cache would take it for deleted.
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_processor::{AddKind, KeyHandler, ResourceEventHandler};
/// use kinformer_store::DeletedFinalStateUnknown;
///
/// let keys = Arc::new(Mutex::new(Vec::new()));
/// let queued = Arc::clone(&keys);
/// let mut handler = KeyHandler::new(move |key| queued.lock().unwrap().push(key));
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-0".into());
/// pod.metadata.namespace = Some("shop".into());
/// let pod = Arc::new(pod);
/// ResourceEventHandler::<Pod>::on_add(&mut handler, Arc::clone(&pod), AddKind::Live);
/// let gone = DeletedFinalStateUnknown::new("shop/web-1", pod);
/// handler.on_delete(gone.into());
/// assert_eq!(*keys.lock().unwrap(), ["shop/web-0", "shop/web-1"]);
/// ```
#[doc(alias = "MetaNamespaceKeyFunc")]
#[doc(alias = "enqueue")]
pub struct KeyHandler<F> {
    f: F,
}

impl<F: FnMut(String) + Send + 'static> KeyHandler<F> {
    /// A handler that calls `f` with the key of every notification's object.
    pub fn new(f: F) -> Self {
        Self { f }
    }

    fn object<K: Object>(&mut self, obj: &K) {
        match meta_namespace_key_func(obj) {
            Ok(key) => (self.f)(key),
            Err(error) => warn!(%error, "an object without a key is not handed on"),
        }
    }
}

impl<F> fmt::Debug for KeyHandler<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyHandler").finish_non_exhaustive()
    }
}

impl<K, F> ResourceEventHandler<K> for KeyHandler<F>
where
    K: Object + 'static,
    F: FnMut(String) + Send + 'static,
{
    fn on_add(&mut self, obj: Arc<K>, _kind: AddKind) {
        self.object(obj.as_ref());
    }

    fn on_update(&mut self, _old: Arc<K>, new: Arc<K>) {
        self.object(new.as_ref());
    }

    fn on_update_lazy(&mut self, _old: OldObject<K>, new: Arc<K>) {
        self.object(new.as_ref());
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<K>) {
        // client-go's `DeletionHandlingMetaNamespaceKeyFunc`: a tombstone carries its key.
        let key = match &obj {
            ObjectOrTombstone::Object(obj) => meta_namespace_key_func(obj.as_ref()),
            ObjectOrTombstone::Tombstone(tombstone) if tombstone.left_shard => return,
            ObjectOrTombstone::Tombstone(tombstone) => Ok(tombstone.key.clone()),
        };
        match key {
            Ok(key) => (self.f)(key),
            Err(error) => warn!(%error, "a deleted object without a key is not handed on"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kinformer_store::DeletedFinalStateUnknown;

    use super::*;

    fn pod(namespace: &str, name: &str, version: &str) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some(namespace.into());
        pod.metadata.name = (!name.is_empty()).then(|| name.into());
        pod.metadata.resource_version = Some(version.into());
        Arc::new(pod)
    }

    type Keys = Arc<Mutex<Vec<String>>>;

    fn recording() -> (KeyHandler<impl FnMut(String) + Send>, Keys) {
        let keys = Keys::default();
        let seen = Arc::clone(&keys);
        (
            KeyHandler::new(move |key| seen.lock().unwrap().push(key)),
            keys,
        )
    }

    #[test]
    fn every_notification_hands_on_its_objects_key() {
        let (mut handler, keys) = recording();
        handler.on_add(pod("shop", "a", "1"), AddKind::InitialList);
        handler.on_update(pod("shop", "b", "1"), pod("shop", "b", "2"));
        // A resync: the same object twice.
        let same = pod("shop", "c", "3");
        handler.on_update(Arc::clone(&same), same);
        handler.on_update_lazy(
            OldObject::from(pod("shop", "d", "1")),
            pod("shop", "d", "2"),
        );
        handler.on_delete(ObjectOrTombstone::from(pod("shop", "e", "4")));
        handler.on_delete(ObjectOrTombstone::from(DeletedFinalStateUnknown::new(
            "shop/f",
            pod("shop", "stale-name", "5"),
        )));
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some("shop".into());
        ResourceEventHandler::<Namespace>::on_add(&mut handler, Arc::new(namespace), AddKind::Live);
        assert_eq!(
            *keys.lock().unwrap(),
            [
                "shop/a", "shop/b", "shop/c", "shop/d", "shop/e", "shop/f", "shop"
            ]
        );
    }

    #[test]
    fn an_object_without_a_name_is_skipped() {
        let (mut handler, keys) = recording();
        handler.on_add(pod("shop", "", "1"), AddKind::Live);
        handler.on_delete(ObjectOrTombstone::from(pod("shop", "", "1")));
        handler.on_add(pod("shop", "named", "2"), AddKind::Live);
        assert_eq!(*keys.lock().unwrap(), ["shop/named"]);
    }

    #[test]
    fn an_object_that_left_the_shard_is_not_handed_on() {
        let (mut handler, keys) = recording();
        let left = DeletedFinalStateUnknown {
            left_shard: true,
            ..DeletedFinalStateUnknown::new("shop/moved", pod("shop", "moved", "1"))
        };
        handler.on_delete(ObjectOrTombstone::from(left));
        let deleted = DeletedFinalStateUnknown::new("shop/gone", pod("shop", "gone", "1"));
        handler.on_delete(ObjectOrTombstone::from(deleted));
        assert_eq!(*keys.lock().unwrap(), ["shop/gone"]);
    }
}
