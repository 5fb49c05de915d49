//! DeltaFIFO behaviour, mostly ported from client-go's `delta_fifo_test.go`.

use crate::common;

use std::sync::Arc;

use common::{
    D, Obj, arrived, describe_all, expect, is_waiting, known, obj, plus_a_thousand, pop,
    pop_described, pop_newest, queued_encoded,
};
use kinformer_fifo::{
    DeltaFifo, DeltaFifoOptions, DeltaType::*, Deltas, Error, Popped, Processed, Queue,
};
use kinformer_store::Store;

fn plain() -> DeltaFifo<Obj> {
    DeltaFifo::new(DeltaFifoOptions::new())
}

fn with_known(objects: Vec<Arc<Obj>>) -> DeltaFifo<Obj> {
    DeltaFifo::new(DeltaFifoOptions::new().known_objects(known(objects)))
}

/// Ported from client-go's TestDeltaFIFO_basic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_producers_keep_each_producers_order() {
    let fifo = Arc::new(plain());
    const AMOUNT: i64 = 500;
    let producers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|prefix| {
            let fifo = Arc::clone(&fifo);
            tokio::spawn(async move {
                for i in 0..AMOUNT {
                    fifo.add(obj(&format!("{prefix}{i}"), i + 1).into())
                        .unwrap();
                }
            })
        })
        .collect();
    let mut last = std::collections::HashMap::new();
    for _ in 0..AMOUNT * 2 {
        let popped = fifo.pop(&mut |_, _| Processed::Done).await.unwrap();
        let newest = popped.deltas().last().unwrap().object().clone();
        let prefix = newest.name[..1].to_owned();
        let previous = last.insert(prefix, newest.val).unwrap_or(0);
        assert!(
            newest.val > previous,
            "{} out of order after {previous}",
            newest.val
        );
    }
    for producer in producers {
        producer.await.unwrap();
    }
}

/// Ported from client-go's TestDeltaFIFO_replaceWithDeleteDeltaIn.
#[test]
fn replace_after_a_queued_deletion_still_queues_the_listed_object() {
    let fifo = with_known(vec![obj("foo", 1)]);
    fifo.delete(obj("foo", 1)).unwrap();
    fifo.replace(vec![obj("foo", 2)], "").unwrap();
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Obj(Deleted, "foo", 1), D::Obj(Sync, "foo", 2)])
    );
}

/// Ported from client-go's TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue.
#[test]
fn replace_makes_deletions_for_objects_only_in_the_queue() {
    type Ops = fn(&DeltaFifo<Obj>);
    let cases: Vec<(&str, bool, Ops, Vec<D>)> = vec![
        (
            "added object is deleted on replace",
            false,
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![D::Obj(Added, "foo", 2), D::Tomb(Deleted, "foo", "foo", 2)],
        ),
        (
            "replaced object gets a single delete",
            true,
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.replace(vec![obj("foo", 2)], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                D::Obj(Added, "foo", 2),
                D::Obj(Replaced, "foo", 2),
                D::Tomb(Deleted, "foo", "foo", 2),
            ],
        ),
        (
            "deleted object gets a single delete",
            false,
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.delete(obj("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![D::Obj(Added, "foo", 2), D::Obj(Deleted, "foo", 2)],
        ),
        (
            "synced object gets a single delete",
            false,
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.replace(vec![obj("foo", 2)], "0").unwrap();
                f.replace(vec![obj("foo", 2)], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                D::Obj(Added, "foo", 2),
                D::Obj(Sync, "foo", 2),
                D::Obj(Sync, "foo", 2),
                D::Tomb(Deleted, "foo", "foo", 2),
            ],
        ),
        (
            "added object gets a single delete over several replaces",
            false,
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.replace(vec![], "0").unwrap();
                f.replace(vec![], "1").unwrap();
            },
            vec![D::Obj(Added, "foo", 2), D::Tomb(Deleted, "foo", "foo", 2)],
        ),
        (
            "added, deleted and re-added object is deleted with its newest state",
            false,
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.delete(obj("foo", 2)).unwrap();
                f.add(obj("foo", 3).into()).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                D::Obj(Added, "foo", 2),
                D::Obj(Deleted, "foo", 2),
                D::Obj(Added, "foo", 3),
                D::Tomb(Deleted, "foo", "foo", 3),
            ],
        ),
    ];
    for (name, emit_replaced, ops, expected) in cases {
        for known_objects in [Some(known(vec![])), None] {
            let mut options = DeltaFifoOptions::new().emit_delta_type_replaced(emit_replaced);
            if let Some(known_objects) = known_objects.clone() {
                options = options.known_objects(known_objects);
            }
            let fifo = DeltaFifo::new(options);
            ops(&fifo);
            assert_eq!(pop_described(&fifo), expect(&expected), "{name}");
            assert!(fifo.is_empty(), "{name}: extra deltas left");
        }
    }
}

/// Ported from client-go's TestDeltaFIFO_requeueOnPop.
#[tokio::test]
async fn a_process_function_can_requeue_what_it_popped() {
    let fifo = plain();
    fifo.add(obj("foo", 10).into()).unwrap();

    let popped = fifo
        .pop(&mut |popped, _| {
            assert_eq!(popped.deltas()[0].object().name, "foo");
            Processed::Requeue
        })
        .await;
    assert!(popped.is_ok());
    assert!(fifo.get_by_key("foo").is_some(), "requeued");

    let popped = fifo
        .pop(&mut |_, _| Processed::Retry("test error".into()))
        .await;
    match popped {
        Err(Error::Process { source }) => assert_eq!(source.to_string(), "test error"),
        other => panic!("expected the requeue's error, got {other:?}"),
    }
    assert!(fifo.get_by_key("foo").is_some(), "requeued again");

    fifo.pop(&mut |_, _| Processed::Done).await.unwrap();
    assert!(fifo.get_by_key("foo").is_none(), "removed");
}

/// Ported from client-go's TestDeltaFIFO_addUpdate.
#[tokio::test]
async fn one_pop_delivers_every_change_to_a_key_and_the_newest_last() {
    let fifo = plain();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.update(obj("foo", 12).into()).unwrap();
    fifo.delete(obj("foo", 15)).unwrap();
    let listed: Vec<i64> = fifo
        .list()
        .iter()
        .map(|deltas| deltas.newest().unwrap().object().val)
        .collect();
    assert_eq!(listed, [15]);
    assert_eq!(fifo.list_keys(), ["foo"]);

    assert_eq!(pop_newest(&fifo).val, 15);
    let mut second = Box::pin(async { fifo.pop(&mut |_, _| Processed::Done).await });
    assert!(is_waiting(&mut second).await, "a second value was popped");
    assert!(
        fifo.get(&obj("foo", 0)).unwrap().is_none(),
        "item was not removed"
    );
}

/// Ported from client-go's TestDeltaFIFO_enqueueingNoLister.
#[test]
fn without_known_objects_deleting_an_unqueued_key_does_nothing() {
    let fifo = plain();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.update(obj("bar", 15).into()).unwrap();
    fifo.add(obj("qux", 17).into()).unwrap();
    fifo.delete(obj("qux", 18)).unwrap();
    fifo.delete(obj("baz", 20)).unwrap();
    for expected in [10, 15, 18] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestDeltaFIFO_enqueueingWithLister.
#[test]
fn deleting_a_known_key_queues_the_deletion() {
    let fifo = with_known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]);
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.update(obj("bar", 15).into()).unwrap();
    fifo.delete(obj("baz", 20)).unwrap();
    for expected in [10, 15, 20] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestDeltaFIFO_addReplace.
#[tokio::test]
async fn replace_appends_to_a_queued_key_instead_of_queueing_it_twice() {
    let fifo = plain();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.replace(vec![obj("foo", 15)], "0").unwrap();
    assert_eq!(pop_newest(&fifo).val, 15);
    let mut second = Box::pin(async { fifo.pop(&mut |_, _| Processed::Done).await });
    assert!(is_waiting(&mut second).await, "a second value was popped");
}

/// Ported from client-go's TestDeltaFIFO_ResyncNonExisting.
#[test]
fn resync_skips_a_key_whose_deletion_is_queued() {
    let fifo = with_known(vec![obj("foo", 5)]);
    fifo.delete(obj("foo", 10)).unwrap();
    fifo.resync().unwrap();
    let deltas = fifo.get_by_key("foo").unwrap();
    assert_eq!(describe_all(&deltas), expect(&[D::Obj(Deleted, "foo", 10)]));
}

/// Ported from client-go's TestDeltaFIFO_Resync.
#[test]
fn resync_queues_sync_for_known_objects() {
    let fifo = with_known(vec![obj("foo", 5)]);
    fifo.resync().unwrap();
    let deltas = fifo.get_by_key("foo").unwrap();
    assert_eq!(describe_all(&deltas), expect(&[D::Obj(Sync, "foo", 5)]));
}

/// Ported from client-go's TestDeltaFIFO_DeleteExistingNonPropagated.
#[test]
fn deleting_a_queued_but_unknown_key_queues_the_deletion() {
    let fifo = with_known(vec![]);
    fifo.add(obj("foo", 5).into()).unwrap();
    fifo.delete(obj("foo", 6)).unwrap();
    let deltas = fifo.get_by_key("foo").unwrap();
    assert_eq!(deltas.len(), 2);
    assert_eq!(deltas.newest().unwrap().kind, Deleted);
}

/// Ported from client-go's TestDeltaFIFO_ReplaceMakesDeletions.
#[test]
fn replace_tombstones_known_and_queued_keys_missing_from_the_list() {
    let known_three = || vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)];

    let fifo = with_known(known_three());
    fifo.delete(obj("baz", 10)).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Deleted, "baz", 10)]));
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Sync, "foo", 5)]));
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "bar", "bar", 6)])
    );

    let fifo = with_known(known_three());
    fifo.add(obj("baz", 10).into()).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Obj(Added, "baz", 10), D::Tomb(Deleted, "baz", "baz", 10)])
    );
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Sync, "foo", 5)]));
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "bar", "bar", 6)])
    );

    let fifo = with_known(known_three());
    fifo.delete(obj("bar", 6)).unwrap();
    fifo.add(obj("bar", 100).into()).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        pop_described(&fifo),
        expect(&[
            D::Obj(Deleted, "bar", 6),
            D::Obj(Added, "bar", 100),
            D::Tomb(Deleted, "bar", "bar", 100),
        ])
    );
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Sync, "foo", 5)]));
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "baz", "baz", 7)])
    );

    let fifo = with_known(known_three());
    fifo.replace(vec![obj("bar", 100), obj("foo", 5)], "0")
        .unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        pop_described(&fifo),
        expect(&[
            D::Obj(Sync, "bar", 100),
            D::Tomb(Deleted, "bar", "bar", 100)
        ])
    );
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Obj(Sync, "foo", 5), D::Obj(Sync, "foo", 5)])
    );
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "baz", "baz", 7)])
    );

    let fifo = plain();
    fifo.add(obj("baz", 10).into()).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Obj(Added, "baz", 10), D::Tomb(Deleted, "baz", "baz", 10)])
    );
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Sync, "foo", 5)]));
}

/// Ported from client-go's TestDeltaFIFO_ReplaceMakesDeletionsReplaced.
#[test]
fn replace_with_emit_replaced_queues_replaced_and_tombstones() {
    let fifo = DeltaFifo::new(
        DeltaFifoOptions::new()
            .known_objects(known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]))
            .emit_delta_type_replaced(true),
    );
    fifo.delete(obj("baz", 10)).unwrap();
    fifo.replace(vec![obj("foo", 6)], "0").unwrap();
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Deleted, "baz", 10)]));
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Replaced, "foo", 6)]));
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "bar", "bar", 6)])
    );
}

/// Ported from client-go's TestDeltaFIFO_ReplaceDeltaType.
#[test]
fn replace_emits_replaced_when_asked_to() {
    let fifo = DeltaFifo::new(
        DeltaFifoOptions::new()
            .known_objects(known(vec![obj("foo", 5)]))
            .emit_delta_type_replaced(true),
    );
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Replaced, "foo", 5)]));
}

/// Ported from client-go's TestDeltaFIFO_UpdateResyncRace.
#[test]
fn resync_does_not_overtake_a_queued_update() {
    let fifo = with_known(vec![obj("foo", 5)]);
    fifo.update(obj("foo", 6).into()).unwrap();
    fifo.resync().unwrap();
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Updated, "foo", 6)]));
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestDeltaFIFO_HasSyncedCorrectOnDeletion.
#[test]
fn initial_population_counts_the_tombstones_of_the_first_replace() {
    let fifo = with_known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]);
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    let expected = [
        expect(&[D::Obj(Sync, "foo", 5)]),
        expect(&[D::Tomb(Deleted, "bar", "bar", 6)]),
        expect(&[D::Tomb(Deleted, "baz", "baz", 7)]),
    ];
    for expected in expected {
        assert!(!fifo.has_synced());
        assert_eq!(pop_described(&fifo), expected);
    }
    assert!(fifo.has_synced());
}

/// Ported from client-go's TestDeltaFIFO_detectLineJumpers.
#[test]
fn a_key_queued_again_after_its_pop_goes_to_the_back() {
    let fifo = plain();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.add(obj("bar", 1).into()).unwrap();
    fifo.add(obj("foo", 11).into()).unwrap();
    fifo.add(obj("foo", 13).into()).unwrap();
    fifo.add(obj("zab", 30).into()).unwrap();
    assert_eq!(pop_newest(&fifo).val, 13);
    fifo.add(obj("foo", 14).into()).unwrap();
    for expected in [1, 30, 14] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
}

/// Ported from client-go's TestDeltaFIFO_addIfNotPresent.
#[test]
fn add_if_not_present_never_replaces_newer_deltas() {
    let fifo = plain();
    fifo.add_if_not_present(Deltas::new()).unwrap();
    assert!(fifo.is_empty(), "empty deltas are ignored");

    fifo.add(obj("b", 3).into()).unwrap();
    let b3 = common::deltas_of(pop(&fifo));
    fifo.add(obj("c", 4).into()).unwrap();
    let c4 = common::deltas_of(pop(&fifo));
    assert!(fifo.is_empty());

    fifo.add(obj("a", 1).into()).unwrap();
    fifo.add(obj("b", 2).into()).unwrap();
    fifo.add_if_not_present(b3).unwrap();
    fifo.add_if_not_present(c4).unwrap();
    assert_eq!(fifo.len(), 3);
    for expected in [1, 2, 4] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
}

/// Ported from client-go's TestDeltaFIFO_HasSynced.
#[test]
fn has_synced_follows_the_initial_population() {
    type Action = fn(&DeltaFifo<Obj>);
    let replace_two: Action = |f| f.replace(vec![obj("a", 1), obj("b", 2)], "0").unwrap();
    let pop_one: Action = |f| {
        pop(f);
    };
    let cases: Vec<(Vec<Action>, bool)> = vec![
        (vec![], false),
        (vec![|f| f.add(obj("a", 1).into()).unwrap()], true),
        (vec![|f| f.replace(vec![], "0").unwrap()], true),
        (vec![replace_two], false),
        (vec![replace_two, pop_one], false),
        (vec![replace_two, pop_one, pop_one], true),
        (
            vec![
                |f| f.replace(vec![obj("a", 1), obj("a", 2)], "0").unwrap(),
                pop_one,
            ],
            true,
        ),
    ];
    for (i, (actions, expected)) in cases.into_iter().enumerate() {
        let fifo = plain();
        for action in actions {
            action(&fifo);
        }
        assert_eq!(fifo.has_synced(), expected, "case {i}");
    }
}

/// Ported from client-go's TestDeltaFIFO_PopShouldUnblockWhenClosed: every pop is parked
/// (polled to `Pending`) before the close, so the close is what wakes them.
#[tokio::test]
async fn close_wakes_every_waiting_pop() {
    let fifo = with_known(vec![obj("foo", 5)]);
    let mut waiters: Vec<_> = (0..10)
        .map(|_| Box::pin(async { fifo.pop(&mut |_, _| Processed::Done).await.map(|_| ()) }))
        .collect();
    for waiter in &mut waiters {
        assert!(is_waiting(waiter).await, "a pop on an empty queue waits");
    }
    fifo.close();
    assert!(fifo.is_closed());
    for waiter in waiters {
        let outcome = waiter.await;
        assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
    }
}

/// Ported from client-go's TestDeltaFIFO_transformer: objects are transformed on the way in,
/// tombstones and resync objects are not.
#[test]
fn the_transformer_runs_on_objects_coming_in_but_not_on_resyncs() {
    let transformer = plus_a_thousand();
    let fifo = DeltaFifo::new(
        DeltaFifoOptions::new()
            .known_objects(known(vec![obj("known", 1), obj("gone", 2)]))
            .transformer(transformer)
            .emit_delta_type_replaced(true),
    );
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.update(obj("foo", 11).into()).unwrap();
    fifo.replace(vec![obj("bar", 20)], "1").unwrap();
    fifo.resync().unwrap();
    assert_eq!(
        pop_described(&fifo),
        expect(&[
            D::Obj(Added, "foo", 1010),
            D::Obj(Updated, "foo", 1011),
            D::Tomb(Deleted, "foo", "foo", 1011),
        ])
    );
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Obj(Replaced, "bar", 1020)])
    );
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "known", "known", 1)])
    );
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "gone", "gone", 2)])
    );
    assert!(fifo.is_empty(), "resync skipped keys with queued deltas");
}

#[test]
fn an_object_without_a_name_is_refused_and_the_queue_is_untouched() {
    let fifo = with_known(vec![obj("known", 1)]);
    fifo.add(obj("a", 1).into()).unwrap();
    let error = fifo.add(obj("", 2).into()).unwrap_err();
    assert!(error.to_string().contains("no metadata.name"), "{error}");
    let error = fifo
        .replace(vec![obj("b", 1), obj("", 2)], "1")
        .unwrap_err();
    assert!(error.to_string().contains("no metadata.name"), "{error}");
    assert!(fifo.delete(obj("", 3)).is_err());
    assert_eq!(fifo.list_keys(), ["a"]);
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Added, "a", 1)]));
}

#[test]
fn a_real_deletion_beats_a_tombstone_whichever_comes_first() {
    let fifo = with_known(vec![obj("foo", 1)]);
    fifo.replace(vec![], "1").unwrap();
    fifo.delete(obj("foo", 2)).unwrap();
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Deleted, "foo", 2)]));

    let fifo = plain();
    fifo.add(obj("foo", 1).into()).unwrap();
    fifo.delete(obj("foo", 2)).unwrap();
    fifo.replace(vec![], "1").unwrap();
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Obj(Added, "foo", 1), D::Obj(Deleted, "foo", 2)])
    );
}

#[test]
fn pops_report_whether_they_belong_to_the_initial_list() {
    let fifo = plain();
    fifo.replace(vec![obj("a", 1)], "1").unwrap();
    fifo.add(obj("b", 1).into()).unwrap();
    let mut initial = Vec::new();
    while let Some(popped) = fifo
        .try_pop(&mut |_, kind| {
            initial.push(kind.is_initial_list());
            Processed::Done
        })
        .unwrap()
    {
        assert!(matches!(popped, Popped::Deltas(_)));
    }
    assert_eq!(initial, [true, false]);
}

#[test]
fn a_failed_process_drops_the_item_and_reports_the_failure() {
    let fifo = plain();
    fifo.add(obj("a", 1).into()).unwrap();
    let outcome = fifo.try_pop(&mut |_, _| Processed::Failed("handler broke".into()));
    assert!(matches!(outcome, Err(Error::Process { .. })));
    assert!(fifo.is_empty());
}

#[tokio::test]
async fn a_pop_waiting_on_an_empty_queue_wakes_when_something_is_added() {
    let fifo: Arc<dyn Queue<Obj>> = Arc::new(plain());
    let mut waiter = Box::pin(async {
        fifo.pop(&mut |_, _| Processed::Done)
            .await
            .map(|popped| popped.deltas().len())
    });
    assert!(is_waiting(&mut waiter).await, "the pop parks first");
    fifo.add(obj("a", 1).into()).unwrap();
    assert_eq!(waiter.await.unwrap(), 1);
}

#[tokio::test]
async fn a_closed_queue_still_hands_out_what_it_holds() {
    let fifo = plain();
    fifo.add(obj("a", 1).into()).unwrap();
    fifo.close();
    assert!(fifo.pop(&mut |_, _| Processed::Done).await.is_ok());
    assert!(matches!(
        fifo.pop(&mut |_, _| Processed::Done).await,
        Err(Error::Closed)
    ));
}

#[test]
fn keys_are_found_again_after_the_index_sweeps_popped_keys() {
    let fifo = plain();
    for i in 0..3000 {
        fifo.add(obj(&format!("k{i}"), 1).into()).unwrap();
    }
    // Enough pops for the index to sweep its stale entries.
    for i in 0..2000 {
        assert_eq!(pop_newest(&fifo).name, format!("k{i}"));
    }
    for i in 0..3000 {
        fifo.update(obj(&format!("k{i}"), 2).into()).unwrap();
    }
    for i in (2000..3000).chain(0..2000) {
        let popped = pop(&fifo);
        let names: Vec<_> = popped
            .deltas()
            .iter()
            .map(|d| d.object().name.clone())
            .collect();
        let expected_len = if i >= 2000 { 2 } else { 1 };
        assert_eq!(names, vec![format!("k{i}"); expected_len]);
    }
    assert!(fifo.is_empty());
}

#[test]
fn encoded_bytes_travel_with_their_delta_unless_a_transformer_changes_the_object() {
    let fifo = with_known(vec![obj("gone", 1)]);
    fifo.add(arrived(obj("a", 1), "a1")).unwrap();
    fifo.update(arrived(obj("a", 2), "a2")).unwrap();
    fifo.update(obj("b", 1).into()).unwrap();
    fifo.delete(obj("gone", 1)).unwrap();
    assert_eq!(
        queued_encoded(&fifo),
        [Some(b"a1".to_vec()), Some(b"a2".to_vec()), None, None]
    );

    let transformer = plus_a_thousand();
    let fifo = DeltaFifo::new(DeltaFifoOptions::new().transformer(transformer));
    fifo.add(arrived(obj("a", 1), "a1")).unwrap();
    fifo.update(arrived(obj("a", 2), "a2")).unwrap();
    assert_eq!(queued_encoded(&fifo), [None, None]);
}
