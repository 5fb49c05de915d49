//! [`ControlPlane`]: a running etcd + kube-apiserver pair, either started by this handle (which
//! then owns it) or attached to through the state file in its folder.

use std::{
    fs,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use crate::{
    ApiServerOutage, Options, READY_TIMEOUT,
    apiserver::{ApiServerLaunch, kill_kube_apiserver},
    build::Binaries,
    etcd,
    processes::{alive, exited, free_ports, stop_pids, stop_watchdog, with_log_tails},
    state::{State, read_state, write_state},
};

/// A running etcd + kube-apiserver pair, described by the state file in its folder.
///
/// The handle that [`start`](Self::start)s a plane owns it: [`stop`](Self::stop) (or `Drop`)
/// stops its processes and removes a temporary folder. A handle from
/// [`attach`](Self::attach) owns nothing and stops nothing; it kills and starts kube-apiserver
/// ([`ApiServerOutage`]) for whichever process owns the plane.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    state: State,
    /// The processes this handle started and has not reaped yet.
    children: Vec<Child>,
    watchdog: Option<Child>,
    /// Stops the processes and removes `dir` when stopped or dropped: a temporary run.
    owned: bool,
    /// A kube-apiserver this handle starts gets a process group of its own and outlives it.
    detached: bool,
}

impl ControlPlane {
    /// Starts etcd then kube-apiserver in `dir`, and waits until the API answers.
    ///
    /// With `detached`, the processes get their own process group and no watchdog, so they
    /// outlive this process (`control-plane up`; see [`detach`](Self::detach)); otherwise they
    /// die with it, and `dir` is removed when they stop.
    ///
    /// # Errors
    ///
    /// When a process cannot be started or is not ready in time; the message carries the end
    /// of both logs.
    pub fn start(
        binaries: &Binaries,
        options: &Options,
        dir: &Path,
        detached: bool,
    ) -> Result<Self, String> {
        fs::create_dir_all(dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
        let [etcd_client, etcd_peer, secure_port] = free_ports()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let mut plane = Self {
            dir: dir.to_path_buf(),
            state: State {
                kubeconfig: dir.join("kubeconfig").display().to_string(),
                etcd_url: etcd_url.clone(),
                server: format!("https://127.0.0.1:{secure_port}"),
                watch_cache: !options.no_watch_cache,
                pids: Vec::new(),
                apiserver_pid: None,
                launch: None,
            },
            children: Vec::new(),
            watchdog: None,
            owned: true,
            detached,
        };
        if !detached {
            plane.start_watchdog()?;
        }

        let etcd = etcd::spawn(&binaries.etcd, dir, &etcd_url, etcd_peer, detached)?;
        plane.adopt(etcd, false)?;
        plane.wait_ready("etcd to report healthy", || etcd::healthy(&etcd_url))?;

        let launch = ApiServerLaunch::prepare(binaries, options, dir, &etcd_url, secure_port)?;
        plane.state.launch = Some(launch.clone());
        let apiserver = launch.spawn(detached, false)?;
        plane.adopt(apiserver, true)?;
        plane.wait_ready("kube-apiserver /readyz", || launch.ready())?;
        plane.wait_ready("the default namespace", || {
            launch.serves_default_namespace()
        })?;

        fs::write(plane.kubeconfig(), launch.kubeconfig())
            .map_err(|err| format!("writing the kubeconfig: {err}"))?;
        Ok(plane)
    }

    /// The control plane whose folder is `dir`, as its state file describes it now. The handle
    /// owns nothing: dropping it stops nothing.
    ///
    /// # Errors
    ///
    /// When `dir` holds no state file.
    pub fn attach(dir: &Path) -> Result<Self, String> {
        let state = read_state(dir).ok_or_else(|| {
            format!(
                "no control plane state in {}; is the control plane up?",
                dir.display()
            )
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            state,
            children: Vec::new(),
            watchdog: None,
            owned: false,
            detached: true,
        })
    }

    /// Leaves the processes running when this handle goes (`control-plane up`).
    pub fn detach(mut self) {
        self.owned = false;
    }

    /// The folder with the state file, kubeconfig, certificates, tokens and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The admin kubeconfig (`system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        Path::new(&self.state.kubeconfig)
    }

    /// `http://127.0.0.1:PORT` of etcd's client port (for [`compact_etcd`](crate::compact_etcd)).
    pub fn etcd_url(&self) -> &str {
        &self.state.etcd_url
    }

    /// kube-apiserver's `https://127.0.0.1:PORT`.
    pub fn server(&self) -> &str {
        &self.state.server
    }

    /// False when kube-apiserver runs with `--watch-cache=false`.
    pub fn watch_cache(&self) -> bool {
        self.state.watch_cache
    }

    /// The PIDs of the plane's processes, as its state file lists them.
    pub fn pids(&self) -> &[u32] {
        &self.state.pids
    }

    /// Whether kube-apiserver can be started again: the state file says how it was started.
    ///
    /// # Errors
    ///
    /// Why not: the plane was started by an older xtask, which did not record it.
    pub fn restartable(&self) -> Result<(), String> {
        match self.state.launch {
            Some(_) => Ok(()),
            None => Err(
                "the control plane that is up was started by an older xtask, which did not record \
                 how it started kube-apiserver; replace it with `cargo xtask control-plane down` \
                 and `up`"
                    .to_owned(),
            ),
        }
    }

    /// Stops the processes the state file lists (TERM, then KILL after a grace period), reaps
    /// those this handle started, and removes the folder of a temporary run. A handle that does
    /// not own the plane stops nothing.
    pub fn stop(&mut self) {
        if !self.owned {
            return;
        }
        self.refresh();
        // kube-apiserver first, so it does not log etcd's going.
        let mut pids = self.state.pids.clone();
        pids.sort_by_key(|pid| Some(*pid) != self.state.apiserver_pid);
        stop_pids(&pids);
        for mut child in self.children.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(watchdog) = self.watchdog.take() {
            stop_watchdog(watchdog);
        }
        if !self.detached {
            let _ = fs::remove_dir_all(&self.dir);
        }
        self.owned = false;
    }

    /// Rereads the state file: another process may have killed or started kube-apiserver.
    fn refresh(&mut self) {
        if let Some(state) = read_state(&self.dir) {
            self.state = state;
        }
        // A child another process killed is reaped here, so it never passes for a live one.
        self.children.retain_mut(|child| {
            self.state.pids.contains(&child.id()) || matches!(child.try_wait(), Ok(None))
        });
    }

    /// Records a process this handle started, in the state file too.
    fn adopt(&mut self, child: Child, apiserver: bool) -> Result<(), String> {
        let pid = child.id();
        self.children.push(child);
        if apiserver && let Some(old) = self.state.apiserver_pid.replace(pid) {
            self.state.pids.retain(|known| *known != old);
        }
        self.state.pids.push(pid);
        write_state(&self.dir, &self.state)
    }

    /// A `sh` loop in its own process group that, once this process is gone, stops whatever
    /// the state file lists then and removes the folder. It reads the file only at the end,
    /// so a kube-apiserver started later (by any process) is covered, and a killed one, which
    /// the file no longer lists, is never hit under a reused PID.
    fn start_watchdog(&mut self) -> Result<(), String> {
        // Polls for this process's death rather than trapping signals, so even SIGKILL is
        // covered.
        let script = format!(
            "while kill -0 {parent} 2>/dev/null; do sleep 1; done; \
             pids=$(sed -n 's/^pid=//p' '{state}' 2>/dev/null); \
             kill $pids 2>/dev/null; sleep 5; kill -9 $pids 2>/dev/null; rm -rf '{dir}'",
            parent = std::process::id(),
            state = self.dir.join("state").display(),
            dir = self.dir.display(),
        );
        let mut command = Command::new("sh");
        command
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group, so the Ctrl-C that kills this process does not kill it first.
            .process_group(0);
        self.watchdog = Some(
            command
                .spawn()
                .map_err(|err| format!("starting the watchdog: {err}"))?,
        );
        Ok(())
    }

    /// Polls `ready` until it holds, failing early (with the logs) if a process this handle
    /// started has exited.
    fn wait_ready(&mut self, what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if ready() {
                return Ok(());
            }
            let apiserver = self.state.apiserver_pid;
            let exited = self.children.iter_mut().find_map(|child| {
                let status = child.try_wait().ok().flatten()?;
                let name = if Some(child.id()) == apiserver {
                    "kube-apiserver"
                } else {
                    "etcd"
                };
                Some(format!("{name} exited with {status}"))
            });
            if let Some(exited) = exited {
                return Err(with_log_tails(
                    format!("{exited} while waiting for {what}"),
                    &self.dir,
                ));
            }
            thread::sleep(Duration::from_millis(250));
        }
        Err(with_log_tails(
            format!("timed out after {READY_TIMEOUT:?} waiting for {what}"),
            &self.dir,
        ))
    }
}

impl ApiServerOutage for ControlPlane {
    fn kill_apiserver(&mut self) -> Result<(), String> {
        self.refresh();
        let pid = self
            .state
            .apiserver_pid
            .filter(|pid| alive(*pid))
            .ok_or("kube-apiserver is not running")?;
        match self.children.iter().position(|child| child.id() == pid) {
            Some(index) => kill_kube_apiserver(&mut self.children.remove(index))?,
            None => {
                // Another process's child: that process (or init) reaps it; it is gone once
                // it is a zombie.
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                let deadline = Instant::now() + Duration::from_secs(10);
                while !exited(pid) {
                    if Instant::now() > deadline {
                        return Err(format!("kube-apiserver (PID {pid}) outlived SIGKILL"));
                    }
                    thread::sleep(Duration::from_millis(50));
                }
            }
        }
        self.state.pids.retain(|known| *known != pid);
        self.state.apiserver_pid = None;
        write_state(&self.dir, &self.state)
    }

    fn start_apiserver(&mut self) -> Result<(), String> {
        if !self.apiserver_down() {
            return Err("kube-apiserver is already running".to_owned());
        }
        self.restartable()?;
        let launch = self
            .state
            .launch
            .clone()
            .ok_or("the state file does not say how kube-apiserver was started")?;
        let child = launch.spawn(self.detached, true)?;
        self.adopt(child, true)?;
        self.wait_ready("kube-apiserver /readyz after a restart", || launch.ready())
    }

    fn apiserver_down(&mut self) -> bool {
        self.refresh();
        !self.state.apiserver_pid.is_some_and(alive)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}
