//! Read-your-writes over HTTP: a controller PATCHes an object, waits until the informer's
//! cache has seen the version the PATCH returned, and reads the object back from the lister,
//! a thousand times in a row, never stale. Waiting on a key the cache never had returns at
//! once.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_factory::{FactoryOptions, SharedInformerFactory};
use kinformer_informer::WaitError;
use kinformer_testing::{FakeApiServer, fixtures};
use kube_client::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How long any wait in these tests may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

const WRITES: usize = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_is_in_the_lister_once_its_version_is_waited_for() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let created = server
        .create_object(fixtures::config_map(0))
        .expect("a ConfigMap");
    let namespace = created["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();
    let name = created["metadata"]["name"].as_str().unwrap().to_owned();
    let key = format!("{namespace}/{name}");
    let client = server.client().expect("client");
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::from_env());
    let informer = factory.informer::<ConfigMap>().expect("informer");
    let lister = factory.lister::<ConfigMap>().expect("lister");
    factory.start().expect("started");
    assert!(factory.wait_for_cache_sync(PATIENCE).await.all_synced());
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let token = CancellationToken::new();

    let mut stale = Vec::new();
    for write in 0..WRITES {
        let patch = json!({ "data": { "write": write.to_string() } });
        let patched = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the patch is accepted");
        let version = patched.resource_version().expect("a version");
        informer
            .wait_for_version(&version, PATIENCE, &token)
            .await
            .expect("the cache sees the write");
        let cached = lister
            .namespaced(&namespace)
            .get(&name)
            .expect("the ConfigMap is cached");
        let seen = cached
            .data
            .as_ref()
            .and_then(|data| data.get("write"))
            .cloned();
        if seen != Some(write.to_string()) {
            stale.push((write, seen));
        }
    }
    assert!(stale.is_empty(), "stale reads: {stale:?}");
    assert!(informer.cache_version().is_some_and(|version| version > 0));

    // A deletion waited for by key.
    api.delete(&name, &Default::default())
        .await
        .expect("deleted");
    let gone = informer
        .wait_for_key(&key, |object| object.is_none(), PATIENCE, &token)
        .await;
    assert_eq!(gone, Ok(None));
    factory.shutdown().await;
}

#[tokio::test]
async fn waits_return_at_once_when_already_true_and_report_why_they_end() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let factory =
        SharedInformerFactory::new(server.client().expect("client"), FactoryOptions::from_env());
    let informer = factory.informer::<ConfigMap>().expect("informer");
    let token = CancellationToken::new();

    // Before its first list the cache cannot answer for a key: a deletion is not confirmed.
    let unsynced = informer
        .wait_for_key(
            "default/never",
            |object| object.is_none(),
            Duration::ZERO,
            &token,
        )
        .await;
    assert!(
        matches!(unsynced, Err(WaitError::NotSynced { .. })),
        "{unsynced:?}"
    );

    // A wait begun before the first list sees the object the list brings.
    server
        .create_object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "namespace": "default", "name": "present" },
        }))
        .expect("a config map");
    let present = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move {
            informer
                .wait_for_key(
                    "default/present",
                    |object| object.is_some(),
                    PATIENCE,
                    &token,
                )
                .await
        }
    });

    factory.start().expect("started");
    let present = present.await.expect("the wait ends");
    assert!(
        present.as_ref().is_ok_and(|object| object.is_some()),
        "{present:?}"
    );

    // Once synced, a key the cache never had is absent now: no time allowed, and none needed.
    assert_eq!(informer.wait_for_cache_sync(PATIENCE, &token).await, Ok(()));
    let absent = informer
        .wait_for_key(
            "default/never",
            |object| object.is_none(),
            Duration::ZERO,
            &token,
        )
        .await;
    assert_eq!(absent, Ok(None));

    // A version far ahead is not reached in time; one that is not a number never compares.
    let ahead = informer
        .wait_for_version("999999999", Duration::from_millis(50), &token)
        .await;
    assert!(
        matches!(ahead, Err(WaitError::TimedOut { .. })),
        "{ahead:?}"
    );
    let opaque = informer
        .wait_for_version("opaque-v1", PATIENCE, &token)
        .await;
    assert_eq!(
        opaque,
        Err(WaitError::IncomparableVersion {
            version: "opaque-v1".into()
        })
    );

    // Cancelling the caller's token ends the wait; so does the informer's shutdown.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let ended = informer
        .wait_for_version("999999999", PATIENCE, &cancelled)
        .await;
    assert!(
        matches!(ended, Err(WaitError::Cancelled { .. })),
        "{ended:?}"
    );
    let waiting = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move {
            informer
                .wait_for_key("default/never", |object| object.is_some(), PATIENCE, &token)
                .await
        }
    });
    factory.shutdown().await;
    let stopped = waiting.await.expect("the wait ends");
    assert!(
        matches!(stopped, Err(WaitError::Stopped { .. })),
        "{stopped:?}"
    );
}
