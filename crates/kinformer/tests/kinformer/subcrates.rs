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

    let selection = Selection::all().namespace("default");
    assert_eq!(selection.namespace_name(), Some("default"));
    let by_name: IndexFunc<Pod> = Arc::new(|pod: &Pod| vec![pod.name_any()]);
    let indexers = Indexers::from([("by-name".to_owned(), by_name)]);
    assert!(indexers.contains_key("by-name"));
    assert_eq!(NAMESPACE_INDEX, kinformer::store::NAMESPACE_INDEX);
    let _ = HandlerFuncs::<Pod>::new();
    let _ = CancellationToken::new();
}
