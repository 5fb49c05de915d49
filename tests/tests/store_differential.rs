//! Differential tests of kinformer-store's `Cache` against client-go v0.37.2's Indexer.
//!
//! Random scripts of adds, updates, deletes, replaces, index queries and late index funcs run
//! through `cache.NewIndexer` (the `store-peer` Go program in `xtask/peers/client-go`, kept
//! running for the whole test binary) and through `Cache`; every answer must match, and a
//! snapshot of every object and every index (value to keys) is compared after every write.
//! A failure prints the first diverging step of the shrunk script as JSON lines.
//!
//! These tests fail, never skip, when Go is missing or the peer does not build.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    sync::{Arc, Mutex, MutexGuard, OnceLock},
};

use k8s_openapi::api::core::v1::Pod;
use kinformer_store::{
    Cache, CacheReader, IndexFunc, Indexer, Indexers, NAMESPACE_INDEX, Store,
    meta_namespace_key_func, namespace_indexers,
};
use kinformer_tests::{
    GoPeer,
    store_script::{ObjectSpec, ObjectView, StoreOp, StoreResult, StoreScript},
};
use proptest::{prelude::*, test_runner::Config};

fn go_peer() -> MutexGuard<'static, GoPeer> {
    static PEER: OnceLock<Mutex<GoPeer>> = OnceLock::new();
    GoPeer::shared(&PEER, "store-peer", Path::new(env!("CARGO_TARGET_TMPDIR")))
}

fn run_go(script: &StoreScript) -> Vec<StoreResult> {
    let answers = go_peer()
        .exchange(&script.to_lines())
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
// The Rust side.

/// The index funcs of the peer (`internal/storepeer`), by the same names.
fn index_func(name: &str) -> Option<IndexFunc<Pod>> {
    let label = |pod: &Pod, key: &str| pod.metadata.labels.as_ref()?.get(key).cloned();
    let func: IndexFunc<Pod> = match name {
        NAMESPACE_INDEX => namespace_indexers::<Pod>().remove(NAMESPACE_INDEX)?,
        "labels" => Arc::new(|pod: &Pod| {
            let labels = pod.metadata.labels.iter().flatten();
            labels.map(|(k, v)| format!("{k}={v}")).collect()
        }),
        // Index funcs may repeat a value.
        "app-twice" => Arc::new(move |pod: &Pod| {
            label(pod, "app").map_or_else(Vec::new, |app| vec![app.clone(), app])
        }),
        "tier" => Arc::new(move |pod: &Pod| label(pod, "tier").into_iter().collect()),
        _ => return None,
    };
    Some(func)
}

/// The index funcs every store starts with; `tier` is only ever added by a script.
fn initial_indexers() -> Indexers<Pod> {
    [NAMESPACE_INDEX, "labels", "app-twice"]
        .into_iter()
        .filter_map(|name| Some((name.to_owned(), index_func(name)?)))
        .collect()
}

fn sorted_keys(objects: &[Arc<Pod>]) -> Vec<String> {
    let mut keys: Vec<String> = objects
        .iter()
        .map(|obj| ObjectView::of(obj.as_ref()).key)
        .collect();
    keys.sort();
    keys
}

fn sorted(mut values: Vec<String>) -> Vec<String> {
    values.sort();
    values
}

fn snapshot(cache: &Cache<Pod>, result: &mut StoreResult) {
    let mut objects: Vec<ObjectView> = cache
        .list()
        .iter()
        .map(|obj| ObjectView::of(obj.as_ref()))
        .collect();
    objects.sort_by(|a, b| a.key.cmp(&b.key));
    result.objects = objects;
    for name in cache.indexers().keys() {
        let mut values = BTreeMap::new();
        for value in cache.list_index_func_values(name) {
            let keys = cache
                .index_keys(name, &value)
                .expect("a registered index answers");
            values.insert(value, sorted(keys));
        }
        result.indices.insert(name.clone(), values);
    }
}

fn step(cache: &Cache<Pod>, step: u32, op: &StoreOp) -> StoreResult {
    let name = serde_json::to_value(op).expect("ops serialize")["op"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut result = StoreResult {
        step,
        op: name,
        ..StoreResult::default()
    };
    let outcome: kinformer_store::Result<()> = (|| {
        match op {
            StoreOp::Add { object } => cache.add(object.to_pod().into())?,
            StoreOp::Update { object } => cache.update(object.to_pod().into())?,
            StoreOp::Delete { object } => cache.delete(object.to_pod())?,
            StoreOp::Replace { objects, rv } => {
                cache.replace(objects.iter().map(ObjectSpec::to_pod).collect(), rv)?;
            }
            StoreOp::Get { key } => {
                result.found = cache
                    .get_by_key(key)
                    .map(|obj| ObjectView::of(obj.as_ref()));
            }
            StoreOp::ListKeys => result.keys = sorted(CacheReader::list_keys(cache)),
            StoreOp::ByIndex { index, value } => {
                result.keys = sorted_keys(&cache.by_index(index, value)?);
            }
            StoreOp::IndexKeys { index, value } => {
                result.keys = sorted(cache.index_keys(index, value)?);
            }
            StoreOp::Index { index, object } => {
                result.keys = sorted_keys(&cache.index(index, &object.to_pod())?);
            }
            StoreOp::ListIndexFuncValues { index } => {
                result.values = sorted(cache.list_index_func_values(index));
            }
            StoreOp::AddIndexer { index } => {
                let func = index_func(index).expect("scripts add only known index funcs");
                cache.add_indexers(Indexers::from([(index.clone(), func)]))?;
            }
            StoreOp::Snapshot => snapshot(cache, &mut result),
        }
        Ok(())
    })();
    if let Err(err) = outcome {
        result.error = err.to_string();
    }
    result
}

fn run_rust(script: &StoreScript) -> Vec<StoreResult> {
    let cache = Cache::new(Arc::new(meta_namespace_key_func::<Pod>), initial_indexers());
    let mut results = Vec::with_capacity(script.ops.len() + 2);
    results.push(StoreResult {
        op: "begin".into(),
        id: script.id.clone(),
        ..StoreResult::default()
    });
    let mut n = 0;
    for op in &script.ops {
        n += 1;
        results.push(step(&cache, n, op));
    }
    results.push(StoreResult {
        step: n + 1,
        op: "end".into(),
        id: script.id.clone(),
        ..StoreResult::default()
    });
    results
}

// ---------------------------------------------------------------------------------------------
// Comparing.

/// Error texts differ between the two; whether there was one must not.
fn normalized(mut result: StoreResult) -> StoreResult {
    if !result.error.is_empty() {
        result.error = "error".into();
    }
    result
}

fn compare(script: &StoreScript) -> Result<(), String> {
    let go: Vec<_> = run_go(script).into_iter().map(normalized).collect();
    let rust: Vec<_> = run_rust(script).into_iter().map(normalized).collect();
    for (step, (go_result, rust_result)) in go.iter().zip(&rust).enumerate() {
        if go_result != rust_result {
            let json = |r: &StoreResult| serde_json::to_string(r).expect("results serialize");
            return Err(format!(
                "first divergence at step {step} ({}):\n  client-go: {}\n  kinformer: {}",
                script.to_lines()[step],
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

// ---------------------------------------------------------------------------------------------
// Generating scripts.

/// Few keys, so writes collide; labels from a small set, so index values are shared, change
/// and vanish. Names are never empty: kinformer refuses nameless objects on purpose (see
/// `fifo_differential.rs`).
fn object() -> impl Strategy<Value = ObjectSpec> {
    (
        prop::sample::select(vec!["", "ns-a", "ns-b"]),
        prop::sample::select(vec!["a", "b", "c"]),
        1..=30u32,
        prop::option::of(prop::sample::select(vec!["x", "y"])),
        prop::option::of(prop::sample::select(vec!["web", "db"])),
    )
        .prop_map(|(namespace, name, rv, app, tier)| {
            let mut spec = ObjectSpec::new(namespace, name, &rv.to_string());
            if let Some(app) = app {
                spec.labels.insert("app".into(), app.into());
            }
            if let Some(tier) = tier {
                spec.labels.insert("tier".into(), tier.into());
            }
            spec
        })
}

/// Index names the queries use: the registered ones, the late one, and one never registered.
fn index_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        NAMESPACE_INDEX,
        "labels",
        "app-twice",
        "tier",
        "missing",
    ])
    .prop_map(str::to_owned)
}

fn index_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "", "ns-a", "x", "y", "web", "app=x", "tier=db", "none",
    ])
    .prop_map(str::to_owned)
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "ns-a/a", "ns-b/c", "ns-a/missing"]).prop_map(str::to_owned)
}

/// A relist; a real list never names a key twice, so duplicates are dropped (first wins).
fn replace() -> impl Strategy<Value = StoreOp> {
    (prop::collection::vec(object(), 0..6), 1..=30u32).prop_map(|(objects, rv)| {
        let mut seen = BTreeSet::new();
        let objects = objects
            .into_iter()
            .filter(|object| seen.insert(object.key()))
            .collect();
        StoreOp::Replace {
            objects,
            rv: rv.to_string(),
        }
    })
}

fn store_op() -> impl Strategy<Value = StoreOp> {
    prop_oneof![
        4 => object().prop_map(|object| StoreOp::Add { object }),
        3 => object().prop_map(|object| StoreOp::Update { object }),
        3 => object().prop_map(|object| StoreOp::Delete { object }),
        1 => replace(),
        1 => key().prop_map(|key| StoreOp::Get { key }),
        1 => Just(StoreOp::ListKeys),
        2 => (index_name(), index_value()).prop_map(|(index, value)| StoreOp::ByIndex { index, value }),
        1 => (index_name(), index_value()).prop_map(|(index, value)| StoreOp::IndexKeys { index, value }),
        1 => (index_name(), object()).prop_map(|(index, object)| StoreOp::Index { index, object }),
        1 => index_name().prop_map(|index| StoreOp::ListIndexFuncValues { index }),
        // The first adds the index over whatever is stored; any later one conflicts.
        1 => Just(StoreOp::AddIndexer { index: "tier".into() }),
    ]
}

/// Every write is followed by a snapshot, so a divergence shows at the write that caused it.
fn store_script() -> impl Strategy<Value = StoreScript> {
    prop::collection::vec(store_op(), 0..=60).prop_map(|ops| {
        let mut with_snapshots = Vec::with_capacity(ops.len() * 2 + 1);
        for op in ops {
            let writes = matches!(
                op,
                StoreOp::Add { .. }
                    | StoreOp::Update { .. }
                    | StoreOp::Delete { .. }
                    | StoreOp::Replace { .. }
                    | StoreOp::AddIndexer { .. }
            );
            with_snapshots.push(op);
            if writes {
                with_snapshots.push(StoreOp::Snapshot);
            }
        }
        with_snapshots.push(StoreOp::Snapshot);
        StoreScript {
            id: "store".into(),
            ops: with_snapshots,
        }
    })
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
    fn random_store_scripts_match_client_go(script in store_script()) {
        compare(&script).map_err(TestCaseError::fail)?;
    }
}

/// Ported in spirit from client-go's `TestMultiIndexKeys` and `TestIndexFuncsAndLateIndexers`:
/// multi-valued and repeated index values, an index added over stored objects, a conflicting
/// second add, and queries against an index that does not exist.
#[test]
fn multi_valued_and_late_indexes_match_client_go() {
    let labelled = |namespace: &str, name: &str, app: &str, tier: &str| {
        let mut spec = ObjectSpec::new(namespace, name, "1");
        spec.labels.insert("app".into(), app.into());
        spec.labels.insert("tier".into(), tier.into());
        spec
    };
    let script = StoreScript {
        id: "indexes".into(),
        ops: vec![
            StoreOp::Add {
                object: labelled("ns-a", "a", "x", "web"),
            },
            StoreOp::Add {
                object: labelled("", "b", "x", "db"),
            },
            StoreOp::Index {
                index: "labels".into(),
                object: labelled("ns-b", "q", "x", "db"),
            },
            StoreOp::ByIndex {
                index: "app-twice".into(),
                value: "x".into(),
            },
            StoreOp::ByIndex {
                index: "tier".into(),
                value: "web".into(),
            },
            StoreOp::AddIndexer {
                index: "tier".into(),
            },
            StoreOp::ByIndex {
                index: "tier".into(),
                value: "web".into(),
            },
            StoreOp::AddIndexer {
                index: "tier".into(),
            },
            StoreOp::Update {
                object: labelled("ns-a", "a", "y", "db"),
            },
            StoreOp::Snapshot,
            StoreOp::Delete {
                object: ObjectSpec::new("", "b", "2"),
            },
            StoreOp::ListIndexFuncValues {
                index: "app-twice".into(),
            },
            StoreOp::IndexKeys {
                index: "missing".into(),
                value: "x".into(),
            },
            StoreOp::Snapshot,
        ],
    };
    if let Err(divergence) = compare(&script) {
        panic!("{divergence}\n{script:?}");
    }
    let go = run_go(&script);
    assert!(go[5].error.contains("does not exist"), "{:?}", go[5]);
    assert!(go[8].error.contains("conflict"), "{:?}", go[8]);
}
