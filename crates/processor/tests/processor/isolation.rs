//! Handler isolation: a blocked handler, a panicking handler and a normal one share a processor
//! and never affect one another; bounded buffers count what they drop.

use crate::common;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant as StdInstant},
};

use common::{Gate, PATIENCE, Recorder, eventually, obj, start, stop};
use kinformer_processor::{
    BufferPolicy, Error, HandlerFuncs, KeyFunc, ListenerOptions, Notification, Overflow,
    ProcessorOptions, Recipients, SharedProcessor,
};

const EVENTS: usize = 1_000;

fn numbered(n: usize) -> Notification<String> {
    Notification::add(obj(&n.to_string()))
}

fn numbers(lines: &[String]) -> Vec<usize> {
    lines
        .iter()
        .map(|line| {
            line.strip_prefix("add ")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("unexpected line {line:?}"))
        })
        .collect()
}

/// Three listeners: one stuck in its first call, one panicking on every tenth notification,
/// one normal. The normal one gets everything while the stuck one is still stuck; the
/// panicking one keeps going, with an exact panic count; each sees its notifications in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_handler_and_a_panicking_handler_do_not_affect_a_normal_one() {
    let processor = SharedProcessor::<String>::default();

    let gate = Gate::new();
    let slow_seen = Recorder::new();
    let slow = {
        let (gate, seen) = (gate.clone(), slow_seen.clone());
        HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
            gate.pass();
            seen.push(format!("add {obj}"));
        })
    };
    let slow = processor
        .add_handler(slow, ListenerOptions::new().name("slow"))
        .expect("added");

    let panicky_seen = Recorder::new();
    let panicky = {
        let seen = panicky_seen.clone();
        HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
            let n: usize = obj.parse().expect("numbered object");
            if n % 10 == 9 {
                panic!("handler fails on {n}");
            }
            seen.push(format!("add {obj}"));
        })
    };
    let panicky = processor
        .add_handler(panicky, ListenerOptions::new().name("panicky"))
        .expect("added");

    let normal_seen = Recorder::new();
    let normal = processor
        .add_handler(normal_seen.clone(), ListenerOptions::new().name("normal"))
        .expect("added");

    let (token, running) = start(&processor).await;
    for n in 0..EVENTS {
        processor.distribute(numbered(n), Recipients::All);
    }

    // While the slow handler is stuck in its first call (the gate is shut until the end).
    let normal_lines = normal_seen.wait_for(EVENTS);
    assert_eq!(numbers(&normal_lines), (0..EVENTS).collect::<Vec<_>>());
    gate.wait_for_arrivals(1);
    assert!(
        slow_seen.lines().is_empty(),
        "the slow handler is still stuck"
    );
    let slow_stats = slow.stats();
    assert_eq!(
        slow_stats.delivered, 1,
        "the slow handler is inside its first call"
    );
    assert_eq!(slow_stats.buffered, EVENTS - 1);

    let expected_kept: Vec<usize> = (0..EVENTS).filter(|n| n % 10 != 9).collect();
    let panicky_lines = panicky_seen.wait_for(expected_kept.len());
    assert_eq!(numbers(&panicky_lines), expected_kept);
    // The last notification panics; wait until it has been handled before counting.
    let deadline = StdInstant::now() + PATIENCE;
    while panicky.stats().panicked < (EVENTS / 10) as u64 && StdInstant::now() < deadline {
        // Polling: the stats have no signal to wait on.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let panicky_stats = panicky.stats();
    assert_eq!(panicky_stats.delivered, EVENTS as u64);
    assert_eq!(panicky_stats.panicked, (EVENTS / 10) as u64);
    assert_eq!(normal.stats().panicked, 0);
    assert_eq!(normal.stats().delivered, EVENTS as u64);

    gate.open();
    assert_eq!(
        numbers(&slow_seen.wait_for(EVENTS)),
        (0..EVENTS).collect::<Vec<_>>()
    );
    // 999 if the thread took the first notification before the rest arrived, else 1000.
    assert!(slow.stats().peak_buffered >= EVENTS - 1);
    stop(token, running).await;
}

/// A handler that blocks its thread (sync code) leaves a single-threaded runtime free: timers
/// fire and tasks run while it sleeps.
#[tokio::test(flavor = "current_thread")]
async fn a_blocking_handler_does_not_stall_the_runtime() {
    let processor = SharedProcessor::<String>::default();
    let gate = Gate::new();
    let blocked = {
        let gate = gate.clone();
        HandlerFuncs::new().add_func(move |_obj: Arc<String>, _| gate.pass())
    };
    let reg = processor
        .add_handler(blocked, ListenerOptions::new().name("blocking"))
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(numbered(0), Recipients::All);
    gate.wait_for_arrivals(1);

    // The point: a timer fires and a task runs on this single thread while the handler
    // blocks its own (the gate opens only below, so a stalled runtime never gets here).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let ticked = tokio::spawn(async { 42 }).await.expect("task ran");
    assert_eq!(ticked, 42);
    assert!(!reg.is_stopped());
    gate.open();
    stop(token, running).await;
}

/// Per-listener order under concurrent distribution: every listener sees each producer's
/// notifications in the order that producer distributed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_keeps_every_producers_order_under_concurrency() {
    const PRODUCERS: usize = 4;
    const PER_PRODUCER: usize = 500;
    let processor = SharedProcessor::<String>::default();
    let recorders: Vec<Recorder> = (0..3).map(|_| Recorder::new()).collect();
    for (index, recorder) in recorders.iter().enumerate() {
        processor
            .add_handler(
                recorder.clone(),
                ListenerOptions::new().name(format!("l{index}")),
            )
            .expect("added");
    }
    let (token, running) = start(&processor).await;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| {
            let processor = processor.clone();
            std::thread::spawn(move || {
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
    for recorder in &recorders {
        let lines = recorder.wait_for(PRODUCERS * PER_PRODUCER);
        for producer in 0..PRODUCERS {
            let prefix = format!("add {producer}:");
            let sequence: Vec<usize> = lines
                .iter()
                .filter_map(|line| line.strip_prefix(&prefix))
                .map(|n| n.parse().expect("numbered"))
                .collect();
            assert_eq!(sequence, (0..PER_PRODUCER).collect::<Vec<_>>());
        }
    }
    stop(token, running).await;
}

/// A bounded buffer that drops the newest keeps an unbroken prefix and counts every drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bounded_buffer_drops_the_newest_and_counts_it() {
    let processor = SharedProcessor::<String>::default();
    let gate = Gate::new();
    let seen = Recorder::new();
    let handler = {
        let (gate, seen) = (gate.clone(), seen.clone());
        HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
            gate.pass();
            seen.push(format!("add {obj}"));
        })
    };
    let reg = processor
        .add_handler(
            handler,
            ListenerOptions::new()
                .name("bounded")
                .buffer(BufferPolicy::bounded(10, Overflow::DropNewest)),
        )
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(numbered(0), Recipients::All);
    gate.wait_for_arrivals(1);
    for n in 1..=100 {
        processor.distribute(numbered(n), Recipients::All);
    }
    let stats = reg.stats();
    assert_eq!((stats.buffered, stats.dropped), (10, 90));
    gate.open();
    assert_eq!(numbers(&seen.wait_for(11)), (0..=10).collect::<Vec<_>>());
    stop(token, running).await;
}

/// A bounded buffer holds at most its capacity in all, counting what its handler thread has
/// taken from it but not handled yet: the thread takes from a bounded buffer one notification
/// at a time, where from an unbounded one it takes a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_buffer_never_holds_more_than_its_capacity() {
    let processor = SharedProcessor::<String>::default();
    let (first, second) = (Gate::new(), Gate::new());
    let seen = Recorder::new();
    let handler = {
        let (first, second, seen) = (first.clone(), second.clone(), seen.clone());
        HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
            match obj.as_str() {
                "0" => first.pass(),
                "1" => second.pass(),
                _ => {}
            }
            seen.push(format!("add {obj}"));
        })
    };
    let reg = processor
        .add_handler(
            handler,
            ListenerOptions::new()
                .name("bounded")
                .buffer(BufferPolicy::bounded(10, Overflow::DropNewest)),
        )
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(numbered(0), Recipients::All);
    first.wait_for_arrivals(1);
    for n in 1..=10 {
        processor.distribute(numbered(n), Recipients::All);
    }
    // The handler takes 1 and stops there, with 2 to 10 still waiting: room for one more.
    first.open();
    second.wait_for_arrivals(1);
    for n in 11..=30 {
        processor.distribute(numbered(n), Recipients::All);
    }
    let stats = reg.stats();
    assert_eq!((stats.buffered, stats.dropped), (10, 19), "{stats:?}");
    assert_eq!(stats.peak_buffered, 10, "{stats:?}");
    second.open();
    assert_eq!(numbers(&seen.wait_for(12)), (0..=11).collect::<Vec<_>>());
    stop(token, running).await;
}

/// A bounded buffer that drops the oldest keeps the newest notifications; a dropped
/// initial-list add still lets the registration sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bounded_buffer_drops_the_oldest_and_still_syncs() {
    let processor = SharedProcessor::<String>::default();
    let gate = Gate::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let (gate, seen) = (gate.clone(), Arc::clone(&seen));
        HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
            gate.pass();
            seen.lock().expect("poisoned").push(obj.to_string());
        })
    };
    let reg = processor
        .add_handler(
            handler,
            ListenerOptions::new()
                .name("latest")
                .buffer(BufferPolicy::bounded(3, Overflow::DropOldest)),
        )
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(Notification::initial_add(obj("0")), Recipients::All);
    gate.wait_for_arrivals(1);
    for n in 1..=6 {
        processor.distribute(
            Notification::initial_add(obj(&n.to_string())),
            Recipients::All,
        );
    }
    processor.upstream_synced().mark_synced();
    assert_eq!(reg.stats().dropped, 3);
    gate.open();
    assert!(reg.synced().await);
    assert_eq!(*seen.lock().expect("poisoned"), ["0", "4", "5", "6"]);
    stop(token, running).await;
}

/// A registration's buffer gives its memory back once its handler catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_backlog_gives_its_memory_back() {
    let processor = SharedProcessor::<String>::default();
    let gate = Gate::new();
    let seen = Recorder::new();
    let handler = {
        let (gate, seen) = (gate.clone(), seen.clone());
        HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
            gate.pass();
            seen.push(obj.to_string());
        })
    };
    let reg = processor
        .add_handler(handler, ListenerOptions::new())
        .expect("added");
    let (token, running) = start(&processor).await;
    let pod = obj("pod");
    for _ in 0..50_000 {
        processor.distribute(Notification::add(Arc::clone(&pod)), Recipients::All);
    }
    gate.wait_for_arrivals(1);
    assert!(reg.stats().buffer_capacity >= 49_999);
    gate.open();
    seen.wait_for(50_000);
    let stats = reg.stats();
    assert_eq!(stats.buffered, 0);
    assert!(
        stats.buffer_capacity <= 2_048,
        "capacity stayed at {}",
        stats.buffer_capacity
    );
    stop(token, running).await;
}

/// A handler that panics on an initial-list add still lets its registration sync: the
/// notification counts as handled (client-go would never report this registration synced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_on_an_initial_add_still_lets_the_registration_sync() {
    let processor = SharedProcessor::<String>::default();
    let handler = HandlerFuncs::new().add_func(|obj: Arc<String>, _| {
        if obj.as_str() == "bad" {
            panic!("cannot handle {obj}");
        }
    });
    let reg = processor
        .add_handler_with_initial(
            handler,
            ListenerOptions::new().name("fragile"),
            [obj("good"), obj("bad")],
        )
        .expect("added");
    processor.upstream_synced().mark_synced();
    let (token, running) = start(&processor).await;
    assert!(reg.synced().await);
    let stats = reg.stats();
    assert_eq!((stats.delivered, stats.panicked), (2, 1));
    stop(token, running).await;
}

/// The processor's default buffer policy applies to listeners that set none; a listener can
/// still ask for an unbounded buffer explicitly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_buffer_policy_applies_unless_a_listener_overrides_it() {
    let processor = SharedProcessor::<String>::new(
        ProcessorOptions::default().default_buffer(BufferPolicy::bounded(5, Overflow::DropNewest)),
    );
    let gate = Gate::new();
    let stuck = |gate: &Gate| {
        let gate = gate.clone();
        HandlerFuncs::new().add_func(move |_obj: Arc<String>, _| gate.pass())
    };
    let defaulted = processor
        .add_handler(stuck(&gate), ListenerOptions::new())
        .expect("added");
    let unbounded = processor
        .add_handler(
            stuck(&gate),
            ListenerOptions::new().buffer(BufferPolicy::Unbounded),
        )
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(numbered(0), Recipients::All);
    gate.wait_for_arrivals(2);
    for n in 1..=20 {
        processor.distribute(numbered(n), Recipients::All);
    }
    assert_eq!(defaulted.stats().dropped, 15);
    assert_eq!(unbounded.stats().dropped, 0);
    assert_eq!(unbounded.stats().buffered, 20);
    gate.open();
    stop(token, running).await;
}

/// Keys objects named `key:version` by `key`.
fn key_before_colon() -> KeyFunc<String> {
    Arc::new(|obj: &String| Ok(obj.split(':').next().unwrap_or_default().to_owned()))
}

/// A coalescing listener behind a stuck handler holds one notification per object, each
/// with the newest state; once unstuck, the handler receives exactly those, and the counters
/// account for every notification distributed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalescing_listener_behind_a_stuck_handler_gets_only_the_newest_states() {
    let processor =
        SharedProcessor::<String>::new(ProcessorOptions::default().key_func(key_before_colon()));
    let gate = Gate::new();
    let seen = Recorder::new();
    let handler = {
        let seen = seen.clone();
        HandlerFuncs::new()
            .add_func({
                let (gate, seen) = (gate.clone(), seen.clone());
                move |obj: Arc<String>, _| {
                    gate.pass();
                    seen.push(format!("add {obj}"));
                }
            })
            .update_func({
                let seen = seen.clone();
                move |old: Arc<String>, new: Arc<String>| {
                    seen.push(format!("update {old} -> {new}"));
                }
            })
            .delete_func(move |obj| seen.push(format!("delete {}", obj.object())))
    };
    let registration = processor
        .add_handler(
            handler,
            ListenerOptions::new()
                .name("coalescing")
                .buffer(BufferPolicy::CoalesceByKey),
        )
        .expect("added");
    let (token, running) = start(&processor).await;

    let version = |key: &str, n: usize| obj(&format!("{key}:{n}"));
    // The handler takes the first add and blocks in it.
    processor.distribute(Notification::add(version("a", 0)), Recipients::All);
    gate.wait_for_arrivals(1);
    let mut distributed = 1;
    for n in 1..=50 {
        processor.distribute(
            Notification::update(version("a", n - 1), version("a", n)),
            Recipients::All,
        );
        distributed += 1;
    }
    // b appears and goes before the handler could see it: nothing reaches the handler.
    processor.distribute(Notification::add(version("b", 0)), Recipients::All);
    processor.distribute(Notification::delete(version("b", 0)), Recipients::All);
    processor.distribute(Notification::add(version("c", 0)), Recipients::All);
    processor.distribute(
        Notification::update(version("c", 0), version("c", 1)),
        Recipients::All,
    );
    distributed += 4;

    let behind = registration.stats();
    assert_eq!(behind.buffered, 2, "one update of a, one add of c");
    assert_eq!(behind.coalesced, 49 + 2 + 1);
    assert!(behind.oldest_pending.is_some());
    assert!(
        behind.in_handler.is_some(),
        "the handler is inside its first call"
    );

    gate.open();
    let lines = seen.wait_for(3);
    assert_eq!(lines, ["add a:0", "update a:0 -> a:50", "add c:1"]);
    let caught_up = registration.stats();
    assert_eq!(
        caught_up.delivered + caught_up.coalesced + caught_up.dropped + caught_up.buffered as u64,
        distributed
    );
    assert_eq!(caught_up.oldest_pending, None);
    stop(token, running).await;
}

/// Coalescing needs the object key: a processor without a key function refuses it, and
/// says why.
#[test]
fn coalescing_without_a_key_function_is_refused() {
    let processor = SharedProcessor::<String>::default();
    let refused = processor
        .subscribe(
            ListenerOptions::new()
                .name("wants-coalescing")
                .buffer(BufferPolicy::CoalesceByKey),
        )
        .expect_err("no key function");
    assert!(
        matches!(refused, Error::CoalesceWithoutKey { ref name } if name == "wants-coalescing")
    );
    assert!(refused.to_string().contains("ProcessorOptions::key_func"));
}

/// How far behind a listener is, in time: the age of the oldest notification its consumer has
/// not taken, on the distributor's clock.
#[tokio::test(start_paused = true)]
async fn the_oldest_pending_age_is_how_long_the_first_untaken_notification_waited() {
    use futures::StreamExt;

    let processor = SharedProcessor::<String>::default();
    let mut stream = processor
        .subscribe(ListenerOptions::new().name("lagging"))
        .expect("subscribed");
    let (token, running) = start(&processor).await;
    assert_eq!(stream.registration().stats().oldest_pending, None);
    processor.distribute(numbered(0), Recipients::All);
    tokio::time::advance(Duration::from_secs(5)).await;
    processor.distribute(numbered(1), Recipients::All);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(
        stream.registration().stats().oldest_pending,
        Some(Duration::from_secs(7))
    );
    stream.next().await.expect("the first notification");
    assert_eq!(
        stream.registration().stats().oldest_pending,
        Some(Duration::from_secs(2))
    );
    stream.next().await.expect("the second notification");
    assert_eq!(stream.registration().stats().oldest_pending, None);
    assert_eq!(stream.registration().stats().in_handler, None);
    stop(token, running).await;
}

/// A blocking buffer is backpressure: with the handler stuck, the distributor waits for room
/// instead of dropping, and once the handler moves on it receives everything, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_buffer_makes_the_distributor_wait_and_loses_nothing() {
    let processor = SharedProcessor::<String>::default();
    let gate = Gate::new();
    let seen = Recorder::new();
    let handler = {
        let (gate, seen) = (gate.clone(), seen.clone());
        HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
            gate.pass();
            seen.push(format!("add {obj}"));
        })
    };
    let registration = processor
        .add_handler(
            handler,
            ListenerOptions::new()
                .name("blocking")
                .buffer(BufferPolicy::bounded(2, Overflow::Block(PATIENCE))),
        )
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(numbered(0), Recipients::All);
    gate.wait_for_arrivals(1);
    // 1 and 2 fill the buffer; 3 waits for room.
    let distributor = std::thread::spawn({
        let processor = processor.clone();
        move || {
            for n in 1..=3 {
                processor.distribute(numbered(n), Recipients::All);
            }
        }
    });
    eventually("the distributor waits for room", || {
        registration.stats().blocked > Duration::ZERO
    })
    .await;
    assert!(!distributor.is_finished());
    assert_eq!(registration.stats().buffered, 2);

    gate.open();
    let lines = seen.wait_for(4);
    assert_eq!(numbers(&lines), [0, 1, 2, 3]);
    distributor.join().expect("the distributor does not panic");
    assert_eq!(registration.stats().dropped, 0);
    stop(token, running).await;
}

/// Past its deadline a blocking buffer drops the incoming notification, counted, and the
/// distributor moves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_buffer_drops_once_its_deadline_passes() {
    const DEADLINE: Duration = Duration::from_millis(20);
    let processor = SharedProcessor::<String>::default();
    let gate = Gate::new();
    let stuck = {
        let gate = gate.clone();
        HandlerFuncs::new().add_func(move |_obj: Arc<String>, _| gate.pass())
    };
    let registration = processor
        .add_handler(
            stuck,
            ListenerOptions::new().buffer(BufferPolicy::bounded(2, Overflow::Block(DEADLINE))),
        )
        .expect("added");
    let (token, running) = start(&processor).await;
    processor.distribute(numbered(0), Recipients::All);
    gate.wait_for_arrivals(1);
    for n in 1..=3 {
        processor.distribute(numbered(n), Recipients::All);
    }
    let stats = registration.stats();
    assert_eq!((stats.buffered, stats.dropped), (2, 1));
    assert!(stats.blocked >= DEADLINE, "{stats:?}");
    gate.open();
    stop(token, running).await;
}
