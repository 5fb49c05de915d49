//! [`SharedIndexInformer`]: one reflector, one queue, one cache, many handlers.

use std::{
    fmt,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kinformer_fifo::{
    AddKind, DeltaFifo, DeltaFifoOptions, Error as FifoError, KnownObjects, Popped, Processed,
    Queue, RealFifo, RealFifoOptions,
};
use kinformer_processor::{
    CacheSnapshot, EventStream, HandlerFuncs, ListenerOptions, ProcessorOptions, Registration,
    ResourceEventHandler, SharedProcessor,
};
use kinformer_reflector::{
    ListerWatcher, Reflector, ReflectorExit, ReflectorOptions, ShardedListerWatcher,
};
use kinformer_store::{
    Cache, CacheReader, CompactCache, Indexer, Indexers, Lister, Object, Shard, Store,
};
use kinformer_wait::ErrorChain;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error_span, info, warn};

use crate::{
    ConsistencyStats, Error, InformerCache, InformerHealth, InformerOptions, QueueKind, Result,
    checker::{Checker, Counters, Snapshot},
    controller::Applier,
    health,
    latency::LatencyRecorder,
    options::WatchErrorHandler,
    progress::Progress,
    shard_sync::{MarkingStore, ShardSync},
};

mod sync;
#[cfg(test)]
mod tests;

/// While the initial list has not been processed, the process loop looks at the queue's
/// `has_synced` at least this often, since an empty first list may queue nothing to pop.
const SYNC_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// How many items the queue may hold before a list taken in parts waits for the process loop:
/// the part of a list that is decoded and not yet in the cache stays a small share of it.
const LIST_BACKLOG: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Running,
    Stopped,
}

/// What can change until start (client-go's fields under `startedLock`).
struct Settings<K> {
    phase: Phase,
    queue: QueueKind,
    transform: Option<kinformer_fifo::Transformer<K>>,
    page_size: Option<u32>,
    use_watch_list: bool,
    watch_error_handler: Option<WatchErrorHandler>,
    retry_on_error: bool,
    consistency_check: Option<Duration>,
    stop_when_gone: bool,
    /// Whether the cache is a compact cache this informer built.
    compact: bool,
    /// What a store of the user's own answered when given the informer's index funcs: the
    /// informer never runs without them.
    refused_indexers: Option<kinformer_store::Error>,
}

type QueueReflector<K> = Reflector<K, dyn Store<K>>;

struct Inner<K> {
    name: String,
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    /// The same lister-watcher when the informer informs a shard: who filters.
    sharded: Option<ShardedListerWatcher<K>>,
    applier: Applier<K>,
    settings: Mutex<Settings<K>>,
    /// Held while a popped item is applied and distributed, and while a late handler takes its
    /// snapshot of the cache and joins (client-go's `blockDeltas`), so nothing falls between
    /// the snapshot and the handler's first notification, and nothing arrives twice.
    block_deltas: Arc<Mutex<()>>,
    queue: OnceLock<Arc<dyn Queue<K>>>,
    reflector: OnceLock<Arc<QueueReflector<K>>>,
    stopped: CancellationToken,
    checks: Arc<Counters>,
    latency: LatencyRecorder,
    /// Objects the informer's own compact cache could not decode.
    cache_decode_failures: Arc<AtomicU64>,
    /// Which shard the cache holds, when the informer informs one.
    shard_sync: Arc<ShardSync>,
}

/// A cache of one kind of object kept in step with the API server by one list+watch, with
/// any number of event handlers (client-go's `SharedIndexInformer`).
///
/// The pieces: a [`Reflector`] lists and watches through the [`ListerWatcher`] into a queue
/// ([`QueueKind`]); the process loop pops from it, applies each change to the indexer (the
/// cache), then hands a notification to the [`SharedProcessor`], which gives every handler its
/// own buffer and thread. Per key, every handler sees the changes in the order the queue
/// delivered them.
///
/// Cloning gives another handle to the same informer. Handlers may be added before or after
/// [`run`](Self::run); one added after start first receives the whole cache as adds with
/// `is_in_initial_list = true`.
#[doc(alias = "sharedIndexInformer")]
#[doc(alias = "NewSharedIndexInformer")]
#[doc(alias = "NewSharedIndexInformerWithOptions")]
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.inner.name)
            .field("phase", &self.inner.settings.lock().phase)
            .field("processor", &self.inner.applier.processor)
            .finish_non_exhaustive()
    }
}

impl<K: Object> SharedIndexInformer<K> {
    /// An informer over `lister_watcher`, configured by `options`; nothing runs until
    /// [`run`](Self::run).
    pub fn new(
        lister_watcher: impl ListerWatcher<K> + 'static,
        options: InformerOptions<K>,
    ) -> Self {
        let name = options
            .name
            .unwrap_or_else(|| lister_watcher.type_description());
        let compact = matches!(options.cache, InformerCache::Compact { .. });
        let (lister_watcher, sharded): (Arc<dyn ListerWatcher<K>>, _) = match options.shard {
            Some(shard) => {
                let sharded = ShardedListerWatcher::new(lister_watcher, shard);
                (Arc::new(sharded.clone()), Some(sharded))
            }
            None => (Arc::new(lister_watcher), None),
        };
        let cache_decode_failures = Arc::<AtomicU64>::default();
        // A store of the user's own takes the index funcs now; one it refuses stops `run`.
        let mut refused_indexers = None;
        let indexer: Arc<dyn Indexer<K>> = match options.cache {
            InformerCache::Own(indexer) => {
                if !options.indexers.is_empty()
                    && let Err(error) = indexer.add_indexers(options.indexers)
                {
                    refused_indexers = Some(error);
                }
                indexer
            }
            InformerCache::Compact {
                codec,
                hot_capacity,
            } => Arc::new(
                CompactCache::new(options.key_func.clone(), options.indexers, codec)
                    .hot_capacity(hot_capacity)
                    .on_decode_failure(health::report_decode_failure(
                        name.clone(),
                        Arc::clone(&cache_decode_failures),
                        options.watch_error_handler.clone(),
                    )),
            ),
            InformerCache::Decoded => {
                Arc::new(Cache::new(options.key_func.clone(), options.indexers))
            }
        };
        // The lock that orders cache changes with their distribution; a listener catching up
        // after an overflow reads the cache under it.
        let block_deltas = Arc::new(Mutex::new(()));
        let snapshot: CacheSnapshot<K> = {
            let (block_deltas, indexer) = (Arc::clone(&block_deltas), Arc::clone(&indexer));
            Arc::new(move |catch_up| {
                let _blocked = block_deltas.lock();
                catch_up(indexer.list());
            })
        };
        let processor = SharedProcessor::new(
            ProcessorOptions::default()
                .handler_executor(options.handler_executor)
                .resync_period(options.resync_period)
                .key_func(Arc::clone(&options.key_func))
                .cache_snapshot(snapshot),
        );
        Self {
            inner: Arc::new(Inner {
                name,
                lister_watcher,
                sharded: sharded.clone(),
                applier: Applier {
                    indexer,
                    processor,
                    key_func: options.key_func,
                    progress: Progress::new(options.queue == QueueKind::InOrder),
                    sharded,
                    relisting: Mutex::new(None),
                },
                settings: Mutex::new(Settings {
                    phase: Phase::Idle,
                    queue: options.queue,
                    transform: options.transform,
                    page_size: options.page_size,
                    use_watch_list: options.use_watch_list,
                    watch_error_handler: options.watch_error_handler,
                    retry_on_error: options.retry_on_error,
                    consistency_check: options.consistency_check,
                    stop_when_gone: options.stop_when_gone,
                    compact,
                    refused_indexers,
                }),
                block_deltas,
                queue: OnceLock::new(),
                reflector: OnceLock::new(),
                stopped: CancellationToken::new(),
                checks: Arc::default(),
                latency: LatencyRecorder::default(),
                cache_decode_failures,
                shard_sync: Arc::default(),
            }),
        }
    }

    /// The informer's name, as in its logs.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Informs `shard` from now on, in place of the one it informs now
    /// ([`InformerOptions::shard`]). A running informer ends its watch and lists the new
    /// shard at once; its handlers see the objects the new shard gained as adds, and the ones
    /// it lost as deletions whose tombstones are marked
    /// [`left_shard`](kinformer_store::DeletedFinalStateUnknown::left_shard) (they were not
    /// deleted from the cluster); then the cache holds exactly the new shard. The same shard
    /// again changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Options`] when the informer was built without a shard: it lists and watches
    /// every object, and its handlers' contract has no room for a shard to appear.
    pub fn set_shard(&self, shard: Shard) -> Result<()> {
        let sharded = self.inner.sharded.as_ref().ok_or(Error::Options {
            reason: "set_shard on an informer built without a shard (InformerOptions::shard)",
        })?;
        sharded.set_shard(shard);
        self.inner.shard_sync.moved();
        Ok(())
    }

    /// An empty [`HandlerFuncs`] for this informer's type. Built from here rather than from
    /// `HandlerFuncs::new()`, its closures need no type written on their arguments:
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kube_core::ResourceExt;
    /// # fn doc(pods: kinformer_informer::SharedIndexInformer<Pod>) -> kinformer_informer::Result<()> {
    /// pods.add_event_handler(
    ///     pods.handler_funcs()
    ///         .add_func(|pod, _| println!("added {}", pod.name_any()))
    ///         .delete_func(|pod| println!("deleted {}", pod.object().name_any())),
    /// )?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn handler_funcs(&self) -> HandlerFuncs<K> {
        HandlerFuncs::new()
    }

    /// Registers a handler with the informer's default resync period (client-go's
    /// `AddEventHandler`); [`add_event_handler_with_options`](Self::add_event_handler_with_options)
    /// names it or sets its own period.
    ///
    /// # Errors
    ///
    /// [`Error::Stopped`] once the informer has stopped; [`Error::Processor`] when the
    /// handler's thread cannot start.
    #[doc(alias = "AddEventHandler")]
    pub fn add_event_handler<H>(&self, handler: H) -> Result<Registration<K>>
    where
        H: ResourceEventHandler<K>,
    {
        self.add_event_handler_with_options(handler, ListenerOptions::new())
    }

    /// Registers a handler with a name, a resync period or a buffer policy of its own
    /// (client-go's `AddEventHandlerWithOptions`, and `AddEventHandlerWithResyncPeriod` as
    /// `ListenerOptions::new().resync_period(period)`).
    ///
    /// After start, the handler first receives every cached object as an add with
    /// `is_in_initial_list = true`; deliveries are held back meanwhile, so it misses no change
    /// and sees none twice. Its [`Registration::has_synced`] turns true once it has handled
    /// those adds.
    ///
    /// # Errors
    ///
    /// As [`add_event_handler`](Self::add_event_handler).
    #[doc(alias = "AddEventHandlerWithOptions")]
    #[doc(alias = "AddEventHandlerWithResyncPeriod")]
    pub fn add_event_handler_with_options<H>(
        &self,
        handler: H,
        options: ListenerOptions,
    ) -> Result<Registration<K>>
    where
        H: ResourceEventHandler<K>,
    {
        let processor = &self.inner.applier.processor;
        let settings = self.inner.settings.lock();
        match settings.phase {
            Phase::Stopped => Err(Error::Stopped {
                action: "add an event handler",
            }),
            Phase::Idle => Ok(processor.add_handler(handler, options)?),
            Phase::Running => {
                let _blocked = self.inner.block_deltas.lock();
                let snapshot = self.inner.applier.indexer.list();
                Ok(processor.add_handler_with_initial(handler, options, snapshot)?)
            }
        }
    }

    /// The informer's notifications as an async stream ([`EventStream`]), with the same
    /// late-joiner guarantee as a handler; dropping the stream unregisters it.
    ///
    /// # Errors
    ///
    /// [`Error::Stopped`] once the informer has stopped.
    pub fn subscribe(&self, options: ListenerOptions) -> Result<EventStream<K>> {
        let processor = &self.inner.applier.processor;
        let settings = self.inner.settings.lock();
        match settings.phase {
            Phase::Stopped => Err(Error::Stopped {
                action: "subscribe",
            }),
            Phase::Idle => Ok(processor.subscribe(options)?),
            Phase::Running => {
                let _blocked = self.inner.block_deltas.lock();
                let snapshot = self.inner.applier.indexer.list();
                Ok(processor.subscribe_with_initial(options, snapshot)?)
            }
        }
    }

    /// Unregisters a handler and returns at once (client-go's `RemoveEventHandler`); returns
    /// whether it was registered here. Await [`Registration::stopped`] to know it has exited,
    /// or call [`Registration::shutdown`] for both.
    #[doc(alias = "RemoveEventHandler")]
    pub fn remove_event_handler(&self, registration: &Registration<K>) -> bool {
        self.inner.applier.processor.remove_listener(registration)
    }

    /// Registers more index funcs on the cache (client-go's `AddIndexers`), before or after
    /// start: the objects already cached are indexed under the cache's lock, so a reader never
    /// sees a half-built index.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when an index name is taken; nothing is added then.
    #[doc(alias = "AddIndexers")]
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        Ok(self.inner.applier.indexer.add_indexers(indexers)?)
    }

    /// The cache with its indexes, read-only (client-go's `GetStore` and `GetIndexer`): only
    /// the informer writes into it, so its notifications always match its contents.
    #[doc(alias = "GetStore")]
    #[doc(alias = "GetIndexer")]
    pub fn cache(&self) -> Arc<dyn CacheReader<K>> {
        Arc::clone(&self.inner.applier.indexer) as Arc<dyn CacheReader<K>>
    }

    /// A [`Lister`] over the cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.cache())
    }

    /// The informer's state in one read: sync status, the reflector's counters, every
    /// handler's counters, the cache's size and version, and the consistency checks.
    pub fn health(&self) -> InformerHealth {
        InformerHealth {
            name: self.inner.name.clone(),
            sync: self.sync_status(),
            reflector: self
                .inner
                .reflector
                .get()
                .map(|reflector| reflector.stats())
                .unwrap_or_default(),
            handlers: self.inner.applier.processor.listener_stats(),
            cached_objects: self.inner.applier.indexer.len(),
            queued: self.inner.queue.get().map_or(0, |queue| queue.len()),
            processing_latency: self.inner.latency.snapshot(),
            cache_version: self.cache_version(),
            consistency: self.consistency_stats(),
            cache_decode_failures: self.inner.cache_decode_failures.load(Ordering::Relaxed),
            shard: self.inner.sharded.as_ref().map(ShardedListerWatcher::stats),
        }
    }

    /// What the consistency checks found so far
    /// ([`InformerOptions::consistency_check`]); all zero when they are off.
    pub fn consistency_stats(&self) -> ConsistencyStats {
        self.inner.checks.stats()
    }

    /// The highest resource version the cache has applied, in order: every change up to it is
    /// in the cache. `None` for an informer on the [`QueueKind::DeltaFifo`], which reorders
    /// keys; 0 before the first list.
    pub fn cache_version(&self) -> Option<u64> {
        self.inner.applier.progress.version()
    }

    /// The resource version of the last list, watch event or bookmark the reflector applied;
    /// empty before start (client-go's `LastSyncResourceVersion`).
    #[doc(alias = "LastSyncResourceVersion")]
    pub fn last_sync_resource_version(&self) -> String {
        self.inner
            .reflector
            .get()
            .map(|reflector| reflector.last_sync_resource_version())
            .unwrap_or_default()
    }

    /// Whether [`run`](Self::run) has started.
    #[doc(alias = "HasStarted")]
    pub fn has_started(&self) -> bool {
        self.inner.settings.lock().phase != Phase::Idle
    }

    /// Whether the informer has stopped (client-go's `IsStopped`); it never runs again.
    #[doc(alias = "IsStopped")]
    pub fn is_stopped(&self) -> bool {
        self.inner.settings.lock().phase == Phase::Stopped
    }

    /// Resolves once [`run`](Self::run) has returned.
    pub async fn stopped(&self) {
        self.inner.stopped.cancelled().await;
    }

    /// Runs the informer until `token` fires: lists and watches, applies every change to the
    /// cache and relays it to the handlers. On cancellation the queue closes, the reflector
    /// and the process loop stop, then the processor stops and every handler thread is waited
    /// for; then the informer is stopped for good.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyStarted`] when called twice, [`Error::Stopped`] after a stop,
    /// [`Error::Queue`] when the queue cannot be built.
    #[doc(alias = "Run")]
    #[doc(alias = "RunWithContext")]
    pub async fn run(&self, token: CancellationToken) -> Result<()> {
        let (queue, reflector, retry_on_error) = self.start()?;
        // An error-level span: its name reaches every warning inside, whatever the filter.
        let span = error_span!("informer", name = %self.inner.name);
        async {
            info!("informer starting");
            // Dropping `run` stops everything it started, as cancelling the token does, and
            // still leaves the informer observably stopped.
            let _mark_stopped = MarkStoppedOnExit(&self.inner);
            let run_token = token.child_token();
            let _stop_on_drop = run_token.clone().drop_guard();
            let processor_token = CancellationToken::new();
            let _stop_processor_on_drop = processor_token.clone().drop_guard();

            let processor = self.inner.applier.processor.clone();
            let processor_task = tokio::spawn(
                {
                    let token = processor_token.clone();
                    async move { processor.run(token).await }
                }
                .in_current_span(),
            );
            let reflector_task = tokio::spawn(
                {
                    let (reflector, token) = (Arc::clone(&reflector), run_token.clone());
                    async move {
                        if reflector.run(token.clone()).await == ReflectorExit::ResourceGone {
                            // Nothing more will arrive: the informer stops, keeping its error.
                            token.cancel();
                        }
                    }
                }
                .in_current_span(),
            );
            let closer = tokio::spawn({
                let (queue, token) = (Arc::clone(&queue), run_token.clone());
                async move {
                    token.cancelled().await;
                    queue.close();
                }
            });

            let checker_task = self.spawn_checker(&run_token);

            self.process_loop(queue.as_ref(), retry_on_error).await;

            run_token.cancel();
            if let Some(checker) = checker_task {
                let _ = checker.await;
            }
            if let Err(error) = reflector_task.await {
                warn!(error = %ErrorChain(&error), "reflector task failed");
            }
            let _ = closer.await;
            self.inner.settings.lock().phase = Phase::Stopped;
            // The processor stops strictly after the controller, so that every change applied
            // to the cache has been handed to the listeners.
            processor_token.cancel();
            match processor_task.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => warn!(error = %ErrorChain(&error), "processor did not run"),
                Err(error) => warn!(error = %ErrorChain(&error), "processor task failed"),
            }
            info!("informer stopped");
        }
        .instrument(span)
        .await;
        Ok(())
    }

    /// Starts the consistency checks when the options ask for them.
    fn spawn_checker(&self, token: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
        let (period, handler) = {
            let settings = self.inner.settings.lock();
            (
                settings.consistency_check?,
                settings.watch_error_handler.clone(),
            )
        };
        let checker = Checker {
            lister_watcher: Arc::clone(&self.inner.lister_watcher),
            sharded: self.inner.sharded.clone(),
            key_func: Arc::clone(&self.inner.applier.key_func),
            handler,
            counters: Arc::clone(&self.inner.checks),
        };
        let informer = self.clone();
        // The cache, its version and its shard, taken under the lock that orders cache
        // changes, so they describe one state.
        let snapshot = move || {
            let _blocked = informer.inner.block_deltas.lock();
            Snapshot {
                version: informer.inner.applier.progress.version().unwrap_or(0),
                objects: informer.inner.applier.indexer.list(),
                shard: informer.inner.shard_sync.cached(),
            }
        };
        Some(tokio::spawn(
            checker
                .run(period, snapshot, token.clone())
                .in_current_span(),
        ))
    }

    #[allow(clippy::type_complexity)] // a private tuple read once, in `run`
    fn start(&self) -> Result<(Arc<dyn Queue<K>>, Arc<QueueReflector<K>>, bool)> {
        let mut settings = self.inner.settings.lock();
        match settings.phase {
            Phase::Idle => {}
            Phase::Running => return Err(Error::AlreadyStarted { action: "run" }),
            Phase::Stopped => return Err(Error::Stopped { action: "run" }),
        }
        if let Some(error) = &settings.refused_indexers {
            return Err(Error::Store(error.clone()));
        }
        if settings.consistency_check.is_some() && settings.queue != QueueKind::InOrder {
            return Err(Error::Options {
                reason: "a consistency check needs the in-order queue, whose cache has a \
                         version to compare at; the DeltaFIFO reorders keys",
            });
        }
        if self.inner.sharded.is_some() && settings.queue != QueueKind::InOrder {
            return Err(Error::Options {
                reason: "a shard needs the in-order queue, which applies each list whole and \
                         so tells when the cache holds a new shard; the DeltaFIFO applies a \
                         list key by key",
            });
        }
        let queue = self.build_queue(&settings)?;
        let processor = self.inner.applier.processor.clone();
        let mut options = ReflectorOptions::default()
            .name(self.inner.name.clone())
            .resync_period(processor.resync_check_period())
            .should_resync(move || processor.should_resync(tokio::time::Instant::now()))
            .use_watch_list(settings.use_watch_list);
        if settings.stop_when_gone {
            options = options.stop_when_resource_gone();
        }
        if let Some(page_size) = settings.page_size {
            options = options.page_size(page_size);
        }
        if let Some(handler) = settings.watch_error_handler.clone() {
            options = options.watch_error_handler(move |error| handler(error));
        }
        // Bookmarks travel through the queue so an in-order queue can deliver them in sequence;
        // queues without bookmark support ignore them.
        let bookmark_queue = Arc::clone(&queue);
        options = options.on_bookmark(move |resource_version| {
            if let Err(error) = bookmark_queue.bookmark(resource_version) {
                warn!(error = %ErrorChain(&error), resource_version, "queue refused a bookmark");
            }
        });
        // A relist keeps the cached Arc of every object that did not change, so it holds the
        // changed objects twice rather than the whole cache. Not under a transform: the queue
        // would transform a cached object a second time, and transforms need not be idempotent.
        // Not with a compact cache either: it holds no object to share, and would decode each
        // one only for the listed copy to be dropped.
        if settings.transform.is_none() && !settings.compact {
            let indexer = Arc::clone(&self.inner.applier.indexer);
            let key_func = Arc::clone(&self.inner.applier.key_func);
            options = options
                .reuse_known_objects(move |object| indexer.get_by_key(&key_func(object).ok()?));
        }
        // An informer of a shard records which shard each list ends in its queue.
        let store: Arc<dyn Store<K>> = match &self.inner.sharded {
            Some(sharded) => Arc::new(MarkingStore {
                queue: Arc::clone(&queue) as Arc<dyn Store<K>>,
                sharded: sharded.clone(),
                sync: Arc::clone(&self.inner.shard_sync),
            }),
            None => Arc::clone(&queue) as Arc<dyn Store<K>>,
        };
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&self.inner.lister_watcher),
            store,
            options,
        ));
        // Both cells are set once, here, under the settings lock that guards the phase.
        let _ = self.inner.queue.set(Arc::clone(&queue));
        let _ = self.inner.reflector.set(Arc::clone(&reflector));
        settings.phase = Phase::Running;
        Ok((queue, reflector, settings.retry_on_error))
    }

    fn build_queue(&self, settings: &Settings<K>) -> Result<Arc<dyn Queue<K>>> {
        let key_func = Arc::clone(&self.inner.applier.key_func);
        Ok(match settings.queue {
            QueueKind::InOrder => {
                // A relist reaches the applier in parts too, which it stages in the cache:
                // neither the queue nor the applier ever holds the whole list.
                let mut options = RealFifoOptions::atomic()
                    .key_func(key_func)
                    .list_backlog(LIST_BACKLOG)
                    .relist_in_parts(true);
                if let Some(transform) = &settings.transform {
                    options = options.transformer(Arc::clone(transform));
                }
                Arc::new(RealFifo::new(options)?)
            }
            QueueKind::DeltaFifo => {
                let known: KnownObjects<K> = Arc::clone(&self.inner.applier.indexer) as _;
                let mut options = DeltaFifoOptions::new()
                    .key_func(key_func)
                    .known_objects(known)
                    .emit_delta_type_replaced(true)
                    .list_backlog(LIST_BACKLOG);
                if let Some(transform) = &settings.transform {
                    options = options.transformer(Arc::clone(transform));
                }
                Arc::new(DeltaFifo::new(options))
            }
        })
    }

    /// Pops until the queue closes (client-go's `processLoop`); the list that fills the queue
    /// waits for it ([`LIST_BACKLOG`]).
    async fn process_loop(&self, queue: &dyn Queue<K>, retry_on_error: bool) {
        let applier = &self.inner.applier;
        let block_deltas = &self.inner.block_deltas;
        let upstream = applier.processor.upstream_synced();
        let latency = &self.inner.latency;
        let shard_sync = &self.inner.shard_sync;
        let mut process = |popped: &Popped<K>, kind: AddKind| {
            let started = std::time::Instant::now();
            let _blocked = block_deltas.lock();
            let applied = applier.apply(popped, kind);
            latency.observe(started.elapsed());
            // A relist's parts and end are never retried: what a part staged stays staged,
            // and staging it again would only add to it.
            let relist = matches!(popped, Popped::RelistPart(_) | Popped::RelistEnd(_));
            let processed = match applied {
                Ok(()) => Processed::Done,
                Err(error) if retry_on_error && !relist => Processed::Retry(Box::new(error)),
                Err(error) => Processed::Failed(Box::new(error)),
            };
            // A list's end, applied or refused for good: the cache holds its shard, or none.
            if ends_a_list(popped) && !matches!(processed, Processed::Retry(_)) {
                shard_sync.list_applied(matches!(processed, Processed::Done));
            }
            processed
        };
        loop {
            // With retries, one item per pop: a requeue puts back exactly what failed, never a
            // batch whose other changes already went through.
            let pop = if retry_on_error {
                queue.pop(&mut process)
            } else {
                queue.pop_batch(&mut process)
            };
            let outcome = if upstream.has_synced() {
                Some(pop.await)
            } else {
                // A pop holds nothing between polls, so dropping it for the timer loses nothing.
                tokio::select! {
                    biased;
                    outcome = pop => Some(outcome),
                    () = tokio::time::sleep(SYNC_POLL_INTERVAL) => None,
                }
            };
            match outcome {
                Some(Err(FifoError::Closed)) => {
                    debug!("queue closed; process loop ends");
                    return;
                }
                Some(Err(error)) => {
                    warn!(error = %ErrorChain(&error), "processing a popped item failed");
                }
                Some(Ok(_)) | None => {}
            }
            if !upstream.has_synced() && queue.has_synced() {
                debug!("initial list processed");
                upstream.mark_synced();
            }
        }
    }
}

/// Whether `popped` ends a list (not one abandoned on the way).
fn ends_a_list<K>(popped: &Popped<K>) -> bool {
    match popped {
        Popped::ReplacedAll(_) | Popped::ListEnd(_) => true,
        Popped::RelistEnd(end) => end.resource_version.is_some(),
        _ => false,
    }
}

/// Marks the informer stopped when `run` ends, however it ends.
struct MarkStoppedOnExit<'a, K>(&'a Inner<K>);

impl<K> Drop for MarkStoppedOnExit<'_, K> {
    fn drop(&mut self) {
        self.0.settings.lock().phase = Phase::Stopped;
        self.0.stopped.cancel();
    }
}
