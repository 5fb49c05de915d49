//! RealFIFO behaviour, mostly ported from client-go's `the_real_fifo_test.go`.

use crate::common;

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use common::{
    D, Obj, arrived, describe_all, expect, is_waiting, known, obj, plus_a_thousand, pop,
    pop_described, pop_newest, queued_encoded,
};
use kinformer_fifo::{
    DeltaType::*, Error, KnownObjects, Popped, Processed, Queue, RealFifo, RealFifoOptions,
};
use kinformer_store::Store;

fn real(known_objects: KnownObjects<Obj>) -> RealFifo<Obj> {
    RealFifo::new(RealFifoOptions::new(known_objects)).unwrap()
}

fn empty() -> RealFifo<Obj> {
    real(known(vec![]))
}

fn atomic() -> RealFifo<Obj> {
    RealFifo::new(RealFifoOptions::atomic().unlock_while_processing(false)).unwrap()
}

/// Every queued delta, in order, without popping.
fn queued(fifo: &RealFifo<Obj>) -> Vec<String> {
    fifo.list()
        .iter()
        .flat_map(|deltas| describe_all(deltas))
        .collect()
}

/// Pops everything, one delta per pop, and describes it.
fn drain(fifo: &RealFifo<Obj>) -> Vec<String> {
    let mut all = Vec::new();
    while !fifo.is_empty() {
        all.extend(pop_described(fifo));
    }
    all
}

/// Ported from client-go's TestRealFIFO_basic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_producers_keep_each_producers_order() {
    let fifo = Arc::new(empty());
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
        let previous = last
            .insert(newest.name[..1].to_owned(), newest.val)
            .unwrap_or(0);
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

/// Ported from client-go's TestRealFIFO_replaceWithDeleteDeltaIn.
#[test]
fn replace_after_a_queued_deletion_still_queues_the_listed_object() {
    let fifo = real(known(vec![obj("foo", 1)]));
    fifo.delete(obj("foo", 1)).unwrap();
    fifo.replace(vec![obj("foo", 2)], "").unwrap();
    assert_eq!(
        queued(&fifo),
        expect(&[D::Obj(Deleted, "foo", 1), D::Obj(Replaced, "foo", 2)])
    );
}

/// Ported from client-go's TestRealFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue.
#[test]
fn replace_makes_deletions_for_objects_only_in_the_queue() {
    type Ops = fn(&RealFifo<Obj>);
    let cases: Vec<(&str, Ops, Vec<D>)> = vec![
        (
            "added object is deleted on replace",
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![D::Obj(Added, "foo", 2), D::Tomb(Deleted, "foo", "foo", 2)],
        ),
        (
            "deleted object gets a single delete",
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.delete(obj("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![D::Obj(Added, "foo", 2), D::Obj(Deleted, "foo", 2)],
        ),
        (
            "synced object gets a single delete",
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.replace(vec![obj("foo", 2)], "0").unwrap();
                f.replace(vec![obj("foo", 2)], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                D::Obj(Added, "foo", 2),
                D::Obj(Replaced, "foo", 2),
                D::Obj(Replaced, "foo", 2),
                D::Tomb(Deleted, "foo", "foo", 2),
            ],
        ),
        (
            "added object gets a single delete over several replaces",
            |f| {
                f.add(obj("foo", 2).into()).unwrap();
                f.replace(vec![], "0").unwrap();
                f.replace(vec![], "1").unwrap();
            },
            vec![D::Obj(Added, "foo", 2), D::Tomb(Deleted, "foo", "foo", 2)],
        ),
        (
            "added, deleted and re-added object is deleted with its newest state",
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
        (
            "a bookmark is not queued without atomic events",
            |f| {
                f.bookmark("123").unwrap();
                f.replace(vec![], "0").unwrap();
                f.replace(vec![], "1").unwrap();
            },
            vec![],
        ),
    ];
    for (name, ops, expected) in cases {
        let fifo = empty();
        ops(&fifo);
        assert_eq!(drain(&fifo), expect(&expected), "{name}");
    }
}

/// Ported from client-go's TestRealFIFO_addUpdate.
#[tokio::test]
async fn every_change_is_delivered_in_its_own_pop() {
    let fifo = empty();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.update(obj("foo", 12).into()).unwrap();
    fifo.delete(obj("foo", 15)).unwrap();
    assert_eq!(
        queued(&fifo),
        expect(&[
            D::Obj(Added, "foo", 10),
            D::Obj(Updated, "foo", 12),
            D::Obj(Deleted, "foo", 15),
        ])
    );
    for expected in [10, 12, 15] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
    let mut more = Box::pin(async { fifo.pop(&mut |_, _| Processed::Done).await });
    assert!(is_waiting(&mut more).await, "an extra value was popped");
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestRealFIFO_transformer.
#[test]
fn the_transformer_runs_once_per_object_and_never_on_tombstones() {
    let transformer = plus_a_thousand();
    let fifo = RealFifo::new(RealFifoOptions::new(known(vec![])).transformer(transformer)).unwrap();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.add(obj("bar", 11).into()).unwrap();
    fifo.update(obj("foo", 12).into()).unwrap();
    fifo.delete(obj("foo", 15)).unwrap();
    fifo.replace(vec![], "").unwrap();
    fifo.add(obj("bar", 16).into()).unwrap();
    fifo.replace(vec![], "").unwrap();
    assert_eq!(
        drain(&fifo),
        expect(&[
            D::Obj(Added, "foo", 1010),
            D::Obj(Added, "bar", 1011),
            D::Obj(Updated, "foo", 1012),
            D::Obj(Deleted, "foo", 1015),
            D::Tomb(Deleted, "bar", "bar", 1011),
            D::Obj(Added, "bar", 1016),
            D::Tomb(Deleted, "bar", "bar", 1016),
        ])
    );
}

/// Ported from client-go's TestRealFIFO_enqueueingNoLister.
#[test]
fn every_deletion_is_queued_even_for_unknown_keys() {
    let fifo = empty();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.update(obj("bar", 15).into()).unwrap();
    fifo.add(obj("qux", 17).into()).unwrap();
    fifo.delete(obj("qux", 18)).unwrap();
    fifo.delete(obj("baz", 20)).unwrap();
    for expected in [10, 15, 17, 18, 20] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestRealFIFO_enqueueingWithLister.
#[test]
fn deleting_a_known_key_queues_the_deletion() {
    let fifo = real(known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]));
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.update(obj("bar", 15).into()).unwrap();
    fifo.delete(obj("baz", 20)).unwrap();
    for expected in [10, 15, 20] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestRealFIFO_addReplace.
#[test]
fn replace_queues_behind_earlier_changes_to_the_same_key() {
    let fifo = empty();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.replace(vec![obj("foo", 15)], "0").unwrap();
    assert_eq!(pop_newest(&fifo).val, 10);
    assert_eq!(pop_newest(&fifo).val, 15);
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestRealFIFO_ResyncNonExisting.
#[test]
fn resync_skips_a_key_whose_deletion_is_queued() {
    let fifo = real(known(vec![obj("foo", 5)]));
    fifo.delete(obj("foo", 10)).unwrap();
    fifo.resync().unwrap();
    assert_eq!(queued(&fifo), expect(&[D::Obj(Deleted, "foo", 10)]));
}

/// Ported from client-go's TestRealFIFO_Resync.
#[test]
fn resync_queues_sync_for_known_objects() {
    let fifo = real(known(vec![obj("foo", 5)]));
    fifo.resync().unwrap();
    assert_eq!(queued(&fifo), expect(&[D::Obj(Sync, "foo", 5)]));
}

/// Ported from client-go's TestRealFIFO_DeleteExistingNonPropagated.
#[test]
fn deleting_a_queued_key_appends_the_deletion() {
    let fifo = empty();
    fifo.add(obj("foo", 5).into()).unwrap();
    fifo.delete(obj("foo", 6)).unwrap();
    assert_eq!(
        queued(&fifo),
        expect(&[D::Obj(Added, "foo", 5), D::Obj(Deleted, "foo", 6)])
    );
}

/// Ported from client-go's TestRealFIFO_ReplaceMakesDeletions.
#[test]
fn replace_queues_deletions_before_the_listed_objects() {
    let known_three = || known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]);

    let fifo = real(known_three());
    fifo.delete(obj("baz", 10)).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&fifo),
        expect(&[
            D::Obj(Deleted, "baz", 10),
            D::Tomb(Deleted, "bar", "bar", 6),
            D::Obj(Replaced, "foo", 5),
        ])
    );

    let fifo = real(known_three());
    fifo.add(obj("baz", 10).into()).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&fifo),
        expect(&[
            D::Obj(Added, "baz", 10),
            D::Tomb(Deleted, "baz", "baz", 10),
            D::Tomb(Deleted, "bar", "bar", 6),
            D::Obj(Replaced, "foo", 5),
        ])
    );

    let fifo = real(known_three());
    fifo.delete(obj("bar", 6)).unwrap();
    fifo.add(obj("bar", 100).into()).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&fifo),
        expect(&[
            D::Obj(Deleted, "bar", 6),
            D::Obj(Added, "bar", 100),
            D::Tomb(Deleted, "bar", "bar", 100),
            D::Tomb(Deleted, "baz", "baz", 7),
            D::Obj(Replaced, "foo", 5),
        ])
    );

    let fifo = real(known_three());
    fifo.replace(vec![obj("bar", 100), obj("foo", 5)], "0")
        .unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&fifo),
        expect(&[
            D::Tomb(Deleted, "baz", "baz", 7),
            D::Obj(Replaced, "bar", 100),
            D::Obj(Replaced, "foo", 5),
            D::Tomb(Deleted, "bar", "bar", 100),
            D::Obj(Replaced, "foo", 5),
        ])
    );

    let fifo = empty();
    fifo.add(obj("baz", 10).into()).unwrap();
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&fifo),
        expect(&[
            D::Obj(Added, "baz", 10),
            D::Tomb(Deleted, "baz", "baz", 10),
            D::Obj(Replaced, "foo", 5),
        ])
    );
}

/// Ported from client-go's TestRealFIFO_UpdateResyncRace.
#[test]
fn resync_does_not_overtake_a_queued_update() {
    let fifo = real(known(vec![obj("foo", 5)]));
    fifo.update(obj("foo", 6).into()).unwrap();
    fifo.resync().unwrap();
    assert_eq!(drain(&fifo), expect(&[D::Obj(Updated, "foo", 6)]));
}

/// Ported from client-go's TestRealFIFO_HasSyncedCorrectOnDeletion.
#[test]
fn initial_population_counts_every_item_of_the_first_replace() {
    let fifo = real(known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]));
    fifo.replace(vec![obj("foo", 5)], "0").unwrap();
    let expected = [
        expect(&[D::Tomb(Deleted, "bar", "bar", 6)]),
        expect(&[D::Tomb(Deleted, "baz", "baz", 7)]),
        expect(&[D::Obj(Replaced, "foo", 5)]),
    ];
    for expected in expected {
        assert!(!fifo.has_synced());
        let mut initial = false;
        let popped = fifo
            .try_pop(&mut |_, is_in_initial_list| {
                initial = is_in_initial_list.is_initial_list();
                Processed::Done
            })
            .unwrap()
            .unwrap();
        assert_eq!(describe_all(popped.deltas()), expected);
        assert!(initial, "expected an initial list item");
    }
    assert!(fifo.has_synced());
}

/// Ported from client-go's TestRealFIFO_detectLineJumpers.
#[test]
fn every_event_is_delivered_in_arrival_order() {
    let fifo = empty();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.add(obj("bar", 1).into()).unwrap();
    fifo.add(obj("foo", 11).into()).unwrap();
    fifo.add(obj("foo", 13).into()).unwrap();
    fifo.add(obj("zab", 30).into()).unwrap();
    assert_eq!(pop_newest(&fifo).val, 10);
    fifo.add(obj("foo", 14).into()).unwrap();
    for expected in [1, 11, 13, 30, 14] {
        assert_eq!(pop_newest(&fifo).val, expected);
    }
}

/// Ported from client-go's TestRealFIFO_HasSynced.
#[test]
fn has_synced_follows_the_initial_population() {
    type Action = fn(&RealFifo<Obj>);
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
                pop_one,
            ],
            true,
        ),
    ];
    for (i, (actions, expected)) in cases.into_iter().enumerate() {
        let fifo = empty();
        for action in actions {
            action(&fifo);
        }
        assert_eq!(fifo.has_synced(), expected, "case {i}");
    }
}

/// Ported from client-go's TestRealFIFO_PopShouldUnblockWhenClosed: every pop is parked
/// (polled to `Pending`) before the close, so the close is what wakes them.
#[tokio::test]
async fn close_wakes_every_waiting_pop() {
    let fifo = real(known(vec![obj("foo", 5)]));
    let mut waiters: Vec<_> = (0..10)
        .map(|_| {
            Box::pin(async {
                fifo.pop_batch(&mut |_, _| Processed::Done)
                    .await
                    .map(|_| ())
            })
        })
        .collect();
    for waiter in &mut waiters {
        assert!(is_waiting(waiter).await, "a pop on an empty queue waits");
    }
    fifo.close();
    for waiter in waiters {
        let outcome = waiter.await;
        assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
    }
}

/// Ported from client-go's TestRealFIFO_PopMultipleDeltaInBatch.
#[test]
fn batched_pops_take_distinct_keys_and_stop_at_the_initial_list() {
    type Action = fn(&RealFifo<Obj>);
    /// Name, initial list, later actions, batch size, expected batches.
    type Case = (
        &'static str,
        Vec<&'static str>,
        Vec<Action>,
        usize,
        Vec<Vec<D>>,
    );
    const UNLIMITED: usize = 999_999;
    let cases: Vec<Case> = vec![
        (
            "unique items come in one batch",
            vec!["foo1", "foo2", "foo3"],
            vec![],
            UNLIMITED,
            vec![vec![
                D::Obj(Replaced, "foo1", 5),
                D::Obj(Replaced, "foo2", 5),
                D::Obj(Replaced, "foo3", 5),
            ]],
        ),
        (
            "the initial list ends a batch",
            vec!["foo1", "foo2"],
            vec![|f| f.update(obj("foo3", 5).into()).unwrap(), |f| {
                f.update(obj("foo4", 5).into()).unwrap();
            }],
            2,
            vec![
                vec![D::Obj(Replaced, "foo1", 5), D::Obj(Replaced, "foo2", 5)],
                vec![D::Obj(Updated, "foo3", 5), D::Obj(Updated, "foo4", 5)],
            ],
        ),
        (
            "a repeated key ends a batch",
            vec!["foo1"],
            vec![|f| f.update(obj("foo1", 5).into()).unwrap(), |f| {
                f.update(obj("foo1", 5).into()).unwrap();
            }],
            UNLIMITED,
            vec![
                vec![D::Obj(Replaced, "foo1", 5)],
                vec![D::Obj(Updated, "foo1", 5)],
                vec![D::Obj(Updated, "foo1", 5)],
            ],
        ),
        (
            "a repeated key at the end ends a batch",
            vec!["foo1", "foo2"],
            vec![|f| f.update(obj("foo2", 5).into()).unwrap(), |f| {
                f.update(obj("foo3", 5).into()).unwrap();
            }],
            UNLIMITED,
            vec![
                vec![D::Obj(Replaced, "foo1", 5), D::Obj(Replaced, "foo2", 5)],
                vec![D::Obj(Updated, "foo2", 5), D::Obj(Updated, "foo3", 5)],
            ],
        ),
        (
            "the batch size ends a batch of the initial list",
            vec!["foo1", "foo2", "foo3"],
            vec![],
            2,
            vec![
                vec![D::Obj(Replaced, "foo1", 5), D::Obj(Replaced, "foo2", 5)],
                vec![D::Obj(Replaced, "foo3", 5)],
            ],
        ),
        (
            "the batch size ends a batch of later deltas",
            vec![],
            vec![
                |f| f.update(obj("foo1", 5).into()).unwrap(),
                |f| f.update(obj("foo2", 5).into()).unwrap(),
                |f| f.update(obj("foo3", 5).into()).unwrap(),
            ],
            2,
            vec![
                vec![D::Obj(Updated, "foo1", 5), D::Obj(Updated, "foo2", 5)],
                vec![D::Obj(Updated, "foo3", 5)],
            ],
        ),
        (
            "initial and later items split by both limits",
            vec!["foo1", "foo2", "foo3"],
            vec![|f| f.update(obj("foo4", 5).into()).unwrap()],
            2,
            vec![
                vec![D::Obj(Replaced, "foo1", 5), D::Obj(Replaced, "foo2", 5)],
                vec![D::Obj(Replaced, "foo3", 5)],
                vec![D::Obj(Updated, "foo4", 5)],
            ],
        ),
    ];
    for (name, initial, actions, batch_size, expected) in cases {
        let initial: Vec<_> = initial.into_iter().map(|name| obj(name, 5)).collect();
        let fifo =
            RealFifo::new(RealFifoOptions::new(known(initial.clone())).batch_size(batch_size))
                .unwrap();
        fifo.replace(initial.clone(), "123").unwrap();
        for action in actions {
            action(&fifo);
        }
        let mut batches = Vec::new();
        let mut initial_seen = Vec::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        while !fifo.is_empty() {
            let popped = runtime
                .block_on(fifo.pop_batch(&mut |popped, is_in_initial_list| {
                    if is_in_initial_list.is_initial_list() {
                        initial_seen
                            .extend(popped.deltas().iter().map(|d| d.object().name.clone()));
                    }
                    Processed::Done
                }))
                .unwrap();
            if batches.is_empty() || popped.deltas().len() > 1 {
                assert_eq!(
                    matches!(popped, Popped::Batch(_)),
                    popped.deltas().len() > 1,
                    "{name}: a batch of one is a single pop"
                );
            }
            batches.push(describe_all(popped.deltas()));
        }
        let expected: Vec<_> = expected.iter().map(|batch| expect(batch)).collect();
        assert_eq!(batches, expected, "{name}");
        let initial_names: Vec<_> = initial.iter().map(|o| o.name.clone()).collect();
        assert_eq!(initial_seen, initial_names, "{name}");
    }
}

/// Ported from client-go's TestRealFIFO_ReplaceAtomic.
#[test]
fn atomic_replace_queues_one_item_per_call_in_order() {
    let fifo = atomic();
    fifo.add(obj("foo", 2).into()).unwrap();
    fifo.replace(vec![obj("foo", 2)], "10").unwrap();
    fifo.replace(vec![obj("foo", 2)], "20").unwrap();
    fifo.bookmark("30").unwrap();
    fifo.replace(vec![], "56").unwrap();
    let mut seen = Vec::new();
    while !fifo.is_empty() {
        seen.push(match pop(&fifo) {
            Popped::Deltas(deltas) => describe_all(&deltas).join(","),
            Popped::ReplacedAll(all) => format!(
                "ReplacedAll@{} {:?}",
                all.resource_version,
                all.objects.iter().map(|o| o.val).collect::<Vec<_>>()
            ),
            Popped::Bookmark { resource_version } => format!("Bookmark@{resource_version}"),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        seen,
        [
            "Added foo=2",
            "ReplacedAll@10 [2]",
            "ReplacedAll@20 [2]",
            "Bookmark@30",
            "ReplacedAll@56 []",
        ]
    );
}

/// Ported from client-go's TestRealFIFO_ResyncAtomic.
#[test]
fn atomic_resync_queues_one_sync_all_behind_queued_changes() {
    let fifo = atomic();
    fifo.resync().unwrap();
    assert!(matches!(pop(&fifo), Popped::SyncAll));
    fifo.add(obj("foo", 2).into()).unwrap();
    fifo.resync().unwrap();
    assert_eq!(
        describe_all(pop(&fifo).deltas()),
        expect(&[D::Obj(Added, "foo", 2)])
    );
    assert!(matches!(pop(&fifo), Popped::SyncAll));
    assert!(fifo.is_empty());
}

/// Ported from client-go's TestRealFIFO_ReplaceAtomicPop.
#[tokio::test]
async fn an_atomic_replace_is_popped_whole_after_earlier_changes() {
    let fifo = atomic();
    fifo.add(obj("foo", 10).into()).unwrap();
    fifo.replace(vec![obj("foo", 15)], "20").unwrap();
    assert_eq!(pop_newest(&fifo).val, 10);
    match fifo.pop_batch(&mut |_, _| Processed::Done).await.unwrap() {
        Popped::ReplacedAll(all) => {
            assert_eq!(all.resource_version, "20");
            assert_eq!(all.objects[0].val, 15);
        }
        other => panic!("expected ReplacedAll, got {other:?}"),
    }
    assert!(fifo.is_empty());
}

#[test]
fn an_atomic_item_ends_a_batch_and_is_popped_alone() {
    let fifo = atomic();
    fifo.add(obj("a", 1).into()).unwrap();
    fifo.add(obj("b", 1).into()).unwrap();
    fifo.resync().unwrap();
    fifo.add(obj("c", 1).into()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut shapes = Vec::new();
    while !fifo.is_empty() {
        let popped = runtime
            .block_on(fifo.pop_batch(&mut |_, _| Processed::Done))
            .unwrap();
        shapes.push(match popped {
            Popped::Batch(batch) => format!("batch of {}", batch.len()),
            Popped::Deltas(_) => "single".to_owned(),
            Popped::SyncAll => "sync all".to_owned(),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(shapes, ["batch of 2", "sync all", "single"]);
}

#[test]
fn options_client_go_would_panic_on_are_refused() {
    let refused = [
        RealFifo::<Obj>::new(RealFifoOptions::atomic().unlock_while_processing(true))
            .err()
            .is_none(),
        RealFifo::new(RealFifoOptions::new(known(vec![])).unlock_while_processing(true)).is_err(),
        RealFifo::new(RealFifoOptions::new(known(vec![])).batch_size(0)).is_err(),
    ];
    assert_eq!(refused, [true, true, true]);
}

#[test]
fn a_requeued_item_goes_back_to_the_head() {
    let fifo = empty();
    fifo.add(obj("a", 1).into()).unwrap();
    fifo.add(obj("b", 2).into()).unwrap();
    let outcome = fifo.try_pop(&mut |_, _| Processed::Requeue).unwrap();
    assert!(outcome.is_some());
    assert_eq!(
        drain(&fifo),
        expect(&[D::Obj(Added, "a", 1), D::Obj(Added, "b", 2)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocking_while_processing_lets_producers_in_and_delays_has_synced() {
    let fifo = Arc::new(RealFifo::new(RealFifoOptions::atomic()).unwrap());
    fifo.replace(vec![obj("a", 1)], "1").unwrap();
    let producer_got_in = Arc::new(AtomicBool::new(false));
    let popped = {
        let fifo = Arc::clone(&fifo);
        let producer_got_in = Arc::clone(&producer_got_in);
        fifo.clone()
            .pop(&mut move |popped, is_in_initial_list| {
                assert!(matches!(popped, Popped::ReplacedAll(_)));
                assert!(is_in_initial_list.is_initial_list());
                // The lock is released: a producer can queue, and has_synced waits for us.
                fifo.add(obj("b", 2).into()).unwrap();
                assert!(!fifo.has_synced());
                producer_got_in.store(true, Ordering::SeqCst);
                Processed::Done
            })
            .await
            .unwrap()
    };
    assert!(matches!(popped, Popped::ReplacedAll(_)));
    assert!(producer_got_in.load(Ordering::SeqCst));
    assert!(fifo.has_synced());
    assert_eq!(fifo.len(), 1);
}

#[test]
fn an_object_without_a_name_is_refused_and_the_queue_is_untouched() {
    for fifo in [empty(), atomic()] {
        fifo.add(obj("a", 1).into()).unwrap();
        assert!(fifo.add(obj("", 2).into()).is_err());
        assert!(fifo.replace(vec![obj("b", 1), obj("", 2)], "1").is_err());
        assert_eq!(fifo.len(), 1);
    }
}

#[test]
fn encoded_bytes_travel_with_their_delta_unless_a_transformer_changes_the_object() {
    let fifo = empty();
    fifo.add(arrived(obj("a", 1), "a1")).unwrap();
    fifo.update(arrived(obj("a", 2), "a2")).unwrap();
    fifo.update(obj("b", 1).into()).unwrap();
    fifo.delete(obj("a", 3)).unwrap();
    assert_eq!(
        queued_encoded(&fifo),
        [Some(b"a1".to_vec()), Some(b"a2".to_vec()), None, None]
    );

    let transformer = plus_a_thousand();
    let fifo = RealFifo::new(RealFifoOptions::new(known(vec![])).transformer(transformer)).unwrap();
    fifo.add(arrived(obj("a", 1), "a1")).unwrap();
    fifo.update(arrived(obj("a", 2), "a2")).unwrap();
    assert_eq!(queued_encoded(&fifo), [None, None]);
}
