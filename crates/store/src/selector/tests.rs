//! The label-selector parser against apimachinery's `labels.Parse`: what it accepts, what each
//! requirement matches, and the message and offset of every refusal. Most cases are ported from
//! apimachinery's selector tests; the messages are kube-apiserver's for the same input.

use std::collections::{BTreeMap, BTreeSet};

use super::{LabelRequirement, LabelSelector, parse_selector, selector_matches};
use crate::Error;

/// What the tests read of a selector beyond the crate's own use: its requirements, a match
/// against a `BTreeMap`, and the kube-core form.
impl LabelSelector {
    fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// The same selector as a kube-core [`Selector`], or `None` when it has a `>` or `<`
    /// requirement, which kube-core cannot represent.
    fn to_selector(&self) -> Option<Selector> {
        self.requirements
            .iter()
            .map(LabelRequirement::to_expression)
            .collect()
    }
}

impl FromIterator<LabelRequirement> for LabelSelector {
    fn from_iter<I: IntoIterator<Item = LabelRequirement>>(requirements: I) -> Self {
        Self {
            requirements: requirements.into_iter().collect(),
        }
    }
}

impl From<Expression> for LabelRequirement {
    fn from(expression: Expression) -> Self {
        match expression {
            Expression::Equal(key, value) => Self::Equal(key, value),
            Expression::NotEqual(key, value) => Self::NotEqual(key, value),
            Expression::In(key, values) => Self::In(key, values),
            Expression::NotIn(key, values) => Self::NotIn(key, values),
            Expression::Exists(key) => Self::Exists(key),
            Expression::DoesNotExist(key) => Self::DoesNotExist(key),
        }
    }
}
use kube_core::{Expression, Selector};
use proptest::prelude::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

fn set(values: &[&str]) -> BTreeSet<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

fn refusal(err: Error) -> (usize, String) {
    match err {
        Error::InvalidSelector {
            position, reason, ..
        } => (position, reason),
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
        // apimachinery reads `()` as the one empty value.
        ("a in ()", Expression::In("a".into(), set(&[""]))),
        ("a notin (  )", Expression::NotIn("a".into(), set(&[""]))),
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
            Selector::from(expected.clone()),
            "{input:?}"
        );
        assert_eq!(
            LabelSelector::parse(input).unwrap().requirements(),
            [LabelRequirement::from(expected)],
            "{input:?}"
        );
    }
}

#[test]
fn integer_comparisons_parse_only_into_a_label_selector() {
    let selector = LabelSelector::parse("replicas>2, age < 10").unwrap();
    assert_eq!(
        selector.requirements(),
        [
            LabelRequirement::GreaterThan("replicas".into(), 2),
            LabelRequirement::LessThan("age".into(), 10),
        ]
    );
    assert_eq!(selector.to_selector(), None);
    assert_eq!(selector.to_string(), "replicas>2,age<10");
    let plain = LabelSelector::parse("a=b,!c").unwrap();
    assert_eq!(plain.to_selector(), Some(parse_selector("a=b,!c").unwrap()));
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
    for input in ["", "   ", "\t\r\n"] {
        let selector = parse_selector(input).unwrap();
        assert!(selector.selects_all());
        assert!(selector_matches(&selector, None));
        assert!(selector_matches(&selector, Some(&labels(&[("a", "b")]))));
        assert!(LabelSelector::parse(input).unwrap().selects_all());
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
        ("x in (a b)", 8),
        ("x,,y", 2),
        ("=a", 0),
        ("x=a b", 4),
        ("-x=a", 0),
        ("x=-a", 2),
        ("x in (b,-a)", 8),
        ("/x=a", 0),
        ("Example.com/x=a", 0),
    ];
    for (input, position) in cases {
        let (at, reason) = refusal(parse_selector(input).expect_err(input));
        assert_eq!(at, position, "{input:?}: {reason}");
    }
}

/// Messages taken from apimachinery's `labels.Parse` (selector.go and its tests): what
/// kube-apiserver answers a bad `labelSelector` with.
#[test]
fn malformed_selectors_get_the_message_labels_parse_gives() {
    let name_rule = "must consist of alphanumeric characters, '-', '_' or '.', and must start \
                     and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or \
                     '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let value_rule = "a valid label must be an empty string or consist of alphanumeric \
                      characters, '-', '_' or '.', and must start and end with an alphanumeric \
                      character (e.g. 'MyValue', or 'my_value', or '12345', regex used for \
                      validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    let prefix_rule = "prefix part a lowercase RFC 1123 subdomain must consist of lower case \
                       alphanumeric characters, '-' or '.', and must start and end with an \
                       alphanumeric character (e.g. 'example.com', regex used for validation is \
                       '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let cases = [
        (
            "a in (",
            "unable to parse requirement: found '', expected: ',', ')' or identifier".to_owned(),
        ),
        (
            "app in web",
            "unable to parse requirement: found 'web' expected: '('".to_owned(),
        ),
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
                .to_owned(),
        ),
        (
            "app=(x",
            "unable to parse requirement: found '(', expected: identifier".to_owned(),
        ),
        (
            "=x",
            "found '=', expected: !, identifier, or 'end of string'".to_owned(),
        ),
        ("a,", "found '', expected: identifier after ','".to_owned()),
        (
            "a in (x y)",
            "unable to parse requirement: found 'y', expected: ',' or ')'".to_owned(),
        ),
        (
            "a in (x,=)",
            "unable to parse requirement: found '=', expected: ',', or identifier".to_owned(),
        ),
        (
            "a=b c",
            "found 'c', expected: ',' or 'end of string'".to_owned(),
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier".to_owned(),
        ),
        (
            "a>x",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' \
             operators, the value must be an integer"
                .to_owned(),
        ),
        (
            "a<",
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' \
             operators, the value must be an integer"
                .to_owned(),
        ),
        (
            "a>x_",
            format!(
                "unable to parse requirement: [values[0]: Invalid value: \"x_\": for 'Gt', 'Lt' \
                 operators, the value must be an integer, values[0][a]: Invalid value: \"x_\": \
                 {value_rule}]"
            ),
        ),
        (
            "-a=b",
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"-a\": name part {name_rule}"
            ),
        ),
        (
            "a/b/c",
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name \
                 {name_rule} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')"
            ),
        ),
        (
            "/",
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"/\": prefix part must be \
                 non-empty; name part must be non-empty; name part {name_rule}"
            ),
        ),
        (
            "a.-b/c",
            format!("unable to parse requirement: <nil>: Invalid value: \"a.-b/c\": {prefix_rule}"),
        ),
        (
            "a=-b",
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"-b\": {value_rule}"
            ),
        ),
        // Go's `sets.String.List` sorts the values before they are checked.
        (
            "a in (z,-b)",
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"-b\": {value_rule}"
            ),
        ),
        (
            "a in (-c,-b)",
            format!(
                "unable to parse requirement: [values[0][a]: Invalid value: \"-b\": {value_rule}, \
                 values[1][a]: Invalid value: \"-c\": {value_rule}]"
            ),
        ),
        (
            "a=b\u{1}",
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"b\\x01\": {value_rule}"
            ),
        ),
        (
            &format!("a={}", "b".repeat(64)),
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"{}\": must be no \
                 more than 63 characters",
                "b".repeat(64)
            ),
        ),
    ];
    for (input, message) in cases {
        let (_, reason) = refusal(LabelSelector::parse(input).expect_err(input));
        assert_eq!(reason, message, "{input:?}");
    }
}

#[test]
fn an_error_names_the_selector_the_offset_and_the_reason() {
    let err = parse_selector("app in (web").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid label selector \"app in (web\" at byte 11: unable to parse requirement: found \
         '', expected: ',' or ')'"
    );
    let err = parse_selector("replicas>3").unwrap_err();
    assert!(err.to_string().contains("not supported"), "{err}");
}

/// Go's lexer reads bytes: a NUL byte ends the input where a token would start, and ends a
/// token (and is skipped) right after one.
#[test]
fn a_nul_byte_is_read_as_go_reads_it() {
    let ended = LabelSelector::parse("a=b, \0c=-d").expect_err("nothing after ','");
    assert_eq!(
        refusal(ended),
        (5, "found '', expected: identifier after ','".to_owned())
    );
    assert_eq!(
        LabelSelector::parse("a=b,\0c=d").unwrap(),
        LabelSelector::parse("a=b,c=d").unwrap()
    );
    assert_eq!(
        LabelSelector::parse("a=b \0 c=-d").unwrap(),
        LabelSelector::parse("a=b").unwrap()
    );
    assert_eq!(
        LabelSelector::parse("a!=\0b").unwrap(),
        LabelSelector::parse("a!=b").unwrap()
    );
    let split = LabelSelector::parse("a\0b").expect_err("two identifiers");
    assert_eq!(
        refusal(split).1,
        "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
    );
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
        ("x in ()", vec![("x", "")]),
        ("x>1", vec![("x", "2")]),
        ("x<1", vec![("x", "-3")]),
    ];
    for (input, pairs) in matching {
        let labelled = labels(&pairs);
        assert!(
            LabelSelector::parse(input).unwrap().matches(&labelled),
            "{input:?} should match {pairs:?}"
        );
        if let Ok(selector) = parse_selector(input) {
            assert!(selector_matches(&selector, Some(&labelled)), "{input:?}");
        }
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
        ("x notin ()", vec![("x", "")]),
        ("x>1", vec![]),
        ("x>1", vec![("x", "1")]),
        ("x>1", vec![("x", "a")]),
        ("x<1", vec![("x", "1")]),
    ];
    for (input, pairs) in not_matching {
        let labelled = labels(&pairs);
        assert!(
            !LabelSelector::parse(input).unwrap().matches(&labelled),
            "{input:?} should not match {pairs:?}"
        );
        if let Ok(selector) = parse_selector(input) {
            assert!(!selector_matches(&selector, Some(&labelled)), "{input:?}");
        }
    }
    let selector = parse_selector("x=y").unwrap();
    assert!(
        !selector_matches(&selector, None),
        "an unlabelled object has no x"
    );
}

/// Ported from the fake API server's checks of every operator on one object.
#[test]
fn every_operator_matches_as_kubernetes_does() {
    let object = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
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
        ("in in (in)", false),
        ("", true),
    ];
    for (input, expected) in cases {
        let selector = LabelSelector::parse(input).expect(input);
        assert_eq!(selector.matches(&object), expected, "{input:?}");
        let looked_up = selector.matches_with(|key| object.get(key).map(String::as_str));
        assert_eq!(looked_up, expected, "{input:?}");
    }
}

fn label_text() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9_.-]{0,6}[a-z0-9])?"
}

fn dns_label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?"
}

fn requirement() -> impl Strategy<Value = LabelRequirement> {
    let key = prop_oneof![
        label_text(),
        (dns_label(), label_text()).prop_map(|(p, n)| format!("{p}.io/{n}"))
    ];
    let value = prop_oneof![Just(String::new()), label_text()];
    let values = proptest::collection::btree_set(label_text(), 1..4);
    (key, value, values, 0..8u8, 0..i64::MAX).prop_map(|(key, value, values, op, n)| match op {
        0 => LabelRequirement::Equal(key, value),
        1 => LabelRequirement::NotEqual(key, value),
        2 => LabelRequirement::In(key, values),
        3 => LabelRequirement::NotIn(key, values),
        4 => LabelRequirement::Exists(key),
        5 => LabelRequirement::DoesNotExist(key),
        6 => LabelRequirement::GreaterThan(key, n),
        _ => LabelRequirement::LessThan(key, n),
    })
}

proptest! {
    /// kube-core renders a selector as a string; parsing that string gives the selector back.
    #[test]
    fn rendered_selectors_parse_back_to_themselves(
        requirements in proptest::collection::vec(requirement(), 0..5),
    ) {
        let selector: LabelSelector = requirements.into_iter().collect();
        let rendered = selector.to_string();
        let parsed = LabelSelector::parse(&rendered);
        prop_assert_eq!(parsed.as_ref(), Ok(&selector), "{}", rendered);
        if let Some(kube) = selector.to_selector() {
            prop_assert_eq!(kube.to_string(), rendered.as_str());
            prop_assert_eq!(parse_selector(&rendered), Ok(kube));
        }
    }

    /// The parser never panics, whatever it is fed (multi-byte characters and NUL included).
    #[test]
    fn arbitrary_input_never_panics(input in "[a-z0-9=!,() <>in/.\u{e9}\u{3000}\0-]{0,24}") {
        let _ = parse_selector(&input);
        let _ = LabelSelector::parse(&input);
    }
}
