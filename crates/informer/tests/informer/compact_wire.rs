//! An informer with a compact cache, over kube-client against kinformer-testing's HTTP fake API
//! server: objects a protobuf watch delivers are stored as the messages they arrived in, not
//! encoded again (cut to leave managedFields out when the informer drops them), and still read
//! back equal; JSON and a transform make the cache encode. An update's old object is decoded
//! once however many handlers read it, and never for handlers that take the new one only; a
//! relist decodes only what its tombstones carry and what handlers read.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{HandlerFuncs, InformerCache, InformerOptions, SharedIndexInformer};
use kinformer_reflector::{Error as ReflectorError, KubeListerWatcher, WireFormat, compact_codec};
use kinformer_store::{Codec, CodecError, Encoded, Error as StoreError, ObjectOrTombstone};
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use kube_client::Api;
use kube_core::ResourceExt;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(20);
/// How long an informer may take to come back after its server's listener was down: its
/// reflector's backoff (0.8 s doubling to 30 s, jittered) between the attempts that failed
/// meanwhile can reach most of a minute on a loaded machine.
const RECONNECT: Duration = Duration::from_secs(90);

/// kinformer's own codec for Pods, counting what the cache asks it to encode and decode.
struct Counting {
    inner: Arc<dyn Codec<Pod>>,
    encodes: AtomicUsize,
    decodes: AtomicUsize,
}

impl Codec<Pod> for Counting {
    fn encode(&self, obj: &Pod) -> Result<Vec<u8>, CodecError> {
        self.encodes.fetch_add(1, Ordering::Relaxed);
        self.inner.encode(obj)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Pod, CodecError> {
        self.decodes.fetch_add(1, Ordering::Relaxed);
        self.inner.decode(bytes)
    }

    fn adopt(&self, encoded: &Encoded) -> Option<Arc<[u8]>> {
        self.inner.adopt(encoded)
    }
}

impl Counting {
    /// kinformer's codec, with nothing counted yet.
    fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: compact_codec::<Pod>(),
            encodes: AtomicUsize::new(0),
            decodes: AtomicUsize::new(0),
        })
    }
}

/// A fake API server holding fixture Pods `0..pods`.
async fn server_with_pods(pods: usize) -> FakeApiServer {
    FakeApiServer::start_with_pods(0..pods)
        .await
        .expect("the fake server starts with the fixture Pods")
}

/// Sets label `key` of fixture Pod `i` on `server` to `value`.
fn relabel(server: &FakeApiServer, i: usize, key: &str, value: &str) {
    let name = fixtures::pod(i)["metadata"]["name"].clone();
    let mut current = server
        .object(
            "v1",
            "Pod",
            Some(&fixtures::namespace_of(i)),
            name.as_str().unwrap_or_default(),
        )
        .expect("the pod exists");
    current["metadata"]["labels"][key] = json!(value);
    server.update_object(current).expect("the update is valid");
}

/// An informer running on its own task.
struct Running {
    token: CancellationToken,
    task: tokio::task::JoinHandle<kinformer_informer::Result<()>>,
}

impl Running {
    /// Runs `informer` and waits until it has synced.
    async fn synced(informer: &SharedIndexInformer<Pod>) -> Self {
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, token) = (informer.clone(), token.clone());
            async move { informer.run(token).await }
        });
        eventually("the informer synced", PATIENCE, || informer.has_synced()).await;
        Self { token, task }
    }

    /// Stops the informer and checks that it ran without error.
    async fn stop(self) {
        self.token.cancel();
        self.task
            .await
            .expect("the informer task panicked")
            .expect("the informer ran");
    }
}

type Updates = Arc<Mutex<Vec<(Option<Arc<Pod>>, Arc<Pod>)>>>;

/// How the handlers take updates: `readers` handlers each with the old and the new object, or
/// one with the new object only.
#[derive(Clone, Copy)]
enum Handlers {
    OldAndNew { readers: usize },
    NewOnly,
}

/// What the cache's codec did after the sync, until every update and add was handled.
#[derive(Debug, PartialEq)]
struct Counts {
    encodes: usize,
    decodes: usize,
}

/// How the informer under test reads: the wire format, and whether it drops managedFields.
#[derive(Clone, Copy)]
struct Reading {
    format: WireFormat,
    drop_managed_fields: bool,
}

const PROTOBUF: Reading = Reading {
    format: WireFormat::Protobuf,
    drop_managed_fields: false,
};

/// Three Pods synced, then each updated twice and two more created, with the informer reading
/// as `reading` says and caching compactly (nothing kept decoded) through `options`, and
/// `handlers` taking the updates.
async fn after_sync(reading: Reading, options: InformerOptions<Pod>, handlers: Handlers) -> Counts {
    let server = server_with_pods(3).await;
    let codec = Counting::new();
    let mut lister_watcher =
        KubeListerWatcher::new(Api::<Pod>::all(server.client().expect("a client")))
            .wire_format(reading.format);
    if reading.drop_managed_fields {
        lister_watcher = lister_watcher.drop_managed_fields();
    }
    let informer = SharedIndexInformer::new(
        lister_watcher,
        options.cache(InformerCache::Compact {
            codec: Arc::clone(&codec) as Arc<dyn Codec<Pod>>,
            hot_capacity: 0,
        }),
    );
    let updates: Updates = Updates::default();
    let added = Arc::new(AtomicUsize::new(0));
    let count_adds = HandlerFuncs::new().add_func({
        let added = Arc::clone(&added);
        move |_: Arc<Pod>, _| {
            added.fetch_add(1, Ordering::Relaxed);
        }
    });
    let (first, others) = match handlers {
        Handlers::OldAndNew { readers } => (
            count_adds.update_func({
                let updates = Arc::clone(&updates);
                move |old: Arc<Pod>, new: Arc<Pod>| updates.lock().push((Some(old), new))
            }),
            readers - 1,
        ),
        Handlers::NewOnly => (
            count_adds.update_new_func({
                let updates = Arc::clone(&updates);
                move |new: Arc<Pod>| updates.lock().push((None, new))
            }),
            0,
        ),
    };
    informer
        .add_event_handler(first)
        .expect("the handler is registered");
    let other_updates = Arc::new(AtomicUsize::new(0));
    for _ in 0..others {
        let other_updates = Arc::clone(&other_updates);
        let reader = HandlerFuncs::new().update_func(move |old: Arc<Pod>, new: Arc<Pod>| {
            assert_eq!(old.uid(), new.uid());
            other_updates.fetch_add(1, Ordering::Relaxed);
        });
        informer
            .add_event_handler(reader)
            .expect("the handler is registered");
    }
    let running = Running::synced(&informer).await;
    let synced = Counts {
        encodes: codec.encodes.load(Ordering::Relaxed),
        decodes: codec.decodes.load(Ordering::Relaxed),
    };

    for round in 1..=2 {
        for i in 0..3 {
            relabel(&server, i, "round", &round.to_string());
        }
    }
    for i in 3..5 {
        server
            .create_object(fixtures::pod(i))
            .expect("the fixture pod is valid");
    }
    eventually("every update and add was handled", PATIENCE, || {
        updates.lock().len() == 6
            && added.load(Ordering::Relaxed) == 5
            && other_updates.load(Ordering::Relaxed) == 6 * others
    })
    .await;
    let counts = Counts {
        encodes: codec.encodes.load(Ordering::Relaxed) - synced.encodes,
        decodes: codec.decodes.load(Ordering::Relaxed) - synced.decodes,
    };

    // Whatever the cache stored, it reads back as the objects the handlers were given, and
    // each update's old object is the version before it.
    let cache = informer.cache();
    for (old, new) in updates.lock().iter() {
        let Some(old) = old else { continue };
        let round: u32 = new.labels()["round"].parse().expect("a round");
        let old_round = old
            .labels()
            .get("round")
            .map(|r| r.parse::<u32>().expect("a round"));
        assert_eq!(old_round, (round > 1).then_some(round - 1));
        assert_eq!(old.uid(), new.uid());
    }
    for pod in updates
        .lock()
        .iter()
        .filter_map(|(_, new)| (new.labels()["round"] == "2").then_some(new))
    {
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        let cached = cache.get_by_key(&key).expect("cached");
        assert_eq!(*cached, **pod);
        assert_eq!(
            cached.metadata.managed_fields.is_none(),
            reading.drop_managed_fields
        );
    }
    assert_eq!(cache.len(), 5);

    running.stop().await;
    counts
}

const ONE_READER: Handlers = Handlers::OldAndNew { readers: 1 };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_a_protobuf_watch_delivers_are_stored_without_an_encode() {
    let counts = after_sync(PROTOBUF, InformerOptions::new(), ONE_READER).await;
    assert_eq!(
        counts.encodes, 0,
        "every watched object was stored as it arrived"
    );
    let stripped = Reading {
        drop_managed_fields: true,
        ..PROTOBUF
    };
    let counts = after_sync(stripped, InformerOptions::new(), ONE_READER).await;
    assert_eq!(
        counts.encodes, 0,
        "every watched object was stored as it arrived, cut"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_object_is_decoded_once_for_its_readers_and_never_for_none() {
    // Six updates, nothing kept decoded: each replaced object is decoded once, however many
    // handlers read it.
    let three_readers = after_sync(
        PROTOBUF,
        InformerOptions::new(),
        Handlers::OldAndNew { readers: 3 },
    )
    .await;
    assert_eq!(
        three_readers,
        Counts {
            encodes: 0,
            decodes: 6
        }
    );
    let new_only = after_sync(PROTOBUF, InformerOptions::new(), Handlers::NewOnly).await;
    assert_eq!(
        new_only,
        Counts {
            encodes: 0,
            decodes: 0
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_watch_and_a_transform_leave_the_cache_encoding() {
    // Six updates and two adds after the sync, each encoded: JSON has no protobuf message to
    // keep, and a transformed object is no longer the message it arrived in.
    let json = Reading {
        format: WireFormat::Json,
        drop_managed_fields: false,
    };
    let json = after_sync(json, InformerOptions::new(), ONE_READER).await;
    assert_eq!(json.encodes, 8);
    let transformed = InformerOptions::new().transform(|pod: Arc<Pod>| {
        let mut pod = (*pod).clone();
        pod.annotations_mut()
            .insert("transformed".into(), "yes".into());
        Arc::new(pod)
    });
    let transformed = after_sync(PROTOBUF, transformed, ONE_READER).await;
    assert_eq!(transformed.encodes, 8);
}

/// What a relist cost the cache's codec in decodes, and what the handlers saw.
#[derive(Debug, PartialEq)]
struct Relisted {
    decodes: usize,
    updated: Vec<String>,
    deleted: Vec<String>,
}

/// Four Pods synced into a compact cache keeping nothing decoded; then, while the watch is
/// down, two are updated and one deleted, and the history compacted, so the informer relists.
async fn after_relist(handlers: Handlers) -> Relisted {
    let server = server_with_pods(4).await;
    let codec = Counting::new();
    let lister_watcher =
        KubeListerWatcher::new(Api::<Pod>::all(server.client().expect("a client")))
            .wire_format(WireFormat::Protobuf);
    let informer = SharedIndexInformer::new(
        lister_watcher,
        InformerOptions::new().cache(InformerCache::Compact {
            codec: Arc::clone(&codec) as Arc<dyn Codec<Pod>>,
            hot_capacity: 0,
        }),
    );
    let updated = Arc::new(Mutex::new(Vec::new()));
    let deleted = Arc::new(Mutex::new(Vec::new()));
    let on_delete = {
        let deleted = Arc::clone(&deleted);
        move |gone: ObjectOrTombstone<Pod>| {
            deleted.lock().push(gone.object().name_any());
        }
    };
    let handler = match handlers {
        Handlers::OldAndNew { .. } => HandlerFuncs::new().update_func({
            let updated = Arc::clone(&updated);
            move |old: Arc<Pod>, new: Arc<Pod>| {
                assert_eq!(old.uid(), new.uid());
                assert_ne!(old.resource_version(), new.resource_version());
                updated.lock().push(new.name_any());
            }
        }),
        Handlers::NewOnly => HandlerFuncs::new().update_new_func({
            let updated = Arc::clone(&updated);
            move |new: Arc<Pod>| updated.lock().push(new.name_any())
        }),
    };
    informer
        .add_event_handler(handler.delete_func(on_delete))
        .expect("the handler is registered");
    let running = Running::synced(&informer).await;
    let synced = codec.decodes.load(Ordering::Relaxed);

    server.stop_listener().await;
    for i in 0..2 {
        relabel(&server, i, "relisted", "yes");
    }
    let gone = fixtures::pod(3)["metadata"]["name"].clone();
    server
        .delete_object(
            "v1",
            "Pod",
            Some(&fixtures::namespace_of(3)),
            gone.as_str().unwrap_or_default(),
        )
        .expect("the pod exists");
    server.compact();
    server
        .restart_listener()
        .await
        .expect("the listener comes back");
    eventually("the relist was handled", RECONNECT, || {
        updated.lock().len() == 2 && deleted.lock().len() == 1
    })
    .await;
    let decodes = codec.decodes.load(Ordering::Relaxed) - synced;
    assert_eq!(informer.cache().len(), 3);

    running.stop().await;
    let mut updated = updated.lock().clone();
    updated.sort();
    let deleted = deleted.lock().clone();
    Relisted {
        decodes,
        updated,
        deleted,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_decodes_only_the_old_objects_someone_reads() {
    let names = |range: std::ops::Range<usize>| -> Vec<String> {
        range
            .map(|i| {
                fixtures::pod(i)["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    // The deleted Pod's tombstone carries the object, decoded; the unchanged Pod and the
    // updated ones are told apart by resourceVersion alone.
    assert_eq!(
        after_relist(Handlers::NewOnly).await,
        Relisted {
            decodes: 1,
            updated: names(0..2),
            deleted: names(3..4),
        }
    );
    // A handler that reads the old objects gets each updated Pod's, decoded once.
    assert_eq!(
        after_relist(ONE_READER).await,
        Relisted {
            decodes: 3,
            updated: names(0..2),
            deleted: names(3..4),
        }
    );
}

/// kinformer's codec for Pods, except that it cannot read back a Pod labelled `poison=yes`.
struct Poisoned(Arc<dyn Codec<Pod>>);

impl Codec<Pod> for Poisoned {
    fn encode(&self, obj: &Pod) -> Result<Vec<u8>, CodecError> {
        self.0.encode(obj)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Pod, CodecError> {
        let pod = self.0.decode(bytes)?;
        match pod.labels().get("poison").map(String::as_str) {
            Some("yes") => Err("a poisoned Pod".into()),
            _ => Ok(pod),
        }
    }

    fn adopt(&self, encoded: &Encoded) -> Option<Arc<[u8]>> {
        self.0.adopt(encoded)
    }
}

/// A cached object whose bytes do not decode is never dropped silently: the update that
/// replaces it reaches the handlers (with the new state as the old one), the watch error
/// handler gets the typed error naming the key, the informer's health counts it, and the
/// cache holds the new state.
#[tokio::test]
async fn an_old_object_that_does_not_decode_is_reported_and_its_update_still_delivered() {
    let server = server_with_pods(1).await;
    let errors = Arc::new(Mutex::new(Vec::new()));
    let options = InformerOptions::default()
        .cache(InformerCache::Compact {
            codec: Arc::new(Poisoned(compact_codec::<Pod>())),
            hot_capacity: 0,
        })
        .watch_error_handler({
            let errors = Arc::clone(&errors);
            move |error| {
                errors.lock().push(match error {
                    ReflectorError::Store(StoreError::Decode { key, reason }) => {
                        (key.clone(), reason.clone())
                    }
                    other => (String::new(), other.to_string()),
                });
            }
        });
    let lister_watcher = KubeListerWatcher::new(Api::<Pod>::all(server.client().expect("client")))
        .wire_format(WireFormat::Protobuf);
    let informer = SharedIndexInformer::new(lister_watcher, options);
    let updates: Updates = Updates::default();
    informer
        .add_event_handler(HandlerFuncs::new().update_func({
            let updates = Arc::clone(&updates);
            move |old: Arc<Pod>, new: Arc<Pod>| updates.lock().push((Some(old), new))
        }))
        .expect("the handler is registered");
    let running = Running::synced(&informer).await;

    relabel(&server, 0, "poison", "yes");
    eventually("the poisoned update was handled", PATIENCE, || {
        updates.lock().len() == 1
    })
    .await;
    relabel(&server, 0, "poison", "no");
    eventually("the update over it was handled", PATIENCE, || {
        updates.lock().len() == 2
    })
    .await;

    let (old, new) = updates.lock()[1].clone();
    assert!(
        Arc::ptr_eq(&old.expect("an old object"), &new),
        "the new state stands in for the old one"
    );
    assert_eq!(new.labels()["poison"], "no");
    let key = format!(
        "{}/{}",
        fixtures::namespace_of(0),
        fixtures::pod(0)["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
    );
    let errors = errors.lock().clone();
    assert_eq!(errors, [(key.clone(), "a poisoned Pod".to_owned())]);
    assert_eq!(informer.health().cache_decode_failures, 1);
    let cached = informer
        .cache()
        .get_by_key(&key)
        .expect("the new state is cached");
    assert_eq!(cached.labels()["poison"], "no");
    running.stop().await;
}
