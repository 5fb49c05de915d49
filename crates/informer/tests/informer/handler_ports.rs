//! client-go's `shared_informer_test.go` behaviours of handlers over an in-memory source
//! (client-go's `FakeControllerSource`): handlers added late, during churn or while starting,
//! removed during delivery, and per registration `has_synced`.

use crate::common;
use crate::ports;

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{FakeSource, Recorder, slow};
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{
    Error, HandlerFuncs, InformerOptions, ListenerOptions, Notification, SharedIndexInformer,
};
use kinformer_testing::wait_until;
use tokio_util::sync::CancellationToken;

use ports::{WAIT, informer, secs, start, stop, synced};

/// Ported from client-go's TestSharedInformerRemoveHandler, TestSharedInformerRemoveForeignHandler,
/// TestSharedInformerMultipleRegistration and TestRemovingRemovedSharedInformer.
#[tokio::test]
async fn handlers_are_removed_only_from_their_own_informer_and_only_once() {
    let source = FakeSource::new();
    let informer = informer(&source, InformerOptions::new());
    let other = SharedIndexInformer::new(FakeSource::new(), InformerOptions::<Pod>::new());
    let same = Recorder::new();
    let first = informer.add_event_handler(same.handler()).unwrap();
    let second = informer.add_event_handler(same.handler()).unwrap();
    assert_eq!(informer.health().handlers.len(), 2);

    assert!(
        !other.remove_event_handler(&first),
        "a foreign handle is left alone"
    );
    assert_eq!(informer.health().handlers.len(), 2);
    assert!(first.is_active());

    assert!(informer.remove_event_handler(&first));
    assert!(!first.is_active());
    assert!(second.is_active());
    assert!(
        !informer.remove_event_handler(&first),
        "removing twice is harmless"
    );
    assert!(informer.remove_event_handler(&second));
    assert!(informer.health().handlers.is_empty());
}

/// Ported from client-go's TestStateSharedInformer, TestAddOnStoppedSharedInformer and
/// TestRemoveOnStoppedSharedInformer.
#[tokio::test]
async fn the_informer_reports_started_and_stopped_and_refuses_handlers_once_stopped() {
    let source = FakeSource::new();
    source.add("pod1");
    let informer = informer(&source, InformerOptions::new());
    let recorder = Recorder::new();
    let registration = informer.add_event_handler(recorder.handler()).unwrap();
    assert!(!informer.has_started());
    assert!(!informer.is_stopped());
    assert!(!registration.has_synced(), "synced before run");

    let running = start(&informer);
    assert!(wait_until(WAIT, || recorder.names() == ["pod1"]).await);
    assert!(informer.has_started());
    assert!(!informer.is_stopped());
    assert!(matches!(
        informer.run(CancellationToken::new()).await,
        Err(Error::AlreadyStarted { .. })
    ));

    stop(running).await;
    assert!(informer.is_stopped());
    assert!(informer.has_started());
    assert!(
        registration.is_stopped(),
        "run waits for every handler to exit"
    );
    assert!(matches!(
        informer.add_event_handler(Recorder::new().handler()),
        Err(Error::Stopped { .. })
    ));
    informer.remove_event_handler(&registration);
}

/// Ported from client-go's TestRemoveWhileActive: a removed handler receives nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_handler_receives_nothing_more() {
    let source = FakeSource::new();
    let informer = informer(&source, InformerOptions::new());
    let recorder = Recorder::new();
    let registration = informer.add_event_handler(recorder.handler()).unwrap();
    let running = start(&informer);
    synced(&informer).await;
    source.add("pod1");
    assert!(wait_until(WAIT, || recorder.names() == ["pod1"]).await);

    registration.shutdown().await;
    assert!(!registration.is_active());
    // A witness registered throughout: once it has pod2, pod2 was distributed, to every
    // registered handler at once.
    let witness = Recorder::new();
    informer.add_event_handler(witness.handler()).unwrap();
    source.add("pod2");
    assert!(wait_until(WAIT, || witness.names() == ["pod1", "pod2"]).await);
    assert_eq!(recorder.names(), ["pod1"]);
    stop(running).await;
}

/// Ported from client-go's TestAddWhileActive: a handler added after start first gets the
/// cache as initial adds, then live events, and syncs on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_added_while_active_gets_the_cache_then_live_events() {
    let source = FakeSource::new();
    let informer = informer(&source, InformerOptions::new());
    let original = Recorder::new();
    let first = informer.add_event_handler(original.handler()).unwrap();
    assert!(!first.has_synced());
    let running = start(&informer);
    synced(&informer).await;
    source.add("pod1");
    assert!(wait_until(WAIT, || original.names() == ["pod1"]).await);
    assert!(tokio::time::timeout(WAIT, first.synced()).await.unwrap());

    let late = Recorder::new();
    let second = informer.add_event_handler(late.handler()).unwrap();
    source.add("pod2");
    assert!(wait_until(WAIT, || late.names() == ["pod1", "pod2"]).await);
    assert!(tokio::time::timeout(WAIT, second.synced()).await.unwrap());
    assert_eq!(late.events(), ["initial:pod1", "add:pod2"]);
    // Each handler runs on its own thread: the original one may still be on its way to pod2.
    assert!(
        wait_until(WAIT, || original.events() == ["add:pod1", "add:pod2"]).await,
        "got {:?}",
        original.events()
    );
    stop(running).await;
}

/// Late joiners under load (client-go's blockDeltas): handlers added while changes stream in
/// see every key's history once, starting from an add, and end with the cache's view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_joining_during_churn_miss_nothing_and_see_nothing_twice() {
    let source = FakeSource::new();
    let informer = informer(&source, InformerOptions::new());
    let running = start(&informer);
    synced(&informer).await;

    let producer = tokio::task::spawn_blocking({
        let source = Arc::clone(&source);
        move || {
            for i in 0..600 {
                let name = format!("pod{}", i % 50);
                match i % 7 {
                    0 | 3 => source.delete(&name),
                    1 | 4 => source.modify(&name),
                    _ => source.add(&name),
                }
            }
        }
    });
    let mut late = Vec::new();
    for _ in 0..5 {
        // Pacing: the joins spread over the churn.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let recorder = Recorder::new();
        informer.add_event_handler(recorder.handler()).unwrap();
        late.push(recorder);
    }
    producer.await.unwrap();
    let expected = source.names();
    assert!(
        wait_until(WAIT, || {
            let mut cached: Vec<String> = informer
                .cache()
                .list()
                .iter()
                .map(|pod| common::name_of(pod))
                .collect();
            cached.sort();
            cached == expected
        })
        .await
    );
    // The cache is written before handlers run; each late handler catches up on its own thread.
    for recorder in &late {
        assert!(
            wait_until(WAIT, || alive_names(&recorder.events()) == expected).await,
            "a late handler's view never reached the cache's: {:?}",
            recorder.events()
        );
    }

    for recorder in &late {
        let mut present: HashMap<String, bool> = HashMap::new();
        for event in recorder.events() {
            let (kind, name) = event.split_once(':').unwrap();
            let was = present.get(name).copied().unwrap_or(false);
            match kind {
                "initial" | "add" => assert!(!was, "{name} added twice: {:?}", recorder.events()),
                "update" | "delete" => assert!(was, "{kind} of unseen {name}"),
                other => panic!("unexpected {other}"),
            }
            present.insert(name.to_owned(), kind != "delete");
        }
        let mut seen: Vec<String> = present
            .into_iter()
            .filter_map(|(name, alive)| alive.then_some(name))
            .collect();
        seen.sort();
        assert_eq!(seen, expected, "a late handler's view equals the cache");
    }
    stop(running).await;
}

/// client-go's TestRemoveWhileActive, under delivery: removal returns at once while the
/// handler is busy, pending notifications are dropped, and `stopped` resolves once the
/// handler has exited. The handler blocks in its first call until the test releases it, so
/// `remove` returning at all proves it does not wait for the handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_busy_handler_returns_at_once_and_stopped_waits_for_it() {
    let source = FakeSource::new();
    for i in 0..200 {
        source.add(&format!("pod{i}"));
    }
    let informer = informer(&source, InformerOptions::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let (entered, entered_rx) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let registration = informer
        .add_event_handler(HandlerFuncs::new().add_func({
            let calls = Arc::clone(&calls);
            move |_: Arc<Pod>, _| {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    let _ = entered.send(());
                    // Busy until the test says so (or drops the sender).
                    let _ = released.recv();
                }
            }
        }))
        .unwrap();
    let running = start(&informer);
    tokio::task::spawn_blocking(move || entered_rx.recv())
        .await
        .unwrap()
        .expect("the handler is called");

    registration.remove();
    let mut stopped = Box::pin(registration.stopped());
    assert!(
        futures::poll!(stopped.as_mut()).is_pending(),
        "stopped resolved while the handler was still in its call"
    );
    drop(release);
    tokio::time::timeout(WAIT, stopped)
        .await
        .expect("the handler exits after its current call");
    // The handler has exited: the ~199 pending notifications were dropped.
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "pending notifications were delivered"
    );
    stop(running).await;
}

/// Per registration `has_synced` (client-go's TestSharedInformerHasSynced family): a slow
/// handler syncs only once it has handled its initial list, independently of a fast one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_registration_syncs_when_its_own_handler_has_handled_the_initial_list() {
    let source = FakeSource::new();
    for i in 0..20 {
        source.add(&format!("pod{i}"));
    }
    let informer = informer(&source, InformerOptions::new());
    let (fast, slow_recorder) = (Recorder::new(), Recorder::new());
    let fast_registration = informer.add_event_handler(fast.handler()).unwrap();
    let slow_registration = informer
        .add_event_handler(slow(&slow_recorder, Duration::from_millis(100)))
        .unwrap();
    let running = start(&informer);
    synced(&informer).await;
    assert!(
        tokio::time::timeout(WAIT, fast_registration.synced())
            .await
            .unwrap()
    );
    assert!(
        !slow_registration.has_synced(),
        "the slow handler cannot have handled 20 adds yet ({} done)",
        slow_recorder.count()
    );
    assert!(
        tokio::time::timeout(WAIT, slow_registration.synced())
            .await
            .unwrap()
    );
    assert_eq!(slow_recorder.count(), 20);
    stop(running).await;
}

/// The informer as an async stream: a late subscriber gets the cache, then live events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_subscriber_streams_the_cache_then_live_events() {
    use futures::StreamExt;

    let source = FakeSource::new();
    source.add("pod1");
    let informer = informer(&source, InformerOptions::new());
    let running = start(&informer);
    synced(&informer).await;
    let mut stream = informer
        .subscribe(ListenerOptions::new().name("stream"))
        .unwrap();
    source.add("pod2");
    let first = tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap()
        .unwrap();
    assert!(first.is_in_initial_list());
    assert_eq!(common::name_of(first.object()), "pod1");
    let second = tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(second, Notification::Add { .. }) && !second.is_in_initial_list());
    assert_eq!(common::name_of(second.object()), "pod2");
    assert!(stream.registration().has_synced());
    stop(running).await;
    assert!(
        tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .is_none()
    );
}

/// Ported from client-go's TestSharedInformerInitializationRace: adding a handler while the
/// informer starts is safe, and the handler gets the initial list either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_handler_while_the_informer_starts_is_safe() {
    for _ in 0..20 {
        let source = FakeSource::new();
        source.add("pod1");
        let informer = informer(&source, InformerOptions::new());
        let recorder = Recorder::new();
        let adder = tokio::spawn({
            let (informer, handler) = (informer.clone(), recorder.handler());
            async move { informer.add_event_handler(handler) }
        });
        let running = start(&informer);
        let registration = adder.await.unwrap().unwrap();
        assert!(
            tokio::time::timeout(WAIT, registration.synced())
                .await
                .unwrap()
        );
        assert_eq!(recorder.names(), ["pod1"]);
        stop(running).await;
    }
}

/// Ported from client-go's TestSharedInformerHandlerAbuse: many tasks adding and removing
/// handlers while events flow and while the informer stops; the only error is "stopped".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_added_and_removed_concurrently_while_events_flow() {
    let source = FakeSource::new();
    let informer = informer(&source, InformerOptions::new().resync_period(secs(1)));
    let running = start(&informer);
    synced(&informer).await;
    let workers: Vec<_> = (0..8_u64)
        .map(|worker| {
            let informer = informer.clone();
            tokio::spawn(async move {
                let mut registrations = Vec::new();
                let mut rng = worker.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for _ in 0..200 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    if rng % 2 == 0 || registrations.is_empty() {
                        match informer.add_event_handler_with_options(
                            Recorder::new().handler(),
                            ListenerOptions::new().resync_period(secs(1)),
                        ) {
                            Ok(registration) => registrations.push(registration),
                            Err(Error::Stopped { .. }) => return,
                            Err(other) => panic!("unexpected error: {other}"),
                        }
                    } else {
                        let index = usize::try_from(rng).unwrap_or(0) % registrations.len();
                        let registration: kinformer_informer::Registration<Pod> =
                            registrations.swap_remove(index);
                        informer.remove_event_handler(&registration);
                    }
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for i in 0..2_000 {
        let name = format!("pod{}", i % 100);
        match i % 3 {
            0 => source.add(&name),
            1 => source.modify(&name),
            _ => source.delete(&name),
        }
    }
    stop(running).await;
    for worker in workers {
        worker.await.expect("a worker panicked");
    }
    assert!(informer.is_stopped());
}

/// The names a handler's events leave alive, sorted: the last event of each name is not a
/// delete.
fn alive_names(events: &[String]) -> Vec<String> {
    let mut alive = std::collections::BTreeMap::new();
    for event in events {
        if let Some((kind, name)) = event.split_once(':') {
            alive.insert(name.to_owned(), kind != "delete");
        }
    }
    alive
        .into_iter()
        .filter_map(|(name, alive)| alive.then_some(name))
        .collect()
}
