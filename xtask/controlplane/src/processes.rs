//! The process helpers the control plane shares: starting a process into a log, stopping it by
//! PID, telling our own live processes from reused PIDs, and the `openssl` CLI.

use std::{
    fs,
    io::Write as _,
    net::TcpListener,
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use kinformer_procfs::{Process, Stat};

use crate::build::binary_dir;

/// Starts `command` with stdout and stderr in `log`; `again` appends to it (with a line saying
/// so) rather than starting it afresh.
pub(crate) fn spawn_logged(
    mut command: Command,
    log: &Path,
    detached: bool,
    again: bool,
) -> Result<Child, String> {
    let mut file = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(again)
        .truncate(!again)
        .open(log)
        .map_err(|err| format!("opening {}: {err}", log.display()))?;
    if again {
        writeln!(file, "\n=== started again ===")
            .map_err(|err| format!("writing {}: {err}", log.display()))?;
    }
    let err_file = file
        .try_clone()
        .map_err(|err| format!("opening {}: {err}", log.display()))?;
    command.stdin(Stdio::null()).stdout(file).stderr(err_file);
    if detached {
        command.process_group(0);
    }
    command
        .spawn()
        .map_err(|err| format!("starting {:?}: {err}", command.get_program()))
}

/// Stops those of `pids` that are still our binaries: TERM, then KILL after a grace period. It
/// reaps none of them (a caller reaps its own children).
pub(crate) fn stop_pids(pids: &[u32]) {
    let signal = |signal: &str| {
        for pid in pids.iter().filter(|pid| alive(**pid)) {
            let _ = Command::new("kill")
                .args([signal, &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    };
    signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && pids.iter().any(|pid| alive(*pid)) {
        thread::sleep(Duration::from_millis(100));
    }
    signal("-KILL");
}

/// Kills the watchdog's whole process group, so its `sleep` goes with it.
pub(crate) fn stop_watchdog(mut watchdog: Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", watchdog.id())])
        .stderr(Stdio::null())
        .status();
    let _ = watchdog.wait();
}

/// Three distinct free loopback ports (held open together so they differ).
pub(crate) fn free_ports() -> Result<[u16; 3], String> {
    let bind =
        || TcpListener::bind("127.0.0.1:0").map_err(|err| format!("finding a free port: {err}"));
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(|err| format!("finding a free port: {err}"))?
            .port();
    }
    Ok(ports)
}

pub(crate) fn random_hex(bytes: usize) -> Result<String, String> {
    let output = Command::new("openssl")
        .args(["rand", "-hex", &bytes.to_string()])
        .output()
        .map_err(|err| format!("running openssl rand: {err} (is the openssl CLI installed?)"))?;
    if !output.status.success() {
        return Err("openssl rand failed".to_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

pub(crate) fn openssl(args: &[&str], output: &Path) -> Result<(), String> {
    let mut command = Command::new("openssl");
    command.args(args).arg(output);
    run_quiet(command)
}

/// Runs `command`, echoing it first, and fails with its exit status: how the control plane and
/// xtask run the tools they build with.
pub fn run(mut command: Command) -> Result<(), String> {
    eprintln!("xtask: running {command:?}");
    let status = command
        .status()
        .map_err(|err| format!("could not start {command:?}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed with {status}"))
    }
}

pub(crate) fn run_quiet(mut command: Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|err| format!("running {command:?}: {err}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Adds the tails of the control plane's logs in `dir` to `err`, for a failure that explains
/// itself.
pub(crate) fn with_log_tails(err: String, dir: &Path) -> String {
    let mut message = err;
    for log in ["etcd.log", "kube-apiserver.log"] {
        if let Ok(text) = fs::read_to_string(dir.join(log)) {
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            message.push_str(&format!("\n--- last lines of {log} ---\n"));
            for line in tail.into_iter().rev() {
                message.push_str(line);
                message.push('\n');
            }
        }
    }
    message
}

/// Whether `pid` is one of our binaries, not a reused PID of something else.
pub(crate) fn alive(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        let binary_dir = binary_dir();
        let first = cmdline.split(|byte| *byte == 0).next().unwrap_or_default();
        Path::new(&*String::from_utf8_lossy(first)).starts_with(binary_dir)
    })
}

/// Whether `pid` has finished exiting (a zombie, or reaped), so its sockets are closed and
/// its port free. `alive` turns false earlier, once the memory map is gone.
pub(crate) fn exited(pid: u32) -> bool {
    Stat::read(Process::Pid(pid)).map_or(true, |stat| matches!(stat.state(), "Z" | "X"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_has_not_exited_and_a_reaped_one_has() {
        assert!(!exited(std::process::id()));
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = child.id();
        child.wait().expect("reap true");
        assert!(exited(pid));
    }
}
