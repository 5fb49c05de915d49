//! client-go's `shared_informer_test.go` behaviours, over an in-memory source (client-go's
//! `FakeControllerSource`): per handler resync periods, watch disruptions, the transform, the
//! watch error handler, relists and indexers. Handler lifecycles are in `handler_ports.rs`.

use crate::common;
use crate::ports;

use std::{sync::Arc, time::Duration};

use common::{FakeSource, Recorder};
use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{Error, HandlerExecutor, InformerOptions, ListenerOptions, QueueKind};
use kinformer_store::{IndexFunc, Indexers};
use kinformer_testing::wait_until;

use ports::{WAIT, informer, secs, start, stop, synced};

/// Ported from client-go's TestListenerResyncPeriods, with its periods (none, 1 s, 3 s) on
/// tokio's paused clock as client-go's runs on a fake clock: the handlers run as tasks, so
/// virtual time moves only when the informer and every handler are idle, and each step
/// asserts exactly what is due by then.
#[tokio::test(start_paused = true)]
async fn each_handler_is_resynced_at_its_own_period() {
    let source = FakeSource::new();
    source.add("pod1");
    source.add("pod2");
    let informer = informer(
        &source,
        InformerOptions::new()
            .resync_period(secs(1))
            .handler_executor(HandlerExecutor::Tasks),
    );
    let (never, every_second, every_three) = (Recorder::new(), Recorder::new(), Recorder::new());
    for (recorder, period) in [(&never, 0), (&every_second, 1), (&every_three, 3)] {
        informer
            .add_event_handler_with_options(
                recorder.handler(),
                ListenerOptions::new().resync_period(secs(period)),
            )
            .unwrap();
    }
    let origin = tokio::time::Instant::now();
    let running = start(&informer);
    synced(&informer).await;
    for recorder in [&never, &every_second, &every_three] {
        assert!(wait_until(WAIT, || recorder.count() == 2).await);
        assert_eq!(recorder.of_kind("initial"), ["pod1", "pod2"]);
        recorder.clear();
    }
    assert!(
        origin.elapsed() < secs(1),
        "the initial list took virtual time"
    );

    let updates = |recorder: &Recorder| recorder.of_kind("update").len();
    for (at_millis, second, three) in [(1_500, 2, 0), (2_500, 4, 0), (3_500, 6, 2)] {
        // Virtual time: the paused clock jumps to each resync due before this point.
        tokio::time::sleep_until(origin + Duration::from_millis(at_millis)).await;
        assert_eq!(
            (updates(&every_second), updates(&every_three)),
            (second, three),
            "resyncs due by {at_millis} ms"
        );
        assert!(never.events().is_empty(), "got {:?}", never.events());
    }
    assert_eq!(every_three.of_kind("update"), ["pod1", "pod2"]);
    stop(running).await;
}

/// Ported from client-go's TestSharedInformerWatchDisruption, for both queues: changes missed
/// while the watch was down arrive with the relist; the unchanged pod1 comes back as a resync,
/// which only the handler due for one receives. On tokio's paused clock, as client-go's runs
/// on a fake clock, with handlers as tasks so that virtual time moves only when all are idle.
#[tokio::test(start_paused = true)]
async fn a_watch_disruption_delivers_missed_changes_and_resyncs_only_to_due_handlers() {
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let source = FakeSource::new();
        source.add("pod1");
        source.add("pod2");
        let informer = informer(
            &source,
            InformerOptions::new()
                .resync_period(secs(1))
                .queue(queue)
                .handler_executor(HandlerExecutor::Tasks),
        );
        let (no_resync, resync) = (Recorder::new(), Recorder::new());
        informer
            .add_event_handler_with_options(
                no_resync.handler(),
                ListenerOptions::new().resync_period(Duration::ZERO),
            )
            .unwrap();
        informer
            .add_event_handler_with_options(
                resync.handler(),
                ListenerOptions::new().resync_period(secs(1)),
            )
            .unwrap();
        let running = start(&informer);
        synced(&informer).await;
        assert!(wait_until(WAIT, || no_resync.names() == ["pod1", "pod2"]).await);
        no_resync.clear();

        source.add_drop_watch("pod3");
        source.modify_drop_watch("pod2");
        // The source never sent the dropped changes, so nothing can be on its way: no wait.
        assert!(
            no_resync.events().is_empty(),
            "{queue:?}: nobody saw the dropped changes"
        );
        // Past one resync check (client-go's test steps its fake clock by a second here) the
        // listener that asked for resyncs gets them; the other one never syncs. A delivered
        // resync proves the check ran.
        assert!(
            wait_until(WAIT, || resync.of_kind("update").len() >= 2).await,
            "{queue:?}: no resync within {WAIT:?}: {:?}",
            resync.events()
        );
        resync.clear();

        source.reset_watch();
        assert!(
            wait_until(WAIT, || no_resync.names() == ["pod2", "pod3"]).await,
            "{queue:?}: got {:?}",
            no_resync.events()
        );
        assert!(
            wait_until(WAIT, || resync.names() == ["pod1", "pod2", "pod3"]).await,
            "{queue:?}: got {:?}",
            resync.events()
        );
        // Another full resync round for the listener that asked for them; the one that did
        // not ask gets none of it.
        resync.clear();
        assert!(
            wait_until(WAIT, || resync.of_kind("update").len() >= 3).await,
            "{queue:?}: no resync round: {:?}",
            resync.events()
        );
        assert_eq!(
            no_resync.events(),
            ["update:pod2", "add:pod3"],
            "{queue:?}: the unchanged pod1 is a resync, not an update"
        );
        stop(running).await;
    }
}

/// Ported from client-go's TestSharedInformerErrorHandling: list errors reach the watch
/// error handler.
#[tokio::test]
async fn list_errors_reach_the_watch_error_handler() {
    let source = FakeSource::new();
    source.add("pod1");
    source.set_list_error(Some("Access Denied"));
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let informer = informer(
        &source,
        InformerOptions::new().watch_error_handler(move |error| {
            let _ = sender.send(error.to_string());
        }),
    );
    let running = start(&informer);
    let error = tokio::time::timeout(WAIT, receiver.recv()).await;
    let error = error.expect("the handler was called").expect("a message");
    assert!(error.contains("Access Denied"), "got {error}");
    assert!(!informer.has_synced());
    stop(running).await;
}

/// Ported from client-go's TestSharedInformerTransformer: the transform runs before objects
/// enter the cache and reach handlers.
#[tokio::test]
async fn the_transform_runs_before_the_cache_and_the_handlers() {
    let source = FakeSource::new();
    source.add("pod1");
    source.add("pod2");
    let informer = informer(
        &source,
        InformerOptions::new().transform(|pod: Arc<Pod>| {
            let mut upper = (*pod).clone();
            upper.metadata.name = upper.metadata.name.map(|name| name.to_uppercase());
            Arc::new(upper)
        }),
    );
    let recorder = Recorder::new();
    informer.add_event_handler(recorder.handler()).unwrap();
    let running = start(&informer);
    synced(&informer).await;
    assert!(wait_until(WAIT, || recorder.names() == ["POD1", "POD2"]).await);
    let mut keys = informer.cache().list_keys();
    keys.sort();
    assert_eq!(keys, ["default/POD1", "default/POD2"]);
    stop(running).await;
}

/// An initial list that breaks off after handing some objects over leaves them applied (the
/// queue takes the list in parts), and the list that completes removes the one it no longer
/// has, with a tombstone, before the informer reports synced; on both queues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initial_list_that_breaks_off_is_ended_by_the_next_one() {
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let source = FakeSource::new();
        source.add("pod1");
        source.add("pod2");
        source.break_off_next_list_and_delete("pod1");
        let informer = informer(&source, InformerOptions::new().queue(queue));
        let recorder = Recorder::new();
        informer.add_event_handler(recorder.handler()).unwrap();
        let running = start(&informer);
        synced(&informer).await;
        assert_eq!(informer.cache().list_keys(), ["default/pod2"], "{queue:?}");
        assert!(
            wait_until(WAIT, || recorder.of_kind("tombstone") == ["pod1"]).await,
            "{queue:?}: got {:?}",
            recorder.events()
        );
        assert_eq!(recorder.of_kind("initial"), ["pod1", "pod2"], "{queue:?}");
        assert!(recorder.of_kind("delete").is_empty(), "{queue:?}");
        stop(running).await;
    }
}

/// A relist that no longer has some objects deletes exactly those, with tombstones, on both
/// queues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_deletes_exactly_the_vanished_objects_with_tombstones() {
    for queue in [QueueKind::InOrder, QueueKind::DeltaFifo] {
        let source = FakeSource::new();
        for i in 1..=5 {
            source.add(&format!("pod{i}"));
        }
        let informer = informer(&source, InformerOptions::new().queue(queue));
        let recorder = Recorder::new();
        informer.add_event_handler(recorder.handler()).unwrap();
        let running = start(&informer);
        synced(&informer).await;
        assert!(wait_until(WAIT, || recorder.count() == 5).await);

        source.delete_drop_watch("pod2");
        source.delete_drop_watch("pod4");
        source.reset_watch();
        assert!(
            wait_until(WAIT, || recorder.of_kind("tombstone") == ["pod2", "pod4"]).await,
            "{queue:?}: got {:?}",
            recorder.events()
        );
        // A change after the relist: once it arrives, nothing of the relist is still on its way.
        source.add("barrier");
        assert!(
            wait_until(WAIT, || recorder
                .of_kind("add")
                .contains(&"barrier".to_owned()))
            .await
        );
        assert!(recorder.of_kind("delete").is_empty(), "{queue:?}");
        assert_eq!(recorder.of_kind("tombstone"), ["pod2", "pod4"], "{queue:?}");
        let mut keys = informer.cache().list_keys();
        keys.sort();
        assert_eq!(
            keys,
            [
                "default/barrier",
                "default/pod1",
                "default/pod3",
                "default/pod5"
            ],
            "{queue:?}"
        );
        stop(running).await;
    }
}

/// Ported from client-go's TestIndexer: indexes added before and after start both answer
/// queries; an index added to a running informer covers what is already cached and what comes
/// next; a taken name is refused either way.
#[tokio::test]
async fn indexers_added_before_and_after_start_answer_queries() {
    let source = FakeSource::new();
    source.add("pod1");
    source.add("pod2");
    let informer = informer(&source, InformerOptions::new());
    let by_name_length: IndexFunc<Pod> =
        Arc::new(|pod: &Pod| vec![common::name_of(pod).len().to_string()]);
    let indexers: Indexers<Pod> = [("length".to_owned(), by_name_length.clone())].into();
    informer.add_indexers(indexers.clone()).unwrap();
    assert!(matches!(
        informer.add_indexers(indexers.clone()),
        Err(Error::Store(_))
    ));
    let running = start(&informer);
    synced(&informer).await;
    assert_eq!(informer.cache().by_index("length", "4").unwrap().len(), 2);

    let by_last_char: IndexFunc<Pod> =
        Arc::new(|pod: &Pod| vec![common::name_of(pod).chars().last().into_iter().collect()]);
    let late: Indexers<Pod> = [("last".to_owned(), by_last_char)].into();
    informer.add_indexers(late).unwrap();
    assert_eq!(
        informer.cache().index_keys("last", "2").unwrap(),
        ["default/pod2"]
    );
    source.add("pod12");
    assert!(
        wait_until(WAIT, || informer
            .cache()
            .index_keys("last", "2")
            .unwrap()
            .len()
            == 2)
        .await
    );
    assert_eq!(informer.cache().by_index("length", "5").unwrap().len(), 1);
    assert!(matches!(
        informer.add_indexers([("length".to_owned(), by_name_length)].into()),
        Err(Error::Store(_))
    ));
    stop(running).await;
}

/// Dropping the `run` future instead of cancelling its token still stops the informer and
/// every handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_future_stops_the_informer() {
    let source = FakeSource::new();
    source.add("pod1");
    let informer = informer(&source, InformerOptions::new());
    let recorder = Recorder::new();
    let registration = informer.add_event_handler(recorder.handler()).unwrap();
    let running = start(&informer);
    synced(&informer).await;
    running.task.abort();
    tokio::time::timeout(WAIT, informer.stopped())
        .await
        .expect("the informer reports stopped");
    assert!(informer.is_stopped());
    tokio::time::timeout(WAIT, registration.stopped())
        .await
        .expect("the handler exits");
}
