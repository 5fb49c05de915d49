//! [`InformerHealth`]: everything an operator asks of a running informer, in one read; and
//! [`SyncStatus`], the part that says whether it has synced and why not.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use kinformer_processor::ListenerStats;
use kinformer_reflector::{Error as ReflectorError, ReflectorStats, ShardStats};

use crate::{ConsistencyStats, LatencyHistogram, options::WatchErrorHandler};

/// A running informer's state, for health checks and metrics
/// ([`SharedIndexInformer::health`](crate::SharedIndexInformer::health)).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct InformerHealth {
    /// The informer's name, as in its logs.
    pub name: String,
    /// Synced or not, and the failures since the last progress.
    pub sync: SyncStatus,
    /// Lists, watches, relists by reason, events by type, and the age of the last event;
    /// all zero before start.
    pub reflector: ReflectorStats,
    /// Every handler's name and counters: delivered, buffered, dropped, panics.
    pub handlers: Vec<(String, ListenerStats)>,
    /// Objects in the cache.
    pub cached_objects: usize,
    /// Items waiting in the informer's queue, between the reflector and the cache (client-go's
    /// `informer_queued_items`).
    pub queued: usize,
    /// How long processing each popped item took (client-go's
    /// `informer_processing_latency_seconds`).
    pub processing_latency: LatencyHistogram,
    /// The highest resource version applied in order; `None` on the DeltaFIFO.
    pub cache_version: Option<u64>,
    /// What the consistency checks found, when they run.
    pub consistency: ConsistencyStats,
    /// Objects the informer's compact cache held but could not decode, each also handed to
    /// the watch error handler; 0 for any other cache.
    pub cache_decode_failures: u64,
    /// For an informer of a shard ([`InformerOptions::shard`](crate::InformerOptions::shard)):
    /// whether the server or the informer filters, and how many objects from outside the shard
    /// the informer dropped.
    pub shard: Option<ShardStats>,
}

/// Where an informer stands on its way to sync, from
/// [`SharedIndexInformer::sync_status`](crate::SharedIndexInformer::sync_status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncStatus {
    /// Whether the informer was started.
    pub started: bool,
    /// Whether its initial list reached the cache and the handlers.
    pub synced: bool,
    /// List or watch errors in a row since the reflector last made progress.
    pub consecutive_failures: u32,
    /// The latest of those errors, with its causes; `None` while all is well.
    pub last_error: Option<String>,
    /// The informer stopped for good because its resource is no longer served
    /// ([`InformerOptions::stop_when_resource_gone`](crate::InformerOptions::stop_when_resource_gone));
    /// `last_error` says what the server answered.
    pub resource_gone: bool,
}

impl fmt::Display for SyncStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.resource_gone {
            f.write_str("stopped: the resource is no longer served")?;
            if let Some(error) = &self.last_error {
                write!(f, " ({error})")?;
            }
            return Ok(());
        }
        match (self.started, self.synced, &self.last_error) {
            (false, _, _) => f.write_str("not started"),
            (true, true, _) => f.write_str("synced"),
            (true, false, None) => f.write_str("syncing"),
            (true, false, Some(error)) => write!(
                f,
                "not synced: {} failure{} in a row, the last: {error}",
                self.consecutive_failures,
                if self.consecutive_failures == 1 {
                    ""
                } else {
                    "s"
                }
            ),
        }
    }
}

/// What the informer's compact cache does with an object it cannot decode: counts it in
/// [`InformerHealth::cache_decode_failures`] and hands the typed error to the watch error
/// handler, or logs it with the informer's name when there is none.
pub(crate) fn report_decode_failure(
    name: String,
    failures: Arc<AtomicU64>,
    handler: Option<WatchErrorHandler>,
) -> impl Fn(&kinformer_store::Error) + Send + Sync + 'static {
    move |error| {
        failures.fetch_add(1, Ordering::Relaxed);
        match &handler {
            Some(handler) => handler(&ReflectorError::Store(error.clone())),
            None => tracing::error!(informer = %name, %error, "a cached object does not decode"),
        }
    }
}
