//! The opt-in consistency check: now and then, list from the server at the exact resource
//! version the cache has reached and compare keys, UIDs and versions. client-go runs such a
//! check only in its own CI; here a running informer can run it.
//!
//! The comparison is exact, not approximate: the cache's contents and its in-order version
//! are taken together (under the lock that orders cache changes), and the server is asked for
//! that very version (`resourceVersionMatch=Exact`), so any difference is a change the cache
//! missed, never one still on its way. When the server no longer has that version (compacted,
//! 410) the round is skipped. The check only reads: it never writes into the cache.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kinformer_reflector::{
    Error as ReflectorError, ListOptions, ListSink, ListerWatcher, ShardedListerWatcher,
    VersionMatch,
};
use kinformer_store::{Incoming, KeyFunc, Object, Shard};
use kinformer_wait::ErrorChain;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::options::WatchErrorHandler;

/// Objects per page of a check's list.
const CHECK_PAGE_SIZE: u32 = 500;
/// Keys named in a drift report.
const EXAMPLES: usize = 5;

/// What an informer's consistency checks found so far
/// ([`InformerOptions::consistency_check`](crate::InformerOptions::consistency_check)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsistencyStats {
    /// Checks that compared the cache with the server.
    pub checks: u64,
    /// Checks among them that found a difference.
    pub drifts: u64,
    /// Rounds skipped: not synced yet, or the server could not list the version.
    pub skipped: u64,
    /// The last difference found, as reported.
    pub last_drift: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    checks: AtomicU64,
    drifts: AtomicU64,
    skipped: AtomicU64,
    last_drift: Mutex<Option<String>>,
}

impl Counters {
    pub(crate) fn stats(&self) -> ConsistencyStats {
        ConsistencyStats {
            checks: self.checks.load(Ordering::Relaxed),
            drifts: self.drifts.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            last_drift: self.last_drift.lock().clone(),
        }
    }
}

/// What a check compares per key: UID and resourceVersion.
type Identity = (Option<String>, Option<String>);

/// What a check compares: the cache's in-order version, its objects, and for an informer of a
/// shard the shard it holds, taken together.
pub(crate) struct Snapshot<K> {
    pub(crate) version: u64,
    pub(crate) objects: Vec<Arc<K>>,
    pub(crate) shard: Option<Arc<Shard>>,
}

/// One informer's checker: where to list, how to key, where to report.
pub(crate) struct Checker<K> {
    pub(crate) lister_watcher: Arc<dyn ListerWatcher<K>>,
    /// The informer's shard, which `lister_watcher` lists: a check compares only while the
    /// cache holds the very shard it is set to, from before its list to after.
    pub(crate) sharded: Option<ShardedListerWatcher<K>>,
    pub(crate) key_func: KeyFunc<K>,
    pub(crate) handler: Option<WatchErrorHandler>,
    pub(crate) counters: Arc<Counters>,
}

impl<K: Object> Checker<K> {
    /// Checks every `period` until `token` fires; `snapshot` gives the cache's state.
    pub(crate) async fn run(
        self,
        period: Duration,
        snapshot: impl Fn() -> Snapshot<K>,
        token: CancellationToken,
    ) {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = token.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let snapshot = snapshot();
            if snapshot.version == 0 || !self.holds_target(snapshot.shard.as_ref()) {
                self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            tokio::select! {
                biased;
                () = token.cancelled() => return,
                () = self.check(&snapshot) => {}
            }
        }
    }

    /// Whether the cache holds the shard the informer is set to (the very one, not an equal
    /// shard set again since), so a list now reads what the cache holds; true without a shard.
    fn holds_target(&self, cached: Option<&Arc<Shard>>) -> bool {
        self.sharded.as_ref().is_none_or(|sharded| {
            cached.is_some_and(|cached| Arc::ptr_eq(cached, &sharded.shard()))
        })
    }

    async fn check(&self, snapshot: &Snapshot<K>) {
        let version = snapshot.version;
        let listed = self.list_at(version).await;
        // Moved while it listed: the list may be of another shard than the cache holds.
        let listed = listed.and_then(|server| {
            if self.holds_target(snapshot.shard.as_ref()) {
                Ok(server)
            } else {
                Err(ReflectorError::ShardChanged)
            }
        });
        let server = match listed {
            Ok(server) => server,
            Err(error) => {
                debug!(error = %ErrorChain(&error), version, "consistency check skipped");
                self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let mut cache: HashMap<String, Identity> = HashMap::with_capacity(snapshot.objects.len());
        for object in &snapshot.objects {
            if let Ok(key) = (self.key_func)(object) {
                cache.insert(key, identity(object.as_ref()));
            }
        }
        self.counters.checks.fetch_add(1, Ordering::Relaxed);
        let Some(drift) = compare(version, &server, &cache) else {
            debug!(version, objects = cache.len(), "consistency check passed");
            return;
        };
        self.counters.drifts.fetch_add(1, Ordering::Relaxed);
        *self.counters.last_drift.lock() = Some(drift.to_string());
        warn!(error = %drift, "consistency check found the cache different from the server");
        if let Some(handler) = &self.handler {
            handler(&drift);
        }
    }

    /// Every object on the server at exactly `version`, keyed, paged.
    async fn list_at(&self, version: u64) -> Result<HashMap<String, Identity>, ReflectorError> {
        let mut options = ListOptions {
            resource_version: Some(version.to_string()),
            resource_version_match: Some(VersionMatch::Exact),
            limit: Some(CHECK_PAGE_SIZE),
            ..ListOptions::default()
        };
        let mut server = Identities {
            key_func: &self.key_func,
            server: HashMap::new(),
        };
        loop {
            let page = self
                .lister_watcher
                .list(options.clone(), &mut server)
                .await?;
            match page.next_page_token() {
                None => return Ok(server.server),
                Some(token) => {
                    options.continue_token = Some(token.to_owned());
                    options.resource_version = None;
                    options.resource_version_match = None;
                }
            }
        }
    }
}

/// Keeps the key and identity of each listed object, and nothing else of it.
struct Identities<'a, K> {
    key_func: &'a KeyFunc<K>,
    server: HashMap<String, Identity>,
}

#[async_trait::async_trait]
impl<K: Object> ListSink<K> for Identities<'_, K> {
    async fn part(&mut self, items: Vec<Incoming<K>>) -> Result<(), ReflectorError> {
        for item in items {
            if let Ok(key) = (self.key_func)(item.object()) {
                self.server.insert(key, identity(&**item.object()));
            }
        }
        Ok(())
    }
}

fn identity<K: Object>(object: &K) -> Identity {
    (
        object.uid().map(str::to_owned),
        object.resource_version().map(str::to_owned),
    )
}

/// The difference between the server's and the cache's objects at `version`, if any.
fn compare(
    version: u64,
    server: &HashMap<String, Identity>,
    cache: &HashMap<String, Identity>,
) -> Option<ReflectorError> {
    let mut examples = Vec::new();
    let (mut missing, mut unexpected, mut changed) = (0, 0, 0);
    for (key, identity) in server {
        match cache.get(key) {
            None => {
                missing += 1;
                examples.push(key.clone());
            }
            Some(cached) if cached != identity => {
                changed += 1;
                examples.push(key.clone());
            }
            Some(_) => {}
        }
    }
    for key in cache.keys().filter(|key| !server.contains_key(*key)) {
        unexpected += 1;
        examples.push(key.clone());
    }
    if missing + unexpected + changed == 0 {
        return None;
    }
    examples.sort();
    examples.truncate(EXAMPLES);
    Some(ReflectorError::CacheDrift {
        resource_version: version.to_string(),
        missing,
        unexpected,
        changed,
        examples,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use kinformer_reflector::Error;

    use super::{Identity, compare};

    fn objects(entries: &[(&str, &str, &str)]) -> HashMap<String, Identity> {
        entries
            .iter()
            .map(|(key, uid, version)| {
                (
                    (*key).to_owned(),
                    (Some((*uid).to_owned()), Some((*version).to_owned())),
                )
            })
            .collect()
    }

    #[test]
    fn equal_sides_are_no_drift_and_each_difference_is_counted() {
        let server = objects(&[("a", "u1", "5"), ("b", "u2", "6"), ("c", "u3", "7")]);
        assert!(compare(9, &server, &server.clone()).is_none());
        let cache = objects(&[("a", "u1", "5"), ("b", "u9", "6"), ("d", "u4", "8")]);
        match compare(9, &server, &cache) {
            Some(Error::CacheDrift {
                resource_version,
                missing,
                unexpected,
                changed,
                examples,
            }) => {
                assert_eq!(resource_version, "9");
                assert_eq!((missing, unexpected, changed), (1, 1, 1));
                assert_eq!(examples, ["b", "c", "d"]);
            }
            other => panic!("expected a drift, got {other:?}"),
        }
    }
}
