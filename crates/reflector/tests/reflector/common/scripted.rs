//! The scripted world: a `ListerWatcher` whose answers are closures of the call, on tokio's
//! paused clock, so a test pins down the reflector's call sequence and timing without waiting
//! in real time.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{
    Error, ListOptions, ListPage, ListSink, ListerWatcher, Reflector, ReflectorOptions, Result,
    WatchEvent, WatchStream,
};
use kinformer_store::{Cache, CacheReader, Incoming, Store};
use kinformer_wait::ExponentialBackoffManager;
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::Running;

/// How long a test waits for what the reflector does: tokio time, which the paused clock
/// advances whenever every task is idle, so waiting costs no real time.
pub(crate) const PATIENCE: Duration = Duration::from_secs(3600);

/// How soon after its token fires a reflector must have stopped (virtual time).
const STOP_WITHIN: Duration = Duration::from_secs(1);

/// Runs `reflector` in a task.
pub(crate) fn spawn<S: Store<Pod> + ?Sized + 'static>(
    reflector: &Arc<Reflector<Pod, S>>,
) -> Running<Pod, S> {
    Running::spawn(reflector, STOP_WITHIN)
}

/// Runs a reflector of `lister_watcher` into a new cache.
pub(crate) fn reflect(
    lister_watcher: &Arc<Scripted>,
    options: ReflectorOptions<Pod>,
) -> (Arc<Cache<Pod>>, Running<Pod, Cache<Pod>>) {
    let cache = Arc::new(Cache::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(lister_watcher),
        Arc::clone(&cache),
        options,
    ));
    (cache, spawn(&reflector))
}

/// A Pod `ns/{name}` at `resource_version`.
pub(crate) fn pod(name: &str, resource_version: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(resource_version.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

/// A list page: what it says, and its objects.
pub(crate) type Page = (ListPage, Vec<Arc<Pod>>);

/// A list page.
pub(crate) fn page(
    resource_version: &str,
    items: Vec<Arc<Pod>>,
    continue_token: Option<&str>,
) -> Page {
    let page = ListPage {
        resource_version: resource_version.into(),
        continue_token: continue_token.map(str::to_owned),
        shard_selector: None,
    };
    (page, items)
}

type ListFn = Box<dyn Fn(&ListOptions, usize) -> Result<Page> + Send + Sync>;

type WatchFn = Box<dyn Fn(&ListOptions, usize) -> Result<WatchStream<Pod>> + Send + Sync>;

/// A `ListerWatcher` whose answers are closures of the call options and the call number; it
/// records every call.
pub(crate) struct Scripted {
    lists: Mutex<Vec<ListOptions>>,
    watches: Mutex<Vec<ListOptions>>,
    list: ListFn,
    watch: WatchFn,
}

impl Scripted {
    /// `list` and `watch` answer each call from its options and number (from 0).
    pub(crate) fn new(
        list: impl Fn(&ListOptions, usize) -> Result<Page> + Send + Sync + 'static,
        watch: impl Fn(&ListOptions, usize) -> Result<WatchStream<Pod>> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            lists: Mutex::new(Vec::new()),
            watches: Mutex::new(Vec::new()),
            list: Box::new(list),
            watch: Box::new(watch),
        })
    }

    /// The options of every list call so far.
    pub(crate) fn list_calls(&self) -> Vec<ListOptions> {
        self.lists.lock().clone()
    }

    /// The options of every watch call so far.
    pub(crate) fn watch_calls(&self) -> Vec<ListOptions> {
        self.watches.lock().clone()
    }

    /// The resourceVersion every list call asked for.
    pub(crate) fn list_versions(&self) -> Vec<String> {
        self.list_calls()
            .iter()
            .map(|options| options.resource_version().to_owned())
            .collect()
    }
}

#[async_trait]
impl ListerWatcher<Pod> for Scripted {
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        let call = {
            let mut lists = self.lists.lock();
            lists.push(options.clone());
            lists.len() - 1
        };
        let (page, items) = (self.list)(&options, call)?;
        sink.part(items.into_iter().map(Incoming::from).collect())
            .await?;
        Ok(page)
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<Pod>> {
        let call = {
            let mut watches = self.watches.lock();
            watches.push(options.clone());
            watches.len() - 1
        };
        (self.watch)(&options, call)
    }
}

/// A watch fed by the test through a channel; dropping the sender closes it.
pub(crate) fn channel_watch() -> (
    mpsc::UnboundedSender<Result<WatchEvent<Pod>>>,
    WatchStream<Pod>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    (sender, stream.boxed())
}

/// A watch that stays open and silent.
pub(crate) fn pending_watch() -> Result<WatchStream<Pod>> {
    Ok(futures::stream::pending().boxed())
}

/// A watch that delivers `events` after two seconds, then closes.
pub(crate) fn events_then_close(events: Vec<Result<WatchEvent<Pod>>>) -> Result<WatchStream<Pod>> {
    // Lasting longer than a second keeps the watch from counting as "very short".
    let delayed = futures::stream::once(async {
        // Virtual time under the paused clock: the watch lasts two seconds.
        tokio::time::sleep(Duration::from_secs(2)).await;
        futures::stream::iter(events)
    })
    .flatten();
    Ok(delayed.boxed())
}

/// A watch whose stream ends at once with 410 Gone, which makes the reflector relist.
pub(crate) fn expiring_watch() -> Result<WatchStream<Pod>> {
    Ok(futures::stream::iter([Err(Error::Expired {
        message: "gone".into(),
    })])
    .boxed())
}

/// The cache as name -> resourceVersion.
pub(crate) fn contents(cache: &Cache<Pod>) -> BTreeMap<String, String> {
    cache
        .list()
        .iter()
        .map(|pod| {
            (
                pod.metadata.name.clone().unwrap_or_default(),
                pod.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// `pairs` as name -> resourceVersion, to compare with [`contents`].
pub(crate) fn expected(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, version)| ((*name).to_owned(), (*version).to_owned()))
        .collect()
}

/// A backoff of milliseconds, without jitter.
pub(crate) fn quick_backoff() -> ExponentialBackoffManager {
    ExponentialBackoffManager::new(
        Duration::from_millis(1),
        Duration::from_millis(50),
        Duration::from_millis(100),
        2.0,
        0.0,
    )
}

/// A store that counts resyncs and notes, on every write, the version its reflector reports at
/// that moment: what a consumer the write wakes (an informer reporting synced, a handler)
/// would read.
#[derive(Default)]
pub(crate) struct RecordingStore {
    cache: Cache<Pod>,
    /// How many resyncs the reflector asked for.
    pub(crate) resyncs: AtomicUsize,
    /// The reflector writing here, set once it is built.
    pub(crate) reflector: std::sync::OnceLock<std::sync::Weak<Reflector<Pod, RecordingStore>>>,
    /// `(version written, version the reflector reported during the write)`.
    pub(crate) seen: Mutex<Vec<(String, String)>>,
}

impl RecordingStore {
    /// What the reflector reports as its last synced version now.
    pub(crate) fn reported_version(&self) -> Option<String> {
        self.reflector
            .get()
            .and_then(std::sync::Weak::upgrade)
            .map(|reflector| reflector.last_sync_resource_version())
    }

    fn note(&self, written: &str) {
        let reported = self.reported_version().unwrap_or_default();
        self.seen.lock().push((written.to_owned(), reported));
    }

    fn note_object(&self, obj: &Pod) {
        self.note(obj.metadata.resource_version.as_deref().unwrap_or_default());
    }
}

impl Store<Pod> for RecordingStore {
    fn add(&self, obj: Incoming<Pod>) -> kinformer_store::Result<()> {
        self.note_object(obj.object());
        self.cache.add(obj)
    }
    fn update(&self, obj: Incoming<Pod>) -> kinformer_store::Result<()> {
        self.note_object(obj.object());
        self.cache.update(obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> kinformer_store::Result<()> {
        self.note_object(&obj);
        self.cache.delete(obj)
    }
    fn replace(&self, list: Vec<Arc<Pod>>, resource_version: &str) -> kinformer_store::Result<()> {
        self.note(resource_version);
        self.cache.replace(list, resource_version)
    }
    fn resync(&self) -> kinformer_store::Result<()> {
        self.resyncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}
