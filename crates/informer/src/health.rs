//! [`InformerHealth`]: everything an operator asks of a running informer, in one read.

use kinformer_processor::ListenerStats;
use kinformer_reflector::ReflectorStats;

use crate::{ConsistencyStats, LatencyHistogram, SyncStatus};

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
}
