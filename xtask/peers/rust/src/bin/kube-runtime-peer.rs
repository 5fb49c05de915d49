//! `kube-runtime-peer`: the benchmark scenarios of BENCH-PROTOCOL.md through kube-runtime 5,
//! written the way a kube-rs user would write them: `watcher(api, Config::default())` with
//! `default_backoff()`, fed through `reflector(writer, stream)` into a `Store`.
//!
//! kube-runtime has one consumer per stream, no handlers, no indexes and no delete events for
//! objects that vanished while the watch was down. What the protocol needs beyond that is
//! emulated the closest fair way, and the result's `notes` say so: the one event stream is fanned
//! out to one tokio task per handler through unbounded channels (the events shared as `Arc`s,
//! never copied); each handler infers the deletions of a relist at `InitDone` by diffing its
//! view against what the relist listed; lookups filter the `Store`.

use std::{process::ExitCode, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_bench_peers::{
    APP_LABEL, Args, Handler, Lookup, Mode, Peer, Query, Resource, Scenario, SyncClock, Views,
    key_of, progress,
};
use kube_client::{Api, Client};
use kube_core::PartialObjectMeta;
use kube_runtime::{WatchStreamExt, reflector, watcher, watcher::Event};
use tokio::sync::mpsc;

/// Both Rust peers use mimalloc, or the system allocator when asked, as the kinformer peer does
/// (see its note).
#[global_allocator]
static ALLOCATOR: kinformer_bench_peers::PeerAllocator = kinformer_bench_peers::PeerAllocator;

/// The slow handler's pause per call.
const SLOW_CALL: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct KubeRuntime;

impl Peer for KubeRuntime {
    const NAME: &'static str = "kube-runtime";

    fn unsupported(&self, args: &Args) -> Option<String> {
        if args.decoded_cache {
            return Some("the cache choice is kinformer's".to_owned());
        }
        if args.decode_workers.is_some() {
            return Some("decode workers are kinformer's".to_owned());
        }
        if args.shard.is_some() {
            return Some("shards are kinformer's".to_owned());
        }
        (args.mode == Mode::Protobuf).then(|| "kube-runtime decodes JSON only".to_owned())
    }

    fn notes(&self, args: &Args) -> Option<String> {
        let mut notes = vec![
            format!(
                "one watcher stream fanned out to {} handler task(s), each fed Arc'd events by an \
                 unbounded channel",
                args.handlers
            ),
            "each handler infers a relist's deletions at InitDone by diffing its view with what \
             the relist listed (kube-runtime delivers none)"
                .to_owned(),
            "events counts Apply, InitApply, Delete and inferred deletes; an Apply or InitApply of \
             a known key counts as an update"
                .to_owned(),
        ];
        if args.scenario.slow_handler().is_some() {
            notes.push("the slow handler awaits tokio::time::sleep(1 ms) per event".to_owned());
        }
        if args.scenario == Scenario::Lookups {
            notes.push(
                "no indexes: each lookup filters the whole reflector Store (Store::state_filter)"
                    .to_owned(),
            );
        }
        Some(notes.join("; "))
    }

    async fn start(
        &mut self,
        client: Client,
        args: &Args,
        views: &Arc<Views>,
        clock: &SyncClock,
    ) -> Result<Lookup, String> {
        let config = watcher::Config::default();
        match (args.scenario.resource(), args.mode) {
            (Resource::ConfigMaps, _) => {
                let api = Api::<ConfigMap>::all(client);
                inform(watcher(api, config).default_backoff(), views, clock).await
            }
            (Resource::Pods, Mode::Metadata) => {
                // kube 5's metadata watch (`metadata_watcher` is deprecated in its favour): an
                // `Api` of `PartialObjectMeta` asks for metadata-only lists and watches.
                let api = Api::<PartialObjectMeta<Pod>>::all(client);
                inform(watcher(api, config).default_backoff(), views, clock).await
            }
            (Resource::Pods, Mode::Stripped) => {
                let api = Api::<Pod>::all(client);
                let stream = watcher(api, config)
                    .default_backoff()
                    .modify(|pod: &mut Pod| pod.metadata.managed_fields = None);
                inform(stream, views, clock).await
            }
            (Resource::Pods, _) => {
                let api = Api::<Pod>::all(client);
                inform(watcher(api, config).default_backoff(), views, clock).await
            }
        }
    }
}

/// Runs `stream` through a reflector into a `Store`, fans its events out to one task per
/// handler, and waits until `InitDone` has reached every handler.
async fn inform<K, S>(stream: S, views: &Arc<Views>, clock: &SyncClock) -> Result<Lookup, String>
where
    K: kube_core::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let senders: Vec<_> = views
        .handlers()
        .into_iter()
        .map(|handler| {
            let (sender, events) = mpsc::unbounded_channel();
            tokio::spawn(handle(handler, events));
            sender
        })
        .collect();
    // The watcher's first request goes out when the task below first polls it.
    clock.begin();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(reflector(writer, stream));
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    let event = Arc::new(event);
                    for sender in &senders {
                        // A handler task only ends with the process.
                        let _ = sender.send(Arc::clone(&event));
                    }
                }
                // default_backoff() retries; a user would log and carry on.
                Err(error) => progress(format!("watcher: {error}")),
            }
        }
    });
    views.wait_until(Views::all_synced).await;
    Ok(Arc::new(move |query: Query<'_>| match query {
        Query::Namespace(namespace) => store
            .state_filter(|obj| obj.meta().namespace.as_deref() == Some(namespace))
            .len(),
        Query::App(app) => store
            .state_filter(|obj| {
                obj.meta()
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(APP_LABEL))
                    .is_some_and(|value| value == app)
            })
            .len(),
    }))
}

/// One handler: applies every event to its view, in order.
async fn handle<K: kube_core::Resource>(
    handler: Handler,
    mut events: mpsc::UnboundedReceiver<Arc<Event<K>>>,
) {
    while let Some(event) = events.recv().await {
        let object_event = match &*event {
            Event::Init => {
                handler.init();
                false
            }
            Event::InitApply(obj) => {
                handler.init_apply(obj);
                true
            }
            Event::InitDone => {
                handler.init_done();
                false
            }
            Event::Apply(obj) => {
                handler.apply(obj);
                true
            }
            Event::Delete(obj) => {
                handler.delete(&key_of(obj));
                true
            }
        };
        if object_event && handler.is_slow() {
            tokio::time::sleep(SLOW_CALL).await;
        }
    }
}

fn main() -> ExitCode {
    kinformer_bench_peers::main(KubeRuntime)
}
