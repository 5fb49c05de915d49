//! A real kube-apiserver and etcd on 127.0.0.1: `cargo xtask control-plane up|down|env|build`,
//! and the control plane `cargo xtask e2e --local` runs the suite against.
//!
//! Both binaries are built from the Go module in `xtask/controlplane` (kube-apiserver from
//! k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3 at the version k8s.io/apiserver
//! requires) and cached under `~/.cache/kinformer/controlplane/<kubernetes version>`, so only
//! the first run pays for the Go build. Starting them takes a few seconds: etcd on free loopback
//! ports with a temporary data dir and no fsync, then kube-apiserver bound to and advertising
//! 127.0.0.1 with a self-signed serving certificate, a bearer token in `system:masters`, RBAC,
//! and a service-account key pair made with the `openssl` CLI (so TokenRequest works).
//!
//! Teardown is by PID: [`ControlPlane`]'s `Drop` stops both processes, and a small `sh` watchdog
//! in its own process group stops them too if xtask itself dies (Ctrl-C, SIGTERM, SIGKILL),
//! so a run leaves no process behind. `control-plane up` instead detaches them and records their
//! PIDs in a state file for `control-plane down`.

#![allow(clippy::print_stderr, reason = "xtask reports its progress on stderr")]

use std::{
    env, fs,
    io::Write as _,
    net::TcpListener,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use crate::project_root;

/// The Kubernetes release the binaries are built from; `xtask/controlplane/go.mod` pins it.
pub(crate) const KUBERNETES_VERSION: &str = "v1.37.2";
/// The etcd server release k8s.io/apiserver v0.37.2 requires (its go.mod), pinned the same way.
pub(crate) const ETCD_VERSION: &str = "v3.7.0";

/// How long a started control plane may take to answer `/readyz` and create `default`.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Knobs for kube-apiserver that the suite's tests care about.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// `--etcd-compaction-interval` (kube-apiserver's default is 5m; `0` turns it off).
    pub(crate) etcd_compaction_interval: Option<String>,
    /// `--watch-cache=false`: every watch and list is served by etcd directly.
    pub(crate) no_watch_cache: bool,
}

impl Options {
    /// Consumes the control-plane flags from `args`, returning the ones it does not know.
    pub(crate) fn parse(args: &[String]) -> Result<(Self, Vec<String>), String> {
        let mut options = Self::default();
        let mut rest = Vec::new();
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if let Some(value) = arg.strip_prefix("--etcd-compaction-interval=") {
                options.etcd_compaction_interval = Some(value.to_owned());
            } else if arg == "--etcd-compaction-interval" {
                let value = iter
                    .next()
                    .ok_or("--etcd-compaction-interval needs a duration, e.g. 10s")?;
                options.etcd_compaction_interval = Some(value.clone());
            } else if arg == "--no-watch-cache" || arg == "--watch-cache=false" {
                options.no_watch_cache = true;
            } else {
                rest.push(arg.clone());
            }
        }
        Ok((options, rest))
    }
}

/// Runs `cargo xtask control-plane <up|down|env|build>`.
pub(crate) fn control_plane(args: &[String]) -> Result<(), String> {
    let (options, rest) = Options::parse(args)?;
    match rest.first().map(String::as_str) {
        Some("up") => up(&options),
        Some("down") => down(),
        Some("env") => print_env(),
        Some("build") => ensure_binaries().map(|_| ()),
        Some(other) => Err(format!(
            "unknown control-plane command {other:?}; expected up, down, env or build"
        )),
        None => Err(
            "usage: cargo xtask control-plane up [--no-watch-cache] [--etcd-compaction-interval D] | down | env | build"
                .to_owned(),
        ),
    }
}

/// Paths of the two cached binaries.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    etcd: PathBuf,
    kube_apiserver: PathBuf,
}

/// `$KINFORMER_CACHE_DIR`, else `$XDG_CACHE_HOME/kinformer`, else `~/.cache/kinformer`.
fn cache_root() -> PathBuf {
    if let Some(dir) = env::var_os("KINFORMER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("kinformer");
    }
    env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cache"))
        .unwrap_or_else(env::temp_dir)
        .join("kinformer")
}

/// The folder holding the binaries for [`KUBERNETES_VERSION`].
pub(crate) fn binary_dir() -> PathBuf {
    cache_root().join("controlplane").join(KUBERNETES_VERSION)
}

/// Where `control-plane up` keeps its state (PIDs, kubeconfig, logs).
fn state_dir() -> PathBuf {
    cache_root().join("controlplane").join("run")
}

/// Builds kube-apiserver and etcd into the cache unless both are already there.
pub(crate) fn ensure_binaries() -> Result<Binaries, String> {
    let dir = binary_dir();
    let binaries = Binaries {
        etcd: dir.join("etcd"),
        kube_apiserver: dir.join("kube-apiserver"),
    };
    if binaries.etcd.is_file() && binaries.kube_apiserver.is_file() {
        return Ok(binaries);
    }
    let module = project_root().join("xtask").join("controlplane");
    // Build into a fresh folder and rename, so an interrupted build never looks cached.
    let staging = dir.with_file_name(format!(
        "{KUBERNETES_VERSION}.partial-{}",
        std::process::id()
    ));
    fs::create_dir_all(&staging).map_err(|err| format!("creating {}: {err}", staging.display()))?;
    let started = Instant::now();
    eprintln!(
        "xtask: building kube-apiserver {KUBERNETES_VERSION} and etcd {ETCD_VERSION} (first run only; many minutes)"
    );
    go_build(&module, &staging.join("etcd"), "./cmd/etcd", &[])?;
    let version_flags = kube_version_ldflags();
    go_build(
        &module,
        &staging.join("kube-apiserver"),
        "k8s.io/kubernetes/cmd/kube-apiserver",
        &version_flags,
    )?;
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|err| format!("clearing {}: {err}", dir.display()))?;
    }
    fs::rename(&staging, &dir)
        .map_err(|err| format!("moving the build into {}: {err}", dir.display()))?;
    eprintln!(
        "xtask: built the control plane in {:.0?} into {}",
        started.elapsed(),
        dir.display()
    );
    Ok(binaries)
}

/// `-X` flags that make `/version` report the real release instead of `v0.0.0-master`.
fn kube_version_ldflags() -> Vec<String> {
    let trimmed = KUBERNETES_VERSION.trim_start_matches('v');
    let mut parts = trimmed.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    let package = "k8s.io/component-base/version";
    vec![
        format!("-X {package}.gitVersion={KUBERNETES_VERSION}"),
        format!("-X {package}.gitMajor={major}"),
        format!("-X {package}.gitMinor={minor}"),
        format!("-X {package}.gitTreeState=clean"),
    ]
}

fn go_build(module: &Path, output: &Path, package: &str, ldflags: &[String]) -> Result<(), String> {
    // nice: the build takes minutes of both cores; whatever else runs should keep going.
    let mut command = Command::new("nice");
    command
        .args(["-n", "19", "go", "build", "-trimpath"])
        .arg(format!("-ldflags={}", ldflags.join(" ")))
        .arg("-o")
        .arg(output)
        .arg(package)
        .current_dir(module)
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0");
    crate::run(command)
        .map_err(|err| format!("{err} (is Go 1.26 installed and the Go module proxy reachable?)"))
}

/// A running etcd + kube-apiserver pair.
#[derive(Debug)]
pub(crate) struct ControlPlane {
    etcd: Option<Child>,
    kube_apiserver: Option<Child>,
    watchdog: Option<Child>,
    /// The folder with the kubeconfig, certificates, tokens and logs.
    pub(crate) dir: PathBuf,
    /// The admin kubeconfig (`system:masters`).
    pub(crate) kubeconfig: PathBuf,
    /// `http://127.0.0.1:PORT` of etcd's client port (the suite compacts through it).
    pub(crate) etcd_url: String,
    /// `https://127.0.0.1:PORT`.
    pub(crate) server: String,
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
        let server = format!("https://127.0.0.1:{secure_port}");
        let mut plane = Self {
            etcd: None,
            kube_apiserver: None,
            watchdog: None,
            dir: dir.to_path_buf(),
            kubeconfig: dir.join("kubeconfig"),
            etcd_url: etcd_url.clone(),
            server: server.clone(),
            remove_dir: !detached,
        };

        let mut etcd = Command::new(&binaries.etcd);
        etcd.arg("--name=kinformer")
            .arg(format!("--data-dir={}", dir.join("etcd-data").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"
            ))
            .arg(format!(
                "--initial-cluster=kinformer=http://127.0.0.1:{etcd_peer}"
            ))
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        plane.etcd = Some(spawn_logged(etcd, &dir.join("etcd.log"), detached)?);
        if !detached {
            plane.start_watchdog()?;
        }
        plane.wait_ready("etcd to report healthy", || {
            curl(&["-sf", &format!("{etcd_url}/health")]).is_some_and(|body| body.contains("true"))
        })?;

        let token = random_hex(16)?;
        fs::write(
            dir.join("tokens.csv"),
            format!("{token},kinformer-admin,kinformer-admin,\"system:masters\"\n"),
        )
        .map_err(|err| format!("writing the token file: {err}"))?;
        let sa_key = dir.join("sa.key");
        let sa_pub = dir.join("sa.pub");
        openssl(
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
            ],
            &sa_key,
        )?;
        let mut public = Command::new("openssl");
        public
            .arg("pkey")
            .arg("-in")
            .arg(&sa_key)
            .arg("-pubout")
            .arg("-out")
            .arg(&sa_pub);
        run_quiet(public)?;

        let cert_dir = dir.join("certs");
        let mut apiserver = Command::new(&binaries.kube_apiserver);
        apiserver
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg("--bind-address=127.0.0.1")
            // Without it kube-apiserver advertises a host interface, and the `kubernetes`
            // endpoints and its own loopback client would point off the machine.
            .arg("--advertise-address=127.0.0.1")
            // The endpoint reconciler refuses a loopback address, and nothing here needs the
            // `kubernetes` Service's endpoints.
            .arg("--endpoint-reconciler-type=none")
            .arg(format!("--secure-port={secure_port}"))
            .arg(format!("--cert-dir={}", cert_dir.display()))
            .arg(format!(
                "--token-auth-file={}",
                dir.join("tokens.csv").display()
            ))
            .arg("--authorization-mode=RBAC")
            .arg("--service-cluster-ip-range=10.96.0.0/24")
            .arg(format!("--service-account-key-file={}", sa_pub.display()))
            .arg(format!(
                "--service-account-signing-key-file={}",
                sa_key.display()
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg("--api-audiences=https://kubernetes.default.svc.cluster.local")
            .arg("--anonymous-auth=false")
            .arg("--v=1");
        if let Some(interval) = &options.etcd_compaction_interval {
            apiserver.arg(format!("--etcd-compaction-interval={interval}"));
        }
        if options.no_watch_cache {
            apiserver.arg("--watch-cache=false");
        } else {
            // Secrets skip the watch cache so the suite can watch through to etcd and see a
            // compaction it forced (410 Expired); every other resource is cached as usual.
            apiserver.arg("--watch-cache-sizes=secrets#0");
        }
        plane.kube_apiserver = Some(spawn_logged(
            apiserver,
            &dir.join("kube-apiserver.log"),
            detached,
        )?);
        plane.restart_watchdog(detached)?;

        let auth = format!("Authorization: Bearer {token}");
        plane.wait_ready("kube-apiserver /readyz", || {
            curl(&["-skf", "-H", &auth, &format!("{server}/readyz")])
                .is_some_and(|body| body.trim() == "ok")
        })?;
        plane.wait_ready("the default namespace", || {
            curl(&[
                "-skf",
                "-H",
                &auth,
                &format!("{server}/api/v1/namespaces/default"),
            ])
            .is_some()
        })?;

        let ca = cert_dir.join("apiserver.crt");
        fs::write(&plane.kubeconfig, kubeconfig(&server, &ca, &token))
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

    fn restart_watchdog(&mut self, detached: bool) -> Result<(), String> {
        if detached {
            return Ok(());
        }
        if let Some(old) = self.watchdog.take() {
            stop_watchdog(old);
        }
        self.start_watchdog()
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
        let mut message = err;
        for log in ["etcd.log", "kube-apiserver.log"] {
            if let Ok(text) = fs::read_to_string(self.dir.join(log)) {
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

    /// Hands the processes over to whoever reads the state file (`control-plane up`).
    fn detach(mut self) -> Vec<u32> {
        let pids = self.pids();
        self.etcd = None;
        self.kube_apiserver = None;
        self.remove_dir = false;
        pids
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

fn kubeconfig(server: &str, ca: &Path, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kinformer-local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         contexts:\n- name: kinformer-local\n  context:\n    cluster: kinformer-local\n    user: kinformer-admin\n\
         current-context: kinformer-local\nusers:\n- name: kinformer-admin\n  user:\n    token: {token}\n",
        ca = ca.display()
    )
}

fn spawn_logged(mut command: Command, log: &Path, detached: bool) -> Result<Child, String> {
    let file = fs::File::create(log).map_err(|err| format!("creating {}: {err}", log.display()))?;
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

fn stop_child(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Kills the watchdog's whole process group, so its `sleep` goes with it.
fn stop_watchdog(mut watchdog: Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", watchdog.id())])
        .stderr(Stdio::null())
        .status();
    let _ = watchdog.wait();
}

/// Three distinct free loopback ports (held open together so they differ).
fn free_ports() -> Result<[u16; 3], String> {
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

fn random_hex(bytes: usize) -> Result<String, String> {
    let output = Command::new("openssl")
        .args(["rand", "-hex", &bytes.to_string()])
        .output()
        .map_err(|err| format!("running openssl rand: {err} (is the openssl CLI installed?)"))?;
    if !output.status.success() {
        return Err("openssl rand failed".to_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn openssl(args: &[&str], output: &Path) -> Result<(), String> {
    let mut command = Command::new("openssl");
    command.args(args).arg(output);
    run_quiet(command)
}

fn run_quiet(mut command: Command) -> Result<(), String> {
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

/// `curl ARGS`, its body when it exits 0.
fn curl(args: &[&str]) -> Option<String> {
    let output = Command::new("curl")
        .args(["--max-time", "5"])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

fn up(options: &Options) -> Result<(), String> {
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
    let state = format!(
        "kubeconfig={}\netcd_url={}\nserver={}\nwatch_cache={}\n",
        plane.kubeconfig.display(),
        plane.etcd_url,
        plane.server,
        !options.no_watch_cache
    );
    let pids = plane.detach();
    let pid_lines: String = pids.iter().map(|pid| format!("pid={pid}\n")).collect();
    fs::write(dir.join("state"), format!("{state}{pid_lines}"))
        .map_err(|err| format!("writing the state file: {err}"))?;
    eprintln!(
        "xtask: control plane up in {:.1?} (PIDs {pids:?}); stop it with `cargo xtask control-plane down`",
        started.elapsed()
    );
    print_env()
}

#[derive(Debug)]
struct State {
    kubeconfig: String,
    etcd_url: String,
    watch_cache: bool,
    pids: Vec<u32>,
}

fn read_state(dir: &Path) -> Option<State> {
    let text = fs::read_to_string(dir.join("state")).ok()?;
    let mut state = State {
        kubeconfig: String::new(),
        etcd_url: String::new(),
        watch_cache: true,
        pids: Vec::new(),
    };
    for line in text.lines() {
        match line.split_once('=') {
            Some(("kubeconfig", value)) => state.kubeconfig = value.to_owned(),
            Some(("etcd_url", value)) => state.etcd_url = value.to_owned(),
            Some(("watch_cache", value)) => state.watch_cache = value != "false",
            Some(("pid", value)) => state.pids.extend(value.parse::<u32>().ok()),
            _ => {}
        }
    }
    Some(state)
}

/// Whether `pid` is one of our binaries, not a reused PID of something else.
fn alive(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        let binary_dir = binary_dir();
        let first = cmdline.split(|byte| *byte == 0).next().unwrap_or_default();
        Path::new(&*String::from_utf8_lossy(first)).starts_with(binary_dir)
    })
}

fn down() -> Result<(), String> {
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
fn print_env() -> Result<(), String> {
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
    use super::*;

    #[test]
    fn control_plane_flags_are_taken_and_the_rest_returned() {
        let args: Vec<String> = [
            "--no-watch-cache",
            "--etcd-compaction-interval",
            "10s",
            "up",
        ]
        .map(String::from)
        .to_vec();
        let (options, rest) = Options::parse(&args).expect("valid flags");
        assert!(options.no_watch_cache);
        assert_eq!(options.etcd_compaction_interval.as_deref(), Some("10s"));
        assert_eq!(rest, vec!["up".to_owned()]);
    }

    #[test]
    fn a_compaction_interval_without_a_value_is_an_error() {
        let args = vec!["--etcd-compaction-interval".to_owned()];
        assert!(Options::parse(&args).is_err());
    }

    #[test]
    fn version_ldflags_name_the_release_and_its_minor() {
        let flags = kube_version_ldflags();
        assert!(flags.contains(&format!(
            "-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION}"
        )));
        assert!(flags.contains(&"-X k8s.io/component-base/version.gitMinor=37".to_owned()));
    }

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
    fn the_kubeconfig_carries_server_ca_and_token() {
        let text = kubeconfig("https://127.0.0.1:6443", Path::new("/tmp/ca.crt"), "abc");
        assert!(text.contains("server: https://127.0.0.1:6443"));
        assert!(text.contains("certificate-authority: /tmp/ca.crt"));
        assert!(text.contains("token: abc"));
    }
}
