//! [`LatencyHistogram`]: how long the informer takes to process what it pops, in client-go's
//! buckets, recorded with a few relaxed atomics.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

/// The upper bounds, in seconds, of client-go's `informer_processing_latency_seconds`
/// buckets (component-base's `clientgo/fifo` metrics); a last bucket takes the rest.
pub const PROCESSING_LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The recording side: one counter per bucket, the sum and the count.
#[derive(Debug, Default)]
pub(crate) struct LatencyRecorder {
    buckets: [AtomicU64; PROCESSING_LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl LatencyRecorder {
    pub(crate) fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = PROCESSING_LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(PROCESSING_LATENCY_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LatencyHistogram {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|bucket| bucket.load(Ordering::Relaxed))
            .collect();
        LatencyHistogram {
            count: counts.iter().sum(),
            counts,
            sum: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)),
        }
    }
}

/// How long processing each popped item took (applying it to the cache and handing its
/// notifications to the handlers' buffers): client-go's `informer_processing_latency_seconds`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyHistogram {
    /// Items per bucket, not cumulative: `counts[i]` took at most
    /// [`PROCESSING_LATENCY_BUCKETS`]`[i]` seconds and more than the bound before; the last
    /// entry counts what took longer than ten seconds. Empty before start.
    pub counts: Vec<u64>,
    /// The time all of them took together.
    pub sum: Duration,
    /// How many were recorded.
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_client_gos_buckets() {
        let recorder = LatencyRecorder::default();
        for micros in [500, 1_000, 1_001, 7_000, 20_000_000] {
            recorder.observe(Duration::from_micros(micros));
        }
        let histogram = recorder.snapshot();
        assert_eq!(histogram.count, 5);
        assert_eq!(
            histogram.counts,
            [2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            "1 ms is inside the 1 ms bucket, 1.001 ms is not; 20 s is past the last bound"
        );
        assert_eq!(histogram.sum, Duration::from_micros(20_009_501));
    }
}
