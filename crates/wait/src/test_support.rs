//! Captures `tracing` events per thread, so tests can assert what was logged.
//!
//! One process-wide subscriber records events into a thread-local sink while a
//! [`CaptureGuard`] is alive on that thread. Scoped subscribers (`set_default`) would be
//! simpler, but tracing caches each callsite's interest globally: a callsite first hit on
//! another test's thread without a subscriber is cached as disabled, and the capturing test
//! then sees nothing, at random.

use std::cell::RefCell;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One recorded event: its level and its fields rendered as `name=value`.
#[derive(Debug, Clone)]
pub(crate) struct CapturedEvent {
    pub(crate) level: Level,
    pub(crate) fields: Vec<(String, String)>,
}

impl CapturedEvent {
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }
}

thread_local! {
    static SINK: RefCell<Option<Vec<CapturedEvent>>> = const { RefCell::new(None) };
}

/// Records events on this thread until dropped.
#[derive(Debug)]
pub(crate) struct CaptureGuard(());

impl CaptureGuard {
    /// Starts capturing on the current thread (installing the process-wide subscriber once).
    pub(crate) fn start() -> Self {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            // Another test binary component may have installed one first; then nothing is
            // captured and the capturing tests fail loudly rather than pass by accident.
            let _ = tracing::subscriber::set_global_default(ThreadLocalSink::default());
        });
        SINK.with(|sink| *sink.borrow_mut() = Some(Vec::new()));
        Self(())
    }

    /// The events recorded on this thread so far.
    pub(crate) fn events(&self) -> Vec<CapturedEvent> {
        SINK.with(|sink| sink.borrow().clone().unwrap_or_default())
    }
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        SINK.with(|sink| *sink.borrow_mut() = None);
    }
}

struct FieldCollector(Vec<(String, String)>);

impl Visit for FieldCollector {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

/// Accepts everything; keeps events only on threads with a live [`CaptureGuard`].
#[derive(Debug, Default)]
struct ThreadLocalSink {
    next_span: AtomicU64,
}

impl Subscriber for ThreadLocalSink {
    fn enabled(&self, _metadata: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        SINK.with(|sink| {
            if let Some(events) = sink.borrow_mut().as_mut() {
                let mut collector = FieldCollector(Vec::new());
                event.record(&mut collector);
                events.push(CapturedEvent {
                    level: *event.metadata().level(),
                    fields: collector.0,
                });
            }
        });
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}
