//! kube-apiserver of a kind cluster: a static pod on the control-plane node, killed and started
//! through `docker exec` on the node.

use std::{
    process::Command,
    thread,
    time::{Duration, Instant},
};

use crate::ApiServerOutage;

/// Where kind's control-plane node keeps kube-apiserver's static-pod manifest while it is
/// killed, so that the kubelet does not start it again.
const KIND_PARKED_MANIFEST: &str = "/etc/kubernetes/kube-apiserver.yaml.stopped";
const KIND_MANIFEST: &str = "/etc/kubernetes/manifests/kube-apiserver.yaml";
/// kubectl inside kind's control-plane node, as its admin.
const KIND_KUBECTL: &str = "kubectl --kubeconfig=/etc/kubernetes/admin.conf";
/// How long kind's kubelet may take to start kube-apiserver again and have it ready.
const KIND_START_TIMEOUT: Duration = Duration::from_secs(90);

/// kube-apiserver of a kind cluster, a static pod on the control-plane node `node`: killed by
/// moving its manifest out of the kubelet's manifest folder and SIGKILLing the process (a crash,
/// which the kubelet then does not repair), started by moving the manifest back and waiting for
/// `/readyz` from inside the node. Its port, certificates and etcd stay the same, so the
/// kubeconfig stays valid.
#[derive(Debug, Clone)]
pub struct KindNode {
    node: String,
}

impl KindNode {
    /// kube-apiserver of the kind node in the Docker container `node` (`<cluster>-control-plane`).
    pub fn new(node: impl Into<String>) -> Self {
        Self { node: node.into() }
    }

    /// The node's container name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Runs `script` with `sh -c` in the node; its stdout, or an error with its stderr.
    fn sh(&self, script: &str) -> Result<String, String> {
        let output = Command::new("docker")
            .args(["exec", &self.node, "sh", "-c", script])
            .output()
            .map_err(|err| format!("running docker exec {}: {err}", self.node))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "`{script}` in {} failed with {}: {}",
                self.node,
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }

    /// Waits for kube-apiserver's `/readyz`, asked from inside the node.
    fn wait_apiserver_ready(&self, timeout: Duration) -> Result<(), String> {
        self.wait("waiting for kube-apiserver's /readyz", timeout, |node| {
            node.sh(&format!("{KIND_KUBECTL} get --raw=/readyz"))
                .is_ok_and(|body| body.trim() == "ok")
        })
    }

    /// Waits until the cluster can take the suite: kube-apiserver ready, the node Ready and
    /// every control-plane pod Ready. A reused cluster may have just been restarted with the
    /// Docker engine, or have its controller-manager and scheduler backing off after a restart
    /// test (they exit when they lose their lease).
    ///
    /// # Errors
    ///
    /// When the cluster is not ready within 90 s.
    pub fn wait_cluster_ready(&self) -> Result<(), String> {
        let started = Instant::now();
        self.wait_apiserver_ready(KIND_START_TIMEOUT)?;
        let left = KIND_START_TIMEOUT
            .saturating_sub(started.elapsed())
            .as_secs()
            .max(1);
        self.sh(&format!(
            "{KIND_KUBECTL} wait --for=condition=Ready nodes --all --timeout={left}s && \
             {KIND_KUBECTL} wait --namespace=kube-system --for=condition=Ready pods \
             --selector=tier=control-plane --timeout={left}s"
        ))?;
        eprintln!(
            "xtask: kind cluster ready (node and control plane) after {:.1?}",
            started.elapsed()
        );
        Ok(())
    }

    /// Polls `done` every 100 ms until it holds, for at most `timeout`.
    fn wait(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            if Instant::now() > deadline {
                return Err(format!(
                    "{what} in {} within {timeout:?}: it did not",
                    self.node
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl ApiServerOutage for KindNode {
    fn kill_apiserver(&mut self) -> Result<(), String> {
        if self.apiserver_down() {
            return Err("kube-apiserver is already down".to_owned());
        }
        self.sh(&format!(
            "mv {KIND_MANIFEST} {KIND_PARKED_MANIFEST} && pkill -KILL -x kube-apiserver"
        ))?;
        self.wait(
            "waiting for kube-apiserver to exit",
            Duration::from_secs(30),
            |node| node.sh("pgrep -x kube-apiserver").is_err(),
        )
    }

    fn start_apiserver(&mut self) -> Result<(), String> {
        if !self.apiserver_down() {
            return Err("kube-apiserver is already running".to_owned());
        }
        self.sh(&format!("mv {KIND_PARKED_MANIFEST} {KIND_MANIFEST}"))?;
        self.wait_apiserver_ready(KIND_START_TIMEOUT)
    }

    fn apiserver_down(&mut self) -> bool {
        self.sh(&format!("test -f {KIND_PARKED_MANIFEST}")).is_ok()
    }
}
