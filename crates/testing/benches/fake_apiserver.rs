//! How fast the fake API server serves what informers ask of it.
//!
//! * `list_pods_paged_500`: every Pod of a large seeded set (100 000 by default, override with
//!   `KINFORMER_BENCH_PODS`), 500 per page, through kube-client: decoded into k8s-openapi Pods
//!   (`typed`), and as raw bytes (`raw_bytes`, what the server alone costs).
//! * `watch_fanout`: 10 000 writes delivered to 10 concurrent watchers: kube-client typed
//!   ConfigMap watches, and raw streams of ~6 KB Pods counting lines.
//!
//! Run short on shared machines: `cargo bench -p kinformer-testing -- --warm-up-time 1 --measurement-time 3`.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_testing::{FakeApiServer, ServerOptions, fixtures};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PAGE: u32 = 500;
const EVENTS: usize = 10_000;
const WATCHERS: usize = 10;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn pod_count() -> usize {
    std::env::var("KINFORMER_BENCH_PODS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

async fn list_typed(api: &Api<Pod>) -> usize {
    let mut total = 0;
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = api.list(&params).await.expect("a page");
        total += page.items.len();
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next),
            None => return total,
        }
    }
}

/// Pages as bytes: finds the continue token by search instead of decoding the page.
async fn list_raw(client: &kube::Client) -> usize {
    let mut bytes = 0;
    let mut token = String::new();
    loop {
        let uri = format!("/api/v1/pods?limit={PAGE}&continue={token}");
        let request = http::Request::get(uri)
            .body(kube::client::Body::empty())
            .expect("a request");
        let response = client.send(request).await.expect("a page");
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        bytes += body.len();
        let text = std::str::from_utf8(&body[..body.len().min(512)]).unwrap_or_default();
        match text
            .split("\"continue\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
        {
            Some(next) => token = next.to_owned(),
            None => return bytes,
        }
    }
}

fn list_pods_paged_500(c: &mut Criterion) {
    let rt = runtime();
    let count = pod_count();
    let server = rt.block_on(async {
        let server = FakeApiServer::start().await.expect("start");
        for i in 0..count {
            server.create_object(fixtures::pod(i)).expect("seed");
        }
        server
    });
    let client = rt.block_on(async { server.client().expect("client") });
    let api: Api<Pod> = Api::all(client.clone());
    let mut group = c.benchmark_group(format!("list_{count}_pods_paged_500"));
    group.sample_size(10);
    group.throughput(criterion::Throughput::Elements(count as u64));
    group.bench_function("typed", |b| {
        b.iter(|| assert_eq!(rt.block_on(list_typed(&api)), count));
    });
    group.bench_function("raw_bytes", |b| {
        b.iter(|| assert!(rt.block_on(list_raw(&client)) > count * 5_000));
    });
    group.finish();
    drop(server);
}

async fn fanout_typed(server: &FakeApiServer, api: &Api<ConfigMap>, round: usize) -> Duration {
    let rv = server.resource_version().to_string();
    let mut streams = Vec::new();
    for _ in 0..WATCHERS {
        streams.push(
            api.watch(&WatchParams::default().disable_bookmarks(), &rv)
                .await
                .expect("watch")
                .boxed(),
        );
    }
    let started = Instant::now();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|mut stream| {
            tokio::spawn(async move {
                let mut seen = 0;
                while seen < EVENTS {
                    match stream.next().await {
                        Some(Ok(WatchEvent::Modified(_))) => seen += 1,
                        Some(Ok(_)) => {}
                        other => panic!("watch ended early: {:?}", other.map(|r| r.is_ok())),
                    }
                }
            })
        })
        .collect();
    for i in 0..EVENTS {
        let name = format!("config-{}", i % 100);
        let mut object = server
            .object(
                "v1",
                "ConfigMap",
                Some(&fixtures::namespace_of(i % 100)),
                &name,
            )
            .expect("seeded");
        object["data"]["round"] = json!(format!("{round}-{i}"));
        server.update_object(object).expect("update");
        if i % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    for reader in readers {
        reader.await.expect("a reader");
    }
    started.elapsed()
}

async fn fanout_raw(server: &FakeApiServer, round: usize) -> Duration {
    let rv = server.resource_version();
    let mut readers = Vec::new();
    for _ in 0..WATCHERS {
        let mut stream = tokio::net::TcpStream::connect(server.addr())
            .await
            .expect("connect");
        let request = format!(
            "GET /api/v1/pods?watch=true&resourceVersion={rv} HTTP/1.0\r\nHost: fake\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut reader = BufReader::with_capacity(1 << 16, stream);
        let mut header = String::new();
        while reader.read_line(&mut header).await.expect("header") > 2 {
            header.clear();
        }
        readers.push(reader);
    }
    while server.open_watches() < WATCHERS {
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    let tasks: Vec<_> = readers
        .into_iter()
        .map(|mut reader| {
            tokio::spawn(async move {
                let mut line = Vec::with_capacity(8192);
                for _ in 0..EVENTS {
                    line.clear();
                    assert!(
                        reader.read_until(b'\n', &mut line).await.expect("a line") > 0,
                        "stream ended early"
                    );
                }
            })
        })
        .collect();
    for i in 0..EVENTS {
        let pod = i % 1000;
        let mut object = server
            .object(
                "v1",
                "Pod",
                Some(&fixtures::namespace_of(pod)),
                &format!("pod-{pod}"),
            )
            .expect("seeded");
        object["metadata"]["annotations"]["round"] = json!(format!("{round}-{i}"));
        server.update_object(object).expect("update");
        if i % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    for task in tasks {
        task.await.expect("a reader");
    }
    started.elapsed()
}

fn watch_fanout(c: &mut Criterion) {
    let rt = runtime();
    let server = rt.block_on(async {
        let server = FakeApiServer::start_with(
            ServerOptions::default()
                .watcher_buffer(EVENTS * 2)
                .history(EVENTS * 2),
        )
        .await
        .expect("start");
        for i in 0..100 {
            server.create_object(fixtures::config_map(i)).expect("seed");
        }
        for i in 0..1000 {
            server.create_object(fixtures::pod(i)).expect("seed");
        }
        server
    });
    let api: Api<ConfigMap> = Api::all(rt.block_on(async { server.client().expect("client") }));
    let mut group = c.benchmark_group("watch_fanout_10k_events_10_watchers");
    group.sample_size(10);
    group.throughput(criterion::Throughput::Elements((EVENTS * WATCHERS) as u64));
    let mut round = 0;
    group.bench_function("typed_configmaps", |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| {
                    round += 1;
                    rt.block_on(fanout_typed(&server, &api, round))
                })
                .sum()
        });
    });
    group.bench_function("raw_pods", |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| {
                    round += 1;
                    rt.block_on(fanout_raw(&server, round))
                })
                .sum()
        });
    });
    group.finish();
}

criterion_group!(benches, list_pods_paged_500, watch_fanout);
criterion_main!(benches);
