//! [`InformerLease`]: an informer held until released rather than until the factory shuts down.

use std::{fmt, ops::Deref};

use kinformer_informer::SharedIndexInformer;
use kinformer_store::Object;

use crate::{factory::WeakFactory, selection::InformerKey};

/// A shared informer from [`SharedInformerFactory::lease`](crate::SharedInformerFactory::lease),
/// held for as long as a lease on it lives.
///
/// It dereferences to the informer. Cloning takes another lease on the same informer.
/// Dropping the last lease of an informer that no pinning method
/// ([`informer`](crate::SharedInformerFactory::informer),
/// [`lister`](crate::SharedInformerFactory::lister), ...) handed out stops it and removes it
/// from the factory; its cache is freed once no clone of the informer (or of a lister over
/// it) remains. [`release`](Self::release) does the same and waits for the stop.
///
/// ```no_run
/// # async fn doc(factory: kinformer_factory::SharedInformerFactory) -> Result<(), Box<dyn std::error::Error>> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinformer_factory::InformerRequest;
///
/// let config_maps = factory.lease(InformerRequest::<ConfigMap>::typed())?;
/// factory.start()?;
/// let token = tokio_util::sync::CancellationToken::new();
/// config_maps.wait_for_cache_sync(std::time::Duration::from_secs(60), &token).await?;
/// let count = config_maps.cache().list().len();
/// config_maps.release().await; // the informer stops; nothing else held it
/// # let _ = count;
/// # Ok(())
/// # }
/// ```
#[must_use = "dropping the lease at once releases the informer"]
pub struct InformerLease<K: Object> {
    informer: SharedIndexInformer<K>,
    key: InformerKey,
    id: u64,
    factory: WeakFactory,
    /// Whether this lease still counts (a clone of a lease on an informer that has left the
    /// factory holds none).
    held: bool,
}

impl<K: Object> InformerLease<K> {
    pub(crate) fn new(
        informer: SharedIndexInformer<K>,
        key: InformerKey,
        id: u64,
        factory: WeakFactory,
    ) -> Self {
        Self {
            informer,
            key,
            id,
            factory,
            held: true,
        }
    }

    /// The informer's key in the factory.
    pub fn key(&self) -> &InformerKey {
        &self.key
    }

    /// Gives the lease back; when it was the last one of an informer nothing pinned, waits
    /// until that informer has stopped (handlers included) and returns `true`.
    pub async fn release(mut self) -> bool {
        let informer = self.informer.clone();
        let Some(started) = self.give_back() else {
            return false;
        };
        // A started informer's task may not have begun to run yet; it still runs, sees its
        // token cancelled and stops. One never started has nothing to wait for.
        if started || informer.has_started() {
            informer.stopped().await;
        }
        true
    }

    /// Gives the lease back: `Some` when that stopped the informer, with whether the factory
    /// had started it.
    fn give_back(&mut self) -> Option<bool> {
        if !std::mem::take(&mut self.held) {
            return None;
        }
        self.factory
            .upgrade()
            .and_then(|factory| factory.release_lease(&self.key, self.id))
    }
}

impl<K: Object> Deref for InformerLease<K> {
    type Target = SharedIndexInformer<K>;

    fn deref(&self) -> &Self::Target {
        &self.informer
    }
}

impl<K: Object> Clone for InformerLease<K> {
    fn clone(&self) -> Self {
        let held = self.held
            && self
                .factory
                .upgrade()
                .is_some_and(|factory| factory.add_lease(&self.key, self.id));
        Self {
            informer: self.informer.clone(),
            key: self.key.clone(),
            id: self.id,
            factory: self.factory.clone(),
            held,
        }
    }
}

impl<K: Object> Drop for InformerLease<K> {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl<K: Object> fmt::Debug for InformerLease<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerLease")
            .field("key", &self.key)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}
