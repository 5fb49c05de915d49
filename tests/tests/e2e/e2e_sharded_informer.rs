//! Informers of shards (`InformerOptions::shard`) on the backend's server: three informers,
//! shard 0, 1 and 2 of 3 by UID, each hold exactly the ConfigMaps whose UID hashes into their
//! shard, through the list and the watch; a metadata-only informer of one shard too. On the
//! local control plane kube-apiserver runs with `ShardedListAndWatch` on and filters; on kind
//! the gate is off and the informers filter what it sends. The caches are the same both ways,
//! and each informer reports who filtered. A factory of one shard moves to another with its
//! informers, which then hold the new shard as the server has it.

use crate::e2e_support;
use crate::informers;

use std::collections::BTreeSet;

use e2e_support::{Ctx, eventually, run};
use informers::{CONVERGE, config_maps, seed_config_maps, stop_informer, watch_cache_has};
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::{
    factory::{FactoryOptions, InformerRequest, SharedInformerFactory},
    informer::{InformerOptions, SharedIndexInformer},
    reflector::{KubeListerWatcher, ShardMode, WireFormat},
    store::{Object, Shard},
    wait::CancellationToken,
};
use kube_client::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams},
    core::PartialObjectMeta,
};

const SHARDS: u64 = 3;

/// The keys of the namespace's ConfigMaps in `shard`, read from the server.
async fn on_server(api: &Api<ConfigMap>, shard: &Shard) -> BTreeSet<String> {
    api.list(&ListParams::default())
        .await
        .expect("the ConfigMaps list")
        .items
        .into_iter()
        .filter(|object| shard.contains(object))
        .map(|object| {
            format!(
                "{}/{}",
                kube_client::ResourceExt::namespace(&object).unwrap_or_default(),
                object.name_any()
            )
        })
        .collect()
}

fn cached<K: Object>(informer: &SharedIndexInformer<K>) -> BTreeSet<String> {
    informer.cache().list_keys().into_iter().collect()
}

/// Who filters on this backend; `None` where `cargo xtask e2e` does not know (a kubeconfig).
fn assert_mode<K: Object>(ctx: &Ctx, shard: &Shard, informer: &SharedIndexInformer<K>) {
    let stats = informer.health().shard.expect("an informer of a shard");
    match ctx.backend.shard_mode() {
        Some(mode) => assert_eq!(stats.mode, Some(mode), "shard {shard}: {stats:?}"),
        None => assert!(stats.mode.is_some(), "shard {shard}: {stats:?}"),
    }
    if stats.mode == Some(ShardMode::Server) {
        assert_eq!(stats.out_of_shard, 0, "shard {shard}: {stats:?}");
    }
}

async fn converge<K: Object>(
    what: &str,
    api: &Api<ConfigMap>,
    informers: &[(Shard, SharedIndexInformer<K>)],
) {
    eventually(what, CONVERGE, || async {
        for (shard, informer) in informers {
            let expected = on_server(api, shard).await;
            let held = cached(informer);
            if held != expected {
                return Err(format!(
                    "shard {shard} holds {held:?}, the server {expected:?}"
                ));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_hold_every_config_map_once_whoever_filters() {
    run("sharded-informer", |ctx| async move {
        let api = config_maps(&ctx);
        seed_config_maps(&api, 0..90).await;
        let token = CancellationToken::new();
        let mut running = Vec::new();
        let mut typed = Vec::new();
        for index in 0..SHARDS {
            let shard = Shard::of(index, SHARDS).expect("a shard");
            let informer = SharedIndexInformer::new(
                KubeListerWatcher::new(api.clone()).wire_format(WireFormat::from_env()),
                InformerOptions::new().page_size(10).shard(shard.clone()),
            );
            running.push(tokio::spawn({
                let (informer, token) = (informer.clone(), token.clone());
                async move { informer.run(token).await }
            }));
            typed.push((shard, informer));
        }
        // Metadata-only lists carry no shardInfo even where the server filters.
        let shard = Shard::of(0, SHARDS).expect("a shard");
        let metadata = SharedIndexInformer::new(
            KubeListerWatcher::metadata(Api::<PartialObjectMeta<ConfigMap>>::namespaced(
                ctx.client(),
                &ctx.namespace,
            )),
            InformerOptions::new().page_size(10).shard(shard.clone()),
        );
        running.push(tokio::spawn({
            let (informer, token) = (metadata.clone(), token.clone());
            async move { informer.run(token).await }
        }));
        let metadata = [(shard, metadata)];

        converge("the shards hold the listed ConfigMaps", &api, &typed).await;
        converge("the metadata shard holds its ConfigMaps", &api, &metadata).await;
        let total: usize = typed
            .iter()
            .map(|(_, informer)| cached(informer).len())
            .sum();
        let all = api
            .list(&ListParams::default())
            .await
            .expect("a list")
            .items
            .len();
        assert_eq!(total, all, "every ConfigMap in exactly one shard");

        seed_config_maps(&api, 90..105).await;
        for i in (0..90).step_by(8) {
            api.delete(&format!("cm-{i}"), &DeleteParams::default())
                .await
                .expect("deleted");
        }
        converge("the shards follow the watch", &api, &typed).await;
        converge("the metadata shard follows the watch", &api, &metadata).await;

        for (shard, informer) in &typed {
            assert_mode(&ctx, shard, informer);
        }
        assert_mode(&ctx, &metadata[0].0, &metadata[0].1);
        for task in running {
            stop_informer(&token, task).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factorys_shard_moves_with_its_informers() {
    run("factory-shard", |ctx| async move {
        let api = config_maps(&ctx);
        // Enough that a metadata-only informer, whose lists carry no echo, tells a filtering
        // server by the objects it receives.
        let seeded = seed_config_maps(&api, 0..80).await;
        // The first list is served from the watch cache: it must hold every ConfigMap for the
        // cache to equal the server's shard as soon as the wait returns.
        watch_cache_has(&api, seeded.last().expect("seeded")).await;
        let (first, second) = (Shard::of(0, 2).unwrap(), Shard::of(1, 2).unwrap());
        let factory = SharedInformerFactory::new(
            ctx.client(),
            FactoryOptions::from_env()
                .namespace(ctx.namespace.clone())
                .shard(first.clone()),
        );
        let typed = factory.informer::<ConfigMap>().expect("an informer");
        let metadata = factory
            .informer_for(InformerRequest::<PartialObjectMeta<ConfigMap>>::metadata())
            .expect("a metadata informer");
        factory.start().expect("the factory starts");
        let token = CancellationToken::new();
        factory
            .wait_for_shard(&first, CONVERGE, &token)
            .await
            .expect("the first shard is held");
        assert_eq!(cached(&typed), on_server(&api, &first).await);
        assert_eq!(cached(&metadata), on_server(&api, &first).await);

        factory
            .set_shard(second.clone())
            .expect("the factory has a shard");
        factory
            .wait_for_shard(&second, CONVERGE, &token)
            .await
            .expect("the second shard is held");
        // Held whole on return, with no wait for the watch.
        assert_eq!(cached(&typed), on_server(&api, &second).await);
        assert_eq!(cached(&metadata), on_server(&api, &second).await);
        assert_mode(&ctx, &second, &typed);
        assert_mode(&ctx, &second, &metadata);
        factory.shutdown().await;
    })
    .await;
}
