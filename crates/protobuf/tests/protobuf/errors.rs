//! Decode errors name where they happened (the field path from the object's root, the byte
//! offset and the message type) and what went wrong, the same through both decoding paths,
//! and never quote the object's data.

use k8s_openapi::api::core::v1::Pod;
use kinformer_protobuf::{DecodeOptions, Decoder, Error, message_for};

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

/// The error both paths give for the Pod message `bytes`, checked to be the same.
fn pod_error(bytes: &[u8]) -> Error {
    let message = message_for("v1", "Pod").expect("a table for Pod");
    let generated = Decoder::<Pod>::new()
        .decode(bytes, message, DecodeOptions::default())
        .expect_err("the generated decoder refuses it");
    let serde = Decoder::<Pod>::serde()
        .decode(bytes, message, DecodeOptions::default())
        .expect_err("the serde path refuses it");
    assert_eq!(generated, serde, "both paths give the same error");
    generated
}

#[test]
fn an_error_names_the_field_path_its_offset_and_the_message_that_holds_it() {
    // spec.containers = [{name "a"}, {name "b", args: [the varint 1]}]
    let error = pod_error(&hex("120c12030a016112050a01622001"));
    let Error::InField(field) = &error else {
        panic!("expected an error in a field, got {error:?}");
    };
    assert_eq!(field.path(), "spec.containers[1].args[0]");
    assert_eq!(field.offset(), 12);
    assert_eq!(field.message(), "k8s.io.api.core.v1.Container");
    assert_eq!(
        field.cause(),
        &Error::WireType {
            expected: "string",
            found: "varint"
        }
    );
    assert_eq!(error.cause(), field.cause());
}

/// The table of malformed inputs in the crate docs is what the decoders say, row by row.
#[test]
fn the_crate_docs_error_table_is_what_the_decoders_say() {
    let docs = include_str!("../../src/lib.rs");
    let rows: Vec<(&str, &str)> = docs
        .lines()
        .filter_map(|line| line.strip_prefix("//! | "))
        .filter_map(|row| {
            let cells: Vec<&str> = row.trim_end_matches(" |").split(" | ").collect();
            let [_, input, message] = cells[..] else {
                return None;
            };
            let unquote = |cell: &'static str| cell.strip_prefix('`')?.strip_suffix('`');
            Some((unquote(input)?, unquote(message)?))
        })
        .collect();
    assert!(rows.len() >= 10, "the table has its rows: {rows:?}");
    for (input, message) in rows {
        assert_eq!(pod_error(&hex(input)).to_string(), message, "for {input}");
    }
}

#[test]
fn an_error_never_quotes_the_objects_data() {
    // metadata = {name "s3cr3t", labels: [{key "t0ken", value "hunter2"}, an entry cut short]},
    // then spec = {hostNetwork as a string "pa55word"}
    let mut metadata = vec![0x0a, 6];
    metadata.extend(b"s3cr3t");
    metadata.extend([0x5a, 16, 0x0a, 5]);
    metadata.extend(b"t0ken");
    metadata.extend([0x12, 7]);
    metadata.extend(b"hunter2");
    let mut pod = vec![0x0a, metadata.len() as u8];
    pod.extend(&metadata);
    let mut spec = vec![0x5a, 8];
    spec.extend(b"pa55word");
    pod.extend([0x12, spec.len() as u8]);
    pod.extend(&spec);
    let message = pod_error(&pod).to_string();
    assert!(message.contains("spec.hostNetwork"), "{message}");
    for secret in ["s3cr3t", "t0ken", "hunter2", "pa55word"] {
        assert!(!message.contains(secret), "{message}");
    }

    let mut cut = vec![0x0a, 8, 0x5a, 6, 0x0a, 5];
    cut.extend(b"t0ke");
    let message = pod_error(&cut).to_string();
    assert!(message.contains("metadata.labels[0]"), "{message}");
    assert!(!message.contains("t0ke"), "{message}");
}
