//! simd-json's reading against serde_json's: whatever `from_slice` returns must be what
//! serde_json returns for the same bytes, error text included. serde_json's `float_roundtrip`
//! feature is on in this crate's tests, so both round decimals to the nearest `f64`.

use k8s_openapi::api::core::v1::Pod;
use kinformer_testing::fixtures;
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::*;

/// `from_slice` and serde_json agree on `raw`: equal values, or the same error.
fn assert_agrees<T: DeserializeOwned + PartialEq + std::fmt::Debug>(raw: &[u8]) {
    let fast = from_slice::<T>(raw).map_err(|error| error.to_string());
    let reference = serde_json::from_slice::<T>(raw).map_err(|error| error.to_string());
    assert_eq!(fast, reference, "on {:?}", String::from_utf8_lossy(raw));
}

fn pod_bytes(i: usize) -> Vec<u8> {
    let mut pod = fixtures::pod(i);
    // managedFields carry FieldsV1, a `serde_json::Value` tree inside the typed Pod.
    pod["metadata"]["managedFields"] = serde_json::json!([{
        "manager": "kubelet", "operation": "Update", "apiVersion": "v1",
        "time": "2026-01-01T00:00:05Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}},
                     "f:podIP": {}, "f:phase": {}}},
    }]);
    serde_json::to_vec(&pod).expect("a fixture encodes")
}

#[test]
fn fixture_pods_take_the_simd_path_and_match_serde_json() {
    for i in [0, 1, 7, 4_999, 99_999] {
        let raw = pod_bytes(i);
        assert!(simd_agrees(&raw), "pod {i} is eligible for simd-json");
        let simd = with_simd_json::<Pod>(&raw)
            .expect("scratch is free")
            .expect("simd-json decodes the fixture");
        let reference: Pod = serde_json::from_slice(&raw).expect("serde_json decodes the fixture");
        assert_eq!(simd, reference, "pod {i}");
        assert!(
            simd.metadata.managed_fields.is_some(),
            "the FieldsV1 tree was decoded"
        );
        assert_agrees::<Pod>(&raw);
        assert_agrees::<Value>(&raw);
    }
}

#[test]
fn every_single_byte_corruption_reads_as_serde_json_reads_it() {
    let raw = serde_json::to_vec(&fixtures::config_map(3)).expect("a fixture encodes");
    for at in 0..raw.len() {
        for replacement in [
            b'"', b'\\', b'{', b']', b'0', b'-', b' ', b'\t', 0x01, 0xff, 0xc3,
        ] {
            let mut corrupt = raw.clone();
            corrupt[at] = replacement;
            assert_agrees::<Value>(&corrupt);
            assert_agrees::<k8s_openapi::api::core::v1::ConfigMap>(&corrupt);
        }
        assert_agrees::<Value>(&raw[..at]);
    }
}

#[test]
fn edge_cases_read_as_serde_json_reads_them() {
    let cases: &[&[u8]] = &[
        br#"{"a":-0}"#,
        br#"{"a": -0 }"#,
        br#"[-0]"#,
        br#"[1,-0]"#,
        br#"-0"#,
        br#"{"a":-0.0}"#,
        br#"{"a":-0e3}"#,
        br#"{"name":"web-0","n":-0}"#,
        br#"{"a":18446744073709551615}"#,
        br#"{"a":18446744073709551616}"#,
        br#"{"a":-9223372036854775808}"#,
        br#"{"a":-9223372036854775809}"#,
        br#"{"a":1.7976931348623157e308}"#,
        br#"{"a":1.7976931348623157e309}"#,
        br#"{"a":4.9e-324}"#,
        br#"{"a":2.2250738585072011e-308}"#,
        br#"{"a":0.30000000000000004}"#,
        br#"{"a":"\ud83d\ude00"}"#,
        br#"{"a":"\ud83d"}"#,
        br#"{"a":"\ude00"}"#,
        br#"{"a":"\u0000"}"#,
        "{\"a\":\"\u{e9}\u{1F600}\"}".as_bytes(),
        b"{\"a\":\"\xed\xa0\x80\"}",
        b"{\"a\":\"\xc0\xaf\"}",
        b"\xef\xbb\xbf{}",
        br#"{"a":1,"a":2}"#,
        br#"{"a":1} x"#,
        br#"{"a":1,}"#,
        br#"{"a":"\/\b\f\n\r\t\"\\"}"#,
        b"",
        b"   ",
        b"null",
        br#""just a string""#,
    ];
    for raw in cases {
        assert_agrees::<Value>(raw);
        assert_agrees::<Option<Pod>>(raw);
    }
}

#[test]
fn nesting_beyond_serde_jsons_limit_goes_to_serde_json_without_overflowing() {
    for depth in [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 100_000] {
        let arrays = [vec![b'['; depth], vec![b']'; depth]].concat();
        let objects = [br#"{"a":"#.repeat(depth), b"1".to_vec(), b"}".repeat(depth)].concat();
        for raw in [arrays, objects] {
            // simd-json's parser holds serde_json's limit itself, before anything recurses.
            let simd = with_simd_json::<Value>(&raw).expect("the scratch is free");
            assert_eq!(
                simd.is_ok(),
                depth <= MAX_DEPTH,
                "simd-json at depth {depth}"
            );
            assert_agrees::<Value>(&raw);
        }
    }
    let decoded: Value = from_slice(&[vec![b'['; MAX_DEPTH], vec![b']'; MAX_DEPTH]].concat())
        .expect("127 deep is within the limit");
    assert!(decoded.is_array());
}

#[test]
fn brackets_inside_strings_do_not_count_as_nesting() {
    let quoted = format!(
        r#"{{"a":"{}","b":"\"{}"}}"#,
        "[".repeat(500),
        "{".repeat(500)
    );
    let simd = with_simd_json::<Value>(quoted.as_bytes()).expect("the scratch is free");
    assert!(simd.is_ok(), "brackets in strings are text");
    assert_agrees::<Value>(quoted.as_bytes());
    let escaped_quote = format!(r#"["\\",{}1{}]"#, "[".repeat(200), "]".repeat(200));
    let simd = with_simd_json::<Value>(escaped_quote.as_bytes()).expect("the scratch is free");
    assert!(simd.is_err(), "an escaped backslash ends its string");
    assert_agrees::<Value>(escaped_quote.as_bytes());
}

#[test]
fn minus_zero_is_found_only_where_a_number_can_start() {
    assert!(has_minus_zero(br#"{"a":-0}"#));
    assert!(has_minus_zero(b"[1, -0\n]"));
    assert!(has_minus_zero(b"-0"));
    assert!(!has_minus_zero(br#"{"name":"web-0"}"#));
    assert!(!has_minus_zero(br#"{"a":-0.5,"b":-0e1,"c":-01}"#));
}

#[test]
fn a_huge_object_does_not_keep_its_scratch() {
    let big = serde_json::to_vec(&vec!["x".repeat(1024); 2048]).expect("encodes");
    assert!(big.len() > KEEP_SCRATCH);
    assert_agrees::<Vec<String>>(&big);
    SCRATCH.with(|cell| assert!(cell.borrow().is_none(), "a 2 MiB scratch was dropped"));
    assert_agrees::<Value>(br#"{"small":true}"#);
    SCRATCH.with(|cell| assert!(cell.borrow().is_some(), "a small scratch is kept"));
}

/// JSON text with the number spellings, escapes and nesting that parsers differ on.
fn json_text() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |n| n.is_finite())
            .prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |n| n.is_finite())
            .prop_map(|n| format!("{n:e}")),
        "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?",
    ];
    let string = prop_oneof![
        "[a-zA-Z0-9 :/.-]{0,20}",
        any::<String>().prop_map(|text| serde_json::to_string(&text).expect("encodes")),
        "(\\\\u[0-9a-fA-F]{4}|\\\\[nrtbf/\"\\\\]|[a-z]){0,6}"
            .prop_map(|text| format!("\"{text}\"")),
    ]
    .prop_map(|text| {
        if text.starts_with('"') {
            text
        } else {
            format!("\"{text}\"")
        }
    });
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        number,
        string.clone(),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6)
                .prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::vec((string.clone(), inner), 0..6).prop_map(|entries| {
                let entries: Vec<String> = entries
                    .into_iter()
                    .map(|(key, value)| format!("{key}: {value}"))
                    .collect();
                format!("{{ {} }}", entries.join(", "))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn generated_json_reads_as_serde_json_reads_it(text in json_text()) {
        assert_agrees::<Value>(text.as_bytes());
    }

    #[test]
    fn corrupted_pods_read_as_serde_json_reads_them(
        i in 0usize..1000,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut raw = pod_bytes(i);
        for (at, byte) in edits {
            let at = at.index(raw.len());
            raw[at] = byte;
        }
        assert_agrees::<Pod>(&raw);
    }
}
