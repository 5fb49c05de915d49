//! Listing: the first list at version "0", pages and their continue tokens, relists at a known
//! version or from a consistent read, and what a relist keeps of the cache.

/// Against a scripted lister-watcher, on tokio's paused clock.
mod in_memory {
    use std::{collections::BTreeMap, sync::Arc};

    use k8s_openapi::api::core::v1::Pod;
    use kinformer_reflector::{Error, Reflector, ReflectorOptions, WatchEvent};
    use kinformer_store::{Cache, CacheReader};
    use kinformer_testing::eventually;
    use kube_core::ObjectMeta;
    use parking_lot::Mutex;

    use crate::common::scripted::{
        PATIENCE, RecordingStore, Scripted, channel_watch, contents, expected, expiring_watch,
        page, pending_watch, pod, quick_backoff, reflect, spawn,
    };

    /// Ported from client-go's TestReflectorListAndWatch ("UseWatchList disabled").
    #[tokio::test(start_paused = true)]
    async fn list_at_version_zero_then_watch_from_the_list_version_with_bookmarks() {
        let (sender, stream) = channel_watch();
        let stream = Mutex::new(Some(stream));
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![pod("foo", "1")], None)),
            move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default());
        eventually("the watch is open", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        for event in [
            WatchEvent::Modified(pod("foo", "2").into()),
            WatchEvent::Added(pod("bar", "3").into()),
            WatchEvent::Added(pod("baz", "4").into()),
            WatchEvent::Added(pod("qux", "5").into()),
            WatchEvent::Added(pod("zoo", "6").into()),
        ] {
            sender.send(Ok(event)).expect("the reflector is watching");
        }
        eventually("every event is applied", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "6"
        })
        .await;
        assert_eq!(
            contents(&cache),
            expected(&[
                ("foo", "2"),
                ("bar", "3"),
                ("baz", "4"),
                ("qux", "5"),
                ("zoo", "6")
            ])
        );
        let lists = lister_watcher.list_calls();
        assert_eq!(lists.len(), 1);
        assert_eq!(lists[0].resource_version(), "0");
        assert_eq!(lists[0].limit, Some(500));
        assert!(!lists[0].send_initial_events);
        let watches = lister_watcher.watch_calls();
        assert_eq!(watches.len(), 1);
        assert_eq!(watches[0].resource_version(), "1");
        assert!(watches[0].allow_watch_bookmarks);
        assert!(!watches[0].send_initial_events);
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorWatchListPageSize.
    #[tokio::test(start_paused = true)]
    async fn a_page_size_splits_the_list_into_pages_that_all_reach_the_store() {
        let pods: Vec<_> = (0..10)
            .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
            .collect();
        let lister_watcher = Scripted::new(
            move |options, _| {
                assert_eq!(options.limit, Some(4), "every page asks for the page size");
                match options.continue_token.as_deref() {
                    None => Ok(page("10", pods[0..4].to_vec(), Some("C1"))),
                    Some("C1") => Ok(page("10", pods[4..8].to_vec(), Some("C2"))),
                    Some("C2") => Ok(page("10", pods[8..10].to_vec(), None)),
                    Some(other) => panic!("unknown continue token {other}"),
                }
            },
            |_, _| pending_watch(),
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default().page_size(4));
        eventually("the list is stored", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "10"
        })
        .await;
        assert_eq!(cache.list().len(), 10);
        let calls = lister_watcher.list_calls();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].resource_version(), "0");
        assert_eq!(
            calls[1].resource_version, None,
            "continuation pages carry no resource version"
        );
        running.stop().await;
    }

    /// A lister-watcher that marks its last page with an empty continue token (`Some("")`, as a
    /// hand-written one may) ends the list there: the reflector does not ask again with "".
    #[tokio::test(start_paused = true)]
    async fn an_empty_continue_token_ends_the_list() {
        let pods: Vec<_> = (0..6)
            .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
            .collect();
        let lister_watcher = Scripted::new(
            move |options, _| match options.continue_token.as_deref() {
                None => Ok(page("10", pods[0..4].to_vec(), Some("C1"))),
                Some("C1") => Ok(page("10", pods[4..6].to_vec(), Some(""))),
                Some(other) => panic!("asked again with continue token {other:?}"),
            },
            |_, _| pending_watch(),
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default().page_size(4));
        eventually("the watch opens after the list", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        assert_eq!(cache.list().len(), 6);
        assert_eq!(lister_watcher.list_calls().len(), 2);
        assert_eq!(running.reflector.last_sync_resource_version(), "10");
        running.stop().await;
    }

    /// A store that takes lists in parts as a consumer would apply them: each part into a map,
    /// and a list's end deletes what that list did not name.
    #[derive(Default)]
    struct AppliedParts(Mutex<BTreeMap<String, String>>);

    struct ApplyingParts<'a> {
        store: &'a AppliedParts,
        listed: Vec<String>,
    }

    impl kinformer_store::ListInParts<Pod> for ApplyingParts<'_> {
        fn part(
            &mut self,
            items: Vec<kinformer_store::Incoming<Pod>>,
        ) -> kinformer_store::Result<()> {
            let mut map = self.store.0.lock();
            for item in items {
                let pod = item.object();
                let name = pod.metadata.name.clone().unwrap_or_default();
                self.listed.push(name.clone());
                map.insert(
                    name,
                    pod.metadata.resource_version.clone().unwrap_or_default(),
                );
            }
            Ok(())
        }

        fn finish(self: Box<Self>, _: &str) -> kinformer_store::Result<()> {
            self.store
                .0
                .lock()
                .retain(|name, _| self.listed.contains(name));
            Ok(())
        }
    }

    impl kinformer_store::Store<Pod> for AppliedParts {
        fn add(&self, _: kinformer_store::Incoming<Pod>) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn update(&self, _: kinformer_store::Incoming<Pod>) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn delete(&self, _: Arc<Pod>) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn replace(&self, _: Vec<Arc<Pod>>, _: &str) -> kinformer_store::Result<()> {
            panic!("a store that takes parts is never handed a whole list")
        }
        fn replace_in_parts(&self) -> Option<Box<dyn kinformer_store::ListInParts<Pod> + '_>> {
            Some(Box::new(ApplyingParts {
                store: self,
                listed: Vec::new(),
            }))
        }
        fn resync(&self) -> kinformer_store::Result<()> {
            Ok(())
        }
    }

    /// When a continuation page expires and the reflector lists everything at once, the full
    /// list is a new list in parts: an object only the first pages had (deleted before the
    /// full list) is gone from the store when it ends, not kept as listed.
    #[tokio::test(start_paused = true)]
    async fn a_full_list_after_an_expired_page_is_a_new_list_in_parts() {
        let lister_watcher = Scripted::new(
            |options, _| match (options.continue_token.as_deref(), options.limit) {
                (None, Some(_)) => Ok(page(
                    "10",
                    vec![pod("a", "1"), pod("gone", "2")],
                    Some("C1"),
                )),
                (Some("C1"), _) => Err(Error::Expired {
                    message: "continue token expired".into(),
                }),
                (None, None) => Ok(page("20", vec![pod("a", "1"), pod("b", "15")], None)),
                other => panic!("unexpected list {other:?}"),
            },
            |_, _| pending_watch(),
        );
        let store = Arc::new(AppliedParts::default());
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&store),
            ReflectorOptions::default().page_size(2),
        ));
        let running = spawn(&reflector);
        eventually("the watch opens after the list", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        let names: Vec<String> = store.0.lock().keys().cloned().collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(running.reflector.last_sync_resource_version(), "20");
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorNotPaginatingNotConsistentReads and
    /// TestReflectorResyncWithResourceVersion: a relist at a known version asks for everything at
    /// once (so the watch cache can serve it) and never goes back in time.
    #[tokio::test(start_paused = true)]
    async fn a_relist_at_a_known_version_is_not_paginated() {
        let lister_watcher = Scripted::new(
            |options, _| match options.resource_version() {
                "0" => Ok(page("10", vec![pod("a", "1")], None)),
                "10" => Ok(page("11", vec![pod("a", "1"), pod("b", "11")], None)),
                other => panic!("unexpected list at {other:?}"),
            },
            |_, call| match call {
                0 => expiring_watch(),
                _ => pending_watch(),
            },
        );
        let (_, running) = reflect(&lister_watcher, ReflectorOptions::default());
        eventually("the relist ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "11"
        })
        .await;
        let calls = lister_watcher.list_calls();
        assert_eq!(lister_watcher.list_versions(), ["0", "10"]);
        assert_eq!(calls[0].limit, Some(500));
        assert_eq!(calls[1].limit, None);
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled.
    #[tokio::test(start_paused = true)]
    async fn a_paginated_first_list_keeps_every_relist_paginated() {
        let pods: Vec<_> = (0..10)
            .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
            .collect();
        let lister_watcher = Scripted::new(
            move |options, _| {
                assert_eq!(
                    options.limit,
                    Some(500),
                    "the default page size is always sent"
                );
                match options.continue_token.as_deref() {
                    None => Ok(page("10", pods[0..4].to_vec(), Some("C1"))),
                    Some(_) => Ok(page("10", pods[4..10].to_vec(), None)),
                }
            },
            |_, call| match call {
                0 => expiring_watch(),
                _ => pending_watch(),
            },
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default());
        eventually("the relist ran", PATIENCE, || {
            lister_watcher.list_calls().len() == 4
        })
        .await;
        eventually("the relist is stored", PATIENCE, || {
            lister_watcher.watch_calls().len() == 2
        })
        .await;
        assert_eq!(cache.list().len(), 10);
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorFullListIfExpired.
    #[tokio::test(start_paused = true)]
    async fn an_expired_continuation_page_falls_back_to_one_full_list() {
        let pods: Vec<_> = (0..8)
            .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
            .collect();
        let lister_watcher = Scripted::new(
            move |options, _| match (
                options.resource_version(),
                options.continue_token.as_deref(),
                options.limit,
            ) {
                ("0", None, Some(4)) => Ok(page("10", pods[0..4].to_vec(), None)),
                ("10", None, Some(4)) => Ok(page("11", pods[0..4].to_vec(), Some("C1"))),
                ("", Some("C1"), Some(4)) => Err(Error::Expired {
                    message: "continue token expired".into(),
                }),
                ("10", None, None) => Ok(page("11", pods.clone(), None)),
                other => panic!("unexpected list options {other:?}"),
            },
            |_, call| match call {
                0 => expiring_watch(),
                _ => pending_watch(),
            },
        );
        let (cache, running) = reflect(&lister_watcher, ReflectorOptions::default().page_size(4));
        eventually("the full relist ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "11"
        })
        .await;
        assert_eq!(lister_watcher.list_versions(), ["0", "10", "", "10"]);
        assert_eq!(cache.list().len(), 8);
        running.stop().await;
    }

    /// A relist keeps the cached `Arc` of every object whose resourceVersion did not change and
    /// drops the listed copy, so only changed objects are ever held twice; changed, new and
    /// version-less objects keep their listed copy.
    #[tokio::test(start_paused = true)]
    async fn a_relist_reuses_the_cached_copy_of_every_unchanged_object() {
        let versionless = || {
            let mut pod = (*pod("d", "")).clone();
            pod.metadata.resource_version = None;
            Arc::new(pod)
        };
        let lister_watcher = Scripted::new(
            move |options, _| match options.resource_version() {
                "0" => Ok(page(
                    "10",
                    vec![pod("a", "1"), pod("b", "2"), versionless()],
                    Some("next"),
                )),
                "" if options.continue_token.as_deref() == Some("next") => {
                    Ok(page("10", vec![pod("c", "3")], None))
                }
                "10" => Ok(page(
                    "12",
                    vec![pod("a", "1"), pod("b", "12"), pod("c", "3"), versionless()],
                    None,
                )),
                other => panic!("unexpected list at {other:?}"),
            },
            |_, call| match call {
                0 => expiring_watch(),
                _ => pending_watch(),
            },
        );
        let cache = Arc::new(Cache::<Pod>::default());
        let known = Arc::clone(&cache);
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&cache),
            ReflectorOptions::default()
                .reuse_known_objects(move |pod: &Pod| known.get(pod).ok().flatten()),
        ));
        let running = spawn(&reflector);
        eventually("the first list ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "10"
        })
        .await;
        let before: BTreeMap<String, Arc<Pod>> = cache
            .list()
            .into_iter()
            .map(|pod| (pod.metadata.name.clone().unwrap_or_default(), pod))
            .collect();
        eventually("the relist ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "12"
        })
        .await;
        let after = |name: &str| {
            cache
                .get_by_key(&format!("ns/{name}"))
                .expect("listed objects are cached")
        };
        assert!(Arc::ptr_eq(&after("a"), &before["a"]), "unchanged: reused");
        assert!(
            Arc::ptr_eq(&after("c"), &before["c"]),
            "unchanged, second page: reused"
        );
        assert!(
            !Arc::ptr_eq(&after("b"), &before["b"]),
            "changed: the listed copy"
        );
        assert_eq!(after("b").metadata.resource_version.as_deref(), Some("12"));
        assert!(
            !Arc::ptr_eq(&after("d"), &before["d"]),
            "no version to compare: the listed copy"
        );
        assert_eq!(
            contents(&cache),
            expected(&[("a", "1"), ("b", "12"), ("c", "3"), ("d", "")])
        );
        running.stop().await;
    }

    /// client-go records the version after the store write, so an informer woken by its initial
    /// list could report synced with `LastSyncResourceVersion` still empty. kinformer records it
    /// first: every write already sees its own version. A replace the store refuses (an object
    /// without a name) puts the previous version back, as if it never happened.
    #[tokio::test(start_paused = true)]
    async fn every_store_write_already_sees_its_resource_version() {
        let (sender, stream) = channel_watch();
        let stream = Mutex::new(Some(stream));
        let nameless = Arc::new(Pod {
            metadata: ObjectMeta {
                resource_version: Some("4".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        });
        let lister_watcher = Scripted::new(
            move |_, call| {
                Ok(match call {
                    0 => page("4", vec![pod("a", "3"), Arc::clone(&nameless)], None),
                    _ => page("5", vec![pod("a", "3"), pod("b", "5")], None),
                })
            },
            move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
        );
        let store = Arc::new(RecordingStore::default());
        let reported_on_error = Arc::new(Mutex::new(Vec::new()));
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&lister_watcher),
            Arc::clone(&store),
            ReflectorOptions::default()
                .backoff(quick_backoff())
                .watch_error_handler({
                    let store = Arc::clone(&store);
                    let reported = Arc::clone(&reported_on_error);
                    move |_| reported.lock().push(store.reported_version())
                }),
        ));
        assert!(store.reflector.set(Arc::downgrade(&reflector)).is_ok());
        let running = spawn(&reflector);
        eventually("the watch is open", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        assert_eq!(
            *reported_on_error.lock(),
            [Some(String::new())],
            "the refused replace left the version where it was"
        );
        for event in [
            WatchEvent::Modified(pod("a", "7").into()),
            WatchEvent::Deleted(pod("b", "8")),
            WatchEvent::Added(pod("c", "9").into()),
        ] {
            sender.send(Ok(event)).expect("watching");
        }
        eventually("every event is applied", PATIENCE, || {
            store.seen.lock().len() == 5
        })
        .await;
        let seen = store.seen.lock().clone();
        let pairs: Vec<(&str, &str)> = seen.iter().map(|(w, r)| (w.as_str(), r.as_str())).collect();
        assert_eq!(
            pairs,
            [("4", "4"), ("5", "5"), ("7", "7"), ("8", "8"), ("9", "9")]
        );
        assert_eq!(lister_watcher.watch_calls()[0].resource_version(), "5");
        running.stop().await;
    }
}

/// Over real HTTP, through kube-client, against the fake API server.
mod over_http {
    use std::{sync::Arc, time::Duration};

    use k8s_openapi::api::core::v1::Pod;

    use kinformer_reflector::{KubeListerWatcher, WireFormat};
    use kinformer_store::{Cache, CacheReader, Incoming, Store};
    use kinformer_testing::{Fault, Verb, eventually, fixtures};
    use kube_client::Api;

    use crate::common::fake_server::{
        PATIENCE, churn, client, converges, pods, quick, reflect, server_with_pods, start,
        watch_settles,
    };

    /// Ported from client-go's TestReflectorListAndWatch, over HTTP: list, replace, then every
    /// change arrives through the watch.
    #[tokio::test]
    async fn lists_then_watches_and_the_cache_follows_every_change() {
        let server = server_with_pods(25).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        churn(&server, 100);
        converges(&server, &cache).await;
        assert_eq!(server.faults().request_count(Verb::List, "pods"), 1);
        assert_eq!(
            running.reflector.last_sync_resource_version(),
            server.resource_version().to_string()
        );
        assert!(running.errors().is_empty(), "{:?}", running.errors());
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorFullListIfExpired and TestReflectorWatchListPageSize,
    /// over HTTP: a 410 on the first list turns it into a paginated consistent read; when a
    /// continuation page then expires (a compaction between pages), the reflector lists everything
    /// at once and still ends up with exactly the server's contents.
    #[tokio::test]
    async fn pagination_and_its_fallback_when_a_continue_token_expires() {
        let server = server_with_pods(30).await;
        let faults = server.faults().clone();
        faults.inject(Fault::status(410).verb(Verb::List).resource("pods"));
        // The compaction below must land while the continuation request waits out this delay; a
        // second leaves room for a loaded machine.
        faults.set_delay(Some(Duration::from_secs(1)));
        let (cache, running) = reflect(pods(&server), quick().page_size(7));
        // Request 1 is the faulted list at "0", request 2 the first page of the consistent read.
        eventually("the first page is requested", PATIENCE, || {
            faults.request_count(Verb::List, "pods") == 2
        })
        .await;
        server
            .create_object(fixtures::pod(500))
            .expect("pod created");
        server.compact();
        converges(&server, &cache).await;
        faults.set_delay(None);
        // 1 faulted + 1 first page + 1 expired continuation + 1 full list.
        assert_eq!(faults.request_count(Verb::List, "pods"), 4);
        running.stop().await;
    }

    /// Without a fault, a page size splits a consistent relist into pages.
    #[tokio::test]
    async fn a_consistent_relist_is_paginated_by_the_page_size() {
        let server = server_with_pods(30).await;
        server
            .faults()
            .inject(Fault::status(410).verb(Verb::List).resource("pods"));
        let (cache, running) = reflect(pods(&server), quick().page_size(7));
        converges(&server, &cache).await;
        // 1 faulted list at "0", then ceil(30 / 7) = 5 pages.
        assert_eq!(server.faults().request_count(Verb::List, "pods"), 6);
        running.stop().await;
    }

    /// A relist over HTTP with `reuse_known_objects` keeps the cached `Arc` of every Pod that did
    /// not change while the watch was down (the decoded copy is dropped as it is decoded), and the
    /// listed copy of the one that did.
    #[tokio::test]
    async fn a_relist_over_http_keeps_the_cached_copy_of_unchanged_objects() {
        // Pods 0 and NAMESPACES share a namespace.
        let server = server_with_pods(2 * fixtures::NAMESPACES).await;
        let cache = Arc::new(Cache::<Pod>::default());
        let known = Arc::clone(&cache);
        let running = start(
            pods(&server),
            &cache,
            quick().reuse_known_objects(move |pod: &Pod| known.get(pod).ok().flatten()),
        );
        converges(&server, &cache).await;
        watch_settles(&server).await;
        let before = |name: &str| {
            cache
                .get_by_key(&format!("{}/{name}", fixtures::namespace_of(0)))
                .expect("cached")
        };
        let changed = before("pod-0");
        server.stop_listener().await;
        let mut updated = server
            .object("v1", "Pod", Some(&fixtures::namespace_of(0)), "pod-0")
            .expect("the pod exists");
        updated["metadata"]["labels"]["touched"] = serde_json::json!("yes");
        let other_name = format!("pod-{}", fixtures::NAMESPACES);
        let other = before(&other_name);
        server.update_object(updated).expect("pod updated");
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
        assert!(
            Arc::ptr_eq(&before(&other_name), &other),
            "an unchanged Pod keeps its cached Arc"
        );
        assert!(
            !Arc::ptr_eq(&before("pod-0"), &changed),
            "a changed Pod is the listed copy"
        );
        assert_ne!(
            before("pod-0").metadata.resource_version,
            changed.metadata.resource_version
        );
        running.stop().await;
    }

    /// What a store taking lists in parts was handed: each part's size and how many of its
    /// objects came with their bytes, then the version the list ended at.
    #[derive(Default)]
    struct PartLog {
        parts: parking_lot::Mutex<Vec<(usize, usize)>>,
        ended_at: parking_lot::Mutex<Option<String>>,
    }

    struct LogParts<'a>(&'a PartLog);

    impl kinformer_store::ListInParts<Pod> for LogParts<'_> {
        fn part(&mut self, items: Vec<Incoming<Pod>>) -> kinformer_store::Result<()> {
            let encoded = items.iter().filter(|item| item.encoded().is_some()).count();
            self.0.parts.lock().push((items.len(), encoded));
            Ok(())
        }

        fn finish(self: Box<Self>, resource_version: &str) -> kinformer_store::Result<()> {
            *self.0.ended_at.lock() = Some(resource_version.to_owned());
            Ok(())
        }
    }

    impl Store<Pod> for PartLog {
        fn add(&self, _: Incoming<Pod>) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn update(&self, _: Incoming<Pod>) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn delete(&self, _: Arc<Pod>) -> kinformer_store::Result<()> {
            Ok(())
        }
        fn replace(&self, _: Vec<Arc<Pod>>, _: &str) -> kinformer_store::Result<()> {
            panic!("a store that takes parts is never handed a whole list")
        }
        fn replace_in_parts(&self) -> Option<Box<dyn kinformer_store::ListInParts<Pod> + '_>> {
            Some(Box::new(LogParts(self)))
        }
        fn resync(&self) -> kinformer_store::Result<()> {
            Ok(())
        }
    }

    /// The parts `store` was handed for a list of `count` Pods read as `format`, and the
    /// version the list ended at, against the server's.
    async fn listed_in_parts(
        count: usize,
        format: WireFormat,
    ) -> (Vec<(usize, usize)>, Option<String>, String) {
        let server = server_with_pods(count).await;
        let store = Arc::new(PartLog::default());
        let lister_watcher =
            KubeListerWatcher::new(Api::<Pod>::all(client(&server))).wire_format(format);
        let running = start(lister_watcher, &store, quick());
        eventually("the list ended", PATIENCE, || {
            store.ended_at.lock().is_some()
        })
        .await;
        running.stop().await;
        let parts = std::mem::take(&mut *store.parts.lock());
        let ended_at = store.ended_at.lock().take();
        (parts, ended_at, server.resource_version().to_string())
    }

    /// A store that takes lists in parts gets a large list (served whole, at version "0") as
    /// it is decoded, in more than one part, never whole; over protobuf each object comes with
    /// its bytes, over JSON none does.
    #[tokio::test]
    async fn a_store_that_takes_parts_gets_the_list_as_it_is_decoded() {
        // More than one batch of the decoder's (2,048 objects).
        const PODS: usize = 2_500;
        for (format, with_bytes) in [(WireFormat::Protobuf, PODS), (WireFormat::Json, 0)] {
            let (parts, ended_at, server_version) = listed_in_parts(PODS, format).await;
            let case = format!("{format:?}");
            assert!(parts.len() > 1, "{case}: one part of {:?}", parts);
            assert_eq!(parts.iter().map(|(n, _)| n).sum::<usize>(), PODS, "{case}");
            assert_eq!(
                parts.iter().map(|(_, e)| e).sum::<usize>(),
                with_bytes,
                "{case}"
            );
            assert_eq!(ended_at, Some(server_version), "{case}");
        }
    }
}
