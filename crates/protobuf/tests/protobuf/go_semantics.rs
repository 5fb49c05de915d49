//! Both decoding paths read every input as Go's generated decoders do, and agree with each
//! other: the generated decoder of a kind (`Decoder::new`) and the serde path
//! (`Decoder::serde`, which serves projections, metadata-only objects and every kind a build
//! has no generated decoder for).
//!
//! Each input below is a message as a server could send it, written out in hex, with what Go
//! makes of it: repeated and map entries joined wherever they appear, a message that appears
//! twice merged (a `Quantity` or `IntOrString` too, which Go decodes as messages), a scalar's
//! last occurrence kept, a map entry read as loosely as Go's generated decoders read one, and
//! the same refusals. What Go makes of each quantity's text is `quantity::tests`' table.

use std::fmt::Debug;

use k8s_openapi::api::core::v1::{Pod, Service};
use kinformer_protobuf::{DecodeOptions, Decoder, Message, message_for};
use serde::de::DeserializeOwned;

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

fn table(api_version: &str, kind: &str) -> &'static Message {
    message_for(api_version, kind).expect("a table for the kind")
}

/// Decodes `bytes` through both paths and returns what they agree on.
fn both<T: DeserializeOwned + PartialEq + Debug + 'static>(
    bytes: &[u8],
    message: &'static Message,
) -> Result<T, String> {
    let generated = Decoder::<T>::new();
    assert!(
        generated.is_generated(),
        "a generated decoder is registered"
    );
    let fast = generated.decode(bytes, message, DecodeOptions::default());
    let serde = Decoder::<T>::serde().decode(bytes, message, DecodeOptions::default());
    match (fast, serde) {
        (Ok(fast), Ok(serde)) => {
            assert_eq!(
                fast, serde,
                "the generated decoder and the serde path differ"
            );
            Ok(fast)
        }
        (Err(fast), Err(serde)) => Err(format!("{fast} / {serde}")),
        (fast, serde) => panic!("one path accepts what the other refuses: {fast:?} / {serde:?}"),
    }
}

fn pod(bytes: &str) -> Result<Pod, String> {
    both(&hex(bytes), table("v1", "Pod"))
}

#[test]
fn repeated_entries_split_by_another_field_are_joined() {
    // spec.containers[0] = {name "a", args "x", name "b", args "y"}: the name's last
    // occurrence wins, the args are joined.
    let pod = pod("120e120c0a01612201780a0162220179").expect("decodes");
    let container = &pod.spec.expect("a spec").containers[0];
    assert_eq!(container.name, "b");
    assert_eq!(
        container.args.as_deref(),
        Some(&["x".to_owned(), "y".to_owned()][..])
    );
}

#[test]
fn map_entries_split_by_another_field_are_joined() {
    // metadata = {labels a=1, name "n", labels b=2}
    let pod = pod("0a135a060a01611201310a016e5a060a0162120132").expect("decodes");
    let labels = pod.metadata.labels.expect("labels");
    assert_eq!(
        labels.into_iter().collect::<Vec<_>>(),
        [
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned())
        ]
    );
    assert_eq!(pod.metadata.name.as_deref(), Some("n"));
}

#[test]
fn a_message_that_appears_twice_is_merged() {
    // metadata = {name "a"}, then metadata = {namespace "n"}
    let merged = pod("0a030a01610a031a016e").expect("decodes");
    assert_eq!(merged.metadata.name.as_deref(), Some("a"));
    assert_eq!(merged.metadata.namespace.as_deref(), Some("n"));
    // Merged all the way down: spec = {containers [{name "a"}]}, spec = {containers [{name "b"}]}
    let spec = pod("120512030a0161120512030a0162")
        .expect("decodes")
        .spec
        .expect("a spec");
    let names: Vec<String> = spec.containers.into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn a_scalar_that_appears_twice_keeps_its_last_value_in_any_type() {
    // metadata = {name "a", name "b"}
    let bytes = hex("0a060a01610a0162");
    assert_eq!(
        both::<Pod>(&bytes, table("v1", "Pod")).map(|pod| pod.metadata.name),
        Ok(Some("b".to_owned()))
    );
    // A projection's derived `Deserialize` refuses a field presented twice; it is presented once.
    #[derive(serde::Deserialize)]
    struct Named {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        name: String,
    }
    let named: Named = Decoder::<Named>::serde()
        .decode(&bytes, table("v1", "Pod"), DecodeOptions::default())
        .expect("decodes");
    assert_eq!(named.metadata.name, "b");
}

#[test]
fn a_time_before_the_year_0000_or_past_what_k8s_openapi_holds_is_refused() {
    // metadata.creationTimestamp.seconds = 10^12, about the year 33658
    let error = pod("0a0942070880a094a58d1d").expect_err("refused");
    assert!(
        error.contains("a time outside 0000-01-01T00:00:00Z to 9999-12-30T22:00:00Z"),
        "{error}"
    );
    // seconds = -62167219201, one second before 0000-01-01
    let error = pod("0a0d420b08ff87aeb498feffffff01").expect_err("refused");
    assert!(
        error.contains("a time outside 0000-01-01T00:00:00Z to 9999-12-30T22:00:00Z"),
        "{error}"
    );
    // seconds = 253402300799, 9999-12-31T23:59:59Z: Go writes it, k8s-openapi cannot hold it.
    assert!(pod("0a09420708ff82d1ffaf07").is_err());
    // seconds = 253402207200, 9999-12-30T22:00:00Z, the last it holds
    let last = pod("0a09420708e0a7cbffaf07").expect("decodes");
    let created = last.metadata.creation_timestamp.expect("a time").0;
    assert_eq!(created.as_second(), 253_402_207_200);
}

#[test]
fn embedded_json_with_anything_after_the_document_is_refused() {
    // metadata.managedFields[0].fieldsV1.raw = `{"f:metadata":{}}garbage`
    let bytes = "0a1f8a011c3a1a0a187b22663a6d65746164617461223a7b7d7d67617262616765";
    let error = pod(bytes).expect_err("refused");
    assert!(error.contains("embedded JSON"), "{error}");
    // The same document alone decodes, and so it does with trailing whitespace.
    let fine = "0a188a01153a130a117b22663a6d65746164617461223a7b7d7d";
    assert!(pod(fine).is_ok());
    let spaced = "0a1a8a01173a150a137b22663a6d65746164617461223a7b7d7d200a";
    assert!(pod(spaced).is_ok());
}

#[test]
fn an_int_or_string_is_checked_on_both_arms_and_by_its_type() {
    let service = |int_or_string: &str| {
        // spec.ports[0].targetPort = int_or_string
        let port = format!("22{:02x}{int_or_string}", int_or_string.len() / 2);
        let ports = format!("0a{:02x}{port}", port.len() / 2);
        let spec = format!("12{:02x}{ports}", ports.len() / 2);
        both::<Service>(&hex(&spec), table("v1", "Service")).map(|service| {
            service.spec.expect("a spec").ports.expect("ports")[0]
                .target_port
                .clone()
        })
    };
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    // {type 0, intVal 80}
    assert_eq!(service("08001050"), Ok(Some(IntOrString::Int(80))));
    // {type 1, strVal "http"}
    assert_eq!(
        service("08011a0468747470"),
        Ok(Some(IntOrString::String("http".to_owned())))
    );
    // {type 0, intVal 80, strVal as a varint}: the unused arm has the wrong wire type.
    assert!(service("080010501805").is_err());
    // {type 2, intVal 80}: neither arm.
    let error = service("08021050").expect_err("refused");
    assert!(error.contains("neither 0 (int) nor 1 (string)"), "{error}");
}

#[test]
fn a_special_value_that_appears_twice_is_merged_as_go_merges_its_message() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    // spec.ports[0] = {name "a", targetPort {type 1, strVal "http"}, targetPort {intVal 8080}}:
    // Go decodes the second into the first, so the type and the text stay and "http" wins.
    let ports = |port: &str| {
        let ports = format!("0a{:02x}{port}", port.len() / 2);
        let spec = format!("12{:02x}{ports}", ports.len() / 2);
        both::<Service>(&hex(&spec), table("v1", "Service"))
            .map(|service| service.spec.expect("a spec").ports.expect("ports"))
    };
    let merged = ports(
        "0a01612208080 11a04687474702203 10903f"
            .replace(' ', "")
            .as_str(),
    )
    .expect("decodes");
    assert_eq!(
        merged[0].target_port,
        Some(IntOrString::String("http".to_owned()))
    );
    // Split by another field, too: {targetPort {type 1, strVal "http"}, name "a",
    // targetPort {type 0}}: the type's last value wins, and the int arm, never sent, is 0.
    let merged = ports(
        "22080801 1a04687474700a0161220208 00"
            .replace(' ', "")
            .as_str(),
    )
    .expect("decodes");
    assert_eq!(merged[0].target_port, Some(IntOrString::Int(0)));
    assert_eq!(merged[0].name.as_deref(), Some("a"));
    // An invalid occurrence is refused even when a later one would replace it.
    assert!(ports("22021802 22020800".replace(' ', "").as_str()).is_err());

    // spec.containers[0].resources.limits is a map, whose values never merge; but a
    // container's resources message twice is merged, and the quantity in it read as Go reads
    // it: {limits {"cpu": "0.5"}}, then {requests {"cpu": "1"}}.
    let field = |tag: &str, body: &str| format!("{tag}{:02x}{body}", body.len() / 2);
    let limits = field(
        "0a",
        &format!("0a03637075{}", field("12", &field("0a", "302e35"))),
    );
    let requests = field(
        "12",
        &format!("0a03637075{}", field("12", &field("0a", "31"))),
    );
    let container = format!("0a0163{}{}", field("42", &limits), field("42", &requests));
    let pod = pod(&field("12", &field("12", &container))).expect("decodes");
    let resources = pod.spec.expect("a spec").containers[0]
        .resources
        .clone()
        .expect("resources");
    assert_eq!(resources.limits.expect("limits")["cpu"].0, "500m");
    assert_eq!(resources.requests.expect("requests")["cpu"].0, "1");
}

#[test]
fn a_map_entry_is_read_as_loosely_as_go_reads_it() {
    let labels = |bytes: &str| pod(bytes).map(|pod| (pod.metadata.labels, pod.metadata.name));
    let one = |key: &str, value: &str| {
        Some(std::collections::BTreeMap::from([(
            key.to_owned(),
            value.to_owned(),
        )]))
    };
    // metadata.labels entry {key as a varint-tagged field: 3 bytes "abc", value "x"}: Go reads
    // fields 1 and 2 as length-delimited whatever their wire type.
    assert_eq!(
        labels("0a0a5a080803616263120178"),
        Ok((one("abc", "x"), None))
    );
    // An entry {field 0 = 5, key "a", value "b"}: Go skips any other field, even field 0.
    assert_eq!(
        labels("0a0a5a0800050a0161120162"),
        Ok((one("a", "b"), None))
    );
    // An end-group tag alone is refused there too.
    assert!(labels("0a095a07040a0161120162").is_err());
    // An entry of 4 bytes whose key is 5 long, then metadata.name "n": Go reads the key into
    // the enclosing message, then goes on after the entry.
    assert_eq!(
        labels("0a095a040a0561620a016e"),
        Ok((one("ab\n\u{1}n", ""), Some("n".to_owned())))
    );
    // A key longer than the enclosing message is still refused.
    assert!(labels("0a045a020a09").is_err());
}

#[test]
fn every_occurrence_of_a_map_value_is_decoded() {
    // spec.containers[0].resources.limits entry {"cpu", value "x", value "1"}: Go decodes
    // "x" as a quantity before "1" replaces it, and refuses it.
    let field = |tag: &str, body: &str| format!("{tag}{:02x}{body}", body.len() / 2);
    let entry = format!(
        "0a03637075{}{}",
        field("12", &field("0a", "78")),
        field("12", &field("0a", "31"))
    );
    let container = format!("0a0163{}", field("42", &field("0a", &entry)));
    let error = pod(&field("12", &field("12", &container))).expect_err("refused");
    assert!(error.contains("quantities must match"), "{error}");
}

#[test]
fn a_string_that_is_not_utf8_reads_as_go_writes_it_in_json() {
    // metadata = {name "a\x80b", namespace "\xe6\x97A"}: one U+FFFD per byte of each invalid
    // sequence, as Go's JSON encoder writes the bytes Go keeps.
    let pod = pod("0a0a0a036180621a03e69741").expect("decodes");
    assert_eq!(pod.metadata.name.as_deref(), Some("a\u{fffd}b"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("\u{fffd}\u{fffd}A"));
}

#[test]
fn every_value_must_have_its_fields_wire_type_even_a_zero_one() {
    // metadata = {name as the varint 0}: Go refuses the wire type before looking at the value.
    let error = pod("0a020800").expect_err("refused");
    assert!(
        error.contains("wire type varint for a field of type string"),
        "{error}"
    );
    // spec = {hostNetwork (field 11) as the fixed64 1}: a bool is a varint.
    let error = pod("1209590100000000000000").expect_err("refused");
    assert!(
        error.contains("wire type fixed64 for a field of type bool"),
        "{error}"
    );
}

#[test]
fn groups_are_skipped_where_unknown_and_refused_where_known() {
    // metadata = {name "a", field 100 as a group holding {1: 1}}
    let skipped = pod("0a090a0161a3060801a406").expect("decodes");
    assert_eq!(skipped.metadata.name.as_deref(), Some("a"));
    // metadata = {name as a group}
    let error = pod("0a040b08010c").expect_err("refused");
    assert!(error.contains("wire type group"), "{error}");
    // metadata = {the end of a group that never started}
    let error = pod("0a020c00").expect_err("refused");
    assert!(
        error.contains("the end of a group that never started"),
        "{error}"
    );
    // metadata = {name "a", field 100's group never ending}
    assert!(pod("0a070a0161a3060801").is_err());
}

#[test]
fn field_numbers_are_read_as_go_reads_them() {
    // metadata = {field 2^31 - 1, unknown, as a varint}: skipped.
    let skipped = pod("0a09f8ffffff3f010a0161").expect("decodes");
    assert_eq!(skipped.metadata.name.as_deref(), Some("a"));
    // metadata = {a tag whose field number's low 32 bits are zero}
    let error = pod("0a0780808080800101").expect_err("refused");
    assert!(error.contains("zero or negative"), "{error}");
}
