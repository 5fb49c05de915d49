//! [`ShardMember`]: one replica's membership of a shard group, announced in its own Lease.

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    time::Duration,
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube_client::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams, Preconditions},
};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, warn};

use super::{
    CLAIMS_ANNOTATION, GROUP_LABEL, INCARNATION_ANNOTATION, Ring, Shard, gate::Claims,
    is_member_name,
};
use crate::{Error, LeaderElectorOptions, Result};

/// How a [`ShardMember`] times its Lease. The durations mean what they mean for leader
/// election, and are checked the same way; every member of a group should use the same
/// options.
///
/// ```
/// use std::time::Duration;
///
/// use kinformer_leaderelection::shard::ShardOptions;
///
/// let options = ShardOptions::default()
///     .lease_duration(Duration::from_secs(30))
///     .renew_deadline(Duration::from_secs(20))
///     .retry_period(Duration::from_secs(4));
/// # drop(options);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ShardOptions {
    timing: LeaderElectorOptions,
}

impl ShardOptions {
    /// How long others wait, after they last saw this member's Lease change, before they
    /// count it gone and take its keys over.
    #[must_use]
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.timing = self.timing.lease_duration(duration);
        self
    }

    /// How long after its last successful renewal a member stops starting keys; shorter than
    /// the lease duration, so it stops before anyone may take its keys over.
    #[must_use]
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.timing = self.timing.renew_deadline(deadline);
        self
    }

    /// How often a member renews its Lease and reads the group's: the delay with which it
    /// notices joins, departures and hand-offs.
    #[must_use]
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.timing = self.timing.retry_period(period);
        self
    }
}

/// Another member's Lease as last seen, and when it was last seen to change on this
/// replica's clock.
struct Seen {
    resource_version: String,
    at: Instant,
    /// The duration the Lease states.
    duration: Duration,
}

/// One replica's membership of a shard group (a set of replicas that split the keys of the
/// objects they control between them).
///
/// [`run`](Self::run) keeps a Lease named `<group>-<identity>`, labelled
/// `kinformer.dev/shard-group=<group>`, renewed every retry period. Each round it reads the
/// group's Leases, counts as live every member whose Lease changed within its lease duration
/// (on this replica's clock, as leader election judges expiry), builds the [`Ring`] over the
/// live members, announces in its Lease the rings it acts on, and then reads the group again
/// so that its [`Shard`] knows what the others announce. Cancelling the token stops new work,
/// waits for the keys in flight, and deletes the Lease so the others take its keys at once.
pub struct ShardMember {
    api: Api<Lease>,
    group: String,
    identity: String,
    lease_name: String,
    incarnation: String,
    options: ShardOptions,
    shard: Shard,
    seen: Mutex<HashMap<String, Seen>>,
    rings: Mutex<HashMap<String, Ring>>,
    /// This member's Lease as last written, so a renewal needs no read first; cleared when a
    /// write fails, so the next one reads the Lease afresh.
    written: Mutex<Option<Lease>>,
}

impl ShardMember {
    /// A member of `group` (a label value) in `namespace`, as `identity` (unique among live
    /// replicas and stable across restarts where possible, such as a StatefulSet pod name;
    /// lowercase letters, digits, `-` and `.`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty namespace, group or identity, or a group or
    /// identity that cannot name a Lease or a label; [`Error::Options`] for durations that
    /// cannot keep one owner per key.
    pub fn new(
        client: Client,
        namespace: &str,
        group: &str,
        identity: &str,
        options: ShardOptions,
    ) -> Result<Self> {
        for (value, what) in [
            (namespace, "namespace"),
            (group, "shard group"),
            (identity, "identity"),
        ] {
            if value.is_empty() {
                return Err(Error::InvalidName {
                    what,
                    name: String::new(),
                });
            }
        }
        let lease_name = format!("{group}-{identity}");
        if !is_member_name(group) || group.len() > 63 {
            return Err(Error::InvalidName {
                what: "shard group",
                name: group.to_owned(),
            });
        }
        if !is_member_name(identity) || lease_name.len() > 253 {
            return Err(Error::InvalidName {
                what: "identity",
                name: identity.to_owned(),
            });
        }
        options.timing.validate()?;
        Ok(Self {
            api: Api::namespaced(client, namespace),
            group: group.to_owned(),
            identity: identity.to_owned(),
            lease_name,
            incarnation: format!("{:016x}", fastrand::u64(..)),
            shard: Shard::new(
                identity,
                options.timing.renew_deadline_value(),
                options.timing.retry_period_value(),
            ),
            options,
            seen: Mutex::new(HashMap::new()),
            rings: Mutex::new(HashMap::new()),
            written: Mutex::new(None),
        })
    }

    /// The gate that says which keys this replica may work on.
    pub fn shard(&self) -> Shard {
        self.shard.clone()
    }

    /// Joins the group and keeps this replica's membership until `token` is cancelled; then
    /// stops new work, waits for the keys in flight (renewing meanwhile) and leaves.
    pub async fn run(&self, token: CancellationToken) {
        let span = tracing::error_span!("shard", group = %self.group, identity = %self.identity);
        async {
            if !self.join(&token).await {
                return;
            }
            info!("joined the shard group");
            let retry = self.options.timing.retry_period_value();
            let mut leaving = false;
            loop {
                self.round().await;
                if leaving && self.shard.in_flight() == 0 {
                    break;
                }
                let mut pause = retry.mul_f64(1.0 - 0.2 * fastrand::f64());
                // A member whose Lease runs out before the next round leaves the ring as it
                // does, not up to a retry period later.
                if let Some(expiry) = self.next_expiry() {
                    pause = pause.min(expiry.saturating_duration_since(Instant::now()));
                }
                tokio::select! {
                    () = token.cancelled(), if !leaving => {
                        leaving = true;
                        self.shard.gate().leave();
                    }
                    () = self.shard.gate().drained(), if leaving => {}
                    () = tokio::time::sleep(pause) => {}
                }
            }
            self.delete_lease().await;
            info!("left the shard group");
        }
        .instrument(span)
        .await;
    }

    /// Creates this member's Lease, or takes it over from an earlier incarnation of the same
    /// identity once that one's Lease has gone unchanged for its duration. `false` when the
    /// token fired first.
    async fn join(&self, token: &CancellationToken) -> bool {
        loop {
            match self.api.get_opt(&self.lease_name).await {
                Ok(None) => match self
                    .api
                    .create(&PostParams::default(), &self.lease(None))
                    .await
                {
                    Ok(created) => {
                        *self.written.lock() = Some(created);
                        return true;
                    }
                    Err(error) => debug!(%error, "could not create the member lease"),
                },
                Ok(Some(current)) => {
                    let expired = self.observe_expired(&current);
                    if self.is_ours(&current) || expired {
                        let replaced = self
                            .api
                            .replace(
                                &self.lease_name,
                                &PostParams::default(),
                                &self.lease(Some(&current)),
                            )
                            .await;
                        match replaced {
                            Ok(written) => {
                                *self.written.lock() = Some(written);
                                return true;
                            }
                            Err(error) => debug!(%error, "could not take the member lease over"),
                        }
                    } else {
                        debug!("an earlier incarnation's lease has not expired yet");
                    }
                }
                Err(error) => warn!(%error, "could not read the member lease"),
            }
            tokio::select! {
                () = token.cancelled() => return false,
                () = tokio::time::sleep(self.options.timing.retry_period_value()) => {}
            }
        }
    }

    /// One round: read the group, set the ring over the live members, announce the claims,
    /// read the group again for the others' claims.
    async fn round(&self) {
        if let Some(group) = self.list_group().await {
            let mut live: Vec<String> = self.live_others(&group).into_keys().collect();
            live.push(self.identity.clone());
            self.shard.gate().set_target(Ring::new(live));
        }
        let claims = self.shard.gate().claims();
        let sent = Instant::now();
        let Some(current) = self.renew(&claims).await else {
            return;
        };
        self.observe(&current);
        self.shard.gate().published(claims, sent);
        if let Some(group) = self.list_group().await {
            let others = self.live_others(&group).into_iter().collect();
            self.shard.gate().observed(others);
        }
    }

    /// Writes the claims and a fresh renew time into this member's Lease.
    async fn renew(&self, claims: &[Ring]) -> Option<Lease> {
        let written = self.written.lock().take();
        let read = match written {
            Some(written) => Ok(Some(written)),
            None => self.api.get_opt(&self.lease_name).await,
        };
        let mut current = match read {
            Ok(Some(current)) => current,
            Ok(None) => {
                warn!("the member lease was deleted; announcing again");
                let mut lease = self.lease(None);
                set_claims(&mut lease, claims);
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(created) => {
                        *self.written.lock() = Some(created.clone());
                        Some(created)
                    }
                    Err(error) => {
                        warn!(%error, "could not create the member lease");
                        None
                    }
                };
            }
            Err(error) => {
                warn!(%error, "could not read the member lease");
                return None;
            }
        };
        if !self.is_ours(&current) {
            warn!("another incarnation of this identity holds the member lease");
            return None;
        }
        let spec = current.spec.get_or_insert_with(LeaseSpec::default);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = Some(self.lease_seconds());
        set_claims(&mut current, claims);
        match self
            .api
            .replace(&self.lease_name, &PostParams::default(), &current)
            .await
        {
            Ok(written) => {
                *self.written.lock() = Some(written.clone());
                Some(written)
            }
            Err(error) => {
                warn!(%error, "could not renew the member lease");
                None
            }
        }
    }

    async fn list_group(&self) -> Option<Vec<Lease>> {
        let selector = format!("{GROUP_LABEL}={}", self.group);
        match self
            .api
            .list(&ListParams::default().labels(&selector))
            .await
        {
            Ok(list) => Some(list.items),
            Err(error) => {
                warn!(%error, "could not read the shard group");
                None
            }
        }
    }

    /// The other members whose Leases changed within their duration, with their claims.
    fn live_others(&self, group: &[Lease]) -> BTreeMap<String, Claims> {
        let mut live = BTreeMap::new();
        for lease in group {
            if lease.metadata.name.as_deref() == Some(self.lease_name.as_str()) {
                continue;
            }
            if self.observe_expired(lease) {
                continue;
            }
            let Some(member) = lease
                .spec
                .as_ref()
                .and_then(|spec| spec.holder_identity.clone())
                .filter(|member| is_member_name(member))
            else {
                continue;
            };
            let claims = self.parse_claims(lease);
            live.insert(member, claims);
        }
        let names: Vec<&str> = group
            .iter()
            .filter_map(|lease| lease.metadata.name.as_deref())
            .collect();
        self.seen
            .lock()
            .retain(|name, _| names.contains(&name.as_str()));
        live
    }

    /// Records `lease` and says whether it has gone unchanged, on this replica's clock, for
    /// the duration it states.
    fn observe_expired(&self, lease: &Lease) -> bool {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let seconds = lease
            .spec
            .as_ref()
            .and_then(|spec| spec.lease_duration_seconds)
            .unwrap_or(0)
            .max(0);
        let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
        let mut seen = self.seen.lock();
        let entry = seen.entry(name).or_insert_with(|| Seen {
            resource_version: version.clone(),
            at: Instant::now(),
            duration,
        });
        if entry.resource_version != version {
            entry.resource_version = version;
            entry.at = Instant::now();
        }
        entry.duration = duration;
        entry.at.elapsed() >= duration
    }

    /// The next moment a Lease seen unchanged runs out, unless it changes first; `None` when
    /// every Lease seen has run out.
    fn next_expiry(&self) -> Option<Instant> {
        let now = Instant::now();
        self.seen
            .lock()
            .values()
            .map(|seen| seen.at + seen.duration)
            .filter(|expiry| *expiry > now)
            .min()
    }

    fn observe(&self, lease: &Lease) {
        let _ = self.observe_expired(lease);
    }

    fn parse_claims(&self, lease: &Lease) -> Claims {
        let Some(text) = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(CLAIMS_ANNOTATION))
        else {
            return Claims::Rings(Vec::new());
        };
        let mut cache = self.rings.lock();
        let mut rings = Vec::new();
        for part in text.split(';').filter(|part| !part.is_empty()) {
            if let Some(ring) = cache.get(part) {
                rings.push(ring.clone());
                continue;
            }
            match Ring::parse(part) {
                Ok(ring) => {
                    cache.insert(part.to_owned(), ring.clone());
                    rings.push(ring);
                }
                Err(error) => {
                    warn!(lease = ?lease.metadata.name, %error, "unreadable claims; treating them as claiming every key");
                    return Claims::Everything;
                }
            }
        }
        // A handful of rings per member at most; forget those nobody announces any more.
        if cache.len() > 64 {
            cache.clear();
        }
        Claims::Rings(rings)
    }

    fn lease_seconds(&self) -> i32 {
        self.options.timing.lease_seconds()
    }

    /// This member's Lease, announcing nothing yet; over `current` when taking it over.
    fn lease(&self, current: Option<&Lease>) -> Lease {
        let now = MicroTime(Timestamp::now());
        let mut metadata = current
            .map(|lease| lease.metadata.clone())
            .unwrap_or_else(|| ObjectMeta {
                name: Some(self.lease_name.clone()),
                ..ObjectMeta::default()
            });
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(GROUP_LABEL.to_owned(), self.group.clone());
        let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(INCARNATION_ANNOTATION.to_owned(), self.incarnation.clone());
        annotations.insert(CLAIMS_ANNOTATION.to_owned(), String::new());
        Lease {
            metadata,
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.lease_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Whether `lease` was written by this incarnation of the identity.
    fn is_ours(&self, lease: &Lease) -> bool {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(INCARNATION_ANNOTATION))
            == Some(&self.incarnation)
    }

    /// Deletes this member's Lease, if it is still this incarnation's.
    async fn delete_lease(&self) {
        let Ok(Some(current)) = self.api.get_opt(&self.lease_name).await else {
            return;
        };
        if !self.is_ours(&current) {
            return;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: current.metadata.resource_version.clone(),
                uid: current.metadata.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        if let Err(error) = self.api.delete(&self.lease_name, &params).await {
            warn!(%error, "could not delete the member lease; the others wait for it to expire");
        }
    }
}

fn set_claims(lease: &mut Lease, claims: &[Ring]) {
    let text = claims
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(";");
    lease
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(CLAIMS_ANNOTATION.to_owned(), text);
}

impl fmt::Debug for ShardMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardMember")
            .field("group", &self.group)
            .field("identity", &self.identity)
            .field("options", &self.options)
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}
