//! [`FactoryOptions`]: how a factory builds its informers, and the helpers that turn them into
//! each informer's options and lister-watcher.

use std::{
    any::{Any, TypeId},
    collections::{HashMap, HashSet},
    fmt,
    sync::Arc,
    time::Duration,
};

use kinformer_informer::{HandlerExecutor, InformerCache, InformerOptions};
use kinformer_reflector::{
    Error as ReflectorError, JsonCodec, KubeListerWatcher, ListOptions, WireFormat, compact_codec,
};
use kinformer_store::{Codec, CompactCache, Object, Shard};
use kube_core::{DynamicObject, ObjectMeta, Resource};
use serde::{Serialize, de::DeserializeOwned};

use crate::selection::{InformerKey, Selection};

type Tweak = Arc<dyn Fn(&mut ListOptions) + Send + Sync>;
type MetaTransform = Arc<dyn Fn(&mut ObjectMeta) + Send + Sync>;
pub(crate) type Transform<K> = Arc<dyn Fn(Arc<K>) -> Arc<K> + Send + Sync>;

/// How a [`SharedInformerFactory`](crate::SharedInformerFactory) builds its informers
/// (client-go's `SharedInformerOption`s); every setting is optional, and [`Default`] is
/// client-go's `NewSharedInformerFactory`: every namespace, no selectors, no resyncs, no
/// transform, protobuf where the kind has it.
///
/// ```no_run
/// use std::time::Duration;
///
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kinformer_factory::{FactoryOptions, SharedInformerFactory};
///
/// # fn build(client: kube_client::Client) -> SharedInformerFactory {
/// let options = FactoryOptions::default()
///     .namespace("prod")
///     .labels("team=payments")
///     .default_resync(Duration::from_secs(300))
///     .resync_for::<Deployment>(Duration::from_secs(60))
///     .drop_managed_fields();
/// SharedInformerFactory::new(client, options)
/// # }
/// ```
#[doc(alias = "SharedInformerOption")]
pub struct FactoryOptions {
    default_resync: Duration,
    pub(crate) selection: Selection,
    tweak: Option<Tweak>,
    page_size: Option<u32>,
    wire_format: WireFormat,
    drop_managed_fields: bool,
    decode_workers: Option<usize>,
    custom_resync: HashMap<TypeId, Duration>,
    meta_transform: Option<MetaTransform>,
    transforms: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    /// The types whose informers cache decoded objects rather than compact ones.
    decoded: HashSet<TypeId>,
    decoded_all: bool,
    hot_capacity: usize,
    watch_error_handler: Option<FactoryWatchErrorHandler>,
    handler_executor: HandlerExecutor,
    consistency_check: Option<Duration>,
}

/// The environment variable [`FactoryOptions::from_env`] reads: `decoded` for decoded caches
/// ([`FactoryOptions::decoded_cache`]); anything else leaves the compact default.
pub const CACHE_ENV: &str = "KINFORMER_CACHE";

type FactoryWatchErrorHandler = Arc<dyn Fn(&InformerKey, &ReflectorError) + Send + Sync>;

impl FactoryOptions {
    /// Where every informer's handlers run: an OS thread per handler (the default) or tokio
    /// tasks for handlers that never block, which lets a test run the factory on tokio's
    /// paused clock ([`HandlerExecutor`]).
    #[must_use]
    pub fn handler_executor(mut self, executor: HandlerExecutor) -> Self {
        self.handler_executor = executor;
        self
    }

    /// The resync period of every informer without a custom one; zero (the default) means
    /// no resyncs.
    ///
    /// A non-zero period under one second is raised to one second, as client-go does, with a
    /// warning; each handler's registration reports the period in force.
    #[doc(alias = "defaultResync")]
    #[must_use]
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = period;
        self
    }

    /// Every informer lists and watches only `namespace` (client-go's `WithNamespace`);
    /// cluster-scoped types ignore it.
    #[doc(alias = "WithNamespace")]
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.selection = self.selection.namespace(namespace);
        self
    }

    /// Every informer lists and watches only objects whose labels match `selector`.
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.selection = self.selection.labels(selector);
        self
    }

    /// Every informer lists and watches only objects whose fields match `selector`.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.selection = self.selection.fields(selector);
        self
    }

    /// Every informer lists and watches only the objects of `shard`, the factory's own: this
    /// replica's share of every collection. An informer asked for in the factory's selection
    /// (narrowed or not) without a shard of its own takes it, and moves with it
    /// ([`SharedInformerFactory::set_shard`](crate::SharedInformerFactory::set_shard)).
    #[must_use]
    pub fn shard(mut self, shard: Shard) -> Self {
        self.selection = self.selection.factory_shard(shard);
        self
    }

    /// Runs `tweak` on the options of every list and watch of every informer (client-go's
    /// `WithTweakListOptions`).
    #[doc(alias = "WithTweakListOptions")]
    #[must_use]
    pub fn tweak_list_options(
        mut self,
        tweak: impl Fn(&mut ListOptions) + Send + Sync + 'static,
    ) -> Self {
        self.tweak = Some(Arc::new(tweak));
        self
    }

    /// Lists in pages of `page_size` objects.
    #[doc(alias = "WatchListPageSize")]
    #[must_use]
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.page_size = Some(page_size);
        self
    }

    /// The resync period of informers of type `K` (client-go's `WithCustomResyncConfig`).
    ///
    /// A non-zero period under one second is raised to one second, as client-go does, with a
    /// warning; each handler's registration reports the period in force.
    #[doc(alias = "WithCustomResyncConfig")]
    #[must_use]
    pub fn resync_for<K: 'static>(mut self, period: Duration) -> Self {
        self.custom_resync.insert(TypeId::of::<K>(), period);
        self
    }

    /// Applies `transform` to the metadata of every object of every type the factory builds,
    /// before it is cached (client-go's `WithTransform`, narrowed to what every type shares).
    #[doc(alias = "WithTransform")]
    #[must_use]
    pub fn transform_metadata(
        mut self,
        transform: impl Fn(&mut ObjectMeta) + Send + Sync + 'static,
    ) -> Self {
        self.meta_transform = Some(Arc::new(transform));
        self
    }

    /// Drops `metadata.managedFields` from every object as it is decoded: often a third of an
    /// object's size, and read by no controller. In protobuf they are skipped on the wire,
    /// never decoded; in JSON they are removed before the object is shared. Unlike a
    /// transform, this keeps a relist's reuse of unchanged cached objects.
    #[must_use]
    pub fn drop_managed_fields(mut self) -> Self {
        self.drop_managed_fields = true;
        self
    }

    /// Decodes every informer's watch events on up to `workers` tasks at once beside the task
    /// that reads the watch (`0`: on that task); see
    /// [`KubeListerWatcher::watch_decode_workers`] for the default. Events keep the server's
    /// order.
    #[must_use]
    pub fn watch_decode_workers(mut self, workers: usize) -> Self {
        self.decode_workers = Some(workers);
        self
    }

    /// Receives every list and watch error of every informer the factory builds, with the
    /// informer it concerns, instead of the default warning in the log (client-go's
    /// `SetWatchErrorHandler`, for all informers at once). The informers keep retrying either
    /// way; see also
    /// [`SharedInformerFactory::sync_status`](crate::SharedInformerFactory::sync_status).
    #[doc(alias = "SetWatchErrorHandler")]
    #[must_use]
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&InformerKey, &ReflectorError) + Send + Sync + 'static,
    ) -> Self {
        self.watch_error_handler = Some(Arc::new(handler));
        self
    }

    /// What typed and metadata informers ask the server for: protobuf (the default; for
    /// typed informers of built-in kinds, for metadata informers of any kind) or JSON.
    /// Dynamic informers always use JSON.
    #[must_use]
    pub fn wire_format(mut self, format: WireFormat) -> Self {
        self.wire_format = format;
        self
    }

    /// The defaults, with the wire format from `KINFORMER_WIRE_FORMAT`
    /// ([`WireFormat::from_env`]) and decoded caches for every typed and metadata informer when
    /// [`CACHE_ENV`] is `decoded`. Like `WireFormat::from_env`, a switch for running a whole
    /// test suite each way, not a configuration API.
    pub fn from_env() -> Self {
        let options = Self::default().wire_format(WireFormat::from_env());
        match std::env::var(CACHE_ENV) {
            Ok(kind) if kind.eq_ignore_ascii_case("decoded") => options.decoded_cache(),
            _ => options,
        }
    }

    /// Caches every typed and metadata informer's objects decoded, in a
    /// [`Cache`](kinformer_store::Cache), as [`decoded_cache_for`](Self::decoded_cache_for)
    /// does for one type.
    #[must_use]
    pub fn decoded_cache(mut self) -> Self {
        self.decoded_all = true;
        self
    }

    /// Caches objects of type `K` decoded, in a [`Cache`](kinformer_store::Cache), rather than
    /// in the default compact cache: several times the memory of a compact cache, for reads
    /// that never decode. The choice for a type whose readers fetch many objects at a time
    /// (a controller listing thousands of objects per reconcile), which a compact cache
    /// decodes on every read that misses the objects it keeps decoded.
    #[must_use]
    pub fn decoded_cache_for<K: 'static>(mut self) -> Self {
        self.decoded.insert(TypeId::of::<K>());
        self
    }

    /// How many objects each compact cache keeps decoded
    /// ([`CompactCache::DEFAULT_HOT_CAPACITY`](kinformer_store::CompactCache::DEFAULT_HOT_CAPACITY)
    /// unless set).
    #[must_use]
    pub fn compact_hot_capacity(mut self, capacity: usize) -> Self {
        self.hot_capacity = capacity;
        self
    }

    /// Every informer checks its cache against the server every `period`
    /// ([`InformerOptions::consistency_check`](kinformer_informer::InformerOptions::consistency_check)):
    /// a list at exactly the version the cache has reached, compared key by key, and each
    /// difference reported to the watch error handler. Off by default: each check lists
    /// everything the informer holds. An informer a request builds on the DeltaFIFO refuses to
    /// run with it.
    #[must_use]
    pub fn consistency_check(mut self, period: Duration) -> Self {
        self.consistency_check = Some(period);
        self
    }

    /// Applies `transform` to every object of type `K` before it is cached, after the
    /// metadata transform if there is one.
    #[must_use]
    pub fn transform_for<K: 'static>(
        mut self,
        transform: impl Fn(Arc<K>) -> Arc<K> + Send + Sync + 'static,
    ) -> Self {
        let transform: Transform<K> = Arc::new(transform);
        self.transforms
            .insert(TypeId::of::<K>(), Arc::new(transform));
        self
    }
}

impl Default for FactoryOptions {
    fn default() -> Self {
        Self {
            default_resync: Duration::ZERO,
            selection: Selection::all(),
            tweak: None,
            page_size: None,
            wire_format: WireFormat::default(),
            drop_managed_fields: false,
            decode_workers: None,
            custom_resync: HashMap::new(),
            meta_transform: None,
            transforms: HashMap::new(),
            decoded: HashSet::new(),
            decoded_all: false,
            hot_capacity: CompactCache::<()>::DEFAULT_HOT_CAPACITY,
            watch_error_handler: None,
            handler_executor: HandlerExecutor::default(),
            consistency_check: None,
        }
    }
}

impl fmt::Debug for FactoryOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FactoryOptions")
            .field("default_resync", &self.default_resync)
            .field("selection", &self.selection)
            .field("tweak", &self.tweak.is_some())
            .field("page_size", &self.page_size)
            .field("wire_format", &self.wire_format)
            .field("drop_managed_fields", &self.drop_managed_fields)
            .field("decode_workers", &self.decode_workers)
            .field("custom_resync", &self.custom_resync.len())
            .field("meta_transform", &self.meta_transform.is_some())
            .field("transforms", &self.transforms.len())
            .field("decoded_caches", &self.decoded.len())
            .field("decoded_all", &self.decoded_all)
            .field("hot_capacity", &self.hot_capacity)
            .field("watch_error_handler", &self.watch_error_handler.is_some())
            .field("handler_executor", &self.handler_executor)
            .field("consistency_check", &self.consistency_check)
            .finish()
    }
}

impl FactoryOptions {
    pub(crate) fn resync_of(&self, type_id: TypeId) -> Duration {
        self.custom_resync
            .get(&type_id)
            .copied()
            .unwrap_or(self.default_resync)
    }

    pub(crate) fn type_transform<K: 'static>(&self) -> Option<Transform<K>> {
        self.transforms
            .get(&TypeId::of::<K>())
            .and_then(|any| any.downcast_ref::<Transform<K>>())
            .cloned()
    }

    /// The metadata transform followed by `K`'s own, as one function.
    pub(crate) fn transform<K: Resource + Clone + Send + Sync + 'static>(
        &self,
    ) -> Option<Transform<K>> {
        let meta = self.meta_transform.clone().map(|meta| {
            let transform: Transform<K> = Arc::new(move |object: Arc<K>| {
                // The decoder's `Arc` is unique here, so this moves rather than copies.
                let mut object = Arc::unwrap_or_clone(object);
                meta(object.meta_mut());
                Arc::new(object)
            });
            transform
        });
        match (meta, self.type_transform::<K>()) {
            (Some(meta), Some(typed)) => Some(Arc::new(move |object| typed(meta(object)))),
            (meta, typed) => meta.or(typed),
        }
    }

    pub(crate) fn options<K: Resource + Clone + Send + Sync + 'static>(
        &self,
        key: &InformerKey,
    ) -> InformerOptions<K> {
        let mut options = InformerOptions::new()
            .name(key.to_string())
            .resync_period(self.resync_of(TypeId::of::<K>()));
        if let Some(page_size) = self.page_size {
            options = options.page_size(page_size);
        }
        if let Some(transform) = self.transform::<K>() {
            options = options.transform(move |object| transform(object));
        }

        self.with_factory_wide(options, key)
    }

    /// `options` with a compact cache for `K`, unless the factory was asked for a decoded one.
    pub(crate) fn cached<K>(&self, options: InformerOptions<K>) -> InformerOptions<K>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        self.compact_unless_decoded(options, compact_codec::<K>)
    }

    /// [`cached`](Self::cached) for dynamic objects, which are held as JSON.
    pub(crate) fn cached_dynamic(
        &self,
        options: InformerOptions<DynamicObject>,
    ) -> InformerOptions<DynamicObject> {
        self.compact_unless_decoded(options, || Arc::new(JsonCodec::<DynamicObject>::new()))
    }

    /// `options` with a compact cache holding objects with `codec`, unless the factory was
    /// asked for a decoded one for `K`.
    fn compact_unless_decoded<K: 'static>(
        &self,
        options: InformerOptions<K>,
        codec: impl FnOnce() -> Arc<dyn Codec<K>>,
    ) -> InformerOptions<K> {
        if self.decoded_all || self.decoded.contains(&TypeId::of::<K>()) {
            return options;
        }
        options.cache(InformerCache::Compact {
            codec: codec(),
            hot_capacity: self.hot_capacity,
        })
    }

    /// `options` with what the factory sets for every informer: the handler executor, and
    /// list and watch errors reported to the factory's handler, naming `key`.
    pub(crate) fn with_factory_wide<K>(
        &self,
        options: InformerOptions<K>,
        key: &InformerKey,
    ) -> InformerOptions<K> {
        let mut options = options.handler_executor(self.handler_executor);
        if let Some(shard) = key.selection().shard_selector() {
            options = options.shard(shard.clone());
        }
        if let Some(period) = self.consistency_check {
            options = options.consistency_check(period);
        }
        match &self.watch_error_handler {
            Some(handler) => {
                let (handler, key) = (Arc::clone(handler), key.clone());
                options.watch_error_handler(move |error| handler(&key, error))
            }
            None => options,
        }
    }

    /// `lister_watcher` in the factory's wire format, dropping managedFields if the factory
    /// was asked to.
    pub(crate) fn wire<K>(&self, lister_watcher: KubeListerWatcher<K>) -> KubeListerWatcher<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
    {
        let lister_watcher = lister_watcher.wire_format(self.wire_format);
        if self.drop_managed_fields {
            lister_watcher.drop_managed_fields()
        } else {
            lister_watcher
        }
    }

    /// `lister_watcher`, dropping managedFields if the factory was asked to.
    pub(crate) fn dropping<K: Object + DeserializeOwned + Send + Sync + 'static>(
        &self,
        lister_watcher: KubeListerWatcher<K>,
    ) -> KubeListerWatcher<K> {
        if self.drop_managed_fields {
            lister_watcher.drop_managed_fields()
        } else {
            lister_watcher
        }
    }

    pub(crate) fn narrow<K: DeserializeOwned + Send + Sync + 'static>(
        &self,
        lister_watcher: KubeListerWatcher<K>,
        selection: &Selection,
    ) -> KubeListerWatcher<K> {
        let mut lister_watcher = match self.decode_workers {
            Some(workers) => lister_watcher.watch_decode_workers(workers),
            None => lister_watcher,
        };
        if let Some(labels) = selection.label_selector() {
            lister_watcher = lister_watcher.labels(labels);
        }
        if let Some(fields) = selection.field_selector() {
            lister_watcher = lister_watcher.fields(fields);
        }
        if let Some(tweak) = &self.tweak {
            let tweak = Arc::clone(tweak);
            lister_watcher = lister_watcher.tweak_list_options(move |options| tweak(options));
        }
        lister_watcher
    }
}
