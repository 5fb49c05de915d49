//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902) over `serde_json::Value`.

use serde_json::Value;

/// Applies an RFC 7386 merge patch: objects merge, `null` deletes, anything else replaces.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_map) = target {
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.remove(key);
            } else {
                merge_patch(target_map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Splits a JSON pointer into its parent pointer and last token.
fn split_pointer(path: &str) -> Result<(&str, String), String> {
    let index = path
        .rfind('/')
        .ok_or_else(|| format!("invalid JSON pointer: {path:?}"))?;
    Ok((&path[..index], unescape(&path[index + 1..])))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(last, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= items.len())
                    .ok_or_else(|| format!("invalid array index {last:?} in {path:?}"))?
            };
            items.insert(index, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => map
            .remove(&last)
            .ok_or_else(|| format!("unable to remove nonexistent key: {last}: missing value")),
        Some(Value::Array(items)) => {
            let index = last
                .parse::<usize>()
                .ok()
                .filter(|i| *i < items.len())
                .ok_or_else(|| format!("invalid array index {last:?} in {path:?}"))?;
            Ok(items.remove(index))
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

/// Applies an RFC 6902 JSON patch; the message of an error is what apiserver would put in a 422.
pub(crate) fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let operations = patch
        .as_array()
        .ok_or_else(|| "a JSON patch must be an array of operations".to_owned())?;
    for operation in operations {
        let op = operation["op"].as_str().unwrap_or_default();
        let path = operation["path"].as_str().unwrap_or_default();
        let value = || {
            operation
                .get("value")
                .cloned()
                .ok_or_else(|| format!("missing value for {op} at {path:?}"))
        };
        match op {
            "add" => add(doc, path, value()?)?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => {
                remove(doc, path)?;
                add(doc, path, value()?)?;
            }
            "test" => {
                if doc.pointer(path) != Some(&value()?) {
                    return Err(format!("testing value {path} failed"));
                }
            }
            "move" | "copy" => {
                let from = operation["from"].as_str().unwrap_or_default();
                let moved = if op == "move" {
                    remove(doc, from)?
                } else {
                    doc.pointer(from)
                        .cloned()
                        .ok_or_else(|| format!("doc is missing from path: {from:?}"))?
                };
                add(doc, path, moved)?;
            }
            other => return Err(format!("Unexpected kind: {other}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The examples of RFC 7386 appendix A.
    #[test]
    fn merge_patch_follows_the_rfc_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (mut target, patch, expected) in cases {
            merge_patch(&mut target, &patch);
            assert_eq!(target, expected);
        }
    }

    #[test]
    fn json_patch_applies_operations_in_order_and_reports_failed_tests() {
        let mut doc = json!({"metadata":{"labels":{"a":"1"}},"list":[1,3]});
        json_patch(
            &mut doc,
            &json!([
                {"op":"add","path":"/metadata/labels/b","value":"2"},
                {"op":"add","path":"/list/1","value":2},
                {"op":"replace","path":"/metadata/labels/a","value":"x"},
                {"op":"remove","path":"/list/0"},
                {"op":"copy","from":"/metadata/labels/b","path":"/copied"},
            ]),
        )
        .expect("patch applies");
        assert_eq!(
            doc,
            json!({"metadata":{"labels":{"a":"x","b":"2"}},"list":[2,3],"copied":"2"})
        );
        let failed = json_patch(
            &mut doc,
            &json!([{"op":"test","path":"/copied","value":"3"}]),
        );
        assert!(failed.is_err());
    }
}
