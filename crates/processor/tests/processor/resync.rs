//! `Overflow::Resync`: a bounded listener that overflows drops what does not fit, then, once
//! its consumer has caught up, is brought level with the cache in one pass. For any changes
//! and any consumer pace the consumer only ever receives notifications that are right for what
//! it has seen, and ends with the cache's view.

use crate::common;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use common::{Gate, eventually, start, stop};
use futures::{FutureExt, StreamExt};
use kinformer_processor::{
    BufferPolicy, CacheSnapshot, Error, HandlerFuncs, KeyFunc, ListenerOptions, Notification,
    Overflow, ProcessorOptions, Recipients, SharedProcessor,
};
use proptest::prelude::*;

/// Objects are `key:version`; the key is what comes before the colon.
fn key_of(object: &str) -> String {
    object.split(':').next().unwrap_or_default().to_owned()
}

/// The cache a test writes to; its lock is also the one that orders distribution, as an
/// informer's is.
type Cache = Arc<Mutex<HashMap<String, Arc<String>>>>;

fn processor_over(cache: &Cache) -> SharedProcessor<String> {
    let key_func: KeyFunc<String> = Arc::new(|object: &String| Ok(key_of(object)));
    let snapshot: CacheSnapshot<String> = {
        let cache = Arc::clone(cache);
        Arc::new(move |catch_up| {
            let cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
            catch_up(cache.values().cloned().collect());
        })
    };
    SharedProcessor::new(
        ProcessorOptions::default()
            .key_func(key_func)
            .cache_snapshot(snapshot),
    )
}

/// Changes the cache and distributes the change, under the cache's lock.
fn write(processor: &SharedProcessor<String>, cache: &Cache, key: &str, version: u32) {
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    let new = Arc::new(format!("{key}:{version}"));
    let notification = match cache.insert(key.to_owned(), Arc::clone(&new)) {
        Some(old) => Notification::update(old, new),
        None => Notification::add(new),
    };
    processor.distribute(notification, Recipients::All);
}

fn delete(processor: &SharedProcessor<String>, cache: &Cache, key: &str) {
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(old) = cache.remove(key) {
        processor.distribute(Notification::delete(old), Recipients::All);
    }
}

/// Applies a notification to a consumer's view, checking it is right for that view.
fn apply(view: &mut HashMap<String, Arc<String>>, notification: Notification<String>) {
    match notification {
        Notification::Add { obj, .. } => {
            let previous = view.insert(key_of(&obj), obj);
            assert!(previous.is_none(), "an add of an object the consumer has");
        }
        Notification::Update { old, new } => {
            let old = old.get().expect("never encoded");
            let seen = view
                .get(&key_of(&old))
                .expect("an update of an object the consumer lacks");
            assert!(
                Arc::ptr_eq(seen, &old),
                "an update from {old}, a state the consumer never saw (it has {seen})"
            );
            view.insert(key_of(&new), new);
        }
        Notification::Delete(last) => {
            let removed = view.remove(&key_of(last.object()));
            assert!(
                removed.is_some(),
                "a delete of an object the consumer lacks"
            );
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Write(u8),
    Delete(u8),
    Resync(u8),
    Take(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..6).prop_map(Step::Write),
        2 => (0u8..6).prop_map(Step::Delete),
        1 => (0u8..6).prop_map(Step::Resync),
        3 => (0u8..6).prop_map(Step::Take),
    ]
}

proptest! {
    #[test]
    fn a_resyncing_listener_ends_with_the_caches_view_and_is_never_told_anything_wrong(
        capacity in 1usize..5,
        steps in proptest::collection::vec(step(), 0..150),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let cache = Cache::default();
            let processor = processor_over(&cache);
            let mut stream = processor
                .subscribe(ListenerOptions::new().buffer(BufferPolicy::bounded(
                    capacity,
                    Overflow::Resync,
                )))
                .expect("subscribed");
            let mut view = HashMap::new();
            let mut version = 0;
            for step in steps {
                match step {
                    Step::Write(key) => {
                        version += 1;
                        write(&processor, &cache, &key.to_string(), version);
                    }
                    Step::Delete(key) => delete(&processor, &cache, &key.to_string()),
                    Step::Resync(key) => {
                        let cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some(current) = cache.get(&key.to_string()) {
                            let sync = Notification::update(Arc::clone(current), Arc::clone(current));
                            processor.distribute(sync, Recipients::All);
                        }
                    }
                    Step::Take(count) => {
                        for _ in 0..count {
                            match stream.next().now_or_never() {
                                Some(Some(notification)) => apply(&mut view, notification),
                                Some(None) => panic!("the stream ended"),
                                None => break,
                            }
                        }
                    }
                }
            }
            while let Some(Some(notification)) = stream.next().now_or_never() {
                apply(&mut view, notification);
            }
            let cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
            assert_eq!(view.len(), cache.len(), "view {view:?}, cache {cache:?}");
            for (key, state) in cache.iter() {
                assert!(Arc::ptr_eq(&view[key], state), "{key} ends stale");
            }
        });
    }
}

/// A handler stuck while its bounded buffer overflows with updates, creations and deletions
/// ends, once unstuck, with exactly the cache's objects, having been caught up once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_handler_past_its_bound_is_brought_level_with_the_cache() {
    let cache = Cache::default();
    let processor = processor_over(&cache);
    let gate = Gate::new();
    let view: Arc<Mutex<HashMap<String, Arc<String>>>> = Arc::default();
    let record = |view: &Arc<Mutex<HashMap<String, Arc<String>>>>| {
        let view = Arc::clone(view);
        move |notification: Notification<String>| {
            apply(
                &mut view.lock().unwrap_or_else(PoisonError::into_inner),
                notification,
            );
        }
    };
    let (on_add, on_update, on_delete) = (record(&view), record(&view), record(&view));
    let handler = {
        let gate = gate.clone();
        HandlerFuncs::new()
            .add_func(move |object: Arc<String>, _| {
                gate.pass();
                on_add(Notification::add(object));
            })
            .update_func(move |old, new| on_update(Notification::update(old, new)))
            .delete_func(move |last| on_delete(Notification::Delete(last)))
    };
    let registration = processor
        .add_handler(
            handler,
            ListenerOptions::new()
                .name("resyncing")
                .buffer(BufferPolicy::bounded(3, Overflow::Resync)),
        )
        .expect("added");
    let (token, running) = start(&processor).await;

    write(&processor, &cache, "a", 1);
    gate.wait_for_arrivals(1);
    for version in 2..40 {
        write(&processor, &cache, &format!("k{}", version % 7), version);
        if version % 5 == 0 {
            delete(&processor, &cache, &format!("k{}", version % 3));
        }
    }
    delete(&processor, &cache, "a");
    let behind = registration.stats();
    assert!(behind.dropped > 0, "{behind:?}");

    gate.open();
    eventually("the handler is level with the cache", || {
        let view = view.lock().unwrap_or_else(PoisonError::into_inner);
        let cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
        view.len() == cache.len()
            && cache
                .iter()
                .all(|(key, state)| view.get(key).is_some_and(|seen| Arc::ptr_eq(seen, state)))
    })
    .await;
    let stats = registration.stats();
    assert_eq!((stats.resyncs, stats.panicked), (1, 0), "{stats:?}");
    stop(token, running).await;
}

/// Resyncing needs the cache and the key: a processor without them refuses it, and says why.
#[test]
fn resyncing_without_a_cache_is_refused() {
    let processor = SharedProcessor::<String>::default();
    let refused = processor
        .subscribe(
            ListenerOptions::new()
                .name("wants-resync")
                .buffer(BufferPolicy::bounded(10, Overflow::Resync)),
        )
        .expect_err("no cache to resync from");
    assert!(matches!(refused, Error::ResyncWithoutCache { ref name } if name == "wants-resync"));
    assert!(refused.to_string().contains("cache_snapshot"));
}
