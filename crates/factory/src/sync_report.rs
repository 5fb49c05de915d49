//! What a wait for sync found.

use std::fmt;

use kinformer_informer::SyncStatus;

use crate::InformerKey;

/// What [`SharedInformerFactory::wait_for_cache_sync`](crate::SharedInformerFactory::wait_for_cache_sync)
/// found: the informers that synced, and where each of the others stands (a refused
/// connection, a 403, a resource the server does not serve, not started). A report with no
/// informer in it says so, and is never "all synced".
///
/// Its `Display` is a status line (and one line per informer not synced), ready for a log.
#[derive(Debug, Clone, Default)]
#[must_use = "a wait for sync can end before every informer synced: check `all_synced`"]
pub struct SyncReport {
    synced: Vec<InformerKey>,
    not_synced: Vec<(InformerKey, SyncStatus)>,
}

impl SyncReport {
    pub(crate) fn new(
        mut synced: Vec<InformerKey>,
        mut not_synced: Vec<(InformerKey, SyncStatus)>,
    ) -> Self {
        synced.sort_by_cached_key(ToString::to_string);
        not_synced.sort_by_cached_key(|(key, _)| key.to_string());
        Self { synced, not_synced }
    }

    /// Whether every informer waited for has synced, and there was at least one.
    pub fn all_synced(&self) -> bool {
        !self.synced.is_empty() && self.not_synced.is_empty()
    }

    /// Whether there was nothing to wait for: the factory had handed out no informer.
    pub fn is_empty(&self) -> bool {
        self.synced.is_empty() && self.not_synced.is_empty()
    }

    /// The informers that synced.
    pub fn synced(&self) -> &[InformerKey] {
        &self.synced
    }

    /// The informers that had not synced when the wait ended, each with its status.
    pub fn not_synced(&self) -> &[(InformerKey, SyncStatus)] {
        &self.not_synced
    }

    /// Whether the informer under `key` synced.
    pub fn is_synced(&self, key: &InformerKey) -> bool {
        self.synced.contains(key)
    }
}

impl fmt::Display for SyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.synced.len() + self.not_synced.len();
        let informers = |n: usize| if n == 1 { "informer" } else { "informers" };
        if total == 0 {
            return f.write_str("nothing to wait for: the factory has handed out no informer");
        }
        if self.not_synced.is_empty() {
            return write!(f, "all {total} {} synced", informers(total));
        }
        write!(
            f,
            "{} of {total} {} not synced",
            self.not_synced.len(),
            informers(total)
        )?;
        for (key, status) in &self.not_synced {
            write!(f, "\n  {key}: {status}")?;
        }
        Ok(())
    }
}
