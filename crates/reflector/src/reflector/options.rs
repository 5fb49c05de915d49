//! [`ReflectorOptions`]: how a reflector runs.

use std::{fmt, sync::Arc, time::Duration};

use kinformer_wait::BackoffManager;

use super::{
    BookmarkHandler, DEFAULT_MIN_WATCH_TIMEOUT, KnownObject, ShouldResync, WatchErrorHandler,
};
use crate::Error;

/// How a [`Reflector`](super::Reflector) runs; every setting is optional and [`Default`] is
/// client-go's `NewReflectorWithOptions` with no options.
///
/// ```
/// use std::time::Duration;
///
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_reflector::ReflectorOptions;
///
/// let options = ReflectorOptions::<Pod>::default()
///     .name("pods")
///     .page_size(500)
///     .resync_period(Duration::from_secs(30))
///     .min_watch_timeout(Duration::from_secs(60));
/// # drop(options);
/// ```
pub struct ReflectorOptions<K> {
    pub(super) name: Option<String>,
    pub(super) page_size: Option<u32>,
    pub(super) resync_period: Option<Duration>,
    pub(super) should_resync: Option<ShouldResync>,
    pub(super) use_watch_list: bool,
    pub(super) watch_error_handler: Option<WatchErrorHandler>,
    pub(super) bookmark_handler: Option<BookmarkHandler>,
    pub(super) known_object: Option<KnownObject<K>>,
    pub(super) backoff: Option<Box<dyn BackoffManager>>,
    pub(super) min_watch_timeout: Duration,
    pub(super) stop_when_gone: bool,
}

impl<K> Default for ReflectorOptions<K> {
    fn default() -> Self {
        Self {
            name: None,
            page_size: None,
            resync_period: None,
            should_resync: None,
            known_object: None,
            use_watch_list: false,
            watch_error_handler: None,
            bookmark_handler: None,
            backoff: None,
            min_watch_timeout: DEFAULT_MIN_WATCH_TIMEOUT,
            stop_when_gone: false,
        }
    }
}

impl<K> fmt::Debug for ReflectorOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorOptions")
            .field("name", &self.name)
            .field("page_size", &self.page_size)
            .field("resync_period", &self.resync_period)
            .field("use_watch_list", &self.use_watch_list)
            .field("min_watch_timeout", &self.min_watch_timeout)
            .field("stop_when_gone", &self.stop_when_gone)
            .finish_non_exhaustive()
    }
}

impl<K> ReflectorOptions<K> {
    /// Stops the reflector for good when the resource stops being served: once a list has
    /// succeeded, a list answered 404 becomes [`Error::ResourceGone`], reported once, and
    /// [`Reflector::run`](super::Reflector::run) returns
    /// [`ReflectorExit::ResourceGone`](super::ReflectorExit::ResourceGone) instead of retrying
    /// forever.
    /// For informers of custom resources, whose CustomResourceDefinition can be deleted under
    /// them (client-go's reflector retries such a list for ever). A 404 before the first
    /// successful list is retried: the CRD may not be established yet.
    #[must_use]
    pub fn stop_when_resource_gone(mut self) -> Self {
        self.stop_when_gone = true;
        self
    }

    /// The name in logs and spans; defaults to the lister-watcher's type description.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Lists in pages of `page_size` objects (client-go's `WatchListPageSize`). Without it, lists
    /// from the watch cache (`resourceVersion` "0" or "") use pages of
    /// [`DEFAULT_PAGE_SIZE`](crate::DEFAULT_PAGE_SIZE) and relists at a known version ask for
    /// everything at once, so the API server can serve them from its watch cache.
    #[doc(alias = "WatchListPageSize")]
    #[must_use]
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.page_size = Some(page_size).filter(|&size| size > 0);
        self
    }

    /// Calls the store's `resync` every `period` while watching (zero turns it off).
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period).filter(|period| !period.is_zero());
        self
    }

    /// Asked at every resync tick; the store is resynced only when it returns `true`.
    #[doc(alias = "ShouldResync")]
    #[must_use]
    pub fn should_resync(
        mut self,
        should_resync: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.should_resync = Some(Arc::new(should_resync));
        self
    }

    /// Fetches the initial state with a streaming list (`sendInitialEvents=true`) instead of a
    /// paged list, falling back to list+watch when the server refuses it.
    #[doc(alias = "UseWatchList")]
    #[must_use]
    pub fn use_watch_list(mut self, use_watch_list: bool) -> Self {
        self.use_watch_list = use_watch_list;
        self
    }

    /// Called with every error that ends a list or a watch, and with every object the reflector
    /// skips; it should return quickly. Without one, errors are logged.
    #[doc(alias = "WatchErrorHandler")]
    #[must_use]
    pub fn watch_error_handler(mut self, handler: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.watch_error_handler = Some(Arc::new(handler));
        self
    }

    /// Called with the resource version of every watch bookmark, after the reflector has
    /// recorded it; a queue that delivers bookmarks in order (client-go's atomic RealFIFO) is fed
    /// from here. It should return quickly.
    #[doc(alias = "Bookmark")]
    #[must_use]
    pub fn on_bookmark(mut self, handler: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.bookmark_handler = Some(Arc::new(handler));
        self
    }

    /// Lets a relist keep the objects the consumer already holds: `known` answers the object
    /// cached under a listed object's key, and when both carry the same non-empty
    /// resourceVersion the listed copy is dropped as soon as its page is decoded and the cached
    /// `Arc` goes into the list instead.
    ///
    /// Without it a relist holds the whole new list beside the whole cache until the store's
    /// `replace`, so its peak memory is twice the cache's; with it, only the objects that changed
    /// are held twice. `known` runs once per listed object and should be a map lookup. Do not
    /// combine it with a queue transform that is not idempotent: a reused object is one the
    /// transform has already seen.
    #[must_use]
    pub fn reuse_known_objects(
        mut self,
        known: impl Fn(&K) -> Option<Arc<K>> + Send + Sync + 'static,
    ) -> Self {
        self.known_object = Some(Arc::new(known));
        self
    }

    /// Replaces the backoff between failed attempts (by default
    /// [`ExponentialBackoffManager::default`]: 800ms doubling to 30s, with jitter, reset after
    /// two quiet minutes).
    ///
    /// [`ExponentialBackoffManager::default`]: kinformer_wait::ExponentialBackoffManager::default
    #[must_use]
    pub fn backoff(mut self, backoff: impl BackoffManager + 'static) -> Self {
        self.backoff = Some(Box::new(backoff));
        self
    }

    /// The shortest watch timeout; values below [`DEFAULT_MIN_WATCH_TIMEOUT`] are raised to it,
    /// as client-go does, to spare the control plane.
    #[doc(alias = "MinWatchTimeout")]
    #[must_use]
    pub fn min_watch_timeout(mut self, timeout: Duration) -> Self {
        self.min_watch_timeout = timeout.max(DEFAULT_MIN_WATCH_TIMEOUT);
        self
    }
}
