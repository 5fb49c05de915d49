//! Test support: objects that record, when freed, whether the store holding them had a lock
//! held at that moment. The stores free what a write lets go of after releasing their locks;
//! these probes are how the tests see it.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::ProjectedMeta;

/// An object that reports its own free to its [`FreeLog`].
pub(crate) struct Probe {
    pub(crate) metadata: ProjectedMeta,
    pub(crate) version: u8,
    log: Arc<FreeLog>,
}

crate::impl_object!(Probe, metadata);

impl Probe {
    pub(crate) fn name_str(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let Some(locked) = self.log.locked.get().and_then(|locked| locked()) else {
            return;
        };
        let label = format!("{}:{}", self.name_str(), self.version);
        self.log
            .freed
            .lock()
            .expect("not poisoned")
            .push((label, locked));
    }
}

/// Whether the watched store has a lock held now; `None` once the store is gone.
type LockedNow = Box<dyn Fn() -> Option<bool> + Send + Sync>;

/// Every free of a [`Probe`] made by [`FreeLog::probe`], in order, while a store is watched.
#[derive(Default)]
pub(crate) struct FreeLog {
    locked: OnceLock<LockedNow>,
    freed: Mutex<Vec<(String, bool)>>,
}

impl FreeLog {
    pub(crate) fn new() -> Arc<Self> {
        Arc::default()
    }

    /// A probe named `name:version`.
    pub(crate) fn probe(self: &Arc<Self>, name: &str, version: u8) -> Probe {
        Probe {
            metadata: ProjectedMeta {
                name: Some(name.to_owned()),
                ..ProjectedMeta::default()
            },
            version,
            log: Arc::clone(self),
        }
    }

    /// Records frees from now on, each with `locked(store)` at that moment; frees after the
    /// store itself is gone are not recorded.
    pub(crate) fn watch<S: Send + Sync + 'static>(&self, store: &Arc<S>, locked: fn(&S) -> bool) {
        let store = Arc::downgrade(store);
        let locked: LockedNow = Box::new(move || Weak::upgrade(&store).map(|store| locked(&store)));
        assert!(self.locked.set(locked).is_ok(), "one store per log");
    }

    /// The probes freed so far, as `name:version`, in order.
    pub(crate) fn freed(&self) -> Vec<String> {
        let freed = self.freed.lock().expect("not poisoned");
        freed.iter().map(|(label, _)| label.clone()).collect()
    }

    /// The probes freed while the store had a lock held.
    pub(crate) fn freed_under_a_lock(&self) -> Vec<String> {
        let freed = self.freed.lock().expect("not poisoned");
        freed
            .iter()
            .filter(|(_, locked)| *locked)
            .map(|(label, _)| label.clone())
            .collect()
    }
}
