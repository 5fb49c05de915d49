//! Model-based property test: [`Cache`] (and the slot table inside it), and
//! [`CompactCache`] with any number of objects kept decoded, against a `BTreeMap` whose indexes
//! are recomputed from scratch on every query.
//!
//! Random sequences of add, update, delete, replace and add_indexers run against both; after
//! every step every read (list, list_keys, get_by_key, by_index, index_keys, index,
//! list_index_func_values, indexers) must agree with the model. The index funcs are
//! multi-valued and may return no value, duplicates, or the empty string. A compact cache whose
//! codec cannot read some objects runs against the same model, which says what its reads leave
//! out and what it reports. A replace staged part by part ([`Indexer::stage_replace`]) shows
//! nothing before its commit, everything after it, and nothing when dropped.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use kinformer_store::{
    Cache, CacheReader, Codec, CodecError, CompactCache, Error, IndexFunc, Indexer, Indexers,
    Object, OldObject, meta_namespace_key_func,
};
use proptest::prelude::*;

/// A slim object: the `tags` field is a comma-separated list the index funcs split.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    namespace: Option<String>,
    name: String,
    tags: String,
    generation: u32,
}

impl Object for Item {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
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

/// Items as text, one field per line: `-` or `+namespace`, name, tags, generation.
struct ItemCodec;

impl Codec<Item> for ItemCodec {
    fn encode(&self, item: &Item) -> Result<Vec<u8>, CodecError> {
        let namespace = match &item.namespace {
            Some(namespace) => format!("+{namespace}"),
            None => "-".to_owned(),
        };
        Ok(format!(
            "{namespace}\n{}\n{}\n{}",
            item.name, item.tags, item.generation
        )
        .into_bytes())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Item, CodecError> {
        let text = std::str::from_utf8(bytes)?;
        let mut fields = text.split('\n');
        let mut next = || fields.next().ok_or("too few fields");
        let namespace = next()?;
        Ok(Item {
            namespace: namespace.strip_prefix('+').map(str::to_owned),
            name: next()?.to_owned(),
            tags: next()?.to_owned(),
            generation: next()?.parse()?,
        })
    }
}

/// The cache under test: the default one, or a compact one keeping `hot` objects decoded.
fn cache_under_test(compact: Option<usize>, indexers: Indexers<Item>) -> Box<dyn Indexer<Item>> {
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

const NAMESPACES: [Option<&str>; 3] = [None, Some("a"), Some("b")];
const NAMES: [&str; 4] = ["w", "x", "y", "z"];
const TAGS: [&str; 4] = ["red", "green", "blue", ""];
/// Every index the test may register; `namespace` is registered from the start.
const INDEX_NAMES: [&str; 4] = ["namespace", "tags", "raw-tags", "first-tag"];

fn index_func(name: &str) -> IndexFunc<Item> {
    match name {
        "namespace" => Arc::new(|item: &Item| vec![item.namespace.clone().unwrap_or_default()]),
        // Non-empty tags: zero, one or many values, duplicates kept.
        "tags" => Arc::new(|item: &Item| {
            item.tags
                .split(',')
                .filter(|tag| !tag.is_empty())
                .map(str::to_owned)
                .collect()
        }),
        // Every comma-separated part, so "" and ",red" index under the empty value.
        "raw-tags" => Arc::new(|item: &Item| item.tags.split(',').map(str::to_owned).collect()),
        "first-tag" => Arc::new(|item: &Item| {
            item.tags
                .split(',')
                .next()
                .filter(|tag| !tag.is_empty())
                .map(str::to_owned)
                .into_iter()
                .collect()
        }),
        other => unreachable!("no index func named {other}"),
    }
}

fn indexers(names: &[&str]) -> Indexers<Item> {
    names
        .iter()
        .map(|name| ((*name).to_owned(), index_func(name)))
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Add(Item),
    Update(Item),
    Delete(Item),
    Replace(Vec<Item>),
    AddIndexers(Vec<&'static str>),
}

fn item() -> impl Strategy<Value = Item> {
    let tags = proptest::collection::vec(proptest::sample::select(&TAGS[..]), 0..4)
        .prop_map(|tags| tags.join(","));
    (
        proptest::sample::select(&NAMESPACES[..]),
        proptest::sample::select(&NAMES[..]),
        tags,
        0..1000u32,
    )
        .prop_map(|(namespace, name, tags, generation)| Item {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            tags,
            generation,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => item().prop_map(Op::Add),
        6 => item().prop_map(Op::Update),
        3 => item().prop_map(Op::Delete),
        1 => proptest::collection::vec(item(), 0..8).prop_map(Op::Replace),
        1 => proptest::sample::subsequence(&INDEX_NAMES[1..], 1..=2).prop_map(Op::AddIndexers),
    ]
}

/// The model: objects by key, and the names of the registered indexes.
struct Model {
    items: BTreeMap<String, Arc<Item>>,
    indexes: BTreeSet<&'static str>,
}

impl Model {
    /// Recomputed from scratch: value to keys, for one index.
    fn index(&self, name: &str) -> BTreeMap<String, BTreeSet<String>> {
        let func = index_func(name);
        let mut index: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (key, item) in &self.items {
            for value in func(item) {
                index.entry(value).or_default().insert(key.clone());
            }
        }
        index
    }
}

fn key(item: &Item) -> String {
    meta_namespace_key_func(item).expect("test items always have a name")
}

fn sorted_keys(items: &[Arc<Item>]) -> Vec<String> {
    let mut keys: Vec<String> = items.iter().map(|item| key(item)).collect();
    keys.sort();
    keys
}

fn every_key() -> Vec<String> {
    NAMESPACES
        .iter()
        .flat_map(|namespace| {
            NAMES.iter().map(move |name| match namespace {
                Some(namespace) => format!("{namespace}/{name}"),
                None => (*name).to_owned(),
            })
        })
        .collect()
}

fn every_value() -> Vec<String> {
    ["red", "green", "blue", "", "a", "b", "absent"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// Whether `got` is `want`: the same `Arc` from the default cache, an equal object from a
/// compact one (which decodes copies).
fn same(identical: bool, got: &Arc<Item>, want: &Arc<Item>) -> bool {
    if identical {
        Arc::ptr_eq(got, want)
    } else {
        got == want
    }
}

fn check(
    cache: &dyn Indexer<Item>,
    identical: bool,
    model: &Model,
    probes: &[Item],
) -> Result<(), TestCaseError> {
    let all = cache.list();
    for item in &all {
        prop_assert!(
            same(identical, item, &model.items[&key(item)]),
            "list returns the stored object"
        );
    }
    let mut listed = sorted_keys(&all);
    let model_keys: Vec<String> = model.items.keys().cloned().collect();
    prop_assert_eq!(&listed, &model_keys, "list");
    listed = CacheReader::list_keys(cache);
    listed.sort();
    prop_assert_eq!(&listed, &model_keys, "list_keys");
    prop_assert_eq!(cache.len(), model.items.len());

    for key in every_key() {
        let got = CacheReader::get_by_key(cache, &key);
        match (got, model.items.get(&key)) {
            (None, None) => {}
            (Some(got), Some(want)) => {
                prop_assert!(same(identical, &got, want), "get_by_key {}", key);
            }
            (got, want) => prop_assert!(false, "get_by_key {key}: got {got:?}, want {want:?}"),
        }
        match (
            cache.get_lazy(&key).map(|old| old.get()),
            model.items.get(&key),
        ) {
            (None, None) => {}
            (Some(Some(got)), Some(want)) => {
                prop_assert!(same(identical, &got, want), "get_lazy {}", key);
            }
            (got, want) => prop_assert!(false, "get_lazy {key}: got {got:?}, want {want:?}"),
        }
    }

    let registered: BTreeSet<String> = cache.indexers().into_keys().collect();
    let model_registered: BTreeSet<String> = model
        .indexes
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    prop_assert_eq!(registered, model_registered);

    for name in INDEX_NAMES {
        if !model.indexes.contains(name) {
            prop_assert_eq!(
                cache.by_index(name, "red").unwrap_err(),
                Error::IndexNotFound { name: name.into() }
            );
            prop_assert!(cache.index_keys(name, "red").is_err());
            prop_assert!(cache.index(name, &probes[0]).is_err());
            prop_assert!(cache.list_index_func_values(name).is_empty());
            continue;
        }
        let index = model.index(name);
        let mut values = cache.list_index_func_values(name);
        values.sort();
        let model_values: Vec<String> = index.keys().cloned().collect();
        prop_assert_eq!(values, model_values, "list_index_func_values {}", name);

        for value in every_value() {
            let want: Vec<String> = index
                .get(&value)
                .map(|keys| keys.iter().cloned().collect())
                .unwrap_or_default();
            let by_index = cache.by_index(name, &value).unwrap();
            prop_assert_eq!(
                sorted_keys(&by_index),
                want.clone(),
                "by_index {} {:?}",
                name,
                value
            );
            for item in &by_index {
                prop_assert!(
                    same(identical, item, &model.items[&key(item)]),
                    "by_index returns the stored object"
                );
            }
            let mut index_keys = cache.index_keys(name, &value).unwrap();
            index_keys.sort();
            prop_assert_eq!(index_keys, want, "index_keys {} {:?}", name, value);
        }

        let func = index_func(name);
        for probe in probes {
            let want: Vec<String> = func(probe)
                .iter()
                .filter_map(|value| index.get(value))
                .flatten()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let got = cache.index(name, probe).unwrap();
            prop_assert_eq!(sorted_keys(&got), want, "index {} {:?}", name, probe);
        }
    }
    Ok(())
}

/// One step of a staged replace: stage an object, keep a key (by its place in
/// [`every_key`]), or register an index while the replace is staged.
#[derive(Debug, Clone)]
enum Staging {
    Stage(Item),
    Keep(usize),
    AddIndex(&'static str),
}

fn staging() -> impl Strategy<Value = Vec<Staging>> {
    proptest::collection::vec(
        prop_oneof![
            4 => item().prop_map(Staging::Stage),
            3 => (0..12usize).prop_map(Staging::Keep),
            1 => proptest::sample::select(&INDEX_NAMES[1..]).prop_map(Staging::AddIndex),
        ],
        0..12,
    )
}

/// Stages `steps` into `cache`, checking that the cache shows none of it, then commits (or,
/// without `commit`, drops) the replace and updates `model` to match.
fn staged_replace(
    cache: &Arc<dyn Indexer<Item>>,
    identical: bool,
    model: &mut Model,
    probes: &[Item],
    steps: Vec<Staging>,
    commit: bool,
) -> Result<(), TestCaseError> {
    let mut staged = Arc::clone(cache).stage_replace();
    let mut kept: BTreeMap<String, Arc<Item>> = BTreeMap::new();
    let mut listed: BTreeMap<String, Arc<Item>> = BTreeMap::new();
    for step_ in steps {
        match step_ {
            Staging::Stage(item) => {
                let item = Arc::new(item);
                staged.stage(Arc::clone(&item).into()).unwrap();
                listed.insert(key(&item), item);
            }
            Staging::Keep(at) => {
                let key = every_key()[at].clone();
                staged.keep(&key);
                if let Some(item) = model.items.get(&key) {
                    kept.insert(key, Arc::clone(item));
                }
            }
            Staging::AddIndex(name) => {
                step(&**cache, model, Op::AddIndexers(vec![name]))?;
            }
        }
        check(&**cache, identical, model, probes)?;
    }
    if commit {
        staged.commit("9").unwrap();
        // What was staged wins over what was kept.
        kept.extend(listed);
        model.items = kept;
    } else {
        drop(staged);
    }
    check(&**cache, identical, model, probes)
}

/// What an update's upsert handed back, and what the model says it replaced.
type Replaced = (Option<OldObject<Item>>, Option<Arc<Item>>);

/// Applies `op` to `cache` and `model`; an update hands back what [`Replaced`] says.
fn step(
    cache: &dyn Indexer<Item>,
    model: &mut Model,
    op: Op,
) -> Result<Option<Replaced>, TestCaseError> {
    match op {
        Op::Add(item) => {
            let item = Arc::new(item);
            cache.add(Arc::clone(&item).into()).unwrap();
            model.items.insert(key(&item), item);
        }
        Op::Update(item) => {
            let item = Arc::new(item);
            let old = cache.upsert(Arc::clone(&item).into()).unwrap();
            return Ok(Some((old, model.items.insert(key(&item), item))));
        }
        Op::Delete(item) => {
            model.items.remove(&key(&item));
            cache.delete(Arc::new(item)).unwrap();
        }
        Op::Replace(items) => {
            let items: Vec<Arc<Item>> = items.into_iter().map(Arc::new).collect();
            cache.replace(items.clone(), "7").unwrap();
            model.items = items.into_iter().map(|item| (key(&item), item)).collect();
        }
        Op::AddIndexers(names) => {
            let result = cache.add_indexers(indexers(&names));
            match names
                .iter()
                .filter(|name| model.indexes.contains(*name))
                .min()
            {
                Some(taken) => prop_assert_eq!(
                    result,
                    Err(Error::IndexerConflict {
                        name: (*taken).to_owned()
                    })
                ),
                None => {
                    prop_assert_eq!(result, Ok(()));
                    model.indexes.extend(names);
                }
            }
        }
    }
    Ok(None)
}

/// [`ItemCodec`], except that it cannot read back an item whose generation is a multiple of 4.
struct Fragile;

impl Fragile {
    fn breaks(item: &Item) -> bool {
        item.generation.is_multiple_of(4)
    }
}

impl Codec<Item> for Fragile {
    fn encode(&self, item: &Item) -> Result<Vec<u8>, CodecError> {
        ItemCodec.encode(item)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Item, CodecError> {
        let item = ItemCodec.decode(bytes)?;
        if Self::breaks(&item) {
            return Err("a fragile item".into());
        }
        Ok(item)
    }
}

/// A compact cache whose codec cannot read some of what it holds, against the model: reads
/// leave out exactly those objects, key listings and index keys keep them (but an index added
/// while one could not be read leaves it out until it is written again), an update over one
/// hands back an old object that reads as `None`, and every failed decode is counted and
/// reported with its key.
fn undecodable_objects_agree_with_the_model(
    cache: &CompactCache<Item>,
    model: &Model,
    unindexed: &BTreeSet<(String, &'static str)>,
    reported: &parking_lot::Mutex<Vec<String>>,
) -> Result<(), TestCaseError> {
    // The reads below report what they cannot decode: each report must name a fragile item.
    let before = reported.lock().len();
    let readable: BTreeMap<&String, &Arc<Item>> = model
        .items
        .iter()
        .filter(|(_, item)| !Fragile::breaks(item))
        .collect();
    let readable_keys: Vec<String> = readable.keys().map(|key| (*key).clone()).collect();
    prop_assert_eq!(sorted_keys(&cache.list()), readable_keys, "list");
    let mut keys = CacheReader::list_keys(cache);
    keys.sort();
    prop_assert_eq!(
        keys,
        model.items.keys().cloned().collect::<Vec<_>>(),
        "list_keys"
    );
    for key in every_key() {
        let got = CacheReader::get_by_key(cache, &key);
        prop_assert_eq!(
            got.as_deref(),
            readable.get(&key).map(|item| &***item),
            "get_by_key {}",
            key
        );
    }
    for name in &model.indexes {
        for (value, keys) in model.index(name) {
            let keys: BTreeSet<String> = keys
                .into_iter()
                .filter(|key| !unindexed.contains(&(key.clone(), *name)))
                .collect();
            let want: Vec<String> = keys
                .iter()
                .filter(|key| readable.contains_key(key))
                .cloned()
                .collect();
            prop_assert_eq!(
                sorted_keys(&cache.by_index(name, &value).unwrap()),
                want,
                "by_index"
            );
            let mut index_keys = cache.index_keys(name, &value).unwrap();
            index_keys.sort();
            prop_assert_eq!(
                index_keys,
                keys.into_iter().collect::<Vec<_>>(),
                "index_keys"
            );
        }
    }
    let reported = reported.lock();
    for key in &reported[before..] {
        prop_assert!(
            model
                .items
                .get(key)
                .is_some_and(|item| Fragile::breaks(item)),
            "{} was reported, and does not hold a fragile item",
            key
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn cache_agrees_with_a_recomputing_model_after_every_step(
        ops in proptest::collection::vec(op(), 1..40),
        probes in proptest::collection::vec(item(), 1..4),
        compact in proptest::option::of(0..4usize),
    ) {
        let cache = cache_under_test(compact, indexers(&["namespace"]));
        let identical = compact.is_none();
        let mut model = Model { items: BTreeMap::new(), indexes: BTreeSet::from(["namespace"]) };
        for op in ops {
            match step(&*cache, &mut model, op)? {
                Some((None, None)) | None => {}
                Some((Some(old), Some(want))) => {
                    let old = old.get().expect("every object decodes");
                    prop_assert!(same(identical, &old, &want), "upsert returns the replaced object");
                }
                Some((old, want)) => prop_assert!(false, "upsert returned {old:?}, want {want:?}"),
            }
            check(&*cache, identical, &model, &probes)?;
        }
    }

    #[test]
    fn a_staged_replace_agrees_with_the_model(
        rounds in proptest::collection::vec((op(), staging(), proptest::bool::weighted(0.8)), 1..12),
        probes in proptest::collection::vec(item(), 1..4),
        compact in proptest::option::of(0..4usize),
    ) {
        let cache: Arc<dyn Indexer<Item>> = cache_under_test(compact, indexers(&["namespace"])).into();
        let identical = compact.is_none();
        let mut model = Model { items: BTreeMap::new(), indexes: BTreeSet::from(["namespace"]) };
        for (op, steps, commit) in rounds {
            step(&*cache, &mut model, op)?;
            check(&*cache, identical, &model, &probes)?;
            staged_replace(&cache, identical, &mut model, &probes, steps, commit)?;
        }
    }

    #[test]
    fn a_compact_cache_leaves_out_and_reports_exactly_what_it_cannot_decode(
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let reported = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let cache = CompactCache::new(Arc::new(meta_namespace_key_func::<Item>), indexers(&["namespace"]), Arc::new(Fragile))
            .hot_capacity(0)
            .on_decode_failure({
                let reported = Arc::clone(&reported);
                move |error| match error {
                    Error::Decode { key, reason } if reason == "a fragile item" => {
                        reported.lock().push(key.clone());
                    }
                    other => panic!("not a decode failure: {other:?}"),
                }
            });
        let mut model = Model { items: BTreeMap::new(), indexes: BTreeSet::from(["namespace"]) };
        // Objects an index added later could not index: undecodable then, not written since.
        let mut unindexed: BTreeSet<(String, &'static str)> = BTreeSet::new();
        for op in ops {
            let failures = reported.lock().len();
            let indexes_before = model.indexes.clone();
            match &op {
                Op::Add(item) | Op::Update(item) | Op::Delete(item) => {
                    unindexed.retain(|(held, _)| *held != key(item));
                }
                Op::Replace(_) => unindexed.clear(),
                Op::AddIndexers(_) => {}
            }
            let adds_indexes = matches!(op, Op::AddIndexers(_));
            match step(&cache, &mut model, op)? {
                Some((None, None)) | None => {}
                Some((Some(old), Some(want))) => {
                    let got = old.get();
                    if Fragile::breaks(&want) {
                        prop_assert!(got.is_none(), "an old object that does not decode reads as None");
                        let new_reports = reported.lock()[failures..].to_vec();
                        prop_assert_eq!(new_reports, vec![key(&want)], "and is reported");
                    } else {
                        prop_assert_eq!(got.as_deref(), Some(&*want), "upsert returns the replaced object");
                    }
                }
                Some((old, want)) => prop_assert!(false, "upsert returned {old:?}, want {want:?}"),
            }
            let added: Vec<&'static str> = model.indexes.difference(&indexes_before).copied().collect();
            if adds_indexes && !added.is_empty() {
                // Each undecodable object is reported once, and left out of the new indexes.
                let fragile: Vec<String> = model.items.iter()
                    .filter(|(_, item)| Fragile::breaks(item))
                    .map(|(key, _)| key.clone())
                    .collect();
                let mut new_reports = reported.lock()[failures..].to_vec();
                new_reports.sort();
                prop_assert_eq!(&new_reports, &fragile, "add_indexers reports what it cannot index");
                unindexed.extend(fragile.iter().flat_map(|key| added.iter().map(move |name| (key.clone(), *name))));
            }
            undecodable_objects_agree_with_the_model(&cache, &model, &unindexed, &reported)?;
        }
    }
}
