//! client-go itself, run against kinformer-testing's fake API server: the strongest evidence
//! that the fake serves what a real informer needs.
//!
//! The `informer-peer` Go program (`xtask/peers/client-go/cmd/informer-peer`) runs client-go
//! v0.37.2's `SharedInformerFactory` with Pod and ConfigMap informers against the fake's
//! kubeconfig and prints every handler call as a JSON line. The test drives writes through the
//! fake's handle, breaks the watches (429 on every re-watch, then `close_watches`) while objects
//! change and the history is compacted, so client-go must take the 410 Expired path and relist,
//! and checks that client-go's final lister view is exactly the fake's contents and that every
//! key's events are the ones client-go's informer contract promises, in resourceVersion order.
//! It runs with client-go's defaults (JSON, streaming lists), with protobuf preferred, and with
//! classic LIST+WATCH. docs/bench-sections/conformance.md records the findings.
//!
//! The test fails, never skips, when Go is missing or the peer does not build.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::OnceLock,
    thread,
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_testing::{FakeApiServer, Fault, Verb, fixtures};
use kinformer_tests::build_peer;
use kube_client::{Api, api::ListParams};
use serde::Deserialize;
use serde_json::Value;
use tokio::{sync::mpsc, time::Instant};

/// How long any one expectation may take; client-go's watch backoff after a 429 is about 1-2 s.
const PROMPT: Duration = Duration::from_secs(15);

/// How the client-go peer is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientSetup {
    /// client-go v0.37's defaults: JSON only (`rest.Config.ContentType` unset) and the
    /// `WatchListClient` feature on, so every list is a streaming watch
    /// (`sendInitialEvents=true`) ending in a bookmark, never a LIST.
    Defaults,
    /// What kube-controller-manager configures:
    /// `Accept: application/vnd.kubernetes.protobuf,application/json`. The fake answers in
    /// protobuf, so client-go's own decoder reads kinformer_protobuf's encoding.
    ProtobufThenJson,
    /// `KUBE_FEATURE_WatchListClient=false`: the classic reflector, LIST then WATCH, and a
    /// LIST again after the 410.
    ListThenWatch,
}

/// One handler call, as the peer prints it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct Event {
    event: String,
    resource: String,
    key: String,
    rv: String,
    #[serde(default)]
    old_rv: Option<String>,
    #[serde(default)]
    initial: Option<bool>,
    #[serde(default)]
    tombstone: Option<bool>,
}

/// `(resource, key)`: ConfigMaps and Pods may share a key.
type Slot = (String, String);

fn slot(resource: &str, key: &str) -> Slot {
    (resource.to_owned(), key.to_owned())
}

#[derive(Debug)]
enum Line {
    Event(Event),
    Synced(Value),
    Final(Value),
    Unreadable(String),
}

/// The running Go program, its output lines arriving on a channel.
struct InformerPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Line>,
    stderr: PathBuf,
    events: Vec<Event>,
}

impl InformerPeer {
    fn start(kubeconfig: &Path, work_dir: &Path, setup: ClientSetup) -> Self {
        // Built once per test binary: the tests run on parallel threads of one process, and
        // build_peer's scratch file is named by process id.
        static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let binary = BINARY.get_or_init(|| {
            build_peer("informer-peer", Path::new(env!("CARGO_TARGET_TMPDIR")))
                .map_err(|err| err.to_string())
        });
        let binary = binary
            .as_ref()
            .unwrap_or_else(|err| panic!("the client-go informer peer is required: {err}"));
        let stderr = work_dir.join("informer-peer.stderr");
        let stderr_file = fs::File::create(&stderr).expect("creating the peer's stderr file");
        let mut child = Command::new(binary)
            .arg("-kubeconfig")
            .arg(kubeconfig)
            // A safety net: the peer ends on its own even if this test dies without closing stdin.
            .arg("-duration")
            .arg("60s")
            // The reflector's own account of the relist (expired watch, list) goes to stderr.
            .args(match setup {
                ClientSetup::Defaults | ClientSetup::ListThenWatch => &["-v=4"][..],
                // -v=7 adds request headers, to show what was asked for.
                ClientSetup::ProtobufThenJson => &["-v=7", "-protobuf"][..],
            })
            .env(
                "KUBE_FEATURE_WatchListClient",
                (setup != ClientSetup::ListThenWatch).to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // A file, not a pipe: klog's warnings about broken watches must never block the peer.
            .stderr(stderr_file)
            .spawn()
            .expect("starting the informer peer");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("the peer's stdout is piped");
        let (sender, lines) = mpsc::unbounded_channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let parsed = match serde_json::from_str::<Value>(&line) {
                    Ok(value) if value.get("event").is_some() => {
                        serde_json::from_value(value).map_or(Line::Unreadable(line), Line::Event)
                    }
                    Ok(value) if value.get("synced").is_some() => Line::Synced(value),
                    Ok(value) if value.get("final").is_some() => Line::Final(value),
                    _ => Line::Unreadable(line),
                };
                if sender.send(parsed).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            stderr,
            events: Vec::new(),
        }
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The next line that is not an event (events are collected on the way).
    async fn next_report(&mut self, what: &str) -> Value {
        let deadline = Instant::now() + PROMPT;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv()).await;
            match line {
                Ok(Some(Line::Event(event))) => self.events.push(event),
                Ok(Some(Line::Synced(value) | Line::Final(value))) => return value,
                Ok(Some(Line::Unreadable(line))) => panic!("unreadable peer line {line:?}"),
                Ok(None) => panic!("the peer exited before {what}; stderr:\n{}", self.stderr()),
                Err(_) => panic!(
                    "no {what} within {PROMPT:?}; events so far: {:#?}\nstderr:\n{}",
                    self.events,
                    self.stderr()
                ),
            }
        }
    }

    /// Collects events until every slot's last event matches `expected` (rv, or None for
    /// absent).
    async fn converge(&mut self, expected: &BTreeMap<Slot, Option<String>>, what: &str) {
        let deadline = Instant::now() + PROMPT;
        while !self.matches(expected) {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(Line::Event(event))) => self.events.push(event),
                Ok(Some(other)) => panic!("unexpected peer line {other:?} while {what}"),
                Ok(None) => panic!("the peer exited while {what}; stderr:\n{}", self.stderr()),
                Err(_) => panic!(
                    "client-go did not converge while {what}: want {expected:#?}\nevents: {:#?}\nstderr:\n{}",
                    self.events,
                    self.stderr()
                ),
            }
        }
    }

    fn matches(&self, expected: &BTreeMap<Slot, Option<String>>) -> bool {
        let mut last: BTreeMap<Slot, Option<String>> = BTreeMap::new();
        for event in &self.events {
            let state = (event.event != "DELETE").then(|| event.rv.clone());
            last.insert(slot(&event.resource, &event.key), state);
        }
        last.retain(|_, state| state.is_some());
        let mut want = expected.clone();
        want.retain(|_, state| state.is_some());
        last == want
    }

    /// Closes stdin and returns the peer's final lister view.
    async fn finish(&mut self) -> Value {
        drop(self.stdin.take());
        let report = self.next_report("the final lister view").await;
        report["final"].clone()
    }

    fn events_of(&self, resource: &str, key: &str) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|event| event.resource == resource && event.key == key)
            .collect()
    }
}

impl Drop for InformerPeer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        // The peer exits on stdin EOF; kill is only for a test that failed mid-way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rv_of(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("the fake stamps a resourceVersion")
        .to_owned()
}

fn key_of(object: &Value) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn labelled(mut object: Value, value: &str) -> Value {
    object["metadata"]["labels"]["conformance-step"] = Value::from(value);
    object
}

/// What the test did, and what the fake said each write's resourceVersion was.
struct Fake {
    server: FakeApiServer,
    /// The current resourceVersion of every slot the test touched (None: deleted).
    state: BTreeMap<Slot, Option<String>>,
    /// Objects by slot, to update from.
    objects: BTreeMap<Slot, Value>,
}

impl Fake {
    fn resource(object: &Value) -> &'static str {
        match object["kind"].as_str() {
            Some("Pod") => "pods",
            _ => "configmaps",
        }
    }

    fn create(&mut self, object: Value) -> String {
        let created = self
            .server
            .create_object(object)
            .expect("the fake creates it");
        let slot = slot(Self::resource(&created), &key_of(&created));
        let rv = rv_of(&created);
        self.state.insert(slot.clone(), Some(rv.clone()));
        self.objects.insert(slot, created);
        rv
    }

    fn update(&mut self, resource: &str, key: &str, step: &str) -> String {
        let current = self.objects[&slot(resource, key)].clone();
        let updated = self
            .server
            .update_object(labelled(current, step))
            .expect("the fake updates it");
        let rv = rv_of(&updated);
        self.state.insert(slot(resource, key), Some(rv.clone()));
        self.objects.insert(slot(resource, key), updated);
        rv
    }

    /// Deletes and returns the deletion's resourceVersion.
    fn delete(&mut self, resource: &str, key: &str) -> String {
        let (namespace, name) = key.split_once('/').expect("namespaced key");
        let kind = if resource == "pods" {
            "Pod"
        } else {
            "ConfigMap"
        };
        self.server
            .delete_object("v1", kind, Some(namespace), name)
            .expect("the fake deletes it");
        self.state.insert(slot(resource, key), None);
        self.server.resource_version().to_string()
    }

    /// Every Pod and ConfigMap the fake holds, as the peer reports its listers.
    async fn contents(&self) -> Value {
        let client = self.server.client().expect("a client for the fake");
        let mut report = serde_json::Map::new();
        let pods = Api::<Pod>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("listing pods");
        let config_maps = Api::<ConfigMap>::all(client)
            .list(&ListParams::default())
            .await
            .expect("listing configmaps");
        let entry = |meta: &kube_client::core::ObjectMeta| {
            serde_json::json!({
                "key": format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default()),
                "rv": meta.resource_version.as_deref().unwrap_or_default(),
            })
        };
        let mut sorted = |name: &str, mut entries: Vec<Value>| {
            entries.sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
            report.insert(name.to_owned(), Value::Array(entries));
        };
        sorted(
            "pods",
            pods.items.iter().map(|p| entry(&p.metadata)).collect(),
        );
        sorted(
            "configmaps",
            config_maps
                .items
                .iter()
                .map(|c| entry(&c.metadata))
                .collect(),
        );
        Value::Object(report)
    }
}

fn number(rv: &str) -> u64 {
    rv.parse()
        .unwrap_or_else(|_| panic!("resourceVersion {rv:?} is not a number"))
}

fn add(resource: &str, key: &str, rv: &str, initial: bool) -> Event {
    Event {
        event: "ADD".into(),
        resource: resource.into(),
        key: key.into(),
        rv: rv.into(),
        old_rv: None,
        initial: Some(initial),
        tombstone: None,
    }
}

fn update(resource: &str, key: &str, old_rv: &str, rv: &str) -> Event {
    Event {
        event: "UPDATE".into(),
        resource: resource.into(),
        key: key.into(),
        rv: rv.into(),
        old_rv: Some(old_rv.into()),
        initial: None,
        tombstone: None,
    }
}

fn delete(resource: &str, key: &str, rv: &str, tombstone: bool) -> Event {
    Event {
        event: "DELETE".into(),
        resource: resource.into(),
        key: key.into(),
        rv: rv.into(),
        old_rv: None,
        initial: None,
        tombstone: Some(tombstone),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_go_informer_factory_sees_exactly_what_the_fake_serves_across_a_compacted_relist()
{
    informer_factory_scenario(ClientSetup::Defaults).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_go_informer_factory_preferring_protobuf_decodes_the_fakes_protobuf() {
    informer_factory_scenario(ClientSetup::ProtobufThenJson).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_go_informer_factory_without_streaming_lists_lists_and_relists_the_fake() {
    informer_factory_scenario(ClientSetup::ListThenWatch).await;
}

/// Seeds the fake, syncs client-go, writes live, breaks and compacts, writes live again, and
/// compares client-go's events and listers with the fake.
async fn informer_factory_scenario(setup: ClientSetup) {
    let server = FakeApiServer::start().await.expect("the fake starts");
    let work_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "client-go-conformance-{}-{setup:?}",
        std::process::id()
    ));
    fs::create_dir_all(&work_dir).expect("creating the work dir");
    let kubeconfig = work_dir.join("kubeconfig");
    fs::File::create(&kubeconfig)
        .and_then(|mut file| file.write_all(server.kubeconfig().as_bytes()))
        .expect("writing the kubeconfig");
    let mut fake = Fake {
        server,
        state: BTreeMap::new(),
        objects: BTreeMap::new(),
    };
    let mut seeded = BTreeMap::new();
    for i in 0..5 {
        let rv = fake.create(fixtures::pod(i));
        seeded.insert(slot("pods", &key_of(&fixtures::pod(i))), rv);
    }
    for i in 0..4 {
        let rv = fake.create(fixtures::config_map(i));
        seeded.insert(slot("configmaps", &key_of(&fixtures::config_map(i))), rv);
    }
    let seed = |resource: &str, key: &str| seeded[&slot(resource, key)].clone();

    let mut peer = InformerPeer::start(&kubeconfig, &work_dir, setup);
    let synced = peer.next_report("the synced report").await;
    assert_eq!(
        synced,
        serde_json::json!({ "synced": true, "pods": 5, "configmaps": 4 }),
        "client-go's caches sync with the seeded objects"
    );

    // Connected: every write arrives as its own watch event.
    let mut expected: Vec<Event> = seeded
        .iter()
        .map(|((resource, key), rv)| add(resource, key, rv, true))
        .collect();
    let pod_10 = fake.create(fixtures::pod(10));
    expected.push(add("pods", "ns-0/pod-10", &pod_10, false));
    let pod_0_a = fake.update("pods", "ns-0/pod-0", "a");
    expected.push(update(
        "pods",
        "ns-0/pod-0",
        &seed("pods", "ns-0/pod-0"),
        &pod_0_a,
    ));
    let pod_0_b = fake.update("pods", "ns-0/pod-0", "b");
    expected.push(update("pods", "ns-0/pod-0", &pod_0_a, &pod_0_b));
    let pod_1_gone = fake.delete("pods", "ns-1/pod-1");
    expected.push(delete("pods", "ns-1/pod-1", &pod_1_gone, false));
    let cm_10 = fake.create(fixtures::config_map(10));
    expected.push(add("configmaps", "ns-0/config-10", &cm_10, false));
    let cm_0 = fake.update("configmaps", "ns-0/config-0", "a");
    expected.push(update(
        "configmaps",
        "ns-0/config-0",
        &seed("configmaps", "ns-0/config-0"),
        &cm_0,
    ));
    let cm_1_gone = fake.delete("configmaps", "ns-1/config-1");
    expected.push(delete("configmaps", "ns-1/config-1", &cm_1_gone, false));
    peer.converge(&fake.state, "watching live writes").await;

    // Disconnected: re-watches get 429 (retriable: the reflector backs off and retries at the
    // same resourceVersion) while the objects change and the history is compacted, so the
    // retry that finally succeeds gets 410 Expired and client-go relists.
    let watches_before = fake.server.faults().request_count(Verb::Watch, "pods");
    fake.server
        .faults()
        .inject(Fault::status(429).verb(Verb::Watch).times(usize::MAX));
    fake.server.faults().close_watches();
    let deadline = Instant::now() + PROMPT;
    while fake.server.faults().request_count(Verb::Watch, "pods") == watches_before {
        assert!(Instant::now() < deadline, "client-go never re-watched pods");
        // Polling: the request count has no signal to wait on.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fake.update("pods", "ns-2/pod-2", "a");
    let pod_2 = fake.update("pods", "ns-2/pod-2", "b");
    fake.delete("pods", "ns-3/pod-3");
    fake.delete("pods", "ns-4/pod-4");
    let pod_4_again = fake.create(fixtures::pod(4));
    let pod_11 = fake.create(fixtures::pod(11));
    fake.create(fixtures::pod(12));
    fake.delete("pods", "ns-2/pod-12");
    fake.delete("configmaps", "ns-2/config-2");
    fake.server.compact();
    fake.server.faults().clear();
    peer.converge(&fake.state, "relisting after the compaction")
        .await;

    // What client-go's relist makes of that: objects gone meanwhile are DeletedFinalStateUnknown
    // tombstones carrying the last state the informer knew; every listed object already in the
    // cache is an update, unchanged ones included (old and new resourceVersion equal), and
    // intermediate states (pod-2's first update, pod-12's whole life) are never seen.
    expected.push(delete(
        "pods",
        "ns-3/pod-3",
        &seed("pods", "ns-3/pod-3"),
        true,
    ));
    expected.push(delete(
        "configmaps",
        "ns-2/config-2",
        &seed("configmaps", "ns-2/config-2"),
        true,
    ));
    expected.push(update("pods", "ns-0/pod-0", &pod_0_b, &pod_0_b));
    expected.push(update("pods", "ns-0/pod-10", &pod_10, &pod_10));
    expected.push(update(
        "pods",
        "ns-2/pod-2",
        &seed("pods", "ns-2/pod-2"),
        &pod_2,
    ));
    // Deleted and created again under the same name: the relist sees one object, so an update.
    expected.push(update(
        "pods",
        "ns-4/pod-4",
        &seed("pods", "ns-4/pod-4"),
        &pod_4_again,
    ));
    expected.push(add("pods", "ns-1/pod-11", &pod_11, false));
    expected.push(update("configmaps", "ns-0/config-0", &cm_0, &cm_0));
    expected.push(update("configmaps", "ns-0/config-10", &cm_10, &cm_10));
    expected.push(update(
        "configmaps",
        "ns-3/config-3",
        &seed("configmaps", "ns-3/config-3"),
        &seed("configmaps", "ns-3/config-3"),
    ));

    // Reconnected: live events again.
    let pod_11_a = fake.update("pods", "ns-1/pod-11", "a");
    expected.push(update("pods", "ns-1/pod-11", &pod_11, &pod_11_a));
    let cm_3_gone = fake.delete("configmaps", "ns-3/config-3");
    expected.push(delete("configmaps", "ns-3/config-3", &cm_3_gone, false));
    peer.converge(&fake.state, "watching after the relist")
        .await;

    let lister_view = peer.finish().await;
    // Counted before this test's own LISTs below.
    let lists = fake.server.faults().request_count(Verb::List, "pods")
        + fake.server.faults().request_count(Verb::List, "configmaps");
    assert_eq!(
        lister_view,
        fake.contents().await,
        "client-go's listers hold exactly the fake's objects at their resourceVersions"
    );

    let slots: BTreeSet<Slot> = expected
        .iter()
        .chain(&peer.events)
        .map(|event| slot(&event.resource, &event.key))
        .collect();
    for (resource, key) in &slots {
        let seen: Vec<Event> = peer.events_of(resource, key).into_iter().cloned().collect();
        let want: Vec<Event> = expected
            .iter()
            .filter(|event| &event.resource == resource && &event.key == key)
            .cloned()
            .collect();
        assert_eq!(
            seen,
            want,
            "events for {resource} {key}\nstderr:\n{}",
            peer.stderr()
        );
        for pair in seen.windows(2) {
            assert!(
                number(&pair[0].rv) <= number(&pair[1].rv),
                "{resource} {key} went back in resourceVersion: {pair:?}"
            );
        }
    }

    // The relist was client-go's answer to 410 Expired, not to anything else.
    let log = peer.stderr();
    for kind in ["*v1.Pod", "*v1.ConfigMap"] {
        assert!(
            log.lines().any(|line| line.contains("\"Watch closed\"")
                && line.contains(&format!("type=\"{kind}\""))
                && line.contains("too old resource version")),
            "client-go's {kind} watch should end in 410 Expired; stderr:\n{log}"
        );
    }
    match setup {
        ClientSetup::Defaults | ClientSetup::ProtobufThenJson => {
            assert_eq!(lists, 0, "streaming lists replace every LIST");
        }
        ClientSetup::ListThenWatch => {
            assert_eq!(
                lists, 4,
                "one LIST per informer at start and one per relist"
            );
        }
    }
    if setup == ClientSetup::ProtobufThenJson {
        assert!(
            log.contains("Accept: application/vnd.kubernetes.protobuf,application/json"),
            "client-go asked for protobuf first; stderr:\n{log}"
        );
    }
    let served = fake.server.content_types();
    let protobuf_served = served
        .keys()
        .any(|content_type| content_type.starts_with("application/vnd.kubernetes.protobuf"));
    // client-go's clientsets ask for protobuf by default (as -protobuf does explicitly), so
    // in every setup client-go decoded the fake's protobuf.
    assert!(
        protobuf_served,
        "the fake answered client-go in protobuf: {served:?}"
    );
    let _ = fs::remove_dir_all(&work_dir);
}
