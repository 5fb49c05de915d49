//! [`Lister`]: a read-only view of a cache ([`CacheReader`]) by label selector, name and
//! namespace.

use std::{fmt, sync::Arc};

use kube_core::{Expression, Selector};

use crate::{
    CacheReader, Error, LABEL_INDEX, NAMESPACE_INDEX, Object, Result, object_key, selector_matches,
};

/// Every object in `cache` whose labels `selector` accepts.
///
/// An empty selector (`Selector::default()`, client-go's `labels.Everything()`) returns every
/// object without looking at labels. A cache with the [`LABEL_INDEX`] answers the selector's
/// equality and `in` requirements from it and checks the rest on those candidates only;
/// without it, or for a selector with neither, every object is checked.
#[doc(alias = "ListAll")]
pub(crate) fn list_all<K, C>(cache: &C, selector: &Selector) -> Vec<Arc<K>>
where
    K: Object,
    C: CacheReader<K> + ?Sized,
{
    if selector.selects_all() {
        return cache.list();
    }
    let matches = |obj: &Arc<K>| selector_matches(selector, obj.labels());
    if let Some(candidates) = by_label_index(cache, None, selector) {
        return candidates.into_iter().filter(matches).collect();
    }
    cache.list().into_iter().filter(matches).collect()
}

/// Every object in `namespace` whose labels `selector` accepts; `""` means all namespaces.
///
/// Uses the [`NAMESPACE_INDEX`] when the cache has one, together with the [`LABEL_INDEX`]
/// when it has that too (one compound index query), and scans every object otherwise, as
/// client-go's `ListAllByNamespace` does (it logs a warning on the slow path; this layer has no
/// logger, so register the namespace index wherever namespaced listing is frequent).
#[doc(alias = "ListAllByNamespace")]
pub(crate) fn list_all_by_namespace<K, C>(
    cache: &C,
    namespace: &str,
    selector: &Selector,
) -> Vec<Arc<K>>
where
    K: Object,
    C: CacheReader<K> + ?Sized,
{
    if namespace.is_empty() {
        return list_all(cache, selector);
    }
    // A custom index registered under the namespace index's name could hold anything; the
    // namespace check keeps the lister's promise whatever the index func does.
    let matches = |obj: &Arc<K>| {
        obj.namespace() == Some(namespace) && selector_matches(selector, obj.labels())
    };
    if let Some(candidates) = by_label_index(cache, Some(namespace), selector) {
        return candidates.into_iter().filter(matches).collect();
    }
    match cache.by_index(NAMESPACE_INDEX, namespace) {
        Ok(candidates) => candidates.into_iter().filter(matches).collect(),
        Err(_) => cache.list().into_iter().filter(matches).collect(),
    }
}

/// The candidates for `selector` (in `namespace`, when given) from the label index: the
/// objects indexed under one allowed value of every equality and `in` requirement. `None`
/// when the selector has no such requirement or the cache lacks an index it needs.
fn by_label_index<K, C>(
    cache: &C,
    namespace: Option<&str>,
    selector: &Selector,
) -> Option<Vec<Arc<K>>>
where
    C: CacheReader<K> + ?Sized,
{
    let terms: Vec<Vec<String>> = selector
        .clone()
        .into_iter()
        .filter_map(|expression| match expression {
            Expression::Equal(key, value) => Some(vec![format!("{key}={value}")]),
            Expression::In(key, values) => Some(
                values
                    .into_iter()
                    .map(|value| format!("{key}={value}"))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    if terms.is_empty() {
        return None;
    }
    let values: Vec<Vec<&str>> = terms
        .iter()
        .map(|term| term.iter().map(String::as_str).collect())
        .collect();
    let namespace = namespace.map(|namespace| [namespace]);
    let mut query: Vec<(&str, &[&str])> = Vec::with_capacity(values.len() + 1);
    if let Some(namespace) = &namespace {
        query.push((NAMESPACE_INDEX, namespace.as_slice()));
    }
    query.extend(values.iter().map(|term| (LABEL_INDEX, term.as_slice())));
    cache.by_indexes(&query).ok()
}

/// A typed, read-only view of a cache: list by label selector, get by name, and narrow to one
/// namespace with [`namespaced`](Self::namespaced).
///
/// A lister reads every namespace until narrowed; then [`list`](Self::list) and
/// [`get`](Self::get) look only in its namespace. The empty namespace `""` is every namespace,
/// where `get` finds cluster-scoped objects.
///
/// Cheap to clone: it holds an `Arc` to the cache an informer keeps up to date, and every read
/// sees the cache as it is at that moment.
///
/// The Rust shape of client-go's `GenericLister` and `GenericNamespaceLister`, and of the
/// generated typed listers (`PodLister`, `PodNamespaceLister` and friends), with `ListAll` /
/// `ListAllByNamespace` behind [`list`](Self::list).
#[doc(alias = "GenericLister")]
#[doc(alias = "GenericNamespaceLister")]
#[doc(alias = "ResourceIndexer")]
#[doc(alias = "ListAll")]
#[doc(alias = "ListAllByNamespace")]
pub struct Lister<K> {
    cache: Arc<dyn CacheReader<K>>,
    /// `""` for every namespace.
    namespace: String,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            cache: Arc::clone(&self.cache),
            namespace: self.namespace.clone(),
        }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<K: Object> Lister<K> {
    /// A lister over `cache`, in every namespace; an `Arc<Cache<K>>` or an informer's cache
    /// coerces to the argument.
    #[doc(alias = "NewGenericLister")]
    pub fn new(cache: Arc<dyn CacheReader<K>>) -> Self {
        Self {
            cache,
            namespace: String::new(),
        }
    }

    /// Every object in the lister's namespace (every namespace unless narrowed) whose labels
    /// `selector` accepts; an empty selector (`Selector::default()`, client-go's
    /// `labels.Everything()`) accepts every object.
    ///
    /// A cache with the label index ([`label_indexers`](crate::label_indexers)) answers the
    /// selector's equality and `in` requirements from it, and one with the
    /// [`NAMESPACE_INDEX`] narrows to the namespace from it; the rest is checked on those
    /// candidates only. Without them every object is checked, as client-go's
    /// `ListAllByNamespace` does (it logs a warning on that slow path; this layer has no
    /// logger, so register the namespace index wherever namespaced listing is frequent).
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        list_all_by_namespace(self.cache.as_ref(), &self.namespace, selector)
    }

    /// The object named `name` in the lister's namespace; unless narrowed, the cluster-scoped
    /// object named `name`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when no such object is stored, naming the namespace searched. A
    /// namespaced object is never found by a lister that was not narrowed to its namespace.
    pub fn get(&self, name: &str) -> Result<Arc<K>> {
        let key = object_key(Some(&self.namespace), name);
        self.cache.get_by_key(&key).ok_or_else(|| Error::NotFound {
            namespace: (!self.namespace.is_empty()).then(|| self.namespace.clone()),
            name: name.to_owned(),
        })
    }

    /// The same lister narrowed to `namespace`; `""` lists every namespace and gets
    /// cluster-scoped objects.
    #[doc(alias = "ByNamespace")]
    #[must_use]
    pub fn namespaced(&self, namespace: impl Into<String>) -> Self {
        Self {
            cache: Arc::clone(&self.cache),
            namespace: namespace.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kube_core::{Expression, ObjectMeta};

    use super::*;
    use crate::{Cache, Indexers, Store, default_key_func, parse_selector};

    fn pod(namespace: &str, name: &str, labels: &[(&str, &str)]) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    fn names<K: Object>(objects: &[Arc<K>]) -> BTreeSet<String> {
        objects
            .iter()
            .filter_map(|obj| obj.name().map(str::to_owned))
            .collect()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    /// Both shapes client-go tests listers against: with and without the namespace index.
    fn caches() -> [Arc<Cache<Pod>>; 2] {
        [
            Arc::new(Cache::with_namespace_index()),
            Arc::new(Cache::new(default_key_func(), Indexers::new())),
        ]
    }

    /// Ported from client-go's `TestStoreToPodLister`.
    #[test]
    fn pod_lister_finds_pods_by_namespace_and_label_with_or_without_the_index() {
        for cache in caches() {
            for id in ["foo", "bar", "baz"] {
                cache.add(pod("other", id, &[("name", id)]).into()).unwrap();
            }
            cache
                .add(pod("default", "quux", &[("name", "quux")]).into())
                .unwrap();
            let lister = Lister::<Pod>::new(cache.clone());

            let default_pods = lister.namespaced("default").list(&Selector::default());
            assert_eq!(names(&default_pods), set(&["quux"]));

            for id in ["foo", "bar", "baz"] {
                let selector: Selector = [("name".to_owned(), id.to_owned())].into_iter().collect();
                assert_eq!(names(&lister.list(&selector)), set(&[id]));
                let got = lister.namespaced("other").get(id).unwrap();
                assert_eq!(got.metadata.name.as_deref(), Some(id));
            }

            let err = lister.namespaced("").get("qux").unwrap_err();
            assert_eq!(
                err,
                Error::NotFound {
                    namespace: None,
                    name: "qux".into()
                }
            );
        }
    }

    /// Ported from client-go's `TestStoreToReplicationControllerLister` namespace cases.
    #[test]
    fn the_empty_namespace_lists_every_namespace() {
        for cache in caches() {
            cache.add(pod("bar", "foo", &[]).into()).unwrap();
            cache.add(pod("hmm", "hmm", &[]).into()).unwrap();
            let lister = Lister::<Pod>::new(cache);
            assert_eq!(
                names(&lister.namespaced("").list(&Selector::default())),
                set(&["foo", "hmm"])
            );
            assert_eq!(
                names(&lister.namespaced("hmm").list(&Selector::default())),
                set(&["hmm"])
            );
            assert_eq!(
                names(&lister.list(&Selector::default())),
                set(&["foo", "hmm"])
            );
            assert!(
                lister
                    .namespaced("nowhere")
                    .list(&Selector::default())
                    .is_empty()
            );
        }
    }

    #[test]
    fn namespaced_lists_filter_by_selector_on_both_paths() {
        for cache in caches() {
            cache
                .add(pod("a", "web-0", &[("app", "web"), ("tier", "front")]).into())
                .unwrap();
            cache
                .add(pod("a", "web-1", &[("app", "web")]).into())
                .unwrap();
            cache
                .add(pod("a", "db-0", &[("app", "db")]).into())
                .unwrap();
            cache
                .add(pod("b", "web-0", &[("app", "web")]).into())
                .unwrap();
            cache.add(pod("b", "bare", &[]).into()).unwrap();
            let lister = Lister::<Pod>::new(cache);

            let web = parse_selector("app=web").unwrap();
            assert_eq!(
                names(&lister.namespaced("a").list(&web)),
                set(&["web-0", "web-1"])
            );
            assert_eq!(lister.list(&web).len(), 3);

            let not_front = parse_selector("app in (web,db),tier!=front").unwrap();
            assert_eq!(
                names(&lister.namespaced("a").list(&not_front)),
                set(&["web-1", "db-0"])
            );

            let unlabelled = parse_selector("!app").unwrap();
            assert_eq!(
                names(&lister.namespaced("b").list(&unlabelled)),
                set(&["bare"])
            );
        }
    }

    #[test]
    fn a_namespace_index_holding_other_values_cannot_leak_objects_across_namespaces() {
        let mut indexers: Indexers<Pod> = Indexers::new();
        // Misnamed on purpose: every pod lands under "a", whatever its namespace.
        indexers.insert(
            NAMESPACE_INDEX.to_owned(),
            Arc::new(|_: &Pod| vec!["a".to_owned()]),
        );
        let cache = Arc::new(Cache::new(default_key_func(), indexers));
        cache.add(pod("a", "mine", &[]).into()).unwrap();
        cache.add(pod("b", "theirs", &[]).into()).unwrap();
        let lister = Lister::<Pod>::new(cache);
        assert_eq!(
            names(&lister.namespaced("a").list(&Selector::default())),
            set(&["mine"])
        );
    }

    #[test]
    fn cluster_scoped_objects_are_got_by_name_and_missing_ones_are_not_found() {
        let cache = Arc::new(Cache::<Namespace>::default());
        let namespace = |name: &str, labels: BTreeMap<String, String>| {
            Arc::new(Namespace {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    labels: Some(labels),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            })
        };
        cache
            .add(
                namespace(
                    "kube-system",
                    BTreeMap::from([("system".to_owned(), "true".to_owned())]),
                )
                .into(),
            )
            .unwrap();
        cache
            .add(namespace("default", BTreeMap::new()).into())
            .unwrap();
        let lister = Lister::<Namespace>::new(cache);

        assert_eq!(
            lister.get("kube-system").unwrap().metadata.name.as_deref(),
            Some("kube-system")
        );
        let err = lister.get("absent").unwrap_err();
        assert_eq!(
            err,
            Error::NotFound {
                namespace: None,
                name: "absent".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "cluster-scoped object absent not found in the cache"
        );
        let system = Selector::from(Expression::Exists("system".into()));
        assert_eq!(names(&lister.list(&system)), set(&["kube-system"]));
    }

    #[test]
    fn a_namespaced_get_reports_the_namespace_it_searched() {
        let cache = Arc::new(Cache::<Pod>::with_namespace_index());
        cache.add(pod("a", "x", &[]).into()).unwrap();
        let lister = Lister::<Pod>::new(cache);
        let err = lister.namespaced("b").get("x").unwrap_err();
        assert_eq!(
            err,
            Error::NotFound {
                namespace: Some("b".into()),
                name: "x".into()
            }
        );
        assert_eq!(err.to_string(), "object b/x not found in the cache");
        assert!(
            lister.get("x").is_err(),
            "a namespaced object is not found by bare name"
        );
    }

    #[test]
    fn listers_see_writes_made_after_they_were_built() {
        let cache = Arc::new(Cache::<Pod>::with_namespace_index());
        let lister = Lister::<Pod>::new(cache.clone());
        let in_a = lister.namespaced("a");
        assert!(in_a.get("late").is_err());
        cache.add(pod("a", "late", &[]).into()).unwrap();
        assert!(in_a.get("late").is_ok());
        let cloned = in_a.clone();
        assert_eq!(cloned.list(&Selector::default()).len(), 1);
        assert_eq!(in_a.list(&Selector::default()).len(), 1);
        assert_eq!(lister.list(&Selector::default()).len(), 1);
    }

    /// The label semantics of apimachinery, written out independently of kube-core's matcher.
    fn reference_match(expression: &Expression, labels: &BTreeMap<String, String>) -> bool {
        match expression {
            Expression::Equal(key, value) => labels.get(key) == Some(value),
            Expression::NotEqual(key, value) => labels.get(key) != Some(value),
            Expression::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Expression::NotIn(key, values) => !labels.get(key).is_some_and(|v| values.contains(v)),
            Expression::Exists(key) => labels.contains_key(key),
            Expression::DoesNotExist(key) => !labels.contains_key(key),
        }
    }

    fn expression() -> impl proptest::strategy::Strategy<Value = Expression> {
        use proptest::prelude::*;
        let key = proptest::sample::select(vec!["app", "tier"]).prop_map(str::to_owned);
        let value = proptest::sample::select(vec!["web", "db", ""]).prop_map(str::to_owned);
        let values =
            proptest::collection::btree_set(proptest::sample::select(vec!["web", "db"]), 1..3)
                .prop_map(|set| set.into_iter().map(str::to_owned).collect::<BTreeSet<_>>());
        (key, value, values, 0..6u8).prop_map(|(key, value, values, op)| match op {
            0 => Expression::Equal(key, value),
            1 => Expression::NotEqual(key, value),
            2 => Expression::In(key, values),
            3 => Expression::NotIn(key, values),
            4 => Expression::Exists(key),
            _ => Expression::DoesNotExist(key),
        })
    }

    proptest::proptest! {
        /// Indexed and scanning listers return exactly what filtering every object by hand does.
        #[test]
        fn listers_agree_with_a_brute_force_filter_with_and_without_the_index(
            pods in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["a", "b", "c"]),
                    0..12usize,
                    proptest::option::of(proptest::sample::select(vec!["web", "db", ""])),
                    proptest::option::of(proptest::sample::select(vec!["front", "back"])),
                ),
                0..30,
            ),
            expressions in proptest::collection::vec(expression(), 0..3),
            namespace in proptest::sample::select(vec!["", "a", "b", "c", "d"]),
        ) {
            let selector: Selector = expressions.iter().cloned().collect();
            let mut model: BTreeMap<(String, String), BTreeMap<String, String>> = BTreeMap::new();
            let [indexed, scanned] = caches();
            for (ns, id, app, tier) in pods {
                let mut labels = Vec::new();
                if let Some(app) = app {
                    labels.push(("app", app));
                }
                if let Some(tier) = tier {
                    labels.push(("tier", tier));
                }
                let name = format!("pod-{id}");
                let pod = pod(ns, &name, &labels);
                indexed.add(Arc::clone(&pod).into()).unwrap();
                scanned.add(pod.into()).unwrap();
                model.insert(
                    (ns.to_owned(), name),
                    labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                );
            }
            let want: BTreeSet<(String, String)> = model
                .iter()
                .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
                .filter(|(_, labels)| expressions.iter().all(|e| reference_match(e, labels)))
                .map(|(key, _)| key.clone())
                .collect();
            let keyed = |pods: Vec<Arc<Pod>>| -> BTreeSet<(String, String)> {
                pods.iter()
                    .map(|pod| {
                        (
                            pod.metadata.namespace.clone().unwrap_or_default(),
                            pod.metadata.name.clone().unwrap_or_default(),
                        )
                    })
                    .collect()
            };
            for cache in [indexed, scanned] {
                let lister = Lister::<Pod>::new(cache);
                proptest::prop_assert_eq!(&keyed(lister.namespaced(namespace).list(&selector)), &want);
                if namespace.is_empty() {
                    proptest::prop_assert_eq!(&keyed(lister.list(&selector)), &want);
                }
            }
        }
    }
}
