//! What a reflector has done so far: counters a metrics scrape or a health check reads. Each
//! is one relaxed atomic, so counting costs the watch path next to nothing.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::time::Instant;

/// The reasons a reflector relists after it has synced, as its logs name them.
pub const RELIST_REASONS: [&str; 6] = [
    "resource version expired",
    "resource version too large",
    "very short watch",
    "undecodable event",
    "shard changed",
    "watch failed",
];

/// A snapshot of a reflector's counters ([`Reflector::stats`](crate::Reflector::stats)).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ReflectorStats {
    /// Lists applied to the store.
    pub lists: u64,
    /// Lists that failed.
    pub failed_lists: u64,
    /// Seconds spent in lists that were applied, summed.
    pub list_seconds: f64,
    /// Watches opened.
    pub watches: u64,
    /// Relists after a watch, by reason (every one of [`RELIST_REASONS`], in that order).
    pub relists: Vec<(&'static str, u64)>,
    /// ADDED events applied.
    pub added: u64,
    /// MODIFIED events applied.
    pub modified: u64,
    /// DELETED events applied.
    pub deleted: u64,
    /// BOOKMARK events received.
    pub bookmarks: u64,
    /// Errors reported (to the watch error handler or the log).
    pub errors: u64,
    /// Among them, bodies or events that did not decode.
    pub decode_errors: u64,
    /// Time since the last watch event or applied list; `None` before the first.
    pub since_last_event: Option<Duration>,
    /// How long the current watch has been open; `None` while none is.
    pub watch_open_for: Option<Duration>,
}

/// The live counters inside a reflector.
#[derive(Debug)]
pub(crate) struct Counters {
    epoch: Instant,
    lists: AtomicU64,
    failed_lists: AtomicU64,
    list_micros: AtomicU64,
    watches: AtomicU64,
    relists: [AtomicU64; RELIST_REASONS.len()],
    added: AtomicU64,
    modified: AtomicU64,
    deleted: AtomicU64,
    bookmarks: AtomicU64,
    errors: AtomicU64,
    decode_errors: AtomicU64,
    /// Nanoseconds after `epoch` plus one, 0 for never.
    last_event: AtomicU64,
    /// Nanoseconds after `epoch` plus one, 0 while no watch is open.
    watch_opened: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            lists: AtomicU64::new(0),
            failed_lists: AtomicU64::new(0),
            list_micros: AtomicU64::new(0),
            watches: AtomicU64::new(0),
            relists: Default::default(),
            added: AtomicU64::new(0),
            modified: AtomicU64::new(0),
            deleted: AtomicU64::new(0),
            bookmarks: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            decode_errors: AtomicU64::new(0),
            last_event: AtomicU64::new(0),
            watch_opened: AtomicU64::new(0),
        }
    }
}

/// Which event a watch delivered.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EventKind {
    Added,
    Modified,
    Deleted,
    Bookmark,
}

impl Counters {
    fn stamp(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1
    }

    fn age(&self, stamp: u64, now: Instant) -> Option<Duration> {
        let at = self.epoch + Duration::from_nanos(stamp.checked_sub(1)?);
        Some(now.saturating_duration_since(at))
    }

    pub(crate) fn listed(&self, took: Duration) {
        self.lists.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.list_micros.fetch_add(micros, Ordering::Relaxed);
        self.last_event
            .store(self.stamp(Instant::now()), Ordering::Relaxed);
    }

    pub(crate) fn list_failed(&self) {
        self.failed_lists.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn watch_opened(&self, at: Instant) {
        self.watches.fetch_add(1, Ordering::Relaxed);
        self.watch_opened.store(self.stamp(at), Ordering::Relaxed);
    }

    pub(crate) fn watch_closed(&self) {
        self.watch_opened.store(0, Ordering::Relaxed);
    }

    pub(crate) fn event(&self, kind: EventKind, at: Instant) {
        let counter = match kind {
            EventKind::Added => &self.added,
            EventKind::Modified => &self.modified,
            EventKind::Deleted => &self.deleted,
            EventKind::Bookmark => &self.bookmarks,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.last_event.store(self.stamp(at), Ordering::Relaxed);
    }

    pub(crate) fn relisting(&self, reason: &'static str) {
        if let Some(index) = RELIST_REASONS.iter().position(|known| *known == reason) {
            self.relists[index].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn reported(&self, decode: bool) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if decode {
            self.decode_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> ReflectorStats {
        let now = Instant::now();
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ReflectorStats {
            lists: load(&self.lists),
            failed_lists: load(&self.failed_lists),
            #[allow(clippy::cast_precision_loss)] // microseconds summed; f64 is the metric type
            list_seconds: load(&self.list_micros) as f64 / 1e6,
            watches: load(&self.watches),
            relists: RELIST_REASONS
                .iter()
                .zip(&self.relists)
                .map(|(reason, count)| (*reason, load(count)))
                .collect(),
            added: load(&self.added),
            modified: load(&self.modified),
            deleted: load(&self.deleted),
            bookmarks: load(&self.bookmarks),
            errors: load(&self.errors),
            decode_errors: load(&self.decode_errors),
            since_last_event: self.age(load(&self.last_event), now),
            watch_open_for: self.age(load(&self.watch_opened), now),
        }
    }
}
