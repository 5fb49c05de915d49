//! Fault injection and request accounting, reachable through [`FakeApiServer::faults`].
//!
//! [`FakeApiServer::faults`]: crate::FakeApiServer::faults

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::broadcast;

/// The verb of a request, as apiserver's audit and RBAC name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// The lower-case name, e.g. `list`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An injected failure: answer matching requests with an HTTP status and a Status body.
///
/// ```
/// use kinformer_testing::{Fault, Verb};
/// let fault = Fault::status(429).verb(Verb::List).resource("pods").times(2).retry_after(1);
/// # let _ = fault;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub(crate) code: u16,
    verb: Option<Verb>,
    resource: Option<String>,
    times: usize,
    retry_after: Option<u64>,
}

impl Fault {
    /// Fails the next matching request with `code` (403, 410, 429, 500, 504, ...).
    pub fn status(code: u16) -> Self {
        Self {
            code,
            verb: None,
            resource: None,
            times: 1,
            retry_after: None,
        }
    }

    /// Only requests with this verb.
    #[must_use]
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Only requests for this resource plural (`pods`, or `pods/status` for a subresource).
    #[must_use]
    pub fn resource(mut self, plural: &str) -> Self {
        self.resource = Some(plural.to_owned());
        self
    }

    /// How many matching requests fail (default 1).
    #[must_use]
    pub fn times(mut self, times: usize) -> Self {
        self.times = times;
        self
    }

    /// Adds a `Retry-After` header and `details.retryAfterSeconds`, as 429s carry.
    #[must_use]
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    fn matches(&self, verb: Verb, resource: &str) -> bool {
        self.verb.is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

/// Something done to every open watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WatchFault {
    /// End the stream (the connection stays usable, as when apiserver ends a watch).
    Close,
    /// Write this line (a newline is added) into the stream.
    RawLine(String),
    /// Send nothing more (no event, no bookmark) but keep the connection open, as a watch
    /// whose server or proxy hangs.
    Stall,
}

#[derive(Debug, Default)]
struct Accounting {
    counts: HashMap<(Verb, String), u64>,
}

/// The fault-injection and accounting handle of one server. Cheap to clone.
#[derive(Clone)]
pub struct Faults {
    rules: Arc<Mutex<Vec<Fault>>>,
    delay: Arc<Mutex<Option<Duration>>>,
    accounting: Arc<Mutex<Accounting>>,
    watch_faults: broadcast::Sender<WatchFault>,
    closer: Arc<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults")
            .field("pending", &*self.rules.lock())
            .field("delay", &*self.delay.lock())
            .finish_non_exhaustive()
    }
}

impl Faults {
    pub(crate) fn new(closer: Arc<dyn Fn() + Send + Sync>) -> Self {
        let (watch_faults, _) = broadcast::channel(64);
        Self {
            rules: Arc::default(),
            delay: Arc::default(),
            accounting: Arc::default(),
            watch_faults,
            closer,
        }
    }

    /// Queues a failure for the next matching requests; faults are consumed in the order given.
    pub fn inject(&self, fault: Fault) {
        if fault.times > 0 {
            self.rules.lock().push(fault);
        }
    }

    /// Removes every queued failure and the response delay.
    pub fn clear(&self) {
        self.rules.lock().clear();
        *self.delay.lock() = None;
    }

    /// Delays every response (including the start of a watch stream) by `delay`; `None` stops.
    pub fn set_delay(&self, delay: Option<Duration>) {
        *self.delay.lock() = delay;
    }

    /// Ends every open watch stream now, as an apiserver restart or rollout does.
    pub fn close_watches(&self) {
        (self.closer)();
        // Streams that are mid-backlog learn of it here as well.
        let _ = self.watch_faults.send(WatchFault::Close);
    }

    /// Writes `line` (plus a newline) into every open watch stream: garbage JSON, a truncated
    /// event, an event of a type no client knows, whatever a test needs the client to survive.
    /// A protobuf watch gets a line that spells an event (`{"type":..,"object":{..}}`) as a
    /// `WatchEvent` frame of that type, and any other line framed as it is.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = kinformer_testing::FakeApiServer::start().await?;
    /// server.faults().inject_watch_line(
    ///     r#"{"type":"SURPRISE","object":{"kind":"Status","apiVersion":"v1","metadata":{}}}"#,
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn inject_watch_line(&self, line: impl Into<String>) {
        let _ = self.watch_faults.send(WatchFault::RawLine(line.into()));
    }

    /// Requests seen so far with this verb for this resource plural (faulted ones included).
    pub fn request_count(&self, verb: Verb, resource: &str) -> u64 {
        self.accounting
            .lock()
            .counts
            .get(&(verb, resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Every (verb, resource, count) seen so far, sorted for stable assertions (the admin
    /// `requests` endpoint).
    pub(crate) fn request_counts(&self) -> Vec<(Verb, String, u64)> {
        let mut all: Vec<_> = self
            .accounting
            .lock()
            .counts
            .iter()
            .map(|((verb, resource), count)| (*verb, resource.clone(), *count))
            .collect();
        all.sort_by(|a, b| (a.1.as_str(), a.0.as_str()).cmp(&(b.1.as_str(), b.0.as_str())));
        all
    }

    /// Stops every open watch stream mid-stream without closing it: no event and no bookmark
    /// is sent any more, and the connection stays open until the watch's own timeout or the
    /// client gives up. Watches opened afterwards are served normally.
    pub fn stall_watches(&self) {
        let _ = self.watch_faults.send(WatchFault::Stall);
    }

    /// Counts the request and returns the failure to answer with, if one is due.
    pub(crate) fn on_request(&self, verb: Verb, resource: &str) -> Option<Fault> {
        *self
            .accounting
            .lock()
            .counts
            .entry((verb, resource.to_owned()))
            .or_default() += 1;
        let mut rules = self.rules.lock();
        let index = rules.iter().position(|f| f.matches(verb, resource))?;
        let fault = rules[index].clone();
        rules[index].times -= 1;
        if rules[index].times == 0 {
            rules.remove(index);
        }
        Some(fault)
    }

    pub(crate) fn retry_after(fault: &Fault) -> Option<u64> {
        fault.retry_after
    }

    pub(crate) fn delay(&self) -> Option<Duration> {
        *self.delay.lock()
    }

    pub(crate) fn subscribe_watch_faults(&self) -> broadcast::Receiver<WatchFault> {
        self.watch_faults.subscribe()
    }
}
