//! The backend the e2e suite runs against, and what every test needs around it: a fresh
//! namespace, cleanup that runs even when the test panics, bounded waits on watch streams, and
//! the backend-specific ways to force a compaction or get a client without RBAC.
//!
//! `cargo xtask e2e` sets `KINFORMER_E2E_BACKEND` (`local`, `kind`, `kubeconfig` or `fake`) and,
//! for a real cluster, `KINFORMER_E2E_KUBECONFIG`. On the local control plane it also sets
//! `KINFORMER_E2E_CONTROL_PLANE` (the control plane's folder) and on kind
//! `KINFORMER_E2E_KIND_NODE` (the control-plane node's container): through them the suite
//! kills and starts kube-apiserver, and compacts the local etcd, with kinformer-controlplane.
//! Without them (a plain `cargo test`) every test starts kinformer-testing's in-process fake
//! server, so the suite always runs and keeps the fake honest.

use std::{
    fmt::Debug,
    future::Future,
    panic::AssertUnwindSafe,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{FutureExt as _, Stream, StreamExt as _};
use k8s_openapi::{
    api::{
        authentication::v1::{TokenRequest, TokenRequestSpec},
        core::v1::{ConfigMap, Namespace, ServiceAccount},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kinformer::reflector::ShardMode;
use kinformer_controlplane::{
    ApiServerOutage, CONTROL_PLANE_ENV, ControlPlane, KIND_NODE_ENV, KindNode, compact_etcd,
};
use kinformer_testing::FakeApiServer;
use kube_client::{
    Api, Client, Config,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams},
    config::{AuthInfo, KubeConfigOptions, Kubeconfig},
    core::{ObjectMeta, WatchEvent},
};

/// Where the suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackendKind {
    /// kinformer-testing's in-process fake server.
    Fake,
    /// kube-apiserver and etcd started on loopback by `cargo xtask e2e --local`.
    Local,
    /// A kind cluster.
    Kind,
    /// Any cluster named by a kubeconfig.
    Kubeconfig,
}

/// A connected backend; the fake server (if any) lives as long as this.
pub(crate) struct Backend {
    kind: BackendKind,
    client: Client,
    config: Option<Config>,
    fake: Option<FakeApiServer>,
    /// etcd's client URL, on the local control plane.
    etcd_url: Option<String>,
    watch_cache: bool,
    /// Whether the server filters shards (`ShardedListAndWatch`), where the backend says.
    sharded_list_and_watch: Option<bool>,
    /// kube-apiserver's off switch, on the local control plane and kind.
    apiserver: Option<OffSwitch>,
}

/// kube-apiserver's off switch, shared by the test and the blocking task that flips it.
type OffSwitch = Arc<Mutex<dyn ApiServerOutage + Send>>;

impl Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// Connects to the backend `cargo xtask e2e` chose, or starts a fake server.
    pub(crate) async fn connect() -> Self {
        let kind = match std::env::var("KINFORMER_E2E_BACKEND").ok().as_deref() {
            None | Some("" | "fake") => BackendKind::Fake,
            Some("local") => BackendKind::Local,
            Some("kind") => BackendKind::Kind,
            Some("kubeconfig") => BackendKind::Kubeconfig,
            Some(other) => {
                panic!("KINFORMER_E2E_BACKEND={other:?} is not local, kind, kubeconfig or fake")
            }
        };
        if kind == BackendKind::Fake {
            let fake = FakeApiServer::start()
                .await
                .expect("the fake API server starts");
            let client = fake.client().expect("a client for the fake server");
            return Self {
                kind,
                client,
                config: None,
                fake: Some(fake),
                etcd_url: None,
                watch_cache: true,
                sharded_list_and_watch: Some(true),
                apiserver: None,
            };
        }
        let path = std::env::var("KINFORMER_E2E_KUBECONFIG")
            .expect("KINFORMER_E2E_KUBECONFIG names the kubeconfig of a real backend");
        let kubeconfig = Kubeconfig::read_from(&path).expect("the e2e kubeconfig parses");
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("the e2e kubeconfig gives a client configuration");
        // The reflector owns retries; kube-client's layer would hide 429/503/504 from it.
        config.default_retry = false;
        let client = Client::try_from(config.clone()).expect("a client for the e2e cluster");
        let (apiserver, etcd_url) = control_plane(kind);
        Self {
            kind,
            client,
            config: Some(config),
            fake: None,
            etcd_url,
            watch_cache: std::env::var("KINFORMER_E2E_WATCH_CACHE").as_deref() != Ok("false"),
            sharded_list_and_watch: std::env::var("KINFORMER_E2E_SHARDED_LIST_AND_WATCH")
                .ok()
                .map(|on| on == "true"),
            apiserver,
        }
    }

    /// Which backend this is.
    pub(crate) fn kind(&self) -> BackendKind {
        self.kind
    }

    /// An admin client.
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// A kubeconfig file with admin credentials, for processes the test starts: the one
    /// `cargo xtask e2e` named, or one written for the fake server.
    pub(crate) fn kubeconfig_file(&self) -> KubeconfigFile {
        match &self.fake {
            Some(fake) => {
                let path = std::env::temp_dir().join(format!(
                    "kinformer-e2e-fake-{}-{:08x}.kubeconfig",
                    std::process::id(),
                    random_u32()
                ));
                std::fs::write(&path, fake.kubeconfig()).expect("the kubeconfig is written");
                KubeconfigFile {
                    path,
                    written: true,
                }
            }
            None => KubeconfigFile {
                path: PathBuf::from(
                    std::env::var("KINFORMER_E2E_KUBECONFIG")
                        .expect("KINFORMER_E2E_KUBECONFIG names the kubeconfig of a real backend"),
                ),
                written: false,
            },
        }
    }

    /// Whether watches go through kube-apiserver's watch cache (false only when `cargo xtask
    /// e2e --local --no-watch-cache` says so through `KINFORMER_E2E_WATCH_CACHE=false`).
    pub(crate) fn watch_cache(&self) -> bool {
        self.watch_cache
    }

    /// The mode a sharded informer runs in here: `Server` where the server filters list and
    /// watch by shard (the `ShardedListAndWatch` feature gate; the fake and the local control
    /// plane), `Client` where it does not (kind); `None` for a cluster `cargo xtask e2e` did
    /// not start.
    #[allow(
        dead_code,
        reason = "the sharding suites'; e2e_conformance compiles this module whole"
    )]
    pub(crate) fn shard_mode(&self) -> Option<ShardMode> {
        self.sharded_list_and_watch.map(|on| {
            if on {
                ShardMode::Server
            } else {
                ShardMode::Client
            }
        })
    }

    /// Compacts the backend's history up to now, when the backend lets the suite do that.
    ///
    /// The fake compacts its event window; the local control plane compacts etcd (through
    /// kinformer-controlplane). kind and foreign clusters return false: their etcd is out of
    /// reach.
    pub(crate) async fn force_compaction(&self) -> bool {
        if let Some(fake) = &self.fake {
            fake.compact();
            return true;
        }
        let Some(etcd) = self.etcd_url.clone() else {
            return false;
        };
        tokio::task::spawn_blocking(move || compact_etcd(&etcd))
            .await
            .expect("the compaction does not panic")
            .unwrap_or_else(|err| panic!("compacting etcd: {err}"));
        true
    }

    /// A client whose identity has no RBAC grants at all, for the Forbidden test.
    ///
    /// On a real cluster: a ServiceAccount in `namespace` and a token from the TokenRequest API.
    /// The fake has no authentication, so it returns `None` and the test uses fault injection.
    pub(crate) async fn unprivileged_client(&self, namespace: &str) -> Option<Client> {
        let config = self.config.as_ref()?;
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client(), namespace);
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some("e2e-nobody".to_owned()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        accounts
            .create(&PostParams::default(), &account)
            .await
            .expect("creating the ServiceAccount");
        let request = TokenRequest {
            // No audiences: the token is for kube-apiserver's own (--api-audiences).
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let issued = accounts
            .create_token_request("e2e-nobody", &PostParams::default(), &request)
            .await
            .expect("the TokenRequest API issues a token");
        let token = issued
            .status
            .and_then(|status| status.token)
            .expect("a TokenRequest answer carries the token");
        let mut config = config.clone();
        config.auth_info = AuthInfo {
            token: Some(token.into()),
            ..AuthInfo::default()
        };
        Some(Client::try_from(config).expect("a client with the ServiceAccount token"))
    }

    /// Injects a 403 into the fake's next `list` of `resource` (fake only).
    pub(crate) fn inject_forbidden_list(&self, resource: &str) -> bool {
        let Some(fake) = &self.fake else {
            return false;
        };
        fake.faults().inject(
            kinformer_testing::Fault::status(403)
                .verb(kinformer_testing::Verb::List)
                .resource(resource)
                .times(1),
        );
        true
    }
}

/// What one test gets: the backend, its own namespace, and cleanup registration.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// The backend.
    pub(crate) backend: Arc<Backend>,
    /// A namespace created for this test alone.
    pub(crate) namespace: String,
    /// The ConfigMaps a kube-controller-manager publishes into every namespace
    /// (`kube-root-ca.crt`), already in [`namespace`](Self::namespace) when the test starts;
    /// none where no controller-manager runs (the fake, the local control plane). A test that
    /// asserts the exact ConfigMaps of its namespace counts these too.
    pub(crate) published_config_maps: Vec<String>,
    crds: Arc<Mutex<Vec<String>>>,
}

impl Ctx {
    /// An admin client.
    pub(crate) fn client(&self) -> Client {
        self.backend.client()
    }

    /// Deletes the CRD named `name` after the test, whether it passes or not.
    pub(crate) fn delete_crd_afterwards(&self, name: &str) {
        self.crds
            .lock()
            .expect("the cleanup list is never poisoned")
            .push(name.to_owned());
    }

    /// A name unique to this run, for cluster-scoped objects such as CRD groups.
    pub(crate) fn unique(&self) -> &str {
        self.namespace.trim_start_matches("kinformer-e2e-")
    }
}

/// Registers the namespaced `Widget` CRD of kinformer-testing's `fixtures::widget_crd` in
/// `group`, deleted after the test, and waits until it is Established. Widgets may still be
/// refused for a moment after: Established means the names are accepted, and the storage for
/// them can lag.
pub(crate) async fn create_widget_crd(ctx: &Ctx, group: &str) -> ApiResource {
    let crd: CustomResourceDefinition =
        serde_json::from_value(kinformer_testing::fixtures::widget_crd(group))
            .expect("a valid CRD");
    let name = format!("widgets.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client());
    ctx.delete_crd_afterwards(&name);
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    eventually("the CRD is Established", Duration::from_secs(30), || {
        let (crds, name) = (crds.clone(), name.clone());
        async move {
            let current = crds.get(&name).await.map_err(|err| err.to_string())?;
            current
                .status
                .and_then(|status| status.conditions)
                .unwrap_or_default()
                .iter()
                .any(|condition| condition.type_ == "Established" && condition.status == "True")
                .then_some(())
                .ok_or_else(|| "not Established yet".to_owned())
        }
    })
    .await;
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Widget"), "widgets")
}

/// Creates a Widget of `resource` with `spec.size`, retrying while the resource is not served
/// yet (Established means the names are accepted; the storage for them can lag a moment).
#[allow(
    dead_code,
    reason = "e2e_informer's and e2e_lifecycle's; e2e_conformance compiles this module whole"
)]
pub(crate) async fn create_widget(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    name: &str,
    size: u64,
) {
    let widget =
        DynamicObject::new(name, resource).data(serde_json::json!({ "spec": { "size": size } }));
    eventually("a Widget is created", Duration::from_secs(60), || {
        let widget = widget.clone();
        async move {
            match api.create(&PostParams::default(), &widget).await {
                Ok(_) => Ok(()),
                Err(kube_client::Error::Api(status)) if status.code == 404 => {
                    Err("the Widget resource is not served yet".to_owned())
                }
                Err(err) => panic!("creating a Widget: {err}"),
            }
        }
    })
    .await;
}

/// Held shared by every test on a real backend, and exclusively by a test that takes its API
/// server down ([`run_alone`]), so that no other test runs during the outage. The fake backend
/// is each test's own server, so there no test waits for another.
static SHARED_SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Runs `body` in a fresh namespace on the chosen backend, cleaning up afterwards even when the
/// body panics (the panic is then resumed, so the test still fails).
pub(crate) async fn run<F, Fut>(test: &str, body: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    run_with(test, false, body).await;
}

/// [`run`] for a test that takes a real backend's API server down: it waits until the tests
/// running on that server are done, and the tests that start meanwhile wait until it is.
pub(crate) async fn run_alone<F, Fut>(test: &str, body: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    run_with(test, true, body).await;
}

async fn run_with<F, Fut>(test: &str, alone: bool, body: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let backend = Arc::new(Backend::connect().await);
    let shared = backend.kind() != BackendKind::Fake;
    let _running_beside_others = if shared && !alone {
        Some(SHARED_SERVER.read().await)
    } else {
        None
    };
    let _running_alone = if shared && alone {
        Some(SHARED_SERVER.write().await)
    } else {
        None
    };
    let suffix = format!("{:08x}", random_u32());
    let namespace = format!("kinformer-e2e-{test}-{suffix}");
    let namespaces: Api<Namespace> = Api::all(backend.client());
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("kinformer.dev/e2e".to_owned(), "true".to_owned());
    let object = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &object)
        .await
        .expect("creating the test namespace");
    let published_config_maps = wait_for_published_config_maps(&backend, &namespace).await;
    let ctx = Ctx {
        backend: backend.clone(),
        namespace: namespace.clone(),
        published_config_maps,
        crds: Arc::new(Mutex::new(Vec::new())),
    };
    let outcome = AssertUnwindSafe(body(ctx.clone())).catch_unwind().await;

    let crds: Api<CustomResourceDefinition> = Api::all(backend.client());
    let created = ctx
        .crds
        .lock()
        .map(|names| names.clone())
        .unwrap_or_default();
    for name in created {
        // Best effort: a cleanup failure must not hide the test's own outcome.
        let _ = crds.delete(&name, &DeleteParams::default()).await;
    }
    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The ConfigMap kube-controller-manager's root-CA publisher writes into every namespace.
const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// How long a new namespace may wait for it.
const PUBLISH_WAIT: Duration = Duration::from_secs(30);

/// Waits until the controller-manager of a full cluster (kind, a kubeconfig's) has published
/// its ConfigMap into `namespace`, so that a test's lists never change under it mid-test, and
/// returns its name; returns nothing at once where no controller-manager runs.
async fn wait_for_published_config_maps(backend: &Backend, namespace: &str) -> Vec<String> {
    if matches!(backend.kind(), BackendKind::Fake | BackendKind::Local) {
        return Vec::new();
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(backend.client(), namespace);
    let deadline = tokio::time::Instant::now() + PUBLISH_WAIT;
    loop {
        let found = config_maps
            .get_opt(ROOT_CA_CONFIG_MAP)
            .await
            .expect("reading the namespace's ConfigMaps");
        if found.is_some() {
            return vec![ROOT_CA_CONFIG_MAP.to_owned()];
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "kube-controller-manager did not publish {ROOT_CA_CONFIG_MAP} into {namespace} within \
             {PUBLISH_WAIT:?}"
        );
        // Polling: nothing signals the publication but the object itself.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A random u32 from the standard library's per-process hasher keys (no extra dependency).
fn random_u32() -> u32 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish() as u32
}

/// The next item of `stream` within `wait`, or `None` if it timed out or ended.
pub(crate) async fn next_within<S, T>(stream: &mut S, wait: Duration) -> Option<T>
where
    S: Stream<Item = T> + Unpin,
{
    tokio::time::timeout(wait, stream.next())
        .await
        .ok()
        .flatten()
}

/// The next watch event that is not a bookmark, within `wait`.
pub(crate) async fn next_change<S, K>(stream: &mut S, wait: Duration) -> Option<WatchEvent<K>>
where
    S: Stream<Item = kube_client::Result<WatchEvent<K>>> + Unpin,
{
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match next_within(stream, left).await? {
            Ok(WatchEvent::Bookmark(_)) => {}
            Ok(event) => return Some(event),
            Err(err) => panic!("the watch stream failed: {err}"),
        }
    }
}

/// A watch event as (type, object name) for comparisons that read like the API's own words.
pub(crate) fn shape<K: kube_client::ResourceExt>(event: &WatchEvent<K>) -> (&'static str, String) {
    match event {
        WatchEvent::Added(object) => ("ADDED", object.name_any()),
        WatchEvent::Modified(object) => ("MODIFIED", object.name_any()),
        WatchEvent::Deleted(object) => ("DELETED", object.name_any()),
        WatchEvent::Bookmark(_) => ("BOOKMARK", String::new()),
        WatchEvent::Error(status) => ("ERROR", format!("{} {}", status.code, status.reason)),
    }
}

/// kube-apiserver's off switch for the backend `kind`, found through the environment
/// `cargo xtask e2e` sets, and, on the local control plane, etcd's client URL.
#[allow(
    clippy::type_complexity,
    reason = "a pair of the two things the control plane gives, named where it is destructured"
)]
fn control_plane(
    kind: BackendKind,
) -> (
    Option<Arc<Mutex<dyn ApiServerOutage + Send>>>,
    Option<String>,
) {
    match kind {
        BackendKind::Local => match std::env::var_os(CONTROL_PLANE_ENV) {
            Some(dir) => {
                let plane = ControlPlane::attach(std::path::Path::new(&dir))
                    .unwrap_or_else(|err| panic!("{CONTROL_PLANE_ENV}: {err}"));
                let etcd_url = plane.etcd_url().to_owned();
                (Some(Arc::new(Mutex::new(plane))), Some(etcd_url))
            }
            None => (None, None),
        },
        BackendKind::Kind => match std::env::var(KIND_NODE_ENV) {
            Ok(node) => (Some(Arc::new(Mutex::new(KindNode::new(node)))), None),
            Err(_) => (None, None),
        },
        BackendKind::Fake | BackendKind::Kubeconfig => (None, None),
    }
}

/// What the informer suite (`e2e_informer.rs`) adds; the conformance suite does not use these.
#[allow(
    dead_code,
    reason = "e2e_support is compiled into every e2e binary, and only the e2e_informer* ones use these"
)]
impl Backend {
    /// Makes every `list` of `resource` on the fake answer 403 until
    /// [`clear_faults`](Self::clear_faults) (fake only; a real cluster refuses through RBAC).
    pub(crate) fn forbid_lists(&self, resource: &str) -> bool {
        let Some(fake) = &self.fake else {
            return false;
        };
        fake.faults().inject(
            kinformer_testing::Fault::status(403)
                .verb(kinformer_testing::Verb::List)
                .resource(resource)
                .times(usize::MAX),
        );
        true
    }

    /// Removes every fault injected into the fake (fake only).
    pub(crate) fn clear_faults(&self) -> bool {
        let Some(fake) = &self.fake else {
            return false;
        };
        fake.faults().clear();
        true
    }

    /// How many `list` requests for `resource` the fake has served; `None` on a real cluster,
    /// which does not count for us.
    pub(crate) fn fake_list_count(&self, resource: &str) -> Option<u64> {
        self.fake.as_ref().map(|fake| {
            fake.faults()
                .request_count(kinformer_testing::Verb::List, resource)
        })
    }
}

/// Polls `check` every 100 ms until it returns `Ok`, for at most `within`; panics with `what`
/// and the last mismatch otherwise. The real kube-apiserver is slower than the fake, so
/// convergence is waited for rather than assumed.
#[allow(
    dead_code,
    reason = "e2e_support is compiled into every e2e binary, and only the e2e_informer* ones use this"
)]
pub(crate) async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let last = match check().await {
            Ok(()) => return,
            Err(mismatch) => mismatch,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not converged within {within:?}; last mismatch: {last}"
        );
        // Polling: convergence is read from the server, which has no signal for it.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the controller test (`e2e_controller.rs`) adds.
#[allow(
    dead_code,
    reason = "e2e_support is compiled into every e2e binary, and only e2e_controller uses this"
)]
impl Backend {
    /// Makes the fake's next `times` PATCHes of `resource` answer 500 (fake only: the real
    /// server gets no injected faults).
    pub(crate) fn fail_next_patches(&self, resource: &str, times: usize) -> bool {
        let Some(fake) = &self.fake else {
            return false;
        };
        fake.faults().inject(
            kinformer_testing::Fault::status(500)
                .verb(kinformer_testing::Verb::Patch)
                .resource(resource)
                .times(times),
        );
        true
    }
}

/// What the restart test (`e2e_restart.rs`) adds.
#[allow(
    dead_code,
    reason = "e2e_support is compiled into every e2e binary, and only e2e_restart uses these"
)]
impl Backend {
    /// Why the suite cannot kill and restart this backend's API server, or `None` when it can:
    /// the fake (in process), the local control plane and kind (through kinformer-controlplane)
    /// can; a foreign cluster cannot, its kube-apiserver is not ours to kill.
    pub(crate) fn api_server_restart_unavailable(&self) -> Option<String> {
        match self.kind {
            BackendKind::Fake => None,
            BackendKind::Local | BackendKind::Kind if self.apiserver.is_some() => None,
            BackendKind::Local | BackendKind::Kind => Some(format!(
                "this test restarts kube-apiserver, which it finds through {CONTROL_PLANE_ENV} \
                 (local) or {KIND_NODE_ENV} (kind), and neither is set: run it through \
                 `cargo xtask e2e --local` or `--kind`, or after `eval $(cargo xtask \
                 control-plane env)`"
            )),
            BackendKind::Kubeconfig => Some(
                "this test does not apply to the kubeconfig backend: it kills and restarts \
                 kube-apiserver, which only the fake, the local control plane and kind let the \
                 suite do (`cargo xtask e2e` skips it there)"
                    .to_owned(),
            ),
        }
    }

    /// Takes the API server down the way a crash does: the fake closes its listener and every
    /// connection (keeping objects and history, as etcd does); on the local control plane and
    /// kind kube-apiserver is SIGKILLed. Returns once it is down, with how long that took.
    ///
    /// # Panics
    ///
    /// When [`api_server_restart_unavailable`](Self::api_server_restart_unavailable) says why,
    /// or the kill fails.
    pub(crate) async fn kill_api_server(&self) -> Duration {
        let started = tokio::time::Instant::now();
        if let Some(fake) = &self.fake {
            fake.stop_listener().await;
        } else {
            self.on_apiserver("kill", |apiserver| apiserver.kill_apiserver())
                .await;
        }
        started.elapsed()
    }

    /// Brings the API server back on the same address, with the same certificates, tokens and
    /// storage, and returns once it is ready (kube-apiserver: `/readyz`), with how long that
    /// took.
    ///
    /// # Panics
    ///
    /// As for [`kill_api_server`](Self::kill_api_server).
    pub(crate) async fn start_api_server(&self) -> Duration {
        let started = tokio::time::Instant::now();
        if let Some(fake) = &self.fake {
            fake.restart_listener()
                .await
                .expect("the fake listens again on its port");
        } else {
            self.on_apiserver("start", |apiserver| apiserver.start_apiserver())
                .await;
        }
        started.elapsed()
    }

    /// Runs `action` on kube-apiserver's off switch, off the async workers: it blocks while it
    /// waits for the process to go or for `/readyz`.
    async fn on_apiserver(
        &self,
        what: &'static str,
        action: fn(&mut (dyn ApiServerOutage + Send)) -> Result<(), String>,
    ) {
        if let Some(why) = self.api_server_restart_unavailable() {
            panic!("{why}");
        }
        let apiserver = Arc::clone(
            self.apiserver
                .as_ref()
                .expect("the local and kind backends have a control plane"),
        );
        tokio::task::spawn_blocking(move || {
            let mut apiserver = apiserver.lock().expect("never poisoned");
            action(&mut *apiserver)
        })
        .await
        .expect("the control plane does not panic")
        .unwrap_or_else(|err| panic!("could not {what} kube-apiserver: {err}"));
    }
}

/// `options` with a compact cache unless `KINFORMER_CACHE` is `decoded`, as
/// `FactoryOptions::from_env` gives the factory's informers: `.ci/run` runs the suite against
/// the local control plane both ways.
pub(crate) fn cache_from_env<K>(
    options: kinformer::informer::InformerOptions<K>,
) -> kinformer::informer::InformerOptions<K>
where
    K: kube_client::Resource<DynamicType = ()>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    match std::env::var(kinformer::factory::CACHE_ENV) {
        Ok(kind) if kind.eq_ignore_ascii_case("decoded") => options,
        _ => options.cache(kinformer::informer::InformerCache::Compact {
            codec: kinformer::reflector::compact_codec::<K>(),
            hot_capacity: 0,
        }),
    }
}

/// A kubeconfig file for the processes a test starts ([`Backend::kubeconfig_file`]); one
/// written for the fake server is removed when this drops (a real backend's is xtask's).
pub(crate) struct KubeconfigFile {
    path: PathBuf,
    written: bool,
}

impl KubeconfigFile {
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for KubeconfigFile {
    fn drop(&mut self) {
        if self.written {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
