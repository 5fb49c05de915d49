//! Every fault the handle can inject, observed through kube-client and raw HTTP.

use crate::common;

use std::time::{Duration, Instant};

use common::{PATIENCE, RawWatch, api_status, config_map, get, raw};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_testing::{FakeApiServer, Fault, ServerOptions, Verb, eventually};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[tokio::test]
async fn an_injected_status_fails_the_next_matching_requests_only() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    server.faults().inject(
        Fault::status(500)
            .verb(Verb::List)
            .resource("configmaps")
            .times(1),
    );
    let status = api_status(
        api.list(&ListParams::default())
            .await
            .expect_err("injected 500"),
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError")
    );
    api.create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect("other verbs are untouched");
    assert_eq!(
        api.list(&ListParams::default())
            .await
            .expect("list recovers")
            .items
            .len(),
        1
    );
    assert_eq!(server.faults().request_count(Verb::List, "configmaps"), 2);
    assert_eq!(server.faults().request_count(Verb::Create, "configmaps"), 1);
}

#[tokio::test]
async fn injected_statuses_carry_the_reason_apiserver_pairs_with_each_code() {
    let server = FakeApiServer::start().await.expect("start");
    for (code, reason) in [
        (403, "Forbidden"),
        (410, "Expired"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (504, "Timeout"),
    ] {
        let retry_after = (code == 429).then_some(2);
        let mut fault = Fault::status(code).verb(Verb::Get);
        if let Some(seconds) = retry_after {
            fault = fault.retry_after(seconds);
        }
        server.faults().inject(fault);
        let response = get(&server, "/api/v1/namespaces/default/pods/x").await;
        assert_eq!(response.status, code);
        let status = response.json();
        assert_eq!(
            (status["kind"].clone(), status["status"].clone()),
            (json!("Status"), json!("Failure"))
        );
        assert_eq!(status["reason"], reason);
        assert_eq!(status["code"], code);
        assert_eq!(
            response.header("Retry-After"),
            retry_after.map(|s| s.to_string())
        );
    }
    assert_eq!(
        get(&server, "/api/v1/namespaces/default/pods/x")
            .await
            .status,
        404,
        "faults are used up"
    );
}

#[tokio::test]
async fn kube_client_retries_429_with_retry_after_and_the_counts_show_each_attempt() {
    let server = FakeApiServer::start().await.expect("start");
    // `server.client()` turns kube-client's retries off, as informers want; this test is about
    // them, so its client keeps kube-client's default.
    let url = server.url().parse().expect("the server URL parses");
    let client = kube_client::Client::try_from(kube_client::Config::new(url)).expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    server.faults().inject(
        Fault::status(429)
            .verb(Verb::List)
            .resource("configmaps")
            .times(2)
            .retry_after(0),
    );
    api.list(&ListParams::default())
        .await
        .expect("kube-client retries 429 on its own");
    assert_eq!(server.faults().request_count(Verb::List, "configmaps"), 3);
}

#[tokio::test]
async fn close_watches_ends_every_open_stream() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::all(server.client().expect("client"));
    let rv = server.resource_version().to_string();
    let mut first = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .expect("watch")
        .boxed();
    let mut second = RawWatch::open(
        &server,
        &format!("/api/v1/configmaps?watch=true&resourceVersion={rv}"),
    )
    .await;
    eventually("both watches registered", PATIENCE, || {
        server.open_watches() >= 2
    })
    .await;
    server.faults().close_watches();
    let ended = tokio::time::timeout(PATIENCE, first.next())
        .await
        .expect("the stream ended in time");
    assert!(ended.is_none());
    assert_eq!(second.next().await, None);
    assert_eq!(server.open_watches(), 0);
}

#[tokio::test]
async fn garbage_and_unknown_event_types_reach_open_watches() {
    let server = FakeApiServer::start().await.expect("start");
    let rv = server.resource_version();
    let mut watch = RawWatch::open(
        &server,
        &format!("/api/v1/configmaps?watch=true&resourceVersion={rv}"),
    )
    .await;
    eventually("watch registered", PATIENCE, || server.open_watches() >= 1).await;
    server
        .faults()
        .inject_watch_line("{\"type\":\"ADDED\",\"object\":");
    assert_eq!(
        watch.next_line_text().await.as_deref(),
        Some("{\"type\":\"ADDED\",\"object\":\n")
    );
    server.faults().inject_watch_line(
        r#"{"type":"SURPRISE","object":{"kind":"Status","apiVersion":"v1","metadata":{}}}"#,
    );
    let line = watch.next_line_text().await.expect("a line");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&line).expect("valid JSON")["type"],
        "SURPRISE"
    );

    // kube-client reports the garbage as an error item instead of hanging.
    let api: Api<ConfigMap> = Api::all(server.client().expect("client"));
    // The stream subscribes to faults before its response headers go out.
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv.to_string())
        .await
        .expect("watch")
        .boxed();
    server.faults().inject_watch_line("this is not json");
    server.create_object(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "after", "namespace": "default" } })).expect("create");
    let first = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("in time")
        .expect("open");
    assert!(first.is_err(), "the malformed line is an error");
    let second = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("in time")
        .expect("open");
    assert!(
        matches!(second, Ok(WatchEvent::Added(cm)) if cm.metadata.name.as_deref() == Some("after"))
    );
}

/// On the paused clock, so the delay is exact: virtual time moves only while the server
/// waits, and not at all for an undelayed request.
#[tokio::test(start_paused = true)]
async fn a_response_delay_holds_every_request() {
    let server = FakeApiServer::start().await.expect("start");
    let delay = Duration::from_secs(3);
    server.faults().set_delay(Some(delay));
    let started = tokio::time::Instant::now();
    assert_eq!(get(&server, "/api/v1/pods").await.status, 200);
    assert!(started.elapsed() >= delay);
    server.faults().clear();
    let started = tokio::time::Instant::now();
    get(&server, "/api/v1/pods").await;
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test]
async fn a_stopped_listener_refuses_connections_and_a_restart_keeps_every_object() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("kept", "1"))
        .await
        .expect("create");
    server.stop_listener().await;
    let refused = tokio::net::TcpStream::connect(server.addr()).await;
    assert!(refused.is_err(), "connection refused while stopped");
    assert!(api.get("kept").await.is_err());
    server
        .restart_listener()
        .await
        .expect("restart on the same port");
    assert_eq!(
        api.get("kept")
            .await
            .expect("served again")
            .metadata
            .name
            .as_deref(),
        Some("kept")
    );
}

#[tokio::test]
async fn the_admin_endpoints_steer_faults_over_http() {
    let server = FakeApiServer::start_with(ServerOptions::default().admin_endpoints(true))
        .await
        .expect("start");
    let injected = raw(
        &server,
        "POST",
        "/admin/faults/status?code=503&verb=list&resource=pods&times=1",
        &[],
        b"",
    )
    .await;
    assert_eq!(injected.status, 200);
    assert_eq!(get(&server, "/api/v1/pods").await.status, 503);
    assert_eq!(get(&server, "/api/v1/pods").await.status, 200);
    let counts = get(&server, "/admin/requests").await.json();
    assert_eq!(
        counts,
        json!([{ "verb": "list", "resource": "pods", "count": 2 }])
    );
    assert_eq!(
        raw(&server, "POST", "/admin/compact", &[], b"")
            .await
            .status,
        200
    );
    // The outage starts 50 ms after the answer and lasts 2 s: polled, not slept through, so
    // a stalled test thread cannot miss it or outlast it.
    let outage = raw(&server, "POST", "/admin/faults/outage?ms=2000", &[], b"").await;
    assert_eq!(outage.status, 200);
    assert!(
        connectable_within(server.addr(), false, PATIENCE).await,
        "down during the outage"
    );
    assert!(
        connectable_within(server.addr(), true, PATIENCE).await,
        "back after the outage"
    );
    assert_eq!(get(&server, "/healthz").await.status, 200);
    let without = FakeApiServer::start().await.expect("start");
    assert_eq!(
        get(&without, "/admin/requests").await.status,
        404,
        "admin endpoints are opt-in"
    );
}

#[tokio::test]
async fn a_backed_off_watcher_makes_few_requests_against_a_failing_list() {
    let server = FakeApiServer::start().await.expect("start");
    let api: Api<ConfigMap> = Api::all(server.client().expect("client"));
    server.faults().inject(
        Fault::status(500)
            .verb(Verb::List)
            .resource("configmaps")
            .times(10_000),
    );
    let mut events = kube::runtime::WatchStreamExt::default_backoff(kube::runtime::watcher(
        api,
        kube::runtime::watcher::Config::default(),
    ))
    .boxed();
    // Init markers and list errors alternate; only the request count matters here.
    let watching = tokio::spawn(async move { while events.next().await.is_some() {} });
    eventually("the watcher lists", PATIENCE, || {
        server.faults().request_count(Verb::List, "configmaps") >= 1
    })
    .await;
    // A hot loop shows in any window; a slow machine can only make fewer requests in this one.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    watching.abort();
    let lists = server.faults().request_count(Verb::List, "configmaps");
    assert!(
        lists <= 5,
        "{lists} lists within 1.5 s of the first is a hot loop"
    );
}

#[tokio::test]
async fn dropping_the_server_closes_its_port() {
    let server = FakeApiServer::start().await.expect("start");
    let addr = server.addr();
    assert_eq!(get(&server, "/healthz").await.status, 200);
    drop(server);
    // The listener task is aborted on drop; the port closes once the runtime has run it.
    assert!(
        connectable_within(addr, false, PATIENCE).await,
        "the port stays open"
    );
}

#[test]
fn the_public_handles_can_be_shared_across_tasks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<FakeApiServer>();
    assert_send_sync::<kinformer_testing::Faults>();
    assert_send_sync::<kinformer_testing::Error>();
}

/// Whether connecting to `addr` comes to succeed (`wanted`) or to be refused within `limit`.
async fn connectable_within(addr: std::net::SocketAddr, wanted: bool, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if tokio::net::TcpStream::connect(addr).await.is_ok() == wanted {
            return true;
        }
        // Polling: a connection attempt is the only way to observe the port.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// A stalled watch stays open and silent: it delivers no event and no bookmark while a watch
/// opened afterwards sees the same change, and it ends only at its timeout (here capped by
/// `max_watch_timeout`).
#[tokio::test]
async fn a_stalled_watch_stays_open_and_silent_until_its_timeout() {
    let server = FakeApiServer::start_with(
        ServerOptions::default()
            .bookmark_interval(Duration::from_millis(10))
            .max_watch_timeout(Duration::from_millis(300)),
    )
    .await
    .expect("start");
    let rv = server.resource_version();
    let path =
        format!("/api/v1/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={rv}");
    let mut stalled = RawWatch::open(&server, &path).await;
    eventually("watch registered", PATIENCE, || server.open_watches() >= 1).await;
    server.faults().stall_watches();
    server
        .create_object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "after-the-stall", "namespace": "default" },
        }))
        .expect("created");
    let mut fresh = RawWatch::open(
        &server,
        &format!("/api/v1/configmaps?watch=true&resourceVersion={rv}"),
    )
    .await;
    let event = fresh.next().await.expect("the fresh watch sees the change");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "after-the-stall");
    assert_eq!(server.open_watches(), 2, "the stalled watch is still open");
    // Nothing at all on the stalled stream, then its end.
    assert_eq!(stalled.next().await, None);
}
