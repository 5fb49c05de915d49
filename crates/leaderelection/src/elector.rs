//! [`LeaderElector`]: client-go's `LeaderElector` over a Lease.

use std::{fmt, sync::Arc, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube_client::{Api, Client, api::PostParams};
use parking_lot::Mutex;
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, warn};

use crate::{Error, Result};

/// client-go's `JitterFactor`: a leader waits between renewals the retry period plus up to
/// 1.2 times it, and the renew deadline must exceed 1.2 retry periods.
const JITTER_FACTOR: f64 = 1.2;

/// How a [`LeaderElector`] times its attempts; [`Default`] is what client-go's documentation
/// recommends (15 s lease, 10 s renew deadline, 2 s retry period).
///
/// ```
/// use std::time::Duration;
///
/// use kinformer_leaderelection::LeaderElectorOptions;
///
/// let options = LeaderElectorOptions::default()
///     .lease_duration(Duration::from_secs(30))
///     .renew_deadline(Duration::from_secs(20))
///     .retry_period(Duration::from_secs(4))
///     .release_on_cancel(true);
/// # drop(options);
/// ```
#[derive(Debug, Clone)]
pub struct LeaderElectorOptions {
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    release_on_cancel: bool,
}

impl Default for LeaderElectorOptions {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
        }
    }
}

impl LeaderElectorOptions {
    /// How long others wait, after they last saw the lease change, before they take it over
    /// (client-go's `LeaseDuration`). It bounds how long a crashed leader's work stays
    /// unclaimed, and how much clock rate difference between replicas is tolerated.
    #[must_use]
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// How long the leader keeps trying to renew before it gives leadership up
    /// (client-go's `RenewDeadline`); shorter than the lease duration, so a leader that cannot
    /// renew stops before anyone else may start.
    #[must_use]
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = deadline;
        self
    }

    /// How long to wait between attempts (client-go's `RetryPeriod`). A candidate tries again
    /// within it (less up to a fifth, so replicas started together drift apart), or when the
    /// lease it observed expires if that is sooner.
    #[must_use]
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.retry_period = period;
        self
    }

    /// Whether the leader clears the lease when its token is cancelled, so that another
    /// replica takes over at its next attempt instead of after the lease duration
    /// (client-go's `ReleaseOnCancel`). Only safe when the work a leader does stops with the
    /// token.
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// The lease duration as a Lease states it, in whole seconds rounded up: others judge
    /// expiry by it, so it must not be shorter than the duration this replica works to.
    pub(crate) fn lease_seconds(&self) -> i32 {
        let seconds =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(seconds).unwrap_or(i32::MAX)
    }

    pub(crate) fn renew_deadline_value(&self) -> Duration {
        self.renew_deadline
    }

    pub(crate) fn retry_period_value(&self) -> Duration {
        self.retry_period
    }

    /// client-go's `NewLeaderElector` checks.
    pub(crate) fn validate(&self) -> Result<()> {
        let reason = if self.lease_duration <= self.renew_deadline {
            "the lease duration must be longer than the renew deadline"
        } else if self.renew_deadline.as_secs_f64()
            <= JITTER_FACTOR * self.retry_period.as_secs_f64()
        {
            "the renew deadline must be longer than 1.2 times the retry period"
        } else if self.retry_period.is_zero() {
            "the retry period must be longer than zero"
        } else if self.lease_duration.as_secs() == 0 {
            "the lease duration must be at least a second (a Lease counts it in seconds)"
        } else {
            return Ok(());
        };
        Err(Error::Options { reason })
    }
}

/// What a replica knows of the leadership at a moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Leadership {
    /// Whether this replica leads.
    leading: bool,
    /// Who holds the lease, as last observed; `None` before the first observation or while
    /// nobody holds it.
    leader: Option<String>,
}

/// A change of leadership, in the order it happened (client-go's callbacks).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeadershipEvent {
    /// This replica became the leader (`OnStartedLeading`): start the leader's work.
    StartedLeading,
    /// This replica stopped leading (`OnStoppedLeading`): it could not renew in time, or its
    /// token was cancelled. Stop the leader's work at once; another replica may start soon.
    StoppedLeading,
    /// Another identity holds the lease now (`OnNewLeader`).
    NewLeader(String),
}

/// The lease as last observed, and when it was observed on this replica's clock.
struct Observed {
    spec: Option<LeaseSpec>,
    at: Instant,
}

/// One replica's side of an election (client-go's `LeaderElector` with a `LeaseLock`).
///
/// [`run`](Self::run) tries to acquire the lease every retry period; once it holds it, it
/// renews it every retry period until it cannot within the renew deadline or the token is
/// cancelled, then returns. Its [`LeadershipEvents`] tell the application when to start and
/// stop the leader's work, and [`is_leader`](Self::is_leader) whether it leads now.
///
/// Expiry is judged as client-go judges it: by how long ago, on this replica's clock, the
/// lease was last seen to change, never by the timestamps another replica wrote into it, so
/// clocks that disagree do not matter; only their rates must roughly agree.
pub struct LeaderElector {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    options: LeaderElectorOptions,
    observed: Mutex<Observed>,
    state: Mutex<Leadership>,
    events: mpsc::UnboundedSender<LeadershipEvent>,
}

/// The receiving end of a [`LeaderElector`]'s events.
#[derive(Debug)]
pub struct LeadershipEvents(mpsc::UnboundedReceiver<LeadershipEvent>);

impl LeadershipEvents {
    /// The next event; `None` once the elector is dropped and every event has been received.
    pub async fn recv(&mut self) -> Option<LeadershipEvent> {
        self.0.recv().await
    }
}

impl LeaderElector {
    /// An elector for the Lease `name` in `namespace`, competing as `identity` (unique per
    /// replica: the pod name, or the host name and a random suffix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name, namespace or identity; [`Error::Options`]
    /// when the durations cannot keep one leader at a time.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        options: LeaderElectorOptions,
    ) -> Result<(Arc<Self>, LeadershipEvents)> {
        for (value, what) in [
            (name, "lease name"),
            (namespace, "namespace"),
            (identity, "identity"),
        ] {
            if value.is_empty() {
                return Err(Error::InvalidName {
                    what,
                    name: String::new(),
                });
            }
        }
        options.validate()?;
        let (events, received) = mpsc::unbounded_channel();
        let elector = Arc::new(Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            options,
            observed: Mutex::new(Observed {
                spec: None,
                at: Instant::now(),
            }),
            state: Mutex::new(Leadership::default()),
            events,
        });
        Ok((elector, LeadershipEvents(received)))
    }

    /// Whether this replica leads now (client-go's `IsLeader`).
    pub fn is_leader(&self) -> bool {
        self.state.lock().leading
    }

    /// Competes for the lease, then leads until the lease cannot be renewed within the renew
    /// deadline or `token` is cancelled (releasing the lease first if the options say so).
    /// Returns when this replica is no longer a candidate: after a loss, build a new elector
    /// (or exit, as client-go's callers usually do) to compete again.
    pub async fn run(&self, token: CancellationToken) {
        // An error-level span, so the lease and identity reach every warning inside.
        let span =
            tracing::error_span!("leader-election", lease = %self.name, identity = %self.identity);
        async {
            if !self.acquire(&token).await {
                return;
            }
            info!("started leading");
            self.set_leading(true);
            self.renew(&token).await;
            if token.is_cancelled() && self.options.release_on_cancel {
                self.release().await;
            }
            info!("stopped leading");
            self.set_leading(false);
        }
        .instrument(span)
        .await;
    }

    /// Tries every retry period until the lease is ours; `false` when `token` fired first.
    async fn acquire(&self, token: &CancellationToken) -> bool {
        loop {
            if token.is_cancelled() {
                return false;
            }
            if self.try_acquire_or_renew().await {
                return true;
            }
            tokio::select! {
                () = token.cancelled() => return false,
                () = tokio::time::sleep_until(self.next_attempt()) => {}
            }
        }
    }

    /// When a candidate tries again: within one retry period (less up to a fifth, so replicas
    /// started together drift apart), and at the moment the lease it observed expires if that
    /// comes first. client-go waits up to 2.2 retry periods and only polls, so its hand-over
    /// after a crash takes up to the lease duration plus 2.2 retry periods; this one takes up
    /// to the lease duration plus one.
    fn next_attempt(&self) -> Instant {
        let retry = self.options.retry_period;
        let poll = Instant::now() + retry.mul_f64(1.0 - 0.2 * fastrand::f64());
        let observed = self.observed.lock();
        let expiry = observed.spec.as_ref().and_then(|spec| {
            let seconds = u64::try_from(spec.lease_duration_seconds?).ok()?;
            Some(observed.at + Duration::from_secs(seconds))
        });
        expiry.map_or(poll, |expiry| poll.min(expiry.max(Instant::now())))
    }

    /// Renews every retry period; returns when a renewal did not succeed within the renew
    /// deadline, or when `token` fired.
    async fn renew(&self, token: &CancellationToken) {
        loop {
            let deadline = Instant::now() + self.options.renew_deadline;
            let renewed = loop {
                let attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew());
                tokio::select! {
                    () = token.cancelled() => return,
                    attempt = attempt => match attempt {
                        Ok(true) => break true,
                        Err(_elapsed) => break false,
                        Ok(false) if Instant::now() >= deadline => break false,
                        Ok(false) => {}
                    },
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(self.options.retry_period.min(deadline - Instant::now())) => {}
                }
            };
            if !renewed {
                warn!(deadline = ?self.options.renew_deadline, "failed to renew the lease in time");
                return;
            }
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(self.options.retry_period) => {}
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: creates the lease, or takes it over once expired, or
    /// renews it if ours. A conflict means another replica wrote first: `false`, not an error.
    async fn try_acquire_or_renew(&self) -> bool {
        let now = MicroTime(Timestamp::now());
        let lease_seconds = self.options.lease_seconds();
        let current = match self.api.get_opt(&self.name).await {
            Ok(current) => current,
            Err(error) => {
                warn!(%error, "could not read the lease");
                return false;
            }
        };
        let Some(current) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(lease_seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec);
                    true
                }
                Err(error) => {
                    debug!(%error, "could not create the lease (another replica may have)");
                    false
                }
            };
        };
        let spec = current.spec.clone().unwrap_or_default();
        self.observe(Some(spec.clone()));
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        if !holder.is_empty() && holder != self.identity && !self.observed_expired(&spec) {
            debug!(holder, "the lease is held by another replica");
            return false;
        }
        let ours = holder == self.identity;
        let transitions = spec.lease_transitions.unwrap_or(0);
        let mut updated = current;
        updated.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(lease_seconds),
            acquire_time: if ours {
                spec.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if ours {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..spec
        });
        match self
            .api
            .replace(&self.name, &PostParams::default(), &updated)
            .await
        {
            Ok(written) => {
                self.observe(written.spec);
                true
            }
            Err(kube_client::Error::Api(status)) if status.code == 409 => {
                debug!("another replica updated the lease first");
                false
            }
            Err(error) => {
                warn!(%error, "could not update the lease");
                false
            }
        }
    }

    /// Records what the lease says, restarting the expiry clock when it changed, and reports
    /// a new holder.
    fn observe(&self, spec: Option<LeaseSpec>) {
        let holder = spec
            .as_ref()
            .and_then(|spec| spec.holder_identity.clone())
            .filter(|holder| !holder.is_empty());
        let mut observed = self.observed.lock();
        if observed.spec == spec {
            return;
        }
        observed.spec = spec;
        observed.at = Instant::now();
        drop(observed);
        let changed = {
            let mut state = self.state.lock();
            let changed = state.leader != holder;
            state.leader.clone_from(&holder);
            changed
        };
        if changed && let Some(holder) = holder.filter(|holder| *holder != self.identity) {
            info!(leader = %holder, "new leader observed");
            let _ = self.events.send(LeadershipEvent::NewLeader(holder));
        }
    }

    /// Whether the lease `spec` (just observed) has gone unchanged for its whole duration on
    /// this replica's clock.
    fn observed_expired(&self, spec: &LeaseSpec) -> bool {
        let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
        let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
        self.observed.lock().at + duration <= Instant::now()
    }

    /// Clears the lease if this replica holds it, so another can take it at once (client-go's
    /// `release`): no holder, a one-second duration.
    async fn release(&self) {
        let Ok(Some(mut current)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let spec = current.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let now = MicroTime(Timestamp::now());
        current.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..spec
        });
        match self
            .api
            .replace(&self.name, &PostParams::default(), &current)
            .await
        {
            Ok(written) => {
                info!("released the lease");
                self.observe(written.spec);
            }
            Err(error) => warn!(%error, "could not release the lease"),
        }
    }

    fn set_leading(&self, leading: bool) {
        self.state.lock().leading = leading;
        let _ = self.events.send(if leading {
            LeadershipEvent::StartedLeading
        } else {
            LeadershipEvent::StoppedLeading
        });
    }
}

impl fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElector")
            .field("lease", &self.name)
            .field("namespace", &self.namespace)
            .field("identity", &self.identity)
            .field("options", &self.options)
            .field("leadership", &*self.state.lock())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_states_its_duration_rounded_up_to_whole_seconds() {
        let seconds = |millis| {
            LeaderElectorOptions::default()
                .lease_duration(Duration::from_millis(millis))
                .lease_seconds()
        };
        // Rounded down, others would count a 1.5 s lease expired after 1 s, while its holder
        // may still act until its renew deadline (up to 1.5 s).
        assert_eq!(seconds(1_500), 2);
        assert_eq!(seconds(1_000), 1);
        assert_eq!(seconds(15_000), 15);
    }
}
