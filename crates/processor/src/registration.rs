//! [`Registration`]: the handle of one listener.

use std::{
    fmt,
    sync::{Arc, Weak},
    time::Duration,
};

use crate::{
    listener::{Listener, ListenerStats},
    processor::Shared,
};

/// The handle of one listener: tells whether it has synced, reports its counters, removes it.
///
/// Cloning gives another handle to the same listener. Dropping every handle does not remove
/// the listener (a handler keeps receiving until removed or until the processor stops).
#[doc(alias = "ResourceEventHandlerRegistration")]
#[doc(alias = "processorListener")]
pub struct Registration<K> {
    pub(crate) listener: Arc<Listener<K>>,
    pub(crate) processor: Weak<Shared<K>>,
}

impl<K: Send + Sync + 'static> Registration<K> {
    /// The listener's name.
    pub fn name(&self) -> &str {
        &self.listener.name
    }

    /// True once the upstream has synced *and* this listener's consumer has finished every
    /// initial-list notification handed to it; stays true from then on.
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.listener.has_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced); returns `false` if the listener stopped
    /// first (removed, or the processor stopped).
    pub async fn synced(&self) -> bool {
        loop {
            let mut progress = std::pin::pin!(self.listener.progress.notified());
            progress.as_mut().enable();
            if self.has_synced() {
                return true;
            }
            if self.listener.stopped.is_set() {
                return false;
            }
            if self.listener.upstream.has_synced() {
                progress.await;
            } else {
                tokio::select! {
                    () = self.listener.upstream.synced() => {}
                    () = progress => {}
                }
            }
        }
    }

    /// A snapshot of this listener's counters.
    pub fn stats(&self) -> ListenerStats {
        self.listener.stats()
    }

    /// The resync period asked for (after the one-second minimum is applied).
    pub fn requested_resync_period(&self) -> Duration {
        self.listener.requested_resync_period()
    }

    /// The resync period in force: the requested one adjusted to the processor's resync check
    /// period, or zero when no resyncs happen.
    pub fn resync_period(&self) -> Duration {
        self.listener.resync_period()
    }

    /// Whether the listener is still registered with a processor that has not stopped.
    pub fn is_active(&self) -> bool {
        !self.listener.is_closed()
    }

    /// Unregisters the listener and returns at once; pending notifications are discarded and
    /// the handler exits after the call it is in. Idempotent. Await
    /// [`stopped`](Self::stopped) to know the handler has exited.
    #[doc(alias = "RemoveEventHandler")]
    pub fn remove(&self) {
        match self.processor.upgrade() {
            Some(processor) => {
                processor.remove(self.listener.id);
            }
            None => self.listener.close(),
        }
    }

    /// Resolves once the consumer has fully exited: the handler thread has returned from its
    /// last call and dropped the handler, or the stream has ended or been dropped. A handler
    /// blocked forever keeps this pending forever.
    pub async fn stopped(&self) {
        self.listener.stopped.wait().await;
    }

    /// Whether the consumer has fully exited.
    pub fn is_stopped(&self) -> bool {
        self.listener.stopped.is_set()
    }

    /// [`remove`](Self::remove), then [`stopped`](Self::stopped).
    pub async fn shutdown(&self) {
        self.remove();
        self.stopped().await;
    }
}

impl<K> Clone for Registration<K> {
    fn clone(&self) -> Self {
        Self {
            listener: Arc::clone(&self.listener),
            processor: Weak::clone(&self.processor),
        }
    }
}

impl<K> PartialEq for Registration<K> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.listener, &other.listener)
    }
}

impl<K> Eq for Registration<K> {}

impl<K> fmt::Debug for Registration<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.listener.name)
            .field("id", &self.listener.id)
            .finish_non_exhaustive()
    }
}
