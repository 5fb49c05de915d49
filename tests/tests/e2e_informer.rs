//! kinformer's informers and factory against a real kube-apiserver (`cargo xtask e2e --local |
//! --kind | --kubeconfig PATH`) and against kinformer-testing's fake server (plain `cargo test`).
//!
//! Where `e2e_conformance.rs` checks the API behaviours the reflector relies on, this suite
//! checks what a controller sees: caches that converge to the server, handlers that get every
//! change once and in order, relists that turn deletions missed while disconnected into
//! tombstones, and list errors that reach the watch error handler and are retried with backoff.
//! Every test runs in a fresh namespace (and deletes the CRDs it registers); every wait is
//! bounded, since the real server is slower than the fake. docs/e2e.md lists what each proves.

// The conformance suite uses the rest of the shared module.
#[path = "e2e_support/config_maps.rs"]
mod config_maps;
#[allow(
    dead_code,
    reason = "e2e_support serves every e2e binary; this one uses part of it"
)]
mod e2e_support;

use std::{
    collections::BTreeMap,
    fmt::Debug,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;
use config_maps::{config_map, value_of};
use e2e_support::{Ctx, create_widget, create_widget_crd, eventually, run};
use futures::StreamExt as _;
use k8s_openapi::api::{
    coordination::v1::{Lease, LeaseSpec},
    core::v1::{ConfigMap, Secret, ServiceAccount},
    rbac::v1::{Role, RoleBinding},
};
use kinformer::reflector::WireFormat;
use kinformer::{
    factory::{FactoryOptions, SharedInformerFactory},
    informer::{InformerOptions, SharedIndexInformer},
    processor::HandlerFuncs,
    reflector::{
        Error as ReflectorError, KubeListerWatcher, ListOptions, ListPage, ListerWatcher,
        Result as ReflectorResult, WatchStream,
    },
    store::{IndexFunc, Indexers, ObjectOrTombstone},
    wait::CancellationToken,
};
use kube_client::{
    Api, Resource, ResourceExt as _,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams},
    core::ObjectMeta,
};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// The longest a test waits for a cache or a handler to catch up with the server.
const CONVERGE: Duration = Duration::from_secs(30);

/// The ConfigMap kube-controller-manager puts in every namespace of a full cluster (kind, a
/// kubeconfig); the fake and the local control plane have none. Handler logs leave it out.
const ROOT_CA: &str = "kube-root-ca.crt";

/// What a handler saw, one line per notification.
type Log = Arc<Mutex<Vec<String>>>;

fn lines(log: &Log) -> Vec<String> {
    log.lock()
        .expect("a handler never panics holding the log")
        .iter()
        .filter(|line| !line.contains(ROOT_CA))
        .cloned()
        .collect()
}

fn push(log: &Log, line: String) {
    log.lock()
        .expect("a handler never panics holding the log")
        .push(line);
}

fn config_maps(ctx: &Ctx) -> Api<ConfigMap> {
    Api::namespaced(ctx.client(), &ctx.namespace)
}

/// Writes `value` into an existing ConfigMap, returning the stored object.
async fn set_value(api: &Api<ConfigMap>, current: &ConfigMap, value: &str) -> ConfigMap {
    let mut changed = current.clone();
    changed.data = Some(BTreeMap::from([("key".to_owned(), value.to_owned())]));
    api.replace(&current.name_any(), &PostParams::default(), &changed)
        .await
        .expect("update")
}

/// A handler writing `initial NAME VALUE`, `add NAME VALUE`, `update NAME OLD->NEW`,
/// `delete NAME VALUE` or `tombstone NAME` into `log`.
fn config_map_recorder(log: &Log) -> HandlerFuncs<ConfigMap> {
    let (added, updated, deleted) = (log.clone(), log.clone(), log.clone());
    HandlerFuncs::new()
        .add_func(move |object: Arc<ConfigMap>, initial| {
            let verb = if initial.is_initial_list() {
                "initial"
            } else {
                "add"
            };
            push(
                &added,
                format!("{verb} {} {}", object.name_any(), value_of(&object)),
            );
        })
        .update_func(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
            push(
                &updated,
                format!(
                    "update {} {}->{}",
                    new.name_any(),
                    value_of(&old),
                    value_of(&new)
                ),
            );
        })
        .delete_func(move |gone: ObjectOrTombstone<ConfigMap>| {
            let line = match &gone {
                ObjectOrTombstone::Object(object) => {
                    format!("delete {} {}", object.name_any(), value_of(object))
                }
                ObjectOrTombstone::Tombstone(tombstone) => {
                    format!("tombstone {}", tombstone.obj.name_any())
                }
            };
            push(&deleted, line);
        })
}

/// A handler writing `add NAME`, `update NAME`, `delete NAME` or `tombstone NAME` into `log`.
fn name_recorder<K: Resource + Send + Sync + 'static>(log: &Log) -> HandlerFuncs<K> {
    let (added, updated, deleted) = (log.clone(), log.clone(), log.clone());
    HandlerFuncs::new()
        .add_func(move |object: Arc<K>, _initial| {
            push(&added, format!("add {}", object.name_any()));
        })
        .update_func(move |_old: Arc<K>, new: Arc<K>| {
            push(&updated, format!("update {}", new.name_any()));
        })
        .delete_func(move |gone: ObjectOrTombstone<K>| {
            let line = match &gone {
                ObjectOrTombstone::Object(object) => format!("delete {}", object.name_any()),
                ObjectOrTombstone::Tombstone(tombstone) => {
                    format!("tombstone {}", tombstone.obj.name_any())
                }
            };
            push(&deleted, line);
        })
}

/// `namespace/name@resourceVersion` of an object, the way a cache and the server can be
/// compared.
fn versioned_key<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    format!(
        "{}/{}@{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.resource_version.as_deref().unwrap_or_default()
    )
}

async fn server_state<K>(api: &Api<K>) -> Result<Vec<String>, String>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|err| format!("listing on the server: {err}"))?;
    let mut keys: Vec<String> = list.items.iter().map(versioned_key).collect();
    keys.sort();
    Ok(keys)
}

fn cache_state<K: Resource + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
) -> Vec<String> {
    let mut keys: Vec<String> = informer
        .cache()
        .list()
        .iter()
        .map(|object| versioned_key(object.as_ref()))
        .collect();
    keys.sort();
    keys
}

/// Waits until `informer`'s cache holds exactly what the server lists, at the same
/// resourceVersions.
async fn converges<K, C>(what: &str, informer: &SharedIndexInformer<C>, api: &Api<K>)
where
    K: Resource + Clone + DeserializeOwned + Debug,
    C: Resource + Send + Sync + 'static,
{
    eventually(what, CONVERGE, || async move {
        let server = server_state(api).await?;
        let cached = cache_state(informer);
        if server == cached {
            Ok(())
        } else {
            Err(format!("server {server:?}, cache {cached:?}"))
        }
    })
    .await;
}

/// Waits until `log` (without the root CA ConfigMap) is exactly `expected`.
async fn logs_exactly(what: &str, log: &Log, expected: &[&str]) {
    eventually(what, CONVERGE, || async move {
        let seen = lines(log);
        if seen == expected {
            Ok(())
        } else {
            Err(format!("saw {seen:?}, expected {expected:?}"))
        }
    })
    .await;
}

/// Waits until a `resourceVersion=0` list (what an informer's first list asks for, served from
/// kube-apiserver's watch cache) is at least as new as `written`. The watch cache trails etcd
/// by a moment, so without this an object written just before start could arrive through the
/// watch (an add) rather than the list (an initial add).
async fn watch_cache_has<K>(api: &Api<K>, written: &K)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let wanted = number(written.meta().resource_version.as_deref());
    eventually(
        "the watch cache has the last write",
        CONVERGE,
        || async move {
            let list = api
                .list(&ListParams::default().match_any())
                .await
                .map_err(|err| format!("listing at resourceVersion 0: {err}"))?;
            let served = number(list.metadata.resource_version.as_deref());
            (served >= wanted)
                .then_some(())
                .ok_or_else(|| format!("served {served}, written {wanted}"))
        },
    )
    .await;
}

/// kube-apiserver's and the fake's resourceVersions are numbers (they are opaque to clients,
/// but this suite compares them to know what a server has caught up with).
fn number(resource_version: Option<&str>) -> u64 {
    resource_version
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("resourceVersion {resource_version:?} is not a number"))
}

/// Registers a namespaced `Widget` CRD unique to this test, deleted afterwards, and waits until
/// it is Established.
async fn widget_crd(ctx: &Ctx) -> ApiResource {
    create_widget_crd(ctx, &format!("e2e-{}.kinformer.dev", ctx.unique())).await
}

fn named(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(
            labels
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

/// Runs `informer` until the returned token is cancelled; the handle ends with its result.
fn spawn_informer<K: Resource + Clone + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<kinformer::informer::Result<()>>,
) {
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    (token, running)
}

async fn stop_informer(
    token: &CancellationToken,
    running: tokio::task::JoinHandle<kinformer::informer::Result<()>>,
) {
    token.cancel();
    tokio::time::timeout(CONVERGE, running)
        .await
        .expect("the informer stops promptly once cancelled")
        .expect("the informer task did not panic")
        .expect("the informer ran to a clean stop");
}

async fn synced_within<K: Resource + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
    within: Duration,
) -> bool {
    let token = CancellationToken::new();
    tokio::time::timeout(within, informer.wait_for_cache_sync(&token))
        .await
        .unwrap_or(false)
}

#[tokio::test]
async fn a_namespaced_factory_syncs_built_in_types_a_crd_and_a_metadata_only_informer() {
    run("factory", |ctx| async move {
        let resource = widget_crd(&ctx).await;
        let config_maps = config_maps(&ctx);
        let leases: Api<Lease> = Api::namespaced(ctx.client(), &ctx.namespace);
        let widgets: Api<DynamicObject> =
            Api::namespaced_with(ctx.client(), &ctx.namespace, &resource);
        let accounts: Api<ServiceAccount> = Api::namespaced(ctx.client(), &ctx.namespace);
        let lease = |name: &str| Lease {
            metadata: named(name, &[]),
            spec: Some(LeaseSpec {
                holder_identity: Some("e2e".to_owned()),
                ..LeaseSpec::default()
            }),
        };
        let account = |name: &str| ServiceAccount {
            metadata: named(name, &[("role", "robot")]),
            ..ServiceAccount::default()
        };
        let post = PostParams::default();
        create_widget(&widgets, &resource, "w-1", 1).await;
        config_maps
            .create(&post, &config_map("cm-1", "v1", &[]))
            .await
            .expect("create cm-1");
        leases
            .create(&post, &lease("lease-1"))
            .await
            .expect("create lease-1");
        accounts
            .create(&post, &account("sa-1"))
            .await
            .expect("create sa-1");

        let factory = SharedInformerFactory::new(
            ctx.client(),
            FactoryOptions::default()
                .wire_format(WireFormat::from_env())
                .namespace(ctx.namespace.clone()),
        );
        let cm_informer = factory.informer::<ConfigMap>().expect("informer");
        let lease_informer = factory.informer::<Lease>().expect("informer");
        let widget_informer = factory.dynamic_informer(&resource).expect("informer");
        let account_informer = factory
            .metadata_informer::<ServiceAccount>()
            .expect("informer");
        factory.start().expect("start");
        let synced = factory.wait_for_cache_sync_timeout(CONVERGE).await;
        let unsynced: Vec<String> = synced
            .iter()
            .filter(|(_, synced)| !**synced)
            .map(|(key, _)| key.to_string())
            .collect();
        assert_eq!(synced.len(), 4, "one informer per type");
        assert!(unsynced.is_empty(), "not synced: {unsynced:?}");

        converges("ConfigMaps after sync", &cm_informer, &config_maps).await;
        converges("Leases after sync", &lease_informer, &leases).await;
        converges("Widgets after sync", &widget_informer, &widgets).await;
        converges("ServiceAccounts after sync", &account_informer, &accounts).await;

        config_maps
            .create(&post, &config_map("cm-2", "v1", &[]))
            .await
            .expect("create cm-2");
        config_maps
            .delete("cm-1", &DeleteParams::default())
            .await
            .expect("delete cm-1");
        leases
            .create(&post, &lease("lease-2"))
            .await
            .expect("create lease-2");
        create_widget(&widgets, &resource, "w-2", 2).await;
        widgets
            .delete("w-1", &DeleteParams::default())
            .await
            .expect("delete w-1");
        accounts
            .create(&post, &account("sa-2"))
            .await
            .expect("create sa-2");

        converges("ConfigMaps after churn", &cm_informer, &config_maps).await;
        converges("Leases after churn", &lease_informer, &leases).await;
        converges("Widgets after churn", &widget_informer, &widgets).await;
        converges("ServiceAccounts after churn", &account_informer, &accounts).await;

        // The dynamic cache holds the whole custom object; the metadata-only one the metadata.
        let widget = widget_informer
            .lister()
            .namespaced(ctx.namespace.clone())
            .get("w-2")
            .expect("w-2 is cached");
        assert_eq!(widget.data["spec"]["size"], 2);
        let robot = account_informer
            .lister()
            .namespaced(ctx.namespace.clone())
            .get("sa-2")
            .expect("sa-2 is cached");
        assert_eq!(
            robot
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get("role")),
            Some(&"robot".to_owned())
        );

        factory.shutdown().await;
        assert_eq!(factory.running_tasks(), 0);
    })
    .await;
}

#[tokio::test]
async fn several_handlers_see_every_add_update_and_delete_once_and_in_server_order() {
    run("handler-order", |ctx| async move {
        let api = config_maps(&ctx);
        let post = PostParams::default();
        let before = api
            .create(&post, &config_map("before", "v0", &[]))
            .await
            .expect("create before start");
        watch_cache_has(&api, &before).await;
        let factory = SharedInformerFactory::new(
            ctx.client(),
            FactoryOptions::default()
                .wire_format(WireFormat::from_env())
                .namespace(ctx.namespace.clone()),
        );
        let informer = factory.informer::<ConfigMap>().expect("informer");
        let (first, second) = (Log::default(), Log::default());
        informer
            .add_event_handler(config_map_recorder(&first))
            .expect("first handler");
        informer
            .add_event_handler(config_map_recorder(&second))
            .expect("second handler");
        factory.start().expect("start");
        assert!(
            factory
                .wait_for_cache_sync_timeout(CONVERGE)
                .await
                .values()
                .all(|synced| *synced)
        );

        let a = api
            .create(&post, &config_map("a", "v1", &[]))
            .await
            .expect("create a");
        api.create(&post, &config_map("b", "v1", &[]))
            .await
            .expect("create b");
        let a = set_value(&api, &a, "v2").await;
        api.delete("b", &DeleteParams::default())
            .await
            .expect("delete b");
        set_value(&api, &a, "v3").await;
        api.create(&post, &config_map("c", "v1", &[]))
            .await
            .expect("create c");
        api.delete("a", &DeleteParams::default())
            .await
            .expect("delete a");

        let expected = [
            "initial before v0",
            "add a v1",
            "add b v1",
            "update a v1->v2",
            "delete b v1",
            "update a v2->v3",
            "add c v1",
            "delete a v3",
        ];
        logs_exactly("the first handler's log", &first, &expected).await;
        logs_exactly("the second handler's log", &second, &expected).await;
        factory.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn listers_and_indexes_agree_with_the_server_after_churn() {
    run("lister-churn", |ctx| async move {
        let api = config_maps(&ctx);
        let post = PostParams::default();
        let tiers = ["web", "db", "cache"];
        let mut created = Vec::new();
        for index in 0..9 {
            let name = format!("cm-{index}");
            let object = config_map(&name, "v1", &[("tier", tiers[index % 3])]);
            created.push(api.create(&post, &object).await.expect("create"));
        }
        let factory = SharedInformerFactory::new(
            ctx.client(),
            FactoryOptions::default()
                .wire_format(WireFormat::from_env())
                .namespace(ctx.namespace.clone()),
        );
        let informer = factory.informer::<ConfigMap>().expect("informer");
        let by_tier: IndexFunc<ConfigMap> = Arc::new(|object: &ConfigMap| {
            object
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get("tier").cloned())
                .into_iter()
                .collect()
        });
        informer
            .add_indexers(Indexers::from([("by-tier".to_owned(), by_tier)]))
            .expect("indexer");
        factory.start().expect("start");
        assert!(
            factory
                .wait_for_cache_sync_timeout(CONVERGE)
                .await
                .values()
                .all(|synced| *synced)
        );

        // Every third object deleted, every third moved to another tier, every third rewritten,
        // and three new ones: the index must move keys between values, not only add them.
        for (index, object) in created.iter().enumerate() {
            let name = object.name_any();
            match index % 3 {
                0 => {
                    api.delete(&name, &DeleteParams::default())
                        .await
                        .expect("delete");
                }
                1 => {
                    let mut moved = object.clone();
                    moved.metadata.labels =
                        Some(BTreeMap::from([("tier".to_owned(), "cache".to_owned())]));
                    api.replace(&name, &post, &moved).await.expect("relabel");
                }
                _ => {
                    set_value(&api, object, "v2").await;
                }
            }
        }
        for index in 9..12 {
            let object = config_map(&format!("cm-{index}"), "v1", &[("tier", "web")]);
            api.create(&post, &object).await.expect("create");
        }

        let lister = factory.lister::<ConfigMap>().expect("lister");
        let indexer = informer.cache();
        eventually("the lister and the tier index", CONVERGE, || {
            let (api, lister, indexer) = (&api, &lister, &indexer);
            async move {
                let server = server_state(api).await?;
                let mut listed: Vec<String> = lister
                    .list(&Default::default())
                    .iter()
                    .map(|object| versioned_key(object.as_ref()))
                    .collect();
                listed.sort();
                if listed != server {
                    return Err(format!("lister {listed:?}, server {server:?}"));
                }
                for tier in tiers {
                    let selected = api
                        .list(&ListParams::default().labels(&format!("tier={tier}")))
                        .await
                        .map_err(|err| err.to_string())?;
                    let mut expected: Vec<String> =
                        selected.items.iter().map(versioned_key).collect();
                    expected.sort();
                    let mut indexed: Vec<String> = indexer
                        .by_index("by-tier", tier)
                        .map_err(|err| err.to_string())?
                        .iter()
                        .map(|object| versioned_key(object.as_ref()))
                        .collect();
                    indexed.sort();
                    if indexed != expected {
                        return Err(format!(
                            "tier {tier}: index {indexed:?}, server {expected:?}"
                        ));
                    }
                }
                Ok(())
            }
        })
        .await;
        factory.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_handler_added_after_sync_gets_the_cache_as_initial_adds_then_live_changes() {
    run("late-handler", |ctx| async move {
        let api = config_maps(&ctx);
        let post = PostParams::default();
        let mut created = Vec::new();
        for index in 0..4 {
            let object = config_map(&format!("cm-{index}"), "v1", &[]);
            created.push(api.create(&post, &object).await.expect("create"));
        }
        watch_cache_has(&api, &created[3]).await;
        let factory = SharedInformerFactory::new(
            ctx.client(),
            FactoryOptions::default()
                .wire_format(WireFormat::from_env())
                .namespace(ctx.namespace.clone()),
        );
        let informer = factory.informer::<ConfigMap>().expect("informer");
        let early = Log::default();
        informer
            .add_event_handler(config_map_recorder(&early))
            .expect("early handler");
        factory.start().expect("start");
        assert!(
            factory
                .wait_for_cache_sync_timeout(CONVERGE)
                .await
                .values()
                .all(|synced| *synced)
        );
        set_value(&api, &created[0], "v2").await;
        api.delete("cm-1", &DeleteParams::default())
            .await
            .expect("delete");
        // The initial adds come in no promised order; the live changes after them do.
        eventually("the early handler's log", CONVERGE, || {
            let early = &early;
            async move {
                let mut seen = lines(early);
                if seen.len() < 4 {
                    return Err(format!("saw {seen:?}"));
                }
                seen[..4].sort();
                let expected = [
                    "initial cm-0 v1",
                    "initial cm-1 v1",
                    "initial cm-2 v1",
                    "initial cm-3 v1",
                    "update cm-0 v1->v2",
                    "delete cm-1 v1",
                ];
                (seen == expected)
                    .then_some(())
                    .ok_or_else(|| format!("saw {seen:?}, expected {expected:?}"))
            }
        })
        .await;

        let late = Log::default();
        let registration = informer
            .add_event_handler(config_map_recorder(&late))
            .expect("late handler");
        assert!(
            tokio::time::timeout(CONVERGE, registration.synced())
                .await
                .unwrap_or(false),
            "the late handler syncs"
        );
        let mut initial = lines(&late);
        initial.sort();
        assert_eq!(
            initial,
            ["initial cm-0 v2", "initial cm-2 v1", "initial cm-3 v1"],
            "the late handler gets the cache, not the history"
        );

        api.create(&post, &config_map("cm-4", "v1", &[]))
            .await
            .expect("create");
        eventually("both handlers see the new object once", CONVERGE, || {
            let (early, late) = (&early, &late);
            async move {
                let count = |log: &Log| {
                    lines(log)
                        .iter()
                        .filter(|line| line.as_str() == "add cm-4 v1")
                        .count()
                };
                match (count(early), count(late)) {
                    (1, 1) => Ok(()),
                    counts => Err(format!("seen (early, late) {counts:?} times")),
                }
            }
        })
        .await;
        assert_eq!(lines(&late).len(), 4, "{:?}", lines(&late));
        factory.shutdown().await;
    })
    .await;
}

/// An informer over ConfigMaps in the test's namespace, reporting list and watch errors into
/// `errors`.
fn config_map_informer(
    api: Api<ConfigMap>,
    streaming: bool,
    errors: &Log,
) -> SharedIndexInformer<ConfigMap> {
    let errors = errors.clone();
    SharedIndexInformer::new(
        KubeListerWatcher::new(api).wire_format(WireFormat::from_env()),
        InformerOptions::new()
            .name(if streaming { "streaming" } else { "paged" })
            .use_watch_list(streaming)
            .watch_error_handler(move |error: &ReflectorError| push(&errors, error.to_string())),
    )
}

#[tokio::test]
async fn informers_with_and_without_streaming_lists_sync_the_same_cache() {
    run("watch-list", |ctx| async move {
        let api = config_maps(&ctx);
        let post = PostParams::default();
        let mut first = None;
        for index in 0..5 {
            let object = config_map(&format!("cm-{index}"), "v1", &[]);
            let created = api.create(&post, &object).await.expect("create");
            first.get_or_insert(created);
        }
        let (streaming_errors, paged_errors) = (Log::default(), Log::default());
        let streaming = config_map_informer(api.clone(), true, &streaming_errors);
        let paged = config_map_informer(api.clone(), false, &paged_errors);
        let (streaming_token, streaming_task) = spawn_informer(&streaming);
        let (paged_token, paged_task) = spawn_informer(&paged);
        assert!(
            synced_within(&streaming, CONVERGE).await,
            "streaming list syncs"
        );
        assert!(synced_within(&paged, CONVERGE).await, "paged list syncs");
        // Read before the test's own lists below (the fake counts those too).
        let lists_at_sync = ctx.backend.fake_list_count("configmaps");
        converges("the streaming informer", &streaming, &api).await;
        converges("the paged informer", &paged, &api).await;

        api.create(&post, &config_map("cm-5", "v1", &[]))
            .await
            .expect("create after sync");
        set_value(&api, first.as_ref().expect("five were created"), "v2").await;
        converges("the streaming informer after writes", &streaming, &api).await;
        converges("the paged informer after writes", &paged, &api).await;

        // The streaming informer got its state from the watch: it never fell back to a list
        // (a refusal would have reached its error handler), and on the fake, which counts
        // requests, only the paged informer listed.
        assert_eq!(lines(&streaming_errors), Vec::<String>::new());
        assert_eq!(lines(&paged_errors), Vec::<String>::new());
        if let Some(lists) = lists_at_sync {
            assert_eq!(lists, 1, "only the paged informer lists");
        }
        stop_informer(&streaming_token, streaming_task).await;
        stop_informer(&paged_token, paged_task).await;
    })
    .await;
}

/// A [`ListerWatcher`] whose watches the test can cut and hold back, to simulate a client that
/// is disconnected while the server moves on.
struct Unpluggable<L> {
    inner: L,
    connected: watch::Sender<bool>,
    lists: AtomicUsize,
    waiting: Arc<AtomicUsize>,
}

impl<L> Unpluggable<L> {
    fn new(inner: L) -> Self {
        Self {
            inner,
            connected: watch::Sender::new(true),
            lists: AtomicUsize::new(0),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Ends the open watch and holds new ones back until [`plug`](Self::plug).
    fn unplug(&self) {
        self.connected.send_replace(false);
    }

    fn plug(&self) {
        self.connected.send_replace(true);
    }
}

#[async_trait]
impl<K, L> ListerWatcher<K> for Unpluggable<L>
where
    K: Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    async fn list(&self, options: ListOptions) -> ReflectorResult<ListPage<K>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(options).await
    }

    async fn watch(&self, options: ListOptions) -> ReflectorResult<WatchStream<K>> {
        let mut connected = self.connected.subscribe();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        // The sender lives in `self`, so this only ends once plugged in.
        let _ = connected.wait_for(|connected| *connected).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let stream = self.inner.watch(options).await?;
        let mut unplugged = self.connected.subscribe();
        Ok(stream
            .take_until(async move {
                let _ = unplugged.wait_for(|connected| !*connected).await;
            })
            .boxed())
    }

    fn type_description(&self) -> String {
        self.inner.type_description()
    }

    fn namespace(&self) -> Option<String> {
        self.inner.namespace()
    }
}

#[tokio::test]
async fn after_a_compaction_the_informer_relists_and_reports_deletions_missed_as_tombstones() {
    run("relist-tombstones", |ctx| async move {
        // Secrets: the local control plane serves them without a watch cache, so a compaction
        // of etcd reaches their watches (see e2e_conformance's 410 test).
        let api: Api<Secret> = Api::namespaced(ctx.client(), &ctx.namespace);
        let post = PostParams::default();
        let secret = |name: &str, step: &str| Secret {
            metadata: named(name, &[("step", step)]),
            ..Secret::default()
        };
        let mut created = Vec::new();
        for index in 0..4 {
            let name = format!("s-{index}");
            created.push(
                api.create(&post, &secret(&name, "one"))
                    .await
                    .expect("create"),
            );
        }
        let lister_watcher = Arc::new(Unpluggable::new(
            KubeListerWatcher::new(api.clone()).wire_format(WireFormat::from_env()),
        ));
        let errors = Log::default();
        let reported = errors.clone();
        let informer = SharedIndexInformer::new(
            Arc::clone(&lister_watcher),
            InformerOptions::new().name("secrets").watch_error_handler(
                move |error: &ReflectorError| {
                    push(&reported, error.to_string());
                },
            ),
        );
        let log = Log::default();
        informer
            .add_event_handler(name_recorder::<Secret>(&log))
            .expect("handler");
        let (token, running) = spawn_informer(&informer);
        assert!(
            synced_within(&informer, CONVERGE).await,
            "the informer syncs"
        );

        lister_watcher.unplug();
        eventually("the informer waits for a watch", CONVERGE, || {
            let waiting = Arc::clone(&lister_watcher.waiting);
            async move {
                (waiting.load(Ordering::SeqCst) > 0)
                    .then_some(())
                    .ok_or_else(|| "no watch held back yet".to_owned())
            }
        })
        .await;
        let lists_before = lister_watcher.lists.load(Ordering::SeqCst);

        // Three revisions past the informer's last one: a watch resuming from it then starts
        // below the compacted revision, not at it (docs/e2e.md, difference 8).
        api.delete("s-0", &DeleteParams::default())
            .await
            .expect("delete s-0");
        api.delete("s-1", &DeleteParams::default())
            .await
            .expect("delete s-1");
        let mut changed = created[2].clone();
        changed.metadata.labels = Some(BTreeMap::from([("step".to_owned(), "two".to_owned())]));
        api.replace("s-2", &post, &changed)
            .await
            .expect("update s-2");
        api.create(&post, &secret("s-4", "one"))
            .await
            .expect("create s-4");
        // s-3 is deleted and created again: the same name, a new UID.
        api.delete("s-3", &DeleteParams::default())
            .await
            .expect("delete s-3");
        let s3_again = api
            .create(&post, &secret("s-3", "again"))
            .await
            .expect("create s-3 again");
        assert_ne!(s3_again.metadata.uid, created[3].metadata.uid);
        let compacted = ctx.backend.force_compaction().await;
        lister_watcher.plug();

        converges("the cache after reconnecting", &informer, &api).await;
        // With a compaction the missed deletions can only be inferred by the relist, as
        // tombstones. Without one (kind or a foreign cluster, whose etcd is out of reach) the
        // watch cache may replay them as ordinary deletions instead; both are correct there.
        let deletion_lines = |name: &str| {
            let tombstone = format!("tombstone {name}");
            if compacted {
                vec![tombstone]
            } else {
                vec![tombstone, format!("delete {name}")]
            }
        };
        let (s0_gone, s1_gone) = (deletion_lines("s-0"), deletion_lines("s-1"));
        let s3_gone = deletion_lines("s-3");
        eventually("the handler saw every change", CONVERGE, || {
            let (log, s0_gone, s1_gone, s3_gone) = (&log, &s0_gone, &s1_gone, &s3_gone);
            async move {
                let seen = lines(log);
                let has = |wanted: &str| seen.iter().any(|line| line == wanted);
                let has_any = |wanted: &[String]| wanted.iter().any(|line| has(line));
                let deletions = seen
                    .iter()
                    .filter(|line| line.starts_with("delete ") || line.starts_with("tombstone "))
                    .count();
                // The recreated s-3 is a deletion and an add, never an update.
                if has("update s-3") {
                    return Err(format!("s-3 arrived as an update: {seen:?}"));
                }
                if has_any(s0_gone)
                    && has_any(s1_gone)
                    && has_any(s3_gone)
                    && has("update s-2")
                    && has("add s-4")
                    && has("add s-3")
                    && deletions == 3
                {
                    Ok(())
                } else {
                    Err(format!("saw {seen:?}"))
                }
            }
        })
        .await;
        let cached = informer
            .cache()
            .get_by_key(&format!("{}/s-3", ctx.namespace))
            .expect("s-3 cached");
        assert_eq!(cached.metadata.uid, s3_again.metadata.uid);
        if compacted {
            assert!(
                lister_watcher.lists.load(Ordering::SeqCst) > lists_before,
                "the informer relisted"
            );
            let reported = lines(&errors);
            assert!(
                reported.iter().any(|error| error.contains("410")),
                "the expired watch reached the error handler: {reported:?}"
            );
        }
        stop_informer(&token, running).await;
    })
    .await;
}

/// Grants the ServiceAccount `e2e-nobody` list and watch on ConfigMaps in `namespace`.
async fn grant_config_map_reads(ctx: &Ctx) {
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "configmap-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"] }],
    }))
    .expect("a valid Role");
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "configmap-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-reader" },
        "subjects": [{ "kind": "ServiceAccount", "name": "e2e-nobody", "namespace": ctx.namespace }],
    }))
    .expect("a valid RoleBinding");
    Api::<Role>::namespaced(ctx.client(), &ctx.namespace)
        .create(&PostParams::default(), &role)
        .await
        .expect("create Role");
    Api::<RoleBinding>::namespaced(ctx.client(), &ctx.namespace)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create RoleBinding");
}

#[tokio::test]
async fn a_forbidden_list_reaches_the_watch_error_handler_and_is_retried_with_backoff() {
    run("forbidden-informer", |ctx| async move {
        let admin = config_maps(&ctx);
        admin
            .create(&PostParams::default(), &config_map("cm-0", "v1", &[]))
            .await
            .expect("create");
        let client = match ctx.backend.unprivileged_client(&ctx.namespace).await {
            Some(client) => client,
            // The fake has no RBAC (docs/e2e.md, limitation 5): it answers 403 by injection.
            None => {
                assert!(
                    ctx.backend.forbid_lists("configmaps"),
                    "only the fake lacks RBAC"
                );
                ctx.client()
            }
        };
        let failures: Arc<Mutex<Vec<(Instant, String, bool)>>> = Arc::default();
        let reported = Arc::clone(&failures);
        let informer = SharedIndexInformer::new(
            KubeListerWatcher::new(Api::<ConfigMap>::namespaced(client, &ctx.namespace))
                .wire_format(WireFormat::from_env()),
            InformerOptions::new()
                .name("forbidden")
                .watch_error_handler(move |error: &ReflectorError| {
                    let forbidden = matches!(error, ReflectorError::Forbidden { .. });
                    reported.lock().expect("never poisoned").push((
                        Instant::now(),
                        error.to_string(),
                        forbidden,
                    ));
                }),
        );
        let (token, running) = spawn_informer(&informer);
        eventually("three failed lists reach the handler", CONVERGE, || {
            let failures = Arc::clone(&failures);
            async move {
                let count = failures.lock().expect("never poisoned").len();
                (count >= 3)
                    .then_some(())
                    .ok_or_else(|| format!("{count} so far"))
            }
        })
        .await;
        let seen = failures.lock().expect("never poisoned").clone();
        assert!(
            !informer.has_synced(),
            "nothing was listed, so nothing synced"
        );
        for (_, message, forbidden) in &seen {
            assert!(*forbidden, "a 403 maps to Error::Forbidden: {message}");
            assert!(
                message.starts_with("forbidden (403)") && message.contains("configmaps"),
                "the error says what was refused: {message}"
            );
        }
        // The reflector's backoff starts at 800 ms and doubles, jitter only adding to it: a hot
        // loop would report the failures milliseconds apart.
        let first_gap = seen[1].0 - seen[0].0;
        let second_gap = seen[2].0 - seen[1].0;
        assert!(first_gap >= Duration::from_millis(750), "{first_gap:?}");
        assert!(second_gap >= Duration::from_millis(1500), "{second_gap:?}");

        if !ctx.backend.clear_faults() {
            grant_config_map_reads(&ctx).await;
        }
        // The next attempt comes after up to 6.4 s of backoff, and RBAC takes a moment to see
        // a new binding, so this wait is longer than the others.
        assert!(
            synced_within(&informer, CONVERGE + CONVERGE).await,
            "the informer syncs once it may list"
        );
        converges("the cache once permitted", &informer, &admin).await;
        let total = failures.lock().expect("never poisoned").len();
        assert!(total <= 6, "{total} failures: the retries backed off");
        stop_informer(&token, running).await;
    })
    .await;
}
