//! One-way flags that async code can wait on.

use std::{
    pin::pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::sync::Notify;

/// A flag that goes from unset to set once and wakes every waiter when it does.
#[derive(Debug, Default)]
pub(crate) struct Latch {
    set: AtomicBool,
    notify: Notify,
}

impl Latch {
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    pub(crate) fn set(&self) {
        if !self.set.swap(true, Ordering::AcqRel) {
            self.notify.notify_waiters();
        }
    }

    pub(crate) async fn wait(&self) {
        loop {
            // Registering interest before reading the flag closes the window in which `set`
            // could fire between the check and the wait.
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

/// The caller-provided "upstream has synced" signal: the informer marks it once its queue has
/// handed the whole initial list to the processor.
///
/// A [`Registration`](crate::Registration) reports synced only when this signal is set *and*
/// its own handler has finished every initial-list notification given to it, as client-go's
/// `synctrack.SingleFileTracker` does. Clones share one flag; setting it is permanent.
///
/// ```
/// use kinformer_processor::UpstreamSynced;
///
/// let signal = UpstreamSynced::new();
/// let seen_by_processor = signal.clone();
/// assert!(!seen_by_processor.has_synced());
/// signal.mark_synced();
/// assert!(seen_by_processor.has_synced());
/// ```
#[doc(alias = "UpstreamHasSynced")]
#[derive(Debug, Clone, Default)]
pub struct UpstreamSynced {
    latch: Arc<Latch>,
}

impl UpstreamSynced {
    /// A signal that has not synced yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that the upstream has synced; every clone sees it from now on.
    pub fn mark_synced(&self) {
        self.latch.set();
    }

    /// Whether [`mark_synced`](Self::mark_synced) has been called.
    pub fn has_synced(&self) -> bool {
        self.latch.is_set()
    }

    /// Resolves once the upstream has synced.
    pub async fn synced(&self) {
        self.latch.wait().await;
    }
}
