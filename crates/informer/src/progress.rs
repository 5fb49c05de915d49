//! Waiting on the cache: until it has seen a resource version (read-your-writes), or until a
//! condition holds for one key. No informer in client-go or kube-runtime offers either; a
//! controller that writes and then reads its own write back from a lister needs them.
//!
//! # How resource versions are compared
//!
//! A `resourceVersion` is opaque to clients by contract, but every Kubernetes storage in use
//! (etcd, and since KEP-5504 by guarantee) issues decimal integers that grow with every write
//! to the cluster, across all resources. The cache's version is the highest one the informer
//! has applied: the version of every watch event and bookmark, and of every relist. The
//! in-order queue (the default) applies them in the order the server sent them, so when the
//! cache's version reaches `v` every change up to `v` is in the cache. The DeltaFIFO reorders
//! keys, so an informer built with it has no cache-wide version and its version waits fail
//! with [`WaitError::NoCacheVersion`]; a version that is not a decimal integer fails with
//! [`WaitError::IncomparableVersion`]. There is no quorum-read fallback: a version the cache
//! cannot compare is an error the caller sees, never a silent guess.

use std::{sync::Arc, time::Duration};

use kinformer_fifo::{Delta, DeltaType, Popped};
use kinformer_processor::UpstreamSynced;
use kinformer_store::{CacheReader, Object};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Why a wait on the cache ended without its condition holding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The deadline passed first.
    #[error("the cache did not reach {what} within {within:?}")]
    TimedOut {
        /// What was waited for.
        what: String,
        /// The deadline given.
        within: Duration,
    },
    /// The caller's token fired first.
    #[error("the wait for {what} was cancelled")]
    Cancelled {
        /// What was waited for.
        what: String,
    },
    /// The informer had not synced by the deadline: its cache does not yet hold what the
    /// server holds, so it cannot answer for a key (an absent key may exist).
    #[error("the informer did not sync within {within:?}, so its cache cannot answer for {what}")]
    NotSynced {
        /// What was waited for.
        what: String,
        /// The deadline given.
        within: Duration,
    },
    /// The informer stopped first; its cache will not change any more.
    #[error("the informer stopped before the cache reached {what}")]
    Stopped {
        /// What was waited for.
        what: String,
    },
    /// The version is not a decimal integer, so it cannot be compared with the cache's.
    #[error("resource version {version:?} is not a decimal integer and cannot be compared")]
    IncomparableVersion {
        /// The version given.
        version: String,
    },
    /// The informer queues through the DeltaFIFO, which reorders keys: no single version
    /// says what its cache has seen. Wait on a key instead, or use the in-order queue.
    #[error("an informer built on the DeltaFIFO has no cache-wide resource version")]
    NoCacheVersion,
    /// The informer does not inform the shard waited for: it was built without a shard, set
    /// to another one before its cache held this one, or moved on while it waited.
    #[error("the informer is not set to {what}")]
    ShardChanged {
        /// What was waited for.
        what: String,
    },
}

/// What the applier has done so far: how many popped items it applied, and the highest
/// resource version among them when it applies in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Bumped after every applied item.
    pub(crate) generation: u64,
    /// The highest resource version applied; 0 before the first.
    pub(crate) version: u64,
}

/// The applier's side of the waits: one `watch` channel, updated once per popped item.
#[derive(Debug)]
pub(crate) struct Progress {
    applied: watch::Sender<Applied>,
    /// Whether items are applied in the server's order, so the version is a watermark.
    in_order: bool,
}

impl Progress {
    pub(crate) fn new(in_order: bool) -> Self {
        Self {
            applied: watch::Sender::new(Applied::default()),
            in_order,
        }
    }

    /// Records that `popped` has been applied to the cache.
    pub(crate) fn applied<K: Object>(&self, popped: &Popped<K>) {
        let version = if self.in_order {
            version_of(popped)
        } else {
            None
        };
        self.applied.send_modify(|applied| {
            applied.generation = applied.generation.wrapping_add(1);
            if let Some(version) = version {
                applied.version = applied.version.max(version);
            }
        });
    }

    /// The highest resource version applied, when the informer keeps one.
    pub(crate) fn version(&self) -> Option<u64> {
        self.in_order.then(|| self.applied.borrow().version)
    }

    /// Waits until the cache has applied `resource_version` or a later one.
    pub(crate) async fn wait_for_version(
        &self,
        resource_version: &str,
        within: Duration,
        token: &CancellationToken,
        stopped: &CancellationToken,
    ) -> Result<(), WaitError> {
        let wanted =
            parse_version(resource_version).ok_or_else(|| WaitError::IncomparableVersion {
                version: resource_version.to_owned(),
            })?;
        if !self.in_order {
            return Err(WaitError::NoCacheVersion);
        }
        let what = || format!("resource version {wanted}");
        let mut applied = self.applied.subscribe();
        let reached = async {
            applied
                .wait_for(|applied| applied.version >= wanted)
                .await
                .map(|_| ())
        };
        finish(reached, within, token, stopped, what).await
    }

    /// Waits until the informer has synced (`synced`) and then until `condition` holds for
    /// what the cache holds under `key`, checking at sync and after every applied item;
    /// returns the object it held then.
    #[allow(
        clippy::too_many_arguments,
        reason = "the informer's parts a wait reads, each borrowed for the wait alone"
    )]
    pub(crate) async fn wait_for_key<K>(
        &self,
        cache: &dyn CacheReader<K>,
        synced: &UpstreamSynced,
        key: &str,
        mut condition: impl FnMut(Option<&K>) -> bool,
        within: Duration,
        token: &CancellationToken,
        stopped: &CancellationToken,
    ) -> Result<Option<Arc<K>>, WaitError> {
        let mut applied = self.applied.subscribe();
        let what = || format!("the condition on {key}");
        let holds = async {
            // Before its first list the cache says nothing of the server: a key it lacks may
            // exist.
            synced.synced().await;
            loop {
                // Marked seen before the read, so a change applied after the read wakes us.
                applied.borrow_and_update();
                let current = cache.get_by_key(key);
                if condition(current.as_deref()) {
                    return Ok(current);
                }
                applied.changed().await?;
            }
        };
        match finish(holds, within, token, stopped, what).await {
            Err(WaitError::TimedOut { what, within }) if !synced.has_synced() => {
                Err(WaitError::NotSynced { what, within })
            }
            outcome => outcome,
        }
    }
}

/// Runs `wait` until it ends, the deadline passes, the caller cancels or the informer stops.
pub(crate) async fn finish<T>(
    wait: impl Future<Output = Result<T, watch::error::RecvError>>,
    within: Duration,
    token: &CancellationToken,
    stopped: &CancellationToken,
    what: impl Fn() -> String,
) -> Result<T, WaitError> {
    tokio::select! {
        biased;
        outcome = tokio::time::timeout(within, wait) => match outcome {
            Ok(Ok(value)) => Ok(value),
            // The sender lives as long as the informer: a closed channel means it is gone.
            Ok(Err(_)) => Err(WaitError::Stopped { what: what() }),
            Err(_) => Err(WaitError::TimedOut { what: what(), within }),
        },
        () = token.cancelled() => Err(WaitError::Cancelled { what: what() }),
        () = stopped.cancelled() => Err(WaitError::Stopped { what: what() }),
    }
}

/// A resource version as a number, when it is one (`""` is not).
pub(crate) fn parse_version(version: &str) -> Option<u64> {
    if version.is_empty() || !version.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    version.parse().ok()
}

/// The highest resource version `popped` carries, for an applier that applies in order.
///
/// A listed object (`Replaced`, from a list taken in parts) carries none: a list holds its
/// objects in key order, not version order, so one of them applied says nothing of the rest.
/// The list's own version comes with its end ([`Popped::ListEnd`], [`Popped::RelistEnd`]).
fn version_of<K: Object>(popped: &Popped<K>) -> Option<u64> {
    let of_delta = |delta: &Delta<K>| {
        if delta.kind == DeltaType::Replaced {
            return None;
        }
        delta.object().resource_version().and_then(parse_version)
    };
    match popped {
        Popped::Deltas(deltas) => deltas.iter().filter_map(of_delta).max(),
        Popped::Batch(batch) => batch.iter().filter_map(of_delta).max(),
        Popped::ReplacedAll(replaced) => parse_version(&replaced.resource_version),
        Popped::ListEnd(end) => parse_version(&end.resource_version),
        Popped::RelistEnd(end) => end.resource_version.as_deref().and_then(parse_version),
        Popped::Bookmark { resource_version } => parse_version(resource_version),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use kinformer_fifo::{Delta, DeltaType, ListEnd, Popped};
    use kube_core::ObjectMeta;

    use super::{Progress, parse_version};

    fn pod(name: &str, version: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                resource_version: Some(version.to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    /// A list in parts moves the cache's version only at its end: a listed object of a high
    /// version applied before one of a lower version must not release a wait for the lower.
    #[test]
    fn a_list_in_parts_moves_the_version_only_at_its_end() {
        let progress = Progress::new(true);
        progress.applied(&Popped::Batch(vec![
            Delta::new(DeltaType::Replaced, pod("b", "90")),
            Delta::new(DeltaType::Replaced, pod("a", "10")),
        ]));
        assert_eq!(progress.version(), Some(0));
        progress.applied(&Popped::<Pod>::ListEnd(ListEnd {
            resource_version: "100".to_owned(),
            listed: Arc::default(),
        }));
        assert_eq!(progress.version(), Some(100));
        progress.applied(&Popped::Batch(vec![Delta::new(
            DeltaType::Updated,
            pod("a", "101"),
        )]));
        assert_eq!(progress.version(), Some(101), "a watched change moves it");
    }

    #[test]
    fn only_decimal_integers_are_versions() {
        assert_eq!(parse_version("42"), Some(42));
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("-1"), None);
        assert_eq!(parse_version("+1"), None);
        assert_eq!(parse_version("abc"), None);
        assert_eq!(parse_version("99999999999999999999999"), None);
    }
}
