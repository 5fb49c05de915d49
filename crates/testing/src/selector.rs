//! Label and field selectors, parsed and matched the way apiserver does for list and watch.
//!
//! The label parser is a port of apimachinery's `labels.Parse` (lexer, grammar, order of checks
//! and error texts), kept apart from kinformer-store's `parse_selector` on purpose: the store's
//! parser yields a kube-core `Selector`, which has no `>`/`<` requirements (kube-apiserver
//! accepts them), and it reports errors in its own words with byte offsets, while a client of
//! this server must see kube-apiserver's exact 400 message (`unable to parse requirement: ...`).

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

const QUALIFIED_NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex \
used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

const LABEL_VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric \
characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', \
or 'my_value', or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

const DNS_SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. \
'example.com', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn qualified_name_part(name: &str) -> bool {
    !name.is_empty()
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
            .is_some_and(|c| c.is_ascii_alphanumeric())
}

/// apimachinery's `validation.IsQualifiedName`: every problem, in its order and words.
fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > 253 {
                    errors.push("prefix part must be no more than 253 characters".to_owned());
                }
                if !crate::store::valid_dns_subdomain(prefix) {
                    errors.push(format!("prefix part {DNS_SUBDOMAIN_RULE}"));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_RULE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !qualified_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_RULE}"));
    }
    errors
}

/// apimachinery's `validation.IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !qualified_name_part(value) {
        errors.push(LABEL_VALUE_RULE.to_owned());
    }
    errors
}

/// A `field.Invalid` error as Go prints it: `path: Invalid value: "value": detail`.
fn invalid(path: &str, value: &str, details: &[String]) -> String {
    format!("{path}: Invalid value: {value:?}: {}", details.join("; "))
}

/// The tokens of apimachinery's label selector lexer (`labels.Token`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(text: &str) -> Option<Token> {
    Some(match text {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_special_symbol(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

/// apimachinery's `labels.Lexer` over the whole input: a NUL byte ends it, as in Go.
fn lex(input: &str) -> Vec<(Token, String)> {
    let bytes = input.as_bytes();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let mut at = 0;
    let mut tokens = Vec::new();
    loop {
        while at < end && is_whitespace(bytes[at]) {
            at += 1;
        }
        if at >= end {
            tokens.push((Token::EndOfString, String::new()));
            return tokens;
        }
        let start = at;
        if is_special_symbol(bytes[at]) {
            // The longest run of symbols that still spells a token, as scanSpecialSymbol reads.
            let mut last: Option<(Token, usize)> = None;
            while at < end && is_special_symbol(bytes[at]) {
                match keyword(&input[start..=at]) {
                    Some(token) => last = Some((token, at + 1)),
                    None if last.is_some() => break,
                    None => {}
                }
                at += 1;
            }
            match last {
                Some((token, stop)) => {
                    tokens.push((token, input[start..stop].to_owned()));
                    at = stop;
                }
                None => tokens.push((
                    Token::Error,
                    format!("error expected: keyword found '{}'", &input[start..at]),
                )),
            }
        } else {
            while at < end && !is_whitespace(bytes[at]) && !is_special_symbol(bytes[at]) {
                at += 1;
            }
            let text = &input[start..at];
            let token = match keyword(text) {
                Some(token @ (Token::In | Token::NotIn)) => token,
                _ => Token::Identifier,
            };
            tokens.push((token, text.to_owned()));
        }
    }
}

/// apimachinery's `labels.Parser`: the same grammar, in the same order of checks, with the same
/// error texts, so a bad selector gets kube-apiserver's very message.
struct Parser {
    tokens: Vec<(Token, String)>,
    position: usize,
}

/// Inside a value list, `in` and `notin` are plain words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn lookahead(&self, context: Context) -> (Token, String) {
        let (token, literal) = self
            .tokens
            .get(self.position)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        let token = match token {
            Token::In | Token::NotIn if context == Context::Values => Token::Identifier,
            other => other,
        };
        (token, literal)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        if self.position < self.tokens.len() {
            self.position += 1;
        }
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (token, literal) = self.consume(Context::Values);
        let negated = token == Token::DoesNotExist;
        let (token, key) = if negated {
            self.consume(Context::Values)
        } else {
            (token, literal)
        };
        if token != Token::Identifier {
            return Err(format!("found '{key}', expected: identifier"));
        }
        let errors = qualified_name_errors(&key);
        if !errors.is_empty() {
            // labels.Parse validates the key with no field path, which Go prints as "<nil>".
            return Err(invalid("<nil>", &key, &errors));
        }
        let (next, _) = self.lookahead(Context::Values);
        if negated {
            return Ok(LabelRequirement::NotExists(key));
        }
        if next == Token::EndOfString || next == Token::Comma {
            return Ok(LabelRequirement::Exists(key));
        }
        let (operator, literal) = self.consume(Context::KeyAndOperator);
        let requirement = match operator {
            Token::In | Token::NotIn => {
                let values = self.parse_values()?;
                check_values(&key, &values)?;
                if operator == Token::In {
                    LabelRequirement::In(key, values)
                } else {
                    LabelRequirement::NotIn(key, values)
                }
            }
            Token::Equals | Token::DoubleEquals | Token::NotEquals => {
                let value = self.parse_exact_value()?;
                check_values(&key, std::slice::from_ref(&value))?;
                if operator == Token::NotEquals {
                    LabelRequirement::NotEquals(key, value)
                } else {
                    LabelRequirement::Equals(key, value)
                }
            }
            Token::GreaterThan | Token::LessThan => {
                let value = self.parse_exact_value()?;
                let mut errors = Vec::new();
                let number = value.parse::<i64>();
                if number.is_err() {
                    errors.push(invalid(
                        "values[0]",
                        &value,
                        &["for 'Gt', 'Lt' operators, the value must be an integer".to_owned()],
                    ));
                }
                if let Err(error) = check_values(&key, std::slice::from_ref(&value)) {
                    errors.push(error);
                }
                match number {
                    Ok(number) if errors.is_empty() => {
                        if operator == Token::GreaterThan {
                            LabelRequirement::GreaterThan(key, number)
                        } else {
                            LabelRequirement::LessThan(key, number)
                        }
                    }
                    _ => return Err(aggregate(errors)),
                }
            }
            _ => return Err(format!("found '{literal}', expected: {BINARY_OPERATORS}")),
        };
        Ok(requirement)
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    // Go names the token after '(' here, not the one it found.
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut values: Vec<String> = Vec::new();
        let insert = |values: &mut Vec<String>, value: String| {
            if !values.contains(&value) {
                values.push(value);
            }
        };
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    insert(&mut values, literal);
                    let (next, literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{literal}', expected: ',' or ')'")),
                    }
                }
                // "(," "a,,b" and ",)" each hold an empty value.
                Token::Comma => {
                    if values.is_empty() {
                        insert(&mut values, String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            insert(&mut values, String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            insert(&mut values, String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<String, String> {
        let (token, _) = self.lookahead(Context::Values);
        if token == Token::EndOfString || token == Token::Comma {
            return Ok(String::new());
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(literal)
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

/// `NewRequirement`'s value checks, as one aggregated message.
fn check_values(key: &str, values: &[String]) -> Result<(), String> {
    let errors: Vec<String> = values
        .iter()
        .enumerate()
        .filter_map(|(i, value)| {
            let problems = label_value_errors(value);
            (!problems.is_empty())
                .then(|| invalid(&format!("values[{i}][{key}]"), value, &problems))
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(aggregate(errors))
    }
}

/// How Go prints an `errors.Aggregate`: one message alone, several in brackets.
fn aggregate(mut errors: Vec<String>) -> String {
    errors.dedup();
    if errors.len() == 1 {
        errors.remove(0)
    } else {
        format!("[{}]", errors.join(", "))
    }
}

impl LabelSelector {
    /// Parses with apimachinery's `labels.Parse` grammar; a failure is a 400 carrying its text.
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
        let mut parser = Parser {
            tokens: lex(input),
            position: 0,
        };
        parser
            .parse()
            .map(|requirements| Self { requirements })
            .map_err(ApiError::bad_request)
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

    /// Messages taken from apimachinery's `labels.Parse` (selector.go and its tests).
    #[test]
    fn malformed_label_selectors_get_the_message_labels_parse_gives() {
        let cases = [
            (
                "a in (",
                "unable to parse requirement: found '', expected: ',', ')' or identifier",
            ),
            (
                "app in web",
                "unable to parse requirement: found 'web' expected: '('",
            ),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "app=(x",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "=x",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            ("a,", "found '', expected: identifier after ','"),
            (
                "a in (x y)",
                "unable to parse requirement: found 'y', expected: ',' or ')'",
            ),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            (
                "a>x",
                "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "-a=b",
                "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            (
                "a=-b",
                "unable to parse requirement: values[0][a]: Invalid value: \"-b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
        ];
        for (selector, message) in cases {
            let error = LabelSelector::parse(selector).expect_err(selector);
            assert_eq!(error.code, 400, "{selector}");
            assert_eq!(error.message, message, "{selector}");
        }
    }

    /// Ported from apimachinery's TestLexer and TestParserLookahead cases that parse.
    #[test]
    fn selectors_labels_parse_accepts_parse_the_same_way() {
        let object = pod(&json!({ "x": "", "y": "b", "in": "in" }));
        let cases = [
            ("x in (,)", true),
            ("x in (,b)", true),
            ("x in ()", true),
            ("x notin ()", false),
            ("y in (a,,b)", true),
            ("y=", false),
            ("x=,y=b", true),
            ("in in (in)", true),
            ("!z", true),
            ("   ", true),
            ("y == b", true),
            ("y != b", false),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).expect(selector);
            assert_eq!(parsed.matches(&object), expected, "{selector}");
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
