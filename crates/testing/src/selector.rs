//! Label and field selectors, parsed and matched the way apiserver does for list and watch.
//!
//! Label selectors are kinformer-store's [`LabelSelector`], its port of apimachinery's
//! `labels.Parse` (`>`/`<` and kube-apiserver's error texts included); what is left here is
//! the 400 a bad one gets, and field selectors, which only the server has.

use kinformer_store::{LabelSelector, Shard};
use serde_json::Value;

use crate::object::Obj;
use crate::resources::ResourceType;
use crate::status::ApiError;

/// A `labelSelector` parameter, parsed; a bad one is a 400 with `labels.Parse`'s message, which
/// is what kube-apiserver answers.
pub(crate) fn parse_labels(input: &str) -> Result<LabelSelector, ApiError> {
    LabelSelector::parse(input).map_err(|error| match error {
        kinformer_store::Error::InvalidSelector { reason, .. } => ApiError::bad_request(reason),
        other => ApiError::bad_request(other.to_string()),
    })
}

/// Whether an object's labels, as stored (a JSON map), satisfy `selector`.
fn labels_match(selector: &LabelSelector, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    selector.matches_with(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
}

/// A parsed `fieldSelector`: `path=value`, `path==value`, `path!=value`, comma separated.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

/// Reads a field by dotted path; numbers and booleans compare as their text, absent as "".
fn field_value(object: &Value, path: &str) -> String {
    let mut current = object;
    for segment in path.split('.') {
        match current.get(segment) {
            Some(next) => current = next,
            None => return String::new(),
        }
    }
    match current {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

impl FieldSelector {
    pub(crate) fn parse(input: &str, resource: &ResourceType) -> Result<Self, ApiError> {
        let input = input.trim();
        if input.is_empty() {
            return Ok(Self::default());
        }
        let mut requirements = Vec::new();
        for part in input.split(',') {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                )));
            };
            let path = path.trim();
            if !resource.supports_field(path) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {path}"
                )));
            }
            requirements.push((path.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self { requirements })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    #[cfg(test)]
    fn matches(&self, object: &Value) -> bool {
        self.requirements
            .iter()
            .all(|(path, equal, value)| (field_value(object, path) == *value) == *equal)
    }

    /// Reads name and namespace from the stored metadata; parses the object only for other paths.
    fn matches_obj(&self, obj: &Obj) -> bool {
        let mut parsed: Option<Value> = None;
        self.requirements.iter().all(|(path, equal, value)| {
            let actual = match path.as_str() {
                "metadata.name" => obj.name.clone(),
                "metadata.namespace" => obj.namespace.clone().unwrap_or_default(),
                other => field_value(parsed.get_or_insert_with(|| obj.value()), other),
            };
            (actual == *value) == *equal
        })
    }
}

/// A `shardSelector` parameter, parsed as kube-apiserver parses it with the
/// `ShardedListAndWatch` gate on (when `honoured`), or ignored, as with the gate off. A bad one
/// is not a `Status` error there: it reaches the client as a 500 with the parser's message.
pub(crate) fn parse_shard(input: Option<&str>, honoured: bool) -> Result<Option<Shard>, ApiError> {
    let Some(input) = input.filter(|_| honoured) else {
        return Ok(None);
    };
    if input.is_empty() {
        return Ok(None);
    }
    input.parse().map(Some).map_err(|error| match error {
        kinformer_store::Error::InvalidShard { reason, .. } => {
            ApiError::new(500, "", format!("invalid shard selector: {reason}"))
        }
        other => ApiError::new(500, "", other.to_string()),
    })
}

/// The selectors of a list or watch request: labels, fields and shard.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selectors {
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
    pub(crate) shard: Option<Shard>,
}

impl Selectors {
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.selects_all() && self.fields.is_empty() && self.shard.is_none()
    }

    pub(crate) fn matches(&self, obj: &Obj) -> bool {
        labels_match(&self.labels, obj.labels.as_ref())
            && self.fields.matches_obj(obj)
            && self.shard.as_ref().is_none_or(|shard| {
                shard.contains_fields(obj.uid.as_deref(), obj.namespace.as_deref())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: &Value) -> Value {
        json!({ "metadata": { "name": "a", "namespace": "ns", "labels": labels }, "spec": { "nodeName": "n1" } })
    }

    /// The parsing itself is kinformer-store's, tested there against apimachinery's cases.
    #[test]
    fn a_malformed_label_selector_is_a_bad_request_with_the_message_labels_parse_gives() {
        let error = parse_labels("a in (").expect_err("unterminated");
        assert_eq!(error.code, 400);
        assert_eq!(error.reason, "BadRequest");
        assert_eq!(
            error.message,
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
    }

    #[test]
    fn labels_are_read_from_the_stored_json_map() {
        let object = pod(&json!({ "app": "web", "n": "5", "odd": 1 }));
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        for (selector, expected) in [
            ("app=web,n>4", true),
            ("app in (db)", false),
            ("!missing", true),
            // A label that is not a string is no label at all.
            ("odd", false),
            ("", true),
        ] {
            let parsed = parse_labels(selector).expect(selector);
            assert_eq!(labels_match(&parsed, labels), expected, "{selector}");
        }
    }

    #[test]
    fn field_selectors_read_registered_paths_and_reject_others() {
        let pods = crate::resources::builtin_resources()
            .into_iter()
            .find(|r| r.plural == "pods")
            .expect("pods are built in");
        let object = pod(&json!({}));
        let selector = FieldSelector::parse("spec.nodeName=n1,metadata.name!=b", &pods)
            .expect("valid selector");
        assert!(selector.matches(&object));
        let error = FieldSelector::parse("spec.unknown=x", &pods).expect_err("unsupported");
        assert_eq!(error.message, "field label not supported: spec.unknown");
    }
}
