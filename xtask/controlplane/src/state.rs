//! The state file in a control plane's folder: its URLs, the PIDs of its processes (which of
//! them is kube-apiserver) and how kube-apiserver was started. It is what lets any process
//! attach to the plane, and whoever kills or starts kube-apiserver rewrites it, so that it
//! always lists the processes that run now (the teardown and the watchdog stop those).

use std::{
    fs,
    path::{Path, PathBuf},
};

use crate::apiserver::ApiServerLaunch;

/// What a control plane's state file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) kubeconfig: String,
    pub(crate) etcd_url: String,
    pub(crate) server: String,
    pub(crate) watch_cache: bool,
    pub(crate) pids: Vec<u32>,
    /// Which of `pids` is kube-apiserver; none while it is down.
    pub(crate) apiserver_pid: Option<u32>,
    /// How kube-apiserver was started (absent in state files of an older xtask).
    pub(crate) launch: Option<ApiServerLaunch>,
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

/// Writes `dir/state`.
pub(crate) fn write_state(dir: &Path, state: &State) -> Result<(), String> {
    // Written aside and renamed, so a reader never sees half a state file.
    let partial = dir.join("state.partial");
    fs::write(&partial, state.render())
        .and_then(|()| fs::rename(&partial, dir.join("state")))
        .map_err(|err| format!("writing the state file: {err}"))
}

/// Reads `dir/state`, if there is one.
pub(crate) fn read_state(dir: &Path) -> Option<State> {
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
