//! The factory's own shard, and how it moves: [`SharedInformerFactory::set_shard`] and
//! [`SharedInformerFactory::wait_for_shard`].

use std::{sync::Arc, time::Duration};

use kinformer_informer::WaitError;
use kinformer_store::Shard;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::{ErasedInformer, SharedInformerFactory};
use crate::{
    error::{Error, Result},
    selection::InformerKey,
};

impl SharedInformerFactory {
    /// Moves the factory's own shard
    /// ([`FactoryOptions::shard`](crate::FactoryOptions::shard)) to `shard`: every informer
    /// that takes it, started or not, lists and watches `shard` from now on, and so does every
    /// one asked for later. A running informer lists the new shard at once and hands off as
    /// [`SharedIndexInformer::set_shard`](kinformer_informer::SharedIndexInformer::set_shard)
    /// says (adds for what it gains, tombstones marked `left_shard` for what it loses). Its key
    /// names the new shard, and a key or lease taken before the move still finds it. Informers
    /// asked for with a shard of their own, or with a selection not taken from the factory's,
    /// stay. The shard it holds already changes nothing. A replica whose ranges follow its
    /// membership calls this on every new ring, then [`wait_for_shard`](Self::wait_for_shard).
    ///
    /// # Errors
    ///
    /// [`Error::NoShard`] for a factory built without a shard.
    pub fn set_shard(&self, shard: Shard) -> Result<()> {
        let mut state = self.inner.state.lock();
        match &state.shard {
            None => return Err(Error::NoShard),
            Some(current) if *current == shard => return Ok(()),
            Some(_) => {}
        }
        info!(%shard, "the factory's shard moves");
        let moving: Vec<InformerKey> = state
            .informers
            .keys()
            .filter(|key| key.selection().follows_factory())
            .cloned()
            .collect();
        for key in moving {
            if let Some(entry) = state.informers.remove(&key) {
                entry.informer.set_shard(shard.clone());
                state.informers.insert(key.resolved(Some(&shard)), entry);
            }
        }
        state.shard = Some(shard);
        Ok(())
    }

    /// Waits until every informer of the factory's shard holds `shard` whole
    /// ([`SharedIndexInformer::wait_for_shard`](kinformer_informer::SharedIndexInformer::wait_for_shard)):
    /// its list has been applied, and its handlers have been handed the hand-off. A replica
    /// taking over ranges waits for this before it works on them. Returns at once when there
    /// are none. An informer the factory has not started cannot get there, and the wait runs
    /// out.
    ///
    /// # Errors
    ///
    /// [`WaitError::ShardChanged`] when the factory's shard is not `shard`, or moves on before
    /// its informers hold it; otherwise the first informer's error that did not get there
    /// within `within`, or that the caller cancelled with `token`, or that stopped.
    pub async fn wait_for_shard(
        &self,
        shard: &Shard,
        within: Duration,
        token: &CancellationToken,
    ) -> Result<(), WaitError> {
        let informers: Vec<Arc<dyn ErasedInformer>> = {
            let state = self.inner.state.lock();
            if state.shard.as_ref() != Some(shard) {
                return Err(WaitError::ShardChanged {
                    what: format!("the factory's shard {shard}"),
                });
            }
            state
                .informers
                .iter()
                .filter(|(key, _)| key.selection().follows_factory())
                .map(|(_, entry)| Arc::clone(&entry.informer))
                .collect()
        };
        let deadline = tokio::time::Instant::now() + within;
        for informer in informers {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            informer.wait_for_shard(shard, left, token).await?;
        }
        Ok(())
    }
}
