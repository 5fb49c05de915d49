//! Memory and CPU of this process, read from `/proc/self` as the protocol says.

use std::{fs, io};

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
    parse_status(&fs::read_to_string("/proc/self/status")?)
}

/// Resets `VmHWM` to the current `VmRSS` (writes `5` to `/proc/self/clear_refs`).
///
/// # Errors
///
/// When the kernel refuses the write.
pub fn reset_peak() -> io::Result<()> {
    fs::write("/proc/self/clear_refs", "5")
}

/// CPU time of every thread of this process so far (`utime` + `stime`), in milliseconds.
///
/// # Errors
///
/// When `/proc/self/stat` cannot be read or parsed.
pub fn cpu_ms() -> io::Result<u64> {
    parse_stat_cpu_ms(&fs::read_to_string("/proc/self/stat")?)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

fn parse_status(status: &str) -> io::Result<Memory> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse().ok())
            .ok_or_else(|| invalid(&format!("/proc/self/status has no {name} in kB")))
    };
    Ok(Memory {
        rss_kib: field("VmRSS")?,
        peak_kib: field("VmHWM")?,
    })
}

fn parse_stat_cpu_ms(stat: &str) -> io::Result<u64> {
    // The command name (field 2) is in parentheses and may hold spaces or parentheses of its
    // own, so fields are counted from the last `)`: field 3 is the first after it.
    let after_name = stat
        .rsplit_once(')')
        .ok_or_else(|| invalid("/proc/self/stat has no command name"))?
        .1;
    let mut fields = after_name.split_whitespace().skip(14 - 3);
    let mut ticks = || -> io::Result<u64> {
        fields
            .next()
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| invalid("/proc/self/stat lacks utime or stime"))
    };
    let (utime, stime) = (ticks()?, ticks()?);
    Ok((utime + stime) * 1000 / TICKS_PER_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_gives_rss_and_peak() {
        let status = "Name:\tpeer\nVmPeak:\t  900 kB\nVmHWM:\t    2012 kB\nVmRSS:\t    1500 kB\n";
        let memory = parse_status(status).expect("parses");
        assert_eq!(
            memory,
            Memory {
                rss_kib: 1500,
                peak_kib: 2012
            }
        );
        assert!(parse_status("VmRSS:\t1 kB\n").is_err());
    }

    #[test]
    fn stat_cpu_is_utime_plus_stime_in_ms_even_with_odd_command_names() {
        // utime = 250 ticks, stime = 37 ticks.
        let stat =
            "19339 (a (weird) name) R 19294 19294 9869 0 -1 4194304 98 0 0 0 250 37 0 0 20 0";
        assert_eq!(parse_stat_cpu_ms(stat).expect("parses"), 2870);
        assert!(parse_stat_cpu_ms("19339 (cat) R 1 2").is_err());
    }

    #[test]
    fn this_process_can_be_measured() {
        let memory = memory().expect("/proc/self/status");
        assert!(memory.rss_kib > 0 && memory.peak_kib >= memory.rss_kib);
        cpu_ms().expect("/proc/self/stat");
    }
}
