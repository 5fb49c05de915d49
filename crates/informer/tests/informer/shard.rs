//! Informers of shards over real HTTP: three informers, shard 0, 1 and 2 of 3, each hold exactly
//! the Pods whose UID hashes into their shard, through the list, adds, updates and deletes;
//! whether the fake API server filters (as kube-apiserver with `ShardedListAndWatch` on) or
//! ignores the selector (the gate off), in protobuf and in JSON. The caches are the same both
//! ways; only who filtered differs, and the informer says which. An informer moved to another
//! shard while it runs hands off as adds and deletions marked as having left the shard, and
//! says when its cache holds the new shard whole.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{InformerOptions, SharedIndexInformer, WaitError};
use kinformer_reflector::{KubeListerWatcher, ShardMode, WireFormat};
use kinformer_store::{Object, ObjectOrTombstone, Shard};
use kinformer_testing::{FakeApiServer, Fault, ServerOptions, Verb, fixtures, wait_until};
use kube_client::{Api, core::PartialObjectMeta};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
const SHARDS: u64 = 3;

fn key(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The keys of the server's Pods in `shard`, by the shard's own hash of each UID.
fn model(server_pods: &[Value], shard: &Shard) -> BTreeSet<String> {
    server_pods
        .iter()
        .filter(|pod| {
            let typed: Pod = serde_json::from_value((*pod).clone()).expect("a Pod");
            shard.contains(&typed)
        })
        .map(key)
        .collect()
}

fn cached<K: Object>(informer: &SharedIndexInformer<K>) -> BTreeSet<String> {
    informer.cache().list_keys().into_iter().collect()
}

struct Running<K: Object> {
    informers: Vec<(Shard, SharedIndexInformer<K>)>,
    token: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<Result<(), kinformer_informer::Error>>>,
}

impl<K: Object> Running<K> {
    fn start(lister_watcher: impl Fn() -> KubeListerWatcher<K>) -> Self
    where
        K: serde::de::DeserializeOwned,
    {
        Self::start_with(lister_watcher, |options| options)
    }

    fn start_with(
        lister_watcher: impl Fn() -> KubeListerWatcher<K>,
        options: impl Fn(InformerOptions<K>) -> InformerOptions<K>,
    ) -> Self
    where
        K: serde::de::DeserializeOwned,
    {
        let token = CancellationToken::new();
        let mut informers = Vec::new();
        let mut tasks = Vec::new();
        for index in 0..SHARDS {
            let shard = Shard::of(index, SHARDS).expect("a shard");
            let informer = SharedIndexInformer::new(
                lister_watcher(),
                options(InformerOptions::new().page_size(7).shard(shard.clone())),
            );
            tasks.push(tokio::spawn({
                let (informer, token) = (informer.clone(), token.clone());
                async move { informer.run(token).await }
            }));
            informers.push((shard, informer));
        }
        Self {
            informers,
            token,
            tasks,
        }
    }

    async fn assert_hold(&self, server_pods: &[Value], what: &str) {
        for (shard, informer) in &self.informers {
            let expected = model(server_pods, shard);
            assert!(
                wait_until(WAIT, || informer.has_synced()
                    && cached(informer) == expected)
                .await,
                "{what}: shard {shard} holds {:?}, not {expected:?}",
                cached(informer)
            );
        }
        let mut union = BTreeSet::new();
        let mut total = 0;
        for (_, informer) in &self.informers {
            let keys = cached(informer);
            total += keys.len();
            union.extend(keys);
        }
        let all: BTreeSet<_> = server_pods.iter().map(key).collect();
        assert_eq!(union, all, "{what}: the shards together hold every Pod");
        assert_eq!(total, all.len(), "{what}: and each in one shard only");
    }

    fn assert_filtered_by(&self, mode: ShardMode) {
        for (shard, informer) in &self.informers {
            let stats = informer.health().shard.expect("a sharded informer");
            assert_eq!(stats.mode, Some(mode), "shard {shard}: {stats:?}");
            if mode == ShardMode::Server {
                assert_eq!(stats.out_of_shard, 0, "shard {shard}: {stats:?}");
            } else {
                assert!(stats.out_of_shard > 0, "shard {shard}: {stats:?}");
            }
        }
    }

    async fn stop(self) {
        self.token.cancel();
        for task in self.tasks {
            task.await.expect("no panic").expect("the informer ran");
        }
    }
}

/// A fake server that filters by shard selectors (or, without `server_filters`, ignores them),
/// seeded with `n` fixture Pods, and the Pods as the server stored them.
async fn seeded(server_filters: bool, n: usize) -> (FakeApiServer, Vec<Value>) {
    let server =
        FakeApiServer::start_with(ServerOptions::default().sharded_list_and_watch(server_filters))
            .await
            .expect("the fake server starts");
    let pods = (0..n)
        .map(|i| server.create_object(fixtures::pod(i)).expect("seeded"))
        .collect();
    (server, pods)
}

async fn three_shards_hold_every_pod_once(
    server_filters: bool,
    format: WireFormat,
    watch_list: bool,
) {
    let (server, mut pods) = seeded(server_filters, 90).await;
    let client = server.client().expect("a client");
    let running = Running::start_with(
        || KubeListerWatcher::new(Api::<Pod>::all(client.clone())).wire_format(format),
        |options| options.use_watch_list(watch_list),
    );
    running.assert_hold(&pods, "after the list").await;

    // Adds, updates and deletes reach the shard that holds each Pod, and only it.
    for i in 90..120 {
        pods.push(server.create_object(fixtures::pod(i)).expect("created"));
    }
    let mut updated = BTreeSet::new();
    for pod in pods.iter_mut().step_by(7) {
        pod["metadata"]["labels"]["changed"] = json!("yes");
        *pod = server.update_object(pod.clone()).expect("updated");
        updated.insert(key(pod));
    }
    for pod in pods.drain(..12) {
        updated.remove(&key(&pod));
        server
            .delete_object(
                "v1",
                "Pod",
                pod["metadata"]["namespace"].as_str(),
                pod["metadata"]["name"].as_str().unwrap_or_default(),
            )
            .expect("deleted");
    }
    running.assert_hold(&pods, "after the watch").await;
    for (shard, informer) in &running.informers {
        let mine: Vec<_> = model(&pods, shard)
            .intersection(&updated)
            .cloned()
            .collect();
        let changed = |key: &String| {
            informer.cache().get_by_key(key).is_some_and(|pod| {
                pod.labels()
                    .is_some_and(|labels| labels.contains_key("changed"))
            })
        };
        assert!(
            wait_until(WAIT, || mine.iter().all(changed)).await,
            "shard {shard} saw the updates of its Pods {mine:?}"
        );
    }
    running.assert_filtered_by(if server_filters {
        ShardMode::Server
    } else {
        ShardMode::Client
    });
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_filtered_by_the_server_in_protobuf() {
    three_shards_hold_every_pod_once(true, WireFormat::Protobuf, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_filtered_by_the_server_in_json() {
    three_shards_hold_every_pod_once(true, WireFormat::Json, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_filtered_by_the_informer_when_the_server_ignores_the_selector_in_protobuf() {
    three_shards_hold_every_pod_once(false, WireFormat::Protobuf, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_filtered_by_the_informer_when_the_server_ignores_the_selector_in_json() {
    three_shards_hold_every_pod_once(false, WireFormat::Json, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_of_shards_filtered_by_the_server() {
    three_shards_hold_every_pod_once(true, WireFormat::Protobuf, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_of_shards_filtered_by_the_informer() {
    three_shards_hold_every_pod_once(false, WireFormat::Protobuf, true).await;
}

/// A metadata-only list comes without `shardInfo` even from a server that filters (its list
/// type has no such field); a list of 90 Pods with none from outside the shard still tells the
/// informer the server filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_informer_of_a_shard_tells_a_filtering_server_without_its_echo() {
    let (server, pods) = seeded(true, 90).await;
    let client = server.client().expect("a client");
    let running = Running::<PartialObjectMeta<Pod>>::start(|| {
        KubeListerWatcher::metadata(Api::all(client.clone()))
    });
    running.assert_hold(&pods, "a metadata-only list").await;
    running.assert_filtered_by(ShardMode::Server);
    running.stop().await;
}

/// What a handler of a moving shard was told, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Told {
    Added(String),
    /// A deletion: its key, whether it was inferred (a tombstone), and whether the object left
    /// the shard.
    Deleted {
        key: String,
        tombstone: bool,
        left_shard: bool,
    },
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.namespace().unwrap_or_default(),
        pod.name().unwrap_or_default()
    )
}

fn told(informer: &SharedIndexInformer<Pod>) -> Arc<Mutex<Vec<Told>>> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (adds, deletes) = (Arc::clone(&log), Arc::clone(&log));
    informer
        .add_event_handler(
            informer
                .handler_funcs()
                .add_func(move |pod, _| adds.lock().push(Told::Added(key_of(&pod))))
                .delete_func(move |deleted| {
                    let (key, tombstone, left_shard) = match &deleted {
                        ObjectOrTombstone::Object(pod) => (key_of(pod), false, false),
                        ObjectOrTombstone::Tombstone(tombstone) => {
                            (tombstone.key.clone(), true, tombstone.left_shard)
                        }
                    };
                    deletes.lock().push(Told::Deleted {
                        key,
                        tombstone,
                        left_shard,
                    });
                }),
        )
        .expect("registered");
    log
}

/// An informer moved from shard 0 of 2 to shard 1 of 2 while it runs: it lists the new shard
/// at once, its cache then holds exactly the new shard, and its handler is told of the hand-off
/// as what it is: an add for every Pod the shard gained, and for every Pod it lost a tombstone
/// marked `left_shard` (never a plain deletion). A Pod deleted afterwards is a deletion again.
async fn an_informer_moved_to_another_shard(server_filters: bool, watch_list: bool) {
    let (server, mut pods) = seeded(server_filters, 60).await;
    let client = server.client().expect("a client");
    let (from, to) = (
        Shard::of(0, 2).expect("a shard"),
        Shard::of(1, 2).expect("a shard"),
    );
    let informer = SharedIndexInformer::new(
        KubeListerWatcher::new(Api::<Pod>::all(client)),
        InformerOptions::new()
            .page_size(7)
            .use_watch_list(watch_list)
            .shard(from.clone()),
    );
    let log = told(&informer);
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    let (before, after) = (model(&pods, &from), model(&pods, &to));
    assert!(
        wait_until(WAIT, || informer.has_synced()
            && cached(&informer) == before)
        .await,
        "shard {from} holds {:?}",
        cached(&informer)
    );
    assert!(
        !before.is_empty() && !after.is_empty(),
        "60 Pods fill both halves"
    );
    // The handler runs on its own thread: its adds of the list may come after the cache has it.
    assert!(
        wait_until(WAIT, || log.lock().len() == before.len()).await,
        "the handler is told of the list: {:?}",
        log.lock()
    );
    log.lock().clear();

    informer.set_shard(to.clone()).expect("a sharded informer");
    assert!(
        wait_until(WAIT, || cached(&informer) == after).await,
        "after the move the cache holds shard {to}: {:?}",
        cached(&informer)
    );
    assert!(
        wait_until(WAIT, || log.lock().len() == before.len() + after.len()).await,
        "one notification per Pod gained or lost: {:?}",
        log.lock()
    );
    let told = log.lock().clone();
    let added: BTreeSet<String> = told
        .iter()
        .filter_map(|told| match told {
            Told::Added(key) => Some(key.clone()),
            Told::Deleted { .. } => None,
        })
        .collect();
    assert_eq!(added, after, "every Pod the shard gained, as an add");
    let left: BTreeSet<String> = told
        .iter()
        .filter_map(|told| match told {
            Told::Deleted {
                key,
                tombstone: true,
                left_shard: true,
            } => Some(key.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        left, before,
        "every Pod it lost, as having left the shard: {told:?}"
    );
    let relists = informer.health().reflector.relists;
    assert!(
        relists.contains(&("shard changed", 1)),
        "one relist, for the shard: {relists:?}"
    );

    // Moving to the same shard again changes nothing; a deletion in the cluster is a deletion.
    informer.set_shard(to.clone()).expect("a sharded informer");
    log.lock().clear();
    let mine = pods
        .iter()
        .position(|pod| after.contains(&key(pod)))
        .expect("a Pod of the new shard");
    let gone = pods.remove(mine);
    server
        .delete_object(
            "v1",
            "Pod",
            gone["metadata"]["namespace"].as_str(),
            gone["metadata"]["name"].as_str().unwrap_or_default(),
        )
        .expect("deleted");
    assert!(
        wait_until(WAIT, || cached(&informer) == model(&pods, &to)).await,
        "the deletion reached the cache"
    );
    assert_eq!(
        *log.lock(),
        [Told::Deleted {
            key: key(&gone),
            tombstone: false,
            left_shard: false,
        }]
    );
    assert_eq!(
        informer.health().reflector.relists,
        relists,
        "no relist for the same shard"
    );
    token.cancel();
    task.await.expect("no panic").expect("the informer ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_moved_on_a_filtering_server_hands_off_as_adds_and_left_shard_deletes() {
    an_informer_moved_to_another_shard(true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_moved_on_a_server_that_ignores_the_selector_hands_off_the_same_way() {
    an_informer_moved_to_another_shard(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_moved_under_streaming_lists_hands_off_the_same_way() {
    an_informer_moved_to_another_shard(true, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_informer_of_a_shard_can_move() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let informer = SharedIndexInformer::new(
        KubeListerWatcher::new(Api::<Pod>::all(client)),
        InformerOptions::new(),
    );
    let refused = informer
        .set_shard(Shard::of(0, 2).expect("a shard"))
        .expect_err("no shard to move");
    assert!(
        matches!(refused, kinformer_informer::Error::Options { .. }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("InformerOptions::shard"),
        "{refused}"
    );
}

/// A wait for a shard returns once the cache holds that shard whole, and not before: while the
/// list of the new shard fails, the cache still holds the old one and the wait goes on; a wait
/// for a shard the informer is not set to, or is moved away from while it waits, fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_a_shard_returns_once_the_cache_holds_it_whole() {
    let (server, pods) = seeded(true, 60).await;
    let client = server.client().expect("a client");
    let shard = |index, count| Shard::of(index, count).expect("a shard");
    let (first, second, third) = (shard(0, 2), shard(1, 2), shard(0, 3));
    let informer = SharedIndexInformer::new(
        KubeListerWatcher::new(Api::<Pod>::all(client)),
        InformerOptions::new().page_size(7).shard(first.clone()),
    );
    assert_eq!(informer.cached_shard(), None, "nothing listed yet");
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    informer
        .wait_for_shard(&first, WAIT, &token)
        .await
        .expect("the first shard is listed");
    assert_eq!(
        cached(&informer),
        model(&pods, &first),
        "held whole at once"
    );
    assert_eq!(informer.cached_shard().as_deref(), Some(&first));
    let not_set = informer
        .wait_for_shard(&second, WAIT, &token)
        .await
        .expect_err("the informer is not set to the second shard");
    assert!(
        matches!(not_set, WaitError::ShardChanged { .. }),
        "{not_set}"
    );

    // Every list fails: the informer moves, but its cache cannot take the new shard.
    let lists = |server: &FakeApiServer| server.faults().request_count(Verb::List, "pods");
    let listed = lists(&server);
    server
        .faults()
        .inject(Fault::status(500).verb(Verb::List).times(usize::MAX));
    informer
        .set_shard(second.clone())
        .expect("a sharded informer");
    assert!(
        wait_until(WAIT, || lists(&server) > listed).await,
        "the informer lists the second shard"
    );
    let waiting = tokio::spawn({
        let (informer, second, token) = (informer.clone(), second.clone(), token.clone());
        async move { informer.wait_for_shard(&second, WAIT, &token).await }
    });
    let left = informer
        .wait_for_shard(&first, WAIT, &token)
        .await
        .expect_err("the informer left the first shard");
    assert!(matches!(left, WaitError::ShardChanged { .. }), "{left}");
    assert_eq!(
        informer.cached_shard().as_deref(),
        Some(&first),
        "no list of the second shard was applied"
    );
    assert_eq!(cached(&informer), model(&pods, &first));

    // Moved again while the wait for the second shard goes on: that wait fails.
    informer
        .set_shard(third.clone())
        .expect("a sharded informer");
    let moved = waiting
        .await
        .expect("no panic")
        .expect_err("the informer moved on");
    assert!(matches!(moved, WaitError::ShardChanged { .. }), "{moved}");

    server.faults().clear();
    informer
        .wait_for_shard(&third, WAIT, &token)
        .await
        .expect("the third shard is listed once lists succeed");
    assert_eq!(
        cached(&informer),
        model(&pods, &third),
        "held whole at once"
    );
    assert_eq!(informer.cached_shard().as_deref(), Some(&third));
    token.cancel();
    task.await.expect("no panic").expect("the informer ran");
    // As a sync wait does, a stopped informer answers for what its cache held when it stopped.
    informer
        .wait_for_shard(&third, WAIT, &CancellationToken::new())
        .await
        .expect("the cache held the third shard when the informer stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_of_a_shard_refuses_the_delta_fifo_and_one_of_none_waits_for_no_shard() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let sharded = SharedIndexInformer::new(
        KubeListerWatcher::new(Api::<Pod>::all(client.clone())),
        InformerOptions::new()
            .queue(kinformer_informer::QueueKind::DeltaFifo)
            .shard(Shard::of(0, 2).expect("a shard")),
    );
    let refused = sharded
        .run(CancellationToken::new())
        .await
        .expect_err("a shard needs the in-order queue");
    assert!(refused.to_string().contains("in-order queue"), "{refused}");

    let whole = SharedIndexInformer::new(
        KubeListerWatcher::new(Api::<Pod>::all(client)),
        InformerOptions::new(),
    );
    let token = CancellationToken::new();
    let none = whole
        .wait_for_shard(&Shard::of(0, 1).expect("a shard"), WAIT, &token)
        .await
        .expect_err("an informer of no shard");
    assert!(matches!(none, WaitError::ShardChanged { .. }), "{none}");
    assert_eq!(whole.cached_shard(), None);
}
