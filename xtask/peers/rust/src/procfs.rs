//! Memory, CPU and page faults of this process, read from `/proc/self` as the protocol says
//! (the files parsed by kinformer-procfs).

use std::{fs, io};

use kinformer_procfs::{Process, Stat, Status};

/// Clock ticks per second of `/proc/self/stat`'s `utime` and `stime` (`USER_HZ`, 100 on every
/// Linux the benchmarks run on; the protocol fixes it).
const TICKS_PER_SECOND: u64 = 100;

/// Resident memory now and at its peak, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`.
    pub rss_kib: u64,
    /// `VmHWM`: the peak since start or since the last [`reset_peak`].
    pub peak_kib: u64,
}

/// Reads `VmRSS` and `VmHWM` from `/proc/self/status`.
///
/// # Errors
///
/// When the file cannot be read or lacks either line.
pub fn memory() -> io::Result<Memory> {
    memory_in(&Status::read(Process::This)?)
}

/// Resets `VmHWM` to the current `VmRSS` (writes `5` to `/proc/self/clear_refs`).
///
/// # Errors
///
/// When the kernel refuses the write.
pub fn reset_peak() -> io::Result<()> {
    fs::write("/proc/self/clear_refs", "5")
}

/// CPU time and page faults of every thread of this process so far (`/proc/self/stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// `utime` + `stime`, in milliseconds.
    pub cpu_ms: u64,
    /// `stime`, the part spent in the kernel, in milliseconds.
    pub sys_ms: u64,
    /// `minflt`: page faults served without reading a file. Each one zeroes or maps a page,
    /// and on a VM whose host takes back free memory, the host pays for it as well.
    pub minor_faults: u64,
}

impl Usage {
    /// What was used between `earlier` and `self`.
    #[must_use]
    pub fn since(self, earlier: Self) -> Self {
        Self {
            cpu_ms: self.cpu_ms.saturating_sub(earlier.cpu_ms),
            sys_ms: self.sys_ms.saturating_sub(earlier.sys_ms),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
        }
    }
}

/// This process's [`Usage`] so far.
///
/// # Errors
///
/// When `/proc/self/stat` cannot be read or parsed.
pub fn usage() -> io::Result<Usage> {
    usage_in(&Stat::read(Process::This)?)
}

fn memory_in(status: &Status) -> io::Result<Memory> {
    Ok(Memory {
        rss_kib: status.kib("VmRSS")?,
        peak_kib: status.kib("VmHWM")?,
    })
}

fn usage_in(stat: &Stat) -> io::Result<Usage> {
    let minor_faults = stat.number(10)?;
    let (utime, stime) = (stat.number(14)?, stat.number(15)?);
    Ok(Usage {
        cpu_ms: (utime + stime) * 1000 / TICKS_PER_SECOND,
        sys_ms: stime * 1000 / TICKS_PER_SECOND,
        minor_faults,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_gives_rss_and_peak() {
        let status = "Name:\tpeer\nVmPeak:\t  900 kB\nVmHWM:\t    2012 kB\nVmRSS:\t    1500 kB\n";
        let memory = memory_in(&Status::parse(status)).expect("parses");
        assert_eq!(
            memory,
            Memory {
                rss_kib: 1500,
                peak_kib: 2012
            }
        );
        assert!(memory_in(&Status::parse("VmRSS:\t1 kB\n")).is_err());
    }

    #[test]
    fn stat_gives_cpu_kernel_time_and_faults_even_with_odd_command_names() {
        // minflt = 98, utime = 250 ticks, stime = 37 ticks.
        let stat =
            "19339 (a (weird) name) R 19294 19294 9869 0 -1 4194304 98 0 0 0 250 37 0 0 20 0";
        assert_eq!(
            usage_in(&Stat::parse(stat).expect("parses")).expect("has the fields"),
            Usage {
                cpu_ms: 2870,
                sys_ms: 370,
                minor_faults: 98
            }
        );
        // Cut off after utime: stime is missing.
        let cut = Stat::parse("1 (cat) R 1 1 1 0 -1 0 98 0 0 0 250").expect("parses");
        assert!(usage_in(&cut).is_err());
    }

    #[test]
    fn usage_since_an_earlier_reading_is_the_difference() {
        let earlier = Usage {
            cpu_ms: 100,
            sys_ms: 30,
            minor_faults: 1000,
        };
        let later = Usage {
            cpu_ms: 250,
            sys_ms: 90,
            minor_faults: 4000,
        };
        assert_eq!(
            later.since(earlier),
            Usage {
                cpu_ms: 150,
                sys_ms: 60,
                minor_faults: 3000
            }
        );
        assert_eq!(earlier.since(later), Usage::default());
    }

    #[test]
    fn this_process_can_be_measured() {
        let memory = memory().expect("/proc/self/status");
        assert!(memory.rss_kib > 0 && memory.peak_kib >= memory.rss_kib);
        let before = usage().expect("/proc/self/stat");
        let touched = std::hint::black_box(vec![1u8; 64 << 20]);
        let after = usage().expect("/proc/self/stat");
        assert!(after.cpu_ms >= before.cpu_ms && after.sys_ms <= after.cpu_ms);
        // 64 MiB of fresh pages, written, fault at least once per 2 MiB page.
        assert!(
            after.minor_faults >= before.minor_faults + 32,
            "{before:?} then {after:?} after touching {} bytes",
            touched.len()
        );
    }
}
