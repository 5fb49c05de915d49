//! A factory that cannot sync says why: against a server that answers 403 and against a port
//! nobody listens on, waiting with a deadline returns, and the sync status names the informer,
//! counts the failures and carries the cause; once the server answers, the informer syncs and
//! the failures clear.

use std::{error::Error as _, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_factory::{FactoryOptions, SharedInformerFactory};
use kinformer_reflector::{Error, KubeListerWatcher, ListOptions, ListerWatcher};
use kinformer_testing::{FakeApiServer, Fault, Verb, eventually, fixtures};
use kube_client::{Api, Client, Config};

/// How long any wait in these tests may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// A client for a loopback port nothing listens on.
async fn client_for_a_closed_port() -> Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let address = listener.local_addr().expect("bound");
    drop(listener);
    let uri = format!("http://{address}").parse().expect("a URL");
    Client::try_from(Config::new(uri)).expect("a client")
}

#[tokio::test]
async fn a_forbidden_list_is_reported_and_clears_once_allowed() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    server.create_object(fixtures::pod(0)).expect("a pod");
    server.faults().inject(
        Fault::status(403)
            .verb(Verb::List)
            .resource("pods")
            .times(1_000),
    );
    let factory =
        SharedInformerFactory::new(server.client().expect("client"), FactoryOptions::from_env());
    let pods = factory.informer::<Pod>().expect("informer");
    factory.start().expect("started");

    // Without any log subscriber, the status says why the informer does not sync.
    eventually("the 403 is reported", PATIENCE, || {
        pods.sync_status()
            .last_error
            .is_some_and(|error| error.contains("forbidden (403)"))
    })
    .await;
    let synced = factory.wait_for_cache_sync(Duration::from_millis(1)).await;
    assert!(synced.synced().is_empty() && !synced.is_empty(), "{synced}");
    let status = factory.sync_status();
    let (key, listed) = status.iter().next().expect("one informer");
    assert_eq!(key.description(), "Pod");
    assert!(listed.started && !listed.synced);
    assert!(listed.consecutive_failures >= 1);

    // Once the server allows the list: synced, and the failures are gone.
    server.faults().clear();
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");
    let status = pods.sync_status();
    assert_eq!(
        (status.consecutive_failures, &status.last_error),
        (0, &None)
    );
    assert_eq!(status.to_string(), "synced");
    factory.shutdown().await;
}

#[tokio::test]
async fn a_refused_connection_is_counted_and_named_while_waiting() {
    let factory =
        SharedInformerFactory::new(client_for_a_closed_port().await, FactoryOptions::from_env());
    let pods = factory.informer::<Pod>().expect("informer");
    factory.start().expect("started");

    eventually("two refused connections are counted", PATIENCE, || {
        pods.sync_status().consecutive_failures >= 2
    })
    .await;
    let synced = factory.wait_for_cache_sync(Duration::from_millis(1)).await;
    assert!(synced.synced().is_empty() && !synced.is_empty(), "{synced}");
    let status = pods.sync_status();
    assert!(!status.synced);
    let error = status.last_error.as_deref().expect("an error");
    assert!(
        error.starts_with("the API server refused the connection"),
        "{error}"
    );
    assert!(status.to_string().starts_with("not synced: "), "{status}");
    factory.shutdown().await;
}

#[tokio::test]
async fn a_refused_connection_keeps_kube_clients_error_as_its_source() {
    let api = Api::<Pod>::all(client_for_a_closed_port().await);
    let error = KubeListerWatcher::new(api)
        .list(ListOptions::default(), &mut Vec::new())
        .await
        .expect_err("nothing listens");
    assert!(
        matches!(error, Error::ConnectionRefused { .. }),
        "{error:?}"
    );
    let source = error.source().expect("a source");
    let kube = source
        .downcast_ref::<kube_client::Error>()
        .expect("kube-client's error");
    // The cause is reported once: in the source, not again in the message.
    assert!(!error.to_string().contains(&kube.to_string()));
}

#[tokio::test]
async fn the_factory_hands_every_informers_errors_to_one_handler() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    server.faults().inject(
        Fault::status(403)
            .verb(Verb::List)
            .resource("pods")
            .times(1),
    );
    let (sender, mut errors) = tokio::sync::mpsc::unbounded_channel();
    let factory = SharedInformerFactory::new(
        server.client().expect("client"),
        FactoryOptions::from_env().watch_error_handler(move |informer, error| {
            let _ = sender.send((informer.description().to_owned(), error.to_string()));
        }),
    );
    factory.informer::<Pod>().expect("informer");
    factory.start().expect("started");
    let (informer, error) = tokio::time::timeout(PATIENCE, errors.recv())
        .await
        .expect("an error within the patience")
        .expect("an error is handed over");
    assert_eq!(informer, "Pod");
    assert!(error.starts_with("forbidden (403)"), "{error}");
    // The handler replaces nothing else: the informer retries and syncs.
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");
    factory.shutdown().await;
}

/// The reflector owns retries: a 503 and a 504 on the list reach it (and the factory's error
/// handler) as they happen, one request each, rather than being retried underneath by
/// kube-client's retry layer, which `FakeApiServer::client` leaves off as applications should.
#[tokio::test]
async fn server_errors_reach_the_reflector_without_a_retry_layer_underneath() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    server.create_object(fixtures::pod(0)).expect("a pod");
    for code in [503, 504] {
        server.faults().inject(
            Fault::status(code)
                .verb(Verb::List)
                .resource("pods")
                .times(1),
        );
    }
    let (sender, mut errors) = tokio::sync::mpsc::unbounded_channel();
    let factory = SharedInformerFactory::new(
        server.client().expect("client"),
        FactoryOptions::from_env().watch_error_handler(move |_, error| {
            let _ = sender.send(error.to_string());
        }),
    );
    factory.informer::<Pod>().expect("informer");
    factory.start().expect("started");
    let synced = factory.wait_for_cache_sync(PATIENCE).await;
    assert!(synced.all_synced(), "{synced:?}");
    let mut seen = Vec::new();
    while let Ok(error) = errors.try_recv() {
        seen.push(error);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].contains("503"), "{seen:?}");
    assert!(seen[1].contains("504"), "{seen:?}");
    // Two failed lists and the one that succeeded: nothing was retried underneath.
    assert_eq!(server.faults().request_count(Verb::List, "pods"), 3);
    factory.shutdown().await;
}
