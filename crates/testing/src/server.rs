//! The server handle: start, stop and restart, and programmatic access to the objects.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
#[cfg(feature = "bench")]
use std::sync::atomic::AtomicU64;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::watch;
#[cfg(feature = "bench")]
use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::handler;
use crate::listener::{restart_listener, spawn_listener, stop_listener};
use crate::options::ServerOptions;
use crate::resources::{Registry, ResourceType};
use crate::shared::Shared;
use crate::store::Store;
use crate::wire::{Encoding, Shape};
use crate::write;

/// A running fake Kubernetes API server on 127.0.0.1, stopped when dropped.
///
/// Start it with [`FakeApiServer::start`] (or [`FakeApiServer::start_with`] and
/// [`ServerOptions`], or [`FakeApiServer::start_with_pods`] holding fixture Pods), point a
/// client at [`FakeApiServer::url`], and steer failures through [`FakeApiServer::faults`].
#[derive(Debug)]
pub struct FakeApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl FakeApiServer {
    /// Starts a server with the default [`ServerOptions`] on a free port.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] when no loopback port can be bound.
    pub async fn start() -> Result<Self> {
        Self::start_with(ServerOptions::default()).await
    }

    /// Starts a server with the default [`ServerOptions`] holding the fixture Pods numbered
    /// `pods` ([`fixtures::pod`](crate::fixtures::pod), each created as by
    /// [`FakeApiServer::create_object`]): the starting state most informer tests want.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] as [`FakeApiServer::start`]; a fixture Pod's refusal as
    /// [`FakeApiServer::create_object`], the server then dropped (stopped) with it.
    pub async fn start_with_pods(pods: std::ops::Range<usize>) -> Result<Self> {
        let server = Self::start().await?;
        for i in pods {
            server.create_object(crate::fixtures::pod(i))?;
        }
        Ok(server)
    }

    /// Starts a server configured by `options`.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] when the address cannot be bound.
    pub async fn start_with(options: ServerOptions) -> Result<Self> {
        let config = options;
        let store = Store::new(config.history, config.watcher_buffer);
        let (revision, _) = watch::channel(store.resource_version());
        let listen = config.listen;
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared>| {
            let weak = weak.clone();
            let closer: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                if let Some(shared) = weak.upgrade() {
                    shared.store.lock().close_watchers();
                }
            });
            Shared {
                serve: handler::serve,
                store: Mutex::new(store),
                registry: RwLock::new(Registry::with_builtins()),
                revision,
                faults: Faults::new(closer),
                config,
                addr: Mutex::new(listen),
                listener: Mutex::new(None),
                content_types: Mutex::new(BTreeMap::new()),
                #[cfg(feature = "bench")]
                sentinels: AtomicU64::new(0),
                #[cfg(feature = "bench")]
                background: Mutex::new(JoinSet::new()),
            }
        });
        let (addr, task) = spawn_listener(shared.clone(), listen).await?;
        *shared.addr.lock() = addr;
        *shared.listener.lock() = Some(task);
        tracing::debug!(%addr, "fake API server listening");
        Ok(Self { shared, addr })
    }

    /// `http://127.0.0.1:PORT`, what a client's cluster URL should be.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kube-client `Client` for this server (plain HTTP, namespace `default`), without
    /// kube-client's retry layer: a reflector owns the retries of its lists and watches and must
    /// see every 429, 503 and 504 the fake injects.
    ///
    /// # Errors
    ///
    /// [`Error::Client`] if kube-client cannot build its HTTP stack.
    #[cfg(feature = "kube")]
    pub fn client(&self) -> Result<kube_client::Client> {
        let uri: http::Uri = self.url().parse().map_err(|e: http::uri::InvalidUri| {
            Error::Client(kube_client::Error::HttpError(e.into()))
        })?;
        let mut config = kube_client::Config::new(uri);
        config.default_retry = false;
        kube_client::Client::try_from(config).map_err(Error::Client)
    }

    /// A kubeconfig (YAML) whose current context points at this server.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kinformer-fake\n  cluster:\n    server: {}\n\
             contexts:\n- name: kinformer-fake\n  context:\n    cluster: kinformer-fake\n    user: kinformer-fake\n    namespace: default\n\
             current-context: kinformer-fake\nusers:\n- name: kinformer-fake\n  user: {{}}\n",
            self.url()
        )
    }

    /// Fault injection and request counts.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The current global resourceVersion (the last write's revision).
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().resource_version()
    }

    /// How many get, list and watch responses went out, by `Content-Type` (what the bench
    /// endpoint `/admin/content-types` reports): how a test tells which format a client was
    /// served.
    pub fn content_types(&self) -> BTreeMap<String, u64> {
        self.shared.content_types.lock().clone()
    }

    /// Watch streams currently open.
    pub fn open_watches(&self) -> usize {
        self.shared.store.lock().open_watchers()
    }

    /// Drops every event in the history now: a watch or continue token from any earlier
    /// revision then gets 410 Expired, as after an etcd compaction.
    pub fn compact(&self) {
        self.shared.store.lock().compact_all();
    }

    /// Encodes now the protobuf form of every stored object of a built-in kind, which the
    /// server otherwise encodes on the first protobuf request for each object (and keeps), and
    /// returns how many objects have one.
    ///
    /// That first request pays for a parse and an encode per object, so a fresh server's first
    /// protobuf list of 100 000 Pods is far slower than its next. A benchmark comparing
    /// clients calls this after seeding, so that no client pays for the server's cache. Blocks
    /// the calling thread while the work runs on every core.
    pub fn warm_protobuf(&self) -> usize {
        let resources = self.shared.registry.read().all().to_vec();
        let mut work = Vec::new();
        {
            let store = self.shared.store.lock();
            for resource in &resources {
                let encoding =
                    Encoding::negotiate(kinformer_protobuf::CONTENT_TYPE, resource, Shape::Full);
                if let Encoding::Protobuf(message) = encoding {
                    work.extend(
                        store
                            .current(&resource.group_resource())
                            .map(|(_, obj)| (Arc::clone(obj), message)),
                    );
                }
            }
        }
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let chunk = work.len().div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = work
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .filter(|(obj, message)| obj.protobuf(message).is_ok())
                            .count()
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| {
                    worker
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .sum()
        })
    }

    /// Serves another resource type (a CRD version, or a built-in the table lacks).
    pub fn register(&self, resource: ResourceType) {
        self.shared.registry.write().register(resource);
    }

    /// Creates an object as a POST would (the resource is found from apiVersion and kind).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownKind`] for an unserved kind; [`Error::Api`] for what the API refuses
    /// (AlreadyExists, Invalid, ...).
    pub fn create_object(&self, object: Value) -> Result<Value> {
        let resource = self.resource_of(&object)?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let created = write::create(&self.shared, &resource, namespace.as_deref(), object)?;
        Ok(created.value())
    }

    /// Replaces an object as a PUT would (409 Conflict on a stale resourceVersion).
    ///
    /// # Errors
    ///
    /// As [`FakeApiServer::create_object`], plus NotFound and Conflict.
    pub fn update_object(&self, object: Value) -> Result<Value> {
        let resource = self.resource_of(&object)?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let updated = write::update(
            &self.shared,
            &resource,
            namespace.as_deref(),
            &name,
            object,
            write::UpdateKind::Main,
        )?;
        Ok(updated.value())
    }

    /// Deletes an object as a DELETE would.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownKind`] for an unserved kind, [`Error::Api`] (NotFound) when absent.
    pub fn delete_object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<()> {
        let resource = self
            .shared
            .registry
            .read()
            .find_kind(api_version, kind)
            .ok_or_else(|| Error::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })?;
        write::delete(&self.shared, &resource, namespace, name, &Value::Null)?;
        Ok(())
    }

    /// Reads an object as a GET would.
    pub fn object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let resource = self.shared.registry.read().find_kind(api_version, kind)?;
        let key = resource.key(namespace, name);
        let object = self
            .shared
            .store
            .lock()
            .get(&resource.group_resource(), &key)?;
        Some(object.value())
    }

    fn resource_of(&self, object: &Value) -> Result<Arc<ResourceType>> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        self.shared
            .registry
            .read()
            .find_kind(api_version, kind)
            .ok_or_else(|| Error::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
    }

    /// Closes the listening socket and every open connection: clients get "connection
    /// refused" until [`FakeApiServer::restart_listener`]. Objects and history are kept.
    pub async fn stop_listener(&self) {
        stop_listener(&self.shared).await;
    }

    /// Listens again on the same port after [`FakeApiServer::stop_listener`].
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] if the port was taken in the meantime.
    pub async fn restart_listener(&self) -> Result<()> {
        restart_listener(&self.shared).await
    }

    /// Stops the server and waits until its listener is gone.
    pub async fn shutdown(self) {
        self.stop_listener().await;
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(task) = self.shared.listener.lock().take() {
            task.abort();
        }
        #[cfg(feature = "bench")]
        self.shared.background.lock().abort_all();
        self.shared.store.lock().close_watchers();
    }
}
