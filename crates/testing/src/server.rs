//! The server handle: configuration, the listener, start/stop/restart, programmatic access.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
#[cfg(feature = "bench")]
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::handler;
use crate::resources::{Registry, ResourceType};
use crate::response::Shape;
use crate::store::Store;
use crate::wire::Encoding;
use crate::write;

/// How the fake server behaves; every setting has a test-friendly default.
///
/// ```
/// use std::time::Duration;
///
/// use kinformer_testing::{FakeApiServer, ServerOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let options = ServerOptions::default()
///     .history(100)
///     .bookmark_interval(Duration::from_millis(200));
/// let server = FakeApiServer::start_with(options).await?;
/// assert!(server.url().starts_with("http://127.0.0.1:"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub(crate) history: usize,
    pub(crate) bookmark_interval: Duration,
    pub(crate) watcher_buffer: usize,
    pub(crate) too_large_rv_wait: Duration,
    pub(crate) admin_endpoints: bool,
    pub(crate) listen: SocketAddr,
    pub(crate) max_watch_timeout: Option<Duration>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            history: 10_000,
            bookmark_interval: Duration::from_secs(1),
            watcher_buffer: 10_000,
            too_large_rv_wait: Duration::from_secs(3),
            admin_endpoints: false,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_watch_timeout: None,
        }
    }
}

impl ServerOptions {
    /// Events kept for watch resumption (the compaction window). Default 10 000.
    #[must_use]
    pub fn history(mut self, events: usize) -> Self {
        self.history = events;
        self
    }

    /// Period of BOOKMARK events on watches that allow them. Default 1 s (apiserver: about
    /// 1 min).
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Events buffered per watcher before a watcher that falls behind is closed. Default
    /// 10 000.
    #[must_use]
    pub fn watcher_buffer(mut self, events: usize) -> Self {
        self.watcher_buffer = events;
        self
    }

    /// How long a request for a future resourceVersion waits before 504 "Too large resource
    /// version". Default 3 s, as apiserver's watch cache waits.
    #[must_use]
    pub fn too_large_rv_wait(mut self, wait: Duration) -> Self {
        self.too_large_rv_wait = wait;
        self
    }

    /// Serves `POST /admin/...` fault endpoints (what the standalone binary enables). Default
    /// off.
    #[must_use]
    pub fn admin_endpoints(mut self, enabled: bool) -> Self {
        self.admin_endpoints = enabled;
        self
    }

    /// Ends every watch after at most `timeout`, whatever `timeoutSeconds` it asked for (a
    /// reflector never asks for less than 5 minutes), so tests see watches end and resume in
    /// seconds. Default: each watch lasts its `timeoutSeconds`, or 30 minutes without one.
    #[must_use]
    pub fn max_watch_timeout(mut self, timeout: Duration) -> Self {
        self.max_watch_timeout = Some(timeout);
        self
    }

    /// The address to bind. Default `127.0.0.1:0` (a free port).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }
}

/// State shared by the handle, the listener and every request.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) registry: RwLock<Registry>,
    pub(crate) revision: watch::Sender<u64>,
    pub(crate) faults: Faults,
    pub(crate) config: ServerOptions,
    pub(crate) addr: Mutex<SocketAddr>,
    /// The accept loop; aborting it drops every connection with it.
    pub(crate) listener: Mutex<Option<JoinHandle<()>>>,
    /// Responses to get, list and watch requests by `Content-Type`, for `/admin/content-types`.
    pub(crate) content_types: Mutex<BTreeMap<String, u64>>,
    /// Bench sentinels handed out so far: names count from 1 per server.
    #[cfg(feature = "bench")]
    pub(crate) sentinels: AtomicU64,
    /// Work started by admin calls that outlives the call (bench updates); dropping the
    /// server aborts it rather than letting it write into a store nobody reads.
    #[cfg(feature = "bench")]
    pub(crate) background: Mutex<JoinSet<()>>,
}

impl Shared {
    /// Publishes the store's revision to requests waiting for a future resourceVersion.
    pub(crate) fn publish_revision(&self, rv: u64) {
        self.revision.send_if_modified(|current| {
            let advanced = rv > *current;
            if advanced {
                *current = rv;
            }
            advanced
        });
    }

    /// Counts one response to a get, list or watch by its `Content-Type`.
    pub(crate) fn count_content_type(&self, response: &http::Response<ResponseBody>) {
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let mut counts = self.content_types.lock();
        match counts.get_mut(content_type) {
            Some(count) => *count += 1,
            None => {
                counts.insert(content_type.to_owned(), 1);
            }
        }
    }

    /// Runs `task` until it ends or the server is dropped.
    #[cfg(feature = "bench")]
    pub(crate) fn spawn_background(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut background = self.background.lock();
        // Reap what has finished, so a long-lived server does not keep every old task's slot.
        while background.try_join_next().is_some() {}
        background.spawn(task);
    }
}

/// A running fake Kubernetes API server on 127.0.0.1, stopped when dropped.
///
/// Start it with [`FakeApiServer::start`] (or [`FakeApiServer::start_with`] and [`ServerOptions`]), point a client at
/// [`FakeApiServer::url`], and steer failures through [`FakeApiServer::faults`].
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

pub(crate) async fn stop_listener(shared: &Shared) {
    let task = shared.listener.lock().take();
    if let Some(task) = task {
        task.abort();
        // The task was aborted on purpose; its JoinError carries nothing to report.
        let _ = task.await;
    }
    shared.store.lock().close_watchers();
}

pub(crate) async fn restart_listener(shared: &Arc<Shared>) -> Result<()> {
    stop_listener(shared).await;
    let addr = *shared.addr.lock();
    let (_, task) = spawn_listener(shared.clone(), addr).await?;
    *shared.listener.lock() = Some(task);
    Ok(())
}

async fn spawn_listener(
    shared: Arc<Shared>,
    addr: SocketAddr,
) -> Result<(SocketAddr, JoinHandle<()>)> {
    let bind_error = |source| Error::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    // Boxed as `dyn Send`: the admin outage endpoint restarts the listener from inside a request,
    // and the compiler cannot prove Send through that cycle of opaque futures.
    let accept: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(accept_loop(shared, listener));
    let task = tokio::spawn(accept);
    Ok((bound, task))
}

/// Accepts until aborted; dropping the JoinSet then aborts every connection with it.
async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(shared.clone(), stream));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(shared: Arc<Shared>, stream: TcpStream) {
    // Watch events are small writes that must not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handler::handle(shared, request).await) }
    });
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// A response body: a whole buffer, or a stream of chunks (a watch).
#[derive(Debug)]
pub(crate) enum ResponseBody {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}
