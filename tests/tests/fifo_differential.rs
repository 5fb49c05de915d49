//! Differential tests of kinformer-fifo against client-go v0.37.2.
//!
//! Random operation scripts run through client-go's `DeltaFIFO` and `RealFIFO` (the `fifo-peer`
//! Go program in `xtask/peers/client-go`, kept running for the whole test binary) and through
//! kinformer-fifo's `DeltaFifo` and `RealFifo`; every observable result must be identical: each
//! pop's deltas (type, key, resourceVersion, labels, tombstone or not), `is_in_initial_list`,
//! `has_synced` after every step, and the queued and known keys. A failure prints the first
//! diverging step of the shrunk script, as JSON lines that can be piped into the peer.
//!
//! These tests fail, never skip, when Go is missing or the peer does not build.
//!
//! Both sides run the same harness conventions (see the peer's README):
//! - the queue is closed right after it is built, so popping an empty queue reports "empty"
//!   instead of blocking (closing gates no write, in client-go and here);
//! - the consumer applies every popped delta to the known-objects cache, as an informer does;
//! - the known objects list their keys sorted. Both queues queue replace tombstones and resync
//!   deltas in the known store's key order, which is a hash order on both sides.

use std::{
    collections::BTreeSet,
    path::Path,
    sync::{Arc, Mutex, MutexGuard, OnceLock},
};

use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_fifo::{
    AddKind, Delta, DeltaFifo, DeltaFifoOptions, DeltaType, Error as FifoError, KnownObjects,
    Popped, Processed, Queue, RealFifo, RealFifoOptions,
};
use kinformer_store::{Cache, CacheReader, ObjectOrTombstone, Store};
use kinformer_tests::{
    GoPeer,
    fifo_script::{
        DeltaView, ObjectSpec, ObjectView, Op, Popped as PoppedView, QueueKind, Script, StepResult,
    },
};
use proptest::{
    prelude::*,
    strategy::ValueTree,
    test_runner::{Config, TestRunner},
};

// ---------------------------------------------------------------------------------------------
// The Go side.

fn go_peer() -> MutexGuard<'static, GoPeer> {
    static PEER: OnceLock<Mutex<GoPeer>> = OnceLock::new();
    GoPeer::shared(&PEER, "fifo-peer", Path::new(env!("CARGO_TARGET_TMPDIR")))
}

fn run_go(script: &Script) -> Vec<StepResult> {
    let lines = script.to_lines();
    let answers = go_peer()
        .exchange(&lines)
        .unwrap_or_else(|err| panic!("client-go peer failed on {script:?}: {err}"));
    answers
        .iter()
        .map(|answer| {
            serde_json::from_str(answer)
                .unwrap_or_else(|err| panic!("unparsable peer answer {answer:?}: {err}"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The Rust side: the same script through kinformer-fifo.

/// The consumer's cache as the queue sees it, listing its keys sorted (see the module docs).
struct SortedKnownObjects(Arc<Cache<Pod>>);

impl CacheReader<Pod> for SortedKnownObjects {
    fn list_keys(&self) -> Vec<String> {
        let mut keys = self.0.list_keys();
        keys.sort();
        keys
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.get_by_key(key)
    }

    fn get(&self, obj: &Pod) -> kinformer_store::Result<Option<Arc<Pod>>> {
        self.0.get(obj)
    }

    fn list(&self) -> Vec<Arc<Pod>> {
        self.0.list()
    }
}

fn delta_view(delta: &Delta<Pod>) -> DeltaView {
    let object = ObjectView::of(delta.object().as_ref());
    let (key, tombstone) = match &delta.object {
        ObjectOrTombstone::Tombstone(tombstone) => (tombstone.key.clone(), true),
        ObjectOrTombstone::Object(_) => (object.key.clone(), false),
    };
    DeltaView {
        kind: delta.kind.as_str().to_owned(),
        key,
        tombstone,
        object: Some(object),
        rv: String::new(),
        objects: Vec::new(),
    }
}

fn popped_views(popped: &Popped<Pod>) -> Vec<DeltaView> {
    let whole_queue = |kind: &str, rv: &str, objects: &[Arc<Pod>]| DeltaView {
        kind: kind.to_owned(),
        key: String::new(),
        tombstone: false,
        object: None,
        rv: rv.to_owned(),
        objects: objects
            .iter()
            .map(|obj| ObjectView::of(obj.as_ref()))
            .collect(),
    };
    match popped {
        Popped::ReplacedAll(all) => vec![whole_queue(
            "ReplacedAll",
            &all.resource_version,
            &all.objects,
        )],
        Popped::SyncAll => vec![whole_queue("SyncAll", "", &[])],
        Popped::Bookmark { resource_version } => {
            vec![whole_queue("Bookmark", resource_version, &[])]
        }
        other => other.deltas().iter().map(delta_view).collect(),
    }
}

/// Applies what was popped to the cache as client-go's `processDeltas` does: a `ReplacedAll`
/// replaces the whole cache; a `SyncAll` or `Bookmark` leaves it as it is.
fn apply(cache: &Cache<Pod>, popped: &Popped<Pod>) -> kinformer_fifo::Result<()> {
    if let Popped::ReplacedAll(all) = popped {
        cache.replace(all.objects.clone(), &all.resource_version)?;
        return Ok(());
    }
    for delta in popped.deltas() {
        match delta.kind {
            DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync => {
                let obj = Arc::clone(delta.object());
                if cache.get(&obj)?.is_some() {
                    cache.update(obj.into())?;
                } else {
                    cache.add(obj.into())?;
                }
            }
            DeltaType::Deleted => match &delta.object {
                // client-go deletes the tombstone's key; the object stored under it is keyed so.
                ObjectOrTombstone::Tombstone(tombstone) => {
                    if let Some(stored) = cache.get_by_key(&tombstone.key) {
                        cache.delete(stored)?;
                    }
                }
                ObjectOrTombstone::Object(obj) => cache.delete(Arc::clone(obj))?,
            },
        }
    }
    Ok(())
}

struct RustRun {
    queue: Box<dyn Queue<Pod>>,
    known: Option<Arc<Cache<Pod>>>,
}

enum PopKind {
    One { requeue: bool },
    Batch,
}

impl RustRun {
    fn new(script: &Script) -> Self {
        // With atomic events the consumer keeps a store that the queue never consults.
        let known = (script.known_objects || script.atomic_events)
            .then(|| Arc::new(Cache::<Pod>::default()));
        let known_objects: Option<KnownObjects<Pod>> = known
            .as_ref()
            .filter(|_| script.known_objects)
            .map(|cache| Arc::new(SortedKnownObjects(Arc::clone(cache))) as KnownObjects<Pod>);
        let queue: Box<dyn Queue<Pod>> = match script.queue {
            QueueKind::Delta => {
                let mut options =
                    DeltaFifoOptions::new().emit_delta_type_replaced(script.emit_replaced);
                if let Some(known_objects) = known_objects {
                    options = options.known_objects(known_objects);
                }
                Box::new(DeltaFifo::new(options))
            }
            QueueKind::Real if script.atomic_events => Box::new(
                RealFifo::new(RealFifoOptions::atomic())
                    .expect("atomic RealFIFO options are valid"),
            ),
            QueueKind::Real => {
                let known_objects =
                    known_objects.expect("generated RealFIFO scripts have known objects");
                Box::new(
                    RealFifo::new(RealFifoOptions::new(known_objects))
                        .expect("per-object RealFIFO options are valid"),
                )
            }
        };
        queue.close();
        Self { queue, known }
    }

    /// One pop: `Ok(None)` when the (closed) queue is empty.
    fn pop(&self, kind: &PopKind) -> Result<Option<PoppedView>, String> {
        let mut seen = None;
        let requeue = matches!(kind, PopKind::One { requeue: true });
        let known = self.known.as_deref();
        let mut process = |popped: &Popped<Pod>, kind: AddKind| {
            seen = Some(PoppedView {
                is_in_initial_list: kind.is_initial_list(),
                deltas: popped_views(popped),
                requeued: requeue,
            });
            if requeue {
                return Processed::Requeue;
            }
            match known.map(|cache| apply(cache, popped)) {
                Some(Err(error)) => Processed::Failed(error.into()),
                Some(Ok(())) | None => Processed::Done,
            }
        };
        let future = match kind {
            PopKind::One { .. } => self.queue.pop(&mut process),
            PopKind::Batch => self.queue.pop_batch(&mut process),
        };
        match future.now_or_never() {
            None => Err("pop blocked on a closed queue".to_owned()),
            Some(Err(FifoError::Closed)) => Ok(None),
            Some(Err(err)) => Err(format!("pop failed: {err}")),
            Some(Ok(_)) => seen
                .map(Some)
                .ok_or_else(|| "pop returned without calling process".to_owned()),
        }
    }

    fn step(&self, step: u32, op: &Op) -> StepResult {
        let name = serde_json::to_value(op).expect("ops serialize")["op"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut result = StepResult::new(step, &name, false);
        let outcome: Result<(), String> = match op {
            Op::Add { object } => self
                .queue
                .add(object.to_pod().into())
                .map_err(|e| e.to_string()),
            Op::Update { object } => self
                .queue
                .update(object.to_pod().into())
                .map_err(|e| e.to_string()),
            Op::Delete { object } => self
                .queue
                .delete(object.to_pod())
                .map_err(|e| e.to_string()),
            Op::Replace { objects, rv } => self
                .queue
                .replace(objects.iter().map(ObjectSpec::to_pod).collect(), rv)
                .map_err(|e| e.to_string()),
            Op::Resync => self.queue.resync().map_err(|e| e.to_string()),
            Op::Bookmark { rv } => self.queue.bookmark(rv).map_err(|e| e.to_string()),
            Op::Pop { requeue } => self.pop(&PopKind::One { requeue: *requeue }).map(|popped| {
                result.empty = popped.is_none();
                result.popped = popped;
            }),
            Op::PopBatch => self.pop(&PopKind::Batch).map(|popped| {
                result.empty = popped.is_none();
                result.popped = popped;
            }),
            Op::Drain => loop {
                match self.pop(&PopKind::One { requeue: false }) {
                    Ok(Some(popped)) => result.drained.push(popped),
                    Ok(None) => break Ok(()),
                    Err(err) => break Err(err),
                }
            },
            Op::ListKeys => {
                result.queue_keys = self.queue.list_keys();
                result.queue_keys.sort();
                result.queue_keys.dedup();
                if let Some(cache) = &self.known {
                    result.known_keys = CacheReader::list_keys(cache.as_ref());
                    result.known_keys.sort();
                }
                Ok(())
            }
            Op::HasSynced => Ok(()),
        };
        if let Err(err) = outcome {
            result.error = err;
        }
        result.has_synced = self.queue.has_synced();
        result
    }
}

fn run_rust(script: &Script) -> Vec<StepResult> {
    let run = RustRun::new(script);
    let mut results = Vec::with_capacity(script.ops.len() + 2);
    let mut begin = StepResult::new(0, "begin", run.queue.has_synced());
    begin.id = script.id.clone();
    results.push(begin);
    let mut step = 0;
    for op in &script.ops {
        step += 1;
        results.push(run.step(step, op));
    }
    let mut end = StepResult::new(step + 1, "end", run.queue.has_synced());
    end.id = script.id.clone();
    results.push(end);
    results
}

// ---------------------------------------------------------------------------------------------
// Comparing.

fn json(result: &StepResult) -> String {
    serde_json::to_string(result).expect("results serialize")
}

/// Runs `script` on both sides; `Err` describes the first divergence.
fn compare(script: &Script) -> Result<(), String> {
    let go = run_go(script);
    let rust = run_rust(script);
    if let Some(failed) = go.iter().find(|result| !result.error.is_empty()) {
        return Err(format!("client-go reported an error: {}", json(failed)));
    }
    if let Some(failed) = rust.iter().find(|result| !result.error.is_empty()) {
        return Err(format!("kinformer reported an error: {}", json(failed)));
    }
    for (step, (go_result, rust_result)) in go.iter().zip(&rust).enumerate() {
        if go_result != rust_result {
            let line = &script.to_lines()[step];
            return Err(format!(
                "first divergence at step {step} ({line}):\n  client-go: {}\n  kinformer: {}",
                json(go_result),
                json(rust_result)
            ));
        }
    }
    if go.len() != rust.len() {
        return Err(format!(
            "client-go gave {} results, kinformer {}",
            go.len(),
            rust.len()
        ));
    }
    Ok(())
}

#[track_caller]
fn assert_same(script: &Script) {
    if let Err(divergence) = compare(script) {
        panic!("{divergence}\n{script:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Generating scripts.

/// Few namespaces and names, so keys collide often: updates of queued keys, deletes of queued
/// and unknown keys, replaces that keep some keys and drop others. Names are never empty:
/// kinformer refuses a nameless object (client-go keys it as `""` or `"ns/"`), a deliberate
/// difference pinned by `nameless_objects_are_refused_where_client_go_keys_them_as_empty`.
fn object() -> impl Strategy<Value = ObjectSpec> {
    let labels = prop::option::of(prop::sample::select(vec!["x", "y"]));
    (
        prop::sample::select(vec!["", "ns-a", "ns-b"]),
        prop::sample::select(vec!["a", "b", "c", "d"]),
        1..=30u32,
        labels,
    )
        .prop_map(|(namespace, name, rv, label)| {
            let mut spec = ObjectSpec::new(namespace, name, &rv.to_string());
            if let Some(value) = label {
                spec.labels.insert("app".to_owned(), value.to_owned());
            }
            spec
        })
}

/// A relist. A real list never names a key twice, so duplicates are dropped (first wins).
fn replace() -> impl Strategy<Value = Op> {
    (prop::collection::vec(object(), 0..8), 1..=30u32).prop_map(|(objects, rv)| {
        let mut seen = BTreeSet::new();
        let objects = objects
            .into_iter()
            .filter(|object| seen.insert(object.key()))
            .collect();
        Op::Replace {
            objects,
            rv: rv.to_string(),
        }
    })
}

/// A watch bookmark; only the atomic RealFIFO queues it, and every queue must accept it.
fn bookmark() -> impl Strategy<Value = Op> {
    (1..=30u32).prop_map(|rv| Op::Bookmark { rv: rv.to_string() })
}

fn delta_fifo_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => object().prop_map(|object| Op::Add { object }),
        3 => object().prop_map(|object| Op::Update { object }),
        3 => object().prop_map(|object| Op::Delete { object }),
        2 => replace(),
        1 => Just(Op::Resync),
        1 => bookmark(),
        4 => Just(Op::Pop { requeue: false }),
        // client-go v0.37 dropped ErrRequeue; the peer reproduces its last behaviour.
        1 => Just(Op::Pop { requeue: true }),
        1 => Just(Op::Drain),
        1 => Just(Op::ListKeys),
        1 => Just(Op::HasSynced),
    ]
}

/// RealFIFO ops: no requeue, which client-go's RealFIFO never had (kinformer puts the deltas
/// back at the head, with nothing in Go to compare against).
fn real_fifo_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => object().prop_map(|object| Op::Add { object }),
        3 => object().prop_map(|object| Op::Update { object }),
        3 => object().prop_map(|object| Op::Delete { object }),
        2 => replace(),
        1 => Just(Op::Resync),
        1 => bookmark(),
        3 => Just(Op::Pop { requeue: false }),
        2 => Just(Op::PopBatch),
        1 => Just(Op::Drain),
        1 => Just(Op::ListKeys),
        1 => Just(Op::HasSynced),
    ]
}

/// Ends every script by observing what is left: the keys, then everything still queued.
fn with_final_observations(mut ops: Vec<Op>) -> Vec<Op> {
    ops.extend([Op::ListKeys, Op::Drain, Op::ListKeys]);
    ops
}

fn delta_fifo_script() -> impl Strategy<Value = Script> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(delta_fifo_op(), 0..=60),
    )
        .prop_map(|(known_objects, emit_replaced, ops)| Script {
            id: "delta".to_owned(),
            queue: QueueKind::Delta,
            known_objects,
            emit_replaced,
            atomic_events: false,
            ops: with_final_observations(ops),
        })
}

/// Per-object RealFIFO (which client-go requires known objects for, and panics without) or
/// atomic RealFIFO (which takes none), half and half.
fn real_fifo_script() -> impl Strategy<Value = Script> {
    (any::<bool>(), prop::collection::vec(real_fifo_op(), 0..=60)).prop_map(
        |(atomic_events, ops)| Script {
            id: "real".to_owned(),
            queue: QueueKind::Real,
            known_objects: !atomic_events,
            emit_replaced: false,
            atomic_events,
            ops: with_final_observations(ops),
        },
    )
}

fn config() -> Config {
    Config {
        cases: 2_000,
        // The shrunk script is printed in full; no regression files in the tree.
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_delta_fifo_scripts_match_client_go(script in delta_fifo_script()) {
        compare(&script).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn random_real_fifo_scripts_match_client_go(script in real_fifo_script()) {
        compare(&script).map_err(TestCaseError::fail)?;
    }
}

/// Notes which interesting cases one result shows.
fn note_cases(result: &StepResult, seen: &mut BTreeSet<String>) {
    if result.empty {
        seen.insert("pop of an empty queue".into());
    }
    if result.step > 1 && !result.has_synced {
        seen.insert("not yet synced after a step".into());
    }
    for popped in result.popped.iter().chain(&result.drained) {
        if popped.is_in_initial_list {
            seen.insert("is_in_initial_list".into());
        }
        if popped.requeued {
            seen.insert("requeue".into());
        }
        if popped.deltas.len() > 1 {
            seen.insert(format!("{} with several deltas", result.op));
        }
        for delta in &popped.deltas {
            seen.insert(format!("{} delta", delta.kind));
            if delta.tombstone {
                seen.insert("tombstone".into());
            }
        }
    }
}

/// The random tests are only as strong as the cases their scripts reach: sample each generator
/// and check on client-go's own results that every case below occurs.
#[test]
fn generated_scripts_reach_every_interesting_case() {
    let mut runner = TestRunner::deterministic();
    let mut seen = BTreeSet::new();
    let mut sample = |script: Script| {
        for result in run_go(&script) {
            note_cases(&result, &mut seen);
        }
    };
    for _ in 0..200 {
        let delta = delta_fifo_script().new_tree(&mut runner);
        sample(delta.expect("the generators never reject").current());
        let real = real_fifo_script().new_tree(&mut runner);
        sample(real.expect("the generators never reject").current());
    }
    let expected = [
        "pop of an empty queue",
        "not yet synced after a step",
        "is_in_initial_list",
        "requeue",
        "tombstone",
        "drain with several deltas",
        "pop_batch with several deltas",
        "Added delta",
        "Updated delta",
        "Deleted delta",
        "Replaced delta",
        "Sync delta",
        "ReplacedAll delta",
        "SyncAll delta",
        "Bookmark delta",
    ];
    let missing: Vec<_> = expected
        .iter()
        .filter(|case| !seen.contains(**case))
        .collect();
    assert!(
        missing.is_empty(),
        "never generated: {missing:?}; seen: {seen:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Edge cases, spelled out.

fn obj(namespace: &str, name: &str, rv: &str) -> ObjectSpec {
    ObjectSpec::new(namespace, name, rv)
}

fn script(queue: QueueKind, known_objects: bool, emit_replaced: bool, ops: Vec<Op>) -> Script {
    Script {
        id: "edge".to_owned(),
        queue,
        known_objects,
        emit_replaced,
        atomic_events: queue == QueueKind::Real && !known_objects,
        ops,
    }
}

#[test]
fn deletes_of_unknown_keys_match_client_go() {
    for known_objects in [false, true] {
        assert_same(&script(
            QueueKind::Delta,
            known_objects,
            true,
            vec![
                Op::Delete {
                    object: obj("ns", "never-seen", "1"),
                },
                Op::ListKeys,
                Op::Add {
                    object: obj("ns", "a", "2"),
                },
                Op::Pop { requeue: false },
                Op::Delete {
                    object: obj("ns", "a", "3"),
                },
                Op::Delete {
                    object: obj("ns", "a", "4"),
                },
                Op::Drain,
                Op::Delete {
                    object: obj("ns", "a", "5"),
                },
                Op::ListKeys,
            ],
        ));
    }
}

#[test]
fn replaces_with_vanished_keys_match_client_go() {
    for (queue, known_objects, emit_replaced) in [
        (QueueKind::Delta, false, false),
        (QueueKind::Delta, true, true),
        (QueueKind::Real, true, false),
        (QueueKind::Real, false, false),
    ] {
        assert_same(&script(
            queue,
            known_objects,
            emit_replaced,
            vec![
                Op::Replace {
                    objects: vec![
                        obj("ns", "a", "1"),
                        obj("ns", "b", "2"),
                        obj("", "node", "3"),
                    ],
                    rv: "3".into(),
                },
                Op::Pop { requeue: false },
                Op::Update {
                    object: obj("ns", "b", "4"),
                },
                Op::Replace {
                    objects: vec![obj("ns", "c", "5")],
                    rv: "5".into(),
                },
                Op::ListKeys,
                Op::Drain,
                Op::Replace {
                    objects: vec![],
                    rv: "6".into(),
                },
                Op::Drain,
                Op::ListKeys,
            ],
        ));
    }
}

#[test]
fn requeued_deltas_go_to_the_back_as_in_client_go() {
    assert_same(&script(
        QueueKind::Delta,
        true,
        true,
        vec![
            Op::Replace {
                objects: vec![obj("ns", "a", "1"), obj("ns", "b", "2")],
                rv: "2".into(),
            },
            Op::Pop { requeue: true },
            Op::HasSynced,
            Op::ListKeys,
            Op::Pop { requeue: true },
            Op::Update {
                object: obj("ns", "a", "3"),
            },
            Op::Pop { requeue: false },
            Op::Resync,
            Op::Drain,
            Op::Resync,
            Op::Drain,
        ],
    ));
}

/// client-go's `MetaNamespaceKeyFunc` keys a nameless object as `""` (or `"ns/"`), so every
/// nameless object shares one key; kinformer refuses it instead. The generated scripts leave
/// such objects out, and this test pins both halves of the difference.
#[test]
fn nameless_objects_are_refused_where_client_go_keys_them_as_empty() {
    let nameless = ObjectSpec::new("ns", "", "1");
    let go = run_go(&script(
        QueueKind::Delta,
        false,
        true,
        vec![
            Op::Add {
                object: nameless.clone(),
            },
            Op::Pop { requeue: false },
        ],
    ));
    assert_eq!(go[1].error, "", "client-go accepts the nameless object");
    let popped = go[2].popped.as_ref().expect("client-go queued it");
    assert_eq!(popped.deltas[0].key, "ns/");

    let fifo = DeltaFifo::<Pod>::new(DeltaFifoOptions::new());
    let refused = fifo.add(nameless.to_pod().into());
    assert!(
        matches!(refused, Err(kinformer_store::Error::MissingName { .. })),
        "{refused:?}"
    );
    assert!(fifo.is_empty());
}
