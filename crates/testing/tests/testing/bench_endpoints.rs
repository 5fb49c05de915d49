//! The bench endpoints of xtask/peers/BENCH-PROTOCOL.md over real HTTP: update, relist,
//! checksum and content-types, and the shared checksum function.

use crate::common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{PATIENCE, RawWatch, get, raw};
use kinformer_testing::bench::{EMIT_NS_ANNOTATION, checksum};
use kinformer_testing::{FakeApiServer, ServerOptions, fixtures};
use serde_json::Value;

async fn bench_server(pods: usize, config_maps: usize) -> FakeApiServer {
    let server = FakeApiServer::start_with(ServerOptions::default().admin_endpoints(true))
        .await
        .expect("the server starts");
    for i in 0..pods {
        server
            .create_object(fixtures::pod(i))
            .expect("fixture pods");
    }
    for i in 0..config_maps {
        server
            .create_object(fixtures::config_map(i))
            .expect("a fixture config map");
    }
    server
}

async fn post(server: &FakeApiServer, path: &str) -> Value {
    let response = raw(server, "POST", path, &[], b"").await;
    assert_eq!(
        response.status,
        200,
        "POST {path}: {}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

fn now_ns() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos(),
    )
    .expect("fits in u64")
}

fn emit_ns(object: &Value) -> u64 {
    object["metadata"]["annotations"][EMIT_NS_ANNOTATION]
        .as_str()
        .unwrap_or_else(|| panic!("no emit-ns annotation on {}", object["metadata"]))
        .parse()
        .expect("emit-ns is a decimal number")
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"].as_str().expect("namespace"),
        object["metadata"]["name"].as_str().expect("name")
    )
}

fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("a numeric resourceVersion")
}

/// The items of a fresh list, in the order the server returns them (key order).
async fn list(server: &FakeApiServer, plural: &str) -> Vec<Value> {
    let response = get(server, &format!("/api/v1/{plural}")).await;
    assert_eq!(response.status, 200);
    response.json()["items"].as_array().expect("items").clone()
}

/// Waits until an object exists, as a peer waits for the sentinel.
async fn wait_for(server: &FakeApiServer, path: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = get(server, path).await;
        if response.status == 200 {
            return response.json();
        }
        assert!(Instant::now() < deadline, "{path} never appeared");
        // Polling: the endpoint answers 404 until the background work has finished.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn the_checksum_is_fnv1a_over_sorted_keys_and_versions() {
    // Computed by hand (FNV-1a 64 over the bytes below), not by the function under test.
    assert_eq!(checksum(Vec::<(&str, &str)>::new()), "cbf29ce484222325");
    assert_eq!(checksum([("ns-0/a", "5")]), "a965ae3b83e5ae56");
    // b"ns-0/a\x005\nns-1/b\x0012\n", fed in key order whatever the input order.
    assert_eq!(
        checksum([("ns-1/b", "12"), ("ns-0/a", "5")]),
        "1844a688dbe120a1"
    );
    assert_eq!(
        checksum(vec![
            ("ns-0/a".to_owned(), "5".to_owned()),
            ("ns-1/b".to_owned(), "12".to_owned())
        ]),
        "1844a688dbe120a1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_sends_every_change_then_the_sentinel_to_an_open_watch() {
    let server = bench_server(30, 0).await;
    let keys: Vec<String> = list(&server, "pods").await.iter().map(key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "a list comes in key order");
    let mut watch = RawWatch::open(
        &server,
        &format!(
            "/api/v1/pods?watch=true&resourceVersion={}",
            server.resource_version()
        ),
    )
    .await;
    assert_eq!(watch.status, 200);
    let before = now_ns();
    let answer = post(&server, "/admin/bench/update?resource=pods&count=75&rate=0").await;
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["sentinel"], "ns-0/bench-sentinel-1");

    let mut last_emit = before;
    let mut last_rv = 0;
    for i in 0..75 {
        let event = watch.next().await.expect("an update event");
        assert_eq!(event["type"], "MODIFIED", "event {i}: {event}");
        let object = &event["object"];
        assert_eq!(
            key(object),
            keys[i % keys.len()],
            "round robin in key order"
        );
        let emitted = emit_ns(object);
        assert!(
            emitted >= last_emit && emitted <= now_ns(),
            "emit-ns {emitted} of event {i} is not between {last_emit} and now"
        );
        assert!(resource_version(object) > last_rv);
        last_emit = emitted;
        last_rv = resource_version(object);
    }
    let event = watch.next().await.expect("the sentinel");
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(key(&event["object"]), "ns-0/bench-sentinel-1");
    assert!(emit_ns(&event["object"]) >= last_emit);
    assert!(resource_version(&event["object"]) > last_rv);

    // The stored objects carry the annotation too, not only the events.
    let stored = wait_for(&server, "/api/v1/namespaces/ns-0/pods/bench-sentinel-1").await;
    assert_eq!(stored["spec"]["containers"][0]["name"], "sentinel");
    let second = post(&server, "/admin/bench/update?resource=pods&count=0&rate=0").await;
    assert_eq!(second["sentinel"], "ns-0/bench-sentinel-2");
    assert_eq!(
        wait_for(&server, "/api/v1/namespaces/ns-0/pods/bench-sentinel-2").await["metadata"]["name"],
        "bench-sentinel-2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_keeps_to_the_requested_rate() {
    let server = bench_server(0, 10).await;
    let mut watch = RawWatch::open(
        &server,
        &format!(
            "/api/v1/configmaps?watch=true&resourceVersion={}",
            server.resource_version()
        ),
    )
    .await;
    let started = Instant::now();
    let answer = post(
        &server,
        "/admin/bench/update?resource=configmaps&count=200&rate=100",
    )
    .await;
    let sentinel = answer["sentinel"].as_str().expect("a sentinel").to_owned();
    let mut arrivals = Vec::new();
    loop {
        let event = watch.next().await.expect("an event");
        if key(&event["object"]) == sentinel {
            break;
        }
        assert_eq!(event["type"], "MODIFIED");
        arrivals.push(started.elapsed());
    }
    let total = started.elapsed();
    assert_eq!(arrivals.len(), 200);
    // Counted from the first arrival: the server paces from there, and a slow POST on a
    // loaded machine must not shift the window.
    let first = arrivals[0];
    let by_the_middle = arrivals
        .iter()
        .filter(|at| **at - first <= Duration::from_secs(1))
        .count();
    assert!(
        (50..=150).contains(&by_the_middle),
        "{by_the_middle} of 200 updates at 100/s arrived in the second after the first"
    );
    assert!(
        total >= Duration::from_millis(1800) && total <= Duration::from_secs(6),
        "200 updates at 100/s took {total:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_closes_watches_changes_objects_and_expires_every_older_version() {
    let server = bench_server(40, 0).await;
    // A sentinel from an earlier call is not one of the objects a relist picks from.
    post(&server, "/admin/bench/update?resource=pods&count=0").await;
    wait_for(&server, "/api/v1/namespaces/ns-0/pods/bench-sentinel-1").await;
    let before: Vec<Value> = list(&server, "pods").await;
    let pods: Vec<&Value> = before
        .iter()
        .filter(|p| !key(p).ends_with("bench-sentinel-1"))
        .collect();
    assert_eq!(pods.len(), 40);
    let last_rv = server.resource_version();
    let mut open = RawWatch::open(
        &server,
        &format!("/api/v1/pods?watch=true&resourceVersion={last_rv}"),
    )
    .await;
    assert_eq!(open.status, 200);

    let answer = post(&server, "/admin/bench/relist?resource=pods&fraction=0.25").await;
    // Every 4th of 40 pods: positions 0, 4, ..., 36, alternately updated and deleted.
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["updated"], 5);
    assert_eq!(answer["deleted"], 5);
    assert_eq!(answer["sentinel"], "ns-0/bench-sentinel-2");

    assert_eq!(
        open.next().await,
        None,
        "a watch open before the relist ends without seeing any of its changes"
    );
    let mut resumed = RawWatch::open(
        &server,
        &format!("/api/v1/pods?watch=true&resourceVersion={last_rv}"),
    )
    .await;
    let error = resumed.next().await.expect("an ERROR event");
    assert_eq!(error["type"], "ERROR");
    assert_eq!(error["object"]["code"], 410, "{error}");

    let after = list(&server, "pods").await;
    assert_eq!(after.len(), 40 + 1 - 5 + 1);
    let find = |k: &str| after.iter().find(|o| key(o) == k);
    for (position, pod) in pods.iter().enumerate() {
        let k = key(pod);
        match (position % 4, position / 4 % 2) {
            (0, 0) => {
                let updated = find(&k).expect("an updated pod stays");
                assert!(resource_version(updated) > last_rv);
                assert!(emit_ns(updated) > 0);
            }
            (0, _) => assert!(find(&k).is_none(), "{k} is deleted"),
            _ => assert_eq!(
                find(&k).map(resource_version),
                Some(resource_version(pod)),
                "{k} is untouched"
            ),
        }
    }
    let sentinel = find("ns-0/bench-sentinel-2").expect("the sentinel");
    assert!(emit_ns(sentinel) > 0);

    let server_sum = get(&server, "/admin/bench/checksum?resource=pods")
        .await
        .json();
    let ours = checksum(
        after
            .iter()
            .map(|o| (key(o), resource_version(o).to_string())),
    );
    assert_eq!(server_sum["count"], after.len());
    assert_eq!(server_sum["checksum"], ours);
}

#[tokio::test]
async fn content_types_count_get_list_and_watch_responses() {
    let server = bench_server(3, 0).await;
    let count = |body: Value| body["application/json"].as_u64().unwrap_or(0);
    let start = count(get(&server, "/admin/content-types").await.json());
    assert_eq!(start, 0);
    assert_eq!(get(&server, "/api/v1/pods").await.status, 200);
    assert_eq!(
        get(&server, "/api/v1/namespaces/ns-0/pods/pod-0")
            .await
            .status,
        200
    );
    assert_eq!(
        get(&server, "/api/v1/namespaces/ns-0/pods/absent")
            .await
            .status,
        404
    );
    let mut watch = RawWatch::open(&server, "/api/v1/pods?watch=true&timeoutSeconds=1").await;
    while watch.next().await.is_some() {}
    // Neither discovery nor writes are counted.
    assert_eq!(get(&server, "/api/v1").await.status, 200);
    let created = raw(
        &server,
        "POST",
        "/api/v1/namespaces/ns-0/configmaps",
        &[("Content-Type", "application/json")],
        br#"{"metadata":{"name":"c"}}"#,
    )
    .await;
    assert_eq!(created.status, 201);
    let counts = get(&server, "/admin/content-types").await.json();
    assert_eq!(count(counts.clone()), start + 4, "{counts}");
    assert_eq!(counts.as_object().map(|o| o.len()), Some(1), "{counts}");
}

#[tokio::test]
async fn bad_bench_requests_are_rejected_with_a_400_status() {
    let server = bench_server(2, 0).await;
    let cases = [
        (
            "POST",
            "/admin/bench/update?count=1",
            "resource is required",
        ),
        (
            "POST",
            "/admin/bench/update?resource=deployments&count=1",
            "unknown bench resource \"deployments\"",
        ),
        (
            "POST",
            "/admin/bench/update?resource=pods",
            "count is required",
        ),
        (
            "POST",
            "/admin/bench/update?resource=pods&count=ten",
            "count must be a non-negative integer",
        ),
        (
            "POST",
            "/admin/bench/update?resource=pods&count=1&rate=-5",
            "rate must be a non-negative integer",
        ),
        (
            "POST",
            "/admin/bench/update?resource=configmaps&count=1",
            "there are no configmaps to update",
        ),
        (
            "POST",
            "/admin/bench/relist?resource=pods",
            "fraction is required",
        ),
        (
            "POST",
            "/admin/bench/relist?resource=pods&fraction=0",
            "fraction must be a number in (0, 1]",
        ),
        (
            "POST",
            "/admin/bench/relist?resource=pods&fraction=1.5",
            "fraction must be a number in (0, 1]",
        ),
        (
            "POST",
            "/admin/bench/relist?resource=pods&fraction=NaN",
            "fraction must be a number in (0, 1]",
        ),
        (
            "GET",
            "/admin/bench/checksum?resource=secrets",
            "unknown bench resource",
        ),
    ];
    for (method, path, message) in cases {
        let response = raw(&server, method, path, &[], b"").await;
        assert_eq!(response.status, 400, "{method} {path}");
        let status = response.json();
        assert_eq!(status["kind"], "Status");
        let text = status["message"].as_str().expect("a message");
        assert!(text.contains(message), "{path}: {text:?}");
    }
    // Nothing was started by a rejected call: no sentinel name was used up.
    let answer = post(&server, "/admin/bench/update?resource=pods&count=1").await;
    assert_eq!(answer["sentinel"], "ns-0/bench-sentinel-1");

    let empty = get(&server, "/admin/bench/checksum?resource=configmaps")
        .await
        .json();
    assert_eq!(empty["count"], 0);
    assert_eq!(empty["checksum"], "cbf29ce484222325");
}
