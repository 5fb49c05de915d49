//! A list body cut as it arrives gives exactly the items and the metadata the whole body gives,
//! wherever the chunks end, and a broken body is an error, never a wrong list.

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kinformer_protobuf::{
    DecodeOptions, Decoder, Envelope, Error, LIST_TAIL, ListSplitter, encode_list,
    encode_list_head, encode_object, list_item_prefix, list_items, message_for,
};
use proptest::prelude::*;
use serde_json::json;

fn pod_list() -> &'static kinformer_protobuf::Message {
    message_for("v1", "PodList").expect("a built-in kind")
}

/// Feeds `body` cut at `cuts` (sorted, clamped to the body), taking items after every chunk.
fn split(body: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, Vec<Bytes>), Error> {
    let mut splitter = ListSplitter::for_list(pod_list())?;
    let mut items = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
        let cut = cut.clamp(at, body.len());
        splitter.feed(&body[at..cut])?;
        items.extend(splitter.take_items());
        at = cut;
    }
    Ok((splitter.finish()?, items))
}

/// The type and list message of an enveloped body.
fn type_and_raw(body: &[u8]) -> (String, String, Vec<u8>) {
    let envelope = Envelope::parse(body).expect("an envelope");
    (
        envelope.api_version.to_owned(),
        envelope.kind.to_owned(),
        envelope.raw.to_vec(),
    )
}

#[test]
fn a_list_of_pods_splits_into_the_pods_the_whole_body_holds() {
    let pods: Vec<Vec<u8>> = (0..3)
        .map(|index| {
            let body = encode_object(&json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": { "name": format!("web-{index}"), "namespace": "prod",
                              "resourceVersion": format!("{}", 10 + index) },
                "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] },
            }))
            .expect("encodes");
            Envelope::parse(&body).expect("an envelope").raw.to_vec()
        })
        .collect();
    let list_meta = b"\x12\x02\x31\x32\x1a\x04next"; // resourceVersion "12", continue "next"
    let body = encode_list("v1", "PodList", list_meta, pods.iter().map(Vec::as_slice));
    // A byte at a time: every unit of the body arrives cut.
    let cuts: Vec<usize> = (1..body.len()).collect();
    let (head, items) = split(&body, &cuts).expect("splits");
    assert_eq!(items, pods);

    let decoder = Decoder::<Pod>::new();
    let item = list_items(Envelope::parse(&body).expect("parses").raw, pod_list())
        .expect("items")
        .message;
    let names: Vec<String> = items
        .iter()
        .map(|item_bytes| {
            decoder
                .decode(item_bytes, item, DecodeOptions::default())
                .expect("a Pod")
                .metadata
                .name
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(names, ["web-0", "web-1", "web-2"]);

    let (api_version, kind, raw) = type_and_raw(&head);
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "PodList"));
    assert!(
        list_items(&raw, pod_list())
            .expect("a list")
            .bytes
            .is_empty()
    );
    assert_eq!(
        raw,
        type_and_raw(&encode_list("v1", "PodList", list_meta, [])).2
    );
}

#[test]
fn the_head_is_ready_once_the_first_item_has_arrived() {
    let body = encode_list(
        "v1",
        "PodList",
        b"\x1a\x01c",
        [&b"\x0a\x00"[..], b"\x0a\x00"],
    );
    let mut splitter = ListSplitter::for_list(pod_list()).expect("a list");
    // The two items (4 bytes each) and the envelope's empty fields 3 and 4 (2 each) end it.
    let before_items = body.len() - 12;
    splitter.feed(&body[..before_items]).expect("feeds");
    assert_eq!(splitter.head_before_items(), None, "no item has begun");
    splitter
        .feed(&body[before_items..before_items + 4])
        .expect("feeds");
    let head = splitter.head_before_items().expect("the first item is in");
    let (_, kind, raw) = type_and_raw(&head);
    assert_eq!(kind, "PodList");
    assert_eq!(raw, b"\x0a\x03\x1a\x01c");
    assert_eq!(splitter.take_items(), [&b"\x0a\x00"[..]]);
    assert!(
        matches!(splitter.finish(), Err(Error::Truncated(_))),
        "the body stopped inside the list"
    );
}

#[test]
fn broken_bodies_are_errors() {
    let good = encode_list("v1", "PodList", b"", [&b"\x0a\x00"[..]]);
    let mut two_lists = good.clone();
    two_lists.extend_from_slice(b"\x12\x00");
    // The list's length says 3 bytes; its metadata field says 5.
    let mut overrun = b"k8s\0\x12\x03\x0a\x05".to_vec();
    overrun.extend_from_slice(b"abcde");
    let cases: [(&str, &[u8]); 6] = [
        ("JSON", b"{\"items\":[]}"),
        ("a short body that is not the magic", b"k9"),
        ("two lists", &two_lists),
        ("a field past its list", &overrun),
        ("a group", b"k8s\0\x0b"),
        ("a cut body", &good[..good.len() - 6]),
    ];
    for (what, body) in cases {
        for cuts in [vec![], (1..body.len()).collect()] {
            assert!(split(body, &cuts).is_err(), "{what} was accepted");
        }
    }
    assert!(matches!(split(b"", &[]), Err(Error::NoMagic)));
}

proptest! {
    /// Any list, cut anywhere, splits into exactly its items and a head with its metadata.
    #[test]
    fn any_list_cut_anywhere_splits_the_same(
        items in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..8),
        list_meta in prop::collection::vec(any::<u8>(), 0..40),
        cuts in prop::collection::vec(0usize..3000, 0..16),
    ) {
        let body = encode_list("v1", "PodList", &list_meta, items.iter().map(Vec::as_slice));
        let mut cuts = cuts;
        cuts.sort_unstable();
        let (head, split_items) = split(&body, &cuts).expect("splits");
        prop_assert_eq!(&split_items, &items);
        let (api_version, kind, raw) = type_and_raw(&head);
        prop_assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "PodList"));
        prop_assert_eq!(raw, type_and_raw(&encode_list("v1", "PodList", &list_meta, [])).2);
    }

    /// A list written in pieces (head, each item after its prefix, tail), as a server that
    /// streams it sends it, is byte for byte the list written whole; lengths reach three-byte
    /// varints.
    #[test]
    fn a_list_written_in_pieces_is_the_list_written_whole(
        lens in prop::collection::vec(0usize..20_000, 0..6),
        list_meta in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let items: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(index, &len)| vec![index as u8; len])
            .collect();
        let whole = encode_list("v1", "PodList", &list_meta, items.iter().map(Vec::as_slice));
        let mut pieces = encode_list_head("v1", "PodList", &list_meta, lens.iter().copied());
        for item in &items {
            pieces.extend_from_slice(&list_item_prefix(item.len()));
            pieces.extend_from_slice(item);
        }
        pieces.extend_from_slice(LIST_TAIL);
        prop_assert_eq!(&pieces, &whole);
        let (_, split_items) = split(&pieces, &[]).expect("splits");
        prop_assert_eq!(split_items, items);
    }

    /// No byte sequence panics the splitter, however it is cut.
    #[test]
    fn any_bytes_split_or_fail_without_panicking(
        body in prop::collection::vec(any::<u8>(), 0..200),
        cuts in prop::collection::vec(0usize..200, 0..8),
    ) {
        let mut body = body;
        if body.len() > 8 {
            body[..4].copy_from_slice(b"k8s\0");
        }
        let mut cuts = cuts;
        cuts.sort_unstable();
        let _ = split(&body, &cuts);
    }
}
