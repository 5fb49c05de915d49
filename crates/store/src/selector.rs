//! Label selectors in their string form (`app=web,tier in (db,cache),!canary`).
//!
//! kube-core already has a [`Selector`] that matches label sets and renders itself as a string,
//! but it cannot parse one. [`parse_selector`] fills that gap with the grammar of apimachinery's
//! `labels.Parse`, so a selector written for `kubectl get -l` works against the cache as well.

use std::collections::{BTreeMap, BTreeSet};

use kube_core::{Expression, Selector, SelectorExt};

use crate::{Error, Result};

/// Parses a label selector string into a kube-core [`Selector`].
///
/// The grammar is apimachinery's: comma-separated requirements, each one of
///
/// | form | meaning |
/// | --- | --- |
/// | `key=value`, `key==value` | the label is present and equal |
/// | `key!=value` | the label is absent or different |
/// | `key in (v1,v2)` | the label is present and one of the values |
/// | `key notin (v1,v2)` | the label is absent or none of the values |
/// | `key` | the label is present |
/// | `!key` | the label is absent |
///
/// Whitespace around tokens is ignored; a value may be empty (`key=` selects an empty label).
/// The empty string selects everything, as client-go's `labels.Everything()` does.
///
/// # Errors
///
/// [`Error::InvalidSelector`] naming the byte offset and what was expected there: an unknown or
/// unsupported operator (`>`, `<` are not representable in kube-core's `Selector`), an empty
/// `in ()` set, a missing `)`, a key that is not a qualified name or a value that is not a valid
/// label value.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
///
/// use kinformer_store::parse_selector;
/// use kube_core::SelectorExt;
///
/// let selector = parse_selector("app=web, tier in (db,cache), !canary")?;
/// let labels = BTreeMap::from([
///     ("app".to_owned(), "web".to_owned()),
///     ("tier".to_owned(), "db".to_owned()),
/// ]);
/// assert!(selector.matches(&labels));
/// # Ok::<(), kinformer_store::Error>(())
/// ```
#[doc(alias = "Parse")]
#[doc(alias = "labels.Parse")]
pub fn parse_selector(input: &str) -> Result<Selector> {
    Parser::new(input).parse()
}

/// Whether `selector` accepts an object's labels; an object without labels has the empty set.
pub fn selector_matches(selector: &Selector, labels: Option<&BTreeMap<String, String>>) -> bool {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    selector.selects_all() || selector.matches(labels.unwrap_or(&EMPTY))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Identifier(&'a str),
    /// `=` or `==`.
    Equals,
    NotEquals,
    /// `!` before a key.
    Bang,
    In,
    NotIn,
    OpenParen,
    CloseParen,
    Comma,
    /// `<` or `>`: apimachinery's numeric comparisons, which kube-core cannot represent.
    Unsupported(&'a str),
    End,
}

impl<'a> Token<'a> {
    /// The token as a key or value: apimachinery reads `in` and `notin` as plain words there.
    fn as_word(&self) -> Option<&'a str> {
        match self {
            Token::Identifier(word) => Some(word),
            Token::In => Some("in"),
            Token::NotIn => Some("notin"),
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Token::Identifier(text) => format!("identifier {text:?}"),
            Token::Equals => "'='".to_owned(),
            Token::NotEquals => "'!='".to_owned(),
            Token::Bang => "'!'".to_owned(),
            Token::In => "'in'".to_owned(),
            Token::NotIn => "'notin'".to_owned(),
            Token::OpenParen => "'('".to_owned(),
            Token::CloseParen => "')'".to_owned(),
            Token::Comma => "','".to_owned(),
            Token::Unsupported(text) => format!("operator {text:?}"),
            Token::End => "end of input".to_owned(),
        }
    }
}

struct Parser<'a> {
    input: &'a str,
    position: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Self { input, position: 0 }
    }

    fn error(&self, at: usize, reason: impl Into<String>) -> Error {
        Error::InvalidSelector {
            selector: self.input.to_owned(),
            position: at,
            reason: reason.into(),
        }
    }

    fn skip_whitespace(&mut self) {
        let rest = &self.input[self.position..];
        self.position += rest.len() - rest.trim_start().len();
    }

    /// The next token and the offset it starts at, without consuming it.
    fn peek(&mut self) -> (Token<'a>, usize, usize) {
        self.skip_whitespace();
        let start = self.position;
        let rest = &self.input[start..];
        let Some(first) = rest.chars().next() else {
            return (Token::End, start, start);
        };
        let (token, len) = match first {
            ',' => (Token::Comma, 1),
            '(' => (Token::OpenParen, 1),
            ')' => (Token::CloseParen, 1),
            '=' if rest.starts_with("==") => (Token::Equals, 2),
            '=' => (Token::Equals, 1),
            '!' if rest.starts_with("!=") => (Token::NotEquals, 2),
            '!' => (Token::Bang, 1),
            '<' | '>' => (Token::Unsupported(&rest[..1]), 1),
            _ => {
                let len = rest.find(is_special).unwrap_or(rest.len());
                let word = &rest[..len];
                let token = match word {
                    "in" => Token::In,
                    "notin" => Token::NotIn,
                    _ => Token::Identifier(word),
                };
                (token, len)
            }
        };
        (token, start, start + len)
    }

    fn next(&mut self) -> (Token<'a>, usize) {
        let (token, start, end) = self.peek();
        self.position = end;
        (token, start)
    }

    fn parse(mut self) -> Result<Selector> {
        let mut expressions = Vec::new();
        if self.peek().0 == Token::End {
            return Ok(Selector::default());
        }
        loop {
            expressions.push(self.requirement()?);
            match self.next() {
                (Token::End, _) => break,
                (Token::Comma, _) => {}
                (other, at) => {
                    return Err(self.error(
                        at,
                        format!("expected ',' or end, found {}", other.describe()),
                    ));
                }
            }
        }
        Ok(expressions.into_iter().collect())
    }

    fn requirement(&mut self) -> Result<Expression> {
        let (token, at) = self.next();
        if let Some(word) = token.as_word() {
            let key = self.validated_key(word, at)?;
            return self.operation(key);
        }
        match token {
            Token::Bang => {
                let key = self.key()?;
                // `!key` stands alone: an operator after it has no meaning.
                match self.peek() {
                    (Token::Comma | Token::End, _, _) => Ok(Expression::DoesNotExist(key)),
                    (other, other_at, _) => Err(self.error(
                        other_at,
                        format!(
                            "expected ',' or end after '!{key}', found {}",
                            other.describe()
                        ),
                    )),
                }
            }
            other => Err(self.error(
                at,
                format!("expected a label key or '!', found {}", other.describe()),
            )),
        }
    }

    fn key(&mut self) -> Result<String> {
        let (token, at) = self.next();
        match token.as_word() {
            Some(word) => self.validated_key(word, at),
            None => Err(self.error(
                at,
                format!("expected a label key, found {}", token.describe()),
            )),
        }
    }

    fn operation(&mut self, key: String) -> Result<Expression> {
        let (token, at) = self.next();
        match token {
            Token::Comma | Token::End => {
                // Give the separator back to the caller.
                self.position = at;
                Ok(Expression::Exists(key))
            }
            Token::Equals => Ok(Expression::Equal(key, self.exact_value()?)),
            Token::NotEquals => Ok(Expression::NotEqual(key, self.exact_value()?)),
            Token::In => Ok(Expression::In(key, self.value_set("in")?)),
            Token::NotIn => Ok(Expression::NotIn(key, self.value_set("notin")?)),
            Token::Unsupported(op) => Err(self.error(
                at,
                format!("operator {op:?} is not supported: kube-core's Selector has no numeric comparisons"),
            )),
            other => Err(self.error(
                at,
                format!("expected '=', '==', '!=', 'in' or 'notin' after key {key:?}, found {}", other.describe()),
            )),
        }
    }

    fn exact_value(&mut self) -> Result<String> {
        let (token, at, end) = self.peek();
        if let Some(word) = token.as_word() {
            self.position = end;
            return self.validated_value(word, at);
        }
        match token {
            Token::Comma | Token::End => Ok(String::new()),
            other => Err(self.error(at, format!("expected a value, found {}", other.describe()))),
        }
    }

    fn value_set(&mut self, operator: &str) -> Result<BTreeSet<String>> {
        match self.next() {
            (Token::OpenParen, _) => {}
            (other, at) => {
                return Err(self.error(
                    at,
                    format!(
                        "expected '(' after '{operator}', found {}",
                        other.describe()
                    ),
                ));
            }
        }
        let open_at = self.position - 1;
        let mut values = BTreeSet::new();
        // Each pass reads one (possibly empty) value and the separator after it, so `(a,,b)`
        // and `(,a)` hold the empty value, as apimachinery's parser does.
        loop {
            let (token, at, end) = self.peek();
            let value = match token.as_word() {
                Some(word) => {
                    self.position = end;
                    self.validated_value(word, at)?
                }
                None => String::new(),
            };
            match self.next() {
                (Token::Comma, _) => {
                    values.insert(value);
                }
                (Token::CloseParen, at) => {
                    if value.is_empty() && values.is_empty() {
                        return Err(
                            self.error(at, format!("the value set after '{operator}' is empty"))
                        );
                    }
                    values.insert(value);
                    return Ok(values);
                }
                (Token::End, at) => {
                    return Err(self.error(
                        at,
                        format!("unclosed '(' opened at {open_at}: expected ')'"),
                    ));
                }
                (other, at) => {
                    return Err(self.error(
                        at,
                        format!("expected ',' or ')', found {}", other.describe()),
                    ));
                }
            }
        }
    }

    fn validated_key(&self, key: &str, at: usize) -> Result<String> {
        validate_qualified_name(key)
            .map_err(|reason| self.error(at, format!("invalid label key {key:?}: {reason}")))?;
        Ok(key.to_owned())
    }

    fn validated_value(&self, value: &str, at: usize) -> Result<String> {
        validate_label_value(value)
            .map_err(|reason| self.error(at, format!("invalid label value {value:?}: {reason}")))?;
        Ok(value.to_owned())
    }
}

/// Characters that end an identifier, as in apimachinery's lexer.
fn is_special(c: char) -> bool {
    c.is_whitespace() || matches!(c, ',' | '=' | '!' | '(' | ')' | '<' | '>')
}

const NAME_MAX: usize = 63;
const PREFIX_MAX: usize = 253;

/// `[prefix/]name`: a DNS subdomain prefix and a 63-character name, as label keys must be.
fn validate_qualified_name(key: &str) -> std::result::Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("the prefix before '/' is empty".to_owned());
        }
        if prefix.len() > PREFIX_MAX {
            return Err(format!("the prefix is longer than {PREFIX_MAX} characters"));
        }
        let valid_labels = prefix.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= NAME_MAX
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
        if !valid_labels {
            return Err(
                "the prefix must be a lowercase DNS subdomain (e.g. example.com)".to_owned(),
            );
        }
    }
    if name.is_empty() {
        return Err("the name part is empty".to_owned());
    }
    validate_name_part(name)
}

/// Empty, or up to 63 alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn validate_label_value(value: &str) -> std::result::Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    validate_name_part(value)
}

fn validate_name_part(text: &str) -> std::result::Result<(), String> {
    if text.len() > NAME_MAX {
        return Err(format!("longer than {NAME_MAX} characters"));
    }
    let alphanumeric_ends = text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric());
    let allowed = text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if alphanumeric_ends && allowed {
        Ok(())
    } else {
        Err(
            "must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn set(values: &[&str]) -> BTreeSet<String> {
        values.iter().map(|value| (*value).to_owned()).collect()
    }

    fn position_of(err: Error) -> usize {
        match err {
            Error::InvalidSelector { position, .. } => position,
            other => panic!("expected InvalidSelector, got {other:?}"),
        }
    }

    #[test]
    fn every_operator_parses_to_its_expression() {
        let cases = [
            ("a=b", Expression::Equal("a".into(), "b".into())),
            ("a==b", Expression::Equal("a".into(), "b".into())),
            ("a!=b", Expression::NotEqual("a".into(), "b".into())),
            ("a in (b,c)", Expression::In("a".into(), set(&["b", "c"]))),
            ("a notin (b)", Expression::NotIn("a".into(), set(&["b"]))),
            ("a", Expression::Exists("a".into())),
            ("!a", Expression::DoesNotExist("a".into())),
            ("a=", Expression::Equal("a".into(), String::new())),
            (
                "in in (notin)",
                Expression::In("in".into(), set(&["notin"])),
            ),
            (
                "example.com/a = b",
                Expression::Equal("example.com/a".into(), "b".into()),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(
                parse_selector(input).unwrap(),
                Selector::from(expected),
                "{input:?}"
            );
        }
    }

    #[test]
    fn requirements_are_joined_by_commas_outside_parentheses() {
        let selector = parse_selector("x in (foo,,baz),y,z notin (a),!w,v!=1").unwrap();
        let expected: Selector = [
            Expression::In("x".into(), set(&["foo", "", "baz"])),
            Expression::Exists("y".into()),
            Expression::NotIn("z".into(), set(&["a"])),
            Expression::DoesNotExist("w".into()),
            Expression::NotEqual("v".into(), "1".into()),
        ]
        .into_iter()
        .collect();
        assert_eq!(selector, expected);
    }

    #[test]
    fn the_empty_selector_selects_everything() {
        for input in ["", "   "] {
            let selector = parse_selector(input).unwrap();
            assert!(selector.selects_all());
            assert!(selector_matches(&selector, None));
            assert!(selector_matches(&selector, Some(&labels(&[("a", "b")]))));
        }
    }

    /// Ported from apimachinery's `TestSelectorParse` and `TestLexerSequence` error cases.
    #[test]
    fn malformed_selectors_are_refused_with_the_offending_offset() {
        let cases = [
            ("x=a||y=b", 2),
            ("x==a==b", 4),
            ("!x=a", 2),
            ("x<a", 1),
            ("x>1", 1),
            ("x in (a", 7),
            ("x in a", 5),
            ("x in ()", 6),
            ("x notin (  )", 11),
            ("x,,y", 2),
            ("=a", 0),
            ("x=a b", 4),
            ("-x=a", 0),
            ("x=-a", 2),
            ("/x=a", 0),
            ("Example.com/x=a", 0),
        ];
        for (input, position) in cases {
            let err = parse_selector(input).expect_err(input);
            assert_eq!(position_of(err), position, "{input:?}");
        }
    }

    #[test]
    fn parse_errors_say_what_was_expected() {
        let err = parse_selector("app in (web").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid label selector \"app in (web\" at byte 11: unclosed '(' opened at 7: expected ')'"
        );
        let err = parse_selector("replicas>3").unwrap_err();
        assert!(err.to_string().contains("not supported"), "{err}");
        let long = "a".repeat(64);
        let err = parse_selector(&format!("app={long}")).unwrap_err();
        assert!(err.to_string().contains("longer than 63"), "{err}");
    }

    /// Ported from apimachinery's `TestSelectorMatches` and `TestEverything`.
    #[test]
    fn selectors_match_like_apimachinery() {
        let matching = [
            ("", vec![("x", "y")]),
            ("x=y", vec![("x", "y")]),
            ("x=y,z=w", vec![("x", "y"), ("z", "w")]),
            ("x!=y,z!=w", vec![("x", "z"), ("z", "a")]),
            ("notin=in", vec![("notin", "in")]),
            ("x", vec![("x", "z")]),
            ("!x", vec![("y", "z")]),
            ("x!=y", vec![]),
            ("x notin (y)", vec![]),
            ("x in (y,z)", vec![("x", "z")]),
            ("x=", vec![("x", "")]),
        ];
        for (input, pairs) in matching {
            let selector = parse_selector(input).unwrap();
            assert!(
                selector_matches(&selector, Some(&labels(&pairs))),
                "{input:?} should match {pairs:?}"
            );
        }
        let not_matching = [
            ("x=z", vec![]),
            ("x=y", vec![("x", "z")]),
            ("x=y,z=w", vec![("x", "w"), ("z", "w")]),
            ("x!=y,z!=w", vec![("x", "z"), ("z", "w")]),
            ("x", vec![("y", "z")]),
            ("!x", vec![("x", "z")]),
            ("x in (y)", vec![]),
            ("x notin (z)", vec![("x", "z")]),
        ];
        for (input, pairs) in not_matching {
            let selector = parse_selector(input).unwrap();
            assert!(
                !selector_matches(&selector, Some(&labels(&pairs))),
                "{input:?} should not match {pairs:?}"
            );
        }
        let selector = parse_selector("x=y").unwrap();
        assert!(
            !selector_matches(&selector, None),
            "an unlabelled object has no x"
        );
    }

    fn label_text() -> impl Strategy<Value = String> {
        "[a-z0-9]([a-z0-9_.-]{0,6}[a-z0-9])?"
    }

    fn dns_label() -> impl Strategy<Value = String> {
        "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?"
    }

    fn expression() -> impl Strategy<Value = Expression> {
        let key = prop_oneof![
            label_text(),
            (dns_label(), label_text()).prop_map(|(p, n)| format!("{p}.io/{n}"))
        ];
        let value = prop_oneof![Just(String::new()), label_text()];
        let values = proptest::collection::btree_set(label_text(), 1..4);
        (key, value, values, 0..6u8).prop_map(|(key, value, values, op)| match op {
            0 => Expression::Equal(key, value),
            1 => Expression::NotEqual(key, value),
            2 => Expression::In(key, values),
            3 => Expression::NotIn(key, values),
            4 => Expression::Exists(key),
            _ => Expression::DoesNotExist(key),
        })
    }

    proptest! {
        /// kube-core renders a selector as a string; parsing that string gives the selector back.
        #[test]
        fn rendered_selectors_parse_back_to_themselves(
            expressions in proptest::collection::vec(expression(), 0..5),
        ) {
            let selector: Selector = expressions.into_iter().collect();
            let rendered = selector.to_string();
            let parsed = parse_selector(&rendered);
            prop_assert_eq!(parsed.as_ref(), Ok(&selector), "{}", rendered);
        }

        /// The parser never panics, whatever it is fed (multi-byte characters included).
        #[test]
        fn arbitrary_input_never_panics(input in "[a-z=!,() <>in/.\u{e9}\u{3000}-]{0,24}") {
            let _ = parse_selector(&input);
        }
    }
}
