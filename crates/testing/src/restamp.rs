//! Rewrites `metadata.resourceVersion` (and optionally one annotation) of stored JSON in place.
//!
//! Parsing a 6 KB Pod into a `serde_json::Value` and encoding it again costs tens of
//! microseconds; the bench updates and every deletion change only these two strings. A scan
//! that finds their byte ranges and splices new values in keeps the rest of the object as it
//! was stored, byte for byte, at a fraction of the cost. Anything the scan does not expect
//! (not an object, no resourceVersion, an annotation that is not a string map) makes it give
//! up, and the caller takes the parse-and-encode path instead.

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
