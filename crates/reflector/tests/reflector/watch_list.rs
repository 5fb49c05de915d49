//! Bookmarks and streaming lists (watch-list): bookmarks move the last synced version and reach
//! the bookmark handler; a streaming list fills the store at its initial-events-end bookmark, and
//! falls back to list and watch when the server refuses it or never sends that bookmark.

/// Against a scripted lister-watcher, on tokio's paused clock.
mod in_memory {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use k8s_openapi::api::core::v1::Pod;
    use kinformer_reflector::{Error, Reflector, ReflectorOptions, VersionMatch, WatchEvent};
    use kinformer_store::{Cache, CacheReader};
    use kinformer_testing::eventually;

    use parking_lot::Mutex;

    use crate::common::scripted::{
        PATIENCE, Scripted, channel_watch, contents, events_then_close, expected, page,
        pending_watch, pod, quick_backoff, reflect, spawn,
    };

    /// A queue that delivers bookmarks in order (the atomic in-order FIFO) learns of each one.
    #[tokio::test(start_paused = true)]
    async fn every_watch_bookmark_reaches_the_bookmark_handler_after_it_is_recorded() {
        let (sender, stream) = channel_watch();
        let stream = Mutex::new(Some(stream));
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![pod("foo", "1")], None)),
            move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
        );
        let cache = Arc::new(Cache::<Pod>::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let reflector = {
            let seen = Arc::clone(&seen);
            Arc::new(Reflector::new(
                Arc::clone(&lister_watcher),
                Arc::clone(&cache),
                ReflectorOptions::default()
                    .on_bookmark(move |version| seen.lock().push(version.to_owned())),
            ))
        };
        let running = spawn(&reflector);
        eventually("the watch is open", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        for version in ["7", "9"] {
            sender
                .send(Ok(WatchEvent::Bookmark {
                    resource_version: version.to_owned(),
                    initial_events_end: false,
                }))
                .expect("the reflector is watching");
        }
        sender
            .send(Ok(WatchEvent::Added(pod("bar", "10").into())))
            .expect("the reflector is watching");
        eventually("the add after the bookmarks is applied", PATIENCE, || {
            reflector.last_sync_resource_version() == "10"
        })
        .await;
        assert_eq!(*seen.lock(), ["7", "9"]);
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorListAndWatch ("UseWatchList enabled").
    #[tokio::test(start_paused = true)]
    async fn a_streaming_list_replaces_the_store_at_the_initial_events_end_bookmark() {
        let (sender, stream) = channel_watch();
        let stream = Mutex::new(Some(stream));
        let lister_watcher = Scripted::new(
            |_, _| {
                Err(Error::Api {
                    code: 500,
                    reason: "Unexpected".into(),
                    message: "no list expected".into(),
                })
            },
            move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
        );
        let (cache, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().use_watch_list(true),
        );
        eventually("the streaming list is open", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        sender
            .send(Ok(WatchEvent::Added(pod("foo", "1").into())))
            .expect("watching");
        // Virtual time: the paused clock advances only once every task is idle, so an early
        // store write would have happened by now.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            cache.list().is_empty(),
            "nothing reaches the store before the bookmark"
        );
        sender
            .send(Ok(WatchEvent::Bookmark {
                resource_version: "1".into(),
                initial_events_end: true,
            }))
            .expect("watching");
        for event in [
            WatchEvent::Modified(pod("foo", "2").into()),
            WatchEvent::Added(pod("bar", "3").into()),
            WatchEvent::Added(pod("baz", "4").into()),
        ] {
            sender
                .send(Ok(event))
                .expect("the same stream goes on after the bookmark");
        }
        eventually("every event is applied", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "4"
        })
        .await;
        assert_eq!(
            contents(&cache),
            expected(&[("foo", "2"), ("bar", "3"), ("baz", "4")])
        );
        assert!(
            lister_watcher.list_calls().is_empty(),
            "a streaming list needs no list call"
        );
        let watches = lister_watcher.watch_calls();
        assert_eq!(watches.len(), 1);
        assert_eq!(watches[0].resource_version(), "");
        assert_eq!(
            watches[0].resource_version_match,
            Some(VersionMatch::NotOlderThan)
        );
        assert!(watches[0].send_initial_events);
        assert!(watches[0].allow_watch_bookmarks);
        running.stop().await;
    }

    /// A server that refuses streaming lists (422) gets a plain list and watch instead, and is not
    /// asked for a streaming list again.
    #[tokio::test(start_paused = true)]
    async fn a_refused_streaming_list_falls_back_to_list_and_watch() {
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("5", vec![pod("a", "5")], None)),
            |options, _| {
                if options.send_initial_events {
                    Err(Error::Api {
                        code: 422,
                        reason: "Invalid".into(),
                        message: "sendInitialEvents is forbidden".into(),
                    })
                } else {
                    events_then_close(vec![])
                }
            },
        );
        let errors = Arc::new(AtomicUsize::new(0));
        let (cache, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default()
                .use_watch_list(true)
                .backoff(quick_backoff())
                .watch_error_handler({
                    let errors = Arc::clone(&errors);
                    move |_| {
                        errors.fetch_add(1, Ordering::SeqCst);
                    }
                }),
        );
        eventually("the fallback list ran", PATIENCE, || {
            cache.list().len() == 1
        })
        .await;
        eventually("a few plain watches ran", PATIENCE, || {
            lister_watcher.watch_calls().len() >= 4
        })
        .await;
        let streaming = lister_watcher
            .watch_calls()
            .iter()
            .filter(|options| options.send_initial_events)
            .count();
        assert_eq!(streaming, 1, "only the first round tries a streaming list");
        assert_eq!(
            errors.load(Ordering::SeqCst),
            1,
            "the refusal reaches the handler"
        );
        running.stop().await;
    }

    /// A server that ignores `sendInitialEvents` never sends the initial-events-end bookmark: when
    /// its stream ends without one, the round falls back to a plain list.
    #[tokio::test(start_paused = true)]
    async fn a_streaming_list_without_its_bookmark_falls_back_to_a_list() {
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("7", vec![pod("listed", "7")], None)),
            |options, _| {
                if options.send_initial_events {
                    events_then_close(vec![Ok(WatchEvent::Added(pod("streamed", "6").into()))])
                } else {
                    pending_watch()
                }
            },
        );
        let (cache, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().use_watch_list(true),
        );
        eventually("the fallback list ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "7"
        })
        .await;
        assert_eq!(contents(&cache), expected(&[("listed", "7")]));
        assert_eq!(lister_watcher.list_calls().len(), 1);
        running.stop().await;
    }
}

/// Over real HTTP, through kube-client, against the fake API server.
mod over_http {
    use kinformer_testing::{Fault, Verb};

    use crate::common::fake_server::{churn, converges, pods, quick, reflect, server_with_pods};

    /// Ported from client-go's TestReflectorListAndWatch ("UseWatchList enabled"), over HTTP: the
    /// initial state comes from a streaming list ended by the initial-events-end bookmark, and no
    /// list request is made.
    #[tokio::test]
    async fn a_streaming_list_fills_the_cache_without_any_list_request() {
        let server = server_with_pods(20).await;
        let (cache, running) = reflect(pods(&server), quick().use_watch_list(true));
        converges(&server, &cache).await;
        churn(&server, 100);
        converges(&server, &cache).await;
        assert_eq!(server.faults().request_count(Verb::List, "pods"), 0);
        assert_eq!(server.faults().request_count(Verb::Watch, "pods"), 1);
        running.stop().await;
    }

    /// A failed streaming list falls back to list and watch.
    #[tokio::test]
    async fn a_failing_streaming_list_falls_back_to_list_and_watch() {
        let server = server_with_pods(8).await;
        server
            .faults()
            .inject(Fault::status(400).verb(Verb::Watch).resource("pods"));
        let (cache, running) = reflect(pods(&server), quick().use_watch_list(true));
        converges(&server, &cache).await;
        assert_eq!(server.faults().request_count(Verb::List, "pods"), 1);
        assert!(running.saw("Api { code: 400"), "{:?}", running.errors());
        running.stop().await;
    }
}
