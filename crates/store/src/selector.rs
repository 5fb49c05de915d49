//! Label selectors in their string form (`app=web,tier in (db,cache),!canary,replicas>2`).
//!
//! [`LabelSelector::parse`] is a port of apimachinery's `labels.Parse`: the same lexer, grammar
//! and order of checks, the same validation of keys and values and the same error texts, so a
//! selector kube-apiserver accepts parses here to the same requirements, and one it refuses is
//! refused with kube-apiserver's very message. kube-core already has a [`Selector`] that matches
//! label sets and renders itself as a string, but it cannot parse one and has no `>`/`<`;
//! [`parse_selector`] reads the same grammar into it, for the listers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use kube_core::{Expression, Selector, SelectorExt};

use crate::{Error, Result};

/// Parses a label selector string into a kube-core [`Selector`].
///
/// The grammar is apimachinery's (see [`LabelSelector::parse`]): comma-separated requirements,
/// each one of
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
/// Whitespace around tokens is ignored; a value may be empty (`key=` selects an empty label,
/// `key in ()` holds the one empty value). The empty string selects everything, as client-go's
/// `labels.Everything()` does.
///
/// # Errors
///
/// [`Error::InvalidSelector`] with the byte offset of the offending token and, as its reason,
/// the message `labels.Parse` gives (a key that is not a qualified name, a value that is not a
/// valid label value, a missing `(` or `)`, an unexpected token), or, for `>` and `<`, that
/// kube-core's `Selector` has no numeric comparisons ([`LabelSelector::parse`] reads them).
///
/// # Example
///
/// ```
/// use kinformer_store::parse_selector;
///
/// let selector = parse_selector("app=web, tier in (db,cache), !canary")?;
/// assert_eq!(selector.to_string(), "app=web,tier in (cache,db),!canary");
/// # Ok::<(), kinformer_store::Error>(())
/// ```
#[doc(alias("Parse", "labels.Parse"))]
pub fn parse_selector(input: &str) -> Result<Selector> {
    let requirements = parse(input, false)?;
    Ok(requirements
        .iter()
        .filter_map(LabelRequirement::to_expression)
        .collect())
}

/// Whether `selector` accepts an object's labels; an object without labels has the empty set.
pub(crate) fn selector_matches(
    selector: &Selector,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    selector.selects_all() || selector.matches(labels.unwrap_or(&EMPTY))
}

/// A label selector as apimachinery parses it: every requirement must hold.
///
/// Unlike kube-core's [`Selector`] it carries the `>` and `<` requirements kube-apiserver
/// accepts, and it matches labels held in any map: what code that answers label selectors as
/// kube-apiserver does needs (kinformer-testing's fake API server). A [`Lister`](crate::Lister)
/// takes a kube-core [`Selector`], which [`parse_selector`] reads from the same grammar.
///
/// ```
/// use std::collections::BTreeMap;
///
/// use kinformer_store::LabelSelector;
///
/// let selector = LabelSelector::parse("app in (web,api), replicas>2")?;
/// let labels = BTreeMap::from([
///     ("app".to_owned(), "web".to_owned()),
///     ("replicas".to_owned(), "3".to_owned()),
/// ]);
/// assert!(selector.matches_with(|key| labels.get(key).map(String::as_str)));
/// assert_eq!(selector.to_string(), "app in (api,web),replicas>2");
///
/// let error = LabelSelector::parse("app in (web").unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "invalid label selector \"app in (web\" at byte 11: \
///      unable to parse requirement: found '', expected: ',' or ')'"
/// );
/// # Ok::<(), kinformer_store::Error>(())
/// ```
#[doc(alias = "labels.Selector")]
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

/// One requirement of a [`LabelSelector`], as apimachinery's `labels.Requirement`.
///
/// The variants follow kube-core's [`Expression`], plus the integer comparisons.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum LabelRequirement {
    /// `key=value` or `key==value`: the label is present and equal.
    Equal(String, String),
    /// `key!=value`: the label is absent or different.
    NotEqual(String, String),
    /// `key in (v1,v2)`: the label is present and one of the values.
    In(String, BTreeSet<String>),
    /// `key notin (v1,v2)`: the label is absent or none of the values.
    NotIn(String, BTreeSet<String>),
    /// `key`: the label is present.
    Exists(String),
    /// `!key`: the label is absent.
    DoesNotExist(String),
    /// `key>n`: the label is present, an integer, and greater than `n`.
    GreaterThan(String, i64),
    /// `key<n`: the label is present, an integer, and less than `n`.
    LessThan(String, i64),
}

impl LabelSelector {
    /// Parses `input` as apimachinery's `labels.Parse` does.
    ///
    /// Beyond [`parse_selector`]'s grammar it reads `key>n` and `key<n`, whose `n` must be a
    /// 64-bit integer. Keys must be qualified names (`[prefix/]name`, the prefix a lowercase DNS
    /// subdomain), values valid label values; the lexer splits on ASCII whitespace (space, tab,
    /// CR, LF) and the special characters `=!(),<>`, and reads `in` and `notin` as plain words
    /// where a value is expected, all as in Go.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSelector`] whose `reason` is the message `labels.Parse` gives (what
    /// kube-apiserver answers a bad `labelSelector` with, in a 400), e.g.
    /// `unable to parse requirement: found '', expected: ',' or ')'`, and whose `position` is
    /// the byte offset of the token the message is about.
    #[doc(alias = "labels.Parse")]
    pub fn parse(input: &str) -> Result<Self> {
        parse(input, true).map(|requirements| Self { requirements })
    }

    /// Whether this selector has no requirement and so selects everything.
    pub fn selects_all(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the labels that `label` looks up (by key; `None` when absent) satisfy every
    /// requirement, whatever map holds them.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements
            .iter()
            .all(|requirement| requirement.matches(label(requirement.key())))
    }
}

impl FromStr for LabelSelector {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self> {
        Self::parse(input)
    }
}

/// As apimachinery's `Selector.String()`: requirements joined by `,`, sets sorted.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rendered: Vec<String> = self.requirements.iter().map(ToString::to_string).collect();
        f.write_str(&rendered.join(","))
    }
}

impl LabelRequirement {
    /// The label key the requirement is about.
    pub(crate) fn key(&self) -> &str {
        match self {
            Self::Equal(key, _) | Self::NotEqual(key, _) => key,
            Self::In(key, _) | Self::NotIn(key, _) => key,
            Self::Exists(key) | Self::DoesNotExist(key) => key,
            Self::GreaterThan(key, _) | Self::LessThan(key, _) => key,
        }
    }

    /// Whether the label's value (`None` when the label is absent) satisfies the requirement,
    /// as `Requirement.Matches` decides: a `>` or `<` needs a label that parses as an integer.
    pub(crate) fn matches(&self, value: Option<&str>) -> bool {
        let number = || value.and_then(|value| value.parse::<i64>().ok());
        match self {
            Self::Equal(_, expected) => value == Some(expected.as_str()),
            Self::NotEqual(_, unwanted) => value != Some(unwanted.as_str()),
            Self::In(_, values) => value.is_some_and(|value| values.contains(value)),
            Self::NotIn(_, values) => !value.is_some_and(|value| values.contains(value)),
            Self::Exists(_) => value.is_some(),
            Self::DoesNotExist(_) => value.is_none(),
            Self::GreaterThan(_, bound) => number().is_some_and(|n| n > *bound),
            Self::LessThan(_, bound) => number().is_some_and(|n| n < *bound),
        }
    }

    /// The same requirement as a kube-core [`Expression`]; `None` for `>` and `<`.
    pub(crate) fn to_expression(&self) -> Option<Expression> {
        Some(match self.clone() {
            Self::Equal(key, value) => Expression::Equal(key, value),
            Self::NotEqual(key, value) => Expression::NotEqual(key, value),
            Self::In(key, values) => Expression::In(key, values),
            Self::NotIn(key, values) => Expression::NotIn(key, values),
            Self::Exists(key) => Expression::Exists(key),
            Self::DoesNotExist(key) => Expression::DoesNotExist(key),
            Self::GreaterThan(..) | Self::LessThan(..) => return None,
        })
    }
}

/// As apimachinery's `Requirement.String()` (`==` is written `=`).
impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |values: &BTreeSet<String>| Vec::from_iter(values.iter().cloned()).join(",");
        match self {
            Self::Equal(key, value) => write!(f, "{key}={value}"),
            Self::NotEqual(key, value) => write!(f, "{key}!={value}"),
            Self::In(key, values) => write!(f, "{key} in ({})", set(values)),
            Self::NotIn(key, values) => write!(f, "{key} notin ({})", set(values)),
            Self::Exists(key) => write!(f, "{key}"),
            Self::DoesNotExist(key) => write!(f, "!{key}"),
            Self::GreaterThan(key, bound) => write!(f, "{key}>{bound}"),
            Self::LessThan(key, bound) => write!(f, "{key}<{bound}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The lexer: apimachinery's `labels.Lexer`, byte for byte.

/// apimachinery's lexer tokens. Its `ErrorToken` cannot occur (every special character alone
/// spells a token), so it has no counterpart here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
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

/// A token, its text and the byte offset it starts at.
#[derive(Debug, Clone, Copy)]
struct Scanned<'a> {
    token: Token,
    literal: &'a str,
    at: usize,
}

impl<'a> Scanned<'a> {
    fn new(token: Token, literal: &'a str, at: usize) -> Self {
        Self { token, literal, at }
    }
}

/// `string2token`.
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

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Scans tokens up to and including the first end of string, as `Parser.scan` does.
///
/// As in Go, the lexer reads bytes and takes a NUL byte for the end: at the start of a token it
/// ends the input, inside one it ends the token and is skipped.
fn scan(input: &str) -> Vec<Scanned<'_>> {
    let bytes = input.as_bytes();
    let mut pos = 0;
    // `Lexer.read`: the byte at `pos` and a step past it, or 0 (and no step) at the end.
    let read = |pos: &mut usize| match bytes.get(*pos) {
        Some(&byte) => {
            *pos += 1;
            byte
        }
        None => 0,
    };
    let mut items = Vec::new();
    loop {
        let mut at = pos;
        let mut ch = read(&mut pos);
        while is_whitespace(ch) {
            at = pos;
            ch = read(&mut pos);
        }
        if ch == 0 {
            items.push(Scanned::new(Token::EndOfString, "", at));
            return items;
        }
        pos = at;
        let (token, end) = if is_special_symbol(ch) {
            // `scanSpecialSymbol`: the longest run of symbols that spells a token. The first
            // symbol alone always does, so the scan ends at the first run that does not.
            let mut last = (Token::EndOfString, pos);
            loop {
                let before = pos;
                let ch = read(&mut pos);
                let symbol = ch != 0 && is_special_symbol(ch);
                match symbol.then(|| keyword(&input[at..pos])).flatten() {
                    Some(token) => last = (token, pos),
                    None => {
                        // `unread`, but a NUL byte stays read.
                        pos = if ch == 0 { pos } else { before };
                        break;
                    }
                }
            }
            last
        } else {
            // `scanIDOrKeyword`.
            let end = loop {
                let before = pos;
                let ch = read(&mut pos);
                if ch == 0 || is_special_symbol(ch) || is_whitespace(ch) {
                    pos = if ch == 0 { pos } else { before };
                    break before;
                }
            };
            (keyword(&input[at..end]).unwrap_or(Token::Identifier), end)
        };
        items.push(Scanned::new(token, &input[at..end], at));
    }
}

// ---------------------------------------------------------------------------------------------
// The parser: apimachinery's `labels.Parser`, in the same order of checks and with its texts.

/// A parse failure: the message `labels.Parse` gives and the offset of the token it is about.
#[derive(Debug)]
struct Failure {
    at: usize,
    message: String,
}

/// `found 'X', expected: ...`, at X: most of the parser's messages.
fn found(item: Scanned<'_>, expected: &str) -> Failure {
    let message = format!("found '{}', expected: {expected}", item.literal);
    Failure {
        at: item.at,
        message,
    }
}

/// Where `in` and `notin` are keywords (after a key) and where they are plain words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser<'a> {
    items: Vec<Scanned<'a>>,
    position: usize,
    /// Whether `>` and `<` are read (kube-core's `Selector` cannot hold them).
    numeric: bool,
}

fn parse(input: &str, numeric: bool) -> Result<Vec<LabelRequirement>> {
    let items = scan(input);
    let mut parser = Parser {
        items,
        position: 0,
        numeric,
    };
    parser.parse().map_err(|failure| Error::InvalidSelector {
        selector: input.to_owned(),
        position: failure.at,
        reason: failure.message,
    })
}

impl<'a> Parser<'a> {
    fn lookahead(&self, context: Context) -> Scanned<'a> {
        let mut item = self.items[self.position.min(self.items.len() - 1)];
        if context == Context::Values && matches!(item.token, Token::In | Token::NotIn) {
            item.token = Token::Identifier;
        }
        item
    }

    fn consume(&mut self, context: Context) -> Scanned<'a> {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, Failure> {
        let mut requirements = Vec::new();
        loop {
            let item = self.lookahead(Context::Values);
            match item.token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self.parse_requirement().map_err(|failure| Failure {
                        message: format!("unable to parse requirement: {}", failure.message),
                        ..failure
                    })?;
                    requirements.push(requirement);
                    let next = self.consume(Context::Values);
                    match next.token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let after = self.lookahead(Context::Values);
                            if !matches!(after.token, Token::Identifier | Token::DoesNotExist) {
                                return Err(found(after, "identifier after ','"));
                            }
                        }
                        _ => return Err(found(next, "',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => return Err(found(item, "!, identifier, or 'end of string'")),
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, Failure> {
        use LabelRequirement as R;
        // `parseKeyAndInferOperator`.
        let mut key = self.consume(Context::Values);
        let negated = key.token == Token::DoesNotExist;
        if negated {
            key = self.consume(Context::Values);
        }
        if key.token != Token::Identifier {
            return Err(found(key, "identifier"));
        }
        let errors = qualified_name_errors(key.literal);
        if !errors.is_empty() {
            // labels.Parse validates the key under no field path, which Go prints as "<nil>".
            let message = invalid("<nil>", key.literal, &errors);
            return Err(Failure {
                at: key.at,
                message,
            });
        }
        let name = key.literal.to_owned();
        let next = self.lookahead(Context::Values).token;
        if negated {
            return Ok(R::DoesNotExist(name));
        } else if matches!(next, Token::EndOfString | Token::Comma) {
            return Ok(R::Exists(name));
        }
        // `parseOperator`, then the values and `NewRequirement`'s checks of them.
        let operator = self.consume(Context::KeyAndOperator);
        match operator.token {
            Token::In | Token::NotIn => {
                let values = self.parse_values()?;
                check_values(&name, &values)?;
                let values = values.into_keys().collect();
                Ok(match operator.token {
                    Token::In => R::In(name, values),
                    _ => R::NotIn(name, values),
                })
            }
            Token::Equals | Token::DoubleEquals | Token::NotEquals => {
                let (value, at) = self.parse_exact_value()?;
                check_values(&name, &BTreeMap::from([(value.clone(), at)]))?;
                Ok(match operator.token {
                    Token::NotEquals => R::NotEqual(name, value),
                    _ => R::Equal(name, value),
                })
            }
            Token::GreaterThan | Token::LessThan if !self.numeric => Err(Failure {
                at: operator.at,
                message: format!(
                    "operator '{}' is not supported: kube-core's Selector has no numeric \
                     comparisons (LabelSelector::parse reads them)",
                    operator.literal
                ),
            }),
            Token::GreaterThan | Token::LessThan => {
                let (value, at) = self.parse_exact_value()?;
                let number = value.parse::<i64>();
                let mut errors = Vec::new();
                if number.is_err() {
                    let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
                    errors.push(invalid("values[0]", &value, &[detail.to_owned()]));
                }
                if let Err(failure) = check_values(&name, &BTreeMap::from([(value, at)])) {
                    errors.push(failure.message);
                }
                match (number, operator.token) {
                    (Ok(bound), Token::GreaterThan) if errors.is_empty() => {
                        Ok(R::GreaterThan(name, bound))
                    }
                    (Ok(bound), _) if errors.is_empty() => Ok(R::LessThan(name, bound)),
                    _ => Err(Failure {
                        at,
                        message: aggregate(errors),
                    }),
                }
            }
            _ => Err(found(operator, "in, notin, =, ==, !=, gt, lt")),
        }
    }

    /// `parseValues`: `(v1,v2)`, each value with the offset it was first written at.
    fn parse_values(&mut self) -> Result<BTreeMap<String, usize>, Failure> {
        let open = self.consume(Context::Values);
        if open.token != Token::OpenPar {
            let message = format!("found '{}' expected: '('", open.literal);
            return Err(Failure {
                at: open.at,
                message,
            });
        }
        let first = self.lookahead(Context::Values);
        match first.token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let close = self.consume(Context::Values);
                if close.token != Token::ClosedPar {
                    // Go names the token after '(' here, not the one it found.
                    return Err(Failure {
                        at: close.at,
                        ..found(first, "')'")
                    });
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeMap::from([(String::new(), first.at)]))
            }
            _ => Err(found(first, "',', ')' or identifier")),
        }
    }

    /// `parseIdentifiersList`: `(,`, `,,` and `,)` each hold the empty value.
    fn parse_identifiers_list(&mut self) -> Result<BTreeMap<String, usize>, Failure> {
        let mut values = BTreeMap::new();
        loop {
            let item = self.consume(Context::Values);
            let next = self.lookahead(Context::Values);
            match (item.token, next.token) {
                (Token::Identifier, _) => {
                    values.entry(item.literal.to_owned()).or_insert(item.at);
                    match next.token {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(found(next, "',' or ')'")),
                    }
                }
                (Token::Comma, _) => {
                    if values.is_empty() {
                        values.insert(String::new(), item.at);
                    }
                    match next.token {
                        Token::ClosedPar => {
                            values.entry(String::new()).or_insert(next.at);
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.entry(String::new()).or_insert(next.at);
                        }
                        _ => {}
                    }
                }
                _ => return Err(found(item, "',', or identifier")),
            }
        }
    }

    /// `parseExactValue`: the value and its offset; nothing before `,` or the end is `""`.
    fn parse_exact_value(&mut self) -> Result<(String, usize), Failure> {
        let next = self.lookahead(Context::Values);
        if matches!(next.token, Token::EndOfString | Token::Comma) {
            return Ok((String::new(), next.at));
        }
        let value = self.consume(Context::Values);
        match value.token {
            Token::Identifier => Ok((value.literal.to_owned(), value.at)),
            _ => Err(found(value, "identifier")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Validation: apimachinery's `IsQualifiedName` and `IsValidLabelValue`, and how `NewRequirement`
// reports them.

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

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`.
fn is_dns_subdomain(text: &str) -> bool {
    text.split('.').all(|label| {
        let bytes = label.as_bytes();
        let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        bytes.first().is_some_and(edge)
            && bytes.last().is_some_and(edge)
            && bytes.iter().all(|b| edge(b) || *b == b'-')
    })
}

/// apimachinery's `validation.IsQualifiedName`: every problem, in its order and words.
fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > 253 {
                    errors.push("prefix part must be no more than 253 characters".to_owned());
                }
                if !is_dns_subdomain(prefix) {
                    errors.push(format!("prefix part {DNS_SUBDOMAIN_RULE}"));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_RULE} with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_qualified_name_part(name) {
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
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(LABEL_VALUE_RULE.to_owned());
    }
    errors
}

/// `NewRequirement`'s value checks, in the sorted order of the values (Go's `sets.String.List`),
/// as one aggregated message at the first bad value.
fn check_values(key: &str, values: &BTreeMap<String, usize>) -> Result<(), Failure> {
    let (mut errors, mut first_at) = (Vec::new(), None);
    for (i, (value, at)) in values.iter().enumerate() {
        let problems = label_value_errors(value);
        if !problems.is_empty() {
            first_at.get_or_insert(*at);
            errors.push(invalid(&format!("values[{i}][{key}]"), value, &problems));
        }
    }
    first_at.map_or(Ok(()), |at| {
        Err(Failure {
            at,
            message: aggregate(errors),
        })
    })
}

/// A `field.Invalid` error as Go prints it: `path: Invalid value: "value": detail; detail`.
fn invalid(path: &str, value: &str, details: &[String]) -> String {
    format!(
        "{path}: Invalid value: {}: {}",
        go_quote(value),
        details.join("; ")
    )
}

/// How Go prints an `errors.Aggregate` of field errors: repeated messages once, one message
/// alone, several in brackets.
fn aggregate(mut errors: Vec<String>) -> String {
    let mut seen = BTreeSet::new();
    errors.retain(|error| seen.insert(error.clone()));
    match errors.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", errors.join(", ")),
    }
}

/// Go's `%q` of a string (`strconv.Quote`): Go's escapes for quotes, backslashes and control
/// characters, and `\u` escapes for the non-printable characters Go escapes most often (spaces
/// other than U+0020, C1 controls, the common format characters).
fn go_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => out.extend(['\\', c]),
            '\u{7}'..='\u{d}' => out.extend(['\\', b"abtnvfr"[c as usize - 7] as char]),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control()
                || (c.is_whitespace() && c != ' ')
                || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
                    | '\u{2060}'..='\u{2064}' | '\u{feff}') =>
            {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
