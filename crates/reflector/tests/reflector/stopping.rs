//! Stopping: a reflector whose token fires returns promptly from any state, dropping the request
//! in flight; and the types a multi-threaded runtime moves across threads.

/// Against a scripted lister-watcher, on tokio's paused clock.
mod in_memory {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use async_trait::async_trait;
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_reflector::{
        Error, ListOptions, ListPage, ListSink, ListerWatcher, Reflector, ReflectorOptions, Result,
        WatchEvent, WatchStream,
    };
    use kinformer_store::{Cache, Store};
    use kinformer_testing::eventually;

    use parking_lot::Mutex;

    use tokio_util::sync::CancellationToken;

    use crate::common::scripted::{
        PATIENCE, Scripted, channel_watch, page, pending_watch, pod, reflect, spawn,
    };

    /// Ported from client-go's TestReflectorWatchStoppedBefore: a reflector whose token has already
    /// fired makes no request at all.
    #[tokio::test(start_paused = true)]
    async fn a_cancelled_reflector_makes_no_request() {
        let lister_watcher =
            Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
        let cache = Arc::new(Cache::<Pod>::default());
        let reflector = Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&cache),
            ReflectorOptions::default(),
        );
        let token = CancellationToken::new();
        token.cancel();
        reflector.run(token).await;
        assert!(lister_watcher.list_calls().is_empty());
        assert!(lister_watcher.watch_calls().is_empty());
    }

    /// A list that never answers; it counts how many of its futures were dropped unfinished.
    struct HangingList {
        dropped: Arc<AtomicUsize>,
    }

    struct DropCounter(Arc<AtomicUsize>);

    impl Drop for DropCounter {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[async_trait]
    impl ListerWatcher<Pod> for HangingList {
        async fn list(
            &self,
            _options: ListOptions,
            _sink: &mut dyn ListSink<Pod>,
        ) -> Result<ListPage> {
            let _counter = DropCounter(Arc::clone(&self.dropped));
            std::future::pending().await
        }

        async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
            pending_watch()
        }
    }

    /// Stopping while a list is in flight returns at once and abandons the request.
    #[tokio::test(start_paused = true)]
    async fn stopping_while_listing_abandons_the_list_promptly() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let cache = Arc::new(Cache::<Pod>::default());
        let reflector = Arc::new(Reflector::new(
            HangingList {
                dropped: Arc::clone(&dropped),
            },
            Arc::clone(&cache),
            ReflectorOptions::default(),
        ));
        let running = spawn(&reflector);
        // Virtual time: ten seconds on the paused clock.
        tokio::time::sleep(Duration::from_secs(10)).await;
        running.stop().await;
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the in-flight list was dropped"
        );
    }

    /// Ported from client-go's TestReflectorWatchStoppedAfter and TestRunUntil: stopping while
    /// watching returns promptly and drops the watch stream.
    #[tokio::test(start_paused = true)]
    async fn stopping_while_watching_drops_the_watch_promptly() {
        let (sender, stream) = channel_watch();
        let stream = Mutex::new(Some(stream));
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![], None)),
            move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
        );
        let (_, running) = reflect(&lister_watcher, ReflectorOptions::default());
        sender
            .send(Ok(WatchEvent::Added(pod("bar", "2").into())))
            .expect("the channel is open");
        eventually("the event is applied", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "2"
        })
        .await;
        running.stop().await;
        assert!(sender.is_closed(), "the watch stream was dropped");
    }

    /// The reflector and its futures cross threads: a multi-threaded runtime can run and share them.
    #[test]
    fn the_public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>(_: &T) {}
        send_sync::<Reflector<Pod, Cache<Pod>>>();
        send_sync::<Reflector<Pod, dyn Store<Pod>>>();
        send_sync::<kinformer_reflector::KubeListerWatcher<Pod>>();
        send_sync::<Error>();
        let lister_watcher =
            Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
        let reflector = Reflector::new(
            lister_watcher,
            Arc::new(Cache::<Pod>::default()),
            ReflectorOptions::default(),
        );
        send(&reflector.run(CancellationToken::new()));
    }
}

/// Over real HTTP, through kube-client, against the fake API server.
mod over_http {
    use std::time::Duration;

    use kinformer_store::CacheReader;
    use kinformer_testing::{Verb, eventually};

    use crate::common::fake_server::{PATIENCE, converges, pods, quick, reflect, server_with_pods};

    /// Stopping while watching closes the watch connection at once.
    #[tokio::test]
    async fn stopping_while_watching_closes_the_watch() {
        let server = server_with_pods(3).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
        running.stop().await;
        eventually("the server sees the watch gone", PATIENCE, || {
            server.open_watches() == 0
        })
        .await;
    }

    /// Stopping while a (slow) list is in flight returns promptly.
    #[tokio::test]
    async fn stopping_while_listing_returns_promptly() {
        let server = server_with_pods(3).await;
        server.faults().set_delay(Some(Duration::from_secs(30)));
        let (cache, running) = reflect(pods(&server), quick());
        // The fake server counts a request only once its delay is over; give the list time to leave.
        tokio::time::sleep(Duration::from_millis(300)).await;
        running.stop().await;
        // The server counts the list only once its 30 s delay is over: stop did not wait for it.
        assert_eq!(server.faults().request_count(Verb::List, "pods"), 0);
        assert!(cache.list().is_empty());
    }
}
