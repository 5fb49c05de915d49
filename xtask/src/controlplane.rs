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
//!
//! kube-apiserver can be killed and started again mid-run ([`ApiServerOutage`], for the e2e test
//! that restarts it under a watching informer, and `control-plane restart-apiserver`): it comes
//! back with the very flags it was first given, so the port, serving certificate, token file,
//! service-account keys and etcd are the same and every kubeconfig written for it stays valid.

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
        Some("restart-apiserver") => restart_detached(),
        Some(other) => Err(format!(
            "unknown control-plane command {other:?}; expected up, down, env, build or restart-apiserver"
        )),
        None => Err(
            "usage: cargo xtask control-plane up [--no-watch-cache] [--etcd-compaction-interval D] | down | env | build | restart-apiserver"
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
pub(crate) fn cache_root() -> PathBuf {
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
pub(crate) fn kube_version_ldflags() -> Vec<String> {
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

/// How kube-apiserver was started: enough to start it again exactly the same way, from this
/// process ([`ControlPlane`]) or from a later one (the state file of `control-plane up`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ApiServerLaunch {
    binary: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    /// `https://127.0.0.1:PORT`, for probing `/readyz`.
    server: String,
    /// The admin bearer token, for probing `/readyz`.
    token: String,
}

impl ApiServerLaunch {
    /// Starts kube-apiserver; `again` appends to the log (keeping the first run's lines)
    /// instead of starting a new one.
    fn spawn(&self, detached: bool, again: bool) -> Result<Child, String> {
        let mut command = Command::new(&self.binary);
        command.args(&self.args);
        spawn_logged(command, &self.log, detached, again)
    }

    fn ready(&self) -> bool {
        let auth = format!("Authorization: Bearer {}", self.token);
        curl(&["-skf", "-H", &auth, &format!("{}/readyz", self.server)])
            .is_some_and(|body| body.trim() == "ok")
    }

    /// `key=value` lines for the state file; arguments are paths and flags, never multi-line.
    fn state_lines(&self) -> String {
        let mut lines = format!(
            "apiserver_binary={}\napiserver_log={}\ntoken={}\n",
            self.binary.display(),
            self.log.display(),
            self.token
        );
        for arg in &self.args {
            lines.push_str(&format!("apiserver_arg={arg}\n"));
        }
        lines
    }
}

/// Takes kube-apiserver down and brings it back, leaving etcd running: what the e2e test that
/// restarts kube-apiserver under a watching informer asks xtask for.
pub(crate) trait ApiServerOutage {
    /// SIGKILLs kube-apiserver (no graceful shutdown: every client sees its connections cut, as
    /// in a crash) and waits until it is gone.
    fn kill_apiserver(&mut self) -> Result<(), String>;

    /// Starts kube-apiserver again with the flags it was first started with, and waits for
    /// `/readyz`.
    fn start_apiserver(&mut self) -> Result<(), String>;

    /// Whether kube-apiserver is down (after [`kill_apiserver`](Self::kill_apiserver)).
    fn apiserver_down(&mut self) -> bool;
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
            launch: None,
            watchdog: None,
            dir: dir.to_path_buf(),
            kubeconfig: dir.join("kubeconfig"),
            etcd_url: etcd_url.clone(),
            server: server.clone(),
            detached,
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
        plane.etcd = Some(spawn_logged(etcd, &dir.join("etcd.log"), detached, false)?);
        plane.rearm_watchdog()?;
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
        let mut args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            // Without it kube-apiserver advertises a host interface, and the `kubernetes`
            // endpoints and its own loopback client would point off the machine.
            "--advertise-address=127.0.0.1".to_owned(),
            // The endpoint reconciler refuses a loopback address, and nothing here needs the
            // `kubernetes` Service's endpoints.
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--secure-port={secure_port}"),
            // Generated on the first start and reused on a restart, so the kubeconfig's CA holds.
            format!("--cert-dir={}", cert_dir.display()),
            format!("--token-auth-file={}", dir.join("tokens.csv").display()),
            "--authorization-mode=RBAC".to_owned(),
            "--service-cluster-ip-range=10.96.0.0/24".to_owned(),
            format!("--service-account-key-file={}", sa_pub.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            "--api-audiences=https://kubernetes.default.svc.cluster.local".to_owned(),
            "--anonymous-auth=false".to_owned(),
            "--v=1".to_owned(),
        ];
        if let Some(interval) = &options.etcd_compaction_interval {
            args.push(format!("--etcd-compaction-interval={interval}"));
        }
        if options.no_watch_cache {
            args.push("--watch-cache=false".to_owned());
        } else {
            // Secrets skip the watch cache so the suite can watch through to etcd and see a
            // compaction it forced (410 Expired); every other resource is cached as usual.
            args.push("--watch-cache-sizes=secrets#0".to_owned());
        }
        let launch = ApiServerLaunch {
            binary: binaries.kube_apiserver.clone(),
            args,
            log: dir.join("kube-apiserver.log"),
            server: server.clone(),
            token: token.clone(),
        };
        plane.kube_apiserver = Some(launch.spawn(detached, false)?);
        plane.launch = Some(launch.clone());
        plane.rearm_watchdog()?;

        plane.wait_ready("kube-apiserver /readyz", || launch.ready())?;
        let auth = format!("Authorization: Bearer {token}");
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
    fn detach(mut self) -> (Vec<u32>, Option<u32>, Option<ApiServerLaunch>) {
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

fn kubeconfig(server: &str, ca: &Path, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kinformer-local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         contexts:\n- name: kinformer-local\n  context:\n    cluster: kinformer-local\n    user: kinformer-admin\n\
         current-context: kinformer-local\nusers:\n- name: kinformer-admin\n  user:\n    token: {token}\n",
        ca = ca.display()
    )
}

/// Starts `command` with stdout and stderr in `log`; `again` appends to it (with a line saying
/// so) rather than starting it afresh.
fn spawn_logged(
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
        writeln!(file, "\n=== started again by xtask ===")
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

/// SIGKILLs a kube-apiserver this process started and reaps it.
fn kill_kube_apiserver(child: &mut Child) -> Result<(), String> {
    child
        .kill()
        .map_err(|err| format!("killing kube-apiserver: {err}"))?;
    child
        .wait()
        .map_err(|err| format!("waiting for kube-apiserver to exit: {err}"))?;
    Ok(())
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
fn restart_detached() -> Result<(), String> {
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

/// Adds the tails of the control plane's logs in `dir` to `err`, for a failure that explains
/// itself.
fn with_log_tails(err: String, dir: &Path) -> String {
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
fn alive(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        let binary_dir = binary_dir();
        let first = cmdline.split(|byte| *byte == 0).next().unwrap_or_default();
        Path::new(&*String::from_utf8_lossy(first)).starts_with(binary_dir)
    })
}

/// Whether `pid` has finished exiting (a zombie, or reaped), so its sockets are closed and
/// its port free. `alive` turns false earlier, once the memory map is gone.
fn exited(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        // The state follows the parenthesised command name, which may itself hold spaces.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| matches!(state, "Z" | "X"))
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

    #[test]
    fn a_running_process_has_not_exited_and_a_reaped_one_has() {
        assert!(!exited(std::process::id()));
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = child.id();
        child.wait().expect("reap true");
        assert!(exited(pid));
    }

    #[test]
    fn the_kubeconfig_carries_server_ca_and_token() {
        let text = kubeconfig("https://127.0.0.1:6443", Path::new("/tmp/ca.crt"), "abc");
        assert!(text.contains("server: https://127.0.0.1:6443"));
        assert!(text.contains("certificate-authority: /tmp/ca.crt"));
        assert!(text.contains("token: abc"));
    }
}
