//! The selector's grammar and checks, from apimachinery's own parser cases
//! (`k8s.io/apiserver/pkg/sharding/parser_test.go`), the hash from FNV's published vectors,
//! and the split of the hash space against a model.

#![allow(
    clippy::single_range_in_vec_init,
    reason = "a shard is a list of ranges, often of one"
)]

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

struct Meta {
    uid: Option<String>,
    namespace: Option<String>,
}

impl Object for Meta {
    fn name(&self) -> Option<&str> {
        Some("x")
    }
    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
    fn resource_version(&self) -> Option<&str> {
        None
    }
    fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        None
    }
}

fn with_uid(uid: &str) -> Meta {
    Meta {
        uid: Some(uid.to_owned()),
        namespace: None,
    }
}

#[test]
fn the_hash_is_fnv1a_64() {
    assert_eq!(fnv1a_64(""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a_64("a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a_64("foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn selectors_kube_apiserver_accepts_parse_to_their_ranges() {
    let cases: [(&str, ShardKey, &[Range<u128>]); 9] = [
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            ShardKey::Uid,
            &[0..1 << 63],
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
            ShardKey::Uid,
            &[0..1 << 64],
        ),
        (
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
            ShardKey::Namespace,
            &[0xaa..0xff],
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || \
             shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            ShardKey::Uid,
            &[0..1 << 63, 1 << 63..1 << 64],
        ),
        (
            "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')",
            ShardKey::Uid,
            &[0..1 << 63],
        ),
        (
            "  (shardRange( object.metadata.uid ,  \"0x0000000000000000\" ,  '0x8000000000000000' ))  ",
            ShardKey::Uid,
            &[0..1 << 63],
        ),
        // CEL's comments, raw and triple-quoted strings and escapes, as kube-apiserver reads them.
        (
            "shardRange(object . metadata . uid, r'0x0000000000000000', // from\n \"\"\"0x8000000000000000\"\"\")",
            ShardKey::Uid,
            &[0..1 << 63],
        ),
        (
            "shardRange(object.metadata.uid, '\\x30x0000000000000000', '0\\u00788000000000000000')",
            ShardKey::Uid,
            &[0..1 << 63],
        ),
        (
            "shardRange(object.metadata.uid, '\\060x0000000000000000', R\"0x8000000000000000\")",
            ShardKey::Uid,
            &[0..1 << 63],
        ),
    ];
    for (input, key, ranges) in cases {
        let shard: Shard = input
            .parse()
            .unwrap_or_else(|error| panic!("{input}: {error}"));
        assert_eq!(shard.key(), key, "{input}");
        assert_eq!(shard.hash_ranges(), ranges, "{input}");
    }
}

#[test]
fn selectors_kube_apiserver_refuses_are_refused_with_its_reason() {
    let cases = [
        ("", "empty shard selector is not allowed"),
        (
            "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
            "hexStart must have '0x' prefix",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')",
            "hexEnd must have '0x' prefix",
        ),
        (
            "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
            "hexStart: hex value is required after '0x'",
        ),
        (
            "shardRange(object.metadata.name, '0x00', '0x80')",
            "unsupported field path \"object.metadata.name\"",
        ),
        (
            "shardRange(object.metadata.labels, '0x00', '0x80')",
            "unsupported field path",
        ),
        (
            "invalidFunc(object.metadata.uid, '0x00', '0x80')",
            "unsupported function \"invalidFunc\"",
        ),
        (
            "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
            "hex value too long (18 chars, max 17)",
        ),
        (
            "shardRange(object.metadata.uid, '0x0g', '0x80')",
            "invalid hex character \"g\"",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && \
             shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            "expected || or the end",
        ),
        ("shardRange(object.metadata.uid, 0, 8)", "field path"),
        ("object.metadata.uid > '0x0'", "expected shardRange() call"),
        (
            "shardRange(object.metadata.uid, '0x0')",
            "requires exactly 3 arguments, got 2",
        ),
        ("shardRange(object.metadata.uid, hex(0), '0x8')", "expected"),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || \
             shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
            "all shard ranges must use the same field",
        ),
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "did you mean \"0x0000000000000000\"?",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0xff')",
            "hexEnd must be a 0x-prefixed 16-digit hex value",
        ),
        (
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "must be less than end",
        ),
        (
            "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')",
            "must be less than end",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x1ffffffffffffffff')",
            "17-digit hex value must be '0x10000000000000000'",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'",
            "expected \",\" or \")\"",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000)",
            "unterminated string",
        ),
        (
            "shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')",
            "invalid hex character \"A\"",
        ),
        (
            "shardRange(object.metadata.uid, b'0x0000000000000000', '0x8000000000000000')",
            "hexStart must be a string literal, got []uint8",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '\\q')",
            "invalid escape sequence",
        ),
    ];
    for (input, reason) in cases {
        match input.parse::<Shard>() {
            Ok(shard) => panic!("{input:?} parsed to {shard:?}"),
            Err(Error::InvalidShard {
                selector,
                reason: given,
            }) => {
                assert_eq!(selector, input);
                assert!(
                    given.contains(reason),
                    "{input:?}: {given:?}, not {reason:?}"
                );
            }
            Err(other) => panic!("{input:?}: {other}"),
        }
    }
}

#[test]
fn shard_of_n_rejects_an_index_out_of_range() {
    assert!(Shard::of(0, 0).is_err());
    assert!(Shard::of(3, 3).is_err());
    assert!(Shard::ranges(ShardKey::Uid, []).is_err());
    assert!(Shard::ranges(ShardKey::Uid, [5..5]).is_err());
    assert!(Shard::ranges(ShardKey::Uid, [0..(1 << 64) + 1]).is_err());
}

#[test]
fn the_namespace_key_keeps_a_namespace_together() {
    let shard = Shard::of(0, 2).unwrap().keyed_by(ShardKey::Namespace);
    let in_namespace = |namespace: &str, uid: &str| Meta {
        uid: Some(uid.to_owned()),
        namespace: Some(namespace.to_owned()),
    };
    for namespace in ["default", "kube-system", "team-a", ""] {
        let first = shard.contains(&in_namespace(namespace, "u1"));
        for uid in ["u2", "u3", "u4", "u5"] {
            assert_eq!(shard.contains(&in_namespace(namespace, uid)), first);
        }
        let expected = u128::from(fnv1a_64(namespace)) < 1 << 63;
        assert_eq!(first, expected, "{namespace:?}");
    }
}

proptest! {
    /// The N shards of `Shard::of` cover every object exactly once, and each prints to a
    /// selector that parses back to itself.
    #[test]
    fn n_shards_hold_every_object_once(count in 1u64..=64, uids in prop::collection::vec("[a-f0-9-]{0,40}", 1..50)) {
        let shards: Vec<_> = (0..count).map(|i| Shard::of(i, count).unwrap()).collect();
        for shard in &shards {
            prop_assert_eq!(&shard.to_string().parse::<Shard>().unwrap(), shard);
        }
        prop_assert_eq!(shards[0].hash_ranges()[0].start, 0);
        prop_assert_eq!(shards[shards.len() - 1].hash_ranges()[0].end, 1 << 64);
        for pair in shards.windows(2) {
            prop_assert_eq!(pair[0].hash_ranges()[0].end, pair[1].hash_ranges()[0].start);
        }
        for uid in &uids {
            let holders = shards.iter().filter(|shard| shard.contains(&with_uid(uid))).count();
            prop_assert_eq!(holders, 1, "{} held by {} shards", uid, holders);
        }
    }

    /// Membership is the model's: the hash of the UID within one of the ranges.
    #[test]
    fn membership_is_the_hash_in_a_range(
        bounds in prop::collection::vec(any::<u64>(), 2..8),
        uid in "[a-z0-9-]{0,36}",
    ) {
        let mut bounds: Vec<u128> = bounds.into_iter().map(u128::from).collect();
        bounds.push(1 << 64);
        bounds.sort_unstable();
        bounds.dedup();
        let ranges: Vec<_> = bounds.chunks_exact(2).map(|pair| pair[0]..pair[1]).collect();
        prop_assume!(!ranges.is_empty());
        let shard = Shard::ranges(ShardKey::Uid, ranges.clone()).unwrap();
        let hash = u128::from(fnv1a_64(&uid));
        let expected = ranges.iter().any(|range| range.start <= hash && hash < range.end);
        prop_assert_eq!(shard.contains(&with_uid(&uid)), expected);
        prop_assert_eq!(shard.contains_fields(Some(&uid), Some("any")), expected);
        prop_assert_eq!(&shard.to_string().parse::<Shard>().unwrap(), &shard);
    }
}
