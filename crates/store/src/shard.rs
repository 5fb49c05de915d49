//! Shards of a collection by the hash of one metadata field: the selector of Kubernetes'
//! server-side sharded list and watch (KEP-5866, the `ShardedListAndWatch` feature gate).
//!
//! A shard is one or more ranges over the 64-bit FNV-1a hash of an object's
//! `metadata.uid` (or `metadata.namespace`). kube-apiserver takes it as the `shardSelector`
//! parameter of a list or watch, in the form
//! `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`, several
//! joined by `||`, and returns only the objects whose hash falls in a range. [`Shard`] parses
//! that form with apimachinery's rules and error texts (`k8s.io/apiserver/pkg/sharding.Parse`),
//! prints it as apimachinery's `Selector.String` does (which is what a list response echoes in
//! `metadata.shardInfo.selector`), and matches objects with the server's hash, so a client can
//! apply the very same filter when a server does not.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use crate::{Error, Object, Result};

/// The end of the hash space, 2^64: the exclusive upper bound of the last range.
const HASH_SPACE_END: u128 = 1 << 64;

/// The metadata field whose hash places an object in a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ShardKey {
    /// `metadata.uid`: objects spread evenly, the default.
    #[default]
    Uid,
    /// `metadata.namespace`: every object of a namespace in one shard (cluster-scoped objects,
    /// whose namespace is empty, all in the shard of the empty string).
    Namespace,
}

impl ShardKey {
    /// The field path as the selector writes it.
    fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    /// Where `object` falls in the hash space: the 64-bit FNV-1a hash of this field (empty
    /// when unset), as kube-apiserver computes it. Work keys placed by it are owned by the
    /// replica whose shard holds the object.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_store::{Shard, ShardKey};
    ///
    /// let mut pod = Pod::default();
    /// pod.metadata.uid = Some("6a0c1e02-4d0c-4b5f-9a5e-0d3f1c2b7a10".into());
    /// let hash = ShardKey::Uid.hash(&pod);
    /// let first_half = Shard::of(0, 2)?;
    /// assert_eq!(first_half.contains(&pod), hash < 1 << 63);
    /// # Ok::<(), kinformer_store::Error>(())
    /// ```
    pub fn hash(self, object: &(impl Object + ?Sized)) -> u64 {
        let value = match self {
            Self::Uid => object.uid(),
            Self::Namespace => object.namespace(),
        };
        fnv1a_64(value.unwrap_or_default())
    }
}

/// A shard of a collection: the objects whose FNV-1a hash of one metadata field falls in one
/// of a set of ranges (start inclusive, end exclusive, within `0..2^64`).
///
/// `Display` writes the `shardSelector` kube-apiserver reads and echoes; `FromStr` reads it.
///
/// # Example
///
/// ```
/// use kinformer_store::Shard;
///
/// let second_of_four = Shard::of(1, 4)?;
/// assert_eq!(
///     second_of_four.to_string(),
///     "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')",
/// );
/// assert_eq!(second_of_four.to_string().parse::<Shard>()?, second_of_four);
/// # Ok::<(), kinformer_store::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shard {
    key: ShardKey,
    ranges: Vec<Range<u128>>,
}

impl Shard {
    /// Shard `index` of `count` equal shards by UID: the hash space cut into `count` ranges,
    /// `[index * 2^64 / count, (index + 1) * 2^64 / count)` rounded down. The `count` shards
    /// cover every object exactly once.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidShard`] when `count` is 0 or `index` is not below it.
    pub fn of(index: u64, count: u64) -> Result<Self> {
        if index >= count {
            return Err(invalid(
                format!("shard {index} of {count}"),
                "the index must be below the count, and the count above 0",
            ));
        }
        let bound = |i: u64| u128::from(i) * HASH_SPACE_END / u128::from(count);
        Ok(Self {
            key: ShardKey::Uid,
            ranges: std::iter::once(bound(index)..bound(index + 1)).collect(),
        })
    }

    /// The objects whose hash of `key` falls in one of `ranges`, in the order given.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidShard`] when there is no range, or a range is empty or ends past 2^64.
    pub fn ranges(key: ShardKey, ranges: impl IntoIterator<Item = Range<u128>>) -> Result<Self> {
        let ranges: Vec<_> = ranges.into_iter().collect();
        let shard = Self { key, ranges };
        if shard.ranges.is_empty() {
            return Err(invalid(String::new(), "a shard needs at least one range"));
        }
        for range in &shard.ranges {
            if range.start >= range.end || range.end > HASH_SPACE_END {
                return Err(invalid(
                    shard.to_string(),
                    format!(
                        "range {:#x}..{:#x} is empty or ends past 2^64",
                        range.start, range.end
                    ),
                ));
            }
        }
        Ok(shard)
    }

    /// The same ranges over another field.
    #[must_use]
    pub fn keyed_by(mut self, key: ShardKey) -> Self {
        self.key = key;
        self
    }

    /// The field whose hash places an object.
    pub fn key(&self) -> ShardKey {
        self.key
    }

    /// The hash ranges, start inclusive, end exclusive.
    pub fn hash_ranges(&self) -> &[Range<u128>] {
        &self.ranges
    }

    /// Whether `object` is in this shard: the FNV-1a hash of its key field (empty when
    /// unset) in one of the ranges, as kube-apiserver decides it.
    pub fn contains(&self, object: &(impl Object + ?Sized)) -> bool {
        self.contains_fields(object.uid(), object.namespace())
    }

    /// Whether an object with this `uid` and `namespace` is in this shard, for metadata held
    /// apart from an [`Object`]: [`contains`](Self::contains) on the fields themselves.
    pub fn contains_fields(&self, uid: Option<&str>, namespace: Option<&str>) -> bool {
        let value = match self.key {
            ShardKey::Uid => uid,
            ShardKey::Namespace => namespace,
        };
        let hash = u128::from(fnv1a_64(value.unwrap_or_default()));
        self.ranges.iter().any(|range| range.contains(&hash))
    }
}

/// The 64-bit FNV-1a hash of `value`'s bytes, Go's `hash/fnv.New64a`.
fn fnv1a_64(value: &str) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    value.bytes().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

fn invalid(selector: String, reason: impl Into<String>) -> Error {
    Error::InvalidShard {
        selector,
        reason: reason.into(),
    }
}

/// A bound as the selector writes it: `0x` and 16 lowercase hex digits, or 2^64.
fn hex(bound: u128) -> String {
    format!("0x{bound:016x}")
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.key.path(),
                hex(range.start),
                hex(range.end)
            )?;
        }
        Ok(())
    }
}

impl FromStr for Shard {
    type Err = Error;

    /// Reads a `shardSelector`: `shardRange(<field>, '<start>', '<end>')` calls joined by `||`
    /// (parentheses allowed), with kube-apiserver's checks and messages: the field is
    /// `object.metadata.uid` or `object.metadata.namespace`, the same in every range; each
    /// bound is a quoted `0x` and 16 lowercase hex digits, or `0x10000000000000000`; each
    /// start is below its end.
    fn from_str(input: &str) -> Result<Self> {
        let fail = |reason: String| invalid(input.to_owned(), reason);
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err(fail(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
                    .to_owned(),
            ));
        }
        let mut parser = Parser {
            input: trimmed.as_bytes(),
            at: 0,
        };
        let calls = parser.or().map_err(&fail)?;
        parser.skip_space();
        if parser.at < parser.input.len() {
            return Err(fail(format!(
                "unexpected {:?} at byte {}; expected || or the end",
                char::from(parser.input[parser.at]),
                parser.at
            )));
        }
        let key = calls[0].0;
        if let Some((other, _)) = calls.iter().find(|(other, _)| *other != key) {
            return Err(fail(format!(
                "all shard ranges must use the same field, got {:?} and {:?}",
                key.path(),
                other.path()
            )));
        }
        Ok(Self {
            key,
            ranges: calls.into_iter().map(|(_, range)| range).collect(),
        })
    }
}

/// A recursive-descent reader of the selector's CEL subset.
struct Parser<'a> {
    input: &'a [u8],
    at: usize,
}

type Call = (ShardKey, Range<u128>);

impl Parser<'_> {
    /// Skips CEL's whitespace and `//` comments.
    fn skip_space(&mut self) {
        loop {
            while self.input.get(self.at).is_some_and(u8::is_ascii_whitespace) {
                self.at += 1;
            }
            if !self.input[self.at..].starts_with(b"//") {
                return;
            }
            while self.input.get(self.at).is_some_and(|&byte| byte != b'\n') {
                self.at += 1;
            }
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        let found = self.input[self.at..].starts_with(token.as_bytes());
        if found {
            self.at += token.len();
        }
        found
    }

    fn expect(&mut self, token: &str) -> std::result::Result<(), String> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(format!("expected {token:?} at byte {}", self.at))
        }
    }

    fn or(&mut self) -> std::result::Result<Vec<Call>, String> {
        let mut calls = self.term()?;
        while self.eat("||") {
            calls.extend(self.term()?);
        }
        Ok(calls)
    }

    fn term(&mut self) -> std::result::Result<Vec<Call>, String> {
        if self.eat("(") {
            let calls = self.or()?;
            self.expect(")")?;
            return Ok(calls);
        }
        let name = self.path()?;
        if !self.eat("(") {
            return Err(format!(
                "unexpected expression {name:?}; expected shardRange() call or || operator"
            ));
        }
        if name != "shardRange" {
            return Err(format!(
                "unsupported function {name:?}; only shardRange() and || are allowed"
            ));
        }
        let mut arguments = Vec::new();
        if !self.eat(")") {
            loop {
                arguments.push(self.argument()?);
                if self.eat(")") {
                    break;
                }
                if !self.eat(",") {
                    return Err(format!("expected \",\" or \")\" at byte {}", self.at));
                }
            }
        }
        let [field, start, end] = <[Argument; 3]>::try_from(arguments).map_err(|arguments| {
            format!(
                "shardRange() requires exactly 3 arguments, got {}",
                arguments.len()
            )
        })?;
        let Argument::Path(field) = field else {
            return Err(
                "shardRange() first argument: expected field path (e.g. object.metadata.uid)"
                    .to_owned(),
            );
        };
        let key = match field.as_str() {
            "object.metadata.uid" => ShardKey::Uid,
            "object.metadata.namespace" => ShardKey::Namespace,
            _ => {
                return Err(format!(
                    "unsupported field path {field:?}; supported: object.metadata.uid, \
                     object.metadata.namespace"
                ));
            }
        };
        let start = bound(start, "hexStart")?;
        let end = bound(end, "hexEnd")?;
        if start >= end {
            return Err(format!(
                "shard range start {} must be less than end {}",
                hex(start),
                hex(end)
            ));
        }
        Ok(vec![(key, start..end)])
    }

    fn argument(&mut self) -> std::result::Result<Argument, String> {
        self.skip_space();
        let rest = &self.input[self.at..];
        // CEL's string prefixes: `r` raw, `b` bytes, or both in either order, in either case.
        let lower = |i: usize| rest.get(i).map(u8::to_ascii_lowercase);
        let (prefix, raw, bytes) = match (lower(0), lower(1), lower(2)) {
            (Some(b'\'' | b'"'), _, _) => (0, false, false),
            (Some(b'r'), Some(b'\'' | b'"'), _) => (1, true, false),
            (Some(b'b'), Some(b'\'' | b'"'), _) => (1, false, true),
            (Some(b'r'), Some(b'b'), Some(b'\'' | b'"'))
            | (Some(b'b'), Some(b'r'), Some(b'\'' | b'"')) => (2, true, true),
            _ => return self.path().map(Argument::Path),
        };
        let start = self.at;
        self.at += prefix;
        let text = self
            .string_body(raw)
            .map_err(|reason| format!("{reason} at byte {start}"))?;
        Ok(if bytes {
            Argument::Bytes
        } else {
            Argument::Literal(text)
        })
    }

    /// The text of a quoted CEL string starting at the quote, its escapes decoded unless
    /// `raw`: single or triple quotes, `'` or `"`.
    fn string_body(&mut self, raw: bool) -> std::result::Result<String, String> {
        let quote = self.input[self.at];
        let triple = self.input[self.at..].starts_with(&[quote; 3]);
        let delimiter: &[u8] = if triple { &[quote; 3] } else { &[quote] };
        self.at += delimiter.len();
        let mut text = Vec::new();
        loop {
            let Some(&byte) = self.input.get(self.at) else {
                return Err("unterminated string".to_owned());
            };
            if self.input[self.at..].starts_with(delimiter) {
                self.at += delimiter.len();
                return String::from_utf8(text)
                    .map_err(|_| "a string that is not UTF-8".to_owned());
            }
            if !triple && (byte == b'\n' || byte == b'\r') {
                return Err("unterminated string".to_owned());
            }
            self.at += 1;
            if byte != b'\\' || raw {
                text.push(byte);
                continue;
            }
            let escaped = *self.input.get(self.at).ok_or("unterminated string")?;
            self.at += 1;
            let simple = match escaped {
                b'a' => Some(0x07),
                b'b' => Some(0x08),
                b'f' => Some(0x0c),
                b'n' => Some(b'\n'),
                b'r' => Some(b'\r'),
                b't' => Some(b'\t'),
                b'v' => Some(0x0b),
                b'\\' | b'?' | b'"' | b'\'' | b'`' => Some(escaped),
                _ => None,
            };
            if let Some(decoded) = simple {
                text.push(decoded);
                continue;
            }
            let (digits, radix) = match escaped {
                b'x' | b'X' => (2, 16),
                b'u' => (4, 16),
                b'U' => (8, 16),
                b'0'..=b'3' => {
                    self.at -= 1;
                    (3, 8)
                }
                _ => return Err(format!("invalid escape sequence \\{}", char::from(escaped))),
            };
            let code = self
                .input
                .get(self.at..self.at + digits)
                .and_then(|digits| std::str::from_utf8(digits).ok())
                .and_then(|digits| u32::from_str_radix(digits, radix).ok())
                .ok_or_else(|| format!("invalid escape sequence \\{}", char::from(escaped)))?;
            self.at += digits;
            let decoded = char::from_u32(code)
                .ok_or_else(|| format!("invalid code point {code:#x} in an escape sequence"))?;
            text.extend_from_slice(decoded.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }

    /// `ident(.ident)*`.
    fn path(&mut self) -> std::result::Result<String, String> {
        self.skip_space();
        let mut path = String::new();
        loop {
            let start = self.at;
            while self
                .input
                .get(self.at)
                .is_some_and(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
            {
                self.at += 1;
            }
            if self.at == start || self.input[start].is_ascii_digit() {
                return Err(format!(
                    "expected shardRange() call or field path at byte {start}"
                ));
            }
            path.push_str(&String::from_utf8_lossy(&self.input[start..self.at]));
            self.skip_space();
            if self.input.get(self.at) != Some(&b'.') {
                break;
            }
            self.at += 1;
            self.skip_space();
            path.push('.');
        }
        Ok(path)
    }
}

enum Argument {
    Path(String),
    Literal(String),
    /// A bytes literal (`b'...'`), which no bound may be.
    Bytes,
}

/// A bound's literal, checked as apimachinery checks it.
fn bound(argument: Argument, name: &str) -> std::result::Result<u128, String> {
    let literal = match argument {
        Argument::Literal(literal) => literal,
        Argument::Bytes => return Err(format!("{name} must be a string literal, got []uint8")),
        Argument::Path(_) => {
            return Err(format!(
                "{name} must be a string literal (e.g. '0xff'), got a field path"
            ));
        }
    };
    let Some(digits) = literal.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {literal:?}"));
    };
    if digits.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if digits.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {digits:?}",
            digits.len()
        ));
    }
    if let Some(bad) = digits
        .chars()
        .find(|c| !c.is_ascii_digit() && !('a'..='f').contains(c))
    {
        return Err(format!(
            "{name}: invalid hex character {:?} in {literal:?}",
            bad.to_string()
        ));
    }
    if digits.len() == 17 {
        if literal != "0x10000000000000000" {
            return Err(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {literal:?}"
            ));
        }
        return Ok(HASH_SPACE_END);
    }
    if digits.len() != 16 {
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {literal:?} (did you mean \
             \"0x{digits:0>16}\"?)"
        ));
    }
    u128::from_str_radix(digits, 16).map_err(|error| format!("{name}: {error}"))
}

#[cfg(test)]
mod tests;
