//! Informers that leave the factory, against a real kube-apiserver (`cargo xtask e2e`) and
//! against kinformer-testing's fake server (plain `cargo test`): a dynamic informer whose CRD
//! is deleted stops with a clear state after one failed list instead of retrying for ever, and
//! once the CRD is back a new request builds an informer that works. docs/e2e.md lists what
//! each test proves.

use crate::e2e_support;

use std::time::Duration;

use e2e_support::{create_widget, create_widget_crd, eventually, run};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinformer::factory::{FactoryOptions, InformerRequest, SharedInformerFactory};
use kube_client::{
    Api,
    api::{DeleteParams, DynamicObject},
};

/// The longest a test waits for the server or an informer to get somewhere.
const CONVERGE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_dynamic_informer_stops_when_its_crd_is_deleted_and_a_new_one_works_once_it_returns() {
    run("crd-gone", |ctx| async move {
        let group = format!("gone-{}.kinformer.dev", ctx.unique());
        let name = format!("widgets.{group}");
        let resource = create_widget_crd(&ctx, &group).await;
        let widgets: Api<DynamicObject> =
            Api::namespaced_with(ctx.client(), &ctx.namespace, &resource);
        create_widget(&widgets, &resource, "first", 1).await;

        let factory = SharedInformerFactory::new(
            ctx.client(),
            FactoryOptions::from_env().namespace(ctx.namespace.clone()),
        );
        let informer = factory
            .informer_for(InformerRequest::dynamic(&resource))
            .expect("a dynamic informer");
        factory.start().expect("the factory starts");
        let synced = factory.wait_for_cache_sync(CONVERGE).await;
        assert!(synced.all_synced(), "{synced:?}");
        // A list at resourceVersion 0 may come from a watch cache that has not seen the widget
        // yet; the watch after it then brings it.
        eventually("the informer holds the widget", CONVERGE, || {
            let cached = informer.cache().list().len();
            async move {
                if cached == 1 {
                    Ok(())
                } else {
                    Err(format!("{cached} widgets cached"))
                }
            }
        })
        .await;

        let crds: Api<CustomResourceDefinition> = Api::all(ctx.client());
        crds.delete(&name, &DeleteParams::default())
            .await
            .expect("the CRD is deleted");
        tokio::time::timeout(CONVERGE, informer.stopped())
            .await
            .expect("the informer stops instead of retrying for ever");
        let status = informer.sync_status();
        assert!(status.resource_gone, "{status:?}");
        assert!(
            status
                .last_error
                .as_deref()
                .is_some_and(|error| error.contains("no longer served")),
            "{status:?}"
        );
        assert_eq!(
            informer.health().reflector.failed_lists,
            1,
            "it stopped at the first failed list"
        );
        assert!(
            factory.informers().is_empty(),
            "the stopped informer left the factory"
        );

        // The CRD is gone for good before it comes back under the same name.
        eventually("the CRD is gone", CONVERGE, || {
            let crds = crds.clone();
            let name = name.clone();
            async move {
                match crds.get_opt(&name).await {
                    Ok(None) => Ok(()),
                    Ok(Some(_)) => Err("the CRD still exists".to_owned()),
                    Err(err) => Err(err.to_string()),
                }
            }
        })
        .await;
        let resource = create_widget_crd(&ctx, &group).await;
        create_widget(&widgets, &resource, "second", 1).await;
        let fresh = factory
            .informer_for(InformerRequest::dynamic(&resource))
            .expect("a new dynamic informer");
        assert!(!fresh.is_stopped(), "a new informer, not the stopped one");
        factory.start().expect("the factory starts it");
        let synced = factory.wait_for_cache_sync(CONVERGE).await;
        assert!(synced.all_synced(), "{synced:?}");
        // As above: a list at resourceVersion 0 may come from a watch cache that has not seen
        // the new widget yet; the watch after it then brings it.
        let expected = [format!("{}/second", ctx.namespace)];
        eventually("the new informer holds the new widget", CONVERGE, || {
            let cached = fresh.cache().list_keys();
            let expected = expected.clone();
            async move {
                if cached == expected {
                    Ok(())
                } else {
                    Err(format!("cached {cached:?}"))
                }
            }
        })
        .await;
        factory.shutdown().await;
    })
    .await;
}
