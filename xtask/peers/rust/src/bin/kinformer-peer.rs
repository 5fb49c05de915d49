//! `kinformer-peer`: the benchmark scenarios of BENCH-PROTOCOL.md through kinformer's
//! `SharedInformerFactory`, written the way a kinformer user would write them: one informer
//! from the factory, handlers registered with `HandlerFuncs` (sync closures, each handler on
//! its own OS thread, so the slow one blocks with `std::thread::sleep`), synced when every
//! registration's `has_synced` holds, lookups through the informer's indexer.

use std::{process::ExitCode, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer::{
    informer::InformerOptions,
    processor::HandlerFuncs,
    reflector::ShardMode,
    reflector::{KubeListerWatcher, WireFormat},
    store::{IndexFunc, NAMESPACE_INDEX, ObjectOrTombstone, Shard},
};
use kinformer::{
    prelude::*,
    store::{Interned, Object, ProjectedMeta},
};
use kinformer_bench_peers::{
    APP_LABEL, Args, Handler, Lookup, Mode, Peer, Query, Resource, Scenario, SyncClock, Viewed,
    Views, key_of,
};
use kube_client::Client;
use kube_core::PartialObjectMeta;

/// Both Rust peers use mimalloc: glibc's per-thread arenas grow when objects are decoded on one
/// thread and freed on another, and fresh pages cost a fault each (see docs/benchmarks.md). They
/// call it through [`kinformer_bench_peers::PeerAllocator`], which keeps mimalloc's aligned path
/// for the layouts that need it, and which runs on the system allocator instead when the
/// harness asks (`KINFORMER_PEER_ALLOCATOR=system`), as a program that picks none does.
#[global_allocator]
static ALLOCATOR: kinformer_bench_peers::PeerAllocator = kinformer_bench_peers::PeerAllocator;

/// The index the `lookups` scenario adds beside the built-in namespace index.
const APP_INDEX: &str = "by-app";

/// The slow handler's pause per call.
const SLOW_CALL: Duration = Duration::from_millis(1);

/// Holds the factory for the life of the process: dropping it would stop the informer.
#[derive(Debug, Default)]
struct Kinformer {
    factory: Option<SharedInformerFactory>,
}

impl Peer for Kinformer {
    const NAME: &'static str = "kinformer";

    fn unsupported(&self, _: &Args) -> Option<String> {
        None
    }

    fn notes(&self, _: &Args) -> Option<String> {
        None
    }

    async fn shard_check(
        &self,
        client: &Client,
        args: &Args,
    ) -> Result<Option<(String, usize)>, String> {
        let Some((index, count)) = args.shard else {
            return Ok(None);
        };
        let shard = Shard::of(index, count).map_err(|error| error.to_string())?;
        let factory = self.factory.as_ref().ok_or("no factory")?;
        let modes: Vec<_> = factory
            .health()
            .into_values()
            .map(|health| health.shard.and_then(|stats| stats.mode))
            .collect();
        let mode = match modes.as_slice() {
            [Some(ShardMode::Server)] => "server",
            [Some(ShardMode::Client)] => "client",
            other => return Err(format!("one informer of a known mode expected: {other:?}")),
        };
        // Every Pod, from etcd (a quorum read), a page at a time.
        let api = kube_client::Api::<Pod>::all(client.clone());
        let mut params = kube_client::api::ListParams::default().limit(1_000);
        let mut in_shard = 0;
        loop {
            let page = api
                .list_metadata(&params)
                .await
                .map_err(|error| format!("listing the Pods: {error}"))?;
            in_shard += page.items.iter().filter(|pod| shard.contains(*pod)).count();
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(Some((mode.to_owned(), in_shard))),
            }
        }
    }

    async fn start(
        &mut self,
        client: Client,
        args: &Args,
        views: &Arc<Views>,
        clock: &SyncClock,
    ) -> Result<Lookup, String> {
        // Protobuf is kinformer's default for built-in kinds, so `memory` measures it too, and
        // the factory's default cache (compact) unless the case asks for the decoded one.
        let mut options = FactoryOptions::default();
        if args.decoded_cache {
            options = options.decoded_cache();
        }
        if let Some(workers) = args.decode_workers {
            options = options.watch_decode_workers(workers);
        }
        if let Some((index, count)) = args.shard {
            options = options.shard(Shard::of(index, count).map_err(|error| error.to_string())?);
        }
        let factory = match args.mode {
            Mode::Json => SharedInformerFactory::new(client, options.wire_format(WireFormat::Json)),
            Mode::Stripped => SharedInformerFactory::new(client, options.drop_managed_fields()),
            _ => SharedInformerFactory::new(client, options),
        };
        let factory = self.factory.insert(factory);
        let error = |error: kinformer::factory::Error| error.to_string();
        match (args.scenario.resource(), args.mode) {
            (Resource::ConfigMaps, _) => {
                let informer = factory.informer::<ConfigMap>().map_err(error)?;
                inform(factory, &informer, views, clock).await
            }
            (Resource::Pods, Mode::Projection) => {
                let api = kube_client::Api::<Pod>::all(factory.client().clone());
                let lister_watcher =
                    KubeListerWatcher::<SlimPod>::projected(api).wire_format(WireFormat::Protobuf);
                let informer = factory
                    .informer_for(InformerRequest::built_by(|_, _| {
                        SharedIndexInformer::new(lister_watcher, InformerOptions::new())
                    }))
                    .map_err(error)?;
                inform(factory, &informer, views, clock).await
            }
            (Resource::Pods, Mode::Metadata) => {
                let informer = factory
                    .informer_for(InformerRequest::<PartialObjectMeta<Pod>>::metadata())
                    .map_err(error)?;
                inform(factory, &informer, views, clock).await
            }
            (Resource::Pods, _) => {
                let informer = factory.informer::<Pod>().map_err(error)?;
                if args.scenario == Scenario::Lookups {
                    let by_app: IndexFunc<Pod> = Arc::new(|pod: &Pod| {
                        let labels = pod.metadata.labels.as_ref();
                        labels
                            .and_then(|labels| labels.get(APP_LABEL))
                            .cloned()
                            .into_iter()
                            .collect()
                    });
                    informer
                        .add_indexers(Indexers::from([(APP_INDEX.to_owned(), by_app)]))
                        .map_err(|error| error.to_string())?;
                }
                inform(factory, &informer, views, clock).await
            }
        }
    }
}

/// Registers one handler per view, starts the factory and waits until every registration
/// has synced.
async fn inform<K>(
    factory: &SharedInformerFactory,
    informer: &SharedIndexInformer<K>,
    views: &Arc<Views>,
    clock: &SyncClock,
) -> Result<Lookup, String>
where
    K: Object + Viewed,
{
    let registrations = views
        .handlers()
        .into_iter()
        .map(|handler| informer.add_event_handler(handler_funcs::<K>(handler)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| error.to_string())?;
    clock.begin();
    factory.start().map_err(|error| error.to_string())?;
    for registration in &registrations {
        if !registration.synced().await {
            return Err(format!(
                "handler {} stopped before it synced",
                registration.name()
            ));
        }
    }
    let indexer = informer.cache();
    Ok(Arc::new(move |query: Query<'_>| {
        let found = match query {
            Query::Namespace(namespace) => indexer.by_index(NAMESPACE_INDEX, namespace),
            Query::App(app) => indexer.by_index(APP_INDEX, app),
        };
        found.map_or(0, |objects| objects.len())
    }))
}

fn handler_funcs<K>(handler: Handler) -> HandlerFuncs<K>
where
    K: Object + Viewed,
{
    let (on_add, on_update, on_delete) = (handler.clone(), handler.clone(), handler);
    HandlerFuncs::new()
        .add_func(move |obj: Arc<K>, _is_in_initial_list| {
            on_add.upsert(&*obj, false);
            pause_if_slow(&on_add);
        })
        // The view keeps the newest state only, so the old one is never asked for (and a
        // compact cache never decodes it).
        .update_new_func(move |new: Arc<K>| {
            on_update.upsert(&*new, true);
            pause_if_slow(&on_update);
        })
        .delete_func(move |obj: ObjectOrTombstone<K>| {
            match &obj {
                ObjectOrTombstone::Tombstone(tombstone) => on_delete.delete(&tombstone.key),
                ObjectOrTombstone::Object(obj) => on_delete.delete(&key_of(&**obj)),
            }
            pause_if_slow(&on_delete);
        })
}

/// The projection a controller that places Pods would keep: identity, labels, node, phase and
/// the containers' images, decoded straight from the wire with everything else skipped. The
/// values many Pods share (namespace, node, phase, container names and images) are interned.
#[expect(dead_code, reason = "spec and status are what the projection keeps")]
#[derive(Debug, serde::Deserialize)]
struct SlimPod {
    metadata: ProjectedMeta,
    #[serde(default)]
    spec: SlimSpec,
    #[serde(default)]
    status: SlimStatus,
}

#[expect(dead_code, reason = "the fields are what the projection keeps")]
#[derive(Debug, Default, serde::Deserialize)]
struct SlimSpec {
    #[serde(rename = "nodeName")]
    node_name: Option<Interned>,
    #[serde(default)]
    containers: Vec<SlimContainer>,
}

#[expect(dead_code, reason = "the fields are what the projection keeps")]
#[derive(Debug, serde::Deserialize)]
struct SlimContainer {
    name: Interned,
    image: Option<Interned>,
}

#[expect(dead_code, reason = "the fields are what the projection keeps")]
#[derive(Debug, Default, serde::Deserialize)]
struct SlimStatus {
    phase: Option<Interned>,
}

kinformer::store::impl_object!(SlimPod, metadata);

impl Viewed for SlimPod {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
    fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }
    fn resource_version(&self) -> &str {
        self.metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
    }
    fn emit_ns(&self) -> Option<&str> {
        None
    }
}

/// After the bookkeeping, so the latency sample is the moment the call arrived.
fn pause_if_slow(handler: &Handler) {
    if handler.is_slow() {
        std::thread::sleep(SLOW_CALL);
    }
}

fn main() -> ExitCode {
    kinformer_bench_peers::main(Kinformer::default())
}
