//! The opt-in consistency check over HTTP against the fake API server: while the cache
//! matches the server it finds nothing; when a lister-watcher loses one watch event (a lossy
//! proxy), the next check lists the server at the cache's exact version, finds the one Pod
//! whose change never arrived, and reports it to the watch error handler, without touching the
//! cache. An informer of a shard compares only while its cache holds the shard it is set to:
//! never a cache of the old shard with a list of the new one while it moves. An informer on
//! the DeltaFIFO refuses the check at run.

use crate::common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{Error, InformerOptions, QueueKind, SharedIndexInformer};
use kinformer_reflector::{
    Error as ReflectorError, KubeListerWatcher, ListOptions, ListPage, ListSink, ListerWatcher,
    Result, WatchEvent, WatchStream, WireFormat,
};
use kinformer_store::Shard;
use kinformer_testing::{FakeApiServer, ServerOptions, fixtures, wait_until};
use kube_client::Api;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
const PERIOD: Duration = Duration::from_millis(50);

/// Passes everything through, except that it drops the first MODIFIED event of `lose` once
/// armed.
struct Lossy {
    inner: KubeListerWatcher<Pod>,
    lose: String,
    armed: Arc<AtomicBool>,
}

#[async_trait]
impl ListerWatcher<Pod> for Lossy {
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        self.inner.list(options, sink).await
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<Pod>> {
        let (lose, armed) = (self.lose.clone(), Arc::clone(&self.armed));
        let events = self.inner.watch(options).await?;
        Ok(events
            .filter(move |event| {
                let lost = matches!(event, Ok(WatchEvent::Modified(pod))
                    if pod.metadata.name.as_deref() == Some(lose.as_str()))
                    && armed.swap(false, Ordering::SeqCst);
                std::future::ready(!lost)
            })
            .boxed())
    }

    fn type_description(&self) -> String {
        self.inner.type_description()
    }
}

/// Passes everything through, except that a list page after the first waits while `open` is
/// false; `held` counts such pages.
struct Gated {
    inner: KubeListerWatcher<Pod>,
    open: watch::Sender<bool>,
    held: Arc<AtomicUsize>,
}

#[async_trait]
impl ListerWatcher<Pod> for Gated {
    async fn list(&self, options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        if options.continue_token.is_some() {
            self.held.fetch_add(1, Ordering::SeqCst);
            let _ = self.open.subscribe().wait_for(|open| *open).await;
        }
        self.inner.list(options, sink).await
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<Pod>> {
        self.inner.watch(options).await
    }

    fn type_description(&self) -> String {
        self.inner.type_description()
    }
}

fn touch(server: &FakeApiServer, i: usize, value: &str) {
    let namespace = fixtures::namespace_of(i);
    let name = format!("pod-{i}");
    let mut current = server
        .object("v1", "Pod", Some(&namespace), &name)
        .expect("the pod exists");
    current["metadata"]["annotations"]["touched"] = json!(value);
    server.update_object(current).expect("updated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_watch_event_is_found_by_the_consistency_check_and_reported() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for i in 0..4 {
        server.create_object(fixtures::pod(i)).unwrap();
    }
    let armed = Arc::new(AtomicBool::new(false));
    let lister_watcher = Lossy {
        inner: KubeListerWatcher::new(Api::<Pod>::all(server.client().unwrap()))
            .wire_format(WireFormat::from_env()),
        lose: "pod-1".into(),
        armed: Arc::clone(&armed),
    };
    let reported = Arc::new(Mutex::new(Vec::new()));
    let informer = SharedIndexInformer::new(
        lister_watcher,
        InformerOptions::new()
            .consistency_check(PERIOD)
            .watch_error_handler({
                let reported = Arc::clone(&reported);
                move |error: &ReflectorError| {
                    if let ReflectorError::CacheDrift {
                        missing,
                        unexpected,
                        changed,
                        examples,
                        ..
                    } = error
                    {
                        reported.lock().unwrap().push((
                            *missing,
                            *unexpected,
                            *changed,
                            examples.clone(),
                        ));
                    }
                }
            }),
    );
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    assert_eq!(informer.wait_for_cache_sync(WAIT, &token).await, Ok(()));

    // In step with the server, through changes: checks pass.
    touch(&server, 2, "one");
    assert!(
        wait_until(WAIT, || informer.consistency_stats().checks >= 3).await,
        "{:?}",
        informer.consistency_stats()
    );
    assert_eq!(informer.consistency_stats().drifts, 0);

    // pod-1's change is lost; pod-3's arrives after it, so the cache's version passes it.
    armed.store(true, Ordering::SeqCst);
    touch(&server, 1, "lost");
    touch(&server, 3, "seen");
    assert!(
        wait_until(WAIT, || !reported.lock().unwrap().is_empty()).await,
        "{:?}",
        informer.consistency_stats()
    );
    let key = format!("{}/pod-1", fixtures::namespace_of(1));
    assert_eq!(reported.lock().unwrap()[0], (0, 0, 1, vec![key.clone()]));
    let stats = informer.consistency_stats();
    assert!(stats.drifts >= 1, "{stats:?}");
    assert!(
        stats
            .last_drift
            .as_deref()
            .is_some_and(|drift| drift.contains(&key)),
        "{stats:?}"
    );
    // The check only reads: the cache still holds the stale pod-1.
    let cached = informer.cache().get_by_key(&key).expect("cached");
    let touched = cached
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get("touched"));
    assert_eq!(touched, None, "the lost change is not in the cache");

    token.cancel();
    running.await.unwrap().unwrap();
}

/// While an informer moves to another shard, its list of the new one held after its first page,
/// the checks skip their rounds: the cache holds the old shard, and a read of the new one would
/// call every difference a drift. Once the new shard is held, they compare again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_never_compares_a_cache_with_a_shard_it_does_not_hold_yet() {
    let server = FakeApiServer::start_with(ServerOptions::default().sharded_list_and_watch(true))
        .await
        .expect("the fake server starts");
    for i in 0..60 {
        server.create_object(fixtures::pod(i)).expect("seeded");
    }
    let (first, second) = (Shard::of(0, 2).unwrap(), Shard::of(1, 2).unwrap());
    let open = watch::Sender::new(true);
    let held = Arc::new(AtomicUsize::new(0));
    let informer = SharedIndexInformer::new(
        Gated {
            inner: KubeListerWatcher::new(Api::<Pod>::all(server.client().unwrap()))
                .wire_format(WireFormat::from_env()),
            open: open.clone(),
            held: Arc::clone(&held),
        },
        InformerOptions::new()
            .page_size(7)
            .shard(first.clone())
            .consistency_check(PERIOD),
    );
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    informer
        .wait_for_shard(&first, WAIT, &token)
        .await
        .expect("the first shard is held");
    assert!(
        wait_until(WAIT, || informer.consistency_stats().checks >= 2).await,
        "{:?}",
        informer.consistency_stats()
    );

    // The list of the second shard stops after its first page: the informer is set to the
    // second shard and has begun to list it, while its cache holds the first.
    let pages = held.load(Ordering::SeqCst);
    open.send_replace(false);
    informer
        .set_shard(second.clone())
        .expect("a sharded informer");
    assert!(
        wait_until(WAIT, || held.load(Ordering::SeqCst) > pages).await,
        "the list of the second shard goes past its first page"
    );
    let skipped = informer.consistency_stats().skipped;
    assert!(
        wait_until(WAIT, || informer.consistency_stats().skipped >= skipped + 3).await,
        "{:?}",
        informer.consistency_stats()
    );
    let stats = informer.consistency_stats();
    assert_eq!(stats.drifts, 0, "{stats:?}");
    assert_eq!(informer.cached_shard().as_deref(), Some(&first));

    open.send_replace(true);
    informer
        .wait_for_shard(&second, WAIT, &token)
        .await
        .expect("the second shard is held");
    let checks = informer.consistency_stats().checks;
    assert!(
        wait_until(WAIT, || informer.consistency_stats().checks >= checks + 2).await,
        "{:?}",
        informer.consistency_stats()
    );
    let stats = informer.consistency_stats();
    assert_eq!(stats.drifts, 0, "{stats:?}");
    token.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_deltafifo_refuses_a_consistency_check() {
    let lister_watcher = common::FakeSource::new();
    let informer = SharedIndexInformer::new(
        lister_watcher,
        InformerOptions::new()
            .queue(QueueKind::DeltaFifo)
            .consistency_check(PERIOD),
    );
    let outcome = informer.run(CancellationToken::new()).await;
    assert!(matches!(outcome, Err(Error::Options { .. })), "{outcome:?}");
}
