//! [`Ring`]: a consistent-hash ring over a shard group's members.

use std::{fmt, ops::Range, sync::Arc};

/// How many points each member puts on the ring. With 512 the share a member owns is within
/// about 5% of an equal share (one standard deviation), and a ring of 100 members is 51,200
/// points: 800 KiB, built once per membership change.
pub(crate) const DEFAULT_VIRTUAL_NODES: u32 = 512;

/// How many equal slices of the server's 64-bit hash space [`Ring::hash_ranges`] deals out:
/// few enough that a member's ranges make a short `shardSelector` (about a third of them,
/// in a dozen or so runs, for three members), enough that bounded loads keep every share
/// within one slice (1/64) of an equal one. Every member must use the same number.
const HASH_SLICES: u32 = 64;

/// The width of one slice: 2^64 / [`HASH_SLICES`].
const SLICE_WIDTH: u128 = (1 << 64) / HASH_SLICES as u128;

/// A consistent-hash ring: each member owns the keys whose hash falls after one of its
/// points, up to the next point of any member. Adding or removing a member moves only the
/// keys between its points and their neighbours: about one member's share.
///
/// The hash is fixed (FNV-1a with a 64-bit finalizer), not Rust's randomly seeded one, so
/// every replica, on every version of this crate, computes the same owner for a key from
/// the same members: [`Ring::new`] over a group's live identities says which member owns a
/// key, as its members compute it. A ring displays as `512:replica-a,replica-b` (the points
/// per member and the members, sorted), which is how members publish the rings they act on.
///
/// ```
/// use kinformer_leaderelection::shard::Ring;
///
/// let ring = Ring::new(["replica-b", "replica-a", "replica-c"]);
/// let owner = ring.owner("default/web").expect("a ring with members owns every key");
/// assert!(["replica-a", "replica-b", "replica-c"].contains(&owner));
/// assert_eq!(ring.to_string(), "512:replica-a,replica-b,replica-c");
/// assert_eq!(ring, Ring::new(["replica-a", "replica-c", "replica-b"]));
/// ```
#[derive(Clone)]
pub struct Ring {
    members: Arc<[String]>,
    virtual_nodes: u32,
    /// `(point, index into members)`, sorted by point.
    points: Arc<[(u64, u32)]>,
    /// The member (index into `members`) that owns each slice of the server's hash space;
    /// empty without members.
    slices: Arc<[u32]>,
}

impl Ring {
    /// The ring over `members` (duplicates count once), as a shard group's members build it
    /// over their live identities.
    pub fn new<I, S>(members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_virtual_nodes(members, DEFAULT_VIRTUAL_NODES)
    }

    /// The ring over `members`, with `virtual_nodes` points each (at least one).
    pub(crate) fn with_virtual_nodes<I, S>(members: I, virtual_nodes: u32) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort_unstable();
        members.dedup();
        let virtual_nodes = virtual_nodes.max(1);
        let mut points = Vec::with_capacity(members.len() * virtual_nodes as usize);
        for (index, member) in (0_u32..).zip(&members) {
            for node in 0..virtual_nodes {
                points.push((point_hash(member, node), index));
            }
        }
        // Ties (vanishingly rare) go to the member that sorts first, on every replica alike.
        points.sort_unstable();
        let slices = deal_slices(&points, members.len());
        Self {
            members: members.into(),
            virtual_nodes,
            points: points.into(),
            slices: slices.into(),
        }
    }

    /// The member that owns `key`; `None` only for a ring without members.
    pub fn owner(&self, key: &str) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let hash = key_hash(key);
        let at = self.points.partition_point(|&(point, _)| point < hash);
        let (_, member) = self.points[at % self.points.len()];
        Some(&self.members[member as usize])
    }

    /// The member that owns `hash` in the server's hash space: the 64-bit FNV-1a hash of an
    /// object's UID or namespace, by which kube-apiserver shards a list or watch
    /// (`kinformer_store::Shard`). `None` only for a ring without members.
    pub fn hash_owner(&self, hash: u64) -> Option<&str> {
        let slice = usize::try_from(u128::from(hash) / SLICE_WIDTH).ok()?;
        let member = *self.slices.get(slice)?;
        Some(&self.members[member as usize])
    }

    /// The ranges of the server's hash space that `member` owns
    /// ([`hash_owner`](Self::hash_owner)), merged and in order, start inclusive and end
    /// exclusive: the ranges of the `kinformer_store::Shard` whose objects that member caches. The space is cut into 64
    /// equal slices, each owned whole by one member: each slice goes to the first member met
    /// walking the ring from the slice's own point that owns fewer than its even share
    /// (64 / members, rounded up), so no member holds more than one slice above an equal
    /// share, and a member joining or leaving moves mostly the slices it gains or loses.
    /// Every member's ranges together cover the space once. Empty for a member the ring does
    /// not have, and possibly for one of a ring of more than 32 members: there are only 64
    /// slices.
    ///
    /// ```
    /// use kinformer_leaderelection::shard::Ring;
    ///
    /// let ring = Ring::new(["replica-a", "replica-b", "replica-c"]);
    /// let mine = ring.hash_ranges("replica-b");
    /// let held: u128 = mine.iter().map(|range| range.end - range.start).sum();
    /// assert!(held <= (1_u128 << 64) * 22 / 64); // at most 22 of the 64 slices
    /// assert!(mine.iter().all(|range| ring.hash_owner(range.start as u64) == Some("replica-b")));
    /// ```
    pub fn hash_ranges(&self, member: &str) -> Vec<Range<u128>> {
        let Ok(index) = self
            .members
            .binary_search_by(|probe| probe.as_str().cmp(member))
        else {
            return Vec::new();
        };
        let mut ranges: Vec<Range<u128>> = Vec::new();
        for (slice, &owner) in (0_u128..).zip(self.slices.iter()) {
            if owner as usize != index {
                continue;
            }
            let (start, end) = (slice * SLICE_WIDTH, (slice + 1) * SLICE_WIDTH);
            match ranges.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => ranges.push(start..end),
            }
        }
        ranges
    }
}

impl Ring {
    /// The union of several members' or rings' `hash_ranges`, merged and in order.
    pub(crate) fn union_of_hash_ranges(
        all: impl IntoIterator<Item = Vec<Range<u128>>>,
    ) -> Vec<Range<u128>> {
        let mut ranges: Vec<Range<u128>> = all.into_iter().flatten().collect();
        ranges.sort_unstable_by_key(|range| range.start);
        let mut merged: Vec<Range<u128>> = Vec::with_capacity(ranges.len());
        for range in ranges {
            match merged.last_mut() {
                Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                _ => merged.push(range),
            }
        }
        merged
    }
}

/// Which member (index) owns each slice of the hash space: consistent hashing with bounded
/// loads. Slice by slice in order, the ring is walked from the slice's point to the first
/// member below its cap (the slices over the members, rounded up), which takes the slice.
/// The caps add up to at least the slices, so every slice finds one.
fn deal_slices(points: &[(u64, u32)], members: usize) -> Vec<u32> {
    if members == 0 || points.is_empty() {
        return Vec::new();
    }
    let cap = HASH_SLICES.div_ceil(u32::try_from(members).unwrap_or(u32::MAX));
    let mut loads = vec![0_u32; members];
    (0..HASH_SLICES)
        .map(|slice| {
            let start = slice_point(slice);
            let at = points.partition_point(|&(point, _)| point < start);
            let owner = (0..points.len())
                .map(|step| points[(at + step) % points.len()].1)
                .find(|&member| loads[member as usize] < cap)
                .unwrap_or(points[at % points.len()].1);
            loads[owner as usize] += 1;
            owner
        })
        .collect()
}

impl PartialEq for Ring {
    fn eq(&self, other: &Self) -> bool {
        self.virtual_nodes == other.virtual_nodes && self.members == other.members
    }
}

impl Eq for Ring {}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ring({self})")
    }
}

impl fmt::Display for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.virtual_nodes, self.members.join(","))
    }
}

/// A ring's text form did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a ring (`<points per member>:<member>,<member>...`): {text:?}")]
pub(crate) struct ParseRingError {
    text: String,
}

impl Ring {
    /// The ring `text` (its [`Display`](fmt::Display) form) describes.
    pub(crate) fn parse(text: &str) -> Result<Self, ParseRingError> {
        let error = || ParseRingError {
            text: text.to_owned(),
        };
        let (nodes, members) = text.split_once(':').ok_or_else(error)?;
        let virtual_nodes: u32 = nodes.parse().map_err(|_| error())?;
        if virtual_nodes == 0 {
            return Err(error());
        }
        let members: Vec<&str> = if members.is_empty() {
            Vec::new()
        } else {
            members.split(',').collect()
        };
        if members.iter().any(|member| !super::is_member_name(member)) {
            return Err(error());
        }
        Ok(Self::with_virtual_nodes(members, virtual_nodes))
    }
}

/// FNV-1a, then the 64-bit finalizer of MurmurHash3 so that near-identical inputs (the
/// points of one member differ in their last bytes) spread over the whole ring.
fn hash_bytes(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in *part {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

fn key_hash(key: &str) -> u64 {
    hash_bytes(&[key.as_bytes()])
}

/// Where the walk for a slice of the hash space starts.
fn slice_point(slice: u32) -> u64 {
    hash_bytes(&[b"slice#", &slice.to_le_bytes()])
}

fn point_hash(member: &str, node: u32) -> u64 {
    hash_bytes(&[member.as_bytes(), b"#", &node.to_le_bytes()])
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn keys(count: usize) -> Vec<String> {
        (0..count)
            .map(|i| format!("namespace-{}/object-{i}", i % 7))
            .collect()
    }

    fn shares(ring: &Ring, keys: &[String]) -> HashMap<String, usize> {
        let mut shares = HashMap::new();
        for key in keys {
            *shares
                .entry(ring.owner(key).unwrap().to_owned())
                .or_default() += 1;
        }
        shares
    }

    #[test]
    fn every_member_owns_close_to_an_equal_share() {
        let keys = keys(30_000);
        for size in [2, 3, 5, 10] {
            let members: Vec<String> = (0..size).map(|i| format!("replica-{i}")).collect();
            let ring = Ring::new(members.clone());
            let shares = shares(&ring, &keys);
            let equal = keys.len() as f64 / f64::from(size);
            for member in &members {
                let share = shares.get(member).copied().unwrap_or(0) as f64;
                assert!(
                    (share / equal - 1.0).abs() < 0.15,
                    "{member} owns {share} of {} keys among {size}: {shares:?}",
                    keys.len()
                );
            }
        }
    }

    #[test]
    fn a_join_or_a_leave_moves_only_the_changed_member_keys() {
        let keys = keys(20_000);
        let before = Ring::new(["a", "b", "c"]);
        let joined = Ring::new(["a", "b", "c", "d"]);
        let left = Ring::new(["a", "c"]);
        for key in &keys {
            let owner = before.owner(key).unwrap();
            let after_join = joined.owner(key).unwrap();
            assert!(
                after_join == owner || after_join == "d",
                "{key} moved {owner} -> {after_join}"
            );
            if owner != "b" {
                assert_eq!(
                    left.owner(key),
                    Some(owner),
                    "{key} moved though its owner stayed"
                );
            }
        }
        let moved = keys
            .iter()
            .filter(|key| joined.owner(key) == Some("d"))
            .count();
        assert!(
            (3_500..6_500).contains(&moved),
            "{moved} of 20000 keys moved to a fourth member"
        );
    }

    #[test]
    fn the_owner_is_the_same_however_the_members_are_listed() {
        let one = Ring::with_virtual_nodes(["c", "a", "b", "a"], 64);
        let other = Ring::with_virtual_nodes(["b", "c", "a"], 64);
        assert_eq!(one, other);
        for key in keys(1_000) {
            assert_eq!(one.owner(&key), other.owner(&key));
        }
        // The hash is fixed: these owners are what every replica and every version computes.
        let fixed = Ring::new(["replica-a", "replica-b", "replica-c"]);
        let owners: Vec<&str> = ["default/web", "kube-system/dns", "a/b"]
            .iter()
            .map(|key| fixed.owner(key).unwrap())
            .collect();
        assert_eq!(owners, FIXED_OWNERS);
    }

    #[test]
    fn every_member_owns_at_most_one_slice_over_an_equal_share_of_the_hash_space() {
        for size in [1, 2, 3, 4, 5, 7, 10, 32, 64] {
            let members: Vec<String> = (0..size).map(|i| format!("replica-{i}")).collect();
            let ring = Ring::new(members.clone());
            let mut covered: Vec<Range<u128>> = Vec::new();
            for member in &members {
                let ranges = ring.hash_ranges(member);
                assert!(!ranges.is_empty(), "{member} of {size} holds no slice");
                let held: u128 = ranges.iter().map(|range| range.end - range.start).sum();
                let cap = u128::from(HASH_SLICES.div_ceil(size)) * SLICE_WIDTH;
                assert!(held <= cap, "{member} of {size} holds {held:#x}");
                for range in &ranges {
                    for probe in [range.start, range.end - 1, (range.start + range.end) / 2] {
                        let hash = u64::try_from(probe).expect("in the hash space");
                        assert_eq!(ring.hash_owner(hash), Some(member.as_str()));
                    }
                }
                // Merged: no two ranges of one member touch.
                assert!(ranges.windows(2).all(|pair| pair[0].end < pair[1].start));
                covered.extend(ranges);
            }
            covered.sort_by_key(|range| range.start);
            assert_eq!(covered.first().map(|range| range.start), Some(0));
            assert_eq!(covered.last().map(|range| range.end), Some(1 << 64));
            assert!(
                covered.windows(2).all(|pair| pair[0].end == pair[1].start),
                "the ranges of {size} members cover the space once: {covered:x?}"
            );
        }
        let ring = Ring::new(["a"]);
        assert_eq!(ring.hash_ranges("b"), Vec::new(), "not a member");
        let none = Ring::new(Vec::<String>::new());
        assert_eq!(
            (none.hash_owner(7), none.hash_ranges("a")),
            (None, Vec::new())
        );
    }

    #[test]
    fn a_join_or_a_leave_moves_few_slices_besides_the_changed_member_ones() {
        fn slices(ring: &Ring) -> Vec<&str> {
            (0..HASH_SLICES)
                .map(|slice| {
                    let start = u128::from(slice) * SLICE_WIDTH;
                    ring.hash_owner(u64::try_from(start).expect("in range"))
                        .unwrap()
                })
                .collect()
        }
        let names =
            |count: usize| -> Vec<String> { (0..count).map(|i| format!("replica-{i}")).collect() };
        for size in [2, 3, 5, 8] {
            let before = Ring::new(names(size));
            let joined = Ring::new(names(size + 1));
            let newcomer = format!("replica-{size}");
            let moved_between_others = slices(&before)
                .iter()
                .zip(slices(&joined))
                .filter(|&(was, now)| *was != now && now != newcomer)
                .count();
            // The newcomer takes about an equal share; the bounded loads make a few more
            // slices change hands among the others, never most of them.
            assert!(
                moved_between_others <= 64 / (size + 1),
                "{moved_between_others} slices moved between the {size} others on a join"
            );
            let left = Ring::new(
                names(size + 1)
                    .into_iter()
                    .filter(|name| *name != "replica-0"),
            );
            let moved_between_stayers = slices(&joined)
                .iter()
                .zip(slices(&left))
                .filter(|&(was, now)| *was != "replica-0" && *was != now)
                .count();
            assert!(
                moved_between_stayers <= 64 / (size + 1),
                "{moved_between_stayers} slices moved between stayers on a leave of {}",
                size + 1
            );
        }
    }

    /// What [`Ring::owner`] answers in `the_owner_is_the_same_however_the_members_are_listed`.
    const FIXED_OWNERS: [&str; 3] = ["replica-c", "replica-b", "replica-b"];

    #[test]
    fn text_form_round_trips_and_bad_text_is_refused() {
        let ring = Ring::with_virtual_nodes(["x", "y"], 7);
        assert_eq!(Ring::parse(&ring.to_string()), Ok(ring));
        assert_eq!(
            Ring::parse("3:").map(|ring| ring.members.is_empty()),
            Ok(true)
        );
        for bad in ["", "x,y", "0:x", "-1:x", "3:x,,y", "3:X", "3:x;y"] {
            assert!(Ring::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(
            Ring::with_virtual_nodes(Vec::<String>::new(), 5).owner("k"),
            None
        );
    }
}
