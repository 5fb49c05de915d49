//! Property tests: random operation sequences run through each queue and through a plain,
//! obviously-correct model; every pop must match, and the invariants (no key lost, per-key
//! order, initial population and has_synced, resync skipping queued keys, deletion collapse)
//! are checked after every step.

use crate::common;

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use common::{Obj, describe_all, obj};
use kinformer_fifo::{
    Delta, DeltaFifo, DeltaFifoOptions, DeltaType, Popped, Processed, Queue, RealFifo,
    RealFifoOptions,
};
use kinformer_store::{Cache, CacheReader, Store};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8, i64),
    Update(u8, i64),
    Delete(u8, i64),
    Replace(Vec<(u8, i64)>),
    /// A replace handed over in parts of this many objects where the queue takes parts; the
    /// model treats it as a whole replace, so the two must be indistinguishable.
    ReplaceInParts(Vec<(u8, i64)>, usize),
    Resync,
    Pop,
    AddNameless,
}

fn key(k: u8) -> String {
    format!("k{k}")
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..6;
    let v = 0i64..1000;
    prop_oneof![
        3 => (k.clone(), v.clone()).prop_map(|(k, v)| Op::Add(k, v)),
        2 => (k.clone(), v.clone()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => (k.clone(), v.clone()).prop_map(|(k, v)| Op::Delete(k, v)),
        1 => prop::collection::vec((k.clone(), v.clone()), 0..5).prop_map(Op::Replace),
        1 => (prop::collection::vec((k, v), 0..5), 1usize..3)
            .prop_map(|(list, size)| Op::ReplaceInParts(list, size)),
        1 => Just(Op::Resync),
        4 => Just(Op::Pop),
        1 => Just(Op::AddNameless),
    ]
}

/// One modelled delta: kind, tombstone key (if a tombstone), object name and value.
type MDelta = (DeltaType, Option<String>, String, i64);

fn describe_model(deltas: &[MDelta]) -> Vec<String> {
    deltas
        .iter()
        .map(|(kind, tomb, name, val)| match tomb {
            None => format!("{kind:?} {name}={val}"),
            Some(key) => format!("{kind:?} tombstone[{key}] {name}={val}"),
        })
        .collect()
}

/// What the consumer does with a pop: apply it to its cache, which is also the queue's known
/// objects, as an informer does.
fn apply(cache: &Cache<Obj>, deltas: &[Delta<Obj>]) {
    for delta in deltas {
        let object = Arc::clone(delta.object());
        match delta.kind {
            DeltaType::Deleted => cache.delete(object).unwrap(),
            _ => cache.update(object.into()).unwrap(),
        }
    }
}

#[derive(Default)]
struct DeltaModel {
    queue: Vec<(String, Vec<MDelta>)>,
    populated: bool,
    initial: usize,
    emit_replaced: bool,
}

impl DeltaModel {
    fn queued(&self, key: &str) -> Option<&Vec<MDelta>> {
        self.queue.iter().find(|(k, _)| k == key).map(|(_, d)| d)
    }

    fn push(&mut self, key: &str, delta: MDelta) {
        match self.queue.iter_mut().find(|(k, _)| k == key) {
            Some((_, deltas)) => {
                deltas.push(delta);
                let n = deltas.len();
                if deltas[n - 1].0 == DeltaType::Deleted && deltas[n - 2].0 == DeltaType::Deleted {
                    let newer = deltas.pop().unwrap();
                    if deltas[n - 2].1.is_some() {
                        deltas[n - 2] = newer;
                    }
                }
            }
            None => self.queue.push((key.to_owned(), vec![delta])),
        }
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial == 0
    }

    fn step(&mut self, op: &Op, known: &Cache<Obj>) -> Option<(Vec<String>, bool)> {
        match op {
            Op::Add(k, v) | Op::Update(k, v) => {
                let kind = if matches!(op, Op::Add(..)) {
                    DeltaType::Added
                } else {
                    DeltaType::Updated
                };
                self.populated = true;
                self.push(&key(*k), (kind, None, key(*k), *v));
            }
            Op::Delete(k, v) => {
                self.populated = true;
                let key = key(*k);
                if self.queued(&key).is_some() || known.get_by_key(&key).is_some() {
                    self.push(&key, (DeltaType::Deleted, None, key.clone(), *v));
                }
            }
            Op::Replace(list) | Op::ReplaceInParts(list, _) => {
                let kind = if self.emit_replaced {
                    DeltaType::Replaced
                } else {
                    DeltaType::Sync
                };
                let listed: HashSet<String> = list.iter().map(|(k, _)| key(*k)).collect();
                for (k, v) in list {
                    self.push(&key(*k), (kind, None, key(*k), *v));
                }
                let mut deletions = 0;
                let vanished: Vec<(String, String, i64)> = self
                    .queue
                    .iter()
                    .filter(|(k, _)| !listed.contains(k))
                    .map(|(k, d)| {
                        let (_, _, name, val) = d.last().unwrap();
                        (k.clone(), name.clone(), *val)
                    })
                    .collect();
                for (k, name, val) in vanished {
                    deletions += 1;
                    self.push(&k, (DeltaType::Deleted, Some(k.clone()), name, val));
                }
                for k in CacheReader::list_keys(known) {
                    if listed.contains(&k) || self.queued(&k).is_some() {
                        continue;
                    }
                    let o = known.get_by_key(&k).unwrap();
                    deletions += 1;
                    self.push(
                        &k,
                        (DeltaType::Deleted, Some(k.clone()), o.name.clone(), o.val),
                    );
                }
                if !self.populated {
                    self.populated = true;
                    self.initial = listed.len() + deletions;
                }
            }
            Op::Resync => {
                for k in CacheReader::list_keys(known) {
                    if self.queued(&k).is_none() {
                        let o = known.get_by_key(&k).unwrap();
                        self.push(&k, (DeltaType::Sync, None, o.name.clone(), o.val));
                    }
                }
            }
            Op::Pop => {
                if self.queue.is_empty() {
                    return None;
                }
                let initial = !self.has_synced();
                self.initial = self.initial.saturating_sub(1);
                let (_, deltas) = self.queue.remove(0);
                return Some((describe_model(&deltas), initial));
            }
            Op::AddNameless => {}
        }
        None
    }
}

#[derive(Default)]
struct RealModel {
    items: Vec<(String, MDelta)>,
    populated: bool,
    initial: usize,
}

impl RealModel {
    fn step(&mut self, op: &Op, known: &Cache<Obj>) -> Option<(Vec<String>, bool)> {
        match op {
            Op::Add(k, v) | Op::Update(k, v) | Op::Delete(k, v) => {
                let kind = match op {
                    Op::Add(..) => DeltaType::Added,
                    Op::Update(..) => DeltaType::Updated,
                    _ => DeltaType::Deleted,
                };
                self.populated = true;
                self.items.push((key(*k), (kind, None, key(*k), *v)));
            }
            Op::Replace(list) | Op::ReplaceInParts(list, _) => {
                let listed: HashSet<String> = list.iter().map(|(k, _)| key(*k)).collect();
                let mut order: Vec<String> = Vec::new();
                for (k, _) in &self.items {
                    if !order.contains(k) {
                        order.push(k.clone());
                    }
                }
                let mut additions = Vec::new();
                for k in &order {
                    let last = self.items.iter().rev().find(|(key, _)| key == k).unwrap();
                    if listed.contains(k) || last.1.0 == DeltaType::Deleted {
                        continue;
                    }
                    let (_, _, name, val) = &last.1;
                    additions.push((
                        k.clone(),
                        (DeltaType::Deleted, Some(k.clone()), name.clone(), *val),
                    ));
                }
                for k in CacheReader::list_keys(known) {
                    if listed.contains(&k) || order.contains(&k) {
                        continue;
                    }
                    let o = known.get_by_key(&k).unwrap();
                    additions.push((
                        k.clone(),
                        (DeltaType::Deleted, Some(k), o.name.clone(), o.val),
                    ));
                }
                for (k, v) in list {
                    additions.push((key(*k), (DeltaType::Replaced, None, key(*k), *v)));
                }
                self.items.extend(additions);
                if !self.populated {
                    self.populated = true;
                    self.initial = self.items.len();
                }
            }
            Op::Resync => {
                let queued: HashSet<String> = self.items.iter().map(|(k, _)| k.clone()).collect();
                for k in CacheReader::list_keys(known) {
                    if !queued.contains(&k) {
                        let o = known.get_by_key(&k).unwrap();
                        self.items
                            .push((k, (DeltaType::Sync, None, o.name.clone(), o.val)));
                    }
                }
            }
            Op::Pop => {
                if self.items.is_empty() {
                    return None;
                }
                let initial = !(self.populated && self.initial == 0);
                self.initial = self.initial.saturating_sub(1);
                let (_, delta) = self.items.remove(0);
                return Some((describe_model(&[delta]), initial));
            }
            Op::AddNameless => {}
        }
        None
    }
}

fn run(queue: &dyn Queue<Obj>, op: &Op) -> Option<(Vec<String>, bool)> {
    match op {
        Op::Add(k, v) => queue.add(obj(&key(*k), *v).into()).unwrap(),
        Op::Update(k, v) => queue.update(obj(&key(*k), *v).into()).unwrap(),
        Op::Delete(k, v) => queue.delete(obj(&key(*k), *v)).unwrap(),
        Op::Replace(list) => queue
            .replace(list.iter().map(|(k, v)| obj(&key(*k), *v)).collect(), "1")
            .unwrap(),
        Op::ReplaceInParts(list, size) => match queue.replace_in_parts() {
            Some(mut parts) => {
                for part in list.chunks(*size) {
                    let part = part.iter().map(|(k, v)| obj(&key(*k), *v).into()).collect();
                    parts.part(part).unwrap();
                }
                parts.finish("1").unwrap();
            }
            None => queue
                .replace(list.iter().map(|(k, v)| obj(&key(*k), *v)).collect(), "1")
                .unwrap(),
        },
        Op::Resync => queue.resync().unwrap(),
        Op::AddNameless => {
            let before = queue.list_keys();
            assert!(queue.add(obj("", 1).into()).is_err());
            assert_eq!(queue.list_keys(), before, "a refused add changed the queue");
        }
        Op::Pop => {
            let mut initial = None;
            let popped: Option<Popped<Obj>> = queue
                .try_pop(&mut |_, is_in_initial_list| {
                    initial = Some(is_in_initial_list.is_initial_list());
                    Processed::Done
                })
                .unwrap();
            return popped.map(|popped| (describe_all(popped.deltas()), initial.unwrap()));
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn delta_fifo_pops_exactly_what_the_model_pops(
        ops in prop::collection::vec(op(), 1..60),
        with_known in any::<bool>(),
        emit_replaced in any::<bool>(),
    ) {
        let cache = Arc::new(Cache::<Obj>::default());
        let mut options = DeltaFifoOptions::new().emit_delta_type_replaced(emit_replaced);
        if with_known {
            options = options.known_objects(cache.clone());
        }
        let fifo = DeltaFifo::new(options);
        let empty = Cache::<Obj>::default();
        let known = if with_known { &*cache } else { &empty };
        let mut model = DeltaModel { emit_replaced, ..DeltaModel::default() };
        for op in &ops {
            let expected = model.step(op, known);
            let actual = run(&fifo, op);
            prop_assert_eq!(&actual, &expected, "after {:?}", op);
            prop_assert_eq!(fifo.has_synced(), model.has_synced(), "has_synced after {:?}", op);
            let keys: Vec<String> = model.queue.iter().map(|(k, _)| k.clone()).collect();
            prop_assert_eq!(fifo.list_keys(), keys, "queued keys after {:?}", op);
            for (k, deltas) in &model.queue {
                let queued = fifo.get_by_key(k).unwrap();
                prop_assert_eq!(describe_all(&queued), describe_model(deltas));
                for pair in queued.windows(2) {
                    prop_assert!(
                        !(pair[0].kind == DeltaType::Deleted && pair[1].kind == DeltaType::Deleted),
                        "two consecutive deletions on {}", k
                    );
                }
            }
        }
    }

    #[test]
    fn real_fifo_pops_exactly_what_the_model_pops(ops in prop::collection::vec(op(), 1..60)) {
        let cache = Arc::new(Cache::<Obj>::default());
        let fifo = RealFifo::new(RealFifoOptions::new(cache.clone())).unwrap();
        let mut model = RealModel::default();
        for op in &ops {
            let expected = model.step(op, &cache);
            let actual = run(&fifo, op);
            prop_assert_eq!(&actual, &expected, "after {:?}", op);
            prop_assert_eq!(
                fifo.has_synced(),
                model.populated && model.initial == 0,
                "has_synced after {:?}", op
            );
            prop_assert_eq!(fifo.len(), model.items.len());
        }
    }

    #[test]
    fn consumers_applying_pops_to_known_objects_match_the_model(
        ops in prop::collection::vec(op(), 1..60),
        real in any::<bool>(),
    ) {
        let cache = Arc::new(Cache::<Obj>::default());
        let queue: Box<dyn Queue<Obj>> = if real {
            Box::new(RealFifo::new(RealFifoOptions::new(cache.clone())).unwrap())
        } else {
            Box::new(DeltaFifo::new(
                DeltaFifoOptions::new().known_objects(cache.clone()).emit_delta_type_replaced(true),
            ))
        };
        let mut delta_model = DeltaModel { emit_replaced: true, ..DeltaModel::default() };
        let mut real_model = RealModel::default();
        // What the API server holds after each write, as the reflector reported it.
        let mut truth: BTreeMap<String, i64> = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Add(k, v) | Op::Update(k, v) => {
                    truth.insert(key(*k), *v);
                }
                Op::Delete(k, _) => {
                    truth.remove(&key(*k));
                }
                Op::Replace(list) | Op::ReplaceInParts(list, _) => {
                    truth = list.iter().map(|(k, v)| (key(*k), *v)).collect();
                }
                Op::Resync | Op::Pop | Op::AddNameless => {}
            }
            let expected = if real {
                real_model.step(op, &cache)
            } else {
                delta_model.step(op, &cache)
            };
            let actual = match op {
                Op::Pop => {
                    let mut initial = None;
                    queue
                        .try_pop(&mut |popped, is_in_initial_list| {
                            initial = Some(is_in_initial_list.is_initial_list());
                            apply(&cache, popped.deltas());
                            Processed::Done
                        })
                        .unwrap()
                        .map(|popped| (describe_all(popped.deltas()), initial.unwrap()))
                }
                _ => run(&*queue, op),
            };
            prop_assert_eq!(&actual, &expected, "after {:?}", op);
        }
        // Draining leaves the cache holding exactly the newest state of every live key.
        while queue
            .try_pop(&mut |popped, _| {
                apply(&cache, popped.deltas());
                Processed::Done
            })
            .unwrap()
            .is_some()
        {}
        let cached: BTreeMap<String, i64> = CacheReader::list(&*cache)
            .iter()
            .map(|o| (o.name.clone(), o.val))
            .collect();
        prop_assert_eq!(cached, truth);
        let wrote = ops.iter().any(|op| matches!(op, Op::Add(..) | Op::Update(..) | Op::Delete(..) | Op::Replace(_) | Op::ReplaceInParts(..)));
        prop_assert_eq!(queue.has_synced(), wrote, "drained queue reports synced once populated");
    }
}
