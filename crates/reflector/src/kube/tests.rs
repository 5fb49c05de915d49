//! The lister-watcher's list path through decoders of the tests' own, over real HTTP against
//! kinformer-testing's fake API server: pages fetched ahead of their decoding, large pages
//! decoded item by item as they arrive, and a page of a foreign kind refused by its head.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kinformer_store::Incoming;
use kinformer_testing::{FakeApiServer, Faults, Verb, eventually, fixtures};
use kube_client::{Api, Client, Config};
use parking_lot::Mutex;

use super::Decoding;
use crate::{
    Decoder, Error, ExpectedType, Framing, JsonDecoder, KubeDecoder, ListOptions, ListPage,
    ListerWatcher, Result, WatchEvent, WireFormat,
};

/// How long a test waits for what must happen; far above what a loaded machine needs.
const PATIENCE: Duration = Duration::from_secs(20);

async fn server_with_pods(count: usize) -> FakeApiServer {
    FakeApiServer::start_with_pods(0..count)
        .await
        .expect("the fake server starts")
}

/// A client without kube-client's retry layer, as `informer_client` builds.
fn client(server: &FakeApiServer) -> Client {
    let url = server.url().parse().expect("the server URL parses");
    let mut config = Config::new(url);
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// What `lister_watcher` hands its sink for one page, collected.
async fn list_page<K: Send + Sync + 'static>(
    lister_watcher: &impl ListerWatcher<K>,
    options: ListOptions,
) -> Result<(ListPage, Vec<Incoming<K>>)> {
    let mut items = Vec::new();
    let page = lister_watcher.list(options, &mut items).await?;
    Ok((page, items))
}

/// Decodes like `JsonDecoder`, but holds each page that has a next one until the server has
/// seen the next request, noting how many list requests the server had seen when each page
/// finished decoding.
struct SlowDecoder {
    inner: JsonDecoder<Pod>,
    faults: Faults,
    lists_seen: Arc<Mutex<Vec<u64>>>,
}

impl Decoder<Pod> for SlowDecoder {
    fn continue_token(&self, body: &[u8]) -> Option<String> {
        self.inner.continue_token(body)
    }

    fn decode_list(&self, body: &[u8]) -> Result<(ListPage, Vec<Incoming<Pod>>)> {
        let page = self.inner.decode_list(body);
        // A page with a next one keeps decoding until that next request reaches the server (or
        // 10 s pass): the request can only arrive meanwhile if it was sent ahead of this decode.
        // Waiting on the count, not on a fixed sleep, keeps a loaded machine from failing it.
        if self.inner.continue_token(body).is_some() {
            let next_request = self.lists_seen.lock().len() as u64 + 2;
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while self.faults.request_count(Verb::List, "pods") < next_request
                && std::time::Instant::now() < deadline
            {
                // Polling the server's count from a decoding thread, which cannot await.
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.lists_seen
            .lock()
            .push(self.faults.request_count(Verb::List, "pods"));
        page
    }

    fn decode_event(&self, frame: &[u8], framing: Framing) -> Result<WatchEvent<Pod>> {
        self.inner.decode_event(frame, framing)
    }
}

/// While a page decodes, the next one is already requested: by the time page n has decoded, the
/// server has seen the request for page n + 1.
#[tokio::test]
async fn the_next_page_is_requested_while_the_current_one_decodes() {
    let server = server_with_pods(200).await;
    let lists_seen = Arc::new(Mutex::new(Vec::new()));
    let decoder = SlowDecoder {
        inner: JsonDecoder::new(None),
        faults: server.faults().clone(),
        lists_seen: Arc::clone(&lists_seen),
    };
    let lister_watcher = Decoding::with_decoder(Api::<Pod>::all(client(&server)), decoder);
    let mut options = ListOptions {
        limit: Some(50),
        ..ListOptions::default()
    };
    let mut listed = 0;
    loop {
        let (page, items) = list_page(&lister_watcher, options.clone())
            .await
            .expect("a page");
        listed += items.len();
        match page.continue_token {
            Some(token) => options.continue_token = Some(token),
            None => break,
        }
    }
    assert_eq!(listed, 200);
    // Pages 1..=4 are requests 1..=4. When page n (of 4) has decoded, request n + 1 (the next
    // page) has reached the server too, except after the last.
    assert_eq!(*lists_seen.lock(), [2, 3, 4, 4]);
    assert_eq!(
        server.faults().request_count(Verb::List, "pods"),
        4,
        "no page fetched twice"
    );
}

/// Decodes like the decoder it wraps, counting the list items it was handed one by one.
struct CountingDecoder<D> {
    inner: D,
    items: Arc<ItemCounts>,
}

/// List items decoded one by one: JSON, then protobuf.
#[derive(Default)]
struct ItemCounts([std::sync::atomic::AtomicUsize; 2]);

impl ItemCounts {
    fn count(&self, protobuf: bool) {
        self.0[usize::from(protobuf)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn counts(&self) -> [usize; 2] {
        self.0
            .each_ref()
            .map(|count| count.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl<D: Decoder<Pod>> Decoder<Pod> for CountingDecoder<D> {
    fn accept(&self) -> Option<&str> {
        self.inner.accept()
    }

    fn continue_token(&self, body: &[u8]) -> Option<String> {
        self.inner.continue_token(body)
    }

    fn decodes_json_items(&self) -> bool {
        self.inner.decodes_json_items()
    }

    fn decode_list_item(&self, item: &[u8]) -> Result<Arc<Pod>> {
        self.items.count(false);
        self.inner.decode_list_item(item)
    }

    fn protobuf_items_field(&self) -> Option<u32> {
        self.inner.protobuf_items_field()
    }

    fn decode_protobuf_list_item(&self, item: &[u8]) -> Result<Incoming<Pod>> {
        self.items.count(true);
        self.inner.decode_protobuf_list_item(item)
    }

    fn decode_list(&self, body: &[u8]) -> Result<(ListPage, Vec<Incoming<Pod>>)> {
        self.inner.decode_list(body)
    }

    fn decode_event(&self, frame: &[u8], framing: Framing) -> Result<WatchEvent<Pod>> {
        self.inner.decode_event(frame, framing)
    }
}

fn counting(
    server: &FakeApiServer,
    decoder: KubeDecoder<Pod>,
) -> (
    Decoding<Pod, CountingDecoder<KubeDecoder<Pod>>>,
    Arc<ItemCounts>,
) {
    let items = Arc::new(ItemCounts::default());
    let decoder = CountingDecoder {
        inner: decoder,
        items: Arc::clone(&items),
    };
    (
        Decoding::with_decoder(Api::<Pod>::all(client(server)), decoder),
        items,
    )
}

fn pods(format: WireFormat) -> KubeDecoder<Pod> {
    KubeDecoder::for_resource::<Pod>(format)
}

/// A large page, in JSON or in protobuf, is decoded item by item as it arrives, to the same
/// objects in the same order as the server holds them, and the next page is requested as soon
/// as the page's head (metadata before items) names it, without the reflector asking.
#[tokio::test]
async fn a_large_page_decodes_as_it_arrives_and_names_the_next_page_early() {
    for format in [WireFormat::Json, WireFormat::Protobuf] {
        a_large_page_decodes_as_it_arrives(format).await;
    }
}

async fn a_large_page_decodes_as_it_arrives(format: WireFormat) {
    let server = server_with_pods(600).await;
    let (lister_watcher, items) = counting(&server, pods(format));
    let first = list_page(
        &lister_watcher,
        ListOptions {
            limit: Some(400),
            ..ListOptions::default()
        },
    )
    .await
    .expect("the first page");
    let by_format = match format {
        WireFormat::Json => [400, 0],
        WireFormat::Protobuf => [0, 400],
    };
    assert_eq!(
        items.counts(),
        by_format,
        "every item of the {format:?} page went through its format's item decoder"
    );
    // The server lists in key order.
    let expected: Vec<String> = (0..600)
        .map(|i| {
            let pod = fixtures::pod(i);
            let meta = &pod["metadata"];
            format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap_or_default()
            )
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let names = |(_, items): &(_, Vec<Incoming<Pod>>)| -> Vec<String> {
        items
            .iter()
            .map(|pod| {
                let pod = pod.object();
                format!(
                    "{}/{}",
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect()
    };
    assert_eq!(names(&first), expected[..400]);
    let token = first.0.continue_token.clone().expect("a continue token");
    assert!(!first.0.resource_version.is_empty());
    // The next page was asked for while this one arrived: the server sees it without a call.
    eventually("the next page is requested ahead", PATIENCE, || {
        server.faults().request_count(Verb::List, "pods") == 2
    })
    .await;
    let second = list_page(
        &lister_watcher,
        ListOptions {
            limit: Some(400),
            continue_token: Some(token),
            ..ListOptions::default()
        },
    )
    .await
    .expect("the second page");
    assert_eq!(names(&second), expected[400..]);
    assert_eq!(second.0.continue_token, None);
    assert_eq!(
        server.faults().request_count(Verb::List, "pods"),
        2,
        "the prefetched page was used, not fetched again"
    );
}

/// A small page is read whole; a page of another kind is refused by its head, before any item
/// is decoded. In JSON and in protobuf.
#[tokio::test]
async fn small_pages_are_read_whole_and_a_foreign_kind_is_refused_before_its_items() {
    let server = server_with_pods(600).await;
    for format in [WireFormat::Json, WireFormat::Protobuf] {
        let (lister_watcher, items) = counting(&server, pods(format));
        let (_, items_listed) = list_page(
            &lister_watcher,
            ListOptions {
                limit: Some(5),
                ..ListOptions::default()
            },
        )
        .await
        .expect("a page");
        assert_eq!(items_listed.len(), 5);
        assert_eq!(
            items.counts(),
            [0, 0],
            "a small {format:?} page is read whole"
        );

        // A custom kind has no protobuf form: that decoder asks for JSON. ConfigMaps have one.
        let expected = match format {
            WireFormat::Json => ExpectedType::new("example.com/v1", "Widget"),
            WireFormat::Protobuf => ExpectedType::new("v1", "ConfigMap"),
        };
        let (lister_watcher, items) = counting(&server, KubeDecoder::<Pod>::new(expected, format));
        let error = list_page(&lister_watcher, ListOptions::default())
            .await
            .expect_err("a PodList is refused");
        assert!(matches!(error, Error::WrongKind { .. }), "{error}");
        assert_eq!(items.counts(), [0, 0], "{format:?}: no item was decoded");
    }
}
