//! A producer, a resync loop and a consumer on separate tasks of a multi-threaded runtime:
//! nothing is lost, nothing is delivered twice, and the consumer's cache ends equal to what the
//! producer last wrote.

use crate::common;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::{Obj, obj};
use kinformer_fifo::{
    AddKind, DeltaFifo, DeltaFifoOptions, DeltaType, Error, Popped, Processed, Queue, RealFifo,
    RealFifoOptions,
};
use kinformer_store::{Cache, CacheReader, Store};
use parking_lot::Mutex;

const KEYS: i64 = 3000;

/// Per key, every non-resync delta delivered: its kind and the object's value.
type Deliveries = HashMap<String, Vec<(DeltaType, i64)>>;

/// The producer's writes, per key, in order: every value is unique.
fn script() -> Vec<(DeltaType, String, i64)> {
    let mut ops = Vec::new();
    let mut value = 0;
    let mut next = || {
        value += 1;
        value
    };
    for k in 0..KEYS {
        ops.push((DeltaType::Added, format!("k{k}"), next()));
    }
    for k in 0..KEYS {
        ops.push((DeltaType::Updated, format!("k{k}"), next()));
        if k % 3 == 0 {
            ops.push((DeltaType::Deleted, format!("k{k}"), next()));
        }
    }
    for k in (0..KEYS).step_by(6) {
        ops.push((DeltaType::Added, format!("k{k}"), next()));
    }
    ops
}

async fn run(queue: Arc<dyn Queue<Obj>>, cache: Arc<Cache<Obj>>) {
    let script = script();
    let producing = Arc::new(AtomicBool::new(true));
    // The producer starts only once the resync loop runs, so the two always overlap.
    let (resyncing, resync_started) = tokio::sync::oneshot::channel::<()>();

    let producer = {
        let queue = Arc::clone(&queue);
        let producing = Arc::clone(&producing);
        let script = script.clone();
        tokio::spawn(async move {
            resync_started.await.expect("the resync loop started");
            for (i, (kind, name, val)) in script.into_iter().enumerate() {
                let o = obj(&name, val);
                match kind {
                    DeltaType::Added => queue.add(o.into()).unwrap(),
                    DeltaType::Updated => queue.update(o.into()).unwrap(),
                    _ => queue.delete(o).unwrap(),
                }
                if i % 64 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            producing.store(false, Ordering::SeqCst);
        })
    };

    let resyncer = {
        let queue = Arc::clone(&queue);
        let producing = Arc::clone(&producing);
        tokio::spawn(async move {
            let mut resyncs = 0;
            let mut resyncing = Some(resyncing);
            loop {
                queue.resync().unwrap();
                resyncs += 1;
                if let Some(started) = resyncing.take() {
                    started.send(()).expect("the producer waits");
                }
                if !producing.load(Ordering::SeqCst) {
                    break resyncs;
                }
                // Pacing: resyncs interleave with the producer instead of flooding the queue.
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
    };

    let delivered: Arc<Mutex<Deliveries>> = Arc::default();
    let consumer = {
        let queue = Arc::clone(&queue);
        let cache = Arc::clone(&cache);
        let delivered = Arc::clone(&delivered);
        tokio::spawn(async move {
            let mut process = |popped: &Popped<Obj>, _: AddKind| -> Processed {
                let mut delivered = delivered.lock();
                for delta in popped.deltas() {
                    let object = Arc::clone(delta.object());
                    if delta.kind != DeltaType::Sync {
                        delivered
                            .entry(object.name.clone())
                            .or_default()
                            .push((delta.kind, object.val));
                    }
                    match delta.kind {
                        DeltaType::Deleted => cache.delete(object).unwrap(),
                        _ => cache.update(object.into()).unwrap(),
                    }
                }
                Processed::Done
            };
            loop {
                match queue.pop_batch(&mut process).await {
                    Ok(_) => {}
                    Err(Error::Closed) => break,
                    Err(error) => panic!("pop failed: {error}"),
                }
            }
        })
    };

    producer.await.unwrap();
    let resyncs = resyncer.await.unwrap();
    // Let the consumer drain, then close: a closed queue still hands out what it holds.
    queue.close();
    tokio::time::timeout(Duration::from_secs(30), consumer)
        .await
        .expect("consumer did not finish")
        .unwrap();
    assert!(resyncs > 1, "the resync loop never overlapped the producer");
    assert!(queue.is_empty());

    let mut expected_deliveries = Deliveries::new();
    let mut final_state: BTreeMap<String, i64> = BTreeMap::new();
    for (kind, name, val) in &script {
        expected_deliveries
            .entry(name.clone())
            .or_default()
            .push((*kind, *val));
        match kind {
            DeltaType::Deleted => final_state.remove(name),
            _ => final_state.insert(name.clone(), *val),
        };
    }
    let delivered = delivered.lock();
    assert_eq!(delivered.len(), expected_deliveries.len(), "keys lost");
    for (name, expected) in &expected_deliveries {
        assert_eq!(delivered.get(name), Some(expected), "deliveries for {name}");
    }
    let cached: BTreeMap<String, i64> = cache
        .list()
        .iter()
        .map(|o| (o.name.clone(), o.val))
        .collect();
    assert_eq!(cached, final_state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_fifo_loses_and_duplicates_nothing_under_concurrent_resyncs() {
    let cache = Arc::new(Cache::<Obj>::default());
    let queue: Arc<dyn Queue<Obj>> = Arc::new(DeltaFifo::new(
        DeltaFifoOptions::new()
            .known_objects(cache.clone())
            .emit_delta_type_replaced(true),
    ));
    run(queue, cache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_fifo_loses_and_duplicates_nothing_under_concurrent_resyncs() {
    let cache = Arc::new(Cache::<Obj>::default());
    let queue: Arc<dyn Queue<Obj>> =
        Arc::new(RealFifo::new(RealFifoOptions::new(cache.clone())).unwrap());
    run(queue, cache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_real_fifo_unlocked_while_processing_loses_and_duplicates_nothing() {
    let cache = Arc::new(Cache::<Obj>::default());
    let queue: Arc<dyn Queue<Obj>> = Arc::new(RealFifo::new(RealFifoOptions::atomic()).unwrap());
    run(queue, cache).await;
}
