//! kube-apiserver: how it is started (bound to 127.0.0.1 with a self-signed serving
//! certificate, a bearer token in `system:masters`, RBAC, and a service-account key pair made
//! with the `openssl` CLI so TokenRequest works), how it is started again with the very same
//! flags, and the kubeconfig that reaches it.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command},
};

use crate::{
    Options, PROBE_TIMEOUT,
    build::Binaries,
    http::Http,
    processes::{openssl, random_hex, run_quiet, spawn_logged},
};

/// How kube-apiserver was started: enough to start it again exactly the same way, from the
/// process that started it or from any other (the state file records it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiServerLaunch {
    pub(crate) binary: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) log: PathBuf,
    /// `https://127.0.0.1:PORT`, for probing `/readyz`.
    pub(crate) server: String,
    /// The admin bearer token, for probing `/readyz`.
    pub(crate) token: String,
}

impl ApiServerLaunch {
    /// Writes kube-apiserver's token file and service-account keys into `dir`, and says how
    /// to start it against etcd at `etcd_url` on `secure_port`.
    pub(crate) fn prepare(
        binaries: &Binaries,
        options: &Options,
        dir: &Path,
        etcd_url: &str,
        secure_port: u16,
    ) -> Result<Self, String> {
        let token = random_hex(16)?;
        fs::write(
            dir.join("tokens.csv"),
            format!("{token},kinformer-admin,kinformer-admin,\"system:masters\"\n"),
        )
        .map_err(|err| format!("writing the token file: {err}"))?;
        service_account_keys(dir)?;
        Ok(Self {
            binary: binaries.kube_apiserver.clone(),
            args: args(options, dir, etcd_url, secure_port),
            log: dir.join("kube-apiserver.log"),
            server: format!("https://127.0.0.1:{secure_port}"),
            token,
        })
    }

    /// Starts kube-apiserver; `again` appends to the log (keeping the first run's lines)
    /// instead of starting a new one.
    pub(crate) fn spawn(&self, detached: bool, again: bool) -> Result<Child, String> {
        let mut command = Command::new(&self.binary);
        command.args(&self.args);
        spawn_logged(command, &self.log, detached, again)
    }

    pub(crate) fn ready(&self) -> bool {
        self.get("/readyz").is_ok_and(|body| body.trim() == "ok")
    }

    /// Whether the `default` namespace exists yet (kube-apiserver creates it after `/readyz`).
    pub(crate) fn serves_default_namespace(&self) -> bool {
        self.get("/api/v1/namespaces/default").is_ok()
    }

    /// `GET path` as the admin.
    fn get(&self, path: &str) -> Result<String, String> {
        Http::new(&self.server, PROBE_TIMEOUT)?
            .bearer(&self.token)
            .get(path)
    }

    /// The admin kubeconfig: its server, the serving certificate kube-apiserver generated in
    /// its `--cert-dir`, and the bearer token.
    pub(crate) fn kubeconfig(&self) -> String {
        kubeconfig(
            &self.server,
            &cert_dir(&self.log).join("apiserver.crt"),
            &self.token,
        )
    }

    /// `key=value` lines for the state file; arguments are paths and flags, never multi-line.
    pub(crate) fn state_lines(&self) -> String {
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

/// SIGKILLs a kube-apiserver this process started and reaps it.
pub(crate) fn kill_kube_apiserver(child: &mut Child) -> Result<(), String> {
    child
        .kill()
        .map_err(|err| format!("killing kube-apiserver: {err}"))?;
    child
        .wait()
        .map_err(|err| format!("waiting for kube-apiserver to exit: {err}"))?;
    Ok(())
}

pub(crate) fn kubeconfig(server: &str, ca: &Path, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kinformer-local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         contexts:\n- name: kinformer-local\n  context:\n    cluster: kinformer-local\n    user: kinformer-admin\n\
         current-context: kinformer-local\nusers:\n- name: kinformer-admin\n  user:\n    token: {token}\n",
        ca = ca.display()
    )
}

/// Where kube-apiserver generates its serving certificate (on the first start) and finds it
/// again (on a restart, so the kubeconfig's CA holds): beside its log.
fn cert_dir(log: &Path) -> PathBuf {
    log.with_file_name("certs")
}

/// The service-account signing key pair, `dir/sa.key` and `dir/sa.pub`, made with `openssl`.
fn service_account_keys(dir: &Path) -> Result<(), String> {
    let sa_key = dir.join("sa.key");
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
        .arg(dir.join("sa.pub"));
    run_quiet(public)
}

/// kube-apiserver's flags: loopback only, the files [`ApiServerLaunch::prepare`] wrote, RBAC,
/// and the watch cache as `options` ask.
fn args(options: &Options, dir: &Path, etcd_url: &str, secure_port: u16) -> Vec<String> {
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
        format!("--cert-dir={}", dir.join("certs").display()),
        format!("--token-auth-file={}", dir.join("tokens.csv").display()),
        "--authorization-mode=RBAC".to_owned(),
        "--service-cluster-ip-range=10.96.0.0/24".to_owned(),
        format!(
            "--service-account-key-file={}",
            dir.join("sa.pub").display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            dir.join("sa.key").display()
        ),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        "--api-audiences=https://kubernetes.default.svc.cluster.local".to_owned(),
        "--anonymous-auth=false".to_owned(),
        // Server-side sharded list and watch (KEP-5866, alpha, off by default): on here, so
        // the suite's sharded informers are filtered by the server on the local control plane
        // and by themselves on kind, whose cluster keeps the default.
        "--feature-gates=ShardedListAndWatch=true".to_owned(),
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
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_carries_server_ca_and_token() {
        let text = kubeconfig("https://127.0.0.1:6443", Path::new("/tmp/ca.crt"), "abc");
        assert!(text.contains("server: https://127.0.0.1:6443"));
        assert!(text.contains("certificate-authority: /tmp/ca.crt"));
        assert!(text.contains("token: abc"));
    }
}
