//! Property: a cache with the label index answers every label selector, with or without a
//! namespace, exactly as a scan of every object does (the model), and compound index queries
//! agree with filtering every object by each term.

use std::{collections::BTreeMap, sync::Arc};

use kinformer_store::{
    Cache, CacheReader, Indexers, Lister, NAMESPACE_INDEX, Object, Store, label_indexers,
    meta_namespace_key_func, namespace_indexers,
};
use kube_core::{Expression, Selector, SelectorExt};
use proptest::prelude::*;

#[derive(Debug)]
struct Item {
    namespace: String,
    name: String,
    labels: BTreeMap<String, String>,
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
        Some(&self.labels)
    }
}

/// The label index's name, as [`label_indexers`] documents it.
const LABEL_INDEX: &str = "labels";
const KEYS: [&str; 3] = ["app", "tier", "team"];
const VALUES: [&str; 3] = ["x", "y", ""];
const NAMESPACES: [&str; 2] = ["a", "b"];

fn item() -> impl Strategy<Value = Item> {
    (
        0..2usize,
        0..20usize,
        prop::collection::btree_map(0..3usize, 0..3usize, 0..3),
    )
        .prop_map(|(namespace, name, labels)| Item {
            namespace: NAMESPACES[namespace].to_owned(),
            name: format!("item-{name}"),
            labels: labels
                .into_iter()
                .map(|(key, value)| (KEYS[key].to_owned(), VALUES[value].to_owned()))
                .collect(),
        })
}

fn expression() -> impl Strategy<Value = Expression> {
    let key = (0..3usize).prop_map(|key| KEYS[key].to_owned());
    let value = (0..3usize).prop_map(|value| VALUES[value].to_owned());
    let values = prop::collection::btree_set(value.clone(), 1..3);
    prop_oneof![
        (key.clone(), value.clone()).prop_map(|(k, v)| Expression::Equal(k, v)),
        (key.clone(), value).prop_map(|(k, v)| Expression::NotEqual(k, v)),
        (key.clone(), values.clone()).prop_map(|(k, v)| Expression::In(k, v)),
        (key.clone(), values).prop_map(|(k, v)| Expression::NotIn(k, v)),
        key.clone().prop_map(Expression::Exists),
        key.prop_map(Expression::DoesNotExist),
    ]
}

fn sorted_names(items: &[Arc<Item>]) -> Vec<String> {
    let mut names: Vec<String> = items
        .iter()
        .map(|item| format!("{}/{}", item.namespace, item.name))
        .collect();
    names.sort();
    names
}

proptest! {
    #[test]
    fn the_label_index_answers_like_a_scan(
        items in prop::collection::vec(item(), 0..40),
        expressions in prop::collection::vec(expression(), 0..4),
    ) {
        let mut indexers: Indexers<Item> = namespace_indexers();
        indexers.extend(label_indexers());
        let indexed = Arc::new(Cache::new(Arc::new(meta_namespace_key_func::<Item>), indexers));
        let scanned: Arc<Cache<Item>> = Arc::new(Cache::new(Arc::new(meta_namespace_key_func::<Item>), namespace_indexers()));
        let (indexed_items, scanned_items) =
            (Lister::<Item>::new(indexed.clone()), Lister::<Item>::new(scanned.clone()));
        for item in items {
            let item = Arc::new(item);
            indexed.update(Arc::clone(&item).into()).unwrap();
            scanned.update(item.into()).unwrap();
        }
        let selector: Selector = expressions.into_iter().collect();
        let model: Vec<Arc<Item>> = scanned
            .list()
            .into_iter()
            .filter(|item| selector.matches(&item.labels))
            .collect();
        prop_assert_eq!(sorted_names(&indexed_items.list(&selector)), sorted_names(&model));
        prop_assert_eq!(sorted_names(&scanned_items.list(&selector)), sorted_names(&model));
        for namespace in NAMESPACES {
            let in_namespace: Vec<Arc<Item>> = model
                .iter()
                .filter(|item| item.namespace == namespace)
                .cloned()
                .collect();
            prop_assert_eq!(
                sorted_names(&indexed_items.namespaced(namespace).list(&selector)),
                sorted_names(&in_namespace)
            );
        }

        // A compound query: namespace a, and app=x or app=y, and tier=x.
        let compound = indexed
            .by_indexes(&[
                (NAMESPACE_INDEX, &["a"]),
                (LABEL_INDEX, &["app=x", "app=y"]),
                (LABEL_INDEX, &["tier=x"]),
            ])
            .unwrap();
        let want: Vec<Arc<Item>> = indexed
            .list()
            .into_iter()
            .filter(|item| {
                item.namespace == "a"
                    && matches!(item.labels.get("app").map(String::as_str), Some("x" | "y"))
                    && item.labels.get("tier").map(String::as_str) == Some("x")
            })
            .collect();
        prop_assert_eq!(compound.len(), want.len(), "no object twice");
        prop_assert_eq!(sorted_names(&compound), sorted_names(&want));
        // No term is everything; a term without values is nothing.
        prop_assert_eq!(indexed.by_indexes(&[]).unwrap().len(), indexed.len());
        prop_assert!(indexed.by_indexes(&[(LABEL_INDEX, &[])]).unwrap().is_empty());
    }
}
