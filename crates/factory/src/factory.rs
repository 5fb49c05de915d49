//! [`SharedInformerFactory`]: the registry of shared informers, their start and their stop.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    time::Duration,
};

use kinformer_informer::{
    InformerHealth, InformerOptions, SharedIndexInformer, SyncStatus, WaitError,
};
use kinformer_reflector::KubeListerWatcher;
use kinformer_store::{Lister, Object, Shard};
use kinformer_wait::ErrorChain;
use kube_client::{Api, Client};
use kube_core::{ApiResource, DynamicObject, PartialObjectMeta, Resource};
use parking_lot::Mutex;
use serde::{Serialize, de::DeserializeOwned};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{debug, info, warn};

mod shard;

use crate::{
    FactoryOptions, InformerLease, InformerRequest, SyncReport,
    error::{Error, Result},
    scope::ApiScope,
    selection::{InformerKey, Selection},
};

/// A typed resource the factory can inform on by itself: any k8s-openapi type or
/// `#[derive(CustomResource)]` type, namespaced or cluster-scoped.
///
/// `Serialize` is what the factory's compact caches encode with (where the watch did not keep
/// the bytes an object arrived in); every k8s-openapi and `CustomResource` type has it.
pub trait FactoryResource:
    Resource<DynamicType = (), Scope: ApiScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> FactoryResource for K where
    K: Resource<DynamicType = (), Scope: ApiScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// One list+watch per resource type and selection, shared by every consumer in the process:
/// client-go's `SharedInformerFactory`.
///
/// Ask for informers ([`informer`](Self::informer) for a typed one in the factory's scope,
/// [`informer_for`](Self::informer_for) with an [`InformerRequest`] for every other kind and
/// scope, [`lease`](Self::lease), [`lister`](Self::lister)) as often as you like, from
/// anywhere: the same request always gets the same informer. Then [`start`](Self::start) runs every informer not yet
/// running (and every informer asked for afterwards as it is asked for),
/// [`wait_for_cache_sync`](Self::wait_for_cache_sync) waits for their first lists,
/// and [`shutdown`](Self::shutdown) stops them and waits for every task the factory started.
///
/// Cloning is cheap and shares the registry. Dropping the last clone without a shutdown
/// cancels the informers but does not wait for them.
///
/// # The registry
///
/// A `parking_lot::Mutex<HashMap<InformerKey, _>>`, not a dashmap: it is touched while a
/// controller wires itself up (a handful of lookups, none on a hot path), an informer is
/// built under the lock so two racing callers can never build two, and `start` and
/// `shutdown` must see the whole map and the shut-down flag in one consistent step, which a
/// sharded map would only give by locking every shard.
#[doc(alias = "NewSharedInformerFactory")]
#[doc(alias = "NewSharedInformerFactoryWithOptions")]
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    config: FactoryOptions,
    state: Mutex<State>,
    token: CancellationToken,
    tasks: TaskTracker,
}

/// A handle that does not keep the factory alive (for a metrics registry or a lease, which can
/// outlive it).
#[derive(Clone)]
pub(crate) struct WeakFactory(std::sync::Weak<Inner>);

impl WeakFactory {
    pub(crate) fn upgrade(&self) -> Option<SharedInformerFactory> {
        self.0
            .upgrade()
            .map(|inner| SharedInformerFactory { inner })
    }
}

impl SharedInformerFactory {
    pub(crate) fn downgrade(&self) -> WeakFactory {
        WeakFactory(Arc::downgrade(&self.inner))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

#[derive(Default)]
struct State {
    /// Keyed with the factory's shard where a key takes it ([`InformerKey::resolved`]).
    informers: HashMap<InformerKey, Entry>,
    /// Where the factory's own shard is now.
    shard: Option<Shard>,
    /// [`SharedInformerFactory::start`] has been called: an informer requested since starts
    /// at once.
    started: bool,
    shutting_down: bool,
    /// The id the next entry gets: a key can be registered again after its informer left.
    next_id: u64,
}

impl State {
    /// `key` as the registry holds it: with the factory's shard where it is now, where the key
    /// takes the factory's.
    fn resolve(&self, key: &InformerKey) -> InformerKey {
        key.clone().resolved(self.shard.as_ref())
    }
}

struct Entry {
    /// Tells this entry from a later one under the same key.
    id: u64,
    informer: Arc<dyn ErasedInformer>,
    started: bool,
    /// Handed out by a method that keeps it until shutdown (`informer`, `lister`, ...).
    pinned: bool,
    /// Live [`InformerLease`]s; the last one's release stops an informer nobody pinned.
    leases: usize,
    /// Stops this informer alone; a child of the factory's token.
    token: CancellationToken,
}

/// An informer handed out, with its key and its entry's id, which a lease names to release it.
pub(crate) type Handed<K> = (SharedIndexInformer<K>, (InformerKey, u64));

/// How a caller holds the informer it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Until the factory shuts down (client-go's semantics).
    Pin,
    /// Until the last lease is released.
    Lease,
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the factory needs of an informer without knowing its type.
trait ErasedInformer: Send + Sync {
    fn as_any(&self) -> &(dyn Any + Send + Sync);
    /// Runs the informer in a task of `tasks`; `exited` runs when it returns.
    fn spawn(
        &self,
        tasks: &TaskTracker,
        token: CancellationToken,
        exited: Box<dyn FnOnce() + Send>,
    );
    fn has_synced(&self) -> bool;
    fn sync_status(&self) -> SyncStatus;
    fn health(&self) -> InformerHealth;
    fn is_stopped(&self) -> bool;
    fn wait_for_sync<'a>(&'a self, token: &'a CancellationToken) -> BoxFuture<'a, bool>;
    fn set_shard(&self, shard: Shard);
    fn wait_for_shard<'a>(
        &'a self,
        shard: &'a Shard,
        within: Duration,
        token: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), WaitError>>;
}

impl<K: Object> ErasedInformer for SharedIndexInformer<K> {
    fn as_any(&self) -> &(dyn Any + Send + Sync) {
        self
    }

    fn spawn(
        &self,
        tasks: &TaskTracker,
        token: CancellationToken,
        exited: Box<dyn FnOnce() + Send>,
    ) {
        let informer = self.clone();
        tasks.spawn(async move {
            if let Err(error) = informer.run(token).await {
                warn!(informer = informer.name(), error = %ErrorChain(&error), "informer did not run");
            }
            drop(informer);
            exited();
        });
    }

    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }

    fn sync_status(&self) -> SyncStatus {
        SharedIndexInformer::sync_status(self)
    }

    fn health(&self) -> InformerHealth {
        SharedIndexInformer::health(self)
    }

    fn is_stopped(&self) -> bool {
        SharedIndexInformer::is_stopped(self)
    }

    fn wait_for_sync<'a>(&'a self, token: &'a CancellationToken) -> BoxFuture<'a, bool> {
        // The factory keeps the deadline: its report says which informers missed it.
        Box::pin(async move { self.wait_for_cache_sync(Duration::MAX, token).await.is_ok() })
    }

    fn set_shard(&self, shard: Shard) {
        // Every informer of the factory's shard was built with it; one a request built by
        // itself may have left it out.
        if let Err(error) = SharedIndexInformer::set_shard(self, shard) {
            warn!(informer = self.name(), %error, "informer of the factory's shard did not move");
        }
    }

    fn wait_for_shard<'a>(
        &'a self,
        shard: &'a Shard,
        within: Duration,
        token: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), WaitError>> {
        Box::pin(SharedIndexInformer::wait_for_shard(
            self, shard, within, token,
        ))
    }
}

impl SharedInformerFactory {
    /// A factory whose informers list and watch with `client`, configured by `options`
    /// ([`FactoryOptions::default`] for client-go's defaults).
    #[doc(alias = "NewSharedInformerFactory")]
    #[doc(alias = "NewSharedInformerFactoryWithOptions")]
    pub fn new(client: Client, options: FactoryOptions) -> Self {
        let state = State {
            shard: options
                .selection
                .follows_factory()
                .then(|| options.selection.shard_selector().cloned())
                .flatten(),
            ..State::default()
        };
        SharedInformerFactory {
            inner: Arc::new(Inner {
                client,
                config: options,
                state: Mutex::new(state),
                token: CancellationToken::new(),
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// The client every informer lists and watches with.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The selection informers get unless one is given: the factory's namespace, selectors
    /// and shard (where the shard is now).
    pub fn default_selection(&self) -> Selection {
        let shard = self.inner.state.lock().shard.clone();
        self.inner.config.selection.clone().resolved(shard.as_ref())
    }

    /// The shared informer for `K` in the factory's selection, built on first use (client-go's
    /// `factory.Core().V1().Pods().Informer()`): the short form of
    /// `informer_for(InformerRequest::typed())`.
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`] after [`shutdown`](Self::shutdown).
    #[doc(alias = "Informer")]
    pub fn informer<K: FactoryResource>(&self) -> Result<SharedIndexInformer<K>> {
        self.informer_for(InformerRequest::typed())
    }

    /// The shared informer `request` names: a typed, metadata-only or dynamic informer, or
    /// one the caller builds, in the factory's scope or the request's. Held until shutdown,
    /// as in client-go; see [`lease`](Self::lease) for one that leaves when its users do.
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`] after [`shutdown`](Self::shutdown); [`Error::NoRuntime`] for a
    /// new informer asked for outside a tokio runtime once the factory has started.
    #[doc(alias = "InformerFor")]
    #[doc(alias = "ForResource")]
    pub fn informer_for<K: Object>(
        &self,
        request: InformerRequest<K>,
    ) -> Result<SharedIndexInformer<K>> {
        request
            .hand_out(self, Hold::Pin)
            .map(|(informer, _)| informer)
    }

    /// The shared informer `request` names, held by the returned [`InformerLease`] rather
    /// than until shutdown: when the last lease of an informer that no other method handed
    /// out is released (dropped), the informer stops, leaves the factory and frees its cache
    /// once every clone of it is gone. Asking again builds a new one. An informer also handed
    /// out by [`informer`](Self::informer), [`informer_for`](Self::informer_for) or
    /// [`lister`](Self::lister) stays until shutdown, as in client-go.
    ///
    /// # Errors
    ///
    /// As for [`informer_for`](Self::informer_for).
    pub fn lease<K: Object>(&self, request: InformerRequest<K>) -> Result<InformerLease<K>> {
        let (informer, (key, id)) = request.hand_out(self, Hold::Lease)?;
        Ok(InformerLease::new(informer, key, id, self.downgrade()))
    }

    /// A [`Lister`] over the shared informer for `K` (client-go's `...Pods().Lister()`); it
    /// registers the informer as [`informer`](Self::informer) does.
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`] after [`shutdown`](Self::shutdown).
    #[doc(alias = "Lister")]
    pub fn lister<K: FactoryResource>(&self) -> Result<Lister<K>> {
        Ok(self.informer::<K>()?.lister())
    }

    pub(crate) fn typed<K: FactoryResource>(
        &self,
        selection: Selection,
        hold: Hold,
    ) -> Result<Handed<K>> {
        let key = InformerKey::new::<K>(None, selection, K::kind(&()).into_owned()).with_api(
            &K::group(&()),
            &K::version(&()),
            &K::plural(&()),
        );
        self.get_or_insert(key, hold, |config, client, key| {
            let selection = key.selection();
            let api = <K::Scope as ApiScope>::api::<K>(client, selection.namespace_name());
            let lister_watcher = config.narrow(config.wire(KubeListerWatcher::new(api)), selection);
            SharedIndexInformer::new(lister_watcher, config.cached(config.options::<K>(key)))
        })
    }

    pub(crate) fn built_by<K: Object>(
        &self,
        selection: Selection,
        hold: Hold,
        new: impl FnOnce(&Client, InformerOptions<K>) -> SharedIndexInformer<K>,
    ) -> Result<Handed<K>> {
        let key = InformerKey::new::<K>(None, selection, short_type_name::<K>());
        self.get_or_insert(key, hold, |config, client, key| {
            let mut options =
                InformerOptions::new().resync_period(config.resync_of(TypeId::of::<K>()));
            if let Some(transform) = config.type_transform::<K>() {
                options = options.transform(move |object| transform(object));
            }
            new(&client, config.with_factory_wide(options, key))
        })
    }

    pub(crate) fn dynamic(
        &self,
        resource: &ApiResource,
        selection: Selection,
        hold: Hold,
    ) -> Result<Handed<DynamicObject>> {
        let path = if resource.group.is_empty() {
            format!("{}/{}", resource.version, resource.plural)
        } else {
            format!(
                "{}/{}/{}",
                resource.group, resource.version, resource.plural
            )
        };
        let key = InformerKey::new::<DynamicObject>(Some(path), selection, resource.kind.clone())
            .with_api(&resource.group, &resource.version, &resource.plural);
        self.get_or_insert(key, hold, |config, client, key| {
            let selection = key.selection();
            let api = match selection.namespace_name() {
                Some(namespace) => Api::namespaced_with(client, namespace, resource),
                None => Api::all_with(client, resource),
            };
            let lister_watcher = config.narrow(
                config.dropping(KubeListerWatcher::dynamic(api, resource)),
                selection,
            );
            // A custom resource's CRD can be deleted under it: stop then, rather than
            // retrying for ever, and leave the factory so a later request starts afresh.
            let options = config
                .options::<DynamicObject>(key)
                .stop_when_resource_gone();
            SharedIndexInformer::new(lister_watcher, config.cached_dynamic(options))
        })
    }

    pub(crate) fn metadata<K: FactoryResource>(
        &self,
        selection: Selection,
        hold: Hold,
    ) -> Result<Handed<PartialObjectMeta<K>>> {
        let key = InformerKey::new::<PartialObjectMeta<K>>(
            None,
            selection,
            format!("{} (metadata)", K::kind(&())),
        )
        .with_api(&K::group(&()), &K::version(&()), &K::plural(&()));
        self.get_or_insert(key, hold, |config, client, key| {
            let selection = key.selection();
            let api = <K::Scope as ApiScope>::api::<K>(client, selection.namespace_name());
            let lister_watcher =
                config.narrow(config.wire(KubeListerWatcher::metadata(api)), selection);
            let options = config.cached(config.options::<PartialObjectMeta<K>>(key));
            SharedIndexInformer::new(lister_watcher, options)
        })
    }

    /// The informer under `key`, built by `build` if there is none; with the key and the
    /// entry's id, which a lease names to release it.
    fn get_or_insert<K: Object>(
        &self,
        key: InformerKey,
        hold: Hold,
        build: impl FnOnce(&FactoryOptions, Client, &InformerKey) -> SharedIndexInformer<K>,
    ) -> Result<Handed<K>> {
        let mut state = self.inner.state.lock();
        if state.shutting_down {
            return Err(Error::ShutDown {
                action: "hand out an informer",
            });
        }
        // Resolved under the lock, so a move cannot slip between the request and the lookup.
        let key = key.resolved(state.shard.as_ref());
        if let Some(entry) = state.informers.get_mut(&key) {
            match hold {
                Hold::Pin => entry.pinned = true,
                Hold::Lease => entry.leases += 1,
            }
            let informer = entry
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
                .expect("the key holds the informer's TypeId, so the type matches")
                .clone();
            return Ok((informer, (key, entry.id)));
        }
        // A factory that has started starts what it hands out since, which needs a runtime.
        if state.started && tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::NoRuntime);
        }
        // Built under the lock: construction is cheap and synchronous, and it is what makes
        // two racing callers share one informer.
        let informer = build(&self.inner.config, self.inner.client.clone(), &key);
        debug!(informer = %key, ?hold, "informer registered");
        let id = state.next_id;
        state.next_id += 1;
        let mut entry = Entry {
            id,
            informer: Arc::new(informer.clone()),
            started: false,
            pinned: hold == Hold::Pin,
            leases: usize::from(hold == Hold::Lease),
            token: self.inner.token.child_token(),
        };
        if state.started {
            self.run(&key, &mut entry);
        }
        state.informers.insert(key.clone(), entry);
        Ok((informer, (key, id)))
    }

    /// One more lease on the entry `id` under `key`; `false` if it has left the factory.
    pub(crate) fn add_lease(&self, key: &InformerKey, id: u64) -> bool {
        let mut state = self.inner.state.lock();
        let key = state.resolve(key);
        match state.informers.get_mut(&key) {
            Some(entry) if entry.id == id => {
                entry.leases += 1;
                true
            }
            _ => false,
        }
    }

    /// Gives back a lease on the entry `id` under `key`. The last lease of an informer no one
    /// pinned stops it and removes it; returns whether this did, and if so whether the factory
    /// had started the informer (whose task then runs until it has stopped).
    pub(crate) fn release_lease(&self, key: &InformerKey, id: u64) -> Option<bool> {
        let entry = {
            let mut state = self.inner.state.lock();
            let key = state.resolve(key);
            let entry = state
                .informers
                .get_mut(&key)
                .filter(|entry| entry.id == id)?;
            entry.leases = entry.leases.saturating_sub(1);
            if entry.leases > 0 || entry.pinned {
                return None;
            }
            state.informers.remove(&key)?
        };
        info!(informer = %key, "last lease released; stopping the informer");
        entry.token.cancel();
        Some(entry.started)
    }

    /// Stops the informer under `key` and removes it from the factory, however it is held
    /// (controller-runtime's `RemoveInformer`): leases and clones of it see it stopped, and
    /// the next request for the key builds a new one. Returns whether there was one. A key
    /// of the factory's shard names its informer wherever the shard has moved since.
    /// Await [`SharedIndexInformer::stopped`] on a clone to know it has stopped.
    pub fn remove_informer(&self, key: &InformerKey) -> bool {
        let removed = {
            let mut state = self.inner.state.lock();
            let key = state.resolve(key);
            state.informers.remove(&key)
        };
        match removed {
            Some(entry) => {
                info!(informer = %key, "informer removed; stopping it");
                entry.token.cancel();
                true
            }
            None => false,
        }
    }

    /// Forgets the entry `id` under `key` once its informer has stopped because its resource
    /// is gone, so that a later request builds a fresh informer.
    fn forget_gone(inner: &Inner, key: &InformerKey, id: u64) {
        let mut state = inner.state.lock();
        let key = state.resolve(key);
        let gone = state
            .informers
            .get(&key)
            .is_some_and(|entry| entry.id == id && entry.informer.sync_status().resource_gone);
        if gone {
            state.informers.remove(&key);
            info!(informer = %key, "informer stopped: its resource is no longer served");
        }
    }

    /// Runs every registered informer, each in a task of its own (client-go's `Start`), and
    /// from then on every informer requested from the factory as soon as it is requested
    /// (where client-go leaves it idle until `Start` is called again). Idempotent.
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`] after [`shutdown`](Self::shutdown); [`Error::NoRuntime`] outside
    /// a tokio runtime.
    #[doc(alias = "Start")]
    pub fn start(&self) -> Result<()> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::NoRuntime);
        }
        let mut state = self.inner.state.lock();
        if state.shutting_down {
            return Err(Error::ShutDown {
                action: "start informers",
            });
        }
        state.started = true;
        for (key, entry) in state.informers.iter_mut().filter(|(_, e)| !e.started) {
            self.run(key, entry);
        }
        Ok(())
    }

    /// Runs the informer of `entry` in a task of the factory's; called with the registry
    /// locked, inside a tokio runtime.
    fn run(&self, key: &InformerKey, entry: &mut Entry) {
        info!(informer = %key, "starting informer");
        let exited = {
            let (inner, key, id) = (Arc::downgrade(&self.inner), key.clone(), entry.id);
            Box::new(move || {
                if let Some(inner) = inner.upgrade() {
                    Self::forget_gone(&inner, &key, id);
                }
            })
        };
        entry
            .informer
            .spawn(&self.inner.tasks, entry.token.clone(), exited);
        entry.started = true;
    }

    /// Waits until every informer the factory has handed out has synced its first list, or
    /// `timeout` passes, or the factory shuts down (client-go's `WaitForCacheSync`, with a
    /// deadline); reports which synced and where the others stand. An informer the factory
    /// has not started (no [`start`](Self::start) yet) cannot sync and is reported so at once.
    ///
    /// ```no_run
    /// # async fn doc(factory: kinformer_factory::SharedInformerFactory) {
    /// use std::time::Duration;
    ///
    /// let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
    /// if !report.all_synced() {
    ///     eprintln!("{report}"); // one line per informer not synced, with why
    /// }
    /// # }
    /// ```
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> SyncReport {
        let informers: Vec<(InformerKey, bool, Arc<dyn ErasedInformer>)> = {
            let state = self.inner.state.lock();
            state
                .informers
                .iter()
                .map(|(key, entry)| (key.clone(), entry.started, Arc::clone(&entry.informer)))
                .collect()
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let token = self.inner.token.child_token();
        let (mut synced, mut not_synced) = (Vec::new(), Vec::new());
        for (key, started, informer) in informers {
            let done = started
                && (informer.has_synced()
                    || tokio::select! {
                        done = informer.wait_for_sync(&token) => done,
                        () = tokio::time::sleep_until(deadline) => false,
                    }
                    || informer.has_synced());
            if done {
                synced.push(key);
            } else {
                not_synced.push((key, informer.sync_status()));
            }
        }
        SyncReport::new(synced, not_synced)
    }

    /// Where every informer registered so far stands on its way to sync, with the errors that
    /// keep it from getting there: poll it while waiting to tell a slow start from a failing
    /// one ([`wait_for_cache_sync`](Self::wait_for_cache_sync)'s report holds the same for the
    /// informers that did not sync).
    pub fn sync_status(&self) -> HashMap<InformerKey, SyncStatus> {
        let state = self.inner.state.lock();
        state
            .informers
            .iter()
            .map(|(key, entry)| (key.clone(), entry.informer.sync_status()))
            .collect()
    }

    /// Every informer's [`InformerHealth`]: sync status, reflector and handler counters, cache
    /// size and version. What a `/healthz` handler or a metrics scrape reads.
    pub fn health(&self) -> HashMap<InformerKey, InformerHealth> {
        // The informers are read outside the registry lock: a health read never blocks a
        // caller asking for an informer.
        let informers: Vec<(InformerKey, Arc<dyn ErasedInformer>)> = {
            let state = self.inner.state.lock();
            state
                .informers
                .iter()
                .map(|(key, entry)| (key.clone(), Arc::clone(&entry.informer)))
                .collect()
        };
        informers
            .into_iter()
            .map(|(key, informer)| (key, informer.health()))
            .collect()
    }

    /// The informers registered so far, and whether each has been started.
    pub fn informers(&self) -> Vec<(InformerKey, bool)> {
        let state = self.inner.state.lock();
        state
            .informers
            .iter()
            .map(|(key, entry)| (key.clone(), entry.started))
            .collect()
    }

    /// Tasks started by [`start`](Self::start) that have not finished.
    pub fn running_tasks(&self) -> usize {
        self.inner.tasks.len()
    }

    /// Whether every started informer has stopped for good.
    pub fn all_stopped(&self) -> bool {
        let state = self.inner.state.lock();
        state
            .informers
            .values()
            .filter(|entry| entry.started)
            .all(|entry| entry.informer.is_stopped())
    }

    /// Stops every informer and waits for every task [`start`](Self::start) started
    /// (client-go's `Shutdown`). Afterwards the factory hands out and starts nothing. Safe
    /// to call more than once and from several tasks: every caller returns once all have
    /// stopped.
    #[doc(alias = "Shutdown")]
    pub async fn shutdown(&self) {
        {
            let mut state = self.inner.state.lock();
            if !state.shutting_down {
                info!(
                    informers = state.informers.len(),
                    "shutting down informer factory"
                );
            }
            state.shutting_down = true;
        }
        self.inner.token.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }
}

impl fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock();
        let mut informers: Vec<String> = state.informers.keys().map(ToString::to_string).collect();
        informers.sort();
        f.debug_struct("SharedInformerFactory")
            .field("config", &self.inner.config)
            .field("informers", &informers)
            .field("shutting_down", &state.shutting_down)
            .finish_non_exhaustive()
    }
}

fn short_type_name<K>() -> String {
    let full = std::any::type_name::<K>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base).to_owned()
}
