//! [`Shard`]: which keys this replica may start now, and which it is working on.

use std::{collections::HashMap, fmt, ops::Range, sync::Arc, time::Duration};

use parking_lot::Mutex;
use tokio::{
    sync::{Notify, watch},
    time::Instant,
};

use super::{
    Ring,
    place::{Place, Placed, ring_owner},
};

/// What another live member claims: the rings it acts on, or everything when its claims did
/// not parse (so a member this version cannot read is never trampled on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claims {
    Rings(Vec<Ring>),
    Everything,
}

impl Claims {
    fn covers(&self, member: &str, place: &Place) -> bool {
        match self {
            Self::Rings(rings) => rings.iter().any(|ring| place.owned_by(ring, member)),
            Self::Everything => true,
        }
    }
}

/// The state the gate decides on. Invariant: every key in `in_flight` is owned by this
/// member in some ring of `claims`, and `claims` is what was last published, or a superset of
/// it about to be published.
struct State {
    /// The ring over the live members as last computed; keys start only under it.
    target: Option<Ring>,
    /// The rings this member's lease announces (the target last), each kept while a key it
    /// gave this member is still in flight.
    claims: Vec<Ring>,
    /// The rings the last successful write announced.
    published: Vec<Ring>,
    /// The other live members' claims, read after `published` was written; keys start only
    /// when `confirmed` is the target, i.e. when this snapshot was read after the target was
    /// announced.
    others: Vec<(String, Claims)>,
    confirmed: Option<Ring>,
    /// When the last successful renewal was sent; no key starts once the renew deadline has
    /// passed since.
    renewed_at: Option<Instant>,
    leaving: bool,
    in_flight: HashMap<Place, usize>,
}

pub(crate) struct Gate {
    identity: String,
    /// A replica that runs alone: every key is its own, nothing is announced.
    alone: bool,
    renew_deadline: Duration,
    retry_period: Duration,
    state: Mutex<State>,
    /// Bumped whenever more keys may have become startable: a consumer adds its owned keys
    /// again.
    changes: watch::Sender<u64>,
    drained: Notify,
}

/// This replica's view of its shard: which keys it owns, and a guard for each key it is
/// working on. Cheap to clone; every clone shares the same state.
///
/// A key may start (see [`try_start`](Self::try_start)) only when this replica owns it on
/// the ring over the live members, has announced that ring in its Lease, has since read that
/// no other live member announces a ring that gives the key to that member, and has renewed
/// its Lease within the renew deadline. A replica drops a ring from its announcement only
/// once no key that ring gave it is in flight, so two live replicas never hold the same key.
#[derive(Clone)]
pub struct Shard {
    gate: Arc<Gate>,
}

/// A key this replica is working on; dropping it ends the work. While it lives, no other live
/// replica starts the key.
#[must_use = "the key counts as in flight until the guard is dropped"]
pub struct ShardGuard {
    gate: Arc<Gate>,
    place: Place,
}

impl Shard {
    pub(crate) fn new(identity: &str, renew_deadline: Duration, retry_period: Duration) -> Self {
        Self::build(identity, false, renew_deadline, retry_period)
    }

    /// The shard of a replica that runs alone: it owns and may start every key, and keeps no
    /// Lease. Code written against a [`Shard`] (a [`ShardedQueue`](super::ShardedQueue), say)
    /// then runs with sharding on or off unchanged.
    ///
    /// ```
    /// use kinformer_leaderelection::shard::Shard;
    ///
    /// let shard = Shard::alone();
    /// assert!(shard.owns("default/web"));
    /// let guard = shard.try_start("default/web").expect("every key is this replica's");
    /// drop(guard);
    /// ```
    pub fn alone() -> Self {
        Self::build("", true, Duration::MAX, Duration::from_secs(1))
    }

    fn build(
        identity: &str,
        alone: bool,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        Self {
            gate: Arc::new(Gate {
                identity: identity.to_owned(),
                alone,
                renew_deadline,
                retry_period,
                state: Mutex::new(State {
                    target: None,
                    claims: Vec::new(),
                    published: Vec::new(),
                    others: Vec::new(),
                    confirmed: None,
                    renewed_at: None,
                    leaving: false,
                    in_flight: HashMap::new(),
                }),
                changes: watch::Sender::new(0),
                drained: Notify::new(),
            }),
        }
    }

    /// Whether this replica owns `key` on the ring over the live members as it last saw them:
    /// a key by its text, an [`ObjectKey`](super::ObjectKey) by its object's hash. An owned
    /// key may still wait to start while its previous owner finishes it; use this to filter
    /// what to queue, and [`try_start`](Self::try_start) before working on a key.
    pub fn owns(&self, key: &(impl Placed + ?Sized)) -> bool {
        let state = self.gate.state.lock();
        !state.leaving
            && (self.gate.alone
                || state.target.as_ref().is_some_and(|ring| {
                    ring_owner(ring, key.as_ref(), key.hash()) == Some(self.gate.identity.as_str())
                }))
    }

    /// Marks `key` in flight if this replica may work on it now; `None` if another replica
    /// owns it, its previous owner may still be working on it, or this replica's Lease is not
    /// fresh. The key stays in flight until the guard is dropped.
    pub fn try_start(&self, key: &(impl Placed + ?Sized)) -> Option<ShardGuard> {
        let place = Place::of(key);
        let mut state = self.gate.state.lock();
        if !self.gate.startable(&state, &place) {
            return None;
        }
        *state.in_flight.entry(place.clone()).or_default() += 1;
        Some(ShardGuard {
            gate: Arc::clone(&self.gate),
            place,
        })
    }

    /// A receiver that changes whenever keys may have moved to this replica: add every key
    /// this replica owns (from the informer's cache) to the work queue again when it does,
    /// so keys a departed replica held are worked on.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.gate.changes.subscribe()
    }

    /// How many keys are in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.gate.state.lock().in_flight.len()
    }

    /// The ring over the live members this replica acts on, once it has one: compare it with
    /// [`Ring::new`] over the identities expected to be live to know that they see each other.
    pub fn ring(&self) -> Option<Ring> {
        self.gate.state.lock().target.clone()
    }

    /// The ranges of the server's hash space this replica must cache: those it owns on its
    /// ring ([`Ring::hash_ranges`]), and those of every older ring it still announces because
    /// an [`ObjectKey`](super::ObjectKey) that ring gave it is in flight, so a worker never
    /// finds the object of its key gone from the cache because the key moved. These are the
    /// ranges of the `kinformer_store::Shard` its informers follow: once hand-offs settle,
    /// the replicas of a group cache disjoint parts of a collection that together make all of
    /// it. [`changes`](Self::changes) fires when they may have changed. `None` until it has a
    /// ring; the whole space for a replica that runs alone; empty once it has left and its
    /// keys are done, or when the ring left it no slice.
    ///
    /// ```
    /// use kinformer_leaderelection::shard::Shard;
    ///
    /// assert_eq!(Shard::alone().hash_ranges(), Some(std::iter::once(0..1 << 64).collect()));
    /// ```
    pub fn hash_ranges(&self) -> Option<Vec<Range<u128>>> {
        if self.gate.alone {
            return Some(std::iter::once(0..1 << 64).collect());
        }
        let state = self.gate.state.lock();
        state.target.as_ref()?;
        // What the claims are once pruned, left for the member loop to prune: it tells the
        // consumer when they shrink.
        let identity = &self.gate.identity;
        Some(Ring::union_of_hash_ranges(
            Gate::pruned_claims(identity, &state)
                .iter()
                .map(|ring| ring.hash_ranges(identity)),
        ))
    }

    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }
}

impl Gate {
    pub(crate) fn retry_period(&self) -> Duration {
        self.retry_period
    }

    fn startable(&self, state: &State, place: &Place) -> bool {
        if self.alone {
            return !state.leaving;
        }
        let Some(target) = state.target.as_ref() else {
            return false;
        };
        !state.leaving
            && state.confirmed.as_ref() == Some(target)
            && place.owned_by(target, &self.identity)
            && state
                .renewed_at
                .is_some_and(|renewed| renewed.elapsed() < self.renew_deadline)
            && !state
                .others
                .iter()
                .any(|(member, claims)| claims.covers(member, place))
    }

    /// Sets the ring over the live members. Until a snapshot read after announcing it
    /// confirms it, no key starts; keys in flight keep their rings announced.
    pub(crate) fn set_target(&self, ring: Ring) {
        let mut state = self.state.lock();
        if state.target.as_ref() == Some(&ring) {
            return;
        }
        state.target = Some(ring);
        Self::prune_claims(&self.identity, &mut state);
    }

    /// The rings to announce now: the target, and every older ring that still covers a key
    /// in flight which the target gives elsewhere.
    pub(crate) fn claims(&self) -> Vec<Ring> {
        let mut state = self.state.lock();
        let before = state.claims.len();
        Self::prune_claims(&self.identity, &mut state);
        let claims = state.claims.clone();
        drop(state);
        if claims.len() < before {
            // An older ring's last key is done: what this replica must cache shrank.
            self.changes.send_modify(|epoch| *epoch += 1);
        }
        claims
    }

    fn prune_claims(identity: &str, state: &mut State) {
        state.claims = Self::pruned_claims(identity, state);
    }

    /// The claims to keep: every older ring that gives this member a key in flight which the
    /// target does not, then the target (none once leaving).
    fn pruned_claims(identity: &str, state: &State) -> Vec<Ring> {
        let target = state.target.as_ref().filter(|_| !state.leaving);
        let mut claims: Vec<Ring> = state
            .claims
            .iter()
            .filter(|&ring| {
                Some(ring) != target
                    && state.in_flight.keys().any(|place| {
                        place.owned_by(ring, identity)
                            && !target.is_some_and(|target| place.owned_by(target, identity))
                    })
            })
            .cloned()
            .collect();
        claims.extend(target.cloned());
        claims
    }

    /// Records that `claims` were written, in a request sent at `sent`.
    pub(crate) fn published(&self, claims: Vec<Ring>, sent: Instant) {
        let mut state = self.state.lock();
        let was_fresh = state
            .renewed_at
            .is_some_and(|renewed| renewed.elapsed() < self.renew_deadline);
        state.published = claims;
        state.renewed_at = Some(sent);
        drop(state);
        if !was_fresh {
            // Keys refused while the Lease was stale may start again.
            self.changes.send_modify(|epoch| *epoch += 1);
        }
    }

    /// Records the other live members' claims, read after the last successful write; keys
    /// the target gives this member may start unless another claims them.
    pub(crate) fn observed(&self, others: Vec<(String, Claims)>) {
        let mut state = self.state.lock();
        let confirmed = state
            .target
            .clone()
            .filter(|target| state.published.contains(target));
        if state.others == others && state.confirmed == confirmed {
            return;
        }
        state.others = others;
        state.confirmed = confirmed;
        drop(state);
        self.changes.send_modify(|epoch| *epoch += 1);
    }

    /// Stops starting keys, for good.
    pub(crate) fn leave(&self) {
        let mut state = self.state.lock();
        state.leaving = true;
        Self::prune_claims(&self.identity, &mut state);
    }

    /// Waits until no key is in flight.
    pub(crate) async fn drained(&self) {
        loop {
            let notified = self.drained.notified();
            if self.state.lock().in_flight.is_empty() {
                return;
            }
            notified.await;
        }
    }

    fn finish(&self, place: &Place) {
        let mut state = self.state.lock();
        if let Some(count) = state.in_flight.get_mut(place) {
            *count -= 1;
            if *count == 0 {
                state.in_flight.remove(place);
            }
        }
        if state.in_flight.is_empty() {
            self.drained.notify_waiters();
        }
    }
}

impl Drop for ShardGuard {
    fn drop(&mut self) {
        self.gate.finish(&self.place);
    }
}

impl fmt::Debug for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.gate.state.lock();
        f.debug_struct("Shard")
            .field("identity", &self.gate.identity)
            .field("ring", &state.target)
            .field("claims", &state.claims)
            .field("in_flight", &state.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ShardGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardGuard")
            .field("key", &self.place)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_millis(600);

    fn shard() -> Shard {
        Shard::new("me", DEADLINE, Duration::from_millis(100))
    }

    fn ring(members: &[&str]) -> Ring {
        Ring::with_virtual_nodes(members.iter().copied(), 64)
    }

    /// A key `ring` gives to `member`.
    fn key_of(ring: &Ring, member: &str) -> String {
        (0..)
            .map(|i| format!("ns/object-{i}"))
            .find(|key| ring.owner(key) == Some(member))
            .expect("every member owns some key")
    }

    /// One round of the member loop: announce the claims, then read the others'.
    fn round(shard: &Shard, target: &Ring, others: Vec<(String, Claims)>) {
        let gate = shard.gate();
        gate.set_target(target.clone());
        gate.published(gate.claims(), Instant::now());
        gate.observed(others);
    }

    #[tokio::test]
    async fn a_key_starts_only_once_its_ring_is_announced_and_the_others_read() {
        let shard = shard();
        let target = ring(&["me"]);
        let gate = shard.gate();
        gate.set_target(target);
        assert!(shard.owns("ns/a"));
        assert!(
            shard.try_start("ns/a").is_none(),
            "started before announcing"
        );
        gate.published(gate.claims(), Instant::now());
        assert!(
            shard.try_start("ns/a").is_none(),
            "started before reading the others"
        );
        gate.observed(Vec::new());
        assert!(shard.try_start("ns/a").is_some());
        // A new ring closes the gate again until it too is announced and confirmed.
        gate.set_target(ring(&["me", "other"]));
        let still_mine = key_of(&ring(&["me", "other"]), "me");
        assert!(shard.try_start(&still_mine).is_none());
    }

    #[tokio::test]
    async fn a_key_another_member_still_announces_waits_for_it_to_drop_the_claim() {
        let shard = shard();
        let both = ring(&["me", "other"]);
        let moving = key_of(&both, "me");
        // `other` still acts on the ring without `me`, which gives it every key.
        let before = vec![("other".to_owned(), Claims::Rings(vec![ring(&["other"])]))];
        round(&shard, &both, before);
        assert!(shard.owns(&moving));
        assert!(
            shard.try_start(&moving).is_none(),
            "started a key another still holds"
        );
        let mut changes = shard.changes();
        changes.borrow_and_update();
        round(
            &shard,
            &both,
            vec![("other".to_owned(), Claims::Rings(vec![both.clone()]))],
        );
        assert!(
            changes.has_changed().unwrap(),
            "the consumer is told to queue its keys again"
        );
        assert!(shard.try_start(&moving).is_some());
        // Claims that do not parse hold every key back.
        round(
            &shard,
            &both,
            vec![("other".to_owned(), Claims::Everything)],
        );
        assert!(shard.try_start(&moving).is_none());
    }

    #[tokio::test]
    async fn an_old_ring_stays_announced_while_a_key_it_gave_is_in_flight() {
        let shard = shard();
        let alone = ring(&["me"]);
        let joined = ring(&["me", "newcomer"]);
        let leaving = key_of(&joined, "newcomer");
        round(&shard, &alone, Vec::new());
        let guard = shard.try_start(&leaving).expect("alone, every key is mine");
        shard.gate().set_target(joined.clone());
        assert!(!shard.owns(&leaving));
        assert_eq!(shard.gate().claims(), vec![alone, joined.clone()]);
        drop(guard);
        assert_eq!(shard.gate().claims(), vec![joined]);
    }

    /// A hash `ring` gives to `member`: the start of one of its slices.
    fn hash_of(ring: &Ring, member: &str) -> u64 {
        let range = ring.hash_ranges(member).into_iter().next();
        u64::try_from(range.expect("every member owns a slice").start).expect("in the space")
    }

    #[tokio::test]
    async fn an_object_key_is_placed_by_its_hash_and_its_old_ranges_stay_cached_while_in_flight() {
        let shard = shard();
        let alone = ring(&["me"]);
        let joined = ring(&["me", "newcomer"]);
        // Its text is mine on the joined ring, its hash the newcomer's: the hash decides.
        let text = key_of(&joined, "me");
        let leaving = super::super::ObjectKey::new(text.as_str(), hash_of(&joined, "newcomer"));
        round(&shard, &alone, Vec::new());
        let everything: Vec<_> = std::iter::once(0..1 << 64).collect();
        assert_eq!(shard.hash_ranges().as_ref(), Some(&everything));
        let guard = shard.try_start(&leaving).expect("alone, every key is mine");
        shard.gate().set_target(joined.clone());
        assert!(shard.owns(text.as_str()) && !shard.owns(&leaving));
        assert_eq!(
            shard.hash_ranges(),
            Some(everything),
            "the ring that gave the key in flight is still cached"
        );
        let mut changes = shard.changes();
        changes.borrow_and_update();
        drop(guard);
        // Read before the member loop prunes its claims, which then still tells the consumer.
        assert_eq!(shard.hash_ranges(), Some(joined.hash_ranges("me")));
        assert_eq!(shard.gate().claims(), vec![joined.clone()]);
        assert!(
            changes.has_changed().unwrap(),
            "the consumer is told its ranges shrank"
        );

        // A key whose hash is mine waits while another still announces a ring giving it away.
        let arriving = super::super::ObjectKey::new(text.as_str(), hash_of(&joined, "me"));
        let others = |rings| vec![("newcomer".to_owned(), Claims::Rings(rings))];
        round(&shard, &joined, others(vec![ring(&["newcomer"])]));
        assert!(shard.owns(&arriving) && shard.try_start(&arriving).is_none());
        round(&shard, &joined, others(vec![joined.clone()]));
        assert!(shard.try_start(&arriving).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_starts_once_the_renew_deadline_has_passed_since_the_last_renewal() {
        let shard = shard();
        let alone = ring(&["me"]);
        round(&shard, &alone, Vec::new());
        assert!(shard.try_start("ns/a").is_some());
        tokio::time::advance(DEADLINE).await;
        assert!(
            shard.try_start("ns/a").is_none(),
            "started on a stale lease"
        );
        let mut changes = shard.changes();
        changes.borrow_and_update();
        shard
            .gate()
            .published(shard.gate().claims(), Instant::now());
        assert!(
            changes.has_changed().unwrap(),
            "keys refused meanwhile are queued again"
        );
        assert!(shard.try_start("ns/a").is_some());
    }

    #[tokio::test]
    async fn a_leaving_member_starts_nothing_and_announces_only_what_is_in_flight() {
        let shard = shard();
        let alone = ring(&["me"]);
        round(&shard, &alone, Vec::new());
        let guard = shard.try_start("ns/a").expect("mine");
        shard.gate().leave();
        assert!(!shard.owns("ns/b"));
        assert!(shard.try_start("ns/b").is_none());
        assert_eq!(shard.gate().claims(), vec![alone]);
        drop(guard);
        assert!(shard.gate().claims().is_empty());
        tokio::time::timeout(Duration::from_secs(5), shard.gate().drained())
            .await
            .expect("drained once the last guard is dropped");
    }
}
