//! [`ControlPlane`]: etcd and kube-apiserver started for one run, stopped by PID when it is
//! dropped, and by a small `sh` watchdog if xtask itself dies first.

use std::{
    fs,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use super::{
    Options, READY_TIMEOUT,
    apiserver::{ApiServerLaunch, ApiServerOutage, kill_kube_apiserver},
    build::Binaries,
    etcd,
    processes::{free_ports, stop_child, stop_watchdog, with_log_tails},
};

/// A running etcd + kube-apiserver pair.
#[derive(Debug)]
pub(crate) struct ControlPlane {
    etcd: Option<Child>,
    /// `None` before start, after [`ApiServerOutage::kill_apiserver`] and after stop.
    kube_apiserver: Option<Child>,
    /// How kube-apiserver was started, to start it again the same way.
    launch: Option<ApiServerLaunch>,
    watchdog: Option<Child>,
    /// The folder with the kubeconfig, certificates, tokens and logs.
    pub(crate) dir: PathBuf,
    /// The admin kubeconfig (`system:masters`).
    pub(crate) kubeconfig: PathBuf,
    /// `http://127.0.0.1:PORT` of etcd's client port (the suite compacts through it).
    pub(crate) etcd_url: String,
    /// `https://127.0.0.1:PORT`.
    pub(crate) server: String,
    /// Its processes have their own process group and no watchdog (`up`).
    detached: bool,
    /// Removes `dir` at teardown (a temporary run), or keeps it (`up`).
    remove_dir: bool,
}

impl ControlPlane {
    /// Starts etcd then kube-apiserver in `dir`, and waits until the API answers.
    ///
    /// With `detached`, the processes get their own process group and no watchdog, so they
    /// outlive xtask (`control-plane up`); otherwise they die with it.
    pub(crate) fn start(
        binaries: &Binaries,
        options: &Options,
        dir: &Path,
        detached: bool,
    ) -> Result<Self, String> {
        fs::create_dir_all(dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
        let [etcd_client, etcd_peer, secure_port] = free_ports()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let mut plane = Self {
            etcd: None,
            kube_apiserver: None,
            launch: None,
            watchdog: None,
            dir: dir.to_path_buf(),
            kubeconfig: dir.join("kubeconfig"),
            etcd_url: etcd_url.clone(),
            server: format!("https://127.0.0.1:{secure_port}"),
            detached,
            remove_dir: !detached,
        };

        plane.etcd = Some(etcd::spawn(
            &binaries.etcd,
            dir,
            &etcd_url,
            etcd_peer,
            detached,
        )?);
        plane.rearm_watchdog()?;
        plane.wait_ready("etcd to report healthy", || etcd::healthy(&etcd_url))?;

        let launch = ApiServerLaunch::prepare(binaries, options, dir, &etcd_url, secure_port)?;
        plane.kube_apiserver = Some(launch.spawn(detached, false)?);
        plane.launch = Some(launch.clone());
        plane.rearm_watchdog()?;
        plane.wait_ready("kube-apiserver /readyz", || launch.ready())?;
        plane.wait_ready("the default namespace", || {
            launch.serves_default_namespace()
        })?;

        fs::write(&plane.kubeconfig, launch.kubeconfig())
            .map_err(|err| format!("writing the kubeconfig: {err}"))?;
        Ok(plane)
    }

    /// Stops both processes (TERM, then KILL after a grace period) and removes a temporary dir.
    pub(crate) fn stop(&mut self) {
        for child in [self.kube_apiserver.take(), self.etcd.take()]
            .into_iter()
            .flatten()
        {
            stop_child(child);
        }
        if let Some(watchdog) = self.watchdog.take() {
            stop_watchdog(watchdog);
        }
        if self.remove_dir {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    /// The PIDs still owned by this handle.
    fn pids(&self) -> Vec<u32> {
        [&self.etcd, &self.kube_apiserver]
            .into_iter()
            .flatten()
            .map(Child::id)
            .collect()
    }

    fn start_watchdog(&mut self) -> Result<(), String> {
        let pids = self
            .pids()
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        // Polls for xtask's death rather than trapping signals, so even SIGKILL is covered.
        let script = format!(
            "while kill -0 {parent} 2>/dev/null; do sleep 1; done; \
             kill {pids} 2>/dev/null; sleep 5; kill -9 {pids} 2>/dev/null; {cleanup}",
            parent = std::process::id(),
            cleanup = if self.remove_dir {
                format!("rm -rf '{}'", self.dir.display())
            } else {
                String::new()
            }
        );
        let mut command = Command::new("sh");
        command
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group, so the Ctrl-C that kills xtask does not kill the watchdog first.
            .process_group(0);
        self.watchdog = Some(
            command
                .spawn()
                .map_err(|err| format!("starting the watchdog: {err}"))?,
        );
        Ok(())
    }

    /// Points the watchdog at the processes running now. The new watchdog starts before the
    /// old one is stopped, so there is no moment in which xtask could die unwatched; and a
    /// killed kube-apiserver's PID is dropped from it, so a reused PID is never hit.
    fn rearm_watchdog(&mut self) -> Result<(), String> {
        if self.detached {
            return Ok(());
        }
        let old = self.watchdog.take();
        let started = self.start_watchdog();
        if let Some(old) = old {
            stop_watchdog(old);
        }
        started
    }

    /// Polls `ready` until it holds, failing early (with the logs) if a process has exited.
    fn wait_ready(&mut self, what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if ready() {
                return Ok(());
            }
            let exited = [
                ("etcd", &mut self.etcd),
                ("kube-apiserver", &mut self.kube_apiserver),
            ]
            .into_iter()
            .find_map(|(name, child)| match child.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => Some(format!("{name} exited with {status}")),
                _ => None,
            });
            if let Some(exited) = exited {
                return Err(self.failure(format!("{exited} while waiting for {what}")));
            }
            thread::sleep(Duration::from_millis(250));
        }
        Err(self.failure(format!(
            "timed out after {READY_TIMEOUT:?} waiting for {what}"
        )))
    }

    /// Adds the log tails to a startup error, for a failure that explains itself.
    fn failure(&self, err: String) -> String {
        with_log_tails(err, &self.dir)
    }

    /// Hands the processes over to whoever reads the state file (`control-plane up`), with
    /// what it takes to restart kube-apiserver.
    pub(super) fn detach(mut self) -> (Vec<u32>, Option<u32>, Option<ApiServerLaunch>) {
        let pids = self.pids();
        let apiserver_pid = self.kube_apiserver.as_ref().map(Child::id);
        self.etcd = None;
        self.kube_apiserver = None;
        self.remove_dir = false;
        (pids, apiserver_pid, self.launch.take())
    }
}

impl ApiServerOutage for ControlPlane {
    fn kill_apiserver(&mut self) -> Result<(), String> {
        let mut child = self
            .kube_apiserver
            .take()
            .ok_or("kube-apiserver is not running")?;
        kill_kube_apiserver(&mut child)?;
        self.rearm_watchdog()
    }

    fn start_apiserver(&mut self) -> Result<(), String> {
        if self.kube_apiserver.is_some() {
            return Err("kube-apiserver is already running".to_owned());
        }
        let launch = self
            .launch
            .clone()
            .ok_or("this control plane never started kube-apiserver")?;
        self.kube_apiserver = Some(launch.spawn(self.detached, true)?);
        self.rearm_watchdog()?;
        self.wait_ready("kube-apiserver /readyz after a restart", || launch.ready())
    }

    fn apiserver_down(&mut self) -> bool {
        self.kube_apiserver.is_none()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the suite needs to reach a local control plane.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The admin kubeconfig.
    pub(crate) kubeconfig: PathBuf,
    /// etcd's client URL, for forcing a compaction.
    pub(crate) etcd_url: String,
    /// False when kube-apiserver runs with `--watch-cache=false`.
    pub(crate) watch_cache: bool,
}

impl ControlPlane {
    /// The settings the suite needs; `options` are the ones this plane was started with.
    pub(crate) fn endpoint(&self, options: &Options) -> Endpoint {
        Endpoint {
            kubeconfig: self.kubeconfig.clone(),
            etcd_url: self.etcd_url.clone(),
            watch_cache: !options.no_watch_cache,
        }
    }
}
