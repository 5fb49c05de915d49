//! Writers and readers hammer one [`Cache`] at once; every read must see each object under
//! exactly the index values it has, never under one it used to have.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use kinformer_store::{
    Cache, CacheReader, Indexer, Indexers, NAMESPACE_INDEX, Object, Store, meta_namespace_key_func,
};

#[derive(Debug)]
struct Item {
    namespace: String,
    name: String,
    /// Moves between colours on every update.
    color: &'static str,
    /// A multi-valued index: zero to three shapes.
    shapes: Vec<&'static str>,
    writer: usize,
}

impl Object for Item {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        Some(&self.namespace)
    }
    fn resource_version(&self) -> Option<&str> {
        None
    }
    fn uid(&self) -> Option<&str> {
        None
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        None
    }
}

const COLORS: [&str; 3] = ["red", "green", "blue"];
const SHAPES: [&str; 3] = ["circle", "square", "star"];
const NAMESPACES: [&str; 3] = ["ns-0", "ns-1", "ns-2"];
const WRITERS: usize = 3;
const READERS: usize = 3;
const KEYS_PER_WRITER: usize = 40;
/// Objects no writer ever deletes or recolours: every read must find them, replaces included.
const PINNED: usize = 5;
const RUN_FOR: Duration = Duration::from_millis(600);

fn indexers() -> Indexers<Item> {
    let mut indexers: Indexers<Item> = Indexers::new();
    indexers.insert(
        NAMESPACE_INDEX.into(),
        Arc::new(|item: &Item| vec![item.namespace.clone()]),
    );
    indexers.insert(
        "color".into(),
        Arc::new(|item: &Item| vec![item.color.to_owned()]),
    );
    indexers.insert(
        "shapes".into(),
        Arc::new(|item: &Item| {
            item.shapes
                .iter()
                .map(|shape| (*shape).to_owned())
                .collect()
        }),
    );
    indexers
}

fn pinned(index: usize) -> Arc<Item> {
    Arc::new(Item {
        namespace: "pinned".into(),
        name: format!("pinned-{index}"),
        color: "red",
        shapes: vec!["star"],
        writer: usize::MAX,
    })
}

fn random_item(rng: &mut fastrand::Rng, writer: usize) -> Arc<Item> {
    let shapes = (0..rng.usize(0..=3))
        .map(|_| SHAPES[rng.usize(..SHAPES.len())])
        .collect();
    Arc::new(Item {
        namespace: NAMESPACES[rng.usize(..NAMESPACES.len())].into(),
        name: format!("w{writer}-{}", rng.usize(..KEYS_PER_WRITER)),
        color: COLORS[rng.usize(..COLORS.len())],
        shapes,
        writer,
    })
}

fn writer(cache: &Cache<Item>, stop: &AtomicBool, writer: usize, seed: u64) -> usize {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut writes = 0;
    while !stop.load(Ordering::Relaxed) {
        match rng.u8(..100) {
            0..=44 => cache.add(random_item(&mut rng, writer).into()).unwrap(),
            45..=79 => cache.update(random_item(&mut rng, writer).into()).unwrap(),
            80..=97 => cache.delete(random_item(&mut rng, writer)).unwrap(),
            _ => {
                // A relist: everything this writer's dice pick, plus the pinned objects.
                let mut list: Vec<Arc<Item>> = (0..rng.usize(0..60))
                    .map(|_| random_item(&mut rng, writer))
                    .collect();
                list.extend((0..PINNED).map(pinned));
                cache.replace(list, "1").unwrap();
            }
        }
        writes += 1;
    }
    writes
}

fn reader(cache: &Cache<Item>, stop: &AtomicBool, seed: u64) -> usize {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut reads = 0;
    while !stop.load(Ordering::Relaxed) {
        let color = COLORS[rng.usize(..COLORS.len())];
        for item in cache.by_index("color", color).unwrap() {
            assert_eq!(
                item.color, color,
                "{} found under a colour it does not have",
                item.name
            );
        }

        let shape = SHAPES[rng.usize(..SHAPES.len())];
        for item in cache.by_index("shapes", shape).unwrap() {
            assert!(
                item.shapes.contains(&shape),
                "{} found under shape {shape}",
                item.name
            );
        }

        let namespace = NAMESPACES[rng.usize(..NAMESPACES.len())];
        for item in cache.by_index(NAMESPACE_INDEX, namespace).unwrap() {
            assert_eq!(item.namespace, namespace);
        }

        let probe = random_item(&mut rng, 0);
        for item in cache.index("shapes", &probe).unwrap() {
            assert!(
                item.shapes.iter().any(|shape| probe.shapes.contains(shape)),
                "index returned {} which shares no shape with the probe",
                item.name
            );
        }

        // Pinned objects are never deleted or moved, so their keys always resolve and they
        // are always under their values, even while a replace swaps the contents.
        let red = cache.index_keys("color", "red").unwrap();
        let star = cache.index_keys("shapes", "star").unwrap();
        for index in 0..PINNED {
            let key = format!("pinned/pinned-{index}");
            assert!(red.contains(&key), "{key} missing from color=red");
            assert!(star.contains(&key), "{key} missing from shapes=star");
            let item = cache.get_by_key(&key).expect("pinned keys always resolve");
            assert_eq!(item.writer, usize::MAX);
        }
        reads += 1;
    }
    reads
}

/// After the threads stop, every object is under exactly its values and every indexed key
/// resolves to an object that has the value.
fn assert_quiescent_state_is_consistent(cache: &Cache<Item>) {
    for item in cache.list() {
        let key = format!("{}/{}", item.namespace, item.name);
        assert!(
            cache
                .index_keys("color", item.color)
                .unwrap()
                .contains(&key)
        );
        for shape in &item.shapes {
            assert!(cache.index_keys("shapes", shape).unwrap().contains(&key));
        }
    }
    for color in cache.list_index_func_values("color") {
        let keys = cache.index_keys("color", &color).unwrap();
        assert!(!keys.is_empty(), "an empty index set survived for {color}");
        for key in keys {
            let item = cache.get_by_key(&key).expect("an indexed key resolves");
            assert_eq!(item.color, color);
        }
    }
    for shape in cache.list_index_func_values("shapes") {
        for key in cache.index_keys("shapes", &shape).unwrap() {
            let item = cache.get_by_key(&key).expect("an indexed key resolves");
            assert!(item.shapes.iter().any(|s| *s == shape));
        }
    }
}

#[test]
fn concurrent_readers_never_see_an_object_under_a_value_it_no_longer_has() {
    let cache = Arc::new(Cache::new(
        Arc::new(meta_namespace_key_func::<Item>),
        indexers(),
    ));
    for index in 0..PINNED {
        cache.add(pinned(index).into()).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let writes = Arc::new(AtomicUsize::new(0));
    let seed = fastrand::u64(..);

    let mut threads = Vec::new();
    for index in 0..WRITERS {
        let (cache, stop, writes) = (Arc::clone(&cache), Arc::clone(&stop), Arc::clone(&writes));
        threads.push(thread::spawn(move || {
            let done = writer(&cache, &stop, index, seed ^ index as u64);
            writes.fetch_add(done, Ordering::Relaxed);
        }));
    }
    for index in 0..READERS {
        let (cache, stop, reads) = (Arc::clone(&cache), Arc::clone(&stop), Arc::clone(&reads));
        threads.push(thread::spawn(move || {
            let done = reader(&cache, &stop, seed.rotate_left(17) ^ index as u64);
            reads.fetch_add(done, Ordering::Relaxed);
        }));
    }

    let started = Instant::now();
    while started.elapsed() < RUN_FOR {
        // The stress runs for a fixed time; the readers assert, not this loop.
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        if let Err(panic) = thread.join() {
            std::panic::resume_unwind(panic);
        }
    }

    assert_quiescent_state_is_consistent(&cache);
    // The run only proves something if both sides made progress (seed {seed} reproduces it).
    assert!(
        reads.load(Ordering::Relaxed) > 100,
        "too few reads (seed {seed})"
    );
    assert!(
        writes.load(Ordering::Relaxed) > 1000,
        "too few writes (seed {seed})"
    );
}

#[test]
fn indexers_added_while_replaces_run_are_never_lost() {
    let cache = Arc::new(Cache::new(
        Arc::new(meta_namespace_key_func::<Item>),
        indexers(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let replacer = {
        let (cache, stop) = (Arc::clone(&cache), Arc::clone(&stop));
        thread::spawn(move || {
            let mut rng = fastrand::Rng::with_seed(7);
            while !stop.load(Ordering::Relaxed) {
                let list = (0..50).map(|_| random_item(&mut rng, 0)).collect();
                cache.replace(list, "1").unwrap();
            }
        })
    };
    let names: Vec<String> = (0..50).map(|i| format!("extra-{i}")).collect();
    for name in &names {
        let mut extra: Indexers<Item> = Indexers::new();
        extra.insert(
            name.clone(),
            Arc::new(|item: &Item| vec![item.color.to_owned()]),
        );
        cache.add_indexers(extra).unwrap();
        thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    if let Err(panic) = replacer.join() {
        std::panic::resume_unwind(panic);
    }

    let registered = cache.indexers();
    for name in &names {
        assert!(
            registered.contains_key(name),
            "{name} was lost by a replace"
        );
        // Every extra index is populated, and agrees with the colour index.
        for color in COLORS {
            let mut extra = cache.index_keys(name, color).unwrap();
            let mut by_color = cache.index_keys("color", color).unwrap();
            extra.sort();
            by_color.sort();
            assert_eq!(extra, by_color, "{name} under {color}");
        }
    }
}
