//! Property: a consistent read ([`read_consistently`]) of a [`Cache`] or a [`CompactCache`]
//! that writers change all the while is one state of the cache. Within it, the key listing, the object list, gets by
//! key, index queries and compound queries all agree with one another, for every random write
//! schedule. Outside a consistent read, two calls may see two states; inside, never.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
};

use kinformer_store::{
    Cache, CacheReader, Codec, CodecError, CompactCache, Indexer, Indexers, NAMESPACE_INDEX,
    Object, meta_namespace_key_func, read_consistently,
};
use proptest::prelude::*;

#[derive(Debug, PartialEq)]
struct Item {
    namespace: &'static str,
    name: String,
    color: &'static str,
}

impl Object for Item {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        Some(self.namespace)
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
const NAMESPACES: [&str; 2] = ["a", "b"];

/// Items as `namespace/name/color`.
struct ItemCodec;

impl Codec<Item> for ItemCodec {
    fn encode(&self, item: &Item) -> Result<Vec<u8>, CodecError> {
        Ok(format!("{}/{}/{}", item.namespace, item.name, item.color).into_bytes())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Item, CodecError> {
        let text = std::str::from_utf8(bytes)?;
        let [namespace, name, color] = text.split('/').collect::<Vec<_>>()[..] else {
            return Err(format!("not three fields: {text}").into());
        };
        let known = |set: &[&'static str], value: &str| set.iter().copied().find(|v| *v == value);
        Ok(Item {
            namespace: known(&NAMESPACES, namespace).ok_or("unknown namespace")?,
            name: name.to_owned(),
            color: known(&COLORS, color).ok_or("unknown colour")?,
        })
    }
}

/// The default cache, or a compact one keeping `hot` objects decoded.
fn cache(compact: Option<usize>) -> Box<dyn Indexer<Item>> {
    let mut indexers: Indexers<Item> = Indexers::new();
    indexers.insert(
        NAMESPACE_INDEX.into(),
        Arc::new(|item: &Item| vec![item.namespace.to_owned()]),
    );
    indexers.insert(
        "color".into(),
        Arc::new(|item: &Item| vec![item.color.to_owned()]),
    );
    match compact {
        None => Box::new(Cache::new(
            Arc::new(meta_namespace_key_func::<Item>),
            indexers,
        )),
        Some(hot) => Box::new(
            CompactCache::new(
                Arc::new(meta_namespace_key_func::<Item>),
                indexers,
                Arc::new(ItemCodec),
            )
            .hot_capacity(hot),
        ),
    }
}

#[derive(Debug, Clone)]
enum Write {
    Upsert {
        namespace: usize,
        name: usize,
        color: usize,
    },
    Delete {
        namespace: usize,
        name: usize,
    },
    Replace(Vec<(usize, usize, usize)>),
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        6 => (0..2usize, 0..12usize, 0..3usize)
            .prop_map(|(namespace, name, color)| Write::Upsert { namespace, name, color }),
        3 => (0..2usize, 0..12usize).prop_map(|(namespace, name)| Write::Delete { namespace, name }),
        1 => prop::collection::vec((0..2usize, 0..12usize, 0..3usize), 0..20).prop_map(Write::Replace),
    ]
}

fn item(namespace: usize, name: usize, color: usize) -> Arc<Item> {
    Arc::new(Item {
        namespace: NAMESPACES[namespace],
        name: format!("item-{name}"),
        color: COLORS[color],
    })
}

fn apply(cache: &dyn Indexer<Item>, write: &Write) {
    match write {
        Write::Upsert {
            namespace,
            name,
            color,
        } => cache
            .update(item(*namespace, *name, *color).into())
            .unwrap(),
        Write::Delete { namespace, name } => cache.delete(item(*namespace, *name, 0)).unwrap(),
        Write::Replace(items) => cache
            .replace(
                items
                    .iter()
                    .map(|(namespace, name, color)| item(*namespace, *name, *color))
                    .collect(),
                "1",
            )
            .unwrap(),
    }
}

/// Every agreement a single state guarantees, checked on `view`.
fn check(view: &dyn CacheReader<Item>) -> Result<(), String> {
    let keys: BTreeSet<String> = view.list_keys().into_iter().collect();
    let objects = view.list();
    let listed: BTreeSet<String> = objects
        .iter()
        .map(|item| format!("{}/{}", item.namespace, item.name))
        .collect();
    if keys != listed || view.len() != keys.len() || objects.len() != keys.len() {
        return Err(format!(
            "keys {keys:?}, list {listed:?}, len {}",
            view.len()
        ));
    }
    for object in &objects {
        let key = format!("{}/{}", object.namespace, object.name);
        match view.get_by_key(&key) {
            Some(got) if *got == **object => {}
            other => return Err(format!("get {key}: {other:?}, listed {object:?}")),
        }
    }
    let mut by_color = 0;
    for color in COLORS {
        let under = view.by_index("color", color).map_err(|e| e.to_string())?;
        if under.iter().any(|item| item.color != color) {
            return Err(format!("an item under {color} has another colour"));
        }
        by_color += under.len();
        for namespace in NAMESPACES {
            let both = view
                .by_indexes(&[(NAMESPACE_INDEX, &[namespace]), ("color", &[color])])
                .map_err(|e| e.to_string())?;
            let want = objects
                .iter()
                .filter(|item| item.namespace == namespace && item.color == color)
                .count();
            if both.len() != want {
                return Err(format!("{namespace} and {color}: {} of {want}", both.len()));
            }
        }
    }
    if by_color != objects.len() {
        return Err(format!(
            "{by_color} objects under the colours, {} listed",
            objects.len()
        ));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_consistent_read_is_one_state_under_concurrent_writes(
        writes in prop::collection::vec(write(), 200..600),
        compact in proptest::option::of(0..8usize),
    ) {
        let cache = cache(compact);
        let cache = &*cache;
        let done = AtomicBool::new(false);
        let failure = thread::scope(|scope| {
            scope.spawn(|| {
                // Three passes, so the reads overlap a long stretch of writes.
                for write in writes.iter().chain(&writes).chain(&writes) {
                    apply(cache, write);
                }
                done.store(true, Ordering::Release);
            });
            let reader = scope.spawn(|| {
                let mut reads = 0;
                while !done.load(Ordering::Acquire) || reads == 0 {
                    if let Err(error) = read_consistently(cache, check) {
                        return Some(error);
                    }
                    reads += 1;
                }
                None
            });
            reader.join().expect("the reader does not panic")
        });
        prop_assert!(failure.is_none(), "{:?}", failure);
        // And once quiet, the cache itself agrees too.
        prop_assert_eq!(check(cache), Ok(()));
    }
}
