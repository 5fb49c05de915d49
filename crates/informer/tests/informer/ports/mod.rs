//! What the client-go port binaries share: starting, stopping and syncing an informer over
//! the in-memory source.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_informer::{InformerOptions, SharedIndexInformer};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common::FakeSource;

pub(crate) const WAIT: Duration = Duration::from_secs(10);

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub(crate) struct Running {
    pub token: CancellationToken,
    pub task: JoinHandle<kinformer_informer::Result<()>>,
}

pub(crate) fn start(informer: &SharedIndexInformer<Pod>) -> Running {
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    Running { token, task }
}

pub(crate) async fn stop(running: Running) {
    running.token.cancel();
    running
        .task
        .await
        .expect("the informer task panicked")
        .expect("the informer ran");
}

pub(crate) fn informer(
    source: &Arc<FakeSource>,
    options: InformerOptions<Pod>,
) -> SharedIndexInformer<Pod> {
    SharedIndexInformer::new(Arc::clone(source), crate::common::cache_from_env(options))
}

pub(crate) async fn synced(informer: &SharedIndexInformer<Pod>) {
    let token = CancellationToken::new();
    let waited = informer.wait_for_cache_sync(WAIT, &token).await;
    assert_eq!(waited, Ok(()), "the informer did not sync");
}
