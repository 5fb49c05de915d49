//! Lists taken in parts (`Store::replace_in_parts`): what each queue hands its consumer as the
//! parts arrive, when it reports synced, and what the end of the list deletes. The model tests
//! also run every queue's parts against a whole replace.

use crate::common;

use std::sync::Arc;

use common::{D, Obj, arrived, expect, is_waiting, known, obj, pop, pop_described, queued_encoded};
use kinformer_fifo::{
    DeltaFifo, DeltaFifoOptions, DeltaType::*, Popped, Processed, Queue, RealFifo, RealFifoOptions,
};
use kinformer_store::Store;

fn atomic() -> RealFifo<Obj> {
    RealFifo::new(RealFifoOptions::atomic().unlock_while_processing(false)).unwrap()
}

fn empty() -> RealFifo<Obj> {
    RealFifo::new(RealFifoOptions::new(known(vec![]))).unwrap()
}

/// A list in parts: objects popped into the known objects before the list ends are not
/// tombstoned by its end, known keys it never named are, and the queue syncs only once the
/// end's tombstones are popped too.
#[test]
fn a_list_in_parts_tombstones_only_what_it_never_named() {
    let cache = Arc::new(kinformer_store::Cache::<Obj>::default());
    cache.add(obj("old", 1).into()).unwrap();
    let fifo = DeltaFifo::new(DeltaFifoOptions::new().known_objects(cache.clone()));
    let mut parts = fifo.replace_in_parts().expect("a DeltaFIFO takes parts");
    parts.part(vec![obj("a", 2).into()]).unwrap();
    assert!(!fifo.has_synced());
    let popped = pop(&fifo);
    cache
        .add(Arc::clone(popped.deltas()[0].object()).into())
        .unwrap();
    parts.part(vec![obj("b", 3).into()]).unwrap();
    parts.finish("5").unwrap();
    assert!(!fifo.has_synced());
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Sync, "b", 3)]));
    assert!(!fifo.has_synced());
    assert_eq!(
        pop_described(&fifo),
        expect(&[D::Tomb(Deleted, "old", "old", 1)])
    );
    assert!(fifo.has_synced());
    assert!(fifo.is_empty());
}

/// With atomic events, the initial list goes in parts: each object pops as a `Replaced` delta
/// of the initial list as soon as its part is in, with the bytes it arrived in, the end pops
/// as one `ListEnd` naming every listed key, and only then has the queue synced. A relist after
/// that is one atomic item again.
#[test]
fn an_atomic_fifo_takes_the_initial_list_in_parts() {
    let fifo = atomic();
    let mut parts = fifo
        .replace_in_parts()
        .expect("the initial list goes in parts");
    parts
        .part(vec![arrived(obj("a", 1), "a1"), obj("b", 2).into()])
        .unwrap();
    assert!(!fifo.has_synced());
    assert_eq!(queued_encoded(&fifo), [Some(b"a1".to_vec()), None]);
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Replaced, "a", 1)]));
    parts.part(vec![obj("c", 3).into()]).unwrap();
    parts.finish("7").unwrap();
    assert!(
        !fifo.has_synced(),
        "two objects and the end are still queued"
    );
    let mut initial = Vec::new();
    for _ in 0..2 {
        fifo.try_pop(&mut |_, kind| {
            initial.push(kind.is_initial_list());
            Processed::Done
        })
        .unwrap();
    }
    assert_eq!(initial, [true, true]);
    match pop(&fifo) {
        Popped::ListEnd(end) => {
            assert_eq!(end.resource_version, "7");
            let mut listed: Vec<&str> = end.listed.iter().map(String::as_str).collect();
            listed.sort_unstable();
            assert_eq!(listed, ["a", "b", "c"]);
        }
        other => panic!("expected ListEnd, got {other:?}"),
    }
    assert!(fifo.has_synced());
    assert!(
        fifo.replace_in_parts().is_none(),
        "a relist is one atomic item"
    );
}

/// An abandoned list (its parts dropped unfinished) leaves what it queued and does not sync
/// the queue; the list that follows names only its own keys, so the consumer drops the rest.
#[test]
fn an_abandoned_list_in_parts_leaves_its_objects_and_the_next_one_ends_it() {
    let fifo = atomic();
    let mut parts = fifo.replace_in_parts().unwrap();
    parts.part(vec![obj("gone", 1).into()]).unwrap();
    drop(parts);
    assert!(!fifo.has_synced());
    let mut parts = fifo.replace_in_parts().expect("still the initial list");
    parts.part(vec![obj("kept", 2).into()]).unwrap();
    parts.finish("9").unwrap();
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Replaced, "gone", 1)]));
    assert_eq!(pop_described(&fifo), expect(&[D::Obj(Replaced, "kept", 2)]));
    match pop(&fifo) {
        Popped::ListEnd(end) => assert_eq!(*end.listed, ["kept".to_owned()].into()),
        other => panic!("expected ListEnd, got {other:?}"),
    }
    assert!(fifo.has_synced());
}

/// Without atomic events a RealFIFO reconciles a list against its known objects in one step,
/// so it takes lists only whole.
#[test]
fn a_real_fifo_without_atomic_events_takes_lists_whole() {
    assert!(empty().replace_in_parts().is_none());
}

/// Waits on a bounded list's readiness for the next part: it is pending while the queue holds
/// more than the bound, ready once pops bring it down, and ready on a closed queue.
async fn a_bounded_list_waits_for_its_consumer(fifo: &dyn Queue<Obj>) {
    let mut parts = fifo.replace_in_parts().expect("the list goes in parts");
    parts
        .part(vec![
            obj("a", 1).into(),
            obj("b", 2).into(),
            obj("c", 3).into(),
        ])
        .unwrap();
    {
        let mut ready = parts.ready();
        assert!(is_waiting(&mut ready).await, "three queued, a bound of one");
        pop(fifo);
        assert!(is_waiting(&mut ready).await, "two queued");
        pop(fifo);
        ready.await;
    }
    parts.part(vec![obj("d", 4).into()]).unwrap();
    let mut ready = parts.ready();
    assert!(is_waiting(&mut ready).await, "two queued again");
    fifo.close();
    ready.await;
}

#[tokio::test]
async fn a_bounded_list_waits_for_the_consumer_before_its_next_part() {
    let atomic = RealFifo::new(RealFifoOptions::atomic().list_backlog(1)).unwrap();
    a_bounded_list_waits_for_its_consumer(&atomic).await;
    let delta = DeltaFifo::new(DeltaFifoOptions::new().list_backlog(1));
    a_bounded_list_waits_for_its_consumer(&delta).await;
}

/// Without a bound, a list never waits: a consumer that pops only after the list is safe.
#[tokio::test]
async fn an_unbounded_list_never_waits() {
    let fifo = atomic();
    let mut parts = fifo.replace_in_parts().unwrap();
    let many = (0..100).map(|i| obj(&format!("o{i}"), i).into()).collect();
    parts.part(many).unwrap();
    let mut ready = parts.ready();
    assert!(!is_waiting(&mut ready).await);
}

/// Lists `objects` whole as the initial list, so what follows is a relist.
fn synced_with(fifo: &RealFifo<Obj>, objects: Vec<Arc<Obj>>) {
    let mut parts = fifo
        .replace_in_parts()
        .expect("the initial list goes in parts");
    parts
        .part(objects.into_iter().map(Into::into).collect())
        .unwrap();
    parts.finish("1").unwrap();
    while !fifo.is_empty() {
        pop(fifo);
    }
    assert!(fifo.has_synced());
}

fn relisting() -> RealFifo<Obj> {
    RealFifo::new(
        RealFifoOptions::atomic()
            .unlock_while_processing(false)
            .relist_in_parts(true),
    )
    .unwrap()
}

/// Taking relists in parts, each part pops as one `RelistPart` with the bytes its objects
/// arrived in, and the end as a `RelistEnd` with the list's version; each relist has a new
/// number. A relist dropped unfinished ends with no version: the consumer drops its parts.
#[test]
fn a_relist_in_parts_pops_its_parts_then_its_end() {
    let fifo = relisting();
    synced_with(&fifo, vec![obj("a", 1)]);

    let mut parts = fifo.replace_in_parts().expect("a relist goes in parts");
    parts
        .part(vec![arrived(obj("a", 2), "a2"), obj("b", 3).into()])
        .unwrap();
    parts.part(vec![]).unwrap();
    parts.part(vec![obj("c", 4).into()]).unwrap();
    parts.finish("9").unwrap();
    let first = match pop(&fifo) {
        Popped::RelistPart(part) => {
            let objects: Vec<(&str, Option<&[u8]>)> = part
                .objects
                .iter()
                .map(|obj| {
                    (
                        obj.object().name.as_str(),
                        obj.encoded().map(|encoded| &**encoded.bytes()),
                    )
                })
                .collect();
            assert_eq!(objects, [("a", Some(&b"a2"[..])), ("b", None)]);
            part.relist
        }
        other => panic!("expected a RelistPart, got {other:?}"),
    };
    match pop(&fifo) {
        Popped::RelistPart(part) => {
            assert_eq!(part.relist, first);
            assert_eq!(part.objects.len(), 1, "an empty part queues nothing");
        }
        other => panic!("expected a RelistPart, got {other:?}"),
    }
    match pop(&fifo) {
        Popped::RelistEnd(end) => {
            assert_eq!(end.relist, first);
            assert_eq!(end.resource_version.as_deref(), Some("9"));
        }
        other => panic!("expected a RelistEnd, got {other:?}"),
    }
    assert!(fifo.is_empty());

    let mut parts = fifo.replace_in_parts().expect("another relist");
    parts.part(vec![obj("d", 5).into()]).unwrap();
    drop(parts);
    let second = match pop(&fifo) {
        Popped::RelistPart(part) => part.relist,
        other => panic!("expected a RelistPart, got {other:?}"),
    };
    assert_ne!(second, first, "each relist has its own number");
    match pop(&fifo) {
        Popped::RelistEnd(end) => {
            assert_eq!(end.relist, second);
            assert_eq!(end.resource_version, None, "abandoned");
        }
        other => panic!("expected a RelistEnd, got {other:?}"),
    }
    assert!(fifo.has_synced(), "a relist never unsyncs the queue");
}

/// The list backlog bounds the objects a relist's queued parts hold, not the parts: one part
/// of three objects is over a bound of one.
#[tokio::test]
async fn a_relist_in_parts_waits_for_its_consumer() {
    let fifo = RealFifo::new(
        RealFifoOptions::atomic()
            .list_backlog(1)
            .relist_in_parts(true),
    )
    .unwrap();
    synced_with(&fifo, vec![]);
    let mut parts = fifo.replace_in_parts().expect("a relist goes in parts");
    parts
        .part(vec![
            obj("a", 1).into(),
            obj("b", 2).into(),
            obj("c", 3).into(),
        ])
        .unwrap();
    {
        let mut ready = parts.ready();
        assert!(is_waiting(&mut ready).await, "three objects queued");
        pop(&fifo);
        ready.await;
    }
    parts.finish("4").unwrap();
    assert!(matches!(pop(&fifo), Popped::RelistEnd(_)));
}
