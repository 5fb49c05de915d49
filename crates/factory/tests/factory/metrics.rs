//! A factory's metrics and health, scraped as Prometheus text over a fake API server: the
//! values follow what the informers did (lists, events by type, cache size, handler
//! deliveries), and a dropped factory reports nothing.

#![cfg(feature = "prometheus")]

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_factory::{FactoryOptions, SharedInformerFactory};
use kinformer_informer::ListenerOptions;
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use prometheus_client::{encoding::text::encode, registry::Registry};

const PATIENCE: Duration = Duration::from_secs(20);

fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).expect("the registry encodes");
    text
}

/// The value of the series whose name and labels start with `series`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

#[tokio::test]
async fn a_factory_reports_its_informers_and_handlers() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    for i in 0..3 {
        server.create_object(fixtures::pod(i)).expect("a pod");
    }
    let factory =
        SharedInformerFactory::new(server.client().expect("client"), FactoryOptions::from_env());
    let mut registry = Registry::default();
    factory.register_metrics(&mut registry);
    let pods = factory.informer::<Pod>().expect("informer");
    pods.add_event_handler_with_options(
        pods.handler_funcs(),
        ListenerOptions::new().name("counter"),
    )
    .expect("handler");
    factory.start().expect("started");
    assert!(factory.wait_for_cache_sync(PATIENCE).await.all_synced());
    server
        .create_object(fixtures::pod(3))
        .expect("a fourth pod");
    eventually("the new pod is delivered", PATIENCE, || {
        pods.health()
            .handlers
            .first()
            .is_some_and(|(_, stats)| stats.delivered == 4)
    })
    .await;

    let health = factory.health();
    let (key, pod_health) = health.iter().next().expect("one informer");
    assert_eq!(key.description(), "Pod");
    assert!(pod_health.sync.synced);
    assert_eq!(pod_health.cached_objects, 4);
    assert_eq!(pod_health.reflector.lists, 1);
    assert_eq!(pod_health.reflector.added, 1);
    assert!(pod_health.reflector.watch_open_for.is_some());
    assert_eq!(pod_health.handlers[0].0, "counter");

    let text = scrape(&registry);
    let pod = r#"{informer="Pod",selection="#;
    assert_eq!(
        value(&text, &format!("kinformer_informer_synced{pod}")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(&text, &format!("kinformer_informer_cached_objects{pod}")),
        Some(4.0),
        "{text}"
    );
    assert!(
        text.contains(r#"kinformer_reflector_lists_total{informer="Pod""#),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.starts_with("kinformer_reflector_lists_total")
                && line.contains(r#"value="ok""#)
                && line.ends_with(" 1")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.starts_with("kinformer_reflector_events_total")
                && line.contains(r#"value="added""#)
                && line.ends_with(" 1")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.starts_with("kinformer_handler_delivered_total")
                && line.contains(r#"handler="counter""#)
                && line.ends_with(" 4")),
        "{text}"
    );
    // client-go's informer metrics, under its names and labels.
    let client_go = r#"{name="Pod (v1 pods) [all]",group="",version="v1",resource="pods"}"#;
    assert_eq!(
        value(&text, &format!("informer_queued_items{client_go}")),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("informer_store_resource_version{client_go}")
        ),
        Some(server.resource_version() as f64),
        "{text}"
    );
    let processed = value(
        &text,
        &format!("informer_processing_latency_seconds_count{client_go}"),
    )
    .expect("the processing latency is reported");
    assert!(
        processed >= 2.0,
        "the list and the new pod were processed: {text}"
    );
    assert!(
        text.lines().any(
            |line| line.starts_with("informer_processing_latency_seconds_bucket")
                && line.contains(r#"le="+Inf""#)
                && line.ends_with(&format!(" {processed}"))
        ),
        "{text}"
    );
    for caught_up in [
        "kinformer_handler_oldest_pending_seconds",
        "kinformer_handler_in_call_seconds",
        "kinformer_handler_coalesced_total",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(caught_up)
                && line.contains(r#"handler="counter""#)
                && (line.ends_with(" 0") || line.ends_with(" 0.0"))),
            "{caught_up} missing or not zero for a caught-up handler: {text}"
        );
    }
    assert!(
        text.contains("# TYPE kinformer_reflector_relists counter"),
        "{text}"
    );

    factory.shutdown().await;
    drop(factory);
    drop(pods);
    assert!(
        !scrape(&registry).contains("kinformer_informer_synced"),
        "a dropped factory reports nothing"
    );
}
