//! kinformer's informers and factory against a real kube-apiserver (`cargo xtask e2e --local |
//! --kind | --kubeconfig PATH`) and against kinformer-testing's fake server (plain `cargo test`).
//!
//! Where `e2e_conformance.rs` checks the API behaviours the reflector relies on, the informer
//! suites check what a controller sees. This one: caches that converge to the server, for a
//! factory's built-in, custom and metadata-only informers, its listers and indexes, and
//! informers with and without streaming lists. `e2e_informer_handlers.rs` checks what handlers
//! see, `e2e_informer_recovery.rs` how an informer recovers from a compaction and from refused
//! lists. Every test runs in a fresh namespace (and deletes the CRDs it registers); every wait is
//! bounded, since the real server is slower than the fake. docs/e2e.md lists what each proves.

use crate::config_maps;
use crate::e2e_support;
use crate::informers;

use std::{collections::BTreeMap, sync::Arc};

use config_maps::config_map;
use e2e_support::{Ctx, cache_from_env, create_widget, create_widget_crd, eventually, run};
use informers::{
    CONVERGE, Log, config_maps, converges, lines, named, push, server_state, set_value,
    spawn_informer, stop_informer, synced_within, versioned_key,
};
use k8s_openapi::api::{
    coordination::v1::{Lease, LeaseSpec},
    core::v1::{ConfigMap, ServiceAccount},
};
use kinformer::reflector::WireFormat;
use kinformer::{
    factory::{FactoryOptions, InformerRequest, SharedInformerFactory},
    informer::{InformerOptions, SharedIndexInformer},
    reflector::{Error as ReflectorError, KubeListerWatcher},
    store::{IndexFunc, Indexers},
};
use kube_client::{
    Api, ResourceExt as _,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, PartialObjectMeta, PostParams},
};

/// Registers a namespaced `Widget` CRD unique to this test, deleted afterwards, and waits until
/// it is Established.
async fn widget_crd(ctx: &Ctx) -> ApiResource {
    create_widget_crd(ctx, &format!("e2e-{}.kinformer.dev", ctx.unique())).await
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
            FactoryOptions::from_env().namespace(ctx.namespace.clone()),
        );
        let cm_informer = factory.informer::<ConfigMap>().expect("informer");
        let lease_informer = factory.informer::<Lease>().expect("informer");
        let widget_informer = factory
            .informer_for(InformerRequest::dynamic(&resource))
            .expect("informer");
        let account_informer = factory
            .informer_for(InformerRequest::<PartialObjectMeta<ServiceAccount>>::metadata())
            .expect("informer");
        factory.start().expect("start");
        let synced = factory.wait_for_cache_sync(CONVERGE).await;
        assert!(synced.all_synced(), "{synced}");
        assert_eq!(synced.synced().len(), 4, "one informer per type");

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
            FactoryOptions::from_env().namespace(ctx.namespace.clone()),
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
        assert!(factory.wait_for_cache_sync(CONVERGE).await.all_synced());

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
        cache_from_env(InformerOptions::new())
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
