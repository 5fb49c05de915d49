//! How an informer is built: [`InformerOptions`] and the [`QueueKind`] choice.

use std::{fmt, sync::Arc, time::Duration};

use kinformer_fifo::Transformer;
use kinformer_processor::HandlerExecutor;
use kinformer_reflector::Error as ReflectorError;
use kinformer_store::{Codec, Indexer, Indexers, KeyFunc, Object, Shard, meta_namespace_key_func};

pub(crate) type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// Which queue sits between the reflector and the process loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum QueueKind {
    /// client-go's in-order FIFO with atomic relists and resyncs, as client-go v0.36 and later
    /// build informers (`InOrderInformers` and `AtomicFIFO` on): every watch event is delivered
    /// in arrival order, a relist is applied to the cache in one step, and pops are batched.
    #[default]
    #[doc(alias = "RealFIFO")]
    #[doc(alias = "InOrderInformers")]
    InOrder,
    /// client-go's DeltaFIFO with the cache as known objects and `Replaced` deltas (the
    /// `InOrderInformers` gate off): events are coalesced per key, so a handler sees the newest
    /// state of each key but keys in the order they first changed.
    #[doc(alias = "DeltaFIFO")]
    DeltaFifo,
}

/// Where an informer caches its objects: [`InformerOptions::cache`]. Whichever it is, the
/// informer's index funcs ([`InformerOptions::indexers`]) are added to it.
#[non_exhaustive]
pub enum InformerCache<K> {
    /// A [`Cache`](kinformer_store::Cache): every object held decoded, as `K`. The default for
    /// an informer built alone.
    Decoded,
    /// A [`CompactCache`](kinformer_store::CompactCache): each object held encoded by `codec`,
    /// at most `hot_capacity` of them kept decoded. Full objects in a fraction of the memory,
    /// for a decode on reads of the others and for each update's old object that a handler
    /// reads (on the listener's thread, once for all handlers; a handler built with
    /// [`HandlerFuncs::update_new_func`](crate::HandlerFuncs::update_new_func) reads none).
    /// Handlers still receive the objects the watch decoded. kinformer-reflector's
    /// `compact_codec` picks protobuf for built-in kinds, JSON for the rest.
    Compact {
        /// How each object is held.
        codec: Arc<dyn Codec<K>>,
        /// How many objects are kept decoded beside their encodings.
        hot_capacity: usize,
    },
    /// Your own store, empty when the informer is built: an implementation of your own, or a
    /// cache built with a key func of your own (then set the same
    /// [`key_func`](InformerOptions::key_func)).
    Own(Arc<dyn Indexer<K>>),
}

impl<K> fmt::Debug for InformerCache<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decoded => f.write_str("Decoded"),
            Self::Compact { hot_capacity, .. } => f
                .debug_struct("Compact")
                .field("hot_capacity", hot_capacity)
                .finish_non_exhaustive(),
            Self::Own(_) => f.write_str("Own"),
        }
    }
}

/// How to build a [`SharedIndexInformer`](crate::SharedIndexInformer); every setting is
/// optional.
///
/// client-go spreads these over `NewSharedIndexInformerWithOptions`, `SetTransform`,
/// `SetWatchErrorHandler` and the reflector's fields; here they sit in one place, and the
/// informer's `set_*` methods change them until it starts.
///
/// ```
/// use std::time::Duration;
///
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_informer::{InformerOptions, QueueKind};
///
/// let options = InformerOptions::<Pod>::new()
///     .name("pods")
///     .resync_period(Duration::from_secs(30))
///     .queue(QueueKind::DeltaFifo)
///     .page_size(500);
/// assert_eq!(options.queue_kind(), QueueKind::DeltaFifo);
/// ```
#[doc(alias = "SharedIndexInformerOptions")]
pub struct InformerOptions<K> {
    pub(crate) name: Option<String>,
    pub(crate) resync_period: Duration,
    pub(crate) indexers: Indexers<K>,
    pub(crate) cache: InformerCache<K>,
    pub(crate) key_func: KeyFunc<K>,
    pub(crate) queue: QueueKind,
    pub(crate) transform: Option<Transformer<K>>,
    pub(crate) page_size: Option<u32>,
    pub(crate) use_watch_list: bool,
    pub(crate) watch_error_handler: Option<WatchErrorHandler>,
    pub(crate) retry_on_error: bool,
    pub(crate) consistency_check: Option<Duration>,
    pub(crate) stop_when_gone: bool,
    pub(crate) handler_executor: HandlerExecutor,
    pub(crate) shard: Option<Shard>,
}

impl<K: Object> Default for InformerOptions<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Object> InformerOptions<K> {
    /// client-go's defaults: no resyncs, the namespace index only, the in-order queue, no
    /// transform, the reflector's paging, no streaming list, errors logged, no retries.
    pub fn new() -> Self {
        Self {
            name: None,
            resync_period: Duration::ZERO,
            indexers: kinformer_store::namespace_indexers(),
            cache: InformerCache::Decoded,
            key_func: Arc::new(meta_namespace_key_func::<K>),
            queue: QueueKind::default(),
            transform: None,
            page_size: None,
            use_watch_list: false,
            shard: None,
            watch_error_handler: None,
            retry_on_error: false,
            consistency_check: None,
            stop_when_gone: false,
            handler_executor: HandlerExecutor::default(),
        }
    }
}

impl<K> InformerOptions<K> {
    /// Where the handlers run: an OS thread per handler (the default, as client-go runs a
    /// goroutine per listener), or tokio tasks for handlers that never block, which lets a
    /// test run the whole informer on tokio's paused clock.
    #[must_use]
    pub fn handler_executor(mut self, executor: HandlerExecutor) -> Self {
        self.handler_executor = executor;
        self
    }

    /// Names the informer in logs and spans; by default the lister-watcher's type description.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The resync period of handlers that ask for none, and the initial resync check period
    /// (client-go's `defaultEventHandlerResyncPeriod`); zero, the default, means no resyncs.
    ///
    /// A non-zero period under one second is raised to one second, as client-go does, with a
    /// warning; each handler's registration reports the period in force.
    #[doc(alias = "ResyncPeriod")]
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Adds index funcs to the cache, whichever [`cache`](Self::cache) it is; a cache the
    /// informer builds always has the namespace index too. A store of your own
    /// ([`InformerCache::Own`]) that refuses them (it has an index of the same name) makes
    /// [`run`](crate::SharedIndexInformer::run) return the store's error before anything
    /// starts.
    #[doc(alias = "Indexers")]
    #[must_use]
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers.extend(indexers);
        self
    }

    /// Where the informer caches its objects; the last call wins. [`InformerCache::Decoded`]
    /// unless set.
    #[must_use]
    pub fn cache(mut self, cache: InformerCache<K>) -> Self {
        self.cache = cache;
        self
    }

    /// The key func the informer uses to match a relist against the cache; it must agree with
    /// the cache's own. Defaults to `namespace/name`.
    #[must_use]
    pub fn key_func(mut self, key_func: KeyFunc<K>) -> Self {
        self.key_func = key_func;
        self
    }

    /// Chooses the queue; [`QueueKind::InOrder`] by default.
    #[must_use]
    pub fn queue(mut self, queue: QueueKind) -> Self {
        self.queue = queue;
        self
    }

    /// The default resync period chosen ([`Duration::ZERO`]: none).
    pub fn configured_resync_period(&self) -> Duration {
        self.resync_period
    }

    /// The queue chosen.
    pub fn queue_kind(&self) -> QueueKind {
        self.queue
    }

    /// Applies `transform` to every object before it enters the queue, hence before the cache
    /// and the handlers see it (client-go's `SetTransform`), for instance to drop fields nobody
    /// reads.
    #[doc(alias = "TransformFunc")]
    #[must_use]
    pub fn transform(
        mut self,
        transform: impl Fn(Arc<K>) -> Arc<K> + Send + Sync + 'static,
    ) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// Lists in pages of this many objects (client-go's `WatchListPageSize`).
    #[doc(alias = "WatchListPageSize")]
    #[must_use]
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.page_size = Some(page_size);
        self
    }

    /// Fetches the initial state with a streaming list (`sendInitialEvents`), falling back to
    /// a paged list when the server refuses.
    #[doc(alias = "UseWatchList")]
    #[must_use]
    pub fn use_watch_list(mut self, use_watch_list: bool) -> Self {
        self.use_watch_list = use_watch_list;
        self
    }

    /// Informs only the objects of `shard`: every list and watch asks the server for it
    /// (kube-apiserver's sharded list and watch), and the informer drops what the server sends
    /// from outside it, so the cache and the handlers hold exactly the shard either way
    /// ([`ShardedListerWatcher`](kinformer_reflector::ShardedListerWatcher)). Who filters is in
    /// [`InformerHealth::shard`](crate::InformerHealth::shard). The consistency check lists the
    /// shard too.
    #[must_use]
    pub fn shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Called with every error that ends a list or a watch (client-go's
    /// `SetWatchErrorHandler`); without one they are logged.
    #[doc(alias = "WatchErrorHandler")]
    #[must_use]
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&ReflectorError) + Send + Sync + 'static,
    ) -> Self {
        self.watch_error_handler = Some(Arc::new(handler));
        self
    }

    /// Puts a popped item back in the queue when the cache refuses it, to be tried again
    /// (client-go's old `Config.RetryOnError`; today's client-go, like this default, logs the
    /// failure and moves on).
    ///
    /// With retries on, the process loop pops one item at a time instead of batches, so a retry
    /// re-applies only what failed. On a DeltaFIFO a key's deltas are one item: if a later
    /// delta fails, the earlier ones are applied again, which handlers see as a resync (an
    /// update with an unchanged resourceVersion).
    #[doc(alias = "RetryOnError")]
    #[must_use]
    pub fn retry_on_error(mut self, retry: bool) -> Self {
        self.retry_on_error = retry;
        self
    }

    /// Every `period`, lists from the server at exactly the resource version the cache has
    /// reached (a consistent, paged read) and compares keys, UIDs and resourceVersions with the
    /// cache. A difference is a change the cache missed: it is reported as
    /// [`Error::CacheDrift`](kinformer_reflector::Error::CacheDrift) to the watch error handler
    /// (or logged), counted in
    /// [`SharedIndexInformer::consistency_stats`](crate::SharedIndexInformer::consistency_stats),
    /// and never written into the cache. Off by default: each check lists everything.
    ///
    /// It needs the in-order queue (the default), whose cache has a version to compare at;
    /// `run` refuses it with the DeltaFIFO. The comparison sees the cache after the transform,
    /// so a transform must keep UIDs and resourceVersions.
    #[must_use]
    pub fn consistency_check(mut self, period: Duration) -> Self {
        self.consistency_check = Some(period);
        self
    }

    /// Stops the informer for good when its resource stops being served (a list answers 404
    /// after earlier lists succeeded: its CustomResourceDefinition was deleted), instead of
    /// retrying for ever as client-go's informers do. The informer then reports
    /// [`SyncStatus::resource_gone`](crate::SyncStatus::resource_gone) with the error, makes no
    /// further requests, and cannot run again: build a new one once the resource is back. The
    /// factory sets this for its dynamic informers. See
    /// [`ReflectorOptions::stop_when_resource_gone`](kinformer_reflector::ReflectorOptions::stop_when_resource_gone).
    #[must_use]
    pub fn stop_when_resource_gone(mut self) -> Self {
        self.stop_when_gone = true;
        self
    }
}

impl<K> fmt::Debug for InformerOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut indexers: Vec<&String> = self.indexers.keys().collect();
        indexers.sort();
        f.debug_struct("InformerOptions")
            .field("name", &self.name)
            .field("resync_period", &self.resync_period)
            .field("indexers", &indexers)
            .field("cache", &self.cache)
            .field("queue", &self.queue)
            .field("transform", &self.transform.is_some())
            .field("page_size", &self.page_size)
            .field("use_watch_list", &self.use_watch_list)
            .field("shard", &self.shard.as_ref().map(ToString::to_string))
            .field("watch_error_handler", &self.watch_error_handler.is_some())
            .field("retry_on_error", &self.retry_on_error)
            .field("consistency_check", &self.consistency_check)
            .field("stop_when_gone", &self.stop_when_gone)
            .field("handler_executor", &self.handler_executor)
            .finish()
    }
}
