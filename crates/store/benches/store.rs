//! The indexed store on a 100k-Pod cache (100 namespaces, a namespace index and an `app` label
//! index), measured against two alternatives prototyped here:
//!
//! - `slot-table` is [`Cache`], called through its `Store` and `CacheReader` traits: items and
//!   indexes under one `parking_lot::RwLock`, objects in a slot table, index sets of 4-byte slot
//!   numbers, foldhash;
//! - `keys-in-index` is the design it replaced: the same lock, index sets of `Arc<str>` keys
//!   (as client-go's sets of strings), so every index hit hashes its key again;
//! - `keys-in-index-sip` is that design with std's SipHash maps, to price the hasher;
//! - `dashmap-items` keeps items in a `DashMap` (so `get_by_key` never touches the index lock)
//!   and the indexes under their own `RwLock`, which writers hold while they update both, so
//!   index readers still never see an object under a stale value.
//!
//! Every candidate keys each write (add, delete, replace) with [`meta_namespace_key_func`], as
//! a `Cache` does; `get` takes the precomputed key, as `get_by_key` does.
//!
//! Run with `cargo bench -p kinformer-store --bench store -- --warm-up-time 1 --measurement-time 2`.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    hash::BuildHasher,
    hint::black_box,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use dashmap::DashMap;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kinformer_store::{
    Cache, CacheReader, IndexFunc, Indexers, NAMESPACE_INDEX, Store, meta_namespace_key_func,
};
use kube_core::ObjectMeta;
use parking_lot::RwLock;

const PODS: usize = 100_000;
const NAMESPACES: usize = 100;
const APPS: usize = 50;
const APP_INDEX: &str = "app";

/// What every candidate store offers the benchmarks: the hot operations of an informer's cache.
trait Candidate: Send + Sync {
    fn add(&self, pod: Arc<Pod>);
    fn delete(&self, pod: Arc<Pod>);
    fn get(&self, key: &str) -> Option<Arc<Pod>>;
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Pod>>;
    fn list(&self) -> Vec<Arc<Pod>>;
    fn replace(&self, pods: Vec<Arc<Pod>>);
}

impl Candidate for Cache<Pod> {
    fn add(&self, pod: Arc<Pod>) {
        Store::update(self, pod.into()).expect("benchmark Pods have names");
    }
    fn delete(&self, pod: Arc<Pod>) {
        Store::delete(self, pod).expect("benchmark Pods have names");
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        CacheReader::get_by_key(self, key)
    }
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Pod>> {
        CacheReader::by_index(self, index, value).expect("benchmark indexes exist")
    }
    fn list(&self) -> Vec<Arc<Pod>> {
        CacheReader::list(self)
    }
    fn replace(&self, pods: Vec<Arc<Pod>>) {
        Store::replace(self, pods, "2").expect("benchmark Pods have names");
    }
}

/// A Pod's key, as the other candidates compute it for every write.
fn key_of(pod: &Pod) -> Arc<str> {
    Arc::from(meta_namespace_key_func(pod).expect("benchmark Pods have names"))
}

type Items<S> = HashMap<Arc<str>, Arc<Pod>, S>;
type Index<S> = HashMap<Arc<str>, HashSet<Arc<str>, S>, S>;

/// Indexes by name, maintained by whichever candidate owns them.
struct Indexes<S> {
    funcs: Vec<(String, IndexFunc<Pod>)>,
    indices: HashMap<String, Index<S>, S>,
}

impl<S: BuildHasher + Default> Indexes<S> {
    fn new(indexers: &Indexers<Pod>) -> Self {
        Self {
            funcs: indexers
                .iter()
                .map(|(name, func)| (name.clone(), Arc::clone(func)))
                .collect(),
            indices: indexers
                .keys()
                .map(|name| (name.clone(), Index::default()))
                .collect(),
        }
    }

    fn update(&mut self, key: &Arc<str>, old: Option<&Pod>, new: Option<&Pod>) {
        for (name, func) in &self.funcs {
            let old_values = old.map(|pod| func(pod)).unwrap_or_default();
            let new_values = new.map(|pod| func(pod)).unwrap_or_default();
            if old.is_some() && new.is_some() && old_values == new_values {
                continue;
            }
            let index = self.indices.get_mut(name).expect("an index per func");
            for value in &old_values {
                if let Some(keys) = index.get_mut(value.as_str()) {
                    keys.remove(key);
                    if keys.is_empty() {
                        index.remove(value.as_str());
                    }
                }
            }
            for value in new_values {
                index
                    .entry(Arc::from(value))
                    .or_default()
                    .insert(Arc::clone(key));
            }
        }
    }

    fn keys(&self, index: &str, value: &str) -> Option<&HashSet<Arc<str>, S>> {
        self.indices.get(index).and_then(|index| index.get(value))
    }
}

/// The first one-lock design: items by key, index sets holding `Arc<str>` keys, so an index
/// query hashes every key again to find its object.
struct KeysInIndex<S> {
    inner: RwLock<(Items<S>, Indexes<S>)>,
    indexers: Indexers<Pod>,
}

impl<S: BuildHasher + Default> KeysInIndex<S> {
    fn new(indexers: Indexers<Pod>) -> Self {
        Self {
            inner: RwLock::new((HashMap::default(), Indexes::new(&indexers))),
            indexers,
        }
    }
}

impl<S: BuildHasher + Default + Send + Sync> Candidate for KeysInIndex<S> {
    fn add(&self, pod: Arc<Pod>) {
        let key = key_of(&pod);
        let mut guard = self.inner.write();
        let (items, indexes) = &mut *guard;
        let (key, old) = match items.get_key_value(&key) {
            Some((key, old)) => (Arc::clone(key), Some(Arc::clone(old))),
            None => (key, None),
        };
        indexes.update(&key, old.as_deref(), Some(&pod));
        items.insert(key, pod);
    }
    fn delete(&self, pod: Arc<Pod>) {
        let key = key_of(&pod);
        let mut guard = self.inner.write();
        let (items, indexes) = &mut *guard;
        if let Some((key, old)) = items.remove_entry(&key) {
            indexes.update(&key, Some(&old), None);
        }
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.inner.read().0.get(key).cloned()
    }
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Pod>> {
        let guard = self.inner.read();
        let (items, indexes) = &*guard;
        indexes
            .keys(index, value)
            .map(|keys| {
                keys.iter()
                    .filter_map(|key| items.get(key).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }
    fn list(&self) -> Vec<Arc<Pod>> {
        self.inner.read().0.values().cloned().collect()
    }
    fn replace(&self, list: Vec<Arc<Pod>>) {
        let mut items = HashMap::default();
        let mut indexes = Indexes::new(&self.indexers);
        for pod in list {
            let key = key_of(&pod);
            let old = items.insert(Arc::clone(&key), Arc::clone(&pod));
            indexes.update(&key, old.as_deref(), Some(&pod));
        }
        *self.inner.write() = (items, indexes);
    }
}

/// Items in a `DashMap`; indexes under a separate lock that writers hold across both updates.
struct DashItems {
    items: DashMap<Arc<str>, Arc<Pod>, foldhash::fast::RandomState>,
    indexes: RwLock<Indexes<foldhash::fast::RandomState>>,
    indexers: Indexers<Pod>,
}

impl DashItems {
    fn new(indexers: Indexers<Pod>) -> Self {
        Self {
            items: DashMap::default(),
            indexes: RwLock::new(Indexes::new(&indexers)),
            indexers,
        }
    }
}

impl Candidate for DashItems {
    fn add(&self, pod: Arc<Pod>) {
        let key = key_of(&pod);
        let mut indexes = self.indexes.write();
        let (key, old) = match self.items.get(&key) {
            Some(entry) => (Arc::clone(entry.key()), Some(Arc::clone(entry.value()))),
            None => (key, None),
        };
        indexes.update(&key, old.as_deref(), Some(&pod));
        self.items.insert(key, pod);
    }
    fn delete(&self, pod: Arc<Pod>) {
        let key = key_of(&pod);
        let mut indexes = self.indexes.write();
        if let Some((key, old)) = self.items.remove(&key) {
            indexes.update(&key, Some(&old), None);
        }
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.items.get(key).map(|entry| Arc::clone(entry.value()))
    }
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Pod>> {
        let indexes = self.indexes.read();
        indexes
            .keys(index, value)
            .map(|keys| {
                keys.iter()
                    .filter_map(|key| self.items.get(key).map(|entry| Arc::clone(entry.value())))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn list(&self) -> Vec<Arc<Pod>> {
        self.items
            .iter()
            .map(|entry| Arc::clone(entry.value()))
            .collect()
    }
    fn replace(&self, list: Vec<Arc<Pod>>) {
        let mut fresh = Indexes::new(&self.indexers);
        let mut staged: HashMap<Arc<str>, Arc<Pod>, foldhash::fast::RandomState> =
            HashMap::default();
        for pod in list {
            let key = key_of(&pod);
            let old = staged.insert(Arc::clone(&key), Arc::clone(&pod));
            fresh.update(&key, old.as_deref(), Some(&pod));
        }
        let mut indexes = self.indexes.write();
        self.items.clear();
        for (key, pod) in staged {
            self.items.insert(key, pod);
        }
        *indexes = fresh;
    }
}

fn app_label(pod: &Pod) -> Vec<String> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get("app"))
        .cloned()
        .into_iter()
        .collect()
}

fn indexers() -> Indexers<Pod> {
    let mut indexers = kinformer_store::namespace_indexers::<Pod>();
    indexers.insert(APP_INDEX.to_owned(), Arc::new(app_label));
    indexers
}

/// A Pod shaped like a Deployment's: generated name, a few labels, one container.
fn pod(index: usize, app: usize) -> Arc<Pod> {
    let namespace = format!("team-{:03}", index % NAMESPACES);
    let app_name = format!("app-{app:02}");
    let labels = BTreeMap::from([
        ("app".to_owned(), app_name.clone()),
        (
            "pod-template-hash".to_owned(),
            format!("{:010x}", app * 7919),
        ),
        ("tier".to_owned(), ["web", "api", "db"][app % 3].to_owned()),
    ]);
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(format!("{app_name}-{:010x}-{:05}", app * 7919, index)),
            namespace: Some(namespace),
            uid: Some(format!("00000000-0000-4000-8000-{index:012}")),
            resource_version: Some(format!("{}", 1_000_000 + index)),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: app_name.clone(),
                image: Some(format!("registry.example/{app_name}:1.0")),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    })
}

struct Fixture {
    keys: Vec<String>,
    pods: Vec<Arc<Pod>>,
    /// The same Pods moved to another `app`, for updates that change an index value.
    moved: Vec<Arc<Pod>>,
}

fn fixture() -> Fixture {
    let pods: Vec<Arc<Pod>> = (0..PODS).map(|i| pod(i, i % APPS)).collect();
    let moved = (0..PODS).map(|i| pod(i, (i + 1) % APPS)).collect();
    let keys = pods
        .iter()
        .map(|pod| meta_namespace_key_func(pod.as_ref()).expect("fixture Pods have names"))
        .collect();
    Fixture { keys, pods, moved }
}

fn candidates() -> Vec<(&'static str, Arc<dyn Candidate>)> {
    vec![
        (
            "slot-table",
            Arc::new(Cache::new(
                Arc::new(meta_namespace_key_func::<Pod>),
                indexers(),
            )),
        ),
        (
            "keys-in-index",
            Arc::new(KeysInIndex::<foldhash::fast::RandomState>::new(indexers())),
        ),
        (
            "keys-in-index-sip",
            Arc::new(KeysInIndex::<std::hash::RandomState>::new(indexers())),
        ),
        ("dashmap-items", Arc::new(DashItems::new(indexers()))),
    ]
}

fn filled(store: &dyn Candidate, fixture: &Fixture) {
    store.replace(fixture.pods.clone());
}

/// Runs `body` once per candidate inside one group, so the candidates of an operation are
/// measured back to back and share whatever load the machine is under at that moment.
fn compare(
    c: &mut Criterion,
    operation: &str,
    stores: &[(&'static str, Arc<dyn Candidate>)],
    mut body: impl FnMut(&mut criterion::Bencher<'_>, &dyn Candidate),
) {
    let mut group = c.benchmark_group(operation);
    for (name, store) in stores {
        group.bench_function(*name, |b| body(b, store.as_ref()));
    }
    group.finish();
}

/// One writer thread per store, updating Pods as fast as it can (moving app labels, so every
/// write touches an index) until dropped.
struct BackgroundWriter {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl BackgroundWriter {
    fn start(store: Arc<dyn Candidate>, fixture: &Fixture) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (pods, moved) = (fixture.pods.clone(), fixture.moved.clone());
        let thread = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut j = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    j = (j + 104_729) % PODS;
                    let pod = if j.is_multiple_of(2) {
                        &moved[j]
                    } else {
                        &pods[j]
                    };
                    store.add(Arc::clone(pod));
                }
            })
        };
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BackgroundWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the writer thread does not panic");
        }
    }
}

fn benches(c: &mut Criterion) {
    let fixture = fixture();
    let namespaces: Vec<String> = (0..NAMESPACES).map(|i| format!("team-{i:03}")).collect();
    let apps: Vec<String> = (0..APPS).map(|i| format!("app-{i:02}")).collect();
    let stores = candidates();
    for (_, store) in &stores {
        filled(store.as_ref(), &fixture);
    }
    let mut i = 0usize;

    compare(c, "update-same-index-values", &stores, |b, store| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            store.add(Arc::clone(&fixture.pods[i]));
        });
    });
    let mut flip = false;
    compare(c, "update-moving-app-label", &stores, |b, store| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            flip = !flip;
            let pod = if flip {
                &fixture.moved[i]
            } else {
                &fixture.pods[i]
            };
            store.add(Arc::clone(pod));
        });
    });
    compare(c, "delete-then-add", &stores, |b, store| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            store.delete(Arc::clone(&fixture.pods[i]));
            store.add(Arc::clone(&fixture.pods[i]));
        });
    });
    compare(c, "get-by-key", &stores, |b, store| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            black_box(store.get(&fixture.keys[i]))
        });
    });
    compare(c, "by-index-namespace-1000", &stores, |b, store| {
        b.iter(|| {
            i = (i + 1) % NAMESPACES;
            black_box(store.by_index(NAMESPACE_INDEX, &namespaces[i]))
        });
    });
    compare(c, "by-index-app-2000", &stores, |b, store| {
        b.iter(|| {
            i = (i + 1) % APPS;
            black_box(store.by_index(APP_INDEX, &apps[i]))
        });
    });
    compare(c, "list-100k", &stores, |b, store| {
        b.iter(|| black_box(store.list()));
    });
    compare(c, "replace-100k", &stores, |b, store| {
        b.iter_batched(
            || fixture.pods.clone(),
            |pods| store.replace(pods),
            BatchSize::LargeInput,
        );
    });

    // Reads while a writer thread hammers the same store. On two shared cores this measures
    // lock hand-off more than parallelism; it is where a lock-free get_by_key would show.
    let mut group = c.benchmark_group("get-by-key-with-writer");
    for (name, store) in &stores {
        let _writer = BackgroundWriter::start(Arc::clone(store), &fixture);
        group.bench_function(*name, |b| {
            b.iter(|| {
                i = (i + 7919) % PODS;
                black_box(store.get(&fixture.keys[i]))
            });
        });
    }
    group.finish();
    let mut group = c.benchmark_group("by-index-namespace-with-writer");
    for (name, store) in &stores {
        let _writer = BackgroundWriter::start(Arc::clone(store), &fixture);
        group.bench_function(*name, |b| {
            b.iter(|| {
                i = (i + 1) % NAMESPACES;
                black_box(store.by_index(NAMESPACE_INDEX, &namespaces[i]))
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = store;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(store);
