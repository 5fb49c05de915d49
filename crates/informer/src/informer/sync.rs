//! Waiting on an informer: whether it has synced and, if not, why; waits for sync, for a
//! resource version and for a key.

use std::{sync::Arc, time::Duration};

use kinformer_store::{Object, Shard};
use tokio_util::sync::CancellationToken;

use super::SharedIndexInformer;
use crate::{SyncStatus, WaitError};

impl<K: Object> SharedIndexInformer<K> {
    /// Whether the initial list has been applied to the cache and handed to the handlers
    /// (client-go's `HasSynced`); false before start.
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.inner
            .queue
            .get()
            .is_some_and(|queue| queue.has_synced())
    }

    /// Whether the informer has synced and, when it has not, why: the errors its reflector met
    /// since it last made progress. Cheap enough to poll while waiting for sync.
    pub fn sync_status(&self) -> SyncStatus {
        let reflector = self.inner.reflector.get();
        let failures = reflector
            .map(|reflector| reflector.failures())
            .unwrap_or_default();
        SyncStatus {
            started: self.has_started(),
            synced: self.has_synced(),
            consecutive_failures: failures.consecutive,
            last_error: failures.last_error,
            resource_gone: reflector.is_some_and(|reflector| reflector.is_resource_gone()),
        }
    }

    /// Waits, at most `within`, until the informer has synced (client-go's
    /// `WaitForCacheSync`). Returns at once when it has. To wait for several informers, wait
    /// for each in turn, or ask their factory for one report of all.
    ///
    /// # Errors
    ///
    /// [`WaitError::NotSynced`] when it has not synced by `within`
    /// ([`sync_status`](Self::sync_status) says why), [`WaitError::Cancelled`] when `token`
    /// fires, [`WaitError::Stopped`] when the informer stops before it has synced.
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(
        &self,
        within: Duration,
        token: &CancellationToken,
    ) -> std::result::Result<(), WaitError> {
        let synced = self.inner.applier.processor.upstream_synced();
        let what = || self.inner.name.clone();
        tokio::select! {
            biased;
            outcome = tokio::time::timeout(within, synced.synced()) => {
                outcome.map_err(|_| WaitError::NotSynced { what: what(), within })
            }
            () = token.cancelled() => Err(WaitError::Cancelled { what: what() }),
            () = self.inner.stopped.cancelled() => match synced.has_synced() {
                true => Ok(()),
                false => Err(WaitError::Stopped { what: what() }),
            },
        }
    }

    /// Waits until the cache has seen `resource_version` or a later one: the version a create,
    /// update or patch returned, so that a lister read afterwards sees that write or a newer
    /// state (read-your-writes). Returns at once when the cache is already there.
    ///
    /// See [`WaitError`] for how versions are compared; an informer on the
    /// [`QueueKind::DeltaFifo`](crate::QueueKind::DeltaFifo) has no cache-wide version (wait on
    /// the key instead).
    ///
    /// # Errors
    ///
    /// [`WaitError::TimedOut`] after `within`, [`WaitError::Cancelled`] when `token` fires,
    /// [`WaitError::Stopped`] when the informer stops first, and the two errors of a version
    /// that cannot be compared.
    pub async fn wait_for_version(
        &self,
        resource_version: &str,
        within: Duration,
        token: &CancellationToken,
    ) -> std::result::Result<(), WaitError> {
        self.inner
            .applier
            .progress
            .wait_for_version(resource_version, within, token, &self.inner.stopped)
            .await
    }

    /// Waits until the informer has synced and `condition` holds for what the cache holds under
    /// `key` (`None` when it holds nothing), checking at sync and after every change the
    /// informer applies; returns what the cache held then. `|object| object.is_none()` waits
    /// for a deletion, and once the informer has synced returns at once for a key the cache
    /// never had.
    ///
    /// # Errors
    ///
    /// [`WaitError::NotSynced`] when the informer has not synced by `within` (before its first
    /// list the cache cannot answer for a key), [`WaitError::TimedOut`] when it has but the
    /// condition does not hold by then, [`WaitError::Cancelled`] when `token` fires,
    /// [`WaitError::Stopped`] when the informer stops first.
    pub async fn wait_for_key(
        &self,
        key: &str,
        condition: impl FnMut(Option<&K>) -> bool,
        within: Duration,
        token: &CancellationToken,
    ) -> std::result::Result<Option<Arc<K>>, WaitError> {
        let cache = self.cache();
        self.inner
            .applier
            .progress
            .wait_for_key(
                cache.as_ref(),
                self.inner.applier.processor.upstream_synced(),
                key,
                condition,
                within,
                token,
                &self.inner.stopped,
            )
            .await
    }

    /// The shard the cache holds whole: that of the last list applied. `None` for an informer
    /// of no shard, before the first list, and after a list the cache refused. Once the
    /// informer is set to another shard ([`set_shard`](Self::set_shard)), this still names the
    /// old one until the list of the new one has been applied.
    pub fn cached_shard(&self) -> Option<Arc<Shard>> {
        self.inner.shard_sync.cached()
    }

    /// Waits until the cache holds `shard` whole: the informer is set to it and a list of it
    /// has been applied, so every object of the shard is in the cache, no object outside it
    /// remains, and the notifications of the hand-off have been handed to the handlers. A
    /// replica that takes over a shard waits for this before it works on the shard's keys.
    /// Returns at once when the cache holds it.
    ///
    /// # Errors
    ///
    /// [`WaitError::ShardChanged`] when the informer is not set to `shard`, or is moved to
    /// another before its cache holds it; [`WaitError::TimedOut`] after `within`;
    /// [`WaitError::Cancelled`] when `token` fires; [`WaitError::Stopped`] when the informer
    /// stops first.
    pub async fn wait_for_shard(
        &self,
        shard: &Shard,
        within: Duration,
        token: &CancellationToken,
    ) -> std::result::Result<(), WaitError> {
        let sharded = self.inner.sharded.as_ref();
        self.inner
            .shard_sync
            .wait_for(
                shard,
                || sharded.map(|sharded| sharded.shard()),
                within,
                token,
                &self.inner.stopped,
            )
            .await
    }
}
