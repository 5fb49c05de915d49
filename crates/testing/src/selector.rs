//! Label and field selectors, parsed and matched the way apiserver does for list and watch.

use serde_json::Value;

use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::store::Obj;

#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed `labelSelector`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

/// A parsed `fieldSelector`: `path=value`, `path==value`, `path!=value`, comma separated.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

fn parse_error(detail: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {detail}"))
}

fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(crate::store::valid_dns_subdomain);
    name_ok && prefix_ok
}

fn valid_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && value
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && value
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_alphanumeric()))
}

/// Splits on commas that are not inside a parenthesised value set.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
}

fn parse_set(rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| parse_error(format!("found '{rest}', expected: '('")))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    for value in &values {
        if !valid_label_value(value) {
            return Err(parse_error(format!("invalid label value: \"{value}\"")));
        }
    }
    Ok(values)
}

impl LabelSelector {
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
        let input = input.trim();
        if input.is_empty() {
            return Ok(Self::default());
        }
        let mut requirements = Vec::new();
        for raw in split_top_level(input) {
            let part = raw.trim();
            requirements.push(Self::parse_requirement(part)?);
        }
        Ok(Self { requirements })
    }

    fn parse_requirement(part: &str) -> Result<LabelRequirement, ApiError> {
        let check_key = |key: &str| -> Result<String, ApiError> {
            let key = key.trim();
            if valid_label_key(key) {
                Ok(key.to_owned())
            } else {
                Err(parse_error(format!("invalid label key \"{key}\"")))
            }
        };
        let check_value = |value: &str| -> Result<String, ApiError> {
            let value = value.trim();
            if valid_label_value(value) {
                Ok(value.to_owned())
            } else {
                Err(parse_error(format!("invalid label value: \"{value}\"")))
            }
        };
        if let Some(key) = part.strip_prefix('!') {
            return Ok(LabelRequirement::NotExists(check_key(key)?));
        }
        if let Some((key, value)) = part.split_once("!=") {
            return Ok(LabelRequirement::NotEquals(
                check_key(key)?,
                check_value(value)?,
            ));
        }
        if let Some((key, value)) = part.split_once("==") {
            return Ok(LabelRequirement::Equals(
                check_key(key)?,
                check_value(value)?,
            ));
        }
        if let Some((key, value)) = part.split_once('=') {
            return Ok(LabelRequirement::Equals(
                check_key(key)?,
                check_value(value)?,
            ));
        }
        for (op, greater) in [('>', true), ('<', false)] {
            if let Some((key, value)) = part.split_once(op) {
                let number: i64 = value.trim().parse().map_err(|_| {
                    parse_error(format!(
                        "for 'Gt', 'Lt' operators, the value must be an integer: {value}"
                    ))
                })?;
                let key = check_key(key)?;
                return Ok(if greater {
                    LabelRequirement::GreaterThan(key, number)
                } else {
                    LabelRequirement::LessThan(key, number)
                });
            }
        }
        if let Some(open) = part.find('(') {
            let head = part[..open].trim();
            let set = parse_set(&part[open..])?;
            if let Some(key) = head.strip_suffix(" notin") {
                return Ok(LabelRequirement::NotIn(check_key(key)?, set));
            }
            if let Some(key) = head.strip_suffix(" in") {
                return Ok(LabelRequirement::In(check_key(key)?, set));
            }
            return Err(parse_error(format!(
                "found '{head}', expected: in, notin, =, ==, !=, gt, lt"
            )));
        }
        if part.contains(char::is_whitespace) {
            return Err(parse_error(format!(
                "found '{part}', expected: in, notin, =, ==, !=, gt, lt"
            )));
        }
        Ok(LabelRequirement::Exists(check_key(part)?))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    #[cfg(test)]
    fn matches(&self, object: &Value) -> bool {
        self.matches_labels(
            object
                .pointer("/metadata/labels")
                .and_then(Value::as_object),
        )
    }

    pub(crate) fn matches_labels(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                LabelRequirement::Equals(k, v) => get(k) == Some(v.as_str()),
                LabelRequirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
                LabelRequirement::In(k, set) => get(k).is_some_and(|v| set.iter().any(|s| s == v)),
                LabelRequirement::NotIn(k, set) => {
                    !get(k).is_some_and(|v| set.iter().any(|s| s == v))
                }
                LabelRequirement::Exists(k) => get(k).is_some(),
                LabelRequirement::NotExists(k) => get(k).is_none(),
                LabelRequirement::GreaterThan(k, n) => get(k)
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *n),
                LabelRequirement::LessThan(k, n) => get(k)
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *n),
            })
    }
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

/// Both selectors of a list or watch request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selectors {
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

impl Selectors {
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Obj) -> bool {
        self.labels.matches_labels(obj.labels.as_ref()) && self.fields.matches_obj(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: &Value) -> Value {
        json!({ "metadata": { "name": "a", "namespace": "ns", "labels": labels }, "spec": { "nodeName": "n1" } })
    }

    #[test]
    fn every_label_operator_matches_as_kubernetes_does() {
        let object = pod(&json!({ "app": "web", "tier": "front", "n": "5" }));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing!=x", true),
            ("app=web,tier=back", false),
            ("n>4", true),
            ("n<4", false),
            ("", true),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).expect(selector);
            assert_eq!(parsed.matches(&object), expected, "{selector}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_bad_requests() {
        for selector in ["app in web", "a b", "app=(x", "=x", "app>x"] {
            let error = LabelSelector::parse(selector).expect_err(selector);
            assert_eq!(error.code, 400, "{selector}");
            assert_eq!(error.reason, "BadRequest");
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
