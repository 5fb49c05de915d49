//! [`ServerOptions`]: how the fake server behaves.

use std::net::SocketAddr;
use std::time::Duration;

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
    pub(crate) sharded_list_and_watch: bool,
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
            sharded_list_and_watch: true,
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

    /// Whether lists and watches honour `shardSelector`, as kube-apiserver does with its
    /// `ShardedListAndWatch` feature gate on: only the objects whose hash falls in the shard
    /// are listed and watched, and a list echoes the selector in `metadata.shardInfo` (except
    /// metadata-only and custom-resource lists, as there). Default on; off, the parameter is
    /// ignored, as by a server with the gate off or older than 1.36.
    #[must_use]
    pub fn sharded_list_and_watch(mut self, honoured: bool) -> Self {
        self.sharded_list_and_watch = honoured;
        self
    }

    /// The address to bind. Default `127.0.0.1:0` (a free port).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }
}
