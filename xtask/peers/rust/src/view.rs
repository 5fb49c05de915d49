//! Every handler's view of the objects (key to resourceVersion), the bookkeeping around it
//! (calls, latency samples, sentinels seen) and the checksum the harness compares with the
//! server's.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use kinformer_testing::bench::checksum;
use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::latency::{EMIT_NS_ANNOTATION, latency_us, now_unix_ns};

/// The name prefix of the objects the bench endpoints create after their changes.
pub const SENTINEL_PREFIX: &str = "bench-sentinel-";

/// What one handler has seen.
#[derive(Debug, Default)]
pub struct View {
    /// Key to resourceVersion.
    objects: HashMap<String, String>,
    /// Keys of the sentinels seen.
    sentinels: HashSet<String>,
    latencies_us: Vec<u64>,
    /// Handler calls.
    events: u64,
    /// Update and delete calls.
    updates: u64,
    deletes: u64,
    /// kube-runtime's `InitDone` has reached this handler (kinformer's registration tracks
    /// its own sync).
    synced: bool,
    /// kube-runtime only: the keys an `InitApply` carried since the last `Init`, or `None`
    /// outside a relist.
    listed_since_init: Option<HashSet<String>>,
}

impl View {
    /// Records an add (`is_update` false) or update of `key` at `resource_version`, with a
    /// latency sample when the object carries an `emit-ns` annotation.
    pub fn upsert(
        &mut self,
        key: &str,
        resource_version: &str,
        emit_ns: Option<&str>,
        handled_ns: u128,
        is_update: bool,
    ) {
        self.events += 1;
        self.updates += u64::from(is_update);
        if let Some(latency) = emit_ns.and_then(|emit_ns| latency_us(emit_ns, handled_ns)) {
            self.latencies_us.push(latency);
        }
        if key
            .rsplit('/')
            .next()
            .is_some_and(|name| name.starts_with(SENTINEL_PREFIX))
        {
            self.sentinels.insert(key.to_owned());
        }
        match self.objects.get_mut(key) {
            Some(known) => resource_version.clone_into(known),
            None => {
                self.objects
                    .insert(key.to_owned(), resource_version.to_owned());
            }
        }
    }

    /// Records a delete of `key` (an object's or a tombstone's).
    pub fn delete(&mut self, key: &str) {
        self.events += 1;
        self.deletes += 1;
        self.objects.remove(key);
    }

    /// kube-runtime's `Init`: a (re)list starts; remember what it lists from here on.
    pub fn init(&mut self) {
        self.listed_since_init = Some(HashSet::with_capacity(self.objects.len()));
    }

    /// kube-runtime's `Apply`: an add or an update, which kube-runtime does not tell apart; an
    /// update when the view knew the key.
    pub fn apply(
        &mut self,
        key: &str,
        resource_version: &str,
        emit_ns: Option<&str>,
        handled_ns: u128,
    ) {
        let known = self.objects.contains_key(key);
        self.upsert(key, resource_version, emit_ns, handled_ns, known);
    }

    /// kube-runtime's `InitApply`: an object of the list, counted as [`apply`](Self::apply)
    /// counts it.
    pub fn init_apply(
        &mut self,
        key: &str,
        resource_version: &str,
        emit_ns: Option<&str>,
        handled_ns: u128,
    ) {
        self.apply(key, resource_version, emit_ns, handled_ns);
        if let Some(listed) = &mut self.listed_since_init {
            listed.insert(key.to_owned());
        }
    }

    /// kube-runtime's `InitDone`: the list is complete. kube-runtime announces no deletion of
    /// objects that vanished while the watch was down, so the handler infers them here, as a
    /// kube-rs user must: every key in the view the list did not carry is deleted (and
    /// counted as a delete call). Returns how many.
    pub fn init_done(&mut self) -> usize {
        self.synced = true;
        let Some(listed) = self.listed_since_init.take() else {
            return 0;
        };
        let vanished: Vec<String> = self
            .objects
            .keys()
            .filter(|key| !listed.contains(*key))
            .cloned()
            .collect();
        for key in &vanished {
            self.delete(key);
        }
        vanished.len()
    }

    /// Objects in the view.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Whether the view has seen the sentinel `key`.
    pub fn saw(&self, key: &str) -> bool {
        self.sentinels.contains(key)
    }

    /// The resourceVersion the view holds for `key`.
    pub fn resource_version(&self, key: &str) -> Option<&str> {
        self.objects.get(key).map(String::as_str)
    }

    /// The protocol's checksum of the view (kinformer-testing's, which the server uses too).
    pub fn checksum(&self) -> String {
        checksum(&self.objects)
    }
}

/// What a view reads of an object: every kube `Resource` has it, and a peer's projection type
/// implements it by hand.
pub trait Viewed {
    /// `metadata.name`.
    fn name(&self) -> &str;
    /// `metadata.namespace`, `None` when cluster-scoped.
    fn namespace(&self) -> Option<&str>;
    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> &str;
    /// The emit timestamp annotation of the bench protocol, if the projection keeps it.
    fn emit_ns(&self) -> Option<&str>;
}

impl<K: Resource> Viewed for K {
    fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    fn namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }

    fn resource_version(&self) -> &str {
        self.meta().resource_version.as_deref().unwrap_or_default()
    }

    fn emit_ns(&self) -> Option<&str> {
        self.meta()
            .annotations
            .as_ref()?
            .get(EMIT_NS_ANNOTATION)
            .map(String::as_str)
    }
}

/// The key the protocol sorts by: `namespace/name`, or `name` when cluster-scoped.
pub fn key_of<K: Viewed + ?Sized>(obj: &K) -> String {
    let name = obj.name();
    match obj.namespace() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

fn resource_version_of<K: Viewed + ?Sized>(obj: &K) -> &str {
    obj.resource_version()
}

fn emit_ns_of<K: Viewed + ?Sized>(obj: &K) -> Option<&str> {
    obj.emit_ns()
}

/// Every handler's [`View`], and a signal for whoever waits on them.
#[derive(Debug)]
pub struct Views {
    views: Vec<Mutex<View>>,
    slow: Option<usize>,
    /// The slow handler sleeps only once the phase has begun: sleeping through the initial
    /// sync would measure the sleep, not the informer.
    slow_from_now: AtomicBool,
    /// Rung when a handler sees a sentinel or finishes its initial list.
    changed: Notify,
}

impl Views {
    /// `handlers` empty views; handler `slow` (if any) is the one that sleeps 1 ms per call.
    pub fn new(handlers: usize, slow: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            views: (0..handlers).map(|_| Mutex::default()).collect(),
            slow,
            slow_from_now: AtomicBool::new(false),
            changed: Notify::new(),
        })
    }

    /// One [`Handler`] per view, in order.
    pub fn handlers(self: &Arc<Self>) -> Vec<Handler> {
        (0..self.views.len())
            .map(|index| Handler {
                views: Arc::clone(self),
                index,
            })
            .collect()
    }

    /// From now on the slow handler (if any) sleeps on every call.
    pub fn begin_slow_calls(&self) {
        self.slow_from_now.store(true, Ordering::Release);
    }

    /// Number of handlers.
    pub fn count(&self) -> usize {
        self.views.len()
    }

    /// Reads view `index`.
    pub fn with<T>(&self, index: usize, read: impl FnOnce(&View) -> T) -> T {
        read(&self.views[index].lock())
    }

    /// Whether every view holds the same objects at the same resourceVersions.
    pub fn agree(&self) -> bool {
        let first = self.views[0].lock();
        self.views[1..]
            .iter()
            .all(|view| view.lock().objects == first.objects)
    }

    /// Handler calls across all handlers.
    pub fn events(&self) -> u64 {
        self.views.iter().map(|view| view.lock().events).sum()
    }

    /// Update and delete calls view `index` has received so far.
    pub fn updates_and_deletes(&self, index: usize) -> (u64, u64) {
        let view = self.views[index].lock();
        (view.updates, view.deletes)
    }

    /// The latency samples of the views `indices`, taken out (each sample is reported once).
    pub fn take_latencies(&self, indices: impl IntoIterator<Item = usize>) -> Vec<u64> {
        indices
            .into_iter()
            .flat_map(|index| std::mem::take(&mut self.views[index].lock().latencies_us))
            .collect()
    }

    /// Whether every view has seen the sentinel `key`.
    pub fn all_saw(&self, key: &str) -> bool {
        self.views
            .iter()
            .all(|view| view.lock().sentinels.contains(key))
    }

    /// Whether `InitDone` has reached every view.
    pub fn all_synced(&self) -> bool {
        self.views.iter().all(|view| view.lock().synced)
    }

    /// Waits until `done` holds; it is re-checked whenever a handler sees a sentinel or
    /// finishes its initial list.
    pub async fn wait_until(&self, done: impl Fn(&Self) -> bool) {
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            // Registered before the check, so a change between check and await still wakes.
            changed.as_mut().enable();
            if done(self) {
                return;
            }
            changed.await;
        }
    }
}

/// One handler's side of [`Views`]: what a peer's event handler calls, on whatever thread or
/// task delivers its events. Each call reads the clock first, so latency is measured at the
/// moment the handler is called.
#[derive(Debug, Clone)]
pub struct Handler {
    views: Arc<Views>,
    index: usize,
}

impl Handler {
    /// The handler's position (0 is the one whose view is reported).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Whether this handler must sleep 1 ms on this call: it is the slow one and the phase
    /// has begun.
    pub fn is_slow(&self) -> bool {
        self.views.slow == Some(self.index) && self.views.slow_from_now.load(Ordering::Acquire)
    }

    fn update_view<T>(&self, change: impl FnOnce(&mut View) -> T) -> T {
        let mut view = self.views.views[self.index].lock();
        let sentinels = view.sentinels.len();
        let synced = view.synced;
        let result = change(&mut view);
        let noteworthy = view.sentinels.len() != sentinels || view.synced != synced;
        drop(view);
        if noteworthy {
            self.views.changed.notify_waiters();
        }
        result
    }

    /// An add (`is_update` false) or an update of `obj`.
    pub fn upsert<K: Viewed>(&self, obj: &K, is_update: bool) {
        let handled_ns = now_unix_ns();
        let key = key_of(obj);
        self.update_view(|view| {
            view.upsert(
                &key,
                resource_version_of(obj),
                emit_ns_of(obj),
                handled_ns,
                is_update,
            );
        });
    }

    /// A delete of the object under `key`.
    pub fn delete(&self, key: &str) {
        self.update_view(|view| view.delete(key));
    }

    /// kube-runtime's `Apply` of `obj`.
    pub fn apply<K: Viewed>(&self, obj: &K) {
        let handled_ns = now_unix_ns();
        let key = key_of(obj);
        self.update_view(|view| {
            view.apply(&key, resource_version_of(obj), emit_ns_of(obj), handled_ns);
        });
    }

    /// kube-runtime's `Init`.
    pub fn init(&self) {
        self.update_view(View::init);
    }

    /// kube-runtime's `InitApply`.
    pub fn init_apply<K: Viewed>(&self, obj: &K) {
        let handled_ns = now_unix_ns();
        let key = key_of(obj);
        self.update_view(|view| {
            view.init_apply(&key, resource_version_of(obj), emit_ns_of(obj), handled_ns);
        });
    }

    /// kube-runtime's `InitDone`; returns the deletions inferred.
    pub fn init_done(&self) -> usize {
        self.update_view(View::init_done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u128 = 1_000_000_000;

    #[test]
    fn a_views_checksum_is_the_protocols() {
        let mut view = View::default();
        assert_eq!(view.checksum(), "cbf29ce484222325");
        // FNV-1a 64 of `key 0x00 rv \n` in key order, computed here independently.
        let mut expected: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in *b"a\x001\nb\x002\n" {
            expected ^= u64::from(byte);
            expected = expected.wrapping_mul(0x0100_0000_01b3);
        }
        view.upsert("b", "2", None, T, false);
        view.upsert("a", "1", None, T, false);
        assert_eq!(view.checksum(), format!("{expected:016x}"));
    }

    #[test]
    fn a_view_tracks_adds_updates_and_deletes() {
        let mut view = View::default();
        view.upsert("ns/a", "1", None, T, false);
        view.upsert("ns/b", "2", None, T, false);
        view.upsert("ns/a", "3", None, T, true);
        view.delete("ns/b");
        view.delete("ns/never-seen");
        assert_eq!(view.len(), 1);
        assert_eq!(view.resource_version("ns/a"), Some("3"));
        assert_eq!((view.events, view.updates, view.deletes), (5, 1, 2));
        assert_eq!(view.checksum(), checksum([("ns/a", "3")]));
    }

    #[test]
    fn annotated_calls_give_latency_samples_and_sentinels_are_noted() {
        let mut view = View::default();
        let emitted = (T - 2_000_000).to_string();
        view.upsert("ns/a", "1", Some(&emitted), T, true);
        view.upsert("ns/b", "1", None, T, true);
        view.upsert("ns-0/bench-sentinel-1", "9", Some(&emitted), T, false);
        assert_eq!(view.latencies_us, [2000, 2000]);
        assert!(view.sentinels.contains("ns-0/bench-sentinel-1"));
        assert_eq!(view.sentinels.len(), 1);
    }

    #[test]
    fn an_apply_is_an_update_only_for_a_known_key() {
        let mut view = View::default();
        view.apply("ns/a", "1", None, T);
        view.apply("ns/a", "2", None, T);
        assert_eq!((view.events, view.updates), (2, 1));
        assert_eq!(view.resource_version("ns/a"), Some("2"));
    }

    #[test]
    fn a_relist_without_deletions_infers_them_at_init_done() {
        let mut view = View::default();
        view.init();
        for (key, rv) in [("ns/a", "1"), ("ns/b", "1"), ("ns/c", "1")] {
            view.init_apply(key, rv, None, T);
        }
        assert_eq!(view.init_done(), 0);
        assert!(view.synced);
        assert_eq!((view.updates, view.deletes), (0, 0));

        // The relist: b vanished while the watch was down, c changed, d is new.
        view.init();
        view.init_apply("ns/a", "1", None, T);
        view.init_apply("ns/c", "5", None, T);
        view.init_apply("ns/d", "6", None, T);
        assert_eq!(
            view.len(),
            4,
            "nothing is removed before the list is complete"
        );
        assert_eq!(view.init_done(), 1);
        assert_eq!(
            view.checksum(),
            checksum([("ns/a", "1"), ("ns/c", "5"), ("ns/d", "6")])
        );
        assert_eq!((view.updates, view.deletes), (2, 1));
        assert_eq!(view.events, 3 + 3 + 1);
        assert_eq!(view.init_done(), 0, "a second InitDone has nothing to diff");
    }

    #[test]
    fn views_agree_only_when_every_handler_holds_the_same_objects() {
        let views = Views::new(2, Some(1));
        let handlers = views.handlers();
        assert!(
            !handlers[0].is_slow() && !handlers[1].is_slow(),
            "nobody sleeps through the initial sync"
        );
        views.begin_slow_calls();
        assert!(!handlers[0].is_slow() && handlers[1].is_slow());
        for handler in &handlers {
            handler.update_view(|view| view.upsert("ns/a", "1", None, T, false));
        }
        assert!(views.agree());
        assert_eq!(views.events(), 2);
        handlers[1].delete("ns/a");
        assert!(!views.agree());
        assert_eq!(views.updates_and_deletes(1), (0, 1));
    }

    #[tokio::test]
    async fn waiting_for_a_sentinel_wakes_when_the_last_handler_sees_it() {
        let views = Views::new(2, None);
        let handlers = views.handlers();
        let sentinel = "ns-0/bench-sentinel-1";
        let waiter = {
            let views = Arc::clone(&views);
            tokio::spawn(async move { views.wait_until(|views| views.all_saw(sentinel)).await })
        };
        for handler in handlers {
            tokio::task::yield_now().await;
            std::thread::spawn(move || {
                handler.update_view(|view| view.upsert(sentinel, "7", None, T, false));
            })
            .join()
            .expect("handler thread");
        }
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("waiter task");
        assert!(views.all_saw(sentinel));
    }

    #[test]
    fn keys_are_namespace_slash_name_or_just_the_name() {
        use k8s_openapi::api::core::v1::{Namespace, Pod};
        use kube_core::ObjectMeta;
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns-1".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("ns-1".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        assert_eq!(key_of(&pod), "ns-1/web");
        assert_eq!(key_of(&namespace), "ns-1");
    }
}
