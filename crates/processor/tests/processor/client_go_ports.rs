//! client-go's processor behaviours, ported from `processor_listener_test.go` and the parts of
//! `shared_informer_test.go` that need no informer: the tests drive the processor the way the
//! informer does (distribute, should_resync, the upstream signal, snapshots for late joiners).

use crate::common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    thread,
    time::Duration,
};

use common::{Gate, Recorder, obj, start, stop};
use kinformer_processor::{
    Error, HandlerFuncs, ListenerOptions, Notification, ProcessorOptions, Recipients,
    SharedProcessor, determine_resync_period,
};
use tokio::time::Instant;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Ported from client-go's BenchmarkListener (processor_listener_test.go), as a test: five
/// producers add concurrently and the handler receives every notification, each producer's in
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_receives_every_notification_added_concurrently() {
    const PRODUCERS: usize = 5;
    const PER_PRODUCER: usize = 2_000;
    let processor = SharedProcessor::<String>::default();
    let recorder = Recorder::new();
    processor
        .add_handler(recorder.clone(), ListenerOptions::new().name("bench"))
        .expect("processor accepts handlers before start");
    let (token, running) = start(&processor).await;

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| {
            let processor = processor.clone();
            thread::spawn(move || {
                for n in 0..PER_PRODUCER {
                    processor.distribute(
                        Notification::add(obj(&format!("{producer}:{n}"))),
                        Recipients::All,
                    );
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().expect("producer panicked");
    }

    let lines = recorder.wait_for(PRODUCERS * PER_PRODUCER);
    assert_eq!(lines.len(), PRODUCERS * PER_PRODUCER);
    for producer in 0..PRODUCERS {
        let prefix = format!("add {producer}:");
        let sequence: Vec<usize> = lines
            .iter()
            .filter_map(|line| line.strip_prefix(&prefix))
            .map(|n| n.parse().expect("numbered object"))
            .collect();
        assert_eq!(sequence, (0..PER_PRODUCER).collect::<Vec<_>>());
    }
    stop(token, running).await;
}

/// Ported from client-go's TestListenerResyncPeriods: with a 1s check period, listeners asking
/// for no resync, 2s and 3s each receive sync notifications exactly when due.
#[tokio::test(start_paused = true)]
async fn listeners_resync_at_their_own_periods() {
    let processor =
        SharedProcessor::<String>::new(ProcessorOptions::default().resync_period(secs(1)));
    let listeners: Vec<(Recorder, Duration)> = [0, 2, 3]
        .into_iter()
        .map(|period| (Recorder::new(), secs(period)))
        .collect();
    for (index, (recorder, period)) in listeners.iter().enumerate() {
        processor
            .add_handler(
                recorder.clone(),
                ListenerOptions::new()
                    .name(format!("listener{}", index + 1))
                    .resync_period(*period),
            )
            .expect("added before start");
    }
    let (token, running) = start(&processor).await;
    let pods = [obj("pod1"), obj("pod2")];

    // The initial list reaches everyone.
    for pod in &pods {
        processor.distribute(Notification::initial_add(Arc::clone(pod)), Recipients::All);
    }
    for (recorder, _) in &listeners {
        assert_eq!(
            recorder.wait_for(2),
            ["add pod1 initial", "add pod2 initial"]
        );
        recorder.clear();
    }

    // What the informer does when its resync timer fires: ask, then distribute syncs.
    let resync = |processor: &SharedProcessor<String>| {
        if processor.should_resync(Instant::now()) {
            for pod in &pods {
                processor.distribute(
                    Notification::update(Arc::clone(pod), Arc::clone(pod)),
                    Recipients::DueForResync,
                );
            }
        }
    };

    tokio::time::advance(secs(1)).await;
    resync(&processor);
    tokio::time::advance(secs(1)).await;
    resync(&processor);
    assert_eq!(
        listeners[1].0.wait_for(2),
        ["update pod1 -> pod1", "update pod2 -> pod2"]
    );

    tokio::time::advance(secs(1)).await;
    resync(&processor);
    assert_eq!(
        listeners[2].0.wait_for(2),
        ["update pod1 -> pod1", "update pod2 -> pod2"]
    );

    // A barrier notification proves nothing else was queued for listeners 1 and 2.
    processor.distribute(Notification::add(obj("barrier")), Recipients::All);
    assert_eq!(listeners[0].0.wait_for(1), ["add barrier"]);
    assert_eq!(
        listeners[1].0.wait_for(3),
        ["update pod1 -> pod1", "update pod2 -> pod2", "add barrier"]
    );
    stop(token, running).await;
}

/// Ported from client-go's TestResyncCheckPeriod: before start, each shorter requested period
/// lowers the processor's check period, and listeners keep the periods they asked for.
#[test]
fn resync_check_period_follows_the_shortest_period_requested_before_start() {
    let processor = SharedProcessor::<String>::new(
        ProcessorOptions::default().resync_period(Duration::from_secs(12 * 3600)),
    );
    let add = |period: Duration| {
        processor
            .add_handler(
                HandlerFuncs::new(),
                ListenerOptions::new().resync_period(period),
            )
            .expect("added before start")
    };

    let handler1 = add(Duration::ZERO);
    assert_eq!(processor.resync_check_period(), secs(12 * 3600));
    assert_eq!(handler1.resync_period(), Duration::ZERO);

    let handler2 = add(secs(60));
    assert_eq!(processor.resync_check_period(), secs(60));
    assert_eq!(handler1.resync_period(), Duration::ZERO);
    assert_eq!(handler2.resync_period(), secs(60));

    let handler3 = add(secs(55));
    assert_eq!(processor.resync_check_period(), secs(55));
    assert_eq!(handler1.resync_period(), Duration::ZERO);
    assert_eq!(handler2.resync_period(), secs(60));
    assert_eq!(handler3.resync_period(), secs(55));

    let handler4 = add(secs(5));
    assert_eq!(processor.resync_check_period(), secs(5));
    assert_eq!(handler1.resync_period(), Duration::ZERO);
    assert_eq!(handler2.resync_period(), secs(60));
    assert_eq!(handler3.resync_period(), secs(55));
    assert_eq!(handler4.resync_period(), secs(5));
}

/// The rest of client-go's AddEventHandlerWithResyncPeriod: a period under one second is raised
/// to it, and after start a period under the check period is raised to the check period.
#[tokio::test]
async fn short_periods_are_raised_to_the_minimum_and_after_start_to_the_check_period() {
    let processor =
        SharedProcessor::<String>::new(ProcessorOptions::default().resync_period(secs(10)));
    let tiny = processor
        .add_handler(
            HandlerFuncs::new(),
            ListenerOptions::new().resync_period(Duration::from_millis(10)),
        )
        .expect("added before start");
    assert_eq!(tiny.requested_resync_period(), secs(1));
    assert_eq!(processor.resync_check_period(), secs(1));

    let processor =
        SharedProcessor::<String>::new(ProcessorOptions::default().resync_period(secs(10)));
    let (token, running) = start(&processor).await;
    let late = processor
        .add_handler(
            HandlerFuncs::new(),
            ListenerOptions::new().resync_period(secs(3)),
        )
        .expect("added while running");
    assert_eq!(late.resync_period(), secs(10));
    assert_eq!(processor.resync_check_period(), secs(10));
    let default = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added while running");
    assert_eq!(default.resync_period(), secs(10));
    stop(token, running).await;
}

/// client-go's determineResyncPeriod, case by case.
#[test]
fn resync_period_is_zero_when_either_side_is_zero_and_at_least_the_check_period() {
    assert_eq!(
        determine_resync_period(Duration::ZERO, secs(5)),
        Duration::ZERO
    );
    assert_eq!(
        determine_resync_period(secs(5), Duration::ZERO),
        Duration::ZERO
    );
    assert_eq!(determine_resync_period(secs(2), secs(5)), secs(5));
    assert_eq!(determine_resync_period(secs(5), secs(5)), secs(5));
    assert_eq!(determine_resync_period(secs(9), secs(5)), secs(9));
}

/// A listener starts out not syncing: sync notifications (a resync, an unchanged object in a
/// relist) reach only the listeners the last resync check found due, so a handler without a
/// resync period never receives one. client-go starts every listener syncing
/// (`listeners[listener] = true`) and only a resync check clears it, so with no resync period
/// anywhere a relist delivered every unchanged object to every handler.
#[tokio::test(start_paused = true)]
async fn sync_notifications_reach_only_listeners_found_due_by_a_resync_check() {
    let processor =
        SharedProcessor::<String>::new(ProcessorOptions::default().resync_period(secs(1)));
    let never = Recorder::new();
    let often = Recorder::new();
    processor
        .add_handler(
            never.clone(),
            ListenerOptions::new().resync_period(Duration::ZERO),
        )
        .expect("added");
    processor
        .add_handler(often.clone(), ListenerOptions::new().resync_period(secs(1)))
        .expect("added");
    let (token, running) = start(&processor).await;
    let pod = obj("pod1");
    let resync = || {
        processor.distribute(
            Notification::update(Arc::clone(&pod), Arc::clone(&pod)),
            Recipients::DueForResync,
        );
    };
    let barrier = |name: &str| processor.distribute(Notification::add(obj(name)), Recipients::All);

    // Before any resync check, and after one that finds nobody due: nobody receives it.
    resync();
    assert!(
        !processor.should_resync(Instant::now()),
        "nobody is due yet"
    );
    resync();
    barrier("first");
    assert_eq!(never.wait_for(1), ["add first"]);
    assert_eq!(often.wait_for(1), ["add first"]);

    // Once its period has passed, the listener that asked for resyncs receives them.
    tokio::time::advance(secs(1)).await;
    assert!(processor.should_resync(Instant::now()));
    resync();
    barrier("second");
    assert_eq!(never.wait_for(2), ["add first", "add second"]);
    assert_eq!(
        often.wait_for(3),
        ["add first", "update pod1 -> pod1", "add second"]
    );
    stop(token, running).await;
}

/// Ported from client-go's TestSharedInformerRemoveHandler.
#[test]
fn removing_handlers_unregisters_each_one() {
    let processor = SharedProcessor::<String>::default();
    let handle1 = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added");
    let handle2 = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added");
    assert_eq!(processor.listener_count(), 2);
    assert!(processor.remove_listener(&handle2));
    assert_eq!(processor.listener_count(), 1);
    assert!(processor.remove_listener(&handle1));
    assert_eq!(processor.listener_count(), 0);
}

/// Ported from client-go's TestSharedInformerRemoveForeignHandler.
#[test]
fn removing_a_registration_through_another_processor_changes_nothing() {
    let processor = SharedProcessor::<String>::default();
    let processor2 = SharedProcessor::<String>::default();
    let handle1 = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added");
    let handle2 = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added");
    assert!(!processor2.is_registered(&handle1));
    assert!(!processor2.is_registered(&handle2));
    assert!(!processor2.remove_listener(&handle1));
    assert_eq!(processor.listener_count(), 2);
    assert_eq!(processor2.listener_count(), 0);
    assert!(processor.is_registered(&handle1));
    assert!(processor.is_registered(&handle2));
    assert!(handle1.is_active());

    assert!(processor.remove_listener(&handle2));
    assert_eq!(processor.listener_count(), 1);
    assert!(processor.remove_listener(&handle1));
    assert_eq!(processor.listener_count(), 0);
}

/// Ported from client-go's TestSharedInformerMultipleRegistration: one handler registered twice
/// gets two independent registrations.
#[test]
fn one_handler_registered_twice_gets_two_independent_registrations() {
    let processor = SharedProcessor::<String>::default();
    let handler = Recorder::new();
    let reg1 = processor
        .add_handler(handler.clone(), ListenerOptions::new())
        .expect("added once");
    assert!(processor.is_registered(&reg1));
    let reg2 = processor
        .add_handler(handler, ListenerOptions::new())
        .expect("added twice");
    assert!(processor.is_registered(&reg2));
    assert_ne!(reg1, reg2);
    assert_eq!(processor.listener_count(), 2);

    assert!(processor.remove_listener(&reg1));
    assert!(!processor.is_registered(&reg1));
    assert!(processor.is_registered(&reg2));
    assert_eq!(processor.listener_count(), 1);

    reg2.remove();
    assert!(!processor.is_registered(&reg2));
    assert_eq!(processor.listener_count(), 0);
}

/// Ported from client-go's TestRemovingRemovedSharedInformer.
#[test]
fn removing_a_removed_registration_is_harmless() {
    let processor = SharedProcessor::<String>::default();
    let reg = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added");
    assert!(processor.remove_listener(&reg));
    assert!(!processor.is_registered(&reg));
    assert!(!processor.remove_listener(&reg));
    reg.remove();
    assert!(!processor.is_registered(&reg));
    assert!(
        reg.is_stopped(),
        "a never-started listener has nothing to wait for"
    );
}

/// Ported from client-go's TestAddOnStoppedSharedInformer and TestStateSharedInformer.
#[tokio::test]
async fn a_stopped_processor_refuses_new_listeners() {
    let processor = SharedProcessor::<String>::default();
    assert!(!processor.is_running() && !processor.is_stopped());
    let (token, running) = start(&processor).await;
    assert!(processor.is_running() && !processor.is_stopped());
    stop(token, running).await;
    assert!(processor.is_stopped() && !processor.is_running());

    let refused = processor.add_handler(HandlerFuncs::new(), ListenerOptions::new().name("late"));
    assert!(
        matches!(&refused, Err(Error::Stopped { name }) if name == "late"),
        "{refused:?}"
    );
    assert!(matches!(
        processor.subscribe(ListenerOptions::new()),
        Err(Error::Stopped { .. })
    ));
}

/// Ported from client-go's TestRemoveOnStoppedSharedInformer.
#[tokio::test]
async fn removing_from_a_stopped_processor_is_harmless() {
    let processor = SharedProcessor::<String>::default();
    let reg = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added");
    let (token, running) = start(&processor).await;
    stop(token, running).await;
    assert!(reg.is_stopped());
    assert!(!processor.remove_listener(&reg));
    reg.remove();
}

/// A processor runs once.
#[tokio::test]
async fn running_twice_is_refused() {
    let processor = SharedProcessor::<String>::default();
    let (token, running) = start(&processor).await;
    let again = processor
        .run(tokio_util::sync::CancellationToken::new())
        .await;
    assert!(matches!(again, Err(Error::AlreadyStarted)), "{again:?}");
    stop(token, running).await;
}

/// Ported from client-go's TestRemoveWhileActive: after removal the handler receives nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_listener_receives_nothing_more() {
    let processor = SharedProcessor::<String>::default();
    let recorder = Recorder::new();
    let handle = processor
        .add_handler(recorder.clone(), ListenerOptions::new())
        .expect("added");
    let witness = Recorder::new();
    processor
        .add_handler(witness.clone(), ListenerOptions::new())
        .expect("added");
    let (token, running) = start(&processor).await;

    processor.distribute(Notification::add(obj("pod1")), Recipients::All);
    assert_eq!(recorder.wait_for(1), ["add pod1"]);
    handle.remove();
    assert!(!processor.is_registered(&handle));
    handle.stopped().await;

    processor.distribute(Notification::add(obj("pod2")), Recipients::All);
    assert_eq!(witness.wait_for(2), ["add pod1", "add pod2"]);
    assert_eq!(recorder.lines(), ["add pod1"]);
    stop(token, running).await;
}

/// Ported from client-go's TestAddWhileActive: a registration is not synced before the upstream
/// is; a late joiner receives the snapshot as initial adds and is not synced until its handler
/// has processed them, even though the upstream synced long ago.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_added_while_active_syncs_only_after_handling_the_snapshot() {
    let processor = SharedProcessor::<String>::default();
    let listener1 = Recorder::new();
    let handle1 = processor
        .add_handler(listener1.clone(), ListenerOptions::new().name("original"))
        .expect("added");
    assert!(!handle1.has_synced(), "synced before run");
    let (token, running) = start(&processor).await;

    let pod1 = obj("pod1");
    processor.distribute(
        Notification::initial_add(Arc::clone(&pod1)),
        Recipients::All,
    );
    assert_eq!(listener1.wait_for(1), ["add pod1 initial"]);
    assert!(!handle1.has_synced(), "synced before the upstream");
    processor.upstream_synced().mark_synced();
    assert!(handle1.synced().await);
    assert!(handle1.has_synced());

    // The informer hands a late joiner its cache snapshot; the handler is held at a gate.
    let gate = Gate::new();
    let listener2 = Recorder::new();
    let handler2 = {
        let (gate, listener2) = (gate.clone(), listener2.clone());
        HandlerFuncs::new().add_func(move |obj: Arc<String>, initial| {
            gate.pass();
            listener2.push(format!(
                "add {obj}{}",
                if initial.is_initial_list() {
                    " initial"
                } else {
                    ""
                }
            ));
        })
    };
    let handle2 = processor
        .add_handler_with_initial(handler2, ListenerOptions::new().name("late"), [pod1])
        .expect("added while running");
    gate.wait_for_arrivals(1);
    assert!(!handle2.has_synced(), "synced before processing anything");
    gate.open();
    assert!(handle2.synced().await);

    processor.distribute(Notification::add(obj("pod2")), Recipients::All);
    assert_eq!(listener2.wait_for(2), ["add pod1 initial", "add pod2"]);
    assert_eq!(listener1.wait_for(2), ["add pod1 initial", "add pod2"]);
    assert!(processor.is_registered(&handle1) && processor.is_registered(&handle2));
    stop(token, running).await;
}

/// The upstream half of has_synced: a listener that has handled all its initial notifications
/// is still unsynced until the caller's signal says the upstream has synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn has_synced_waits_for_the_upstream_signal() {
    let upstream = kinformer_processor::UpstreamSynced::new();
    let processor = SharedProcessor::<String>::new(
        ProcessorOptions::default().upstream_synced(upstream.clone()),
    );
    let recorder = Recorder::new();
    let reg = processor
        .add_handler(recorder.clone(), ListenerOptions::new())
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(Notification::initial_add(obj("pod1")), Recipients::All);
    recorder.wait_for(1);
    assert!(!reg.has_synced());
    let waiter = tokio::spawn({
        let reg = reg.clone();
        async move { reg.synced().await }
    });
    upstream.mark_synced();
    assert!(waiter.await.expect("waiter panicked"));
    assert!(reg.has_synced());
    stop(token, running).await;
}

/// Removal during delivery: `remove` returns while the handler is still inside a call, the
/// pending notifications are discarded, and `stopped` resolves only once the handler returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_returns_at_once_and_stopped_waits_for_the_handler_to_exit() {
    let processor = SharedProcessor::<String>::default();
    let gate = Gate::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (gate, calls) = (gate.clone(), Arc::clone(&calls));
        HandlerFuncs::new().add_func(move |_obj: Arc<String>, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            gate.pass();
        })
    };
    let reg = processor
        .add_handler(handler, ListenerOptions::new().name("stuck"))
        .expect("added");
    let (token, running) = start(&processor).await;
    for n in 0..10 {
        processor.distribute(Notification::add(obj(&format!("pod{n}"))), Recipients::All);
    }
    gate.wait_for_arrivals(1);

    reg.remove();
    assert!(!processor.is_registered(&reg));
    assert!(!reg.is_active());
    assert_eq!(
        reg.stats().buffered,
        0,
        "pending notifications are discarded"
    );
    // The handler is held inside its call, so `stopped` must be waiting: polled once, it is.
    let mut stopped = Box::pin(reg.stopped());
    assert!(
        futures::FutureExt::now_or_never(&mut stopped).is_none(),
        "stopped resolved while the handler was still running"
    );
    assert!(!reg.is_stopped());

    gate.open();
    stopped.await;
    assert!(reg.is_stopped());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no call after removal");
    assert_eq!(reg.stats().delivered, 1);
    stop(token, running).await;
}

/// Ported from client-go's TestSharedInformerHandlerAbuse (scaled down): handlers added and
/// removed from many threads while notifications flow, without deadlock or loss of the
/// remaining listeners' notifications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_added_and_removed_concurrently_while_distributing() {
    let processor =
        SharedProcessor::<String>::new(ProcessorOptions::default().resync_period(secs(1)));
    let steady = Recorder::new();
    processor
        .add_handler(steady.clone(), ListenerOptions::new().name("steady"))
        .expect("added");
    let (token, running) = start(&processor).await;

    let workers: Vec<_> = (0..8_u64)
        .map(|worker| {
            let processor = processor.clone();
            thread::spawn(move || {
                let mut handles = Vec::new();
                for step in 0..200_u64 {
                    // A cheap deterministic mix of adds and removals.
                    if (step * 7 + worker) % 3 != 0 || handles.is_empty() {
                        let reg = processor
                            .add_handler(
                                HandlerFuncs::new(),
                                ListenerOptions::new().resync_period(secs(1)),
                            )
                            .expect("added while running");
                        handles.push(reg);
                    } else {
                        let reg: kinformer_processor::Registration<String> =
                            handles.swap_remove((step as usize) % handles.len());
                        assert!(processor.remove_listener(&reg));
                    }
                }
                handles
            })
        })
        .collect();
    for n in 0..500 {
        processor.distribute(Notification::add(obj(&format!("pod{n}"))), Recipients::All);
        if n % 125 == 0 {
            processor.should_resync(Instant::now());
        }
    }
    let mut survivors = Vec::new();
    for worker in workers {
        survivors.extend(worker.join().expect("worker panicked"));
    }
    assert_eq!(processor.listener_count(), survivors.len() + 1);
    assert_eq!(steady.wait_for(500).len(), 500);
    stop(token, running).await;
    for reg in &survivors {
        assert!(reg.is_stopped());
    }
}
