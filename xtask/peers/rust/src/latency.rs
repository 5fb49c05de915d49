//! Update latency: handler time minus the object's `emit-ns` annotation.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The annotation the fake API server stamps on every bench update: Unix nanoseconds taken
/// just before the object was stored.
pub const EMIT_NS_ANNOTATION: &str = "bench.kinformer.dev/emit-ns";

/// Nanoseconds since the Unix epoch, now.
pub fn now_unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

/// Microseconds from `emit_ns` (an annotation value) to `handled_ns`; `None` when the value
/// is not a number. A handler clock behind the server's (same host, so only by rounding)
/// counts as zero.
pub fn latency_us(emit_ns: &str, handled_ns: u128) -> Option<u64> {
    let emitted: u128 = emit_ns.parse().ok()?;
    let micros = handled_ns.saturating_sub(emitted) / 1000;
    Some(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// Nearest-rank percentiles of latency samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
    /// Number of samples.
    pub samples: usize,
}

impl Percentiles {
    /// Sorts `samples` and reads the percentiles off by nearest rank (the smallest sample
    /// with at least p% of the samples at or below it). All zero for no samples.
    pub fn of(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        // In thousandths, so the rank is exact (99.9% of 1000 in f64 is 999.0000000000001).
        let rank = |permille: usize| -> u64 {
            if samples.is_empty() {
                return 0;
            }
            let rank = (permille * samples.len()).div_ceil(1000);
            samples[rank.clamp(1, samples.len()) - 1]
        };
        Self {
            p50: rank(500),
            p99: rank(990),
            p999: rank(999),
            max: samples.last().copied().unwrap_or(0),
            samples: samples.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut samples: Vec<u64> = (1..=1000).rev().collect();
        let percentiles = Percentiles::of(&mut samples);
        assert_eq!(
            percentiles,
            Percentiles {
                p50: 500,
                p99: 990,
                p999: 999,
                max: 1000,
                samples: 1000
            }
        );
    }

    #[test]
    fn few_samples_round_the_rank_up() {
        let mut samples = vec![30, 10, 20];
        let percentiles = Percentiles::of(&mut samples);
        // ceil(0.5 * 3) = 2nd smallest; ceil(0.99 * 3) = 3rd.
        assert_eq!(
            (percentiles.p50, percentiles.p99, percentiles.p999),
            (20, 30, 30)
        );
        assert_eq!(percentiles.max, 30);
        let mut one = vec![7];
        assert_eq!(Percentiles::of(&mut one).p50, 7);
    }

    #[test]
    fn no_samples_is_all_zero() {
        let percentiles = Percentiles::of(&mut []);
        assert_eq!(
            percentiles,
            Percentiles {
                p50: 0,
                p99: 0,
                p999: 0,
                max: 0,
                samples: 0
            }
        );
    }

    #[test]
    fn latency_is_handler_time_minus_emit_time_in_micros() {
        assert_eq!(latency_us("1000000", 3_500_999), Some(2500));
        assert_eq!(latency_us("5000", 1000), Some(0));
        assert_eq!(latency_us("soon", 1000), None);
    }
}
