//! [`Reflector`]: keeps a [`Store`] in step with the API server by listing, then watching.
//!
//! # The state machine
//!
//! ```text
//!            +--------------------------- backoff (jittered, Retry-After aware) <--------+
//!            v                                                                          |
//!   [streaming list?] --error--> [paged list] --error-------------------------------> error
//!        | bookmark                 | Replace(items, list RV)                           ^
//!        v                          v                                                   |
//!   Replace(initial events)   [watch from last RV] --410 / decode / very short -------->+
//!        |                          |   ^
//!        +------------------------> |   | closed by server, broken connection, idle:
//!                                   |   +- resume from the last RV (no relist)
//!                                   | 429 / connection refused: backoff, then resume
//! ```
//!
//! One `list_and_watch` round is client-go's `ListAndWatch`; [`Reflector::run`] repeats rounds
//! with backoff between them until its token is cancelled, like `wait.BackoffUntil`.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use kinformer_store::{Cache, CacheReader, Incoming, ListInParts, Object, Store};
use kinformer_wait::{BackoffManager, ErrorChain, ExponentialBackoffManager, jitter};
use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error_span, info, warn};

mod list;
mod options;
mod status;
mod watch_list;

pub use self::{
    options::ReflectorOptions,
    status::{Failures, ReflectorExit},
};

use crate::{
    Error, ListOptions, ListPage, ListSink, ListerWatcher, ReflectorStats, Result, VersionMatch,
    WatchEvent, WatchStream,
    lister_watcher::ReuseObject,
    stats::{Counters, EventKind},
};

/// client-go's `pager.PageSize`: the page size when the caller asked for none.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The shortest watch timeout (client-go's `defaultMinWatchTimeout`); each watch asks for a
/// random timeout between this and twice this, spreading reconnections over time.
pub const DEFAULT_MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// How long past a watch's own timeout the reflector waits for the server to close it before
/// deciding the connection is dead.
pub const WATCH_IDLE_GRACE: Duration = Duration::from_secs(5);

/// A watch that closes sooner than this without any event is suspicious (client-go's
/// "very short watch").
const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);

type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;
type WatchErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;
type BookmarkHandler = Arc<dyn Fn(&str) + Send + Sync>;
type KnownObject<K> = Arc<dyn Fn(&K) -> Option<Arc<K>> + Send + Sync>;

impl<K, S> Reflector<K, S>
where
    K: Object,
    S: Store<K> + ?Sized + 'static,
{
    /// A reflector that fills `store` from `lister_watcher`, configured by `options`; nothing
    /// runs until [`run`](Self::run).
    #[doc(alias = "NewReflector")]
    #[doc(alias = "NewReflectorWithOptions")]
    pub fn new(
        lister_watcher: impl ListerWatcher<K> + 'static,
        store: Arc<S>,
        options: ReflectorOptions<K>,
    ) -> Self {
        let lister_watcher: Arc<dyn ListerWatcher<K>> = Arc::new(lister_watcher);
        let type_description = lister_watcher.type_description();
        Reflector {
            name: options.name.unwrap_or_else(|| type_description.clone()),
            type_description,
            namespace: lister_watcher.namespace(),
            lister_watcher,
            store,
            page_size: options.page_size,
            resync_period: options.resync_period,
            should_resync: options.should_resync,
            use_watch_list: options.use_watch_list,
            watch_error_handler: options.watch_error_handler,
            bookmark_handler: options.bookmark_handler,
            known_object: options.known_object,
            min_watch_timeout: options.min_watch_timeout,
            stop_when_gone: options.stop_when_gone,
            gone: AtomicBool::new(false),
            backoff: Mutex::new(
                options
                    .backoff
                    .unwrap_or_else(|| Box::new(ExponentialBackoffManager::default())),
            ),
            versions: RwLock::new(Versions::default()),
            paginated_result: Mutex::new(false),
            watch_list_refused: Mutex::new(false),
            failures: Mutex::new(Failures::default()),
            failing: AtomicBool::new(false),
            counters: Counters::default(),
        }
    }
}

#[derive(Debug, Default)]
struct Versions {
    last_sync: String,
    /// The last list or watch at `last_sync` failed with "expired" or "too large".
    unavailable: bool,
}

/// Keeps a [`Store`] in step with the API server: lists, replaces the store's contents, then
/// watches from the list's resource version, resuming and relisting as the server requires.
///
/// Build one with [`Reflector::new`], then `run` it until a [`CancellationToken`] fires.
///
/// The Rust shape of client-go's `cache.Reflector`.
#[doc(alias = "NewReflector")]
pub struct Reflector<K, S: ?Sized> {
    name: String,
    type_description: String,
    namespace: Option<String>,
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    store: Arc<S>,
    page_size: Option<u32>,
    resync_period: Option<Duration>,
    should_resync: Option<ShouldResync>,
    use_watch_list: bool,
    watch_error_handler: Option<WatchErrorHandler>,
    bookmark_handler: Option<BookmarkHandler>,
    known_object: Option<KnownObject<K>>,
    min_watch_timeout: Duration,
    stop_when_gone: bool,
    /// Whether watches keep each object's bytes for the store.
    /// Set once the resource was found gone; the reflector has stopped for good.
    gone: AtomicBool,
    backoff: Mutex<Box<dyn BackoffManager>>,
    versions: RwLock<Versions>,
    /// The first list (at "0") came back paginated: the server has no watch cache for this
    /// resource, so every relist is paginated.
    paginated_result: Mutex<bool>,
    /// The server answered a streaming list with a client error: it does not support them.
    watch_list_refused: Mutex<bool>,
    /// Errors since the last successful list or watch event.
    failures: Mutex<Failures>,
    /// Whether `failures` holds any, so progress on the hot path costs one load.
    failing: AtomicBool,
    /// What the reflector has done, for metrics and health.
    counters: Counters,
}

impl<K, S: ?Sized> fmt::Debug for Reflector<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.name)
            .field("type", &self.type_description)
            .field("namespace", &self.namespace)
            .field(
                "last_sync_resource_version",
                &self.versions.read().last_sync,
            )
            .finish_non_exhaustive()
    }
}

/// How one watch stream ended.
enum WatchEnd {
    /// The token fired.
    Stopped,
    /// The server closed the stream normally; resume from the last version.
    Closed,
    /// The stream failed.
    Failed(Error),
}

/// A watch in progress: its stream, when it started and when it is presumed dead.
struct OpenWatch<K> {
    stream: WatchStream<K>,
    started: Instant,
    deadline: Instant,
}

impl<K, S> Reflector<K, S>
where
    K: Object,
    S: Store<K> + ?Sized + 'static,
{
    /// The reflector's name, as in its tracing span.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the reflector lists (`v1/Pod`).
    #[doc(alias = "TypeDescription")]
    pub fn type_description(&self) -> &str {
        &self.type_description
    }

    /// The store the reflector writes into.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The resource version of the last list, watch event or bookmark applied; empty before the
    /// first list.
    ///
    /// It moves just before the store receives the write, so anything the write wakes (an
    /// informer reporting synced, a handler) reads a version that includes it. client-go moves
    /// it just after, which lets an informer report synced while this is still empty.
    #[doc(alias = "LastSyncResourceVersion")]
    pub fn last_sync_resource_version(&self) -> String {
        self.versions.read().last_sync.clone()
    }

    /// Lists and watches, with backoff between rounds, until `token` is cancelled. Run it once at
    /// a time per reflector.
    ///
    /// Errors do not end the loop: each goes to the watch-error handler (or the log), then the
    /// reflector backs off and starts over. The one exception is [`Error::ResourceGone`], under
    /// [`ReflectorOptions::stop_when_resource_gone`]. Cancelling the token stops it promptly,
    /// also in the middle of a list or a backoff.
    #[doc(alias = "Run")]
    pub async fn run(&self, token: CancellationToken) -> ReflectorExit {
        // An error-level span: the resource it names reaches every warning inside, whatever the
        // filter (an info span is dropped by a `warn` filter, and its fields with it).
        let span = error_span!(
            "reflector",
            name = %self.name,
            resource = %self.type_description,
            namespace = self.namespace.as_deref().unwrap_or(""),
        );
        async {
            info!(resync_period = ?self.resync_period, "reflector starting");
            let mut exit = ReflectorExit::Cancelled;
            while !token.is_cancelled() {
                let retry_after = match self.list_and_watch(&token).await {
                    Ok(()) => None,
                    Err(error @ Error::ResourceGone { .. }) => {
                        self.gone.store(true, Ordering::Release);
                        self.report(&error);
                        warn!("the resource is no longer served; the reflector stops");
                        exit = ReflectorExit::ResourceGone;
                        break;
                    }
                    // Not a failure: the next round lists the new shard, with no backoff.
                    Err(Error::ShardChanged) => continue,
                    Err(error) => {
                        let retry_after = error.retry_after();
                        self.report(&error);
                        retry_after
                    }
                };
                if !self
                    .back_off(&token, retry_after, "before the next list")
                    .await
                {
                    break;
                }
            }
            info!(?exit, "reflector stopped");
            exit
        }
        .instrument(span)
        .await
    }

    /// Whether the reflector stopped because the resource is no longer served
    /// ([`ReflectorExit::ResourceGone`]).
    pub fn is_resource_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// One round: list (or stream the initial state), then watch, resuming the watch as long as
    /// no relist is needed. Returns `Ok(())` only once the token has fired.
    ///
    /// [`run`](Reflector::run) calls it in a loop; call it yourself only to drive rounds by hand
    /// (a benchmark, a test), and never while `run` is going on the same reflector.
    ///
    /// # Errors
    ///
    /// The error that ended the round: a failed list, a watch that cannot start, or a watch that
    /// ended in a way that calls for a relist (410, an undecodable event, a very short watch).
    #[doc(alias = "ListAndWatch")]
    pub async fn list_and_watch(&self, token: &CancellationToken) -> Result<()> {
        if token.is_cancelled() {
            return Ok(());
        }
        let mut open = None;
        if self.use_watch_list && !*self.watch_list_refused.lock() {
            match self.watch_list(token).await {
                Ok(None) => return Ok(()),
                Ok(Some(watch)) => open = Some(watch),
                Err(Error::ShardChanged) => return Err(Error::ShardChanged),
                Err(error) => {
                    warn!(error = %ErrorChain(&error), "the streaming list failed, falling back to list and watch");
                    if matches!(
                        error,
                        Error::Api {
                            code: 400..=499,
                            ..
                        }
                    ) {
                        *self.watch_list_refused.lock() = true;
                    }
                    self.report(&error);
                }
            }
        }
        if open.is_none() && !self.list(token).await? {
            return Ok(());
        }
        self.watch(open, token).await
    }

    fn report(&self, error: &Error) {
        self.counters
            .reported(matches!(error, Error::Decode { .. }));
        {
            let mut failures = self.failures.lock();
            failures.consecutive = failures.consecutive.saturating_add(1);
            failures.last_error = Some(ErrorChain(error).to_string());
            self.failing.store(true, Ordering::Release);
        }
        match &self.watch_error_handler {
            Some(handler) => handler(error),
            None => warn!(error = %ErrorChain(&error), "list/watch error"),
        }
    }

    /// Sleeps the next backoff delay (at least `retry_after`); `false` when the token fired.
    async fn back_off(
        &self,
        token: &CancellationToken,
        retry_after: Option<Duration>,
        before: &str,
    ) -> bool {
        if token.is_cancelled() {
            return false;
        }
        let backoff = self.backoff.lock().next_delay();
        let delay = retry_after.map_or(backoff, |after| after.max(backoff));
        debug!(?delay, ?retry_after, "backing off {before}");
        tokio::select! {
            () = token.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }

    /// The errors since the reflector last made progress.
    pub fn failures(&self) -> Failures {
        self.failures.lock().clone()
    }

    /// What the reflector has done so far: lists, watches, relists by reason, events by type,
    /// errors, and how long ago the last event arrived. Cheap enough for every scrape.
    pub fn stats(&self) -> ReflectorStats {
        self.counters.snapshot()
    }

    /// The reflector made progress: a list was applied or a watch event arrived.
    fn progressed(&self) {
        if self.failing.load(Ordering::Acquire) {
            *self.failures.lock() = Failures::default();
            self.failing.store(false, Ordering::Release);
        }
    }

    fn set_last_sync(&self, resource_version: &str) {
        if !resource_version.is_empty() {
            resource_version.clone_into(&mut self.versions.write().last_sync);
        }
    }

    /// Replaces the store's contents with a full list at `resource_version`. The version is
    /// recorded before the store sees the items, so whoever the replace wakes (a consumer that
    /// then reports synced) already reads it; a refused replace puts the previous version back.
    fn replace_store(&self, items: Vec<Arc<K>>, resource_version: &str) -> Result<()> {
        let previous = self.last_sync_resource_version();
        self.set_last_sync(resource_version);
        self.store
            .replace(items, resource_version)
            .map_err(|error| {
                self.versions.write().last_sync = previous;
                Error::from(error)
            })?;
        self.progressed();
        Ok(())
    }

    fn set_unavailable(&self, unavailable: bool) {
        self.versions.write().unavailable = unavailable;
    }

    /// client-go's `relistResourceVersion`: "" after an expired or too-large version (a consistent
    /// read), "0" for the first list (any version, from the watch cache), else the last version.
    fn relist_resource_version(&self) -> String {
        let versions = self.versions.read();
        if versions.unavailable {
            String::new()
        } else if versions.last_sync.is_empty() {
            "0".to_owned()
        } else {
            versions.last_sync.clone()
        }
    }

    /// client-go's `rewatchResourceVersion`, for streaming lists.
    fn rewatch_resource_version(&self) -> String {
        let versions = self.versions.read();
        if versions.unavailable {
            String::new()
        } else {
            versions.last_sync.clone()
        }
    }

    /// client-go's `minWatchTimeout * (1 + rand)`: between one and two minimum timeouts.
    fn watch_timeout(&self) -> Duration {
        jitter(self.min_watch_timeout, 1.0).max(Duration::from_secs(1))
    }

    /// Opens a watch at the last synced version; `None` when the token fired first.
    async fn open_watch(&self, token: &CancellationToken) -> Result<Option<OpenWatch<K>>> {
        loop {
            let timeout = self.watch_timeout();
            let options = ListOptions {
                resource_version: Some(self.last_sync_resource_version()),
                timeout_seconds: Some(u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)),
                allow_watch_bookmarks: true,
                ..ListOptions::default()
            };
            let started = Instant::now();
            let opened = tokio::select! {
                () = token.cancelled() => return Ok(None),
                opened = self.lister_watcher.watch(options) => opened,
            };
            match opened {
                Ok(stream) => {
                    self.counters.watch_opened(started);
                    info!(resource_version = %self.last_sync_resource_version(), ?timeout, "watch started");
                    return Ok(Some(OpenWatch {
                        stream,
                        started,
                        deadline: started + timeout + WATCH_IDLE_GRACE,
                    }));
                }
                Err(error) if error.is_retriable_without_relist() => {
                    self.report(&error);
                    if !self
                        .back_off(token, error.retry_after(), "before re-watching")
                        .await
                    {
                        return Ok(None);
                    }
                }
                Err(error) => {
                    let reason = relist_reason(&error);
                    self.counters.relisting(reason);
                    info!(error = %ErrorChain(&error), reason, "the watch could not start, relisting");
                    return Err(error);
                }
            }
        }
    }

    /// Watches, resuming from the last version whenever a stream ends, until a relist is needed.
    async fn watch(&self, mut open: Option<OpenWatch<K>>, token: &CancellationToken) -> Result<()> {
        let mut next_resync = self.resync_period.map(|period| Instant::now() + period);
        loop {
            if token.is_cancelled() {
                return Ok(());
            }
            let watch = match open.take() {
                Some(watch) => watch,
                None => match self.open_watch(token).await? {
                    Some(watch) => watch,
                    None => return Ok(()),
                },
            };
            let started = watch.started;
            let (end, events) = self.handle_watch(watch, &mut next_resync, token).await;
            self.counters.watch_closed();
            match end {
                WatchEnd::Stopped => return Ok(()),
                WatchEnd::Closed => {
                    info!(events, lasted = ?started.elapsed(), reason = "closed by the server", "watch ended, resuming");
                }
                WatchEnd::Failed(error) => {
                    let short = events == 0 && started.elapsed() < VERY_SHORT_WATCH;
                    match error {
                        Error::TooManyRequests { .. } => {
                            info!(error = %ErrorChain(&error), "watch ended, backing off before resuming");
                            self.report(&error);
                            if !self
                                .back_off(token, error.retry_after(), "before re-watching")
                                .await
                            {
                                return Ok(());
                            }
                        }
                        Error::Transport { .. }
                        | Error::ConnectionRefused { .. }
                        | Error::WatchIdle { .. }
                            if !short =>
                        {
                            info!(error = %ErrorChain(&error), events, reason = "connection lost", "watch ended, resuming");
                            self.report(&error);
                        }
                        error => {
                            let reason = relist_reason(&error);
                            self.counters.relisting(reason);
                            info!(error = %ErrorChain(&error), events, reason, "watch ended, relisting");
                            return Err(error);
                        }
                    }
                }
            }
        }
    }

    /// Applies one watch stream's events to the store; returns how it ended and how many events
    /// it delivered.
    async fn handle_watch(
        &self,
        watch: OpenWatch<K>,
        next_resync: &mut Option<Instant>,
        token: &CancellationToken,
    ) -> (WatchEnd, usize) {
        let OpenWatch {
            mut stream,
            started,
            deadline,
        } = watch;
        let mut events = 0;
        let mut last_event = started;
        loop {
            let resync_at = *next_resync;
            let item = tokio::select! {
                biased;
                () = token.cancelled() => return (WatchEnd::Stopped, events),
                () = sleep_until_some(resync_at) => {
                    if let Err(error) = self.resync() {
                        return (WatchEnd::Failed(error), events);
                    }
                    *next_resync = self.resync_period.map(|period| Instant::now() + period);
                    continue;
                }
                () = tokio::time::sleep_until(deadline) => {
                    let idle = last_event.elapsed();
                    return (WatchEnd::Failed(Error::WatchIdle { idle }), events);
                }
                item = stream.next() => item,
            };
            let event = match item {
                None if events == 0 && started.elapsed() < VERY_SHORT_WATCH => {
                    let lasted = started.elapsed();
                    return (WatchEnd::Failed(Error::VeryShortWatch { lasted }), events);
                }
                None => return (WatchEnd::Closed, events),
                Some(Err(error @ Error::WrongKind { .. })) => {
                    self.report(&error);
                    continue;
                }
                Some(Err(error)) => return (WatchEnd::Failed(error), events),
                Some(Ok(event)) => event,
            };
            events += 1;
            last_event = Instant::now();
            let applied = match event {
                WatchEvent::Added(object) => {
                    self.counters.event(EventKind::Added, last_event);
                    self.apply(object, |store, obj| store.add(obj))
                }
                WatchEvent::Modified(object) => {
                    self.counters.event(EventKind::Modified, last_event);
                    self.apply(object, |store, obj| store.update(obj))
                }
                WatchEvent::Deleted(object) => {
                    self.counters.event(EventKind::Deleted, last_event);
                    self.apply(object.into(), |store, obj| store.delete(obj.into_parts().0))
                }
                WatchEvent::Bookmark {
                    resource_version, ..
                } => {
                    self.counters.event(EventKind::Bookmark, last_event);
                    self.set_last_sync(&resource_version);
                    if let Some(handler) = &self.bookmark_handler {
                        handler(&resource_version);
                    }
                    Ok(())
                }
            };
            if let Err(error) = applied {
                // client-go logs a refused object and goes on watching: one bad object must not
                // stall the whole cache.
                self.report(&error);
            }
        }
    }

    fn apply(
        &self,
        object: Incoming<K>,
        write: impl FnOnce(&S, Incoming<K>) -> kinformer_store::Result<()>,
    ) -> Result<()> {
        // As client-go, the version moves on even when the store refuses the object; it moves
        // first so that a handler the write wakes reads a version that includes its event.
        if let Some(version) = object.object().resource_version() {
            self.set_last_sync(version);
        }
        write(&self.store, object).map_err(Error::from)?;
        self.progressed();
        Ok(())
    }

    fn resync(&self) -> Result<()> {
        let due = self.should_resync.as_ref().is_none_or(|should| should());
        if due {
            debug!("forcing resync");
            self.store.resync()?;
        }
        Ok(())
    }
}

fn relist_reason(error: &Error) -> &'static str {
    match error {
        Error::Expired { .. } => "resource version expired",
        Error::TooLargeResourceVersion { .. } => "resource version too large",
        Error::VeryShortWatch { .. } => "very short watch",
        Error::Decode { .. } => "undecodable event",
        Error::ShardChanged => "shard changed",
        _ => "watch failed",
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
