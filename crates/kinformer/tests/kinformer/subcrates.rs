//! Every layer is reachable through the umbrella crate, under its module name (crossbeam's
//! `tests/subcrates.rs` habit): a layer dropped from the re-exports fails to compile here.

use k8s_openapi::api::core::v1::Pod;

#[test]
fn every_layer_is_reexported_under_its_module() {
    let _ = kinformer::wait::Backoff::default;
    let _ = kinformer::protobuf::MAGIC;
    let _ = kinformer::store::Cache::<Pod>::default;
    let _ = kinformer::fifo::DEFAULT_BATCH_SIZE;
    let _ = kinformer::reflector::DEFAULT_PAGE_SIZE;
    let _ = kinformer::processor::MINIMUM_RESYNC_PERIOD;
    let _ = kinformer::informer::InformerOptions::<Pod>::new;
    let _ = kinformer::factory::Selection::all;
    let _ = kinformer::workqueue::default_controller_rate_limiter::<String>;
}

#[test]
fn the_prelude_names_the_everyday_types() {
    use kinformer::prelude::*;

    let request = InformerRequest::<Pod>::typed().namespace("default");
    assert!(format!("{request:?}").contains("default"));
    let _ = FactoryOptions::default();
    let _ = SharedInformerFactory::new;
    let _ = informer_client;
    let _ = SharedIndexInformer::<Pod>::has_synced;
    let _ = KeyHandler::<fn(String)>::new;
    let _ = ListenerOptions::default();
    let indexers: Indexers<Pod> = Indexers::new();
    assert!(indexers.is_empty());
    let _ = Lister::<Pod>::new;
    let _ = QueueOptions::default();
    let _: Option<RateLimitingQueue<String>> = None;
    let _ = default_controller_rate_limiter::<String>;
    let _ = <Pod as ResourceExt>::name_any;
    fn takes_a_handler<H: ResourceEventHandler<Pod>>(_: H) {}
    fn reads<C: CacheReader<Pod> + ?Sized>(_: &C) {}
    let _ = (
        takes_a_handler::<KeyHandler<fn(String)>>,
        reads::<kinformer::store::Cache<Pod>>,
    );
}
