//! The opt-in consistency check over HTTP against the fake API server: while the cache
//! matches the server it finds nothing; when a lister-watcher loses one watch event (a lossy
//! proxy), the next check lists the server at the cache's exact version, finds the one Pod
//! whose change never arrived, and reports it to the watch error handler, without touching the
//! cache. An informer on the DeltaFIFO refuses the check at run.

use crate::common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
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
use kinformer_testing::{FakeApiServer, fixtures, wait_until};
use kube_client::Api;
use serde_json::json;
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
