//! The ring, its bounds and coalescing, against simple models.

use std::sync::Arc;

use super::*;

fn add(n: u32) -> Notification<u32> {
    Notification::add(Arc::new(n))
}

fn value(notification: &Notification<u32>) -> u32 {
    **notification.object()
}

#[test]
fn unbounded_ring_keeps_order_while_growing() {
    let mut ring = RingBuffer::new(BufferPolicy::Unbounded, None, None);
    for n in 0..5000 {
        assert!(matches!(ring.push(add(n), Instant::now()), Pushed::Queued));
    }
    assert_eq!(ring.len(), 5000);
    let drained: Vec<u32> = std::iter::from_fn(|| ring.pop())
        .map(|(n, _)| value(&n))
        .collect();
    assert_eq!(drained, (0..5000).collect::<Vec<_>>());
}

#[test]
fn ring_gives_memory_back_once_a_backlog_drains() {
    let mut ring = RingBuffer::new(BufferPolicy::Unbounded, None, None);
    for n in 0..100_000 {
        ring.push(add(n), Instant::now());
    }
    assert!(ring.capacity() >= 100_000);
    while ring.pop().is_some() {}
    assert!(
        ring.capacity() <= NORMAL_CAPACITY * 2,
        "capacity stayed at {}",
        ring.capacity()
    );
}

#[test]
fn bounded_drop_newest_refuses_what_does_not_fit() {
    let mut ring = RingBuffer::new(BufferPolicy::bounded(3, Overflow::DropNewest), None, None);
    for n in 0..3 {
        assert!(matches!(ring.push(add(n), Instant::now()), Pushed::Queued));
    }
    match ring.push(add(3), Instant::now()) {
        Pushed::Dropped(dropped) => assert_eq!(value(&dropped), 3),
        other => panic!("a full buffer took a fourth notification: {other:?}"),
    }
    let kept: Vec<u32> = std::iter::from_fn(|| ring.pop())
        .map(|(n, _)| value(&n))
        .collect();
    assert_eq!(kept, [0, 1, 2]);
}

#[test]
fn bounded_drop_oldest_keeps_the_newest() {
    let mut ring = RingBuffer::new(BufferPolicy::bounded(3, Overflow::DropOldest), None, None);
    let mut dropped = Vec::new();
    for n in 0..5 {
        if let Pushed::Dropped(old) = ring.push(add(n), Instant::now()) {
            dropped.push(value(&old));
        }
    }
    assert_eq!(dropped, [0, 1]);
    let kept: Vec<u32> = std::iter::from_fn(|| ring.pop())
        .map(|(n, _)| value(&n))
        .collect();
    assert_eq!(kept, [2, 3, 4]);
}

#[test]
fn a_zero_bound_is_raised_to_one() {
    assert_eq!(
        BufferPolicy::bounded(0, Overflow::DropNewest),
        BufferPolicy::Bounded {
            capacity: NonZeroUsize::MIN,
            overflow: Overflow::DropNewest
        }
    );
}

/// An object of the coalescing tests: its key and a version.
type Obj = (String, u32);

fn coalescing() -> RingBuffer<Obj> {
    let key_func: KeyFunc<Obj> = Arc::new(|obj: &Obj| Ok(obj.0.clone()));
    RingBuffer::new(BufferPolicy::CoalesceByKey, Some(key_func), None)
}

fn obj(key: &str, version: u32) -> Arc<Obj> {
    Arc::new((key.to_owned(), version))
}

/// What the ring holds, as `verb key version` strings, oldest first.
fn drain(ring: &mut RingBuffer<Obj>) -> Vec<String> {
    std::iter::from_fn(|| ring.pop())
        .map(|(notification, _)| {
            let verb = match &notification {
                Notification::Add {
                    kind: AddKind::InitialList,
                    ..
                } => "initial-add",
                Notification::Add { .. } => "add",
                Notification::Update { .. } => "update",
                Notification::Delete(_) => "delete",
            };
            let (key, version) = &**notification.object();
            format!("{verb} {key} {version}")
        })
        .collect()
}

#[test]
fn coalescing_keeps_the_newest_state_per_key_in_first_arrival_order() {
    let mut ring = coalescing();
    let now = Instant::now();
    let (a1, a2, a3, b1) = (obj("a", 1), obj("a", 2), obj("a", 3), obj("b", 1));
    assert!(matches!(
        ring.push(Notification::add(Arc::clone(&a1)), now),
        Pushed::Queued
    ));
    assert!(matches!(
        ring.push(Notification::add(b1), now),
        Pushed::Queued
    ));
    let merged = ring.push(Notification::update(Arc::clone(&a1), Arc::clone(&a2)), now);
    assert!(matches!(
        merged,
        Pushed::Coalesced {
            vanished: 1,
            cancelled_initial: false
        }
    ));
    ring.push(Notification::update(a2, a3), now);
    assert_eq!(ring.len(), 2);
    assert_eq!(drain(&mut ring), ["add a 3", "add b 1"]);
}

#[test]
fn coalesced_updates_start_from_the_state_the_handler_last_saw() {
    let mut ring = coalescing();
    let now = Instant::now();
    let (a1, a2, a3) = (obj("a", 1), obj("a", 2), obj("a", 3));
    ring.push(Notification::update(Arc::clone(&a1), Arc::clone(&a2)), now);
    ring.push(Notification::update(a2, Arc::clone(&a3)), now);
    match ring.pop() {
        Some((Notification::Update { old, new }, _)) => {
            assert!(Arc::ptr_eq(&old.get().expect("never encoded"), &a1));
            assert!(Arc::ptr_eq(&new, &a3));
        }
        other => panic!("expected one update, got {other:?}"),
    }
    assert!(ring.pop().is_none());
}

#[test]
fn an_add_and_its_delete_cancel_and_say_whether_the_add_was_initial() {
    let mut ring = coalescing();
    let now = Instant::now();
    ring.push(Notification::initial_add(obj("a", 1)), now);
    ring.push(Notification::add(obj("b", 1)), now);
    let cancelled = ring.push(Notification::delete(obj("a", 1)), now);
    assert!(matches!(
        cancelled,
        Pushed::Coalesced {
            vanished: 2,
            cancelled_initial: true
        }
    ));
    assert_eq!(ring.len(), 1);
    assert_eq!(drain(&mut ring), ["add b 1"]);
}

#[test]
fn a_delete_is_never_merged_with_a_re_create() {
    let mut ring = coalescing();
    let now = Instant::now();
    ring.push(Notification::update(obj("a", 1), obj("a", 2)), now);
    ring.push(Notification::delete(obj("a", 2)), now);
    ring.push(Notification::add(obj("a", 3)), now);
    ring.push(Notification::update(obj("a", 3), obj("a", 4)), now);
    assert_eq!(drain(&mut ring), ["delete a 2", "add a 4"]);
}

#[test]
fn a_key_popped_is_forgotten_so_later_changes_queue_anew() {
    let mut ring = coalescing();
    let now = Instant::now();
    ring.push(Notification::add(obj("a", 1)), now);
    assert_eq!(drain(&mut ring), ["add a 1"]);
    ring.push(Notification::update(obj("a", 1), obj("a", 2)), now);
    assert_eq!(drain(&mut ring), ["update a 2"]);
}

#[test]
fn the_oldest_pending_time_survives_merges_and_skips_cancelled_holes() {
    let mut ring = coalescing();
    let start = Instant::now();
    let later = start + std::time::Duration::from_secs(5);
    ring.push(Notification::add(obj("a", 1)), start);
    ring.push(Notification::add(obj("b", 1)), later);
    ring.push(Notification::update(obj("a", 1), obj("a", 2)), later);
    assert_eq!(ring.oldest_queued_at(), Some(start));
    ring.push(Notification::delete(obj("a", 2)), later);
    assert_eq!(ring.oldest_queued_at(), Some(later));
    assert_eq!(drain(&mut ring), ["add b 1"]);
    assert_eq!(ring.oldest_queued_at(), None);
}

/// One step of the property test: a change at the source, or the consumer taking some.
#[derive(Debug, Clone)]
enum Step {
    /// Create or update the object under this key.
    Write(u8),
    /// Delete it, if it exists.
    Delete(u8),
    /// Re-deliver it unchanged, as a resync does.
    Resync(u8),
    /// The consumer takes up to this many notifications.
    Take(u8),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..5).prop_map(Step::Write),
        2 => (0u8..5).prop_map(Step::Delete),
        1 => (0u8..5).prop_map(Step::Resync),
        3 => (0u8..8).prop_map(Step::Take),
    ]
}

/// Applies one delivered notification to the handler's view, checking it is right for
/// that view: an add of an object the handler does not have, an update from exactly the
/// state it last saw, a delete of an object it has.
fn apply(view: &mut HashMap<String, Arc<Obj>>, notification: Notification<Obj>) {
    match notification {
        Notification::Add { obj, .. } => {
            let previous = view.insert(obj.0.clone(), obj);
            assert!(previous.is_none(), "an add of an object the handler has");
        }
        Notification::Update { old, new } => {
            let old = old.get().expect("never encoded");
            let seen = view
                .get(&old.0)
                .expect("an update of an object the handler lacks");
            assert!(
                Arc::ptr_eq(seen, &old),
                "an update from a state the handler never saw"
            );
            view.insert(new.0.clone(), new);
        }
        Notification::Delete(last) => {
            let removed = view.remove(&last.object().0);
            assert!(removed.is_some(), "a delete of an object the handler lacks");
        }
    }
}

proptest::proptest! {
    /// For any changes and any consumer pace, a coalescing buffer delivers only
    /// notifications that are right for what the handler has seen, at most one per change,
    /// and the handler's view ends equal to the source's.
    #[test]
    fn coalescing_never_delivers_a_wrong_notification(
        steps in proptest::collection::vec(step(), 0..200),
    ) {
        let mut ring = coalescing();
        let now = Instant::now();
        let mut source: HashMap<String, Arc<Obj>> = HashMap::new();
        let mut view = HashMap::new();
        let (mut version, mut events, mut delivered, mut vanished) = (0, 0u64, 0u64, 0u64);
        let mut push = |ring: &mut RingBuffer<Obj>, notification, events: &mut u64| {
            *events += 1;
            if let Pushed::Coalesced { vanished: n, .. } = ring.push(notification, now) {
                vanished += n;
            }
        };
        for step in steps {
            match step {
                Step::Write(key) => {
                    version += 1;
                    let new = obj(&key.to_string(), version);
                    let notification = match source.insert(new.0.clone(), Arc::clone(&new)) {
                        Some(old) => Notification::update(old, new),
                        None => Notification::add(new),
                    };
                    push(&mut ring, notification, &mut events);
                }
                Step::Delete(key) => {
                    if let Some(old) = source.remove(&key.to_string()) {
                        push(&mut ring, Notification::delete(old), &mut events);
                    }
                }
                Step::Resync(key) => {
                    if let Some(current) = source.get(&key.to_string()) {
                        let update = Notification::update(Arc::clone(current), Arc::clone(current));
                        push(&mut ring, update, &mut events);
                    }
                }
                Step::Take(count) => {
                    for (notification, _) in std::iter::from_fn(|| ring.pop()).take(count.into()) {
                        delivered += 1;
                        apply(&mut view, notification);
                    }
                }
            }
        }
        while let Some((notification, _)) = ring.pop() {
            delivered += 1;
            apply(&mut view, notification);
        }
        proptest::prop_assert!(delivered <= events);
        proptest::prop_assert_eq!(delivered + vanished, events);
        proptest::prop_assert_eq!(view.len(), source.len());
        for (key, state) in &source {
            proptest::prop_assert!(Arc::ptr_eq(&view[key], state), "key {} ends stale", key);
        }
    }
}
