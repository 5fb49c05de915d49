//! The controller's replicas: one per process in production, several in one process with
//! `--replicas N`.

use kinformer::wait::CancellationToken;
use kinformer::{
    leaderelection::shard::{Shard, ShardMember, ShardOptions},
    prelude::*,
};
use kube_client::Client;
use prometheus_client::registry::Registry;
use std::sync::Arc;

use super::{BoxError, CountersSnapshot, DEFAULT_RESYNC, ReadyPodsController, SHARD_GROUP};

/// One replica of the controller: its own informers and queue and, when sharded, its
/// membership of the `ready-pods` shard group, as a separate process would have.
pub(crate) struct Replica {
    /// Its identity in the shard group; empty when it runs alone.
    pub(crate) identity: String,
    pub(crate) factory: SharedInformerFactory,
    pub(crate) controller: ReadyPodsController,
    pub(crate) registry: Arc<Registry>,
    membership: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Replica {
    /// A replica that works on every Deployment (`identity` `None`), or on its shard of them.
    pub(crate) fn start(
        client: &Client,
        options: FactoryOptions,
        lease_namespace: &str,
        identity: Option<String>,
    ) -> Result<Self, BoxError> {
        let factory = SharedInformerFactory::new(client.clone(), options);
        let mut registry = Registry::default();
        factory.register_metrics(&mut registry);
        let (shard, membership) = match identity.clone() {
            None => (Shard::alone(), None),
            Some(identity) => {
                let member = ShardMember::new(
                    client.clone(),
                    lease_namespace,
                    SHARD_GROUP,
                    &identity,
                    ShardOptions::default(),
                )?;
                println!(
                    "{identity}: sharding with the other members of {SHARD_GROUP:?} in {lease_namespace:?}"
                );
                let shard = member.shard();
                let token = CancellationToken::new();
                let running = tokio::spawn({
                    let token = token.clone();
                    async move { member.run(token).await }
                });
                (shard, Some((token, running)))
            }
        };
        let controller = ReadyPodsController::new(
            &factory,
            client.clone(),
            DEFAULT_RESYNC,
            &mut registry,
            shard,
        )?;
        Ok(Self {
            identity: identity.unwrap_or_default(),
            factory,
            controller,
            registry: Arc::new(registry),
            membership,
        })
    }

    /// The counters of every replica, summed.
    pub(crate) fn total(replicas: &[Self]) -> CountersSnapshot {
        replicas
            .iter()
            .map(|replica| replica.controller.counters().snapshot())
            .fold(CountersSnapshot::default(), |sum, one| CountersSnapshot {
                reconciles: sum.reconciles + one.reconciles,
                patches: sum.patches + one.patches,
                retries: sum.retries + one.retries,
                dropped: sum.dropped + one.dropped,
            })
    }

    /// Leaves the shard group (the others take the Deployments over at once) and stops the
    /// informers; returns how many informer tasks are still running.
    pub(crate) async fn stop(self) -> usize {
        if let Some((token, running)) = self.membership {
            token.cancel();
            let _ = running.await;
        }
        self.factory.shutdown().await;
        self.factory.running_tasks()
    }
}
