//! The public types a controller shares across tasks and threads are `Send + Sync`.

use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{Error, EventStream, InformerOptions, Registration, SharedIndexInformer};

fn is_send_sync<T: Send + Sync>() {}
fn is_send<T: Send>() {}

#[test]
fn informer_handles_and_registrations_cross_threads() {
    is_send_sync::<SharedIndexInformer<Pod>>();
    is_send_sync::<Registration<Pod>>();
    is_send_sync::<Error>();
    is_send::<InformerOptions<Pod>>();
    is_send::<EventStream<Pod>>();
}

// A tokio context is needed to build a kube client, not to check the future's type.
#[tokio::test]
async fn the_run_future_can_be_spawned() {
    fn spawnable<F: std::future::Future + Send + 'static>(_: F) {}
    let informer = SharedIndexInformer::new(
        kinformer_reflector::KubeListerWatcher::<Pod>::new(kube_client::Api::all(
            kube_client::Client::try_from(kube_client::Config::new(
                "http://127.0.0.1:1".parse().expect("a URL"),
            ))
            .expect("a client"),
        )),
        InformerOptions::new(),
    );
    spawnable(async move {
        informer
            .run(tokio_util::sync::CancellationToken::new())
            .await
    });
}
