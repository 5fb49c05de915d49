//! A JSON watch line read in one pass where it has the API server's shape.
//!
//! kube-apiserver writes every watch event as `{"type":"MODIFIED","object":{"kind":"Pod",
//! "apiVersion":"v1",...}}`: the type first, then the object, whose first two fields are its kind
//! and apiVersion. Read that way, the object's bytes and its kind are known without scanning the
//! line, so the object is the only thing parsed; read generically, the line was scanned once to
//! find the object and once more for its kind before the object was decoded. Lines of any other
//! shape (and anything the fast reading doubts) take the generic path.

use std::borrow::Cow;

use super::TypeFields;

/// The event type and the object's bytes of `line`, when it is `{"type":"T","object":{...}}`
/// exactly, with no whitespace between the tokens.
pub(super) fn split(line: &[u8]) -> Option<(&str, &[u8])> {
    let rest = line.strip_prefix(b"{\"type\":")?;
    let (event_type, rest) = plain_string(rest)?;
    let object = rest.strip_prefix(b",\"object\":")?;
    let object = object.trim_ascii_end().strip_suffix(b"}")?;
    // Only an object: a line with fields after it fails the object's own parse (trailing
    // characters) and goes the generic way.
    (object.first() == Some(&b'{')).then_some((event_type, object))
}

/// The object's kind and apiVersion when they are its first two fields, in either order.
pub(super) fn leading_type_fields(object: &[u8]) -> Option<TypeFields<'_>> {
    let mut rest = object.strip_prefix(b"{")?;
    let mut fields = TypeFields {
        api_version: None,
        kind: None,
    };
    for _ in 0..2 {
        let (key, after) = plain_string(rest)?;
        let (value, after) = plain_string(after.strip_prefix(b":")?)?;
        let field = match key {
            "kind" => &mut fields.kind,
            "apiVersion" => &mut fields.api_version,
            _ => return None,
        };
        if field.replace(Cow::Borrowed(value)).is_some() {
            return None;
        }
        rest = after.strip_prefix(b",")?;
    }
    Some(fields)
}

/// A JSON string without escapes at the start of `bytes`, and what follows it.
fn plain_string(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let rest = bytes.strip_prefix(b"\"")?;
    let end = rest.iter().position(|&byte| byte == b'"')?;
    let text = &rest[..end];
    if text.iter().any(|&byte| byte == b'\\' || byte < 0x20) {
        return None;
    }
    Some((std::str::from_utf8(text).ok()?, &rest[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_servers_shape_splits_into_type_and_object() {
        let line =
            br#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{}}}"#;
        let (event_type, object) = split(line).expect("the API server's shape");
        assert_eq!(event_type, "MODIFIED");
        assert_eq!(object, br#"{"kind":"Pod","apiVersion":"v1","metadata":{}}"#);
        let types = leading_type_fields(object).expect("kind and apiVersion lead");
        assert_eq!(types.kind.as_deref(), Some("Pod"));
        assert_eq!(types.api_version.as_deref(), Some("v1"));
        let swapped = br#"{"apiVersion":"v1","kind":"Pod","spec":{}}"#;
        assert_eq!(
            leading_type_fields(swapped).and_then(|t| t.kind),
            Some("Pod".into())
        );
    }

    #[test]
    fn any_other_shape_is_left_to_the_generic_path() {
        for line in [
            &br#"{"object":{"kind":"Pod"},"type":"ADDED"}"#[..],
            br#"{ "type":"ADDED","object":{}}"#,
            br#"{"type":"ADD\"ED","object":{}}"#,
            br#"{"type":"ADDED","object":[]}"#,
            br#"{"type":"ADDED","object":{}]"#,
            b"",
        ] {
            assert_eq!(split(line), None, "{}", String::from_utf8_lossy(line));
        }
        for object in [
            &br#"{"metadata":{},"kind":"Pod","apiVersion":"v1"}"#[..],
            br#"{"kind":"Pod","kind":"Secret","apiVersion":"v1"}"#,
            br#"{"kind":"Po\u0064","apiVersion":"v1","x":1}"#,
            br#"{"kind":"Pod","apiVersion":"v1"}"#,
            br#"{"kind":"Pod"}"#,
        ] {
            assert!(
                leading_type_fields(object).is_none(),
                "{}",
                String::from_utf8_lossy(object)
            );
        }
    }
}
