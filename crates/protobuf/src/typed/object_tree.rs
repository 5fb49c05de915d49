//! The JSON of a `FieldsV1` read straight into a `serde_json::Value`.
//!
//! structured-merge-diff writes a field set as objects of objects: `{"f:metadata":{"f:labels":
//! {".":{},"f:app":{}}}}`, with list keys as escaped JSON in the key (`"k:{\"name\":\"web\"}"`).
//! Every managedFields entry of every object is one, so its parse is a fixed share of decoding
//! any object. This parser takes only that shape: it checks the document's UTF-8 once rather
//! than key by key, and inserts each entry straight into its object's map, with no list of
//! entries to sort first (structured-merge-diff writes keys in order, which a small map's insert
//! handles best). Anything else (arrays, numbers, `\u` escapes, nesting deeper than serde_json
//! allows) is handed back for serde_json to read, so the result is always the `Value`
//! serde_json would give.

use serde_json::{Map, Value};

/// serde_json's recursion limit: deeper documents are serde_json's to refuse.
const MAX_DEPTH: usize = 128;

/// `raw` as a tree of objects, `None` when it is anything else (or not JSON at all).
pub(crate) fn parse(raw: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(raw).ok()?;
    let mut parser = Parser { text, raw, at: 0 };
    parser.whitespace();
    let tree = parser.object(0)?;
    parser.whitespace();
    (parser.at == raw.len()).then_some(Value::Object(tree))
}

struct Parser<'a> {
    /// The document, valid UTF-8.
    text: &'a str,
    /// `text`'s bytes.
    raw: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.raw.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.raw.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    fn object(&mut self, depth: usize) -> Option<Map<String, Value>> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        self.whitespace();
        if self.eat(b'}').is_some() {
            return Some(Map::new());
        }
        let mut map = Map::new();
        loop {
            self.whitespace();
            let key = self.string()?;
            self.whitespace();
            self.eat(b':')?;
            self.whitespace();
            let value = self.object(depth + 1)?;
            // The last of equal keys wins, as with serde_json.
            map.insert(key, Value::Object(value));
            self.whitespace();
            match self.raw.get(self.at)? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(map);
                }
                _ => return None,
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let start = self.at;
        loop {
            match *self.raw.get(self.at)? {
                b'"' => {
                    // Both ends sit next to a quote, so on character boundaries.
                    let text = self.text.get(start..self.at)?;
                    self.at += 1;
                    return Some(text.to_owned());
                }
                b'\\' => return self.escaped(start),
                0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
    }

    /// The rest of a string from `start` that holds escapes.
    fn escaped(&mut self, start: usize) -> Option<String> {
        let mut text = Vec::with_capacity(self.at - start + 16);
        text.extend_from_slice(&self.raw[start..self.at]);
        loop {
            match *self.raw.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return String::from_utf8(text).ok();
                }
                b'\\' => {
                    let unescaped = match *self.raw.get(self.at + 1)? {
                        byte @ (b'"' | b'\\' | b'/') => byte,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        // `\u` (and surrogate pairs) are serde_json's.
                        _ => return None,
                    };
                    text.push(unescaped);
                    self.at += 2;
                }
                0..=0x1f => return None,
                byte => {
                    text.push(byte);
                    self.at += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn serde(raw: &[u8]) -> Option<Value> {
        serde_json::from_slice(raw).ok()
    }

    #[test]
    fn a_managed_fields_set_reads_as_serde_json_reads_it() {
        let raw = br#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{}}}}}"#;
        let tree = parse(raw).expect("a tree of objects");
        assert_eq!(Some(&tree), serde(raw).as_ref());
        assert!(tree["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["f:image"].is_object());
    }

    #[test]
    fn anything_but_objects_of_objects_is_left_to_serde_json() {
        for raw in [
            &b"null"[..],
            b"[]",
            b"{\"a\":1}",
            b"{\"a\":{}} x",
            b"{\"a\":{},}",
            b"{\"\\u00e9\":{}}",
            b"{\"a\x01\":{}}",
            b"{\"a\":{}",
            b"{\"\xff\":{}}",
            b"",
        ] {
            assert_eq!(parse(raw), None, "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn nesting_past_serde_jsons_limit_is_refused_not_overflowed() {
        let deep = format!("{}{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
        assert_eq!(parse(deep.as_bytes()), None);
        let fine = format!("{}{{}}{}", "{\"a\":".repeat(100), "}".repeat(100));
        assert_eq!(parse(fine.as_bytes()), serde(fine.as_bytes()));
    }

    /// A tree of objects as structured-merge-diff might write it, keys in any order, with
    /// duplicates and escapes.
    fn tree() -> impl Strategy<Value = String> {
        let key = "[a-c:.\"\\\\/\n\té{}]{0,6}";
        let leaf = Just("{}".to_owned());
        leaf.prop_recursive(4, 64, 5, move |inner| {
            prop::collection::vec((key, inner), 0..5).prop_map(|entries| {
                let body: Vec<String> = entries
                    .iter()
                    .map(|(key, value)| {
                        let key = serde_json::to_string(key).expect("a string");
                        format!("{key} :\n{value}")
                    })
                    .collect();
                format!("{{ {} }}", body.join(" , "))
            })
        })
    }

    proptest! {
        #[test]
        fn every_tree_of_objects_reads_as_serde_json_reads_it(raw in tree()) {
            let tree = parse(raw.as_bytes());
            prop_assert!(tree.is_some(), "{raw}");
            prop_assert_eq!(tree, serde(raw.as_bytes()));
        }

        #[test]
        fn any_bytes_read_as_serde_json_reads_them_or_are_left_to_it(raw in prop::collection::vec(
            prop::sample::select(b"{}\":,\\ a1[]un".to_vec()), 0..40,
        )) {
            if let Some(tree) = parse(&raw) {
                prop_assert_eq!(Some(tree), serde(&raw));
            }
        }
    }
}
