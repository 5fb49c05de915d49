//! Prometheus metrics for every informer of a factory, read from the informers at scrape time:
//! nothing is recorded on the watch path beyond the reflector's and the handlers' own counters.

use std::{fmt, time::Duration};

use kinformer_informer::{LatencyHistogram, PROCESSING_LATENCY_BUCKETS};
use kinformer_reflector::ShardMode;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};

use crate::factory::{SharedInformerFactory, WeakFactory};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InformerLabels {
    informer: String,
    selection: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WithValue {
    informer: String,
    selection: String,
    /// The second dimension: a list's result, a relist's reason, an event's type.
    value: String,
}

/// client-go's informer metric labels (component-base's `clientgo/fifo`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientGoLabels {
    name: String,
    group: String,
    version: String,
    resource: String,
}

/// A histogram read from an informer at scrape time.
#[derive(Debug)]
struct ConstHistogram {
    sum: f64,
    count: u64,
    /// Upper bound and count per bucket, not cumulative; the last bound is `+Inf`.
    buckets: Vec<(f64, u64)>,
}

impl ConstHistogram {
    fn of(latency: &LatencyHistogram) -> Self {
        let bounds = PROCESSING_LATENCY_BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY]);
        let counts = latency.counts.iter().copied().chain(std::iter::repeat(0));
        Self {
            sum: latency.sum.as_secs_f64(),
            count: latency.count,
            buckets: bounds.zip(counts).collect(),
        }
    }
}

impl EncodeMetric for ConstHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> fmt::Result {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandlerLabels {
    informer: String,
    selection: String,
    handler: String,
}

impl SharedInformerFactory {
    /// Registers metrics for every informer this factory has or will have, read from the
    /// informers each time `registry` is encoded. The registry does not keep the factory
    /// alive; once the factory is dropped it reports nothing.
    ///
    /// Per informer (labels `informer`, `selection`):
    ///
    /// | metric | type |
    /// | --- | --- |
    /// | `kinformer_informer_synced` | gauge, 0 or 1 |
    /// | `kinformer_informer_consecutive_failures` | gauge |
    /// | `kinformer_informer_cached_objects` | gauge |
    /// | `kinformer_informer_last_event_age_seconds` | gauge, once an event arrived |
    /// | `kinformer_informer_watch_open_seconds` | gauge, while a watch is open |
    /// | `kinformer_informer_consistency_drifts_total` | counter |
    /// | `kinformer_informer_cache_decode_failures_total` | counter: cached objects a compact cache could not decode |
    /// | `kinformer_informer_shard_filtered_by_server` | gauge, for an informer of a shard once known: 1 when the server filters, 0 when the informer does |
    /// | `kinformer_informer_out_of_shard_total` | counter, for an informer of a shard: objects from outside it the informer dropped |
    /// | `kinformer_reflector_lists_total` | counter, `value` = `ok` or `error` |
    /// | `kinformer_reflector_list_seconds_total` | counter |
    /// | `kinformer_reflector_watches_total` | counter |
    /// | `kinformer_reflector_relists_total` | counter, `value` = the reason |
    /// | `kinformer_reflector_events_total` | counter, `value` = `added`, `modified`, `deleted`, `bookmark` |
    /// | `kinformer_reflector_errors_total` | counter |
    /// | `kinformer_reflector_decode_errors_total` | counter |
    ///
    /// And client-go's informer metrics under its names and labels (`name`, `group`, `version`,
    /// `resource`): `informer_queued_items` (gauge), `informer_processing_latency_seconds`
    /// (histogram, client-go's buckets) and `informer_store_resource_version` (gauge, the 15
    /// least significant digits; not for informers on the DeltaFIFO).
    ///
    /// Per handler (labels `informer`, `selection`, `handler`):
    ///
    /// | metric | type |
    /// | --- | --- |
    /// | `kinformer_handler_buffered` | gauge |
    /// | `kinformer_handler_oldest_pending_seconds` | gauge: how far behind the handler is, 0 when nothing waits |
    /// | `kinformer_handler_in_call_seconds` | gauge: how long the current call has run, 0 between calls |
    /// | `kinformer_handler_delivered_total` | counter |
    /// | `kinformer_handler_coalesced_total` | counter |
    /// | `kinformer_handler_dropped_total` | counter |
    /// | `kinformer_handler_panics_total` | counter |
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(FactoryCollector {
            factory: self.downgrade(),
        }));
    }
}

struct FactoryCollector {
    factory: WeakFactory,
}

impl fmt::Debug for FactoryCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FactoryCollector").finish_non_exhaustive()
    }
}

/// One family: a descriptor, then one sample per label set.
fn family<L: EncodeLabelSet, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: &[(L, M)],
) -> fmt::Result {
    let Some((_, first)) = samples.first() else {
        return Ok(());
    };
    let mut metric = encoder.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, value) in samples {
        value.encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(value: impl TryInto<i64>) -> ConstGauge {
    ConstGauge::new(value.try_into().unwrap_or(i64::MAX))
}

impl Collector for FactoryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let Some(factory) = self.factory.upgrade() else {
            return Ok(());
        };
        let mut informers: Vec<_> = factory.health().into_iter().collect();
        informers.sort_by_cached_key(|(key, _)| key.to_string());

        let mut synced = Vec::new();
        let mut failures = Vec::new();
        let mut cached = Vec::new();
        let mut last_event = Vec::new();
        let mut watch_open = Vec::new();
        let mut drifts = Vec::new();
        let mut undecodable = Vec::new();
        let mut shard_by_server = Vec::new();
        let mut out_of_shard = Vec::new();
        let mut lists = Vec::new();
        let mut list_seconds = Vec::new();
        let mut watches = Vec::new();
        let mut relists = Vec::new();
        let mut events = Vec::new();
        let mut errors = Vec::new();
        let mut decode_errors = Vec::new();
        let mut queued = Vec::new();
        let mut processing = Vec::new();
        let mut store_version = Vec::new();
        let mut buffered = Vec::new();
        let mut oldest_pending = Vec::new();
        let mut in_call = Vec::new();
        let mut coalesced = Vec::new();
        let mut delivered = Vec::new();
        let mut dropped = Vec::new();
        let mut panics = Vec::new();
        for (key, health) in &informers {
            let reflector = &health.reflector;
            // The informer's labels, rendered once and cloned into each of its series.
            let base = InformerLabels {
                informer: key.description().to_owned(),
                selection: key.selection().to_string(),
            };
            let with = |value: &str| WithValue {
                informer: base.informer.clone(),
                selection: base.selection.clone(),
                value: value.to_owned(),
            };
            let (group, version, resource) = key.group_version_resource();
            let client_go = ClientGoLabels {
                name: health.name.clone(),
                group: group.to_owned(),
                version: version.to_owned(),
                resource: resource.to_owned(),
            };
            queued.push((client_go.clone(), gauge(health.queued)));
            processing.push((
                client_go.clone(),
                ConstHistogram::of(&health.processing_latency),
            ));
            if let Some(version) = health.cache_version {
                // client-go's gauge is a float64: it keeps the 15 digits a double holds exactly.
                let digits = (version % 1_000_000_000_000_000) as f64;
                store_version.push((client_go, ConstGauge::new(digits)));
            }
            synced.push((base.clone(), gauge(i64::from(health.sync.synced))));
            failures.push((base.clone(), gauge(health.sync.consecutive_failures)));
            cached.push((base.clone(), gauge(health.cached_objects)));
            if let Some(age) = reflector.since_last_event {
                last_event.push((base.clone(), ConstGauge::new(age.as_secs_f64())));
            }
            if let Some(open) = reflector.watch_open_for {
                watch_open.push((base.clone(), ConstGauge::new(open.as_secs_f64())));
            }
            drifts.push((base.clone(), ConstCounter::new(health.consistency.drifts)));
            undecodable.push((
                base.clone(),
                ConstCounter::new(health.cache_decode_failures),
            ));
            if let Some(shard) = &health.shard {
                if let Some(mode) = shard.mode {
                    let by_server = i64::from(mode == ShardMode::Server);
                    shard_by_server.push((base.clone(), gauge(by_server)));
                }
                out_of_shard.push((base.clone(), ConstCounter::new(shard.out_of_shard)));
            }
            lists.push((with("ok"), ConstCounter::new(reflector.lists)));
            lists.push((with("error"), ConstCounter::new(reflector.failed_lists)));
            list_seconds.push((base.clone(), ConstCounter::new(reflector.list_seconds)));
            watches.push((base.clone(), ConstCounter::new(reflector.watches)));
            for (reason, count) in &reflector.relists {
                relists.push((with(reason), ConstCounter::new(*count)));
            }
            for (kind, count) in [
                ("added", reflector.added),
                ("modified", reflector.modified),
                ("deleted", reflector.deleted),
                ("bookmark", reflector.bookmarks),
            ] {
                events.push((with(kind), ConstCounter::new(count)));
            }
            errors.push((base.clone(), ConstCounter::new(reflector.errors)));
            decode_errors.push((base.clone(), ConstCounter::new(reflector.decode_errors)));
            for (handler, stats) in &health.handlers {
                let handler = HandlerLabels {
                    informer: base.informer.clone(),
                    selection: base.selection.clone(),
                    handler: handler.clone(),
                };
                buffered.push((handler.clone(), gauge(stats.buffered)));
                let seconds =
                    |age: Option<Duration>| ConstGauge::new(age.unwrap_or_default().as_secs_f64());
                oldest_pending.push((handler.clone(), seconds(stats.oldest_pending)));
                in_call.push((handler.clone(), seconds(stats.in_handler)));
                coalesced.push((handler.clone(), ConstCounter::new(stats.coalesced)));
                delivered.push((handler.clone(), ConstCounter::new(stats.delivered)));
                dropped.push((handler.clone(), ConstCounter::new(stats.dropped)));
                panics.push((handler, ConstCounter::new(stats.panicked)));
            }
        }

        let e = &mut encoder;
        family(
            e,
            "informer_queued_items",
            "Number of items currently queued in the FIFO.",
            &queued,
        )?;
        family(
            e,
            "informer_processing_latency_seconds",
            "Time taken to process events after popping from the queue.",
            &processing,
        )?;
        family(
            e,
            "informer_store_resource_version",
            "The 15 least significant digits of the resource version of the store.",
            &store_version,
        )?;
        family(
            e,
            "kinformer_informer_synced",
            "Whether the informer has synced (1) or not (0).",
            &synced,
        )?;
        family(
            e,
            "kinformer_informer_consecutive_failures",
            "List and watch errors since the informer last made progress.",
            &failures,
        )?;
        family(
            e,
            "kinformer_informer_cached_objects",
            "Objects in the informer's cache.",
            &cached,
        )?;
        family(
            e,
            "kinformer_informer_last_event_age_seconds",
            "Seconds since the last watch event or applied list.",
            &last_event,
        )?;
        family(
            e,
            "kinformer_informer_watch_open_seconds",
            "Seconds the current watch has been open.",
            &watch_open,
        )?;
        family(
            e,
            "kinformer_informer_consistency_drifts",
            "Consistency checks that found the cache different from the server.",
            &drifts,
        )?;
        family(
            e,
            "kinformer_informer_cache_decode_failures",
            "Cached objects a compact cache could not decode.",
            &undecodable,
        )?;
        family(
            e,
            "kinformer_informer_shard_filtered_by_server",
            "For an informer of a shard: whether the server filters it (1) or the informer (0).",
            &shard_by_server,
        )?;
        family(
            e,
            "kinformer_informer_out_of_shard",
            "Objects from outside the informer's shard that the informer dropped.",
            &out_of_shard,
        )?;
        family(e, "kinformer_reflector_lists", "Lists, by result.", &lists)?;
        family(
            e,
            "kinformer_reflector_list_seconds",
            "Seconds spent in applied lists.",
            &list_seconds,
        )?;
        family(
            e,
            "kinformer_reflector_watches",
            "Watches opened.",
            &watches,
        )?;
        family(
            e,
            "kinformer_reflector_relists",
            "Relists after a watch, by reason.",
            &relists,
        )?;
        family(
            e,
            "kinformer_reflector_events",
            "Watch events received, by type.",
            &events,
        )?;
        family(
            e,
            "kinformer_reflector_errors",
            "List and watch errors reported.",
            &errors,
        )?;
        family(
            e,
            "kinformer_reflector_decode_errors",
            "Bodies and events that did not decode.",
            &decode_errors,
        )?;
        family(
            e,
            "kinformer_handler_buffered",
            "Notifications waiting in a handler's buffer.",
            &buffered,
        )?;
        family(
            e,
            "kinformer_handler_oldest_pending_seconds",
            "Seconds the oldest notification not yet handed to the handler has waited.",
            &oldest_pending,
        )?;
        family(
            e,
            "kinformer_handler_in_call_seconds",
            "Seconds the handler's current call has been running.",
            &in_call,
        )?;
        family(
            e,
            "kinformer_handler_delivered",
            "Notifications a handler has handled.",
            &delivered,
        )?;
        family(
            e,
            "kinformer_handler_coalesced",
            "Notifications a coalescing buffer merged into a newer one for the same object.",
            &coalesced,
        )?;
        family(
            e,
            "kinformer_handler_dropped",
            "Notifications a bounded buffer dropped.",
            &dropped,
        )?;
        family(
            e,
            "kinformer_handler_panics",
            "Handler calls that panicked.",
            &panics,
        )?;
        Ok(())
    }
}
