//! Test support: an in-memory [`ListerWatcher`] playing the API server (client-go's
//! `FakeControllerSource`), and a recording handler.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{
    AddKind, HandlerFuncs, InformerCache, InformerOptions, ResourceEventHandler,
};
use kinformer_reflector::{
    Error, ListOptions, ListPage, ListSink, ListerWatcher, Result, WatchEvent, WatchStream,
    compact_codec,
};
use kinformer_store::ObjectOrTombstone;
use kube_core::ObjectMeta;
use tokio::sync::mpsc;

/// `options` with a compact cache that keeps nothing decoded, so that every read decodes, when
/// `KINFORMER_CACHE` is `compact`: `.ci/run` runs the informer's suites a second time that way.
pub(crate) fn cache_from_env(options: InformerOptions<Pod>) -> InformerOptions<Pod> {
    match std::env::var("KINFORMER_CACHE") {
        Ok(kind) if kind.eq_ignore_ascii_case("compact") => options.cache(InformerCache::Compact {
            codec: compact_codec::<Pod>(),
            hot_capacity: 0,
        }),
        _ => options,
    }
}

pub(crate) const NAMESPACE: &str = "default";

pub(crate) fn pod(name: &str, resource_version: u64) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some(NAMESPACE.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(resource_version.to_string()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

pub(crate) fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

type Watcher = mpsc::UnboundedSender<Result<WatchEvent<Pod>>>;

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Arc<Pod>>,
    revision: u64,
    history: Vec<(u64, WatchEvent<Pod>)>,
    /// Watches from before this revision are refused with 410.
    compacted: u64,
    watchers: Vec<Watcher>,
    list_error: Option<String>,
    /// The next list hands its objects over, then loses this object and breaks off.
    break_off_next_list: Option<String>,
    lists: usize,
}

/// An in-memory API server for one namespace of Pods.
#[derive(Default)]
pub(crate) struct FakeSource {
    state: Mutex<State>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    Add,
    Modify,
    Delete,
}

impl FakeSource {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn change(&self, name: &str, change: Change, broadcast: bool) {
        let mut state = self.state.lock().unwrap();
        state.revision += 1;
        let revision = state.revision;
        let obj = if change == Change::Delete {
            let Some(old) = state.objects.remove(name) else {
                return;
            };
            // A deletion carries the final state at the deletion's revision, as the API does.
            let mut last = (*old).clone();
            last.metadata.resource_version = Some(revision.to_string());
            Arc::new(last)
        } else {
            let obj = pod(name, revision);
            state.objects.insert(name.to_owned(), Arc::clone(&obj));
            obj
        };
        if broadcast {
            let event = match change {
                Change::Add => WatchEvent::Added(obj.into()),
                Change::Modify => WatchEvent::Modified(obj.into()),
                Change::Delete => WatchEvent::Deleted(obj),
            };
            state.history.push((revision, event.clone()));
            state
                .watchers
                .retain(|watcher| watcher.send(Ok(event.clone())).is_ok());
        }
    }

    pub(crate) fn add(&self, name: &str) {
        self.change(name, Change::Add, true);
    }

    pub(crate) fn modify(&self, name: &str) {
        self.change(name, Change::Modify, true);
    }

    pub(crate) fn delete(&self, name: &str) {
        self.change(name, Change::Delete, true);
    }

    /// Adds without telling any watcher: only a relist shows it.
    pub(crate) fn add_drop_watch(&self, name: &str) {
        self.change(name, Change::Add, false);
    }

    /// Modifies without telling any watcher.
    pub(crate) fn modify_drop_watch(&self, name: &str) {
        self.change(name, Change::Modify, false);
    }

    /// Deletes without telling any watcher.
    pub(crate) fn delete_drop_watch(&self, name: &str) {
        self.change(name, Change::Delete, false);
    }

    /// Ends every watch and forgets the history, so the reflector must relist.
    pub(crate) fn reset_watch(&self) {
        let mut state = self.state.lock().unwrap();
        state.compacted = state.revision + 1;
        state.history.clear();
        state.watchers.clear();
    }

    pub(crate) fn set_list_error(&self, message: Option<&str>) {
        self.state.lock().unwrap().list_error = message.map(str::to_owned);
    }

    /// The next list, taken in parts, hands every object over, then fails; meanwhile `name`
    /// is deleted without an event, so only the list that follows can tell.
    pub(crate) fn break_off_next_list_and_delete(&self, name: &str) {
        self.state.lock().unwrap().break_off_next_list = Some(name.to_owned());
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.state.lock().unwrap().objects.keys().cloned().collect()
    }
}

#[async_trait]
impl ListerWatcher<Pod> for FakeSource {
    async fn list(&self, _options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        let (items, page, break_off) = {
            let mut state = self.state.lock().unwrap();
            state.lists += 1;
            if let Some(message) = &state.list_error {
                return Err(Error::Forbidden {
                    message: message.clone(),
                });
            }
            let items: Vec<kinformer_store::Incoming<Pod>> =
                state.objects.values().cloned().map(Into::into).collect();
            let page = ListPage {
                resource_version: state.revision.to_string(),
                continue_token: None,
                shard_selector: None,
            };
            (items, page, state.break_off_next_list.take())
        };
        sink.part(items).await?;
        if let Some(name) = break_off {
            self.state.lock().unwrap().objects.remove(&name);
            return Err(Error::Forbidden {
                message: "the list broke off".to_owned(),
            });
        }
        Ok(page)
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<Pod>> {
        let from: u64 = options.resource_version().parse().unwrap_or(0);
        let mut state = self.state.lock().unwrap();
        if from + 1 < state.compacted {
            return Err(Error::Expired {
                message: format!("too old resource version: {from}"),
            });
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        for (revision, event) in &state.history {
            if *revision > from {
                let _ = sender.send(Ok(event.clone()));
            }
        }
        state.watchers.push(sender);
        Ok(Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|event| (event, receiver)) },
        )))
    }

    fn type_description(&self) -> String {
        "v1/Pod (fake)".to_owned()
    }
}

/// What a recording handler saw, one line per notification: `add:pod1`, `initial:pod1`,
/// `update:pod1`, `delete:pod1`, `tombstone:pod1`.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    events: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    pub(crate) fn clear(&self) {
        self.events.lock().unwrap().clear();
    }

    pub(crate) fn count(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    /// Names of the objects seen, without duplicates, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .events()
            .iter()
            .filter_map(|event| event.split_once(':').map(|(_, name)| name.to_owned()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The events of one kind, as names, sorted.
    pub(crate) fn of_kind(&self, kind: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .events()
            .iter()
            .filter_map(|event| event.split_once(':'))
            .filter(|(seen, _)| *seen == kind)
            .map(|(_, name)| name.to_owned())
            .collect();
        names.sort();
        names
    }

    pub(crate) fn handler(&self) -> HandlerFuncs<Pod> {
        let (adds, updates, deletes) = (self.clone(), self.clone(), self.clone());
        HandlerFuncs::new()
            .add_func(move |pod: Arc<Pod>, initial| {
                let kind = if initial.is_initial_list() {
                    "initial"
                } else {
                    "add"
                };
                adds.push(format!("{kind}:{}", name_of(&pod)));
            })
            .update_func(move |_old, new: Arc<Pod>| {
                updates.push(format!("update:{}", name_of(&new)));
            })
            .delete_func(move |obj: ObjectOrTombstone<Pod>| {
                let kind = if obj.is_tombstone() {
                    "tombstone"
                } else {
                    "delete"
                };
                deletes.push(format!("{kind}:{}", name_of(obj.object())));
            })
    }

    fn push(&self, event: String) {
        self.events.lock().unwrap().push(event);
    }
}

/// A handler that records, but sleeps first on every call.
pub(crate) fn slow(recorder: &Recorder, delay: Duration) -> impl ResourceEventHandler<Pod> {
    SlowHandler {
        inner: recorder.handler(),
        delay,
    }
}

struct SlowHandler {
    inner: HandlerFuncs<Pod>,
    delay: Duration,
}

impl ResourceEventHandler<Pod> for SlowHandler {
    fn on_add(&mut self, obj: Arc<Pod>, kind: AddKind) {
        std::thread::sleep(self.delay); // the point: a handler that is slow
        self.inner.on_add(obj, kind);
    }

    fn on_update(&mut self, old: Arc<Pod>, new: Arc<Pod>) {
        std::thread::sleep(self.delay); // the point: a handler that is slow
        self.inner.on_update(old, new);
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<Pod>) {
        std::thread::sleep(self.delay); // the point: a handler that is slow
        self.inner.on_delete(obj);
    }
}
