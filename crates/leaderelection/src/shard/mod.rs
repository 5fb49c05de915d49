//! Sharding: replicas of a controller split the keys of the objects they control between
//! them, each key worked on by one live replica at a time.
//!
//! - [`ShardMember`] announces a replica in its own Lease (labelled
//!   `kinformer.dev/shard-group=<group>`), renews it, watches the group's Leases and keeps the
//!   [`Ring`] over the live members.
//! - [`Shard`] is the gate in front of the work: [`Shard::owns`] to filter what is queued,
//!   [`Shard::try_start`] before working on a key, its [`ShardGuard`] while working, and
//!   [`Shard::changes`] to queue again the keys that moved to this replica.
//! - [`ShardedQueue`] puts the gate in front of a [`RateLimitingQueue`]: the usual way to
//!   use it.
//! - A key is placed on the ring by its text, or, as an [`ObjectKey`], by its object's hash
//!   in kube-apiserver's sharded list and watch; [`Shard::hash_ranges`] are the ranges of that
//!   hash space a replica caches. A replica whose informer follows its ranges and whose queue
//!   holds `ObjectKey`s caches, once hand-offs settle, exactly the objects of the keys it
//!   owns.
//!
//! # The hand-off
//!
//! When members join or leave, each replica computes the new ring on its own, so for a
//! moment two replicas can think they own a key. What keeps them apart is what they
//! announce: each member's Lease lists the rings it acts on, and a replica starts a key only
//! when it owns the key on its current ring, has announced that ring, has since read every
//! other live member's announcement, and none gives the key to that member. A replica stops
//! announcing an old ring only once no key that ring gave it is still in flight. The API
//! server orders the writes and reads (a list is a quorum read), so of two replicas that
//! announce a key, the second to announce reads the first's announcement and waits: the new
//! owner starts a key only after the old owner has dropped it, or after the old owner's
//! Lease has gone unchanged for its duration (it crashed).
//!
//! # Guarantees and limits
//!
//! - Two live replicas never work on the same key at once, under the assumptions leader
//!   election makes: a replica that cannot renew stops starting keys after the renew
//!   deadline, others take its keys over after the lease duration on their own clocks, so
//!   work in flight at the deadline must finish within the difference (a process that
//!   stalls longer, or clocks whose rates differ that much, break the guarantee).
//! - Work is owned by key: by its text (`namespace/name`) for a plain key, by its object's
//!   hash for an [`ObjectKey`]. The cache can be split too: [`Shard::hash_ranges`] are the
//!   ranges of the server's hash space (the FNV-1a hash of an object's UID or namespace) the
//!   ring gives this replica, plus those of a ring it still works under, what an informer of
//!   a `kinformer_store::Shard` over them lists and watches; replicas then cache disjoint
//!   parts of a collection, and own the `ObjectKey`s of what they cache (the umbrella crate's
//!   `replica_set` example). Such a replica starts a key once no other live replica may work
//!   on it, which may be before its informer has listed the key's new range: keys its own
//!   informer's events queue are in its cache, and the keys to queue again on
//!   [`Shard::changes`] are best read from the cache once the informer holds its shard
//!   (`wait_for_shard`), as the example does.
//! - A key waits, after a membership change, for up to a round (the retry period) per step
//!   of the hand-off; a crashed replica's keys wait for its lease duration.
//! - A key moving to a replica arrives through [`Shard::changes`]: the consumer adds the
//!   keys it owns again (from the informer's cache) to its [`ShardedQueue`].
//!
//! [`RateLimitingQueue`]: kinformer_workqueue::RateLimitingQueue

mod gate;
mod member;
mod place;
mod queue;
mod ring;

pub use gate::{Shard, ShardGuard};
pub use member::{ShardMember, ShardOptions};
pub use place::{ObjectKey, Placed};
pub use queue::ShardedQueue;
pub use ring::Ring;

/// The label that names a member Lease's group.
pub(crate) const GROUP_LABEL: &str = "kinformer.dev/shard-group";
/// The annotation in which a member announces the rings it acts on (`;`-separated).
pub(crate) const CLAIMS_ANNOTATION: &str = "kinformer.dev/shard-claims";
/// The annotation that tells one run of an identity from the next.
pub(crate) const INCARNATION_ANNOTATION: &str = "kinformer.dev/shard-incarnation";

/// Whether `name` can name a member: lowercase letters, digits, `-` and `.`, starting and
/// ending with a letter or digit (a DNS subdomain, so it fits a Lease name and a label).
pub(crate) fn is_member_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |byte: Option<&u8>| {
        byte.is_some_and(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit())
    };
    edge(bytes.first())
        && edge(bytes.last())
        && bytes.iter().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || *byte == b'-' || *byte == b'.'
        })
}
