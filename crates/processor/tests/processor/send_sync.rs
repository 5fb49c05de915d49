//! The public types cross threads and tasks where an informer needs them to.

use std::sync::Arc;

use kinformer_processor::{
    Error, EventStream, HandlerFuncs, ListenerOptions, ListenerStats, Notification, Registration,
    SharedProcessor, UpstreamSynced,
};
use tokio_util::sync::CancellationToken;

fn send_sync<T: Send + Sync>(_: &T) {}
fn send<T: Send>(_: &T) {}

/// Processor, registrations, signals, notifications and errors are Send + Sync; streams and the
/// futures the informer spawns (`run`, `synced`, `stopped`, `shutdown`) are Send.
#[test]
fn public_types_and_futures_can_cross_threads() {
    let processor = SharedProcessor::<String>::default();
    send_sync(&processor);
    let registration: Registration<String> = processor
        .add_handler(HandlerFuncs::new(), ListenerOptions::new())
        .expect("added");
    send_sync(&registration);
    send_sync(&UpstreamSynced::new());
    send_sync(&Notification::add(Arc::new(String::new())));
    send_sync(&ListenerStats::default());
    send_sync(&Error::AlreadyStarted);
    let stream: EventStream<String> = processor.subscribe(ListenerOptions::new()).expect("added");
    send(&stream);
    send(&processor.run(CancellationToken::new()));
    send(&registration.synced());
    send(&registration.stopped());
    send(&registration.shutdown());
}
