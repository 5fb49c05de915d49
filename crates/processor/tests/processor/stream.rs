//! Registrations consumed as async streams.

use crate::common;

use common::{obj, start, stop};
use futures::StreamExt;
use kinformer_processor::{
    ListenerOptions, Notification, ObjectOrTombstone, Recipients, SharedProcessor,
};

fn describe(notification: &Notification<String>) -> String {
    match notification {
        Notification::Add { obj, kind } => format!(
            "add {obj}{}",
            if kind.is_initial_list() {
                " initial"
            } else {
                ""
            }
        ),
        Notification::Update { old, new } => {
            format!("update {} -> {new}", old.get().expect("never encoded"))
        }
        Notification::Delete(obj) => format!("delete {}", obj.object()),
    }
}

/// A stream yields its registration's notifications in order, of every kind.
#[tokio::test]
async fn a_stream_yields_notifications_in_order() {
    let processor = SharedProcessor::<String>::default();
    let mut events = processor
        .subscribe(ListenerOptions::new().name("stream"))
        .expect("subscribed");
    let (token, running) = start(&processor).await;
    let (a, b) = (obj("a"), obj("b"));
    processor.distribute(Notification::add(a.clone()), Recipients::All);
    processor.distribute(Notification::update(a.clone(), b.clone()), Recipients::All);
    processor.distribute(
        Notification::delete(ObjectOrTombstone::Object(b)),
        Recipients::All,
    );
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&events.next().await.expect("an event")));
    }
    assert_eq!(seen, ["add a", "update a -> b", "delete b"]);
    assert_eq!(events.registration().stats().delivered, 3);
    stop(token, running).await;
}

/// Removing the registration ends its stream, even while the consumer waits.
#[tokio::test]
async fn a_stream_ends_when_its_registration_is_removed() {
    let processor = SharedProcessor::<String>::default();
    let mut events = processor
        .subscribe(ListenerOptions::new())
        .expect("subscribed");
    let registration = events.registration().clone();
    let (token, running) = start(&processor).await;
    processor.distribute(Notification::add(obj("a")), Recipients::All);
    assert_eq!(describe(&events.next().await.expect("an event")), "add a");

    let mut consumer = Box::pin(async move {
        let mut rest = Vec::new();
        while let Some(event) = events.next().await {
            rest.push(describe(&event));
        }
        rest
    });
    // Polled once, the consumer is parked on an empty stream; the removal must wake it.
    assert!(futures::FutureExt::now_or_never(&mut consumer).is_none());
    registration.remove();
    assert!(consumer.await.is_empty());
    registration.stopped().await;
    assert!(!processor.is_registered(&registration));
    stop(token, running).await;
}

/// Stopping the processor ends every stream; `run` does not wait for stream consumers.
#[tokio::test]
async fn a_stream_ends_when_the_processor_stops() {
    let processor = SharedProcessor::<String>::default();
    let mut events = processor
        .subscribe(ListenerOptions::new())
        .expect("subscribed");
    let (token, running) = start(&processor).await;
    processor.distribute(Notification::add(obj("a")), Recipients::All);
    stop(token, running).await;
    assert!(
        events.next().await.is_none(),
        "pending notifications are discarded on stop"
    );
    assert!(events.registration().is_stopped());
}

/// A stream's registration syncs once the consumer has come back after the last initial-list
/// notification, the moment a handler would have returned from it.
#[tokio::test]
async fn a_stream_registration_syncs_when_the_consumer_finishes_the_initial_list() {
    let processor = SharedProcessor::<String>::default();
    let (token, running) = start(&processor).await;
    processor.upstream_synced().mark_synced();
    let mut events = processor
        .subscribe_with_initial(ListenerOptions::new(), [obj("a"), obj("b")])
        .expect("subscribed");
    assert!(!events.registration().has_synced());
    assert_eq!(
        describe(&events.next().await.expect("event")),
        "add a initial"
    );
    assert_eq!(
        describe(&events.next().await.expect("event")),
        "add b initial"
    );
    assert!(
        !events.registration().has_synced(),
        "b is still being handled"
    );

    processor.distribute(Notification::add(obj("c")), Recipients::All);
    assert_eq!(describe(&events.next().await.expect("event")), "add c");
    assert!(events.registration().has_synced());
    stop(token, running).await;
}

/// Dropping the stream removes its registration, so its buffer cannot grow unread.
#[tokio::test]
async fn dropping_a_stream_removes_its_registration() {
    let processor = SharedProcessor::<String>::default();
    let events = processor
        .subscribe(ListenerOptions::new())
        .expect("subscribed");
    let registration = events.registration().clone();
    assert_eq!(processor.listener_count(), 1);
    drop(events);
    assert_eq!(processor.listener_count(), 0);
    assert!(registration.is_stopped());
    assert!(!registration.is_active());
}

/// Counts the wakes a waiting consumer gets.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A batch of distributions wakes a waiting consumer once a handoff's worth (64) waits, and
/// otherwise when the batch ends; nothing is lost or reordered either way.
#[tokio::test]
async fn a_distribution_batch_wakes_once_per_handoff_and_at_its_end() {
    use std::{
        pin::Pin,
        sync::{Arc, atomic::Ordering},
        task::{Context, Poll},
    };

    let processor = SharedProcessor::<String>::default();
    let mut events = processor
        .subscribe(ListenerOptions::new())
        .expect("subscribed");
    let (token, running) = start(&processor).await;
    let wakes = Arc::new(CountingWaker(Default::default()));
    let waker = std::task::Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    let mut poll = |events: &mut kinformer_processor::EventStream<String>| {
        futures::Stream::poll_next(Pin::new(events), &mut cx)
    };
    assert!(poll(&mut events).is_pending(), "nothing distributed yet");

    let batch = processor.batch();
    for i in 0..63 {
        batch.distribute(Notification::add(obj(&format!("o{i}"))), Recipients::All);
    }
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "63 waiting: no wake yet");
    batch.distribute(Notification::add(obj("o63")), Recipients::All);
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        1,
        "the 64th wakes the consumer"
    );
    let mut seen = Vec::new();
    while let Poll::Ready(Some(event)) = poll(&mut events) {
        seen.push(describe(&event));
    }
    assert_eq!(seen.len(), 64);
    assert_eq!(seen.first().map(String::as_str), Some("add o0"));

    batch.distribute(Notification::add(obj("last")), Recipients::All);
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "one waiting: deferred");
    drop(batch);
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        2,
        "the batch's end wakes the consumer"
    );
    match poll(&mut events) {
        Poll::Ready(Some(event)) => assert_eq!(describe(&event), "add last"),
        other => panic!(
            "expected the last add, got {:?}",
            other.map(|e| e.map(|e| describe(&e)))
        ),
    }

    // Dropping an empty batch wakes no one.
    assert!(poll(&mut events).is_pending());
    drop(processor.batch());
    assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
    stop(token, running).await;
}
