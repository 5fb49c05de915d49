//! `control-plane up` and what it leaves behind: the processes detached, and a state file with
//! their PIDs, URLs and how kube-apiserver was started, read by `down`, `env`,
//! `restart-apiserver` and by `e2e --local` when it reuses the plane that is up.

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command},
    thread,
    time::{Duration, Instant},
};

use super::{
    Options, READY_TIMEOUT,
    apiserver::{ApiServerLaunch, ApiServerOutage, kill_kube_apiserver},
    build::{ensure_binaries, state_dir},
    plane::{ControlPlane, Endpoint},
    processes::{alive, exited, with_log_tails},
};

pub(super) fn up(options: &Options) -> Result<(), String> {
    let dir = state_dir();
    if let Some(state) = read_state(&dir) {
        if state.pids.iter().all(|pid| alive(*pid)) {
            eprintln!(
                "xtask: a control plane is already up; `cargo xtask control-plane env` prints its settings"
            );
            return print_env();
        }
        down()?;
    }
    let binaries = ensure_binaries()?;
    let _ = fs::remove_dir_all(&dir);
    let started = Instant::now();
    let plane = ControlPlane::start(&binaries, options, &dir, true)?;
    let (kubeconfig, etcd_url, server) = (
        plane.kubeconfig.display().to_string(),
        plane.etcd_url.clone(),
        plane.server.clone(),
    );
    let (pids, apiserver_pid, launch) = plane.detach();
    let state = State {
        kubeconfig,
        etcd_url,
        server,
        watch_cache: !options.no_watch_cache,
        pids: pids.clone(),
        apiserver_pid,
        launch,
    };
    write_state(&dir, &state)?;
    eprintln!(
        "xtask: control plane up in {:.1?} (PIDs {pids:?}); stop it with `cargo xtask control-plane down`",
        started.elapsed()
    );
    print_env()
}

/// What `control-plane up` leaves for `down`, `env`, `restart-apiserver` and `e2e --local`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    kubeconfig: String,
    etcd_url: String,
    server: String,
    watch_cache: bool,
    pids: Vec<u32>,
    /// Which of `pids` is kube-apiserver (absent in state files of an older xtask).
    apiserver_pid: Option<u32>,
    launch: Option<ApiServerLaunch>,
}

impl State {
    fn render(&self) -> String {
        let mut text = format!(
            "kubeconfig={}\netcd_url={}\nserver={}\nwatch_cache={}\n",
            self.kubeconfig, self.etcd_url, self.server, self.watch_cache
        );
        for pid in &self.pids {
            text.push_str(&format!("pid={pid}\n"));
        }
        if let Some(pid) = self.apiserver_pid {
            text.push_str(&format!("apiserver_pid={pid}\n"));
        }
        if let Some(launch) = &self.launch {
            text.push_str(&launch.state_lines());
        }
        text
    }
}

fn write_state(dir: &Path, state: &State) -> Result<(), String> {
    // Written aside and renamed, so a reader never sees half a state file.
    let partial = dir.join("state.partial");
    fs::write(&partial, state.render())
        .and_then(|()| fs::rename(&partial, dir.join("state")))
        .map_err(|err| format!("writing the state file: {err}"))
}

fn read_state(dir: &Path) -> Option<State> {
    let text = fs::read_to_string(dir.join("state")).ok()?;
    let mut state = State {
        kubeconfig: String::new(),
        etcd_url: String::new(),
        server: String::new(),
        watch_cache: true,
        pids: Vec::new(),
        apiserver_pid: None,
        launch: None,
    };
    let (mut binary, mut log, mut token, mut args) = (None, None, None, Vec::new());
    for line in text.lines() {
        match line.split_once('=') {
            Some(("kubeconfig", value)) => state.kubeconfig = value.to_owned(),
            Some(("etcd_url", value)) => state.etcd_url = value.to_owned(),
            Some(("server", value)) => state.server = value.to_owned(),
            Some(("watch_cache", value)) => state.watch_cache = value != "false",
            Some(("pid", value)) => state.pids.extend(value.parse::<u32>().ok()),
            Some(("apiserver_pid", value)) => state.apiserver_pid = value.parse().ok(),
            Some(("apiserver_binary", value)) => binary = Some(PathBuf::from(value)),
            Some(("apiserver_log", value)) => log = Some(PathBuf::from(value)),
            Some(("token", value)) => token = Some(value.to_owned()),
            Some(("apiserver_arg", value)) => args.push(value.to_owned()),
            _ => {}
        }
    }
    if let (Some(binary), Some(log), Some(token)) = (binary, log, token) {
        state.launch = Some(ApiServerLaunch {
            binary,
            args,
            log,
            server: state.server.clone(),
            token,
        });
    }
    Some(state)
}

/// The control plane `control-plane up` left running, as its state file describes it: what
/// `control-plane restart-apiserver`, and `e2e --local` when it reuses that plane, restart.
#[derive(Debug)]
pub(crate) struct Detached {
    dir: PathBuf,
    state: State,
    /// The kube-apiserver this process started, reaped when it is killed again.
    spawned: Option<Child>,
}

impl Detached {
    /// The control plane that is up, if its kube-apiserver can be restarted.
    pub(crate) fn load() -> Result<Self, String> {
        let dir = state_dir();
        let state = read_state(&dir)
            .ok_or("no control plane is up; start one with `cargo xtask control-plane up`")?;
        if state.launch.is_none() || state.apiserver_pid.is_none() {
            return Err(
                "the control plane that is up was started by an older xtask, which did not record \
                 how it started kube-apiserver; replace it with `cargo xtask control-plane down` \
                 and `up`"
                    .to_owned(),
            );
        }
        Ok(Self {
            dir,
            state,
            spawned: None,
        })
    }
}

impl ApiServerOutage for Detached {
    fn kill_apiserver(&mut self) -> Result<(), String> {
        let pid = self
            .state
            .apiserver_pid
            .filter(|pid| alive(*pid))
            .ok_or("kube-apiserver is not running")?;
        match self.spawned.take() {
            Some(mut child) if child.id() == pid => kill_kube_apiserver(&mut child)?,
            _ => {
                // Another process's child (the `up` that started it is gone): init reaps it.
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
        Ok(())
    }

    fn start_apiserver(&mut self) -> Result<(), String> {
        if !self.apiserver_down() {
            return Err("kube-apiserver is already running".to_owned());
        }
        let launch = self
            .state
            .launch
            .clone()
            .ok_or("the state file does not say how kube-apiserver was started")?;
        let mut child = launch.spawn(true, true)?;
        let pid = child.id();
        if let Some(old) = self.state.apiserver_pid.replace(pid) {
            self.state.pids.retain(|known| *known != old);
        }
        self.state.pids.push(pid);
        let recorded = write_state(&self.dir, &self.state);
        let deadline = Instant::now() + READY_TIMEOUT;
        let outcome = loop {
            if launch.ready() {
                break Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                break Err(with_log_tails(
                    format!("kube-apiserver exited with {status} after a restart"),
                    &self.dir,
                ));
            }
            if Instant::now() > deadline {
                break Err(with_log_tails(
                    format!(
                        "timed out after {READY_TIMEOUT:?} waiting for kube-apiserver /readyz after a restart"
                    ),
                    &self.dir,
                ));
            }
            thread::sleep(Duration::from_millis(250));
        };
        self.spawned = Some(child);
        recorded.and(outcome)
    }

    fn apiserver_down(&mut self) -> bool {
        !self.state.apiserver_pid.is_some_and(alive)
    }
}

/// `cargo xtask control-plane restart-apiserver`: SIGKILL kube-apiserver of the plane that is
/// up (if it still runs) and start it again with the same flags.
pub(super) fn restart_detached() -> Result<(), String> {
    let mut plane = Detached::load()?;
    let started = Instant::now();
    if !plane.apiserver_down() {
        plane.kill_apiserver()?;
    }
    plane.start_apiserver()?;
    eprintln!(
        "xtask: kube-apiserver killed and ready again in {:.1?}",
        started.elapsed()
    );
    Ok(())
}

pub(super) fn down() -> Result<(), String> {
    let dir = state_dir();
    let Some(state) = read_state(&dir) else {
        eprintln!("xtask: no control plane is up");
        return Ok(());
    };
    for pid in &state.pids {
        if alive(*pid) {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && state.pids.iter().any(|pid| alive(*pid)) {
        thread::sleep(Duration::from_millis(100));
    }
    for pid in &state.pids {
        if alive(*pid) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
    fs::remove_dir_all(&dir).map_err(|err| format!("removing {}: {err}", dir.display()))?;
    eprintln!("xtask: control plane down");
    Ok(())
}

#[allow(
    clippy::print_stdout,
    reason = "the environment is this command's output"
)]
pub(super) fn print_env() -> Result<(), String> {
    let state = read_state(&state_dir())
        .ok_or("no control plane is up; start one with `cargo xtask control-plane up`")?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "export KUBECONFIG={kubeconfig}\nexport KINFORMER_E2E_BACKEND=local\n\
         export KINFORMER_E2E_KUBECONFIG={kubeconfig}\nexport KINFORMER_E2E_ETCD_URL={etcd}\n\
         export KINFORMER_E2E_WATCH_CACHE={watch_cache}",
        kubeconfig = state.kubeconfig,
        etcd = state.etcd_url,
        watch_cache = state.watch_cache
    )
    .map_err(|err| format!("writing to stdout: {err}"))
}

/// The settings of a running `control-plane up`, when there is one (the e2e task reuses it).
pub(crate) fn running() -> Option<Endpoint> {
    let state = read_state(&state_dir())?;
    (!state.pids.is_empty() && state.pids.iter().all(|pid| alive(*pid))).then(|| Endpoint {
        kubeconfig: PathBuf::from(state.kubeconfig),
        etcd_url: state.etcd_url,
        watch_cache: state.watch_cache,
    })
}

#[cfg(test)]
mod tests {
    use std::env;

    use super::*;

    #[test]
    fn the_state_file_round_trips_pids_urls_and_the_watch_cache_setting() {
        let dir = env::temp_dir().join(format!("kinformer-state-test-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        fs::write(
            dir.join("state"),
            "kubeconfig=/k\netcd_url=http://127.0.0.1:2379\nserver=https://127.0.0.1:6443\n\
             watch_cache=false\npid=12\npid=34\n",
        )
        .expect("write state");
        let state = read_state(&dir).expect("state parses");
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(state.kubeconfig, "/k");
        assert_eq!(state.etcd_url, "http://127.0.0.1:2379");
        assert!(!state.watch_cache);
        assert_eq!(state.pids, vec![12, 34]);
    }

    #[test]
    fn the_state_file_keeps_how_kube_apiserver_was_started_for_a_restart() {
        let dir = env::temp_dir().join(format!("kinformer-launch-test-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        let state = State {
            kubeconfig: "/run/kubeconfig".to_owned(),
            etcd_url: "http://127.0.0.1:2379".to_owned(),
            server: "https://127.0.0.1:6443".to_owned(),
            watch_cache: true,
            pids: vec![12, 34],
            apiserver_pid: Some(34),
            launch: Some(ApiServerLaunch {
                binary: PathBuf::from("/cache/kube-apiserver"),
                args: vec![
                    "--secure-port=6443".to_owned(),
                    "--cert-dir=/run/certs".to_owned(),
                    "--watch-cache-sizes=secrets#0".to_owned(),
                ],
                log: PathBuf::from("/run/kube-apiserver.log"),
                server: "https://127.0.0.1:6443".to_owned(),
                token: "abc".to_owned(),
            }),
        };
        write_state(&dir, &state).expect("write state");
        let read = read_state(&dir).expect("state parses");
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(read, state);
    }
}
