//! What the informer suites (`e2e_informer.rs`, `e2e_informer_handlers.rs`,
//! `e2e_informer_recovery.rs`) share: handler logs and the handlers that write them, comparing a
//! cache with the server by `namespace/name@resourceVersion`, and running an informer. Included
//! with `#[path]` by the tests that use it, beside `e2e_support` and `config_maps`.

use std::{
    collections::BTreeMap,
    fmt::Debug,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::{
    informer::SharedIndexInformer, processor::HandlerFuncs, store::ObjectOrTombstone,
    wait::CancellationToken,
};
use kube_client::{
    Api, Resource, ResourceExt as _,
    api::{ListParams, PostParams},
    core::ObjectMeta,
};
use serde::de::DeserializeOwned;

use crate::{
    config_maps::value_of,
    e2e_support::{Ctx, eventually},
};

/// The longest a test waits for a cache or a handler to catch up with the server.
pub(crate) const CONVERGE: Duration = Duration::from_secs(30);

/// The ConfigMap kube-controller-manager puts in every namespace of a full cluster (kind, a
/// kubeconfig); the fake and the local control plane have none. Handler logs leave it out.
pub(crate) const ROOT_CA: &str = "kube-root-ca.crt";

/// What a handler saw, one line per notification.
pub(crate) type Log = Arc<Mutex<Vec<String>>>;

pub(crate) fn lines(log: &Log) -> Vec<String> {
    log.lock()
        .expect("a handler never panics holding the log")
        .iter()
        .filter(|line| !line.contains(ROOT_CA))
        .cloned()
        .collect()
}

pub(crate) fn push(log: &Log, line: String) {
    log.lock()
        .expect("a handler never panics holding the log")
        .push(line);
}

pub(crate) fn config_maps(ctx: &Ctx) -> Api<ConfigMap> {
    Api::namespaced(ctx.client(), &ctx.namespace)
}

/// Creates the ConfigMaps `cm-{i}` for each `i` of `numbers`, each holding the value `v`;
/// returns them as stored.
pub(crate) async fn seed_config_maps(
    api: &Api<ConfigMap>,
    numbers: std::ops::Range<usize>,
) -> Vec<ConfigMap> {
    let mut created = Vec::new();
    for i in numbers {
        created.push(
            api.create(
                &PostParams::default(),
                &crate::config_maps::config_map(&format!("cm-{i}"), "v", &[]),
            )
            .await
            .expect("created"),
        );
    }
    created
}

/// Writes `value` into an existing ConfigMap, returning the stored object.
pub(crate) async fn set_value(api: &Api<ConfigMap>, current: &ConfigMap, value: &str) -> ConfigMap {
    let mut changed = current.clone();
    changed.data = Some(BTreeMap::from([("key".to_owned(), value.to_owned())]));
    api.replace(&current.name_any(), &PostParams::default(), &changed)
        .await
        .expect("update")
}

/// A handler writing `initial NAME VALUE`, `add NAME VALUE`, `update NAME OLD->NEW`,
/// `delete NAME VALUE` or `tombstone NAME` into `log`.
pub(crate) fn config_map_recorder(log: &Log) -> HandlerFuncs<ConfigMap> {
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
pub(crate) fn name_recorder<K: Resource + Send + Sync + 'static>(log: &Log) -> HandlerFuncs<K> {
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
pub(crate) fn versioned_key<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    format!(
        "{}/{}@{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.resource_version.as_deref().unwrap_or_default()
    )
}

pub(crate) async fn server_state<K>(api: &Api<K>) -> Result<Vec<String>, String>
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

pub(crate) fn cache_state<K: Resource + Send + Sync + 'static>(
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
pub(crate) async fn converges<K, C>(what: &str, informer: &SharedIndexInformer<C>, api: &Api<K>)
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
pub(crate) async fn logs_exactly(what: &str, log: &Log, expected: &[&str]) {
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
pub(crate) async fn watch_cache_has<K>(api: &Api<K>, written: &K)
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
pub(crate) fn number(resource_version: Option<&str>) -> u64 {
    resource_version
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("resourceVersion {resource_version:?} is not a number"))
}

pub(crate) fn named(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
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
pub(crate) fn spawn_informer<K: Resource + Clone + Send + Sync + 'static>(
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

pub(crate) async fn stop_informer(
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

pub(crate) async fn synced_within<K: Resource + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
    within: Duration,
) -> bool {
    let token = CancellationToken::new();
    informer.wait_for_cache_sync(within, &token).await.is_ok()
}
