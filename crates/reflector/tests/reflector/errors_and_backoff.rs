//! Errors and backoff: every error reaches the watch error handler, described without quoting
//! what the server sent; refused connections, 429s and failing lists are retried on the backoff
//! schedule (a Retry-After is a floor under it), never in a hot loop; undecodable or unexpected
//! events are reported and skipped or relisted.

/// Against a scripted lister-watcher, on tokio's paused clock.
mod in_memory {
    use std::{sync::Arc, time::Duration};

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_reflector::{Error, ReflectorOptions, WatchEvent};
    use kinformer_testing::eventually;
    use kube_core::ObjectMeta;
    use parking_lot::Mutex;
    use tokio::time::Instant;

    use crate::common::scripted::{
        PATIENCE, Scripted, channel_watch, contents, events_then_close, expected, page,
        pending_watch, pod, quick_backoff, reflect,
    };

    /// Ported from client-go's TestReflectorListAndWatchInitConnBackoff: refused connections back
    /// off exponentially, without relisting.
    #[tokio::test(start_paused = true)]
    async fn refused_watches_back_off_exponentially_without_relisting() {
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![], None)),
            |_, call| {
                if call < 5 {
                    let refused = std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        "connect: connection refused",
                    );
                    Err(Error::from_transport(kube_client::Error::Service(
                        Box::new(refused),
                    )))
                } else {
                    pending_watch()
                }
            },
        );
        let started = Instant::now();
        let (_, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().backoff(quick_backoff()),
        );
        eventually("the sixth watch is open", PATIENCE, || {
            lister_watcher.watch_calls().len() == 6
        })
        .await;
        let elapsed = started.elapsed();
        // 1 + 2 + 4 + 8 + 16 ms without jitter, plus the polling step of `eventually`.
        assert!(elapsed >= Duration::from_millis(31), "{elapsed:?}");
        assert!(elapsed <= Duration::from_millis(45), "{elapsed:?}");
        assert_eq!(lister_watcher.list_calls().len(), 1);
        running.stop().await;
    }

    /// Ported from client-go's TestNoRelistOnTooManyRequests and TestBackoffOnTooManyRequests.
    #[tokio::test(start_paused = true)]
    async fn too_many_requests_backs_off_without_relisting() {
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![], None)),
            |_, call| match call {
                0..=3 => Err(Error::TooManyRequests {
                    retry_after: None,
                    message: "slow down".into(),
                }),
                4 => Ok(futures::stream::iter([Err(Error::TooManyRequests {
                    retry_after: None,
                    message: "in stream".into(),
                })])
                .boxed()),
                _ => pending_watch(),
            },
        );
        let (_, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().backoff(quick_backoff()),
        );
        eventually("the sixth watch is open", PATIENCE, || {
            lister_watcher.watch_calls().len() == 6
        })
        .await;
        assert_eq!(lister_watcher.list_calls().len(), 1);
        running.stop().await;
    }

    /// A 429's Retry-After is a floor under the backoff.
    #[tokio::test(start_paused = true)]
    async fn retry_after_is_honoured_on_too_many_requests() {
        let lister_watcher = Scripted::new(
            |_, call| match call {
                0 => Err(Error::TooManyRequests {
                    retry_after: Some(Duration::from_secs(7)),
                    message: "slow down".into(),
                }),
                _ => Ok(page("1", vec![], None)),
            },
            |_, _| pending_watch(),
        );
        let started = Instant::now();
        let (_, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().backoff(quick_backoff()),
        );
        eventually("the second list ran", PATIENCE, || {
            lister_watcher.list_calls().len() == 2
        })
        .await;
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_secs(7), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(8), "{elapsed:?}");
        running.stop().await;
    }

    /// Repeated list failures follow the reflector's backoff schedule: 800ms doubling to 30s,
    /// jittered up to twice that. Over five minutes that is at most a couple of dozen attempts.
    #[tokio::test(start_paused = true)]
    async fn failing_lists_follow_the_backoff_schedule_instead_of_a_hot_loop() {
        let lister_watcher = Scripted::new(
            |_, _| {
                Err(Error::Api {
                    code: 500,
                    reason: "InternalError".into(),
                    message: "etcd down".into(),
                })
            },
            |_, _| pending_watch(),
        );
        let (_, running) = reflect(&lister_watcher, ReflectorOptions::default());
        // Virtual time: five minutes on the paused clock.
        tokio::time::sleep(Duration::from_secs(300)).await;
        let attempts = lister_watcher.list_calls().len();
        // Without jitter: 0.8+1.6+3.2+6.4+12.8+25.6 = 50.4s, then one every 30s: 15 attempts; the
        // jitter (up to 2x) can only lower that, to no fewer than 5.
        assert!(
            (5..=16).contains(&attempts),
            "{attempts} attempts in five minutes"
        );
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorWatchHandler: objects of another kind are skipped and
    /// reported, the watch goes on.
    #[tokio::test(start_paused = true)]
    async fn objects_of_the_wrong_kind_or_without_a_name_are_reported_and_skipped() {
        let (sender, stream) = channel_watch();
        let stream = Mutex::new(Some(stream));
        let lister_watcher = Scripted::new(
            |_, _| Ok(page("1", vec![pod("foo", "1"), pod("bar", "1")], None)),
            move |_, _| stream.lock().take().map_or_else(pending_watch, Ok),
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (cache, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().watch_error_handler({
                let seen = Arc::clone(&seen);
                move |error| {
                    seen.lock()
                        .push(kinformer_wait::ErrorChain(error).to_string());
                }
            }),
        );
        eventually("the watch is open", PATIENCE, || {
            !lister_watcher.watch_calls().is_empty()
        })
        .await;
        let nameless = Arc::new(Pod {
            metadata: ObjectMeta {
                resource_version: Some("20".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        });
        for event in [
            Err(Error::WrongKind {
                expected: "v1/Pod".into(),
                found: "v1/Service".into(),
            }),
            Ok(WatchEvent::Deleted(pod("foo", "30"))),
            Ok(WatchEvent::Added(nameless.into())),
            Ok(WatchEvent::Modified(pod("bar", "55").into())),
            Ok(WatchEvent::Added(pod("baz", "32").into())),
        ] {
            sender.send(event).expect("watching");
        }
        eventually("every event is applied", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "32"
        })
        .await;
        assert_eq!(contents(&cache), expected(&[("bar", "55"), ("baz", "32")]));
        let seen = seen.lock().clone();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[0].contains("v1/Service"));
        assert!(seen[1].contains("metadata.name"));
        assert_eq!(
            lister_watcher.watch_calls().len(),
            1,
            "the watch was never interrupted"
        );
        running.stop().await;
    }

    /// A malformed line ends the watch with a decode error; the reflector reports it and relists.
    #[tokio::test(start_paused = true)]
    async fn an_undecodable_event_is_reported_and_the_reflector_relists() {
        let lister_watcher = Scripted::new(
            |_, call| Ok(page(if call == 0 { "1" } else { "3" }, vec![], None)),
            |_, call| match call {
                0 => events_then_close(vec![Err(Error::decode(
                    "watch event",
                    "expected value",
                    b"garbage",
                ))]),
                _ => pending_watch(),
            },
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (_, running) = reflect(
            &lister_watcher,
            ReflectorOptions::default().watch_error_handler({
                let seen = Arc::clone(&seen);
                move |error| seen.lock().push(matches!(error, Error::Decode { .. }))
            }),
        );
        eventually("the relist ran", PATIENCE, || {
            running.reflector.last_sync_resource_version() == "3"
        })
        .await;
        assert_eq!(*seen.lock(), [true]);
        running.stop().await;
    }
}

/// Over real HTTP, through kube-client, against the fake API server.
mod over_http {
    use std::time::{Duration, Instant};

    use kinformer_reflector::ReflectorOptions;
    use kinformer_testing::{Fault, Verb, eventually};
    use kinformer_wait::ExponentialBackoffManager;

    use crate::common::fake_server::{
        PATIENCE, churn, converges, pods, quick, reflect, server_with_pods,
    };

    /// A client from `informer_client` has no retry layer: a 503 reaches its caller after one
    /// request, where kube-client's default client retries it underneath.
    #[tokio::test]
    async fn an_informer_client_leaves_retries_to_the_reflector() {
        let server = server_with_pods(1).await;
        let config = || kube_client::Config::new(server.url().parse().expect("the server's URL"));
        let fail_next_list = || {
            server.faults().inject(
                Fault::status(503)
                    .verb(Verb::List)
                    .resource("pods")
                    .times(1),
            );
        };

        fail_next_list();
        let client = kinformer_reflector::informer_client(Some(config()))
            .await
            .expect("a client");
        let pods = kube_client::Api::<k8s_openapi::api::core::v1::Pod>::all(client);
        let refused = pods.list(&Default::default()).await;
        assert!(
            matches!(&refused, Err(kube_client::Error::Api(status)) if status.code == 503),
            "{refused:?}"
        );
        assert_eq!(server.faults().request_count(Verb::List, "pods"), 1);

        fail_next_list();
        let retrying = kube_client::Client::try_from(config()).expect("a client");
        let pods = kube_client::Api::<k8s_openapi::api::core::v1::Pod>::all(retrying);
        pods.list(&Default::default())
            .await
            .expect("kube-client's retry layer retries the 503");
        assert_eq!(server.faults().request_count(Verb::List, "pods"), 3);
    }

    /// 403 on list is reported, retried with backoff, and the reflector recovers once allowed.
    #[tokio::test]
    async fn forbidden_lists_are_reported_and_retried() {
        let server = server_with_pods(5).await;
        server.faults().inject(
            Fault::status(403)
                .verb(Verb::List)
                .resource("pods")
                .times(3),
        );
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        let forbidden = running
            .errors()
            .iter()
            .filter(|e| e.starts_with("Forbidden"))
            .count();
        assert_eq!(forbidden, 3, "{:?}", running.errors());
        running.stop().await;
    }

    /// 500s on list and watch are reported and retried until the server recovers.
    #[tokio::test]
    async fn internal_errors_are_reported_and_retried() {
        let server = server_with_pods(5).await;
        let faults = server.faults();
        faults.inject(
            Fault::status(500)
                .verb(Verb::List)
                .resource("pods")
                .times(2),
        );
        faults.inject(
            Fault::status(500)
                .verb(Verb::Watch)
                .resource("pods")
                .times(2),
        );
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
        churn(&server, 30);
        converges(&server, &cache).await;
        let internal = running
            .errors()
            .iter()
            .filter(|e| e.contains("code: 500"))
            .count();
        assert_eq!(internal, 4, "{:?}", running.errors());
        running.stop().await;
    }

    /// A 429's Retry-After delays the next attempt by at least that long.
    #[tokio::test]
    async fn too_many_requests_waits_for_retry_after() {
        let server = server_with_pods(5).await;
        server.faults().inject(
            Fault::status(429)
                .verb(Verb::List)
                .resource("pods")
                .retry_after(2),
        );
        let started = Instant::now();
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        assert!(
            started.elapsed() >= Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            running.saw("TooManyRequests { retry_after: Some(2s)"),
            "{:?}",
            running.errors()
        );
        running.stop().await;
    }

    /// No hot loop: while the server refuses every list, the reflector's backoff spaces the
    /// attempts over real HTTP. The schedule is the default's shape (doubling, jittered up to
    /// 2x, reset after a quiet spell) from 200ms instead of 800ms: the third attempt comes no
    /// sooner than 600ms after the first (a lower bound, which a loaded machine can only
    /// stretch). Afterwards it recovers. The default schedule itself is checked on the paused
    /// clock, by `in_memory::failing_lists_follow_the_backoff_schedule_instead_of_a_hot_loop`.
    #[tokio::test]
    async fn a_refusing_server_sees_requests_only_at_the_backoff_schedule() {
        let server = server_with_pods(4).await;
        server.faults().inject(
            Fault::status(500)
                .verb(Verb::List)
                .resource("pods")
                .times(10_000),
        );
        // The default's reset period (2 minutes), factor (2.0) and jitter (1.0).
        let backoff = ExponentialBackoffManager::new(
            Duration::from_millis(200),
            Duration::from_secs(30),
            Duration::from_secs(120),
            2.0,
            1.0,
        );
        let (cache, running) = reflect(pods(&server), ReflectorOptions::default().backoff(backoff));
        eventually("a first attempt", PATIENCE, || {
            server.faults().request_count(Verb::List, "pods") >= 1
        })
        .await;
        let first = Instant::now();
        eventually("a third attempt", PATIENCE, || {
            server.faults().request_count(Verb::List, "pods") >= 3
        })
        .await;
        // Attempts come after at least 0.2s, then 0.4s more.
        assert!(
            first.elapsed() >= Duration::from_millis(600),
            "three list requests within {:?}",
            first.elapsed()
        );
        server.faults().clear();
        converges(&server, &cache).await;
        running.stop().await;
    }

    /// Garbage in a watch stream is a decode error, reported; the reflector relists and loses
    /// nothing.
    #[tokio::test]
    async fn garbage_watch_lines_are_reported_and_the_cache_recovers() {
        let server = server_with_pods(6).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
        server.faults().inject_watch_line("{not json at all");
        churn(&server, 40);
        converges(&server, &cache).await;
        eventually("the decode error is reported", PATIENCE, || {
            running.saw("Decode")
        })
        .await;
        let decode = running
            .errors()
            .into_iter()
            .find(|e| e.starts_with("Decode"))
            .unwrap_or_default();
        // What arrived is described by its size and where decoding stopped, in the format the
        // response declared, never quoted.
        let stopped = match kinformer_reflector::WireFormat::from_env() {
            kinformer_reflector::WireFormat::Json => "line 1 column 2",
            _ => "malformed protobuf",
        };
        assert!(
            decode.contains("size: 16") && decode.contains(stopped),
            "{decode}"
        );
        assert!(!decode.contains("not json"), "{decode}");
        running.stop().await;
    }

    /// An ERROR event whose object is not a Status (here a Secret) is reported by what it
    /// carried, kind and name, not as an empty "API error 0", and none of its data reaches the
    /// error; the reflector relists and loses nothing.
    #[tokio::test]
    async fn an_error_event_without_a_status_is_reported_by_kind_and_name_without_its_data() {
        let server = server_with_pods(6).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
        server.faults().inject_watch_line(
        r#"{"type":"ERROR","object":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"prod"},"data":{"password":"aHVudGVyMg=="}}}"#,
    );
        eventually("the event is reported", PATIENCE, || {
            running
                .errors()
                .iter()
                .any(|error| error.contains("ERROR event"))
        })
        .await;
        let reported = running
            .errors()
            .into_iter()
            .find(|error| error.contains("ERROR event"))
            .unwrap_or_default();
        assert!(reported.contains("v1/Secret prod/db"), "{reported}");
        assert!(reported.contains("not a Status"), "{reported}");
        assert!(!reported.contains("aHVudGVyMg"), "{reported}");
        assert!(!reported.contains("API error 0"), "{reported}");
        churn(&server, 10);
        converges(&server, &cache).await;
        running.stop().await;
    }

    /// Ported from client-go's TestReflectorWatchHandler: an object of another kind in the stream is
    /// reported and skipped; the watch goes on.
    #[tokio::test]
    async fn an_object_of_the_wrong_kind_is_reported_and_skipped() {
        let server = server_with_pods(3).await;
        let (cache, running) = reflect(pods(&server), quick());
        converges(&server, &cache).await;
        eventually("a watch is open", PATIENCE, || server.open_watches() == 1).await;
        server.faults().inject_watch_line(
        r#"{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"intruder","namespace":"ns-0","resourceVersion":"1"}}}"#,
    );
        eventually("the wrong kind is reported", PATIENCE, || {
            running.saw("WrongKind")
        })
        .await;
        churn(&server, 20);
        converges(&server, &cache).await;
        assert_eq!(
            server.faults().request_count(Verb::Watch, "pods"),
            1,
            "the watch went on"
        );
        running.stop().await;
    }
}
