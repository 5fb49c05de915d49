//! What a Prometheus scrape of a factory costs: `factory/scrape/informers=N` encodes the
//! registry holding [`SharedInformerFactory::register_metrics`] for N informers with three
//! handlers each (about 25 series per informer and 7 per handler).
//!
//! The watch path records nothing for the registry's sake: the counters a scrape reads are the
//! reflector's and the listeners' own, kept with or without a registry. So a registry's whole
//! cost is this, once per scrape.
//!
//! Run with `cargo bench -p kinformer-factory --features prometheus --bench scrape`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_factory::{FactoryOptions, InformerRequest, Selection, SharedInformerFactory};
use kinformer_processor::HandlerFuncs;
use kube_client::{Client, Config};
use prometheus_client::{encoding::text::encode, registry::Registry};

fn scrape(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime builds");
    let _entered = runtime.enter();
    let mut group = c.benchmark_group("factory/scrape");
    for informers in [1usize, 10, 100] {
        // Never started: a scrape reads the same counters from an idle informer as from a busy
        // one, and the bench needs no server.
        let url = "http://127.0.0.1:9".parse().expect("a URL");
        let client = Client::try_from(Config::new(url)).expect("a client");
        let factory = SharedInformerFactory::new(client, FactoryOptions::default());
        for n in 0..informers {
            let informer = factory
                .informer_for(
                    InformerRequest::<ConfigMap>::typed()
                        .selection(Selection::all().namespace(format!("ns-{n}"))),
                )
                .expect("an informer");
            for _ in 0..3 {
                informer
                    .add_event_handler(HandlerFuncs::new())
                    .expect("a handler");
            }
        }
        let mut registry = Registry::default();
        factory.register_metrics(&mut registry);
        let mut text = String::new();
        group.bench_function(format!("informers={informers}"), |b| {
            b.iter(|| {
                text.clear();
                encode(&mut text, &registry).expect("the registry encodes");
                black_box(text.len())
            });
        });
    }
    group.finish();
}

criterion_group!(benches, scrape);
criterion_main!(benches);
