//! The factory is shared across tasks and threads, so its public types must be `Send + Sync`
//! and its futures `Send` (tokio's `tests/async_send_sync.rs` habit).

use kinformer_factory::{Error, FactoryOptions, InformerKey, Selection, SharedInformerFactory};

fn is_send_sync<T: Send + Sync>() {}
fn is_send<T: Send>(_: &T) {}

#[test]
fn public_types_are_send_and_sync() {
    is_send_sync::<SharedInformerFactory>();
    is_send_sync::<FactoryOptions>();
    is_send_sync::<InformerKey>();
    is_send_sync::<Selection>();
    is_send_sync::<Error>();
}

#[tokio::test]
async fn the_factory_futures_can_be_spawned() {
    let server = kinformer_testing::FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let factory = SharedInformerFactory::new(
        server.client().expect("a client"),
        FactoryOptions::from_env(),
    );
    is_send(&factory.wait_for_cache_sync(std::time::Duration::ZERO));
    is_send(&factory.shutdown());
    tokio::spawn(async move { factory.shutdown().await })
        .await
        .expect("the shutdown task finished");
}
