//! The figures read (or derived) from a peer's result line, and which way is better.

use serde_json::Value;

/// Whether a smaller or a larger figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Better {
    Lower,
    Higher,
}

/// A figure read (or derived) from a peer's result line.
#[derive(Debug, Clone, Copy)]
pub(super) struct Metric {
    pub(super) label: &'static str,
    pub(super) better: Better,
    pub(super) read: fn(&Value) -> Option<f64>,
    /// Digits after the decimal point in the tables.
    pub(super) decimals: usize,
}

pub(super) fn field(result: &Value, pointer: &str) -> Option<f64> {
    result.pointer(pointer).and_then(Value::as_f64)
}

pub(super) const SYNC_MS: Metric = Metric {
    label: "time to synced (ms)",
    better: Better::Lower,
    read: |r| field(r, "/sync_ms"),
    decimals: 0,
};

pub(super) const CPU_MS: Metric = Metric {
    label: "CPU user+sys (ms)",
    better: Better::Lower,
    read: |r| field(r, "/cpu_ms"),
    decimals: 0,
};

pub(super) const SYS_MS: Metric = Metric {
    label: "of it in the kernel (ms)",
    better: Better::Lower,
    read: |r| field(r, "/sys_ms"),
    decimals: 0,
};

/// Minor page faults: each zeroes or maps a page, and on a VM whose host takes back free
/// memory, the host pays for it too. What moves `SYS_MS` from one run to the next.
pub(super) const FAULTS_K: Metric = Metric {
    label: "page faults (thousands)",
    better: Better::Lower,
    read: |r| field(r, "/faults").map(|faults| faults / 1e3),
    decimals: 1,
};

pub(super) const PEAK_MIB: Metric = Metric {
    label: "peak RSS (MiB)",
    better: Better::Lower,
    read: |r| field(r, "/peak_rss_kib").map(|kib| kib / 1024.0),
    decimals: 0,
};

pub(super) const STEADY_MIB: Metric = Metric {
    label: "steady RSS (MiB)",
    better: Better::Lower,
    read: |r| field(r, "/steady_rss_kib").map(|kib| kib / 1024.0),
    decimals: 0,
};

/// The response body bytes the peer's client received during the run.
pub(super) const RECEIVED_MIB: Metric = Metric {
    label: "received (MiB)",
    better: Better::Lower,
    read: |r| field(r, "/received_kib").map(|kib| kib / 1024.0),
    decimals: 1,
};

pub(super) const KIB_PER_OBJECT: Metric = Metric {
    label: "steady RSS per object (KiB)",
    better: Better::Lower,
    read: |r| {
        let objects = field(r, "/objects")?;
        (objects > 0.0).then_some(())?;
        Some((field(r, "/steady_rss_kib")? - field(r, "/baseline_rss_kib")?) / objects)
    },
    decimals: 1,
};

pub(super) const PHASE_MS: Metric = Metric {
    label: "phase (ms)",
    better: Better::Lower,
    read: |r| field(r, "/phase_ms"),
    decimals: 0,
};

pub(super) const UPDATES_PER_S: Metric = Metric {
    label: "updates/s to every handler",
    better: Better::Higher,
    read: |r| {
        let ms = field(r, "/phase_ms")?;
        Some(field(r, "/updates")? / (ms / 1e3))
    },
    decimals: 0,
};

pub(super) const CPU_US_PER_EVENT: Metric = Metric {
    label: "CPU per handler call (µs)",
    better: Better::Lower,
    read: |r| Some(field(r, "/phase_cpu_ms")? * 1e3 / field(r, "/latency_us/samples")?.max(1.0)),
    decimals: 2,
};

pub(super) const PHASE_SYS_PERCENT: Metric = Metric {
    label: "phase CPU in the kernel (%)",
    better: Better::Lower,
    read: |r| {
        let cpu = field(r, "/phase_cpu_ms")?;
        (cpu > 0.0).then_some(())?;
        Some(field(r, "/phase_sys_ms")? * 100.0 / cpu)
    },
    decimals: 0,
};

pub(super) const FAULTS_PER_UPDATE: Metric = Metric {
    label: "page faults per update",
    better: Better::Lower,
    read: |r| Some(field(r, "/phase_faults")? / field(r, "/updates")?.max(1.0)),
    decimals: 2,
};

pub(super) const P50_MS: Metric = Metric {
    label: "p50 latency (ms)",
    better: Better::Lower,
    read: |r| field(r, "/latency_us/p50").map(|us| us / 1e3),
    decimals: 1,
};

pub(super) const P99_MS: Metric = Metric {
    label: "p99 latency (ms)",
    better: Better::Lower,
    read: |r| field(r, "/latency_us/p99").map(|us| us / 1e3),
    decimals: 1,
};

pub(super) const P999_MS: Metric = Metric {
    label: "p99.9 latency (ms)",
    better: Better::Lower,
    read: |r| field(r, "/latency_us/p999").map(|us| us / 1e3),
    decimals: 1,
};

pub(super) const SLOW_P99_MS: Metric = Metric {
    label: "slow handler p99 (ms)",
    better: Better::Lower,
    read: |r| field(r, "/slow_latency_us/p99").map(|us| us / 1e3),
    decimals: 0,
};

pub(super) const RELIST_PEAK_OVER_STEADY: Metric = Metric {
    label: "relist peak / steady RSS",
    better: Better::Lower,
    read: |r| Some(field(r, "/relist_peak_rss_kib")? / field(r, "/steady_rss_kib")?),
    decimals: 2,
};

pub(super) const RELIST_UPDATES: Metric = Metric {
    label: "updates seen",
    better: Better::Higher,
    read: |r| field(r, "/relist_updates"),
    decimals: 0,
};

pub(super) const RELIST_DELETES: Metric = Metric {
    label: "deletes seen",
    better: Better::Higher,
    read: |r| field(r, "/relist_deletes"),
    decimals: 0,
};

pub(super) const READS_PER_S: Metric = Metric {
    label: "index reads/s",
    better: Better::Higher,
    read: |r| field(r, "/reads_per_s"),
    decimals: 0,
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn derived_metrics_read_the_protocol_fields() {
        let result = json!({
            "objects": 1000, "steady_rss_kib": 30000.0, "baseline_rss_kib": 10000.0,
            "phase_ms": 2000.0, "phase_cpu_ms": 500.0, "updates": 1000,
            "sys_ms": 120.0, "faults": 45600, "phase_sys_ms": 100.0, "phase_faults": 2500,
            "latency_us": { "p50": 1500.0, "p99": 9000.0, "p999": 20000.0, "samples": 3000 },
        });
        assert_eq!((KIB_PER_OBJECT.read)(&result), Some(20.0));
        assert_eq!((UPDATES_PER_S.read)(&result), Some(500.0));
        assert_eq!((P99_MS.read)(&result), Some(9.0));
        assert!((CPU_US_PER_EVENT.read)(&result).is_some_and(|us| (us - 166.67).abs() < 0.01));
        assert_eq!((READS_PER_S.read)(&result), None);
        assert_eq!((SYS_MS.read)(&result), Some(120.0));
        assert_eq!((FAULTS_K.read)(&result), Some(45.6));
        assert_eq!((PHASE_SYS_PERCENT.read)(&result), Some(20.0));
        assert_eq!((FAULTS_PER_UPDATE.read)(&result), Some(2.5));
        // Results saved before peers reported faults and kernel time read as absent.
        let older = json!({ "phase_cpu_ms": 500.0, "updates": 1000 });
        assert_eq!((SYS_MS.read)(&older), None);
        assert_eq!((FAULTS_PER_UPDATE.read)(&older), None);
        assert_eq!(
            (PHASE_SYS_PERCENT.read)(&json!({ "phase_cpu_ms": 0.0, "phase_sys_ms": 0.0 })),
            None
        );
    }
}
