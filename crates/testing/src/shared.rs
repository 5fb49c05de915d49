//! [`Shared`]: the state the server handle, the listener and every request share, and the entry
//! point a request takes into the router.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
#[cfg(feature = "bench")]
use std::sync::atomic::AtomicU64;

use http::{Request, Response};
use hyper::body::Incoming;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;
#[cfg(feature = "bench")]
use tokio::task::JoinSet;

use crate::faults::Faults;
use crate::options::ServerOptions;
use crate::resources::Registry;
use crate::response::ResponseBody;
use crate::store::Store;

/// Serves one request: the router, which the server installs in [`Shared::serve`] so that the
/// listener, below the router, can call it without naming it.
pub(crate) type Serve = fn(
    Arc<Shared>,
    Request<Incoming>,
) -> Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>;

/// State shared by the handle, the listener and every request.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The router every request goes to.
    pub(crate) serve: Serve,
    pub(crate) store: Mutex<Store>,
    pub(crate) registry: RwLock<Registry>,
    pub(crate) revision: watch::Sender<u64>,
    pub(crate) faults: Faults,
    pub(crate) config: ServerOptions,
    pub(crate) addr: Mutex<SocketAddr>,
    /// The accept loop; aborting it drops every connection with it.
    pub(crate) listener: Mutex<Option<JoinHandle<()>>>,
    /// Responses to get, list and watch requests by `Content-Type`.
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
