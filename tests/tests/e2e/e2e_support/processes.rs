//! Child processes for the multi-process tests (leader election, sharding): the test binary
//! run again with an environment variable naming the child's identity, so the same test
//! function then plays a replica instead of orchestrating. Included with `#[path]` by the
//! tests that use it. Children are SIGKILLed when dropped.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::SystemTime,
};

use kube_client::config::{KubeConfigOptions, Kubeconfig};

/// The namespace a child works in.
const CHILD_NAMESPACE: &str = "KINFORMER_E2E_CHILD_NAMESPACE";
/// The kubeconfig of the cluster a child works against.
const CHILD_KUBECONFIG: &str = "KINFORMER_E2E_CHILD_KUBECONFIG";

/// The children of one test.
pub(crate) struct Children {
    /// The test function the children run (`--exact`).
    test: &'static str,
    /// The variable that carries a child's identity.
    role: &'static str,
    /// Variables every child gets.
    env: Vec<(&'static str, String)>,
    running: Vec<(String, Child)>,
}

impl Children {
    /// Children of `test` that work in `namespace` of the cluster `kubeconfig` names (see
    /// [`child_context`]), each told its identity in `role`, and given `env` beside.
    pub(crate) fn new(
        test: &'static str,
        role: &'static str,
        namespace: &str,
        kubeconfig: &Path,
        mut env: Vec<(&'static str, String)>,
    ) -> Self {
        env.push((CHILD_NAMESPACE, namespace.to_owned()));
        env.push((CHILD_KUBECONFIG, kubeconfig.display().to_string()));
        Self {
            test,
            role,
            env,
            running: Vec::new(),
        }
    }

    /// Starts the child `identity`.
    pub(crate) fn spawn(&mut self, identity: &str) {
        let child = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", self.test, "--nocapture", "--test-threads=1"])
            .env(self.role, identity)
            .envs(self.env.iter().map(|(name, value)| (*name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a child process starts");
        self.running.push((identity.to_owned(), child));
    }

    /// SIGKILLs the child `identity` and returns when it is gone.
    pub(crate) fn kill(&mut self, identity: &str) -> SystemTime {
        let index = self
            .running
            .iter()
            .position(|(name, _)| name == identity)
            .expect("a live child");
        let (_, mut child) = self.running.swap_remove(index);
        child.kill().expect("SIGKILL is delivered");
        child.wait().expect("the killed child is reaped");
        SystemTime::now()
    }

    /// SIGKILLs every child; returns when all are gone, with the moment they were.
    pub(crate) fn kill_all(&mut self) -> SystemTime {
        for (_, child) in &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.running.clear();
        SystemTime::now()
    }

    /// The identities of the live children.
    pub(crate) fn identities(&self) -> Vec<String> {
        self.running.iter().map(|(name, _)| name.clone()).collect()
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// In a child: the namespace it works in, and a client of the cluster, without kube-client's
/// retries (a child must see every failure its library sees).
pub(crate) async fn child_context() -> (String, kube_client::Client) {
    let namespace = std::env::var(CHILD_NAMESPACE).expect("the namespace to work in");
    let kubeconfig =
        Kubeconfig::read_from(path_from_env(CHILD_KUBECONFIG)).expect("the kubeconfig parses");
    let mut config =
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("a client configuration");
    config.default_retry = false;
    (
        namespace,
        kube_client::Client::try_from(config).expect("a client"),
    )
}

/// The path in the environment variable `name`, which the orchestrator set.
pub(crate) fn path_from_env(name: &str) -> PathBuf {
    PathBuf::from(std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for a child")))
}
