//! The `/proc` files kinformer's tools read, parsed in one place: a process's `stat` (the
//! benchmark peers' CPU time and page faults, the control plane's exit checks) and its
//! `status` (the peers' resident memory, kind-image's capability bounding set). Linux only;
//! the field numbers are proc(5)'s.
//!
//! ```
//! use kinformer_procfs::{Process, Stat, Status};
//!
//! let stat = Stat::read(Process::This)?;
//! assert_eq!(stat.state(), "R", "this process is running");
//! let status = Status::read(Process::This)?;
//! assert!(status.kib("VmRSS")? > 0);
//! # Ok::<(), std::io::Error>(())
//! ```

use std::{fs, io};

/// Whose files to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// The calling process (`/proc/self`).
    This,
    /// The process with this PID.
    Pid(u32),
}

impl Process {
    fn path(self, file: &str) -> String {
        match self {
            Self::This => format!("/proc/self/{file}"),
            Self::Pid(pid) => format!("/proc/{pid}/{file}"),
        }
    }
}

/// A process's `stat`: one line, whose second field (the command name) is in parentheses and
/// may hold spaces and parentheses of its own, so the fields are counted from its last `)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Fields 3 and on.
    fields: Vec<String>,
}

impl Stat {
    /// Reads and parses the process's `stat`.
    ///
    /// # Errors
    ///
    /// When the file cannot be read (the process is gone, or was reaped) or has no command name.
    pub fn read(process: Process) -> io::Result<Self> {
        Self::parse(&fs::read_to_string(process.path("stat"))?)
    }

    /// Parses the text of a `stat` file.
    ///
    /// # Errors
    ///
    /// When the text has no parenthesised command name.
    pub fn parse(text: &str) -> io::Result<Self> {
        let (_, after_name) = text
            .rsplit_once(')')
            .ok_or_else(|| invalid("a stat line without a command name"))?;
        Ok(Self {
            fields: after_name.split_whitespace().map(str::to_owned).collect(),
        })
    }

    /// Field 3, the state: `R` running, `S` sleeping, `Z` zombie, `X` dead, ...
    #[must_use]
    pub fn state(&self) -> &str {
        self.fields.first().map_or("", String::as_str)
    }

    /// The numeric field `number` (counted from 1 as in proc(5): 10 is `minflt`, 14 `utime`,
    /// 15 `stime`).
    ///
    /// # Errors
    ///
    /// When the line is shorter, or the field is not a number.
    pub fn number(&self, number: usize) -> io::Result<u64> {
        number
            .checked_sub(3)
            .and_then(|index| self.fields.get(index))
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| invalid(&format!("stat field {number} is missing or not a number")))
    }
}

/// A process's `status`: `Name:\tvalue` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    text: String,
}

impl Status {
    /// Reads the process's `status`.
    ///
    /// # Errors
    ///
    /// When the file cannot be read.
    pub fn read(process: Process) -> io::Result<Self> {
        Ok(Self::parse(&fs::read_to_string(process.path("status"))?))
    }

    /// The text of a `status` file.
    #[must_use]
    pub fn parse(text: &str) -> Self {
        Self {
            text: text.to_owned(),
        }
    }

    /// The value of the line `name`, trimmed.
    #[must_use]
    pub fn field(&self, name: &str) -> Option<&str> {
        self.text
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    }

    /// The value of the line `name` in kB (`VmRSS`, `VmHWM`, ...).
    ///
    /// # Errors
    ///
    /// When there is no such line, or it is not a number of kB.
    pub fn kib(&self, name: &str) -> io::Result<u64> {
        self.field(name)
            .and_then(|value| value.strip_suffix("kB")?.trim().parse().ok())
            .ok_or_else(|| invalid(&format!("status has no {name} in kB")))
    }

    /// The value of the line `name` as hexadecimal (`CapBnd`, `CapEff`, ...).
    ///
    /// # Errors
    ///
    /// When there is no such line, or it is not hexadecimal.
    pub fn hex(&self, name: &str) -> io::Result<u64> {
        self.field(name)
            .and_then(|value| u64::from_str_radix(value, 16).ok())
            .ok_or_else(|| invalid(&format!("status has no hexadecimal {name}")))
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_from_the_last_parenthesis_of_an_odd_command_name() {
        let stat = Stat::parse(
            "19339 (a (weird) name) R 19294 19294 9869 0 -1 4194304 98 0 0 0 250 37 0 0 20 0",
        )
        .expect("parses");
        assert_eq!(stat.state(), "R");
        assert_eq!(stat.number(4).expect("ppid"), 19294);
        assert_eq!(stat.number(10).expect("minflt"), 98);
        assert_eq!(stat.number(14).expect("utime"), 250);
        assert_eq!(stat.number(15).expect("stime"), 37);
        assert!(stat.number(40).is_err(), "past the end");
        assert!(stat.number(2).is_err(), "the name is not a number");
        assert!(Stat::parse("19339 cat R 1").is_err());
        assert_eq!(Stat::parse("1 (cat)").expect("parses").state(), "");
    }

    #[test]
    fn status_fields_by_name_in_kib_and_hexadecimal() {
        let status = Status::parse(
            "Name:\tpeer\nVmPeak:\t  900 kB\nVmHWM:\t    2012 kB\nVmRSS:\t    1500 kB\n\
             CapBnd:\t000001fffeffffff\n",
        );
        assert_eq!(status.field("Name"), Some("peer"));
        assert_eq!(status.kib("VmRSS").expect("VmRSS"), 1500);
        assert_eq!(status.kib("VmHWM").expect("VmHWM"), 2012);
        assert_eq!(status.hex("CapBnd").expect("CapBnd"), 0x1fffeffffff);
        assert!(status.kib("Name").is_err(), "not in kB");
        assert!(status.kib("VmSwap").is_err(), "no such line");
        assert!(status.hex("VmRSS").is_err(), "not hexadecimal");
        // A name is matched whole: `Vm` is not `VmRSS`.
        assert_eq!(status.field("Vm"), None);
    }

    #[test]
    fn a_child_is_running_then_gone_once_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        let stat = Stat::read(Process::Pid(pid)).expect("its stat");
        // Running, sleeping, or in an uninterruptible wait while it execs: anything but exited.
        assert!(!matches!(stat.state(), "Z" | "X" | ""), "{stat:?}");
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert!(Stat::read(Process::Pid(pid)).is_err(), "reaped");
    }
}
