//! The host side of `cargo xtask kind-image`: the Debian packages the build needs, the runc
//! wrapper Docker needs where root lacks `CAP_SYS_RESOURCE`, and a running dockerd.

use std::{
    fs,
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use kinformer_procfs::{Process, Status};
use serde_json::{Value, json};

use super::{Go, cache_dir, go_build, present, run_captured};

/// Host packages the build needs, with the command that shows each is there.
const HOST_PACKAGES: &[(&str, &str)] = &[
    ("docker.io", "dockerd"),
    ("debootstrap", "debootstrap"),
    ("libseccomp-dev", "/usr/include/seccomp.h"),
];
const WRAPPER_RUNTIME: &str = "kinformer-runc";
const WRAPPER_PATH: &str = "/usr/local/bin/kinformer-runc";
const DAEMON_JSON: &str = "/etc/docker/daemon.json";
const DOCKER_LOG: &str = "/var/log/docker.log";
const DOCKERD_PID: &str = "/var/run/docker.pid";
/// How long dockerd may take to answer after a start or restart.
const DOCKER_TIMEOUT: Duration = Duration::from_secs(60);

/// What this host lacks for the build and for kind's nodes, found without changing anything;
/// [`HostPlan::apply`] makes exactly these changes, and only `kind-image --prepare-host` asks
/// for that.
pub(super) struct HostPlan {
    /// Debian packages to install.
    missing: Vec<&'static str>,
    /// Root lacks `CAP_SYS_RESOURCE` here: the runc wrapper must be installed (it is missing or
    /// differs from the one built into the cache) ...
    install_wrapper: bool,
    /// ... or registered as Docker's default runtime in `daemon.json`.
    register_wrapper: bool,
    /// No Docker engine answers `docker info`.
    start_docker: bool,
}

impl HostPlan {
    /// Looks at this host. Builds the runc wrapper into the cache where it is needed (that
    /// changes nothing outside the cache), to compare it with the installed one.
    pub(super) fn of_this_host() -> Result<Self, String> {
        let missing = HOST_PACKAGES
            .iter()
            .filter(|(package, probe)| {
                // An engine that already answers (Docker CE, Docker Desktop) is kept.
                !(present(probe) || (*package == "docker.io" && docker_answers()))
            })
            .map(|(package, _)| *package)
            .collect();
        let (mut install_wrapper, mut register_wrapper) = (false, false);
        if lacks_cap_sys_resource()? {
            let wanted = built_wrapper()?;
            install_wrapper = fs::read(WRAPPER_PATH).ok() != Some(wanted);
            let config = daemon_config()?;
            register_wrapper = with_wrapper(config.clone())? != config;
        }
        Ok(Self {
            missing,
            install_wrapper,
            register_wrapper,
            start_docker: !docker_answers(),
        })
    }

    /// Each change, as a sentence; none when the host is ready.
    pub(super) fn changes(&self) -> Vec<String> {
        let mut changes = Vec::new();
        if !self.missing.is_empty() {
            changes.push(format!(
                "install Debian packages (apt-get): {}",
                self.missing.join(" ")
            ));
        }
        if self.install_wrapper {
            changes.push(format!(
                "install {WRAPPER_PATH}, a runc wrapper that drops CAP_SYS_RESOURCE, which root \
                 lacks here, from every container's capabilities"
            ));
        }
        if self.register_wrapper {
            changes.push(format!(
                "make {WRAPPER_RUNTIME} Docker's default runtime in {DAEMON_JSON} (other \
                 settings kept), and restart a running dockerd to load it (stopping its \
                 containers)"
            ));
        }
        if self.start_docker && !self.register_wrapper {
            changes.push(format!("start dockerd (log: {DOCKER_LOG})"));
        } else if self.start_docker {
            changes.push(format!("start dockerd with it (log: {DOCKER_LOG})"));
        }
        changes
    }

    /// Makes the changes, printing each as it is made; returns what was done.
    pub(super) fn apply(&self) -> Result<Vec<String>, String> {
        let mut done = Vec::new();
        let mut note = |change: String| {
            eprintln!("xtask: host change: {change}");
            done.push(change);
        };
        if !self.missing.is_empty() {
            let mut update = Command::new("apt-get");
            update.args(["update", "-qq"]);
            run_captured(update)?;
            let mut install = Command::new("apt-get");
            install
                .args(["install", "-y", "-qq", "--no-install-recommends"])
                .args(&self.missing)
                .env("DEBIAN_FRONTEND", "noninteractive");
            run_captured(install)?;
            note(format!(
                "installed Debian packages: {}",
                self.missing.join(" ")
            ));
        }
        if self.install_wrapper {
            fs::copy(cache_dir().join("bin").join(WRAPPER_RUNTIME), WRAPPER_PATH)
                .map_err(|err| format!("installing {WRAPPER_PATH}: {err}"))?;
            note(format!(
                "installed {WRAPPER_PATH}, a runc wrapper that drops CAP_SYS_RESOURCE from every \
                 container's capabilities"
            ));
        }
        if self.register_wrapper {
            register_wrapper()?;
            note(format!(
                "registered {WRAPPER_RUNTIME} as Docker's default runtime in {DAEMON_JSON}"
            ));
        }
        if self.register_wrapper && docker_answers() {
            docker_service("restart")?;
            note(
                "restarted dockerd to load the runtime (its running containers were stopped)"
                    .into(),
            );
        } else if ensure_docker()? {
            note(format!("started dockerd (log: {DOCKER_LOG})"));
        }
        Ok(done)
    }
}

/// The runc wrapper, built into the cache if it is not there yet.
fn built_wrapper() -> Result<Vec<u8>, String> {
    let built = cache_dir().join("bin").join(WRAPPER_RUNTIME);
    if !built.is_file() {
        go_build(&Go::kind(WRAPPER_RUNTIME, "./cmd/kinformer-runc"), &built)?;
    }
    fs::read(&built).map_err(|err| format!("reading {}: {err}", built.display()))
}

/// Docker's `daemon.json`, or an empty object where there is none.
fn daemon_config() -> Result<Value, String> {
    match fs::read_to_string(DAEMON_JSON) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|err| format!("{DAEMON_JSON} is not valid JSON: {err}")),
        Err(_) => Ok(json!({})),
    }
}

pub(super) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// Whether this process's bounding set lacks `CAP_SYS_RESOURCE` (bit 24), so a privileged
/// container cannot be given it.
fn lacks_cap_sys_resource() -> Result<bool, String> {
    let bounding = Status::read(Process::This)
        .and_then(|status| status.hex("CapBnd"))
        .map_err(|err| format!("reading /proc/self/status: {err}"))?;
    Ok(bounding & (1 << 24) == 0)
}

/// Makes `kinformer-runc` Docker's default runtime, keeping every other setting of
/// `daemon.json`.
fn register_wrapper() -> Result<(), String> {
    let after = with_wrapper(daemon_config()?)?;
    fs::create_dir_all("/etc/docker").map_err(|err| format!("creating /etc/docker: {err}"))?;
    let text = serde_json::to_string_pretty(&after).map_err(|err| err.to_string())?;
    fs::write(DAEMON_JSON, text + "\n").map_err(|err| format!("writing {DAEMON_JSON}: {err}"))
}

fn with_wrapper(mut config: Value) -> Result<Value, String> {
    let object = config
        .as_object_mut()
        .ok_or(format!("{DAEMON_JSON} is not a JSON object"))?;
    let runtimes = object.entry("runtimes").or_insert_with(|| json!({}));
    let runtimes = runtimes
        .as_object_mut()
        .ok_or(format!("\"runtimes\" in {DAEMON_JSON} is not an object"))?;
    runtimes.insert(WRAPPER_RUNTIME.to_owned(), json!({ "path": WRAPPER_PATH }));
    object.insert("default-runtime".to_owned(), json!(WRAPPER_RUNTIME));
    Ok(config)
}

pub(crate) fn docker_answers() -> bool {
    Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Starts dockerd when it does not answer; returns whether it did.
fn ensure_docker() -> Result<bool, String> {
    if docker_answers() {
        return Ok(false);
    }
    if !present("dockerd") {
        return Err(
            "no Docker engine answers `docker info`, and dockerd is not installed; \
                    `cargo xtask kind-image --prepare-host` installs Debian's docker.io"
                .to_owned(),
        );
    }
    docker_service("start")?;
    Ok(true)
}

/// Starts or restarts dockerd, then waits until `docker info` answers. Under systemd through
/// `systemctl`; elsewhere xtask runs dockerd itself, in a process group of its own, logging to
/// `/var/log/docker.log`: Debian's init script raises rlimits first, which fails where root
/// lacks `CAP_SYS_RESOURCE`.
fn docker_service(action: &str) -> Result<(), String> {
    let mut spawned = None;
    if Path::new("/run/systemd/system").is_dir() {
        let mut command = Command::new("systemctl");
        command.args([action, "docker"]);
        run_captured(command)?;
    } else {
        // A dockerd still shutting down, or being restarted here, holds the PID file.
        stop_dockerd()?;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(DOCKER_LOG)
            .map_err(|err| format!("opening {DOCKER_LOG}: {err}"))?;
        let err_log = log
            .try_clone()
            .map_err(|err| format!("opening {DOCKER_LOG}: {err}"))?;
        eprintln!("xtask: starting dockerd (log: {DOCKER_LOG})");
        spawned = Some(
            Command::new("dockerd")
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err_log)
                .process_group(0)
                .spawn()
                .map_err(|err| format!("could not start dockerd: {err}"))?,
        );
    }
    let deadline = Instant::now() + DOCKER_TIMEOUT;
    while !docker_answers() {
        if let Some(status) = spawned
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten())
        {
            return Err(format!(
                "dockerd exited with {status} at start; the end of {DOCKER_LOG}:\n{}",
                log_tail()
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "dockerd did not answer `docker info` within {DOCKER_TIMEOUT:?} of a {action}; \
                 the end of {DOCKER_LOG}:\n{}",
                log_tail()
            ));
        }
        thread::sleep(Duration::from_millis(500));
    }
    // Left running on purpose, in its own process group: the engine outlives this task.
    drop(spawned);
    Ok(())
}

/// The last lines of dockerd's log, for an error that explains itself.
fn log_tail() -> String {
    let text = fs::read_to_string(DOCKER_LOG).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(15).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Stops the dockerd whose PID `/var/run/docker.pid` holds (if it still runs: one may be
/// shutting down already), waits until it has exited, and removes the file. A file naming
/// another process (a dockerd ended with the machine's session leaves it, and its PID may be
/// reused) is only removed: a new dockerd refuses to start while the PID it names is alive.
fn stop_dockerd() -> Result<(), String> {
    let Ok(pid) = fs::read_to_string(DOCKERD_PID) else {
        return Ok(());
    };
    let pid = pid.trim().to_owned();
    let is_dockerd = || {
        fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "dockerd")
    };
    if is_dockerd() {
        let mut kill = Command::new("kill");
        kill.args(["-TERM", &pid]);
        // It may have exited since: the wait below tells.
        let _ = run_captured(kill);
        let deadline = Instant::now() + DOCKER_TIMEOUT;
        while is_dockerd() {
            if Instant::now() > deadline {
                return Err(format!(
                    "dockerd (PID {pid}) did not stop within {DOCKER_TIMEOUT:?}"
                ));
            }
            thread::sleep(Duration::from_millis(200));
        }
    }
    match fs::remove_file(DOCKERD_PID) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(format!("removing {DOCKERD_PID}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_becomes_the_default_runtime_and_other_settings_stay() {
        let before = json!({"log-level": "warn", "runtimes": {"crun": {"path": "/usr/bin/crun"}}});
        let after = with_wrapper(before).expect("an object");
        assert_eq!(after["default-runtime"], WRAPPER_RUNTIME);
        assert_eq!(after["runtimes"][WRAPPER_RUNTIME]["path"], WRAPPER_PATH);
        assert_eq!(after["runtimes"]["crun"]["path"], "/usr/bin/crun");
        assert_eq!(after["log-level"], "warn");
        assert_eq!(with_wrapper(after.clone()).expect("an object"), after);
        assert!(with_wrapper(json!([])).is_err());
    }

    #[test]
    fn the_plan_names_every_change_it_would_make_and_none_for_a_ready_host() {
        let ready = HostPlan {
            missing: Vec::new(),
            install_wrapper: false,
            register_wrapper: false,
            start_docker: false,
        };
        assert!(ready.changes().is_empty());
        let bare = HostPlan {
            missing: vec!["docker.io", "debootstrap"],
            install_wrapper: true,
            register_wrapper: true,
            start_docker: true,
        };
        let changes = bare.changes();
        assert_eq!(changes.len(), 4, "{changes:#?}");
        assert!(changes[0].contains("docker.io debootstrap"));
        assert!(changes[1].contains(WRAPPER_PATH));
        assert!(changes[2].contains(DAEMON_JSON) && changes[2].contains("restart"));
        assert!(changes[3].starts_with("start dockerd"));
    }
}
