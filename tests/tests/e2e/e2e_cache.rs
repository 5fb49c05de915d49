//! What an informer's cache holds, against a real kube-apiserver (`cargo xtask e2e`) and
//! against kinformer-testing's fake server (plain `cargo test`): objects created through the
//! API, so with the server's defaults and its managedFields, cached whole; cached without their
//! managedFields when the factory drops them; and cached as a projection that keeps only what a
//! controller reads. Each cache is compared field by field with what the server returns, after
//! the initial list and after an update and a delete arrive by the watch. The factory's caches
//! are compact ones unless `KINFORMER_CACHE=decoded` (`.ci/run` runs the suite against the
//! local control plane both ways). docs/e2e.md lists what each test proves.

use crate::config_maps;
use crate::e2e_support;
use crate::informers;

use std::collections::BTreeMap;

use config_maps::config_map;
use e2e_support::{Ctx, eventually, run};
use informers::{CONVERGE, ROOT_CA, config_maps, set_value, stop_informer};
use k8s_openapi::{
    api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
};
use kinformer::{
    factory::{FactoryOptions, SharedInformerFactory},
    informer::{InformerOptions, SharedIndexInformer},
    reflector::{KubeListerWatcher, WireFormat},
    store::{ProjectedMeta, impl_object},
};
use kube_client::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, PostParams},
};
use serde::Deserialize;

/// Creates `count` ConfigMaps through the API, each with a label and a value of its own, and a
/// managedFields entry: kube-apiserver keeps it and adds one for this client, where the fake
/// (which tracks no field managers) keeps it as sent, so objects carry managedFields on both.
async fn create_config_maps(api: &Api<ConfigMap>, count: usize) -> Vec<ConfigMap> {
    let managed: ManagedFieldsEntry = serde_json::from_value(serde_json::json!({
        "manager": "kinformer-e2e", "operation": "Update", "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": { "f:data": { "f:key": {} }, "f:metadata": { "f:labels": { "f:i": {} } } },
    }))
    .expect("a valid managedFields entry");
    let mut created = Vec::new();
    for i in 0..count {
        let mut object = config_map(
            &format!("cm-{i}"),
            &format!("v{i}"),
            &[("i", &i.to_string())],
        );
        object.metadata.managed_fields = Some(vec![managed.clone()]);
        created.push(
            api.create(&PostParams::default(), &object)
                .await
                .expect("create"),
        );
    }
    created
}

/// Updates the first of `created` and deletes the second, through the API.
async fn update_and_delete(api: &Api<ConfigMap>, created: &[ConfigMap]) {
    set_value(api, &created[0], "changed").await;
    api.delete(&created[1].name_any(), &DeleteParams::default())
        .await
        .expect("delete");
}

/// What the server holds in the test's namespace, by key, passed through `view`.
async fn server_view<T>(
    api: &Api<ConfigMap>,
    view: impl Fn(ConfigMap) -> T,
) -> Result<BTreeMap<String, T>, String> {
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|error| format!("listing on the server: {error}"))?;
    Ok(list
        .items
        .into_iter()
        // kube-controller-manager's root CA ConfigMap, where it runs, is not the test's.
        .filter(|object| object.name_any() != ROOT_CA)
        .map(|object| (key(&object.namespace(), &object.name_any()), view(object)))
        .collect())
}

fn key(namespace: &Option<String>, name: &str) -> String {
    format!("{}/{name}", namespace.as_deref().unwrap_or_default())
}

/// Waits until `cached()` equals what the server holds, each object passed through `view`.
async fn cache_matches_server<T: PartialEq + std::fmt::Debug>(
    what: &str,
    api: &Api<ConfigMap>,
    view: impl Fn(ConfigMap) -> T + Copy,
    cached: impl Fn() -> BTreeMap<String, T> + Copy,
) {
    eventually(what, CONVERGE, || async move {
        let server = server_view(api, view).await?;
        let cached = cached();
        if server == cached {
            Ok(())
        } else {
            Err(format!("server {server:#?}, cache {cached:#?}"))
        }
    })
    .await;
}

/// A factory's ConfigMap cache, dropping managedFields or not, holds every field the server
/// returns (its defaults and resourceVersions included), less managedFields when dropped.
async fn a_factory_cache_holds_what_the_server_returns(ctx: Ctx, drop_managed_fields: bool) {
    let api = config_maps(&ctx);
    let created = create_config_maps(&api, 4).await;
    assert!(
        created
            .iter()
            .all(|object| object.managed_fields().len() == 1),
        "objects created through the API carry a managedFields entry"
    );
    let mut options = FactoryOptions::from_env().namespace(ctx.namespace.clone());
    if drop_managed_fields {
        options = options.drop_managed_fields();
    }
    let factory = SharedInformerFactory::new(ctx.client(), options);
    let informer = factory.informer::<ConfigMap>().expect("informer");
    factory.start().expect("the factory starts");
    let synced = factory.wait_for_cache_sync(CONVERGE).await;
    assert!(synced.all_synced(), "{synced}");

    let view = move |mut object: ConfigMap| {
        if drop_managed_fields {
            object.metadata.managed_fields = None;
        }
        object
    };
    let cached = || {
        informer
            .cache()
            .list()
            .into_iter()
            .filter(|object| object.name_any() != ROOT_CA)
            .map(|object| {
                (
                    key(&object.namespace(), &object.name_any()),
                    (*object).clone(),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };
    cache_matches_server("the cache holds the listed objects", &api, view, cached).await;
    update_and_delete(&api, &created).await;
    cache_matches_server("the cache follows the watch", &api, view, cached).await;
    let cached = cached();
    assert_eq!(cached.len(), 3);
    assert!(
        cached
            .values()
            .all(|object| object.metadata.managed_fields.is_some() != drop_managed_fields),
        "managedFields are kept or dropped as asked"
    );
    factory.shutdown().await;
}

#[tokio::test]
async fn a_factory_cache_holds_every_field_the_server_returns() {
    run("cache-full", |ctx| {
        a_factory_cache_holds_what_the_server_returns(ctx, false)
    })
    .await;
}

#[tokio::test]
async fn a_factory_cache_without_managed_fields_holds_the_rest_of_every_object() {
    run("cache-no-managed", |ctx| {
        a_factory_cache_holds_what_the_server_returns(ctx, true)
    })
    .await;
}

/// What a controller that reads only a ConfigMap's data keeps of it.
#[derive(Debug, Deserialize)]
struct SlimConfigMap {
    metadata: ProjectedMeta,
    data: Option<BTreeMap<String, String>>,
}

impl_object!(SlimConfigMap, metadata);

/// A projection's row: resourceVersion, UID, labels and data.
type Row = (
    String,
    String,
    BTreeMap<String, String>,
    BTreeMap<String, String>,
);

fn row_of_config_map(object: ConfigMap) -> Row {
    (
        object.resource_version().unwrap_or_default(),
        object.uid().unwrap_or_default(),
        object.labels().clone(),
        object.data.unwrap_or_default(),
    )
}

fn row_of_projection(object: &SlimConfigMap) -> Row {
    (
        kinformer::store::Object::resource_version(object)
            .unwrap_or_default()
            .to_owned(),
        kinformer::store::Object::uid(object)
            .unwrap_or_default()
            .to_owned(),
        kinformer::store::Object::labels(object)
            .cloned()
            .unwrap_or_default(),
        object.data.clone().unwrap_or_default(),
    )
}

/// An informer caching a projection decoded straight from the wire (protobuf unless
/// `KINFORMER_WIRE_FORMAT` says JSON) holds, for every object, the fields it projects, equal to
/// the server's.
#[tokio::test]
async fn a_projection_cache_holds_the_projected_fields_of_every_object() {
    run("cache-projection", |ctx| async move {
        let api = config_maps(&ctx);
        let created = create_config_maps(&api, 4).await;
        let informer = SharedIndexInformer::new(
            KubeListerWatcher::<SlimConfigMap>::projected(api.clone())
                .wire_format(WireFormat::from_env()),
            InformerOptions::new().name("projection"),
        );
        let token = kinformer::wait::CancellationToken::new();
        let running = tokio::spawn({
            let (informer, token) = (informer.clone(), token.clone());
            async move { informer.run(token).await }
        });
        let cached = || {
            informer
                .cache()
                .list()
                .into_iter()
                .filter(|object| kinformer::store::Object::name(&**object) != Some(ROOT_CA))
                .map(|object| {
                    let key = format!(
                        "{}/{}",
                        kinformer::store::Object::namespace(&*object).unwrap_or_default(),
                        kinformer::store::Object::name(&*object).unwrap_or_default()
                    );
                    (key, row_of_projection(&object))
                })
                .collect::<BTreeMap<_, _>>()
        };
        cache_matches_server(
            "the projection holds the listed objects",
            &api,
            row_of_config_map,
            cached,
        )
        .await;
        update_and_delete(&api, &created).await;
        cache_matches_server(
            "the projection follows the watch",
            &api,
            row_of_config_map,
            cached,
        )
        .await;
        assert_eq!(cached().len(), 3);
        stop_informer(&token, running).await;
    })
    .await;
}
