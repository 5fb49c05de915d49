//! What an informer's handlers see, against a real kube-apiserver (`cargo xtask e2e`) and against
//! kinformer-testing's fake server (plain `cargo test`): every change once and in the server's
//! order, and, for a handler added after sync, the cache as initial adds before live changes.
//! Part of the informer suite (see `e2e_informer.rs`); docs/e2e.md lists what each test proves.

use crate::config_maps;
use crate::e2e_support;
use crate::informers;

use config_maps::config_map;
use e2e_support::{eventually, run};
use informers::{
    CONVERGE, Log, config_map_recorder, config_maps, lines, logs_exactly, set_value,
    watch_cache_has,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::factory::{FactoryOptions, SharedInformerFactory};
use kube_client::api::{DeleteParams, PostParams};

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
            FactoryOptions::from_env().namespace(ctx.namespace.clone()),
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
        assert!(factory.wait_for_cache_sync(CONVERGE).await.all_synced());

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
            FactoryOptions::from_env().namespace(ctx.namespace.clone()),
        );
        let informer = factory.informer::<ConfigMap>().expect("informer");
        let early = Log::default();
        informer
            .add_event_handler(config_map_recorder(&early))
            .expect("early handler");
        factory.start().expect("start");
        assert!(factory.wait_for_cache_sync(CONVERGE).await.all_synced());
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
