//! The reflector's state machine against a scripted, in-memory `ListerWatcher`, on tokio's paused
//! clock: client-go's reflector_test.go cases that are about call sequences and timing.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{
    Error, ListOptions, ListPage, ListerWatcher, Reflector, ReflectorExit, ReflectorOptions,
    Result, VersionMatch, WatchEvent, WatchStream,
};
use kinformer_store::{Cache, CacheReader, Store};
use kinformer_testing::eventually;
use kinformer_wait::ExponentialBackoffManager;
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;

/// How long a test waits for what the reflector does: tokio time, which the paused clock
/// advances whenever every task is idle, so waiting costs no real time.
const PATIENCE: Duration = Duration::from_secs(3600);

fn pod(name: &str, resource_version: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(resource_version.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

fn page(
    resource_version: &str,
    items: Vec<Arc<Pod>>,
    continue_token: Option<&str>,
) -> ListPage<Pod> {
    ListPage {
        items,
        resource_version: resource_version.into(),
        continue_token: continue_token.map(str::to_owned),
    }
}

type ListFn = Box<dyn Fn(&ListOptions, usize) -> Result<ListPage<Pod>> + Send + Sync>;
type WatchFn = Box<dyn Fn(&ListOptions, usize) -> Result<WatchStream<Pod>> + Send + Sync>;

/// A `ListerWatcher` whose answers are closures of the call options and the call number; it
/// records every call.
struct Scripted {
    lists: Mutex<Vec<ListOptions>>,
    watches: Mutex<Vec<ListOptions>>,
    list: ListFn,
    watch: WatchFn,
}

impl Scripted {
    fn new(
        list: impl Fn(&ListOptions, usize) -> Result<ListPage<Pod>> + Send + Sync + 'static,
        watch: impl Fn(&ListOptions, usize) -> Result<WatchStream<Pod>> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            lists: Mutex::new(Vec::new()),
            watches: Mutex::new(Vec::new()),
            list: Box::new(list),
            watch: Box::new(watch),
        })
    }

    fn list_calls(&self) -> Vec<ListOptions> {
        self.lists.lock().clone()
    }

    fn watch_calls(&self) -> Vec<ListOptions> {
        self.watches.lock().clone()
    }

    fn list_versions(&self) -> Vec<String> {
        self.list_calls()
            .iter()
            .map(|options| options.resource_version().to_owned())
            .collect()
    }
}

#[async_trait]
impl ListerWatcher<Pod> for Scripted {
    async fn list(&self, options: ListOptions) -> Result<ListPage<Pod>> {
        let call = {
            let mut lists = self.lists.lock();
            lists.push(options.clone());
            lists.len() - 1
        };
        (self.list)(&options, call)
    }

    async fn watch(&self, options: ListOptions) -> Result<WatchStream<Pod>> {
        let call = {
            let mut watches = self.watches.lock();
            watches.push(options.clone());
            watches.len() - 1
        };
        (self.watch)(&options, call)
    }
}

/// A watch fed by the test through a channel; dropping the sender closes it.
fn channel_watch() -> (
    mpsc::UnboundedSender<Result<WatchEvent<Pod>>>,
    WatchStream<Pod>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    (sender, stream.boxed())
}

fn pending_watch() -> Result<WatchStream<Pod>> {
    Ok(futures::stream::pending().boxed())
}

fn events_then_close(events: Vec<Result<WatchEvent<Pod>>>) -> Result<WatchStream<Pod>> {
    // Lasting longer than a second keeps the watch from counting as "very short".
    let delayed = futures::stream::once(async {
        // Virtual time under the paused clock: the watch lasts two seconds.
        tokio::time::sleep(Duration::from_secs(2)).await;
        futures::stream::iter(events)
    })
    .flatten();
    Ok(delayed.boxed())
}

fn contents(cache: &Cache<Pod>) -> BTreeMap<String, String> {
    cache
        .list()
        .iter()
        .map(|pod| {
            (
                pod.metadata.name.clone().unwrap_or_default(),
                pod.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn expected(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, version)| ((*name).to_owned(), (*version).to_owned()))
        .collect()
}

fn quick_backoff() -> ExponentialBackoffManager {
    ExponentialBackoffManager::new(
        Duration::from_millis(1),
        Duration::from_millis(50),
        Duration::from_millis(100),
        2.0,
        0.0,
    )
}

/// Runs `reflector` in a task; returns its token and handle.
fn spawn(
    reflector: &Arc<Reflector<Pod, Cache<Pod>>>,
) -> (CancellationToken, tokio::task::JoinHandle<ReflectorExit>) {
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (reflector, token) = (Arc::clone(reflector), token.clone());
        async move { reflector.run(token).await }
    });
    (token, running)
}

async fn stop(token: CancellationToken, running: tokio::task::JoinHandle<ReflectorExit>) {
    token.cancel();
    tokio::time::timeout(Duration::from_secs(1), running)
        .await
        .expect("the reflector stops within a second of its token firing")
        .expect("the reflector task does not panic");
}

/// Ported from client-go's TestReflectorListAndWatch ("UseWatchList disabled").
#[tokio::test(start_paused = true)]
async fn list_at_version_zero_then_watch_from_the_list_version_with_bookmarks() {
    let (sender, stream) = channel_watch();
    let stream = Mutex::new(Some(stream));
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![pod("foo", "1")], None)),
        move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the watch is open", PATIENCE, || {
        !lister_watcher.watch_calls().is_empty()
    })
    .await;
    for event in [
        WatchEvent::Modified(pod("foo", "2")),
        WatchEvent::Added(pod("bar", "3")),
        WatchEvent::Added(pod("baz", "4")),
        WatchEvent::Added(pod("qux", "5")),
        WatchEvent::Added(pod("zoo", "6")),
    ] {
        sender.send(Ok(event)).expect("the reflector is watching");
    }
    eventually("every event is applied", PATIENCE, || {
        reflector.last_sync_resource_version() == "6"
    })
    .await;
    assert_eq!(
        contents(&cache),
        expected(&[
            ("foo", "2"),
            ("bar", "3"),
            ("baz", "4"),
            ("qux", "5"),
            ("zoo", "6")
        ])
    );
    let lists = lister_watcher.list_calls();
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].resource_version(), "0");
    assert_eq!(lists[0].limit, Some(500));
    assert!(!lists[0].send_initial_events);
    let watches = lister_watcher.watch_calls();
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].resource_version(), "1");
    assert!(watches[0].allow_watch_bookmarks);
    assert!(!watches[0].send_initial_events);
    stop(token, running).await;
}

/// A queue that delivers bookmarks in order (the atomic in-order FIFO) learns of each one.
#[tokio::test(start_paused = true)]
async fn every_watch_bookmark_reaches_the_bookmark_handler_after_it_is_recorded() {
    let (sender, stream) = channel_watch();
    let stream = Mutex::new(Some(stream));
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![pod("foo", "1")], None)),
        move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reflector = {
        let seen = Arc::clone(&seen);
        Arc::new(Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&cache),
            ReflectorOptions::default()
                .on_bookmark(move |version| seen.lock().push(version.to_owned())),
        ))
    };
    let (token, running) = spawn(&reflector);
    eventually("the watch is open", PATIENCE, || {
        !lister_watcher.watch_calls().is_empty()
    })
    .await;
    for version in ["7", "9"] {
        sender
            .send(Ok(WatchEvent::Bookmark {
                resource_version: version.to_owned(),
                initial_events_end: false,
            }))
            .expect("the reflector is watching");
    }
    sender
        .send(Ok(WatchEvent::Added(pod("bar", "10"))))
        .expect("the reflector is watching");
    eventually("the add after the bookmarks is applied", PATIENCE, || {
        reflector.last_sync_resource_version() == "10"
    })
    .await;
    assert_eq!(*seen.lock(), ["7", "9"]);
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorListAndWatch ("UseWatchList enabled").
#[tokio::test(start_paused = true)]
async fn a_streaming_list_replaces_the_store_at_the_initial_events_end_bookmark() {
    let (sender, stream) = channel_watch();
    let stream = Mutex::new(Some(stream));
    let lister_watcher = Scripted::new(
        |_, _| {
            Err(Error::Api {
                code: 500,
                reason: "Unexpected".into(),
                message: "no list expected".into(),
            })
        },
        move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().use_watch_list(true),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the streaming list is open", PATIENCE, || {
        !lister_watcher.watch_calls().is_empty()
    })
    .await;
    sender
        .send(Ok(WatchEvent::Added(pod("foo", "1"))))
        .expect("watching");
    // Virtual time: the paused clock advances only once every task is idle, so an early
    // store write would have happened by now.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        cache.list().is_empty(),
        "nothing reaches the store before the bookmark"
    );
    sender
        .send(Ok(WatchEvent::Bookmark {
            resource_version: "1".into(),
            initial_events_end: true,
        }))
        .expect("watching");
    for event in [
        WatchEvent::Modified(pod("foo", "2")),
        WatchEvent::Added(pod("bar", "3")),
        WatchEvent::Added(pod("baz", "4")),
    ] {
        sender
            .send(Ok(event))
            .expect("the same stream goes on after the bookmark");
    }
    eventually("every event is applied", PATIENCE, || {
        reflector.last_sync_resource_version() == "4"
    })
    .await;
    assert_eq!(
        contents(&cache),
        expected(&[("foo", "2"), ("bar", "3"), ("baz", "4")])
    );
    assert!(
        lister_watcher.list_calls().is_empty(),
        "a streaming list needs no list call"
    );
    let watches = lister_watcher.watch_calls();
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].resource_version(), "");
    assert_eq!(
        watches[0].resource_version_match,
        Some(VersionMatch::NotOlderThan)
    );
    assert!(watches[0].send_initial_events);
    assert!(watches[0].allow_watch_bookmarks);
    stop(token, running).await;
}

/// A server that refuses streaming lists (422) gets a plain list and watch instead, and is not
/// asked for a streaming list again.
#[tokio::test(start_paused = true)]
async fn a_refused_streaming_list_falls_back_to_list_and_watch() {
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("5", vec![pod("a", "5")], None)),
        |options, _| {
            if options.send_initial_events {
                Err(Error::Api {
                    code: 422,
                    reason: "Invalid".into(),
                    message: "sendInitialEvents is forbidden".into(),
                })
            } else {
                events_then_close(vec![])
            }
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let errors = Arc::new(AtomicUsize::new(0));
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default()
            .use_watch_list(true)
            .backoff(quick_backoff())
            .watch_error_handler({
                let errors = Arc::clone(&errors);
                move |_| {
                    errors.fetch_add(1, Ordering::SeqCst);
                }
            }),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the fallback list ran", PATIENCE, || {
        cache.list().len() == 1
    })
    .await;
    eventually("a few plain watches ran", PATIENCE, || {
        lister_watcher.watch_calls().len() >= 4
    })
    .await;
    let streaming = lister_watcher
        .watch_calls()
        .iter()
        .filter(|options| options.send_initial_events)
        .count();
    assert_eq!(streaming, 1, "only the first round tries a streaming list");
    assert_eq!(
        errors.load(Ordering::SeqCst),
        1,
        "the refusal reaches the handler"
    );
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorListAndWatchWithErrors: a watch that ends is resumed
/// from the last version it delivered, without relisting.
#[tokio::test(start_paused = true)]
async fn a_closed_watch_resumes_from_the_last_seen_version_without_relisting() {
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![], None)),
        |_, call| match call {
            0 => events_then_close(vec![
                Ok(WatchEvent::Added(pod("foo", "2"))),
                Ok(WatchEvent::Added(pod("bar", "3"))),
            ]),
            1 => events_then_close(vec![
                Ok(WatchEvent::Deleted(pod("foo", "4"))),
                Ok(WatchEvent::Bookmark {
                    resource_version: "9".into(),
                    initial_events_end: false,
                }),
            ]),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the third watch is open", PATIENCE, || {
        lister_watcher.watch_calls().len() == 3
    })
    .await;
    let versions: Vec<_> = lister_watcher
        .watch_calls()
        .iter()
        .map(|options| options.resource_version().to_owned())
        .collect();
    assert_eq!(
        versions,
        ["1", "3", "9"],
        "each watch starts where the previous one stopped"
    );
    assert_eq!(lister_watcher.list_calls().len(), 1, "no relist");
    assert_eq!(contents(&cache), expected(&[("bar", "3")]));
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorListAndWatchWithErrors: 410 inside the stream makes the
/// reflector relist, at the last version it saw.
#[tokio::test(start_paused = true)]
async fn an_expired_watch_relists_at_the_last_synced_version() {
    let lister_watcher = Scripted::new(
        |_, call| match call {
            0 => Ok(page("1", vec![pod("old", "1")], None)),
            _ => Ok(page("8", vec![pod("new", "8")], None)),
        },
        |_, call| match call {
            0 => events_then_close(vec![
                Ok(WatchEvent::Added(pod("mid", "5"))),
                Err(Error::Expired {
                    message: "too old resource version".into(),
                }),
            ]),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().watch_error_handler({
            let seen = Arc::clone(&seen);
            move |error| seen.lock().push(error.to_string())
        }),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the relist ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "8"
    })
    .await;
    assert_eq!(lister_watcher.list_versions(), ["0", "5"]);
    assert_eq!(contents(&cache), expected(&[("new", "8")]));
    assert!(
        seen.lock().iter().any(|error| error.contains("410")),
        "{:?}",
        seen.lock()
    );
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorExpiredExactResourceVersion: a relist whose version has
/// expired is retried at once as a consistent read.
#[tokio::test(start_paused = true)]
async fn an_expired_relist_is_retried_as_a_consistent_read() {
    let lister_watcher = Scripted::new(
        |options, _| match options.resource_version() {
            "0" => Ok(page("10", vec![pod("a", "1")], None)),
            "10" => Err(Error::Expired {
                message: "The resourceVersion for the provided list is too old.".into(),
            }),
            "" => Ok(page("11", vec![pod("a", "1"), pod("b", "11")], None)),
            other => panic!("unexpected list at {other:?}"),
        },
        |_, call| match call {
            0 => Ok(futures::stream::iter([Err(Error::Expired {
                message: "gone".into(),
            })])
            .boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the consistent relist ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "11"
    })
    .await;
    assert_eq!(lister_watcher.list_versions(), ["0", "10", ""]);
    assert_eq!(cache.list().len(), 2);
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorWatchListPageSize.
#[tokio::test(start_paused = true)]
async fn a_page_size_splits_the_list_into_pages_that_all_reach_the_store() {
    let pods: Vec<_> = (0..10)
        .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
        .collect();
    let lister_watcher = Scripted::new(
        move |options, _| {
            assert_eq!(options.limit, Some(4), "every page asks for the page size");
            match options.continue_token.as_deref() {
                None => Ok(page("10", pods[0..4].to_vec(), Some("C1"))),
                Some("C1") => Ok(page("10", pods[4..8].to_vec(), Some("C2"))),
                Some("C2") => Ok(page("10", pods[8..10].to_vec(), None)),
                Some(other) => panic!("unknown continue token {other}"),
            }
        },
        |_, _| pending_watch(),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().page_size(4),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the list is stored", PATIENCE, || {
        reflector.last_sync_resource_version() == "10"
    })
    .await;
    assert_eq!(cache.list().len(), 10);
    let calls = lister_watcher.list_calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].resource_version(), "0");
    assert_eq!(
        calls[1].resource_version, None,
        "continuation pages carry no resource version"
    );
    stop(token, running).await;
}

/// A lister-watcher that marks its last page with an empty continue token (`Some("")`, as a
/// hand-written one may) ends the list there: the reflector does not ask again with "".
#[tokio::test(start_paused = true)]
async fn an_empty_continue_token_ends_the_list() {
    let pods: Vec<_> = (0..6)
        .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
        .collect();
    let lister_watcher = Scripted::new(
        move |options, _| match options.continue_token.as_deref() {
            None => Ok(page("10", pods[0..4].to_vec(), Some("C1"))),
            Some("C1") => Ok(page("10", pods[4..6].to_vec(), Some(""))),
            Some(other) => panic!("asked again with continue token {other:?}"),
        },
        |_, _| pending_watch(),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().page_size(4),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the watch opens after the list", PATIENCE, || {
        !lister_watcher.watch_calls().is_empty()
    })
    .await;
    assert_eq!(cache.list().len(), 6);
    assert_eq!(lister_watcher.list_calls().len(), 2);
    assert_eq!(reflector.last_sync_resource_version(), "10");
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorNotPaginatingNotConsistentReads and
/// TestReflectorResyncWithResourceVersion: a relist at a known version asks for everything at
/// once (so the watch cache can serve it) and never goes back in time.
#[tokio::test(start_paused = true)]
async fn a_relist_at_a_known_version_is_not_paginated() {
    let lister_watcher = Scripted::new(
        |options, _| match options.resource_version() {
            "0" => Ok(page("10", vec![pod("a", "1")], None)),
            "10" => Ok(page("11", vec![pod("a", "1"), pod("b", "11")], None)),
            other => panic!("unexpected list at {other:?}"),
        },
        |_, call| match call {
            0 => Ok(futures::stream::iter([Err(Error::Expired {
                message: "gone".into(),
            })])
            .boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the relist ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "11"
    })
    .await;
    let calls = lister_watcher.list_calls();
    assert_eq!(lister_watcher.list_versions(), ["0", "10"]);
    assert_eq!(calls[0].limit, Some(500));
    assert_eq!(calls[1].limit, None);
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled.
#[tokio::test(start_paused = true)]
async fn a_paginated_first_list_keeps_every_relist_paginated() {
    let pods: Vec<_> = (0..10)
        .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
        .collect();
    let lister_watcher = Scripted::new(
        move |options, _| {
            assert_eq!(
                options.limit,
                Some(500),
                "the default page size is always sent"
            );
            match options.continue_token.as_deref() {
                None => Ok(page("10", pods[0..4].to_vec(), Some("C1"))),
                Some(_) => Ok(page("10", pods[4..10].to_vec(), None)),
            }
        },
        |_, call| match call {
            0 => Ok(futures::stream::iter([Err(Error::Expired {
                message: "gone".into(),
            })])
            .boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the relist ran", PATIENCE, || {
        lister_watcher.list_calls().len() == 4
    })
    .await;
    eventually("the relist is stored", PATIENCE, || {
        lister_watcher.watch_calls().len() == 2
    })
    .await;
    assert_eq!(cache.list().len(), 10);
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorFullListIfExpired.
#[tokio::test(start_paused = true)]
async fn an_expired_continuation_page_falls_back_to_one_full_list() {
    let pods: Vec<_> = (0..8)
        .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
        .collect();
    let lister_watcher = Scripted::new(
        move |options, _| match (
            options.resource_version(),
            options.continue_token.as_deref(),
            options.limit,
        ) {
            ("0", None, Some(4)) => Ok(page("10", pods[0..4].to_vec(), None)),
            ("10", None, Some(4)) => Ok(page("11", pods[0..4].to_vec(), Some("C1"))),
            ("", Some("C1"), Some(4)) => Err(Error::Expired {
                message: "continue token expired".into(),
            }),
            ("10", None, None) => Ok(page("11", pods.clone(), None)),
            other => panic!("unexpected list options {other:?}"),
        },
        |_, call| match call {
            0 => Ok(futures::stream::iter([Err(Error::Expired {
                message: "gone".into(),
            })])
            .boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().page_size(4),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the full relist ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "11"
    })
    .await;
    assert_eq!(lister_watcher.list_versions(), ["0", "10", "", "10"]);
    assert_eq!(cache.list().len(), 8);
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorFullListIfTooLarge.
#[tokio::test(start_paused = true)]
async fn a_too_large_resource_version_relists_from_a_consistent_read() {
    let version = Arc::new(AtomicUsize::new(30));
    let lister_watcher = Scripted::new(
        {
            let version = Arc::clone(&version);
            move |options, _| match options.resource_version() {
                "0" => Ok(page("20", vec![], None)),
                "20" | "30" | "40" => Err(Error::TooLargeResourceVersion {
                    message: "Too large resource version".into(),
                }),
                "" => {
                    let current = version.fetch_add(10, Ordering::SeqCst);
                    Ok(page(&current.to_string(), vec![], None))
                }
                other => panic!("unexpected list at {other:?}"),
            }
        },
        |_, call| match call {
            0..=2 => Ok(futures::stream::iter([Err(Error::Expired {
                message: "gone".into(),
            })])
            .boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().backoff(quick_backoff()),
    ));
    let (token, running) = spawn(&reflector);
    eventually("three relists ran", PATIENCE, || {
        lister_watcher.watch_calls().len() == 4
    })
    .await;
    assert_eq!(
        lister_watcher.list_versions(),
        ["0", "20", "", "30", "", "40", ""]
    );
    stop(token, running).await;
}

/// A store that counts resyncs and notes, on every write, the version its reflector reports at
/// that moment: what a consumer the write wakes (an informer reporting synced, a handler)
/// would read.
#[derive(Default)]
struct RecordingStore {
    cache: Cache<Pod>,
    resyncs: AtomicUsize,
    reflector: std::sync::OnceLock<std::sync::Weak<Reflector<Pod, RecordingStore>>>,
    /// `(version written, version the reflector reported during the write)`.
    seen: Mutex<Vec<(String, String)>>,
}

impl RecordingStore {
    fn reported_version(&self) -> Option<String> {
        self.reflector
            .get()
            .and_then(std::sync::Weak::upgrade)
            .map(|reflector| reflector.last_sync_resource_version())
    }

    fn note(&self, written: &str) {
        let reported = self.reported_version().unwrap_or_default();
        self.seen.lock().push((written.to_owned(), reported));
    }

    fn note_object(&self, obj: &Pod) {
        self.note(obj.metadata.resource_version.as_deref().unwrap_or_default());
    }
}

impl Store<Pod> for RecordingStore {
    fn add(&self, obj: Arc<Pod>) -> kinformer_store::Result<()> {
        self.note_object(&obj);
        self.cache.add(obj)
    }
    fn update(&self, obj: Arc<Pod>) -> kinformer_store::Result<()> {
        self.note_object(&obj);
        self.cache.update(obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> kinformer_store::Result<()> {
        self.note_object(&obj);
        self.cache.delete(obj)
    }
    fn replace(&self, list: Vec<Arc<Pod>>, resource_version: &str) -> kinformer_store::Result<()> {
        self.note(resource_version);
        self.cache.replace(list, resource_version)
    }
    fn resync(&self) -> kinformer_store::Result<()> {
        self.resyncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Ported from client-go's TestReflectorResync: the store is resynced once per period while the
/// reflector watches.
#[tokio::test(start_paused = true)]
async fn the_store_is_resynced_every_resync_period() {
    let lister_watcher = Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
    let store = Arc::new(RecordingStore::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&store),
        ReflectorOptions::default().resync_period(Duration::from_secs(30)),
    ));
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (reflector, token) = (Arc::clone(&reflector), token.clone());
        async move { reflector.run(token).await }
    });
    // Virtual time: the paused clock moves 95 s at once.
    tokio::time::sleep(Duration::from_secs(95)).await;
    assert_eq!(
        store.resyncs.load(Ordering::SeqCst),
        3,
        "resyncs at 30s, 60s and 90s"
    );
    token.cancel();
    running.await.expect("no panic");
}

/// The should_resync callback is asked at every tick and gates the resync.
#[tokio::test(start_paused = true)]
async fn should_resync_gates_every_resync() {
    let lister_watcher = Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
    let store = Arc::new(RecordingStore::default());
    let asked = Arc::new(AtomicUsize::new(0));
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&store),
        ReflectorOptions::default()
            .resync_period(Duration::from_secs(30))
            .should_resync({
                let asked = Arc::clone(&asked);
                // Only every other tick is due.
                move || asked.fetch_add(1, Ordering::SeqCst) % 2 == 1
            }),
    ));
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (reflector, token) = (Arc::clone(&reflector), token.clone());
        async move { reflector.run(token).await }
    });
    // Virtual time: the paused clock moves 125 s at once.
    tokio::time::sleep(Duration::from_secs(125)).await;
    assert_eq!(asked.load(Ordering::SeqCst), 4);
    assert_eq!(store.resyncs.load(Ordering::SeqCst), 2);
    token.cancel();
    running.await.expect("no panic");
}

/// Ported from client-go's TestReflectorListAndWatchInitConnBackoff: refused connections back
/// off exponentially, without relisting.
#[tokio::test(start_paused = true)]
async fn refused_watches_back_off_exponentially_without_relisting() {
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![], None)),
        |_, call| {
            if call < 5 {
                let refused = std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "connect: connection refused",
                );
                Err(Error::from_transport(kube_client::Error::Service(
                    Box::new(refused),
                )))
            } else {
                pending_watch()
            }
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().backoff(quick_backoff()),
    ));
    let started = Instant::now();
    let (token, running) = spawn(&reflector);
    eventually("the sixth watch is open", PATIENCE, || {
        lister_watcher.watch_calls().len() == 6
    })
    .await;
    let elapsed = started.elapsed();
    // 1 + 2 + 4 + 8 + 16 ms without jitter, plus the polling step of `eventually`.
    assert!(elapsed >= Duration::from_millis(31), "{elapsed:?}");
    assert!(elapsed <= Duration::from_millis(45), "{elapsed:?}");
    assert_eq!(lister_watcher.list_calls().len(), 1);
    stop(token, running).await;
}

/// Ported from client-go's TestNoRelistOnTooManyRequests and TestBackoffOnTooManyRequests.
#[tokio::test(start_paused = true)]
async fn too_many_requests_backs_off_without_relisting() {
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![], None)),
        |_, call| match call {
            0..=3 => Err(Error::TooManyRequests {
                retry_after: None,
                message: "slow down".into(),
            }),
            4 => Ok(futures::stream::iter([Err(Error::TooManyRequests {
                retry_after: None,
                message: "in stream".into(),
            })])
            .boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().backoff(quick_backoff()),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the sixth watch is open", PATIENCE, || {
        lister_watcher.watch_calls().len() == 6
    })
    .await;
    assert_eq!(lister_watcher.list_calls().len(), 1);
    stop(token, running).await;
}

/// A 429's Retry-After is a floor under the backoff.
#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_on_too_many_requests() {
    let lister_watcher = Scripted::new(
        |_, call| match call {
            0 => Err(Error::TooManyRequests {
                retry_after: Some(Duration::from_secs(7)),
                message: "slow down".into(),
            }),
            _ => Ok(page("1", vec![], None)),
        },
        |_, _| pending_watch(),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().backoff(quick_backoff()),
    ));
    let started = Instant::now();
    let (token, running) = spawn(&reflector);
    eventually("the second list ran", PATIENCE, || {
        lister_watcher.list_calls().len() == 2
    })
    .await;
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(7), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(8), "{elapsed:?}");
    stop(token, running).await;
}

/// Repeated list failures follow the reflector's backoff schedule: 800ms doubling to 30s,
/// jittered up to twice that. Over five minutes that is at most a couple of dozen attempts.
#[tokio::test(start_paused = true)]
async fn failing_lists_follow_the_backoff_schedule_instead_of_a_hot_loop() {
    let lister_watcher = Scripted::new(
        |_, _| {
            Err(Error::Api {
                code: 500,
                reason: "InternalError".into(),
                message: "etcd down".into(),
            })
        },
        |_, _| pending_watch(),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    // Virtual time: five minutes on the paused clock.
    tokio::time::sleep(Duration::from_secs(300)).await;
    let attempts = lister_watcher.list_calls().len();
    // Without jitter: 0.8+1.6+3.2+6.4+12.8+25.6 = 50.4s, then one every 30s: 15 attempts; the
    // jitter (up to 2x) can only lower that, to no fewer than 5.
    assert!(
        (5..=16).contains(&attempts),
        "{attempts} attempts in five minutes"
    );
    stop(token, running).await;
}

/// Ported from client-go's TestWatchTimeout: every watch asks for a random timeout between the
/// minimum and twice the minimum, and minimums under five minutes are not honoured.
#[tokio::test(start_paused = true)]
async fn watch_timeouts_are_random_between_the_minimum_and_twice_the_minimum() {
    for (asked, floor) in [
        (None, 300),
        (Some(Duration::from_secs(1)), 300),
        (Some(Duration::from_secs(1800)), 1800),
    ] {
        let lister_watcher =
            Scripted::new(|_, _| Ok(page("10", vec![], None)), |_, _| pending_watch());
        let cache = Arc::new(Cache::<Pod>::default());
        let mut options = ReflectorOptions::default();
        if let Some(asked) = asked {
            options = options.min_watch_timeout(asked);
        }
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&cache),
            options,
        ));
        let (token, running) = spawn(&reflector);
        eventually("the watch is open", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        let timeout = lister_watcher.watch_calls()[0]
            .timeout_seconds
            .expect("a timeout is always sent");
        assert!(
            (floor..=2 * floor).contains(&timeout),
            "{timeout}s outside [{floor}, {}]",
            2 * floor
        );
        stop(token, running).await;
    }
}

/// A watch that stays silent past its own timeout is taken for a dead connection and resumed
/// from the last version, not relisted.
#[tokio::test(start_paused = true)]
async fn a_silent_watch_is_resumed_after_its_timeout() {
    let lister_watcher = Scripted::new(|_, _| Ok(page("4", vec![], None)), |_, _| pending_watch());
    let cache = Arc::new(Cache::<Pod>::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().watch_error_handler({
            let seen = Arc::clone(&seen);
            move |error| seen.lock().push(matches!(error, Error::WatchIdle { .. }))
        }),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the first watch is open", PATIENCE, || {
        lister_watcher.watch_calls().len() == 1
    })
    .await;
    let first = Instant::now();
    let timeout = u64::from(
        lister_watcher.watch_calls()[0]
            .timeout_seconds
            .expect("timeout"),
    );
    eventually("a second watch is open", PATIENCE, || {
        lister_watcher.watch_calls().len() == 2
    })
    .await;
    let waited = first.elapsed();
    assert!(
        waited >= Duration::from_secs(timeout),
        "{waited:?} < {timeout}s"
    );
    assert!(waited <= Duration::from_secs(timeout + 6), "{waited:?}");
    assert_eq!(lister_watcher.watch_calls()[1].resource_version(), "4");
    assert_eq!(lister_watcher.list_calls().len(), 1, "no relist");
    assert_eq!(*seen.lock(), [true], "the idle watch is reported");
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorWatchHandler: objects of another kind are skipped and
/// reported, the watch goes on.
#[tokio::test(start_paused = true)]
async fn objects_of_the_wrong_kind_or_without_a_name_are_reported_and_skipped() {
    let (sender, stream) = channel_watch();
    let stream = Mutex::new(Some(stream));
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![pod("foo", "1"), pod("bar", "1")], None)),
        move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().watch_error_handler({
            let seen = Arc::clone(&seen);
            move |error| {
                seen.lock()
                    .push(kinformer_wait::ErrorChain(error).to_string());
            }
        }),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the watch is open", PATIENCE, || {
        !lister_watcher.watch_calls().is_empty()
    })
    .await;
    let nameless = Arc::new(Pod {
        metadata: ObjectMeta {
            resource_version: Some("20".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    });
    for event in [
        Err(Error::WrongKind {
            expected: "v1/Pod".into(),
            found: "v1/Service".into(),
        }),
        Ok(WatchEvent::Deleted(pod("foo", "30"))),
        Ok(WatchEvent::Added(nameless)),
        Ok(WatchEvent::Modified(pod("bar", "55"))),
        Ok(WatchEvent::Added(pod("baz", "32"))),
    ] {
        sender.send(event).expect("watching");
    }
    eventually("every event is applied", PATIENCE, || {
        reflector.last_sync_resource_version() == "32"
    })
    .await;
    assert_eq!(contents(&cache), expected(&[("bar", "55"), ("baz", "32")]));
    let seen = seen.lock().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].contains("v1/Service"));
    assert!(seen[1].contains("metadata.name"));
    assert_eq!(
        lister_watcher.watch_calls().len(),
        1,
        "the watch was never interrupted"
    );
    stop(token, running).await;
}

/// client-go's "very short watch": a watch that closes at once with nothing in it leads to a
/// relist after a backoff, never a tight reconnect loop.
#[tokio::test(start_paused = true)]
async fn a_very_short_watch_relists_after_a_backoff() {
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![], None)),
        |_, call| match call {
            0 => Ok(futures::stream::empty().boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let started = Instant::now();
    let (token, running) = spawn(&reflector);
    eventually("the second watch is open", PATIENCE, || {
        lister_watcher.watch_calls().len() == 2
    })
    .await;
    assert_eq!(lister_watcher.list_calls().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "backed off first"
    );
    stop(token, running).await;
}

/// A malformed line ends the watch with a decode error; the reflector reports it and relists.
#[tokio::test(start_paused = true)]
async fn an_undecodable_event_is_reported_and_the_reflector_relists() {
    let lister_watcher = Scripted::new(
        |_, call| Ok(page(if call == 0 { "1" } else { "3" }, vec![], None)),
        |_, call| match call {
            0 => events_then_close(vec![Err(Error::decode(
                "watch event",
                "expected value",
                b"garbage",
            ))]),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().watch_error_handler({
            let seen = Arc::clone(&seen);
            move |error| seen.lock().push(matches!(error, Error::Decode { .. }))
        }),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the relist ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "3"
    })
    .await;
    assert_eq!(*seen.lock(), [true]);
    stop(token, running).await;
}

/// Ported from client-go's TestReflectorWatchStoppedBefore: a reflector whose token has already
/// fired makes no request at all.
#[tokio::test(start_paused = true)]
async fn a_cancelled_reflector_makes_no_request() {
    let lister_watcher = Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    );
    let token = CancellationToken::new();
    token.cancel();
    reflector.run(token).await;
    assert!(lister_watcher.list_calls().is_empty());
    assert!(lister_watcher.watch_calls().is_empty());
}

/// A list that never answers; it counts how many of its futures were dropped unfinished.
struct HangingList {
    dropped: Arc<AtomicUsize>,
}

struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl ListerWatcher<Pod> for HangingList {
    async fn list(&self, _options: ListOptions) -> Result<ListPage<Pod>> {
        let _counter = DropCounter(Arc::clone(&self.dropped));
        std::future::pending().await
    }

    async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
        pending_watch()
    }
}

/// Stopping while a list is in flight returns at once and abandons the request.
#[tokio::test(start_paused = true)]
async fn stopping_while_listing_abandons_the_list_promptly() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        HangingList {
            dropped: Arc::clone(&dropped),
        },
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    // Virtual time: ten seconds on the paused clock.
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop(token, running).await;
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the in-flight list was dropped"
    );
}

/// Ported from client-go's TestReflectorWatchStoppedAfter and TestRunUntil: stopping while
/// watching returns promptly and drops the watch stream.
#[tokio::test(start_paused = true)]
async fn stopping_while_watching_drops_the_watch_promptly() {
    let (sender, stream) = channel_watch();
    let stream = Mutex::new(Some(stream));
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("1", vec![], None)),
        move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    sender
        .send(Ok(WatchEvent::Added(pod("bar", "2"))))
        .expect("the channel is open");
    eventually("the event is applied", PATIENCE, || {
        reflector.last_sync_resource_version() == "2"
    })
    .await;
    stop(token, running).await;
    assert!(sender.is_closed(), "the watch stream was dropped");
}

/// The reflector and its futures cross threads: a multi-threaded runtime can run and share them.
#[test]
fn the_public_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<Reflector<Pod, Cache<Pod>>>();
    send_sync::<Reflector<Pod, dyn Store<Pod>>>();
    send_sync::<kinformer_reflector::KubeListerWatcher<Pod>>();
    send_sync::<Error>();
    let lister_watcher = Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
    let reflector = Reflector::new(
        lister_watcher,
        Arc::new(Cache::<Pod>::default()),
        ReflectorOptions::default(),
    );
    send(&reflector.run(CancellationToken::new()));
}

/// Ported from client-go's TestReflectorReplacesStoreOnUnsafeDelete: an ERROR event (a corrupt
/// object unsafe-deleted on the server) makes the reflector relist, and the relist's Replace
/// removes the object that the watch had added, keeping the others.
#[tokio::test(start_paused = true)]
async fn an_error_event_relists_and_the_replace_drops_the_corrupt_object() {
    let preexisting = vec![pod("foo-1", "1"), pod("foo-2", "2"), pod("foo-3", "3")];
    let lister_watcher = Scripted::new(
        move |_, call| {
            Ok(page(
                if call == 0 { "3" } else { "5" },
                preexisting.clone(),
                None,
            ))
        },
        |_, call| {
            match call {
            0 => events_then_close(vec![
                Ok(WatchEvent::Added(pod("corrupt", "4"))),
                Err(Error::Api {
                    code: 500,
                    reason: "StorageReadError".into(),
                    message: "failed to prepare current and previous objects: corrupt object has been deleted".into(),
                }),
            ]),
            _ => pending_watch(),
        }
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default(),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the watch added the corrupt object", PATIENCE, || {
        cache.list().len() == 4
    })
    .await;
    eventually("the relist caught up", PATIENCE, || {
        reflector.last_sync_resource_version() == "5"
    })
    .await;
    assert_eq!(lister_watcher.list_versions(), ["0", "4"]);
    assert_eq!(
        contents(&cache),
        expected(&[("foo-1", "1"), ("foo-2", "2"), ("foo-3", "3")])
    );
    stop(token, running).await;
}

/// A server that ignores `sendInitialEvents` never sends the initial-events-end bookmark: when
/// its stream ends without one, the round falls back to a plain list.
#[tokio::test(start_paused = true)]
async fn a_streaming_list_without_its_bookmark_falls_back_to_a_list() {
    let lister_watcher = Scripted::new(
        |_, _| Ok(page("7", vec![pod("listed", "7")], None)),
        |options, _| {
            if options.send_initial_events {
                events_then_close(vec![Ok(WatchEvent::Added(pod("streamed", "6")))])
            } else {
                pending_watch()
            }
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default().use_watch_list(true),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the fallback list ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "7"
    })
    .await;
    assert_eq!(contents(&cache), expected(&[("listed", "7")]));
    assert_eq!(lister_watcher.list_calls().len(), 1);
    stop(token, running).await;
}

/// A relist keeps the cached `Arc` of every object whose resourceVersion did not change and
/// drops the listed copy, so only changed objects are ever held twice; changed, new and
/// version-less objects keep their listed copy.
#[tokio::test(start_paused = true)]
async fn a_relist_reuses_the_cached_copy_of_every_unchanged_object() {
    let versionless = || {
        let mut pod = (*pod("d", "")).clone();
        pod.metadata.resource_version = None;
        Arc::new(pod)
    };
    let lister_watcher = Scripted::new(
        move |options, _| match options.resource_version() {
            "0" => Ok(page(
                "10",
                vec![pod("a", "1"), pod("b", "2"), versionless()],
                Some("next"),
            )),
            "" if options.continue_token.as_deref() == Some("next") => {
                Ok(page("10", vec![pod("c", "3")], None))
            }
            "10" => Ok(page(
                "12",
                vec![pod("a", "1"), pod("b", "12"), pod("c", "3"), versionless()],
                None,
            )),
            other => panic!("unexpected list at {other:?}"),
        },
        |_, call| match call {
            0 => Ok(futures::stream::iter([Err(Error::Expired {
                message: "gone".into(),
            })])
            .boxed()),
            _ => pending_watch(),
        },
    );
    let cache = Arc::new(Cache::<Pod>::default());
    let known = Arc::clone(&cache);
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&cache),
        ReflectorOptions::default()
            .reuse_known_objects(move |pod: &Pod| known.get(pod).ok().flatten()),
    ));
    let (token, running) = spawn(&reflector);
    eventually("the first list ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "10"
    })
    .await;
    let before: BTreeMap<String, Arc<Pod>> = cache
        .list()
        .into_iter()
        .map(|pod| (pod.metadata.name.clone().unwrap_or_default(), pod))
        .collect();
    eventually("the relist ran", PATIENCE, || {
        reflector.last_sync_resource_version() == "12"
    })
    .await;
    let after = |name: &str| {
        cache
            .get_by_key(&format!("ns/{name}"))
            .expect("listed objects are cached")
    };
    assert!(Arc::ptr_eq(&after("a"), &before["a"]), "unchanged: reused");
    assert!(
        Arc::ptr_eq(&after("c"), &before["c"]),
        "unchanged, second page: reused"
    );
    assert!(
        !Arc::ptr_eq(&after("b"), &before["b"]),
        "changed: the listed copy"
    );
    assert_eq!(after("b").metadata.resource_version.as_deref(), Some("12"));
    assert!(
        !Arc::ptr_eq(&after("d"), &before["d"]),
        "no version to compare: the listed copy"
    );
    assert_eq!(
        contents(&cache),
        expected(&[("a", "1"), ("b", "12"), ("c", "3"), ("d", "")])
    );
    stop(token, running).await;
}

/// client-go records the version after the store write, so an informer woken by its initial
/// list could report synced with `LastSyncResourceVersion` still empty. kinformer records it
/// first: every write already sees its own version. A replace the store refuses (an object
/// without a name) puts the previous version back, as if it never happened.
#[tokio::test(start_paused = true)]
async fn every_store_write_already_sees_its_resource_version() {
    let (sender, stream) = channel_watch();
    let stream = Mutex::new(Some(stream));
    let nameless = Arc::new(Pod {
        metadata: ObjectMeta {
            resource_version: Some("4".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    });
    let lister_watcher = Scripted::new(
        move |_, call| {
            Ok(match call {
                0 => page("4", vec![pod("a", "3"), Arc::clone(&nameless)], None),
                _ => page("5", vec![pod("a", "3"), pod("b", "5")], None),
            })
        },
        move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
    );
    let store = Arc::new(RecordingStore::default());
    let reported_on_error = Arc::new(Mutex::new(Vec::new()));
    let reflector = Arc::new(Reflector::new(
        Arc::clone(&lister_watcher),
        Arc::clone(&store),
        ReflectorOptions::default()
            .backoff(quick_backoff())
            .watch_error_handler({
                let store = Arc::clone(&store);
                let reported = Arc::clone(&reported_on_error);
                move |_| reported.lock().push(store.reported_version())
            }),
    ));
    assert!(store.reflector.set(Arc::downgrade(&reflector)).is_ok());
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (reflector, token) = (Arc::clone(&reflector), token.clone());
        async move { reflector.run(token).await }
    });
    eventually("the watch is open", PATIENCE, || {
        !lister_watcher.watch_calls().is_empty()
    })
    .await;
    assert_eq!(
        *reported_on_error.lock(),
        [Some(String::new())],
        "the refused replace left the version where it was"
    );
    for event in [
        WatchEvent::Modified(pod("a", "7")),
        WatchEvent::Deleted(pod("b", "8")),
        WatchEvent::Added(pod("c", "9")),
    ] {
        sender.send(Ok(event)).expect("watching");
    }
    eventually("every event is applied", PATIENCE, || {
        store.seen.lock().len() == 5
    })
    .await;
    let seen = store.seen.lock().clone();
    let pairs: Vec<(&str, &str)> = seen.iter().map(|(w, r)| (w.as_str(), r.as_str())).collect();
    assert_eq!(
        pairs,
        [("4", "4"), ("5", "5"), ("7", "7"), ("8", "8"), ("9", "9")]
    );
    assert_eq!(lister_watcher.watch_calls()[0].resource_version(), "5");
    token.cancel();
    running.await.expect("the reflector task does not panic");
}
