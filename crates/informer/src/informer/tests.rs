//! What the informer keeps to itself (the processor's resync check period), and its sync wait
//! on a source that never lists.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_processor::{HandlerFuncs, ListenerOptions};
use kinformer_reflector::{ListOptions, ListPage, ListSink, ListerWatcher, Result, WatchStream};

use tokio_util::sync::CancellationToken;

use crate::{InformerOptions, SharedIndexInformer, WaitError};

/// Never asked: the test never runs the informer.
struct NoSource;

#[async_trait::async_trait]
impl ListerWatcher<Pod> for NoSource {
    async fn list(&self, _options: ListOptions, _sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        Ok(ListPage {
            resource_version: "0".into(),
            continue_token: None,
            shard_selector: None,
        })
    }

    async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
        Ok(Box::pin(futures::stream::pending()))
    }
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// Ported from client-go's TestResyncCheckPeriod: handlers added before start lower the
/// informer's resync check period, and each keeps the period it asked for.
#[test]
fn the_resync_check_period_follows_the_shortest_handler_period() {
    let informer = SharedIndexInformer::new(
        NoSource,
        InformerOptions::new().resync_period(secs(12 * 3600)),
    );
    let processor = &informer.inner.applier.processor;
    let add = |period| {
        informer
            .add_event_handler_with_options(
                HandlerFuncs::<Pod>::new(),
                ListenerOptions::new().resync_period(period),
            )
            .unwrap()
    };
    let first = add(Duration::ZERO);
    assert_eq!(processor.resync_check_period(), secs(12 * 3600));
    assert_eq!(first.resync_period(), Duration::ZERO);

    let minute = add(secs(60));
    assert_eq!(processor.resync_check_period(), secs(60));
    assert_eq!(minute.resync_period(), secs(60));

    let fifty_five = add(secs(55));
    assert_eq!(processor.resync_check_period(), secs(55));
    assert_eq!(minute.resync_period(), secs(60));
    assert_eq!(fifty_five.resync_period(), secs(55));

    let five = add(secs(5));
    assert_eq!(processor.resync_check_period(), secs(5));
    assert_eq!(first.resync_period(), Duration::ZERO);
    assert_eq!(minute.resync_period(), secs(60));
    assert_eq!(fifty_five.resync_period(), secs(55));
    assert_eq!(five.resync_period(), secs(5));
}

/// A source whose list never ends.
struct NeverLists;

#[async_trait::async_trait]
impl ListerWatcher<Pod> for NeverLists {
    async fn list(&self, _options: ListOptions, _sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
        futures::future::pending().await
    }

    async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
        futures::future::pending().await
    }
}

/// The sync wait has a deadline: an informer that cannot list is reported as not synced once
/// it passes; a fired token is a cancellation; an informer stopped before it synced says so.
#[tokio::test(start_paused = true)]
async fn the_sync_wait_ends_at_its_deadline_and_says_why() {
    let informer = SharedIndexInformer::new(NeverLists, InformerOptions::<Pod>::new());
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (informer, token) = (informer.clone(), token.clone());
        async move { informer.run(token).await }
    });
    let within = secs(30);
    let started = tokio::time::Instant::now();
    assert_eq!(
        informer
            .wait_for_cache_sync(within, &CancellationToken::new())
            .await,
        Err(WaitError::NotSynced {
            what: informer.name().to_owned(),
            within,
        })
    );
    assert_eq!(started.elapsed(), within);

    let cancelled = CancellationToken::new();
    cancelled.cancel();
    assert_eq!(
        informer.wait_for_cache_sync(within, &cancelled).await,
        Err(WaitError::Cancelled {
            what: informer.name().to_owned()
        })
    );

    token.cancel();
    running
        .await
        .expect("the informer task")
        .expect("the informer ran");
    assert_eq!(
        informer
            .wait_for_cache_sync(within, &CancellationToken::new())
            .await,
        Err(WaitError::Stopped {
            what: informer.name().to_owned()
        })
    );
}
