//! Watching: a watch that ends is resumed from the last version it delivered; one that cannot be
//! resumed (410 Gone, a version too large, an ERROR event, a very short watch) leads to a relist.
//! Watch timeouts, silent watches and the periodic resync.

/// Against a scripted lister-watcher, on tokio's paused clock.
mod in_memory {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_reflector::{Error, Reflector, ReflectorOptions, WatchEvent};
    use kinformer_store::{Cache, CacheReader};
    use kinformer_testing::eventually;

    use parking_lot::Mutex;
    use tokio::time::Instant;

    use crate::common::scripted::{
        PATIENCE, RecordingStore, Scripted, contents, events_then_close, expected, expiring_watch,
        page, pending_watch, pod, quick_backoff, reflect, spawn,
    };

    /// Ported from client-go's TestReflectorListAndWatchWithErrors: a watch that ends is resumed
    /// from the last version it delivered, without relisting.
    #[tokio::test(start_paused = true)]
    async fn a_closed_watch_resumes_from_the_last_seen_version_without_relisting() {
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![], None)),
            |_, call| match call {
                0 => events_then_close(vec![
                    Ok(WatchEvent::Added(pod("foo", "2").into())),
                    Ok(WatchEvent::Added(pod("bar", "3").into())),
                ]),
                1 => events_then_close(vec![
                    Ok(WatchEvent::Deleted(pod("foo", "4"))),
                    Ok(WatchEvent::Bookmark {
                        resource_version: "9".into(),
                        initial_events_end: false,
                    }),
                ]),
                _ => pending_watch(),
            },
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default());
        eventually("the third watch is open", PATIENCE, || {
            lister_watcher.watch_calls().len() == 3
        })
        .await;
        let versions: Vec<_> = lister_watcher
            .watch_calls()
            .iter()
            .map(|options| options.resource_version().to_owned())
            .collect();
        assert_eq!(
            versions,
            ["1", "3", "9"],
            "each watch starts where the previous one stopped"
        );
        assert_eq!(lister_watcher.list_calls().len(), 1, "no relist");
        assert_eq!(contents(&cache), expected(&[("bar", "3")]));
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorListAndWatchWithErrors: 410 inside the stream makes the
    /// reflector relist, at the last version it saw.
    #[tokio::test(start_paused = true)]
    async fn an_expired_watch_relists_at_the_last_synced_version() {
        let lister_watcher = Scripted::new(
            |_, call| match call {
                0 => Ok(page("1", vec![pod("old", "1")], None)),
                _ => Ok(page("8", vec![pod("new", "8")], None)),
            },
            |_, call| match call {
                0 => events_then_close(vec![
                    Ok(WatchEvent::Added(pod("mid", "5").into())),
                    Err(Error::Expired {
                        message: "too old resource version".into(),
                    }),
                ]),
                _ => pending_watch(),
            },
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (cache, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().watch_error_handler({
                let seen = Arc::clone(&seen);
                move |error| seen.lock().push(error.to_string())
            }),
        );
        eventually("the relist ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "8"
        })
        .await;
        assert_eq!(lister_watcher.list_versions(), ["0", "5"]);
        assert_eq!(contents(&cache), expected(&[("new", "8")]));
        assert!(
            seen.lock().iter().any(|error| error.contains("410")),
            "{:?}",
            seen.lock()
        );
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorExpiredExactResourceVersion: a relist whose version has
    /// expired is retried at once as a consistent read.
    #[tokio::test(start_paused = true)]
    async fn an_expired_relist_is_retried_as_a_consistent_read() {
        let lister_watcher = Scripted::new(
            |options, _| match options.resource_version() {
                "0" => Ok(page("10", vec![pod("a", "1")], None)),
                "10" => Err(Error::Expired {
                    message: "The resourceVersion for the provided list is too old.".into(),
                }),
                "" => Ok(page("11", vec![pod("a", "1"), pod("b", "11")], None)),
                other => panic!("unexpected list at {other:?}"),
            },
            |_, call| match call {
                0 => expiring_watch(),
                _ => pending_watch(),
            },
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default());
        eventually("the consistent relist ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "11"
        })
        .await;
        assert_eq!(lister_watcher.list_versions(), ["0", "10", ""]);
        assert_eq!(cache.list().len(), 2);
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorFullListIfTooLarge.
    #[tokio::test(start_paused = true)]
    async fn a_too_large_resource_version_relists_from_a_consistent_read() {
        let version = Arc::new(AtomicUsize::new(30));
        let lister_watcher = Scripted::new(
            {
                let version = Arc::clone(&version);
                move |options, _| match options.resource_version() {
                    "0" => Ok(page("20", vec![], None)),
                    "20" | "30" | "40" => Err(Error::TooLargeResourceVersion {
                        message: "Too large resource version".into(),
                    }),
                    "" => {
                        let current = version.fetch_add(10, Ordering::SeqCst);
                        Ok(page(&current.to_string(), vec![], None))
                    }
                    other => panic!("unexpected list at {other:?}"),
                }
            },
            |_, call| match call {
                0..=2 => expiring_watch(),
                _ => pending_watch(),
            },
        );
        let (_, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().backoff(quick_backoff()),
        );
        eventually("three relists ran", PATIENCE, || {
            lister_watcher.watch_calls().len() == 4
        })
        .await;
        assert_eq!(
            lister_watcher.list_versions(),
            ["0", "20", "", "30", "", "40", ""]
        );
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorReplacesStoreOnUnsafeDelete: an ERROR event (a corrupt
    /// object unsafe-deleted on the server) makes the reflector relist, and the relist's Replace
    /// removes the object that the watch had added, keeping the others.
    #[tokio::test(start_paused = true)]
    async fn an_error_event_relists_and_the_replace_drops_the_corrupt_object() {
        let preexisting = vec![pod("foo-1", "1"), pod("foo-2", "2"), pod("foo-3", "3")];
        let lister_watcher = Scripted::new(
            move |_, call| {
                Ok(page(
                    if call == 0 { "3" } else { "5" },
                    preexisting.clone(),
                    None,
                ))
            },
            |_, call| {
                match call {
            0 => events_then_close(vec![
                Ok(WatchEvent::Added(pod("corrupt", "4").into())),
                Err(Error::Api {
                    code: 500,
                    reason: "StorageReadError".into(),
                    message: "failed to prepare current and previous objects: corrupt object has been deleted".into(),
                }),
            ]),
            _ => pending_watch(),
        }
            },
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default());
        eventually("the watch added the corrupt object", PATIENCE, || {
            cache.list().len() == 4
        })
        .await;
        eventually("the relist caught up", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "5"
        })
        .await;
        assert_eq!(lister_watcher.list_versions(), ["0", "4"]);
        assert_eq!(
            contents(&cache),
            expected(&[("foo-1", "1"), ("foo-2", "2"), ("foo-3", "3")])
        );
        running.stop().await;
    }

    /// client-go's "very short watch": a watch that closes at once with nothing in it leads to a
    /// relist after a backoff, never a tight reconnect loop.
    #[tokio::test(start_paused = true)]
    async fn a_very_short_watch_relists_after_a_backoff() {
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![], None)),
            |_, call| match call {
                0 => Ok(futures::stream::empty().boxed()),
                _ => pending_watch(),
            },
        );
        let started = Instant::now();
        let (_, running) = reflect(&lister_watcher, ReflectorOptions::default());
        eventually("the second watch is open", PATIENCE, || {
            lister_watcher.watch_calls().len() == 2
        })
        .await;
        assert_eq!(lister_watcher.list_calls().len(), 2);
        assert!(
            started.elapsed() >= Duration::from_millis(800),
            "backed off first"
        );
        running.stop().await;
    }

    /// Ported from client-go's TestWatchTimeout: every watch asks for a random timeout between the
    /// minimum and twice the minimum, and minimums under five minutes are not honoured.
    #[tokio::test(start_paused = true)]
    async fn watch_timeouts_are_random_between_the_minimum_and_twice_the_minimum() {
        for (asked, floor) in [
            (None, 300),
            (Some(Duration::from_secs(1)), 300),
            (Some(Duration::from_secs(1800)), 1800),
        ] {
            let lister_watcher =
                Scripted::new(|_, _| Ok(page("10", vec![], None)), |_, _| pending_watch());
            let cache = Arc::new(Cache::<Pod>::default());
            let mut options = ReflectorOptions::default();
            if let Some(asked) = asked {
                options = options.min_watch_timeout(asked);
            }
            let reflector = Arc::new(Reflector::new(
                Arc::clone(&lister_watcher),
                Arc::clone(&cache),
                options,
            ));
            let running = spawn(&reflector);
            eventually("the watch is open", PATIENCE, || {
                !lister_watcher.watch_calls().is_empty()
            })
            .await;
            let timeout = lister_watcher.watch_calls()[0]
                .timeout_seconds
                .expect("a timeout is always sent");
            assert!(
                (floor..=2 * floor).contains(&timeout),
                "{timeout}s outside [{floor}, {}]",
                2 * floor
            );
            running.stop().await;
        }
    }

    /// A watch that stays silent past its own timeout is taken for a dead connection and resumed
    /// from the last version, not relisted.
    #[tokio::test(start_paused = true)]
    async fn a_silent_watch_is_resumed_after_its_timeout() {
        let lister_watcher =
            Scripted::new(|_, _| Ok(page("4", vec![], None)), |_, _| pending_watch());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (_, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().watch_error_handler({
                let seen = Arc::clone(&seen);
                move |error| seen.lock().push(matches!(error, Error::WatchIdle { .. }))
            }),
        );
        eventually("the first watch is open", PATIENCE, || {
            lister_watcher.watch_calls().len() == 1
        })
        .await;
        let first = Instant::now();
        let timeout = u64::from(
            lister_watcher.watch_calls()[0]
                .timeout_seconds
                .expect("timeout"),
        );
        eventually("a second watch is open", PATIENCE, || {
            lister_watcher.watch_calls().len() == 2
        })
        .await;
        let waited = first.elapsed();
        assert!(
            waited >= Duration::from_secs(timeout),
            "{waited:?} < {timeout}s"
        );
        assert!(waited <= Duration::from_secs(timeout + 6), "{waited:?}");
        assert_eq!(lister_watcher.watch_calls()[1].resource_version(), "4");
        assert_eq!(lister_watcher.list_calls().len(), 1, "no relist");
        assert_eq!(*seen.lock(), [true], "the idle watch is reported");
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorResync: the store is resynced once per period while the
    /// reflector watches.
    #[tokio::test(start_paused = true)]
    async fn the_store_is_resynced_every_resync_period() {
        let lister_watcher =
            Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
        let store = Arc::new(RecordingStore::default());
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&store),
            ReflectorOptions::default().resync_period(Duration::from_secs(30)),
        ));
        let running = spawn(&reflector);
        // Virtual time: the paused clock moves 95 s at once.
        tokio::time::sleep(Duration::from_secs(95)).await;
        assert_eq!(
            store.resyncs.load(Ordering::SeqCst),
            3,
            "resyncs at 30s, 60s and 90s"
        );
        running.stop().await;
    }

    /// The should_resync callback is asked at every tick and gates the resync.
    #[tokio::test(start_paused = true)]
    async fn should_resync_gates_every_resync() {
        let lister_watcher =
            Scripted::new(|_, _| Ok(page("1", vec![], None)), |_, _| pending_watch());
        let store = Arc::new(RecordingStore::default());
        let asked = Arc::new(AtomicUsize::new(0));
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&store),
            ReflectorOptions::default()
                .resync_period(Duration::from_secs(30))
                .should_resync({
                    let asked = Arc::clone(&asked);
                    // Only every other tick is due.
                    move || asked.fetch_add(1, Ordering::SeqCst) % 2 == 1
                }),
        ));
        let running = spawn(&reflector);
        // Virtual time: the paused clock moves 125 s at once.
        tokio::time::sleep(Duration::from_secs(125)).await;
        assert_eq!(asked.load(Ordering::SeqCst), 4);
        assert_eq!(store.resyncs.load(Ordering::SeqCst), 2);
        running.stop().await;
    }
}

/// Over real HTTP, through kube-client, against the fake API server.
mod over_http {
    use kinformer_testing::{Fault, Verb, eventually};

    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use kinformer_reflector::{KubeListerWatcher, WireFormat};
    use kinformer_store::{Incoming, Store};
    use kinformer_testing::fixtures;
    use kube_client::Api;

    use crate::common::fake_server::{
        PATIENCE, churn, client, converges, pods, quick, reflect, server_with_pods, start,
        watch_settles,
    };

    /// What a store was handed for each watched object: its name, and whether its bytes came.
    #[derive(Default)]
    struct WireLog(parking_lot::Mutex<Vec<(String, bool)>>);

    impl WireLog {
        fn note(&self, obj: &Incoming<Pod>) {
            self.0.lock().push((
                obj.object().metadata.name.clone().unwrap_or_default(),
                obj.encoded().is_some(),
            ));
        }
    }

    impl Store<Pod> for WireLog {
        fn add(&self, obj: Incoming<Pod>) -> kinformer_store::Result<()> {
            self.note(&obj);
            Ok(())
        }
        fn update(&self, obj: Incoming<Pod>) -> kinformer_store::Result<()> {
            self.note(&obj);
            Ok(())
        }
        fn delete(&self, _: Arc<Pod>) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn replace(&self, _: Vec<Arc<Pod>>, _: &str) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn resync(&self) -> kinformer_store::Result<()> {
            Ok(())
        }
    }

    /// The watched objects `store` was handed once pods 0 and 1 are created after the sync.
    async fn watched_as(format: WireFormat) -> Vec<(String, bool)> {
        let server = server_with_pods(0).await;
        let store = Arc::new(WireLog::default());
        let lister_watcher =
            KubeListerWatcher::new(Api::<Pod>::all(client(&server))).wire_format(format);
        let running = start(lister_watcher, &store, quick());
        eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
        for i in 0..2 {
            server.create_object(fixtures::pod(i)).expect("pod created");
        }
        eventually("both adds were written", PATIENCE, || {
            store.0.lock().len() == 2
        })
        .await;
        running.stop().await;
        std::mem::take(&mut *store.0.lock())
    }

    /// Objects watched in protobuf reach the store with the bytes they were decoded from, for
    /// a store that keeps objects encoded; a JSON line has no such bytes.
    #[tokio::test]
    async fn watched_objects_come_with_their_bytes_where_the_format_has_them() {
        let pods = |wire| vec![("pod-0".to_owned(), wire), ("pod-1".to_owned(), wire)];
        assert_eq!(watched_as(WireFormat::Protobuf).await, pods(true));
        assert_eq!(watched_as(WireFormat::Json).await, pods(false));
    }

    /// Ported from client-go's TestReflectorResyncWithResourceVersion family: a watch the server
    /// closes is resumed from the last version, with no relist and nothing lost.
    #[tokio::test]
    async fn a_dropped_watch_resumes_from_the_last_version_without_relisting() {
        let server = server_with_pods(10).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        for round in 0..3 {
            watch_settles(&server).await;
            server.faults().close_watches();
            churn(&server, 100 + 10 * round);
            converges(&server, &cache).await;
        }
        assert_eq!(
            server.faults().request_count(Verb::List, "pods"),
            1,
            "no relist"
        );
        assert!(server.faults().request_count(Verb::Watch, "pods") >= 4);
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorExpiredExactResourceVersion, over HTTP: after a
    /// compaction the resumed watch gets 410 and the reflector relists; deletions that happened
    /// meanwhile are not missed.
    #[tokio::test]
    async fn compaction_while_disconnected_makes_the_reflector_relist() {
        let server = server_with_pods(10).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        watch_settles(&server).await;
        server.stop_listener().await;
        churn(&server, 200);
        server.compact();
        server
            .restart_listener()
            .await
            .expect("the port is free again");
        converges(&server, &cache).await;
        eventually("the relist ran", PATIENCE, || {
            server.faults().request_count(Verb::List, "pods") == 2
        })
        .await;
        assert!(running.saw("Expired"), "{:?}", running.errors());
        running.stop().await;
    }

    /// A 410 answered to the watch request itself (not inside the stream) also leads to a relist.
    #[tokio::test]
    async fn a_410_status_on_the_watch_request_relists() {
        let server = server_with_pods(5).await;
        server
            .faults()
            .inject(Fault::status(410).verb(Verb::Watch).resource("pods"));
        let (cache, running) = reflect(pods(&server), quick());
        eventually("the relist ran", PATIENCE, || {
            server.faults().request_count(Verb::List, "pods") == 2
        })
        .await;
        churn(&server, 50);
        converges(&server, &cache).await;
        assert!(running.saw("Expired"), "{:?}", running.errors());
        running.stop().await;
    }

    /// The API server going away mid-watch (connection refused for a while) is reported, and the
    /// reflector catches up with everything that changed meanwhile.
    #[tokio::test]
    async fn a_server_restart_mid_watch_loses_nothing() {
        let server = server_with_pods(10).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
        server.stop_listener().await;
        churn(&server, 300);
        // The outage lasts until the reflector has met a refused connection, however long
        // a loaded machine takes to get there.
        eventually("the outage is reported", PATIENCE, || {
            !running.errors().is_empty()
        })
        .await;
        server
            .restart_listener()
            .await
            .expect("the port is free again");
        converges(&server, &cache).await;
        assert!(!running.errors().is_empty(), "the outage is reported");
        running.stop().await;
    }
}
