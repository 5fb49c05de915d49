//! The basic queue: client-go's queue_test.go, ported, and what the async shape adds.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kinformer_workqueue::RateLimitingQueue;
use parking_lot::Mutex;
use tokio::task::JoinSet;

/// Long enough that only a hang reaches it; with the paused clock an idle runtime jumps there at
/// once, so a hang fails fast instead of blocking the suite.
const HANG: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
enum ShutDownKind {
    Immediate,
    WithDrain,
}

async fn shut_down(queue: &RateLimitingQueue<String>, kind: ShutDownKind) {
    match kind {
        ShutDownKind::Immediate => queue.shut_down(),
        ShutDownKind::WithDrain => queue.shut_down_with_drain().await,
    }
}

async fn basic_scenario(kind: ShutDownKind) {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::default();
    let mut producers = JoinSet::new();
    for producer in 0..50 {
        let queue = queue.clone();
        producers.spawn(async move {
            for _ in 0..50 {
                queue.add(producer.to_string());
                // Pacing: adds spread over the consumers' work, as client-go's test does.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
    }
    let mut consumers = JoinSet::new();
    for _ in 0..10 {
        let queue = queue.clone();
        consumers.spawn(async move {
            while let Some(item) = queue.get().await {
                assert_ne!(
                    item, "added after shutdown!",
                    "got an item added after shutdown"
                );
                // Work that takes time, so items are re-added while being processed.
                tokio::time::sleep(Duration::from_millis(3)).await;
                queue.done(&item);
            }
        });
    }
    producers.join_all().await;
    shut_down(&queue, kind).await;
    queue.add("added after shutdown!".to_string());
    tokio::time::timeout(HANG, consumers.join_all())
        .await
        .expect("every consumer stops after shutdown");
    assert_eq!(queue.len(), 0);
}

/// Ported from client-go's TestBasic (the ShutDown case).
#[tokio::test(start_paused = true)]
async fn basic_producers_and_consumers_stop_after_shut_down() {
    basic_scenario(ShutDownKind::Immediate).await;
}

/// Ported from client-go's TestBasic (the ShutDownWithDrain case).
#[tokio::test(start_paused = true)]
async fn basic_producers_and_consumers_stop_after_shut_down_with_drain() {
    basic_scenario(ShutDownKind::WithDrain).await;
}

async fn add_while_processing_scenario(kind: ShutDownKind) {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::default();
    let mut producers = JoinSet::new();
    for producer in 0..50 {
        let queue = queue.clone();
        producers.spawn(async move { queue.add(producer.to_string()) });
    }
    let mut consumers = JoinSet::new();
    for _ in 0..10 {
        let queue = queue.clone();
        consumers.spawn(async move {
            // Every worker re-adds every item it sees up to twice: the dirty-while-processing case.
            let mut seen: HashMap<String, usize> = HashMap::new();
            while let Some(item) = queue.get().await {
                let count = seen.entry(item.clone()).or_default();
                *count += 1;
                if *count < 2 {
                    queue.add(item.clone());
                }
                queue.done(&item);
            }
        });
    }
    producers.join_all().await;
    shut_down(&queue, kind).await;
    tokio::time::timeout(HANG, consumers.join_all())
        .await
        .expect("every consumer stops after shutdown");
    assert_eq!(queue.len(), 0);
}

/// Ported from client-go's TestAddWhileProcessing (the ShutDown case).
#[tokio::test(start_paused = true)]
async fn add_while_processing_then_shut_down() {
    add_while_processing_scenario(ShutDownKind::Immediate).await;
}

/// Ported from client-go's TestAddWhileProcessing (the ShutDownWithDrain case).
#[tokio::test(start_paused = true)]
async fn add_while_processing_then_shut_down_with_drain() {
    add_while_processing_scenario(ShutDownKind::WithDrain).await;
}

/// Ported from client-go's TestLen.
#[tokio::test]
async fn len_counts_distinct_items() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    assert_eq!(queue.len(), 1);
    queue.add("bar");
    assert_eq!(queue.len(), 2);
    queue.add("foo");
    assert_eq!(queue.len(), 2, "a duplicate add must not grow the queue");
}

/// Ported from client-go's TestReinsert.
#[tokio::test]
async fn item_added_while_processing_is_handed_out_again_after_done() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    let item = queue.get().await;
    assert_eq!(item, Some("foo"));
    queue.add("foo");
    assert_eq!(queue.len(), 0, "not handed out while a worker holds it");
    queue.done(&"foo");
    assert_eq!(queue.get().await, Some("foo"));
    queue.done(&"foo");
    assert_eq!(queue.len(), 0);
}

/// Waits until `get` reports the shutdown, as client-go's tests do to know that a concurrent
/// `ShutDownWithDrain` has started.
async fn get_until_shut_down(queue: &RateLimitingQueue<&'static str>) {
    let next = tokio::time::timeout(HANG, queue.get())
        .await
        .expect("the shutdown is observed");
    assert_eq!(next, None, "no item should be left");
}

/// Ported from client-go's TestQueueDrainageUsingShutDownWithDrain.
#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_in_flight_items() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    queue.add("bar");
    let first = queue.get().await.expect("foo is queued");
    let second = queue.get().await.expect("bar is queued");

    let draining = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    get_until_shut_down(&queue).await;
    tokio::task::yield_now().await;
    assert!(!draining.is_finished(), "two items are still in flight");

    queue.done(&first);
    tokio::task::yield_now().await;
    assert!(!draining.is_finished(), "one item is still in flight");
    queue.done(&second);
    tokio::time::timeout(HANG, draining)
        .await
        .expect("drain ends once every item is done")
        .expect("drain does not panic");
}

/// Ported from client-go's TestNoQueueDrainageUsingShutDown.
#[tokio::test]
async fn shut_down_does_not_wait_for_in_flight_items() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    queue.add("bar");
    let _first = queue.get().await;
    let _second = queue.get().await;
    queue.shut_down();
    assert!(queue.shutting_down());
    assert_eq!(queue.get().await, None);
}

/// Ported from client-go's TestForceQueueShutdownUsingShutDown.
#[tokio::test(start_paused = true)]
async fn shut_down_ends_a_pending_drain() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    queue.add("bar");
    let _first = queue.get().await;
    let _second = queue.get().await;

    let draining = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    get_until_shut_down(&queue).await;
    queue.shut_down();
    tokio::time::timeout(HANG, draining)
        .await
        .expect("a forced shutdown ends the drain without any done")
        .expect("drain does not panic");
}

/// Ported from client-go's TestQueueDrainageUsingShutDownWithDrainWithDirtyItem.
#[tokio::test(start_paused = true)]
async fn drain_hands_out_an_item_that_was_dirty_while_processing() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    let gotten = queue.get().await.expect("foo is queued");
    queue.add("foo");

    let draining = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    get_until_shut_down(&queue).await;

    queue.done(&gotten);
    let again = queue
        .get()
        .await
        .expect("done put the dirty item back on the queue");
    queue.done(&again);
    assert_eq!(queue.get().await, None, "now the queue is really done");
    tokio::time::timeout(HANG, draining)
        .await
        .expect("drain ends")
        .expect("drain does not panic");
}

/// An item that compares by value but lets the test count who still holds it.
#[derive(Clone, Debug)]
struct Tracked(Arc<String>);

impl PartialEq for Tracked {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Tracked {}

impl Hash for Tracked {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// Ported from client-go's TestGarbageCollection: a processed item is not kept alive by the queue.
#[tokio::test]
async fn processed_items_are_released() {
    let queue = RateLimitingQueue::default();
    let item = Tracked(Arc::new("hello".to_string()));
    queue.add(item.clone());
    let gotten = queue.get().await.expect("the item is queued");
    queue.done(&gotten);
    drop(gotten);
    assert_eq!(
        Arc::strong_count(&item.0),
        1,
        "the queue still holds the item"
    );
}

#[tokio::test(start_paused = true)]
async fn shut_down_wakes_every_idle_worker() {
    let queue: RateLimitingQueue<u32> = RateLimitingQueue::default();
    let mut workers = JoinSet::new();
    for _ in 0..4 {
        let queue = queue.clone();
        workers.spawn(async move { queue.get().await });
    }
    tokio::task::yield_now().await;
    queue.shut_down();
    let results = tokio::time::timeout(HANG, workers.join_all())
        .await
        .expect("every worker wakes");
    assert_eq!(results, vec![None; 4]);
}

#[tokio::test]
async fn items_queued_before_shut_down_are_still_handed_out() {
    let queue = RateLimitingQueue::default();
    queue.add(1);
    queue.add(2);
    queue.shut_down();
    queue.add(3);
    assert_eq!(queue.get().await, Some(1));
    assert_eq!(queue.get().await, Some(2));
    assert_eq!(queue.get().await, None);
}

#[tokio::test]
async fn a_cancelled_get_takes_nothing() {
    let queue = RateLimitingQueue::default();
    let mut pending = Box::pin(queue.get());
    assert_eq!((&mut pending).now_or_never(), None, "the queue is empty");
    drop(pending);
    queue.add("foo");
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await, Some("foo"));
}

#[tokio::test]
async fn done_for_an_item_not_being_processed_is_ignored() {
    let queue = RateLimitingQueue::default();
    queue.add("foo");
    queue.done(&"foo");
    queue.done(&"bar");
    assert_eq!(queue.len(), 1, "foo is queued exactly once");
    assert_eq!(queue.get().await, Some("foo"));
    queue.add("foo");
    queue.done(&"foo");
    assert_eq!(queue.get().await, Some("foo"));
    queue.done(&"foo");
    queue.shut_down();
    assert_eq!(queue.get().await, None, "no duplicate was queued");
}

#[tokio::test]
async fn typed_keys_work_as_items() {
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct ObjectKey {
        namespace: String,
        name: String,
    }
    let key = ObjectKey {
        namespace: "default".into(),
        name: "web".into(),
    };
    let queue = RateLimitingQueue::default();
    queue.add(key.clone());
    queue.add(key.clone());
    assert_eq!(queue.get().await, Some(key));
    assert!(queue.is_empty());
}

/// Many workers on real threads: every item added is processed, and never by two workers at
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_threads_never_share_an_item() {
    let queue: RateLimitingQueue<u32> = RateLimitingQueue::default();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let processed = Arc::new(Mutex::new(HashMap::<u32, usize>::new()));
    let mut workers = JoinSet::new();
    for _ in 0..8 {
        let queue = queue.clone();
        let in_flight = Arc::clone(&in_flight);
        let processed = Arc::clone(&processed);
        workers.spawn(async move {
            while let Some(item) = queue.get().await {
                assert!(
                    in_flight.lock().insert(item),
                    "{item} handed to two workers"
                );
                *processed.lock().entry(item).or_default() += 1;
                tokio::task::yield_now().await;
                assert!(in_flight.lock().remove(&item));
                queue.done(&item);
            }
        });
    }
    let mut producers = JoinSet::new();
    for producer in 0..4u32 {
        let queue = queue.clone();
        producers.spawn(async move {
            for round in 0..200u32 {
                queue.add((producer * 7 + round) % 64);
                if round % 16 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
    }
    producers.join_all().await;
    queue.shut_down_with_drain().await;
    tokio::time::timeout(HANG, workers.join_all())
        .await
        .expect("workers stop");
    let processed = processed.lock();
    for producer in 0..4u32 {
        for round in 0..200u32 {
            let item = (producer * 7 + round) % 64;
            assert!(processed.contains_key(&item), "{item} was lost");
        }
    }
}
