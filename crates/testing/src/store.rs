//! Multi-version object storage with one global revision, an event history and watcher fan-out.
//!
//! This plays etcd and the watch cache at once. Every write bumps one counter (etcd's revision)
//! that becomes the object's `metadata.resourceVersion`. Each key keeps a short chain of versions
//! so that a list can be served at an older revision (`resourceVersionMatch=Exact`, continue
//! tokens) until compaction drops it. The event history is a bounded window: a watch may resume
//! from any revision still inside it, and older ones get 410 Expired.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::object::{Obj, object_key, set_resource_version};
use crate::selector::Selectors;
use crate::status::ApiError;

/// The type of a watch event, named as it travels on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as the history and every watcher see it.
#[derive(Debug)]
pub(crate) struct StoredEvent {
    pub(crate) rv: u64,
    pub(crate) group_resource: String,
    pub(crate) key: String,
    pub(crate) kind: EventType,
    /// The new state; for a deletion, the last state carrying the deletion's revision.
    pub(crate) object: Arc<Obj>,
    /// The state before the change, so a selector watch can tell "stopped matching".
    pub(crate) prev: Option<Arc<Obj>>,
}

impl StoredEvent {
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.key.split_once('/').map(|(ns, _)| ns)
    }
}

/// What a watcher's buffer carries.
#[derive(Debug)]
pub(crate) enum WatchItem {
    Event(Arc<StoredEvent>),
    /// A progress notification at this revision: every earlier event is already queued.
    Bookmark(u64),
}

#[derive(Debug)]
struct WatcherSlot {
    id: u64,
    namespace: Option<String>,
    tx: mpsc::Sender<WatchItem>,
}

#[derive(Debug)]
struct Version {
    rv: u64,
    obj: Option<Arc<Obj>>,
}

/// Where a new watch starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WatchStart {
    /// Every event after this revision (`resourceVersion=N`).
    After(u64),
    /// Synthetic ADDED events for the current state, then changes.
    CurrentState,
}

/// A page of a list.
#[derive(Debug)]
pub(crate) struct ListPage {
    pub(crate) items: Vec<Arc<Obj>>,
    /// The revision the page reflects.
    pub(crate) rv: u64,
    /// The last key returned, when more items follow.
    pub(crate) next_key: Option<String>,
    pub(crate) remaining: Option<u64>,
}

/// What a list reads.
#[derive(Debug)]
pub(crate) struct ListQuery<'a> {
    pub(crate) group_resource: &'a str,
    pub(crate) namespace: Option<&'a str>,
    /// Serve the state at this revision; `None` reads the current state.
    pub(crate) at: Option<u64>,
    pub(crate) after_key: Option<&'a str>,
    /// Items earlier pages of this list returned (carried in the continue token).
    pub(crate) offset: usize,
    pub(crate) limit: Option<usize>,
    pub(crate) selectors: &'a Selectors,
}

/// The single lock-protected world: objects, revision, history, watchers.
#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    compacted: u64,
    history: VecDeque<Arc<StoredEvent>>,
    history_limit: usize,
    watcher_buffer: usize,
    data: HashMap<String, BTreeMap<String, Vec<Version>>>,
    watchers: HashMap<String, Vec<WatcherSlot>>,
    next_watcher_id: u64,
    /// Live objects per group resource and per namespace, so `remainingItemCount` of a page
    /// costs nothing instead of a walk over every later object.
    live: HashMap<String, LiveCount>,
}

#[derive(Debug, Default)]
struct LiveCount {
    total: usize,
    by_namespace: HashMap<String, usize>,
}

impl Store {
    pub(crate) fn new(history_limit: usize, watcher_buffer: usize) -> Self {
        Self {
            rv: 1,
            compacted: 0,
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            watcher_buffer: watcher_buffer.max(1),
            data: HashMap::new(),
            watchers: HashMap::new(),
            next_watcher_id: 0,
            live: HashMap::new(),
        }
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The newest revision whose events have been dropped; watches must start at or after it.
    pub(crate) fn compacted_revision(&self) -> u64 {
        self.compacted
    }

    pub(crate) fn get(&self, group_resource: &str, key: &str) -> Option<Arc<Obj>> {
        self.data.get(group_resource)?.get(key)?.last()?.obj.clone()
    }

    pub(crate) fn list(&self, query: &ListQuery<'_>) -> ListPage {
        let at = query.at.unwrap_or(self.rv);
        let mut page = ListPage {
            items: Vec::new(),
            rv: at,
            next_key: None,
            remaining: None,
        };
        let Some(objects) = self.data.get(query.group_resource) else {
            return page;
        };
        let prefix = query.namespace.map(|ns| format!("{ns}/"));
        let lower = match (query.after_key, &prefix) {
            (Some(key), _) => Bound::Excluded(key.to_owned()),
            (None, Some(prefix)) => Bound::Included(prefix.clone()),
            (None, None) => Bound::Unbounded,
        };
        let visible = objects
            .range::<String, _>((lower, Bound::Unbounded))
            .take_while(|(key, _)| prefix.as_ref().is_none_or(|p| key.starts_with(p.as_str())))
            .filter_map(|(key, chain)| {
                let version = if at >= self.rv {
                    chain.last()
                } else {
                    chain.iter().rev().find(|v| v.rv <= at)
                };
                version.and_then(|v| v.obj.as_ref()).map(|obj| (key, obj))
            })
            .filter(|(_, obj)| query.selectors.matches(obj));
        let limit = query.limit.unwrap_or(usize::MAX);
        let mut visible = visible.peekable();
        let mut last_key = None;
        while page.items.len() < limit {
            match visible.next() {
                Some((key, obj)) => {
                    last_key = Some(key);
                    page.items.push(obj.clone());
                }
                None => break,
            }
        }
        if visible.peek().is_some() {
            page.next_key = last_key.cloned();
            if query.selectors.is_empty() {
                let counted = (at >= self.rv)
                    .then(|| self.live.get(query.group_resource))
                    .flatten()
                    .map(|live| match query.namespace {
                        Some(ns) => live.by_namespace.get(ns).copied().unwrap_or(0),
                        None => live.total,
                    })
                    .and_then(|total| total.checked_sub(query.offset + page.items.len()));
                // An older snapshot has other counts: walk what is left, as etcd counts keys.
                let remaining = counted.unwrap_or_else(|| visible.count());
                page.remaining = Some(remaining as u64);
            }
        }
        page
    }

    /// Writes (or with `None`, deletes) one object, bumping the revision and notifying watchers.
    ///
    /// The caller has checked preconditions under the same lock. Returns the stored state (for a
    /// deletion, the last state carrying the deletion's revision).
    pub(crate) fn commit(
        &mut self,
        group_resource: &str,
        key: &str,
        new: Option<Value>,
    ) -> Arc<Obj> {
        match new {
            Some(mut value) => self.commit_with(group_resource, key, |rv| {
                set_resource_version(&mut value, rv);
                Obj::new(&value)
            }),
            None => self.record(group_resource, key, |rv, prev| {
                let last = match prev {
                    Some(prev) => prev.restamped(rv, None),
                    None => Obj::new(&Value::Null),
                };
                (EventType::Deleted, last)
            }),
        }
    }

    /// Writes one object that `build` makes for the new revision (its JSON must carry that
    /// revision as `metadata.resourceVersion`), as [`Store::commit`] does.
    pub(crate) fn commit_with(
        &mut self,
        group_resource: &str,
        key: &str,
        build: impl FnOnce(u64) -> Arc<Obj>,
    ) -> Arc<Obj> {
        self.record(group_resource, key, |rv, prev| {
            let kind = if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            };
            (kind, build(rv))
        })
    }

    fn record(
        &mut self,
        group_resource: &str,
        key: &str,
        build: impl FnOnce(u64, Option<&Arc<Obj>>) -> (EventType, Arc<Obj>),
    ) -> Arc<Obj> {
        self.rv += 1;
        let rv = self.rv;
        let prev = self.get(group_resource, key);
        let (kind, object) = build(rv, prev.as_ref());
        let stored = (kind != EventType::Deleted).then(|| object.clone());
        let delta: isize = match (prev.is_some(), stored.is_some()) {
            (false, true) => 1,
            (true, false) => -1,
            _ => 0,
        };
        if delta != 0 {
            let live = self.live.entry(group_resource.to_owned()).or_default();
            live.total = live.total.saturating_add_signed(delta);
            if let Some((namespace, _)) = key.split_once('/') {
                let count = live.by_namespace.entry(namespace.to_owned()).or_default();
                *count = count.saturating_add_signed(delta);
            }
        }
        self.data
            .entry(group_resource.to_owned())
            .or_default()
            .entry(key.to_owned())
            .or_default()
            .push(Version { rv, obj: stored });
        let event = Arc::new(StoredEvent {
            rv,
            group_resource: group_resource.to_owned(),
            key: key.to_owned(),
            kind,
            object: object.clone(),
            prev,
        });
        self.dispatch(&event);
        self.history.push_back(event);
        while self.history.len() > self.history_limit {
            self.drop_oldest_event();
        }
        object
    }

    /// The current objects of one group resource with their keys, in key order.
    pub(crate) fn current(&self, group_resource: &str) -> impl Iterator<Item = (&str, &Arc<Obj>)> {
        self.data
            .get(group_resource)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .filter_map(|(key, chain)| Some((key.as_str(), chain.last()?.obj.as_ref()?)))
    }

    /// The fewest free buffer slots among the open watches of one group resource (`None`
    /// without any): how many events can be written before the slowest watcher is closed.
    #[cfg(feature = "bench")]
    pub(crate) fn watch_room(&self, group_resource: &str) -> Option<usize> {
        self.watchers
            .get(group_resource)?
            .iter()
            .filter(|slot| !slot.tx.is_closed())
            .map(|slot| slot.tx.capacity())
            .min()
    }

    fn dispatch(&mut self, event: &Arc<StoredEvent>) {
        let Some(slots) = self.watchers.get_mut(&event.group_resource) else {
            return;
        };
        let namespace = event.namespace();
        slots.retain(|slot| {
            if slot.namespace.as_deref().is_some_and(|ns| Some(ns) != namespace) {
                return !slot.tx.is_closed();
            }
            match slot.tx.try_send(WatchItem::Event(event.clone())) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(
                        watcher = slot.id,
                        resource = %event.group_resource,
                        "closing a watcher whose buffer is full, as apiserver closes unresponsive watchers"
                    );
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    fn drop_oldest_event(&mut self) {
        if let Some(event) = self.history.pop_front() {
            self.compacted = event.rv;
            self.prune(&event.group_resource, &event.key);
        }
    }

    /// Drops versions of one key that no list at or after the compacted revision can see.
    fn prune(&mut self, group_resource: &str, key: &str) {
        let compacted = self.compacted;
        let Some(objects) = self.data.get_mut(group_resource) else {
            return;
        };
        let Some(chain) = objects.get_mut(key) else {
            return;
        };
        if let Some(newest_old) = chain.iter().rposition(|v| v.rv <= compacted) {
            chain.drain(..newest_old);
        }
        if chain.len() == 1 && chain[0].obj.is_none() && chain[0].rv <= compacted {
            objects.remove(key);
        }
    }

    /// Forgets every event up to the current revision, as an etcd compaction does.
    pub(crate) fn compact_all(&mut self) {
        while !self.history.is_empty() {
            self.drop_oldest_event();
        }
        self.compacted = self.rv;
    }

    /// Registers a watcher and returns what it must send before its live events.
    pub(crate) fn watch(
        &mut self,
        group_resource: &str,
        namespace: Option<&str>,
        start: WatchStart,
    ) -> Result<(u64, Vec<WatchItem>, mpsc::Receiver<WatchItem>), ApiError> {
        let backlog = match start {
            WatchStart::After(rv) => {
                if rv < self.compacted {
                    return Err(ApiError::too_old_resource_version(rv, self.compacted));
                }
                self.history
                    .iter()
                    .filter(|e| e.rv > rv && e.group_resource == group_resource)
                    .filter(|e| namespace.is_none_or(|ns| e.namespace() == Some(ns)))
                    .map(|e| WatchItem::Event(e.clone()))
                    .collect()
            }
            WatchStart::CurrentState => {
                let selectors = Selectors::default();
                let page = self.list(&ListQuery {
                    group_resource,
                    namespace,
                    at: None,
                    after_key: None,
                    offset: 0,
                    limit: None,
                    selectors: &selectors,
                });
                page.items
                    .into_iter()
                    .map(|obj| {
                        let key = object_key(obj.namespace.as_deref(), &obj.name);
                        WatchItem::Event(Arc::new(StoredEvent {
                            rv: obj.rv,
                            group_resource: group_resource.to_owned(),
                            key,
                            kind: EventType::Added,
                            object: obj,
                            prev: None,
                        }))
                    })
                    .collect()
            }
        };
        let (tx, rx) = mpsc::channel(self.watcher_buffer);
        self.next_watcher_id += 1;
        let id = self.next_watcher_id;
        self.watchers
            .entry(group_resource.to_owned())
            .or_default()
            .push(WatcherSlot {
                id,
                namespace: namespace.map(str::to_owned),
                tx,
            });
        Ok((id, backlog, rx))
    }

    /// Queues a bookmark at the current revision behind everything already sent to a watcher.
    pub(crate) fn bookmark(&mut self, group_resource: &str, watcher: u64) {
        let rv = self.rv;
        if let Some(slot) = self
            .watchers
            .get(group_resource)
            .and_then(|slots| slots.iter().find(|s| s.id == watcher))
        {
            // A full buffer already carries progress; skipping one bookmark loses nothing.
            let _ = slot.tx.try_send(WatchItem::Bookmark(rv));
        }
    }

    /// Closes every open watch (each ends after draining what it already holds).
    pub(crate) fn close_watchers(&mut self) {
        self.watchers.clear();
    }

    /// Closes the watches of one group resource (a CRD that went away).
    pub(crate) fn drop_resource(&mut self, group_resource: &str) {
        self.watchers.remove(group_resource);
        self.data.remove(group_resource);
        self.live.remove(group_resource);
    }

    pub(crate) fn open_watchers(&self) -> usize {
        self.watchers
            .values()
            .flat_map(|slots| slots.iter())
            .filter(|s| !s.tx.is_closed())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    fn pod(name: &str) -> Value {
        json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "namespace": "ns" } })
    }

    fn names(page: &ListPage) -> Vec<String> {
        page.items.iter().map(|o| o.name.clone()).collect()
    }

    #[test]
    fn a_list_at_an_older_revision_sees_the_state_of_that_revision() {
        let mut store = Store::new(100, 10);
        store.commit("pods", "ns/a", Some(pod("a")));
        let after_a = store.resource_version();
        store.commit("pods", "ns/b", Some(pod("b")));
        store.commit("pods", "ns/a", None);
        let selectors = Selectors::default();
        let query = |at| ListQuery {
            group_resource: "pods",
            namespace: Some("ns"),
            at,
            after_key: None,
            offset: 0,
            limit: None,
            selectors: &selectors,
        };
        assert_eq!(names(&store.list(&query(Some(after_a)))), ["a"]);
        assert_eq!(names(&store.list(&query(None))), ["b"]);
    }

    #[test]
    fn remaining_item_counts_agree_between_the_live_count_and_a_walk() {
        let mut store = Store::new(100, 10);
        for name in ["a", "b", "c", "d", "e"] {
            store.commit("pods", &format!("ns/{name}"), Some(pod(name)));
        }
        store.commit("pods", "other/z", Some(pod("z")));
        store.commit("pods", "ns/e", None);
        let snapshot = store.resource_version();
        let selectors = Selectors::default();
        let page = |store: &Store, at, after_key, offset| {
            let page = store.list(&ListQuery {
                group_resource: "pods",
                namespace: Some("ns"),
                at,
                after_key,
                offset,
                limit: Some(2),
                selectors: &selectors,
            });
            (names(&page), page.remaining)
        };
        assert_eq!(
            page(&store, None, None, 0),
            (vec!["a".into(), "b".into()], Some(2))
        );
        assert_eq!(
            page(&store, None, Some("ns/b"), 2),
            (vec!["c".into(), "d".into()], None)
        );
        // A write after the first page: the snapshot is older, so the count comes from a walk.
        store.commit("pods", "ns/f", Some(pod("f")));
        assert_eq!(
            page(&store, Some(snapshot), Some("ns/a"), 1),
            (vec!["b".into(), "c".into()], Some(1))
        );
    }

    #[test]
    fn compaction_keeps_the_visible_state_and_expires_older_watches() {
        let mut store = Store::new(2, 10);
        for name in ["a", "b", "c", "d"] {
            store.commit("pods", &format!("ns/{name}"), Some(pod(name)));
        }
        store.commit("pods", "ns/a", None);
        assert_eq!(store.compacted_revision(), 4);
        let error = store
            .watch("pods", None, WatchStart::After(2))
            .expect_err("revision 2 is compacted");
        assert_eq!(error.code, 410);
        assert_eq!(error.message, "too old resource version: 2 (4)");
        let (_, backlog, _rx) = store
            .watch("pods", None, WatchStart::After(4))
            .expect("revision 4 is inside the window");
        assert_eq!(backlog.len(), 2);
    }

    #[test]
    fn a_watcher_that_falls_behind_its_buffer_is_closed_without_blocking_writes() {
        let mut store = Store::new(100, 2);
        let (_, _, mut slow) = store
            .watch("pods", None, WatchStart::After(1))
            .expect("watch");
        for i in 0..5 {
            store.commit("pods", &format!("ns/p{i}"), Some(pod(&format!("p{i}"))));
        }
        assert_eq!(store.open_watchers(), 0);
        let mut delivered = 0;
        while slow.try_recv().is_ok() {
            delivered += 1;
        }
        assert_eq!(delivered, 2);
    }
}
