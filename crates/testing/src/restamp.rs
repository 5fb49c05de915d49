//! Rewrites `metadata.resourceVersion` (and optionally one annotation) of stored JSON in place.
//!
//! Parsing a 6 KB Pod into a `serde_json::Value` and encoding it again touches every byte of
//! it; the bench updates and every deletion change only these two strings. A scan
//! that finds their byte ranges and splices new values in keeps the rest of the object as it
//! was stored, byte for byte, at a fraction of the cost. Anything the scan does not expect
//! (not an object, no resourceVersion, an annotation that is not a string map) makes it give
//! up, and the caller takes the parse-and-encode path instead.
//!
//! [`restamp_protobuf`] does the same to an object's cached protobuf message, so a bench
//! update served to protobuf watchers costs a copy instead of a parse and an encode.

use std::ops::Range;

/// One member of a JSON object: its key (between the quotes, escapes left as they are) and
/// its value.
#[derive(Debug)]
struct Member {
    key: Range<usize>,
    value: Range<usize>,
}

fn skip_whitespace(json: &[u8], mut at: usize) -> usize {
    while json.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// `at` is an opening quote; returns the index after the closing one.
fn string_end(json: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        match json.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// `at` is the first byte of a value; returns the index after its last byte.
fn value_end(json: &[u8], at: usize) -> Option<usize> {
    match json.get(at)? {
        b'"' => string_end(json, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match json.get(i)? {
                    b'"' => {
                        i = string_end(json, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let end = json[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())
                .map_or(json.len(), |n| at + n);
            (end > at).then_some(end)
        }
    }
}

/// The members of the object that opens at `at`, in order.
fn members(json: &[u8], at: usize) -> Option<Vec<Member>> {
    if json.get(at) != Some(&b'{') {
        return None;
    }
    let mut found = Vec::new();
    let mut i = skip_whitespace(json, at + 1);
    if json.get(i) == Some(&b'}') {
        return Some(found);
    }
    loop {
        if json.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(json, i)?;
        let key = i + 1..key_end - 1;
        i = skip_whitespace(json, key_end);
        if json.get(i) != Some(&b':') {
            return None;
        }
        let value_start = skip_whitespace(json, i + 1);
        let value_stop = value_end(json, value_start)?;
        found.push(Member {
            key,
            value: value_start..value_stop,
        });
        i = skip_whitespace(json, value_stop);
        match json.get(i)? {
            b',' => i = skip_whitespace(json, i + 1),
            b'}' => return Some(found),
            _ => return None,
        }
    }
}

fn find<'a>(json: &[u8], members: &'a [Member], key: &str) -> Option<&'a Member> {
    members
        .iter()
        .find(|m| &json[m.key.clone()] == key.as_bytes())
}

fn quoted(text: &str) -> Vec<u8> {
    // Encoding a &str cannot fail; the empty fallback would only show up as a parse error.
    serde_json::to_vec(text).unwrap_or_default()
}

/// `json` with `metadata.resourceVersion` set to `rv` and, when given, the annotation
/// `(key, value)` set, or `None` when the object is not shaped as expected. Nothing before
/// `keep_before` (the end of `apiVersion` and `kind`) may move.
pub(crate) fn restamp(
    json: &[u8],
    keep_before: usize,
    rv: u64,
    annotation: Option<(&str, &str)>,
) -> Option<Vec<u8>> {
    let top = members(json, 0)?;
    let metadata = find(json, &top, "metadata")?;
    if metadata.value.start < keep_before {
        return None;
    }
    let fields = members(json, metadata.value.start)?;
    let resource_version = find(json, &fields, "resourceVersion")?;
    let mut splices: Vec<(Range<usize>, Vec<u8>)> =
        vec![(resource_version.value.clone(), quoted(&rv.to_string()))];
    if let Some((key, value)) = annotation {
        let mut entry = quoted(key);
        entry.push(b':');
        entry.extend_from_slice(&quoted(value));
        match find(json, &fields, "annotations") {
            Some(annotations) => {
                let entries = members(json, annotations.value.start)?;
                match find(json, &entries, key) {
                    Some(existing) => splices.push((existing.value.clone(), quoted(value))),
                    None => {
                        let at = annotations.value.start + 1;
                        if !entries.is_empty() {
                            entry.push(b',');
                        }
                        splices.push((at..at, entry));
                    }
                }
            }
            None => {
                // metadata holds resourceVersion, so it is not empty and needs the comma.
                let at = metadata.value.start + 1;
                let mut member = br#""annotations":{"#.to_vec();
                member.extend_from_slice(&entry);
                member.extend_from_slice(b"},");
                splices.push((at..at, member));
            }
        }
    }
    splices.sort_by_key(|(range, _)| range.start);
    let mut out = Vec::with_capacity(json.len() + 64);
    let mut copied = 0;
    for (range, text) in splices {
        out.extend_from_slice(&json[copied..range.start]);
        out.extend_from_slice(&text);
        copied = range.end;
    }
    out.extend_from_slice(&json[copied..]);
    Some(out)
}

/// Every Kubernetes kind carries its `ObjectMeta` as field 1.
const METADATA: u32 = 1;
/// `ObjectMeta.resourceVersion`.
const RESOURCE_VERSION: u32 = 6;
/// `ObjectMeta.annotations`: one entry per pair, a message with the key as field 1.
const ANNOTATIONS: u32 = 12;
/// The wire type of strings, bytes and messages.
const LENGTH_DELIMITED: u64 = 2;

/// One field of a protobuf message.
#[derive(Debug)]
struct WireField {
    number: u32,
    wire_type: u64,
    /// The whole field, tag included.
    whole: Range<usize>,
    /// The value of a length-delimited field, after its length.
    payload: Range<usize>,
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn write_bytes_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    write_varint(out, (u64::from(number) << 3) | LENGTH_DELIMITED);
    write_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The fields of a message in wire order, or `None` when the bytes are not a well-formed
/// message (groups, which Kubernetes never uses, included).
fn wire_fields(bytes: &[u8]) -> Option<Vec<WireField>> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        let tag = read_varint(bytes, &mut at)?;
        let number = u32::try_from(tag >> 3).ok()?;
        let wire_type = tag & 7;
        let mut payload = at..at;
        match wire_type {
            0 => {
                read_varint(bytes, &mut at)?;
            }
            1 => at += 8,
            LENGTH_DELIMITED => {
                let len = usize::try_from(read_varint(bytes, &mut at)?).ok()?;
                payload = at..at.checked_add(len)?;
                at = payload.end;
            }
            5 => at += 4,
            _ => return None,
        }
        if at > bytes.len() {
            return None;
        }
        fields.push(WireField {
            number,
            wire_type,
            whole: start..at,
            payload,
        });
    }
    Some(fields)
}

/// One `annotations` entry: a map entry message with the key as field 1, the value as field 2.
fn write_annotation(metadata: &mut Vec<u8>, key: &str, value: &str) {
    let mut entry = Vec::with_capacity(key.len() + value.len() + 4);
    write_bytes_field(&mut entry, 1, key.as_bytes());
    write_bytes_field(&mut entry, 2, value.as_bytes());
    write_bytes_field(metadata, ANNOTATIONS, &entry);
}

/// The key of one `annotations` entry.
fn entry_key<'a>(metadata: &'a [u8], entry: &WireField) -> Option<&'a [u8]> {
    let entry = &metadata[entry.payload.clone()];
    let key = wire_fields(entry)?
        .into_iter()
        .find(|field| field.number == 1 && field.wire_type == LENGTH_DELIMITED)?;
    Some(&entry[key.payload])
}

/// A protobuf object `message` (no envelope) with `metadata.resourceVersion` set to `rv` and,
/// when given, the annotation `(key, value)` set, or `None` when the message is not shaped as
/// expected (no single metadata field, no resourceVersion).
///
/// The result is what encoding the restamped JSON gives: a new annotation goes where Go's
/// encoder (and the fake's, over sorted JSON maps) puts it, in key order.
pub(crate) fn restamp_protobuf(
    message: &[u8],
    rv: u64,
    annotation: Option<(&str, &str)>,
) -> Option<Vec<u8>> {
    let top = wire_fields(message)?;
    let mut metadata_fields = top.iter().filter(|field| field.number == METADATA);
    let metadata_field = metadata_fields.next()?;
    if metadata_field.wire_type != LENGTH_DELIMITED || metadata_fields.next().is_some() {
        return None;
    }
    let metadata = &message[metadata_field.payload.clone()];
    let fields = wire_fields(metadata)?;
    if !fields
        .iter()
        .any(|field| field.number == RESOURCE_VERSION && field.wire_type == LENGTH_DELIMITED)
    {
        return None;
    }
    let mut stamped = Vec::with_capacity(metadata.len() + 64);
    let mut pending = annotation;
    for field in &fields {
        if let Some((key, value)) = pending
            && field.number >= ANNOTATIONS
        {
            let existing = if field.number == ANNOTATIONS {
                Some(entry_key(metadata, field)?)
            } else {
                None
            };
            if existing.is_none_or(|existing| existing >= key.as_bytes()) {
                write_annotation(&mut stamped, key, value);
                pending = None;
                if existing == Some(key.as_bytes()) {
                    continue;
                }
            }
        }
        if field.number == RESOURCE_VERSION {
            write_bytes_field(&mut stamped, RESOURCE_VERSION, rv.to_string().as_bytes());
        } else {
            stamped.extend_from_slice(&metadata[field.whole.clone()]);
        }
    }
    if let Some((key, value)) = pending {
        write_annotation(&mut stamped, key, value);
    }
    let mut out = Vec::with_capacity(message.len() + 64);
    out.extend_from_slice(&message[..metadata_field.whole.start]);
    write_bytes_field(&mut out, METADATA, &stamped);
    out.extend_from_slice(&message[metadata_field.whole.end..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn slow(value: &Value, rv: u64, annotation: Option<(&str, &str)>) -> Value {
        let mut value = value.clone();
        value["metadata"]["resourceVersion"] = json!(rv.to_string());
        if let Some((key, text)) = annotation {
            value["metadata"]["annotations"][key] = json!(text);
        }
        value
    }

    #[test]
    fn a_restamped_object_equals_the_parsed_and_edited_one() {
        let mut pod = crate::fixtures::pod(7);
        pod["metadata"]["resourceVersion"] = json!("12");
        let mut bare = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a", "resourceVersion": "3" }, "data": { "k": "v \" } {" } });
        let mut empty_annotations = bare.clone();
        empty_annotations["metadata"]["annotations"] = json!({});
        bare["metadata"]["x"] = json!([1, { "y": "}" }, null, true, -2.5e3]);
        let key = "bench.kinformer.dev/emit-ns";
        for value in [pod, bare, empty_annotations] {
            let encoded = serde_json::to_vec(&value).expect("encodes");
            for annotation in [None, Some((key, "17")), Some((key, "a\"b"))] {
                let once = restamp(&encoded, 0, 99, annotation).expect("restamped");
                let parsed: Value = serde_json::from_slice(&once).expect("valid JSON");
                assert_eq!(parsed, slow(&value, 99, annotation));
                // Again over its own output: the annotation now exists and is replaced.
                let twice = restamp(&once, 0, 100, annotation).expect("restamped again");
                let parsed: Value = serde_json::from_slice(&twice).expect("valid JSON");
                assert_eq!(parsed, slow(&value, 100, annotation));
            }
        }
    }

    #[test]
    fn a_restamped_protobuf_message_equals_the_encoded_restamped_json() {
        use kinformer_protobuf::{encode_message, message_for};
        let pods = message_for("v1", "Pod").expect("Pods have a protobuf form");
        let config_maps = message_for("v1", "ConfigMap").expect("ConfigMaps have a protobuf form");
        let mut pod = crate::fixtures::pod(7);
        pod["metadata"]["resourceVersion"] = json!("12");
        let bare = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a", "resourceVersion": "3" }, "data": { "k": "v" } });
        let mut annotated = bare.clone();
        annotated["metadata"]["annotations"] = json!({ "a": "1", "z": "2" });
        let key = "bench.kinformer.dev/emit-ns";
        for (value, message) in [(pod, pods), (bare, config_maps), (annotated, config_maps)] {
            let encoded = encode_message(&value, message).expect("encodes");
            for annotation in [None, Some((key, "17")), Some(("a", "x")), Some(("zz", "y"))] {
                let once = restamp_protobuf(&encoded, 99, annotation).expect("restamped");
                let expected = encode_message(&slow(&value, 99, annotation), message);
                assert_eq!(Ok(once.clone()), expected, "{annotation:?}");
                let twice = restamp_protobuf(&once, 100, annotation).expect("restamped again");
                let expected = encode_message(&slow(&value, 100, annotation), message);
                assert_eq!(Ok(twice), expected, "{annotation:?}");
            }
        }
    }

    #[test]
    fn the_protobuf_field_numbers_are_the_object_meta_ones() {
        use kinformer_protobuf::{message_for, messages};
        let pods = message_for("v1", "Pod").expect("Pods have a protobuf form");
        assert_eq!(pods.field_number("metadata"), Some(METADATA));
        let meta = &messages::OBJECT_META;
        assert!(std::ptr::eq(
            pods.field_message("metadata").expect("nested"),
            meta
        ));
        assert_eq!(meta.field_number("resourceVersion"), Some(RESOURCE_VERSION));
        assert_eq!(meta.field_number("annotations"), Some(ANNOTATIONS));
    }

    #[test]
    fn an_unexpected_protobuf_shape_is_left_to_the_slow_path() {
        // No metadata; a metadata without resourceVersion; a truncated field.
        for odd in [&b""[..], b"\x12\x00", b"\x0a\x02\x0a\x00", b"\x0a\x05\x32"] {
            assert_eq!(restamp_protobuf(odd, 2, None), None, "{odd:?}");
        }
    }

    #[test]
    fn an_unexpected_shape_is_left_to_the_slow_path() {
        for odd in [
            &br#"[1]"#[..],
            br#"{"metadata":{"name":"a"}}"#,
            br#"{"metadata":"x"}"#,
            br#"{"metadata":{"resourceVersion":"1","annotations":[1]}}"#,
            br#"{"metadata":{"resourceVersion":"1""#,
        ] {
            assert_eq!(restamp(odd, 0, 2, Some(("k", "v"))), None);
        }
        let typed = br#"{"apiVersion":"v1","metadata":{"resourceVersion":"1"}}"#;
        assert_eq!(restamp(typed, 40, 2, None), None, "metadata must not move");
    }
}
