//! Controllers with several replicas: client-go's `tools/leaderelection` over a
//! `coordination.k8s.io/v1` Lease, and sharding, which splits the keys between live replicas
//! over one Lease per replica.
//!
//! This layer owns:
//!
//! - **[`LeaderElector`]**: one replica's candidacy. It creates the Lease or takes it over
//!   once it has expired, renews it while leading, gives leadership up when it cannot renew
//!   within the renew deadline, and can release the Lease when cancelled. Updates carry the
//!   Lease's resourceVersion, so two replicas never both win a write; a conflict is another
//!   replica winning, not an error. [`LeaderElector::is_leader`] says whether it leads now.
//! - **[`LeaderElectorOptions`]**: lease duration, renew deadline, retry period and release on
//!   cancel, checked together as client-go checks them.
//! - **[`LeadershipEvents`]**: client-go's callbacks as [`LeadershipEvent`]s, in order:
//!   `StartedLeading`, `StoppedLeading` and `NewLeader`.
//! - **[`shard`]**: [`ShardMember`](shard::ShardMember) keeps a replica's membership of a
//!   group, a consistent-hash [`Ring`](shard::Ring) over the live members assigns each key
//!   to one of them, and a [`Shard`](shard::Shard) gate, in front of a work queue
//!   ([`ShardedQueue`](shard::ShardedQueue)), lets a replica work only on keys no other live
//!   replica is working on, through joins, departures and crashes.
//!
//! It depends on kube-client, the Lease type and, for the sharded queue, the work queue;
//! nothing here knows informers.
//!
//! # Guarantees and limits
//!
//! A replica that leads stops believing it does after the renew deadline without a renewal;
//! any other replica starts only after the lease duration has passed, on its own clock, since
//! it last saw the Lease change. With the renew deadline shorter than the lease duration (the
//! options refuse anything else), two replicas lead at once only if a replica's process
//! stalls longer than the difference, or the clocks' rates (not their settings) differ that
//! much: the guarantee client-go gives. Work a leader starts must stop when it receives
//! [`LeadershipEvent::StoppedLeading`].
//!
//! # Example
//!
//! ```no_run
//! use kinformer_leaderelection::{LeaderElector, LeaderElectorOptions, LeadershipEvent};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn doc(client: kube_client::Client) -> Result<(), kinformer_leaderelection::Error> {
//! let identity = std::env::var("POD_NAME").unwrap_or_else(|_| "replica-a".to_owned());
//! let (elector, mut events) = LeaderElector::new(
//!     client,
//!     "kube-system",
//!     "my-controller",
//!     &identity,
//!     LeaderElectorOptions::default().release_on_cancel(true),
//! )?;
//! let token = CancellationToken::new();
//! tokio::spawn({
//!     let (elector, token) = (elector.clone(), token.clone());
//!     async move { elector.run(token).await }
//! });
//! while let Some(event) = events.recv().await {
//!     match event {
//!         LeadershipEvent::StartedLeading => { /* start the controller's workers */ }
//!         LeadershipEvent::StoppedLeading => break, // stop them; exit, as client-go's callers do
//!         LeadershipEvent::NewLeader(leader) => println!("{leader} leads"),
//!         _ => {}
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Sharding instead splits the keys between every live replica; see [`shard`]:
//!
//! ```no_run
//! use kinformer_leaderelection::shard::{ShardMember, ShardOptions, ShardedQueue};
//! use kinformer_workqueue::{QueueOptions, RateLimitingQueue, default_controller_rate_limiter};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn doc(client: kube_client::Client) -> Result<(), kinformer_leaderelection::Error> {
//! let member = ShardMember::new(client, "default", "web", "replica-a", ShardOptions::default())?;
//! let queue: ShardedQueue<String> = ShardedQueue::new(
//!     RateLimitingQueue::new(default_controller_rate_limiter(), QueueOptions::named("web")),
//!     member.shard(),
//! );
//! let token = CancellationToken::new();
//! tokio::spawn({
//!     let token = token.clone();
//!     async move { member.run(token).await }
//! });
//! // Handlers add keys (and add them all again on `shard.changes()`); workers take them:
//! while let Some((key, guard)) = queue.get().await {
//!     // Reconcile `key`: no other live replica works on it while `guard` lives.
//!     queue.forget(&key);
//!     queue.done(&key, guard);
//! }
//! # Ok(())
//! # }
//! ```

mod elector;
mod error;
pub mod shard;

pub(crate) use crate::error::Result;
pub use crate::{
    elector::{LeaderElector, LeaderElectorOptions, LeadershipEvent, LeadershipEvents},
    error::Error,
};
